//! Component values to JSON (the shapes of the module's table), charged against a byte budget,
//! and the Markdown document of a result.

use super::{ConversionError, MAX_TYPE_DEPTH, push_token};
use serde_json::{Map, Number, Value};
use wasmtime::component::Val;

/// `val` as JSON. `budget` is the bytes of JSON text still allowed: each node written is
/// charged (its text, counted before it is built, strings with their escapes) and the budget
/// decremented; past it, [`ConversionError::TooLarge`] with the budget this call started with.
/// A float's NaN or infinity is written as `null` (JSON has neither).
pub fn to_json(val: &Val, budget: &mut usize) -> Result<Value, ConversionError> {
    let limit = *budget;
    let mut w = Writer {
        left: budget,
        limit,
        pointer: String::new(),
    };
    w.json(val, 1)
}

struct Writer<'b> {
    left: &'b mut usize,
    limit: usize,
    pointer: String,
}

impl Writer<'_> {
    fn charge(&mut self, bytes: usize) -> Result<(), ConversionError> {
        if bytes > *self.left {
            *self.left = 0;
            return Err(ConversionError::TooLarge { limit: self.limit });
        }
        *self.left -= bytes;
        Ok(())
    }

    fn under(&mut self, token: &str, val: &Val, depth: usize) -> Result<Value, ConversionError> {
        let len = self.pointer.len();
        push_token(&mut self.pointer, token);
        let result = self.json(val, depth);
        self.pointer.truncate(len);
        result
    }

    /// A string's JSON text, counted: its bytes first (so a huge string is refused without
    /// being scanned), then the extra bytes of its escapes.
    fn string(&mut self, s: &str) -> Result<Value, ConversionError> {
        self.charge(s.len() + 2)?;
        self.charge(escape_extra(s))?;
        Ok(Value::String(s.to_string()))
    }

    /// An object member's key, counted with its quotes, colon and comma.
    fn key(&mut self, key: &str) -> Result<(), ConversionError> {
        self.charge(key.len() + 4)?;
        self.charge(escape_extra(key))
    }

    fn json(&mut self, val: &Val, depth: usize) -> Result<Value, ConversionError> {
        if depth > MAX_TYPE_DEPTH {
            return Err(ConversionError::at(
                &self.pointer,
                format!("the value nests deeper than {MAX_TYPE_DEPTH}"),
            ));
        }
        let next = depth + 1;
        Ok(match val {
            Val::Bool(b) => {
                self.charge(5)?;
                Value::Bool(*b)
            }
            Val::U8(n) => self.integer(*n)?,
            Val::U16(n) => self.integer(*n)?,
            Val::U32(n) => self.integer(*n)?,
            Val::U64(n) => self.integer(*n)?,
            Val::S8(n) => self.integer(*n)?,
            Val::S16(n) => self.integer(*n)?,
            Val::S32(n) => self.integer(*n)?,
            Val::S64(n) => self.integer(*n)?,
            Val::Float32(x) => {
                self.charge(24)?;
                f32_json(*x)
            }
            Val::Float64(x) => {
                self.charge(24)?;
                Number::from_f64(*x).map_or(Value::Null, Value::Number)
            }
            Val::Char(c) => self.string(c.encode_utf8(&mut [0; 4]))?,
            Val::String(s) => self.string(s)?,
            Val::List(items) | Val::Tuple(items) | Val::FixedLengthList(items) => {
                self.charge(2)?;
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    self.charge(1)?;
                    out.push(self.under(&i.to_string(), item, next)?);
                }
                Value::Array(out)
            }
            Val::Record(fields) => {
                self.charge(2)?;
                let mut out = Map::new();
                for (name, v) in fields {
                    self.key(name)?;
                    let v = self.under(name, v, next)?;
                    out.insert(name.clone(), v);
                }
                Value::Object(out)
            }
            Val::Variant(case, payload) => {
                self.charge(2)?;
                self.key("tag")?;
                let mut out = Map::new();
                out.insert("tag".to_string(), self.string(case)?);
                if let Some(v) = payload {
                    self.key("val")?;
                    out.insert("val".to_string(), self.under("val", v, next)?);
                }
                Value::Object(out)
            }
            Val::Enum(case) => self.string(case)?,
            Val::Option(None) => {
                self.charge(4)?;
                Value::Null
            }
            Val::Option(Some(v)) => self.json(v, next)?,
            Val::Result(result) => {
                let (side, payload) = match result {
                    Ok(v) => ("ok", v),
                    Err(v) => ("err", v),
                };
                self.charge(2)?;
                self.key(side)?;
                let v = match payload {
                    Some(v) => self.under(side, v, next)?,
                    None => {
                        self.charge(4)?;
                        Value::Null
                    }
                };
                let mut out = Map::new();
                out.insert(side.to_string(), v);
                Value::Object(out)
            }
            Val::Flags(set) => {
                self.charge(2)?;
                let mut out = Map::new();
                for name in set {
                    self.key(name)?;
                    self.charge(5)?;
                    out.insert(name.clone(), Value::Bool(true));
                }
                Value::Object(out)
            }
            Val::Resource(_) => {
                return Err(ConversionError::at(
                    &self.pointer,
                    "a resource handle cannot be rendered as JSON",
                ));
            }
            Val::Future(_) | Val::Stream(_) | Val::ErrorContext(_) | Val::Map(_) => {
                return Err(ConversionError::at(
                    &self.pointer,
                    "a future, stream, error-context or map cannot be rendered as JSON",
                ));
            }
        })
    }

    fn integer(&mut self, n: impl Into<Number>) -> Result<Value, ConversionError> {
        // At most 20 digits and a sign.
        self.charge(21)?;
        Ok(Value::Number(n.into()))
    }
}

