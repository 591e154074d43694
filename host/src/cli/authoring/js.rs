//! A JavaScript tool project, built by `jco componentize` against the project's `wit/` world,
//! with the engine its `package.json` names in `vak.engine`:
//! - `quickjs` (the default): QuickJS (quickjs-ng, through componentize-qjs), synchronous
//!   exports. A 1.6 MB component whose fresh call costs about a tenth of StarlingMonkey's, and
//!   which scales with cores (docs/PERFORMANCE.md).
//! - `starlingmonkey`: SpiderMonkey (componentize-js), more of the web platform, a 12.5 MB
//!   component. `-d http -d fetch-event` leaves out the `wasi:http` imports it adds by default,
//!   which vak does not provide.
//!
//! Both take one ES module (no local imports are resolved), so the logic and the WIT glue share
//! `tool.js`; the logic is a named export the test imports under Node.

use super::{AuthoringError, step, world_name};
use std::path::{Path, PathBuf};

/// The jco release projects are pinned to, and the preview2-shim it must be used with (jco
/// 1.35.0 with a later shim fails to componentize).
pub(super) const JCO: &str = "1.35.0";
pub(super) const PREVIEW2_SHIM: &str = "0.26.0";

const TOOL: &str = r#"// `@NAME@`: a vak tool in JavaScript, built with `jco componentize`. It greets someone by
// name; replace `greeting` with your own logic.
//
// Binding rules (jco, either engine): WIT kebab-case fields are camelCase (input-schema ->
// inputSchema); option<T> is `undefined` for none; u64/s64 are Numbers under QuickJS (the
// engine package.json names) and BigInt under StarlingMonkey; `call` returns
// err(tool-error) when it throws an object with a `payload` property ({ code, message }).
// Any other exception traps the call: the host reports a trap and the message is lost.

const NAME = "@NAME@";

// JSON Schema of the arguments object; the host enforces it before `call` runs.
const INPUT_SCHEMA = {
  type: "object",
  properties: { name: { type: "string", description: "Who to greet." } },
  required: ["name"],
  additionalProperties: false,
};

/** The tool's logic, a plain function `node --test` runs natively. */
export function greeting(name) {
  const trimmed = name.trim();
  if (trimmed === "") {
    throw toolError("empty-name", "`name` must not be blank");
  }
  return `Hello, ${trimmed}!`;
}

/** A `tool-error` for `call` to throw: it becomes `err(tool-error { code, message })`. */
function toolError(code, message) {
  const e = new Error(message);
  e.payload = { code, message };
  return e;
}

export const tool = {
  describe() {
    return {
      name: NAME,
      description: "Greets someone by name.",
      inputSchema: JSON.stringify(INPUT_SCHEMA),
      payloadSchemas: [],
      // No capability is claimed and wit/world.wit imports none. To read the clock, import
      // vak:tool/clock@0.2.1 in the world and claim { name: "clock", scopes: ["UTC"] }.
      claims: { capabilities: [], budget: {} },
    };
  },

  call(argumentsJson) {
    const args = JSON.parse(argumentsJson);
    return {
      payload: undefined,
      markdown: greeting(args.name),
      evidence: [],
      attachments: [],
    };
  },
};
"#;

const TEST: &str = r#"import { test } from "node:test";
import assert from "node:assert/strict";
import { greeting } from "./tool.js";

test("greets by name and refuses a blank one", () => {
  assert.equal(greeting(" Ada "), "Hello, Ada!");
  assert.throws(() => greeting("  "), (e) => e.payload.code === "empty-name");
});
"#;

const README: &str = r#"# @NAME@

A vak tool in JavaScript: a WebAssembly component built by `jco componentize` against the world
in `wit/world.wit`, run by the vak host in a sandbox with only the capabilities its policy grants.

```sh
vak build                                   # build build/@WORLD@.wasm and show what admission says
vak --tools build --policy policy.toml call @NAME@ '{"name":"Ada"}'
npm test                                    # the tool's logic, natively (node --test)
```

`vak build` runs `npm install` first when `node_modules` has no jco.

