use super::values::{memory_bytes, origin_of, root_name, root_path};
use super::*;
use std::path::Path;
use vak_host::Policy;
use vak_host::policy::RootMode;

/// Wassette's examples, in the shared test data beside the worktree.
const EXAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/byo/wassette-8940e27"
);

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A test that cannot run says why, unless `VAK_REQUIRE_ALL` is set: then it fails.
fn skipped(why: &str) {
    if std::env::var_os("VAK_REQUIRE_ALL").is_some_and(|v| !v.is_empty()) {
        panic!("VAK_REQUIRE_ALL is set and this test could not run: {why}");
    }
    eprintln!("SKIPPED: {why}");
}

fn example(name: &str) -> Option<String> {
    let path = Path::new(EXAMPLES).join(name).join("policy.yaml");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) => {
            skipped(&format!("{} is not readable: {e}", path.display()));
            None
        }
    }
}

fn table(t: &Translation) -> toml::Table {
    toml::from_str(&t.toml).unwrap_or_else(|e| panic!("not TOML: {e}\n{}", t.toml))
}

/// The translation as vak's policy parser reads it, whole.
fn vak_policy(t: &Translation) -> Policy {
    Policy::parse(&t.toml, "imported").unwrap_or_else(|e| panic!("{e}\n{}", t.toml))
}

/// The table of `tool`, as TOML.
fn tool<'a>(table: &'a toml::Table, tool: &str) -> &'a toml::Table {
    table["tools"][tool]
        .as_table()
        .unwrap_or_else(|| panic!("no [tools.{tool}]"))
}

fn origins(policy: &Policy, tool: &str) -> Vec<String> {
    let http = policy.grant(tool).and_then(|g| g.http());
    http.map(|h| h.origins.iter().map(|o| o.text.clone()).collect())
        .unwrap_or_default()
}

fn roots(policy: &Policy, tool: &str) -> Vec<(String, String, RootMode)> {
    let grant = policy.grant(tool).expect("the tool is granted");
    grant
        .roots()
        .iter()
        .map(|r| (r.name.clone(), r.path.display().to_string(), r.mode))
        .collect()
}

#[test]
fn every_example_policy_becomes_a_policy_vak_parses_with_one_table_per_tool() {
    let Ok(dirs) = std::fs::read_dir(EXAMPLES) else {
        return skipped(&format!("{EXAMPLES} is not readable"));
    };
    let mut seen = 0;
    for dir in dirs.flatten() {
        let path = dir.path().join("policy.yaml");
        let Ok(yaml) = std::fs::read_to_string(&path) else {
            continue;
        };
        let t = translate(&yaml, &names(&["first", "second"]))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let parsed = table(&t);
        assert_eq!(tool(&parsed, "first"), tool(&parsed, "second"));
        let policy = vak_policy(&t);
        assert_eq!(policy.tools.keys().collect::<Vec<_>>(), ["first", "second"]);
        seen += 1;
    }
    assert!(seen >= 4, "only {seen} example policies in {EXAMPLES}");
}

#[test]
fn fetch_rs_url_becomes_its_origin() {
    let Some(yaml) = example("fetch-rs") else {
        return;
    };
    let t = translate(&yaml, &names(&["fetch"])).unwrap();
    assert!(t.untranslated.is_empty(), "{:?}", t.untranslated);
    assert_eq!(
        origins(&vak_policy(&t), "fetch"),
        ["https://rss.nytimes.com"]
    );
    assert!(
        t.toml
            .contains("# Its description: Permission policy for wassette weather demo")
    );
    // A URL names its scheme: no note about plain http.
    assert!(!t.toml.contains("plain http"), "{}", t.toml);
}

#[test]
fn filesystem_rs_nested_roots_become_the_outermost_root() {
    let Some(yaml) = example("filesystem-rs") else {
        return;
    };
    let t = translate(&yaml, &names(&["list-directory"])).unwrap();
    assert!(t.untranslated.is_empty(), "{:?}", t.untranslated);
    let policy = vak_policy(&t);
    assert_eq!(
        roots(&policy, "list-directory"),
        [("root".to_string(), "/".to_string(), RootMode::ReadOnly)]
    );
    assert!(
        t.toml
            .contains("preopens each root for a foreign component at its host path")
    );
    assert!(
        t.toml
            .contains("fs:///Users/USERNAME is inside fs:///, granted once")
    );
}

