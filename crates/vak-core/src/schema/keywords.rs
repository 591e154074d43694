//! The keywords beyond the first subset, compiled into a node's [`Checks`]: bounds on numbers
//! (exact for integers), lengths of strings (in code points), counts of items and properties,
//! `uniqueItems`, and the applicators `allOf`, `anyOf`, `oneOf` and `not` (whose subschemas are
//! nodes like any other; `validate.rs` walks them).

use super::*;
use std::cmp::Ordering;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};

/// A JSON number as compared: an integer exactly (serde_json holds i64 and u64 exactly, and an
/// i128 holds both), any other number as the f64 serde_json holds.
#[derive(Debug, Clone, Copy)]
pub(super) enum Num {
    Int(i128),
    Float(f64),
}

/// 2^64: every [`Num::Int`] is within ±2^64, so a float beyond is larger or smaller than any.
const TWO_64: f64 = 18_446_744_073_709_551_616.0;

impl Num {
    pub(super) fn of(n: &serde_json::Number) -> Num {
        if let Some(i) = n.as_i64() {
            Num::Int(i128::from(i))
        } else if let Some(u) = n.as_u64() {
            Num::Int(i128::from(u))
        } else {
            Num::Float(n.as_f64().unwrap_or(f64::NAN))
        }
    }

    /// Exact: an integer is never rounded to an f64 (2^53 + 1 is more than 2^53 as a float).
    pub(super) fn compare(self, other: Num) -> Ordering {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => a.cmp(&b),
            (Num::Int(a), Num::Float(b)) => int_against_float(a, b),
            (Num::Float(a), Num::Int(b)) => int_against_float(b, a).reverse(),
            // JSON has no NaN: serde_json never holds one.
            (Num::Float(a), Num::Float(b)) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
        }
    }

    /// The same number, an integral float within ±2^64 made the integer it is: two numbers
    /// JSON Schema calls equal (`1` and `1.0`) have the same canonical form.
    fn canonical(self) -> Num {
        match self {
            Num::Float(f) if f.fract() == 0.0 && f.abs() < TWO_64 => Num::Int(f as i128),
            n => n,
        }
    }
}

/// `i` against `f`, exactly: `f`'s integer part is exact as an i128 within ±2^64, and decides
/// unless it equals `i`; then the fraction does.
fn int_against_float(i: i128, f: f64) -> Ordering {
    if f.is_nan() {
        return Ordering::Equal;
    }
    if f >= TWO_64 {
        return Ordering::Less;
    }
    if f <= -TWO_64 {
        return Ordering::Greater;
    }
    let whole = f.trunc();
    match i.cmp(&(whole as i128)) {
        Ordering::Equal if f > whole => Ordering::Less,
        Ordering::Equal if f < whole => Ordering::Greater,
        other => other,
    }
}

/// Numbers equal as JSON Schema defines it (`1` equals `1.0`), exactly.
pub(super) fn numbers_equal(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    Num::of(a).compare(Num::of(b)) == Ordering::Equal
}

/// A bound as compiled: the number, and as the schema wrote it, for the message.
#[derive(Debug, Clone)]
pub(super) struct Bound {
    value: Num,
    text: String,
}

/// `|x| = mantissa × 10^exponent`: the decimal a JSON number was written as (serde_json keeps
/// the shortest form that reads back as the same f64), for an exact `multipleOf`.
#[derive(Debug, Clone, Copy)]
struct Decimal {
    mantissa: u128,
    exponent: i64,
}

