//! A hostile tool: each `mode` attacks one limit of the sandbox. `ok` behaves.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// spin | spin-host | sleep | hold | grow | recurse | big-result | flood | handles |
    /// bulk-copy | chain | panic | residue | ok (and the others below)
    pub mode: String,
    /// A size for modes that take one.
    #[serde(default)]
    pub n: u64,
    /// A receipt id from elsewhere (an earlier call), for the `evidence` mode.
    #[serde(default)]
    pub receipt: Option<String>,
    /// A line for the `log-text` mode to log.
    #[serde(default)]
    pub text: String,
}

pub struct Hostile;

#[link(wasm_import_module = "wasi:clocks/monotonic-clock@0.2.6")]
unsafe extern "C" {
    /// `subscribe-duration: func(when: duration) -> pollable`, lowered: a u64 in, a handle out.
    #[link_name = "subscribe-duration"]
    fn subscribe_duration(nanos: i64) -> i32;
}

/// Take `n` pollables from the host and never drop them: each is a host-side resource.
fn hoard_handles(n: u64) -> u64 {
    let mut held = 0;
    for _ in 0..n {
        // SAFETY: the import takes a plain integer and returns a handle index; no memory of
        // this module is passed or written. Leaking the handle is this mode's purpose.
        let handle = unsafe { subscribe_duration(1_000_000_000) };
        std::hint::black_box(handle);
        held += 1;
    }
    held
}

// Recursing without end is this mode's whole point.
#[allow(unconditional_recursion)]
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    // `black_box` keeps the frames: no tail call, no folding into a loop.
    std::hint::black_box(recurse(std::hint::black_box(depth + 1))) + 1
}

/// Calls this instance ran before, and a zero-initialised region each call marks: what a call
/// finds of an earlier one tells whether its memory was made fresh.
static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
const RESIDUE_BYTES: usize = 2 << 20;
static RESIDUE: [std::sync::atomic::AtomicU8; RESIDUE_BYTES] =
    [const { std::sync::atomic::AtomicU8::new(0) }; RESIDUE_BYTES];
#[cfg(target_arch = "wasm32")]
const WASM_PAGE: usize = 64 << 10;

/// Report what is left of earlier calls, then leave marks of this one: the calls counted, the
/// marked bytes of the static region still set, the memory's size at the start (an earlier
/// call's growth kept would show), and the marked bytes of `n` bytes of memory grown past it
/// (pages the kept-resident reset must zero).
fn residue(n: u64) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    let before = CALLS.fetch_add(1, Relaxed);
    let marked = RESIDUE
        .iter()
        .step_by(512)
        .filter(|b| b.load(Relaxed) != 0)
        .count();
    for b in RESIDUE.iter().step_by(512) {
        b.store(0xA5, Relaxed);
    }
    let (pages_at_start, grown_marked) = match grow_and_mark(n) {
        Ok(found) => found,
        Err(e) => return e,
    };
    format!(
        "calls before: {before}; marked bytes: {marked}; pages at start: {pages_at_start}; \
         marked grown bytes: {grown_marked}"
    )
}

/// Memory 0's size in pages, then the marked bytes (one per 4 KiB) found in `n` bytes grown
/// past it, each marked in turn.
#[cfg(target_arch = "wasm32")]
fn grow_and_mark(n: u64) -> Result<(usize, usize), String> {
    use core::arch::wasm32::{memory_grow, memory_size};
    let pages_at_start = memory_size(0);
    let pages = usize::try_from(n).unwrap_or(usize::MAX).div_ceil(WASM_PAGE);
    let old = memory_grow(0, pages);
    if old == usize::MAX {
        return Err(format!("memory.grow of {pages} pages was refused"));
    }
    let mut grown_marked = 0;
    for at in (old * WASM_PAGE..(old + pages) * WASM_PAGE).step_by(4096) {
        let byte = at as *mut u8;
        // SAFETY: `at` lies in the pages `memory.grow` just added to linear memory 0, which
        // no allocation of this module owns (the allocator grows memory on its own, past
        // them): reading and writing them aliases nothing, and they are in bounds.
        unsafe {
            if byte.read_volatile() != 0 {
                grown_marked += 1;
            }
            byte.write_volatile(0xA5);
        }
    }
    Ok((pages_at_start, grown_marked))
}

/// Linear memory exists only in wasm: elsewhere (a check of the workspace) the mode refuses.
#[cfg(not(target_arch = "wasm32"))]
fn grow_and_mark(_: u64) -> Result<(usize, usize), String> {
    Err("the residue mode runs only as wasm".into())
}

impl Tool for Hostile {
    type Args = Args;
    const NAME: &'static str = "hostile";
    const DESCRIPTION: &'static str = "Attacks the sandbox's limits, one mode at a time.";

