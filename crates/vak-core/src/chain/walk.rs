//! The walk of every chain, entry by entry: the one check both the local journal and the shared
//! store run for `verify`.

use super::{ChainEntry, GENESIS, Head, Kind, Stored, Unfinished, Verification};
use std::collections::HashMap;
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
}

/// The walk of every chain, one entry at a time in (chain, chain_seq) order: each entry's place
/// (gapless from 1), its link to the one before, its commit order after it, its hash, its text,
/// its signature; and the write-ahead rule: once a chain holds `started` entries, a record of a
/// call that ran (it has limits) follows its call's `started` entry, for the same tool and
/// arguments. `E` reads the entries' text.
pub struct ChainCheck<E> {
    pub entries: u64,
    pub records: u64,
    pub started: u64,
    pub heads: Vec<Head>,
    pub unfinished: Vec<Unfinished>,
    current: Option<Current>,
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
            entry: PhantomData,
        }
    }
}

impl<E: ChainEntry> ChainCheck<E> {
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
        let entry: E = row.check_alone(trusted)?;
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
        Ok(())
    }

    /// End the chain walked: its head, and its calls still open.
    fn close(&mut self) {
        let Some(c) = self.current.take() else {
            return;
        };
        let chain = (!c.legacy).then(|| c.chain.clone());
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
}
