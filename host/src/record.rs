//! The call record as the host handles it: the record itself is data in `vak_core::record`
//! (re-exported here); what depends on the host's own caps and secrets lives here: the bound on
//! a record's size, and the redaction of secret values from a whole record.

pub use vak_core::record::*;

use crate::secrets::Scrubber;

/// The most bytes JSON spends on one byte of a tool's text: a control character is written
/// `\u00XX`. (A byte of stdout that is not UTF-8 becomes U+FFFD, three bytes.)
pub const JSON_ESCAPE_FACTOR: u64 = 6;

/// Bytes of a record besides what the tool, the model and the capabilities put in it: ids,
/// digests, stage reports, limits, usage, outcome and projection structure, signature.
pub const RECORD_FRAME_BYTES: u64 = 64 << 10;

/// The largest record (serialized as JSON) of a call that ran under `limits`, without its
/// receipts, approvals and child runs: each part the tool controls has its own cap, and each
/// byte of it costs at most [`JSON_ESCAPE_FACTOR`] bytes of JSON:
///
/// - the arguments as proposed: `proposal::MAX_ARGUMENT_BYTES` (JSON already);
/// - the result, at most `limits.result_bytes`, counted four times: as returned, its evidence
///   items again with the host's verdicts and diagnostics (which quote the items' references),
///   and the projection that renders its document;
/// - the tool's error: `result::MAX_TOOL_ERROR_CODE_BYTES` and
///   `result::MAX_TOOL_ERROR_MESSAGE_BYTES` (a longer message is cut, its size and digest kept);
/// - log lines: `capabilities::log::MAX_LINES` of `MAX_LINE_BYTES`;
/// - stdout and stderr: `dispatch::state::MAX_CAPTURE_BYTES` each.
///
/// Receipts (at most `capabilities::MAX_RECEIPTS_PER_CALL`, each bounded by its capability's
/// own limits) and child runs (each a record within this bound) come on top.
pub fn max_record_bytes(limits: &Limits) -> u64 {
    let text = |n: u64| n.saturating_mul(JSON_ESCAPE_FACTOR);
    let log_lines = crate::capabilities::log::MAX_LINES as u64;
    let line = crate::capabilities::log::MAX_LINE_BYTES as u64;
    RECORD_FRAME_BYTES
        + crate::proposal::MAX_ARGUMENT_BYTES as u64
        + text(limits.result_bytes).saturating_mul(4)
        + text(
            (crate::result::MAX_TOOL_ERROR_CODE_BYTES + crate::result::MAX_TOOL_ERROR_MESSAGE_BYTES)
                as u64,
        )
        + log_lines * (text(line) + 64)
        + 2 * text(crate::dispatch::state::MAX_CAPTURE_BYTES as u64)
}

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
