//! Session ledgers in the shared store: a reservation is one call of `vak_reserve`.

use super::{Db, big, small};
use crate::budget::{BudgetError, Claim, Totals};
use crate::record::Limits;
use crate::store::StoreError;
use std::sync::atomic::Ordering;

/// A session's ledger in the shared store.
#[derive(Clone)]
pub struct SharedLedger {
    pub(super) db: Db,
    pub(crate) session: String,
    pub(crate) principal: Option<String>,
}

impl SharedLedger {
    /// Admit `claim` in the database: one call of `vak_reserve`, which locks the session's row,
    /// checks every cap on the database's figures and reserves, or says why not.
    pub(crate) async fn reserve(&self, claim: &Claim<'_>) -> Result<(Limits, Totals), BudgetError> {
        let caps = claim.caps;
        let opt = |v: Option<u64>| v.map(big);
        let params: (String, Option<String>, String) = (
            self.session.clone(),
            claim.principal.map(str::to_string),
            claim.tool.to_string(),
        );
        let figures = [
            opt(caps.calls),
            opt(caps.fuel),
            opt(caps.wall_time_ms),
            opt(caps.result_bytes),
            opt(claim.calls_per_session),
        ];
        let wanted = [
            big(claim.limits.fuel),
            big(claim.limits.wall_time_ms),
            big(claim.limits.result_bytes),
        ];
        self.db
            .counters
            .reservations
            .fetch_add(1, Ordering::Relaxed);
        let row = self
            .db
            .with("budget reservation", async move |c| {
                let stmt = c
                    .prepare_cached(
                        "SELECT refusal, resource, lim, used, reserved, fuel, wall, result_bytes
                         FROM vak_reserve($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                    )
                    .await?;
                c.query_one(
                    &stmt,
                    &[
                        &params.0,
                        &params.1,
                        &params.2,
                        &figures[0],
                        &figures[1],
                        &figures[2],
                        &figures[3],
                        &figures[4],
                        &wanted[0],
                        &wanted[1],
                        &wanted[2],
                    ],
                )
                .await
            })
            .await?;
        let refusal: Option<String> = row.get(0);
        let figure = |i: usize| small(row.get::<_, Option<i64>>(i).unwrap_or(0));
        match refusal.as_deref() {
            None => {
                let limits = Limits {
                    fuel: figure(5),
                    wall_time_ms: figure(6),
                    result_bytes: figure(7),
                    memory_bytes: claim.limits.memory_bytes,
                };
                Ok((limits, Totals::held_for(&limits)))
            }
            Some("session_principal") => Err(BudgetError::SessionPrincipal {
                session: self.session.clone(),
            }),
            Some("session_calls") => Err(BudgetError::SessionCalls {
                limit: figure(2),
                used: figure(3),
            }),
            Some("tool_calls") => Err(BudgetError::ToolCalls {
                tool: claim.tool.to_string(),
                limit: figure(2),
                used: figure(3),
            }),
            Some("session_exhausted") => {
                let resource: Option<String> = row.get(1);
                Err(BudgetError::SessionExhausted {
                    resource: match resource.as_deref() {
                        Some("fuel") => "fuel",
                        Some("wall_time_ms") => "wall_time_ms",
                        _ => "result_bytes",
                    },
                    limit: figure(2),
                    used: figure(3),
                    reserved: figure(4),
                })
            }
            Some(other) => Err(BudgetError::Store(StoreError::Database {
                what: "budget reservation",
                message: format!("vak_reserve answered an unknown refusal `{other}`"),
            })),
        }
    }

    /// What the session has used so far, on every node.
    pub(crate) async fn used(&self) -> Result<Totals, StoreError> {
        let session = self.session.clone();
        self.db
            .with("ledger read", async move |c| {
                let row = c
                    .query_opt(
                        "SELECT calls_used, fuel_used, wall_ms_used, result_bytes_used
                         FROM vak_ledgers WHERE session_id = $1",
                        &[&session],
                    )
                    .await?;
                Ok(row.map_or(Totals::default(), |r| Totals {
                    calls: small(r.get(0)),
                    fuel: small(r.get(1)),
                    wall_ms: small(r.get(2)),
                    result_bytes: small(r.get(3)),
                }))
            })
            .await
    }
}
