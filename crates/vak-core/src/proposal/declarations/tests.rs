//! What each provider is told, against the admitted schema.

use super::*;

fn stats() -> Value {
    json!({"$schema":"x","title":"Args","type":"object","additionalProperties":false,
        "properties":{"values":{"type":"array","items":{"type":"number","format":"double"}},
            "unit":{"type":["string","null"],"default":null}},
        "required":["values"]})
}

#[test]
fn nullable_optional_properties_stay_strict_and_are_required() {
    let d = declaration(Provider::OpenAiChat, "stats", "d", &stats());
    assert!(d.strict, "{:?}", d.notes);
    let p = &d.entry["function"]["parameters"];
    assert_eq!(d.entry["function"]["strict"], true);
    assert_eq!(p["required"], json!(["values", "unit"]));
    assert_eq!(p["additionalProperties"], false);
    assert_eq!(p["properties"]["unit"]["type"], json!(["string", "null"]));
    assert!(
        p.get("$schema").is_none() && p["properties"]["values"]["items"].get("format").is_none()
    );
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("/properties/unit") && n.contains("null"))
    );
    assert!(
        d.notes.iter().any(|n| n.contains("format")),
        "{:?}",
        d.notes
    );
}

#[test]
fn an_optional_field_that_refuses_null_is_declared_non_strict() {
    // `#[serde(default)] upper: bool`: a strict model would have to send `"upper": null`,
    // which the schema stage refuses.
    let schema = json!({"type":"object","additionalProperties":false,
        "properties":{"text":{"type":"string"},"upper":{"type":"boolean","default":false}},
        "required":["text"]});
    let d = declaration(Provider::OpenAiResponses, "t", "d", &schema);
    assert!(!d.strict);
    assert_eq!(d.entry["strict"], false);
    assert_eq!(
        d.entry["parameters"], schema,
        "the admitted schema, unchanged"
    );
    assert!(
        d.notes
            .iter()
            .any(|n| n.starts_with("declared non-strict") && n.contains("/properties/upper")),
        "{:?}",
        d.notes
    );
}

#[test]
fn strict_recurses_into_any_of_items_and_defs() {
    // A Rust enum with data, as schemars writes it: the variants' objects get every
    // property required and no extra ones; uint8's format is left out, its bounds kept (the
    // schema stage enforces them, and strict mode takes them).
    let schema = json!({"type":"object","additionalProperties":false,
        "properties":{"shape":{"$ref":"#/$defs/Shape","description":"d"},
            "sizes":{"type":"array","items":{"type":"integer","format":"uint8","minimum":0,"maximum":255}}},
        "required":["shape","sizes"],
        "$defs":{"Shape":{"oneOf":[
            {"type":"string","const":"Point"},
            {"type":"object","properties":{"Circle":{"type":"object","properties":{"r":{"type":"number"}},"required":["r"],"additionalProperties":false}},
             "required":["Circle"],"additionalProperties":false}]}}});
    let d = declaration(Provider::OpenAiChat, "t", "d", &schema);
    assert!(d.strict, "{:?}", d.notes);
    let p = &d.entry["function"]["parameters"];
    let shape = &p["properties"]["shape"];
    assert_eq!(shape["anyOf"][1]["additionalProperties"], false);
    assert_eq!(
        shape["anyOf"][1]["properties"]["Circle"]["required"],
        json!(["r"])
    );
    assert_eq!(
        p["properties"]["sizes"]["items"],
        json!({"type":"integer","minimum":0,"maximum":255})
    );
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("/oneOf") && n.contains("exclude each other")),
        "{:?}",
        d.notes
    );
    assert!(p["$defs"]["Shape"]["anyOf"].is_array());
    // A variant with an optional field cannot be strict.
    let mut loose = schema.clone();
    loose["$defs"]["Shape"]["oneOf"][1]["properties"]["Circle"]["required"] = json!([]);
    let d = declaration(Provider::OpenAiChat, "t", "d", &loose);
    assert!(!d.strict);
    assert!(
        d.notes.iter().any(|n| n.contains("/properties/r")),
        "{:?}",
        d.notes
    );
}

