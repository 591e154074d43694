use super::*;

fn compile(s: Value) -> CompiledSchema {
    CompiledSchema::compile(&s).expect("compiles")
}

#[test]
fn every_violation_is_reported_with_both_pointers() {
    let s = compile(json!({
        "type": "object",
        "properties": {
            "zone": {"type": "string"},
            "rows": {"type": "array", "items": {"$ref": "#/$defs/row"}}
        },
        "required": ["zone", "rows"],
        "additionalProperties": false,
        "$defs": {"row": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}
    }));
    let err = s
        .validate_value(&json!({"rows": [{"n": 1}, {"n": "2"}, {}], "extra": true}))
        .unwrap_err();
    let SchemaError::Violations { violations, more } = err;
    assert_eq!(more, 0);
    let pairs: Vec<(&str, &str)> = violations
        .iter()
        .map(|v| (v.instance.as_str(), v.keyword.as_str()))
        .collect();
    assert!(pairs.contains(&("", "/required")), "{pairs:?}");
    assert!(
        pairs.contains(&("/rows/1/n", "/$defs/row/properties/n/type")),
        "{pairs:?}"
    );
    assert!(
        pairs.contains(&("/rows/2", "/$defs/row/required")),
        "{pairs:?}"
    );
    assert!(
        pairs.contains(&("/extra", "/additionalProperties")),
        "{pairs:?}"
    );
    assert_eq!(violations.len(), 4);
}

