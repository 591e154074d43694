//! `vak audit serve`: the journal as a local, read-only web application for security reviewers.
//!
//! Three pages over the local SQLite journal: the calls (paged on the indexed `received_at`,
//! newest first, filtered), one call laid out stage by stage with its record checked, and the
//! integrity of every chain (the checks of `vak audit verify`, [`Journal::verify_any`]).
//!
//! Safe by construction: every value a page shows goes through maud's escaping after control and
//! bidirectional characters are made visible ([`pages::shown`]); no page carries a script; each
//! answer has a strict `Content-Security-Policy` (`default-src 'none'`, the one stylesheet from
//! this server), `X-Content-Type-Options: nosniff`, `frame-ancestors 'none'` and `no-referrer`.
//! The server binds loopback unless `--allow-host` names the host it may be reached by, checks
//! every request's `Host` against the list `vak serve --http` uses
//! ([`crate::mcp::http::allowed_hosts`]) and answers only `GET` and `HEAD`.

mod pages;
mod server;

use crate::journal::Journal;
use std::net::SocketAddr;
use std::sync::Arc;

pub use server::host_allowed;

/// The most calls one page lists.
pub const PAGE_SIZE: u32 = 100;

/// What `vak audit serve` is told.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Host names (or `host:port`) a request may use beside the loopback ones; required to bind
    /// a non-loopback address.
    pub allow_hosts: Vec<String>,
    /// Public keys (hex) that must have signed every entry, as `vak audit verify --key`.
    pub keys: Vec<String>,
}

/// Why `vak audit serve` could not serve.
#[derive(Debug, thiserror::Error)]
pub enum AuditWebError {
    #[error(
        "{addr} is not a loopback address: the journal holds every call's arguments and results; name the host it is reached by with --allow-host to serve it there"
    )]
    NotLoopback { addr: String },
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}

/// A bound, not yet serving, address (so that the caller can say the port first).
pub struct Bound {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
}

impl Bound {
    /// Bind `addr`: a loopback address, or any with at least one `--allow-host` name.
    pub async fn bind(addr: SocketAddr, options: &Options) -> Result<Bound, AuditWebError> {
        if !addr.ip().is_loopback() && options.allow_hosts.is_empty() {
            return Err(AuditWebError::NotLoopback {
                addr: addr.to_string(),
            });
        }
        let listen = |source| AuditWebError::Listen {
            addr: addr.to_string(),
            source,
        };
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(listen)?;
        let addr = listener.local_addr().map_err(listen)?;
        Ok(Bound { listener, addr })
    }

    /// The address bound (its port, when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve the pages of `journal` until `shutdown` fires.
    pub async fn serve(
        self,
        journal: Arc<Journal>,
        options: &Options,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        let state = Arc::new(server::State {
            journal,
            hosts: crate::mcp::http::allowed_hosts(&options.allow_hosts),
            keys: options.keys.clone(),
        });
        server::run(self.listener, state, shutdown).await
    }
}
