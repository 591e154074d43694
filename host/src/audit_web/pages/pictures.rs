//! Pictures of the calls a filter selects (tool, principal, node, time range, as on the calls
//! page): calls over time by status, per tool the spread of wall time and fuel, refusals by
//! stage and kind. Each is aggregated in SQL over a bounded number of the newest calls (read
//! through the `received_at` index of a local journal, the `gseq` key of a shared store:
//! [`Source::span`], [`Source::tally_by_time`], [`Source::usage_sample`],
//! [`Source::refusal_tally`]), and drawn as inline SVG ([`svg`]).

use super::super::Source;
use super::svg::{self, Column, STATUS_ORDER, Spread};
use super::{Page, param, query_href, text_fields, time_range};
use crate::journal::{Filter, Page as Query, Sample};
use crate::stage::Stage;
use maud::html;
use std::collections::HashMap;

/// Most calls the time picture counts (the newest in range).
pub const TIME_CAP: u32 = 200_000;
/// Most calls the wall time and fuel spreads are drawn from (the newest that ran).
pub const USAGE_CAP: u32 = 5_000;
/// Most refusals the refusal picture counts (the newest).
pub const REFUSAL_CAP: u32 = 5_000;
/// Most bars over time.
const MAX_BUCKETS: i64 = 48;
/// Most tools the spreads show (those with the most calls).
const MAX_TOOLS: usize = 20;
/// Most (stage, kind) bars.
const MAX_REFUSAL_GROUPS: u32 = 40;

/// The filters the pictures honour (the calls page's names), in the form's order.
const FIELDS: [&str; 5] = ["tool", "principal", "node", "since", "until"];

/// Bucket widths, in seconds: the least that fits the range in [`MAX_BUCKETS`] bars is used.
const WIDTHS: [i64; 20] = [
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1_800, 3_600, 7_200, 10_800, 21_600, 43_200,
    86_400, 604_800, 2_592_000,
];

/// The pictures page for `query`.
pub fn page(journal: &dyn Source, query: &[(String, String)]) -> Page {
    let get = |name| param(query, name).map(str::to_string);
    let time = |name: &str| match param(query, name).map(crate::journal::since) {
        None => Ok(None),
        Some(Ok(t)) => Ok(Some(t)),
        Some(Err(e)) => Err(Page::bad_request(&format!("{name} {e}."))),
    };
    let (since, until) = match (time("since"), time("until")) {
        (Ok(s), Ok(u)) => (s, u),
        (Err(p), _) | (_, Err(p)) => return p,
    };
    let filter = Filter {
        tool: get("tool"),
        principal: get("principal"),
        since,
        ..Filter::default()
    };
    let q = Query {
        node: get("node"),
        until,
        ..Query::default()
    };
    let given: Vec<(&str, &str)> = FIELDS
        .iter()
        .filter_map(|f| param(query, f).map(|v| (*f, v)))
        .collect();
    let drawn = match draw(journal, &filter, &q, &given) {
        Ok(d) => d,
        Err(e) => return Page::error(&e.to_string()),
    };
    let content = html! {
        form.filters method="get" action="/pictures" {
            (text_fields(query, &[("tool", "tool"), ("principal", "principal"), ("node", "node")]))
            (time_range(query))
            button type="submit" { "Draw" }
            " " a href="/pictures" { "clear" }
            " · " a href=(query_href("/calls", &given)) { "these calls as a list" }
        }
        (drawn)
    };
    Page::ok("Pictures", content)
}

