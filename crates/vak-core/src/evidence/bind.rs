//! Value binding: whether a payload field's value agrees with the receipt an item rests on (or,
//! for a computed field, with the host's own computation), as the registry's bindings say.

use super::bodies::BodyMatcher;
use crate::registry::{Backing, Computation, Derivation, FieldBinding, PayloadSchema, Relation};
use crate::types::{Capability, Receipt};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;

/// Longest rendering of a value in a diagnostic.
const MAX_SHOWN: usize = 120;

/// A value as a diagnostic shows it: JSON, cut to [`MAX_SHOWN`] characters.
pub(crate) fn show(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() <= MAX_SHOWN {
        text
    } else {
        let cut: String = text.chars().take(MAX_SHOWN).collect();
        format!("{cut}… ({} bytes)", text.len())
    }
}

/// `key` appended to `at` as one JSON Pointer segment (RFC 6901: `~` as `~0`, `/` as `~1`).
fn push_segment(at: &mut String, key: &str) {
    at.push('/');
    for c in key.chars() {
        match c {
            '~' => at.push_str("~0"),
            '/' => at.push_str("~1"),
            c => at.push(c),
        }
    }
}

/// A JSON Pointer segment with `~1` and `~0` undone, in that order; borrowed when it escapes
/// nothing (almost always), so a lookup allocates nothing.
fn unescape_segment(s: &str) -> Cow<'_, str> {
    if s.contains('~') {
        Cow::Owned(s.replace("~1", "/").replace("~0", "~"))
    } else {
        Cow::Borrowed(s)
    }
}

/// An array index as RFC 6901 spells it: decimal digits, no sign, no leading zero (what
/// `serde_json::Value::pointer` accepts).
fn index_of(segment: &str) -> Option<usize> {
    if segment.starts_with('+') || (segment.starts_with('0') && segment.len() != 1) {
        return None;
    }
    segment.parse().ok()
}

/// The value at `pointer` in `v`, exactly as `serde_json::Value::pointer` finds it, without
/// allocating for the segments that escape nothing. The evidence checks look up a pointer per
/// item, per computation input and per material field of every call.
pub(crate) fn value_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.is_empty() {
        return Some(v);
    }
    let rest = pointer.strip_prefix('/')?;
    rest.split('/').try_fold(v, |target, segment| {
        let segment = unescape_segment(segment);
        match target {
            Value::Object(map) => map.get(segment.as_ref()),
            Value::Array(items) => index_of(&segment).and_then(|i| items.get(i)),
            _ => None,
        }
    })
}

/// One field the schema binds, present in the payload.
#[derive(Debug, Clone)]
pub(crate) struct Leaf<'a> {
    pub pointer: String,
    pub value: &'a Value,
    pub binding: &'a FieldBinding,
}

/// Every field of `payload` a binding of `schema` names, sorted by pointer (so the fields under a
/// pointer are one run). The first binding naming a field wins. Linear in the payload for each
/// binding.
pub(crate) fn leaves<'a>(schema: &'a PayloadSchema, payload: &'a Value) -> Vec<Leaf<'a>> {
    let mut out: Vec<Leaf<'a>> = Vec::new();
    let mut at = String::new();
    for b in &schema.bindings {
        let segments: Vec<&str> = if b.pattern.is_empty() {
            Vec::new()
        } else {
            b.pattern.split('/').skip(1).collect()
        };
        walk(payload, &segments, &mut at, &mut |pointer, value| {
            out.push(Leaf {
                pointer,
                value,
                binding: b,
            })
        });
    }
    // A stable sort keeps the fields of one pointer in the bindings' order: the first stays.
    out.sort_by(|a, b| a.pointer.cmp(&b.pointer));
    out.dedup_by(|later, first| later.pointer == first.pointer);
    out
}

