//! Text for a person at a terminal. Tool-supplied text is neutralised first: a tool cannot move
//! the cursor, recolour the screen or hide text with escape sequences.

use std::fmt::Write as _;
use vak_host::admission::{FunctionVerdict, ImportClass};
use vak_host::{CallRecord, Examination, Host, Policy, Status, Verdict};

pub use vak_host::projection::{hidden_or_acting, neutralise, neutralise_line};

/// Print `text` on stdout for a person, neutralised: every line vak prints for a person goes
/// through here (or through [`json`] for JSON), whatever built it, so that a string a model, a
/// provider document, a guest or a journal row supplied cannot act on the terminal.
pub fn say(text: &str) {
    use std::io::Write as _;
    let _ = std::io::stdout()
        .lock()
        .write_all(neutralise(text).as_bytes());
}

/// `say` on stderr.
pub fn say_err(text: &str) {
    use std::io::Write as _;
    let _ = std::io::stderr()
        .lock()
        .write_all(neutralise(text).as_bytes());
}

/// `value` as pretty JSON for a terminal: the same JSON value as `serde_json` writes, but a
/// character that [`neutralise`] would escape is written as a JSON `\u` escape (a surrogate pair
/// beyond the BMP), where `serde_json` escapes only C0. The output stays exact JSON: it parses
/// to the same value.
pub fn json(value: &impl serde::Serialize) -> String {
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, TerminalJson::default());
    if let Err(e) = value.serialize(&mut ser) {
        // Records and documents hold only strings, numbers and JSON values.
        return format!("{{\"error\":{:?}}}", e.to_string());
    }
    // serde_json writes UTF-8 only.
    String::from_utf8(out).unwrap_or_default()
}

/// Methods of [`TerminalJson`] that do what serde_json's pretty formatter does: `name(w)`, or
/// with `first:` the methods that also take whether the value is the first.
macro_rules! forward_to_pretty {
    (first: $($name:ident),*) => {$(
        fn $name<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            self.0.$name(w, first)
        }
    )*};
    ($($name:ident),*) => {$(
        fn $name<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
            self.0.$name(w)
        }
    )*};
}

/// serde_json's pretty formatter, with [`hidden_or_acting`] characters escaped in strings.
#[derive(Default)]
struct TerminalJson(serde_json::ser::PrettyFormatter<'static>);

impl serde_json::ser::Formatter for TerminalJson {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if hidden_or_acting(c) {
                writer.write_all(&fragment.as_bytes()[start..i])?;
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(writer, "\\u{unit:04x}")?;
                }
                start = i + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
    // The layout (indentation, commas, colons) is the pretty formatter's.
    forward_to_pretty!(
        begin_array,
        end_array,
        end_array_value,
        begin_object,
        end_object
    );
    forward_to_pretty!(begin_object_value, end_object_value);
    forward_to_pretty!(first: begin_array_value, begin_object_key);
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn duration(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.2} s", ns as f64 / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.0} µs", ns as f64 / 1e3)
    }
}

