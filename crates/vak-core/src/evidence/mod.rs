//! Evidence checks: every evidence item a tool returns is held against the receipts the host
//! issued in this call and against the payload's registered bindings
//! ([`crate::registry`]). The tool's own items are kept as returned (in the result); the
//! record's `evidence` list carries the host's verdict on each, with a diagnostic where it is
//! not upheld, and the payload fields each upheld item backs (`upholds`).
//!
//! - `observed` and `cited` need a receipt of this call (or one of its child runs) for an
//!   effect that was carried out; a claimed digest must equal the receipt's. Each pointer the
//!   item `supports` must name fields the payload's schema binds to receipts: the item upholds
//!   a field only when its kind and its receipt's capability and operation are among those the
//!   binding names **and** the value agrees with what the receipt recorded (equal to a receipt
//!   field, derived from it by a named host function, or text that occurs in the body the host
//!   fetched or read). Otherwise the item is `unsupported`, and the diagnostic names the
//!   pointer, the payload's value and the receipt's.
//! - `computed` must name the items it was derived from. Where the schema binds the field it
//!   supports to a computation the host knows, the host recomputes it from the payload and the
//!   item stands only if the values agree (its inputs may be the caller's: whether they are
//!   backed is a question for those fields); otherwise it stands only if every item it was
//!   derived from stands, and it backs no field.
//! - `synthesized` stays synthesized: it claims no outside support, and is never upgraded.
//!
//! Bounded: at most [`MAX_EVIDENCE_ITEMS`] items and [`MAX_REFERENCES`] pointers and sources
//! in all (more refuses the result at the `result` stage), at most [`MAX_BINDING_CHECKS`]
//! field comparisons per result; settling computed items is linear in the items and their
//! references.

mod bind;
pub mod bodies;

use crate::registry::{Backing, ItemKind, PayloadSchema, Registry};
use crate::returned::EvidenceRecord;
use crate::stage::{Stage, StageError};
use crate::types::{Capability, Receipt};
pub use bind::RELATIVE_TOLERANCE;
pub(crate) use bind::value_at;
use bodies::{Bodies, BodyMatcher};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// Most evidence items one result may carry; more refuses the result (`too_much_evidence`).
pub const MAX_EVIDENCE_ITEMS: usize = 4096;

/// Most `supports` pointers and `derived_from` sources over all items of one result.
pub const MAX_REFERENCES: usize = 65_536;

/// Most field comparisons (an item's pointer expanded to the bound fields under it) one
/// result's check makes; the items past it are unsupported with a diagnostic that says so.
pub const MAX_BINDING_CHECKS: usize = 65_536;

/// Most diagnostics kept for one item (then one line says how many more there were).
const MAX_DIAGNOSTICS: usize = 8;

/// Why a result's evidence is refused as a whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvidenceError {
    #[error("the result carries {actual} evidence items; at most {limit} are accepted")]
    TooManyItems { limit: usize, actual: usize },
    #[error(
        "the result's evidence items name {actual} pointers and sources in all; at most {limit} are accepted"
    )]
    TooManyReferences { limit: usize, actual: usize },
}

impl StageError for EvidenceError {
    fn stage(&self) -> Stage {
        Stage::Result
    }

    fn kind(&self) -> &'static str {
        "too_much_evidence"
    }

    fn details(&self) -> serde_json::Value {
        match self {
            EvidenceError::TooManyItems { limit, actual }
            | EvidenceError::TooManyReferences { limit, actual } => {
                serde_json::json!({ "limit": limit, "actual": actual })
            }
        }
    }
}

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
///
/// A record keeps each item once, in its result (`result.evidence`), and here only the verdict:
/// the `i`-th verdict is of the `i`-th item, which [`crate::record::CallRecord::link`] puts back
/// when a record is read. Records before version 2 held the item here too; read back, they keep
/// it (`stored_item`), so that they serialize, and verify, as they were signed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckedEvidence {
    /// The item as returned (in memory; not serialized: it is the result's).
    #[serde(skip)]
    pub item: EvidenceRecord,
    /// The item as a version-1 record held it beside its verdict.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub stored_item: Option<EvidenceRecord>,
    pub support: Support,
    /// Why the item is unsupported (empty when it is not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnostics: Vec<String>,
    /// The payload fields (concrete JSON Pointers) whose values this supported item backs: each
    /// agrees with its receipt, or with the host's own computation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upholds: Vec<String>,
    /// For a `computed` item the host recomputed: each field with the computation and inputs
    /// it was checked against (`/mean = mean(/values)`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recomputed: Vec<String>,
}

