//! What the command line's values mean: the parsers clap calls for `--http` and `--since`, and
//! where the global options (and the variables behind them) point: the state folder, the shared
//! store, this node's name.

use super::{Cli, render};
use std::path::PathBuf;

/// `--http ADDR`: an IP address and port, or a host name and port as people type it
/// (`localhost:8080` is the IPv4 loopback; another name is resolved, and `vak serve` then asks
/// for `--allow-host` unless it is a loopback address).
pub(super) fn parse_listen_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(addr) = text.parse::<std::net::SocketAddr>() {
        return Ok(addr);
    }
    let bad = || {
        format!(
            "`{}` is not HOST:PORT (127.0.0.1:8080, localhost:8080, [::1]:8080)",
            render::neutralise_line(text)
        )
    };
    let (name, port) = text.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if name.eq_ignore_ascii_case("localhost") {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    std::net::ToSocketAddrs::to_socket_addrs(&(name, port))
        .map_err(|e| format!("{}: {e}", bad()))?
        .next()
        .ok_or_else(bad)
}

/// `--since`: an RFC 3339 time or a duration back from now, as the journal compares it: UTC with
/// nine digits of fraction, so that the text order of the journal's `received_at` (jiff's UTC
/// form, with as many digits as it needs) is the order of time at the same second too.
pub(super) fn parse_since(text: &str) -> Result<String, String> {
    vak_host::journal::since(text).map_err(|e| format!("`{}` {e}", render::neutralise(text)))
}

/// `--state-dir`, else `$VAK_STATE_DIR`, else `$XDG_STATE_HOME/vak`, else `~/.local/state/vak`.
pub(super) fn state_dir(flag: Option<&PathBuf>) -> Option<PathBuf> {
    if let Some(dir) = flag {
        return Some(dir.clone());
    }
    if let Some(dir) = std::env::var_os("VAK_STATE_DIR") {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(base.join("vak"))
}

/// `--store`, else `$VAK_STORE`: the shared store's address, if one is named.
pub(super) fn shared_store_url(cli: &Cli) -> Option<String> {
    cli.store
        .clone()
        .or_else(|| std::env::var("VAK_STORE").ok())
        .filter(|u| !u.trim().is_empty())
}

/// `--node`, else `$VAK_NODE`, else the host name.
#[cfg_attr(not(feature = "postgres"), expect(dead_code))]
pub(super) fn node_name(cli: &Cli) -> String {
    cli.node
        .clone()
        .or_else(|| std::env::var("VAK_NODE").ok())
        .filter(|n| !n.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "vak".to_string())
}