impl Decimal {
    fn of(n: &serde_json::Number) -> Option<Decimal> {
        let text = n.to_string();
        let s = text.strip_prefix('-').unwrap_or(&text);
        let (digits, exponent) = match s.find(['e', 'E']) {
            Some(i) => (&s[..i], s[i + 1..].parse::<i64>().ok()?),
            None => (s, 0),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        let mut mantissa: u128 = 0;
        for b in whole.bytes().chain(fraction.bytes()) {
            let digit = b.checked_sub(b'0').filter(|d| *d < 10)?;
            mantissa = mantissa.checked_mul(10)?.checked_add(u128::from(digit))?;
        }
        let shift = i64::try_from(fraction.len()).ok()?;
        Some(Decimal {
            mantissa,
            exponent: exponent.checked_sub(shift)?,
        })
    }

    /// Whether `self / d` is an integer, exactly: `m1·10^e1 / (m2·10^e2)`, by remainders (a
    /// divisor's mantissa is below 2^64, so each product fits in a u128). None when the
    /// divisor's mantissa is larger than that (then the f64 quotient decides).
    fn multiple_of(self, d: Decimal) -> Option<bool> {
        if self.mantissa == 0 {
            return Some(true);
        }
        let m = d.mantissa;
        if m == 0 || m > u128::from(u64::MAX) {
            return None;
        }
        let k = self.exponent.checked_sub(d.exponent)?;
        if k >= 0 {
            // (m1 mod m) · (10^k mod m) mod m, by squaring: k is at most a few hundred.
            let (mut power, mut base, mut k) = (1 % m, 10 % m, k as u64);
            while k > 0 {
                if k & 1 == 1 {
                    power = power * base % m;
                }
                base = base * base % m;
                k >>= 1;
            }
            Some(((self.mantissa % m) * power).is_multiple_of(m))
        } else {
            // m1 must be a multiple of m·10^-k; past a u128, that exceeds m1.
            let scaled = u32::try_from(k.unsigned_abs())
                .ok()
                .and_then(|k| 10u128.checked_pow(k))
                .and_then(|p| p.checked_mul(m));
            Some(scaled.is_some_and(|q| self.mantissa.is_multiple_of(q)))
        }
    }
}

/// `multipleOf` as compiled.
#[derive(Debug, Clone)]
pub(super) struct Divisor {
    decimal: Option<Decimal>,
    value: Num,
    text: String,
}

impl Divisor {
    /// Integers by their remainder; other numbers as decimals, exactly (`0.0075` is a multiple
    /// of `0.0001`, which their f64 quotient, 74.99999999999999, would deny); the f64 quotient
    /// only where a decimal does not fit.
    fn divides(&self, n: &serde_json::Number) -> bool {
        if let (Num::Int(x), Num::Int(d)) = (Num::of(n).canonical(), self.value.canonical()) {
            return x % d == 0;
        }
        let exact = self
            .decimal
            .zip(Decimal::of(n))
            .and_then(|(d, x)| x.multiple_of(d));
        exact.unwrap_or_else(|| {
            let (x, d) = (n.as_f64().unwrap_or(f64::NAN), self.value.as_f64());
            let q = x / d;
            q.is_finite() && q.fract() == 0.0
        })
    }
}

impl Num {
    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

/// What a node checks beyond the first subset. Boxed in the node: most nodes have none.
#[derive(Debug, Clone, Default)]
pub(super) struct Checks {
    pub(super) minimum: Option<Bound>,
    pub(super) maximum: Option<Bound>,
    pub(super) exclusive_minimum: Option<Bound>,
    pub(super) exclusive_maximum: Option<Bound>,
    pub(super) multiple_of: Option<Divisor>,
    pub(super) min_length: Option<u64>,
    pub(super) max_length: Option<u64>,
    pub(super) min_items: Option<u64>,
    pub(super) max_items: Option<u64>,
    pub(super) unique_items: bool,
    pub(super) min_properties: Option<u64>,
    pub(super) max_properties: Option<u64>,
    pub(super) all_of: Vec<NodeId>,
    pub(super) any_of: Vec<NodeId>,
    pub(super) one_of: Vec<NodeId>,
    pub(super) not: Option<NodeId>,
}

fn malformed(at: &str, message: String) -> SchemaCompileError {
    SchemaCompileError::Malformed {
        pointer: at.to_string(),
        message,
    }
}

/// A count keyword's value: a non-negative integer (`2.0` is one); a count past u64 is u64::MAX,
/// which no length reaches.
fn count(key: &str, value: &Value, at: &str) -> Result<u64, SchemaCompileError> {
    let refused = || malformed(at, format!("`{key}` must be a non-negative integer"));
    let n = value.as_number().ok_or_else(refused)?;
    match Num::of(n).canonical() {
        Num::Int(i) if i >= 0 => Ok(u64::try_from(i).unwrap_or(u64::MAX)),
        Num::Float(f) if f >= TWO_64 && f.fract() == 0.0 => Ok(u64::MAX),
        _ => Err(refused()),
    }
}

fn bound(key: &str, value: &Value, at: &str) -> Result<Bound, SchemaCompileError> {
    let n = value
        .as_number()
        .ok_or_else(|| malformed(at, format!("`{key}` must be a number")))?;
    Ok(Bound {
        value: Num::of(n),
        text: n.to_string(),
    })
}

impl Checks {
    /// Compile `key` into these checks if it is one of the assertions here (the applicators
    /// hold subschemas: the compiler compiles them); Ok(false) if it is not one.
    pub(super) fn assertion(
        &mut self,
        key: &str,
        value: &Value,
        at: &str,
    ) -> Result<bool, SchemaCompileError> {
        match key {
            "minimum" => self.minimum = Some(bound(key, value, at)?),
            "maximum" => self.maximum = Some(bound(key, value, at)?),
            "exclusiveMinimum" => self.exclusive_minimum = Some(bound(key, value, at)?),
            "exclusiveMaximum" => self.exclusive_maximum = Some(bound(key, value, at)?),
            "multipleOf" => {
                let Bound { value: n, text } = bound(key, value, at)?;
                if n.compare(Num::Int(0)) != Ordering::Greater {
                    return Err(malformed(at, "`multipleOf` must be greater than 0".into()));
                }
                let decimal = value.as_number().and_then(Decimal::of);
                self.multiple_of = Some(Divisor {
                    decimal,
                    value: n,
                    text,
                });
            }
            "minLength" => self.min_length = Some(count(key, value, at)?),
            "maxLength" => self.max_length = Some(count(key, value, at)?),
            "minItems" => self.min_items = Some(count(key, value, at)?),
            "maxItems" => self.max_items = Some(count(key, value, at)?),
            "minProperties" => self.min_properties = Some(count(key, value, at)?),
            "maxProperties" => self.max_properties = Some(count(key, value, at)?),
            "uniqueItems" => {
                self.unique_items = value
                    .as_bool()
                    .ok_or_else(|| malformed(at, "`uniqueItems` must be a boolean".into()))?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Each assertion of these checks that `value` breaks, by keyword, with its message (written
    /// only when `broken` calls it). The applicators are not assertions: the walks check them.
    pub(super) fn assertions(
        &self,
        value: &Value,
        mut broken: impl FnMut(&'static str, &dyn Fn() -> String),
    ) {
        match value {
            Value::Number(n) => self.number(n, broken),
            Value::String(s) => {
                let (min, max) = (self.min_length, self.max_length);
                if min.is_none() && max.is_none() {
                    return;
                }
                // A code point is 1 to 4 bytes: the byte length often decides without counting.
                let bytes = s.len() as u64;
                if min.is_none_or(|m| m <= bytes.div_ceil(4)) && max.is_none_or(|m| m >= bytes) {
                    return;
                }
                let n = s.chars().count() as u64;
                let say = |than: &str, m: u64| format!("is {n} characters long, {than} {m}");
                if let Some(m) = min.filter(|m| n < *m) {
                    broken("minLength", &|| say("shorter than the minimum", m));
                }
                if let Some(m) = max.filter(|m| n > *m) {
                    broken("maxLength", &|| say("longer than the maximum", m));
                }
            }
            Value::Array(list) => {
                let n = list.len() as u64;
                let say = |than: &str, m: u64| format!("has {n} items, {than} {m}");
                if let Some(m) = self.min_items.filter(|m| n < *m) {
                    broken("minItems", &|| say("fewer than the minimum", m));
                }
                if let Some(m) = self.max_items.filter(|m| n > *m) {
                    broken("maxItems", &|| say("more than the maximum", m));
                }
                if self.unique_items
                    && let Some((i, j)) = first_duplicate(list)
                {
                    broken("uniqueItems", &|| format!("items {i} and {j} are equal"));
                }
            }
            Value::Object(map) => {
                let n = map.len() as u64;
                let say = |than: &str, m: u64| format!("has {n} properties, {than} {m}");
                if let Some(m) = self.min_properties.filter(|m| n < *m) {
                    broken("minProperties", &|| say("fewer than the minimum", m));
                }
                if let Some(m) = self.max_properties.filter(|m| n > *m) {
                    broken("maxProperties", &|| say("more than the maximum", m));
                }
            }
            _ => {}
        }
    }

    fn number(
        &self,
        n: &serde_json::Number,
        mut broken: impl FnMut(&'static str, &dyn Fn() -> String),
    ) {
        let x = Num::of(n);
        let bounds = [
            (
                "minimum",
                &self.minimum,
                Ordering::Less,
                "less than the minimum",
            ),
            (
                "maximum",
                &self.maximum,
                Ordering::Greater,
                "greater than the maximum",
            ),
        ];
        for (keyword, bound, refused, what) in bounds {
            if let Some(b) = bound
                && x.compare(b.value) == refused
            {
                broken(keyword, &|| format!("{n} is {what} {}", b.text));
            }
        }
        let exclusive = [
            (
                "exclusiveMinimum",
                &self.exclusive_minimum,
                Ordering::Greater,
                "greater",
            ),
            (
                "exclusiveMaximum",
                &self.exclusive_maximum,
                Ordering::Less,
                "less",
            ),
        ];
        for (keyword, bound, required, what) in exclusive {
            if let Some(b) = bound
                && x.compare(b.value) != required
            {
                broken(keyword, &|| format!("{n} is not {what} than {}", b.text));
            }
        }
        if let Some(d) = &self.multiple_of
            && !d.divides(n)
        {
            broken("multipleOf", &|| {
                format!("{n} is not a multiple of {}", d.text)
            });
        }
    }

    /// Whether `value` breaks none of the assertions (the fast pass).
    pub(super) fn holds(&self, value: &Value) -> bool {
        let mut holds = true;
        self.assertions(value, |_, _| holds = false);
        holds
    }
}

/// Up to this many items, `uniqueItems` compares every pair; beyond, it hashes.
const PAIRWISE_MAX: usize = 16;

/// The first item (by position, `j`) equal to an earlier one (`i`), if any. Pairwise for a few
/// items; otherwise each item is hashed once, in a way that equal values (`1` and `1.0`, objects
/// in any key order) hash alike, under keys drawn for this call (so an argument cannot be made
/// of colliding items), and only items with the same hash are compared (by [`json_equal`]):
/// linear in the array's size plus a sort of its items, not quadratic.
fn first_duplicate(list: &[Value]) -> Option<(usize, usize)> {
    if list.len() <= PAIRWISE_MAX {
        return (1..list.len()).find_map(|j| {
            (0..j)
                .find(|&i| json_equal(&list[i], &list[j]))
                .map(|i| (i, j))
        });
    }
    let keys = RandomState::new();
    let mut hashed: Vec<(u64, usize)> = list
        .iter()
        .enumerate()
        .map(|(i, v)| (hash_json(v, &keys), i))
        .collect();
    hashed.sort_unstable();
    let mut found: Option<(usize, usize)> = None;
    for run in hashed.chunk_by(|a, b| a.0 == b.0) {
        // Within a run (a few items, all equal unless 64-bit hashes collided), each item is
        // compared with the earlier ones until one is equal.
        for (k, &(_, j)) in run.iter().enumerate().skip(1) {
            if found.is_some_and(|(_, f)| f < j) {
                break;
            }
            if let Some(&(_, i)) = run[..k]
                .iter()
                .find(|(_, i)| json_equal(&list[*i], &list[j]))
            {
                found = Some((i, j));
                break;
            }
        }
    }
    found
}

/// A hash of `v` that equal JSON values share: numbers by value, objects whatever their order
/// (the entries' hashes are added). Recursion as deep as the value (the arguments' depth bound).
fn hash_json(v: &Value, keys: &RandomState) -> u64 {
    let mut h = keys.build_hasher();
    match v {
        Value::Null => 0u8.hash(&mut h),
        Value::Bool(b) => (1u8, *b).hash(&mut h),
        Value::Number(n) => match Num::of(n).canonical() {
            Num::Int(i) => (2u8, i).hash(&mut h),
            Num::Float(f) => (3u8, f.to_bits()).hash(&mut h),
        },
        Value::String(s) => (4u8, s).hash(&mut h),
        Value::Array(list) => {
            (5u8, list.len()).hash(&mut h);
            for item in list {
                h.write_u64(hash_json(item, keys));
            }
        }
        Value::Object(map) => {
            let sum = map.iter().fold(0u64, |sum, (k, x)| {
                sum.wrapping_add(keys.hash_one((k, hash_json(x, keys))))
            });
            (6u8, map.len(), sum).hash(&mut h);
        }
    }
    h.finish()
}
