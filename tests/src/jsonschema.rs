//! A reference reading of JSON Schema (draft 2020-12) for the tests, independent of the host's
//! schema stage: a validator of the keywords provider declarations, Rust tools' schemas and
//! WIT-derived schemas use, an instance generator, and mutations that make likely-invalid
//! instances. The tests compare the host's schema stage and the provider declarations with it.
//!
//! It reads each keyword the plainest way: pairs compared one by one, lengths by counting
//! `chars()`, numbers as i128 when both sides are integers and as f64 otherwise (so a decimal
//! `multipleOf`, or an integer past 2^53 against a fractional bound, is outside what it can
//! judge: the tests do not ask it to).

use serde_json::{Map, Number, Value, json};
use std::cmp::Ordering;

/// Deepest schema or instance nesting these walk (past it a value is refused, or not generated).
const MAX_DEPTH: usize = 48;

/// How `oneOf` is read: as the standard says, or as `anyOf` (as Gemini documents it does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OneOf {
    Exactly,
    AsAnyOf,
}

/// Whether `v` is valid against `schema` (whose `$ref`s point into `root`).
pub fn valid(schema: &Value, root: &Value, v: &Value, one_of: OneOf) -> bool {
    check(schema, root, v, one_of, 0)
}

fn is_integer(v: &Value) -> bool {
    v.as_f64().is_some_and(|f| f.fract() == 0.0) || v.is_i64() || v.is_u64()
}

fn type_matches(name: &str, v: &Value) -> bool {
    match name {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => is_integer(v),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => false,
    }
}

/// Both as i128 when both are integers JSON-wise held exactly; else as f64.
fn compare(a: &Number, b: &Number) -> Ordering {
    let int = |n: &Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (int(a), int(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => {
            let (x, y) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        }
    }
}

fn multiple_of(x: &Number, d: &Number) -> bool {
    let int = |n: &Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (int(x), int(d)) {
        (Some(x), Some(d)) if d > 0 => x % d == 0,
        _ => {
            let q = x.as_f64().unwrap_or(0.0) / d.as_f64().unwrap_or(0.0);
            q.is_finite() && q.fract() == 0.0
        }
    }
}

fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    root.pointer(reference.strip_prefix('#')?)
}

fn check(schema: &Value, root: &Value, v: &Value, one_of: OneOf, depth: usize) -> bool {
    let o = match schema {
        Value::Bool(b) => return *b,
        Value::Object(o) => o,
        _ => return false,
    };
    if depth > MAX_DEPTH {
        return false;
    }
    let sub = |s: &Value, x: &Value| check(s, root, x, one_of, depth + 1);
    if let Some(r) = o.get("$ref").and_then(Value::as_str) {
        match resolve(root, r) {
            Some(target) if sub(target, v) => {}
            _ => return false,
        }
    }
    match o.get("type") {
        Some(Value::String(t)) if !type_matches(t, v) => return false,
        Some(Value::Array(ts))
            if !ts
                .iter()
                .filter_map(Value::as_str)
                .any(|t| type_matches(t, v)) =>
        {
            return false;
        }
        _ => {}
    }
    if let Some(Value::Array(members)) = o.get("enum")
        && !members.iter().any(|m| vak_host::schema::json_equal(m, v))
    {
        return false;
    }
    if let Some(c) = o.get("const")
        && !vak_host::schema::json_equal(c, v)
    {
        return false;
    }
    if let Value::Number(x) = v {
        let against = |k: &str| o.get(k).and_then(Value::as_number).map(|b| compare(x, b));
        if against("minimum") == Some(Ordering::Less)
            || against("maximum") == Some(Ordering::Greater)
            || against("exclusiveMinimum").is_some_and(|c| c != Ordering::Greater)
            || against("exclusiveMaximum").is_some_and(|c| c != Ordering::Less)
            || o.get("multipleOf")
                .and_then(Value::as_number)
                .is_some_and(|d| !multiple_of(x, d))
        {
            return false;
        }
    }
    let count = |k: &str| o.get(k).and_then(Value::as_u64);
    if let Value::String(s) = v {
        let n = s.chars().count() as u64;
        if count("minLength").is_some_and(|m| n < m) || count("maxLength").is_some_and(|m| n > m) {
            return false;
        }
    }
    if let Value::Object(map) = v {
        let n = map.len() as u64;
        if count("minProperties").is_some_and(|m| n < m)
            || count("maxProperties").is_some_and(|m| n > m)
        {
            return false;
        }
        let props = o.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(required)) = o.get("required")
            && required
                .iter()
                .filter_map(Value::as_str)
                .any(|r| !map.contains_key(r))
        {
            return false;
        }
        for (k, x) in map {
            match props.and_then(|p| p.get(k)) {
                Some(s) => {
                    if !sub(s, x) {
                        return false;
                    }
                }
                None => {
                    if let Some(extra) = o.get("additionalProperties")
                        && !sub(extra, x)
                    {
                        return false;
                    }
                }
            }
        }
    }
    if let Value::Array(items) = v {
        let prefix: &[Value] = o
            .get("prefixItems")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        for (s, x) in prefix.iter().zip(items) {
            if !sub(s, x) {
                return false;
            }
        }
        if let Some(s) = o.get("items").filter(|s| !s.is_array())
            && !items.iter().skip(prefix.len()).all(|x| sub(s, x))
        {
            return false;
        }
        if count("minItems").is_some_and(|m| (items.len() as u64) < m)
            || count("maxItems").is_some_and(|m| (items.len() as u64) > m)
        {
            return false;
        }
        if o.get("uniqueItems") == Some(&Value::Bool(true)) {
            for (i, x) in items.iter().enumerate() {
                if items[..i]
                    .iter()
                    .any(|y| vak_host::schema::json_equal(x, y))
                {
                    return false;
                }
            }
        }
    }
    let branches = |k: &str| o.get(k).and_then(Value::as_array);
    if let Some(b) = branches("anyOf")
        && !b.iter().any(|s| sub(s, v))
    {
        return false;
    }
    if let Some(b) = branches("oneOf") {
        let passing = b.iter().filter(|s| sub(s, v)).count();
        let ok = match one_of {
            OneOf::Exactly => passing == 1,
            OneOf::AsAnyOf => passing >= 1,
        };
        if !ok {
            return false;
        }
    }
    if let Some(b) = branches("allOf")
        && !b.iter().all(|s| sub(s, v))
    {
        return false;
    }
    if let Some(n) = o.get("not")
        && sub(n, v)
    {
        return false;
    }
    true
}