- `tool.js`: the input schema, the claims, the call, and the logic (`greeting`).
- `package.json`: jco, and the engine in `vak.engine`: `quickjs` (QuickJS: a small component
  and a fast fresh call) or `starlingmonkey` (SpiderMonkey: more of the web platform, a call
  about ten times slower).
"#;

/// The files of a new JavaScript tool project named `name`.
pub(super) fn files(name: &str) -> Vec<(&'static str, String)> {
    let world = world_name(name);
    let fill = |t: &str| t.replace("@NAME@", name).replace("@WORLD@", &world);
    let package = serde_json::json!({
        "name": world,
        "private": true,
        "type": "module",
        "scripts": { "test": "node --test" },
        "devDependencies": { "@bytecodealliance/jco": JCO },
        "vak": { "engine": "quickjs" },
        "overrides": { "@bytecodealliance/preview2-shim": PREVIEW2_SHIM },
    });
    let mut files = vec![
        ("tool.js", fill(TOOL)),
        ("tool.test.mjs", TEST.to_string()),
        ("package.json", format!("{package:#}\n")),
    ];
    files.extend(super::wit_project_files(
        name,
        &world,
        fill(README),
        "/node_modules/\n/build/\n",
    ));
    files
}

const HINT: &str = "install Node.js 18 or later with npm; vak build then installs jco itself";

/// The engine a project asks for in its `package.json` (`{"vak": {"engine": ...}}`), QuickJS
/// when it names none.
fn engine(dir: &Path) -> Result<&'static str, AuthoringError> {
    let file = dir.join("package.json");
    let text = std::fs::read_to_string(&file).map_err(|_| AuthoringError::NotAProject(file))?;
    let package: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    match &package["vak"]["engine"] {
        serde_json::Value::Null => Ok("quickjs"),
        serde_json::Value::String(e) if e == "quickjs" => Ok("quickjs"),
        serde_json::Value::String(e) if e == "starlingmonkey" => Ok("starlingmonkey"),
        other => Err(AuthoringError::UnknownEngine(other.to_string())),
    }
}

pub(super) fn build(dir: &Path) -> Result<PathBuf, AuthoringError> {
    let world = super::declared_world(dir)?;
    let engine = engine(dir)?;
    let jco = dir.join("node_modules/.bin/jco");
    if !jco.is_file() {
        let npm = super::needed("npm", HINT)?;
        say_err!("vak build: installing jco {JCO} with npm (once)");
        step(
            dir,
            &npm,
            &["install", "--no-audit", "--no-fund", "--loglevel=error"],
            "npm install",
        )?;
    }
    let out = super::output(dir, &world)?;
    let mut args = vec![
        "componentize",
        "tool.js",
        "--wit",
        "wit",
        "--world-name",
        &world,
    ];
    args.extend(match engine {
        "quickjs" => ["--backend", "quickjs", "--backend-qjs-disable-async"].as_slice(),
        _ => ["-d", "http", "-d", "fetch-event"].as_slice(),
    });
    args.extend(["-o", &out]);
    step(dir, &jco, &args, "jco componentize")?;
    Ok(dir.join(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine_of(package: &str) -> Result<&'static str, AuthoringError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("package.json"), package).unwrap();
        engine(dir.path())
    }

    /// A project names its engine, QuickJS when it names none; a misspelt one is refused
    /// before jco runs, naming both choices.
    #[test]
    fn the_engine_is_the_one_package_json_names() {
        assert_eq!(engine_of("{}").unwrap(), "quickjs");
        assert_eq!(
            engine_of(r#"{"vak":{"engine":"quickjs"}}"#).unwrap(),
            "quickjs"
        );
        let sm = r#"{"vak":{"engine":"starlingmonkey"}}"#;
        assert_eq!(engine_of(sm).unwrap(), "starlingmonkey");
        let err = engine_of(r#"{"vak":{"engine":"spidermonkey"}}"#).unwrap_err();
        assert!(matches!(&err, AuthoringError::UnknownEngine(e) if e == "\"spidermonkey\""));
        assert!(err.to_string().contains("\"starlingmonkey\""), "{err}");
        let new = files("greet");
        let package = &new.iter().find(|(f, _)| *f == "package.json").unwrap().1;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("package.json"), package).unwrap();
        assert_eq!(engine(dir.path()).unwrap(), "quickjs");
    }
}
