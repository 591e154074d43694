//! Evidence checks: every evidence item a tool returns is held against the receipts the host
//! issued in this call. The tool's own items are kept as returned (in the result); the record's
//! `evidence` list carries the host's verdict on each, with a diagnostic where it is not upheld.
//!
//! - `observed` and `cited` need a receipt of this call for an effect that was carried out;
//!   `cited` needs one of a fetch (a capability that retrieves a source), and a claimed digest
//!   must equal the receipt's.
//! - Every pointer an item `supports` must point at something in the payload.
//! - `computed` must name the items it was derived from; it stands only if they all do.
//! - `synthesized` stays synthesized: it claims no outside support, and is never upgraded.

use crate::capabilities::{Capability, Receipt};
use crate::record::EvidenceRecord;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// The host's verdict on one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Support {
    /// Backed as its kind requires.
    Supported,
    /// Not backed; the diagnostic says why. It must not be presented as fact.
    Unsupported,
    /// The tool's own synthesis: neither supported nor refuted by the host.
    Synthesized,
}

/// An evidence item with the host's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckedEvidence {
    #[serde(flatten)]
    pub item: EvidenceRecord,
    pub support: Support,
    /// Why the item is unsupported (empty when it is not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnostics: Vec<String>,
}

/// Capabilities whose receipts record the retrieval of a source, and so can back `cited`.
fn retrieves_sources(c: Capability) -> bool {
    // `clock` observes and `workspace` reads the tool's own files: neither retrieves a source.
    // Fetching capabilities (http) join as they land.
    !matches!(
        c,
        Capability::Clock | Capability::Workspace | Capability::Log | Capability::Client
    )
}

/// Check `items` against the receipts of call `call_id` (`receipts` also holds those of its child
/// runs) and the payload the items point into.
pub fn check(
    items: &[EvidenceRecord],
    receipts: &[Receipt],
    call_id: &str,
    payload: Option<&serde_json::Value>,
) -> Vec<CheckedEvidence> {
    let by_id: HashMap<&str, &Receipt> = receipts.iter().map(|r| (r.id.as_str(), r)).collect();
    let mut seen = HashSet::new();
    let mut checked: Vec<CheckedEvidence> = items
        .iter()
        .map(|item| {
            let mut diagnostics = Vec::new();
            if !seen.insert(item.id.as_str()) {
                diagnostics.push(format!("the id {:?} is used by an earlier item", item.id));
            }
            for pointer in &item.supports {
                let found =
                    payload.is_some_and(|p| pointer.is_empty() || p.pointer(pointer).is_some());
                if !found {
                    diagnostics.push(format!("supports {pointer:?}, which is not in the payload"));
                }
            }
            let support = match item.kind.as_str() {
                "observed" | "cited" => {
                    check_receipt(item, &by_id, call_id, &mut diagnostics);
                    if diagnostics.is_empty() {
                        Support::Supported
                    } else {
                        Support::Unsupported
                    }
                }
                "computed" => {
                    if item.derived_from.is_empty() {
                        diagnostics.push(
                            "a computed item must name the items it was computed from".into(),
                        );
                    }
                    // Settled below, once every item has a first verdict.
                    if diagnostics.is_empty() {
                        Support::Supported
                    } else {
                        Support::Unsupported
                    }
                }
                "synthesized" => Support::Synthesized,
                other => {
                    diagnostics.push(format!("unknown evidence kind {other:?}"));
                    Support::Unsupported
                }
            };
            CheckedEvidence {
                item: item.clone(),
                support,
                diagnostics,
            }
        })
        .collect();
    settle_computed(&mut checked);
    checked
}

fn check_receipt(
    item: &EvidenceRecord,
    by_id: &HashMap<&str, &Receipt>,
    call_id: &str,
    diagnostics: &mut Vec<String>,
) {
    let Some(id) = item.receipt.as_deref() else {
        diagnostics.push(format!(
            "an {} item needs a host receipt; it names none",
            item.kind
        ));
        return;
    };
    let Some(receipt) = by_id.get(id) else {
        let other_call = id.rsplit_once('/').is_some_and(|(call, _)| call != call_id);
        diagnostics.push(if other_call {
            format!("receipt {id:?} belongs to another call; only this call's receipts count")
        } else {
            format!("no receipt {id:?} was issued in this call")
        });
        return;
    };
    if !receipt.ok {
        diagnostics.push(format!(
            "receipt {id:?} records a refused or failed effect, which supports nothing"
        ));
    }
    if item.kind == "cited" && !retrieves_sources(receipt.capability) {
        diagnostics.push(format!(
            "receipt {id:?} is a `{}` receipt; a citation needs the receipt of a fetched source",
            receipt.capability.name()
        ));
    }
    if receipt.capability == Capability::Client && receipt.operation == "sample" {
        // A completion from the client's model is synthesis however it is cited: it must not
        // reach the output as something the host observed.
        diagnostics.push(format!(
            "receipt {id:?} records a model's completion (sampling); cite it as `synthesized`, not `{}`",
            item.kind
        ));
    }
    if let Some(digest) = &item.digest
        && !digest.eq_ignore_ascii_case(&receipt.digest)
    {
        diagnostics.push(format!(
            "the claimed digest {digest} differs from the receipt's {}",
            receipt.digest
        ));
    }
}

