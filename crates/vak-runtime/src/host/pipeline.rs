//! The call lifecycle, one function per stage, in the order a call meets them: proposal →
//! schema → permission (policy, revocations, approvals) → budget (the reservation, then the
//! write-ahead `started` entry) → dispatch → result (with its evidence) → outcome → projection;
//! then the record is sealed and journaled.
//!
//! Each stage writes its report into the record and hands the next stage a typed value; a stage
//! that ends the call returns [`Ended`], the ending in the record. The budget is reserved in
//! `reserve`, given back unused or settled in `run`, and the settlement committed with the
//! record in `journal`.

use super::error::PermissionError;
use super::{Host, Session};
use crate::admission::{AdmittedTool, Verdict};
use crate::approval::{ApprovalScope, CallApprovals, CallContext};
use crate::budget::{self, Reservation, Settlement};
use crate::capabilities::Broker;
use crate::child_runner::{ChildCap, ChildLink};
use crate::dispatch::GuestReturn;
use crate::dispatch::run::{DispatchReport, Entry};
use crate::evidence::bodies::BodyStore;
use crate::outcome::Outcome;
use crate::proposal::{self, Proposal, ProposalError};
use crate::record::{CallRecord, Limits, Status, ToolResultRecord};
use crate::result;
use crate::revocation::Blocked;
use crate::secrets::Scrubber;
use crate::stage::{CallError, Stage, StageError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use vak_core::ports::client::ClientChannel;

/// The call ended at a stage; its record says where and why.
struct Ended;

/// End the record at the stage `error` belongs to, that stage having begun at `t`.
fn end<E: StageError>(record: &mut CallRecord, error: &E, t: Instant) -> Ended {
    record.stop(CallError::from(error), t.elapsed());
    Ended
}

/// A call as its stages see it: on whose behalf, what was proposed, how it is cancelled and who
/// can answer.
struct Call<'a> {
    session: &'a Session,
    proposal: &'a Proposal,
    /// What a child run may have of its parent's.
    cap: Option<ChildCap>,
    cancel: &'a CancellationToken,
    client: Option<Arc<dyn ClientChannel>>,
    /// Every secret value the tool's grant could use (none until the tool is known).
    scrub: Arc<Scrubber>,
}

/// What the permission stage hands on.
struct Permit {
    /// The call's approvals, when its grant asks any.
    approvals: Option<Arc<CallApprovals>>,
    /// Stops the guest: the caller's cancellation, and a refused approval during dispatch.
    stop: CancellationToken,
}

/// What the budget stage reserved, and its clock (the stage goes on with the write-ahead).
struct Reserved {
    limits: Limits,
    reservation: Reservation,
    /// One bound for the call's waits on the store before it runs (its reservation and its
    /// `started` entry), from the stage's start, whatever else the store is doing.
    deadline: Instant,
    t: Instant,
}

/// What dispatch leaves, before it is recorded.
struct Dispatched {
    report: DispatchReport,
    /// The bodies the call's requests fetched (the evidence stage reads them).
    bodies: BodyStore,
    /// The records of the child runs it started.
    children: Arc<Mutex<Vec<CallRecord>>>,
    t: Instant,
}

/// What the guest returned, and the bodies its requests fetched.
struct Returned {
    value: GuestReturn,
    bodies: BodyStore,
}

impl Host {
    /// One proposal through the whole lifecycle: its record, signed and journaled, whatever
    /// happened to the call.
    pub(super) async fn call_with(
        &self,
        session: &Session,
        proposal: Proposal,
        child: Option<(String, ChildCap)>,
        cancel: CancellationToken,
        client: Option<Arc<dyn ClientChannel>>,
    ) -> CallRecord {
        let mut record = CallRecord::new(
            proposal.call_id.clone(),
            proposal.tool.clone(),
            proposal.provider.clone(),
            &proposal.arguments,
        );
        record.provider_call_id = proposal.provider_call_id.clone();
        record.round = proposal.round.clone();
        record.session_id = session.id.clone();
        record.principal = session.principal.clone();
        let cap = child.map(|(parent, cap)| {
            record.parent_call_id = Some(parent);
            record.depth = cap.parent_depth + 1;
            cap
        });
        let mut call = Call {
            session,
            proposal: &proposal,
            cap,
            cancel: &cancel,
            client,
            scrub: Arc::new(Scrubber::none()),
        };
        let settlement = self.run(&mut call, &mut record).await;
        seal(&mut record, &call.scrub);
        self.journal(&mut record, settlement).await;
        tracing::info!(
            call_id = %record.call_id,
            tool = %record.tool,
            status = record.status.as_str(),
            stage = record.stage.as_str(),
            fuel = record.usage.fuel,
            wall_ns = record.usage.wall_ns,
            "call finished"
        );
        record
    }

