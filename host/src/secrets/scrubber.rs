//! The scrubber: finds the secret values a call could use in any text or bytes that cross the
//! sandbox's boundary, and redacts them.

use super::SecretValue;
use super::forms::{FormKind, is_base64_char};
use super::views;

/// What a scrubbed text had in it: how many secret occurrences were replaced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scrubbed {
    pub replaced: usize,
}

/// What is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not scrubbed: a 1-3 byte "secret" would redact ordinary text
/// everywhere and protects nothing.
const MIN_SCRUB_LEN: usize = 4;

/// An encoded form (base64, hex) shorter than this is not looked for: a few base64 letters
/// occur in ordinary text and images by chance. The value itself still is, from
/// [`MIN_SCRUB_LEN`] bytes.
const MIN_FORM_LEN: usize = 8;

/// How many layers of escaping are undone, one kind over another (a quoted-printable form
/// percent-encoded into a URL is two).
const MAX_LAYERS: usize = 2;

/// How many leading bytes of a form the automaton holds. A match of them is followed through
/// the rest of the form byte by byte, so the automaton's size does not grow with a value's
/// length (a 2.6 MB key costs no more to build than a 64-byte one), and a text holding only
/// the first 64 bytes of a long value's form is caught too.
const FRAGMENT: usize = 64;

/// One form of one value, rendered whole only when a text holds its first bytes.
#[derive(Clone)]
struct Form {
    value: usize,
    kind: FormKind,
    whole: std::sync::OnceLock<Vec<u8>>,
}

/// A value the scrubber knows, and what binds it (the credential aliases of a grant).
#[derive(Clone)]
struct Known {
    value: SecretValue,
    labels: Vec<String>,
}

/// One automaton over the leading bytes of some forms, and which form each pattern is.
#[derive(Clone)]
struct Automaton {
    matcher: aho_corasick::AhoCorasick,
    forms: Vec<usize>,
}

/// Where a value was found in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hit {
    start: usize,
    end: usize,
    value: usize,
}

/// Finds the secret values a call could use in text and bytes that cross the sandbox's
/// boundary, in the forms a text commonly carries them.
///
/// Recognised, at any offset and surrounded by anything:
/// - the value itself;
/// - its base64, standard and URL-safe alphabets, at each of the three alignments a value can
///   have inside a longer encoded text (`base64("Bearer " + V)`, `base64("user:" + V)`), padded
///   or not;
/// - its hexadecimal digits in any case (mixed too);
/// - each of those after one layer of percent encoding (either case of hex digit, any subset of
///   bytes escaped), form encoding (`+` for space), JSON string escapes (`\u0073`, `\/`,
///   surrogate pairs), quoted-printable (`=73`, soft line breaks), or line breaks inserted
///   (base64 wrapped at 64 or 76 columns).
///
/// A match is redacted whole, as far as the text goes on agreeing with the form, with the
/// escapes it was decoded from. The cost is linear in the text: two automata (one exact, one
/// case-insensitive for hex) over the first [`FRAGMENT`] bytes of each form, run over the text
/// and over each view of it that the text's characters call for; the automata are built once
/// per call, and their size does not depend on a value's length.
///
/// Not recognised: a transform the guest computes itself (reversed, XORed, encrypted,
/// compressed by the guest, split across requests, encoded twice), and a part of a value that
/// does not begin where the value begins (its last half alone).
#[derive(Clone)]
pub struct Scrubber {
    known: Vec<Known>,
    forms: Vec<Form>,
    exact: Option<Automaton>,
    folded: Option<Automaton>,
    /// Some value holds a space: the form-encoding view is worth building.
    space: bool,
}

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Scrubber({} values, {} forms, redacted)",
            self.known.len(),
            self.forms.len()
        )
    }
}

