//! `stats`: summary statistics of a list of numbers. A pure computation: no capability at all.

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
        let mean = sum / count as f64;
        let unit = args.unit.as_deref().unwrap_or("");
        let summary = json!({
            "count": count,
            "min": sorted[0],
            "max": sorted[count - 1],
            "mean": mean,
            "median": median(&sorted),
            "unit": args.unit,
        });
        let markdown = format!(
            "| statistic | value |\n|---|---|\n| count | {count} |\n| min | {} {unit} |\n| max | {} {unit} |\n| mean | {mean} {unit} |\n| median | {} {unit} |\n",
            sorted[0],
            sorted[count - 1],
            median(&sorted)
        );
        // The figures come from the caller's own arguments, not from any source the host
        // witnessed: the result carries no evidence items, and claims none.
        Output::markdown(markdown).with_payload("vak.data.summary/1", &summary)
    }
}

vak_guest::export_tool!(Stats);
