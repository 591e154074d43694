//! `vak audit serve`: the journal as a local, read-only web application for security reviewers.
//!
//! Pages over the local SQLite journal, or every node's chain of a shared PostgreSQL store
//! (`--store`: [`Source`]): the calls (paged on the indexed `received_at`, newest
//! first, filtered), one call laid out stage by stage with its record checked (and its payload
//! with the values its evidence upholds marked), pictures of the calls (inline SVG drawn here,
//! aggregated in SQL over a bounded number of the newest calls), and the integrity of every
//! chain (the checks of `vak audit verify`, run on demand with progress: `verify`).
//!
//! Safe by construction: every value a page shows goes through maud's escaping after control and
//! bidirectional characters are made visible ([`pages::shown`]); no page carries an inline
//! script (one script file, `/integrity.js`, moves a progress bar; every page reads without it);
//! each answer has a strict `Content-Security-Policy` (`default-src 'none'`, the stylesheet and
//! the script from this server), `X-Content-Type-Options: nosniff`, `frame-ancestors 'none'` and
//! a `same-origin` referrer policy (no address of these pages leaves them).
//! The server binds loopback unless `--allow-host` names the host it may be reached by, checks
//! every request's `Host` against the list `vak serve --http` uses
//! ([`crate::mcp::http::allowed_hosts`]) and answers only `GET` and `HEAD`.

mod approvals;
mod pages;
mod server;
mod source;
mod verify;

use std::net::SocketAddr;
use std::sync::Arc;

pub use server::host_allowed;
#[cfg(feature = "postgres")]
pub use source::Shared;
pub use source::Source;

/// The most calls one page lists.
pub const PAGE_SIZE: u32 = 100;

/// What `vak audit serve` is told.
#[derive(Clone, Default)]
pub struct Options {
    /// Host names (or `host:port`) a request may use beside the loopback ones; required to bind
    /// a non-loopback address.
    pub allow_hosts: Vec<String>,
    /// Public keys (hex) that must have signed every entry, as `vak audit verify --key`.
    pub keys: Vec<String>,
    /// The approvals inbox to serve (`--approvals`; none: the pages only read).
    pub inbox: Option<Arc<crate::approval::inbox::Inbox>>,
}

/// Why `vak audit serve` could not serve.
#[derive(Debug, thiserror::Error)]
pub enum AuditWebError {
    #[error(
        "{addr} is not a loopback address: the journal holds every call's arguments and results; name the host it is reached by with --allow-host to serve it there"
    )]
    NotLoopback { addr: String },
    #[error("no random access token could be made for the approvals inbox")]
    NoRandomness,
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
    approvals: Option<approvals::Approvals>,
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
        let approvals = match &options.inbox {
            None => None,
            Some(inbox) => Some(
                approvals::Approvals::new(inbox.clone(), addr.port(), &options.allow_hosts)
                    .ok_or(AuditWebError::NoRandomness)?,
            ),
        };
        Ok(Bound {
            listener,
            addr,
            approvals,
        })
    }

    /// The approvals inbox's access token, when it is served: print it once.
    pub fn access_token(&self) -> Option<&str> {
        self.approvals.as_ref().map(approvals::Approvals::token)
    }

    /// The address bound (its port, when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve the pages of `journal` (the local journal, or a shared store's every chain) until
    /// `shutdown` fires.
    pub async fn serve(
        self,
        journal: Arc<dyn Source>,
        options: &Options,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        let state = Arc::new(server::State {
            journal,
            hosts: crate::mcp::http::allowed_hosts(&options.allow_hosts),
            keys: options.keys.clone(),
            verifier: Arc::default(),
            approvals: self.approvals,
        });
        server::run(self.listener, state, shutdown).await
    }
}
