//! A vak tool's descriptor, as `describe` returned it, checked against the bounds before it is
//! parsed.

use super::{AdmissionError, BudgetClaim, CapabilityClaim, Claims, Descriptor, bounds, shown};
use crate::bindings::vak::tool::types as wit;

/// Check what `describe` returned against [`descriptor_bounds`], then parse it. Every check is
/// linear in the descriptor's size, and a refusal names the bound, never the text.
pub(super) fn descriptor_from_wit(d: wit::Descriptor) -> Result<Descriptor, AdmissionError> {
    let bad = |what: String| Err(AdmissionError::BadDescriptor(what));
    let name_ok = !d.name.is_empty()
        && d.name.len() <= bounds::MAX_NAME_BYTES
        && d.name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !name_ok {
        return bad(format!(
            "tool name {:?} must be 1-{} characters of a-z, 0-9, '-' and '_'",
            shown(&d.name, bounds::MAX_NAME_BYTES),
            bounds::MAX_NAME_BYTES
        ));
    }
    let over = |what: &str, actual: usize, limit: usize| {
        bad(format!("{what} is {actual}; at most {limit} are admitted"))
    };
    if d.description.len() > bounds::MAX_DESCRIPTION_BYTES {
        return over(
            "the description's size in bytes",
            d.description.len(),
            bounds::MAX_DESCRIPTION_BYTES,
        );
    }
    if d.input_schema.len() > bounds::MAX_SCHEMA_BYTES {
        return over(
            "the input schema's size in bytes",
            d.input_schema.len(),
            bounds::MAX_SCHEMA_BYTES,
        );
    }
    let depth = crate::proposal::nesting_depth(&d.input_schema);
    if depth > bounds::MAX_SCHEMA_DEPTH {
        return over(
            "the input schema's nesting depth",
            depth,
            bounds::MAX_SCHEMA_DEPTH,
        );
    }
    let claims = &d.claims.capabilities;
    if claims.len() > bounds::MAX_CLAIMS {
        return over(
            "the number of claimed capabilities",
            claims.len(),
            bounds::MAX_CLAIMS,
        );
    }
    let scopes: usize = claims.iter().map(|c| c.scopes.len()).sum();
    if scopes > bounds::MAX_SCOPES {
        return over("the number of claimed scopes", scopes, bounds::MAX_SCOPES);
    }
    if let Some(longest) = claims
        .iter()
        .flat_map(|c| c.scopes.iter().map(String::len).chain([c.name.len()]))
        .max()
        .filter(|&n| n > bounds::MAX_SCOPE_BYTES)
    {
        return over(
            "the longest claimed scope in bytes",
            longest,
            bounds::MAX_SCOPE_BYTES,
        );
    }
    if d.payload_schemas.len() > bounds::MAX_PAYLOAD_SCHEMAS {
        return over(
            "the number of payload schema ids",
            d.payload_schemas.len(),
            bounds::MAX_PAYLOAD_SCHEMAS,
        );
    }
    if let Some(longest) = d
        .payload_schemas
        .iter()
        .map(String::len)
        .max()
        .filter(|&n| n > bounds::MAX_PAYLOAD_SCHEMA_ID_BYTES)
    {
        return over(
            "the longest payload schema id in bytes",
            longest,
            bounds::MAX_PAYLOAD_SCHEMA_ID_BYTES,
        );
    }
    let input_schema: serde_json::Value = serde_json::from_str(&d.input_schema)
        .map_err(|e| AdmissionError::BadDescriptor(format!("input schema is not JSON: {e}")))?;
    Ok(Descriptor {
        name: d.name,
        description: d.description,
        input_schema,
        payload_schemas: d.payload_schemas,
        claims: Claims {
            capabilities: d
                .claims
                .capabilities
                .into_iter()
                .map(|c| CapabilityClaim {
                    name: c.name,
                    scopes: c.scopes,
                })
                .collect(),
            budget: BudgetClaim {
                fuel: d.claims.budget.fuel,
                memory_bytes: d.claims.budget.memory_bytes,
                wall_time_ms: d.claims.budget.wall_time_ms,
                result_bytes: d.claims.budget.result_bytes,
            },
        },
    })
}
