//! The walk of every chain, entry by entry: the one check both the local journal and the shared
//! store run for `verify`.

use super::{
    ChainEntry, Checkpoint, GENESIS, Head, Kind, MAX_CHECKPOINT_RUN, Stored, Unfinished, Unsigned,
    Verification, VerifyError,
};
use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;

/// The chain being walked.
struct Current {
    chain: String,
    legacy: bool,
    seq: i64,
    hash: String,
    gseq: i64,
    /// Calls started and not yet finished in this chain: tool, arguments digest, place.
    open: HashMap<String, (String, String, i64, i64)>,
    /// Whether the chain has had a `started` entry: from then on, every call that ran needs one.
    write_ahead: bool,
    /// Runs of entries written unsigned and not yet covered by a checkpoint (first, last).
    pending: Vec<(i64, i64)>,
    /// The hashes of the chain's last entries, up to [`MAX_CHECKPOINT_RUN`] (in a walk with
    /// checkpoints): what a checkpoint's root is computed from.
    recent: VecDeque<String>,
}

/// The walk of every chain, one entry at a time in (chain, chain_seq) order: each entry's place
/// (gapless from 1), its link to the one before, its commit order after it, its hash, its text,
/// its signature; and the write-ahead rule: once a chain holds `started` entries, a record of a
/// call that ran (it has limits) follows its call's `started` entry, for the same tool and
/// arguments. `E` reads the entries' text.
///
/// Every entry must carry its own signature, unless the walk takes checkpoints
/// ([`ChainCheck::checkpointed`], each handed to [`ChainCheck::checkpoint`] in turn): then an
/// entry written unsigned checks out once a checkpoint of its chain covers it, the Merkle root of
/// the hashes the walk found for its run being the one it signs; a checkpoint that signs another
/// root, names no run of the chain, or names an entry the chain does not hold is bad; unsigned
/// runs no checkpoint covers are [`Verification::unsigned`]. The walk holds no more than one
/// chain's last [`MAX_CHECKPOINT_RUN`] hashes, however many entries and checkpoints it reads.
pub struct ChainCheck<E> {
    pub entries: u64,
    pub records: u64,
    pub started: u64,
    pub heads: Vec<Head>,
    pub unfinished: Vec<Unfinished>,
    current: Option<Current>,
    /// Whether entries written unsigned may be covered by checkpoints; else every entry must be
    /// signed by itself.
    checkpointed: bool,
    unsigned: Vec<Unsigned>,
    entry: PhantomData<fn() -> E>,
}

impl<E> Default for ChainCheck<E> {
    fn default() -> Self {
        ChainCheck {
            entries: 0,
            records: 0,
            started: 0,
            heads: Vec::new(),
            unfinished: Vec::new(),
            current: None,
            checkpointed: false,
            unsigned: Vec::new(),
            entry: PhantomData,
        }
    }
}

impl<E: ChainEntry> ChainCheck<E> {
    /// A walk that takes entries written unsigned when checkpoints cover them. The caller hands
    /// it every checkpoint in the order of (chain, last entry), each right after the last entry
    /// at or before that place ([`ChainCheck::checkpoint`]), as a merge of the entries and the
    /// checkpoints, both sorted by chain and place, gives them.
    pub fn checkpointed() -> Self {
        ChainCheck {
            checkpointed: true,
            ..ChainCheck::default()
        }
    }

    /// Check `cp`, a checkpoint of the chain walked (its last entry the one just checked) or
    /// of an entry no chain holds; why it does not check out, if it does not.
    pub fn checkpoint(&mut self, cp: &Checkpoint, trusted: &[impl AsRef<str>]) -> Option<String> {
        self.check_checkpoint(cp, trusted)
            .err()
            .map(|why| format!("chain {}: {why}", cp.chain))
    }

    fn check_checkpoint(
        &mut self,
        cp: &Checkpoint,
        trusted: &[impl AsRef<str>],
    ) -> Result<(), String> {
        let current = match self.current.as_mut() {
            Some(c) if c.chain == cp.chain && !c.legacy && c.seq == cp.seq => c,
            _ => {
                return Err(format!(
                    "its checkpoint at entry {} signs an entry the chain does not hold: entries were cut off its end, or the chain removed",
                    cp.seq
                ));
            }
        };
        // Its run's hashes: the last `n` of the chain's, `n` as many as it covers (at most the
        // chain's length and MAX_CHECKPOINT_RUN, all kept; a checkpoint naming no run is
        // refused by its check).
        let skip = current.recent.len().saturating_sub(cp.run().unwrap_or(0));
        cp.check(
            current.recent.iter().skip(skip).map(String::as_str),
            trusted,
        )?;
        // The runs before its first entry stay unsigned; those from it on are covered.
        let chain = (!current.legacy).then(|| current.chain.clone());
        for (first, last) in std::mem::take(&mut current.pending) {
            if first < cp.from {
                self.unsigned.push(Unsigned {
                    chain: chain.clone(),
                    from: first,
                    to: last.min(cp.from - 1),
                });
            }
        }
        Ok(())
    }

