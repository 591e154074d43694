//! `vak bench`: the whole lifecycle against a raw wasmtime fresh-instance call of the same
//! component, side by side in this process, printed as a table (or JSON).

use super::render;
use std::process::ExitCode;
use vak_host::Host;

/// `vak bench TOOL ARGS`: measure and print; exit 1 when the benchmark call cannot run.
pub(super) async fn run(
    host: &Host,
    tool: &str,
    arguments: &str,
    rounds: usize,
    calls: usize,
    json: bool,
) -> ExitCode {
    match vak_host::bench::lifecycle_vs_raw(host, tool, arguments, rounds, calls).await {
        Ok(report) => {
            if json {
                say!("{}", render::json(&report));
            } else {
                say_raw!("{}", render::bench(&report));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            say_err!("vak bench: {}", render::neutralise_line(&e.to_string()));
            ExitCode::from(1)
        }
    }
}
