//! The exact conversion both ways: round trips for every representable type, the refusals,
//! agreement with the derived schema, and the budget of `to_json`.

use super::{all, f};
use crate::foreign::{ConversionError, MAX_TYPE_DEPTH, to_json, to_val, to_vals, type_schema};
use crate::schema::CompiledSchema;
use serde_json::{Value, json};
use wasmtime::component::{Type, Val};

fn param(func: &str) -> Type {
    all().param(&f(func))
}

fn compiled(ty: &Type) -> CompiledSchema {
    CompiledSchema::compile(&type_schema(ty).expect("representable")).expect("compiles")
}

fn s(v: &str) -> Val {
    Val::String(v.to_string())
}

fn some(v: Val) -> Val {
    Val::Option(Some(Box::new(v)))
}

fn point(x: i32, y: i32) -> Val {
    Val::Record(vec![("x".into(), Val::S32(x)), ("y".into(), Val::S32(y))])
}

/// Values of each type, edge cases first.
fn samples() -> Vec<(&'static str, Vec<Val>)> {
    let person = |home| {
        Val::Record(vec![
            ("name".into(), s("Ada")),
            ("age".into(), Val::U8(36)),
            ("tags".into(), Val::List(vec![s("a"), s(""), s("ü\"\\\n`")])),
            ("home".into(), home),
        ])
    };
    let ok = |v| Val::Result(Ok(v));
    let err = |v| Val::Result(Err(v));
    vec![
        ("bools", vec![Val::Bool(true), Val::Bool(false)]),
        (
            "chars",
            vec![
                Val::Char('a'),
                Val::Char('é'),
                Val::Char('😀'),
                Val::Char('\0'),
            ],
        ),
        (
            "strings",
            vec![s(""), s("hello"), s("line\nbreak \"quoted\" \u{1}")],
        ),
        (
            "lists",
            vec![Val::List(vec![]), Val::List(vec![Val::U8(0), Val::U8(255)])],
        ),
        (
            "fixed",
            vec![Val::FixedLengthList(vec![
                Val::U8(1),
                Val::U8(2),
                Val::U8(3),
            ])],
        ),
        ("tuples", vec![Val::Tuple(vec![Val::U8(7), s("seven")])]),
        (
            "records",
            vec![person(Val::Option(None)), person(some(point(-1, i32::MAX)))],
        ),
        (
            "enums",
            vec![Val::Enum("red".into()), Val::Enum("blue".into())],
        ),
        (
            "flag-set",
            vec![
                Val::Flags(vec![]),
                Val::Flags(vec!["read".into(), "exec".into()]),
                Val::Flags(vec!["read".into(), "write".into(), "exec".into()]),
            ],
        ),
        (
            "variants",
            vec![
                Val::Variant("circle".into(), Some(Box::new(Val::Float64(1.5)))),
                Val::Variant("square".into(), Some(Box::new(Val::U32(4)))),
                Val::Variant("empty".into(), None),
            ],
        ),
        (
            "options",
            vec![
                Val::Option(None),
                some(Val::U32(0)),
                some(Val::U32(u32::MAX)),
            ],
        ),
        ("option-record", vec![Val::Option(None), some(point(3, 4))]),
        (
            "option-variant",
            vec![Val::Option(None), some(Val::Variant("empty".into(), None))],
        ),
        (
            "results",
            vec![
                ok(Some(Box::new(Val::U32(1)))),
                err(Some(Box::new(s("no")))),
            ],
        ),
        ("result-empty", vec![ok(None), err(None)]),
        (
            "result-err-only",
            vec![ok(None), err(Some(Box::new(s("bad"))))],
        ),
        (
            "list-of-options",
            vec![Val::List(vec![
                Val::Option(None),
                some(s("x")),
                some(s("")),
            ])],
        ),
    ]
}

#[test]
fn every_value_round_trips_and_its_json_passes_the_schema() {
    for (func, vals) in samples() {
        let ty = param(func);
        let schema = compiled(&ty);
        for val in vals {
            let mut budget = usize::MAX;
            let json = to_json(&val, &mut budget).expect("renders");
            assert!(schema.is_valid(&json), "{func}: the schema refuses {json}");
            let back = to_val(&json, &ty).unwrap_or_else(|e| panic!("{func}: {json}: {e}"));
            assert_eq!(back, val, "{func}: {json}");
        }
    }
}