/// The three pictures (or why there is none).
fn draw(
    journal: &dyn Source,
    filter: &Filter,
    q: &Query,
    given: &[(&str, &str)],
) -> Result<maud::Markup, crate::journal::JournalError> {
    let sample = |cap| Sample {
        filter,
        page: q,
        cap,
    };
    let over_time = sample(TIME_CAP);
    let Some((first, last)) = journal.span(&over_time)? else {
        return Ok(html! { p #empty { "No calls in this range." } });
    };
    let groups = ((MAX_BUCKETS + 2) * 8) as u32;
    let mut width = bucket_width(first, last);
    let mut tally = journal.tally_by_time(&over_time, width, groups)?;
    let mut n: u64 = tally.iter().map(|t| t.2).sum();
    // Capped: the newest calls counted cover less than the range; drawn again over what they
    // cover, when that takes narrower bars.
    if n >= u64::from(TIME_CAP) {
        let from = tally.iter().map(|t| t.0).min().unwrap_or(0) * width;
        let narrower = bucket_width(from, last);
        if narrower < width {
            width = narrower;
            tally = journal.tally_by_time(&over_time, width, groups)?;
            n = tally.iter().map(|t| t.2).sum();
        }
    }
    let usage = journal.usage_sample(&sample(USAGE_CAP))?;
    let refusals = journal.refusal_tally(&sample(REFUSAL_CAP), MAX_REFUSAL_GROUPS)?;

    // Over time: every bucket from the first to the last, empty ones too.
    let mut statuses: Vec<&str> = STATUS_ORDER.to_vec();
    for (_, s, _) in &tally {
        if !statuses.contains(&s.as_str()) {
            statuses.push(s);
        }
    }
    let present: Vec<&str> = statuses
        .iter()
        .copied()
        .filter(|s| tally.iter().any(|(_, t, _)| t == s))
        .collect();
    let lo = tally.iter().map(|t| t.0).min().unwrap_or(0);
    let hi = tally
        .iter()
        .map(|t| t.0)
        .max()
        .unwrap_or(0)
        .min(lo + 2 * MAX_BUCKETS);
    let mut columns: Vec<Column> = (lo..=hi)
        .map(|b| column(b, width, present.len(), given))
        .collect();
    for (b, s, c) in &tally {
        let (Some(col), Some(si)) = (
            usize::try_from(b - lo)
                .ok()
                .and_then(|i| columns.get_mut(i)),
            present.iter().position(|p| p == s),
        ) else {
            continue;
        };
        col.counts[si] += c;
    }
    let time_summary = format!(
        "Calls over time by status: {n} calls{}, in {} bars of {}; {}.",
        if n >= u64::from(TIME_CAP) {
            " (the newest)"
        } else {
            ""
        },
        columns.len(),
        span_text(width),
        present
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{s} {}", columns.iter().map(|c| c.counts[i]).sum::<u64>()))
            .collect::<Vec<_>>()
            .join(", ")
    );

    // Per tool: the spreads of the newest calls that ran.
    let mut per_tool: HashMap<&str, (Vec<u64>, Vec<u64>)> = HashMap::new();
    for (tool, wall, fuel) in &usage {
        let e = per_tool.entry(tool.as_str()).or_default();
        e.0.push(*wall);
        e.1.push(*fuel);
    }
    let mut tools: Vec<_> = per_tool.into_iter().collect();
    tools.sort_by(|a, b| b.1.0.len().cmp(&a.1.0.len()).then(a.0.cmp(b.0)));
    let more_tools = tools.len().saturating_sub(MAX_TOOLS);
    tools.truncate(MAX_TOOLS);
    let (mut walls, mut fuels) = (Vec::new(), Vec::new());
    for (tool, (mut w, mut f)) in tools {
        walls.extend(Spread::of(tool, &mut w));
        fuels.extend(Spread::of(tool, &mut f));
    }

    // Refusals: by stage in the pipeline's order, then the most first.
    let mut refused: Vec<(String, String, u64)> = refusals;
    let place = |s: &str| Stage::ALL.iter().position(|st| st.as_str() == s);
    refused.sort_by(|a, b| place(&a.0).cmp(&place(&b.0)).then(b.2.cmp(&a.2)));
    let refused_n: u64 = refused.iter().map(|r| r.2).sum();
    let bars: Vec<(String, u64)> = refused
        .iter()
        .map(|(stage, kind, c)| (format!("{stage} · {kind}"), *c))
        .collect();
    let refusal_summary = format!(
        "Refusals by stage and kind: {refused_n} refused calls{}; {}.",
        if refused_n >= u64::from(REFUSAL_CAP) {
            " (the newest)"
        } else {
            ""
        },
        bars.iter()
            .map(|(l, c)| format!("{l} {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let sample_note = |what: &str| {
        format!(
            "{what} of the newest {} calls that ran (completed, tool error or failed){}: a box from the median to p90 on a line from the least to the most (a log scale).",
            usage.len(),
            if usage.len() >= USAGE_CAP as usize {
                ", the most drawn from"
            } else {
                ""
            },
        )
    };
    Ok(html! {
        section #over-time {
            h2 { "Calls over time, by status" }
            p { (time_summary) " Each bar links to its calls."
                @if n >= u64::from(TIME_CAP) { strong { " Only the newest " (TIME_CAP) " calls in range are counted: narrow the range to see older ones." } } }
            (svg::over_time(&columns, &present, &time_summary))
        }
        section #wall-time {
            h2 { "Wall time, per tool" }
            @if walls.is_empty() { p { "No call in range ran." } } @else {
                p { (sample_note("Wall time")) @if more_tools > 0 { " " (more_tools) " tools with fewer calls are not drawn." } }
                (svg::spreads(&walls, svg::duration, &format!("Wall time per tool: {}.", summary(&walls, svg::duration))))
            }
        }
        section #fuel {
            h2 { "Fuel, per tool" }
            @if fuels.is_empty() { p { "No call in range ran." } } @else {
                p { (sample_note("Fuel used")) }
                (svg::spreads(&fuels, svg::count, &format!("Fuel per tool: {}.", summary(&fuels, svg::count))))
            }
        }
        section #refusals {
            h2 { "Refusals, by stage and kind" }
            @if bars.is_empty() { p { "No call in range was refused." } } @else {
                p { (refusal_summary)
                    @if refused_n >= u64::from(REFUSAL_CAP) { strong { " Only the newest " (REFUSAL_CAP) " refusals are counted." } } }
                (svg::bars(&bars, "refused", &refusal_summary))
            }
        }
    })
}

