//! The bodies the host fetched (`http` `fetch`) or read (`workspace` `read`) in one call, kept
//! until the call's evidence is checked, so that a `cited` text or figure is compared with what
//! the host really received, not with what the tool says it received. A receipt holds only the
//! body's digest; the body itself never reaches the record.
//!
//! Bounded: at most [`MAX_RETAINED_BYTES`] per call are kept (a body that does not fit is not
//! kept, and text cited from it cannot be checked), and comparing text with bodies costs at
//! most [`MAX_SCANNED_BYTES`] of scanning per result, each comparison linear in the body.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Bytes of bodies one call keeps for its evidence check.
pub const MAX_RETAINED_BYTES: usize = 8 << 20;

/// Bytes of body one result's evidence check may scan (each text compared with a body scans the
/// body once).
pub const MAX_SCANNED_BYTES: usize = 256 << 20;

#[derive(Debug, Default)]
struct Retained {
    bodies: HashMap<String, Arc<[u8]>>,
    bytes: usize,
    /// Receipts whose body did not fit.
    dropped: HashSet<String>,
}

/// Where a call's brokers leave the bodies they fetched or read. Cloned into the broker; read
/// by the pipeline after the call.
#[derive(Debug, Clone, Default)]
pub struct BodyStore {
    inner: Arc<Mutex<Retained>>,
}

impl BodyStore {
    /// Keep `body` as the content behind receipt `receipt_id`, if the call's allowance holds it.
    pub fn retain(&self, receipt_id: &str, body: &[u8]) {
        if receipt_id.is_empty() {
            return;
        }
        let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if r.bytes.saturating_add(body.len()) > MAX_RETAINED_BYTES {
            r.dropped.insert(receipt_id.to_string());
            return;
        }
        r.bytes += body.len();
        r.bodies.insert(receipt_id.to_string(), Arc::from(body));
    }

    /// What was kept, for the evidence check.
    pub fn snapshot(&self) -> Bodies {
        let r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        Bodies {
            bodies: r.bodies.clone(),
            dropped: r.dropped.clone(),
        }
    }
}

/// The bodies of one call, as the evidence check reads them.
#[derive(Debug, Clone, Default)]
pub struct Bodies {
    bodies: HashMap<String, Arc<[u8]>>,
    dropped: HashSet<String>,
}

impl Bodies {
    /// No bodies at all (a call that fetched and read nothing, or a unit test).
    pub fn none() -> Bodies {
        Bodies::default()
    }

    /// Bodies given directly (tests, embedders checking evidence themselves).
    pub fn from_pairs<I: IntoIterator<Item = (String, Vec<u8>)>>(pairs: I) -> Bodies {
        Bodies {
            bodies: pairs
                .into_iter()
                .map(|(id, b)| (id, Arc::from(b.as_slice())))
                .collect(),
            dropped: HashSet::new(),
        }
    }
}

/// Runs of ASCII whitespace as one space, without leading or trailing whitespace.
pub(crate) fn collapse_whitespace(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut space = false;
    for &b in text {
        if b.is_ascii_whitespace() {
            space = !out.is_empty();
        } else {
            if space {
                out.push(b' ');
                space = false;
            }
            out.push(b);
        }
    }
    out
}

/// Whether `hay[start..end]` stands as a number of its own: no digit, sign or point before it, no
/// digit after it, and no point or exponent after it that continues the number.
fn whole_number(hay: &[u8], start: usize, end: usize) -> bool {
    let before = start.checked_sub(1).and_then(|i| hay.get(i)).copied();
    let after = hay.get(end).copied();
    let then = hay.get(end + 1).copied();
    let continues = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_digit());
    let glued_before = matches!(before, Some(b'0'..=b'9' | b'.' | b'-' | b'+'));
    let glued_after =
        continues(after) || (matches!(after, Some(b'.' | b'e' | b'E')) && continues(then));
    !glued_before && !glued_after
}

/// Compares texts with the bodies of one call, within [`MAX_SCANNED_BYTES`].
pub(crate) struct BodyMatcher<'a> {
    bodies: &'a Bodies,
    /// Bodies with whitespace collapsed, made once each.
    collapsed: HashMap<&'a str, Vec<u8>>,
    /// Answers already given, by receipt and text.
    answers: HashMap<(String, Vec<u8>, bool), bool>,
    scanned: usize,
}

impl<'a> BodyMatcher<'a> {
    pub(crate) fn new(bodies: &'a Bodies) -> Self {
        BodyMatcher {
            bodies,
            collapsed: HashMap::new(),
            answers: HashMap::new(),
            scanned: 0,
        }
    }

