//! Semantic outcome: the tool's result contract and the caller's requirements, evaluated one by
//! one (met, unmet, not applicable), each linked to the evidence that decides it, and the label
//! of the result. A result is `verified` only when its payload passed its registered schema, its
//! material fields are present, **every** material field the schema binds is backed by an item
//! the evidence check upheld (its value agrees with a receipt of the call, or with the host's
//! own computation), and every requirement is met.
//!
//! Requirements read the host's figures: freshness is measured from the time in the receipt
//! that backs `/instant`, a verified change from the write and read-back receipts, aligned
//! series from the periods, units and bases that receipts back; never from a payload field
//! alone.
//!
//! Nothing here infers a domain from field names, and nothing computes a metric from whichever
//! values happen to be present: a comparison without aligned periods, units and basis is unmet,
//! and no delta is derived.

use crate::evidence::{CheckedEvidence, Support};
use crate::registry::{Backing, Domain, PayloadSchema, Registry};
use crate::types::Receipt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a caller can require of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "requirement", rename_all = "snake_case")]
pub enum Requirement {
    /// Temporal: the observation is at most this old when the outcome is evaluated.
    Freshness { max_age_seconds: u64 },
    /// Research: every claim is cited to a supported source.
    EveryClaimCited,
    /// Coding: the change was verified by reading the file back.
    VerifiedChange,
    /// Data: the series compared share period, unit and basis.
    AlignedComparison,
}

impl Requirement {
    /// Parse the CLI form: `freshness=60`, `cited`, `verified-change`, `aligned`.
    pub fn parse(text: &str) -> Option<Requirement> {
        match text.split_once('=') {
            Some(("freshness", n)) => n
                .trim_end_matches('s')
                .parse()
                .ok()
                .map(|max_age_seconds| Requirement::Freshness { max_age_seconds }),
            None if text == "cited" => Some(Requirement::EveryClaimCited),
            None if text == "verified-change" => Some(Requirement::VerifiedChange),
            None if text == "aligned" => Some(Requirement::AlignedComparison),
            _ => None,
        }
    }

    fn domain(&self) -> Domain {
        match self {
            Requirement::Freshness { .. } => Domain::Temporal,
            Requirement::EveryClaimCited => Domain::Research,
            Requirement::VerifiedChange => Domain::Coding,
            Requirement::AlignedComparison => Domain::DataComparison,
        }
    }
}

/// met, unmet, or not applicable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Met,
    Unmet,
    NotApplicable,
}

/// One evaluated requirement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequirementOutcome {
    /// `payload_schema`, `material_fields`, or the caller's requirement.
    pub requirement: String,
    pub decision: Decision,
    /// Ids of the evidence items that decide it.
    pub evidence: Vec<String>,
    pub diagnostic: String,
}

/// How the result may be presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    Verified,
    PartiallySupported,
    Unverified,
    Failed,
}

impl Label {
    /// The label as records and clients spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Label::Verified => "verified",
            Label::PartiallySupported => "partially_supported",
            Label::Unverified => "unverified",
            Label::Failed => "failed",
        }
    }
}

/// The outcome stage's verdict, kept in the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub label: Label,
    /// Whether the payload passed the schema its id names (false without a registered id).
    pub payload_passed: bool,
    pub requirements: Vec<RequirementOutcome>,
}

/// The supported items of `kinds` that uphold the field `pointer` (a concrete pointer).
fn upholding<'a>(
    evidence: &'a [CheckedEvidence],
    pointer: &str,
    kinds: &[&str],
) -> Vec<&'a CheckedEvidence> {
    evidence
        .iter()
        .filter(|e| e.support == Support::Supported && kinds.contains(&e.item.kind.as_str()))
        .filter(|e| e.upholds.iter().any(|u| u == pointer))
        .collect()
}

fn ids(items: &[&CheckedEvidence]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in items {
        if !out.contains(&e.item.id) {
            out.push(e.item.id.clone());
        }
    }
    out
}

/// Most fields one diagnostic names (then it says how many more).
const MAX_NAMED: usize = 12;

fn name_some(fields: &[String]) -> String {
    let mut text = fields
        .iter()
        .take(MAX_NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if fields.len() > MAX_NAMED {
        text.push_str(&format!(" and {} more", fields.len() - MAX_NAMED));
    }
    text
}

/// The receipt an upheld `observed` item rests on, for the field `pointer`.
fn backing_receipt<'r>(
    evidence: &[CheckedEvidence],
    pointer: &str,
    receipts: &'r [Receipt],
) -> Option<(&'r Receipt, String)> {
    upholding(evidence, pointer, &["observed", "cited"])
        .into_iter()
        .find_map(|e| {
            let id = e.item.receipt.as_deref()?;
            receipts
                .iter()
                .find(|r| r.id == id)
                .map(|r| (r, e.item.id.clone()))
        })
}

