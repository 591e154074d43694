//! Tests of the foreign value layer over real component types: components are built from WIT
//! (see `kit`), and their exported functions' types are what wasmtime reports.

mod docs;
mod kit;
mod markdown;
mod schema;
mod values;

use kit::Built;
use std::sync::OnceLock;

/// One interface with a function per row of the mapping table.
const ALL: &str = r#"
package test:values;

interface all {
    record point { x: s32, y: s32 }
    record person { name: string, age: u8, tags: list<string>, home: option<point> }
    enum color { red, green, blue }
    flags perms { read, write, exec }
    variant shape { circle(f64), square(u32), empty }
    resource thing;

    bools: func(a: bool);
    ints: func(a: u8, b: u16, c: u32, d: u64, e: s8, f: s16, g: s32, h: s64);
    floats: func(a: f32, b: f64);
    chars: func(c: char);
    strings: func(s: string);
    lists: func(l: list<u8>);
    fixed: func(l: list<u8, 3>);
    tuples: func(t: tuple<u8, string>);
    records: func(p: person);
    enums: func(c: color);
    flag-set: func(p: perms);
    variants: func(s: shape);
    options: func(o: option<u32>);
    option-record: func(o: option<point>);
    option-variant: func(o: option<shape>);
    results: func(r: result<u32, string>);
    result-empty: func(r: result);
    result-err-only: func(r: result<_, string>);
    list-of-options: func(l: list<option<string>>);
    nested-option: func(o: option<option<u8>>);
    take-own: func(t: thing);
    take-borrow: func(t: borrow<thing>);
    make: func() -> thing;
    maps: func(m: map<string, u32>);
    fetch: func(url: string) -> result<string, string>;
}

world w {
    export all;
}
"#;

fn all() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| kit::build(ALL))
}

/// The key of a function of the `all` interface.
fn f(name: &str) -> String {
    format!("test:values/all#{name}")
}
