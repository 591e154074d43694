use super::index::MAX_BEHIND;
use super::log::{LOG_FILE_BYTES, LOG_RESET_BYTES, chain_paths, frame, frames, legacy_paths};
use super::*;
use crate::record::Limits;
use std::sync::Arc;
use std::time::Duration;

pub(super) fn key() -> Arc<HostKey> {
    Arc::new(HostKey::from_seed_hex(&"07".repeat(32)).unwrap())
}

fn record(n: u32) -> CallRecord {
    let mut r = CallRecord::new(format!("call_{n}"), "t".into(), "api".into(), "{}");
    key().sign(&mut r);
    r
}

pub(super) const LIMITS: Limits = Limits {
    fuel: 1000,
    memory_bytes: 1 << 20,
    wall_time_ms: 100,
    result_bytes: 1000,
};

/// Append the `started` entry of call `n` (signed) and wait for it.
fn start(j: &Journal, n: u32) -> Entry {
    let mut r = record(n);
    r.limits = Some(LIMITS);
    let mut s = Started::of(&r, "grant".into(), LIMITS);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(j.append_started(&mut s, &key())).unwrap()
}

/// The final record of call `n`, which ran (it has limits).
fn finished(n: u32) -> CallRecord {
    let mut r = record(n);
    r.limits = Some(LIMITS);
    key().sign(&mut r);
    r
}

/// A journal opened at `path` with records 1 to 3 appended.
fn with_three(path: &Path) -> Journal {
    let j = Journal::open(path, Durability::Committed).unwrap();
    for n in 1..=3 {
        j.append(&record(n)).unwrap();
    }
    j
}

/// A record whose JSON text is `text`, as the log holds it.
fn text(n: u32) -> String {
    serde_json::to_string(&record(n)).unwrap()
}

#[test]
fn concurrent_appends_keep_one_valid_chain() {
    let dir = tempfile::tempdir().unwrap();
    let j = Arc::new(Journal::open(&dir.path().join("j.sqlite"), Durability::Committed).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let j = j.clone();
            std::thread::spawn(move || {
                (0..25).for_each(|i| drop(j.append(&record(t * 100 + i)).unwrap()))
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let v = j.verify(None).unwrap();
    assert_eq!((v.entries, v.records, v.first_bad), (100, 100, None));
    assert_eq!(v.heads.len(), 1);
    assert_eq!(v.heads[0].seq, 100);
    let chain = j.chain().expect("a chain of its own");
    assert_eq!(v.heads[0].node.as_deref(), Some(chain.as_str()));
    let key = key().public_hex();
    assert_eq!(j.verify(Some(&key)).unwrap().first_bad, None);
    let other = "11".repeat(32);
    assert!(
        j.verify(Some(&other)).unwrap().first_bad.is_some(),
        "a foreign key is named"
    );
    // Reopened by the next process, the chain it left is taken and goes on from where it was.
    drop(j);
    let j = Journal::open(&dir.path().join("j.sqlite"), Durability::Synced).unwrap();
    let entry = j.append(&record(999)).unwrap();
    assert_eq!(entry.node, Some((chain, 101)));
}

/// Records appended at once are signed per commit: at least one commit held several, each
/// of those records carries a batch signature that verifies alone, and what the journal
/// stored is exactly the record the caller got back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_committed_together_are_signed_together() {
    // Synced, the writer thread commits every record; committed, a caller that finds the
    // writer idle commits its own, and the others queue for the thread. The test holds the
    // writer until all 64 are queued, so they share commits however the threads are
    // scheduled (left to chance, a slow machine committed all 64 one by one).
    for durability in [Durability::Synced, Durability::Committed] {
        committed_together_signed_together(durability).await;
    }
}

async fn committed_together_signed_together(durability: Durability) {
    let dir = tempfile::tempdir().unwrap();
    let j = Arc::new(Journal::open(&dir.path().join("j.sqlite"), durability).unwrap());
    let key = key();
    let held = j.state.lock().unwrap();
    let appends: Vec<_> = (0..64)
        .map(|n| {
            let (j, key) = (j.clone(), key.clone());
            tokio::spawn(async move {
                let mut r = CallRecord::new(format!("call_{n}"), "t".into(), "api".into(), "{}");
                let entry = j.append_signing(&mut r, &key).await.unwrap();
                (r, entry)
            })
        })
        .collect();
    // The tasks run on the runtime's workers; this thread waits without awaiting.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while j.queued.load(Ordering::Acquire) < 64 {
        assert!(std::time::Instant::now() < deadline, "64 appends queued");
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(held);
    let mut batched = 0;
    for done in futures::future::join_all(appends).await {
        let (r, _entry) = done.unwrap();
        let sig = r.signature.as_ref().expect("signed");
        if sig.algorithm == crate::signing::BATCH_ALGORITHM {
            batched += 1;
        }
        assert_eq!(
            crate::signing::verify(&r, Some(&key.public_hex())),
            Ok(key.public_hex())
        );
        let stored = j.show(&r.call_id).unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].text, serde_json::to_string(&r).unwrap());
        assert_eq!(stored[0].check, Ok(()));
    }
    let stats = j.commit_stats();
    assert!(
        stats.commits < 64 && batched > 0,
        "64 appends at once shared commits ({stats:?}), {batched} signed in a batch"
    );
    let v = j.verify(Some(&key.public_hex())).unwrap();
    assert_eq!((v.entries, v.first_bad), (64, None));
}

