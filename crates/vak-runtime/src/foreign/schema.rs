//! WIT types to JSON Schema: the schema of one type and of a function's arguments object, built
//! with a count of its JSON text so that a guest's types cannot make it unbounded.

use super::{MAX_POINTER_BYTES, MAX_SCHEMA_BYTES, MAX_TYPE_DEPTH, Unrepresentable, cut};
use serde_json::{Map, Value, json};
use wasmtime::component::Type;

/// The JSON Schema of a function's arguments: one object with a property per parameter, every
/// one required, and no other. Errors name the parameter (`/url/…`).
pub fn input_schema(params: &[(String, Type)]) -> Result<Value, Unrepresentable> {
    let mut b = Builder::default();
    let (properties, required) = b.object_members(
        params.iter().map(|(name, ty)| (name.as_str(), ty.clone())),
        0,
    )?;
    Ok(json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    }))
}

/// The JSON Schema of one value of `ty`. Errors name the place in the value (`/field/*/…`).
pub fn type_schema(ty: &Type) -> Result<Value, Unrepresentable> {
    Builder::default().schema(ty, 1)
}

/// Whether a function's result of type `ty` can be rendered as JSON by
/// [`to_json`](super::to_json) exactly: the same test as [`type_schema`] (same bounds).
pub fn result_representable(ty: &Type) -> Result<(), Unrepresentable> {
    type_schema(ty).map(|_| ())
}

/// The schema under construction: its JSON text so far (an upper estimate, counted before each
/// node is built) and the place in the value it describes.
#[derive(Default)]
struct Builder {
    used: usize,
    path: String,
}

/// Estimated bytes of JSON text for the fixed parts of each schema shape (rounded up).
mod cost {
    /// `{"type":"boolean"}`, `{"type":"number"}`, `{"type":"string"}`.
    pub const LEAF: usize = 20;
    /// `{"type":"integer","minimum":…,"maximum":…}` with 20-digit bounds.
    pub const INTEGER: usize = 80;
    /// `{"type":"number","minimum":-3.4028234663852886e38,"maximum":…}`.
    pub const FLOAT32: usize = 90;
    /// `{"type":"string","minLength":1,"maxLength":1}`.
    pub const CHAR: usize = 48;
    /// `{"type":"array","items":…,"minItems":…,"maxItems":…}` and the tuple's `prefixItems`.
    pub const ARRAY: usize = 80;
    /// `{"type":"object","properties":{},"required":[],"additionalProperties":false}`.
    pub const OBJECT: usize = 80;
    /// A member's name in `properties` and again in `required`, beyond its own bytes.
    pub const MEMBER: usize = 8;
    /// One `{"type":"boolean"}` flag property, beyond its name.
    pub const FLAG: usize = 24;
    /// `{"type":"string","enum":[]}` and each case's quotes and comma.
    pub const ENUM: usize = 30;
    pub const ENUM_CASE: usize = 3;
    /// `{"type":"object","oneOf":[]}` and each case's object around its tag and payload.
    pub const VARIANT: usize = 30;
    pub const VARIANT_CASE: usize = 120;
    /// `{"type":[…],"anyOf":[{"type":"null"},…]}`.
    pub const OPTION: usize = 60;
    /// `{"type":"object","oneOf":[…]}` with its two one-member objects.
    pub const RESULT: usize = 260;
}

impl Builder {
    fn charge(&mut self, bytes: usize) -> Result<(), Unrepresentable> {
        self.used = self.used.saturating_add(bytes);
        if self.used > MAX_SCHEMA_BYTES {
            return Err(Unrepresentable::TooLarge {
                path: cut(&self.path, MAX_POINTER_BYTES),
                limit: MAX_SCHEMA_BYTES,
            });
        }
        Ok(())
    }

    /// `f` with `token` appended to the path (and the path restored after).
    fn under<T>(
        &mut self,
        token: &str,
        f: impl FnOnce(&mut Builder) -> Result<T, Unrepresentable>,
    ) -> Result<T, Unrepresentable> {
        let len = self.path.len();
        super::push_token(&mut self.path, token);
        let result = f(self);
        self.path.truncate(len);
        result
    }

