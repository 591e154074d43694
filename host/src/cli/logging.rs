//! The `vak` command's logs: on stderr (stdout carries only results and records), at the level
//! `-v` or `RUST_LOG` asks for, coloured only for a person at a terminal, every field neutralised.

use super::render;

/// Log to stderr from here on: warnings by default, `-v` info, `-vv` debug; `RUST_LOG` overrides.
pub(super) fn init_tracing(verbose: u8) {
    use std::io::IsTerminal;
    use tracing_subscriber::field::MakeExt;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only for a person at a terminal who did not ask for none (https://no-color.org).
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    // A field's value may hold what a guest, a model or a client wrote (a tool name, an error
    // message): neutralised like every other line for a person.
    let fields = tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let text = render::neutralise_line(&format!("{value:?}"));
        if field.name() == "message" {
            write!(w, "{text}")
        } else {
            write!(w, "{field}={text}")
        }
    })
    .delimited(" ");
    // Logs go to stderr: stdout carries only results and records. A log line that cannot be
    // written (stderr closed) is dropped: the fallback `eprintln!` would panic the task that
    // logged (a `vak serve` connection, say).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .fmt_fields(fields)
        .log_internal_errors(false)
        .try_init();
}
