//! Builds the guest components under `tests/guests/` and generates one constant per guest with
//! the path of its `.wasm`, so a test names the guest it runs (as wasmtime's test-programs do).

#[path = "../build-support/guests.rs"]
mod guests;

fn main() {
    let packages = [
        ("hostile", "vak-guest-hostile"),
        ("bulky", "vak-guest-bulky"),
        ("descriptor_bomb", "vak-guest-descriptor-bomb"),
        ("table_bomb", "vak-guest-table-bomb"),
        ("undeclared", "vak-guest-undeclared"),
        ("remote_ref", "vak-guest-remote-ref"),
        ("files", "vak-guest-files"),
        ("fetcher", "vak-guest-fetcher"),
        ("parent", "vak-guest-parent"),
        ("echo", "vak-guest-echo"),
        ("shapes", "vak-guest-shapes"),
        ("forger", "vak-guest-forger"),
        ("conf_simple_text", "vak-guest-conf-simple-text"),
        ("conf_error_handling", "vak-guest-conf-error-handling"),
        ("conf_progress", "vak-guest-conf-progress"),
        ("conf_image", "vak-guest-conf-image"),
        ("conf_audio", "vak-guest-conf-audio"),
        ("conf_resource", "vak-guest-conf-resource"),
        ("conf_mixed", "vak-guest-conf-mixed"),
        ("conf_logging", "vak-guest-conf-logging"),
        ("conf_sampling", "vak-guest-conf-sampling"),
        ("conf_elicitation", "vak-guest-conf-elicitation"),
        (
            "conf_elicitation_defaults",
            "vak-guest-conf-elicitation-defaults",
        ),
        ("conf_elicitation_enums", "vak-guest-conf-elicitation-enums"),
        ("conf_ir_elicitation", "vak-guest-conf-ir-elicitation"),
        ("conf_ir_sampling", "vak-guest-conf-ir-sampling"),
        ("conf_ir_request_state", "vak-guest-conf-ir-request-state"),
        ("conf_ir_multi_round", "vak-guest-conf-ir-multi-round"),
        ("conf_ir_tampered", "vak-guest-conf-ir-tampered"),
        ("conf_ir_capabilities", "vak-guest-conf-ir-capabilities"),
    ];
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = out.join("guests");
    guests::build(&packages, &dir);
    let mut consts = String::new();
    for (file, _) in packages {
        consts.push_str(&format!(
            "/// Path of the `{file}` guest component.\npub const {}: &str = {:?};\n",
            file.to_uppercase(),
            dir.join(format!("{file}.wasm")).display().to_string()
        ));
    }
    std::fs::write(out.join("guests.rs"), consts).expect("write guests.rs");
}