    /// The stages in order, until one ends the call. Returns the charge of a shared ledger, to
    /// be committed with the record.
    async fn run(&self, call: &mut Call<'_>, record: &mut CallRecord) -> Option<Settlement> {
        let Ok((tool, arguments)) = self.proposal(call, record) else {
            return None;
        };
        // From here on, every secret value the tool's grant could use is looked for, up to the
        // sealed record.
        call.scrub = Arc::new(crate::capabilities::http::credentials::scrubber_for(
            self.inner.secrets.as_deref(),
            &tool.grant,
        ));
        let Ok(()) = schema(record, &tool, arguments) else {
            return None;
        };
        let Ok(permit) = self.permission(call, record, &tool).await else {
            return None;
        };
        let Ok(reserved) = self.reserve(call, record, &tool).await else {
            return None;
        };
        if let Err(Ended) = self.write_ahead(call, record, &tool, &reserved).await {
            // Nothing ran: the reservation is given back (a shared ledger's release is
            // committed with the record).
            return reserved.reservation.unused();
        }
        let dispatched = self
            .dispatch(call, record, &tool, &permit, &reserved.limits)
            .await;
        // What the call used replaces what it reserved (in a shared ledger, with the record).
        let settlement = reserved.reservation.settle(&dispatched.report.usage);
        let Ok(returned) = dispatched_into(record, &permit, dispatched) else {
            return settlement;
        };
        let Ok(payload) = self.result(call, record, returned, reserved.limits.result_bytes) else {
            return settlement;
        };
        if self.outcome(call, record, payload.as_ref()) {
            projection(call, record);
            record.status = Status::Completed;
        }
        settlement
    }

    /// Proposal: one neutral call of a known tool, its arguments a JSON object.
    fn proposal(
        &self,
        call: &Call<'_>,
        record: &mut CallRecord,
    ) -> Result<(Arc<AdmittedTool>, serde_json::Value), Ended> {
        let t = Instant::now();
        let (tool, arguments) = self
            .proposed(call.proposal)
            .map_err(|e| end(record, &e, t))?;
        record.component_digest = Some(tool.examination.digest.clone());
        record.passed(Stage::Proposal, t.elapsed(), String::new());
        Ok((tool, serde_json::Value::Object(arguments)))
    }

    /// Permission: the policy's grant (admission linked only what it grants), the principal, the
    /// revocations in force now, and the approvals the grant asks for the whole call.
    async fn permission(
        &self,
        call: &Call<'_>,
        record: &mut CallRecord,
        tool: &AdmittedTool,
    ) -> Result<Permit, Ended> {
        let t = Instant::now();
        self.allowed(tool, call.session.principal.as_deref())
            .map_err(|e| end(record, &e, t))?;
        let granted: Vec<String> = match &tool.examination.verdict {
            Verdict::Admitted { granted } => granted.iter().map(|c| c.name().to_string()).collect(),
            Verdict::Refused { .. } => Vec::new(),
        };
        record.granted = granted.clone();
        // Approvals: the whole call now when the tool is `ask`; scopes at their first use. Only
        // a grant that asks anything pays for this. Cancelling `stop` (a refused approval during
        // dispatch) stops the guest at once.
        let asks = tool.grant.asks();
        let stop = if asks {
            call.cancel.child_token()
        } else {
            call.cancel.clone()
        };
        let approvals = asks.then(|| self.approvals(call, record, tool, &stop));
        if let Some(approvals) = approvals.as_ref().filter(|_| tool.grant.ask) {
            let asked = approvals
                .require(
                    ApprovalScope::Call,
                    Duration::from_millis(tool.grant.approval_timeout_ms),
                )
                .await;
            record.approvals = approvals.entries();
            asked.map_err(|e| end(record, &e, t))?;
        }
        let approved_by = approvals
            .as_ref()
            .map(|a| a.approvers())
            .unwrap_or_default();
        record.passed(
            Stage::Permission,
            t.elapsed(),
            if approved_by.is_empty() {
                format!("granted: [{}]", granted.join(", "))
            } else {
                format!(
                    "granted: [{}]; approved by {}",
                    granted.join(", "),
                    approved_by.join(", ")
                )
            },
        );
        Ok(Permit { approvals, stop })
    }

