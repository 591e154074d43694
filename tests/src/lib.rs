//! Helpers for vak's end-to-end tests: the guest components built for them, and hosts set up
//! with a private AOT cache.

/// Paths of the test guest components (built by `build.rs`).
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

use vak_host::{Host, HostBuilder, Policy};

/// The bytes of a guest component.
pub fn guest(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read guest {path}: {e}"))
}

/// The bytes of a tool bundled with vak.
pub fn bundled(name: &str) -> Vec<u8> {
    vak_host::bundled::TOOLS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, b)| b.to_vec())
        .unwrap_or_else(|| panic!("no bundled tool `{name}`"))
}

/// A host with the given components under `policy` (TOML), caching in `cache`.
pub async fn host_with(
    components: &[(&str, Vec<u8>)],
    policy: &str,
    cache: &std::path::Path,
) -> Host {
    let policy = Policy::parse(policy, "test policy").expect("test policy parses");
    let mut builder = HostBuilder::new()
        .policy(policy)
        .cache_dir(Some(cache.to_path_buf()));
    for (name, bytes) in components {
        builder = builder.component(*name, bytes.clone());
    }
    builder.build().await.expect("host builds")
}
