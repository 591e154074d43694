//! The forms a secret value takes in a text: as the scrubber looks for them (its first bytes
//! raw, in base64 at each alignment, in hex) and whole, as tests and docs name them.

/// The ways a value's bytes are written that the scrubber looks for, whatever surrounds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FormKind {
    /// The value as it is.
    Raw,
    /// Base64 (standard or URL-safe alphabet) of the value preceded by `align` (0, 1 or 2) other
    /// bytes, less the characters that depend on those bytes or on what follows: the part of
    /// the encoding any text holding the value at that offset of a 3-byte group has in common,
    /// padded or not.
    Base64 { url: bool, align: u8 },
    /// Hexadecimal digits, matched in either case (mixed too).
    Hex,
}

impl FormKind {
    pub(super) const ALL: [FormKind; 8] = [
        FormKind::Raw,
        FormKind::Base64 {
            url: false,
            align: 0,
        },
        FormKind::Base64 {
            url: false,
            align: 1,
        },
        FormKind::Base64 {
            url: false,
            align: 2,
        },
        FormKind::Base64 {
            url: true,
            align: 0,
        },
        FormKind::Base64 {
            url: true,
            align: 1,
        },
        FormKind::Base64 {
            url: true,
            align: 2,
        },
        FormKind::Hex,
    ];

    /// Whether letters match in either case.
    pub(super) fn folded(self) -> bool {
        self == FormKind::Hex
    }

    /// The length of the form of an `n`-byte value.
    pub(super) fn len(self, n: usize) -> usize {
        match self {
            FormKind::Raw => n,
            FormKind::Hex => 2 * n,
            FormKind::Base64 { align, .. } => {
                let k = usize::from(align);
                (8 * (k + n) / 6).saturating_sub((8 * k).div_ceil(6))
            }
        }
    }

    /// The form of `value`.
    pub(super) fn render(self, value: &[u8]) -> Vec<u8> {
        use base64::Engine as _;
        use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
        match self {
            FormKind::Raw => value.to_vec(),
            FormKind::Hex => hex::encode(value).into_bytes(),
            FormKind::Base64 { url, align } => {
                let k = usize::from(align);
                let mut shifted = vec![0u8; k];
                shifted.extend_from_slice(value);
                let encoded = if url {
                    URL_SAFE_NO_PAD.encode(&shifted)
                } else {
                    STANDARD_NO_PAD.encode(&shifted)
                };
                let lead = (8 * k).div_ceil(6);
                let end = (8 * (k + value.len()) / 6).max(lead);
                encoded.as_bytes()[lead..end].to_vec()
            }
        }
    }
}

/// A value and the forms it commonly takes on the wire, whole: base64 (standard and URL-safe,
/// padded or not), percent- and form-encoding (upper- and lowercase hex digits), hex (both
/// cases). For tests and docs; the scrubber recognises more (see `Scrubber`).
pub fn encodings(value: &str) -> Vec<String> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let bytes = value.as_bytes();
    let percent = percent_encode(value, false);
    let form = percent_encode(value, true);
    let mut all = vec![
        value.to_string(),
        STANDARD.encode(bytes),
        STANDARD_NO_PAD.encode(bytes),
        URL_SAFE.encode(bytes),
        URL_SAFE_NO_PAD.encode(bytes),
        lower_hex_escapes(&percent),
        lower_hex_escapes(&form),
        percent,
        form,
        hex::encode(bytes),
        hex::encode_upper(bytes),
    ];
    all.sort();
    all.dedup();
    all
}

pub(super) fn percent_encode(value: &str, space_plus: bool) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            b' ' if space_plus => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Lowercase the hex digits of `%XX` escapes only.
fn lower_hex_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let esc = rest.get(i..i + 3).unwrap_or(&rest[i..]);
        out.push_str(&esc.to_ascii_lowercase());
        rest = &rest[i + esc.len()..];
    }
    out.push_str(rest);
    out
}

pub(super) fn is_base64_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_')
}
