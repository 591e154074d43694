//! `vak audit serve`: the journal's pages as a reviewer's browser gets them, over HTTP from the
//! real binary, on a journal of real calls (completed with receipts, a tool error, refusals at
//! the proposal and schema stages, arguments carrying markup and a terminal escape).

#[path = "audit/journal.rs"]
mod journal;
#[path = "audit/paging.rs"]
mod paging;
#[path = "audit/postgres.rs"]
mod postgres;
#[path = "audit/support.rs"]
mod support;

use journal::make_journal;
use support::{chromium, dump_dom, listed, request, screenshot, serve, url_encode, verified};

/// The calls page lists every call newest first and filters by tool, status, stage, principal
/// and call id text, on the server; its pages follow each other without a gap or an overlap.
/// One call's page shows its stages, receipts and check; text a guest or model wrote shows only
/// escaped; every answer carries the CSP and nosniff; a wrong Host or a POST is refused; an
/// entry changed in the database shows as failing on the integrity page and on its call's page.
#[tokio::test(flavor = "multi_thread")]
async fn a_reviewer_reads_the_journal_in_a_browser_safely() {
    let dir = tempfile::tempdir().unwrap();
    let calls = make_journal(dir.path()).await;
    let (_server, addr) = serve(dir.path(), &[]).await;
    let get = |path: &str| request(&addr, "GET", path.to_string(), "127.0.0.1");

    let all = get("/calls").await;
    assert_eq!(all.status, 200, "{}", all.body);
    let csp = all.header("content-security-policy").expect("a CSP");
    assert!(
        csp.starts_with("default-src 'none'") && !csp.contains("unsafe"),
        "{csp}"
    );
    assert_eq!(all.header("x-content-type-options"), Some("nosniff"));
    let ids = listed(&all.body);
    let made = [
        &calls.hostile,
        &calls.unknown_tool,
        &calls.tool_error,
        &calls.edit,
        &calls.completed,
    ];
    assert_eq!(
        ids,
        made.iter().map(|r| r.call_id.clone()).collect::<Vec<_>>(),
        "every call, newest first"
    );

    for (query, expected) in [
        ("/calls?tool=replace", vec![&calls.edit]),
        (
            "/calls?status=refused",
            vec![&calls.hostile, &calls.unknown_tool],
        ),
        ("/calls?status=tool_error", vec![&calls.tool_error]),
        ("/calls?stage=schema", vec![&calls.hostile]),
        ("/calls?principal=alice", vec![&calls.completed]),
        ("/calls?tool=stats&status=completed", vec![&calls.completed]),
    ] {
        let page = get(query).await;
        assert_eq!(page.status, 200, "{query}: {}", page.body);
        let want: Vec<String> = expected.iter().map(|r| r.call_id.clone()).collect();
        assert_eq!(listed(&page.body), want, "{query}");
    }
    let tail = &calls.edit.call_id[calls.edit.call_id.len() - 10..];
    assert_eq!(
        listed(&get(&format!("/calls?q={tail}")).await.body),
        vec![calls.edit.call_id.clone()]
    );
    let session = &calls.tool_error.session_id;
    let same_session = listed(&get(&format!("/calls?session={session}")).await.body);
    assert!(
        same_session.contains(&calls.tool_error.call_id)
            && !same_session.contains(&calls.completed.call_id),
        "{same_session:?}"
    );
    assert_eq!(get("/calls?status=bogus").await.status, 400);
    assert_eq!(get("/calls?since=yesterday").await.status, 400);
    // The same instant written with an offset selects the same calls.
    let edit_at: jiff::Timestamp = calls.edit.received_at.parse().unwrap();
    let offset = edit_at.display_with_offset(jiff::tz::offset(2)).to_string();
    for since in [calls.edit.received_at.as_str(), offset.as_str()] {
        let q: String = url_encode(since);
        assert_eq!(
            listed(&get(&format!("/calls?since={q}")).await.body),
            ids[..4],
            "since {since}"
        );
    }
    // A whole second, as a person types it, takes in the calls received within that second
    // (stored times carry fractions: compared as text, `…:05Z` once sorted after `…:05.3Z`).
    let whole_second = edit_at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let from_second = listed(
        &get(&format!("/calls?since={}", url_encode(&whole_second)))
            .await
            .body,
    );
    assert!(
        ids[..4].iter().all(|id| from_second.contains(id)),
        "since {whole_second}: {from_second:?}"
    );
    // The end of a range: calls received before it.
    let until = listed(
        &get(&format!(
            "/calls?until={}",
            url_encode(&calls.edit.received_at)
        ))
        .await
        .body,
    );
    assert_eq!(until, vec![calls.completed.call_id.clone()], "until");
    let range = listed(
        &get(&format!(
            "/calls?since={}&until={}",
            url_encode(&calls.edit.received_at),
            url_encode(&calls.unknown_tool.received_at)
        ))
        .await
        .body,
    );
    assert_eq!(range, ids[2..4], "since and until");
    assert_eq!(get("/calls?until=tomorrow").await.status, 400);
    // A node (the chain this process wrote), as each row links to it.
    let node_link = all
        .body
        .split("class=\"node\" href=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("each row links to its chain")
        .replace("&amp;", "&");
    assert_eq!(listed(&get(&node_link).await.body), ids, "{node_link}");
    assert!(listed(&get("/calls?node=no-such-node").await.body).is_empty());
    // And a duration back from now, as `vak audit --since` takes it.
    assert_eq!(listed(&get("/calls?since=1h").await.body).len(), ids.len());

    // Two at a time, following the pager's links: every call once, in order.
    let mut paged = Vec::new();
    let mut next = Some("/calls?size=2".to_string());
    while let Some(path) = next.take() {
        let page = get(&path).await;
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        let rows = listed(&page.body);
        assert!(rows.len() <= 2, "{path}: {rows:?}");
        paged.extend(rows);
        next = page
            .body
            .split("rel=\"next\"")
            .next()
            .filter(|_| page.body.contains("rel=\"next\""))
            .and_then(|before| before.rsplit("href=\"").next())
            .map(|href| href.split('"').next().unwrap().replace("&amp;", "&"));
    }
    assert_eq!(paged, ids, "the pages, one after another");

    // A call's evidence: each item (kept once, in the result) beside its verdict; and the text
    // its renderer was given (made again from the record).
    let stats = get(&format!("/call?id={}", calls.completed.call_id)).await;
    assert!(
        !calls.completed.evidence.is_empty(),
        "stats returns evidence"
    );
    let escape = |t: &str| {
        t.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    for e in &calls.completed.evidence {
        let item = serde_json::to_string_pretty(&e.item).unwrap();
        assert!(
            stats
                .body
                .contains(&format!("<td><pre>{}</pre></td>", escape(&item))),
            "item {} beside its verdict: {}",
            e.item.id,
            stats.body
        );
    }
    let rendered = &calls.completed.projection.as_ref().unwrap().rendered;
    assert!(!rendered.is_empty());
    assert!(
        stats.body.contains(&escape(rendered)),
        "the rendered text: {}",
        stats.body
    );

    // The payload, with each value an item upholds in a <mark> of that item, which its row
    // links to.
    let payload: serde_json::Value = serde_json::from_str(
        calls
            .completed
            .result
            .as_ref()
            .unwrap()
            .payload_json
            .as_deref()
            .unwrap(),
    )
    .unwrap();
    let mut marked = 0;
    for (n, e) in calls.completed.evidence.iter().enumerate() {
        for (k, pointer) in e.upholds.iter().enumerate() {
            let value = payload
                .pointer(pointer)
                .expect("an upheld pointer is in the payload");
            let open = format!(
                "<mark id=\"mark-{n}-{k}\" class=\"upheld\" data-evidence=\"{}\" data-pointer=\"{pointer}\"",
                escape(&e.item.id)
            );
            let at = stats
                .body
                .find(&open)
                .unwrap_or_else(|| panic!("{pointer} of {} marked: {}", e.item.id, stats.body));
            let mark = &stats.body[at..];
            let mark = &mark[..mark.find("</mark>").unwrap()];
            assert!(
                mark.ends_with(&format!(">{}", escape(&value.to_string()))),
                "the mark holds {value}: {mark}"
            );
            assert!(
                stats.body.contains(&format!("href=\"#mark-{n}-{k}\"")),
                "item {} links to its mark",
                e.item.id
            );
            marked += 1;
        }
    }
    assert!(
        marked > 0,
        "stats' computed summary upholds fields: {:?}",
        calls.completed.evidence
    );
    assert!(
        !stats.body.contains("id=\"cut\""),
        "a small payload is not cut"
    );

    // One call: its stages, its receipts, its check.
    let edit = get(&format!("/call?id={}", calls.edit.call_id)).await;
    assert_eq!(edit.status, 200, "{}", edit.body);
    for stage in [
        "proposal",
        "schema",
        "permission",
        "budget",
        "dispatch",
        "result",
    ] {
        assert!(
            edit.body.contains(&format!("<td>{stage}</td>")),
            "stage {stage}: {}",
            edit.body
        );
    }
    for receipt in &calls.edit.receipts {
        assert!(
            edit.body.contains(&receipt.id),
            "receipt {}: {}",
            receipt.id,
            edit.body
        );
    }
    assert!(edit.body.contains("This entry checks out"), "{}", edit.body);
    assert!(
        edit.body.contains("<meter"),
        "limits against usage: {}",
        edit.body
    );
    assert_eq!(get("/call?id=call_nothing_like_it").await.status, 404);

    // What a model wrote is shown, escaped, never run.
    let hostile = get(&format!("/call?id={}", calls.hostile.call_id)).await;
    assert_eq!(hostile.status, 200, "{}", hostile.body);
    assert!(
        hostile
            .body
            .contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{}",
        hostile.body
    );
    assert!(
        !hostile.body.to_ascii_lowercase().contains("<script"),
        "{}",
        hostile.body
    );
    assert!(
        !hostile.body.contains('\u{1b}'),
        "no terminal escape goes out raw"
    );
    let search = get("/calls?q=%3Cscript%3E%1B").await;
    assert!(
        !search.body.contains("<script") && !search.body.contains('\u{1b}'),
        "{}",
        search.body
    );

    // Refused: another Host (DNS rebinding), a method that would change something.
    let rebound = request(&addr, "GET", "/calls".into(), "evil.example").await;
    assert_eq!(rebound.status, 403, "{}", rebound.body);
    assert!(!rebound.body.contains(&calls.edit.call_id));
    assert_eq!(
        request(&addr, "POST", "/calls".into(), "localhost")
            .await
            .status,
        405
    );

    // Integrity: not walked on a plain load, ok when asked, then an entry changed in the
    // database shows at once (the cached verdict is of another state of the journal).
    let plain = get("/integrity").await;
    assert!(
        plain.body.contains("Not verified yet") && !plain.body.contains("Journal ok"),
        "{}",
        plain.body
    );
    assert!(
        plain
            .body
            .contains("<form method=\"get\" action=\"/integrity\"")
    );
    let ok = verified(&addr).await;
    assert!(ok.body.contains("Journal ok"), "{}", ok.body);
    assert!(
        ok.body.contains("no entry was added or changed"),
        "{}",
        ok.body
    );
    let cross = support::request_with(
        &addr,
        "GET",
        "/integrity?verify=1",
        &[("Host", "localhost"), ("Sec-Fetch-Site", "cross-site")],
        "",
    )
    .await;
    assert_eq!(cross.status, 403, "another site cannot start a walk");
    let conn = rusqlite::Connection::open(dir.path().join("state/journal.sqlite")).unwrap();
    let changed = conn
        .execute(
            "UPDATE records SET record = replace(record, '\"values\":[1,2,3]', '\"values\":[1,2,4]')
             WHERE call_id = ?1 AND kind = 'record'",
            [&calls.completed.call_id],
        )
        .unwrap();
    assert_eq!(changed, 1);
    let stale = get("/integrity").await;
    assert!(stale.body.contains("has changed since"), "{}", stale.body);
    let bad = verified(&addr).await;
    assert!(bad.body.contains("Journal BAD at entry #"), "{}", bad.body);
    let tampered = get(&format!("/call?id={}", calls.completed.call_id)).await;
    assert!(
        tampered.body.contains("does NOT check out"),
        "{}",
        tampered.body
    );
}

/// The pictures: the counts of the journal's calls by status over time (each bar linking to its
/// calls), per tool the spread of wall time and fuel (numbers written on the picture), and the
/// refusals by stage and kind; with the filters honoured; under the same CSP, with no script.
#[tokio::test(flavor = "multi_thread")]
async fn pictures_draw_the_journal_s_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let calls = make_journal(dir.path()).await;
    let (_server, addr) = serve(dir.path(), &[]).await;
    let get = |path: &str| request(&addr, "GET", path.to_string(), "127.0.0.1");
    let csp = get("/calls")
        .await
        .header("content-security-policy")
        .map(str::to_string);

    let all = get("/pictures").await;
    assert_eq!(all.status, 200, "{}", all.body);
    assert_eq!(
        all.header("content-security-policy").map(str::to_string),
        csp
    );
    assert!(csp.is_some_and(|c| c.contains("script-src 'self'") && !c.contains("unsafe")));
    assert!(
        !all.body.to_ascii_lowercase().contains("<script"),
        "{}",
        all.body
    );
    assert_eq!(
        all.body
            .matches("<svg class=\"picture\" role=\"img\" aria-label=")
            .count(),
        4
    );
    // Over time: the legend counts each status; the bars' segments add up to every call.
    for want in ["completed: 2", "tool_error: 1", "refused: 2"] {
        assert!(
            all.body.contains(&format!(">{want}</text>")),
            "{want}: {}",
            all.body
        );
    }
    assert!(!all.body.contains(">failed: "), "{}", all.body);
    let segments: u64 = all
        .body
        .split("data-count=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(segments, 5, "{}", all.body);
    assert!(
        all.body.contains("Calls over time by status: 5 calls"),
        "{}",
        all.body
    );
    // Each bar's link lists its calls: every call, once.
    let mut linked = Vec::new();
    for href in all.body.split("<a href=\"/calls?since=").skip(1) {
        let href = href.split('"').next().unwrap().replace("&amp;", "&");
        linked.extend(listed(&get(&format!("/calls?since={href}")).await.body));
    }
    linked.sort();
    let mut ids: Vec<String> = [&calls.completed, &calls.edit, &calls.tool_error]
        .iter()
        .chain([&calls.unknown_tool, &calls.hostile].iter())
        .map(|r| r.call_id.clone())
        .collect();
    ids.sort();
    assert_eq!(linked, ids, "the bars' links");

    // Per tool: the numbers of the calls that ran.
    let spread = |mut v: Vec<u64>, unit: fn(u64) -> String| {
        v.sort_unstable();
        let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        format!(
            "n {} · min {} · median {} · p90 {} · max {}",
            v.len(),
            unit(v[0]),
            unit(at(0.5)),
            unit(at(0.9)),
            unit(v[v.len() - 1])
        )
    };
    let stats = [&calls.completed, &calls.tool_error];
    for (want, what) in [
        (
            spread(stats.iter().map(|r| r.usage.wall_ns).collect(), duration),
            "stats wall time",
        ),
        (
            spread(stats.iter().map(|r| r.usage.fuel).collect(), count),
            "stats fuel",
        ),
        (
            spread(vec![calls.edit.usage.wall_ns], duration),
            "replace wall time",
        ),
        (spread(vec![calls.edit.usage.fuel], count), "replace fuel"),
    ] {
        assert!(
            all.body.contains(&format!(">{want}</text>")),
            "{what}: {want}: {}",
            all.body
        );
    }
    // Refusals, by stage and kind.
    let mut refusals: Vec<String> = [&calls.unknown_tool, &calls.hostile]
        .iter()
        .map(|r| format!("{} · {}", r.stage.as_str(), r.error.as_ref().unwrap().kind))
        .collect();
    refusals.dedup();
    assert_eq!(refusals.len(), 2, "two kinds of refusal: {refusals:?}");
    for r in &refusals {
        assert!(
            all.body.contains(&format!("<title>{r}: 1</title>")),
            "{r}: {}",
            all.body
        );
    }
    assert!(
        all.body
            .contains("Refusals by stage and kind: 2 refused calls"),
        "{}",
        all.body
    );

    // Filters: a tool; the end of a range; a bad time.
    let replace = get("/pictures?tool=replace").await;
    assert!(
        replace.body.contains(">completed: 1</text>"),
        "{}",
        replace.body
    );
    assert!(!replace.body.contains(">refused: "), "{}", replace.body);
    assert!(
        replace.body.contains("No call in range was refused."),
        "{}",
        replace.body
    );
    let until = url_encode(&calls.edit.received_at);
    let first = get(&format!("/pictures?until={until}")).await;
    assert!(
        first.body.contains(">completed: 1</text>"),
        "{}",
        first.body
    );
    assert!(!first.body.contains(">tool_error: "), "{}", first.body);
    let one = spread(vec![calls.completed.usage.fuel], count);
    assert!(
        first.body.contains(&format!(">{one}</text>")),
        "{}",
        first.body
    );
    assert_eq!(get("/pictures?since=yesterday").await.status, 400);
    let none = get("/pictures?tool=no-such-tool").await;
    assert!(
        none.body.contains("No calls in this range."),
        "{}",
        none.body
    );
    // What a filter carries is shown inert.
    let hostile = get("/pictures?tool=%3Cscript%3Ealert(1)%3C%2Fscript%3E%1B").await;
    assert_eq!(hostile.status, 200);
    assert!(
        !hostile.body.to_ascii_lowercase().contains("<script"),
        "{}",
        hostile.body
    );
    assert!(!hostile.body.contains('\u{1b}'), "{}", hostile.body);
}

/// A count as the pictures write it.
fn count(n: u64) -> String {
    match n {
        0..10_000 => n.to_string(),
        10_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}M", n as f64 / 1e6),
        _ => format!("{:.1}G", n as f64 / 1e9),
    }
}

/// A duration as the pictures write it.
fn duration(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} ms", ns as f64 / 1e6),
        _ => format!("{:.2} s", ns as f64 / 1e9),
    }
}