#[test]
fn get_weather_js_bare_host_is_https_and_its_key_comes_from_the_environment() {
    let Some(yaml) = example("get-weather-js") else {
        return;
    };
    let t = translate(&yaml, &names(&["get-weather"])).unwrap();
    assert!(t.untranslated.is_empty(), "{:?}", t.untranslated);
    let policy = vak_policy(&t);
    assert_eq!(
        origins(&policy, "get-weather"),
        ["https://api.openweathermap.org"]
    );
    assert!(t.toml.contains("add \"http://HOST\" to `origins` by hand"));
    let parsed = table(&t);
    let keys = &tool(&parsed, "get-weather")["capabilities"]["environment"]["keys"];
    assert_eq!(
        keys.as_table().unwrap().keys().collect::<Vec<_>>(),
        ["OPENWEATHER_API_KEY"]
    );
    assert_eq!(
        keys["OPENWEATHER_API_KEY"]["env"].as_str(),
        Some("OPENWEATHER_API_KEY")
    );
    assert!(t.toml.contains("{ secret = \"name\" }"));
    // vak's parser reads the key as the environment grant.
    let grant = policy.grant("get-weather").unwrap();
    assert_eq!(grant.environment.len(), 1);
    assert_eq!(grant.environment[0].key, "OPENWEATHER_API_KEY");
}

#[test]
fn time_server_js_grants_nothing() {
    let Some(yaml) = example("time-server-js") else {
        return;
    };
    let t = translate(&yaml, &names(&["get-current-time"])).unwrap();
    assert!(t.untranslated.is_empty(), "{:?}", t.untranslated);
    let policy = vak_policy(&t);
    let grant = policy.grant("get-current-time").expect("granted");
    assert!(grant.capabilities.is_empty());
    assert_eq!(grant.caps.memory_bytes, None);
}

const EVERY_FEATURE: &str = r#"
version: "1.0"
description: "every feature\nsecond line \u001b[31m"
owner: someone
permissions:
  network:
    allow:
      - host: "https://api.example.com/v1/"
      - host: "api.example.com"
      - host: "https://API.example.com:443/"
      - host: "http://plain.example.com:8080"
      - host: "*.example.org"
      - cidr: "10.0.0.0/8"
      - defaults: true
      - host: "ftp://files.example.com"
    deny:
      - host: "evil.example.com"
  storage:
    allow:
      - uri: "fs:///srv/data/**"
        access: ["read"]
      - uri: "fs:///srv/data/cache"
        access: ["read", "write"]
      - uri: "fs:///var/out/"
        access: ["write"]
      - uri: "fs:///var/Logs Dir"
        access: ["read"]
      - uri: "fs:///home/a/data"
        access: ["read", "write"]
      - uri: "fs://workspace/**"
        access: ["read"]
      - uri: "s3://bucket/x"
        access: ["read"]
    deny: []
  environment:
    allow:
      - key: "API_KEY"
      - key: "API_KEY"
      - key: "weird.key"
      - key: "SECRET_*"
  resources:
    limits:
      memory: "1.5Gi"
      cpu: "500m"
  runtime:
    docker: {}
  ipc:
    allow:
      - uri: "pipe://x"
"#;

