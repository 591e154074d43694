//! Policy files: never a panic; a refusal always says where (a line) or what.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vak_host::Policy;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = Policy::parse(text, "fuzz.toml") {
        assert!(!e.to_string().is_empty());
    }
});
