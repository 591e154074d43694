//! The store's connection pool: every database operation within one bound, a connection that
//! failed dropped, and every fault classified as a [`StoreError`] (out of reach, conflicting, or
//! refused), with the figures' conversions and the address shown without its password.

use super::health::Health;
use crate::store::StoreError;
use deadpool_postgres::{Object, Pool};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A connection pool with the store's timeout and fault classification.
#[derive(Clone)]
pub(crate) struct Db {
    pub(super) pool: Pool,
    pub(super) op_timeout: Duration,
    pub(super) health: Arc<Health>,
}

/// A pooled connection that is given back to the pool only after it served without a fault.
pub(super) struct Conn(Option<Object>);

impl Conn {
    pub(super) fn client(&self) -> &Object {
        // Set at creation; taken only by `discard`, which consumes the value.
        self.0.as_ref().expect("a live connection")
    }

    /// Drop the connection instead of returning it: it failed or may still be busy.
    fn discard(mut self) {
        if let Some(o) = self.0.take() {
            drop(Object::take(o));
        }
    }
}

/// `deadline`, or `op_timeout` from now if that comes first.
fn capped(deadline: Instant, op_timeout: Duration) -> Instant {
    deadline.min(Instant::now() + op_timeout)
}

impl Db {
    pub(super) async fn conn(&self, what: &'static str) -> Result<Conn, StoreError> {
        self.conn_by(what, Instant::now() + self.op_timeout).await
    }

    /// A connection, waited for until `deadline` at most.
    pub(super) async fn conn_by(
        &self,
        what: &'static str,
        deadline: Instant,
    ) -> Result<Conn, StoreError> {
        let began = Instant::now();
        let got = tokio::time::timeout_at(deadline.into(), self.pool.get()).await;
        let outcome = match got {
            Ok(Ok(o)) => return Ok(Conn(Some(o))),
            Ok(Err(e)) => StoreError::Unavailable {
                what,
                message: causes(&e),
            },
            Err(_) => timed_out(what, began),
        };
        self.health.failed(what, &outcome);
        Err(outcome)
    }

    /// Run `f` on a pooled connection within the timeout; a connection that failed is dropped.
    pub(super) async fn with<T, F>(&self, what: &'static str, f: F) -> Result<T, StoreError>
    where
        F: AsyncFnOnce(&Object) -> Result<T, tokio_postgres::Error>,
    {
        self.with_by(what, Instant::now() + self.op_timeout, f)
            .await
    }

    /// Run `f` on a pooled connection, answered by `deadline` (and within the timeout) whatever
    /// the database does; a connection that failed or timed out is dropped.
    pub(super) async fn with_by<T, F>(
        &self,
        what: &'static str,
        deadline: Instant,
        f: F,
    ) -> Result<T, StoreError>
    where
        F: AsyncFnOnce(&Object) -> Result<T, tokio_postgres::Error>,
    {
        let deadline = capped(deadline, self.op_timeout);
        let began = Instant::now();
        let conn = self.conn_by(what, deadline).await?;
        let outcome = match tokio::time::timeout_at(deadline.into(), f(conn.client())).await {
            Ok(Ok(v)) => {
                self.health.answered();
                return Ok(v);
            }
            Ok(Err(e)) => {
                conn.discard();
                classify(what, &e)
            }
            Err(_) => {
                conn.discard();
                timed_out(what, began)
            }
        };
        match &outcome {
            StoreError::Unavailable { .. } => self.health.failed(what, &outcome),
            // The database answered: it is there.
            _ => self.health.answered(),
        }
        Err(outcome)
    }
}

/// `what` got no answer since `began`.
pub(super) fn timed_out(what: &'static str, began: Instant) -> StoreError {
    StoreError::Unavailable {
        what,
        message: format!("no answer within {} ms", began.elapsed().as_millis()),
    }
}

/// A database error as a [`StoreError`]: a conflict, out of reach, or refused.
pub(super) fn classify(what: &'static str, e: &tokio_postgres::Error) -> StoreError {
    let message = describe(e);
    if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) {
        StoreError::Conflict { what, message }
    } else if unavailable(e) {
        StoreError::Unavailable { what, message }
    } else {
        StoreError::Database { what, message }
    }
}

/// The next group of a queue: wait for one item, then take every item already waiting (up to
/// `max`), so that one statement serves them all. `None` once the queue is closed and empty;
/// when `stop` fires, the queue is closed and what it holds is still handed out.
pub(super) async fn next_batch<T>(
    queue: &mut mpsc::UnboundedReceiver<T>,
    stop: &CancellationToken,
    max: usize,
) -> Option<Vec<T>> {
    let first = loop {
        tokio::select! {
            biased;
            item = queue.recv() => break item?,
            () = stop.cancelled() => queue.close(),
        }
    };
    let mut batch = vec![first];
    while batch.len() < max {
        match queue.try_recv() {
            Ok(item) => batch.push(item),
            Err(_) => break,
        }
    }
    Some(batch)
}

/// Whether `e` means "out of reach" (retryable) rather than "refused": a broken connection, a
/// server shutting down or starting, too many connections, a conflict to retry.
pub(super) fn unavailable(e: &tokio_postgres::Error) -> bool {
    match e.as_db_error() {
        None => true,
        Some(db) => {
            let code = db.code().code();
            code.starts_with("08")
                || code.starts_with("53")
                || code.starts_with("57P")
                || code == "40001"
                || code == "40P01"
        }
    }
}

/// What went wrong, in the database's words where it answered (its message, SQLSTATE and
/// constraint), else the driver's whole chain of causes.
pub(super) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut m = format!("{} (SQLSTATE {})", db.message(), db.code().code());
            if let Some(c) = db.constraint() {
                m.push_str(&format!(", constraint {c}"));
            }
            m
        }
        None => causes(e),
    }
}

/// An error and its causes, `: `-separated (drivers put the useful part in the causes).
pub(super) fn causes(e: &dyn std::error::Error) -> String {
    let mut m = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        m.push_str(": ");
        m.push_str(&c.to_string());
        cause = c.source();
    }
    m
}

/// A figure for a `bigint` column (the database has no unsigned type; nothing real is that big).
pub(super) fn big(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub(super) fn small(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// The database address without its password, for messages.
pub(super) fn shown(config: &tokio_postgres::Config) -> String {
    use tokio_postgres::config::Host;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "postgres://{}@{host}:{port}/{}",
        config.get_user().unwrap_or(""),
        config.get_dbname().unwrap_or("")
    )
}

pub(super) fn parse_config(url: &str) -> Result<tokio_postgres::Config, StoreError> {
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e: tokio_postgres::Error| StoreError::Config(e.to_string()))?;
    if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
        return Err(StoreError::Config(
            "sslmode=require: this vak connects without TLS; reach the database over loopback, a \
             private network or a TLS tunnel, and leave sslmode out"
                .into(),
        ));
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(3));
    }
    config.keepalives(true);
    config.keepalives_idle(Duration::from_secs(30));
    Ok(config)
}
