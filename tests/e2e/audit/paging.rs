//! The figures docs/audit.md gives, on a journal of 100,000 records.

use super::support::{listed, request, serve, verified};
use std::sync::Arc;
use vak_host::CallRecord;
use vak_host::Status;
use vak_host::journal::{Durability, Journal};
/// The figure docs/audit.md gives: a page of the calls list on a journal of 100,000 records,
/// first and deep (keyset paging: a page 50,000 calls back costs what the first does), and with
/// each filter, through `Journal::page` and through the server. Each page answers within a bound
/// (generous: a debug build on a shared machine) and the deep page within a small multiple of
/// the first.
#[tokio::test(flavor = "multi_thread")]
async fn paging_over_100_000_records_is_bounded() {
    use vak_host::journal::{Filter, Page, Sample};
    use vak_host::signing::HostKey;
    const N: u32 = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state/journal.sqlite");
    let journal = Arc::new(Journal::open(&path, Durability::Committed).unwrap());
    let key = Arc::new(HostKey::generate().unwrap());
    let base = jiff::Timestamp::from_second(1_790_000_000).unwrap();
    let statuses = [
        Status::Completed,
        Status::Completed,
        Status::Completed,
        Status::ToolError,
        Status::Refused,
    ];
    let made = std::time::Instant::now();
    for chunk in (0..N).collect::<Vec<_>>().chunks(1000) {
        let appends = chunk.iter().map(|&i| {
            let (journal, key) = (journal.clone(), key.clone());
            async move {
                let tool = if i % 1000 == 7 {
                    "rare".to_string()
                } else {
                    format!("tool{}", i % 10)
                };
                let mut r = CallRecord::new(format!("call_{i:08}"), tool, "api".into(), "{}");
                r.received_at =
                    (base + jiff::SignedDuration::from_millis(i64::from(i))).to_string();
                r.status = statuses[(i % 5) as usize];
                r.stage = match r.status {
                    Status::Refused => vak_host::Stage::Schema,
                    _ => vak_host::Stage::Projection,
                };
                r.principal = Some(format!("principal{}", i % 7));
                r.session_id = format!("session_{}", i / 100);
                journal.append_signing(&mut r, &key).await.unwrap();
            }
        });
        futures::future::join_all(appends).await;
    }
    eprintln!("made {N} records in {:.1} s", made.elapsed().as_secs_f64());

    // The median of 5 runs of `f`, in ms.
    fn median(mut f: impl FnMut() -> usize) -> (f64, usize) {
        let mut times = Vec::new();
        let mut rows = 0;
        for _ in 0..5 {
            let t = std::time::Instant::now();
            rows = f();
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        (times[2], rows)
    }
    let deep = journal
        .page(
            &Filter {
                limit: Some(50_000),
                ..Filter::default()
            },
            &Page::default(),
        )
        .unwrap()
        .next
        .expect("a cursor 50,000 calls back");
    let page = |filter: Filter, q: Page| {
        let journal = journal.clone();
        move || journal.page(&filter, &q).unwrap().rows.len()
    };
    let full = |f: Filter| Filter {
        limit: Some(100),
        ..f
    };
    let cases: Vec<(&str, Filter, Page)> = vec![
        ("first page", full(Filter::default()), Page::default()),
        (
            "page 500 (50,000 back)",
            full(Filter::default()),
            Page {
                before: Some(deep.clone()),
                ..Page::default()
            },
        ),
        (
            "tool=tool3",
            full(Filter {
                tool: Some("tool3".into()),
                ..Filter::default()
            }),
            Page::default(),
        ),
        (
            "tool=rare (1 in 1000)",
            full(Filter {
                tool: Some("rare".into()),
                ..Filter::default()
            }),
            Page::default(),
        ),
        (
            "status=tool_error",
            full(Filter {
                status: Some("tool_error".into()),
                ..Filter::default()
            }),
            Page::default(),
        ),
        (
            "stage=schema",
            full(Filter {
                stage: Some("schema".into()),
                ..Filter::default()
            }),
            Page::default(),
        ),
        (
            "principal=principal3",
            full(Filter {
                principal: Some("principal3".into()),
                ..Filter::default()
            }),
            Page::default(),
        ),
        (
            "session=session_17 (one of 1000)",
            full(Filter::default()),
            Page {
                session: Some("session_17".into()),
                ..Page::default()
            },
        ),
        (
            "until (a range ending halfway)",
            full(Filter::default()),
            Page {
                until: Some(
                    (base + jiff::SignedDuration::from_secs(50))
                        .strftime("%Y-%m-%dT%H:%M:%S.%9fZ")
                        .to_string(),
                ),
                ..Page::default()
            },
        ),
        (
            "call id contains",
            full(Filter::default()),
            Page {
                text: Some("_0001234".into()),
                ..Page::default()
            },
        ),
    ];
    let mut first = 0.0;
    for (name, filter, q) in cases {
        let (ms, rows) = median(page(filter, q));
        eprintln!("Journal::page {name}: {ms:.2} ms ({rows} rows)");
        if name == "first page" {
            first = ms;
        }
        if name == "page 500 (50,000 back)" {
            assert!(
                ms < first * 5.0 + 5.0,
                "a deep page costs about what the first does: {ms} ms against {first} ms"
            );
        }
        assert!(ms < 1000.0, "{name}: {ms} ms");
        assert!(rows > 0, "{name}");
    }
    // The pictures' queries, each over every call (no filter): what GET /pictures costs.
    let (f, q) = (Filter::default(), Page::default());
    let every = |cap| Sample {
        filter: &f,
        page: &q,
        cap,
    };
    type Query<'a> = Box<dyn Fn() -> usize + 'a>;
    let queries: [(&str, Query); 4] = [
        (
            "span (first, last)",
            Box::new(|| {
                journal
                    .span(&every(0))
                    .unwrap()
                    .map_or(0, |s| (s.1 - s.0) as usize)
            }),
        ),
        (
            "tally_by_time (5 s buckets)",
            Box::new(|| {
                journal
                    .tally_by_time(&every(200_000), 5, 400)
                    .unwrap()
                    .len()
            }),
        ),
        (
            "usage_sample (5,000)",
            Box::new(|| journal.usage_sample(&every(5_000)).unwrap().len()),
        ),
        (
            "refusal_tally (5,000)",
            Box::new(|| journal.refusal_tally(&every(5_000), 40).unwrap().len()),
        ),
    ];
    for (name, query) in queries {
        let (ms, rows) = median(query);
        eprintln!("Journal::{name}: {ms:.1} ms ({rows})");
    }
    drop(journal);

    let (_server, addr) = serve(dir.path(), &[]).await;
    for path in [
        "/calls?size=100".to_string(),
        format!(
            "/calls?size=100&before_at={}&before_seq={}",
            deep.received_at, deep.seq
        ),
        "/calls?size=100&tool=rare".to_string(),
    ] {
        let mut times = Vec::new();
        for _ in 0..5 {
            let t = std::time::Instant::now();
            let a = request(&addr, "GET", path.clone(), "localhost").await;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(a.status, 200, "{path}");
            assert!(!listed(&a.body).is_empty(), "{path}");
        }
        times.sort_by(f64::total_cmp);
        eprintln!("GET {path}: {:.2} ms", times[2]);
        assert!(times[2] < 2000.0, "{path}: {} ms", times[2]);
    }
    // The pictures: aggregated in SQL over at most the newest 200,000 calls (the time picture),
    // 5,000 that ran (the spreads) and 5,000 refusals; every status counted.
    let range = format!(
        "since={}&until={}",
        base + jiff::SignedDuration::from_secs(25),
        base + jiff::SignedDuration::from_secs(75)
    );
    for (path, want) in [
        (
            "/pictures".to_string(),
            vec![
                ">completed: 60000<",
                ">tool_error: 20000<",
                ">refused: 20000<",
                "Only the newest 5000 refusals are counted.",
            ],
        ),
        (
            "/pictures?tool=rare".to_string(),
            vec![">completed: 100<", "No call in range was refused."],
        ),
        (
            format!("/pictures?{range}"),
            vec![
                ">completed: 30000<",
                ">tool_error: 10000<",
                ">refused: 10000<",
            ],
        ),
    ] {
        let mut times = Vec::new();
        for _ in 0..5 {
            let t = std::time::Instant::now();
            let a = request(&addr, "GET", path.clone(), "localhost").await;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(a.status, 200, "{path}");
            for w in &want {
                assert!(a.body.contains(w), "{path}: {w}: {}", a.body);
            }
        }
        times.sort_by(f64::total_cmp);
        eprintln!("GET {path}: {:.2} ms", times[2]);
        assert!(times[2] < 3000.0, "{path}: {} ms", times[2]);
    }

    // The integrity page answers at once (each chain's head, from the index); the walk runs
    // when asked, with progress, and once done is not repeated for the same journal.
    let t = std::time::Instant::now();
    let page = request(&addr, "GET", "/integrity".into(), "localhost").await;
    let plain_ms = t.elapsed().as_secs_f64() * 1000.0;
    assert!(page.body.contains("100000 entries"), "{}", page.body);
    eprintln!("GET /integrity (heads only): {plain_ms:.1} ms");
    assert!(plain_ms < 2000.0, "{plain_ms} ms");
    request(&addr, "GET", "/integrity?verify=1".into(), "localhost").await;
    let mut seen = Vec::new();
    loop {
        let p = request(&addr, "GET", "/integrity/progress".into(), "localhost").await;
        let v: serde_json::Value = serde_json::from_str(&p.body).unwrap();
        if v["state"] != "running" {
            break;
        }
        seen.push(v["done"].as_u64().unwrap());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let walked_ms = t.elapsed().as_secs_f64() * 1000.0;
    eprintln!(
        "verification of {N} entries: {walked_ms:.0} ms, progress seen {:?}",
        &seen[..seen.len().min(8)]
    );
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]),
        "progress only grows: {seen:?}"
    );
    let t = std::time::Instant::now();
    let integrity = verified(&addr).await;
    let again_ms = t.elapsed().as_secs_f64() * 1000.0;
    assert!(
        integrity.body.contains("Journal ok: 100000 entries"),
        "{}",
        integrity.body
    );
    eprintln!("asked again, unchanged journal (the cached verdict): {again_ms:.1} ms");
    assert!(
        again_ms < walked_ms / 4.0 + 50.0,
        "not walked again: {again_ms} ms against {walked_ms} ms"
    );
}