#[test]
fn a_policy_with_every_feature_is_translated_or_listed_part_by_part() {
    let t = translate(EVERY_FEATURE, &names(&["a", "b"])).unwrap();
    let parsed = table(&t);
    assert_eq!(tool(&parsed, "a"), tool(&parsed, "b"));
    let policy = vak_policy(&t);
    assert_eq!(
        origins(&policy, "a"),
        [
            "https://api.example.com/v1/",
            "https://api.example.com",
            "http://plain.example.com:8080"
        ]
    );
    let rw = RootMode::ReadWrite;
    let ro = RootMode::ReadOnly;
    let root = |n: &str, p: &str, m| (n.to_string(), p.to_string(), m);
    assert_eq!(
        roots(&policy, "b"),
        [
            root("data", "/srv/data", ro),
            root("out", "/var/out", rw),
            root("logs-dir", "/var/Logs Dir", ro),
            root("data-2", "/home/a/data", rw),
        ]
    );
    assert_eq!(
        policy.grant("a").unwrap().caps.memory_bytes,
        Some(1_610_612_736)
    );
    let keys = &tool(&parsed, "a")["capabilities"]["environment"]["keys"];
    assert_eq!(
        keys.as_table().unwrap().keys().collect::<Vec<_>>(),
        ["API_KEY", "weird.key"]
    );
    assert_eq!(keys["weird.key"]["env"].as_str(), Some("weird.key"));

    // Each part with no equivalent is listed once, and written as a comment at the top.
    let expected = [
        "*.example.org",
        "10.0.0.0/8",
        "network defaults",
        "\"ftp\" is not http or https",
        "network.deny (1 entry): vak is deny by default",
        "\"fs:///var/out/\": write-only access",
        "\"fs:///srv/data/cache\": read-write inside \"fs:///srv/data/**\"",
        "\"fs://workspace/**\": not an absolute path",
        "\"s3://bucket/x\": not an fs:// URI",
        "\"SECRET_*\": not a variable name",
        "limits.cpu \"500m\": vak meters fuel and wall time",
        "permissions.runtime",
        "permissions.ipc",
        "`owner`",
    ];
    for needle in expected {
        let found = t.untranslated.iter().filter(|u| u.contains(needle)).count();
        assert_eq!(found, 1, "{needle:?} in {:#?}", t.untranslated);
    }
    assert_eq!(
        t.untranslated.len(),
        expected.len(),
        "{:#?}",
        t.untranslated
    );
    let header = t.toml.split("\n[tools.").next().unwrap_or_default();
    for what in &t.untranslated {
        assert!(
            header.contains(&format!("# not translated: {}\n", values::comment(what))),
            "{what}\n{}",
            t.toml
        );
    }
    // The description is one comment line; nothing in the text acts on a terminal.
    assert!(
        t.toml
            .contains("# Its description: every feature\\u{a}second line \\u{1b}[31m\n")
    );
    assert_eq!(super::super::render::neutralise(&t.toml), t.toml);
}

#[test]
fn empty_deny_lists_and_null_sections_lose_nothing() {
    let yaml = "version: '1.0'\npermissions:\n  network:\n    allow:\n      - host: a.example\n    deny: []\n  storage:\n  environment: {}\n";
    let t = translate(yaml, &names(&["x"])).unwrap();
    assert!(t.untranslated.is_empty(), "{:?}", t.untranslated);
    assert_eq!(origins(&vak_policy(&t), "x"), ["https://a.example"]);
}

#[test]
fn quotes_backslashes_and_hidden_characters_in_paths_survive_exactly() {
    let yaml = "version: 1.0\npermissions:\n  storage:\n    allow:\n      - uri: \"fs:///srv/we\\\"ird\\\\\\u202Edir\"\n        access: [read]\n";
    let t = translate(yaml, &names(&["x"])).unwrap();
    assert_eq!(super::super::render::neutralise(&t.toml), t.toml);
    let policy = vak_policy(&t);
    assert_eq!(
        roots(&policy, "x"),
        [(
            "we-ird-dir".to_string(),
            "/srv/we\"ird\\\u{202e}dir".to_string(),
            RootMode::ReadOnly
        )]
    );
}

#[test]
fn what_is_not_a_wassette_policy_is_an_error_that_says_why() {
    let err = |yaml: &str| translate(yaml, &names(&["x"])).expect_err(yaml).to_string();
    assert!(err("version: '1.0'\npermissions: [\n").starts_with("not YAML"));
    assert!(err("- a\n- b\n").contains("the document is a list"));
    assert!(err("").contains("the file is empty"));
    assert!(err("apiVersion: v1\nkind: Pod\n").contains("no `version` or no `permissions`"));
    assert!(err("version: '2.0'\npermissions: {}\n").contains("policy format 1.x"));
    assert!(err("1: x\nversion: '1.0'\npermissions: {}\n").contains("not text"));
    assert!(err("version: '1.0'\npermissions: 3\n").contains("`permissions` is a number"));
    // A typo is an error that names where it is, not a grant dropped in silence.
    let typo =
        err("version: '1.0'\npermissions:\n  network:\n    alow:\n      - host: a.example\n");
    assert!(
        typo.contains("permissions.network") && typo.contains("`alow`"),
        "{typo}"
    );
    let typo =
        err("version: '1.0'\npermissions:\n  network:\n    allow:\n      - hots: a.example\n");
    assert!(typo.contains("`hots`"), "{typo}");
    let typo = err(
        "version: '1.0'\npermissions:\n  storage:\n    allow:\n      - uri: fs:///a\n        access: [execute]\n",
    );
    assert!(
        typo.contains("permissions.storage") && typo.contains("execute"),
        "{typo}"
    );
    let two = err(
        "version: '1.0'\npermissions:\n  network:\n    allow:\n      - host: a.example\n        cidr: 10.0.0.0/8\n",
    );
    assert!(two.contains("allow[0]: give one of"), "{two}");
    let big = "#".repeat(MAX_YAML_BYTES + 1);
    assert!(matches!(
        translate(&big, &names(&["x"])),
        Err(ImportError::TooLarge { .. })
    ));
}