    /// Check the next entry; why it does not check out (naming its chain and place), if it
    /// does not.
    pub fn next(&mut self, row: &Stored, trusted: &[impl AsRef<str>]) -> Option<String> {
        self.step(row, trusted)
            .err()
            .map(|why| format!("{}: {why}", row.place()))
    }

    fn step(&mut self, row: &Stored, trusted: &[impl AsRef<str>]) -> Result<(), String> {
        self.entries += 1;
        if self
            .current
            .as_ref()
            .is_none_or(|c| c.chain != row.chain || c.legacy != row.legacy)
        {
            self.close();
            self.current = Some(Current {
                chain: row.chain.clone(),
                legacy: row.legacy,
                seq: 0,
                hash: GENESIS.to_string(),
                gseq: 0,
                open: HashMap::new(),
                write_ahead: false,
                pending: Vec::new(),
                recent: VecDeque::new(),
            });
        }
        let Some(current) = self.current.as_mut() else {
            return Ok(());
        };
        if row.chain_seq != current.seq + 1 {
            return Err(format!("entry {} of its chain is missing", current.seq + 1));
        }
        if row.prev_hash != current.hash {
            return Err("its link to the previous entry is broken".into());
        }
        if row.seq <= current.gseq {
            return Err("committed before the entry it follows".into());
        }
        let entry: E = row.check_content()?;
        match entry.verify_signature(trusted) {
            Ok(_) => {}
            Err(VerifyError::Unsigned) if self.checkpointed => match current.pending.last_mut() {
                Some((_, last)) if *last + 1 == row.chain_seq => *last = row.chain_seq,
                _ => current.pending.push((row.chain_seq, row.chain_seq)),
            },
            Err(e) => return Err(format!("its signature: {e}")),
        }
        match entry.kind() {
            Kind::Started => {
                self.started += 1;
                current.write_ahead = true;
                let place = (
                    entry.tool().to_string(),
                    entry.arguments_digest().to_string(),
                    row.chain_seq,
                    row.seq,
                );
                if current
                    .open
                    .insert(entry.call_id().to_string(), place)
                    .is_some()
                {
                    return Err(format!(
                        "a second started entry of call {}",
                        entry.call_id()
                    ));
                }
            }
            Kind::Record => {
                self.records += 1;
                match current.open.remove(entry.call_id()) {
                    Some((tool, digest, ..))
                        if tool != entry.tool() || digest != entry.arguments_digest() =>
                    {
                        return Err(format!(
                            "the record of call {} is not of the call its started entry names (tool or arguments differ)",
                            entry.call_id()
                        ));
                    }
                    Some(_) => {}
                    None if current.write_ahead && entry.ran() => {
                        return Err(format!(
                            "call {} ran (its record has limits) without a started entry before it",
                            entry.call_id()
                        ));
                    }
                    None => {}
                }
            }
        }
        current.seq = row.chain_seq;
        current.hash = row.hash.clone();
        current.gseq = row.seq;
        if self.checkpointed {
            if current.recent.len() == MAX_CHECKPOINT_RUN {
                current.recent.pop_front();
            }
            current.recent.push_back(row.hash.clone());
        }
        Ok(())
    }

    /// End the chain walked: its head, and its calls still open.
    fn close(&mut self) {
        let Some(c) = self.current.take() else {
            return;
        };
        let chain = (!c.legacy).then(|| c.chain.clone());
        self.unsigned
            .extend(c.pending.iter().map(|&(from, to)| Unsigned {
                chain: chain.clone(),
                from,
                to,
            }));
        if c.seq > 0 {
            self.heads.push(Head {
                node: chain.clone(),
                seq: c.seq,
                hash: c.hash,
            });
        }
        let mut open: Vec<Unfinished> = c
            .open
            .into_iter()
            .map(|(call_id, (_, _, chain_seq, seq))| Unfinished {
                chain: chain.clone(),
                chain_seq,
                seq,
                call_id,
            })
            .collect();
        open.sort_by_key(|u| u.chain_seq);
        self.unfinished.extend(open);
    }