/// A small deterministic random source (SplitMix64), seeded by the property test.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }
}

/// An instance of `schema`, made to be valid (the caller checks it with [`valid`]; `None` where
/// the generator found no way in, e.g. the `false` schema).
pub fn generate(schema: &Value, root: &Value, rng: &mut Rng) -> Option<Value> {
    gen_node(schema, root, rng, 0)
}

fn any_scalar(rng: &mut Rng) -> Value {
    match rng.below(5) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(50)),
        2 => json!(rng.below(1000)),
        3 => json!(rng.below(1000) as f64 + 0.25),
        _ => json!(format!("s{}", rng.below(100))),
    }
}

fn gen_node(schema: &Value, root: &Value, rng: &mut Rng, depth: usize) -> Option<Value> {
    let o = match schema {
        Value::Bool(true) => return Some(any_scalar(rng)),
        Value::Object(o) => o,
        _ => return None,
    };
    if depth > MAX_DEPTH / 2 {
        return None;
    }
    if let Some(c) = o.get("const") {
        return Some(c.clone());
    }
    if let Some(Value::Array(members)) = o.get("enum") {
        return (!members.is_empty()).then(|| members[rng.below(members.len())].clone());
    }
    if let Some(r) = o.get("$ref").and_then(Value::as_str) {
        // The target decides the shape; sibling keywords are mostly annotations (the caller
        // checks the result against the whole node).
        return gen_node(resolve(root, r)?, root, rng, depth + 1);
    }
    for k in ["anyOf", "oneOf"] {
        if let Some(Value::Array(b)) = o.get(k) {
            if b.is_empty() {
                return None;
            }
            let start = rng.below(b.len());
            // Try every branch, from a random one, for one whose instance fits the whole node.
            for i in 0..b.len() {
                let branch = &b[(start + i) % b.len()];
                if let Some(v) = gen_node(branch, root, rng, depth + 1) {
                    let mut own = o.clone();
                    own.remove(k);
                    if check(&Value::Object(own), root, &v, OneOf::AsAnyOf, 0) {
                        return Some(v);
                    }
                }
            }
            return None;
        }
    }
    if let Some(Value::Array(b)) = o.get("allOf") {
        return b.first().and_then(|s| gen_node(s, root, rng, depth + 1));
    }
    let types: Vec<&str> = match o.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ if o.contains_key("properties") => vec!["object"],
        _ if o.contains_key("items") => vec!["array"],
        _ => return Some(any_scalar(rng)),
    };
    if types.is_empty() {
        return None;
    }
    let t = types[rng.below(types.len())];
    let bound = |k: &str| o.get(k).and_then(Value::as_f64);
    Some(match t {
        "null" => Value::Null,
        "boolean" => Value::Bool(rng.chance(50)),
        "string" => {
            let pool = [
                "",
                "a",
                "Europe/Paris",
                "hé\u{2028}",
                "42",
                "null",
                "é",
                "e\u{301}",
                "🦀",
                "xyz",
            ];
            let count = |k: &str| o.get(k).and_then(Value::as_u64);
            let (lo, hi) = (count("minLength").unwrap_or(0), count("maxLength"));
            let fits: Vec<&str> = pool
                .iter()
                .copied()
                .filter(|s| {
                    let n = s.chars().count() as u64;
                    n >= lo && hi.is_none_or(|h| n <= h)
                })
                .collect();
            if fits.is_empty() || rng.chance(10) {
                let n = lo.max(hi.unwrap_or(lo).min(lo + rng.below(3) as u64));
                json!("ß".repeat(n.min(64) as usize))
            } else {
                json!(fits[rng.below(fits.len())])
            }
        }
        "integer" | "number" => {
            // At times a bound itself, as written (u64::MAX, i64::MIN, …).
            let ends: Vec<&Value> = ["minimum", "maximum"]
                .iter()
                .filter_map(|k| o.get(*k))
                .collect();
            if !ends.is_empty() && rng.chance(25) {
                return Some(ends[rng.below(ends.len())].clone());
            }
            let step = if t == "integer" { 1.0 } else { 0.5 };
            let lo = bound("minimum")
                .or(bound("exclusiveMinimum").map(|m| m + step))
                .unwrap_or(-1000.0)
                .max(-1e6);
            let hi = bound("maximum")
                .or(bound("exclusiveMaximum").map(|m| m - step))
                .unwrap_or(1000.0)
                .min(1e6);
            if lo > hi {
                return None;
            }
            let mut n = (lo + (rng.below(1000) as f64 / 999.0) * (hi - lo)).round();
            if let Some(d) = bound("multipleOf").filter(|d| *d >= 1.0 && d.fract() == 0.0) {
                n = (n / d).round() * d;
            }
            if t == "number" && rng.chance(50) && n + 0.5 <= hi {
                json!(n + 0.5)
            } else if rng.chance(30) {
                // An integral float: JSON Schema counts it an integer (Gemini writes these).
                json!(n)
            } else {
                json!(n as i64)
            }
        }
        "array" => {
            let items = o.get("items");
            let count = |k: &str| o.get(k).and_then(Value::as_u64);
            let (lo, hi) = (
                count("minItems").unwrap_or(0),
                count("maxItems").unwrap_or(3),
            );
            let n = (lo + rng.below(4) as u64).min(hi.max(lo)).min(6) as usize;
            let mut out = Vec::new();
            let prefix = o.get("prefixItems").and_then(Value::as_array);
            for s in prefix.into_iter().flatten().take(n) {
                out.push(gen_node(s, root, rng, depth + 1)?);
            }
            for _ in out.len()..n {
                match items {
                    Some(Value::Bool(false)) => break,
                    Some(s) if s.is_object() || s.is_boolean() => {
                        out.push(gen_node(s, root, rng, depth + 1)?)
                    }
                    _ => out.push(any_scalar(rng)),
                }
            }
            Value::Array(out)
        }
        "object" => {
            let mut out = Map::new();
            let required: Vec<&str> = o
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let Some(props) = o.get("properties").and_then(Value::as_object) {
                for (name, s) in props {
                    if required.contains(&name.as_str()) || rng.chance(50) {
                        out.insert(name.clone(), gen_node(s, root, rng, depth + 1)?);
                    }
                }
            }
            match o.get("additionalProperties") {
                Some(Value::Bool(false)) => {}
                Some(s @ Value::Object(_)) => {
                    if rng.chance(50) {
                        out.insert("zz_more".into(), gen_node(s, root, rng, depth + 1)?);
                    }
                }
                _ => {
                    if rng.chance(30) {
                        out.insert("zz_more".into(), any_scalar(rng));
                    }
                }
            }
            Value::Object(out)
        }
        _ => return None,
    })
}