/// The indexer's batches keep SQLite's WAL bounded by its own automatic checkpoints, off
/// the callers' path: these 6,000 records of 3 KB, one at a time, would grow a WAL that is
/// never checkpointed to 107 MB. The log is emptied as the indexer catches up.
#[test]
fn the_wal_and_the_log_stay_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let j = Journal::open(&path, Durability::Committed).unwrap();
    let key = key();
    let mut r = record(0);
    r.arguments = Some(serde_json::json!({ "text": "x".repeat(3000) }));
    key.sign(&mut r);
    let wal = dir.path().join("j.sqlite-wal");
    j.append(&r).unwrap();
    let logs = chain_paths(&path, &j.chain().expect("its chain"));
    let (mut largest, mut longest, mut files) = (0, 0, 0);
    for n in 1..6000 {
        r.call_id = format!("call_{n}");
        key.sign(&mut r);
        j.append(&r).unwrap();
        largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
        let held = j.state.lock().unwrap().log.as_ref().map_or(0, |l| l.len());
        longest = longest.max(held);
        let size: u64 = logs
            .iter()
            .map(|l| std::fs::metadata(l).map(|m| m.len()).unwrap_or(0))
            .sum();
        files = files.max(size);
    }
    // SQLite checkpoints at 1,000 pages, after the commit that crosses it: one batch of
    // at most INDEX_BATCH records of 3 KB (about 800 pages) on top.
    let bound = 2000 * (4096 + 24);
    assert!(
        largest <= bound,
        "the WAL reached {largest} bytes (bound {bound})"
    );
    // What is not yet indexed is at most MAX_BEHIND entries (the writer waits for the indexer
    // there), on top of a file not yet emptied.
    let log_bound = 2 * LOG_RESET_BYTES + (MAX_BEHIND as u64) * 4096;
    assert!(
        longest < log_bound,
        "the log held {longest} bytes: it was not emptied as the indexer went"
    );
    assert!(
        files < 2 * LOG_FILE_BYTES + (MAX_BEHIND as u64) * 4096,
        "the log's files grew to {files} bytes"
    );
    let v = j.verify(None).unwrap();
    assert_eq!((v.entries, v.first_bad), (6000, None));
}