/// The result (or the refusal) of a call, then one summary line.
pub fn record_for_terminal(r: &CallRecord) -> String {
    let mut out = String::new();
    match (&r.result, &r.error) {
        (Some(result), _) if r.status == Status::Completed => {
            // The projection for this renderer (a card where one was earned), else the document.
            let shown = r
                .projection
                .as_ref()
                .map_or(result.markdown.as_str(), |p| p.rendered.as_str());
            out.push_str(&neutralise(shown));
            if !shown.ends_with('\n') {
                out.push('\n');
            }
            if let Some(projection) = &r.projection {
                for d in &projection.diagnostics {
                    let _ = writeln!(out, "  ({})", neutralise(d));
                }
            }
        }
        (_, Some(e)) => {
            let label = match r.status {
                Status::ToolError => "tool error".to_string(),
                Status::Refused => format!("refused at {}", e.stage),
                _ => format!("failed at {}", e.stage),
            };
            let _ = writeln!(
                out,
                "✗ {label} [{}{}]: {}",
                e.kind,
                if e.retryable {
                    ", retryable"
                } else {
                    ", not retryable"
                },
                neutralise_line(&e.message)
            );
        }
        _ => {}
    }
    let label = r.outcome.as_ref().map_or("-", |o| o.label.as_str());
    let _ = writeln!(
        out,
        "── {} · {} · {label} · stage {} · fuel {} · {} · memory {} B · {} receipt{} · {}",
        neutralise_line(&r.tool),
        r.status.as_str(),
        r.stage,
        thousands(r.usage.fuel),
        duration(r.usage.wall_ns),
        thousands(r.usage.memory_bytes),
        r.receipts.len(),
        if r.receipts.len() == 1 { "" } else { "s" },
        neutralise_line(&r.call_id)
    );
    match &r.journaled {
        Some(Ok(entry)) => match &entry.node {
            // A local journal: the process's chain and the place there (the global order is
            // given when the entry is indexed).
            Some((chain, seq)) if entry.seq == 0 => {
                let _ = writeln!(out, "   journal chain {} #{seq}", neutralise_line(chain));
            }
            Some((node, seq)) => {
                let _ = writeln!(
                    out,
                    "   journal #{} (node {}, #{seq})",
                    entry.seq,
                    neutralise_line(node)
                );
            }
            None => {
                let _ = writeln!(out, "   journal #{}", entry.seq);
            }
        },
        Some(Err(e)) => {
            let _ = writeln!(out, "   NOT JOURNALED: {}", neutralise_line(&e.to_string()));
        }
        None => {}
    }
    out
}

/// A component's imports, exports, claims and verdict, for a security reviewer.
pub fn examination(e: &Examination, policy: &Policy) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "component  {}", neutralise(&e.source));
    let _ = writeln!(out, "sha256     {}", e.digest);
    let _ = writeln!(out, "size       {} bytes", thousands(e.size_bytes as u64));
    if let Some(d) = &e.descriptor {
        let _ = writeln!(
            out,
            "tool       {} — {}",
            neutralise_line(&d.name),
            neutralise_line(&d.description)
        );
    }
    let _ = writeln!(out, "\nimports (what the binary can ask of the host)");
    let width = e.imports.iter().map(|i| i.name.len()).max().unwrap_or(0);
    for i in &e.imports {
        let class = match &i.class {
            ImportClass::Capability { capability } => format!("capability {}", capability.name()),
            ImportClass::Types => "types".to_string(),
            ImportClass::Wasi => "wasi".to_string(),
            ImportClass::Refused => "NOT PROVIDED".to_string(),
        };
        let _ = writeln!(
            out,
            "  {:width$}  [{class}] {}",
            neutralise_line(&i.name),
            i.summary
        );
    }
    let _ = writeln!(out, "\nexports");
    for x in &e.exports {
        let _ = writeln!(out, "  {}", neutralise_line(x));
    }
    if !e.functions.is_empty() {
        let _ = writeln!(
            out,
            "\nfunctions (a component built for another host: each function a tool)"
        );
        for f in &e.functions {
            let verdict = match &f.verdict {
                FunctionVerdict::Admitted => "served".to_string(),
                FunctionVerdict::NotInPolicy => "not in the policy (deny by default)".to_string(),
                FunctionVerdict::Unavailable { reason } => {
                    format!("unavailable: {}", neutralise_line(reason))
                }
                FunctionVerdict::NotGranted { reason } => {
                    format!("not granted: {}", neutralise_line(reason))
                }
            };
            let _ = writeln!(
                out,
                "  {} as tool `{}`: {verdict}",
                neutralise_line(&f.export),
                neutralise_line(&f.tool)
            );
        }
    }
    if let Some(d) = &e.descriptor {
        let _ = writeln!(out, "\nclaims");
        if d.claims.capabilities.is_empty() {
            let _ = writeln!(out, "  capabilities: none");
        }
        for c in &d.claims.capabilities {
            // A claim without scopes asks for whatever the policy grants; say so, not `[]`.
            let scopes = if c.scopes.is_empty() {
                "none named: whatever the policy grants".to_string()
            } else {
                c.scopes
                    .iter()
                    .map(|s| neutralise_line(s))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(out, "  {}: scopes {scopes}", neutralise_line(&c.name));
        }
        let b = &d.claims.budget;
        let _ = writeln!(
            out,
            "  budget: {}",
            limits(b.fuel, b.memory_bytes, b.wall_time_ms, b.result_bytes)
        );
        let _ = writeln!(
            out,
            "\ninput schema\n  {}",
            neutralise(&d.input_schema.to_string())
        );
        not_enforced(&mut out, &e.not_enforced);
        if !d.payload_schemas.is_empty() {
            let _ = writeln!(
                out,
                "  payload schemas: {}",
                neutralise(&d.payload_schemas.join(", "))
            );
        }
    }
    let _ = writeln!(out, "\nverdict under policy {}", policy.origin);
    match &e.verdict {
        Verdict::Admitted { granted } => {
            let names: Vec<&str> = granted.iter().map(|c| c.name()).collect();
            let _ = writeln!(
                out,
                "  admitted; capabilities linked into every instance: {}",
                joined_or_none(&names)
            );
        }
        Verdict::Refused { kind, reason, .. } => {
            let _ = writeln!(out, "  REFUSED [{kind}]: {}", neutralise_line(reason));
        }
    }
    out
}

