//! The approvals inbox: questions written to a small SQLite file in the state directory
//! (`approvals.sqlite`), answered by another process (`vak audit serve --approvals`, a person
//! at a browser), and read back by the process whose call waits (`vak serve --approvals inbox`).
//!
//! One table, `pending`: a row per [`ApprovalRequest`] with everything its binding covers (tool,
//! principal, scope, arguments digest, grant digest, the binding itself), the prompt a person
//! reads, and its state: `pending`, then `approved` or `denied` (by whom, when) or `withdrawn`
//! (the call stopped waiting: timeout, cancellation). An answer is one `UPDATE … WHERE id = ?
//! AND binding = ? AND state = 'pending' AND expires_ms > now`: it binds to that exact row, and a
//! second or replayed answer, an answer to another binding or a late one changes nothing and is
//! refused. The waiting call checks what it reads as every answer is checked
//! (`call::check`): the request id and the binding it was asked with.

use super::request::ApprovalRequest;
use super::{Answer, Approval, Approver};
use futures::future::BoxFuture;
use rusqlite::{Connection, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The inbox's file in the state directory.
pub const INBOX_FILE: &str = "approvals.sqlite";

/// The most bytes of a call's arguments an inbox row keeps (the prompt says how many more there
/// are and their SHA-256, as the terminal's does).
pub const INBOX_ARGUMENT_BYTES: usize = 64 * 1024;

/// How often a waiting call reads its row.
const POLL: Duration = Duration::from_millis(100);

/// Answered rows older than this are removed when a new question is written.
const KEEP_MS: i64 = 7 * 24 * 3_600_000;

/// Why the inbox could not be used.
#[derive(Debug, thiserror::Error)]
pub enum InboxError {
    #[error("the approvals inbox {path}: {message}")]
    Sqlite { path: String, message: String },
}

/// Why an answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("there is no such question in the inbox")]
    Unknown,
    #[error("this question was answered already ({state} by {by})")]
    Answered { state: String, by: String },
    #[error("this question is no longer waiting: the call stopped waiting for it")]
    Withdrawn,
    #[error("this question expired at {expires_at}")]
    Expired { expires_at: String },
    #[error("the answer is bound to another question (the binding differs)")]
    Binding,
}

/// One question as the inbox keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub id: String,
    pub call_id: String,
    pub tool: String,
    pub principal: Option<String>,
    /// What the approval covers, as a person reads it (`the call`, `workspace root \`docs\``).
    pub scope: String,
    pub arguments_sha256: String,
    pub grant_sha256: String,
    pub binding: String,
    /// The origins the call's grant may reach.
    pub reach: Vec<String>,
    /// The question as the terminal asks it: neutralised, URLs first, arguments shown whole up
    /// to [`INBOX_ARGUMENT_BYTES`] (and how many more, and their digest, past it).
    pub prompt: String,
    pub asked_at: String,
    pub expires_at: String,
    pub expires_ms: i64,
    /// The process whose call waits.
    pub pid: i64,
    /// `pending`, `approved`, `denied` or `withdrawn`.
    pub state: String,
    pub answered_by: Option<String>,
    pub answered_at: Option<String>,
}