/// What a process that stopped before indexing leaves: entries in its chain's log and not in
/// the database. The next opening indexes them in the chain, skips frames already indexed, and
/// drops an incomplete last frame (a write cut short); the next append takes the chain over.
#[test]
fn the_next_opening_indexes_what_a_gone_process_left() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let j = with_three(&path);
    let chain = j.chain().unwrap();
    drop(j);
    let [log, other] = chain_paths(&path, &chain);
    for file in [&log, &other] {
        let bytes = std::fs::read(file).unwrap();
        assert_eq!(bytes.len() as u64, LOG_FILE_BYTES, "made ready in full");
        assert!(frames(&bytes).1.is_empty(), "emptied on close");
    }
    let mut bytes = Vec::new();
    frame(&mut bytes, 2, 3, &text(3)); // indexed already
    frame(&mut bytes, 2, 5, &text(5));
    frame(&mut bytes, 2, 6, &text(6));
    // The other file, written before the first was started again.
    let mut older = Vec::new();
    frame(&mut older, 1, 4, &text(4));
    std::fs::write(&other, &older).unwrap();
    let mut torn = Vec::new();
    frame(&mut torn, 2, 7, &text(7));
    bytes.extend_from_slice(&torn[..torn.len() / 2]);
    std::fs::write(&log, &bytes).unwrap();

    let j = Journal::open(&path, Durability::Committed).unwrap();
    let v = j.verify(None).unwrap();
    assert_eq!((v.entries, v.first_bad), (6, None));
    assert_eq!(j.show("call_5").unwrap().len(), 1);
    assert!(
        j.show("call_7").unwrap().is_empty(),
        "the torn frame is dropped"
    );
    for file in [&log, &other] {
        let bytes = std::fs::read(file).unwrap();
        assert!(frames(&bytes).1.is_empty(), "emptied once indexed");
    }
    let entry = j.append(&record(8)).unwrap();
    assert_eq!(entry.node, Some((chain.clone(), 7)), "the chain taken over");
    drop(j);

    // A frame that does not continue the chain: the log is left as it is (and named in the
    // log), the journal opens, and the next writer makes a new chain rather than take it.
    let mut gap = Vec::new();
    frame(&mut gap, 1, 9, &text(9));
    std::fs::write(&log, &gap).unwrap();
    let j = Journal::open(&path, Durability::Committed).unwrap();
    assert!(j.show("call_9").unwrap().is_empty());
    let entry = j.append(&record(10)).unwrap();
    assert_ne!(
        entry.node.as_ref().map(|n| n.0.as_str()),
        Some(chain.as_str())
    );
    assert_eq!(entry.node.map(|n| n.1), Some(1));
    let v = j.verify(None).unwrap();
    assert_eq!((v.entries, v.first_bad, v.heads.len()), (8, None, 2));
}

/// A log file written again from its start holds its new lap's frames, then an older lap's:
/// a reading takes only the first lap, and stops at zeros and at a frame cut short.
#[test]
fn a_reading_takes_the_first_lap_only() {
    let mut bytes = Vec::new();
    frame(&mut bytes, 5, 10, &text(10));
    frame(&mut bytes, 5, 11, &text(11));
    let ours = bytes.len();
    frame(&mut bytes, 4, 2, &text(2)); // an older lap's frame, whole after ours
    let (lap, read) = frames(&bytes);
    assert_eq!(lap, Some(5));
    assert_eq!(read.iter().map(|f| f.0).collect::<Vec<_>>(), [10, 11]);
    let mut zeros = bytes[..ours].to_vec();
    zeros.extend_from_slice(&[0u8; 64]);
    assert_eq!(frames(&zeros).1.len(), 2);
    let mut cut = bytes[..ours].to_vec();
    let mut next = Vec::new();
    frame(&mut next, 5, 12, &text(12));
    cut.extend_from_slice(&next[..next.len() - 1]);
    assert_eq!(frames(&cut).1.len(), 2, "a frame cut short is not read");
    assert_eq!(frames(&[0u8; 64]), (None, Vec::new()));
}