impl CheckedEvidence {
    /// The item with its verdict, as one JSON object (what a client is shown).
    pub fn joined(&self) -> serde_json::Value {
        let mut joined = serde_json::to_value(&self.item).unwrap_or_default();
        if let (Some(fields), Ok(serde_json::Value::Object(verdict))) =
            (joined.as_object_mut(), serde_json::to_value(self))
        {
            // A version-1 verdict carries the item's keys again: the item's own are kept.
            for (key, value) in verdict {
                fields.entry(key).or_insert(value);
            }
        }
        joined
    }

    fn note(&mut self, diagnostic: String) {
        if self.diagnostics.len() < MAX_DIAGNOSTICS {
            self.diagnostics.push(diagnostic);
        } else if self.diagnostics.len() == MAX_DIAGNOSTICS {
            self.diagnostics
                .push("(further diagnostics of this item are not kept)".into());
        }
    }
}

/// Capabilities whose receipts record the retrieval of a source, and so can back `cited`.
fn retrieves_sources(c: Capability) -> bool {
    // `clock` observes and `workspace` reads the tool's own files: neither retrieves a source.
    !matches!(
        c,
        Capability::Clock | Capability::Workspace | Capability::Log | Capability::Client
    )
}

/// What a result's items are checked against.
pub struct Subject<'a> {
    /// The payload's schema id as the result names it.
    pub schema_id: Option<&'a str>,
    /// The payload, parsed.
    pub payload: Option<&'a serde_json::Value>,
    /// The host's registry of payload schemas.
    pub registry: &'a Registry,
    /// The bodies this call fetched and read.
    pub bodies: &'a Bodies,
}

/// Check a result's evidence: each item against `receipts` (the call's own and those of its
/// child runs: an id not among them is "no such receipt"), the payload's registered bindings
/// and the bodies the call fetched and read. Refused as a whole past [`MAX_EVIDENCE_ITEMS`] or
/// [`MAX_REFERENCES`].
pub fn check(
    items: &[EvidenceRecord],
    receipts: &[Receipt],
    subject: &Subject<'_>,
) -> Result<Vec<CheckedEvidence>, EvidenceError> {
    if items.len() > MAX_EVIDENCE_ITEMS {
        return Err(EvidenceError::TooManyItems {
            limit: MAX_EVIDENCE_ITEMS,
            actual: items.len(),
        });
    }
    let references: usize = items
        .iter()
        .map(|i| i.supports.len() + i.derived_from.len())
        .sum();
    if references > MAX_REFERENCES {
        return Err(EvidenceError::TooManyReferences {
            limit: MAX_REFERENCES,
            actual: references,
        });
    }
    Ok(check_items(items, receipts, subject))
}

