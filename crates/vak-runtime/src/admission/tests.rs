use super::*;
use crate::bindings::vak::tool::types as wit;

#[test]
fn imports_are_classified_by_interface() {
    let tool = |name| classify(name, false);
    assert_eq!(
        tool("vak:tool/clock@0.2.0"),
        ImportClass::Capability {
            capability: Capability::Clock
        }
    );
    assert_eq!(tool("vak:tool/types@0.2.0"), ImportClass::Types);
    assert_eq!(tool("vak:tool/sockets@0.2.0"), ImportClass::Refused);
    assert_eq!(tool("wasi:cli/stdout@0.2.6"), ImportClass::Wasi);
    assert_eq!(tool("wasi:sockets/tcp@0.2.6"), ImportClass::Refused);
    // A vak tool fetches through `vak:tool/http`, never the standard interface.
    assert_eq!(
        tool("wasi:http/outgoing-handler@0.2.6"),
        ImportClass::Refused
    );
    assert_eq!(tool("wasi:config/store@0.2.0-draft"), ImportClass::Refused);
}

#[test]
fn a_foreign_component_may_import_http_and_config_and_nothing_of_vak() {
    let foreign = |name| classify(name, true);
    assert_eq!(
        foreign("wasi:http/outgoing-handler@0.2.0"),
        ImportClass::Wasi
    );
    assert_eq!(foreign("wasi:http/types@0.2.6"), ImportClass::Wasi);
    assert_eq!(foreign("wasi:config/store@0.2.0-draft"), ImportClass::Wasi);
    assert_eq!(foreign("wasi:cli/stdout@0.2.6"), ImportClass::Wasi);
    assert_eq!(foreign("wasi:sockets/tcp@0.2.6"), ImportClass::Refused);
    assert_eq!(foreign("vak:tool/clock@0.2.0"), ImportClass::Refused);
    assert!(
        summary("wasi:filesystem/preopens@0.2.0", &ImportClass::Wasi, true)
            .contains("workspace roots")
    );
    assert!(
        summary("wasi:filesystem/preopens@0.2.0", &ImportClass::Wasi, false)
            .contains("no preopened")
    );
}

#[test]
fn only_0_2_0_to_this_hosts_patch_is_accepted() {
    assert_eq!(WIT_VERSION, format!("0.2.{WIT_MAX_PATCH}"));
    assert!(version_accepted("0.2.0"));
    assert!(version_accepted("0.2.1"));
    assert!(!version_accepted("0.2.2"));
    assert!(!version_accepted("0.2.x"));
    assert!(!version_accepted("0.1.0"));
    assert!(!version_accepted("0.3.0"));
    assert!(!version_accepted("1.0.0"));
    assert!(!version_accepted(""));
}

fn descriptor() -> wit::Descriptor {
    wit::Descriptor {
        name: "tool".into(),
        description: "does a thing".into(),
        input_schema: r#"{"type":"object"}"#.into(),
        payload_schemas: Vec::new(),
        claims: wit::Claims {
            capabilities: Vec::new(),
            budget: wit::BudgetClaim {
                fuel: None,
                memory_bytes: None,
                wall_time_ms: None,
                result_bytes: None,
            },
        },
    }
}

#[test]
fn every_descriptor_bound_refuses_with_a_short_reason() {
    assert!(descriptor_from_wit(descriptor()).is_ok());
    let claim = |scopes: Vec<String>| wit::CapabilityClaim {
        name: "clock".into(),
        scopes,
    };
    let huge = "x".repeat(20 << 20);
    let cases: Vec<(&str, wit::Descriptor)> = vec![
        (
            "name",
            wit::Descriptor {
                name: huge.clone(),
                ..descriptor()
            },
        ),
        (
            "description",
            wit::Descriptor {
                description: huge.clone(),
                ..descriptor()
            },
        ),
        (
            "schema size",
            wit::Descriptor {
                input_schema: format!("{{\"description\":\"{huge}\"}}"),
                ..descriptor()
            },
        ),
        (
            "schema depth",
            wit::Descriptor {
                input_schema: format!("{}{}", "[".repeat(1000), "]".repeat(1000)),
                ..descriptor()
            },
        ),
        ("claims", {
            let mut d = descriptor();
            d.claims.capabilities = (0..200_000).map(|_| claim(Vec::new())).collect();
            d
        }),
        ("scopes", {
            let mut d = descriptor();
            d.claims.capabilities = vec![claim(vec!["UTC".into(); 100_000])];
            d
        }),
        ("scope size", {
            let mut d = descriptor();
            d.claims.capabilities = vec![claim(vec![huge.clone()])];
            d
        }),
        (
            "payload schemas",
            wit::Descriptor {
                payload_schemas: vec!["a/1".into(); 10_000],
                ..descriptor()
            },
        ),
        (
            "payload schema id",
            wit::Descriptor {
                payload_schemas: vec![huge.clone()],
                ..descriptor()
            },
        ),
    ];
    for (what, d) in cases {
        let e = descriptor_from_wit(d).expect_err(what);
        assert_eq!(e.kind(), "bad_descriptor", "{what}");
        let Verdict::Refused {
            stage,
            reason,
            retryable,
            ..
        } = e.verdict()
        else {
            unreachable!()
        };
        assert_eq!((stage.as_str(), retryable), ("admission", false));
        assert!(reason.len() < 300, "{what}: {} bytes", reason.len());
    }
}

#[test]
fn refusal_lists_and_reasons_do_not_grow_with_the_input() {
    let many = listed((0..100_000).map(|i| format!("wasi:evil/x{i}{}", "y".repeat(10_000))));
    assert_eq!(many.len(), bounds::MAX_LISTED + 1);
    assert_eq!(many.last().map(String::as_str), Some("… and 99992 more"));
    let e = AdmissionError::ForbiddenImports { imports: many };
    assert!(e.to_string().len() < 4 * 1024, "{}", e.to_string().len());
    let e = AdmissionError::from(CompileError::Compile("z".repeat(10 << 20)));
    let Verdict::Refused { reason, .. } = e.verdict() else {
        unreachable!()
    };
    assert!(
        reason.len() <= bounds::MAX_REASON_BYTES + 40,
        "{}",
        reason.len()
    );
    assert!(AdmissionError::from(CompileError::CompileHost("no thread".into())).retryable());
    assert!(!AdmissionError::from(CompileError::CompileTimeout { limit_ms: 1 }).retryable());
}