/// Two journals on one path (two processes, in practice) append at once, neither waiting for
/// the other: each to a chain of its own, tied together in one database, which a third reads
/// and verifies whole, merged by time.
#[test]
fn two_writers_append_at_once_to_chains_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let first = Arc::new(Journal::open(&path, Durability::Committed).unwrap());
    let second = Arc::new(Journal::open(&path, Durability::Committed).unwrap());
    // Each takes its chain at its first append.
    first.append(&record(0)).unwrap();
    second.append(&record(1000)).unwrap();
    // While the first's writer is held, and the database's write lock with it (as another
    // process's indexer holds it while it inserts), the second appends all it has: an append
    // waits for neither. (Were it to, it would wait until the hold ends: the bound fails it.)
    let held = first.state.lock().unwrap();
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute_batch("BEGIN IMMEDIATE").unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    let writer = {
        let second = second.clone();
        std::thread::spawn(move || {
            for i in 1..200 {
                second.append(&record(1000 + i)).unwrap();
            }
            done.send(()).unwrap();
        })
    };
    assert!(
        finished.recv_timeout(Duration::from_secs(30)).is_ok(),
        "the second writer waited for the first, or for the database"
    );
    db.execute_batch("ROLLBACK").unwrap();
    drop(held);
    writer.join().unwrap();
    // Then both at once.
    let threads: Vec<_> = [first.clone(), second.clone()]
        .into_iter()
        .enumerate()
        .map(|(t, j)| {
            std::thread::spawn(move || {
                for i in 200..400 {
                    j.append(&record(t as u32 * 1000 + i)).unwrap();
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let (a, b) = (first.chain().unwrap(), second.chain().unwrap());
    assert_ne!(a, b, "a chain each");
    // Read by a third, once both have indexed (each reads its own caught up).
    first.verify(None).unwrap();
    second.verify(None).unwrap();
    let reader = Journal::open(&path, Durability::Committed).unwrap();
    let v = reader.verify(None).unwrap();
    assert_eq!((v.entries, v.first_bad), (601, None));
    let mut heads: Vec<_> = v.heads.iter().map(|h| (h.node.clone(), h.seq)).collect();
    heads.sort();
    let mut expected = vec![(Some(a), 201), (Some(b), 400)];
    expected.sort();
    assert_eq!(heads, expected);
    let listed = reader
        .list(&Filter {
            limit: Some(1000),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(listed.len(), 601);
    assert!(
        listed
            .windows(2)
            .all(|w| w[0].received_at >= w[1].received_at),
        "merged by time, newest first"
    );
    assert_eq!(reader.chain(), None, "a reader takes no chain");
}

/// Write-ahead: a call's `started` entry, then its record, in one chain. A `started` entry
/// without a record is `running` while the process that wrote it holds its chain, and
/// `interrupted` once it is gone, also after another process has taken the chain over; the
/// chain verifies either way, and counts them.
#[test]
fn a_started_call_without_its_record_is_running_then_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let writer = Journal::open(&path, Durability::Committed).unwrap();
    start(&writer, 1);
    writer.append(&finished(1)).unwrap();
    start(&writer, 2); // dies before its record
    let chain = writer.chain().unwrap();
    writer.verify(None).unwrap(); // indexed
    let reader = Journal::open(&path, Durability::Committed).unwrap();
    let v = reader.verify(None).unwrap();
    assert_eq!(v.first_bad, None);
    assert_eq!((v.entries, v.records, v.started), (3, 1, 2));
    assert_eq!(v.running.len(), 1);
    assert_eq!(v.running[0].call_id, "call_2");
    assert!(v.interrupted.is_empty());
    let listed = reader.list(&Filter::default()).unwrap();
    let status = |listed: &[Listed], id: &str| {
        listed
            .iter()
            .find(|l| l.call_id == id)
            .map(|l| l.status.clone())
    };
    assert_eq!(listed.len(), 2, "one line per call: {listed:?}");
    assert_eq!(status(&listed, "call_1").as_deref(), Some("refused"));
    assert_eq!(status(&listed, "call_2").as_deref(), Some("running"));
    drop(writer);

    let v = reader.verify(None).unwrap();
    assert_eq!(v.interrupted.len(), 1, "{v:?}");
    assert_eq!(v.interrupted[0].chain.as_deref(), Some(chain.as_str()));
    assert!(v.running.is_empty());
    let interrupted = Filter {
        status: Some("interrupted".into()),
        ..Default::default()
    };
    let listed = reader.list(&interrupted).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].call_id, "call_2");
    let shown = reader.show("call_2").unwrap();
    assert_eq!(shown.len(), 1);
    assert_eq!(
        (shown[0].kind, shown[0].status.as_str(), &shown[0].check),
        (Kind::Started, "interrupted", &Ok(()))
    );
    let shown = reader.show("call_1").unwrap();
    assert_eq!((shown.len(), shown[0].kind), (1, Kind::Record));

    // Another process takes the chain over: call 2 stays interrupted.
    let next = Journal::open(&path, Durability::Committed).unwrap();
    start(&next, 3);
    assert_eq!(next.chain().as_deref(), Some(chain.as_str()));
    let v = next.verify(None).unwrap();
    assert_eq!(v.first_bad, None);
    assert_eq!(
        v.interrupted
            .iter()
            .map(|u| u.call_id.as_str())
            .collect::<Vec<_>>(),
        ["call_2"]
    );
    assert_eq!(
        v.running
            .iter()
            .map(|u| u.call_id.as_str())
            .collect::<Vec<_>>(),
        ["call_3"]
    );
}

/// Once a chain holds `started` entries, a record of a call that ran (it has limits) without
/// its `started` entry before it is named by the walk; so is a record of another call than the
/// one its `started` entry names.
#[test]
fn a_record_that_ran_without_its_started_entry_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let j = Journal::open(&path, Durability::Committed).unwrap();
    start(&j, 1);
    j.append(&finished(1)).unwrap();
    j.append(&finished(2)).unwrap();
    let v = j.verify(None).unwrap();
    let (_, why) = v.first_bad.expect("named");
    assert!(
        why.contains("call_2 ran") && why.contains("entry 3"),
        "{why}"
    );

    let j2path = dir.path().join("k.sqlite");
    let j2 = Journal::open(&j2path, Durability::Committed).unwrap();
    start(&j2, 1);
    let mut other = finished(1);
    other.tool = "u".into();
    key().sign(&mut other);
    j2.append(&other).unwrap();
    let (_, why) = j2.verify(None).unwrap().first_bad.expect("named");
    assert!(why.contains("not of the call"), "{why}");
}

/// `show` checks what it returns: an entry changed in the database (its text, or its text and
/// hash made again) is shown with why it does not check out.
#[test]
fn show_names_a_tampered_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let j = with_three(&path);
    j.verify(None).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE records SET record = replace(record, '\"tool\":\"t\"', '\"tool\":\"x\"') WHERE call_id = 'call_2'",
        [],
    )
    .unwrap();
    let shown = j.show("call_2").unwrap();
    assert_eq!(
        shown[0].check,
        Err("its content does not match its hash".into())
    );
    // Its hash made again over the new text: the link from the entry after it breaks.
    let (chain, prev, text): (String, String, String) = conn
        .query_row(
            "SELECT chain, prev_hash, record FROM records WHERE call_id = 'call_2'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    let hash = chain::entry_hash(&prev, Some(&chain), 2, &text);
    conn.execute(
        "UPDATE records SET hash = ?1 WHERE call_id = 'call_2'",
        [&hash],
    )
    .unwrap();
    let shown = j.show("call_2").unwrap();
    let why = shown[0].check.clone().unwrap_err();
    assert!(
        why.contains("signature") || why.contains("next entry"),
        "{why}"
    );
    assert_eq!(j.show("call_1").unwrap()[0].check, Ok(()));
    assert_eq!(
        j.show("call_3").unwrap()[0].check,
        Err("its link to the previous entry is broken".into())
    );
}

/// A provider's call id (a model's choice) may name several calls: `show` returns every one.
#[test]
fn a_provider_call_id_shows_every_call_that_has_it() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::open(&dir.path().join("j.sqlite"), Durability::Committed).unwrap();
    for n in 1..=3 {
        let mut r = record(n);
        r.provider_call_id = Some(if n < 3 { "toolu_same" } else { "toolu_other" }.into());
        key().sign(&mut r);
        j.append(&r).unwrap();
    }
    let shown = j.show("toolu_same").unwrap();
    assert_eq!(
        shown.iter().map(|s| s.call_id.as_str()).collect::<Vec<_>>(),
        ["call_1", "call_2"]
    );
    assert_eq!(j.show("call_3").unwrap().len(), 1);
    assert_eq!(j.show("toolu_other").unwrap()[0].call_id, "call_3");
}

