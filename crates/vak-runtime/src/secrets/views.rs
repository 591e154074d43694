//! Decoded views of a text: the text as it reads once one layer of a common escaping is undone
//! (percent and form encoding, JSON string escapes, quoted-printable, line breaks), each with the
//! map from its bytes back to the bytes of the text they came from, so a value found in a view
//! is redacted in the text itself.
//!
//! Each view is one pass over the text and as long as it at most; a view is built only when the
//! text holds the character that starts its escapes, and only one is alive at a time.

/// One decoded view of a text.
pub(super) struct View {
    /// The decoded bytes.
    pub bytes: Vec<u8>,
    /// For each decoded byte, where in the text the escape (or byte) it came from starts.
    starts: Vec<usize>,
    /// The length of the text.
    len: usize,
}

impl View {
    fn with_capacity(n: usize, len: usize) -> View {
        View {
            bytes: Vec::with_capacity(n),
            starts: Vec::with_capacity(n),
            len,
        }
    }

    fn push(&mut self, byte: u8, from: usize) {
        self.bytes.push(byte);
        self.starts.push(from);
    }

    /// The span of the text that decoded bytes `start..end` came from (whole escapes).
    pub fn source(&self, start: usize, end: usize) -> (usize, usize) {
        let from = self.starts.get(start).copied().unwrap_or(self.len);
        // The end of the last byte's escape is where the next escape starts (the bytes of one
        // escape share its start: a `\u` escape decodes to up to four bytes).
        let last = end.saturating_sub(1);
        let last_start = self.starts.get(last).copied().unwrap_or(self.len);
        let to = self.starts[end.min(self.starts.len())..]
            .iter()
            .take(4)
            .find(|&&s| s != last_start)
            .copied()
            // Nothing of the view follows: what follows in the text is the rest of the last
            // escape and bytes the view dropped (line breaks), all of it covered.
            .unwrap_or(self.len);
        (from, to.max(from))
    }
}

/// Which views a text needs, in the order they are scanned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `%XX` (either case of hex digit) decoded.
    Percent,
    /// `%XX` decoded and `+` read as a space (HTML form encoding).
    Form,
    /// JSON string escapes decoded: `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\uXXXX`
    /// (surrogate pairs joined).
    Json,
    /// Quoted-printable: `=XX` (either case) decoded, soft line breaks (`=` at a line's end)
    /// removed.
    QuotedPrintable,
    /// Carriage returns and line feeds removed (base64 or hex wrapped at 64 or 76 columns).
    LineBreaks,
}

pub(super) const KINDS: [Kind; 5] = [
    Kind::Percent,
    Kind::Form,
    Kind::Json,
    Kind::QuotedPrintable,
    Kind::LineBreaks,
];

/// The view of `text` of this kind, or `None` when it would read as the text itself.
pub(super) fn view(kind: Kind, text: &[u8]) -> Option<View> {
    let trigger: &[u8] = match kind {
        Kind::Percent => b"%",
        Kind::Form => b"+",
        Kind::Json => b"\\",
        Kind::QuotedPrintable => b"=",
        Kind::LineBreaks => b"\r\n",
    };
    if !trigger.iter().any(|b| text.contains(b)) {
        return None;
    }
    let mut v = View::with_capacity(text.len(), text.len());
    let mut decoded = 0usize;
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        let step = match kind {
            Kind::Percent | Kind::Form => match b {
                b'%' => hex_pair(text, i + 1).map(|x| {
                    v.push(x, i);
                    3
                }),
                b'+' if kind == Kind::Form => {
                    v.push(b' ', i);
                    Some(1)
                }
                _ => None,
            },
            Kind::QuotedPrintable => match b {
                b'=' => match (text.get(i + 1), text.get(i + 2)) {
                    (Some(b'\r'), Some(b'\n')) => Some(3),
                    (Some(b'\n'), _) => Some(2),
                    _ => hex_pair(text, i + 1).map(|x| {
                        v.push(x, i);
                        3
                    }),
                },
                _ => None,
            },
            Kind::LineBreaks => matches!(b, b'\r' | b'\n').then_some(1),
            Kind::Json => (b == b'\\').then(|| json_escape(text, i, &mut v)).flatten(),
        };
        match step {
            Some(n) => {
                decoded += 1;
                i += n;
            }
            None => {
                v.push(b, i);
                i += 1;
            }
        }
    }
    (decoded > 0).then_some(v)
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn hex_pair(text: &[u8], at: usize) -> Option<u8> {
    let hi = hex_digit(*text.get(at)?)?;
    let lo = hex_digit(*text.get(at + 1)?)?;
    Some(hi << 4 | lo)
}