    /// Budget: min(claim, policy cap, engine ceiling, what the session has left), reserved in
    /// the session's ledger.
    async fn reserve(
        &self,
        call: &Call<'_>,
        record: &mut CallRecord,
        tool: &AdmittedTool,
    ) -> Result<Reserved, Ended> {
        let t = Instant::now();
        let ceiling = budget::engine_ceiling(self.inner.runtime.settings.max_memory_bytes);
        let mut wanted = budget::admit(&tool.descriptor.claims.budget, &tool.grant.caps, &ceiling);
        if let Some(cap) = &call.cap {
            // A child run lives within its parent: the parent's fuel, what is left of its time.
            wanted.fuel = wanted.fuel.min(cap.fuel);
            wanted.wall_time_ms = wanted.wall_time_ms.min(cap.wall_time_ms);
        }
        let claim = budget::Claim {
            tool: tool.name(),
            principal: call.session.principal.as_deref(),
            caps: &self.inner.policy.session,
            calls_per_session: tool.grant.caps.calls_per_session,
            limits: wanted,
        };
        let deadline = self.inner.store.deadline();
        let (limits, reservation) = call
            .session
            .ledger
            .reserve_by(&claim, deadline)
            .await
            .map_err(|e| end(record, &e, t))?;
        record.limits = Some(limits);
        Ok(Reserved {
            limits,
            reservation,
            deadline,
            t,
        })
    }

    /// Write-ahead, the budget stage's last step: the call takes its place in the journal (a
    /// `started` entry in this process's chain, durable as records are) before any instance of
    /// its tool exists. An effect can then never happen without its record's place, and a
    /// process that dies mid-call leaves an interrupted call, not a silent one. A call whose
    /// place cannot be written is not run.
    async fn write_ahead(
        &self,
        call: &Call<'_>,
        record: &mut CallRecord,
        tool: &AdmittedTool,
        reserved: &Reserved,
    ) -> Result<(), Ended> {
        let Reserved {
            limits,
            deadline,
            t,
            ..
        } = *reserved;
        let mut started = crate::journal::Started::of(record, self.grant_digest(tool), limits);
        if let Some(Err(e)) = self
            .inner
            .store
            .start(&mut started, &self.inner.key, deadline)
            .await
        {
            if e.retryable() {
                tracing::debug!(call_id = %record.call_id, error = %e, "the call's started entry could not be journaled: refused before dispatch");
            } else {
                tracing::error!(call_id = %record.call_id, error = %e, "the call's started entry could not be journaled: refused before dispatch");
            }
            return Err(end(record, &crate::journal::JournalUnavailable(e), t));
        }
        // The revocations again, now that the call has its place: one revoked while it waited
        // for its reservation or its entry does not run. (On a shared store a node confirms a
        // revocation once its view holds it, so a call checked after that is refused.)
        self.revoked(tool, call.session.principal.as_deref())
            .map_err(|e| end(record, &e, t))?;
        record.passed(
            Stage::Budget,
            t.elapsed(),
            format!(
                "fuel {}, memory {} B, wall {} ms, result {} B",
                limits.fuel, limits.memory_bytes, limits.wall_time_ms, limits.result_bytes
            ),
        );
        Ok(())
    }

