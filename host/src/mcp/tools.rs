//! An admitted tool as an MCP tool declaration: the admitted input schema, an output schema from
//! the registered payload schemas, and annotations derived from what the policy grants (never from
//! what the tool says about itself).

use crate::admission::AdmittedTool;
use crate::registry::Registry;
use serde_json::{Value, json};

/// The `tools/list` entry of `tool`.
pub fn declaration<'h>(
    tool: &AdmittedTool,
    tools: &dyn Fn(&str) -> Option<&'h AdmittedTool>,
    registry: &Registry,
) -> Value {
    let d = &tool.descriptor;
    let hints = Hints::of(tool, tools);
    let mut decl = json!({
        "name": d.name,
        "title": title(&d.name, &d.description),
        "description": d.description,
        "inputSchema": d.input_schema,
        "annotations": {
            "title": title(&d.name, &d.description),
            "readOnlyHint": hints.read_only,
            "destructiveHint": hints.destructive,
            "openWorldHint": hints.open_world,
        },
        "_meta": {
            "dev.vak/granted": tool.grant.capabilities.keys().map(|c| c.name()).collect::<Vec<_>>(),
            "dev.vak/payload_schemas": d.payload_schemas,
            "dev.vak/digest": tool.examination.digest,
        },
    });
    if let Some(schema) = output_schema(&d.payload_schemas, registry) {
        decl["outputSchema"] = schema;
    }
    decl
}

/// A short display name: the description's first sentence when it is short, else the name.
fn title(name: &str, description: &str) -> String {
    let first = description
        .split_once(". ")
        .map_or(description, |(s, _)| s)
        .trim_end_matches('.')
        .trim();
    if !first.is_empty() && first.chars().count() <= 60 {
        first.to_string()
    } else {
        name.to_string()
    }
}

/// The output schema of a tool whose every declared payload schema is registered: that schema,
/// or `anyOf` them. A payload id the host does not know gives no output schema at all (the host
/// cannot promise a shape it cannot check).
pub(crate) fn output_schema(ids: &[String], registry: &Registry) -> Option<Value> {
    let docs: Vec<&Value> = ids
        .iter()
        .map(|id| registry.get(id).map(|p| &p.document))
        .collect::<Option<_>>()?;
    match docs.as_slice() {
        [] => None,
        [one] => Some((*one).clone()),
        many => Some(json!({ "type": "object", "anyOf": many })),
    }
}

/// MCP's behaviour hints, from the grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hints {
    /// Nothing granted can change anything outside the call: no write root, no `http` grant
    /// that admits a method beyond GET and HEAD, no child run of a tool that could.
    pub read_only: bool,
    /// A write root is granted (a write replaces a file's content), or `http` with `PUT` or
    /// `DELETE`.
    pub destructive: bool,
    /// `http` is granted (it reaches origins outside the host), itself or through a child run.
    pub open_world: bool,
}

impl Hints {
    pub(crate) fn of<'h>(
        tool: &AdmittedTool,
        tools: &dyn Fn(&str) -> Option<&'h AdmittedTool>,
    ) -> Hints {
        Self::walk(tool, tools, &mut vec![tool.name().to_string()])
    }

    fn walk<'h>(
        tool: &AdmittedTool,
        tools: &dyn Fn(&str) -> Option<&'h AdmittedTool>,
        seen: &mut Vec<String>,
    ) -> Hints {
        let mut h = Hints {
            read_only: true,
            destructive: false,
            open_world: false,
        };
        // What each granted scope can do is its capability's to say (`GrantedScope::effects`).
        for scope in tool.grant.capabilities.values() {
            let effects = scope.effects();
            h.read_only &= !effects.changes;
            h.destructive |= effects.destructive;
            h.open_world |= effects.open_world;
            for name in effects.invokes {
                if seen.contains(&name) {
                    continue;
                }
                seen.push(name.clone());
                // A tool it may invoke but that is not loaded cannot run: no effect.
                if let Some(child) = tools(&name) {
                    let c = Self::walk(child, tools, seen);
                    h.read_only &= c.read_only;
                    h.destructive |= c.destructive;
                    h.open_world |= c.open_world;
                }
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_short_first_sentences_or_the_name() {
        assert_eq!(title("t", "Add numbers. Then more."), "Add numbers");
        assert_eq!(title("t", "Add numbers."), "Add numbers");
        assert_eq!(title("t", ""), "t");
        assert_eq!(title("t", &"x".repeat(61)), "t");
    }

    #[test]
    fn output_schemas_need_every_id_registered() {
        let r = Registry::builtin();
        assert!(output_schema(&[], &r).is_none());
        assert!(output_schema(&["nope/1".into()], &r).is_none());
        let one = output_schema(&["vak.temporal.instant/1".into()], &r).unwrap();
        assert_eq!(one["type"], "object");
        let both = output_schema(
            &[
                "vak.temporal.instant/1".into(),
                "vak.coding.change/1".into(),
            ],
            &r,
        )
        .unwrap();
        assert_eq!(both["anyOf"].as_array().map(Vec::len), Some(2));
        assert!(output_schema(&["vak.temporal.instant/1".into(), "nope/1".into()], &r).is_none());
    }
}
