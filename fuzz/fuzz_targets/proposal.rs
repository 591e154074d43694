//! Provider proposal documents and argument texts: never a panic; whatever parses is an object
//! within the host's size and depth bounds.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vak_host::proposal::{self, providers};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(calls) = providers::parse_document(text, None) {
        for call in calls {
            // Each proposal's arguments go through the same bounded parser as a direct call.
            let _ = proposal::parse_arguments(&call.arguments);
        }
    }
    if let Ok(map) = proposal::parse_arguments(text) {
        // A document accepted once is accepted again, to the same value.
        let again = serde_json::to_string(&map).expect("serializable");
        assert_eq!(proposal::parse_arguments(&again).expect("re-parses"), map);
    }
});
