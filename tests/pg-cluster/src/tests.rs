use super::*;

/// A started cluster, or None (after printing why) when PostgreSQL is not installed here.
fn cluster_or_skip(test: &str) -> Option<Cluster> {
    if let Err(why) = available() {
        println!("skipping {test}: {why}");
        return None;
    }
    Some(Cluster::start().unwrap_or_else(|e| panic!("start: {e}")))
}

#[test]
fn start_stop_restart_drop() {
    let Some(cluster) = cluster_or_skip("start_stop_restart_drop") else {
        return;
    };
    assert_ne!(cluster.port(), 0);
    assert_eq!(
        cluster.url(),
        format!("postgres://vak@127.0.0.1:{}/vak", cluster.port())
    );
    assert_eq!(cluster.psql("select 1").unwrap(), "1");
    assert_eq!(
        cluster
            .psql("select current_user, current_database(), pg_encoding_to_char(encoding) from pg_database where datname = 'vak'")
            .unwrap(),
        "vak|vak|UTF8"
    );
    assert_eq!(
        cluster
            .psql("select pg_get_userbyid(datdba) from pg_database where datname = 'vak'")
            .unwrap(),
        "vak"
    );
    // Several statements, no command tags in the output; data survives a restart.
    assert_eq!(
        cluster
            .psql("create table t (n int); insert into t values (1), (2); select count(*) from t;")
            .unwrap(),
        "2"
    );
    let err = cluster.psql("select * from missing").unwrap_err();
    assert!(err.contains("missing"), "{err}");

    cluster.stop().unwrap();
    assert!(cluster.psql("select 1").is_err());
    cluster.restart().unwrap();
    assert_eq!(cluster.psql("select sum(n) from t").unwrap(), "3");

    let root = cluster.root.clone();
    assert!(root.is_dir());
    drop(cluster);
    assert!(!root.exists(), "{} left behind", root.display());
}

#[test]
fn clusters_side_by_side() {
    let Some(a) = cluster_or_skip("clusters_side_by_side") else {
        return;
    };
    let b = Cluster::start().unwrap();
    assert_ne!(a.port(), b.port());
    assert_ne!(a.root, b.root);
    a.psql("create table only_in_a ()").unwrap();
    assert!(b.psql("select * from only_in_a").is_err());
    // Dropping a running cluster stops it.
    let port = b.port();
    drop(b);
    assert!(
        std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err(),
        "the server still listens after drop"
    );
}

#[test]
fn restart_on_a_taken_port_quotes_the_log() {
    let Some(cluster) = cluster_or_skip("restart_on_a_taken_port_quotes_the_log") else {
        return;
    };
    cluster.stop().unwrap();
    let squatter = TcpListener::bind((Ipv4Addr::LOCALHOST, cluster.port())).unwrap();
    let err = cluster.restart().unwrap_err();
    assert!(err.contains("Address already in use"), "{err}");
    assert!(err.contains("server log"), "{err}");
    drop(squatter);
    cluster.restart().unwrap();
    assert_eq!(cluster.psql("select 1").unwrap(), "1");
}

#[test]
fn settings_are_passed_and_kept_across_a_restart() {
    if let Err(why) = available() {
        println!("skipping settings_are_passed_and_kept_across_a_restart: {why}");
        return;
    }
    let cluster = Cluster::start_with(&[
        ("shared_preload_libraries", "pg_stat_statements"),
        ("cluster_name", "it's a test"),
    ])
    .unwrap_or_else(|e| panic!("start_with: {e}"));
    cluster.psql("CREATE EXTENSION pg_stat_statements").unwrap();
    let count = cluster
        .psql("SELECT count(*) FROM pg_stat_statements")
        .unwrap();
    assert!(count.parse::<u64>().is_ok(), "{count}");
    assert_eq!(
        cluster.psql("SHOW cluster_name").unwrap(),
        "it's a test",
        "a quote in a value survives the shell"
    );
    cluster.stop().unwrap();
    cluster.restart().unwrap();
    assert_eq!(
        cluster.psql("SHOW shared_preload_libraries").unwrap(),
        "pg_stat_statements"
    );
    cluster.psql("SELECT pg_stat_statements_reset()").unwrap();
}

#[test]
fn bad_setting_names_are_refused() {
    for name in ["", "a b", "x=y", "port;rm"] {
        let err = Cluster::start_with(&[(name, "1")]).unwrap_err();
        assert!(err.contains("not a PostgreSQL setting name"), "{err}");
    }
    assert!(setting_name_is_valid("pg_stat_statements.track"));
    assert_eq!(shell_quote("it's"), r"'it'\''s'");
}

#[test]
fn missing_binaries_are_explained() {
    let dir = std::env::temp_dir();
    let missing = missing_tools(&dir).unwrap();
    assert!(missing.contains("initdb"), "{missing}");
}
