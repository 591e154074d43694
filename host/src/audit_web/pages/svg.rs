//! The pictures, drawn here as inline SVG (no chart library, nothing fetched, no script, no
//! inline style: fills and strokes are SVG presentation attributes, which the CSP does not
//! govern). Readable without colour: each status has a pattern of its own, every bar and box
//! carries its numbers as text, a legend names the patterns, each mark has a `<title>` (hover
//! text) and each picture `role="img"` with an `aria-label` that says what it shows.
//!
//! Every element is written with a body (`<rect …></rect>`): in HTML, an SVG element's start tag
//! without one would take the elements after it as its children.

use super::shown;
use maud::{Markup, html};

/// How a status is drawn: its pattern's ground, its ink, and the figure the ink draws.
struct Look {
    ground: &'static str,
    ink: &'static str,
    figure: Figure,
}

#[derive(Clone, Copy)]
enum Figure {
    Solid,
    Diagonal,
    Cross,
    Dots,
    Horizontal,
    Vertical,
}

/// The statuses the time picture draws, in the order they stack (bottom first).
pub const STATUS_ORDER: [&str; 5] = ["completed", "tool_error", "refused", "failed", "unfinished"];

fn look(status: &str) -> Look {
    let (ground, ink, figure) = match status {
        "completed" => ("#15803d", "#15803d", Figure::Solid),
        "tool_error" => ("#fde68a", "#b45309", Figure::Diagonal),
        "refused" => ("#fecaca", "#b91c1c", Figure::Cross),
        "failed" => ("#ede9fe", "#6d28d9", Figure::Dots),
        "unfinished" => ("#e5e7eb", "#374151", Figure::Horizontal),
        _ => ("#f3f4f6", "#111827", Figure::Vertical),
    };
    Look {
        ground,
        ink,
        figure,
    }
}

/// The `<pattern>` of `status`, with id `{prefix}-{n}`.
fn pattern(id: &str, status: &str) -> Markup {
    let l = look(status);
    html! {
        pattern id=(id) patternUnits="userSpaceOnUse" width="6" height="6" {
            rect width="6" height="6" fill=(l.ground) {}
            @match l.figure {
                Figure::Solid => {},
                Figure::Diagonal => path d="M-1,1 l2,-2 M0,6 l6,-6 M5,7 l2,-2" stroke=(l.ink) stroke-width="1.6" {},
                Figure::Cross => path d="M0,0 L6,6 M6,0 L0,6" stroke=(l.ink) stroke-width="1.1" {},
                Figure::Dots => circle cx="3" cy="3" r="1.5" fill=(l.ink) {},
                Figure::Horizontal => path d="M0,3 H6" stroke=(l.ink) stroke-width="1.6" {},
                Figure::Vertical => path d="M3,0 V6" stroke=(l.ink) stroke-width="1.6" {},
            }
        }
    }
}

/// A count, short: `987`, `12.3k`, `4.5M`, `1.2G`.
pub fn count(n: u64) -> String {
    match n {
        0..10_000 => n.to_string(),
        10_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}M", n as f64 / 1e6),
        _ => format!("{:.1}G", n as f64 / 1e9),
    }
}

/// A duration in nanoseconds, in the unit that reads best.
pub fn duration(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} ms", ns as f64 / 1e6),
        _ => format!("{:.2} s", ns as f64 / 1e9),
    }
}

/// The least of 1, 2, 5 × 10ⁿ at or above `n` (at least 1).
fn nice_ceiling(n: u64) -> u64 {
    let mut step = 1u64;
    loop {
        for m in [1, 2, 5] {
            let v = step.saturating_mul(m);
            if v >= n || v == u64::MAX {
                return v;
            }
        }
        step = step.saturating_mul(10);
    }
}

/// The value axis's ticks: 0, the top, and half of it when that is a whole number.
fn ticks(top: f64) -> Vec<f64> {
    match top as u64 % 2 {
        0 => vec![0.0, top / 2.0, top],
        _ => vec![0.0, top],
    }
}

