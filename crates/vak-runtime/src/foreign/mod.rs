//! # Foreign components: WIT values as JSON, exactly
//!
//! A component written for another host exports plain functions (`fetch: func(url: string) ->
//! result<string, string>`); each becomes a tool. This module is the value layer between such a
//! function and JSON: the JSON Schema of its arguments ([`input_schema`]), the exact conversion
//! of arguments to component values ([`to_vals`]) and of a result back to JSON ([`to_json`]),
//! the Markdown of a result ([`markdown`]), and the doc comments a component carries
//! ([`function_docs`]). All of it is pure and bounded: a component's types and a call's values
//! are guest- and client-controlled, so every walk counts what it does and stops.
//!
//! ## The mapping
//!
//! One JSON shape per WIT type, the same in both directions (`to_val(to_json(v)) == v` for every
//! value of a representable type) and the same as Wassette's, so a client moving from Wassette
//! sends the same JSON. Schemas use draft 2020-12 keywords.
//!
//! | WIT type | JSON value | JSON Schema |
//! |---|---|---|
//! | `bool` | `true` / `false` | `{"type":"boolean"}` |
//! | `u8` … `u64`, `s8` … `s64` | an integer in the type's range | `{"type":"integer","minimum":MIN,"maximum":MAX}` |
//! | `f32` | a number within ±f32::MAX | `{"type":"number","minimum":-3.4028234663852886e38,"maximum":3.4028234663852886e38}` |
//! | `f64` | a number | `{"type":"number"}` |
//! | `char` | a string of one Unicode scalar value | `{"type":"string","minLength":1,"maxLength":1}` |
//! | `string` | a string | `{"type":"string"}` |
//! | `list<T>` | an array | `{"type":"array","items":T}` |
//! | `list<T, N>` | an array of exactly N items | `{"type":"array","items":T,"minItems":N,"maxItems":N}` |
//! | `tuple<A, B, …>` | an array of exactly n items | `{"type":"array","prefixItems":[A,B,…],"minItems":n,"maxItems":n}` |
//! | `record` | an object with every field | `{"type":"object","properties":{…},"required":[every field],"additionalProperties":false}` |
//! | `enum` | a case name | `{"type":"string","enum":[case names]}` |
//! | `flags` | an object of booleans; an absent flag is false (output: the set flags, each `true`) | `{"type":"object","properties":{flag:{"type":"boolean"}},"additionalProperties":false}` |
//! | `variant` | `{"tag":case,"val":payload}`, or `{"tag":case}` for a case without payload | `{"type":"object","oneOf":[{"type":"object","properties":{"tag":{"const":case},"val":T},"required":["tag","val"],"additionalProperties":false}, …]}` |
//! | `option<T>` | `null` for none, else T's JSON | `{"anyOf":[{"type":"null"},T]}`, with `"type":["null",t]` beside it when T has one type t |
//! | `result<T, E>` | `{"ok":T}` or `{"err":E}`; `null` for a side without payload | `{"type":"object","oneOf":[{"type":"object","properties":{"ok":T},"required":["ok"],"additionalProperties":false}, … "err" …]}` |
//! | `option<option<T>>` | — (`null` could be either none) | unrepresentable |
//! | `own`/`borrow` (resources), `future`, `stream`, `error-context`, `map` | — | unrepresentable |
//!
//! A function's arguments are one object, `{"type":"object","properties":{param: …},
//! "required":[every param],"additionalProperties":false}`.
//!
//! The conversion is exact and never coerces: `"3"` is not a `u8`, nor are `3.5` or `256`; a
//! 2-character string is not a `char`; an object with a key the type does not have, or without
//! a field it has, is refused. An integer is any JSON number without a fractional part, as JSON
//! Schema's `integer` says (`3.0` is 3), so that the schema stage, which runs first and
//! enforces every keyword above, and the conversion agree on every value. Floats are the
//! exception that cannot be avoided: a JSON number becomes the nearest `f64` (and, for `f32`,
//! the nearest `f32`; a number beyond `f32`'s range is refused), so digits past a float's
//! precision are rounded, and an integer past 2^53 given to a float loses its low bits. JSON has
//! no NaN or infinity: they are never accepted, and a result's NaN or infinity is written as
//! `null` (so `option<f64>`'s `some(NaN)` reads back as none: the one lossy output).
//!
//! ## Bounds
//!
//! A schema nests at most [`MAX_TYPE_DEPTH`] types and is at most [`MAX_SCHEMA_BYTES`] of JSON
//! text, counted as it is built (a wide record, a huge enum or a type that mentions another
//! type many times stops there). [`to_json`] charges every node it writes against a byte
//! budget. Errors never echo a large value: they name its JSON type and where it is.

