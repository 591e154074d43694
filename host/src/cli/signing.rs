//! `vak keygen` and `vak verify`: a signing key made for `--signing-key`, and saved call records
//! checked against the host signature they carry.

use super::{render, usage_error};
use std::process::ExitCode;
use vak_host::CallRecord;
use vak_host::journal::chain::EntryProof;

/// `vak verify FILE`: every record's signature checked (against `trusted` when given), or, for
/// a record exported with its proof (`vak audit show --proof`), the checkpoint that signs it.
pub(super) fn verify(file: &str, trusted: Option<&str>) -> ExitCode {
    let text = if file == "-" {
        let mut s = String::new();
        if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut s) {
            return usage_error(format!("cannot read stdin: {e}"));
        }
        s
    } else {
        match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => return usage_error(format!("cannot read {file}: {e}")),
        }
    };
    let items = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Array(items)) => items,
        Ok(one) => vec![one],
        Err(e) => return usage_error(format!("not JSON: {e}")),
    };
    let mut bad = 0;
    for item in items {
        // A record with its proof (`vak audit show --proof`), or a record signed by itself.
        let (call_id, checked) = if item["format"] == EntryProof::FORMAT {
            let proof: EntryProof = match serde_json::from_value(item) {
                Ok(p) => p,
                Err(e) => return usage_error(format!("not an entry proof: {e}")),
            };
            let call_id = serde_json::from_str::<CallRecord>(&proof.text)
                .map(|r| r.call_id)
                .unwrap_or_else(|_| "(not a call record)".into());
            let checked = proof.check(trusted.as_slice()).map(|()| {
                format!(
                    "{} (chain {} entry {}, under its checkpoint at entry {})",
                    proof.checkpoint.public_key, proof.chain, proof.entry, proof.checkpoint.seq
                )
            });
            (call_id, checked)
        } else {
            let record: CallRecord = match serde_json::from_value(item) {
                Ok(r) => r,
                Err(e) => {
                    return usage_error(format!("not a call record nor an entry proof: {e}"));
                }
            };
            let checked = vak_host::signing::verify(&record, trusted).map_err(|e| match e {
                // Written under a journal checkpoint (the default): its proof is in the journal.
                vak_host::signing::VerifyError::Unsigned => format!(
                    "{e}: a record the journal signs by checkpoint is checked with its proof, \
                     from `vak audit show {} --proof`",
                    record.call_id
                ),
                e => e.to_string(),
            });
            (record.call_id, checked)
        };
        match checked {
            Ok(key) => say!(
                "ok   {} signed by {}",
                render::neutralise_line(&call_id),
                render::neutralise_line(&key)
            ),
            Err(e) => {
                bad += 1;
                say!(
                    "BAD  {}: {}",
                    render::neutralise_line(&call_id),
                    render::neutralise_line(&e)
                );
            }
        }
    }
    if trusted.is_none() && bad == 0 {
        say!("(the signatures match their embedded keys; pass --key to require this host's key)");
    }
    if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// `vak keygen FILE`: a new key whose seed goes to FILE (mode 0600), its public key printed.
pub(super) fn keygen(file: &std::path::Path) -> ExitCode {
    let key = match vak_host::signing::HostKey::generate() {
        Ok(k) => k,
        Err(e) => {
            say_err!("vak: {}", render::neutralise_line(&e.to_string()));
            return ExitCode::from(1);
        }
    };
    let written = {
        use std::io::Write as _;
        #[cfg(unix)]
        use std::os::unix::fs::OpenOptionsExt;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        options.mode(0o600);
        options
            .open(file)
            .and_then(|mut f| writeln!(f, "{}", key.seed_hex()))
    };
    match written {
        Ok(()) => {
            say!("{}", key.public_hex());
            ExitCode::SUCCESS
        }
        Err(e) => usage_error(format!("cannot create {}: {e}", file.display())),
    }
}
