//! Shared set-up of vak's `cargo bench` benchmarks (`benches/`): a host with the bundled tools
//! and the schemas the validator is measured on.
//!
//! ```text
//! cargo bench -p vak-bench                    # all of them (optimised build)
//! cargo bench -p vak-bench --bench schema     # one
//! cargo test --benches                        # a smoke run: each benchmark once (as CI does)
//! ```

use serde_json::{Value, json};
use vak_host::{Host, HostBuilder, Policy};

/// A tokio runtime and a host with the bundled tools under the built-in policy, no journal.
pub fn host() -> (tokio::runtime::Runtime, Host) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let host = rt
        .block_on(
            HostBuilder::new()
                .bundled_tools()
                .policy(Policy::default_policy())
                .build(),
        )
        .expect("host");
    (rt, host)
}

/// One schema with instances it accepts and refuses.
pub struct Case {
    pub name: &'static str,
    pub schema: Value,
    pub valid: Value,
    pub invalid: Value,
}

/// The schemas the validator is measured on: the bundled tools' input schemas (as admitted) and
/// larger ones (nested arrays of objects, enums, 60 properties in the schema's order and in the
/// reverse order).
pub fn cases(host: &Host) -> Vec<Case> {
    let schema_of = |tool: &str| {
        host.tool(tool)
            .map(|t| t.descriptor.input_schema.clone())
            .expect("a bundled tool")
    };
    let figure = |v: f64| json!({"name": "p99", "period": {"start": "2026-11-01", "end": "2026-11-30"}, "unit": "ms", "basis": "p99", "value": v});
    let wide_props: Map = (0..60)
        .map(|i| (format!("field_{i}"), json!({"type": if i % 3 == 0 { "integer" } else if i % 3 == 1 { "string" } else { "boolean" }})))
        .collect();
    let wide_valid: Map = (0..60)
        .map(|i| {
            (
                format!("field_{i}"),
                if i % 3 == 0 {
                    json!(i)
                } else if i % 3 == 1 {
                    json!("x")
                } else {
                    json!(true)
                },
            )
        })
        .collect();
    let mut wide_invalid = wide_valid.clone();
    wide_invalid.insert("field_0".into(), json!("not an integer"));
    wide_invalid.insert("field_59".into(), json!(1));
    let order = json!({
        "type": "object",
        "required": ["customer", "lines"],
        "additionalProperties": false,
        "properties": {
            "customer": {"type": "object", "required": ["id", "tier"], "properties": {
                "id": {"type": "integer"}, "tier": {"enum": ["free", "pro", "enterprise"]}}},
            "lines": {"type": "array", "items": {"type": "object", "required": ["sku", "qty"],
                "additionalProperties": false, "properties": {
                    "sku": {"type": "string"}, "qty": {"type": "integer"},
                    "tags": {"type": "array", "items": {"enum": ["gift", "fragile", "bulk"]}}}}}
        }
    });
    let wide_schema =
        json!({"type": "object", "required": ["field_0", "field_59"], "properties": wide_props});
    let wide = |name, arrange: fn(Map) -> Map| Case {
        name,
        schema: wide_schema.clone(),
        valid: Value::Object(arrange(wide_valid.clone())),
        invalid: Value::Object(arrange(wide_invalid.clone())),
    };
    let lines: Vec<Value> = (0..20)
        .map(|i| json!({"sku": format!("sku-{i}"), "qty": i, "tags": ["gift", "bulk"]}))
        .collect();
    let mut bad_lines = lines.clone();
    bad_lines[7]["qty"] = json!(1.5);
    bad_lines[13]["tags"] = json!(["gift", "perishable"]);
    vec![
        Case {
            name: "clock",
            schema: schema_of("clock"),
            valid: json!({"zone": "Europe/Paris"}),
            invalid: json!({"zone": 7}),
        },
        Case {
            name: "stats",
            schema: schema_of("stats"),
            valid: json!({"values": [4, 8, 15, 16, 23, 42]}),
            invalid: json!({"values": [4, "8", 15]}),
        },
        Case {
            name: "compare",
            schema: schema_of("compare"),
            valid: json!({"baseline": figure(120.0), "current": figure(96.0)}),
            invalid: json!({"baseline": figure(120.0), "current": {"name": 1}}),
        },
        Case {
            name: "order (nested arrays of objects, enums)",
            schema: order,
            valid: json!({"customer": {"id": 7, "tier": "pro"}, "lines": lines}),
            invalid: json!({"customer": {"id": 7, "tier": "gold"}, "lines": bad_lines}),
        },
        // The same 60-property arguments in four orders: the schema's, reversed, sorted by name
        // (field_0, field_1, field_10, …, as Go's encoding/json writes a map and JSON
        // canonicalization orders keys) and shuffled. An object of more than 8 names is looked
        // up through a perfect hash found at compile time, the same cost in any order; a
        // smaller one tries the name after the previous match first.
        wide("wide (60 properties)", |m| m),
        wide("wide, keys reversed", |m| m.into_iter().rev().collect()),
        wide("wide, keys sorted", sorted),
        wide("wide, keys shuffled", shuffled),
    ]
}

type Map = serde_json::Map<String, Value>;

/// `map`'s entries sorted by name.
fn sorted(map: Map) -> Map {
    let mut entries: Vec<(String, Value)> = map.into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.into_iter().collect()
}

/// `map`'s entries in a fixed pseudo-random order (a Fisher–Yates shuffle driven by an LCG).
fn shuffled(map: Map) -> Map {
    let mut entries: Vec<(String, Value)> = map.into_iter().collect();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    for i in (1..entries.len()).rev() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        entries.swap(i, (state >> 33) as usize % (i + 1));
    }
    entries.into_iter().collect()
}
