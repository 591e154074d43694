//! A declaration and the schema stage agree (issue 32): for every provider, a call that
//! conforms to the declaration vak hands it passes vak's schema stage, and the declaration
//! refuses what the schema stage refuses. Checked as a property over the schemas of every
//! bundled tool and test guest, of a zoo of Rust argument types (schemars, as the guest SDK
//! derives them), and of generated schemas (nested objects, arrays of objects, enums with data,
//! optional fields of every type, `$defs`), with instances generated from the declaration and
//! from the admitted schema, and mutations of both (`vak_tests::jsonschema`). The declarations
//! `vak tools --for` prints are also read with each provider's official Python SDK types.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use vak_host::proposal::providers::{Provider, declaration};
use vak_host::schema::CompiledSchema;
use vak_tests::jsonschema::{OneOf, Rng, generate, mutate, nudge, valid};
use vak_tests::{bundled, guest, guests, vak_binary};

/// The providers whose declarations are compared (MCP's is the admitted schema itself).
const PROVIDERS: [Provider; 5] = Provider::ALL;

/// The schema a provider checks calls against, in its declaration entry.
fn declared_schema(provider: Provider, entry: &Value) -> &Value {
    match provider {
        Provider::OpenAiChat => &entry["function"]["parameters"],
        Provider::OpenAiResponses => &entry["parameters"],
        Provider::Anthropic => &entry["input_schema"],
        Provider::Gemini => &entry["parametersJsonSchema"],
        Provider::Mcp => &entry["inputSchema"],
    }
}

/// What one comparison saw, to show that the checks were not vacuous.
#[derive(Default, Debug)]
struct Seen {
    from_declaration: usize,
    from_admitted: usize,
    mutants_refused_by_stage: usize,
    mutants_accepted_by_declaration: usize,
}

/// `v` with a `null` for every property the strict declaration `schema` requires and `v` lacks
/// (the declaration's notes say so: "send null to omit it"), following the branch of an
/// `anyOf` that the filled value fits.
fn fill_nulls(schema: &Value, root: &Value, v: &Value, depth: usize) -> Value {
    let Some(o) = schema.as_object() else {
        return v.clone();
    };
    if depth > 40 {
        return v.clone();
    }
    if let Some(r) = o.get("$ref").and_then(Value::as_str)
        && let Some(target) = r.strip_prefix('#').and_then(|p| root.pointer(p))
    {
        return fill_nulls(target, root, v, depth + 1);
    }
    if let Some(Value::Array(branches)) = o.get("anyOf") {
        for b in branches {
            let filled = fill_nulls(b, root, v, depth + 1);
            if valid(b, root, &filled, OneOf::Exactly) {
                return filled;
            }
        }
        return v.clone();
    }
    match v {
        Value::Object(m) => {
            let props = o.get("properties").and_then(Value::as_object);
            let mut out = Map::new();
            for (k, x) in m {
                let filled = match props.and_then(|p| p.get(k)) {
                    Some(s) => fill_nulls(s, root, x, depth + 1),
                    None => x.clone(),
                };
                out.insert(k.clone(), filled);
            }
            for r in o
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                out.entry(r.to_string()).or_insert(Value::Null);
            }
            Value::Object(out)
        }
        Value::Array(items) => match o.get("items") {
            Some(s) => Value::Array(
                items
                    .iter()
                    .map(|x| fill_nulls(s, root, x, depth + 1))
                    .collect(),
            ),
            None => v.clone(),
        },
        _ => v.clone(),
    }
}