/// `v` with one change that often makes it invalid: a required-looking member removed, an
/// unknown member added, or one value swapped for a value of another type.
pub fn mutate(v: &Value, rng: &mut Rng) -> Value {
    let mut out = v.clone();
    let mut paths = Vec::new();
    collect_paths(&out, String::new(), &mut paths, 0);
    let path = &paths[rng.below(paths.len())];
    let target = out.pointer_mut(path).expect("a path just collected");
    match (rng.below(3), &mut *target) {
        (0, Value::Object(m)) if !m.is_empty() => {
            let key = m
                .keys()
                .nth(rng.below(m.len()))
                .cloned()
                .unwrap_or_default();
            m.remove(&key);
        }
        (1, Value::Object(m)) => {
            m.insert("zz_unknown".into(), json!(1));
        }
        _ => {
            let swaps = [
                Value::Null,
                json!("x"),
                json!(1.5),
                json!(7),
                json!(true),
                json!([]),
                json!({}),
            ];
            *target = swaps[rng.below(swaps.len())].clone();
        }
    }
    out
}

/// `v` with one change near a bound: a number moved by one or to the edge of a WIT integer
/// type (2^53 + 1, u64::MAX, i64::MIN, …), a string grown or shrunk by a code point (or made
/// one grapheme of two code points), an array grown, shrunk or given a duplicate, an object
/// given or stripped of a member.
pub fn nudge(v: &Value, rng: &mut Rng) -> Value {
    let mut out = v.clone();
    let mut paths = Vec::new();
    collect_paths(&out, String::new(), &mut paths, 0);
    let path = &paths[rng.below(paths.len())];
    let target = out.pointer_mut(path).expect("a path just collected");
    let edges = [
        json!(-1),
        json!(0),
        json!(255),
        json!(256),
        json!(65_536),
        json!(9_007_199_254_740_993u64),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(i64::MAX),
        json!(2.5),
    ];
    match &mut *target {
        Value::Number(n) => {
            *target = match (rng.below(3), n.as_i64()) {
                (0, Some(i)) => json!(i.saturating_add(1)),
                (1, Some(i)) => json!(i.saturating_sub(1)),
                _ => edges[rng.below(edges.len())].clone(),
            };
        }
        Value::String(s) => match rng.below(4) {
            0 => s.push('x'),
            1 => {
                s.pop();
            }
            2 => *s = "e\u{301}".into(),
            _ => s.push('🦀'),
        },
        Value::Array(items) => match rng.below(4) {
            0 if !items.is_empty() => items.push(items[0].clone()),
            1 => {
                items.pop();
            }
            2 => items.clear(),
            _ => items.push(json!(1)),
        },
        Value::Object(m) => {
            if m.is_empty() || rng.chance(50) {
                m.insert("zz_unknown".into(), json!(1));
            } else {
                let key = m.keys().next().cloned().unwrap_or_default();
                m.remove(&key);
            }
        }
        _ => *target = edges[rng.below(edges.len())].clone(),
    }
    out
}