use serde_json::Value;

mod docs;
mod json;
mod schema;
#[cfg(test)]
mod tests;
mod value;

pub use docs::{MAX_DOC_BYTES, MAX_DOCS_SECTION_BYTES, function_docs};
pub use json::{markdown, to_json};
pub use schema::{input_schema, result_representable, type_schema};
pub use value::{to_val, to_vals};

/// Deepest nesting of types in a parameter or result (the type itself is depth 1).
pub const MAX_TYPE_DEPTH: usize = 32;

/// Largest schema, in bytes of JSON text, derived for one function's parameters or one type.
pub const MAX_SCHEMA_BYTES: usize = 64 << 10;

/// Longest JSON Pointer or path kept in an error message (longer ones are cut, marked `…`).
const MAX_POINTER_BYTES: usize = 120;

/// Longest message kept in a [`ConversionError`].
const MAX_MESSAGE_BYTES: usize = 200;

/// Why a WIT type has no exact JSON form (and so a function using it cannot be a tool).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unrepresentable {
    /// A handle or an async type: nothing JSON can carry stands for it.
    #[error("{} is a {ty}, which cannot be passed as JSON", place(.path))]
    Type { path: String, ty: &'static str },
    /// `option<option<T>>`: `null` would mean both `none` and `some(none)`.
    #[error("{} is an option<option<…>>, which has no exact JSON form (null would mean none and some(none))", place(.path))]
    NestedOption { path: String },
    #[error("{} nests types deeper than {limit}", place(.path))]
    TooDeep { path: String, limit: usize },
    #[error("the JSON Schema grows past {limit} bytes (at {})", show(.path))]
    TooLarge { path: String, limit: usize },
}

/// Why a JSON value is not a value of the component type, or a result not JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    /// A refusal at a place in the value (a JSON Pointer, `""` for the whole value).
    #[error("{}: {message}", show(.pointer))]
    Invalid { pointer: String, message: String },
    /// The JSON of a result ran past the byte budget of the call that converted it.
    #[error("the result's JSON is larger than {limit} bytes")]
    TooLarge { limit: usize },
}

impl ConversionError {
    /// A refusal at `pointer`, both cut to a bounded size.
    pub fn at(pointer: &str, message: impl Into<String>) -> ConversionError {
        ConversionError::Invalid {
            pointer: cut(pointer, MAX_POINTER_BYTES),
            message: cut(&message.into(), MAX_MESSAGE_BYTES),
        }
    }
}

fn show(pointer: &str) -> &str {
    if pointer.is_empty() {
        "(root)"
    } else {
        pointer
    }
}

fn place(path: &str) -> String {
    if path.is_empty() {
        "the value".to_string()
    } else {
        format!("the value at {path}")
    }
}

/// `s` cut to at most `max` bytes at a character boundary, marked with `…` when cut.
pub(crate) fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Append `/token` to a JSON Pointer, escaped (`~` → `~0`, `/` → `~1`).
pub(crate) fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// A JSON string for a message: quoted, and cut when long (never a whole large input).
pub(crate) fn quoted(s: &str) -> String {
    Value::String(cut(s, 64)).to_string()
}
