//! Each row of the mapping table, the unrepresentable types, and the bounds on the work a
//! component's types can ask for.

use super::{all, f, kit};
use crate::foreign::{
    MAX_SCHEMA_BYTES, MAX_TYPE_DEPTH, Unrepresentable, input_schema, result_representable,
    type_schema,
};
use crate::schema::CompiledSchema;
use serde_json::{Value, json};

fn schema_of(func: &str) -> Value {
    type_schema(&all().param(&f(func))).expect("representable")
}

#[test]
fn every_row_of_the_mapping_table() {
    let point = json!({
        "type": "object",
        "properties": {
            "x": {"type": "integer", "minimum": -2147483648i64, "maximum": 2147483647},
            "y": {"type": "integer", "minimum": -2147483648i64, "maximum": 2147483647},
        },
        "required": ["x", "y"],
        "additionalProperties": false,
    });
    let shape = json!({"type": "object", "oneOf": [
        {"type": "object", "properties": {"tag": {"const": "circle"}, "val": {"type": "number"}},
         "required": ["tag", "val"], "additionalProperties": false},
        {"type": "object", "properties": {"tag": {"const": "square"},
             "val": {"type": "integer", "minimum": 0, "maximum": 4294967295u64}},
         "required": ["tag", "val"], "additionalProperties": false},
        {"type": "object", "properties": {"tag": {"const": "empty"}},
         "required": ["tag"], "additionalProperties": false},
    ]});
    let rows: Vec<(&str, Value)> = vec![
        ("bools", json!({"type": "boolean"})),
        (
            "chars",
            json!({"type": "string", "minLength": 1, "maxLength": 1}),
        ),
        ("strings", json!({"type": "string"})),
        (
            "lists",
            json!({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 255}}),
        ),
        (
            "fixed",
            json!({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 255},
                          "minItems": 3, "maxItems": 3}),
        ),
        (
            "tuples",
            json!({"type": "array", "prefixItems": [
            {"type": "integer", "minimum": 0, "maximum": 255}, {"type": "string"}],
            "minItems": 2, "maxItems": 2}),
        ),
        (
            "records",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "age": {"type": "integer", "minimum": 0, "maximum": 255},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "home": {"type": ["null", "object"], "anyOf": [{"type": "null"}, point.clone()]},
                },
                "required": ["name", "age", "tags", "home"],
                "additionalProperties": false,
            }),
        ),
        (
            "enums",
            json!({"type": "string", "enum": ["red", "green", "blue"]}),
        ),
        (
            "flag-set",
            json!({"type": "object", "properties": {
            "read": {"type": "boolean"}, "write": {"type": "boolean"}, "exec": {"type": "boolean"}},
            "additionalProperties": false}),
        ),
        ("variants", shape.clone()),
        (
            "options",
            json!({"type": ["null", "integer"], "anyOf": [{"type": "null"},
            {"type": "integer", "minimum": 0, "maximum": 4294967295u64}]}),
        ),
        (
            "option-variant",
            json!({"type": ["null", "object"], "anyOf": [{"type": "null"}, shape]}),
        ),
        (
            "results",
            json!({"type": "object", "oneOf": [
                {"type": "object", "properties": {"ok": {"type": "integer", "minimum": 0, "maximum": 4294967295u64}},
                 "required": ["ok"], "additionalProperties": false},
                {"type": "object", "properties": {"err": {"type": "string"}},
                 "required": ["err"], "additionalProperties": false},
            ]}),
        ),
        (
            "result-empty",
            json!({"type": "object", "oneOf": [
                {"type": "object", "properties": {"ok": {"type": "null"}}, "required": ["ok"], "additionalProperties": false},
                {"type": "object", "properties": {"err": {"type": "null"}}, "required": ["err"], "additionalProperties": false},
            ]}),
        ),
        (
            "list-of-options",
            json!({"type": "array", "items":
            {"type": ["null", "string"], "anyOf": [{"type": "null"}, {"type": "string"}]}}),
        ),
    ];
    for (func, expected) in rows {
        assert_eq!(
            schema_of(func),
            expected,
            "the schema of {func}'s parameter"
        );
    }
}