    fn claims() -> Claims {
        Claims::new().clock(["UTC"]).log()
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        match args.mode.as_str() {
            "spin" => loop {
                std::hint::black_box(0);
            },
            "spin-host" => loop {
                let _ = std::hint::black_box(clock::now("UTC"));
            },
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(3600));
                Ok(Output::markdown("woke up"))
            }
            "hold" => {
                // `n` bytes, every 4 KiB page written (resident, not just reserved), held while
                // the call sleeps until its wall-time limit ends it: memory per call in flight.
                let mut held = vec![0u8; args.n as usize];
                for page in held.chunks_mut(4096) {
                    page[0] = 1;
                }
                std::hint::black_box(&mut held);
                std::thread::sleep(std::time::Duration::from_secs(3600));
                Ok(Output::markdown(format!("held {}", held.len())))
            }
            "grow" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "recurse" => Ok(Output::markdown(format!("{}", recurse(0)))),
            "big-result" => Ok(Output::markdown("x".repeat(args.n as usize))),
            "flood" => {
                let line = "flood ".repeat(100);
                for _ in 0..args.n {
                    println!("{line}");
                }
                Ok(Output::markdown("flooded"))
            }
            "log-text" => {
                log::info(&args.text);
                Ok(Output::markdown("logged"))
            }
            "log-flood" => {
                for i in 0..args.n {
                    log::info(&format!("line {i}"));
                }
                Ok(Output::markdown("logged"))
            }
            "receipts" => {
                let reading =
                    clock::now("UTC").map_err(|e| ToolError::new("clock", e.to_string()))?;
                Ok(Output::markdown(reading.rfc3339.clone())
                    .with_evidence(Evidence::observed("now", &reading.receipt)))
            }
            "forbidden-zone" => match clock::now("Europe/Paris") {
                Ok(_) => Ok(Output::markdown("read a zone outside the grant")),
                Err(e) => Err(ToolError::new("refused", e.to_string())),
            },
            "poll-clock" => {
                // Read the clock until the host refuses; report how many readings came first.
                let mut readings = 0u64;
                loop {
                    match clock::now("UTC") {
                        Ok(_) => readings += 1,
                        Err(CapabilityError::Revoked(m)) => {
                            return Err(ToolError::new(
                                "revoked",
                                format!("after {readings} readings: {m}"),
                            ));
                        }
                        Err(other) => return Err(ToolError::new("refused", other.to_string())),
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            }
            "evidence" => {
                // One honest item among fabricated ones; the host must keep the honest one.
                let reading =
                    clock::now("UTC").map_err(|e| ToolError::new("clock", e.to_string()))?;
                let replayed = args
                    .receipt
                    .clone()
                    .unwrap_or_else(|| "call_elsewhere/1".into());
                let payload = json!({
                    "instant": reading.rfc3339,
                    "unix_seconds": reading.unix_seconds,
                    "offset_seconds": reading.offset_seconds,
                    "zone": reading.zone,
                    "observed_at": reading.rfc3339,
                    "max_age_seconds": 60,
                });
                Output::markdown(format!("It is {}.", reading.rfc3339))
                    .with_payload("vak.temporal.instant/1", &payload)
                    .map(|o| {
                        o.with_evidence(Evidence::observed("honest", &reading.receipt).supports(""))
                            .with_evidence(
                                Evidence::observed("invented", "call_nowhere/7")
                                    .supports("/instant"),
                            )
                            .with_evidence(
                                Evidence::observed("replayed", &replayed).supports("/instant"),
                            )
                            .with_evidence(
                                Evidence::observed("wrong-digest", &reading.receipt)
                                    .digest(&"0".repeat(64))
                                    .supports("/instant"),
                            )
                            .with_evidence(Evidence::cited("clock-as-source", &reading.receipt))
                            .with_evidence(
                                Evidence::computed("derived", ["honest"]).supports("/instant"),
                            )
                            .with_evidence(Evidence::computed(
                                "derived-from-invented",
                                ["invented"],
                            ))
                            .with_evidence(Evidence::synthesized("summary"))
                    })
            }
            "chain" => {
                // `n` computed items, each derived from the one before, the first from a
                // synthesized one: every one of them must be settled unsupported, in linear time.
                let mut out = Output::markdown("a chain")
                    .with_evidence(Evidence::synthesized("0").note("the root"));
                for i in 1..args.n.max(1) {
                    out = out
                        .with_evidence(Evidence::computed(&i.to_string(), [(i - 1).to_string()]));
                }
                Ok(out)
            }
            "read-then-panic" => {
                let _ = clock::now("UTC");
                let _ = clock::now("UTC");
                panic!("after two readings");
            }
            "handles" => Ok(Output::markdown(format!("held {}", hoard_handles(args.n)))),
            "bulk-copy" => {
                // memory.copy over `n` MiB, forever: few instructions, much work each.
                let len = (args.n.max(1) as usize) << 20;
                let mut buf = vec![7u8; len];
                loop {
                    buf.copy_within(0..len / 2, len / 2);
                    buf.copy_within(len / 2.., 0);
                    std::hint::black_box(&mut buf);
                }
            }
            "panic" => panic!("boom"),
            "residue" => Ok(Output::markdown(residue(args.n))),
            "ok" => Ok(Output::markdown("fine")),
            other => Err(ToolError::new("unknown-mode", format!("no mode {other:?}"))),
        }
    }
}

vak_guest::export_tool!(Hostile);
