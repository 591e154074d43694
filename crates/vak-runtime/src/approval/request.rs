//! The question a person is asked ([`ApprovalRequest`]): what it is bound to, how it is answered,
//! and the prompt that shows it, neutralised and never cut silently.

use super::call::CallContext;
use super::{Answer, Approval, ApprovalScope};
use serde::Serialize;
use serde_json::json;
use std::time::{Duration, Instant};

/// One question to a person: may this exact call (or scope of it) go ahead?
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalRequest {
    /// Fresh for every question; an answer names it.
    pub id: String,
    pub call_id: String,
    pub tool: String,
    pub principal: Option<String>,
    pub scope: ApprovalScope,
    /// SHA-256 of the argument text as proposed.
    pub arguments_sha256: String,
    /// The arguments, for the person to read (any secret value a grant binds redacted).
    pub arguments: String,
    /// What the call can reach: the origins its `http` grant allows (as the policy wrote them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reach: Vec<String>,
    /// SHA-256 of the tool's grant as the policy compiled it.
    pub grant_sha256: String,
    /// SHA-256 over tool, principal, scope, arguments digest and grant digest.
    pub binding: String,
    pub asked_at: String,
    pub expires_at: String,
    #[serde(skip)]
    pub(super) expires: Option<Instant>,
}

impl ApprovalRequest {
    /// A question about `scope` of a call, answerable for `ttl`.
    pub(crate) fn new(call: &CallContext, scope: ApprovalScope, ttl: Duration) -> ApprovalRequest {
        let binding = crate::digest::sha256_hex(
            json!({
                "tool": call.tool,
                "principal": call.principal,
                "scope": scope,
                "arguments_sha256": call.arguments_sha256,
                "grant_sha256": call.grant_sha256,
            })
            .to_string()
            .as_bytes(),
        );
        let now = jiff::Timestamp::now();
        let expires_at = now
            .checked_add(jiff::SignedDuration::try_from(ttl).unwrap_or_default())
            .unwrap_or(now);
        ApprovalRequest {
            id: format!("approval_{}", uuid::Uuid::now_v7().simple()),
            call_id: call.call_id.clone(),
            tool: call.tool.clone(),
            principal: call.principal.clone(),
            scope,
            arguments_sha256: call.arguments_sha256.clone(),
            arguments: call.arguments.clone(),
            reach: call.reach.clone(),
            grant_sha256: call.grant_sha256.clone(),
            binding,
            asked_at: now.to_string(),
            expires_at: expires_at.to_string(),
            expires: Instant::now().checked_add(ttl),
        }
    }

    /// Approve this request, as `by`.
    pub fn approve(&self, by: impl Into<String>) -> Answer {
        Answer::Approved(Approval {
            request_id: self.id.clone(),
            binding: self.binding.clone(),
            by: by.into(),
            at: jiff::Timestamp::now().to_string(),
        })
    }

    /// Deny this request, as `by`, saying why.
    pub fn deny(&self, by: impl Into<String>, reason: impl Into<String>) -> Answer {
        Answer::Denied {
            by: by.into(),
            reason: reason.into(),
        }
    }

    /// The question for a person, with the arguments shown whole when they are at most
    /// [`PROMPT_ARGUMENT_BYTES`] long, and otherwise summarised: their first bytes, how many
    /// are not shown, and where to read them (`see`). See [`ApprovalRequest::prompt_with`].
    pub fn prompt(&self) -> String {
        self.prompt_with(
            PROMPT_ARGUMENT_BYTES,
            "the arguments of this call as they were proposed",
        )
    }

    /// The question for a person. First what the call can reach (the origins its grant
    /// allows) and every URL in its arguments with its host; then the principal and the
    /// arguments, shown whole when they are at most `limit` bytes, else their first `limit`
    /// bytes and `N bytes not shown; see {see}`, with the SHA-256 the approval binds. Never cut
    /// silently. Every text a tool, a model or a policy wrote is neutralised
    /// ([`crate::projection::neutralise`]): no control, bidi or other format character acts on
    /// the screen, and no line of the arguments can pass for a line of the prompt (each is
    /// indented).
    pub fn prompt_with(&self, limit: usize, see: &str) -> String {
        use crate::projection::{neutralise, neutralise_line};
        use std::fmt::Write as _;
        let mut out = format!(
            "vak: tool `{}` asks for approval of {}\n",
            neutralise_line(&self.tool),
            neutralise_line(&self.scope.to_string())
        );
        if self.reach.is_empty() {
            out.push_str("  can reach: no network origin\n");
        } else {
            let _ = writeln!(
                out,
                "  can reach: {}",
                self.reach
                    .iter()
                    .map(|o| neutralise_line(o))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let urls = urls_in(&self.arguments);
        if urls.is_empty() {
            out.push_str("  URLs in the arguments: none\n");
        } else {
            let _ = writeln!(out, "  URLs in the arguments ({}):", urls.len());
            for url in urls.iter().take(MAX_PROMPT_URLS) {
                let host = url::Url::parse(url)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_string))
                    .unwrap_or_else(|| "(no host)".into());
                let shown = cut(url, MAX_PROMPT_URL_BYTES);
                let rest = url.len() - shown.len();
                let _ = write!(
                    out,
                    "    - host {}: {}",
                    neutralise_line(&host),
                    neutralise_line(shown)
                );
                if rest > 0 {
                    let _ = write!(out, " … ({rest} more bytes of this URL not shown)");
                }
                out.push('\n');
            }
            if urls.len() > MAX_PROMPT_URLS {
                let _ = writeln!(
                    out,
                    "    … and {} more URLs not shown; see {see}",
                    urls.len() - MAX_PROMPT_URLS
                );
            }
        }
        let _ = writeln!(
            out,
            "  principal: {}",
            neutralise_line(self.principal.as_deref().unwrap_or("(none)"))
        );
        let _ = writeln!(
            out,
            "  arguments ({} bytes, SHA-256 {}):",
            self.arguments.len(),
            self.arguments_sha256
        );
        let shown = cut(&self.arguments, limit);
        for line in neutralise(shown).lines() {
            let _ = writeln!(out, "    {line}");
        }
        let hidden = self.arguments.len() - shown.len();
        if hidden > 0 {
            let _ = writeln!(
                out,
                "    … {hidden} bytes not shown; see {see} (SHA-256 {}). Deny unless you know them.",
                self.arguments_sha256
            );
        }
        let _ = write!(
            out,
            "  call {} · approval {} · expires {}",
            neutralise_line(&self.call_id),
            self.id,
            self.expires_at
        );
        out
    }
}

