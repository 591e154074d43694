//! A tool that would be honest, but for its function table: its minimum size (set by the
//! linker, see `build.rs`) is 50 million elements, far past what the host lets one table hold.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct TableBomb;

impl Tool for TableBomb {
    type Args = Args;
    const NAME: &'static str = "table_bomb";
    const DESCRIPTION: &'static str = "Declares a huge function table.";

    fn call(_: Args) -> Result<Output, ToolError> {
        // An indirect call, so the table is really used.
        let f: fn() -> &'static str = std::hint::black_box(|| "called");
        Ok(Output::markdown(f()))
    }
}

vak_guest::export_tool!(TableBomb);