    /// Dispatch: a fresh instance of the tool under `limits`, its capabilities brokered.
    async fn dispatch(
        &self,
        call: &Call<'_>,
        record: &CallRecord,
        tool: &AdmittedTool,
        permit: &Permit,
        limits: &Limits,
    ) -> Dispatched {
        let t = Instant::now();
        let children = Arc::new(Mutex::new(Vec::new()));
        let bodies = BodyStore::default();
        let broker = Broker::new(record.call_id.clone(), Some(tool.grant.clone()))
            .retaining(bodies.clone())
            .watching(self.revocations().clone(), call.session.principal.clone())
            .keyed(self.inner.secrets.clone(), call.scrub.clone())
            .linked(ChildLink {
                host: self.clone(),
                session: call.session.clone(),
                depth: record.depth,
                deadline: Instant::now() + Duration::from_millis(limits.wall_time_ms),
                fuel_cap: limits.fuel,
                records: children.clone(),
                cancel: permit.stop.clone(),
                client: call.client.clone(),
            })
            .attended(call.client.clone());
        let broker = match &permit.approvals {
            Some(a) => broker.approving(a.clone()),
            None => broker,
        };
        let mut report = self
            .inner
            .runtime
            .dispatch(
                &tool.pre,
                broker,
                Entry::Call(&call.proposal.arguments),
                limits,
                &permit.stop,
            )
            .await;
        if let Ok(GuestReturn::Completed(r)) = &report.outcome {
            report.usage.result_bytes = result::result_size(r);
        }
        Dispatched {
            report,
            bodies,
            children,
            t,
        }
    }

    /// Result: the guest's return collected into a typed result within its cap, its evidence
    /// checked; or the tool's own error. Returns the payload, parsed once for the stages after
    /// it, as the redacted record holds it.
    fn result(
        &self,
        call: &Call<'_>,
        record: &mut CallRecord,
        returned: Returned,
        result_bytes: u64,
    ) -> Result<Option<serde_json::Value>, Ended> {
        let t = Instant::now();
        let collected = match returned.value {
            GuestReturn::Completed(r) => result::collect(r, result_bytes),
            GuestReturn::Oversized { limit } => Err(result::ResultError::ValueTooLarge { limit }),
            GuestReturn::Unconvertible(reason) => {
                Err(result::ResultError::Unconvertible { reason })
            }
            GuestReturn::ToolError(e) => {
                let (kept, error) = result::tool_error(e);
                record.tool_error = Some(kept);
                // Redacted before it is cut to its cap: a value cut in two would not be found.
                crate::redaction::redact(record, &call.scrub);
                if let Some(kept) = &mut record.tool_error {
                    result::cut_to_cap(kept);
                }
                let ended = end(record, &error, t);
                record.status = Status::ToolError;
                return Err(ended);
            }
            // `dispatch` answers `Entry::Call` with a call's return only; anything else is ours.
            GuestReturn::Described(_) => {
                let fault = crate::DispatchError::HostFault {
                    message: "the dispatch stage returned a descriptor for a call".into(),
                };
                return Err(end(record, &fault, t));
            }
        };
        let result::Collected {
            record: r,
            mut payload,
        } = collected.map_err(|e| end(record, &e, t))?;
        let checked = self.evidence(record, &r, payload.as_ref(), &returned.bodies);
        record.evidence = checked.map_err(|e| end(record, &e, t))?;
        record.result = Some(r);
        // The outcome and the projection are made from the redacted result.
        if call.scrub.active() {
            crate::redaction::redact(record, &call.scrub);
            payload = record.result.as_ref().and_then(payload_of);
        }
        record.passed(Stage::Result, t.elapsed(), String::new());
        Ok(payload)
    }

    /// Evidence: each item of the result against the receipts of the call and its child runs,
    /// the payload's registered bindings and the bodies the call fetched.
    fn evidence(
        &self,
        record: &CallRecord,
        r: &ToolResultRecord,
        payload: Option<&serde_json::Value>,
        bodies: &BodyStore,
    ) -> Result<Vec<crate::evidence::CheckedEvidence>, crate::evidence::EvidenceError> {
        let bodies = bodies.snapshot();
        let subject = crate::evidence::Subject {
            schema_id: r.payload_schema.as_deref(),
            payload,
            registry: &self.inner.registry,
            bodies: &bodies,
        };
        crate::evidence::check(&r.evidence, &record.all_receipts(), &subject)
    }

