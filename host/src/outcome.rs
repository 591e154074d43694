//! Semantic outcome: the tool's result contract and the caller's requirements, evaluated one by
//! one (met, unmet, not applicable), each linked to the evidence that decides it, and the label
//! of the result. A result is `verified` only when its payload passed its registered schema, its
//! material fields are present, and every requirement is met by observed or cited evidence.
//!
//! Nothing here infers a domain from field names, and nothing computes a metric from whichever
//! values happen to be present: a comparison without aligned periods, units and basis is unmet,
//! and no delta is derived.

use crate::evidence::{CheckedEvidence, Support};
use crate::registry::{Domain, Registry};
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

/// The outcome stage's verdict, kept in the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub label: Label,
    /// Whether the payload passed the schema its id names (false without a registered id).
    pub payload_passed: bool,
    pub requirements: Vec<RequirementOutcome>,
}

fn supported_for<'a>(
    evidence: &'a [CheckedEvidence],
    pointer: &str,
    kinds: &[&str],
) -> Vec<&'a CheckedEvidence> {
    evidence
        .iter()
        .filter(|e| e.support == Support::Supported && kinds.contains(&e.item.kind.as_str()))
        .filter(|e| {
            e.item.supports.iter().any(|s| {
                s == pointer
                    || pointer.starts_with(&format!("{s}/"))
                    || s.starts_with(&format!("{pointer}/"))
            })
        })
        .collect()
}

fn ids(items: &[&CheckedEvidence]) -> Vec<String> {
    items.iter().map(|e| e.item.id.clone()).collect()
}

/// Evaluate a completed result.
pub fn evaluate(
    registry: &Registry,
    payload_schema: Option<&str>,
    payload: Option<&Value>,
    evidence: &[CheckedEvidence],
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
            let missing: Vec<&str> = s.material.iter().filter(|m| p.pointer(m).is_none()).map(String::as_str).collect();
            let backed: Vec<&CheckedEvidence> = s
                .material
                .iter()
                .flat_map(|m| supported_for(evidence, m, &["observed", "cited"]))
                .collect();
            // A comparison means something only between aligned series: alignment is part of
            // the data domain's result contract, whether or not the caller asked for it.
            let misaligned = s.domain == Domain::DataComparison
                && passed
                && evaluate_one(&Requirement::AlignedComparison, String::new(), p, evidence, now_unix).decision
                    != Decision::Met;
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
            out.push(RequirementOutcome {
                requirement: "host_evidence".into(),
                decision: if backed.is_empty() { Decision::Unmet } else { Decision::Met },
                evidence: ids(&backed),
                diagnostic: if backed.is_empty() {
                    "no observed or cited evidence supports a material field".into()
                } else {
                    "material fields supported by host-backed evidence".into()
                },
            });
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

fn evaluate_one(
    req: &Requirement,
    name: String,
    p: &Value,
    evidence: &[CheckedEvidence],
    now_unix: i64,
) -> RequirementOutcome {
    let (decision, backing, diagnostic) = match req {
        Requirement::Freshness { max_age_seconds } => {
            let backing = supported_for(evidence, "/instant", &["observed"]);
            let observed = p["unix_seconds"].as_i64();
            match observed {
                _ if backing.is_empty() => (
                    Decision::Unmet,
                    backing,
                    "no observed evidence supports /instant".to_string(),
                ),
                Some(t) if now_unix.saturating_sub(t) <= *max_age_seconds as i64 => (
                    Decision::Met,
                    backing,
                    format!(
                        "observed {} s ago (≤ {max_age_seconds} s)",
                        now_unix.saturating_sub(t)
                    ),
                ),
                Some(t) => (
                    Decision::Unmet,
                    backing,
                    format!(
                        "observed {} s ago (> {max_age_seconds} s)",
                        now_unix.saturating_sub(t)
                    ),
                ),
                None => (Decision::Unmet, backing, "no observation time".into()),
            }
        }
        Requirement::EveryClaimCited => {
            let findings = p["findings"].as_array().cloned().unwrap_or_default();
            let mut backing = Vec::new();
            let mut uncited = Vec::new();
            for i in 0..findings.len() {
                let pointer = format!("/findings/{i}/claim");
                let b = supported_for(evidence, &pointer, &["cited"]);
                if b.is_empty() {
                    uncited.push(i.to_string());
                }
                backing.extend(b);
            }
            if findings.is_empty() {
                (Decision::Unmet, backing, "there are no findings".into())
            } else if uncited.is_empty() {
                (
                    Decision::Met,
                    backing,
                    format!("all {} claims cited to supported sources", findings.len()),
                )
            } else {
                (
                    Decision::Unmet,
                    backing,
                    format!(
                        "claims without a supported citation: {}",
                        uncited.join(", ")
                    ),
                )
            }
        }
        Requirement::VerifiedChange => {
            let backing = supported_for(evidence, "/verification", &["observed"]);
            if p["verification"]["matches"] == Value::Bool(true) && !backing.is_empty() {
                (
                    Decision::Met,
                    backing,
                    "read back after writing, and it matches".into(),
                )
            } else {
                (
                    Decision::Unmet,
                    backing,
                    "no supported read-back shows the change".into(),
                )
            }
        }
        Requirement::AlignedComparison => {
            let series = p["series"].as_array().cloned().unwrap_or_default();
            let first = series.first();
            let aligned = series.len() >= 2
                && series.iter().all(|s| {
                    first.is_some_and(|f| {
                        s["period"] == f["period"]
                            && s["unit"] == f["unit"]
                            && s["basis"] == f["basis"]
                    })
                });
            if aligned {
                (
                    Decision::Met,
                    Vec::new(),
                    "periods, units and basis align".into(),
                )
            } else {
                (
                    Decision::Unmet,
                    Vec::new(),
                    "the series do not share period, unit and basis: no comparison is made".into(),
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
