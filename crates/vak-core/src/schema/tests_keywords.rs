//! The keywords beyond the first subset: bounds, lengths, counts, tuples, `uniqueItems` and the
//! applicators, with their pointers and messages, and the cost bounds.

use super::*;
use std::time::{Duration, Instant};

fn compile(s: Value) -> CompiledSchema {
    CompiledSchema::compile(&s).expect("compiles")
}

/// (instance pointer, keyword pointer, message) of each violation listed, and the count of the
/// rest. The fast pass must agree with the pass that names violations.
fn listed(s: &CompiledSchema, v: &Value) -> (Vec<(String, String, String)>, usize) {
    let result = s.validate_value(v);
    assert_eq!(
        s.is_valid(v),
        result.is_ok(),
        "the two passes disagree on {v}"
    );
    match result {
        Ok(()) => (Vec::new(), 0),
        Err(SchemaError::Violations { violations, more }) => {
            assert!(!violations.is_empty(), "refused with no violation: {v}");
            let listed = violations
                .into_iter()
                .map(|v| (v.instance, v.keyword, v.message))
                .collect();
            (listed, more)
        }
    }
}

fn one(s: &CompiledSchema, v: &Value) -> (String, String, String) {
    let (mut violations, more) = listed(s, v);
    assert_eq!((violations.len(), more), (1, 0), "{v}: {violations:?}");
    violations.remove(0)
}

fn triple(instance: &str, keyword: &str, message: &str) -> (String, String, String) {
    (instance.into(), keyword.into(), message.into())
}

fn value(text: &str) -> Value {
    serde_json::from_str(text).expect("JSON")
}

