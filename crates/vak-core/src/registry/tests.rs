use super::*;

#[test]
fn builtins_compile_and_enforce_everything_they_say() {
    let r = Registry::builtin();
    assert_eq!(r.all().count(), 5);
    assert!(
        r.all().all(|s| s.schema.not_enforced.is_empty()),
        "the registry uses only the enforced subset"
    );
}

#[test]
fn every_material_field_of_a_builtin_has_a_binding_at_or_under_it() {
    for s in Registry::builtin().all() {
        for m in &s.material {
            assert!(
                s.bindings
                    .iter()
                    .any(|b| b.pattern == *m || b.pattern.starts_with(&format!("{m}/"))),
                "{}: {m}",
                s.id
            );
        }
    }
}

#[test]
fn patterns_name_array_indices_only() {
    assert!(pattern_matches("/findings/*/claim", "/findings/12/claim"));
    assert!(!pattern_matches("/findings/*/claim", "/findings/x/claim"));
    assert!(!pattern_matches("/findings/*/claim", "/findings//claim"));
    assert!(!pattern_matches("/findings/*/claim", "/findings/1"));
    assert!(!pattern_matches("/findings/*", "/findings/1/claim"));
    assert!(pattern_matches("/instant", "/instant"));
}