/// Compare `provider`'s declaration of `schema` with the schema stage, over `rounds` instances
/// from `seed`. Err: what disagreed, with the instance.
fn agree(
    label: &str,
    schema: &Value,
    provider: Provider,
    seed: u64,
    rounds: usize,
    seen: &mut Seen,
) -> Result<(), String> {
    let stage = CompiledSchema::compile(schema).map_err(|e| format!("{label}: {e}"))?;
    let decl = declaration(provider, label, "d", schema);
    let declared = declared_schema(provider, &decl.entry);
    let one_of = if provider == Provider::Gemini {
        OneOf::AsAnyOf
    } else {
        OneOf::Exactly
    };
    let mut rng = Rng::new(seed);
    let p = provider.name();
    let say = |what: &str, v: &Value| {
        format!(
            "{label} for {p} (strict: {}): {what}\n  instance: {v}\n  declared: {declared}\n  admitted: {schema}\n  notes: {:?}",
            decl.strict, decl.notes
        )
    };
    for _ in 0..rounds {
        let mut tried = Vec::new();
        // A: what conforms to the declaration passes the schema stage.
        if let Some(x) = generate(declared, declared, &mut rng)
            && valid(declared, declared, &x, one_of)
        {
            seen.from_declaration += 1;
            if !stage.is_valid(&x) {
                return Err(say(
                    "conforms to the declaration; refused by the schema stage",
                    &x,
                ));
            }
            tried.push(x);
        }
        // B: what conforms to the admitted schema conforms to the declaration (a strict one
        // asks for null where an optional property is omitted).
        if let Some(a) = generate(schema, schema, &mut rng)
            && valid(schema, schema, &a, OneOf::Exactly)
        {
            seen.from_admitted += 1;
            if !stage.is_valid(&a) {
                return Err(say(
                    "conforms to the admitted schema; refused by the schema stage",
                    &a,
                ));
            }
            let a = if decl.strict {
                fill_nulls(declared, declared, &a, 0)
            } else {
                a
            };
            if !valid(declared, declared, &a, one_of) {
                return Err(say(
                    "conforms to the admitted schema; refused by the declaration",
                    &a,
                ));
            }
            if !stage.is_valid(&a) {
                return Err(say(
                    "with nulls for omitted properties: refused by the schema stage",
                    &a,
                ));
            }
            tried.push(a);
        }
        // C: what the schema stage refuses, the declaration refuses: a value of another type,
        // or one past a bound (a strict declaration keeps the bounds the stage enforces).
        let changes: [fn(&Value, &mut Rng) -> Value; 2] = [mutate, nudge];
        for (t, change) in tried
            .iter()
            .flat_map(|t| changes.iter().map(move |c| (t, c)))
        {
            let m = change(t, &mut rng);
            let stage_ok = stage.is_valid(&m);
            let decl_ok = valid(declared, declared, &m, one_of);
            seen.mutants_refused_by_stage += usize::from(!stage_ok);
            seen.mutants_accepted_by_declaration += usize::from(decl_ok);
            if decl_ok && !stage_ok {
                return Err(say(
                    "the schema stage refuses it; the declaration allows it",
                    &m,
                ));
            }
        }
    }
    Ok(())
}

// ---- A zoo of Rust argument types, with their schemas as the guest SDK derives them. ----

mod zoo {
    #![allow(dead_code)]
    use schemars::JsonSchema;
    use serde::Deserialize;
    use std::collections::BTreeMap;

    /// Every scalar optional, the usual way (`Option<T>`).
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Optionals {
        pub s: Option<String>,
        pub small: Option<u8>,
        pub n: Option<i64>,
        pub f: Option<f64>,
        pub b: Option<bool>,
        pub list: Option<Vec<u32>>,
        pub point: Option<Point>,
        pub level: Option<Level>,
    }

    /// Optional with `#[serde(default)]`: absent is allowed, null is not.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Defaults {
        pub word: String,
        #[serde(default)]
        pub upper: bool,
        #[serde(default)]
        pub tags: Vec<String>,
        #[serde(default)]
        pub times: u32,
        #[serde(default)]
        pub note: Option<String>,
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Point {
        pub x: i32,
        pub y: i32,
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    pub enum Level {
        Low,
        High,
    }

    /// Externally tagged enum with data.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub enum Shape {
        Dot,
        Circle { radius: f64 },
        Square { side: u16 },
        Path(Vec<Point>),
    }

    /// Internally tagged.
    #[derive(Deserialize, JsonSchema)]
    #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
    pub enum Event {
        Start { at: String },
        Stop { at: String, code: Option<i32> },
    }

