//! An entry's proof of inclusion under the checkpoint that signs it, for export.

use super::chain::{self, EntryProof, Kind};
use super::{Journal, JournalError};
use rusqlite::{OptionalExtension, params};

impl Journal {
    /// The proof that a checkpoint signs the final record of call `call_id` (vak's id), when
    /// the record was written unsigned and a checkpoint covers it; `None` when there is no such
    /// record, or it carries its own signature, or no checkpoint covers it (yet). The proof is
    /// made from the database's hashes: check it ([`EntryProof::check`]) before trusting it.
    pub fn proof(&self, call_id: &str) -> Result<Option<EntryProof>, JournalError> {
        let conn = self.read()?;
        let found: Option<(String, i64, String, String, String)> = conn
            .query_row(
                "SELECT chain, chain_seq, prev_hash, hash, record FROM records
                 WHERE call_id = ?1 AND kind = ?2 ORDER BY seq DESC LIMIT 1",
                params![call_id, Kind::Record.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some((chain_id, entry, prev_hash, hash, text)) = found else {
            return Ok(None);
        };
        // A record signed by itself needs no checkpoint to be checked: it is exported as it is.
        if matches!(chain::Parsed::parse(&text), Ok(chain::Parsed::Record(r)) if r.signature.is_some())
        {
            return Ok(None);
        }
        let Some(checkpoint) = super::index::covering(&conn, &self.path, &chain_id, entry)? else {
            return Ok(None);
        };
        let run = self.run_hashes(&conn, &checkpoint)?;
        let Some(inclusion) = checkpoint.proof(run.iter().map(String::as_str), entry) else {
            return Ok(None);
        };
        Ok(Some(EntryProof {
            format: EntryProof::FORMAT.into(),
            chain: chain_id,
            entry,
            prev_hash,
            hash,
            text,
            checkpoint,
            inclusion,
        }))
    }
}
