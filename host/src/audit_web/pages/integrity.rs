//! Integrity: each chain's head and length (read from the index, at once), and the verdict of the
//! last verification (the checks of `vak audit verify`), which runs only when asked for: a
//! button, then a progress bar (`/integrity.js` updates it; without JavaScript a plain link
//! reloads the page). A verdict stands for as long as the journal is as it was walked.

use super::super::verify::{Done, Status};
use super::{Page, call_href, shown};
use crate::journal::Tip;
use maud::{Markup, html};

/// The page, for the journal as it is (`tip`) and the verifier's `status`; `shared`: the chains
/// are a shared store's nodes'.
pub fn page(tip: &Tip, status: &Status, keys: &[String], shared: bool) -> Page {
    let chain = if shared { "node" } else { "chain" };
    let current = status.last.as_ref().filter(|d| d.key == *tip);
    let content = html! {
        @if let Some(r) = &status.running {
            section #running {
                p { "Verifying every chain: "
                    span #progress-text { (r.checked()) " of " (r.total) " entries checked" }
                    " (" (r.started.elapsed().as_secs()) " s so far)." }
                progress #progress max=(r.total.max(1)) value=(r.checked()) { (r.checked()) " of " (r.total) }
                p { a #refresh href="/integrity" { "Refresh" } " to see how far it has come (the page refreshes itself where JavaScript runs)." }
                script src="/integrity.js" {}
            }
        }
        @match (current, &status.last) {
            (Some(done), _) => {
                (verdict(done))
                p { "This is the journal as it is now: no entry was added or changed since it was verified." }
            }
            (None, Some(done)) => {
                p.stale #stale { "The journal has changed since the last verification (new entries, or a change to the database): verify it again." }
                details { summary { "The last verification" } (verdict(done)) }
            }
            (None, None) => p #never { "Not verified yet by this server." },
        }
        @if status.running.is_none() && current.is_none() {
            form method="get" action="/integrity" {
                input type="hidden" name="verify" value="1";
                button #verify type="submit" { "Verify every chain now" }
                " (" (tip.entries) " entries: every hash, link and signature is checked)"
            }
        }
        @if !keys.is_empty() {
            p { "Every entry must be signed by one of: " @for k in keys { code { (shown(k)) } " " } }
        }
        h2 { "Chains" }
        p { "Where each chain ends now (keep the heads: a journal cut short shows against them)." }
        @if shared {
            p #shared { "A shared store: one chain per node, every node's read from the database. Entry numbers (#) are the store's commit order across the nodes." }
        }
        table {
            thead { tr { th { (chain) } th { "length (head's place)" } th { "head hash" } } }
            tbody { @for h in &tip.heads {
                tr {
                    td.mono { @match &h.node {
                        Some(n) => a.node href=(super::query_href("/calls", &[("node", n)])) { (shown(n)) },
                        None => "(legacy)",
                    } }
                    td.mono { (h.seq) }
                    td.mono { (shown(&h.hash)) }
                }
            } }
        }
    };
    Page::ok("Integrity", content)
}

/// A finished verification's verdict: ok, or the first bad entry named (with a link to its
/// call when the journal can say which).
fn verdict(done: &Done) -> Markup {
    let took = format!("{:.1}", done.took.as_secs_f64() * 1000.0);
    let v = match &done.result {
        Ok(v) => v,
        Err(e) => {
            return html! { p.bad #verdict { "The journal could not be read: " (shown(e)) } };
        }
    };
    html! {
        @match &v.first_bad {
            None if !v.unsigned.is_empty() => p.bad #verdict {
                "Journal UNSIGNED: " (v.entries) " entries in " (v.heads.len()) " chains are linked, but "
                (v.unsigned_entries())
                " of them were written unsigned and no checkpoint signs them: not verified."
            },
            None => p.ok #verdict {
                "Journal ok: " (v.entries) " entries in " (v.heads.len()) " chains, chains and signatures verified ("
                (v.records) " records, " (v.started) " started entries; "
                (v.interrupted.len()) " calls interrupted, " (v.running.len()) " running)."
            },
            Some((seq, why)) => p.bad #verdict {
                "Journal BAD at entry #" (seq) ": " (shown(why))
                " Everything before it checked out (" (v.entries) " entries)."
            },
        }
        p { "Verified at " (shown(&done.at)) " in " (took) " ms." }
        @if !v.unsigned.is_empty() {
            h2 { "Unsigned entries" }
            ul { @for u in &v.unsigned {
                li { (shown(u.chain.as_deref().unwrap_or("(legacy)"))) " #" (u.from) " to #" (u.to) }
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
    }
}

/// The script that moves the progress bar (served as a file: the CSP runs no inline script),
/// and reloads the page when the walk is over.
pub const SCRIPT: &str = r#"'use strict';
(function () {
  var bar = document.getElementById('progress');
  var text = document.getElementById('progress-text');
  if (!bar) { return; }
  function poll() {
    fetch('/integrity/progress', { credentials: 'same-origin' })
      .then(function (r) { return r.json(); })
      .then(function (p) {
        if (p.state === 'running') {
          bar.max = Math.max(p.total, 1);
          bar.value = p.done;
          text.textContent = p.done + ' of ' + p.total + ' entries checked';
          setTimeout(poll, 250);
        } else {
          location.replace('/integrity');
        }
      })
      .catch(function () { setTimeout(poll, 1000); });
  }
  setTimeout(poll, 250);
})();
"#;