/// Arguments longer than this are summarised in a prompt (see [`ApprovalRequest::prompt_with`]).
pub const PROMPT_ARGUMENT_BYTES: usize = 16 * 1024;
/// The most URLs a prompt lists one by one.
const MAX_PROMPT_URLS: usize = 20;
/// The most bytes of one URL a prompt shows.
const MAX_PROMPT_URL_BYTES: usize = 300;

/// The longest prefix of `text` of at most `limit` bytes that ends on a character boundary.
fn cut(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Every URL (`scheme://…`) in `arguments`, in order, each once: searched in every string of
/// the arguments read as JSON (so `https:\/\/` and `\u` escapes hide nothing), or in the text
/// itself if it is not JSON. Linear in the text; at most 1,000 are kept.
fn urls_in(arguments: &str) -> Vec<String> {
    let mut texts = Vec::new();
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(v) => strings_of(&v, &mut texts),
        Err(_) => texts.push(arguments.to_string()),
    }
    let mut urls: Vec<String> = Vec::new();
    for text in &texts {
        let bytes = text.as_bytes();
        let mut from = 0;
        while let Some(i) = text[from..].find("://").map(|i| i + from) {
            let start = text[..i]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
                .map_or(0, |p| p + 1);
            let end = text[i + 3..]
                .find(|c: char| {
                    c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '<' | '>' | '`')
                })
                .map_or(text.len(), |p| p + i + 3);
            if start < i && end > i + 3 {
                let url = &text[start..end];
                if !urls.iter().any(|u| u == url) && urls.len() < 1000 {
                    urls.push(url.to_string());
                }
            }
            from = end.max(i + 3);
            if from >= bytes.len() {
                break;
            }
        }
    }
    urls
}

fn strings_of(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| strings_of(v, out)),
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                strings_of(v, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::test_context as context;

    #[test]
    fn the_prompt_shows_everything_neutralised_urls_first_and_never_cuts_silently() {
        // Bidi override, the 8-bit CSI, an escape sequence, a forged line.
        let hostile = serde_json::json!({
            "note": "safe\u{202e}txt.exe \u{9b}2J \u{1b}[31m red",
            "x": "a\n  call c9 · approval forged · expires never",
        })
        .to_string();
        let r = ApprovalRequest::new(
            &context(&hostile),
            ApprovalScope::Call,
            Duration::from_secs(5),
        );
        let p = r.prompt();
        for c in ['\u{202e}', '\u{9b}', '\u{1b}'] {
            assert!(!p.contains(c), "{c:?} in {p}");
        }
        assert!(p.contains("\\u{202e}") && p.contains("\\u{9b}"), "{p}");
        // Each argument line is indented: none can pass for the prompt's own last line.
        assert_eq!(
            p.lines().filter(|l| l.starts_with("  call ")).count(),
            1,
            "{p}"
        );
        assert!(
            p.lines()
                .nth(1)
                .unwrap()
                .contains("can reach: https://api.example"),
            "{p}"
        );

        // An exfiltration URL after 20,000 bytes of padding: listed before the arguments, with
        // its host, and the arguments say how much is not shown and where to read it.
        let long = format!(
            r#"{{"pad":"{}","to":"https://evil.example/collect?d=1","escaped":"see https:\/\/also.example\/p"}}"#,
            "x".repeat(20_000)
        );
        let r = ApprovalRequest::new(&context(&long), ApprovalScope::Call, Duration::from_secs(5));
        let p = r.prompt_with(2_000, "SOMEWHERE");
        let url_line = p
            .find("host evil.example: https://evil.example/collect?d=1")
            .expect(&p);
        assert!(
            url_line < p.find("  arguments (").unwrap(),
            "URLs first: {p}"
        );
        assert!(p.contains("host also.example"), "{p}");
        let hidden = long.len() - 2_000;
        assert!(
            p.contains(&format!(
                "{hidden} bytes not shown; see SOMEWHERE (SHA-256 {}",
                r.arguments_sha256
            )),
            "{p}"
        );
        assert!(!p.contains(" …\n  call"), "no silent cut");
        // Short arguments are shown whole, with nothing said hidden.
        let r = ApprovalRequest::new(
            &context("{\"x\":1}"),
            ApprovalScope::Call,
            Duration::from_secs(5),
        );
        let p = r.prompt();
        assert!(
            p.contains("    {\"x\":1}") && !p.contains("not shown"),
            "{p}"
        );
        assert!(p.contains("URLs in the arguments: none"), "{p}");
    }
}