/// The fields under `v` that `segments` (a binding's pattern, `*` for every index) name, each
/// with its concrete pointer (`at` followed by the segments as found).
fn walk<'a>(
    v: &'a Value,
    segments: &[&str],
    at: &mut String,
    found: &mut impl FnMut(String, &'a Value),
) {
    let Some((first, rest)) = segments.split_first() else {
        found(at.clone(), v);
        return;
    };
    let len = at.len();
    match (v, *first) {
        (Value::Array(items), "*") => {
            for (i, item) in items.iter().enumerate() {
                // Writing to a String cannot fail.
                let _ = write!(at, "/{i}");
                walk(item, rest, at, found);
                at.truncate(len);
            }
        }
        (Value::Array(items), segment) => {
            // An index as a pointer spells it, so that every field found is found again by
            // `value_at` (a pattern's `01` names nothing).
            if let Some(item) = index_of(segment).and_then(|i| items.get(i)) {
                at.push('/');
                at.push_str(segment);
                walk(item, rest, at, found);
                at.truncate(len);
            }
        }
        (Value::Object(map), segment) => {
            let key = unescape_segment(segment);
            if let Some(item) = map.get(key.as_ref()) {
                push_segment(at, &key);
                walk(item, rest, at, found);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

/// The fields at or under `pointer`: a run of the sorted `leaves`.
pub(crate) fn under<'l, 'a>(leaves: &'l [Leaf<'a>], pointer: &str) -> &'l [Leaf<'a>] {
    if pointer.is_empty() {
        return leaves;
    }
    let start = leaves.partition_point(|l| l.pointer.as_str() < pointer);
    let prefix = format!("{pointer}/");
    let len = leaves[start..]
        .iter()
        .take_while(|l| l.pointer == pointer || l.pointer.starts_with(&prefix))
        .count();
    &leaves[start..start + len]
}

/// What the host knows of the call's receipts beyond each one alone: the workspace writes, by
/// root and path, in the order they were issued.
pub(crate) struct ReceiptIndex<'a> {
    position: HashMap<&'a str, usize>,
    writes: HashMap<(String, String), Vec<(usize, &'a Receipt)>>,
}

impl<'a> ReceiptIndex<'a> {
    pub(crate) fn new(receipts: &'a [Receipt]) -> Self {
        let mut position = HashMap::new();
        let mut writes: HashMap<(String, String), Vec<(usize, &'a Receipt)>> = HashMap::new();
        for (i, r) in receipts.iter().enumerate() {
            position.entry(r.id.as_str()).or_insert(i);
            if r.capability == Capability::Workspace && r.operation == "write" && r.ok {
                writes.entry(root_path(r)).or_default().push((i, r));
            }
        }
        ReceiptIndex { position, writes }
    }

    /// Whether the file `read` read back holds what this call last wrote to it before the read.
    fn read_back_matches(&self, read: &Receipt) -> Option<bool> {
        let at = *self.position.get(read.id.as_str())?;
        let last = self
            .writes
            .get(&root_path(read))?
            .iter()
            .rfind(|(i, w)| *i < at && w.call_id == read.call_id)?;
        Some(last.1.digest.eq_ignore_ascii_case(&read.digest))
    }
}

fn root_path(r: &Receipt) -> (String, String) {
    (
        r.request["root"].as_str().unwrap_or_default().to_string(),
        r.request["path"].as_str().unwrap_or_default().to_string(),
    )
}

/// The decimal spellings of a value a body may hold: a string as it is; a number as JSON writes
/// it and, when it is integral, without a fractional part.
fn spellings(v: &Value) -> Option<Vec<Vec<u8>>> {
    match v {
        Value::String(s) => Some(vec![s.as_bytes().to_vec()]),
        Value::Number(n) => {
            let mut out = vec![n.to_string().into_bytes()];
            if let Some(f) = n.as_f64() {
                let plain = format!("{f}");
                out.push(plain.into_bytes());
                if f.fract() == 0.0 && f.abs() < 9.0e15 {
                    out.push(format!("{}", f as i64).into_bytes());
                }
            }
            out.dedup();
            Some(out)
        }
        _ => None,
    }
}

/// Whether `value` at `pointer` relates to `receipt` as `relation` says; `Err` is the diagnostic.
pub(crate) fn relate(
    pointer: &str,
    value: &Value,
    relation: &Relation,
    receipt: &Receipt,
    index: &ReceiptIndex<'_>,
    bodies: &mut BodyMatcher<'_>,
) -> Result<(), String> {
    let id = &receipt.id;
    let differs = |recorded: &Value, what: &str| {
        format!(
            "{pointer} is {} but receipt {id:?} recorded {} ({what})",
            show(value),
            show(recorded)
        )
    };
    match relation {
        Relation::Outcome(field) => match receipt.outcome.pointer(field) {
            Some(r) if r == value => Ok(()),
            Some(r) => Err(differs(r, &format!("its `outcome{field}`"))),
            None => Err(format!(
                "{pointer}: receipt {id:?} records no `outcome{field}` to compare {} with",
                show(value)
            )),
        },
        Relation::Request(field) => match receipt.request.pointer(field) {
            Some(r) if r == value => Ok(()),
            Some(r) => Err(differs(r, &format!("its `request{field}`"))),
            None => Err(format!(
                "{pointer}: receipt {id:?} records no `request{field}` to compare {} with",
                show(value)
            )),
        },
        Relation::Digest => match value.as_str() {
            Some(s) if s.eq_ignore_ascii_case(&receipt.digest) => Ok(()),
            _ => Err(differs(
                &Value::String(receipt.digest.clone()),
                "its digest",
            )),
        },
        Relation::SameMoment => {
            let seconds = receipt.outcome["unix_seconds"].as_i64();
            let nanos = receipt.outcome["nanos"].as_i64().unwrap_or(0);
            let recorded = seconds
                .and_then(|s| jiff::Timestamp::new(s, i32::try_from(nanos).unwrap_or(0)).ok());
            let shown = value
                .as_str()
                .and_then(|s| s.parse::<jiff::Timestamp>().ok());
            match (shown, recorded) {
                (Some(a), Some(b)) if a == b => Ok(()),
                (_, Some(b)) => Err(differs(
                    &Value::String(b.to_string()),
                    "not the same moment as its reading",
                )),
                (_, None) => Err(format!("{pointer}: receipt {id:?} records no reading time")),
            }
        }
        Relation::Derived(d) => {
            let derived = match d {
                Derivation::OffsetInZone => offset_in_zone(receipt).map(Value::from),
                Derivation::ReadBackMatches => index.read_back_matches(receipt).map(Value::from),
            };
            match derived {
                Some(r) if r == *value => Ok(()),
                Some(r) => Err(differs(
                    &r,
                    &format!("as the host's `{}` derives it", d.name()),
                )),
                None if *d == Derivation::ReadBackMatches => Err(differs(
                    &Value::Bool(false),
                    "no write of this call to that file precedes the read",
                )),
                None => Err(format!(
                    "{pointer}: `{}` cannot be derived from receipt {id:?}",
                    d.name()
                )),
            }
        }
        Relation::InBody => {
            let Some(texts) = spellings(value) else {
                return Err(format!(
                    "{pointer} is {}, which is not text that can occur in a body",
                    show(value)
                ));
            };
            match bodies.contains(id, &texts, value.is_number())? {
                true => Ok(()),
                false => Err(format!(
                    "{pointer} is {}, which does not occur in the body of receipt {id:?} (sha256 {})",
                    show(value),
                    receipt.digest
                )),
            }
        }
    }
}

/// The UTC offset of a clock reading's zone at its instant, from the host's time zone database.
fn offset_in_zone(receipt: &Receipt) -> Option<i64> {
    let zone = receipt.outcome["zone"].as_str()?;
    let seconds = receipt.outcome["unix_seconds"].as_i64()?;
    let tz = jiff::tz::TimeZone::get(zone).ok()?;
    let at = jiff::Timestamp::from_second(seconds).ok()?;
    Some(i64::from(tz.to_offset(at).seconds()))
}

/// Relative tolerance of a recomputed floating-point figure (sums in another order differ in
/// their last bits).
pub const RELATIVE_TOLERANCE: f64 = 1e-9;

fn numbers(payload: &Value, pointer: &str) -> Result<Vec<f64>, String> {
    match value_at(payload, pointer) {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_f64()
                    .ok_or_else(|| format!("{pointer} holds {}, which is not a number", show(v)))
            })
            .collect(),
        Some(v) => v
            .as_f64()
            .map(|n| vec![n])
            .ok_or_else(|| format!("{pointer} is {}, which is not a number", show(v))),
        None => Err(format!("{pointer} is not in the payload")),
    }
}

/// The host's own value of `computation` over `inputs` in `payload`.
pub(crate) fn compute(
    computation: Computation,
    inputs: &[String],
    payload: &Value,
) -> Result<f64, String> {
    let all = |i: usize| {
        inputs
            .get(i)
            .ok_or_else(|| format!("`{}` needs an input", computation.name()))
            .and_then(|p| numbers(payload, p))
    };
    let nonempty = |v: Vec<f64>| {
        if v.is_empty() {
            Err(format!(
                "`{}` of no values is undefined",
                computation.name()
            ))
        } else {
            Ok(v)
        }
    };
    match computation {
        Computation::Count => Ok(all(0)?.len() as f64),
        Computation::Min => Ok(nonempty(all(0)?)?.into_iter().fold(f64::INFINITY, f64::min)),
        Computation::Max => Ok(nonempty(all(0)?)?
            .into_iter()
            .fold(f64::NEG_INFINITY, f64::max)),
        Computation::Mean => {
            let v = nonempty(all(0)?)?;
            Ok(v.iter().sum::<f64>() / v.len() as f64)
        }
        Computation::Median => {
            let mut v = nonempty(all(0)?)?;
            v.sort_by(f64::total_cmp);
            let n = v.len();
            Ok(if n % 2 == 1 {
                v[n / 2]
            } else {
                (v[n / 2 - 1] + v[n / 2]) / 2.0
            })
        }
        Computation::Difference => {
            let (a, b) = (all(0)?, all(1)?);
            match (a.as_slice(), b.as_slice()) {
                ([a], [b]) => Ok(b - a),
                _ => Err("`difference` takes one number from each input".into()),
            }
        }
    }
}

/// Whether two figures agree: equal for whole numbers, within [`RELATIVE_TOLERANCE`] otherwise.
pub(crate) fn agrees(shown: f64, computed: f64) -> bool {
    if shown == computed {
        return true;
    }
    let scale = shown.abs().max(computed.abs()).max(1.0);
    (shown - computed).abs() <= RELATIVE_TOLERANCE * scale
}

/// The computations made for one result, by computation and inputs.
pub(crate) type Computed<'a> = HashMap<(Computation, &'a [String]), Result<f64, String>>;