/// Not on a non-loopback address unless --allow-host names the host it is reached by.
#[tokio::test(flavor = "multi_thread")]
async fn audit_serve_refuses_a_non_loopback_address_without_allow_host() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(vak_tests::vak_binary())
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .args(["audit", "serve", "--http", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a loopback address") && err.contains("--allow-host"),
        "{err}"
    );
}

/// In a real browser (headless Chromium), the call page whose arguments carry `<script>` and an
/// `onerror` handler shows them as text and runs neither: the flag they would set is not in the
/// DOM. Control: the same browser does run such a script in a page of its own, so the absence
/// means something.
#[tokio::test(flavor = "multi_thread")]
async fn in_a_real_browser_injected_markup_is_inert() {
    let Some(browser) = chromium() else {
        vak_tests::skipped("Chromium is not installed (Debian package chromium)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("chromium-profile");
    let control = dir.path().join("control.html");
    std::fs::write(
        &control,
        "<html><body><script>document.documentElement.setAttribute('data-pwned','1')</script></body></html>",
    )
    .unwrap();
    let ran = dump_dom(&browser, &format!("file://{}", control.display()), &profile);
    assert!(
        ran.contains("data-pwned=\"1\""),
        "the control page's script ran: {ran}"
    );

    let calls = make_journal(dir.path()).await;
    let (_server, addr) = serve(dir.path(), &[]).await;
    let url = format!("http://{addr}/call?id={}", calls.hostile.call_id);
    let dom = dump_dom(&browser, &url, &profile);
    assert!(
        dom.contains(&calls.hostile.call_id),
        "the page loaded: {dom}"
    );
    assert!(
        dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "shown as text: {dom}"
    );
    assert!(
        !dom.contains("data-pwned=\"1\""),
        "an injected script or handler ran: {dom}"
    );
    assert!(
        !dom.to_ascii_lowercase().contains("<script"),
        "a script element: {dom}"
    );
    assert!(!dom.contains("<img"), "an injected element: {dom}");
    assert!(dom.contains("Arguments (as recorded, redacted)"), "{dom}");

    // The pictures: SVG drawn by the server, no script; the call page's marks.
    let pictures = dump_dom(&browser, &format!("http://{addr}/pictures"), &profile);
    assert_eq!(
        pictures.matches("<svg class=\"picture\"").count(),
        4,
        "{pictures}"
    );
    assert!(pictures.contains(">completed: 2</text>"), "{pictures}");
    assert!(
        !pictures.to_ascii_lowercase().contains("<script"),
        "{pictures}"
    );
    assert!(!pictures.contains("data-pwned"), "{pictures}");
    let call = dump_dom(
        &browser,
        &format!("http://{addr}/call?id={}", calls.completed.call_id),
        &profile,
    );
    assert!(call.contains("<mark id=\"mark-"), "{call}");
    support::screenshot_tall(
        &browser,
        &format!("http://{addr}/call?id={}", calls.completed.call_id),
        &profile,
        "call-evidence",
        3200,
    );

    // Screenshots of each page, for docs/audit.md (test artifacts).
    verified(&addr).await;
    for (name, path) in [
        ("pictures", "/pictures".to_string()),
        ("calls", "/calls".to_string()),
        (
            "call-completed",
            format!("/call?id={}", calls.completed.call_id),
        ),
        ("call-edit", format!("/call?id={}", calls.edit.call_id)),
        (
            "call-hostile",
            format!("/call?id={}", calls.hostile.call_id),
        ),
        ("integrity", "/integrity".to_string()),
    ] {
        screenshot(&browser, &format!("http://{addr}{path}"), &profile, name);
    }
}