#[test]
fn integers_carry_their_exact_ranges_and_floats_are_numbers() {
    let schema = input_schema(&all().params(&f("ints"))).expect("representable");
    let range = |p: &str| {
        let s = &schema["properties"][p];
        assert_eq!(s["type"], "integer");
        (s["minimum"].clone(), s["maximum"].clone())
    };
    assert_eq!(range("a"), (json!(0), json!(255)));
    assert_eq!(range("b"), (json!(0), json!(65535)));
    assert_eq!(range("c"), (json!(0), json!(4294967295u64)));
    assert_eq!(range("d"), (json!(0), json!(18446744073709551615u64)));
    assert_eq!(range("e"), (json!(-128), json!(127)));
    assert_eq!(range("f"), (json!(-32768), json!(32767)));
    assert_eq!(range("g"), (json!(-2147483648i64), json!(2147483647)));
    assert_eq!(
        range("h"),
        (
            json!(-9223372036854775808i64),
            json!(9223372036854775807i64)
        )
    );
    // The extremes are written exactly, not as floats.
    let text = schema.to_string();
    assert!(text.contains("18446744073709551615") && text.contains("-9223372036854775808"));
    let floats = input_schema(&all().params(&f("floats"))).expect("representable");
    let max = f64::from(f32::MAX);
    assert_eq!(
        floats["properties"]["a"],
        json!({"type": "number", "minimum": -max, "maximum": max})
    );
    assert_eq!(floats["properties"]["b"], json!({"type": "number"}));
}

#[test]
fn the_arguments_are_one_closed_object_of_every_parameter() {
    let schema = input_schema(&all().params(&f("fetch"))).expect("representable");
    assert_eq!(
        schema,
        json!({
            "type": "object",
            "properties": {"url": {"type": "string"}},
            "required": ["url"],
            "additionalProperties": false,
        })
    );
    let ints = input_schema(&all().params(&f("ints"))).expect("representable");
    assert_eq!(
        ints["required"],
        json!(["a", "b", "c", "d", "e", "f", "g", "h"])
    );
    // vak's own schema stage compiles it and checks the arguments' shape with it.
    let compiled = CompiledSchema::compile(&schema).expect("compiles");
    assert!(compiled.is_valid(&json!({"url": "https://example.com"})));
    assert!(!compiled.is_valid(&json!({"url": 3})));
    assert!(!compiled.is_valid(&json!({})));
    assert!(!compiled.is_valid(&json!({"url": "x", "other": 1})));
}

#[test]
fn option_of_option_is_refused_as_ambiguous() {
    let err = input_schema(&all().params(&f("nested-option"))).expect_err("ambiguous");
    assert_eq!(err, Unrepresentable::NestedOption { path: "/o".into() });
    assert!(err.to_string().contains("/o"), "{err}");
    assert!(err.to_string().contains("option<option"), "{err}");
}

#[test]
fn resources_maps_and_their_results_are_refused_with_the_place_and_the_type() {
    for (func, ty) in [
        ("take-own", "resource handle (own)"),
        ("take-borrow", "borrowed resource handle (borrow)"),
        ("maps", "map"),
    ] {
        let err = input_schema(&all().params(&f(func))).expect_err("unrepresentable");
        let param = &all().params(&f(func))[0].0;
        assert_eq!(
            err,
            Unrepresentable::Type {
                path: format!("/{param}"),
                ty
            },
            "{func}"
        );
        assert!(err.to_string().contains(ty), "{err}");
    }
    let err = result_representable(&all().result(&f("make"))).expect_err("a handle");
    assert!(err.to_string().contains("resource handle"), "{err}");
    result_representable(&all().result(&f("fetch"))).expect("a result<string, string>");
}

/// `list<list<…<u8>>>` with `lists` lists.
fn nested_lists(lists: usize) -> String {
    format!("{}u8{}", "list<".repeat(lists), ">".repeat(lists))
}