#[test]
fn integers_and_floats_round_trip_at_their_extremes() {
    let ints = all().params(&f("ints"));
    let extremes = [
        vec![
            Val::U8(0),
            Val::U16(0),
            Val::U32(0),
            Val::U64(0),
            Val::S8(i8::MIN),
            Val::S16(i16::MIN),
            Val::S32(i32::MIN),
            Val::S64(i64::MIN),
        ],
        vec![
            Val::U8(u8::MAX),
            Val::U16(u16::MAX),
            Val::U32(u32::MAX),
            Val::U64(u64::MAX),
            Val::S8(i8::MAX),
            Val::S16(i16::MAX),
            Val::S32(i32::MAX),
            Val::S64(i64::MAX),
        ],
    ];
    for vals in extremes {
        let mut args = serde_json::Map::new();
        for ((name, _), v) in ints.iter().zip(&vals) {
            args.insert(name.clone(), to_json(v, &mut 1000).expect("renders"));
        }
        assert_eq!(
            to_vals(&Value::Object(args), &ints).expect("converts"),
            vals
        );
    }
    let floats = all().params(&f("floats"));
    for (a, b) in [
        (0.1f32, 0.1f64),
        (f32::MAX, f64::MAX),
        (f32::MIN_POSITIVE, f64::MIN_POSITIVE),
        (-0.0, -0.0),
        (1e-45, 5e-324),
    ] {
        let vals = vec![Val::Float32(a), Val::Float64(b)];
        let args = json!({
            "a": to_json(&vals[0], &mut 100).expect("renders"),
            "b": to_json(&vals[1], &mut 100).expect("renders"),
        });
        assert_eq!(to_vals(&args, &floats).expect("converts"), vals, "{args}");
    }
    // An f32 is written as its shortest decimal, not as the f64 it widens to.
    assert_eq!(to_json(&Val::Float32(0.1), &mut 100), Ok(json!(0.1)));
}

#[test]
fn nan_and_infinity_are_written_as_null() {
    for val in [
        Val::Float32(f32::NAN),
        Val::Float32(f32::INFINITY),
        Val::Float64(f64::NEG_INFINITY),
        Val::Float64(f64::NAN),
    ] {
        assert_eq!(to_json(&val, &mut 100), Ok(Value::Null), "{val:?}");
    }
}

/// A refusal: the function, the JSON, the pointer of the offending place and a word of the
/// message; and whether vak's schema stage refuses it too (else the keyword of the derived
/// schema that does, which vak lists as not enforced).
struct Refusal {
    func: &'static str,
    json: Value,
    pointer: &'static str,
    says: &'static str,
    schema: Check,
}

