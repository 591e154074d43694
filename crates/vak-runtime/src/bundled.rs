//! The tools the `vak` binary carries, built for `wasm32-wasip2` by this crate's build script.

/// (name, component bytes) of every bundled tool.
pub const TOOLS: &[(&str, &[u8])] = &[
    (
        "clock",
        include_bytes!(concat!(env!("OUT_DIR"), "/tools/clock.wasm")),
    ),
    (
        "stats",
        include_bytes!(concat!(env!("OUT_DIR"), "/tools/stats.wasm")),
    ),
    (
        "replace",
        include_bytes!(concat!(env!("OUT_DIR"), "/tools/replace.wasm")),
    ),
    (
        "research",
        include_bytes!(concat!(env!("OUT_DIR"), "/tools/research.wasm")),
    ),
    (
        "compare",
        include_bytes!(concat!(env!("OUT_DIR"), "/tools/compare.wasm")),
    ),
];