#[test]
fn tool_names_follow_the_admission_rule_and_are_named_once() {
    let yaml = "version: '1.0'\npermissions: {}\n";
    let result = |tools: &[&str]| translate(yaml, &names(tools)).map(|_| ());
    assert!(matches!(result(&[]), Err(ImportError::NoTools)));
    let long = "a".repeat(65);
    for bad in ["Fetch", "", "a b", "a.b", long.as_str()] {
        assert!(
            matches!(result(&[bad]), Err(ImportError::BadToolName(_))),
            "{bad:?}"
        );
    }
    assert!(matches!(
        result(&["ok", "ok"]),
        Err(ImportError::DuplicateTool(_))
    ));
    let longest = "z".repeat(64);
    assert!(result(&["get-current-time", "a_1", longest.as_str()]).is_ok());
}

#[test]
fn memory_figures_are_read_as_kubernetes_writes_them() {
    let bytes = |s: &str| memory_bytes(&Value::String(s.into()));
    assert_eq!(bytes("512Mi"), Ok(512 << 20));
    assert_eq!(bytes("1Gi"), Ok(1 << 30));
    assert_eq!(bytes("100M"), Ok(100_000_000));
    assert_eq!(bytes("64k"), Ok(64_000));
    assert_eq!(bytes("1.5Gi"), Ok(1_610_612_736));
    assert_eq!(bytes("0.5Ki"), Ok(512));
    for bad in [
        "512",
        "5m",
        "1.1",
        "0.0001Ki",
        "0Mi",
        "Mi",
        "1..5Mi",
        "99999999999Ti",
        "1 Mi",
    ] {
        assert!(bytes(bad).is_err(), "{bad:?}");
    }
    assert!(memory_bytes(&Value::Number(512.into())).is_err());
}

#[test]
fn hosts_become_origins_and_paths_become_absolute_roots() {
    assert_eq!(
        origin_of("https://rss.nytimes.com/"),
        Ok(("https://rss.nytimes.com".into(), false))
    );
    assert_eq!(
        origin_of("api.openweathermap.org"),
        Ok(("https://api.openweathermap.org".into(), true))
    );
    assert_eq!(
        origin_of("HTTPS://API.Example.com/Path/"),
        Ok(("https://api.example.com/Path/".into(), false))
    );
    assert_eq!(
        origin_of("localhost:8080"),
        Ok(("https://localhost:8080".into(), true))
    );
    for bad in [
        "*.x.com",
        "https://u@x.com",
        "https://x.com/?q=1",
        "ws://x.com",
        "a b",
    ] {
        assert!(origin_of(bad).is_err(), "{bad:?}");
    }
    let path = |u: &str| root_path(u).map(|p| p.display().to_string());
    assert_eq!(path("fs:///"), Ok("/".into()));
    assert_eq!(path("fs:///**"), Ok("/".into()));
    assert_eq!(path("fs:///a//b/"), Ok("/a/b".into()));
    assert_eq!(path("fs:///a/b/**"), Ok("/a/b".into()));
    for bad in [
        "fs://rel/path",
        "fs:///a/*",
        "fs:///a/../b",
        "file:///a",
        "/a",
    ] {
        assert!(root_path(bad).is_err(), "{bad:?}");
    }
    assert_eq!(root_name(Path::new("/")), "root");
    assert_eq!(root_name(Path::new("/Users/USERNAME")), "username");
    assert_eq!(root_name(Path::new("/a/My Docs!")), "my-docs");
    assert_eq!(root_name(Path::new("/a/日本")), "dir");
}