/// How the schema stage refuses the same value.
enum Check {
    Refuses,
    /// By this keyword (its pointer names it).
    RefusesBy(&'static str),
}

fn refusals() -> Vec<Refusal> {
    use Check::*;
    let r = |func, json, pointer, says, schema| Refusal {
        func,
        json,
        pointer,
        says,
        schema,
    };
    let person = |extra: Value| {
        let mut p = json!({"name": "Ada", "age": 36, "tags": [], "home": null});
        if let (Some(p), Some(extra)) = (p.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                p.insert(k.clone(), v.clone());
            }
        }
        p
    };
    vec![
        r("lists", json!(["3"]), "/0", "u8", Refuses),
        r("lists", json!([3.5]), "/0", "fraction", Refuses),
        r(
            "lists",
            json!([256]),
            "/0",
            "0 to 255",
            RefusesBy("maximum"),
        ),
        r("lists", json!([-1]), "/0", "0 to 255", RefusesBy("minimum")),
        r(
            "options",
            json!(-1),
            "",
            "0 to 4294967295",
            RefusesBy("anyOf"),
        ),
        r(
            "options",
            json!(4294967296u64),
            "",
            "range",
            RefusesBy("anyOf"),
        ),
        r("lists", json!({"0": 1}), "", "an array", Refuses),
        r(
            "chars",
            json!("ab"),
            "",
            "exactly one character",
            RefusesBy("maxLength"),
        ),
        r(
            "chars",
            json!(""),
            "",
            "exactly one character",
            RefusesBy("minLength"),
        ),
        r("chars", json!(97), "", "a string", Refuses),
        r("strings", json!(null), "", "a string", Refuses),
        r("bools", json!("true"), "", "a boolean", Refuses),
        r(
            "records",
            person(json!({"nick": "A"})),
            "",
            "\"nick\" is not a field",
            Refuses,
        ),
        r(
            "records",
            json!({"name": "Ada", "age": 36, "tags": []}),
            "",
            "\"home\" is missing",
            Refuses,
        ),
        r(
            "records",
            person(json!({"tags": ["a", 2]})),
            "/tags/1",
            "a string",
            Refuses,
        ),
        r(
            "records",
            person(json!({"home": {"x": 1}})),
            "/home",
            "\"y\" is missing",
            RefusesBy("anyOf"),
        ),
        r(
            "enums",
            json!("purple"),
            "",
            "not one of the enum's cases",
            Refuses,
        ),
        r(
            "flag-set",
            json!({"read": 1}),
            "/read",
            "a boolean",
            Refuses,
        ),
        r(
            "flag-set",
            json!({"read": true, "sudo": true}),
            "",
            "\"sudo\" is not a flag",
            Refuses,
        ),
        r(
            "variants",
            json!({"tag": "hexagon"}),
            "/tag",
            "not one of the variant's cases",
            RefusesBy("oneOf"),
        ),
        r(
            "variants",
            json!({"tag": "circle"}),
            "",
            "\"val\" is missing",
            RefusesBy("oneOf"),
        ),
        r(
            "variants",
            json!({"tag": "empty", "val": 1}),
            "",
            "\"val\" is not a member",
            RefusesBy("oneOf"),
        ),
        r(
            "variants",
            json!({"val": 1.0}),
            "",
            "no \"tag\"",
            RefusesBy("oneOf"),
        ),
        r("variants", json!("circle"), "", "an object", Refuses),
        r(
            "results",
            json!({"ok": 1, "err": "x"}),
            "",
            "exactly one",
            RefusesBy("oneOf"),
        ),
        r("results", json!({}), "", "exactly one", RefusesBy("oneOf")),
        r(
            "results",
            json!({"fine": 1}),
            "",
            "\"ok\" or \"err\"",
            RefusesBy("oneOf"),
        ),
        r(
            "results",
            json!({"err": 5}),
            "/err",
            "a string",
            RefusesBy("oneOf"),
        ),
        r(
            "result-empty",
            json!({"ok": 0}),
            "/ok",
            "null",
            RefusesBy("oneOf"),
        ),
        r(
            "tuples",
            json!([1]),
            "",
            "exactly 2 items",
            RefusesBy("minItems"),
        ),
        r(
            "tuples",
            json!([1, "a", 2]),
            "",
            "exactly 2 items",
            RefusesBy("maxItems"),
        ),
        r(
            "fixed",
            json!([1, 2]),
            "",
            "exactly 3 items",
            RefusesBy("minItems"),
        ),
        r(
            "floats-a",
            json!(1e39),
            "",
            "range of an f32",
            RefusesBy("maximum"),
        ),
        r(
            "floats-a",
            json!(-1e39),
            "",
            "range of an f32",
            RefusesBy("minimum"),
        ),
        r("floats-a", json!("1.5"), "", "a number", Refuses),
    ]
}

#[test]
fn conversion_is_exact_and_never_coerces() {
    for case in refusals() {
        let ty = match case.func {
            "floats-a" => all().params(&f("floats"))[0].1.clone(),
            func => param(func),
        };
        let err = match to_val(&case.json, &ty) {
            Ok(v) => panic!("{}: {} was taken as {v:?}", case.func, case.json),
            Err(e) => e,
        };
        let ConversionError::Invalid { pointer, message } = &err else {
            panic!("{}: {err}", case.func);
        };
        assert_eq!(pointer, case.pointer, "{}: {}: {err}", case.func, case.json);
        assert!(
            message.contains(case.says),
            "{}: {}: {err}",
            case.func,
            case.json
        );
        let schema = compiled(&ty);
        match case.schema {
            Check::Refuses => assert!(
                !schema.is_valid(&case.json),
                "{}: the schema accepts {}",
                case.func,
                case.json
            ),
            // The schema stage refuses it too, by the keyword that states the constraint.
            Check::RefusesBy(keyword) => {
                let violations = match schema.validate_value(&case.json) {
                    Ok(()) => panic!("{}: the schema accepts {}", case.func, case.json),
                    Err(e) => format!("{e:?}"),
                };
                assert!(
                    violations.contains(keyword),
                    "{}: {} is not refused by `{keyword}`: {violations}",
                    case.func,
                    case.json
                );
            }
        }
    }
}