/// A journal written before chains had ids (one chain, its hashes without an id, a log of
/// its own) opens as it is: its rows become the legacy chain, what its log held is indexed
/// and the log removed, and new entries go to a chain of their own; both verify.
#[test]
fn a_journal_from_before_chains_opens_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE records (seq INTEGER PRIMARY KEY, call_id TEXT NOT NULL, tool TEXT NOT NULL,
                 status TEXT NOT NULL, stage TEXT NOT NULL, principal TEXT, received_at TEXT NOT NULL,
                 record TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL);
             CREATE INDEX records_call ON records(call_id);",
        )
        .unwrap();
        let mut prev = chain::GENESIS.to_string();
        for n in 1..=3 {
            let text = text(n);
            let hash = vak_core::digest::sha256_hex(format!("{prev}\n{n}\n{text}").as_bytes());
            conn.execute(
                "INSERT INTO records VALUES (?1, ?2, 't', 'refused', 'proposal', NULL, ?3, ?4, ?5, ?6)",
                rusqlite::params![n, format!("call_{n}"), record(n).received_at, text, prev, hash],
            )
            .unwrap();
            prev = hash;
        }
    }
    let [log, log2] = legacy_paths(&path);
    let mut bytes = Vec::new();
    frame(&mut bytes, 1, 4, &text(4));
    std::fs::write(&log, &bytes).unwrap();
    std::fs::write(&log2, []).unwrap();

    let j = Journal::open(&path, Durability::Committed).unwrap();
    assert!(!log.exists() && !log2.exists(), "the legacy log is removed");
    let v = j.verify(None).unwrap();
    assert_eq!((v.entries, v.first_bad), (4, None));
    assert_eq!(v.heads.len(), 1);
    assert_eq!((v.heads[0].node.clone(), v.heads[0].seq), (None, 4));
    assert_eq!(j.show("call_2").unwrap()[0].check, Ok(()));
    let entry = j.append(&record(5)).unwrap();
    assert_eq!(entry.node.map(|n| n.1), Some(1), "a new chain");
    let v = j.verify(None).unwrap();
    assert_eq!((v.entries, v.first_bad, v.heads.len()), (5, None, 2));
    // A vak from before chains, still running, cannot write a second chain with the legacy
    // chain's places: its insert (no chain) is refused.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let refused = conn.execute(
        "INSERT INTO records (seq, call_id, tool, status, stage, principal, received_at, record, prev_hash, hash)
         VALUES (100, 'x', 't', 'refused', 'proposal', NULL, 'now', '{}', 'p', 'h')",
        [],
    );
    assert!(refused.is_err());
}