#[test]
fn nothing_is_coerced() {
    let s = compile(json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
    assert!(
        s.validate_value(&json!({"n": "5"})).is_err(),
        "\"5\" is not 5"
    );
    assert!(
        s.validate_value(&json!({"n": 5.0})).is_ok(),
        "5.0 is an integer"
    );
    assert!(s.validate_value(&json!({"n": 5.5})).is_err());
}

#[test]
fn remote_refs_and_cycles_are_refused_at_compile_time() {
    for r in ["https://example.com/s.json", "other.json#/a", "#anchor"] {
        let err = CompiledSchema::compile(&json!({"$ref": r})).unwrap_err();
        assert!(
            matches!(err, SchemaCompileError::NonLocalRef { .. }),
            "{r}: {err}"
        );
    }
    let err = CompiledSchema::compile(&json!({"$ref": "#"})).unwrap_err();
    assert!(matches!(err, SchemaCompileError::RefCycle { .. }), "{err}");
    let err = CompiledSchema::compile(&json!({"$ref": "#/$defs/missing"})).unwrap_err();
    assert!(
        matches!(err, SchemaCompileError::UnresolvedRef { .. }),
        "{err}"
    );
    // A recursive schema that descends is fine.
    let tree = compile(
        json!({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}),
    );
    assert!(tree.is_valid(&json!({"kids": [{"kids": []}]})));
    assert!(!tree.is_valid(&json!({"kids": [1]})));
}

#[test]
fn keywords_outside_the_subset_are_listed_not_enforced() {
    let s = compile(json!({
        "type": "object",
        "title": "t",
        "properties": {
            "n": {"type": "integer", "minimum": 0, "format": "uint32"},
            "s": {"type": "string", "pattern": "^a"}
        },
        "patternProperties": {"^x": {}}
    }));
    assert_eq!(
        s.not_enforced,
        [
            "/patternProperties",
            "/properties/n/format",
            "/properties/s/pattern"
        ]
    );
    assert!(
        s.is_valid(&json!({"s": "b"})),
        "pattern is not enforced, and says so"
    );
    assert!(!s.is_valid(&json!({"n": -1})), "minimum is enforced");
}

fn listed(s: &CompiledSchema, v: &Value) -> (Vec<(String, String, String)>, usize) {
    match s.validate_value(v) {
        Ok(()) => (Vec::new(), 0),
        Err(SchemaError::Violations { violations, more }) => (
            violations
                .into_iter()
                .map(|v| (v.instance, v.keyword, v.message))
                .collect(),
            more,
        ),
    }
}

fn triple(instance: &str, keyword: &str, message: &str) -> (String, String, String) {
    (instance.into(), keyword.into(), message.into())
}

#[test]
fn violations_keep_their_order_pointers_and_messages() {
    let s = compile(json!({
        "type": "object",
        "required": ["a/b", "t~x", "gone"],
        "properties": {
            "a/b": {"type": ["string", "null"]},
            "t~x": {"const": {"k": [1, 2.0]}},
            "list": {"type": "array", "items": {"enum": ["gift", "a-rather-long-member", 3]}}
        },
        "additionalProperties": false
    }));
    let list: Vec<Value> = (0..13)
        .map(|i| if i == 12 { json!("nope") } else { json!(3.0) })
        .collect();
    let (violations, more) = listed(
        &s,
        &json!({"a/b": 1, "t~x": {"k": [1, 2]}, "list": list, "x/y~z": true}),
    );
    assert_eq!(more, 0);
    assert_eq!(
        violations,
        [
            triple("", "/required", "the required property \"gone\" is missing"),
            triple(
                "/a~1b",
                "/properties/a~1b/type",
                "expected string or null, found a number"
            ),
            triple(
                "/list/12",
                "/properties/list/items/enum",
                "\"nope\" is not one of [\"gift\",\"a-rather-long-member\",3]"
            ),
            triple(
                "/x~1y~0z",
                "/additionalProperties",
                "the property \"x/y~z\" is not allowed"
            ),
        ]
    );
    // A required name that is not declared is still refused by `additionalProperties`.
    let (violations, _) = listed(&s, &json!({"a/b": null, "t~x": {"k": [1]}, "gone": 0}));
    assert_eq!(
        violations,
        [
            triple(
                "/t~0x",
                "/properties/t~0x/const",
                "{\"k\":[1]} is not the required value {\"k\":[1,2.0]}"
            ),
            triple(
                "/gone",
                "/additionalProperties",
                "the property \"gone\" is not allowed"
            ),
        ]
    );
}

#[test]
fn properties_are_found_in_any_order_and_through_the_index() {
    // More properties than a scan suits, a required name that is only checked by
    // `additionalProperties`, and a duplicate in `required`.
    let props: Map<String, Value> = (0..20)
        .map(|i| (format!("p{i}"), json!({"type": "integer"})))
        .collect();
    let s = compile(json!({
        "properties": props,
        "required": ["p3", "extra", "p3", "p19"],
        "additionalProperties": {"type": "string"}
    }));
    let mut all: Vec<(String, Value)> = (0..20).map(|i| (format!("p{i}"), json!(i))).collect();
    all.push(("extra".into(), json!("x")));
    // The schema's order, reversed, sorted by name (p0, p1, p10, …) and scattered (every
    // 13th of the 21, so that no key follows its predecessor in the schema): each valid,
    // and each invalid once a value is of the wrong type.
    let mut orders = vec![all.clone()];
    orders.push(all.iter().rev().cloned().collect());
    let mut sorted = all.clone();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    orders.push(sorted);
    orders.push(
        (0..all.len())
            .map(|k| all[(k * 13) % all.len()].clone())
            .collect(),
    );
    for entries in orders {
        let object = Value::Object(entries.iter().cloned().collect());
        assert!(s.is_valid(&object), "{object}");
        for wrong in ["p0", "p10", "p19", "extra"] {
            let mut object = object.clone();
            object[wrong] = if wrong == "extra" {
                json!(1)
            } else {
                json!("x")
            };
            assert!(!s.is_valid(&object), "{object}");
            let (violations, _) = listed(&s, &object);
            assert_eq!(violations.len(), 1, "{object}");
            assert_eq!(violations[0].0, format!("/{wrong}"));
        }
    }
    // Out of order, with the required names missing, an undeclared key of the wrong type
    // and a declared one of the wrong type.
    let (violations, _) = listed(&s, &json!({"p7": 1, "zz": 2, "p0": "0", "extra": 5}));
    assert_eq!(
        violations,
        [
            triple("", "/required", "the required property \"p3\" is missing"),
            triple("", "/required", "the required property \"p3\" is missing"),
            triple("", "/required", "the required property \"p19\" is missing"),
            triple(
                "/zz",
                "/additionalProperties/type",
                "expected string, found a number"
            ),
            triple(
                "/p0",
                "/properties/p0/type",
                "expected integer, found a string"
            ),
            triple(
                "/extra",
                "/additionalProperties/type",
                "expected string, found a number"
            ),
        ]
    );
}

#[test]
fn many_names_go_through_a_table_or_else_an_index() {
    // Names a table separates; long names that share their first and last 8 bytes and
    // their length (so their keys), which no table separates; more names than a table
    // takes. Each object is checked in the schema's order, reversed and scattered.
    let sets: [Vec<String>; 3] = [
        (0..60).map(|i| format!("field_{i}")).collect(),
        (10..30)
            .map(|i| format!("the_argument_number_{i}_of_this_call"))
            .collect(),
        (0..=Table::MAX_NAMES).map(|i| format!("p{i}")).collect(),
    ];
    for (names, table) in sets.iter().zip([true, false, false]) {
        let props: Map<String, Value> = names
            .iter()
            .map(|n| (n.clone(), json!({"type": "integer"})))
            .collect();
        let last = &names[names.len() - 1];
        let s = compile(json!({
            "properties": props,
            "required": [&names[0], last],
            "additionalProperties": false
        }));
        let entries = &s.nodes[0].entries;
        assert_eq!(entries.table.is_some(), table, "{names:?}");
        assert_eq!(entries.index.is_some(), !table, "{names:?}");
        let n = names.len();
        let orders: [Vec<usize>; 3] = [
            (0..n).collect(),
            (0..n).rev().collect(),
            (0..n).map(|k| (k * 7) % n).collect(),
        ];
        for order in orders {
            let object: Map<String, Value> = order
                .iter()
                .map(|&i| (names[i].clone(), json!(i)))
                .collect();
            assert!(s.is_valid(&Value::Object(object.clone())));
            let mut wrong = object.clone();
            wrong.insert(names[n / 2].clone(), json!("x"));
            wrong.insert(format!("{}_", &names[0]), json!(1));
            wrong.remove(last);
            let (violations, _) = listed(&s, &Value::Object(wrong));
            let pointers: Vec<&str> = violations.iter().map(|v| v.0.as_str()).collect();
            let expected_value = format!("/{}", names[n / 2]);
            let expected_extra = format!("/{}_", names[0]);
            assert_eq!(violations.len(), 3, "{violations:?}");
            assert_eq!(violations[0].1, "/required");
            assert!(pointers.contains(&expected_value.as_str()), "{pointers:?}");
            assert!(pointers.contains(&expected_extra.as_str()), "{pointers:?}");
        }
    }
}

#[test]
fn enum_and_const_compare_as_json_does() {
    let s = compile(json!({"enum": [1, "gift", "a-rather-long-member", {"a": [1.0]}, null]}));
    for ok in [
        json!(1.0),
        json!(1),
        json!("gift"),
        json!("a-rather-long-member"),
        json!({"a": [1]}),
        json!(null),
    ] {
        assert!(s.is_valid(&ok), "{ok}");
    }
    for bad in [
        json!("gifu"),
        json!("a-rather-long-membes"),
        json!("1"),
        json!(true),
        json!({"a": [2]}),
        json!([1]),
    ] {
        assert!(!s.is_valid(&bad), "{bad}");
    }
    let s = compile(json!({"const": 18446744073709551615u64}));
    assert!(s.is_valid(&json!(18446744073709551615u64)));
    assert!(!s.is_valid(&json!(-1)));
}

#[test]
fn the_cap_counts_what_it_does_not_list() {
    let s = compile(json!({"type": "array", "items": {"type": "integer", "enum": [1, 2]}}));
    let many = Value::Array((0..100).map(|i| json!(format!("s{i}"))).collect());
    let (violations, more) = listed(&s, &many);
    assert_eq!(violations.len(), MAX_VIOLATIONS);
    assert_eq!(more, 200 - MAX_VIOLATIONS);
    assert_eq!(
        violations[1],
        triple("/0", "/items/enum", "\"s0\" is not one of [1,2]")
    );
    assert_eq!(violations[63].0, "/31");
}

#[test]
fn short_strings_compare_and_key_as_equality_does() {
    let base: String = (0..40).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    for len in 0..=40 {
        let a = &base[..len];
        let mut variants = vec![format!("{a}x")];
        if len > 0 {
            variants.push(base[..len - 1].to_string());
        }
        for at in 0..len {
            let mut b = a.as_bytes().to_vec();
            b[at] = b'#';
            variants.push(String::from_utf8(b).unwrap());
        }
        assert!(same_str(a, a));
        for b in &variants {
            assert!(!same_str(a, b), "{a:?} {b:?}");
            if len <= 16 && b.len() <= 16 {
                assert_ne!(Key::of(a), Key::of(b), "{a:?} {b:?}");
            }
            if len <= 16 && b.len() == len {
                assert!(!same_short(a.as_bytes(), b.as_bytes()), "{a:?} {b:?}");
            }
        }
    }
}