/// The line naming the places of a schema the boundary does not enforce, if there are any.
fn not_enforced(out: &mut String, places: &[String]) {
    if !places.is_empty() {
        let _ = writeln!(
            out,
            "  not enforced by the boundary: {}",
            neutralise(&places.join(", "))
        );
    }
}

/// `names` joined with commas, or `none`.
fn joined_or_none<S: AsRef<str>>(names: &[S]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<&str>>()
            .join(", ")
    }
}

/// The admitted tools, then the refused components.
pub fn tools(host: &Host) -> String {
    let mut out = String::new();
    for tool in host.tools() {
        let schema = &tool.schema;
        let d = &tool.descriptor;
        let caps: Vec<&str> = d
            .claims
            .capabilities
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        let _ = writeln!(
            out,
            "{} — {}",
            neutralise_line(&d.name),
            neutralise_line(&d.description)
        );
        let _ = writeln!(out, "  capabilities: {}", joined_or_none(&caps));
        let _ = writeln!(
            out,
            "  input schema: {}",
            neutralise(&d.input_schema.to_string())
        );
        not_enforced(&mut out, &schema.not_enforced);
    }
    for e in host.examinations() {
        if let Verdict::Refused { kind, reason, .. } = &e.verdict {
            let _ = writeln!(
                out,
                "refused: {} [{kind}]: {}",
                neutralise_line(&e.source),
                neutralise_line(reason)
            );
        }
    }
    out
}

/// The bench table.
pub fn bench(r: &super::bench::Report) -> String {
    let mut out = String::new();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let (tool, rounds, calls) = (neutralise(&r.tool), r.rounds, r.per_round);
    let _ = writeln!(
        out,
        "vak bench: tool `{tool}`, {rounds} rounds of {calls} calls, {cores} cores; medians of the rounds"
    );
    let base = r.rows.first().map_or(1, |x| x.median_ns.max(1));
    let _ = writeln!(
        out,
        "{:<48} {:>10} {:>10} {:>10} {:>7}",
        "", "median µs", "min µs", "max µs", "ratio"
    );
    for row in &r.rows {
        let _ = writeln!(
            out,
            "{:<48} {:>10.2} {:>10.2} {:>10.2} {:>7.2}",
            row.name,
            row.median_ns as f64 / 1e3,
            row.min_ns as f64 / 1e3,
            row.max_ns as f64 / 1e3,
            row.median_ns as f64 / base as f64
        );
    }
    let _ = writeln!(out, "lifecycle / raw: {:.2}×", r.lifecycle_ratio);
    let s = &r.scaling;
    let _ = writeln!(
        out,
        "throughput, calls/s (1 thread → {} threads): raw {:.0} → {:.0} ({:.2}×), vak {:.0} → {:.0} ({:.2}×)",
        s.threads, s.raw_one, s.raw_many, s.raw_ratio, s.vak_one, s.vak_many, s.vak_ratio
    );
    let a = &r.at_once;
    let memory = match (a.resident_before, a.resident_held, a.per_call()) {
        (Some(before), Some(held), Some(per_call)) => format!(
            ": resident {:.1} → {:.1} MiB, {:.0} KiB per call",
            before as f64 / 1048576.0,
            held as f64 / 1048576.0,
            per_call as f64 / 1024.0
        ),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "calls at once: {} instances, each called, held together{memory}",
        a.calls
    );
    out
}