#[test]
fn an_integer_is_any_number_without_a_fraction_as_the_schema_stage_reads_it() {
    // JSON Schema's `integer` (the schema stage's) takes 3.0: the conversion agrees, so a call
    // the schema admits is never refused later for the way a number was written.
    assert_eq!(
        to_val(&json!(3.0), &param("options")).unwrap(),
        some(Val::U32(3))
    );
    assert_eq!(
        to_val(&json!(1e2), &param("options")).unwrap(),
        some(Val::U32(100))
    );
    let err = to_val(&json!(3.5), &param("options")).expect_err("3.5");
    assert!(err.to_string().contains("fraction"), "{err}");
    let err = to_val(&json!(1e10), &param("options")).expect_err("1e10");
    assert!(err.to_string().contains("out of that range"), "{err}");
    // The schema stage agrees on each.
    let schema = compiled(&param("options"));
    assert!(schema.is_valid(&json!(3.0)));
    assert!(!schema.is_valid(&json!(3.5)));
    assert!(!schema.is_valid(&json!(1e10)));
}

#[test]
fn option_of_option_is_refused_when_converting_too() {
    let err = to_val(&json!(null), &param("nested-option")).expect_err("ambiguous");
    assert!(err.to_string().contains("option<option"), "{err}");
}

#[test]
fn arguments_are_taken_in_the_parameters_order_and_exactly() {
    let params = all().params(&f("floats"));
    let vals = to_vals(&json!({"b": 2.5, "a": 1.5}), &params).expect("converts");
    assert_eq!(vals, vec![Val::Float32(1.5), Val::Float64(2.5)]);
    let missing = to_vals(&json!({"a": 1.5}), &params).expect_err("b is missing");
    assert_eq!(
        missing,
        ConversionError::at("", "the parameter \"b\" is missing")
    );
    let extra = to_vals(&json!({"a": 1, "b": 2, "c": 3}), &params).expect_err("c");
    assert_eq!(
        extra,
        ConversionError::at("", "\"c\" is not a parameter of this function")
    );
    let wrong = to_vals(&json!({"a": 1, "b": "2"}), &params).expect_err("b");
    assert_eq!(
        wrong,
        ConversionError::at("/b", "expected a number, got a string")
    );
    assert!(to_vals(&json!([1, 2]), &params).is_err());
    assert_eq!(to_vals(&json!({}), &all().params(&f("make"))), Ok(vec![]));
}

#[test]
fn a_refusal_never_echoes_a_large_input() {
    let huge = "k".repeat(100_000);
    let mut args = serde_json::Map::new();
    args.insert("url".into(), json!("x"));
    args.insert(huge.clone(), json!(huge.clone()));
    let err = to_vals(&Value::Object(args), &all().params(&f("fetch"))).expect_err("extra");
    assert!(
        err.to_string().len() < 300,
        "{} bytes",
        err.to_string().len()
    );
    let err = to_val(&json!({"tag": huge}), &param("variants")).expect_err("unknown case");
    assert!(
        err.to_string().len() < 300,
        "{} bytes",
        err.to_string().len()
    );
    let long_pointer = format!("/{}", huge);
    let err = ConversionError::at(&long_pointer, huge.clone());
    assert!(
        err.to_string().len() < 400,
        "{} bytes",
        err.to_string().len()
    );
}

#[test]
fn the_budget_stops_a_large_list() {
    let list = Val::List(vec![Val::U8(255); 1_000_000]);
    let mut budget = 64 << 10;
    assert_eq!(
        to_json(&list, &mut budget),
        Err(ConversionError::TooLarge { limit: 64 << 10 })
    );
    assert_eq!(budget, 0);
    let text = Val::String("x".repeat(10_000));
    assert_eq!(
        to_json(&text, &mut 5_000),
        Err(ConversionError::TooLarge { limit: 5_000 })
    );
    // What fits is charged: a 3-byte string is 5 bytes of JSON.
    let mut budget = 5;
    assert_eq!(to_json(&s("abc"), &mut budget), Ok(json!("abc")));
    assert_eq!(budget, 0);
    assert!(to_json(&s("abc"), &mut 4).is_err());
    // Escapes are counted: a quote is written as two bytes.
    assert!(to_json(&s("\"\""), &mut 5).is_err());
    assert!(to_json(&s("\"\""), &mut 6).is_ok());
}

#[test]
fn what_json_cannot_carry_is_refused_on_output() {
    let err = to_json(&Val::Map(vec![]), &mut 100).expect_err("a map");
    assert!(err.to_string().contains("cannot be rendered"), "{err}");
    let mut deep = Val::Bool(true);
    for _ in 0..MAX_TYPE_DEPTH {
        deep = Val::List(vec![deep]);
    }
    let err = to_json(&deep, &mut 10_000).expect_err("too deep");
    assert!(err.to_string().contains("deeper than"), "{err}");
}
