//! A call record as an MCP `tools/call` result.
//!
//! - completed: `structuredContent` is the tool's payload, `content` its Markdown document and a
//!   JSON text copy of the payload (for clients that read only `content`);
//! - a tool error, a refusal (the schema's violations with their pointers, a denial, a budget)
//!   or a failure in the sandbox: `isError: true` with a text the model can read and act on;
//! - always: `_meta` with the call id, status, stage, verification label, requirement outcomes
//!   and receipts, so a client can cite what the host really observed; and, once journaled, the
//!   record's place in its chain (`dev.vak/journal`: chain, entry, hash, and whether the record
//!   carries its signature or a checkpoint of the journal signs it).

use crate::record::{CallRecord, Status};
use serde_json::{Value, json};

/// The key prefix of vak's `_meta` entries (MCP reserves reverse-DNS prefixes for vendors).
pub const META_PREFIX: &str = "dev.vak/";

/// The `CallToolResult` of `record`; `declared_output` says whether the tool's declaration
/// carries an `outputSchema` (then a payload that did not pass it is not sent as structured
/// content, and the call is reported as an error of the tool's output contract).
pub fn call_result(record: &CallRecord, declared_output: bool) -> Value {
    let meta = meta(record);
    match record.status {
        Status::Completed => {
            let Some(result) = &record.result else {
                return error_result("the call completed without a result".into(), meta);
            };
            let payload = result
                .payload_json
                .as_deref()
                .and_then(|p| serde_json::from_str::<Value>(p).ok());
            let passed = record.outcome.as_ref().is_some_and(|o| o.payload_passed);
            let mut content = vec![text_item(result.markdown.clone())];
            // The payload's JSON text as the tool returned it, for clients that read only
            // `content` (it parsed, or it would not be sent).
            if payload.is_some()
                && let Some(text) = &result.payload_json
            {
                content.push(text_item(text.clone()));
            }
            content.extend(result.attachments.iter().map(attachment_content));
            // Moved in rather than named in `json!`, which copies a value through `to_value`.
            let mut out = json!({ "resultType": "complete", "isError": false });
            out["content"] = Value::Array(content);
            out["_meta"] = meta;
            match payload {
                Some(p) if p.is_object() && (passed || !declared_output) => {
                    out["structuredContent"] = p;
                }
                _ if declared_output => {
                    let why = match &result.payload_schema {
                        Some(id) => format!(
                            "the tool's payload does not satisfy its declared payload schema `{id}`; \
                             its document is kept above"
                        ),
                        None => "the tool returned no payload, though it declares an output schema"
                            .to_string(),
                    };
                    out["isError"] = Value::Bool(true);
                    if let Some(items) = out["content"].as_array_mut() {
                        items.push(text_item(why));
                    }
                }
                _ => {}
            }
            out
        }
        Status::ToolError => {
            let text = match &record.tool_error {
                Some(e) => format!("The tool returned an error `{}`: {}", e.code, e.message),
                None => "The tool returned an error.".to_string(),
            };
            error_result(text, meta)
        }
        Status::Refused | Status::Failed => error_result(refusal_text(record), meta),
    }
}

/// What a model reads when the host refused or stopped a call: the stage, the condition, whether
/// retrying the same call can help, and the figures (for a schema violation, each offending
/// value's pointer and the keyword that refused it).
fn refusal_text(record: &CallRecord) -> String {
    let Some(e) = &record.error else {
        return format!(
            "The call ended as `{}` at the {} stage.",
            record.status.as_str(),
            record.stage
        );
    };
    let verb = if record.status == Status::Refused {
        "refused"
    } else {
        "stopped"
    };
    let retry = if e.retryable {
        "retrying the same call may succeed"
    } else {
        "retrying the same call will fail the same way"
    };
    let mut text = format!(
        "vak {verb} the call at the {} stage ({}; {retry}): {}",
        e.stage, e.kind, e.message
    );
    if let Some(violations) = e.details["violations"].as_array() {
        text.push_str("\nViolations:");
        for v in violations {
            let at = v["instance"].as_str().unwrap_or("");
            text.push_str(&format!(
                "\n- at `{}` (schema `{}`): {}",
                if at.is_empty() { "/" } else { at },
                v["keyword"].as_str().unwrap_or(""),
                v["message"].as_str().unwrap_or("")
            ));
        }
    } else if !e.details.is_null() {
        text.push_str(&format!("\nDetails: {}", e.details));
    }
    text
}