/// A limit with its unit, or the host's default when none is set.
fn limit(v: Option<u64>, unit: &str) -> String {
    v.map_or("host default".to_string(), |v| {
        format!("{}{unit}", thousands(v))
    })
}

/// Per-call limits, each with its unit or the host's default.
fn limits(
    fuel: Option<u64>,
    memory: Option<u64>,
    wall: Option<u64>,
    result: Option<u64>,
) -> String {
    format!(
        "fuel {}, memory {}, wall {}, result {}",
        limit(fuel, ""),
        limit(memory, " B"),
        limit(wall, " ms"),
        limit(result, " B")
    )
}

/// What a policy grants, tool by tool.
pub fn policy(p: &Policy) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "policy {}: valid", p.origin);
    let d = &p.defaults;
    let _ = writeln!(
        out,
        "defaults per call: {}",
        limits(d.fuel, d.memory_bytes, d.wall_time_ms, d.result_bytes)
    );
    let s = &p.session;
    let unlimited = |v: Option<u64>| v.map_or("unlimited".to_string(), thousands);
    let _ = writeln!(
        out,
        "per session: calls {}, fuel {}, wall {} ms, result {} B",
        unlimited(s.calls),
        unlimited(s.fuel),
        unlimited(s.wall_time_ms),
        unlimited(s.result_bytes)
    );
    if p.tools.is_empty() {
        let _ = writeln!(
            out,
            "no tool is granted: every tool will be refused (deny by default)"
        );
    }
    for (name, g) in &p.tools {
        let _ = writeln!(out, "\ntool {name}");
        if g.capabilities.is_empty() {
            let _ = writeln!(out, "  capabilities: none (pure computation)");
        }
        for (cap, scope) in &g.capabilities {
            let scope = scope.describe();
            let _ = writeln!(out, "  {}: {scope} — {}", cap.name(), cap.summary());
        }
        let c = &g.caps;
        let _ = writeln!(
            out,
            "  caps per call: {}; calls per session {}",
            limits(c.fuel, c.memory_bytes, c.wall_time_ms, c.result_bytes),
            unlimited(c.calls_per_session)
        );
        match &g.principals {
            None => {
                let _ = writeln!(out, "  principals: any");
            }
            Some(list) => {
                let _ = writeln!(out, "  principals: only {}", list.join(", "));
            }
        }
    }
    out
}

/// `vak store status` for a person.
#[cfg(feature = "postgres")]
pub fn store_status(store: &str, status: &vak_host::store::postgres::StoreStatus) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "store {}", neutralise(store));
    let _ = writeln!(
        out,
        "schema version {}; {} revocation{}; {} session ledger{}",
        status.schema_version,
        status.revocations,
        if status.revocations == 1 { "" } else { "s" },
        status.sessions,
        if status.sessions == 1 { "" } else { "s" },
    );
    let policies: std::collections::BTreeSet<_> = status
        .nodes
        .iter()
        .filter_map(|n| n.policy_sha256.as_deref())
        .collect();
    for n in &status.nodes {
        let _ = writeln!(
            out,
            "  node {}: {} entr{}{}; started {}; policy {}; key {}",
            neutralise(&n.node),
            n.entries,
            if n.entries == 1 { "y" } else { "ies" },
            n.last_commit
                .as_deref()
                .map(|t| format!(", last at {t}"))
                .unwrap_or_default(),
            n.started_at.as_deref().unwrap_or("-"),
            n.policy_sha256
                .as_deref()
                .map_or("-", |p| &p[..p.len().min(16)]),
            n.public_key
                .as_deref()
                .map_or("-", |k| &k[..k.len().min(16)]),
        );
        match (&n.holder, n.heartbeat_ms_ago) {
            (Some(h), Some(ms)) => {
                let _ = writeln!(
                    out,
                    "    held by {}, heartbeat {ms} ms ago; revocations applied up to #{}",
                    neutralise(h),
                    n.revocation_ack
                );
            }
            _ => {
                let _ = writeln!(out, "    not held (stopped)");
            }
        }
    }
    if policies.len() > 1 {
        let _ = writeln!(
            out,
            "WARNING: the nodes registered {} different policies; session budgets are shared, so every node should serve the same one",
            policies.len()
        );
    }
    out
}