/// The least of [`WIDTHS`] that draws `first..=last` (Unix seconds) in [`MAX_BUCKETS`] bars.
fn bucket_width(first: i64, last: i64) -> i64 {
    WIDTHS
        .into_iter()
        .find(|w| last.div_euclid(*w) - first.div_euclid(*w) < MAX_BUCKETS)
        .unwrap_or(WIDTHS[WIDTHS.len() - 1])
}

/// The numbers of each row, for a picture's `aria-label`.
fn summary(rows: &[Spread], unit: fn(u64) -> String) -> String {
    rows.iter()
        .map(|r| format!("{} {}", r.name, r.text(unit)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A bucket width in words.
fn span_text(width: i64) -> String {
    match width {
        w if w % 86_400 == 0 => format!("{} d", w / 86_400),
        w if w % 3_600 == 0 => format!("{} h", w / 3_600),
        w if w % 60 == 0 => format!("{} min", w / 60),
        w => format!("{w} s"),
    }
}

/// The empty column of bucket `b` (`width` seconds), linking to its calls.
fn column(b: i64, width: i64, statuses: usize, given: &[(&str, &str)]) -> Column {
    let at = |s: i64| jiff::Timestamp::from_second(s).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let (start, end) = (at(b * width), at((b + 1) * width));
    let label = match width {
        w if w >= 86_400 => start.strftime("%Y-%m-%d"),
        w if w >= 60 => start.strftime("%m-%d %H:%M"),
        _ => start.strftime("%H:%M:%S"),
    }
    .to_string();
    let (s, e) = (start.to_string(), end.to_string());
    // The other filters, and the bucket's range for the time range.
    let mut pairs: Vec<(&str, &str)> = given
        .iter()
        .copied()
        .filter(|(k, _)| *k != "since" && *k != "until")
        .collect();
    pairs.push(("since", &s));
    pairs.push(("until", &e));
    Column {
        label,
        title: format!("{s} to {e}"),
        href: query_href("/calls", &pairs),
        counts: vec![0; statuses],
    }
}
