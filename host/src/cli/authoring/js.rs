//! A JavaScript tool project, built by `jco componentize` (componentize-js, StarlingMonkey)
//! against the project's `wit/` world.
//!
//! componentize-js takes one ES module (it does not resolve local imports), so the logic and
//! the WIT glue share `tool.js`; the logic is a named export the test imports under Node.
//! `-d http -d fetch-event` leaves out the `wasi:http` imports StarlingMonkey adds by default,
//! which vak does not provide.

use super::{AuthoringError, step, world_name};
use std::path::{Path, PathBuf};

/// The jco release projects are pinned to, and the preview2-shim it must be used with (jco
/// 1.35.0 with a later shim fails to componentize).
pub(super) const JCO: &str = "1.35.0";
pub(super) const PREVIEW2_SHIM: &str = "0.26.0";

const TOOL: &str = r#"// `@NAME@`: a vak tool in JavaScript, built with `jco componentize`. It greets someone by
// name; replace `greeting` with your own logic.
//
// Binding rules (componentize-js): WIT kebab-case fields are camelCase (input-schema ->
// inputSchema); option<T> is `undefined` for none; u64/s64 are BigInt; `call` returns
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

pub(super) fn build(dir: &Path) -> Result<PathBuf, AuthoringError> {
    let world = super::declared_world(dir)?;
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
    step(
        dir,
        &jco,
        &[
            "componentize",
            "tool.js",
            "--wit",
            "wit",
            "--world-name",
            &world,
            "-d",
            "http",
            "-d",
            "fetch-event",
            "-o",
            &out,
        ],
        "jco componentize",
    )?;
    Ok(dir.join(out))
}