/// An f32 as the shortest decimal that reads back as the same f32 (`0.1`, not the f64
/// `0.10000000149011612`), else its exact f64 value; NaN and infinities as `null`.
fn f32_json(x: f32) -> Value {
    if !x.is_finite() {
        return Value::Null;
    }
    let wide = f64::from(x);
    let short = format!("{x:e}")
        .parse::<f64>()
        .ok()
        // Within f32's range as well: `3.4028235e38` reads back as f32::MAX but is past it.
        .filter(|s| s.abs() <= f64::from(f32::MAX) && (*s as f32).to_bits() == x.to_bits());
    Number::from_f64(short.unwrap_or(wide)).map_or(Value::Null, Value::Number)
}

/// The bytes JSON escaping adds to `s`: `\"`, `\\` and the short escapes add one, other
/// control characters five (`\u00XX`).
fn escape_extra(s: &str) -> usize {
    s.bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
            0..=0x1f => 5,
            _ => 0,
        })
        .sum()
}

/// Deepest nesting [`markdown`] pretty-prints; a deeper value is written compact, so that the
/// indentation cannot make the document much larger than the value.
const MAX_PRETTY_DEPTH: usize = 32;

/// The Markdown document of a result, lossless: a string is its own text in a fenced code block
/// (no info string; the text is exactly the block's content without its final line ending), any
/// other value its pretty-printed JSON in a ```json block. The fence is longer than any run of
/// backticks in the content, so no content can close it, and nothing in a code block is read as
/// HTML or Markdown. A string Markdown would not keep as written (a carriage return, which
/// CommonMark reads as a line ending, or a NUL, which it replaces) is shown as its JSON string.
/// The document's size is linear in the value's.
pub fn markdown(value: &Value) -> String {
    match value {
        Value::String(s) if !s.contains(['\r', '\0']) => fenced("", s),
        _ => {
            let text = if depth_within(value, MAX_PRETTY_DEPTH) {
                serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
            } else {
                value.to_string()
            };
            fenced("json", &text)
        }
    }
}

fn fenced(info: &str, text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for b in text.bytes() {
        run = if b == b'`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    let mut out = String::with_capacity(text.len() + 2 * fence.len() + info.len() + 2);
    out.push_str(&fence);
    out.push_str(info);
    out.push('\n');
    out.push_str(text);
    out.push('\n');
    out.push_str(&fence);
    out
}

/// Whether `value` nests arrays and objects at most `limit` deep (without recursion).
fn depth_within(value: &Value, limit: usize) -> bool {
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        if depth >= limit {
            return false;
        }
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    true
}
