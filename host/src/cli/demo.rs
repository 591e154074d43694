//! `vak demo`: the host at work on its bundled tools.

use super::render;
use std::path::PathBuf;
use std::process::ExitCode;
use vak_host::{Host, Policy, Proposal, Status};

/// A policy that caps `stats` at 200,000 fuel, so that a large input hits the limit.
const TIGHT_POLICY: &str = r#"
[tools.clock]
capabilities.clock = { zones = ["*"] }

[tools.stats]
caps = { fuel = 200_000 }
"#;

/// The bundled tools under `policy`, with a fresh key and no journal; a host that cannot be
/// built is said, as bad usage.
async fn bundled_host(
    policy: Policy,
    cache_dir: Option<PathBuf>,
    no_cache: bool,
) -> Result<Host, ExitCode> {
    super::setup::builder(policy, cache_dir, no_cache)
        .bundled_tools()
        .build()
        .await
        .map_err(super::usage_error)
}

/// `vak demo`: three calls that end three ways, then a limit hit on a host that goes on serving.
pub async fn run(cache_dir: Option<PathBuf>, no_cache: bool) -> ExitCode {
    let started = std::time::Instant::now();
    let host = match bundled_host(Policy::default_policy(), cache_dir.clone(), no_cache).await {
        Ok(h) => h,
        Err(code) => return code,
    };
    let cache = host.runtime().cache();
    say!(
        "vak demo: {} bundled tools admitted in {} ms ({} compiled, {} from the AOT cache)\n",
        host.tools().count(),
        started.elapsed().as_millis(),
        cache.compiles(),
        cache.hits()
    );

    let mut ok = true;
    let calls = [
        (
            "1. A completed call: the clock in an explicit zone",
            "clock",
            r#"{"zone":"Europe/Paris"}"#,
            Status::Completed,
        ),
        (
            "2. A tool error: a zone that does not exist (the tool refuses; no zone is assumed)",
            "clock",
            r#"{"zone":"Mars/Olympus_Mons"}"#,
            Status::ToolError,
        ),
        (
            "3. Refused before dispatch: the required zone is missing (no instance is created)",
            "clock",
            r#"{}"#,
            Status::Refused,
        ),
    ];
    for (title, tool, args, expect) in calls {
        say!("{title}\n$ vak call {tool} '{args}'");
        let record = host
            .call(Proposal::new(tool, args).from_provider("demo"))
            .await;
        say_raw!("{}", render::record_for_terminal(&record));
        if let Some(receipt) = record.receipts.first() {
            say!(
                "   receipt {}: {} {} → {}",
                receipt.id,
                receipt.capability.name(),
                receipt.operation,
                receipt.outcome
            );
        }
        say!();
        ok &= record.status == expect;
    }

    say!("4. A limit being hit: `stats` under a policy that caps it at 200,000 fuel");
    let tight = match Policy::parse(TIGHT_POLICY, "demo (stats capped at 200,000 fuel)") {
        Ok(p) => p,
        Err(e) => return super::usage_error(e),
    };
    let host = match bundled_host(tight, cache_dir, no_cache).await {
        Ok(h) => h,
        Err(code) => return code,
    };
    let values: Vec<String> = (0..20_000)
        .map(|i| ((i * 7919) % 10_007).to_string())
        .collect();
    let args = format!("{{\"values\":[{}]}}", values.join(","));
    say!("$ vak --policy tight.toml call stats '{{\"values\":[… 20,000 numbers …]}}'");
    let record = host
        .call(Proposal::new("stats", args).from_provider("demo"))
        .await;
    say_raw!("{}", render::record_for_terminal(&record));
    ok &= record
        .error
        .as_ref()
        .is_some_and(|e| e.kind == "fuel_exhausted");
    let small = host
        .call(Proposal::new("stats", r#"{"values":[3,1,2],"unit":"ms"}"#).from_provider("demo"))
        .await;
    say!(
        "\nThe same host serves the next call:\n$ vak call stats '{{\"values\":[3,1,2],\"unit\":\"ms\"}}'"
    );
    say_raw!("{}", render::record_for_terminal(&small));
    ok &= small.status == Status::Completed;

    say!(
        "\n`vak call TOOL ARGS --json` prints the complete call record; `vak inspect clock` shows what a tool imports."
    );
    if ok {
        ExitCode::SUCCESS
    } else {
        say_err!("vak demo: a call did not end as expected (see above)");
        ExitCode::from(1)
    }
}
