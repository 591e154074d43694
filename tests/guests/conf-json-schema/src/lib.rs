//! `json_schema_2020_12_tool`, for the MCP conformance suite's `json-schema-2020-12` scenario:
//! an input schema written by hand with the 2020-12 keywords (`$schema`, `$defs` with an
//! `$anchor`, `$ref`, `allOf`/`anyOf`, `if`/`then`/`else`, `additionalProperties`), which the
//! host must declare as written and enforce.

use vak_guest::prelude::*;
use vak_guest::schemars::{Schema, SchemaGenerator, json_schema};

#[derive(Deserialize)]
#[allow(dead_code)] // read to check the arguments; the tool reports only what it was given
pub struct Args {
    name: Option<String>,
    #[serde(rename = "contactMethod")]
    contact_method: Option<String>,
    phone: Option<String>,
    email: Option<String>,
    address: Option<vak_guest::serde_json::Value>,
}

impl JsonSchema for Args {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Args".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "$anchor": "addressDef",
                    "type": "object",
                    "properties": {
                        "street": { "type": "string" },
                        "city": { "type": "string" }
                    }
                }
            },
            "properties": {
                "name": { "type": "string" },
                "address": { "$ref": "#/$defs/address" },
                "contactMethod": { "type": "string", "enum": ["phone", "email"] },
                "phone": { "type": "string" },
                "email": { "type": "string" }
            },
            "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
            "if": {
                "properties": { "contactMethod": { "const": "phone" } },
                "required": ["contactMethod"]
            },
            "then": { "required": ["phone"] },
            "else": { "required": ["email"] },
            "additionalProperties": false
        })
    }
}

pub struct Tool1;

impl Tool for Tool1 {
    type Args = Args;
    const NAME: &'static str = "json_schema_2020_12_tool";
    const DESCRIPTION: &'static str = "Tool with JSON Schema 2020-12 features";

    fn call(args: Args) -> Result<Output, ToolError> {
        Ok(Output::markdown(format!(
            "contact {} by {}",
            args.name.unwrap_or_default(),
            args.contact_method.unwrap_or_else(|| "email".into())
        )))
    }
}

vak_guest::export_tool!(Tool1);