    /// Outcome: the result contract and the caller's requirements, one by one. False when
    /// there is no result to judge.
    fn outcome(
        &self,
        call: &Call<'_>,
        record: &mut CallRecord,
        payload: Option<&serde_json::Value>,
    ) -> bool {
        let t = Instant::now();
        let Some(result) = record.result.as_ref() else {
            return false;
        };
        let outcome = crate::outcome::evaluate(
            &self.inner.registry,
            result.payload_schema.as_deref(),
            payload,
            &record.evidence,
            &record.all_receipts(),
            &call.proposal.requirements,
            jiff::Timestamp::now().as_second(),
        );
        record.passed(
            Stage::Outcome,
            t.elapsed(),
            format!("label: {}", outcome.label.as_str()),
        );
        record.outcome = Some(outcome);
        true
    }

    /// The journal: the record signed and written before the call returns (an acknowledged call
    /// always has its record), with the charge of a shared ledger in the same commit.
    async fn journal(&self, record: &mut CallRecord, settlement: Option<Settlement>) {
        // No journal, checkpoints: the record is hashed into the chain in memory, unsigned.
        if let Some(chain) = &self.inner.chain {
            chain.append(record);
            return;
        }
        // A call refused because the store is out of reach does not wait for it again: its
        // record is queued, committed when the store answers, and the call answered now.
        let wait = match record.error.as_ref().map(|e| e.kind.as_str()) {
            Some("store_unavailable") => {
                crate::store::Wait::Queued("the store was out of reach for this call")
            }
            Some(crate::journal::chain::JOURNAL_UNAVAILABLE) => {
                crate::store::Wait::Queued("the call's started entry could not be written")
            }
            _ => crate::store::Wait::Until(self.inner.store.deadline()),
        };
        record.journaled = self
            .inner
            .store
            .sign_and_append(record, &self.inner.key, settlement, wait)
            .await
            .map(|written| written.map_err(|e| e.failure()));
        if let Some(Err(e)) = &record.journaled {
            // An outage is logged once by the store, with a count; not here for every call.
            if e.retryable {
                tracing::debug!(call_id = %record.call_id, error = %e, "the record could not be journaled");
            } else {
                tracing::error!(call_id = %record.call_id, error = %e, "the record could not be journaled");
            }
        }
    }

    /// The approvals of a call whose grant asks any: what every question is bound to, and who
    /// is asked.
    fn approvals(
        &self,
        call: &Call<'_>,
        record: &CallRecord,
        tool: &AdmittedTool,
        stop: &CancellationToken,
    ) -> Arc<CallApprovals> {
        let context = CallContext {
            call_id: record.call_id.clone(),
            tool: tool.name().to_string(),
            principal: call.session.principal.clone(),
            // The person reads the arguments with any secret value redacted.
            arguments: call.scrub.redact(&call.proposal.arguments).0,
            arguments_sha256: record.arguments_digest.clone(),
            // What the person reads first: where the call can send requests.
            reach: tool
                .grant
                .http()
                .map(|h| h.origins.iter().map(|o| o.text.clone()).collect())
                .unwrap_or_default(),
            grant_sha256: self.grant_digest(tool),
            timeout: Duration::from_millis(tool.grant.approval_timeout_ms),
        };
        Arc::new(CallApprovals::new(
            context,
            self.inner.approver.clone(),
            call.client.clone(),
            stop.clone(),
        ))
    }

    /// SHA-256 of `tool`'s grant (as its approvals and its calls' `started` entries name it),
    /// made once at build.
    pub fn grant_digest(&self, tool: &AdmittedTool) -> String {
        match self.inner.grant_digests.get(tool.name()) {
            Some(d) => d.clone(),
            None => crate::digest::sha256_hex(format!("{:?}", tool.grant).as_bytes()),
        }
    }

    /// Whether the policy lets `principal` call `tool` and no revocation stands in the way.
    fn allowed(&self, tool: &AdmittedTool, principal: Option<&str>) -> Result<(), PermissionError> {
        self.revoked(tool, principal)?;
        if !tool.grant.allows_principal(principal) {
            return Err(PermissionError::PrincipalNotAllowed {
                tool: tool.name().to_string(),
                principal: principal.unwrap_or("(none)").to_string(),
            });
        }
        Ok(())
    }

