//! Components written for other hosts, built as their authors build them: Wassette's five
//! example tools from their sources in ../shared/byo (cargo, jco, componentize-py), and vak's
//! own foreign test guests. Each is a component exporting the functions its world declares,
//! not `vak:tool/tool`, and importing what its README says it needs; the imports are printed.
//! A missing toolchain or registry skips (fails under VAK_REQUIRE_ALL).

use std::path::Path;
use wasmtime::component::Component;
use wasmtime::component::types::{ComponentItem, Type};
use wasmtime::{Config, Engine, OptLevel};

/// A compiled component and the engine that compiled it (its types are read through it).
struct Built {
    engine: Engine,
    component: Component,
}

impl Built {
    fn from_file(path: &Path) -> Built {
        let mut config = Config::new();
        config.wasm_component_model(true);
        // Only the types are read: unoptimised code compiles a 10-40 MB component much sooner.
        config.cranelift_opt_level(OptLevel::None);
        let engine = Engine::new(&config).expect("an engine");
        let component = Component::from_file(&engine, path)
            .unwrap_or_else(|e| panic!("wasmtime compiles {}: {e:?}", path.display()));
        Built { engine, component }
    }

    /// Wassette's example `name`, built (or taken from the cache); `None` when it cannot be.
    fn example(name: &str) -> Option<Built> {
        match vak_tests::byo::component(name) {
            Ok(path) => Some(Built::from_file(&path)),
            Err(why) => {
                vak_tests::skipped(format!("building Wassette's {name}: {why}"));
                None
            }
        }
    }

    fn exports(&self) -> Vec<(String, ComponentItem)> {
        let ty = self.component.component_type();
        ty.exports(&self.engine)
            .map(|(name, item)| (name.to_string(), item.ty))
            .collect()
    }