fn check_items(
    items: &[EvidenceRecord],
    receipts: &[Receipt],
    subject: &Subject<'_>,
) -> Vec<CheckedEvidence> {
    let by_id: HashMap<&str, &Receipt> = receipts.iter().map(|r| (r.id.as_str(), r)).collect();
    let index = bind::ReceiptIndex::new(receipts);
    let schema = subject.schema_id.and_then(|id| subject.registry.get(id));
    let leaves = match (schema, subject.payload) {
        (Some(s), Some(p)) => bind::leaves(s, p),
        _ => Vec::new(),
    };
    let mut matcher = BodyMatcher::new(subject.bodies);
    let mut computed_cache = bind::Computed::new();
    let mut budget = MAX_BINDING_CHECKS;
    let mut seen = HashSet::new();
    let mut recomputed = vec![false; items.len()];
    let mut checked: Vec<CheckedEvidence> = Vec::with_capacity(items.len());
    for (n, item) in items.iter().enumerate() {
        let mut c = CheckedEvidence {
            item: item.clone(),
            stored_item: None,
            support: Support::Supported,
            diagnostics: Vec::new(),
            upholds: Vec::new(),
            recomputed: Vec::new(),
        };
        if !seen.insert(item.id.as_str()) {
            c.note(format!("the id {:?} is used by an earlier item", item.id));
        }
        let mut present = Vec::with_capacity(item.supports.len());
        for pointer in &item.supports {
            let found = subject
                .payload
                .is_some_and(|p| bind::value_at(p, pointer).is_some());
            if !found {
                c.note(format!("supports {pointer:?}, which is not in the payload"));
            }
            present.push(found);
        }
        match item.kind.as_str() {
            "observed" | "cited" => {
                let receipt = check_receipt(item, &by_id, &mut c);
                if let Some(receipt) = receipt {
                    for (pointer, found) in item.supports.iter().zip(&present) {
                        if !found {
                            continue;
                        }
                        bind_pointer(
                            &mut c,
                            pointer,
                            receipt,
                            (schema, subject.schema_id),
                            &leaves,
                            &index,
                            &mut matcher,
                            &mut budget,
                        );
                    }
                }
            }
            "computed" => {
                if item.derived_from.is_empty() {
                    c.note("a computed item must name the items it was computed from".into());
                }
                let mut known = !item.supports.is_empty();
                for (pointer, found) in item.supports.iter().zip(&present) {
                    if !found {
                        continue;
                    }
                    // The tool's own statements under the pointer (a delta's evidence id) are
                    // neither computed nor observed: they do not count either way.
                    let fields: Vec<_> = bind::under(&leaves, pointer)
                        .iter()
                        .filter(|l| !matches!(l.binding.backing, Backing::Declared))
                        .collect();
                    let computed: Vec<_> = fields
                        .iter()
                        .copied()
                        .filter(|l| matches!(l.binding.backing, Backing::Computed { .. }))
                        .collect();
                    if computed.is_empty() || computed.len() != fields.len() {
                        // Not (only) a computation the host knows: it settles on its sources.
                        known = false;
                        continue;
                    }
                    for leaf in computed {
                        if budget == 0 {
                            c.note(budget_spent());
                            break;
                        }
                        budget -= 1;
                        match subject
                            .payload
                            .ok_or_else(|| "there is no payload".to_string())
                            .and_then(|p| bind::recompute(leaf, p, &mut computed_cache))
                        {
                            Ok(()) => {
                                c.upholds.push(leaf.pointer.clone());
                                if let Backing::Computed {
                                    computation,
                                    inputs,
                                } = &leaf.binding.backing
                                {
                                    c.recomputed.push(format!(
                                        "{} = {}({})",
                                        leaf.pointer,
                                        computation.name(),
                                        inputs.join(", ")
                                    ));
                                }
                            }
                            Err(d) => c.note(d),
                        }
                    }
                }
                recomputed[n] = known;
                if !known {
                    c.upholds.clear();
                    c.recomputed.clear();
                }
            }
            "synthesized" => {}
            other => c.note(format!("unknown evidence kind {other:?}")),
        }
        c.support = if item.kind == "synthesized" {
            // Neither supported nor refuted, whatever else is wrong with it.
            Support::Synthesized
        } else if c.diagnostics.is_empty() {
            Support::Supported
        } else {
            c.upholds.clear();
            c.recomputed.clear();
            Support::Unsupported
        };
        checked.push(c);
    }
    settle_computed(&mut checked, &recomputed);
    checked
}

/// Every field of `payload` that `schema` binds (concrete pointers, sorted), with its binding.
pub fn bound_fields<'a>(
    schema: &'a PayloadSchema,
    payload: &'a serde_json::Value,
) -> Vec<(String, &'a crate::registry::FieldBinding)> {
    bind::leaves(schema, payload)
        .into_iter()
        .map(|l| (l.pointer, l.binding))
        .collect()
}

