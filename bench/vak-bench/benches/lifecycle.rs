//! The whole lifecycle against the raw fresh-instance call of the same component, with the same
//! engine configuration and limits, in one process: `raw` is the baseline, `lifecycle` what vak
//! adds (proposal, schema, permission, budget, dispatch, evidence, outcome, projection, the
//! signed record; journal off), `lifecycle_nonces_ahead` the same with the key's nonces made
//! ahead on a thread of its own (`vak --nonces-ahead`), `lifecycle_journal` with the journal on.
//!
//! `raw` and `lifecycle` also run on two threads at once (divan's `threads`): divan reports the
//! time per call on each thread, so two threads scale by `2 × t(1 thread) / t(2 threads)`.
//! `*_keep_nothing` run on pool slots that keep no page resident between calls (what the
//! default's 16 MiB kept resident per slot buys).
//!
//! `raw_engine` is the raw call on engines of its own that differ from vak's in one setting:
//! the on-demand allocator, plain pooling (no page kept resident, no `PAGEMAP_SCAN`), vak's tuned
//! pooling, and tuned pooling without fuel, without epoch checks, or without either (vak needs
//! both; these say what each meter costs).

use std::sync::LazyLock;
use vak_host::bench_support::{EngineVariantCall, RawCall};
use vak_host::dispatch::engine::{Allocation, Metering};
use vak_host::{Host, Proposal, Status};

const TOOL: &str = "stats";
const ARGS: &str = r#"{"values":[3,1,2]}"#;

static HOST: LazyLock<(tokio::runtime::Runtime, Host)> = LazyLock::new(vak_bench::host);

static JOURNALED: LazyLock<(tempfile::TempDir, Host)> = LazyLock::new(|| {
    let dir = tempfile::tempdir().expect("temp dir");
    let journal = vak_host::journal::Journal::open(
        &dir.path().join("journal.sqlite"),
        vak_host::journal::Durability::Committed,
    )
    .expect("journal");
    let host = HOST
        .0
        .block_on(
            vak_host::HostBuilder::new()
                .bundled_tools()
                .policy(vak_host::Policy::default_policy())
                .journal(std::sync::Arc::new(journal))
                .build(),
        )
        .expect("host");
    (dir, host)
});

/// The same host with pool slots that keep nothing resident after a call
/// (`EngineSettings::keep_resident_bytes = 0`): every call faults its pages in again.
static KEEP_NOTHING: LazyLock<Host> = LazyLock::new(|| {
    HOST.0
        .block_on(
            vak_host::HostBuilder::new()
                .bundled_tools()
                .policy(vak_host::Policy::default_policy())
                .engine_settings(vak_host::EngineSettings {
                    keep_resident_bytes: 0,
                    ..vak_host::EngineSettings::default()
                })
                .build(),
        )
        .expect("host")
});

/// The raw call on `host`.
fn raw_on(bencher: divan::Bencher, host: &Host) {
    let rt = &HOST.0;
    let first = rt.block_on(host.call(Proposal::new(TOOL, ARGS)));
    let limits = first.limits.expect("limits");
    let raw = RawCall::new(host, TOOL, ARGS, limits).expect("the tool");
    bencher.bench(|| rt.block_on(raw.once()).expect("a raw call"));
}

#[divan::bench]
fn raw_keep_nothing(bencher: divan::Bencher) {
    raw_on(bencher, &KEEP_NOTHING);
}

#[divan::bench]
fn lifecycle_keep_nothing(bencher: divan::Bencher) {
    let rt = &HOST.0;
    bencher.bench(|| {
        let r = rt.block_on(KEEP_NOTHING.call(Proposal::new(TOOL, ARGS)));
        assert_eq!(r.status, Status::Completed);
    });
}

#[divan::bench(threads = [1, 2], sample_size = 50)]
fn raw(bencher: divan::Bencher) {
    raw_on(bencher, &HOST.1);
}

/// Signatures made whole on the calling thread (the default): one thread of work per core, so
/// that two threads against one measure how calls scale.
#[divan::bench(threads = [1, 2], sample_size = 50)]
fn lifecycle(bencher: divan::Bencher) {
    let (rt, host) = &*HOST;
    bencher.bench(|| {
        let r = rt.block_on(host.call(Proposal::new(TOOL, ARGS)));
        assert_eq!(r.status, Status::Completed);
    });
}

/// A host whose key makes its nonces ahead (`vak --nonces-ahead`), on a thread of its own.
static NONCES_AHEAD: LazyLock<Host> = LazyLock::new(|| {
    let key = vak_host::signing::HostKey::generate().expect("a key");
    HOST.0
        .block_on(
            vak_host::HostBuilder::new()
                .bundled_tools()
                .policy(vak_host::Policy::default_policy())
                .signing_key(key.with_nonces_ahead())
                .build(),
        )
        .expect("host")
});

#[divan::bench(sample_size = 50)]
fn lifecycle_nonces_ahead(bencher: divan::Bencher) {
    let rt = &HOST.0;
    bencher.bench(|| {
        let r = rt.block_on(NONCES_AHEAD.call(Proposal::new(TOOL, ARGS)));
        assert_eq!(r.status, Status::Completed);
    });
}

#[divan::bench]
fn lifecycle_journal(bencher: divan::Bencher) {
    let rt = &HOST.0;
    let host = &JOURNALED.1;
    bencher.bench(|| {
        let r = rt.block_on(host.call(Proposal::new(TOOL, ARGS)));
        assert_eq!(r.status, Status::Completed);
    });
}

#[divan::bench(args = [
    "on-demand",
    "pooling",
    "tuned pooling",
    "tuned, no fuel",
    "tuned, no epoch",
    "tuned, neither",
])]
fn raw_engine(bencher: divan::Bencher, setup: &str) {
    let (allocation, fuel, epoch) = match setup {
        "on-demand" => (Allocation::OnDemand, true, true),
        "pooling" => (Allocation::Pooling, true, true),
        "tuned pooling" => (Allocation::TunedPooling, true, true),
        "tuned, no fuel" => (Allocation::TunedPooling, false, true),
        "tuned, no epoch" => (Allocation::TunedPooling, true, false),
        _ => (Allocation::TunedPooling, false, false),
    };
    let (rt, host) = &*HOST;
    let first = rt.block_on(host.call(Proposal::new(TOOL, ARGS)));
    let limits = first.limits.expect("limits");
    let bytes = vak_host::bundled::TOOLS
        .iter()
        .find(|(name, _)| *name == TOOL)
        .map(|(_, bytes)| *bytes)
        .expect("a bundled tool");
    let call = EngineVariantCall::new(
        host,
        TOOL,
        bytes,
        ARGS,
        limits,
        allocation,
        Metering { fuel, epoch },
    )
    .expect("the variant engine");
    bencher.bench(|| rt.block_on(call.once()).expect("a raw call"));
}

fn main() {
    divan::main();
}