#[test]
fn integer_ranges_hold_at_their_ends_exactly() {
    let u8s = compile(
        json!({"type": "object", "properties": {"b": {"type": "integer", "minimum": 0, "maximum": 255}}}),
    );
    for ok in ["0", "255", "255.0", "1e2"] {
        assert!(u8s.is_valid(&value(&format!("{{\"b\": {ok}}}"))), "{ok}");
    }
    assert_eq!(
        one(&u8s, &json!({"b": 256})),
        triple(
            "/b",
            "/properties/b/maximum",
            "256 is greater than the maximum 255"
        )
    );
    assert_eq!(
        one(&u8s, &json!({"b": -1})),
        triple(
            "/b",
            "/properties/b/minimum",
            "-1 is less than the minimum 0"
        )
    );
    // u64 and s64: the whole range, and not a step beyond (as serde_json reads the number).
    let u64s = compile(json!({"type": "integer", "minimum": 0, "maximum": u64::MAX}));
    assert!(u64s.is_valid(&json!(u64::MAX)) && u64s.is_valid(&json!(0)));
    assert!(!u64s.is_valid(&value("18446744073709551616")), "2^64");
    assert!(!u64s.is_valid(&json!(-1)));
    let s64s = compile(json!({"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX}));
    assert!(s64s.is_valid(&json!(i64::MIN)) && s64s.is_valid(&json!(i64::MAX)));
    assert!(!s64s.is_valid(&json!(i64::MAX as u64 + 1)));
    // The next f64 below -2^63 (-2^63 - 1 itself reads as the float -2^63, which is in range).
    assert!(!s64s.is_valid(&value("-9223372036854777856")));
    assert!(s64s.is_valid(&value("-9223372036854775809")));
}

#[test]
fn integers_past_2_53_are_never_compared_as_floats() {
    let two_53 = 9_007_199_254_740_992u64;
    let s = compile(json!({"maximum": two_53}));
    assert!(s.is_valid(&json!(two_53)));
    assert!(
        !s.is_valid(&json!(two_53 + 1)),
        "2^53 + 1 is more than 2^53, though not as an f64"
    );
    let s = compile(json!({"minimum": two_53 + 1}));
    assert!(!s.is_valid(&json!(two_53 as f64)));
    assert!(s.is_valid(&json!(two_53 + 1)));
    let s = compile(json!({"exclusiveMaximum": two_53 + 1}));
    assert!(s.is_valid(&json!(two_53)) && !s.is_valid(&json!(two_53 + 1)));
    // Equality too: enum, const and uniqueItems tell them apart.
    assert!(!json_equal(&json!(two_53 + 1), &json!(two_53 as f64)));
    assert!(json_equal(&json!(two_53), &json!(two_53 as f64)));
    assert!(json_equal(&json!(1), &json!(1.0)) && json_equal(&json!(-0.0), &json!(0)));
    assert!(!compile(json!({"enum": [two_53 + 1]})).is_valid(&json!(two_53)));
    assert!(compile(json!({"uniqueItems": true})).is_valid(&json!([two_53, two_53 + 1])));
}

#[test]
fn exclusive_bounds_and_mixed_numbers() {
    let s = compile(json!({"exclusiveMinimum": 0, "exclusiveMaximum": 1.5}));
    for ok in [json!(1), json!(0.5), json!(1e-300), json!(1.4999)] {
        assert!(s.is_valid(&ok), "{ok}");
    }
    assert_eq!(
        one(&s, &json!(0.0)),
        triple("", "/exclusiveMinimum", "0.0 is not greater than 0")
    );
    assert_eq!(
        one(&s, &json!(1.5)),
        triple("", "/exclusiveMaximum", "1.5 is not less than 1.5")
    );
    assert!(!s.is_valid(&json!(2)));
    // Bounds apply to numbers only.
    assert!(s.is_valid(&json!("7")) && s.is_valid(&json!(null)));
}

#[test]
fn multiple_of_is_exact() {
    let s = compile(json!({"multipleOf": 3}));
    for ok in [json!(9), json!(-9), json!(0), json!(9.0), json!(u64::MAX)] {
        assert!(s.is_valid(&ok), "{ok}");
    }
    for bad in [
        json!(10),
        json!(9.5),
        json!(u64::MAX - 1),
        json!(i64::MIN + 1),
    ] {
        assert!(!s.is_valid(&bad), "{bad}");
    }
    assert_eq!(
        one(&s, &json!(10)),
        triple("", "/multipleOf", "10 is not a multiple of 3")
    );
    // Decimals as written: an f64 quotient would call 0.0075 / 0.0001 74.99999999999999.
    let s = compile(json!({"multipleOf": 0.0001}));
    assert!(s.is_valid(&json!(0.0075)) && s.is_valid(&json!(3)));
    assert!(!s.is_valid(&json!(0.00751)));
    assert!(compile(json!({"multipleOf": 0.01})).is_valid(&json!(19.99)));
    // A quotient past f64 is not a multiple (the suite's "float division = inf").
    let s = compile(json!({"type": "integer", "multipleOf": 0.123456789}));
    assert!(!s.is_valid(&json!(1e308)));
    let s = compile(json!({"multipleOf": 0.5}));
    assert!(s.is_valid(&json!(4.5)) && s.is_valid(&json!(7)) && !s.is_valid(&json!(4.25)));
    for bad in [json!(0), json!(-2), json!("3"), json!(0.0)] {
        let err = CompiledSchema::compile(&json!({"multipleOf": bad})).unwrap_err();
        assert!(
            matches!(err, SchemaCompileError::Malformed { .. }),
            "{bad}: {err}"
        );
    }
}

#[test]
fn lengths_count_code_points() {
    // A WIT `char`: one code point, whatever its bytes; a grapheme of two code points is two.
    let s = compile(json!({"type": "string", "minLength": 1, "maxLength": 1}));
    for ok in ["a", "é", "🦀", "\u{10FFFF}"] {
        assert!(s.is_valid(&json!(ok)), "{ok}");
    }
    assert_eq!(
        one(&s, &json!("e\u{301}")),
        triple(
            "",
            "/maxLength",
            "is 2 characters long, longer than the maximum 1"
        )
    );
    assert_eq!(
        one(&s, &json!("")),
        triple(
            "",
            "/minLength",
            "is 0 characters long, shorter than the minimum 1"
        )
    );
    // Where the byte length alone cannot decide.
    let s = compile(json!({"minLength": 4, "maxLength": 4}));
    assert!(s.is_valid(&json!("🦀🦀🦀🦀")) && s.is_valid(&json!("abcd")));
    assert!(!s.is_valid(&json!("🦀🦀🦀")) && !s.is_valid(&json!("abcde")));
    // Lengths apply to strings only; counts may be written as integral floats.
    let s = compile(json!({"maxLength": 2.0}));
    assert!(s.is_valid(&json!(12345)) && s.is_valid(&json!("ab")) && !s.is_valid(&json!("abc")));
    for bad in [json!(-1), json!(1.5), json!("2"), json!(null)] {
        let err = CompiledSchema::compile(&json!({"minLength": bad})).unwrap_err();
        assert!(
            matches!(err, SchemaCompileError::Malformed { .. }),
            "{bad}: {err}"
        );
    }
}

#[test]
fn tuples_are_prefix_items_then_items() {
    // A WIT `tuple<u8, string>`.
    let s = compile(json!({"type": "array",
        "prefixItems": [{"type": "integer", "minimum": 0, "maximum": 255}, {"type": "string"}],
        "items": false, "minItems": 2, "maxItems": 2}));
    assert!(s.is_valid(&json!([1, "a"])));
    assert_eq!(
        one(&s, &json!([1])),
        triple("", "/minItems", "has 1 items, fewer than the minimum 2")
    );
    assert_eq!(
        listed(&s, &json!([1, "a", 3])).0,
        [
            triple("", "/maxItems", "has 3 items, more than the maximum 2"),
            triple(
                "/2",
                "/items",
                "no item is allowed after the 2 of `prefixItems`"
            ),
        ]
    );
    assert_eq!(
        one(&s, &json!([256, "a"])),
        triple(
            "/0",
            "/prefixItems/0/maximum",
            "256 is greater than the maximum 255"
        )
    );
    assert_eq!(listed(&s, &json!(["a", 1])).0.len(), 2);
    // The empty tuple.
    let s = compile(json!({"type": "array", "prefixItems": [], "items": false}));
    assert!(s.is_valid(&json!([])));
    assert_eq!(
        one(&s, &json!([1])),
        triple("/0", "/items", "no value is allowed here")
    );
    // `items` applies after the prefix; a short array checks the items it has.
    let s = compile(
        json!({"prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": {"type": "integer"}}),
    );
    assert!(s.is_valid(&json!(["a", true, 1, 2])) && s.is_valid(&json!(["a"])));
    assert_eq!(
        one(&s, &json!(["a", true, "b"])),
        triple("/2", "/items/type", "expected integer, found a string")
    );
    assert_eq!(
        one(&s, &json!([1])),
        triple(
            "/0",
            "/prefixItems/0/type",
            "expected string, found a number"
        )
    );
}

#[test]
fn unique_items_compare_as_json_does() {
    let s = compile(json!({"uniqueItems": true}));
    assert!(s.is_valid(&json!([1, "1", true, [1], {"a": 1}, null])));
    assert_eq!(
        one(&s, &json!([1, 2, 1.0])),
        triple("", "/uniqueItems", "items 0 and 2 are equal")
    );
    assert!(!s.is_valid(&json!([{"a": 1, "b": [2]}, {"b": [2.0], "a": 1}])));
    assert!(s.is_valid(&json!([{"a": 1}, {"a": 1, "b": 2}])));
    // Past the pairwise size, by hashes: the first item equal to an earlier one is named.
    let mut many: Vec<Value> = (0..1000).map(|i| json!({"k": i, "v": [i, "x"]})).collect();
    assert!(s.is_valid(&Value::Array(many.clone())));
    many[999] = json!({"v": [500.0, "x"], "k": 500});
    many[700] = json!({"k": 3.0, "v": [3, "x"]});
    assert_eq!(
        one(&s, &Value::Array(many)),
        triple("", "/uniqueItems", "items 3 and 700 are equal")
    );
    // 100,000 distinct items: linear-ish, not 5·10^9 comparisons.
    let big = Value::Array((0..100_000).map(|i| json!(i)).collect());
    let started = Instant::now();
    assert!(s.is_valid(&big));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(compile(json!({"uniqueItems": false})).is_valid(&json!([1, 1])));
}

#[test]
fn property_counts() {
    let s = compile(json!({"type": "object", "minProperties": 1, "maxProperties": 2}));
    assert!(s.is_valid(&json!({"a": 1})) && s.is_valid(&json!({"a": 1, "b": 2})));
    assert_eq!(
        one(&s, &json!({})),
        triple(
            "",
            "/minProperties",
            "has 0 properties, fewer than the minimum 1"
        )
    );
    assert_eq!(
        one(&s, &json!({"a": 1, "b": 2, "c": 3})),
        triple(
            "",
            "/maxProperties",
            "has 3 properties, more than the maximum 2"
        )
    );
}

#[test]
fn any_of_is_one_violation_naming_the_closest_alternative() {
    // A WIT `option<point>`.
    let s = compile(json!({"type": "object", "properties": {"p": {"anyOf": [
            {"type": "null"}, {"$ref": "#/$defs/point"}]}},
        "$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer"},
            "y": {"type": "integer"}}, "required": ["x", "y"], "additionalProperties": false}}}));
    assert!(s.is_valid(&json!({"p": null})) && s.is_valid(&json!({"p": {"x": 1, "y": 2}})));
    assert_eq!(
        one(&s, &json!({"p": {"x": "a", "y": 2}})),
        triple(
            "/p",
            "/properties/p/anyOf",
            "matches none of the 2 alternatives; closest: /p/x: expected integer, found a string [/$defs/point/properties/x/type]"
        )
    );
    assert_eq!(
        one(&s, &json!({"p": 3})),
        triple(
            "/p",
            "/properties/p/anyOf",
            "matches none of the 2 alternatives; closest: /p: expected null, found a number [/properties/p/anyOf/0/type]"
        )
    );
}

