//! Session ledgers in the shared store. A reservation is admitted by `vak_reserve` in the
//! database, which locks the session's row: concurrent calls on any node are admitted one after
//! another on the database's own figures. One reserver task per node takes every reservation
//! waiting and admits them in one statement (`vak_reserve_batch`): each call still waits one round
//! trip, but a burst of calls shares one transaction and one commit instead of queueing on the
//! session's row for a commit each.

use super::{Db, big, next_batch, small};
use crate::budget::{BudgetError, Claim, Totals};
use crate::record::Limits;
use crate::store::StoreError;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// The most reservations one statement admits.
const MAX_BATCH: usize = 256;

const RESERVE: &str = "SELECT i, refusal, resource, lim, used, reserved, fuel, wall, result_bytes
     FROM vak_reserve_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";

/// A session's ledger in the shared store.
#[derive(Clone)]
pub struct SharedLedger {
    pub(super) db: Db,
    pub(super) reserver: mpsc::UnboundedSender<Request>,
    /// The row's key: the session's principal and name (`["alice","conversation-1"]`).
    pub(crate) key: String,
    pub(crate) principal: Option<String>,
}

/// One reservation on its way to the reserver: the figures of `vak_reserve`'s parameters.
pub(super) struct Request {
    session: String,
    principal: Option<String>,
    tool: String,
    /// Session calls, fuel, wall and result caps, then the tool's calls per session.
    caps: [Option<i64>; 5],
    /// The fuel, wall time and result bytes the call asks for.
    wanted: [i64; 3],
    reply: oneshot::Sender<Result<Answer, StoreError>>,
}

/// `vak_reserve`'s answer: a refusal with its figures, or the limits granted.
struct Answer {
    refusal: Option<String>,
    resource: Option<String>,
    /// `lim`, `used`, `reserved`, `fuel`, `wall`, `result_bytes`.
    figures: [Option<i64>; 6],
}

impl SharedLedger {
    /// Admit `claim` in the database: the reserver's next batch locks the session's row, checks
    /// every cap on the database's figures and reserves, or says why not.
    pub(crate) async fn reserve(&self, claim: &Claim<'_>) -> Result<(Limits, Totals), BudgetError> {
        let caps = claim.caps;
        let (reply, answer) = oneshot::channel();
        let request = Request {
            session: self.key.clone(),
            principal: claim.principal.map(str::to_string),
            tool: claim.tool.to_string(),
            caps: [
                caps.calls,
                caps.fuel,
                caps.wall_time_ms,
                caps.result_bytes,
                claim.calls_per_session,
            ]
            .map(|v| v.map(big)),
            wanted: [
                claim.limits.fuel,
                claim.limits.wall_time_ms,
                claim.limits.result_bytes,
            ]
            .map(big),
            reply,
        };
        let gone = || StoreError::Unavailable {
            what: "budget reservation",
            message: "the reserver has stopped".into(),
        };
        self.reserver.send(request).map_err(|_| gone())?;
        let answer = answer.await.map_err(|_| gone())??;
        let figure = |i: usize| small(answer.figures[i].unwrap_or(0));
        match answer.refusal.as_deref() {
            None => {
                let limits = Limits {
                    fuel: figure(3),
                    wall_time_ms: figure(4),
                    result_bytes: figure(5),
                    memory_bytes: claim.limits.memory_bytes,
                };
                Ok((limits, Totals::held_for(&limits)))
            }
            Some("session_calls") => Err(BudgetError::SessionCalls {
                limit: figure(0),
                used: figure(1),
            }),
            Some("tool_calls") => Err(BudgetError::ToolCalls {
                tool: claim.tool.to_string(),
                limit: figure(0),
                used: figure(1),
            }),
            Some("session_exhausted") => Err(BudgetError::SessionExhausted {
                resource: match answer.resource.as_deref() {
                    Some("fuel") => "fuel",
                    Some("wall_time_ms") => "wall_time_ms",
                    _ => "result_bytes",
                },
                limit: figure(0),
                used: figure(1),
                reserved: figure(2),
            }),
            Some(other) => Err(BudgetError::Store(StoreError::Database {
                what: "budget reservation",
                message: format!("vak_reserve answered an unknown refusal `{other}`"),
            })),
        }
    }

    /// What the session has used so far, on every node.
    pub(crate) async fn used(&self) -> Result<Totals, StoreError> {
        let key = self.key.clone();
        self.db
            .with("ledger read", async move |c| {
                let row = c
                    .query_opt(
                        "SELECT calls_used, fuel_used, wall_ms_used, result_bytes_used
                         FROM vak_ledgers WHERE session_id = $1",
                        &[&key],
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

/// The reserver of one node: admits every reservation waiting in one statement.
pub(super) async fn run_reserver(
    db: Db,
    mut queue: mpsc::UnboundedReceiver<Request>,
    stop: CancellationToken,
) {
    while let Some(batch) = next_batch(&mut queue, &stop, MAX_BATCH).await {
        match reserve_batch(&db, &batch).await {
            Ok(mut answers) => {
                for (i, request) in batch.into_iter().enumerate() {
                    let answer = answers.get_mut(i).and_then(Option::take).ok_or_else(|| {
                        StoreError::Database {
                            what: "budget reservation",
                            message: "vak_reserve_batch left a reservation unanswered".into(),
                        }
                    });
                    let _ = request.reply.send(answer);
                }
            }
            Err(e) => {
                for request in batch {
                    let _ = request.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// One statement for `batch`; the answers in the batch's order.
async fn reserve_batch(db: &Db, batch: &[Request]) -> Result<Vec<Option<Answer>>, StoreError> {
    let column = |f: &dyn Fn(&Request) -> Option<i64>| batch.iter().map(f).collect::<Vec<_>>();
    let sessions: Vec<&str> = batch.iter().map(|r| r.session.as_str()).collect();
    let principals: Vec<Option<&str>> = batch.iter().map(|r| r.principal.as_deref()).collect();
    let tools: Vec<&str> = batch.iter().map(|r| r.tool.as_str()).collect();
    let caps: Vec<Vec<Option<i64>>> = (0..5).map(|k| column(&|r| r.caps[k])).collect();
    let wanted: Vec<Vec<i64>> = (0..3)
        .map(|k| batch.iter().map(|r| r.wanted[k]).collect())
        .collect();
    let rows = db
        .with("budget reservation", async move |c| {
            let stmt = c.prepare_cached(RESERVE).await?;
            c.query(
                &stmt,
                &[
                    &sessions,
                    &principals,
                    &tools,
                    &caps[0],
                    &caps[1],
                    &caps[2],
                    &caps[3],
                    &caps[4],
                    &wanted[0],
                    &wanted[1],
                    &wanted[2],
                ],
            )
            .await
        })
        .await?;
    let mut answers: Vec<Option<Answer>> = (0..batch.len()).map(|_| None).collect();
    for row in rows {
        let i: i32 = row.get(0);
        if let Some(slot) = usize::try_from(i - 1).ok().and_then(|i| answers.get_mut(i)) {
            *slot = Some(Answer {
                refusal: row.get(1),
                resource: row.get(2),
                figures: [3, 4, 5, 6, 7, 8].map(|c| row.get(c)),
            });
        }
    }
    Ok(answers)
}