fn budget_spent() -> String {
    format!(
        "the host compares at most {MAX_BINDING_CHECKS} fields with receipts per result; this item's were not compared"
    )
}

/// Hold one pointer of an `observed` or `cited` item against the fields the schema binds at or
/// under it.
#[allow(clippy::too_many_arguments)]
fn bind_pointer(
    c: &mut CheckedEvidence,
    pointer: &str,
    receipt: &Receipt,
    (schema, schema_id): (Option<&PayloadSchema>, Option<&str>),
    leaves: &[bind::Leaf<'_>],
    index: &bind::ReceiptIndex<'_>,
    matcher: &mut BodyMatcher<'_>,
    budget: &mut usize,
) {
    let Some(schema) = schema else {
        c.note(match schema_id {
            Some(id) => format!(
                "supports {pointer:?}, but `{id}` is not a registered payload schema: no receipt field is known to back it"
            ),
            None => format!(
                "supports {pointer:?}, but the result names no payload schema: no receipt field is known to back it"
            ),
        });
        return;
    };
    let kind = if c.item.kind == "cited" {
        ItemKind::Cited
    } else {
        ItemKind::Observed
    };
    let fields = bind::under(leaves, pointer);
    let mut any = false;
    for leaf in fields {
        let (items, sources, relation) = match &leaf.binding.backing {
            Backing::Declared => continue,
            Backing::Computed { computation, .. } => {
                any = true;
                c.note(format!(
                    "{}: the host computes this field (`{}`); an {} item cannot back it",
                    leaf.pointer,
                    computation.name(),
                    c.item.kind
                ));
                continue;
            }
            Backing::Receipt {
                items,
                sources,
                relation,
            } => (items, sources, relation),
        };
        any = true;
        if *budget == 0 {
            c.note(budget_spent());
            return;
        }
        *budget -= 1;
        let source_ok = sources
            .iter()
            .any(|s| s.capability == receipt.capability && s.operation == receipt.operation);
        if !items.contains(&kind) || !source_ok {
            let takes: Vec<String> = sources
                .iter()
                .map(|s| format!("`{}` `{}`", s.capability.name(), s.operation))
                .collect();
            let kinds: Vec<&str> = items.iter().map(|k| k.name()).collect();
            c.note(format!(
                "{} is {}: an {} item on a `{}` `{}` receipt ({:?}) cannot back it; it takes {} evidence on a receipt of {}",
                leaf.pointer,
                bind::show(leaf.value),
                c.item.kind,
                receipt.capability.name(),
                receipt.operation,
                receipt.id,
                kinds.join(" or "),
                takes.join(" or ")
            ));
            continue;
        }
        match bind::relate(&leaf.pointer, leaf.value, relation, receipt, index, matcher) {
            Ok(()) => c.upholds.push(leaf.pointer.clone()),
            Err(d) => c.note(d),
        }
    }
    if !any {
        c.note(if fields.is_empty() {
            format!(
                "supports {pointer:?}, but `{}` binds no field there to a receipt: the host cannot check it",
                schema.id
            )
        } else {
            format!(
                "supports {pointer:?}, which `{}` declares as the tool's own statement: no receipt can observe it",
                schema.id
            )
        });
    }
}

fn check_receipt<'r>(
    item: &EvidenceRecord,
    by_id: &HashMap<&str, &'r Receipt>,
    c: &mut CheckedEvidence,
) -> Option<&'r Receipt> {
    let Some(id) = item.receipt.as_deref() else {
        c.note(format!(
            "an {} item needs a host receipt; it names none",
            item.kind
        ));
        return None;
    };
    let Some(receipt) = by_id.get(id).copied() else {
        c.note(format!(
            "no such receipt {:?}: the host issued none by that id in this call or its child runs (a receipt of another call backs nothing here)",
            bind::show(&serde_json::Value::String(id.to_string()))
                .trim_matches('"')
        ));
        return None;
    };
    if !receipt.ok {
        c.note(format!(
            "receipt {id:?} records a refused or failed effect, which supports nothing"
        ));
    }
    if item.kind == "cited" && !retrieves_sources(receipt.capability) {
        c.note(format!(
            "receipt {id:?} is a `{}` receipt; a citation needs the receipt of a fetched source",
            receipt.capability.name()
        ));
    }
    if receipt.capability == Capability::Client && receipt.operation == "sample" {
        // A completion from the client's model is synthesis however it is cited: it must not
        // reach the output as something the host observed.
        c.note(format!(
            "receipt {id:?} records a model's completion (sampling); cite it as `synthesized`, not `{}`",
            item.kind
        ));
    }
    if let Some(digest) = &item.digest
        && !digest.eq_ignore_ascii_case(&receipt.digest)
    {
        c.note(format!(
            "the claimed digest {} differs from the receipt's {}",
            bind::show(&serde_json::Value::String(digest.clone())),
            receipt.digest
        ));
    }
    Some(receipt)
}

