//! Place the address-taken functions at table index 50,000,000: the module's function table then
//! declares a minimum of over 50 million elements, which instantiation must refuse.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_FAMILY").as_deref() == Ok("wasm") {
        println!("cargo:rustc-link-arg=--table-base=50000000");
    }
}
