//! The scrubber's tests: every form of a value is found, at any offset, and redacted whole.

use super::*;

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
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
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
    let form = super::forms::percent_encode(HARD, true);
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