/// Whether a computed field's value agrees with the host's computation; `Err` is the diagnostic.
/// `cache` keeps each computation's result, so many items naming one field cost one computation.
pub(crate) fn recompute<'a>(
    leaf: &Leaf<'a>,
    payload: &Value,
    cache: &mut Computed<'a>,
) -> Result<(), String> {
    let Backing::Computed {
        computation,
        inputs,
    } = &leaf.binding.backing
    else {
        return Err(format!("{} is not a computed field", leaf.pointer));
    };
    let computed = cache
        .entry((*computation, inputs.as_slice()))
        .or_insert_with(|| compute(*computation, inputs, payload))
        .clone();
    let computed = computed.map_err(|why| format!("{}: {why}", leaf.pointer))?;
    let shown = leaf.value.as_f64();
    match shown {
        Some(s) if agrees(s, computed) => Ok(()),
        _ => Err(format!(
            "{} is {} but the host's `{}` of {} gives {computed}",
            leaf.pointer,
            show(leaf.value),
            computation.name(),
            inputs.join(" and ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

    #[test]
    fn a_moment_in_any_offset_is_the_same_moment() {
        let a: jiff::Timestamp = "2026-12-02T11:00:00+01:00[Europe/Paris]".parse().unwrap();
        let b: jiff::Timestamp = "2026-12-02T10:00:00Z".parse().unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn the_host_recomputes_what_it_knows() {
        let p = json!({"values": [3.0, 1.0, 2.0, 10.0], "a": 1.5, "b": 4});
        let inputs = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            compute(Computation::Count, &inputs(&["/values"]), &p),
            Ok(4.0)
        );
        assert_eq!(
            compute(Computation::Median, &inputs(&["/values"]), &p),
            Ok(2.5)
        );
        assert_eq!(
            compute(Computation::Mean, &inputs(&["/values"]), &p),
            Ok(4.0)
        );
        assert_eq!(
            compute(Computation::Min, &inputs(&["/values"]), &p),
            Ok(1.0)
        );
        assert_eq!(
            compute(Computation::Max, &inputs(&["/values"]), &p),
            Ok(10.0)
        );
        assert_eq!(
            compute(Computation::Difference, &inputs(&["/a", "/b"]), &p),
            Ok(2.5)
        );
        assert!(compute(Computation::Mean, &inputs(&["/a/x"]), &p).is_err());
        assert!(agrees(0.1 + 0.2, 0.3));
        assert!(!agrees(4.0, 4.000001));
    }

    #[test]
    fn a_pointer_finds_what_serde_json_finds() {
        let v = json!({
            "a": {"b/c": [10, {"~d": 1, "~1": 2, "e~/": 3}]},
            "": {"": 4},
            "0": 5,
            "list": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
        });
        let pointers = [
            "",
            "/",
            "//",
            "/a",
            "/a/b~1c",
            "/a/b~1c/0",
            "/a/b~1c/1/~0d",
            "/a/b~1c/1/~01",
            "/a/b~1c/1/e~0~1",
            "/a/b~1c/01",
            "/a/b~1c/+1",
            "/a/b~1c/-",
            "/a/b~1c/2",
            "/a/b/c",
            "/0",
            "/list/11",
            "/list/011",
            "/list/1/",
            "a",
            "/a~",
            "/a~2",
            "/list/18446744073709551616",
        ];
        for p in pointers {
            assert_eq!(value_at(&v, p), v.pointer(p), "{p:?}");
        }
    }

    #[test]
    fn leaves_spell_each_field_once_with_the_first_binding_that_names_it() {
        use crate::registry::{Computation, FieldBinding as F};
        let mut schema = Registry::builtin()
            .get("vak.data.summary/1")
            .unwrap()
            .clone();
        schema.bindings = vec![
            F::declared("/a~1b/*"),
            F::computed("/a~1b/0", Computation::Count, &["/x"]),
            F::declared("/~0/*/k"),
            F::declared("/a~1b/01"),
        ];
        let p = json!({"a/b": [1, 2], "~": [{"k": 1}, {"j": 2}, {"k": 3}]});
        let found: Vec<(String, bool)> = leaves(&schema, &p)
            .into_iter()
            .map(|l| (l.pointer, matches!(l.binding.backing, Backing::Declared)))
            .collect();
        let expected = [
            ("/a~1b/0", true),
            ("/a~1b/1", true),
            ("/~0/0/k", true),
            ("/~0/2/k", true),
        ];
        let expected: Vec<(String, bool)> =
            expected.iter().map(|(p, d)| (p.to_string(), *d)).collect();
        assert_eq!(found, expected);
        for (pointer, _) in &found {
            assert!(value_at(&p, pointer).is_some(), "{pointer}");
        }
    }

    #[test]
    fn numbers_are_looked_for_in_their_usual_spellings() {
        let s = spellings(&json!(120.0)).unwrap();
        assert!(
            s.contains(&b"120".to_vec()) && s.contains(&b"120.0".to_vec()),
            "{s:?}"
        );
        assert_eq!(spellings(&json!(0.095)).unwrap()[0], b"0.095".to_vec());
        assert!(spellings(&json!({"a": 1})).is_none());
    }
}
