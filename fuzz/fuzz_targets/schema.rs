//! Schema admission and validation: the input is a schema and an instance, separated by the
//! first NUL byte. Never a panic; `is_valid` and `validate_value` always agree.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vak_host::schema::CompiledSchema;

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let (schema, rest) = data.split_at(split);
    let instance = rest.get(1..).unwrap_or_default();
    let Ok(schema) = serde_json::from_slice::<serde_json::Value>(schema) else {
        return;
    };
    let Ok(compiled) = CompiledSchema::compile(&schema) else {
        return;
    };
    let Ok(instance) = serde_json::from_slice::<serde_json::Value>(instance) else {
        return;
    };
    let valid = compiled.is_valid(&instance);
    assert_eq!(
        valid,
        compiled.validate_value(&instance).is_ok(),
        "{schema} / {instance}"
    );
});