/// An attachment as MCP content: `image`, `audio`, or an embedded `resource` (text or blob).
fn attachment_content(a: &crate::record::AttachmentRecord) -> Value {
    match a.kind.as_str() {
        "image" | "audio" => json!({
            "type": a.kind,
            "data": a.base64.as_deref().unwrap_or_default(),
            "mimeType": a.mime_type,
        }),
        _ => {
            let mut resource = json!({ "uri": a.uri, "mimeType": a.mime_type });
            match (&a.text, &a.base64) {
                (Some(t), _) => resource["text"] = json!(t),
                (None, b) => resource["blob"] = json!(b.as_deref().unwrap_or_default()),
            }
            json!({ "type": "resource", "resource": resource })
        }
    }
}

/// `value` (a [`call_result`]) as rmcp's type. The `_meta` and the structured content, most of a
/// result, are moved rather than parsed again: under load, serde's round trip through the whole
/// value took about 4 % of the server's time. Only the content items are converted.
pub(crate) fn typed(value: Value) -> Result<rmcp::model::CallToolResult, serde_json::Error> {
    let Value::Object(mut fields) = value else {
        return serde_json::from_value(value);
    };
    // `resultType` is always `complete` here, the default.
    let mut result = rmcp::model::CallToolResult::default();
    if let Some(content) = fields.remove("content") {
        result.content = serde_json::from_value(content)?;
    }
    result.structured_content = fields.remove("structuredContent");
    result.is_error = fields.remove("isError").and_then(|v| v.as_bool());
    result.meta = match fields.remove("_meta") {
        Some(Value::Object(meta)) => Some(rmcp::model::MetaObject(meta)),
        _ => None,
    };
    Ok(result)
}

fn error_result(text: String, meta: Value) -> Value {
    let mut out = json!({ "resultType": "complete", "isError": true });
    out["content"] = Value::Array(vec![text_item(text)]);
    out["_meta"] = meta;
    out
}

/// A `text` content item, `text` moved in (`json!` would copy it through `to_value`).
fn text_item(text: String) -> Value {
    let mut item = serde_json::Map::new();
    item.insert("type".into(), Value::from("text"));
    item.insert("text".into(), Value::String(text));
    Value::Object(item)
}

fn meta(record: &CallRecord) -> Value {
    let key = |k: &str| format!("{META_PREFIX}{k}");
    let mut m = serde_json::Map::new();
    m.insert(key("call_id"), json!(record.call_id));
    // The budget session the call was charged to: sent back as `_meta["dev.vak/session"]`, the
    // next call is charged to it too (on any node of a shared store).
    m.insert(key("session"), json!(record.session_id));
    m.insert(key("status"), json!(record.status.as_str()));
    m.insert(key("stage"), json!(record.stage.as_str()));
    m.insert(
        key("label"),
        json!(record.outcome.as_ref().map(|o| o.label)),
    );
    m.insert(
        key("requirements"),
        json!(
            record
                .outcome
                .as_ref()
                .map_or(&[][..], |o| &o.requirements[..])
        ),
    );
    m.insert(key("receipts"), json!(record.all_receipts()));
    let evidence: Vec<Value> = record.evidence.iter().map(|e| e.joined()).collect();
    m.insert(key("evidence"), Value::Array(evidence));
    m.insert(key("usage"), json!(record.usage));
    if let Some(Ok(place)) = &record.journaled {
        // Without its signature (`--signing checkpoints`), the entry's hash is what the client
        // holds: the checkpoint that covers it signs it within milliseconds.
        m.insert(
            key("journal"),
            json!({
                "chain": place.node.as_ref().map(|n| &n.0),
                "entry": place.node.as_ref().map(|n| n.1),
                "hash": place.hash,
                "signed_by": if record.signature.is_some() { "record" } else { "checkpoint" },
            }),
        );
    }
    if let Some(e) = &record.error {
        m.insert(key("error"), json!(e));
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The moved conversion gives what serde's own `Deserialize` of the same value gives.
    #[test]
    fn typed_matches_serde() {
        let meta = json!({ "dev.vak/call_id": "call_1", "dev.vak/usage": { "fuel": 7 } });
        let values = [
            json!({
                "resultType": "complete",
                "content": [
                    { "type": "text", "text": "| a |" },
                    { "type": "image", "data": "aGk=", "mimeType": "image/png" },
                    { "type": "resource", "resource": { "uri": "file:///r", "mimeType": "text/plain", "text": "r" } },
                ],
                "isError": false,
                "structuredContent": { "count": 3 },
                "_meta": meta,
            }),
            error_result("refused".into(), meta.clone()),
            json!({ "resultType": "complete", "content": [], "isError": true, "_meta": {} }),
        ];
        for v in values {
            let serde: rmcp::model::CallToolResult =
                serde_json::from_value(v.clone()).expect("serde");
            let moved = typed(v.clone()).expect("typed");
            assert_eq!(moved, serde, "{v}");
            assert_eq!(serde_json::to_value(&moved).expect("json"), v);
        }
    }
}