/// The inbox file, open.
pub struct Inbox {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl Inbox {
    /// Open (or make, owner-only) the inbox at `path`.
    pub fn open(path: &Path) -> Result<Inbox, InboxError> {
        let err = sqlite(path);
        crate::journal::make_private_file(path).map_err(|e| InboxError::Sqlite {
            path: path.display().to_string(),
            message: format!("cannot be made: {e}"),
        })?;
        let conn = Connection::open(path).map_err(&err)?;
        conn.execute_batch(
            "PRAGMA busy_timeout = 5000;
             PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS pending (
                 id TEXT PRIMARY KEY,
                 call_id TEXT NOT NULL,
                 tool TEXT NOT NULL,
                 principal TEXT,
                 scope TEXT NOT NULL,
                 arguments_sha256 TEXT NOT NULL,
                 grant_sha256 TEXT NOT NULL,
                 binding TEXT NOT NULL,
                 reach TEXT NOT NULL,
                 prompt TEXT NOT NULL,
                 asked_at TEXT NOT NULL,
                 asked_ms INTEGER NOT NULL,
                 expires_at TEXT NOT NULL,
                 expires_ms INTEGER NOT NULL,
                 pid INTEGER NOT NULL,
                 state TEXT NOT NULL DEFAULT 'pending',
                 answered_by TEXT,
                 answered_at TEXT
             );
             CREATE INDEX IF NOT EXISTS pending_state ON pending(state, expires_ms);",
        )
        .map_err(&err)?;
        Ok(Inbox {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn err(&self, e: rusqlite::Error) -> InboxError {
        sqlite(&self.path)(e)
    }

    /// Write `request` as a question waiting for an answer.
    pub fn ask(&self, request: &ApprovalRequest) -> Result<(), InboxError> {
        let now = now_ms();
        let expires_ms = request
            .expires_at
            .parse::<jiff::Timestamp>()
            .map(|t| t.as_millisecond())
            .unwrap_or(now);
        let prompt = request.prompt_with(
            INBOX_ARGUMENT_BYTES,
            "the arguments of this call as they were proposed (not kept in the inbox)",
        );
        let conn = self.conn();
        conn.execute("DELETE FROM pending WHERE expires_ms < ?1", [now - KEEP_MS])
            .map_err(|e| self.err(e))?;
        conn.execute(
            "INSERT INTO pending (id, call_id, tool, principal, scope, arguments_sha256,
                 grant_sha256, binding, reach, prompt, asked_at, asked_ms, expires_at, expires_ms, pid)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            params![
                request.id,
                request.call_id,
                request.tool,
                request.principal,
                request.scope.to_string(),
                request.arguments_sha256,
                request.grant_sha256,
                request.binding,
                serde_json::to_string(&request.reach).unwrap_or_default(),
                prompt,
                request.asked_at,
                now,
                request.expires_at,
                expires_ms,
                i64::from(std::process::id()),
            ],
        )
        .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// The question `id`, as it stands.
    pub fn get(&self, id: &str) -> Result<Option<Question>, InboxError> {
        self.conn()
            .query_row(
                &format!("SELECT {COLUMNS} FROM pending WHERE id = ?1"),
                [id],
                question,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// The questions waiting now (not expired), oldest first, at most `limit`.
    pub fn waiting(&self, limit: u32) -> Result<Vec<Question>, InboxError> {
        self.select(
            "state = 'pending' AND expires_ms > ?1 ORDER BY asked_ms, id LIMIT ?2",
            params![now_ms(), limit],
        )
    }

    /// The questions answered or given up, newest first, at most `limit`.
    pub fn settled(&self, limit: u32) -> Result<Vec<Question>, InboxError> {
        self.select(
            "(state != 'pending' OR expires_ms <= ?1) ORDER BY asked_ms DESC, id LIMIT ?2",
            params![now_ms(), limit],
        )
    }

    fn select(
        &self,
        condition: &str,
        values: impl rusqlite::Params,
    ) -> Result<Vec<Question>, InboxError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!("SELECT {COLUMNS} FROM pending WHERE {condition}"))
            .map_err(|e| self.err(e))?;
        stmt.query_map(values, question)
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    /// Answer question `id`, given for `binding`, yes or no, as `by`: taken only while it
    /// waits, unexpired, with that binding, and only once.
    pub fn answer(
        &self,
        id: &str,
        binding: &str,
        approve: bool,
        by: &str,
    ) -> Result<Result<(), Refused>, InboxError> {
        let state = if approve { "approved" } else { "denied" };
        let changed = self
            .conn()
            .execute(
                "UPDATE pending SET state = ?1, answered_by = ?2, answered_at = ?3
                 WHERE id = ?4 AND binding = ?5 AND state = 'pending' AND expires_ms > ?6",
                params![
                    state,
                    by,
                    jiff::Timestamp::now().to_string(),
                    id,
                    binding,
                    now_ms()
                ],
            )
            .map_err(|e| self.err(e))?;
        if changed == 1 {
            return Ok(Ok(()));
        }
        // Why not, for the person.
        Ok(Err(match self.get(id)? {
            None => Refused::Unknown,
            Some(q) if q.state == "withdrawn" => Refused::Withdrawn,
            Some(q) if q.state != "pending" => Refused::Answered {
                state: q.state,
                by: q.answered_by.unwrap_or_default(),
            },
            Some(q) if q.binding != binding => Refused::Binding,
            Some(q) => Refused::Expired {
                expires_at: q.expires_at,
            },
        }))
    }

    /// The call stopped waiting for `id`: it is no longer answerable. Whether this withdrew
    /// it (false: it was answered, withdrawn or gone before).
    pub fn withdraw(&self, id: &str) -> Result<bool, InboxError> {
        let changed = self
            .conn()
            .execute(
                "UPDATE pending SET state = 'withdrawn', answered_at = ?1
                 WHERE id = ?2 AND state = 'pending'",
                params![jiff::Timestamp::now().to_string(), id],
            )
            .map_err(|e| self.err(e))?;
        Ok(changed == 1)
    }
}

/// A [`Question`]'s columns and its reader, from one list of names: the `SELECT` and the reader
/// cannot disagree, since each field is read by its column's name.
macro_rules! question_columns {
    ($($column:ident),*) => {
        const COLUMNS: &str = concat!($(stringify!($column), ", ",)* "reach");
        /// `reach`'s place in `COLUMNS`: last.
        const REACH_COLUMN: usize = [$(stringify!($column)),*].len();

        fn question(r: &rusqlite::Row<'_>) -> rusqlite::Result<Question> {
            // Written by this inbox from a list of origins; anything else is refused rather
            // than shown to an approver as "reaches nothing".
            let reach: String = r.get("reach")?;
            let reach = serde_json::from_str(&reach).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(
                    REACH_COLUMN,
                    rusqlite::types::Type::Text,
                    Box::new(e),
                )
            })?;
            Ok(Question { $($column: r.get(stringify!($column))?,)* reach })
        }
    };
}
question_columns!(
    id,
    call_id,
    tool,
    principal,
    scope,
    arguments_sha256,
    grant_sha256,
    binding,
    prompt,
    asked_at,
    expires_at,
    expires_ms,
    pid,
    state,
    answered_by,
    answered_at
);

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> InboxError + '_ {
    move |e| InboxError::Sqlite {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// The approver of `vak serve --approvals inbox`: each question written to the inbox, its row
/// read every 100 ms until a person answers or the call stops waiting (the grant's approval
/// timeout, or its caller's cancellation), which withdraws it.
pub struct InboxApprover {
    inbox: Arc<Inbox>,
}

impl InboxApprover {
    pub fn new(inbox: Arc<Inbox>) -> InboxApprover {
        InboxApprover { inbox }
    }
}

/// Withdraws its question when the wait ends without an answer (the future dropped).
struct Waiting {
    inbox: Arc<Inbox>,
    id: String,
    settled: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let (inbox, id) = (self.inbox.clone(), std::mem::take(&mut self.id));
        let withdraw = move || {
            if let Err(e) = inbox.withdraw(&id) {
                tracing::warn!(error = %e, approval = %id, "the question could not be withdrawn");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => drop(h.spawn_blocking(withdraw)),
            Err(_) => withdraw(),
        }
    }
}

/// The answer `row` holds for `request`, once a person has answered.
fn answered(row: &Question, request: &ApprovalRequest) -> Option<Answer> {
    let by = format!(
        "approvals inbox: {}",
        row.answered_by.as_deref().unwrap_or("(unknown)")
    );
    match row.state.as_str() {
        // As the inbox holds it: the host checks id and binding against the request it asked.
        "approved" => Some(Answer::Approved(Approval {
            request_id: row.id.clone(),
            binding: row.binding.clone(),
            by,
            at: row.answered_at.clone().unwrap_or_default(),
        })),
        "denied" => Some(request.deny(by, "answered no in the approvals inbox")),
        _ => None,
    }
}

impl Approver for InboxApprover {
    fn withdraw(&self, request: &ApprovalRequest) -> BoxFuture<'static, Option<Answer>> {
        let (inbox, request) = (self.inbox.clone(), request.clone());
        Box::pin(async move {
            let id = request.id.clone();
            let read = tokio::task::spawn_blocking(move || match inbox.withdraw(&id)? {
                true => Ok(None),
                false => inbox.get(&id),
            });
            match read.await {
                Ok(Ok(row)) => row.and_then(|row| answered(&row, &request)),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, approval = %request.id, "the question could not be withdrawn");
                    None
                }
                Err(_) => None,
            }
        })
    }