    /// Adjacently tagged.
    #[derive(Deserialize, JsonSchema)]
    #[serde(tag = "t", content = "c", deny_unknown_fields)]
    pub enum Message {
        Text(String),
        Count(u64),
    }

    /// Untagged.
    #[derive(Deserialize, JsonSchema)]
    #[serde(untagged)]
    pub enum Either {
        Number(f64),
        Words(Vec<String>),
    }

    /// Nested objects, arrays of objects and enums through `$defs`, all required: strict.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Drawing {
        pub title: String,
        pub shapes: Vec<Shape>,
        pub origin: Point,
        pub level: Level,
        pub events: Vec<Event>,
        pub message: Message,
        pub either: Either,
        pub maybe: Option<Shape>,
    }

    /// Recursive.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Tree {
        pub name: String,
        pub children: Vec<Tree>,
    }

    /// Things strict mode cannot say: a map, any JSON value, unknown fields allowed.
    #[derive(Deserialize, JsonSchema)]
    pub struct Loose {
        pub counts: BTreeMap<String, u32>,
        pub anything: serde_json::Value,
        pub opt_any: Option<serde_json::Value>,
    }
}

fn zoo_schemas() -> Vec<(&'static str, Value)> {
    use vak_guest::input_schema;
    vec![
        ("zoo:optionals", input_schema::<zoo::Optionals>()),
        ("zoo:defaults", input_schema::<zoo::Defaults>()),
        ("zoo:drawing", input_schema::<zoo::Drawing>()),
        ("zoo:tree", input_schema::<zoo::Tree>()),
        ("zoo:loose", input_schema::<zoo::Loose>()),
        ("zoo:event", input_schema::<zoo::Event>()),
    ]
}

/// The components whose schemas are compared: every bundled tool and the test guests that
/// take arguments.
fn components() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = vak_host::bundled::TOOLS
        .iter()
        .map(|(n, b)| (format!("bundled:{n}"), b.to_vec()))
        .collect();
    for (name, path) in [
        ("echo", guests::ECHO),
        ("shapes", guests::SHAPES),
        ("fetcher", guests::FETCHER),
        ("hostile", guests::HOSTILE),
        ("files", guests::FILES),
        ("parent", guests::PARENT),
        ("conf_elicitation", guests::CONF_ELICITATION),
        ("conf_sampling", guests::CONF_SAMPLING),
        ("conf_simple_text", guests::CONF_SIMPLE_TEXT),
    ] {
        out.push((format!("guest:{name}"), guest(path)));
    }
    out
}