/// Evaluate a completed result. `receipts` are the call's and its child runs' (the evidence was
/// checked against them); `now_unix` is the host's time of the evaluation.
pub fn evaluate(
    registry: &Registry,
    payload_schema: Option<&str>,
    payload: Option<&Value>,
    evidence: &[CheckedEvidence],
    receipts: &[Receipt],
    requirements: &[Requirement],
    now_unix: i64,
) -> Outcome {
    let mut out = Vec::new();
    let registered = payload_schema.and_then(|id| registry.get(id));
    let mut passed = false;
    match (payload_schema, registered, payload) {
        (None, _, _) | (_, _, None) => out.push(RequirementOutcome {
            requirement: "payload_schema".into(),
            decision: Decision::NotApplicable,
            evidence: Vec::new(),
            diagnostic: "no typed payload: the result is a document".into(),
        }),
        (Some(id), None, _) => out.push(RequirementOutcome {
            requirement: "payload_schema".into(),
            decision: Decision::Unmet,
            evidence: Vec::new(),
            diagnostic: format!("`{id}` is not a registered payload schema; the payload is treated as an ordinary document"),
        }),
        (Some(id), Some(s), Some(p)) => {
            let check = s.schema.validate_value(p);
            passed = check.is_ok();
            out.push(RequirementOutcome {
                requirement: "payload_schema".into(),
                decision: if passed { Decision::Met } else { Decision::Unmet },
                evidence: Vec::new(),
                diagnostic: match check {
                    Ok(()) => format!("the payload passed `{id}`"),
                    Err(e) => e.to_string(),
                },
            });
            let missing: Vec<&str> = s.material.iter().filter(|m| crate::evidence::value_at(p, m).is_none()).map(String::as_str).collect();
            // A comparison means something only between aligned series: alignment is part of
            // the data domain's result contract, whether or not the caller asked for it.
            let misaligned = s.domain == Domain::DataComparison && passed && !shown_aligned(p);
            out.push(RequirementOutcome {
                requirement: "material_fields".into(),
                decision: if missing.is_empty() && !misaligned { Decision::Met } else { Decision::Unmet },
                evidence: Vec::new(),
                diagnostic: if !missing.is_empty() {
                    format!("material fields missing: {}", missing.join(", "))
                } else if misaligned {
                    "the series do not share period, unit and basis: no comparison is shown".into()
                } else {
                    "present".into()
                },
            });
            out.push(host_evidence(s, p, evidence));
        }
    }
    let domain = registered.map(|s| s.domain);
    for req in requirements {
        let name = serde_json::to_value(req)
            .ok()
            .and_then(|v| v["requirement"].as_str().map(str::to_string))
            .unwrap_or_default();
        let o = if domain != Some(req.domain()) || !passed {
            RequirementOutcome {
                requirement: name,
                decision: if domain == Some(req.domain()) {
                    Decision::Unmet
                } else {
                    Decision::NotApplicable
                },
                evidence: Vec::new(),
                diagnostic: if domain == Some(req.domain()) {
                    "the payload did not pass its schema".into()
                } else {
                    "the result carries no payload of this requirement's domain".into()
                },
            }
        } else {
            evaluate_one(
                req,
                name,
                payload.unwrap_or(&Value::Null),
                evidence,
                receipts,
                now_unix,
            )
        };
        out.push(o);
    }
    let unmet = out.iter().any(|o| o.decision == Decision::Unmet);
    let any_backed = evidence.iter().any(|e| {
        e.support == Support::Supported && matches!(e.item.kind.as_str(), "observed" | "cited")
    });
    let label = if passed && !unmet {
        Label::Verified
    } else if any_backed {
        Label::PartiallySupported
    } else {
        Label::Unverified
    };
    Outcome {
        label,
        payload_passed: passed,
        requirements: out,
    }
}

/// `host_evidence`: every material field the schema binds, present in the payload, is upheld
/// (by an `observed` or `cited` item for a receipt-bound field, by a recomputed `computed` item
/// for a computed one); fields the tool declares do not count, other bound fields are named
/// when nothing backs them.
fn host_evidence(s: &PayloadSchema, p: &Value, evidence: &[CheckedEvidence]) -> RequirementOutcome {
    let mut backing: Vec<&CheckedEvidence> = Vec::new();
    let mut unbacked = Vec::new();
    let mut informative = Vec::new();
    let mut needed = 0usize;
    for (field, binding) in crate::evidence::bound_fields(s, p) {
        let kinds: &[&str] = match binding.backing {
            Backing::Declared => continue,
            Backing::Receipt { .. } => &["observed", "cited"],
            Backing::Computed { .. } => &["computed"],
        };
        let by = upholding(evidence, &field, kinds);
        if binding.material {
            needed += 1;
            if by.is_empty() {
                unbacked.push(field);
            }
        } else if by.is_empty() {
            informative.push(field);
        }
        backing.extend(by);
    }
    let shown = if informative.is_empty() {
        String::new()
    } else {
        format!(
            "; shown as not backed (not material): {}",
            name_some(&informative)
        )
    };
    let (decision, diagnostic) = if needed == 0 {
        (
            Decision::Unmet,
            format!(
                "`{}` binds none of the payload's fields to a receipt or a computation the host knows: nothing in it can be backed",
                s.id
            ),
        )
    } else if unbacked.is_empty() {
        (
            Decision::Met,
            format!("all {needed} material fields backed by host evidence{shown}"),
        )
    } else {
        (
            Decision::Unmet,
            format!(
                "material fields not backed by host evidence: {}{shown}",
                name_some(&unbacked)
            ),
        )
    };
    RequirementOutcome {
        requirement: "host_evidence".into(),
        decision,
        evidence: ids(&backing),
        diagnostic,
    }
}