/// Settle computed items: one stands only if every item it names exists, is not itself, is not
/// part of a cycle with it, and stands (an item the host recomputed may also rest on
/// `synthesized` inputs: its figure was checked, and its inputs' backing is their fields'
/// question). References go to the first item with an id.
///
/// Linear: one depth-first walk over the items and their `derived_from` lists, each item
/// settled once. Returns the number of steps taken (for the tests that bound it).
fn settle_computed(checked: &mut [CheckedEvidence], recomputed: &[bool]) -> usize {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Open,
        OnPath,
        Settled,
    }
    let mut first: HashMap<&str, usize> = HashMap::with_capacity(checked.len());
    for (i, c) in checked.iter().enumerate() {
        first.entry(c.item.id.as_str()).or_insert(i);
    }
    let n = checked.len();
    let mut state: Vec<State> = checked
        .iter()
        .map(|c| {
            if c.item.kind == "computed" && c.support == Support::Supported {
                State::Open
            } else {
                State::Settled
            }
        })
        .collect();
    let mut support: Vec<Support> = checked.iter().map(|c| c.support).collect();
    let mut problem: Vec<Option<String>> = vec![None; n];
    let mut steps = 0usize;
    let mut path: Vec<(usize, usize)> = Vec::new();
    for start in 0..n {
        if state[start] != State::Open {
            continue;
        }
        state[start] = State::OnPath;
        path.push((start, 0));
        while let Some(&(i, pos)) = path.last() {
            steps += 1;
            let sources = &checked[i].item.derived_from;
            let Some(source) = sources.get(pos) else {
                state[i] = State::Settled;
                path.pop();
                continue;
            };
            let p = if *source == checked[i].item.id {
                Some(format!("it is derived from itself ({source:?})"))
            } else {
                match first.get(source.as_str()) {
                    None => Some(format!(
                        "it is derived from {source:?}, which is not an item of this result"
                    )),
                    Some(&j) => match state[j] {
                        State::OnPath => Some(format!(
                            "it is derived from {source:?} in a cycle: no item of a cycle stands on the others"
                        )),
                        State::Open => {
                            state[j] = State::OnPath;
                            path.push((j, 0));
                            continue;
                        }
                        State::Settled => match support[j] {
                            Support::Supported => None,
                            Support::Synthesized if recomputed[i] => None,
                            Support::Synthesized => Some(format!(
                                "it is derived from {source:?}, which is synthesized"
                            )),
                            Support::Unsupported => Some(format!(
                                "it is derived from {source:?}, which is unsupported"
                            )),
                        },
                    },
                }
            };
            match p {
                Some(p) => {
                    support[i] = Support::Unsupported;
                    problem[i] = Some(p);
                    state[i] = State::Settled;
                    path.pop();
                }
                None => {
                    if let Some(top) = path.last_mut() {
                        top.1 += 1;
                    }
                }
            }
        }
    }
    for (i, c) in checked.iter_mut().enumerate() {
        if let Some(p) = problem[i].take() {
            c.note(p);
            c.upholds.clear();
            c.recomputed.clear();
        }
        c.support = support[i];
    }
    steps
}

#[cfg(test)]
mod tests;