    fn decide(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer> {
        let inbox = self.inbox.clone();
        Box::pin(async move {
            let unavailable = |reason: String| Answer::Unavailable { reason };
            let (asking, asked) = (inbox.clone(), request.clone());
            match tokio::task::spawn_blocking(move || asking.ask(&asked)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return unavailable(e.to_string()),
                Err(e) => return unavailable(format!("the inbox could not be written: {e}")),
            }
            tracing::info!(approval = %request.id, call = %request.call_id, tool = %request.tool, "waiting for an answer in the approvals inbox");
            let mut waiting = Waiting {
                inbox: inbox.clone(),
                id: request.id.clone(),
                settled: false,
            };
            loop {
                tokio::time::sleep(POLL).await;
                let (reading, id) = (inbox.clone(), request.id.clone());
                let row = match tokio::task::spawn_blocking(move || reading.get(&id)).await {
                    Ok(Ok(Some(row))) => row,
                    Ok(Ok(None)) => return unavailable("the question left the inbox".into()),
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "the inbox could not be read");
                        continue;
                    }
                    Err(_) => continue,
                };
                if let Some(answer) = answered(&row, &request) {
                    waiting.settled = true;
                    return answer;
                }
                if row.state != "pending" {
                    return unavailable(format!("the question was {} in the inbox", row.state));
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::test_context as context;
    use crate::approval::{ApprovalError, ApprovalScope};

    #[test]
    fn an_answer_binds_to_its_row_once() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = Inbox::open(&dir.path().join(INBOX_FILE)).unwrap();
        let r = ApprovalRequest::new(
            &context("{\"x\":\"<b>\"}"),
            ApprovalScope::Call,
            Duration::from_secs(60),
        );
        inbox.ask(&r).unwrap();
        let waiting = inbox.waiting(10).unwrap();
        assert_eq!(waiting.len(), 1);
        assert_eq!(waiting[0].binding, r.binding);
        assert!(waiting[0].prompt.contains("{\"x\":\"<b>\"}"));
        assert_eq!(
            inbox.answer(&r.id, "another", true, "eve").unwrap(),
            Err(Refused::Binding)
        );
        assert_eq!(
            inbox.answer(&r.id, &r.binding, true, "bob").unwrap(),
            Ok(())
        );
        assert!(matches!(
            inbox.answer(&r.id, &r.binding, false, "bob").unwrap(),
            Err(Refused::Answered { .. })
        ));
        assert_eq!(
            inbox
                .answer("approval_nope", &r.binding, true, "bob")
                .unwrap(),
            Err(Refused::Unknown)
        );
        assert!(inbox.waiting(10).unwrap().is_empty());
        // Withdrawn and expired questions take no answer.
        let w = ApprovalRequest::new(&context("{}"), ApprovalScope::Call, Duration::from_secs(60));
        inbox.ask(&w).unwrap();
        inbox.withdraw(&w.id).unwrap();
        assert_eq!(
            inbox.answer(&w.id, &w.binding, true, "bob").unwrap(),
            Err(Refused::Withdrawn)
        );
        let e = ApprovalRequest::new(&context("{}"), ApprovalScope::Call, Duration::ZERO);
        inbox.ask(&e).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(
            inbox.answer(&e.id, &e.binding, true, "bob").unwrap(),
            Err(Refused::Expired { .. })
        ));
    }

    #[tokio::test]
    async fn the_approver_waits_for_the_inbox_and_withdraws_when_given_up() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = Arc::new(Inbox::open(&dir.path().join(INBOX_FILE)).unwrap());
        let approver = InboxApprover::new(inbox.clone());
        let r = ApprovalRequest::new(&context("{}"), ApprovalScope::Call, Duration::from_secs(60));
        let waiting = tokio::spawn(approver.decide(r.clone()));
        let answerer = inbox.clone();
        let id = r.id.clone();
        let binding = r.binding.clone();
        tokio::task::spawn_blocking(move || {
            while answerer.waiting(10).unwrap().is_empty() {
                std::thread::sleep(Duration::from_millis(10));
            }
            answerer
                .answer(&id, &binding, true, "bob at a browser")
                .unwrap()
        })
        .await
        .unwrap()
        .unwrap();
        match waiting.await.unwrap() {
            Answer::Approved(a) => {
                assert_eq!((a.request_id, a.binding), (r.id.clone(), r.binding.clone()));
                assert_eq!(a.by, "approvals inbox: bob at a browser");
            }
            other => panic!("{other:?}"),
        }
        // Given up (the caller's timeout drops the wait): the question is withdrawn.
        let r2 = ApprovalRequest::new(&context("{}"), ApprovalScope::Call, Duration::from_secs(60));
        let _ = tokio::time::timeout(Duration::from_millis(300), approver.decide(r2.clone())).await;
        for _ in 0..100 {
            if inbox.get(&r2.id).unwrap().unwrap().state == "withdrawn" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("not withdrawn: {:?}", inbox.get(&r2.id).unwrap());
    }

    /// A person who answers yes while the call is about to stop waiting: the answer is in the
    /// inbox before the call's wait ends, but the approver has not passed it on (`Prompt` never
    /// does, as a poll that has not come round yet). The call takes the answer instead of refusing with a
    /// timeout while the inbox tells the person "approved"; an unanswered question is
    /// withdrawn before the refusal, and a cancelled call stays cancelled.
    #[tokio::test]
    async fn an_answer_given_as_the_wait_ends_is_taken_not_lost() {
        use crate::approval::call::CallApprovals;
        use tokio_util::sync::CancellationToken;

        /// Puts each question in the inbox and answers it there at once (when `yes` is set),
        /// then never passes the answer on: an approver whose poll has not come round yet when
        /// the wait ends, whatever the timing.
        struct Prompt {
            inner: InboxApprover,
            inbox: Arc<Inbox>,
            yes: bool,
        }
        impl Approver for Prompt {
            fn decide(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer> {
                let (inbox, yes) = (self.inbox.clone(), self.yes);
                Box::pin(async move {
                    inbox.ask(&request).unwrap();
                    if yes {
                        let answered = inbox.answer(&request.id, &request.binding, true, "bob");
                        assert_eq!(answered.unwrap(), Ok(()));
                    }
                    std::future::pending().await
                })
            }
            fn withdraw(&self, request: &ApprovalRequest) -> BoxFuture<'static, Option<Answer>> {
                self.inner.withdraw(request)
            }
        }

        let dir = tempfile::tempdir().unwrap();
        let inbox = Arc::new(Inbox::open(&dir.path().join(INBOX_FILE)).unwrap());
        let approvals = |yes: bool, stop: CancellationToken| {
            let prompt = Prompt {
                inner: InboxApprover::new(inbox.clone()),
                inbox: inbox.clone(),
                yes,
            };
            CallApprovals::new(context("{}"), Some(Arc::new(prompt)), None, stop)
        };
        let wait = Duration::from_millis(300);

        let answered = approvals(true, CancellationToken::new());
        answered
            .require(ApprovalScope::Call, wait)
            .await
            .expect("the answer is taken");
        let entry = &answered.entries()[0];
        assert_eq!(
            (entry.decision.as_str(), entry.by.as_deref()),
            ("approved", Some("approvals inbox: bob"))
        );
        let id = entry.request["id"].as_str().unwrap();
        assert_eq!(inbox.get(id).unwrap().unwrap().state, "approved");

        let unanswered = approvals(false, CancellationToken::new());
        let refused = unanswered
            .require(ApprovalScope::Call, wait)
            .await
            .unwrap_err();
        assert!(
            matches!(refused, ApprovalError::Timeout { .. }),
            "{refused:?}"
        );
        let id = unanswered.entries()[0].request["id"]
            .as_str()
            .unwrap()
            .to_string();
        // Withdrawn before the refusal was decided: a late yes is refused, not shown accepted.
        assert_eq!(inbox.get(&id).unwrap().unwrap().state, "withdrawn");
        let late = inbox.answer(
            &id,
            unanswered.entries()[0].request["binding"].as_str().unwrap(),
            true,
            "bob",
        );
        assert_eq!(late.unwrap(), Err(Refused::Withdrawn));

        let stop = CancellationToken::new();
        stop.cancel();
        let cancelled = approvals(true, stop);
        let refused = cancelled
            .require(ApprovalScope::Call, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(
            matches!(refused, ApprovalError::Cancelled { .. }),
            "{refused:?}"
        );
    }
}