#[test]
fn one_of_counts_its_matches() {
    let s = compile(json!({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}));
    assert!(s.is_valid(&json!(1.5)) && s.is_valid(&json!(-1)));
    assert_eq!(
        one(&s, &json!(1)),
        triple(
            "",
            "/oneOf",
            "matches 2 of the 2 alternatives (0, 1); exactly one is required"
        )
    );
    assert_eq!(
        one(&s, &json!(-1.5)),
        triple(
            "",
            "/oneOf",
            "matches none of the 2 alternatives; closest: (root): expected integer, found a number [/oneOf/0/type]"
        )
    );
    // A WIT `result<u8, string>`, as tagged objects.
    let s = compile(json!({"oneOf": [
        {"type": "object", "properties": {"ok": {"type": "integer", "minimum": 0, "maximum": 255}},
         "required": ["ok"], "additionalProperties": false},
        {"type": "object", "properties": {"err": {"type": "string"}},
         "required": ["err"], "additionalProperties": false}]}));
    assert!(s.is_valid(&json!({"ok": 7})) && s.is_valid(&json!({"err": "x"})));
    assert_eq!(
        one(&s, &json!({"ok": 300})),
        triple(
            "",
            "/oneOf",
            "matches none of the 2 alternatives; closest: /ok: 300 is greater than the maximum 255 [/oneOf/0/properties/ok/maximum]"
        )
    );
    assert!(!s.is_valid(&json!({"ok": 1, "err": "x"})));
}

