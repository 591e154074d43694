//! The compiled subset validator against the `jsonschema` crate, on the same schemas and
//! instances: valid instances (both answer "valid"), and invalid ones (both collect every error
//! with its pointers: vak's `validate_value`, jsonschema's `iter_errors`).

use std::sync::LazyLock;
use vak_bench::{Case, cases, host};
use vak_host::schema::CompiledSchema;

struct Compiled {
    case: Case,
    vak: CompiledSchema,
    reference: jsonschema::Validator,
}

static CASES: LazyLock<Vec<Compiled>> = LazyLock::new(|| {
    let (_rt, host) = host();
    cases(&host)
        .into_iter()
        .map(|case| Compiled {
            vak: CompiledSchema::compile(&case.schema).expect("vak compiles it"),
            reference: jsonschema::validator_for(&case.schema).expect("jsonschema compiles it"),
            case,
        })
        .collect()
});

fn names() -> Vec<&'static str> {
    CASES.iter().map(|c| c.case.name).collect()
}

fn by_name(name: &str) -> &'static Compiled {
    CASES.iter().find(|c| c.case.name == name).expect("a case")
}

#[divan::bench(args = names())]
fn valid_vak(bencher: divan::Bencher, name: &str) {
    let c = by_name(name);
    assert!(c.vak.validate_value(&c.case.valid).is_ok());
    bencher.bench(|| {
        c.vak
            .validate_value(divan::black_box(&c.case.valid))
            .is_ok()
    });
}

#[divan::bench(args = names())]
fn valid_jsonschema(bencher: divan::Bencher, name: &str) {
    let c = by_name(name);
    assert!(c.reference.validate(&c.case.valid).is_ok());
    bencher.bench(|| {
        c.reference
            .validate(divan::black_box(&c.case.valid))
            .is_ok()
    });
}

#[divan::bench(args = names())]
fn invalid_vak(bencher: divan::Bencher, name: &str) {
    let c = by_name(name);
    assert!(c.vak.validate_value(&c.case.invalid).is_err());
    bencher.bench(|| {
        c.vak
            .validate_value(divan::black_box(&c.case.invalid))
            .is_err()
    });
}

#[divan::bench(args = names())]
fn invalid_jsonschema(bencher: divan::Bencher, name: &str) {
    let c = by_name(name);
    assert!(!c.reference.is_valid(&c.case.invalid));
    bencher.bench(|| {
        c.reference
            .iter_errors(divan::black_box(&c.case.invalid))
            .map(|e| (e.instance_path().to_string(), e.schema_path().to_string()))
            .collect::<Vec<_>>()
    });
}

fn main() {
    divan::main();
}