fn hex4(text: &[u8], at: usize) -> Option<u32> {
    let mut n = 0u32;
    for k in 0..4 {
        n = n << 4 | u32::from(hex_digit(*text.get(at + k)?)?);
    }
    Some(n)
}

/// Decode the JSON escape at `text[i]` (a backslash) into `v`; how many bytes it took.
fn json_escape(text: &[u8], i: usize, v: &mut View) -> Option<usize> {
    let simple = match text.get(i + 1)? {
        b'"' => Some(b'"'),
        b'\\' => Some(b'\\'),
        b'/' => Some(b'/'),
        b'b' => Some(0x08),
        b'f' => Some(0x0c),
        b'n' => Some(b'\n'),
        b'r' => Some(b'\r'),
        b't' => Some(b'\t'),
        b'u' => None,
        _ => return None,
    };
    if let Some(byte) = simple {
        v.push(byte, i);
        return Some(2);
    }
    let unit = hex4(text, i + 2)?;
    let (c, took) = if (0xd800..0xdc00).contains(&unit) {
        // A high surrogate: joined with the low one that must follow.
        let low = (text.get(i + 6) == Some(&b'\\') && text.get(i + 7) == Some(&b'u'))
            .then(|| hex4(text, i + 8))
            .flatten()
            .filter(|l| (0xdc00..0xe000).contains(l))?;
        let c = 0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00);
        (char::from_u32(c)?, 12)
    } else {
        (char::from_u32(unit)?, 6)
    };
    let mut buf = [0u8; 4];
    for &byte in c.encode_utf8(&mut buf).as_bytes() {
        v.push(byte, i);
    }
    Some(took)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(kind: Kind, text: &str) -> String {
        String::from_utf8(
            view(kind, text.as_bytes())
                .map(|v| v.bytes)
                .unwrap_or_default(),
        )
        .unwrap()
    }

    #[test]
    fn each_view_decodes_its_escapes_and_maps_back_to_whole_escapes() {
        assert_eq!(decoded(Kind::Percent, "a%2Fb%2fc+d%zz"), "a/b/c+d%zz");
        assert_eq!(decoded(Kind::Form, "a%2Fb+c"), "a/b c");
        assert_eq!(
            decoded(Kind::Json, r#"k\u0065y\"\n\ud83d\ude00"#),
            "key\"\n\u{1f600}"
        );
        assert_eq!(decoded(Kind::QuotedPrintable, "k=65=\r\ny=3D"), "key=");
        assert_eq!(decoded(Kind::LineBreaks, "ab\r\ncd\ne"), "abcde");
        assert!(view(Kind::Percent, b"nothing here").is_none());
        assert!(
            view(Kind::Percent, b"100% sure").is_none(),
            "no escape decoded"
        );

        let text = br#"x\u0073\u0065y"#;
        let v = view(Kind::Json, text).unwrap();
        assert_eq!(v.bytes, b"xsey");
        // "se" is bytes 1..3 of the view: the two whole escapes in the text.
        assert_eq!(v.source(1, 3), (1, 13));
        let v = view(Kind::Json, br#"\ud83d\ude00!"#).unwrap();
        assert_eq!(v.source(0, 4), (0, 12));
        let v = view(Kind::LineBreaks, b"ab\ncd").unwrap();
        assert_eq!(v.source(1, 3), (1, 4));
    }
}
