//! Integrity: every chain walked with the checks of `vak audit verify` ([`Journal::verify_any`]),
//! on each request; each chain's head and length, the first bad entry named.

use super::{Page, call_href, shown};
use crate::journal::Journal;
use maud::html;

/// The verdict on the whole journal, now.
pub fn page(journal: &Journal, keys: &[String]) -> Page {
    let started = std::time::Instant::now();
    let v = match journal.verify_any(keys) {
        Ok(v) => v,
        Err(e) => return Page::error(&e.to_string()),
    };
    let took = started.elapsed();
    let content = html! {
        @match &v.first_bad {
            None => p.ok #verdict {
                "Journal ok: " (v.entries) " entries in " (v.heads.len()) " chains, chains and signatures verified ("
                (v.records) " records, " (v.started) " started entries; "
                (v.interrupted.len()) " calls interrupted, " (v.running.len()) " running)."
            },
            Some((seq, why)) => p.bad #verdict {
                "Journal BAD at entry #" (seq) ": " (shown(why))
            },
        }
        @if !keys.is_empty() {
            p { "Every entry must be signed by one of: " @for k in keys { code { (shown(k)) } " " } }
        }
        p { "Checked in " (format!("{:.1}", took.as_secs_f64() * 1000.0)) " ms. Keep the heads: a journal cut short shows against them." }
        h2 { "Chains" }
        table {
            thead { tr { th { "chain" } th { "length (head's place)" } th { "head hash" } } }
            tbody { @for h in &v.heads {
                tr {
                    td.mono { (shown(h.node.as_deref().unwrap_or("(legacy)"))) }
                    td.mono { (h.seq) }
                    td.mono { (shown(&h.hash)) }
                }
            } }
        }
        @for (title, calls) in [("Interrupted calls", &v.interrupted), ("Running calls", &v.running)] {
            @if !calls.is_empty() {
                h2 { (title) }
                ul { @for u in calls {
                    li { a href=(call_href(&u.call_id)) { (shown(&u.call_id)) } " started at "
                         (shown(u.chain.as_deref().unwrap_or("(legacy)"))) " #" (u.chain_seq) }
                } }
            }
        }
    };
    Page::ok("Integrity", content)
}