    /// The import names, printed (the test's output shows what each component asks for).
    fn imports(&self, what: &str) -> Vec<String> {
        let ty = self.component.component_type();
        let names: Vec<String> = ty
            .imports(&self.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        eprintln!("{what} imports:");
        for name in &names {
            eprintln!("  {name}");
        }
        names
    }

    /// The exported functions at the top level, each with its parameters' names.
    fn functions(&self) -> Vec<(String, Vec<String>)> {
        let mut found: Vec<(String, Vec<String>)> = self
            .exports()
            .into_iter()
            .filter_map(|(name, item)| match item {
                ComponentItem::ComponentFunc(f) => {
                    Some((name, f.params().map(|(p, _)| p.to_string()).collect()))
                }
                _ => None,
            })
            .collect();
        found.sort();
        found
    }

    /// None of the exports is vak's own interface: this is a foreign component.
    fn assert_foreign(&self) {
        for (name, _) in self.exports() {
            assert!(!name.starts_with("vak:tool/"), "exports {name}");
        }
    }
}

fn signature(list: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    let mut want: Vec<(String, Vec<String>)> = list
        .iter()
        .map(|(name, params)| {
            (
                name.to_string(),
                params.iter().map(|p| p.to_string()).collect(),
            )
        })
        .collect();
    want.sort();
    want
}

#[test]
fn fetch_rs_builds_with_cargo_and_fetches_over_wasi_http() {
    let Some(built) = Built::example("fetch-rs") else {
        return;
    };
    built.assert_foreign();
    assert_eq!(built.functions(), signature(&[("fetch", &["url"])]));
    let imports = built.imports("fetch-rs");
    assert!(
        imports.iter().any(|i| i.starts_with("wasi:http/")),
        "fetch-rs imports a wasi:http interface: {imports:?}"
    );
}

#[test]
fn filesystem_rs_builds_with_cargo_and_is_reused_unchanged() {
    let Some(built) = Built::example("filesystem-rs") else {
        return;
    };
    built.assert_foreign();
    assert_eq!(
        built.functions(),
        signature(&[
            ("list-directory", &["path"]),
            ("read-file", &["path"]),
            ("search-file", &["path", "pattern"]),
            ("get-file-info", &["path"]),
        ])
    );
    let imports = built.imports("filesystem-rs");
    assert!(
        imports.iter().any(|i| i.starts_with("wasi:filesystem/")),
        "{imports:?}"
    );

    // Unchanged sources: the second call is the cached build, not a new one.
    let path = vak_tests::byo::component("filesystem-rs").expect("built a moment ago");
    let modified = || {
        std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .expect("the component's mtime")
    };
    let before = modified();
    let again = vak_tests::byo::component("filesystem-rs").expect("cached");
    assert_eq!(again, path);
    assert_eq!(
        modified(),
        before,
        "an unchanged example is not built again"
    );
}

#[test]
fn time_server_js_builds_with_jco_and_exports_an_interface() {
    let Some(built) = Built::example("time-server-js") else {
        return;
    };
    built.assert_foreign();
    built.imports("time-server-js");
    let interfaces: Vec<(String, Vec<String>)> = built
        .exports()
        .into_iter()
        .filter_map(|(name, item)| match item {
            ComponentItem::ComponentInstance(instance) => Some((
                name,
                instance
                    .exports(&built.engine)
                    .map(|(n, _)| n.to_string())
                    .collect(),
            )),
            _ => None,
        })
        .collect();
    assert!(
        interfaces
            .iter()
            .any(|(name, fns)| name.ends_with("/time") && fns == &["get-current-time"]),
        "an exported interface `time` with get-current-time: {interfaces:?}"
    );
    assert_eq!(built.functions(), [], "no function at the top level");
}

#[test]
fn get_weather_js_builds_with_jco_and_imports_wasi_config() {
    let Some(built) = Built::example("get-weather-js") else {
        return;
    };
    built.assert_foreign();
    assert_eq!(built.functions(), signature(&[("get-weather", &["city"])]));
    let imports = built.imports("get-weather-js");
    assert!(
        imports.iter().any(|i| i == "wasi:config/store@0.2.0-draft"),
        "{imports:?}"
    );
    assert!(
        imports.iter().any(|i| i.starts_with("wasi:http/")),
        "{imports:?}"
    );
}

#[test]
fn eval_py_builds_with_componentize_py() {
    let Some(built) = Built::example("eval-py") else {
        return;
    };
    built.assert_foreign();
    assert_eq!(
        built.functions(),
        signature(&[("eval", &["expression"]), ("exec", &["statements"])])
    );
    built.imports("eval-py");
}

#[test]
fn the_foreign_types_guest_exports_each_function_at_the_top_level() {
    let built = Built::from_file(Path::new(vak_tests::guests::FOREIGN_TYPES));
    built.assert_foreign();
    assert_eq!(
        built.functions(),
        signature(&[
            ("add", &["a", "b"]),
            ("shout", &["s"]),
            ("describe", &["p"]),
            ("pick", &["c"]),
            ("shape-area", &["s"]),
            ("perms", &["p"]),
            ("pair", &["t"]),
            ("first-char", &["s"]),
            ("divide", &["a", "b"]),
            ("echo-list", &["xs"]),
            ("big", &["n"]),
            ("spin", &[]),
        ])
    );
    built.imports("foreign-types");

    // The world's own types, as the exports' signatures carry them.
    let func = |name: &str| match built.exports().into_iter().find(|(n, _)| n == name) {
        Some((_, ComponentItem::ComponentFunc(f))) => f,
        other => panic!("{name} is not an exported function: {other:?}"),
    };
    let param = |name: &str| func(name).params().map(|(_, ty)| ty).collect::<Vec<_>>();
    assert!(matches!(param("add")[..], [Type::U8, Type::U8]));
    assert!(matches!(
        func("add").results().collect::<Vec<_>>()[..],
        [Type::U16]
    ));
    match &param("describe")[..] {
        [Type::Record(point)] => {
            let fields: Vec<&str> = point.fields().map(|f| f.name).collect();
            assert_eq!(fields, ["x", "y", "label"]);
        }
        other => panic!("describe takes a record: {other:?}"),
    }
    match &param("pick")[..] {
        [Type::Enum(color)] => {
            assert_eq!(color.names().collect::<Vec<_>>(), ["red", "green", "blue"])
        }
        other => panic!("pick takes an enum: {other:?}"),
    }
    match &param("shape-area")[..] {
        [Type::Variant(shape)] => {
            let cases: Vec<&str> = shape.cases().map(|c| c.name).collect();
            assert_eq!(cases, ["circle", "square", "empty"]);
        }
        other => panic!("shape-area takes a variant: {other:?}"),
    }
    match &param("perms")[..] {
        [Type::Flags(flags)] => {
            assert_eq!(flags.names().collect::<Vec<_>>(), ["read", "write", "exec"])
        }
        other => panic!("perms takes flags: {other:?}"),
    }
    assert!(matches!(param("pair")[..], [Type::Tuple(_)]));
    assert!(matches!(
        func("first-char").results().collect::<Vec<_>>()[..],
        [Type::Option(_)]
    ));
    assert!(matches!(
        func("divide").results().collect::<Vec<_>>()[..],
        [Type::Result(_)]
    ));
    assert!(matches!(
        func("big").results().collect::<Vec<_>>()[..],
        [Type::List(_)]
    ));
}

#[test]
fn the_foreign_fetch_guest_exports_fetch_and_imports_wasi_http() {
    let built = Built::from_file(Path::new(vak_tests::guests::FOREIGN_FETCH));
    built.assert_foreign();
    assert_eq!(built.functions(), signature(&[("fetch", &["url"])]));
    let imports = built.imports("foreign-fetch");
    assert!(
        imports
            .iter()
            .any(|i| i.starts_with("wasi:http/outgoing-handler@")),
        "{imports:?}"
    );
}