/// Whether the series shown share period, unit and basis (the values as shown, backed or not).
fn shown_aligned(p: &Value) -> bool {
    let series = p["series"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let first = series.first();
    series.len() >= 2
        && series.iter().all(|s| {
            first.is_some_and(|f| {
                s["period"] == f["period"] && s["unit"] == f["unit"] && s["basis"] == f["basis"]
            })
        })
}

fn evaluate_one(
    req: &Requirement,
    name: String,
    p: &Value,
    evidence: &[CheckedEvidence],
    receipts: &[Receipt],
    now_unix: i64,
) -> RequirementOutcome {
    let (decision, backing, diagnostic) = match req {
        Requirement::Freshness { max_age_seconds } => {
            let backing = upholding(evidence, "/instant", &["observed"]);
            let reading = backing_receipt(evidence, "/instant", receipts);
            match reading
                .as_ref()
                .and_then(|(r, _)| r.outcome["unix_seconds"].as_i64().map(|t| (r, t)))
            {
                None if backing.is_empty() => (
                    Decision::Unmet,
                    backing,
                    "no observed evidence backs /instant: its age is unknown".to_string(),
                ),
                None => (
                    Decision::Unmet,
                    backing,
                    "the receipt backing /instant records no reading time".into(),
                ),
                Some((r, t)) => {
                    let age = now_unix.saturating_sub(t);
                    let within = age <= i64::try_from(*max_age_seconds).unwrap_or(i64::MAX);
                    (
                        if within {
                            Decision::Met
                        } else {
                            Decision::Unmet
                        },
                        backing,
                        format!(
                            "observed {age} s ago by receipt {:?} ({} {max_age_seconds} s)",
                            r.id,
                            if within { "≤" } else { ">" }
                        ),
                    )
                }
            }
        }
        Requirement::EveryClaimCited => {
            let count = p["findings"].as_array().map_or(0, Vec::len);
            let mut backing = Vec::new();
            let mut uncited = Vec::new();
            for i in 0..count {
                let pointer = format!("/findings/{i}/claim");
                let b = upholding(evidence, &pointer, &["cited"]);
                if b.is_empty() {
                    uncited.push(i.to_string());
                }
                backing.extend(b);
            }
            if count == 0 {
                (Decision::Unmet, backing, "there are no findings".into())
            } else if uncited.is_empty() {
                (
                    Decision::Met,
                    backing,
                    format!("all {count} claims occur in sources the host fetched"),
                )
            } else {
                (
                    Decision::Unmet,
                    backing,
                    format!(
                        "claims not backed by a fetched source: {}",
                        name_some(&uncited)
                    ),
                )
            }
        }
        Requirement::VerifiedChange => {
            // The read-back item's upheld `/verification/matches` is the host's own derivation
            // (a write of this call to the same file, then a read with the same digest).
            let backing = upholding(evidence, "/verification/matches", &["observed"]);
            if p["verification"]["matches"] == Value::Bool(true) && !backing.is_empty() {
                (
                    Decision::Met,
                    backing,
                    "the host read the file back after writing it, and it matches".into(),
                )
            } else {
                (
                    Decision::Unmet,
                    backing,
                    "no upheld read-back shows the change".into(),
                )
            }
        }
        Requirement::AlignedComparison => {
            let count = p["series"].as_array().map_or(0, Vec::len);
            let mut backing = Vec::new();
            let mut unbacked = Vec::new();
            for i in 0..count {
                for f in ["period/start", "period/end", "unit", "basis"] {
                    let pointer = format!("/series/{i}/{f}");
                    let b = upholding(evidence, &pointer, &["observed", "cited"]);
                    if b.is_empty() {
                        unbacked.push(pointer);
                    }
                    backing.extend(b);
                }
            }
            if !shown_aligned(p) {
                (
                    Decision::Unmet,
                    Vec::new(),
                    "the series do not share period, unit and basis: no comparison is made".into(),
                )
            } else if !unbacked.is_empty() {
                (
                    Decision::Unmet,
                    backing,
                    format!(
                        "the series look aligned, but these are not backed by a receipt: {}",
                        name_some(&unbacked)
                    ),
                )
            } else {
                (
                    Decision::Met,
                    backing,
                    "periods, units and basis align, each backed by a receipt".into(),
                )
            }
        }
    };
    RequirementOutcome {
        requirement: name,
        decision,
        evidence: ids(&backing),
        diagnostic,
    }
}
