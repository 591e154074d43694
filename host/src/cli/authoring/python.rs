//! A Python tool project, built by `componentize-py` (PyPI) against the project's `wit/` world.
//!
//! `--stub-wasi` makes componentize-py provide the WASI interfaces the CPython runtime imports
//! (sockets among them, which vak never links) from inside the component, so the binary
//! imports only the `vak:tool` interfaces of its world and passes admission in the
//! locked-down form. `print` output is then discarded rather than captured.

use super::{AuthoringError, runs, step, world_name};
use std::path::{Path, PathBuf};

/// The componentize-py release projects are pinned to (written into requirements.txt).
pub(super) const COMPONENTIZE_PY: &str = "0.25.1";

const APP: &str = r#""""`@NAME@`: a vak tool in Python, built with componentize-py. It greets someone by name;
replace the logic in greeting.py with your own.

This is the WIT glue. Records of `vak:tool/types` are classes of `wit_world.imports.types` with
snake_case fields, an `option<T>` is `None` or the value, and `call` returns `err(tool-error)`
by raising `Err(types.ToolError(...))`. Any other exception traps the call: the host reports a
trap and the tool's message is lost, so turn the errors you expect into tool errors.
"""
import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

from greeting import greeting

NAME = "@NAME@"

# JSON Schema of the arguments object; the host enforces it before `call` runs.
INPUT_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "Who to greet."}},
    "required": ["name"],
    "additionalProperties": False,
}


class Tool(exports.Tool):
    def describe(self) -> types.Descriptor:
        return types.Descriptor(
            name=NAME,
            description="Greets someone by name.",
            input_schema=json.dumps(INPUT_SCHEMA),
            payload_schemas=[],
            # No capability is claimed and wit/world.wit imports none, so the host links
            # nothing into the instance. To read the clock, import vak:tool/clock@0.2.1 in the
            # world and claim types.CapabilityClaim(name="clock", scopes=["UTC"]).
            claims=types.Claims(
                capabilities=[],
                budget=types.BudgetClaim(
                    fuel=None, memory_bytes=None, wall_time_ms=None, result_bytes=None
                ),
            ),
        )

    def call(self, arguments: str) -> types.ToolResult:
        args = json.loads(arguments)
        try:
            text = greeting(args["name"])
        except ValueError as e:
            raise Err(types.ToolError(code="empty-name", message=str(e)))
        return types.ToolResult(payload=None, markdown=text, evidence=[], attachments=[])
"#;

const LOGIC: &str = r#""""The tool's logic, kept apart from the WIT glue in app.py so that plain Python tests it."""


def greeting(name: str) -> str:
    name = name.strip()
    if not name:
        raise ValueError("`name` must not be blank")
    return f"Hello, {name}!"
"#;

const TEST: &str = r#"import unittest

from greeting import greeting


class GreetingTest(unittest.TestCase):
    def test_greets_by_name_and_refuses_a_blank_one(self):
        self.assertEqual(greeting(" Ada "), "Hello, Ada!")
        with self.assertRaises(ValueError):
            greeting("  ")


if __name__ == "__main__":
    unittest.main()
"#;

const README: &str = r#"# @NAME@

A vak tool in Python: a WebAssembly component built by componentize-py against the world in
`wit/world.wit`, run by the vak host in a sandbox with only the capabilities its policy grants.

```sh
vak build                                   # build build/@WORLD@.wasm and show what admission says
vak --tools build --policy policy.toml call @NAME@ '{"name":"Ada"}'
python3 -m unittest                         # the tool's logic, natively
```

`vak build` uses `.venv/bin/componentize-py`, else `componentize-py` on PATH, else makes `.venv`
and installs the version in requirements.txt into it (once).

- `app.py`: the input schema, the claims, the call (WIT glue); `greeting.py`: the logic.
"#;

/// The files of a new Python tool project named `name`.
pub(super) fn files(name: &str) -> Vec<(&'static str, String)> {
    let world = world_name(name);
    let fill = |t: &str| t.replace("@NAME@", name).replace("@WORLD@", &world);
    let mut files = vec![
        ("app.py", fill(APP)),
        ("greeting.py", LOGIC.to_string()),
        ("test_greeting.py", TEST.to_string()),
        (
            "requirements.txt",
            format!("componentize-py=={COMPONENTIZE_PY}\n"),
        ),
    ];
    files.extend(super::wit_project_files(
        name,
        &world,
        fill(README),
        "/.venv/\n/build/\n__pycache__/\n",
    ));
    files
}

const HINT: &str = "install Python 3 (python3 -m venv must work), or put componentize-py on PATH: pip install componentize-py";

/// The componentize-py to build with: the project's venv, PATH, or a venv made now.
fn toolchain(dir: &Path) -> Result<PathBuf, AuthoringError> {
    let venv = dir.join(".venv/bin/componentize-py");
    if venv.is_file() {
        return Ok(venv);
    }
    let on_path = PathBuf::from("componentize-py");
    if runs(&on_path).is_ok() {
        return Ok(on_path);
    }
    let python = super::needed("python3", HINT)?;
    say_err!(
        "vak build: installing componentize-py into {} (once)",
        dir.join(".venv").display()
    );
    step(dir, &python, &["-m", "venv", ".venv"], "python3 -m venv")?;
    let requirements = if dir.join("requirements.txt").is_file() {
        vec!["-r", "requirements.txt"]
    } else {
        vec!["componentize-py"]
    };
    let mut args = vec!["install", "--disable-pip-version-check", "--quiet"];
    args.extend(requirements);
    step(dir, &dir.join(".venv/bin/pip"), &args, "pip install")?;
    Ok(venv)
}

pub(super) fn build(dir: &Path) -> Result<PathBuf, AuthoringError> {
    let world = super::declared_world(dir)?;
    let componentize = toolchain(dir)?;
    let out = super::output(dir, &world)?;
    step(
        dir,
        &componentize,
        &[
            "-d",
            "wit",
            "-w",
            &world,
            "componentize",
            "app",
            "-o",
            &out,
            "--stub-wasi",
        ],
        "componentize-py",
    )?;
    Ok(dir.join(out))
}