#[test]
fn all_of_speaks_for_the_call_and_not_refuses_a_match() {
    let s =
        compile(json!({"allOf": [{"type": "integer"}, {"minimum": 0}, {"not": {"const": 13}}]}));
    assert!(s.is_valid(&json!(12)));
    assert_eq!(
        listed(&s, &json!(-1.5)).0,
        [
            triple("", "/allOf/0/type", "expected integer, found a number"),
            triple("", "/allOf/1/minimum", "-1.5 is less than the minimum 0"),
        ]
    );
    assert_eq!(
        one(&s, &json!(13)),
        triple(
            "",
            "/allOf/2/not",
            "matches the schema under `not`, which it must not"
        )
    );
}

#[test]
fn nested_any_of_in_items_is_reported_once_at_the_outer_keyword() {
    let s = compile(
        json!({"type": "array", "items": {"anyOf": [{"type": "integer"},
        {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "null"}]}}]}}),
    );
    assert!(s.is_valid(&json!([1, ["a", null], []])));
    assert_eq!(
        one(&s, &json!([1, ["a", 2]])),
        triple(
            "/1",
            "/items/anyOf",
            "matches none of the 2 alternatives; closest: /1/1: matches none of the 2 alternatives [/items/anyOf/1/items/anyOf]"
        )
    );
    // Each item's violation is listed, up to the cap, and the rest counted.
    let s =
        compile(json!({"type": "array", "items": {"anyOf": [{"type": "null"}, {"maximum": 1}]}}));
    let (violations, more) = listed(&s, &Value::Array(vec![json!(2); 100]));
    assert_eq!(
        (violations.len(), more),
        (MAX_VIOLATIONS, 100 - MAX_VIOLATIONS)
    );
    assert_eq!(violations[63].0, "/63");
}

