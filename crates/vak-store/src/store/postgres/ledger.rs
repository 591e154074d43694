//! Session ledgers in the shared store. A reservation is admitted by `vak_reserve` in the
//! database, which locks the session's row: concurrent calls on any node are admitted one after
//! another on the database's own figures. One reserver task per node takes every reservation
//! waiting and admits them in one statement (`vak_reserve_batch`): each call still waits one round
//! trip, but a burst of calls shares one transaction and one commit instead of queueing on the
//! session's row for a commit each. Batches run side by side (up to [`IN_FLIGHT`]): a call is
//! never queued behind a batch that is timing out, and each call waits until its own deadline
//! at most. A reservation the database made after its call stopped waiting is given back.

use super::{Db, big, next_batch, small};
use crate::store::StoreError;
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use vak_core::ports::ledger::{Ask, BudgetError, LedgerPort, Reserved, Settlement, Totals};

/// The most reservations one statement admits.
const MAX_BATCH: usize = 256;

/// The most reservation batches of one node in the database at once.
pub const IN_FLIGHT: usize = 4;

const RESERVE: &str = "SELECT i, refusal, resource, lim, used, reserved, fuel, wall, result_bytes
     FROM vak_reserve_fenced($12, $13, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";

/// How often a node tries again to give up the batches it got no answer to.
const GIVE_UP_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

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
    /// When the call stops waiting.
    deadline: Instant,
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
    /// every cap on the database's figures and reserves, or says why not; `store_unavailable`
    /// at `deadline` if the database has not answered by then.
    async fn reserve_in_store(
        &self,
        ask: &Ask<'_>,
        deadline: Instant,
    ) -> Result<Reserved, BudgetError> {
        // Nothing caps the call: no round trip, only the charge (with the record).
        if !ask.capped() {
            return Ok(Reserved {
                granted: ask.wanted,
                held: Totals::default(),
            });
        }
        let caps = &ask.session;
        let (reply, answer) = oneshot::channel();
        let request = Request {
            session: self.key.clone(),
            principal: ask.principal.map(str::to_string),
            tool: ask.tool.to_string(),
            caps: [
                caps.calls,
                caps.fuel,
                caps.wall_time_ms,
                caps.result_bytes,
                ask.tool_calls,
            ]
            .map(|v| v.map(big)),
            wanted: [ask.wanted.fuel, ask.wanted.wall_ms, ask.wanted.result_bytes].map(big),
            deadline,
            reply,
        };
        let gone = || StoreError::Unavailable {
            what: "budget reservation",
            message: "the reserver has stopped".into(),
        };
        let began = Instant::now();
        self.reserver.send(request).map_err(|_| gone())?;
        let answer = match tokio::time::timeout_at(deadline.into(), answer).await {
            Ok(answered) => answered.map_err(|_| gone())??,
            Err(_) => {
                return Err(BudgetError::Store(StoreError::Unavailable {
                    what: "budget reservation",
                    message: format!(
                        "no answer within {} ms (the bound on a wait for the store)",
                        began.elapsed().as_millis()
                    ),
                }));
            }
        };
        let figure = |i: usize| small(answer.figures[i].unwrap_or(0));
        match answer.refusal.as_deref() {
            None => {
                let granted = Totals {
                    calls: 1,
                    fuel: figure(3),
                    wall_ms: figure(4),
                    result_bytes: figure(5),
                };
                Ok(Reserved {
                    granted,
                    held: granted,
                })
            }
            Some("session_calls") => Err(BudgetError::SessionCalls {
                limit: figure(0),
                used: figure(1),
            }),
            Some("tool_calls") => Err(BudgetError::ToolCalls {
                tool: ask.tool.to_string(),
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
    async fn used_in_store(&self) -> Result<Totals, StoreError> {
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

impl SharedLedger {
    /// The charge of a call to commit with its record: the reservation `held` replaced by `used`.
    fn charge(&self, held: Totals, used: Totals) -> Settlement {
        Settlement {
            ledger: self.key.clone(),
            principal: self.principal.clone(),
            held,
            used,
        }
    }
}

impl LedgerPort for SharedLedger {
    fn reserve<'a>(
        &'a self,
        ask: &'a Ask<'a>,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<Reserved, BudgetError>> {
        Box::pin(self.reserve_in_store(ask, deadline))
    }

    fn used(&self) -> BoxFuture<'_, Result<Totals, StoreError>> {
        Box::pin(self.used_in_store())
    }

    /// The store's bound on a wait.
    fn bound(&self) -> std::time::Duration {
        self.db.op_timeout
    }

    fn settle(&self, _tool: &str, held: Totals, used: Totals) -> Option<Settlement> {
        Some(self.charge(held, used))
    }

    fn unused(&self, _tool: &str, held: Totals) -> Option<Settlement> {
        Some(self.charge(held, Totals::default()))
    }

    /// Nothing to do here: the reservation is released by the charge committed with the call's
    /// record.
    fn release(&self, _tool: &str, _held: Totals) {}

    fn abandoned(&self, _held: Totals) {
        // The reservation stays held in the database: charged in full.
        tracing::warn!(
            session = %self.key,
            "a call ended without settling: its reservation stays charged in full"
        );
    }

    fn describe(&self) -> String {
        format!("shared {}", self.key)
    }
}

/// The reserver of one node: admits every reservation waiting in one statement, with up to
/// [`IN_FLIGHT`] statements at once.
pub(super) async fn run_reserver(
    db: Db,
    node: String,
    mut queue: mpsc::UnboundedReceiver<Request>,
    stop: CancellationToken,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    // Batches sent that got no answer: given up (fenced off, or released) once the store answers.
    let uncertain: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    tokio::spawn(give_up_uncertain(
        db.clone(),
        node.clone(),
        uncertain.clone(),
        stop.clone(),
    ));
    while let Some(batch) = next_batch(&mut queue, &stop, MAX_BATCH).await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (db, node, uncertain) = (db.clone(), node.clone(), uncertain.clone());
        tokio::spawn(async move {
            let _slot = slot;
            // Calls that stopped waiting meanwhile are not reserved for.
            let batch: Vec<Request> = batch.into_iter().filter(|r| !r.reply.is_closed()).collect();
            if batch.is_empty() {
                return;
            }
            let deadline = batch
                .iter()
                .map(|r| r.deadline)
                .max()
                .unwrap_or_else(Instant::now);
            let id = uuid::Uuid::new_v4().simple().to_string();
            let outcome = reserve_batch(&db, (&id, &node), &batch, deadline).await;
            if matches!(outcome, Err(StoreError::Unavailable { .. })) {
                // It may land yet, for calls that were told it failed.
                uncertain.lock().unwrap_or_else(|p| p.into_inner()).push(id);
            }
            match outcome {
                Ok(mut answers) => {
                    for (i, request) in batch.into_iter().enumerate() {
                        let answer = answers.get_mut(i).and_then(Option::take).ok_or_else(|| {
                            StoreError::Database {
                                what: "budget reservation",
                                message: "vak_reserve_batch left a reservation unanswered".into(),
                            }
                        });
                        let granted = match &answer {
                            Ok(a) if a.refusal.is_none() => Some(a.figures),
                            _ => None,
                        };
                        let (session, tool, tool_capped) = (
                            request.session.clone(),
                            request.tool.clone(),
                            request.caps[4].is_some(),
                        );
                        if request.reply.send(answer).is_err()
                            && let Some(figures) = granted
                        {
                            // Made after its call stopped waiting: nothing will use it.
                            release(&db, &session, &tool, tool_capped, figures).await;
                        }
                    }
                }
                Err(e) => {
                    for request in batch {
                        let _ = request.reply.send(Err(e.clone()));
                    }
                }
            }
        });
    }
}

/// Give up every batch in `uncertain` once the store answers: a batch that had not landed is
/// fenced off (it reserves nothing should it run later), one that had is released, once.
async fn give_up_uncertain(
    db: Db,
    node: String,
    uncertain: Arc<std::sync::Mutex<Vec<String>>>,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(GIVE_UP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let ids = std::mem::take(&mut *uncertain.lock().unwrap_or_else(|p| p.into_inner()));
        let mut left = Vec::new();
        let mut released = 0;
        for id in ids {
            if !left.is_empty() {
                left.push(id);
                continue;
            }
            let (batch, n) = (id.clone(), node.clone());
            match db
                .with("budget release", async move |c| {
                    let row = c
                        .query_one("SELECT vak_reserve_give_up($1, $2)", &[&batch, &n])
                        .await?;
                    Ok(row.get::<_, i32>(0))
                })
                .await
            {
                Ok(n) => released += n,
                Err(_) => left.push(id),
            }
        }
        if released > 0 {
            tracing::info!(
                released,
                "reservations made by batches that got no answer were given back"
            );
        }
        if !left.is_empty() {
            uncertain
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(left);
        }
    }
}

/// Give back a reservation nothing will use (its call stopped waiting before it was made).
async fn release(db: &Db, session: &str, tool: &str, tool_capped: bool, figures: [Option<i64>; 6]) {
    let (session, tool) = (session.to_string(), tool.to_string());
    let [_, _, _, fuel, wall, result] = figures.map(|f| f.unwrap_or(0));
    let released = db
        .with("budget release", async move |c| {
            c.execute(
                "UPDATE vak_ledgers SET calls_reserved = vak_clamp(calls_reserved::numeric - 1),
                        fuel_reserved = vak_clamp(fuel_reserved::numeric - $2),
                        wall_ms_reserved = vak_clamp(wall_ms_reserved::numeric - $3),
                        result_bytes_reserved = vak_clamp(result_bytes_reserved::numeric - $4),
                        updated_at = now()
                 WHERE session_id = $1",
                &[&session, &fuel, &wall, &result],
            )
            .await?;
            if tool_capped {
                c.execute(
                    "UPDATE vak_ledger_tools SET calls = GREATEST(calls - 1, 0)
                     WHERE session_id = $1 AND tool = $2",
                    &[&session, &tool],
                )
                .await?;
            }
            Ok(())
        })
        .await;
    if let Err(e) = released {
        tracing::warn!(error = %e, "a reservation made after its call stopped waiting could not be given back: it stays held, charged in full");
    }
}

/// One statement for `batch`; the answers in the batch's order.
async fn reserve_batch(
    db: &Db,
    (id, node): (&str, &str),
    batch: &[Request],
    deadline: Instant,
) -> Result<Vec<Option<Answer>>, StoreError> {
    let (id, node) = (id.to_string(), node.to_string());
    let column = |f: &dyn Fn(&Request) -> Option<i64>| batch.iter().map(f).collect::<Vec<_>>();
    let sessions: Vec<&str> = batch.iter().map(|r| r.session.as_str()).collect();
    let principals: Vec<Option<&str>> = batch.iter().map(|r| r.principal.as_deref()).collect();
    let tools: Vec<&str> = batch.iter().map(|r| r.tool.as_str()).collect();
    let caps: Vec<Vec<Option<i64>>> = (0..5).map(|k| column(&|r| r.caps[k])).collect();
    let wanted: Vec<Vec<i64>> = (0..3)
        .map(|k| batch.iter().map(|r| r.wanted[k]).collect())
        .collect();
    let rows = db
        .with_by("budget reservation", deadline, async move |c| {
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
                    &id,
                    &node,
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
