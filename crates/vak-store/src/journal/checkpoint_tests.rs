//! The journal signing checkpoints instead of entries (`Journal::sign_checkpoints`).

use super::tests::{LIMITS, key};
use super::*;
use rusqlite::params;

/// Calls 1 to `n` appended the way a host appends them (a `started` entry, then the record),
/// unsigned under checkpoints; the records as the callers got them back.
fn calls(j: &Journal, n: u32) -> Vec<CallRecord> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    (1..=n)
        .map(|i| {
            let mut r = CallRecord::new(format!("call_{i}"), "t".into(), "api".into(), "{}");
            r.limits = Some(LIMITS);
            let mut s = Started::of(&r, "grant".into(), LIMITS);
            rt.block_on(j.append_started(&mut s, &key())).unwrap();
            assert!(
                s.signature.is_none(),
                "a started entry is not signed on the call path"
            );
            rt.block_on(j.append_signing(&mut r, &key())).unwrap();
            r
        })
        .collect()
}

/// Entries written unsigned are signed by the indexer's checkpoints: the records come back
/// unsigned, `show` checks each through its checkpoint, and the walk verifies every chain
/// against the host's key (and not against another).
#[test]
fn checkpoints_sign_what_the_call_path_left_unsigned() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let j = Journal::open(&path, Durability::Committed).unwrap();
    j.sign_checkpoints(key());
    let records = calls(&j, 5);
    assert!(records.iter().all(|r| r.signature.is_none()));
    for r in &records {
        let shown = j.show(&r.call_id).unwrap();
        assert_eq!(shown.len(), 1);
        assert_eq!(shown[0].check, Ok(()), "{}", r.call_id);
        assert!(shown[0].text.contains("\"signature\":null"));
    }
    let v = j.verify(Some(&key().public_hex())).unwrap();
    assert_eq!((v.entries, v.records, v.started), (10, 5, 5));
    assert_eq!((v.first_bad, v.unsigned), (None, vec![]));
    let other = HostKey::from_seed_hex(&"08".repeat(32)).unwrap();
    let (_, why) = j
        .verify(Some(&other.public_hex()))
        .unwrap()
        .first_bad
        .unwrap();
    assert!(why.contains("its checkpoint's signature"), "{why}");
    drop(j);

    // Reopened, it still verifies; the checkpoints are in the database.
    let j = Journal::open(&path, Durability::Committed).unwrap();
    let v = j.verify(Some(&key().public_hex())).unwrap();
    assert_eq!((v.entries, v.first_bad, v.unsigned), (10, None, vec![]));
    let conn = rusqlite::Connection::open(&path).unwrap();
    let count: i64 = conn
        .query_row("SELECT count(*) FROM checkpoints", [], |r| r.get(0))
        .unwrap();
    assert!(count >= 1);
}

/// An entry rewritten in the database with its chain hashed again (which the chain alone does
/// not show, and which an unsigned entry cannot show) is named by the walk and by `show`.
#[test]
fn an_unsigned_entry_rewritten_with_its_chain_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let j = Journal::open(&path, Durability::Committed).unwrap();
    j.sign_checkpoints(key());
    calls(&j, 3);
    j.verify(None).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let rows: Vec<(i64, String, i64, String)> = conn
        .prepare("SELECT seq, chain, chain_seq, record FROM records ORDER BY chain_seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut prev = chain::GENESIS.to_string();
    for (seq, chain_id, chain_seq, text) in rows {
        // Call 2's `started` entry names another grant.
        let text = if chain_seq == 3 {
            text.replace("\"grant\"", "\"other\"")
        } else {
            text
        };
        let hash = chain::entry_hash(&prev, Some(&chain_id), chain_seq, &text);
        conn.execute(
            "UPDATE records SET record = ?1, prev_hash = ?2, hash = ?3 WHERE seq = ?4",
            params![text, prev, hash, seq],
        )
        .unwrap();
        prev = hash;
    }
    drop(conn);
    let (_, why) = j.verify(None).unwrap().first_bad.expect("named");
    assert!(why.contains("signs other entries"), "{why}");
    let shown = j.show("call_2").unwrap();
    assert!(
        shown[0]
            .check
            .as_ref()
            .unwrap_err()
            .contains("signs other entries"),
        "{:?}",
        shown[0].check
    );
}

/// Entries no checkpoint covers (a process that wrote unsigned and died before its indexer
/// signed them, here one that never signed) are reported unsigned, not verified and not bad;
/// `show` says why.
#[test]
fn entries_no_checkpoint_covers_are_reported_unsigned() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let j = Journal::open(&path, Durability::Committed).unwrap();
    let mut r = CallRecord::new("call_1".into(), "t".into(), "api".into(), "{}");
    r.signature = None;
    j.append(&r).unwrap();
    let v = j.verify(None).unwrap();
    assert_eq!(v.first_bad, None);
    assert_eq!(
        (v.unsigned.len(), v.unsigned[0].from, v.unsigned[0].to),
        (1, 1, 1)
    );
    let shown = j.show("call_1").unwrap();
    assert_eq!(
        shown[0].check,
        Err("it is unsigned, and no checkpoint of its chain covers it".into())
    );
}
