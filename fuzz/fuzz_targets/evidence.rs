//! Evidence checking: the input is JSON `[items, receipts, call_id, payload]`. Never a panic,
//! and never an `observed` or `cited` item upheld without a successful receipt of this call.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vak_host::capabilities::Receipt;
use vak_host::evidence::{Support, check};
use vak_host::record::EvidenceRecord;

type Input = (
    Vec<EvidenceRecord>,
    Vec<Receipt>,
    String,
    Option<serde_json::Value>,
);

fuzz_target!(|data: &[u8]| {
    let Ok((items, receipts, call_id, payload)) = serde_json::from_slice::<Input>(data) else {
        return;
    };
    let checked = check(&items, &receipts, &call_id, payload.as_ref());
    assert_eq!(checked.len(), items.len());
    for c in &checked {
        if c.support != Support::Supported {
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
