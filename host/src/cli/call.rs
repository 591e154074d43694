//! `vak call`: one call, or every call of a provider's proposal document, run through the
//! whole lifecycle in one session and printed for a person (or as records); the exit status says
//! how the calls ended.

use super::{render, usage_error};
use clap::Args;
use std::process::ExitCode;
use vak_host::approval::{Approver, NoTerminal, TerminalApprover};
use vak_host::proposal::providers::{DocumentError, Provider, parse_document};
use vak_host::{CallRecord, Proposal, Session, Status};

// The variant's doc comment in `Command` is the command's help; this struct adds none.
#[derive(Args, Debug)]
pub(super) struct CallArgs {
    /// The tool's name.
    #[arg(required_unless_present = "proposal")]
    tool: Option<String>,
    /// The arguments, a JSON object, e.g. '{"zone":"Europe/Paris"}'.
    #[arg(required_unless_present = "proposal")]
    arguments: Option<String>,
    /// A provider's proposal document (OpenAI, Anthropic, Gemini or MCP shape, as the API
    /// sends it or its SDK dumps it), or `-` for stdin: every call in it is run, one record
    /// each, in one session; an answer with no call runs nothing (exit 0).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["tool", "arguments"])]
    proposal: Option<String>,
    /// Read the proposal as this provider's shape instead of detecting it (`openai` is
    /// `openai-chat`).
    #[arg(long, value_name = "PROVIDER", requires = "proposal", value_parser = clap::builder::PossibleValuesParser::new(Provider::NAMES))]
    provider: Option<String>,
    /// Print the complete call record as JSON instead (an array with --proposal).
    #[arg(long)]
    json: bool,
    /// A requirement on the result: `freshness=60` (seconds), `cited`, `verified-change`,
    /// `aligned`. Repeatable.
    #[arg(long = "require", value_name = "REQ")]
    requirements: Vec<String>,
    /// How to show the result: `terminal` (a card where one is earned, then the document as
    /// text), `markdown`, `text`, or `html` (a standalone page on stdout).
    #[arg(long, default_value = "terminal", value_parser = ["terminal", "markdown", "text", "html"])]
    render: String,
}

/// Why `vak call --proposal` has no proposals to run.
#[derive(Debug, thiserror::Error)]
enum ProposalsError {
    #[error("cannot read the proposal from stdin: {0}")]
    Stdin(std::io::Error),
    #[error("cannot read {path}: {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Document(#[from] DocumentError),
}

/// Who answers the approvals of tools marked `ask`: the person at the terminal, unless stdin is
/// not one or carries the proposal. (`vak serve` asks the MCP client instead.)
pub(super) fn approver(args: &CallArgs) -> std::sync::Arc<dyn Approver> {
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) && args.proposal.as_deref() != Some("-")
    {
        std::sync::Arc::new(TerminalApprover)
    } else {
        std::sync::Arc::new(NoTerminal)
    }
}

/// `vak call`: run the calls in `session` and print them.
pub(super) async fn run(session: &Session, args: CallArgs) -> ExitCode {
    let CallArgs {
        tool,
        arguments,
        proposal,
        provider,
        json,
        requirements,
        render,
    } = args;
    let mut required = Vec::new();
    for r in &requirements {
        match vak_host::outcome::Requirement::parse(r) {
            Some(r) => required.push(r),
            None => {
                return usage_error(format!(
                    "unknown requirement `{r}` (freshness=SECONDS, cited, verified-change, aligned)"
                ));
            }
        }
    }
    let renderer = match render.as_str() {
        "markdown" => vak_host::projection::RendererCaps::markdown(),
        "text" => vak_host::projection::RendererCaps::plain_text(),
        "html" => vak_host::projection::RendererCaps::html(),
        _ => vak_host::projection::RendererCaps::terminal(),
    };
    let from_document = proposal.is_some();
    let proposals = match proposal {
        Some(source) => match read_proposals(&source, provider.as_deref()) {
            Ok(p) => p,
            Err(e) => return usage_error(e),
        },
        None => vec![
            Proposal::new(tool.unwrap_or_default(), arguments.unwrap_or_default())
                .from_provider("cli"),
        ],
    };
    if from_document && proposals.is_empty() {
        // A provider's answer with text only: nothing to run, nothing refused.
        if json {
            say!("[]");
        } else {
            say!("no tool calls in the proposal document");
        }
        return ExitCode::SUCCESS;
    }
    let mut records = Vec::new();
    for mut p in proposals {
        p.requirements.extend(required.iter().cloned());
        p.renderer = renderer.clone();
        records.push(session.call(p).await);
    }
    if json && from_document {
        say!("{}", render::json(&records));
    } else if json {
        for r in &records {
            say!("{}", render::json(r));
        }
    } else if render == "html" {
        for r in &records {
            match &r.projection {
                Some(projection) => say_raw!("{}", projection.rendered),
                None => say_raw!("{}", render::record_for_terminal(r)),
            }
        }
    } else {
        for r in &records {
            say_raw!("{}", render::record_for_terminal(r));
        }
    }
    exit_for_all(&records)
}

/// The proposals in a provider's document (`-`: stdin), read as `provider`'s shape or detected.
fn read_proposals(source: &str, provider: Option<&str>) -> Result<Vec<Proposal>, ProposalsError> {
    let text = if source == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(ProposalsError::Stdin)?;
        s
    } else {
        std::fs::read_to_string(source).map_err(|e| ProposalsError::File {
            path: source.to_string(),
            source: e,
        })?
    };
    let hint = provider.and_then(Provider::from_name);
    Ok(parse_document(&text, hint)?)
}

/// The exit status for several records: refused beats failed beats completed.
fn exit_for_all(records: &[CallRecord]) -> ExitCode {
    if records.iter().any(|r| matches!(r.journaled, Some(Err(_)))) {
        say_err!("vak: a record could not be written to the journal (see the log above)");
        return ExitCode::from(1);
    }
    if records.iter().any(|r| r.status == Status::Refused) {
        ExitCode::from(2)
    } else if records.iter().any(|r| r.status != Status::Completed) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
