//! `stats`: summary statistics of a list of numbers. A pure computation: no capability at all.
//!
//! The payload (`vak.data.summary/1`) shows the numbers with their summary. The host recomputes
//! count, minimum, maximum, mean and median from the numbers shown, so the `computed` item
//! stands only when the figures are right; the numbers themselves are the caller's, which no
//! receipt backs, so the result is never labelled verified.

use vak_guest::prelude::*;

/// Arguments of `stats`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The numbers to summarise (at least one).
    pub values: Vec<f64>,
    /// Optional unit of the values, repeated in the output (e.g. "ms").
    #[serde(default)]
    pub unit: Option<String>,
}

/// The `vak.data.summary/1` payload.
#[derive(Serialize)]
pub struct Summary {
    /// The numbers summarised, as given.
    pub values: Vec<f64>,
    pub count: usize,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub median: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

pub struct Stats;

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

impl Tool for Stats {
    type Args = Args;
    const NAME: &'static str = "stats";
    const DESCRIPTION: &'static str =
        "Count, minimum, maximum, mean and median of a list of numbers.";

    fn payload_schemas() -> Vec<String> {
        vec!["vak.data.summary/1".to_string()]
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        if args.values.is_empty() {
            return Err(ToolError::new(
                "no-values",
                "`values` must hold at least one number",
            ));
        }
        let mut sorted = args.values.clone();
        sorted.sort_by(f64::total_cmp);
        let count = sorted.len();
        let sum: f64 = sorted.iter().sum();
        let summary = Summary {
            values: args.values.clone(),
            count,
            min: sorted[0],
            max: sorted[count - 1],
            mean: sum / count as f64,
            median: median(&sorted),
            unit: args.unit.clone(),
        };
        let unit = args.unit.as_deref().unwrap_or("");
        let markdown = format!(
            "| statistic | value |\n|---|---|\n| count | {count} |\n| min | {} {unit} |\n| max | {} {unit} |\n| mean | {} {unit} |\n| median | {} {unit} |\n",
            summary.min, summary.max, summary.mean, summary.median
        );
        // The numbers are the caller's own arguments, not something the host witnessed: they
        // are `synthesized` as far as evidence goes. The summary is computed from them, and the
        // host checks that computation.
        Ok(Output::markdown(markdown)
            .with_payload("vak.data.summary/1", &summary)?
            .with_evidence(
                Evidence::synthesized("values")
                    .supports("/values")
                    .note("given by the caller"),
            )
            .with_evidence(
                Evidence::computed("summary", ["values"])
                    .supports("/count")
                    .supports("/min")
                    .supports("/max")
                    .supports("/mean")
                    .supports("/median")
                    .note("count, min, max, mean and median of /values"),
            ))
    }
}

vak_guest::export_tool!(Stats);
