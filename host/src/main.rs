//! The `vak` command: run, inspect and list sandboxed tools.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