    /// Walk `entries` (sorted by chain and place) with `checkpoints` (sorted by chain and last
    /// entry) merged in, each checkpoint right after its last entry, calling `each` after every
    /// entry: the verdict, ended at the first entry or checkpoint that does not check out (a
    /// checkpoint is named at the global place of the entry before it). Neither list is held in
    /// memory; an error reading either ends the walk with it.
    pub fn walk<Er>(
        mut self,
        entries: impl IntoIterator<Item = Result<Stored, Er>>,
        checkpoints: impl IntoIterator<Item = Result<Checkpoint, Er>>,
        trusted: &[impl AsRef<str>],
        mut each: impl FnMut(),
    ) -> Result<Verification, Er> {
        let mut checkpoints = checkpoints.into_iter().peekable();
        let mut last = 0;
        for row in entries {
            let row = row?;
            if let Some(why) = self.next(&row, trusted) {
                return Ok(self.finish(Some((row.seq, why))));
            }
            each();
            last = row.seq;
            while let Some(cp) = checkpoints.next_if(|cp| {
                cp.as_ref().map_or(true, |cp| {
                    (cp.chain.as_str(), cp.seq) <= (row.chain.as_str(), row.chain_seq)
                })
            }) {
                if let Some(why) = self.checkpoint(&cp?, trusted) {
                    return Ok(self.finish(Some((row.seq, why))));
                }
            }
        }
        // What is left names entries beyond every chain's end.
        for cp in checkpoints {
            if let Some(why) = self.checkpoint(&cp?, trusted) {
                return Ok(self.finish(Some((last, why))));
            }
        }
        Ok(self.finish(None))
    }