    /// Whether one of `spellings` occurs in the body behind `receipt_id` (as a whole number,
    /// not inside a longer one, when `number`); `Err` says why it cannot be told.
    pub(crate) fn contains(
        &mut self,
        receipt_id: &str,
        spellings: &[Vec<u8>],
        number: bool,
    ) -> Result<bool, String> {
        let Some((id, body)) = self.bodies.bodies.get_key_value(receipt_id) else {
            return Err(if self.bodies.dropped.contains(receipt_id) {
                format!(
                    "the body of receipt {receipt_id:?} was not kept (a call keeps at most {MAX_RETAINED_BYTES} bytes of bodies for its evidence check), so no text can be checked against it"
                )
            } else {
                format!(
                    "the host holds no body for receipt {receipt_id:?} (only this call's own fetches and reads are kept, not a child run's)"
                )
            });
        };
        for s in spellings {
            let needle = collapse_whitespace(s);
            if needle.is_empty() {
                continue;
            }
            if let Some(&found) =
                self.answers
                    .get(&(receipt_id.to_string(), needle.clone(), number))
            {
                if found {
                    return Ok(true);
                }
                continue;
            }
            if !self.collapsed.contains_key(id.as_str()) {
                self.scanned = self.scanned.saturating_add(body.len());
                if self.scanned > MAX_SCANNED_BYTES {
                    return Err(format!(
                        "the host compares at most {MAX_SCANNED_BYTES} bytes of bodies with cited text per result; this comparison was not made"
                    ));
                }
                self.collapsed
                    .insert(id.as_str(), collapse_whitespace(body));
            }
            let hay = &self.collapsed[id.as_str()];
            let found = if needle.len() > hay.len() {
                false
            } else {
                self.scanned = self.scanned.saturating_add(hay.len());
                if self.scanned > MAX_SCANNED_BYTES {
                    return Err(format!(
                        "the host compares at most {MAX_SCANNED_BYTES} bytes of bodies with cited text per result; this comparison was not made"
                    ));
                }
                // One pattern: a linear scan of the body (no backtracking).
                aho_corasick::AhoCorasick::new([&needle])
                    .map(|m| {
                        m.find_iter(hay.as_slice())
                            .any(|f| !number || whole_number(hay, f.start(), f.end()))
                    })
                    .unwrap_or(false)
            };
            self.answers
                .insert((receipt_id.to_string(), needle, number), found);
            if found {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_runs_count_as_one_space() {
        assert_eq!(collapse_whitespace(b"  a \n\t b  "), b"a b");
        assert_eq!(collapse_whitespace(b""), b"");
    }

    #[test]
    fn text_is_found_only_in_the_body_it_names() {
        let bodies = Bodies::from_pairs([
            ("c/1".to_string(), b"<title>Test\n   page</title>".to_vec()),
            ("c/2".to_string(), b"other".to_vec()),
        ]);
        let mut m = BodyMatcher::new(&bodies);
        assert_eq!(m.contains("c/1", &[b"Test page".to_vec()], false), Ok(true));
        assert_eq!(
            m.contains("c/2", &[b"Test page".to_vec()], false),
            Ok(false)
        );
        assert_eq!(m.contains("c/1", &[b"".to_vec()], false), Ok(false));
        assert!(m.contains("c/3", &[b"x".to_vec()], false).is_err());
    }

    #[test]
    fn a_call_keeps_bodies_up_to_its_allowance() {
        let store = BodyStore::default();
        store.retain("c/1", &vec![b'a'; MAX_RETAINED_BYTES - 1]);
        store.retain("c/2", b"xy");
        store.retain("c/3", b"z");
        let bodies = store.snapshot();
        let mut m = BodyMatcher::new(&bodies);
        assert!(
            m.contains("c/2", &[b"x".to_vec()], false)
                .unwrap_err()
                .contains("not kept")
        );
        assert_eq!(m.contains("c/3", &[b"z".to_vec()], false), Ok(true));
    }

    #[test]
    fn a_number_is_found_whole_or_not_at_all() {
        let bodies = Bodies::from_pairs([(
            "c/1".to_string(),
            b"p99: 120 ms, then -7, 3.5e2 and 0.25.".to_vec(),
        )]);
        let mut m = BodyMatcher::new(&bodies);
        let found =
            |m: &mut BodyMatcher<'_>, n: &str| m.contains("c/1", &[n.as_bytes().to_vec()], true);
        assert_eq!(found(&mut m, "120"), Ok(true));
        assert_eq!(found(&mut m, "12"), Ok(false));
        assert_eq!(found(&mut m, "20"), Ok(false));
        assert_eq!(found(&mut m, "7"), Ok(false));
        assert_eq!(found(&mut m, "-7"), Ok(true));
        assert_eq!(found(&mut m, "3.5"), Ok(false));
        assert_eq!(found(&mut m, "0.25"), Ok(true));
        assert_eq!(
            found(&mut m, "99"),
            Ok(true),
            "p99 is a name, then a number"
        );
    }
}
