//! The shared store's schema: one migration a step, applied once under an advisory lock.

use super::db::{describe, parse_config};
use crate::store::StoreError;
use tokio_postgres::NoTls;

/// The schema, one migration a step; a database records the steps it has had in `vak_schema`.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("0001_init.sql")),
    (2, include_str!("0002_reserve_batch.sql")),
    (3, include_str!("0003_write_ahead.sql")),
    (4, include_str!("0004_leases.sql")),
    (5, include_str!("0005_spent_states.sql")),
    (6, include_str!("0006_audit_indexes.sql")),
];

/// What `migrate` did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Migrated {
    /// The schema version before.
    pub from: i32,
    /// The versions applied now (empty: it was up to date).
    pub applied: Vec<i32>,
}

/// Bring the database at `url` to this vak's schema (under an advisory lock, so that nodes
/// starting together migrate once). Refuses a database migrated by a newer vak.
pub async fn migrate(url: &str) -> Result<Migrated, StoreError> {
    let config = parse_config(url)?;
    let unreachable = |e: tokio_postgres::Error| StoreError::Unavailable {
        what: "migration",
        message: describe(&e),
    };
    let (mut client, connection) = config.connect(NoTls).await.map_err(unreachable)?;
    let driver = tokio::spawn(connection);
    let failed = |e: tokio_postgres::Error| StoreError::Database {
        what: "migration",
        message: describe(&e),
    };
    // One constant lock id for every vak: its migrations are serialized.
    const LOCK: i64 = 0x7661_6b5f_6d69_6772; // "vak_migr"
    client
        .execute("SELECT pg_advisory_lock($1)", &[&LOCK])
        .await
        .map_err(failed)?;
    let done = async {
        client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS vak_schema (
                     version integer PRIMARY KEY,
                     applied_at timestamptz NOT NULL DEFAULT now(),
                     applied_by text NOT NULL
                 )",
            )
            .await
            .map_err(failed)?;
        let from: i32 = client
            .query_one("SELECT coalesce(max(version), 0) FROM vak_schema", &[])
            .await
            .map_err(failed)?
            .get(0);
        let known = MIGRATIONS.last().map_or(0, |m| m.0);
        if from > known {
            return Err(StoreError::SchemaTooNew { found: from, known });
        }
        let mut applied = Vec::new();
        for (version, sql) in MIGRATIONS.iter().filter(|m| m.0 > from) {
            let tx = client.transaction().await.map_err(failed)?;
            tx.batch_execute(sql).await.map_err(failed)?;
            tx.execute(
                "INSERT INTO vak_schema (version, applied_by) VALUES ($1, $2)",
                &[version, &format!("vak {}", env!("CARGO_PKG_VERSION"))],
            )
            .await
            .map_err(failed)?;
            tx.commit().await.map_err(failed)?;
            applied.push(*version);
        }
        Ok(Migrated { from, applied })
    }
    .await;
    let _ = client
        .execute("SELECT pg_advisory_unlock($1)", &[&LOCK])
        .await;
    drop(client);
    let _ = driver.await;
    done
}