impl Scrubber {
    /// A scrubber for these values.
    pub fn new<'a>(values: impl IntoIterator<Item = &'a SecretValue>) -> Scrubber {
        Scrubber::labelled(values.into_iter().map(|v| (v.clone(), String::new())))
    }

    /// A scrubber for these values, each with a label (a credential's alias) that
    /// [`Scrubber::labels_in`] answers with; a value given twice keeps both labels.
    pub fn labelled(values: impl IntoIterator<Item = (SecretValue, String)>) -> Scrubber {
        let mut known: Vec<Known> = Vec::new();
        for (value, label) in values {
            if value.expose().len() < MIN_SCRUB_LEN {
                continue;
            }
            match known.iter_mut().find(|k| k.value == value) {
                Some(k) => {
                    if !label.is_empty() && !k.labels.contains(&label) {
                        k.labels.push(label);
                    }
                }
                None => known.push(Known {
                    value,
                    labels: if label.is_empty() {
                        vec![]
                    } else {
                        vec![label]
                    },
                }),
            }
        }
        let mut forms = Vec::new();
        let mut exact: Vec<Vec<u8>> = Vec::new();
        let mut exact_forms = Vec::new();
        let mut folded: Vec<Vec<u8>> = Vec::new();
        let mut folded_forms = Vec::new();
        for (i, k) in known.iter().enumerate() {
            let bytes = k.value.expose().as_bytes();
            // The leading bytes of a form are the form of the value's leading bytes (a few more
            // than FRAGMENT: base64 takes 4 characters for 3 bytes, hex 2 for 1).
            let head = &bytes[..bytes.len().min(FRAGMENT)];
            for kind in FormKind::ALL {
                if kind != FormKind::Raw && kind.len(bytes.len()) < MIN_FORM_LEN {
                    continue;
                }
                let mut fragment = kind.render(head);
                fragment.truncate(FRAGMENT);
                let (patterns, ids) = if kind.folded() {
                    (&mut folded, &mut folded_forms)
                } else {
                    (&mut exact, &mut exact_forms)
                };
                // Two forms with the same leading bytes (a URL-safe encoding without `+` or
                // `/` is the standard one) are one pattern.
                if patterns.contains(&fragment) {
                    continue;
                }
                patterns.push(fragment);
                ids.push(forms.len());
                forms.push(Form {
                    value: i,
                    kind,
                    whole: std::sync::OnceLock::new(),
                });
            }
        }
        let build = |patterns: Vec<Vec<u8>>, ids: Vec<usize>, fold: bool| {
            if patterns.is_empty() {
                return None;
            }
            aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostLongest)
                .ascii_case_insensitive(fold)
                .build(&patterns)
                .ok()
                .map(|matcher| Automaton {
                    matcher,
                    forms: ids,
                })
        };
        let space = known.iter().any(|k| k.value.expose().contains(' '));
        Scrubber {
            exact: build(exact, exact_forms, false),
            folded: build(folded, folded_forms, true),
            known,
            forms,
            space,
        }
    }

    /// A scrubber that finds nothing (a call that can use no secret).
    pub fn none() -> Scrubber {
        Scrubber {
            known: Vec::new(),
            forms: Vec::new(),
            exact: None,
            folded: None,
            space: false,
        }
    }

    /// Whether there is anything to look for.
    pub fn active(&self) -> bool {
        !self.known.is_empty()
    }

    /// Whether `value` is one of the values this scrubber looks for.
    pub fn knows(&self, value: &SecretValue) -> bool {
        self.known.iter().any(|k| k.value == *value)
    }

    /// Whether a text holding `value` would be redacted by this scrubber: it knows the value, or
    /// the value is too short to be looked for at all.
    pub fn covers(&self, value: &SecretValue) -> bool {
        value.expose().len() < MIN_SCRUB_LEN || self.knows(value)
    }

    /// Every place a value is found in `text`: in the text itself and in each decoded view of
    /// it, mapped back to the text.
    fn hits(&self, text: &[u8]) -> Vec<Hit> {
        let mut hits = Vec::new();
        if !self.active() {
            return hits;
        }
        self.scan_layers(text, MAX_LAYERS, None, &mut |start, end, value| {
            hits.push(Hit { start, end, value })
        });
        hits
    }

    /// Scan `bytes`, then each view of it that decodes something, down to `layers` layers of
    /// escaping (a form percent-encoded into a URL is two), each kind once on a path; `found`
    /// gets spans of `bytes`.
    fn scan_layers(
        &self,
        bytes: &[u8],
        layers: usize,
        above: Option<views::Kind>,
        found: &mut dyn FnMut(usize, usize, usize),
    ) {
        self.scan(bytes, found);
        if layers == 0 {
            return;
        }
        for kind in views::KINDS {
            if Some(kind) == above || (kind == views::Kind::Form && !self.space) {
                continue;
            }
            if let Some(view) = views::view(kind, bytes) {
                self.scan_layers(&view.bytes, layers - 1, Some(kind), &mut |s, e, value| {
                    let (start, end) = view.source(s, e);
                    found(start, end, value);
                });
            }
        }
    }

    /// Run both automata over `bytes`, following each match through its whole form.
    fn scan(&self, bytes: &[u8], found: &mut dyn FnMut(usize, usize, usize)) {
        for automaton in [&self.exact, &self.folded].into_iter().flatten() {
            let mut at = 0;
            while at < bytes.len() {
                let input = aho_corasick::Input::new(bytes).span(at..bytes.len());
                let Some(m) = automaton.matcher.find(input) else {
                    break;
                };
                let Some(form) = automaton
                    .forms
                    .get(m.pattern().as_usize())
                    .and_then(|&f| self.forms.get(f))
                else {
                    break;
                };
                let whole = form.whole.get_or_init(|| {
                    form.kind
                        .render(self.known[form.value].value.expose().as_bytes())
                });
                let rest = &bytes[m.start()..];
                let agree = rest
                    .iter()
                    .zip(whole)
                    .take_while(|(a, b)| {
                        if form.kind.folded() {
                            a.eq_ignore_ascii_case(b)
                        } else {
                            a == b
                        }
                    })
                    .count()
                    .max(m.len());
                let (mut start, mut end) = (m.start(), m.start() + agree);
                if let FormKind::Base64 { align, .. } = form.kind {
                    // The characters beside the core carry a few bits of the value too: the
                    // one before it (at an offset) and the one after it, with any padding.
                    if align > 0 && start > 0 && is_base64_char(bytes[start - 1]) {
                        start -= 1;
                    }
                    if end < bytes.len() && is_base64_char(bytes[end]) {
                        end += 1;
                    }
                    while end < bytes.len() && bytes[end] == b'=' && end - m.start() < agree + 3 {
                        end += 1;
                    }
                }
                found(start, end, form.value);
                at = end.max(m.start() + 1);
            }
        }
    }

    /// Whether `haystack` holds a secret in any of its forms.
    pub fn finds(&self, haystack: &[u8]) -> bool {
        !self.hits(haystack).is_empty()
    }

    /// The labels of every value found in `haystack` (a value given without a label is
    /// reported as the empty label), each once.
    pub fn labels_in(&self, haystack: &[u8]) -> Vec<&str> {
        let mut found: Vec<usize> = self.hits(haystack).iter().map(|h| h.value).collect();
        found.sort_unstable();
        found.dedup();
        let mut labels: Vec<&str> = Vec::new();
        for i in found {
            let k = &self.known[i];
            if k.labels.is_empty() {
                labels.push("");
            }
            labels.extend(k.labels.iter().map(String::as_str));
        }
        labels.sort_unstable();
        labels.dedup();
        labels
    }

    /// `bytes` with every secret occurrence replaced by [`REDACTED`] (for bodies that need not
    /// be text). Overlapping and touching occurrences are one replacement.
    pub fn redact_bytes(&self, bytes: &[u8]) -> (Vec<u8>, Scrubbed) {
        let mut hits = self.hits(bytes);
        if hits.is_empty() {
            return (bytes.to_vec(), Scrubbed::default());
        }
        hits.sort_unstable_by_key(|h| (h.start, h.end));
        let mut out = Vec::with_capacity(bytes.len());
        let mut at = 0;
        let mut replaced = 0;
        let mut i = 0;
        while i < hits.len() {
            let start = hits[i].start.max(at);
            let mut end = hits[i].end;
            i += 1;
            while i < hits.len() && hits[i].start <= end {
                end = end.max(hits[i].end);
                i += 1;
            }
            if end <= start {
                continue;
            }
            out.extend_from_slice(&bytes[at..start]);
            out.extend_from_slice(REDACTED.as_bytes());
            replaced += 1;
            at = end.min(bytes.len());
        }
        out.extend_from_slice(&bytes[at..]);
        (out, Scrubbed { replaced })
    }

    /// `text` with every secret occurrence replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> (String, Scrubbed) {
        if !self.active() {
            return (text.to_string(), Scrubbed::default());
        }
        let (bytes, n) = self.redact_bytes(text.as_bytes());
        if n.replaced == 0 {
            return (text.to_string(), n);
        }
        // Replacements cover whole characters (a value is whole UTF-8, escapes are ASCII);
        // should one not, the text stays text.
        let text = String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        (text, n)
    }

    /// Every string inside `value` redacted in place (keys too).
    pub fn redact_json(&self, value: &mut serde_json::Value) -> Scrubbed {
        let mut total = 0;
        self.redact_json_at(value, &mut |_, n| total += n);
        Scrubbed { replaced: total }
    }

    /// [`Scrubber::redact_json`], telling `noted` where (the object keys from the root, array
    /// indices left out) and how many.
    pub fn redact_json_at(
        &self,
        value: &mut serde_json::Value,
        noted: &mut dyn FnMut(&[&str], usize),
    ) {
        if !self.active() {
            return;
        }
        let mut path = Vec::new();
        self.walk(value, &mut path, noted);
    }

    fn walk(
        &self,
        value: &mut serde_json::Value,
        path: &mut Vec<String>,
        noted: &mut dyn FnMut(&[&str], usize),
    ) {
        use serde_json::Value;
        let note = |path: &[String], n: usize, noted: &mut dyn FnMut(&[&str], usize)| {
            if n > 0 {
                let p: Vec<&str> = path.iter().map(String::as_str).collect();
                noted(&p, n);
            }
        };
        match value {
            Value::String(s) => {
                let (clean, n) = self.redact(s);
                if n.replaced > 0 {
                    *s = clean;
                    note(path, n.replaced, noted);
                }
            }
            Value::Array(items) => {
                for item in items {
                    self.walk(item, path, noted);
                }
            }
            Value::Object(map) => {
                let entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
                for (k, mut v) in entries {
                    let (k, n) = self.redact(&k);
                    path.push(k);
                    note(path, n.replaced, noted);
                    self.walk(&mut v, path, noted);
                    let k = path.pop().unwrap_or_default();
                    map.insert(k, v);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod cost {
    /// The figures the docs quote: building the scrubber for a 2.6 MB value and scanning 1 MiB.
    /// `CARGO_PROFILE_TEST_OPT_LEVEL=3 cargo test -p vak-host --lib secrets::scrubber::cost -- --ignored --nocapture`
    /// (the host crate optimised as in a release; its dependencies are optimised in every profile)
    #[test]
    #[ignore = "a measurement, not a check"]
    fn scrubber_cost() {
        use super::*;
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let value: String = (0..2_600_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'!' + (x % 94) as u8)
            })
            .collect();
        let secret = SecretValue::new(value);
        let t = std::time::Instant::now();
        let s = Scrubber::new([&secret]);
        let built = t.elapsed();
        let hay = "lorem ipsum dolor ".repeat(1 << 16);
        let t = std::time::Instant::now();
        let found = s.finds(hay.as_bytes());
        let scanned = t.elapsed();
        // The value inside a text: followed through its 2.6 MB, and the text's many `%`, `+`,
        // `\`, `=` make the scrubber build and scan every view of it (the worst case).
        let mut holding = String::from("x");
        holding.push_str(secret.expose());
        let t = std::time::Instant::now();
        let (_, n) = s.redact(&holding);
        let whole = t.elapsed();
        eprintln!(
            "build {built:?}; scan of {} bytes {scanned:?} (found {found}); a text holding the value redacted in {whole:?} ({} replaced)",
            hay.len(),
            n.replaced
        );
    }
}