/// One bar of the time picture: a bucket of time and its count per status.
pub struct Column {
    /// The bucket's start, as the axis shows it.
    pub label: String,
    /// The bucket's span, for the hover text.
    pub title: String,
    /// The calls of the bucket, as a link (the calls list, filtered to the bucket).
    pub href: String,
    /// One count per entry of the picture's statuses.
    pub counts: Vec<u64>,
}

/// Calls over time, a stacked bar per bucket, one pattern per status.
pub fn over_time(columns: &[Column], statuses: &[&str], summary: &str) -> Markup {
    const W: f64 = 960.0;
    const H: f64 = 330.0;
    let (left, right, top, plot_h) = (56.0, 12.0, 22.0, 220.0);
    let plot_w = W - left - right;
    let n = columns.len().max(1) as f64;
    let slot = plot_w / n;
    let bar = (slot * 0.8).clamp(1.0, 80.0);
    let totals: Vec<u64> = columns.iter().map(|c| c.counts.iter().sum()).collect();
    let ymax = nice_ceiling(totals.iter().copied().max().unwrap_or(0)) as f64;
    let y = |v: f64| top + plot_h - v / ymax * plot_h;
    let every = columns.len().div_ceil(8).max(1);
    let sums: Vec<u64> = (0..statuses.len())
        .map(|s| {
            columns
                .iter()
                .map(|c| c.counts.get(s).copied().unwrap_or(0))
                .sum()
        })
        .collect();
    html! {
        svg.picture role="img" aria-label=(summary) viewBox=(format!("0 0 {W} {H}")) width=(W) height=(H) {
            title { (summary) }
            defs { @for (i, s) in statuses.iter().enumerate() { (pattern(&format!("time-{i}"), s)) } }
            // The value axis: 0, half and the top, with grid lines.
            @for v in ticks(ymax) {
                line x1=(left) x2=(W - right) y1=(y(v)) y2=(y(v)) stroke="#d1d5db" stroke-width="1" {}
                text x=(left - 6.0) y=(y(v) + 4.0) text-anchor="end" font-size="11" fill="#111" { (count(v as u64)) }
            }
            text x="4" y="14" font-size="11" fill="#111" { "calls" }
            @for (i, c) in columns.iter().enumerate() {
                @let x = left + slot * i as f64 + (slot - bar) / 2.0;
                a href=(c.href) {
                    @for (s, status, below, v) in stack(&c.counts, statuses) {
                        @if v > 0 {
                            @let (y0, y1) = (y((below + v) as f64), y(below as f64));
                            rect.segment x=(format!("{x:.1}")) y=(format!("{y0:.1}")) width=(format!("{bar:.1}")) height=(format!("{:.1}", (y1 - y0).max(0.5)))
                                fill=(format!("url(#time-{s})")) stroke="#111" stroke-width="0.6" data-status=(status) data-count=(v) {
                                title { (shown(&c.title)) ": " (v) " " (status) }
                            }
                            @if y1 - y0 >= 14.0 && bar >= 16.0 {
                                text x=(format!("{:.1}", x + bar / 2.0)) y=(format!("{:.1}", (y0 + y1) / 2.0 + 4.0)) text-anchor="middle" font-size="11"
                                    fill="#111" stroke="#fff" stroke-width="3" paint-order="stroke" { (count(v)) }
                            }
                        }
                    }
                }
                text.total x=(format!("{:.1}", x + bar / 2.0)) y=(format!("{:.1}", y(totals[i] as f64) - 4.0)) text-anchor="middle" font-size="10" fill="#111" { (count(totals[i])) }
                @if i % every == 0 {
                    line x1=(format!("{:.1}", x + bar / 2.0)) x2=(format!("{:.1}", x + bar / 2.0)) y1=(top + plot_h) y2=(top + plot_h + 4.0) stroke="#111" {}
                    text x=(format!("{:.1}", x + bar / 2.0)) y=(top + plot_h + 17.0) text-anchor="middle" font-size="11" fill="#111" { (shown(&c.label)) }
                }
            }
            line x1=(left) x2=(W - right) y1=(top + plot_h) y2=(top + plot_h) stroke="#111" {}
            // The legend: each status's pattern, its name and how many calls in all.
            @for (s, status) in statuses.iter().enumerate() {
                @let lx = left + 180.0 * s as f64;
                g.legend {
                    rect x=(lx) y=(H - 34.0) width="18" height="18" fill=(format!("url(#time-{s})")) stroke="#111" {}
                    text x=(lx + 24.0) y=(H - 20.0) font-size="13" fill="#111" { (status) ": " (sums[s]) }
                }
            }
        }
    }
}