async fn tool_schemas(cache: &Path) -> Vec<(String, Value)> {
    let host = vak_host::HostBuilder::new()
        .policy(vak_host::Policy::deny_all())
        .cache_dir(Some(cache.to_path_buf()))
        .build()
        .await
        .expect("host builds");
    let mut out = Vec::new();
    for (source, bytes) in components() {
        let exam = host.examine(&source, &bytes).await;
        let d = exam
            .descriptor
            .unwrap_or_else(|| panic!("{source} describes itself: {:?}", exam.verdict));
        out.push((source, d.input_schema));
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn every_tool_and_zoo_schema_agrees_with_each_declaration() {
    let cache = tempfile::tempdir().unwrap();
    let mut schemas = tool_schemas(cache.path()).await;
    schemas.extend(zoo_schemas().into_iter().map(|(n, s)| (n.to_string(), s)));
    let mut seen = Seen::default();
    let mut strict: HashMap<String, bool> = HashMap::new();
    for (label, schema) in &schemas {
        for provider in PROVIDERS {
            for seed in 0..8u64 {
                if let Err(e) = agree(label, schema, provider, seed, 32, &mut seen) {
                    panic!("{e}");
                }
            }
        }
        let d = declaration(Provider::OpenAiChat, label, "d", schema);
        println!("{label}: strict {}: {:?}", d.strict, d.notes);
        strict.insert(label.clone(), d.strict);
    }
    println!("{seen:?}");
    assert!(
        seen.from_declaration > 1000 && seen.from_admitted > 1000,
        "{seen:?}"
    );
    assert!(seen.mutants_refused_by_stage > 500, "{seen:?}");
    // Strict where the schema allows it, and not where it cannot be said exactly.
    for (label, expected) in [
        ("bundled:clock", true),
        ("bundled:stats", true),
        ("bundled:compare", true),
        ("zoo:optionals", true),
        ("zoo:drawing", true),
        ("zoo:tree", true),
        ("guest:shapes", false),
        ("guest:fetcher", false),
        ("zoo:defaults", false),
        ("zoo:loose", false),
    ] {
        assert_eq!(strict.get(label), Some(&expected), "{label} strict");
    }
}

// ---- Generated schemas. ----

fn name() -> impl Strategy<Value = String> {
    "[a-e]{1,2}"
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"type": "string"})),
        Just(json!({"type": "integer", "format": "uint8", "minimum": 0, "maximum": 255})),
        Just(json!({"type": "integer", "format": "int64"})),
        // As WIT-derived schemas write a `char`, a `u64` and a `tuple<u8, string>`.
        Just(json!({"type": "string", "minLength": 1, "maxLength": 1})),
        Just(json!({"type": "integer", "minimum": 0, "maximum": u64::MAX})),
        Just(json!({"type": "array", "prefixItems": [
            {"type": "integer", "minimum": 0, "maximum": 255}, {"type": "string"}],
            "items": false, "minItems": 2, "maxItems": 2})),
        Just(json!({"type": "number", "format": "double"})),
        Just(json!({"type": "boolean"})),
        Just(json!({"type": "null"})),
        prop::collection::vec("[a-c]{1,2}", 1..4)
            .prop_map(|e| json!({"type": "string", "enum": e})),
        "[a-z]{1,3}".prop_map(|c| json!({"type": "string", "const": c})),
        Just(json!({"$ref": "#/$defs/Leaf"})),
        Just(json!({"$ref": "#/$defs/Pair", "description": "a sibling of $ref"})),
        Just(json!(true)),
    ]
}

/// An object schema over `inner` property schemas: each property required or optional (with no
/// default, a null default or another default), unknown properties refused, allowed, or absent.
fn object(inner: BoxedStrategy<Value>) -> impl Strategy<Value = Value> {
    (prop::collection::vec((name(), inner, 0..4u8), 0..4), 0..3u8).prop_map(|(props, extra)| {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for (n, mut s, how) in props {
            match how {
                0 => required.push(Value::String(n.clone())),
                1 => {}
                2 => {
                    if let Value::Object(o) = &mut s {
                        o.insert("default".into(), Value::Null);
                    }
                }
                _ => {
                    if let Value::Object(o) = &mut s {
                        o.insert("default".into(), json!(false));
                    }
                }
            }
            properties.insert(n, s);
        }
        required.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
        required.dedup();
        let mut o = json!({"type": "object", "properties": properties, "required": required});
        match extra {
            0 => o["additionalProperties"] = json!(false),
            1 => o["additionalProperties"] = json!(true),
            _ => {}
        }
        o
    })
}

fn nullable(s: Value) -> Value {
    match &s {
        Value::Object(o) => match o.get("type") {
            Some(Value::String(t)) if t != "null" => {
                let mut o = o.clone();
                o.insert("type".into(), json!([t, "null"]));
                Value::Object(o)
            }
            _ => json!({"anyOf": [s, {"type": "null"}]}),
        },
        _ => json!({"anyOf": [s, {"type": "null"}]}),
    }
}