    /// The revocations in force (and whether this node's view of them can be trusted now).
    fn revoked(&self, tool: &AdmittedTool, principal: Option<&str>) -> Result<(), PermissionError> {
        match self.revocations().blocking_call(tool.name(), principal) {
            None => Ok(()),
            Some(Blocked::Revoked(entry)) => Err(PermissionError::Revoked {
                what: entry.revocation.to_string(),
                at: entry.at,
                reason: entry.reason,
            }),
            Some(Blocked::Unconfirmed(why)) => Err(PermissionError::Store(
                crate::store::StoreError::Unavailable {
                    what: "revocations",
                    message: why,
                },
            )),
        }
    }

    /// The admitted tool `proposal` names and its arguments as an object.
    fn proposed(
        &self,
        proposal: &Proposal,
    ) -> Result<
        (
            Arc<AdmittedTool>,
            serde_json::Map<String, serde_json::Value>,
        ),
        ProposalError,
    > {
        if let Some(defect) = &proposal.defect {
            return Err(defect.clone());
        }
        if proposal.tool.is_empty() {
            return Err(ProposalError::MissingToolName);
        }
        let admitted = self
            .inner
            .tools
            .get(&proposal.tool)
            .cloned()
            .ok_or_else(|| self.not_served(&proposal.tool))?;
        let arguments = proposal::parse_arguments(&proposal.arguments)?;
        Ok((admitted, arguments))
    }
}

/// Schema: the arguments against the tool's argument schema.
fn schema(
    record: &mut CallRecord,
    tool: &AdmittedTool,
    arguments: serde_json::Value,
) -> Result<(), Ended> {
    let t = Instant::now();
    let checked = tool.schema.validate_value(&arguments);
    record.arguments = Some(arguments);
    checked.map_err(|e| end(record, &e, t))?;
    record.passed(Stage::Schema, t.elapsed(), String::new());
    Ok(())
}

/// Dispatch, recorded: what the guest used, its receipts, logs, child runs and approvals stay on
/// record whatever happens to the call afterwards.
fn dispatched_into(
    record: &mut CallRecord,
    permit: &Permit,
    dispatched: Dispatched,
) -> Result<Returned, Ended> {
    let Dispatched {
        report,
        bodies,
        children,
        t,
    } = dispatched;
    record.usage = report.usage;
    record.receipts = report.receipts;
    record.children = std::mem::take(&mut *children.lock().unwrap_or_else(|p| p.into_inner()));
    record.logs = report.logs;
    if let Some(approvals) = &permit.approvals {
        record.approvals = approvals.entries();
        // A scope's approval refused during dispatch ends the call at `permission`, whatever
        // the guest did after it was told.
        if let Some(e) = approvals.refusal() {
            return Err(end(record, &e, t));
        }
    }
    let value = report.outcome.map_err(|e| end(record, &e, t))?;
    record.passed(Stage::Dispatch, t.elapsed(), String::new());
    Ok(Returned { value, bodies })
}

/// Projection: a card only where it is earned; the document always kept.
fn projection(call: &Call<'_>, record: &mut CallRecord) {
    let t = Instant::now();
    let (Some(result), Some(outcome)) = (&record.result, &record.outcome) else {
        return;
    };
    let projection =
        crate::projection::project(&call.proposal.renderer, result, outcome, &record.evidence);
    record.projection = Some(projection);
    record.passed(Stage::Projection, t.elapsed(), String::new());
}

/// Seal: whatever stage the call ended at, the record keeps no secret value in any field: not in
/// the arguments a model pasted it into, an approval's question, the error, the receipts (the
/// digests stay those of the data as it was). The record is what the journal, `vak call`,
/// `vak audit` and MCP results and `_meta` are made from.
fn seal(record: &mut CallRecord, scrub: &Scrubber) {
    crate::redaction::redact(record, scrub);
    if matches!(record.status, Status::ToolError | Status::Failed) {
        record.outcome = Some(Outcome {
            label: crate::outcome::Label::Failed,
            payload_passed: false,
            requirements: Vec::new(),
        });
    }
}

/// The payload of a result, read as JSON (none when it is not).
fn payload_of(result: &ToolResultRecord) -> Option<serde_json::Value> {
    result
        .payload_json
        .as_deref()
        .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok())
}