/// A journal of schema 2 (no session column) opens at schema 3 with each entry's session read
/// from its JSON; its calls are found by session, tool and call-id text, and paged newest first
/// without a gap or an overlap.
#[test]
fn a_journal_from_before_sessions_pages_and_filters_by_session() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    {
        let j = Journal::open(&path, Durability::Committed).unwrap();
        for n in 1..=5 {
            let mut r = record(n);
            r.session_id = format!("session_{}", n % 2);
            j.append(&r).unwrap();
        }
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP INDEX records_session; DROP INDEX records_tool;
         ALTER TABLE records DROP COLUMN session; PRAGMA user_version = 2;",
    )
    .unwrap();
    drop(conn);
    let j = Journal::open(&path, Durability::Committed).unwrap();
    let ids = |p: &Paged| p.rows.iter().map(|r| r.call_id.clone()).collect::<Vec<_>>();
    let odd = Page {
        session: Some("session_1".into()),
        ..Page::default()
    };
    let found = j.page(&Filter::default(), &odd).unwrap();
    assert_eq!(ids(&found), ["call_5", "call_3", "call_1"]);
    let text = Page {
        text: Some("ll_4".into()),
        ..Page::default()
    };
    assert_eq!(ids(&j.page(&Filter::default(), &text).unwrap()), ["call_4"]);
    let two = Filter {
        limit: Some(2),
        ..Filter::default()
    };
    let mut seen = Vec::new();
    let mut at = Page::default();
    loop {
        let p = j.page(&two, &at).unwrap();
        seen.extend(ids(&p));
        match p.next {
            Some(next) => at.before = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, ["call_5", "call_4", "call_3", "call_2", "call_1"]);
}

/// The journal is as private as the secrets: its folder 0700, its files 0600; a journal that
/// group or others can read is reported with the `chmod` that fixes it.
#[test]
fn the_journal_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let path = state.join("journal.sqlite");
    let j = Journal::open(&path, Durability::Committed).unwrap();
    j.append(&record(1)).unwrap();
    j.verify(None).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&log::chains_dir(&path)), 0o700);
    let mut files = vec![path.clone()];
    for suffix in ["-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        files.push(PathBuf::from(name));
    }
    files.extend(chain_paths(&path, &j.chain().unwrap()));
    for f in &files {
        assert_eq!(mode(f), 0o600, "{}", f.display());
    }
    assert!(j.exposed().is_empty());
    drop(j);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    let j = Journal::open(&path, Durability::Committed).unwrap();
    let exposed: Vec<_> = j.exposed().to_vec();
    assert!(exposed.contains(&(path.clone(), 0o644)), "{exposed:?}");
    assert!(exposed.contains(&(state.clone(), 0o755)), "{exposed:?}");
    let fix = chmod_fix(&exposed);
    assert!(
        fix.contains(&format!("chmod 700 {}", state.display()))
            && fix.contains(&format!("chmod 600 {}", path.display())),
        "{fix}"
    );
}