    /// The walk's result, ended at `first_bad` if an entry did not check out.
    pub fn finish(mut self, first_bad: Option<(i64, String)>) -> Verification {
        self.close();
        Verification {
            entries: self.entries,
            records: self.records,
            started: self.started,
            first_bad,
            heads: self.heads,
            interrupted: self.unfinished,
            running: Vec::new(),
            unsigned: self.unsigned,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::{VerifyError, check_links, entry_hash};

    /// An entry as JSON: `{"started": bool, "call": id, "ran": bool}`, signed unless `"forged"`.
    struct Fake(serde_json::Value);

    impl ChainEntry for Fake {
        fn parse(text: &str) -> Result<Fake, serde_json::Error> {
            serde_json::from_str(text).map(Fake)
        }
        fn kind(&self) -> Kind {
            match self.0["started"].as_bool() {
                Some(true) => Kind::Started,
                _ => Kind::Record,
            }
        }
        fn call_id(&self) -> &str {
            self.0["call"].as_str().unwrap_or_default()
        }
        fn tool(&self) -> &str {
            "t"
        }
        fn arguments_digest(&self) -> &str {
            "d"
        }
        fn ran(&self) -> bool {
            self.0["ran"] == true
        }
        fn verify_signature(&self, _: &[impl AsRef<str>]) -> Result<String, VerifyError> {
            if self.0.get("unsigned").is_some() {
                return Err(VerifyError::Unsigned);
            }
            match self.0.get("forged") {
                Some(_) => Err(VerifyError::Mismatch),
                None => Ok("key".into()),
            }
        }
    }

    /// Chain `c` holding `texts`, hashed as written.
    fn chain(texts: &[&str]) -> Vec<Stored> {
        let mut prev = GENESIS.to_string();
        let mut rows = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            let seq = i as i64 + 1;
            let hash = entry_hash(&prev, Some("c"), seq, text);
            let call_id = Fake::parse(text).unwrap().call_id().to_string();
            rows.push(Stored {
                seq,
                chain: "c".into(),
                legacy: false,
                chain_seq: seq,
                kind: None,
                call_id,
                text: text.to_string(),
                prev_hash: std::mem::replace(&mut prev, hash.clone()),
                hash,
            });
        }
        rows
    }

    fn walk(rows: &[Stored]) -> Verification {
        let mut check = ChainCheck::<Fake>::default();
        let bad = rows
            .iter()
            .find_map(|r| check.next(r, &[] as &[&str]).map(|why| (r.seq, why)));
        check.finish(bad)
    }

    const STARTED: &str = r#"{"started":true,"call":"a"}"#;
    const RECORD: &str = r#"{"call":"a","ran":true}"#;
    const OTHER: &str = r#"{"call":"b","ran":true}"#;

    /// Each verdict names the entry's chain and place, with the same words for every journal.
    #[test]
    fn the_walk_names_the_first_entry_that_does_not_check_out() {
        let good = chain(&[STARTED, RECORD]);
        let v = walk(&good);
        assert_eq!(
            (v.entries, v.started, v.records, v.first_bad),
            (2, 1, 1, None)
        );
        assert_eq!(v.heads[0].seq, 2);

        let mut tampered = chain(&[STARTED, RECORD]);
        tampered[1].text = RECORD.replace("true", "false");
        let why = walk(&tampered).first_bad.unwrap().1;
        assert_eq!(why, "chain c entry 2: its content does not match its hash");

        let mut cut = chain(&[STARTED, RECORD]);
        cut.remove(0);
        let why = walk(&cut).first_bad.unwrap().1;
        assert_eq!(why, "chain c entry 2: entry 1 of its chain is missing");

        let why = walk(&chain(&[STARTED, RECORD, OTHER])).first_bad.unwrap().1;
        assert_eq!(
            why,
            "chain c entry 3: call b ran (its record has limits) without a started entry before it"
        );

        let forged = chain(&[r#"{"call":"a","forged":true}"#]);
        assert!(walk(&forged).first_bad.unwrap().1.ends_with(
            "its signature: the signature does not match the record: it was altered after \
             signing, or signed by another key"
        ));
        // Read alone, an entry's links are checked both ways.
        let rows = chain(&[STARTED, RECORD]);
        assert_eq!(
            check_links::<Fake>(&rows[0], Some(GENESIS), Some("x")),
            Err(
                "the next entry's link to it is broken: it was changed after the next was written"
                    .into()
            )
        );
        assert_eq!(
            check_links::<Fake>(&rows[1], Some(&rows[0].hash), None),
            Ok(())
        );
    }

    /// A started entry left open is reported as unfinished, in its chain.
    #[test]
    fn an_open_started_entry_is_unfinished() {
        let v = walk(&chain(&[STARTED]));
        assert_eq!(v.interrupted.len(), 1);
        assert_eq!(v.interrupted[0].call_id, "a");
        assert_eq!(v.interrupted[0].chain.as_deref(), Some("c"));
    }

    const U1: &str = r#"{"call":"a","unsigned":true}"#;
    const U2: &str = r#"{"call":"b","unsigned":true}"#;
    const U3: &str = r#"{"call":"c","unsigned":true}"#;

    /// A checkpoint of chain `c` over entries `from` to `seq` of `rows`, signed by a fixed key.
    fn checkpoint(rows: &[Stored], from: i64, seq: i64) -> Checkpoint {
        use ed25519_dalek::{Signer, SigningKey};
        let key = SigningKey::from_bytes(&[7; 32]);
        let run = &rows[from as usize - 1..seq as usize];
        let root = Checkpoint::root_of(run.iter().map(|r| r.hash.as_str())).unwrap();
        let at = "2026-12-07T00:00:00Z".to_string();
        let message = Checkpoint::message("c", from, seq, &root, &at);
        Checkpoint {
            chain: "c".into(),
            from,
            seq,
            root,
            at,
            public_key: hex::encode(key.verifying_key().as_bytes()),
            signature: hex::encode(key.sign(&message).to_bytes()),
        }
    }

    fn walk_with(rows: &[Stored], mut checkpoints: Vec<Checkpoint>) -> Verification {
        checkpoints.sort_by(|a, b| (&a.chain, a.seq).cmp(&(&b.chain, b.seq)));
        ChainCheck::<Fake>::checkpointed()
            .walk(
                rows.iter().cloned().map(Ok::<_, ()>),
                checkpoints.into_iter().map(Ok),
                &[] as &[&str],
                || {},
            )
            .unwrap()
    }

    /// Entries written unsigned check out under a checkpoint that signs their chain's hash; a
    /// run no checkpoint covers is reported unsigned, not verified; without checkpoints an
    /// unsigned entry is a bad one.
    #[test]
    fn checkpoints_cover_unsigned_entries() {
        let rows = chain(&[U1, U2, U3]);
        let v = walk_with(
            &rows,
            vec![checkpoint(&rows, 1, 2), checkpoint(&rows, 3, 3)],
        );
        assert_eq!((v.entries, &v.first_bad, &v.unsigned), (3, &None, &vec![]));

        // The last entry's checkpoint never came: it stays unsigned.
        let v = walk_with(&rows, vec![checkpoint(&rows, 1, 2)]);
        assert_eq!(v.first_bad, None);
        let tail = Unsigned {
            chain: Some("c".into()),
            from: 3,
            to: 3,
        };
        assert_eq!(v.unsigned, vec![tail]);

        // A checkpoint vouches only for its own run: entry 1, before it, is not covered.
        let v = walk_with(&rows, vec![checkpoint(&rows, 2, 3)]);
        assert_eq!(v.first_bad, None);
        assert_eq!((v.unsigned[0].from, v.unsigned[0].to), (1, 1));

        // Without checkpoints, each entry must carry its own signature.
        let why = walk(&rows).first_bad.unwrap().1;
        assert_eq!(
            why,
            "chain c entry 1: its signature: the record is not signed"
        );
    }

    /// An entry changed under a checkpoint (its chain rehashed to hide it), a forged checkpoint
    /// and a chain cut short after its checkpoint are bad.
    #[test]
    fn a_checkpoint_catches_what_the_hash_chain_alone_cannot() {
        let rows = chain(&[U1, U2, U3]);
        let signed = vec![checkpoint(&rows, 1, 3)];
        let rewritten = chain(&[U1, r#"{"call":"b","unsigned":true,"x":1}"#, U3]);
        let why = walk_with(&rewritten, signed.clone()).first_bad.unwrap().1;
        assert_eq!(
            why,
            "chain c: its checkpoint at entry 3 signs other entries: one from entry 1 on was \
             changed after it was signed"
        );
        // A checkpoint that names more entries than the chain has.
        let mut long = signed.clone();
        long[0].from = 0;
        let why = walk_with(&rows, long).first_bad.unwrap().1;
        assert!(why.contains("names no run"), "{why}");

        let mut forged = signed.clone();
        forged[0].at = "2026-12-08T00:00:00Z".into();
        let why = walk_with(&rows, forged).first_bad.unwrap().1;
        assert!(
            why.starts_with("chain c: its checkpoint's signature: the signature does not match"),
            "{why}"
        );

        let (seq, why) = walk_with(&rows[..2], signed.clone()).first_bad.unwrap();
        assert_eq!(
            (seq, why.as_str()),
            (
                2,
                "chain c: its checkpoint at entry 3 signs an entry the chain does not hold: entries \
                 were cut off its end, or the chain removed"
            )
        );
        let why = walk_with(&[], signed).first_bad.unwrap().1;
        assert!(
            why.contains("signs an entry the chain does not hold"),
            "{why}"
        );
    }

    /// Read alone, an unsigned entry checks out through the hashes its checkpoint covers, and
    /// its inclusion proof checks out without any other entry's text.
    #[test]
    fn an_unsigned_entry_read_alone_is_checked_by_its_checkpoint() {
        use crate::chain::check_covered;
        let rows = chain(&[U1, U2, U3]);
        let cp = checkpoint(&rows, 1, 3);
        let run: Vec<String> = rows.iter().map(|r| r.hash.clone()).collect();
        let after = Some(rows[2].prev_hash.as_str());
        let covered = Some((&cp, &run[..]));
        assert_eq!(
            check_covered::<Fake>(&rows[1], Some(&rows[0].hash), after, covered),
            Ok(())
        );
        assert_eq!(
            check_covered::<Fake>(&rows[1], Some(&rows[0].hash), after, None),
            Err("it is unsigned, and no checkpoint of its chain covers it".into())
        );
        // Another entry of the run changed (its hash with it): the root is not the one signed.
        let rewritten = chain(&[U1, U2, r#"{"call":"c","unsigned":true,"x":1}"#]);
        let hashes: Vec<String> = rewritten.iter().map(|r| r.hash.clone()).collect();
        let why = check_covered::<Fake>(
            &rewritten[1],
            Some(&rows[0].hash),
            None,
            Some((&cp, &hashes)),
        )
        .unwrap_err();
        assert!(why.contains("signs other entries"), "{why}");

        let proof = cp.proof(run.iter().map(String::as_str), 2).unwrap();
        assert_eq!(
            cp.check_inclusion(&rows[1].hash, &proof, &[] as &[&str]),
            Ok(())
        );
        assert!(
            cp.check_inclusion(&rows[0].hash, &proof, &[] as &[&str])
                .is_err()
        );
        assert!(
            cp.check_inclusion(
                &rewritten[2].hash,
                &cp.proof(hashes.iter().map(String::as_str), 3).unwrap(),
                &[] as &[&str]
            )
            .is_err()
        );
    }
}
