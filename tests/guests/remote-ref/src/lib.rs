//! A tool whose input schema points at a remote document: admission must refuse it without
//! fetching anything. Written against the raw bindings, as a non-SDK toolchain would.

use vak_guest::bindings::exports::vak::tool::tool::Guest;
use vak_guest::bindings::vak::tool::types::{
    BudgetClaim, Claims, Descriptor, ToolError, ToolResult,
};

struct RemoteRef;

impl Guest for RemoteRef {
    fn describe() -> Descriptor {
        Descriptor {
            name: "remote-ref".into(),
            description: "Its schema refers to a remote document.".into(),
            input_schema: r#"{"type":"object","properties":{"x":{"$ref":"https://schemas.example.com/x.json"}}}"#.into(),
            payload_schemas: Vec::new(),
            claims: Claims {
                capabilities: Vec::new(),
                budget: BudgetClaim { fuel: None, memory_bytes: None, wall_time_ms: None, result_bytes: None },
            },
        }
    }

    fn call(_arguments: String) -> Result<ToolResult, ToolError> {
        Err(ToolError {
            code: "unreachable".into(),
            message: "never admitted".into(),
        })
    }
}

vak_guest::bindings::__export_sandboxed_tool!(RemoteRef with_types_in vak_guest::bindings);