#[test]
fn inlining_refs_is_bounded() {
    // Each definition uses the next twice, each use with a description beside its `$ref`:
    // inlined, 2^40 nodes. The conversion stops at its budget and declares it non-strict.
    let mut defs = Map::new();
    for i in 0..40 {
        let next = json!({"$ref": format!("#/$defs/D{}", i + 1), "description": "d"});
        defs.insert(
            format!("D{i}"),
            json!({"type":"object","additionalProperties":false,
                "properties":{"a": next.clone(), "b": next},"required":["a","b"]}),
        );
    }
    defs.insert("D40".into(), json!({"type": "string"}));
    let schema = json!({"type":"object","additionalProperties":false,
        "properties":{"root":{"$ref":"#/$defs/D0"}},"required":["root"],"$defs": defs});
    let started = std::time::Instant::now();
    let d = declaration(Provider::OpenAiChat, "t", "d", &schema);
    assert!(!d.strict);
    assert!(
        d.notes.iter().any(|n| n.contains("more than")),
        "{:?}",
        d.notes
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn gemini_keeps_any_of_and_additional_properties() {
    let schema = json!({"$schema":"x","type":"object","additionalProperties":false,
        "properties":{"v":{"anyOf":[{"type":"integer"},{"type":"null"}]},"k":{"const":"a"}},"required":["k"]});
    let d = declaration(Provider::Gemini, "t", "d", &schema);
    let s = &d.entry["parametersJsonSchema"];
    assert_eq!(s["properties"]["v"], schema["properties"]["v"]);
    assert_eq!(s["additionalProperties"], false);
    assert_eq!(s["properties"]["k"], json!({"enum":["a"]}));
    assert!(
        s.get("$schema").is_none() && d.notes.is_empty(),
        "{:?}",
        d.notes
    );
    assert_eq!(
        request_tools(Provider::Gemini, vec![d.entry.clone()])["tools"][0]["functionDeclarations"]
            [0],
        d.entry
    );
}

#[test]
fn what_the_stage_enforces_and_strict_mode_cannot_say_is_declared_non_strict() {
    use crate::schema::ENFORCED;
    assert!(
        UNENFORCED_VALUE_CHECKS
            .iter()
            .all(|k| !ENFORCED.contains(k))
    );
    assert!(STRICT_VALUE_CHECKS.iter().all(|k| ENFORCED.contains(k)));
    // A WIT `char`: strict mode would let the model send "ab", which the stage refuses.
    let schema = json!({"type":"object","additionalProperties":false,
        "properties":{"c":{"type":"string","minLength":1,"maxLength":1}},"required":["c"]});
    let d = declaration(Provider::OpenAiChat, "t", "d", &schema);
    assert!(!d.strict);
    assert_eq!(d.entry["function"]["parameters"], schema);
    assert!(
        d.notes
            .iter()
            .any(|n| n.starts_with("declared non-strict") && n.contains("/minLength")),
        "{:?}",
        d.notes
    );
    // A oneOf whose alternatives overlap (2 is both): anyOf would allow what the stage refuses.
    let schema = json!({"type":"object","additionalProperties":false,
        "properties":{"n":{"oneOf":[{"type":"integer"},{"type":"number","minimum":1}]}},
        "required":["n"]});
    let d = declaration(Provider::OpenAiResponses, "t", "d", &schema);
    assert!(!d.strict);
    assert!(
        d.notes.iter().any(|n| n.contains("/properties/n/oneOf")),
        "{:?}",
        d.notes
    );
    let d = declaration(Provider::Gemini, "t", "d", &schema);
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("/properties/n/oneOf") && n.contains("Gemini reads oneOf")),
        "{:?}",
        d.notes
    );
}