#[test]
fn nesting_is_bounded_at_max_type_depth() {
    let wit = format!(
        "package test:deep;\nworld w {{\n export at-limit: func(x: {});\n export past-limit: func(x: {});\n}}\n",
        nested_lists(MAX_TYPE_DEPTH - 1),
        nested_lists(MAX_TYPE_DEPTH),
    );
    let built = kit::build(&wit);
    input_schema(&built.params("at-limit")).expect("32 types deep is accepted");
    let err = input_schema(&built.params("past-limit")).expect_err("33 deep");
    let path = format!("/x{}", "/*".repeat(MAX_TYPE_DEPTH));
    assert_eq!(
        err,
        Unrepresentable::TooDeep {
            path,
            limit: MAX_TYPE_DEPTH
        }
    );
    assert!(err.to_string().len() < 220, "{err}");
}

#[test]
fn a_wide_record_or_a_huge_enum_stops_at_the_schema_size_bound() {
    let fields: Vec<String> = (0..5000).map(|i| format!("field{i}: u64")).collect();
    let cases: Vec<String> = (0..10000).map(|i| format!("case{i}")).collect();
    let wit = format!(
        "package test:wide;\ninterface i {{\n record wide {{ {} }}\n enum huge {{ {} }}\n \
         take-wide: func(x: wide);\n take-huge: func(x: huge);\n}}\nworld w {{ export i; }}\n",
        fields.join(", "),
        cases.join(", "),
    );
    let built = kit::build(&wit);
    for func in ["take-wide", "take-huge"] {
        let err =
            input_schema(&built.params(&format!("test:wide/i#{func}"))).expect_err("past 64 KiB");
        assert!(
            matches!(err, Unrepresentable::TooLarge { limit, .. } if limit == MAX_SCHEMA_BYTES),
            "{func}: {err}"
        );
    }
}

#[test]
fn a_type_that_repeats_another_stops_before_expanding_it() {
    // r0 holds two r1, each two r2, …: 2^15 leaves, a schema of megabytes if expanded
    // (wasmparser caps a type's expanded size at a million, so it cannot go much further).
    let mut records = Vec::new();
    for i in 0..14 {
        records.push(format!("record r{i} {{ a: r{n}, b: r{n} }}", n = i + 1));
    }
    records.push("record r14 { a: u8, b: u8 }".to_string());
    let wit = format!(
        "package test:dag;\ninterface i {{\n {}\n take: func(x: r0);\n}}\nworld w {{ export i; }}\n",
        records.join("\n ")
    );
    let built = kit::build(&wit);
    let err = input_schema(&built.params("test:dag/i#take")).expect_err("too large");
    assert!(matches!(err, Unrepresentable::TooLarge { .. }), "{err}");
}

#[test]
fn a_schema_within_the_bound_is_no_larger_than_counted() {
    // The count is an upper estimate: a schema accepted is within MAX_SCHEMA_BYTES of text.
    let fields: Vec<String> = (0..200)
        .map(|i| format!("field{i}: option<list<u64>>"))
        .collect();
    let wit = format!(
        "package test:fit;\ninterface i {{\n record r {{ {} }}\n take: func(x: r);\n}}\nworld w {{ export i; }}\n",
        fields.join(", ")
    );
    let built = kit::build(&wit);
    let schema = input_schema(&built.params("test:fit/i#take")).expect("fits");
    let text = schema.to_string();
    assert!(text.len() > 20_000, "a sizeable schema: {}", text.len());
    assert!(text.len() <= MAX_SCHEMA_BYTES);
}

#[test]
fn a_refusal_names_a_long_path_within_bounds() {
    let long = "a".repeat(300);
    let wit = format!(
        "package test:long;\ninterface i {{\n resource res;\n record r {{ {long}: own<res> }}\n \
         take: func(x: r);\n}}\nworld w {{ export i; }}\n"
    );
    let built = kit::build(&wit);
    let err = input_schema(&built.params("test:long/i#take")).expect_err("a handle");
    let text = err.to_string();
    assert!(text.len() < 220, "{} bytes: {text}", text.len());
    assert!(text.contains("/x/aaaa") && text.contains('…'), "{text}");
}
