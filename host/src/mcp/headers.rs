//! SEP-2243 `x-mcp-header` annotations (MCP 2026-07-28): a tool's input schema may mark a
//! primitive argument to be mirrored in an `Mcp-Param-NAME` header, so that a load balancer or
//! gateway can route a `tools/call` without reading its body.
//!
//! A tool declares the annotation in its own schema; the host checks it before serving the
//! tool (a client must leave out a tool whose annotations are malformed, so serving one would
//! hide the tool), and the HTTP transport (rmcp) checks every 2026-07-28 `tools/call` against
//! it: a header missing, not matching the argument, or badly Base64-encoded is refused with
//! `-32020` (HTTP 400) before the call reaches the host.

use serde_json::Value;

/// The most bytes of one header name suffix.
const MAX_HEADER_NAME: usize = 128;

/// `Ok` when every `x-mcp-header` of `schema` is well formed: on a property reached from the
/// root through `properties` alone, of type string, integer or boolean, a non-empty RFC 9110
/// token, and no two the same (letter case aside). `Err` says which is not.
pub fn check_annotations(schema: &Value) -> Result<(), String> {
    if schema.get("x-mcp-header").is_some() {
        return Err("x-mcp-header annotates the schema's root, not a property".into());
    }
    let mut seen: Vec<String> = Vec::new();
    walk(schema, true, "", &mut seen)
}

/// Check `schema` and what it holds; `chain` says whether it is the root or a property reached
/// through `properties` alone; `at` is its property path, for messages.
fn walk(schema: &Value, chain: bool, at: &str, seen: &mut Vec<String>) -> Result<(), String> {
    let Value::Object(map) = schema else {
        if let Value::Array(items) = schema {
            for item in items {
                walk(item, false, at, seen)?;
            }
        }
        return Ok(());
    };
    if let Some(header) = map.get("x-mcp-header") {
        if !chain {
            return Err(format!(
                "x-mcp-header at `{at}` is not on a property reached through `properties` alone"
            ));
        }
        let Some(name) = header.as_str() else {
            return Err(format!("property `{at}`: x-mcp-header is not a string"));
        };
        if name.is_empty() || name.len() > MAX_HEADER_NAME || !name.bytes().all(token) {
            return Err(format!(
                "property `{at}`: x-mcp-header {name:?} is not an HTTP token of 1 to {MAX_HEADER_NAME} bytes"
            ));
        }
        let primitive = matches!(
            map.get("type").and_then(Value::as_str),
            Some("string" | "integer" | "boolean")
        );
        if !primitive {
            return Err(format!(
                "property `{at}`: x-mcp-header marks only a string, integer or boolean"
            ));
        }
        let lower = name.to_ascii_lowercase();
        if seen.contains(&lower) {
            return Err(format!(
                "property `{at}`: x-mcp-header {name:?} is used twice"
            ));
        }
        seen.push(lower);
    }
    for (key, value) in map {
        if key == "properties"
            && let Value::Object(props) = value
        {
            for (name, prop) in props {
                let path = if at.is_empty() {
                    name.clone()
                } else {
                    format!("{at}.{name}")
                };
                walk(prop, chain, &path, seen)?;
            }
        } else if key != "x-mcp-header" {
            walk(value, false, at, seen)?;
        }
    }
    Ok(())
}

/// An RFC 9110 `tchar`.
fn token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn props(p: Value) -> Value {
        json!({ "type": "object", "properties": p })
    }

    #[test]
    fn annotations_sit_on_primitive_properties_with_unique_token_names() {
        let good = props(json!({
            "region": { "type": "string", "x-mcp-header": "Region" },
            "nested": { "type": "object", "properties": {
                "id": { "type": "integer", "x-mcp-header": "Id" } } },
        }));
        assert_eq!(check_annotations(&good), Ok(()));
        assert_eq!(check_annotations(&props(json!({}))), Ok(()));
        for bad in [
            json!({ "type": "object", "x-mcp-header": "Root" }),
            props(json!({ "n": { "type": "number", "x-mcp-header": "N" } })),
            props(json!({ "r": { "type": "string", "x-mcp-header": "" } })),
            props(json!({ "r": { "type": "string", "x-mcp-header": "bad:name" } })),
            props(json!({ "r": { "type": "string", "x-mcp-header": 3 } })),
            props(json!({ "a": { "type": "string", "x-mcp-header": "Region" },
                          "b": { "type": "string", "x-mcp-header": "region" } })),
            props(json!({ "a": { "type": "array",
                          "items": { "type": "string", "x-mcp-header": "Item" } } })),
            props(json!({ "c": { "oneOf": [{ "type": "string", "x-mcp-header": "C" }] } })),
            json!({ "type": "object",
                    "$defs": { "r": { "type": "string", "x-mcp-header": "R" } } }),
        ] {
            assert!(check_annotations(&bad).is_err(), "{bad}");
        }
    }
}