#[test]
fn in_place_cycles_are_refused_and_descending_ones_are_not() {
    for schema in [
        json!({"allOf": [{"$ref": "#"}]}),
        json!({"$defs": {"a": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/b"}]},
            "b": {"not": {"oneOf": [{"$ref": "#/$defs/a"}]}}}}),
    ] {
        let err = CompiledSchema::compile(&schema).unwrap_err();
        let SchemaCompileError::RefCycle { pointer, .. } = &err else {
            panic!("{schema}: {err}");
        };
        assert!(pointer.ends_with("/$ref"), "{err}");
    }
    let s =
        compile(json!({"anyOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#"}}]}));
    assert!(s.is_valid(&json!([[null], [], null])) && !s.is_valid(&json!([[1]])));
    for (schema, key) in [
        (json!({"anyOf": []}), "anyOf"),
        (json!({"allOf": {}}), "allOf"),
        (json!({"prefixItems": {"type": "string"}}), "prefixItems"),
        (json!({"uniqueItems": "yes"}), "uniqueItems"),
        (json!({"minimum": "0"}), "minimum"),
    ] {
        let err = CompiledSchema::compile(&schema).unwrap_err();
        assert!(
            matches!(&err, SchemaCompileError::Malformed { pointer, .. } if pointer.ends_with(key)),
            "{schema}: {err}"
        );
    }
}

/// Each definition uses the next twice in place: 2^40 ways to the last one, one value.
fn doubling(key: &str, leaf: Value) -> Value {
    let mut defs = Map::new();
    for i in 0..40 {
        let next = json!({"$ref": format!("#/$defs/d{}", i + 1)});
        defs.insert(format!("d{i}"), json!({ key: [next.clone(), next] }));
    }
    defs.insert("d40".into(), leaf);
    json!({"$ref": "#/$defs/d0", "$defs": defs})
}

#[test]
fn a_subschema_reached_many_ways_is_checked_once_per_value() {
    let started = Instant::now();
    // allOf: a valid value visits every branch; anyOf: an invalid one does.
    let s = compile(doubling("allOf", json!({"type": "integer"})));
    assert!(s.remembers);
    assert!(s.is_valid(&json!(1)));
    let (violations, _) = listed(&s, &json!("x"));
    assert_eq!(
        violations,
        [triple(
            "",
            "/$defs/d40/type",
            "expected integer, found a string"
        )],
        "said once, however many ways lead there"
    );
    let s = compile(doubling("anyOf", json!({"type": "integer"})));
    assert!(s.is_valid(&json!(1)));
    let (violations, _) = listed(&s, &json!("x"));
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].1, "/$defs/d0/anyOf");
    let s = compile(doubling("oneOf", json!({"type": "integer"})));
    assert!(!s.is_valid(&json!(1)), "two branches always match");
    // Two ways to a node at every level of the value: 2^60 paths without the memo.
    let s = compile(json!({"$ref": "#/$defs/a", "$defs": {
        "a": {"$ref": "#/$defs/b", "properties": {"x": {"$ref": "#/$defs/a"}}},
        "b": {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}}}}));
    let mut deep = json!({});
    for _ in 0..60 {
        deep = json!({ "x": deep });
    }
    assert!(s.is_valid(&deep));
    let mut bad = json!(1);
    for _ in 0..60 {
        bad = json!({ "x": bad });
    }
    let (violations, _) = listed(&s, &bad);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0].1, "/$defs/b/type");
    assert!(started.elapsed() < Duration::from_secs(5));
    // A definition used by different fields never meets itself at one value: no memo. Two
    // alternatives whose payload is the same definition do.
    let s = compile(
        json!({"properties": {"a": {"$ref": "#/$defs/p"}, "b": {"$ref": "#/$defs/p"},
        "c": {"type": "array", "items": {"$ref": "#/$defs/p"}}},
        "$defs": {"p": {"type": "object", "required": ["x"]}}}),
    );
    assert!(!s.remembers);
    assert!(!s.is_valid(&json!({"a": {"x": 1}, "c": [{"x": 1}, {}]})));
    let s = compile(json!({"oneOf": [
        {"properties": {"tag": {"const": "a"}, "val": {"$ref": "#/$defs/p"}}},
        {"properties": {"tag": {"const": "b"}, "val": {"$ref": "#/$defs/p"}}}],
        "$defs": {"p": {"type": "object", "required": ["x"]}}}));
    assert!(s.remembers);
    assert!(s.is_valid(&json!({"tag": "a", "val": {"x": 1}})));
}