/// A computed item stands only if every item it names exists, is not itself, and stands.
fn settle_computed(checked: &mut [CheckedEvidence]) {
    // Iterate to a fixed point: each round can only turn items unsupported, so it ends.
    loop {
        // A duplicate id is itself unsupported; references go to the first item with the id.
        let mut status: HashMap<String, Support> = HashMap::new();
        for c in checked.iter() {
            status.entry(c.item.id.clone()).or_insert(c.support);
        }
        let mut changed = false;
        for c in checked.iter_mut() {
            if c.item.kind != "computed" || c.support != Support::Supported {
                continue;
            }
            for source in &c.item.derived_from {
                let problem = if source == &c.item.id {
                    Some(format!("it is derived from itself ({source:?})"))
                } else {
                    match status.get(source) {
                        None => Some(format!(
                            "it is derived from {source:?}, which is not an item of this result"
                        )),
                        Some(Support::Unsupported) => Some(format!(
                            "it is derived from {source:?}, which is unsupported"
                        )),
                        Some(Support::Synthesized) => Some(format!(
                            "it is derived from {source:?}, which is synthesized"
                        )),
                        Some(Support::Supported) => None,
                    }
                };
                if let Some(p) = problem {
                    c.diagnostics.push(p);
                    c.support = Support::Unsupported;
                    changed = true;
                    break;
                }
            }
        }
        if !changed {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn receipt(id: &str, capability: Capability, ok: bool) -> Receipt {
        Receipt {
            id: id.into(),
            call_id: id.rsplit_once('/').unwrap().0.into(),
            capability,
            operation: "now".into(),
            request: json!({}),
            outcome: json!({}),
            ok,
            digest: "ab".repeat(32),
            at: String::new(),
        }
    }

    fn item(
        id: &str,
        kind: &str,
        receipt: Option<&str>,
        supports: &[&str],
        from: &[&str],
    ) -> EvidenceRecord {
        EvidenceRecord {
            id: id.into(),
            kind: kind.into(),
            supports: supports.iter().map(|s| s.to_string()).collect(),
            receipt: receipt.map(str::to_string),
            digest: None,
            derived_from: from.iter().map(|s| s.to_string()).collect(),
            note: String::new(),
        }
    }

    #[test]
    fn a_models_completion_backs_no_observation_or_citation() {
        let mut sample = receipt("c/1", Capability::Client, true);
        sample.operation = "sample".into();
        let mut elicit = receipt("c/2", Capability::Client, true);
        elicit.operation = "elicit".into();
        let items = [
            item("seen", "observed", Some("c/1"), &[], &[]),
            item("cited", "cited", Some("c/1"), &[], &[]),
            item("answer", "observed", Some("c/2"), &[], &[]),
        ];
        let checked = check(&items, &[sample, elicit], "c", None);
        assert_eq!(checked[0].support, Support::Unsupported);
        assert!(
            checked[0]
                .diagnostics
                .iter()
                .any(|d| d.contains("synthesized")),
            "{:?}",
            checked[0].diagnostics
        );
        assert_eq!(checked[1].support, Support::Unsupported);
        // The person's answer is something the host witnessed.
        assert_eq!(
            checked[2].support,
            Support::Supported,
            "{:?}",
            checked[2].diagnostics
        );
    }

    #[test]
    fn each_item_is_held_against_this_calls_receipts() {
        let receipts = [
            receipt("c/1", Capability::Clock, true),
            receipt("c/2", Capability::Clock, false),
        ];
        let payload = json!({"now": "x", "delta": 1});
        let mut wrong_digest = item("digest", "observed", Some("c/1"), &["/now"], &[]);
        wrong_digest.digest = Some("00".repeat(32));
        let items = [
            item("ok", "observed", Some("c/1"), &["/now"], &[]),
            item("fake", "observed", Some("c/9"), &[], &[]),
            item("other", "observed", Some("d/1"), &[], &[]),
            item("refused", "observed", Some("c/2"), &[], &[]),
            item("cite-clock", "cited", Some("c/1"), &[], &[]),
            item("dangling", "observed", Some("c/1"), &["/missing"], &[]),
            wrong_digest,
            item("sum", "computed", None, &["/delta"], &["ok"]),
            item("bad-sum", "computed", None, &[], &["fake"]),
            item("chain", "computed", None, &[], &["bad-sum"]),
            item("nothing", "computed", None, &[], &[]),
            item("opinion", "synthesized", None, &[], &[]),
            item("ok", "observed", Some("c/1"), &[], &[]),
        ];
        let checked = check(&items, &receipts, "c", Some(&payload));
        let verdicts: Vec<(&str, Support)> = checked
            .iter()
            .map(|c| (c.item.id.as_str(), c.support))
            .collect();
        use Support::*;
        assert_eq!(
            verdicts,
            [
                ("ok", Supported),
                ("fake", Unsupported),
                ("other", Unsupported),
                ("refused", Unsupported),
                ("cite-clock", Unsupported),
                ("dangling", Unsupported),
                ("digest", Unsupported),
                ("sum", Supported),
                ("bad-sum", Unsupported),
                ("chain", Unsupported),
                ("nothing", Unsupported),
                ("opinion", Synthesized),
                ("ok", Unsupported),
            ]
        );
        assert!(checked[2].diagnostics[0].contains("another call"));
        assert!(checked[6].diagnostics[0].contains("digest"));
        assert!(
            checked
                .iter()
                .filter(|c| c.support == Unsupported)
                .all(|c| !c.diagnostics.is_empty())
        );
        // The tool's items are carried unchanged.
        assert!(checked.iter().zip(&items).all(|(c, i)| &c.item == i));
    }
}