fn collect_paths(v: &Value, at: String, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let token = k.replace('~', "~0").replace('/', "~1");
                collect_paths(x, format!("{at}/{token}"), out, depth + 1);
            }
        }
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                collect_paths(x, format!("{at}/{i}"), out, depth + 1);
            }
        }
        _ => {}
    }
    out.push(at);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_validator_reads_the_keywords_as_the_standard_does() {
        let s = json!({"type":"object","properties":{"n":{"type":"integer","minimum":0},
            "o":{"oneOf":[{"type":"integer"},{"type":"number"}]},"r":{"$ref":"#/$defs/R"}},
            "required":["n"],"additionalProperties":false,"$defs":{"R":{"enum":["a"]}}});
        let ok = |v: Value| valid(&s, &s, &v, OneOf::Exactly);
        assert!(ok(json!({"n": 3.0})));
        assert!(!ok(json!({"n": -1})));
        assert!(!ok(json!({"n": 1.5})));
        assert!(!ok(json!({})));
        assert!(!ok(json!({"n": 1, "x": 1})));
        assert!(!ok(json!({"n": 1, "o": 2})), "2 is an integer and a number");
        assert!(ok(json!({"n": 1, "o": 2.5})));
        assert!(valid(&s, &s, &json!({"n": 1, "o": 2}), OneOf::AsAnyOf));
        assert!(ok(json!({"n": 1, "r": "a"})) && !ok(json!({"n": 1, "r": "b"})));
    }

    #[test]
    fn the_reference_validator_reads_the_newer_keywords_plainly() {
        let s = json!({"type":"object","properties":{
            "c":{"type":"string","minLength":1,"maxLength":1},
            "t":{"type":"array","prefixItems":[{"type":"integer","maximum":255},{"type":"string"}],
                "items":false},
            "u":{"type":"array","uniqueItems":true},
            "m":{"type":"integer","multipleOf":3,"minimum":0,"maximum":u64::MAX},
            "o":{"type":"object","minProperties":1}}});
        let ok = |v: Value| valid(&s, &s, &v, OneOf::Exactly);
        assert!(ok(
            json!({"c": "🦀", "t": [255, "a"], "u": [1, "1"], "m": u64::MAX, "o": {"a": 1}})
        ));
        assert!(!ok(json!({"c": "e\u{301}"})) && !ok(json!({"c": ""})));
        assert!(!ok(json!({"t": [256, "a"]})) && !ok(json!({"t": [1, "a", 2]})));
        assert!(ok(json!({"t": [1]})));
        assert!(!ok(json!({"u": [1, 1.0]})) && !ok(json!({"m": 4})) && !ok(json!({"o": {}})));
        assert!(!ok(json!({"m": u64::MAX - 1})), "exact past 2^53");
    }
}
