//! `compare`: compare two figures only when they are comparable. With aligned periods, the same
//! unit and the same aggregation basis it returns the difference, as `computed` evidence derived
//! from the two inputs; otherwise it returns both figures side by side and says why no comparison
//! is made. It never computes a change from whichever two values happen to be present.

use vak_guest::prelude::*;

/// A period, as ISO dates.
#[derive(Deserialize, Serialize, JsonSchema, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Period {
    pub start: String,
    pub end: String,
}

/// One figure with what makes it comparable.
#[derive(Deserialize, Serialize, JsonSchema, Clone)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    pub name: String,
    pub period: Period,
    /// The unit, e.g. "ms", "EUR".
    pub unit: String,
    /// The aggregation basis, e.g. "mean", "p99", "sum".
    pub basis: String,
    pub value: f64,
}

/// Arguments of `compare`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The baseline figure.
    pub baseline: Figure,
    /// The figure compared with it.
    pub current: Figure,
}

#[derive(Serialize)]
struct Delta {
    value: f64,
    evidence: String,
}

#[derive(Serialize)]
struct Comparison {
    series: Vec<Figure>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<Delta>,
}

pub struct Compare;

impl Tool for Compare {
    type Args = Args;
    const NAME: &'static str = "compare";
    const DESCRIPTION: &'static str = "The difference between two figures, only when their periods, units and aggregation basis align.";

    fn payload_schemas() -> Vec<String> {
        vec!["vak.data.comparison/1".to_string()]
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        let (a, b) = (args.baseline, args.current);
        let mut reasons = Vec::new();
        if a.period != b.period {
            reasons.push(format!(
                "the periods differ ({}..{} vs {}..{})",
                a.period.start, a.period.end, b.period.start, b.period.end
            ));
        }
        if a.unit != b.unit {
            reasons.push(format!("the units differ ({} vs {})", a.unit, b.unit));
        }
        if a.basis != b.basis {
            reasons.push(format!(
                "the aggregation bases differ ({} vs {})",
                a.basis, b.basis
            ));
        }
        let inputs = [
            Evidence::synthesized("baseline")
                .supports("/series/0")
                .note("given by the caller"),
            Evidence::synthesized("current")
                .supports("/series/1")
                .note("given by the caller"),
        ];
        let (markdown, delta) = if reasons.is_empty() {
            let d = b.value - a.value;
            (
                format!(
                    "{} ({} {} {}) minus {}: **{d:+} {}**.",
                    b.name, b.value, b.unit, b.basis, a.name, a.unit
                ),
                Some(Delta {
                    value: d,
                    evidence: "difference".into(),
                }),
            )
        } else {
            (
                format!(
                    "No comparison: {}.\n\n- {}: {} {} ({})\n- {}: {} {} ({})\n",
                    reasons.join("; "),
                    a.name,
                    a.value,
                    a.unit,
                    a.basis,
                    b.name,
                    b.value,
                    b.unit,
                    b.basis
                ),
                None,
            )
        };
        let has_delta = delta.is_some();
        let mut out = Output::markdown(markdown).with_payload(
            "vak.data.comparison/1",
            &Comparison {
                series: vec![a, b],
                delta,
            },
        )?;
        for e in inputs {
            out = out.with_evidence(e);
        }
        if has_delta {
            out = out.with_evidence(
                Evidence::computed("difference", ["baseline", "current"]).supports("/delta"),
            );
        }
        Ok(out)
    }
}

vak_guest::export_tool!(Compare);