    fn refuse(&self, ty: &'static str) -> Unrepresentable {
        Unrepresentable::Type {
            path: cut(&self.path, MAX_POINTER_BYTES),
            ty,
        }
    }

    /// The schema of `ty`, nested `depth` types deep.
    fn schema(&mut self, ty: &Type, depth: usize) -> Result<Value, Unrepresentable> {
        if depth > MAX_TYPE_DEPTH {
            return Err(Unrepresentable::TooDeep {
                path: cut(&self.path, MAX_POINTER_BYTES),
                limit: MAX_TYPE_DEPTH,
            });
        }
        let next = depth + 1;
        Ok(match ty {
            Type::Bool => self.leaf("boolean")?,
            Type::U8 => self.integer(u8::MIN, u8::MAX)?,
            Type::U16 => self.integer(u16::MIN, u16::MAX)?,
            Type::U32 => self.integer(u32::MIN, u32::MAX)?,
            Type::U64 => self.integer(u64::MIN, u64::MAX)?,
            Type::S8 => self.integer(i8::MIN, i8::MAX)?,
            Type::S16 => self.integer(i16::MIN, i16::MAX)?,
            Type::S32 => self.integer(i32::MIN, i32::MAX)?,
            Type::S64 => self.integer(i64::MIN, i64::MAX)?,
            Type::Float64 => self.leaf("number")?,
            Type::Float32 => {
                self.charge(cost::FLOAT32)?;
                // A number past f32's range is refused rather than made infinite.
                let max = f64::from(f32::MAX);
                json!({"type": "number", "minimum": -max, "maximum": max})
            }
            Type::String => self.leaf("string")?,
            Type::Char => {
                self.charge(cost::CHAR)?;
                // JSON Schema counts a string's length in code points: one `char`.
                json!({"type": "string", "minLength": 1, "maxLength": 1})
            }
            Type::List(list) => {
                self.charge(cost::ARRAY)?;
                let items = self.under("*", |b| b.schema(&list.ty(), next))?;
                json!({"type": "array", "items": items})
            }
            Type::FixedLengthList(list) => {
                self.charge(cost::ARRAY)?;
                let items = self.under("*", |b| b.schema(&list.ty(), next))?;
                let n = list.len();
                json!({"type": "array", "items": items, "minItems": n, "maxItems": n})
            }
            Type::Tuple(tuple) => {
                self.charge(cost::ARRAY)?;
                let mut prefix = Vec::with_capacity(tuple.types().len().min(64));
                for (i, ty) in tuple.types().enumerate() {
                    self.charge(1)?;
                    prefix.push(self.under(&i.to_string(), |b| b.schema(&ty, next))?);
                }
                let n = prefix.len();
                // No `"items": false`: min/maxItems already refuse more items, and a validator
                // that does not know `prefixItems` would read it as "no item at all".
                json!({"type": "array", "prefixItems": prefix, "minItems": n, "maxItems": n})
            }
            Type::Record(record) => {
                let fields = record.fields().map(|f| (f.name, f.ty));
                let (properties, required) = self.object_members(fields, depth)?;
                json!({
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": false,
                })
            }
            Type::Enum(cases) => {
                self.charge(cost::ENUM)?;
                let mut names = Vec::new();
                for name in cases.names() {
                    self.charge(name.len() + cost::ENUM_CASE)?;
                    names.push(Value::from(name));
                }
                json!({"type": "string", "enum": names})
            }
            Type::Flags(flags) => {
                self.charge(cost::OBJECT)?;
                let mut properties = Map::new();
                for name in flags.names() {
                    self.charge(name.len() + cost::FLAG)?;
                    properties.insert(name.to_string(), json!({"type": "boolean"}));
                }
                json!({"type": "object", "properties": properties, "additionalProperties": false})
            }
            Type::Variant(variant) => {
                self.charge(cost::VARIANT)?;
                let mut cases = Vec::new();
                for case in variant.cases() {
                    self.charge(case.name.len() + cost::VARIANT_CASE)?;
                    cases.push(match &case.ty {
                        Some(ty) => {
                            let val = self.under("val", |b| b.schema(ty, next))?;
                            json!({
                                "type": "object",
                                "properties": {"tag": {"const": case.name}, "val": val},
                                "required": ["tag", "val"],
                                "additionalProperties": false,
                            })
                        }
                        None => json!({
                            "type": "object",
                            "properties": {"tag": {"const": case.name}},
                            "required": ["tag"],
                            "additionalProperties": false,
                        }),
                    });
                }
                json!({"type": "object", "oneOf": cases})
            }
            Type::Option(option) => {
                let inner = option.ty();
                if matches!(inner, Type::Option(_)) {
                    return Err(Unrepresentable::NestedOption {
                        path: cut(&self.path, MAX_POINTER_BYTES),
                    });
                }
                self.charge(cost::OPTION)?;
                let some = self.schema(&inner, next)?;
                // The union's types beside `anyOf`: a validator that reads only `type` (vak's
                // own) still refuses what is neither null nor the payload's JSON type.
                match some.get("type").and_then(Value::as_str) {
                    Some(t) => {
                        let types = json!(["null", t]);
                        json!({"type": types, "anyOf": [{"type": "null"}, some]})
                    }
                    None => json!({"anyOf": [{"type": "null"}, some]}),
                }
            }
            Type::Result(result) => {
                self.charge(cost::RESULT)?;
                let ok = self.side("ok", result.ok(), next)?;
                let err = self.side("err", result.err(), next)?;
                json!({"type": "object", "oneOf": [ok, err]})
            }
            Type::Own(_) => return Err(self.refuse("resource handle (own)")),
            Type::Borrow(_) => return Err(self.refuse("borrowed resource handle (borrow)")),
            Type::Future(_) => return Err(self.refuse("future")),
            Type::Stream(_) => return Err(self.refuse("stream")),
            Type::ErrorContext => return Err(self.refuse("error-context")),
            Type::Map(_) => return Err(self.refuse("map")),
        })
    }

