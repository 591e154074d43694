//! Secret values out of a whole call record, before it leaves the pipeline (journal, terminal,
//! MCP): one walk over the record as JSON, so a field added later is covered too.

use crate::secrets::Scrubber;
use vak_core::record::{CallRecord, JournalFailure, JournalPlace};

/// Redact every secret value `scrubber` knows from every string of the record, whatever
/// field holds it (keys of free-form JSON too): the arguments, approvals, error, tool error,
/// result, evidence, receipts' requests and outcomes, logs, outcome, projection and child
/// records, noting in [`CallRecord::redacted`] where and how many. One walk over the record
/// as JSON, so a field added later is covered without a line here. The digests stay those of
/// the data as it was (arguments as proposed, result as returned, bodies as sent).
///
/// Idempotent: a second pass finds nothing more. Run whenever the record is about to be read
/// by anything but the pipeline: before the outcome and projection are made from the result,
/// and once when the call ends, before it is signed and journaled.
pub fn redact(record: &mut CallRecord, scrubber: &Scrubber) {
    if !scrubber.active() {
        return;
    }
    let journaled = record.journaled.take();
    let mut value = match serde_json::to_value(&*record) {
        Ok(v) => v,
        Err(e) => return redaction_failed(record, &e.to_string(), journaled),
    };
    let mut places: Vec<(String, usize)> = Vec::new();
    scrubber.redact_json_at(&mut value, &mut |path, n| {
        let place = place_of(path);
        match places.iter_mut().find(|(p, _)| *p == place) {
            Some((_, count)) => *count += n,
            None => places.push((place, n)),
        }
    });
    if places.is_empty() {
        record.journaled = journaled;
        return;
    }
    match serde_json::from_value::<CallRecord>(value) {
        Ok(mut clean) => {
            clean.link();
            clean
                .redacted
                .extend(places.iter().map(|(p, n)| format!("{p}: {n}")));
            clean.journaled = journaled;
            *record = clean;
        }
        Err(e) => redaction_failed(record, &e.to_string(), journaled),
    }
}

/// The record could not be walked (a host fault: every field round-trips through JSON):
/// everything a tool, a model or a server wrote is dropped rather than kept unredacted.
fn redaction_failed(
    record: &mut CallRecord,
    why: &str,
    journaled: Option<Result<JournalPlace, JournalFailure>>,
) {
    tracing::error!(call_id = %record.call_id, error = why, "the record could not be redacted; its contents are dropped");
    let mut bare = CallRecord::new(
        record.call_id.clone(),
        record.tool.clone(),
        record.provider.clone(),
        "",
    );
    bare.arguments_digest = std::mem::take(&mut record.arguments_digest);
    bare.received_at = std::mem::take(&mut record.received_at);
    bare.session_id = std::mem::take(&mut record.session_id);
    bare.parent_call_id = record.parent_call_id.take();
    bare.round = record.round.take();
    bare.depth = record.depth;
    bare.status = record.status;
    bare.stage = record.stage;
    bare.usage = std::mem::take(&mut record.usage);
    bare.redacted = vec![format!("record: dropped ({why})")];
    bare.journaled = journaled;
    *record = bare;
}

/// Where in a record a redaction was, for [`CallRecord::redacted`]: the field and the field
/// within it (`error.message`, `receipts.request`, `result.markdown`), never deeper into
/// free-form JSON (`arguments`, `outcome`, `projection`), whose keys a model or tool chose.
fn place_of(path: &[&str]) -> String {
    let depth = match path.first() {
        Some(&("arguments" | "outcome" | "projection")) => 1,
        _ => 2,
    };
    path.iter()
        .take(depth)
        .copied()
        .collect::<Vec<_>>()
        .join(".")
}
