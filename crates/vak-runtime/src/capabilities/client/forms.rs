//! The forms a tool may send a person through elicitation: the flat shape MCP allows, so that a
//! client can render one and the host can check the answers against it.

use super::MAX_FORM_FIELDS;
use serde_json::{Value, json};

/// Check a form schema: an object whose properties are strings, numbers, integers, booleans or
/// arrays of enumerated strings, the flat shape MCP elicitation allows (so that a client can
/// render it and the host can check the answers). `Err` says what is wrong.
pub fn check_form(schema: &Value) -> Result<(), String> {
    let obj = schema
        .as_object()
        .ok_or("the form schema is not a JSON object")?;
    if obj.get("type") != Some(&json!("object")) {
        return Err("the form schema must have `\"type\": \"object\"`".into());
    }
    let props = obj
        .get("properties")
        .and_then(Value::as_object)
        .ok_or("the form schema has no `properties` object")?;
    if props.len() > MAX_FORM_FIELDS {
        return Err(format!(
            "the form has {} fields; at most {MAX_FORM_FIELDS}",
            props.len()
        ));
    }
    for (name, def) in props {
        field_kind(def).map_err(|e| format!("field {name:?}: {e}"))?;
    }
    if let Some(required) = obj.get("required") {
        let list = required.as_array().ok_or("`required` is not an array")?;
        for r in list {
            let r = r.as_str().ok_or("`required` holds a non-string")?;
            if !props.contains_key(r) {
                return Err(format!("`required` names {r:?}, which is not a field"));
            }
        }
    }
    Ok(())
}

/// What one form field accepts.
enum FieldKind {
    String(Option<Vec<String>>),
    Number,
    Integer,
    Boolean,
    /// An array of strings from this set.
    Choices(Vec<String>),
}

/// The allowed values of an enumeration written as `enum` or as `oneOf`/`anyOf` of `const`s.
fn choices(def: &serde_json::Map<String, Value>) -> Result<Option<Vec<String>>, String> {
    let strings = |list: &Vec<Value>, f: &dyn Fn(&Value) -> Option<String>| {
        list.iter()
            .map(|v| f(v).ok_or("an enumerated value is not a string".to_string()))
            .collect::<Result<Vec<_>, _>>()
    };
    if let Some(Value::Array(list)) = def.get("enum") {
        return strings(list, &|v| v.as_str().map(str::to_string)).map(Some);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(list)) = def.get(key) {
            let f = |v: &Value| v.get("const").and_then(Value::as_str).map(str::to_string);
            return strings(list, &f).map(Some);
        }
    }
    Ok(None)
}

fn field_kind(def: &Value) -> Result<FieldKind, String> {
    let def = def.as_object().ok_or("the definition is not an object")?;
    match def.get("type").and_then(Value::as_str) {
        Some("string") => Ok(FieldKind::String(choices(def)?)),
        Some("number") => Ok(FieldKind::Number),
        Some("integer") => Ok(FieldKind::Integer),
        Some("boolean") => Ok(FieldKind::Boolean),
        Some("array") => {
            let items = def
                .get("items")
                .and_then(Value::as_object)
                .ok_or("an array field needs `items`")?;
            match choices(items)? {
                Some(c) => Ok(FieldKind::Choices(c)),
                None => Err("an array field's items must enumerate their strings".into()),
            }
        }
        Some(other) => Err(format!(
            "type {other:?} is not a form type (string, number, integer, boolean, array)"
        )),
        None => Err("the definition has no `type`".into()),
    }
}

/// Check the person's answers against the form: only its fields, each of its type and within
/// its choices, every required field present. `Err` names the first problem.
pub fn check_answers(
    schema: &Value,
    answers: &serde_json::Map<String, Value>,
) -> Result<(), String> {
    let empty = serde_json::Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for (name, value) in answers {
        let def = props
            .get(name)
            .ok_or_else(|| format!("{name:?} is not a field of the form"))?;
        let ok = match field_kind(def)? {
            FieldKind::String(None) => value.is_string(),
            FieldKind::String(Some(c)) => value.as_str().is_some_and(|s| c.iter().any(|x| x == s)),
            FieldKind::Number => value.is_number(),
            FieldKind::Integer => value.is_i64() || value.is_u64(),
            FieldKind::Boolean => value.is_boolean(),
            FieldKind::Choices(c) => value.as_array().is_some_and(|a| {
                a.iter()
                    .all(|v| v.as_str().is_some_and(|s| c.iter().any(|x| x == s)))
            }),
        };
        if !ok {
            return Err(format!("the answer to {name:?} does not fit its field"));
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for r in required.iter().filter_map(Value::as_str) {
            if !answers.contains_key(r) {
                return Err(format!("the required field {r:?} is not answered"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "default": "John Doe" },
                "age": { "type": "integer" },
                "score": { "type": "number" },
                "status": { "type": "string", "enum": ["active", "inactive"] },
                "titled": { "type": "string", "oneOf": [{ "const": "a", "title": "A" }] },
                "many": { "type": "array", "items": { "anyOf": [{ "const": "x" }, { "const": "y" }] } },
                "ok": { "type": "boolean" },
            },
            "required": ["name"],
        })
    }

    #[test]
    fn forms_of_the_mcp_shape_are_accepted_and_others_refused() {
        assert_eq!(check_form(&form()), Ok(()));
        for bad in [
            json!({ "type": "object" }),
            json!({ "type": "array", "properties": {} }),
            json!({ "type": "object", "properties": { "n": { "type": "object" } } }),
            json!({ "type": "object", "properties": { "n": { "type": "array", "items": { "type": "string" } } } }),
            json!({ "type": "object", "properties": {}, "required": ["ghost"] }),
        ] {
            assert!(check_form(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn answers_are_checked_against_the_form() {
        let ok = json!({ "name": "Jane", "age": 3, "status": "active", "titled": "a", "many": ["x", "y"], "ok": true });
        assert_eq!(check_answers(&form(), ok.as_object().unwrap()), Ok(()));
        for bad in [
            json!({ "age": 3 }),
            json!({ "name": 7 }),
            json!({ "name": "J", "age": 3.5 }),
            json!({ "name": "J", "status": "gone" }),
            json!({ "name": "J", "titled": "b" }),
            json!({ "name": "J", "many": ["z"] }),
            json!({ "name": "J", "extra": 1 }),
        ] {
            assert!(
                check_answers(&form(), bad.as_object().unwrap()).is_err(),
                "{bad}"
            );
        }
    }
}