    fn leaf(&mut self, name: &'static str) -> Result<Value, Unrepresentable> {
        self.charge(cost::LEAF)?;
        Ok(json!({"type": name}))
    }

    fn integer(
        &mut self,
        min: impl Into<Value>,
        max: impl Into<Value>,
    ) -> Result<Value, Unrepresentable> {
        self.charge(cost::INTEGER)?;
        Ok(json!({"type": "integer", "minimum": min.into(), "maximum": max.into()}))
    }

    /// One side of a `result`: `{"<side>": payload}`, `null` when the side has no payload.
    fn side(
        &mut self,
        side: &'static str,
        ty: Option<Type>,
        depth: usize,
    ) -> Result<Value, Unrepresentable> {
        let payload = match ty {
            Some(ty) => self.under(side, |b| b.schema(&ty, depth))?,
            None => json!({"type": "null"}),
        };
        Ok(json!({
            "type": "object",
            "properties": {side: payload},
            "required": [side],
            "additionalProperties": false,
        }))
    }

    /// `properties` and `required` of an object whose members are all required (a record's
    /// fields, a function's parameters), the members nested `depth` deep.
    fn object_members<'a>(
        &mut self,
        members: impl Iterator<Item = (&'a str, Type)>,
        depth: usize,
    ) -> Result<(Map<String, Value>, Vec<Value>), Unrepresentable> {
        self.charge(cost::OBJECT)?;
        let mut properties = Map::new();
        let mut required = Vec::new();
        for (name, ty) in members {
            self.charge(2 * name.len() + cost::MEMBER)?;
            let schema = self.under(name, |b| b.schema(&ty, depth + 1))?;
            properties.insert(name.to_string(), schema);
            required.push(Value::from(name));
        }
        Ok((properties, required))
    }
}
