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
/// case-insensitive for hex) over the first `FRAGMENT` bytes of each form, run over the text
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
mod tests {
    //! Every form of a value is found, at any offset, and redacted whole.

    use super::*;
    use crate::secrets::{SecretValue, encodings};

    #[test]
    fn every_encoding_of_a_secret_is_found_and_redacted() {
        let secret = SecretValue::new("s3cr3t key/+");
        let scrubber = Scrubber::new([&secret]);
        let forms = encodings(secret.expose());
        for form in [
            "s3cr3t key/+",
            "czNjcjN0IGtleS8r",
            "s3cr3t%20key%2F%2B",
            "s3cr3t%20key%2f%2b",
            "s3cr3t+key%2F%2B",
            "733363723374206b65792f2b",
        ] {
            assert!(
                forms.iter().any(|f| f == form),
                "{form} not among {forms:?}"
            );
        }
        for form in &forms {
            let text = format!("before {form} after");
            assert!(scrubber.finds(text.as_bytes()), "{form}");
            let (clean, n) = scrubber.redact(&text);
            assert_eq!(n.replaced, 1, "{form}");
            assert_eq!(clean, "before [redacted] after", "{form}");
        }
        assert!(!scrubber.finds(b"nothing to see"));
        let mut doc = serde_json::json!({"a": ["x s3cr3t key/+ y", 1], "s3cr3t key/+": true});
        let n = scrubber.redact_json(&mut doc);
        assert_eq!(n.replaced, 2);
        assert!(!doc.to_string().contains("s3cr3t"), "{doc}");
    }

    /// A value that needs every escape: a space, `/`, `?`, `"`, a non-ASCII letter; its base64
    /// holds `+` and `/`.
    const HARD: &str = "k3y 0f/th3 h0st??\"é~";

    /// Whether `text` still holds the value in any form the scrubber knows, or any piece of the
    /// value's plain text longer than 4 bytes.
    fn clean_of(scrubber: &Scrubber, value: &str, text: &str) -> bool {
        !scrubber.finds(text.as_bytes())
            && !(0..value.len().saturating_sub(5))
                .filter_map(|i| value.get(i..i + 6))
                .any(|piece| text.contains(piece))
    }

    #[test]
    fn base64_is_found_at_every_alignment_in_both_alphabets_padded_or_not() {
        use base64::Engine as _;
        use base64::engine::general_purpose::{
            STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD,
        };
        let v = SecretValue::new(HARD);
        let scrubber = Scrubber::new([&v]);
        for prefix in ["", "x", "xy", "Bearer ", "user:", "\u{1}\u{2}\u{3}"] {
            for suffix in ["", "z", "zz", "\n"] {
                let plain = format!("{prefix}{HARD}{suffix}");
                for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
                    let encoded = engine.encode(plain.as_bytes());
                    let text = format!("Authorization: Basic {encoded}; done");
                    assert!(
                        scrubber.finds(text.as_bytes()),
                        "{prefix:?}+V+{suffix:?}: {text}"
                    );
                    let (clean, n) = scrubber.redact(&text);
                    assert_eq!(n.replaced, 1, "{text} -> {clean}");
                    assert!(clean.starts_with("Authorization: Basic "), "{clean}");
                    assert!(clean.ends_with("; done"), "{clean}");
                    assert!(clean_of(&scrubber, HARD, &clean), "{clean}");
                    // What is left beside the redaction is the encoding of the prefix and
                    // suffix only: at most one group of 4 characters each side, and padding.
                    let left = clean.len() - "Authorization: Basic [redacted]; done".len();
                    assert!(left <= 4 + 4 + 2 + prefix.len() * 2, "{clean}");
                }
            }
        }
    }

    #[test]
    fn hex_percent_qp_and_json_forms_are_found_in_any_case() {
        let v = SecretValue::new(HARD);
        let scrubber = Scrubber::new([&v]);
        let bytes = HARD.as_bytes();
        let hex_lower = hex::encode(bytes);
        let hex_mixed: String = hex::encode_upper(bytes)
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i % 3 == 0 {
                    c.to_ascii_lowercase()
                } else {
                    c
                }
            })
            .collect();
        let every_byte_escaped: String = bytes.iter().map(|b| format!("%{b:02x}")).collect();
        let mixed_percent: String = bytes
            .iter()
            .enumerate()
            .map(|(i, b)| match i % 3 {
                0 => format!("%{b:02X}"),
                1 => format!("%{b:02x}"),
                _ if b.is_ascii_alphanumeric() => (*b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let form = crate::secrets::forms::percent_encode(HARD, true);
        let qp: String = bytes.iter().map(|b| format!("={b:02X}")).collect();
        let qp_soft = format!("{}=\r\n{}", &qp[..21], &qp[21..]);
        let json_u: String = HARD.encode_utf16().map(|u| format!("\\u{u:04x}")).collect();
        let json_plain = serde_json::to_string(HARD).unwrap();
        let b64_wrapped = {
            use base64::Engine as _;
            let e = base64::engine::general_purpose::STANDARD.encode(format!("xy{HARD}{HARD}"));
            e.as_bytes()
                .chunks(8)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect::<Vec<_>>()
                .join("\r\n")
        };
        // Two layers: quoted-printable carried percent-encoded in a URL.
        let qp_in_url: String = qp_soft
            .bytes()
            .map(|b| match b {
                b'=' | b'\r' | b'\n' => format!("%{b:02X}"),
                _ => (b as char).to_string(),
            })
            .collect();
        for form in [
            qp_in_url,
            hex_lower,
            hex_mixed,
            every_byte_escaped,
            mixed_percent,
            form,
            qp,
            qp_soft,
            json_u,
            json_plain,
            b64_wrapped,
        ] {
            let text = format!("<< {form} >>");
            assert!(scrubber.finds(text.as_bytes()), "{form}");
            let (clean, n) = scrubber.redact(&text);
            assert!(n.replaced >= 1, "{form}");
            assert!(
                clean.starts_with("<< ") && clean.ends_with(" >>"),
                "{clean}"
            );
            assert!(clean_of(&scrubber, HARD, &clean), "{form} -> {clean}");
        }
    }

    #[test]
    fn a_long_value_is_found_whole_and_by_its_first_bytes_and_labels_name_it() {
        let long: String = (0..5000)
            .map(|i| char::from(b'a' + (i * 7 % 26) as u8))
            .collect();
        let v = SecretValue::new(long.clone());
        let other = SecretValue::new("another-key-value");
        let scrubber = Scrubber::labelled([
            (v.clone(), "big".to_string()),
            (other.clone(), "small".to_string()),
            (other.clone(), "alias".to_string()),
        ]);
        let text = format!("[{long}]");
        let (clean, n) = scrubber.redact(&text);
        assert_eq!((clean.as_str(), n.replaced), ("[[redacted]]", 1));
        // Its first 64 bytes alone are a leak too, and redacted as far as they agree.
        let head = format!("({}!)", &long[..100]);
        assert_eq!(scrubber.redact(&head).0, "([redacted]!)");
        assert_eq!(scrubber.labels_in(head.as_bytes()), ["big"]);
        assert_eq!(
            scrubber.labels_in(b"x another-key-value y"),
            ["alias", "small"]
        );
        assert!(scrubber.labels_in(b"nothing").is_empty());
        assert!(scrubber.knows(&other) && !scrubber.knows(&SecretValue::new("nope")));
    }

    #[test]
    fn short_values_are_not_patterns() {
        let scrubber = Scrubber::new([&SecretValue::new("abc")]);
        assert!(!scrubber.finds(b"abc"));
        assert!(!Scrubber::none().finds(b"anything"));
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
