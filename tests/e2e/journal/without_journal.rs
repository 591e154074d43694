//! A host without a journal: its records hashed into a chain in memory, proven by checkpoint.

use super::{policy, prepared, tools};
use serde_json::json;
use vak_host::{HostBuilder, Policy, Proposal, Status};
use vak_tests::vak_in;

/// Without a journal, a host that signs checkpoints (the library's default) returns its
/// records unsigned, hashed into a chain in memory; [`vak_host::Host::proof`] signs one
/// checkpoint over every record not yet signed, and the proof checks out alone in `vak verify`,
/// by this host's key only. A record changed after the call gets no proof. `vak --no-journal
/// call`, which prints its records and keeps no chain after it exits, signs each one.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_without_a_journal_proves_its_records_by_checkpoints_in_memory() {
    let (dir, project) = prepared();
    let built = |signing| {
        let mut builder = HostBuilder::new()
            .policy(Policy::parse(&policy(&project), "test policy").unwrap())
            .cache_dir(Some(dir.path().join("cache")))
            .signing(signing);
        for (name, bytes) in tools() {
            builder = builder.component(name, bytes);
        }
        builder.build()
    };
    let host = built(vak_host::signing::Signing::default()).await.unwrap();
    let mut records = Vec::new();
    for n in 1..=3 {
        let r = host
            .call(Proposal::new("stats", json!({ "values": [n] }).to_string()))
            .await;
        assert_eq!(r.status, Status::Completed, "{r:?}");
        assert!(r.signature.is_none(), "unsigned on the call path");
        assert!(r.journaled.is_none(), "no journal took it");
        records.push(r);
    }
    let proofs: Vec<_> = records.iter().map(|r| host.proof(r).unwrap()).collect();
    for p in &proofs {
        p.check(&[host.public_key()]).unwrap();
        assert_eq!(
            p.checkpoint, proofs[0].checkpoint,
            "one checkpoint signs all three"
        );
    }
    assert_eq!(
        (proofs[0].entry, proofs[2].entry),
        (1, 3),
        "in the order the calls ended"
    );
    let mut changed = records[1].clone();
    changed.status = Status::Refused;
    assert!(matches!(
        host.proof(&changed),
        Err(vak_host::signing::ProofError::Altered { .. })
    ));

    let file = dir.path().join("proofs.json");
    std::fs::write(&file, serde_json::to_string(&proofs).unwrap()).unwrap();
    let verify = |args: &[&str]| {
        let o = vak_in(dir.path())
            .arg("verify")
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    let file = file.to_str().unwrap();
    let (code, out) = verify(&[file, "--key", &host.public_key()]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out.matches("ok   call_").count(), 3, "{out}");
    let (code, out) = verify(&[file, "--key", &"11".repeat(32)]);
    assert_eq!(code, Some(1), "another host's key: {out}");

    // A record signed with --signing records proves nothing by a chain: it carries its own.
    let signing = built(vak_host::signing::Signing::Records).await.unwrap();
    let r = signing
        .call(Proposal::new("stats", r#"{"values":[1]}"#))
        .await;
    vak_host::signing::verify(&r, Some(&signing.public_key())).unwrap();
    assert!(matches!(
        signing.proof(&r),
        Err(vak_host::signing::ProofError::NoChainInMemory)
    ));

    // The CLI's `call` without a journal prints records that verify alone.
    let out = vak_in(dir.path())
        .args([
            "--no-journal",
            "call",
            "stats",
            r#"{"values":[2]}"#,
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let printed = dir.path().join("printed.json");
    std::fs::write(&printed, &out.stdout).unwrap();
    let (code, out) = verify(&[printed.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
}