fn schema() -> impl Strategy<Value = Value> {
    let node = leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(nullable),
            inner
                .clone()
                .prop_map(|i| json!({"type": "array", "items": i})),
            object(inner.clone().boxed()),
            prop::collection::vec(inner.clone(), 1..4).prop_map(|b| json!({"anyOf": b})),
            // An enum with data: one object per variant, as schemars writes it (a variant's
            // name is its own: serde reads no two the same).
            prop::collection::btree_map(name(), inner, 1..4).prop_map(|vs| {
                let variants: Vec<Value> = vs
                    .into_iter()
                    .map(|(n, s)| {
                        json!({"type": "object", "properties": {n.clone(): s},
                        "required": [n], "additionalProperties": false})
                    })
                    .collect();
                json!({"oneOf": variants})
            }),
        ]
    });
    object(node.boxed()).prop_map(|mut root| {
        root["$defs"] = json!({
            "Leaf": {"type": "integer", "format": "uint32", "minimum": 0},
            "Pair": {"type": "object", "properties": {"a": {"type": "string"},
                "b": {"type": ["integer", "null"]}}, "required": ["a"], "additionalProperties": false}
        });
        root["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
        root
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn generated_schemas_agree_with_each_declaration(s in schema(), seed in any::<u64>()) {
        let mut seen = Seen::default();
        for provider in PROVIDERS {
            if let Err(e) = agree("generated", &s, provider, seed, 16, &mut seen) {
                prop_assert!(false, "{}", e);
            }
        }
    }
}

// ---- The official SDKs' types. ----

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Skip with a message, or fail where the environment requires every external toolchain.
fn skip_or_fail(what: &str) {
    for switch in ["VAK_REQUIRE_ALL", "VAK_REQUIRE_PROVIDER_SDKS"] {
        if std::env::var_os(switch).is_some_and(|v| v != "0") {
            panic!("{switch} is set and {what}");
        }
    }
    eprintln!(
        "SKIPPED: {what}; run tests/clients/install.sh (as .ci/run does) to check declarations against the provider SDKs"
    );
}

#[test]
fn declarations_are_what_each_providers_sdk_types_take() {
    let python = std::env::var_os("VAK_PROVIDER_SDKS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/provider-sdks"))
        .join("venv/bin/python");
    if !python.is_file() {
        return skip_or_fail(
            "the provider SDKs (openai, anthropic, google-genai) are not installed",
        );
    }
    // The real command's output, over bundled tools and test guests under a policy granting them.
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    for name in ["clock", "stats", "compare"] {
        std::fs::write(tools.join(format!("{name}.wasm")), bundled(name)).unwrap();
    }
    std::fs::write(tools.join("shapes.wasm"), guest(guests::SHAPES)).unwrap();
    std::fs::write(tools.join("echo.wasm"), guest(guests::ECHO)).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[tools.clock]\ncapabilities.clock = { zones = [\"*\"] }\n[tools.stats]\n[tools.compare]\n\
         [tools.shapes]\n[tools.echo]\ncapabilities.clock = { zones = [\"UTC\"] }\n",
    )
    .unwrap();
    let mut docs = Map::new();
    for provider in ["openai-chat", "openai-responses", "anthropic", "gemini"] {
        let out = std::process::Command::new(vak_binary())
            .arg("--tools")
            .arg(&tools)
            .arg("--policy")
            .arg(&policy)
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .args(["--no-journal", "tools", "--for", provider])
            .output()
            .expect("run vak tools --for");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert!(
            doc["tools"].as_array().is_some_and(|t| !t.is_empty()),
            "{doc}"
        );
        // And the zoo's declarations, made by the same function (each with an object at the
        // root, as a tool's arguments are: Anthropic takes nothing else, and says so).
        for (label, schema) in zoo_schemas() {
            if schema["type"] != "object" {
                continue;
            }
            let p = Provider::from_name(provider).expect("a provider");
            let entry = declaration(p, &label.replace(':', "_"), "d", &schema).entry;
            match p {
                Provider::Gemini => doc["tools"][0]["functionDeclarations"]
                    .as_array_mut()
                    .expect("declarations")
                    .push(entry),
                _ => doc["tools"].as_array_mut().expect("tools").push(entry),
            }
        }
        docs.insert(provider.to_string(), doc);
    }
    let mut child = std::process::Command::new(python)
        .arg(workspace().join("tests/clients/provider_sdks.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the SDK check");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(Value::Object(docs).to_string().as_bytes())
            .expect("write the declarations");
    }
    let out = child.wait_with_output().expect("the SDK check ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "the provider SDKs refused a declaration:\n{stdout}"
    );
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}