/// Each status's segment of a bar: its index, its status, the count below it, its count.
fn stack<'a>(counts: &[u64], statuses: &[&'a str]) -> Vec<(usize, &'a str, u64, u64)> {
    let mut below = 0u64;
    let mut out = Vec::with_capacity(statuses.len());
    for (s, status) in statuses.iter().enumerate() {
        let v = counts.get(s).copied().unwrap_or(0);
        out.push((s, *status, below, v));
        below += v;
    }
    out
}

/// One row of a distribution picture: a tool and its values' spread.
pub struct Spread {
    pub name: String,
    pub n: usize,
    pub min: u64,
    pub median: u64,
    pub p90: u64,
    pub max: u64,
}

impl Spread {
    /// The spread of `values` (sorted here), nearest-rank quantiles; `None` when empty.
    pub fn of(name: &str, values: &mut [u64]) -> Option<Spread> {
        values.sort_unstable();
        let n = values.len();
        let at = |q: f64| values[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        (n > 0).then(|| Spread {
            name: name.to_string(),
            n,
            min: values[0],
            median: at(0.5),
            p90: at(0.9),
            max: values[n - 1],
        })
    }

    /// The numbers as one line of text.
    pub fn text(&self, unit: fn(u64) -> String) -> String {
        format!(
            "n {} · min {} · median {} · p90 {} · max {}",
            self.n,
            unit(self.min),
            unit(self.median),
            unit(self.p90),
            unit(self.max)
        )
    }
}

/// Per tool, a box from the median to p90 on a line from the minimum to the maximum (a log
/// scale shared by the rows), with the numbers written beside it.
pub fn spreads(rows: &[Spread], unit: fn(u64) -> String, summary: &str) -> Markup {
    const W: f64 = 960.0;
    let (left, right, top, row_h) = (180.0, 16.0, 12.0, 46.0);
    let plot_w = W - left - right;
    let h = top + row_h * rows.len() as f64 + 30.0;
    let lo = rows.iter().map(|r| r.min).min().unwrap_or(1).max(1) as f64;
    let hi = (rows.iter().map(|r| r.max).max().unwrap_or(1) as f64).max(lo * 10.0);
    let x = |v: u64| left + ((v.max(1) as f64).ln() - lo.ln()) / (hi.ln() - lo.ln()) * plot_w;
    let f = |v: f64| format!("{v:.1}");
    let ticks: Vec<u64> = (0..20)
        .map(|e| 10u64.saturating_pow(e))
        .filter(|t| (*t as f64) >= lo && (*t as f64) <= hi)
        .collect();
    let axis_y = top + row_h * rows.len() as f64;
    html! {
        svg.picture role="img" aria-label=(summary) viewBox=(format!("0 0 {W} {h}")) width=(W) height=(h) {
            title { (summary) }
            @for t in &ticks {
                line x1=(f(x(*t))) x2=(f(x(*t))) y1=(top) y2=(axis_y) stroke="#e5e7eb" {}
                text x=(f(x(*t))) y=(axis_y + 16.0) text-anchor="middle" font-size="11" fill="#111" { (unit(*t)) }
            }
            @for (i, r) in rows.iter().enumerate() {
                @let cy = top + row_h * i as f64 + 16.0;
                @let line_text = r.text(unit);
                g.spread data-tool=(shown(&r.name)) {
                    title { (shown(&r.name)) ": " (line_text) }
                    text x=(left - 8.0) y=(cy + 4.0) text-anchor="end" font-size="12" fill="#111" { (shown(&short(&r.name, 24))) }
                    line x1=(f(x(r.min))) x2=(f(x(r.max))) y1=(cy) y2=(cy) stroke="#374151" stroke-width="1.5" {}
                    line x1=(f(x(r.min))) x2=(f(x(r.min))) y1=(cy - 6.0) y2=(cy + 6.0) stroke="#374151" stroke-width="1.5" {}
                    line x1=(f(x(r.max))) x2=(f(x(r.max))) y1=(cy - 6.0) y2=(cy + 6.0) stroke="#374151" stroke-width="1.5" {}
                    rect x=(f(x(r.median))) y=(cy - 7.0) width=(f((x(r.p90) - x(r.median)).max(2.0))) height="14" fill="#bfdbfe" stroke="#1e3a8a" {}
                    line x1=(f(x(r.median))) x2=(f(x(r.median))) y1=(cy - 9.0) y2=(cy + 9.0) stroke="#1e3a8a" stroke-width="3" {}
                    text x=(left) y=(cy + 24.0) font-size="11" fill="#111" { (line_text) }
                }
            }
            line x1=(left) x2=(W - right) y1=(axis_y) y2=(axis_y) stroke="#111" {}
        }
    }
}

/// Horizontal bars, one per `(label, count)`, drawn with the pattern of `status`.
pub fn bars(rows: &[(String, u64)], status: &str, summary: &str) -> Markup {
    const W: f64 = 960.0;
    let (left, top, row_h) = (300.0, 8.0, 26.0);
    let plot_w = W - left - 80.0;
    let h = top + row_h * rows.len() as f64 + 8.0;
    let max = rows.iter().map(|r| r.1).max().unwrap_or(1).max(1) as f64;
    let f = |v: f64| format!("{v:.1}");
    html! {
        svg.picture role="img" aria-label=(summary) viewBox=(format!("0 0 {W} {h}")) width=(W) height=(h) {
            title { (summary) }
            defs { (pattern("bars-0", status)) }
            @for (i, (label, n)) in rows.iter().enumerate() {
                @let y = top + row_h * i as f64;
                @let w = (*n as f64 / max * plot_w).max(2.0);
                g.bar {
                    title { (shown(label)) ": " (n) }
                    text x=(left - 8.0) y=(y + 15.0) text-anchor="end" font-size="12" fill="#111" { (shown(&short(label, 44))) }
                    rect x=(left) y=(y + 2.0) width=(f(w)) height=(row_h - 6.0) fill="url(#bars-0)" stroke="#111" stroke-width="0.6" {}
                    text.count x=(f(left + w + 6.0)) y=(y + 15.0) font-size="12" fill="#111" { (n) }
                }
            }
        }
    }
}

/// `s` cut to `n` characters (an ellipsis says so); the whole is in the hover text.
fn short(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_are_nearest_rank() {
        let mut v: Vec<u64> = (1..=10).rev().collect();
        let s = Spread::of("t", &mut v).unwrap();
        assert_eq!((s.min, s.median, s.p90, s.max, s.n), (1, 5, 9, 10, 10));
        assert!(Spread::of("t", &mut []).is_none());
        assert_eq!(nice_ceiling(0), 1);
        assert_eq!(nice_ceiling(3), 5);
        assert_eq!(nice_ceiling(120), 200);
        assert_eq!(duration(1_500_000), "1.5 ms");
        assert_eq!(count(12_345), "12.3k");
    }

    #[test]
    fn svg_elements_are_closed_and_text_escaped() {
        let cols = [Column {
            label: "<b>".into(),
            title: "t".into(),
            href: "/calls".into(),
            counts: vec![3, 0, 1],
        }];
        let svg = over_time(&cols, &["completed", "tool_error", "refused"], "s").into_string();
        assert!(svg.contains("&lt;b&gt;") && !svg.contains("<b>"), "{svg}");
        assert!(!svg.contains("style="), "{svg}");
        assert!(svg.contains("<rect") && svg.contains("</rect>"), "{svg}");
        assert!(
            svg.contains("completed: 3") && svg.contains("refused: 1"),
            "{svg}"
        );
    }
}
