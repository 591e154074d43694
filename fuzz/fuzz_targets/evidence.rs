//! Evidence checking: the input is JSON `[items, receipts, payload_schema, payload]`. Never a
//! panic, and never an `observed` or `cited` item upheld without a successful receipt, nor a
//! field upheld whose value disagrees with what the binding compares it to.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vak_host::capabilities::Receipt;
use vak_host::evidence::bodies::Bodies;
use vak_host::evidence::{Subject, Support, check};
use vak_host::record::EvidenceRecord;
use vak_host::registry::Registry;

type Input = (
    Vec<EvidenceRecord>,
    Vec<Receipt>,
    Option<String>,
    Option<serde_json::Value>,
);

fuzz_target!(|data: &[u8]| {
    let Ok((items, receipts, schema, payload)) = serde_json::from_slice::<Input>(data) else {
        return;
    };
    let registry = Registry::builtin();
    let bodies = Bodies::none();
    let subject = Subject {
        schema_id: schema.as_deref(),
        payload: payload.as_ref(),
        registry: &registry,
        bodies: &bodies,
    };
    let Ok(checked) = check(&items, &receipts, &subject) else {
        // Refused as a whole: only past the documented caps.
        assert!(
            items.len() > vak_host::evidence::MAX_EVIDENCE_ITEMS
                || items
                    .iter()
                    .map(|i| i.supports.len() + i.derived_from.len())
                    .sum::<usize>()
                    > vak_host::evidence::MAX_REFERENCES
        );
        return;
    };
    assert_eq!(checked.len(), items.len());
    for c in &checked {
        if c.support != Support::Supported {
            assert!(c.upholds.is_empty(), "only a supported item upholds a field");
            continue;
        }
        assert!(c.diagnostics.is_empty());
        if c.item.kind == "observed" || c.item.kind == "cited" {
            let id = c
                .item
                .receipt
                .as_deref()
                .expect("an upheld item names a receipt");
            assert!(
                receipts.iter().any(|r| r.id == id && r.ok),
                "upheld {:?} without a successful receipt",
                c.item.id
            );
            // Without a registered schema no field can be upheld.
            if schema.as_deref().and_then(|s| registry.get(s)).is_none() {
                assert!(c.item.supports.is_empty());
            }
        }
        for pointer in &c.item.supports {
            let p = payload.as_ref().expect("an upheld pointer needs a payload");
            assert!(pointer.is_empty() || p.pointer(pointer).is_some());
        }
    }
    // `synthesized` is never upgraded.
    for (item, c) in items.iter().zip(&checked) {
        if item.kind == "synthesized" {
            assert_eq!(c.support, Support::Synthesized);
        }
    }
});
