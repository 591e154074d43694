//! A person at this process's terminal as approver, and the approver for a process with no
//! terminal.

use super::request::{ApprovalRequest, PROMPT_ARGUMENT_BYTES};
use super::{Answer, Approver};
use futures::future::BoxFuture;

/// A person at this process's terminal: the request on stderr, `y` on stdin approves.
pub struct TerminalApprover;

impl Approver for TerminalApprover {
    fn decide(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer> {
        Box::pin(async move {
            let shown = request.clone();
            let read = tokio::task::spawn_blocking(move || {
                use std::io::{BufRead, Write};
                let prompt = terminal_prompt(&shown);
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "{prompt}\napprove? [y/N] ");
                let _ = err.flush();
                let mut line = String::new();
                std::io::stdin().lock().read_line(&mut line).map(|_| line)
            })
            .await;
            let by = format!(
                "terminal user {}",
                std::env::var("USER").unwrap_or_else(|_| "(unknown)".into())
            );
            match read {
                Ok(Ok(line)) if matches!(line.trim(), "y" | "Y" | "yes") => request.approve(by),
                Ok(Ok(_)) => request.deny(by, "answered no at the terminal"),
                _ => Answer::Unavailable {
                    reason: "the terminal could not be read".into(),
                },
            }
        })
    }
}

/// What the terminal shows: arguments up to [`TERMINAL_ARGUMENT_BYTES`] whole; longer ones are
/// written whole, as proposed, to an owner-only file the prompt names (beside the SHA-256 the
/// approval binds, to check the file with `sha256sum`), and summarised.
fn terminal_prompt(request: &ApprovalRequest) -> String {
    if request.arguments.len() <= TERMINAL_ARGUMENT_BYTES {
        return request.prompt_with(TERMINAL_ARGUMENT_BYTES, "");
    }
    let path = std::env::temp_dir().join(format!("vak-{}-arguments.json", request.id));
    let written = {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options
            .open(&path)
            .and_then(|mut f| f.write_all(request.arguments.as_bytes()))
    };
    let see = match written {
        Ok(()) => format!("the file {}", path.display()),
        Err(e) => format!(
            "nothing: they could not be written to {} ({e})",
            path.display()
        ),
    };
    request.prompt_with(PROMPT_ARGUMENT_BYTES, &see)
}

/// Arguments up to this long are shown whole at a terminal.
pub const TERMINAL_ARGUMENT_BYTES: usize = 64 * 1024;

/// An approver for a process whose standard input is not a terminal: no one can be asked.
pub struct NoTerminal;

impl Approver for NoTerminal {
    fn decide(&self, _request: ApprovalRequest) -> BoxFuture<'static, Answer> {
        Box::pin(async {
            Answer::Unavailable {
                reason: "standard input is not a terminal; run `vak call` at a terminal, \
                         or approve through an embedder's approver"
                    .into(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::ApprovalScope;
    use crate::approval::test_context as context;
    use std::time::Duration;

    #[test]
    fn at_a_terminal_long_arguments_go_whole_to_an_owner_only_file() {
        // At a terminal, arguments past 64 KiB go whole to an owner-only file the prompt names.
        let huge = serde_json::json!({ "pad": "y".repeat(70_000) }).to_string();
        let r = ApprovalRequest::new(&context(&huge), ApprovalScope::Call, Duration::from_secs(5));
        let p = terminal_prompt(&r);
        let path = std::env::temp_dir().join(format!("vak-{}-arguments.json", r.id));
        assert!(
            p.contains(&format!("see the file {}", path.display())),
            "{p}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), huge);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{mode:o}");
        }
        let _ = std::fs::remove_file(&path);
    }
}