/// The most characters of a question or an answer a round's line shows (the record has all).
const ROUND_VALUE_CHARS: usize = 300;

/// The rounds of a call answered over MCP input-required rounds, first to last (each a record as
/// stored, already redacted as every record is): per round its call, the call it follows, how it
/// ended and what it asked; under it each question the client answered in that round (the
/// receipt's request and outcome), and each approval's decision. One line each, neutralised.
pub fn round_chain(chain: &[serde_json::Value]) -> Vec<String> {
    use serde_json::Value;
    let text = |v: &Value| neutralise_line(v.as_str().unwrap_or("-"));
    // A value on one line, cut to its first characters.
    let short = |v: &Value| {
        let line = neutralise_line(&v.to_string());
        match line.char_indices().nth(ROUND_VALUE_CHARS) {
            Some((at, _)) => format!("{}…", &line[..at]),
            None => line,
        }
    };
    let mut out = Vec::new();
    for r in chain {
        let asked = match r["error"]["details"]["asked"].as_str() {
            Some(key) => format!(", asked {}", neutralise_line(key)),
            None => String::new(),
        };
        let answered: Vec<&Value> = r["receipts"].as_array().map_or(Vec::new(), |all| {
            all.iter()
                .filter(|x| x["capability"] == "client" && x["ok"] == true)
                .collect()
        });
        let ended = match r["error"]["kind"].as_str() {
            Some(kind) => format!("{} ({})", text(&r["status"]), neutralise_line(kind)),
            None => text(&r["status"]),
        };
        let after = match r["round"]["previous_call_id"].as_str() {
            Some(previous) => format!(" (after {})", neutralise_line(previous)),
            None => String::new(),
        };
        let n = answered.len();
        out.push(format!(
            "  round {:<3} {}{after}  {ended}{asked}, {n} answer{} from the client",
            r["round"]["round"].as_u64().unwrap_or(0),
            text(&r["call_id"]),
            if n == 1 { "" } else { "s" },
        ));
        for receipt in answered {
            let request = &receipt["request"];
            let key = request["key"]
                .as_str()
                .map_or(String::new(), |k| format!(" {}", neutralise_line(k)));
            out.push(format!(
                "    {}{key}: asked {}",
                text(&receipt["operation"]),
                short(request)
            ));
            out.push(format!("      answered {}", short(&receipt["outcome"])));
        }
        for approval in r["approvals"].as_array().into_iter().flatten() {
            let by = match approval["by"].as_str() {
                Some(by) => format!(" by {}", neutralise_line(by)),
                None => String::new(),
            };
            out.push(format!("    approval: {}{by}", text(&approval["decision"])));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_neutralised() {
        assert_eq!(
            neutralise("a\x1b[31mred\x07\nb\tc"),
            "a\\u{1b}[31mred\\u{7}\nb\tc"
        );
        // Bidi overrides and isolates would reorder what a reviewer reads ("Trojan Source").
        assert_eq!(
            neutralise("ok \u{202e}txt.exe\u{2066}x\u{2069}"),
            "ok \\u{202e}txt.exe\\u{2066}x\\u{2069}"
        );
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
