//! One call of a foreign component's exported function (a component built for another host):
//! the arguments, already past the schema stage, converted exactly to component values; the
//! function called on a fresh instance; its return converted back to JSON within the call's
//! result cap and handed to the result stage as any tool's result: the value as the payload
//! (schema [`VALUE_SCHEMA`]), a lossless Markdown rendering of it as the document, no evidence.
//! A `result<T, E>` return's `err` is the tool's own error.

use super::bindings::vak::tool::types as wit;
use super::run::GuestReturn;
use super::state::CallState;
use crate::foreign::{self, ConversionError};
use serde_json::Value;
use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, InstancePre, Type, Val};

/// The payload schema id of a foreign function's value: no schema is registered for it, so
/// the projection shows the document, and nothing is labelled verified that was not earned.
pub const VALUE_SCHEMA: &str = "wit.value";

/// The tool error code of a function that returned `err`.
pub const ERR_CODE: &str = "err";

/// A foreign function ready to be called: its component linked for its grant, its export,
/// and its signature.
pub struct ForeignFunction {
    pub(crate) pre: InstancePre<CallState>,
    pub(crate) export: ComponentExportIndex,
    pub(crate) params: Vec<(String, Type)>,
    pub(crate) results: Vec<Type>,
}

/// How a foreign call can fail before or after the guest ran (the guest's own traps are
/// wasmtime errors, classified as for any tool).
#[derive(Debug)]
pub(crate) enum Failed {
    /// The arguments did not convert: the schema derived from the same types accepted them, so
    /// this is the host's defect.
    Arguments(ConversionError),
    Instantiate(wasmtime::Error),
    Call(wasmtime::Error),
    /// The function is not in the instance (a defect: admission found it in the component).
    Missing,
}

/// Instantiate `function`'s component in `store` and call it with `arguments` (JSON text).
/// `result_bytes` bounds the JSON made of the return.
pub(crate) async fn call(
    function: &ForeignFunction,
    store: &mut Store<CallState>,
    arguments: &str,
    result_bytes: u64,
) -> Result<GuestReturn, Failed> {
    // The arguments passed the proposal and schema stages; this parse cannot fail for them,
    // and its failure is reported as a conversion failure at the root, not unwrapped.
    let arguments: Value = serde_json::from_str(arguments)
        .map_err(|e| Failed::Arguments(ConversionError::at("", format!("not JSON: {e}"))))?;
    let params = foreign::to_vals(&arguments, &function.params).map_err(Failed::Arguments)?;
    let instance = function
        .pre
        .instantiate_async(&mut *store)
        .await
        .map_err(Failed::Instantiate)?;
    let func = instance
        .get_func(&mut *store, function.export)
        .ok_or(Failed::Missing)?;
    // Placeholders of the right count: the call overwrites each.
    let mut results = vec![Val::Bool(false); function.results.len()];
    func.call_async(&mut *store, &params, &mut results)
        .await
        .map_err(Failed::Call)?;
    Ok(returned(&results, result_bytes))
}

/// The function's return as the tool's result or error.
fn returned(results: &[Val], result_bytes: u64) -> GuestReturn {
    let mut budget = usize::try_from(result_bytes).unwrap_or(usize::MAX);
    let value = match results {
        [] => Ok(Value::Null),
        [Val::Result(Err(err))] => {
            let message = match err.as_deref() {
                None => Ok("the function returned an error without a value".to_string()),
                Some(Val::String(text)) => Ok(text.clone()),
                Some(other) => foreign::to_json(other, &mut budget).map(|v| v.to_string()),
            };
            return match message {
                Ok(message) => GuestReturn::ToolError(wit::ToolError {
                    code: ERR_CODE.to_string(),
                    message,
                }),
                Err(e) => too_large_or(e),
            };
        }
        [Val::Result(Ok(ok))] => match ok.as_deref() {
            None => Ok(Value::Null),
            Some(v) => foreign::to_json(v, &mut budget),
        },
        [one] => foreign::to_json(one, &mut budget),
        // The component model gives a function one result at most (admission reads it so).
        many => Err(ConversionError::at(
            "",
            format!("{} results, where a function has one at most", many.len()),
        )),
    };
    match value {
        Ok(value) => GuestReturn::Completed(wit::ToolResult {
            markdown: foreign::markdown(&value),
            payload: Some(wit::Payload {
                schema: VALUE_SCHEMA.to_string(),
                json: value.to_string(),
            }),
            evidence: Vec::new(),
            attachments: Vec::new(),
        }),
        Err(e) => too_large_or(e),
    }
}

/// A return past the result cap, or one that could not be converted (a defect: admission
/// checked that every result type converts).
fn too_large_or(e: ConversionError) -> GuestReturn {
    match e {
        ConversionError::TooLarge { limit } => GuestReturn::Oversized {
            limit: limit as u64,
        },
        other => GuestReturn::Unconvertible(other.to_string()),
    }
}
