//! JSON to component values, exactly: a value is taken only in the one JSON shape its type has
//! (the module's table), never coerced, and a refusal says where and what was expected.

use super::{ConversionError, MAX_TYPE_DEPTH, push_token, quoted};
use crate::schema::json_type_name;
use serde_json::{Map, Number, Value};
use std::collections::HashSet;
use wasmtime::component::{Type, Val};

/// A function's arguments object as its parameters' values, in the parameters' order. The
/// object must have every parameter and nothing else.
pub fn to_vals(args: &Value, params: &[(String, Type)]) -> Result<Vec<Val>, ConversionError> {
    let mut c = Converter::default();
    let Value::Object(map) = args else {
        return Err(c.refuse(format!(
            "expected the arguments as an object, got {}",
            json_type_name(args)
        )));
    };
    let members = params.iter().map(|(name, ty)| (name.as_str(), ty.clone()));
    let vals = c.members(map, members, 0, ("parameter", "function"))?;
    Ok(vals.into_iter().map(|(_, v)| v).collect())
}

/// One JSON value as a value of `ty`.
pub fn to_val(value: &Value, ty: &Type) -> Result<Val, ConversionError> {
    Converter::default().val(value, ty, 1)
}

/// The walk's place in the value, as a JSON Pointer.
#[derive(Default)]
struct Converter {
    pointer: String,
}

impl Converter {
    fn refuse(&self, message: impl Into<String>) -> ConversionError {
        ConversionError::at(&self.pointer, message)
    }

    fn expected(&self, what: &str, got: &Value) -> ConversionError {
        self.refuse(expectation(what, got))
    }

    /// A refusal at the member `token` of the current place.
    fn refuse_at(&self, token: &str, message: impl Into<String>) -> ConversionError {
        let mut pointer = self.pointer.clone();
        push_token(&mut pointer, token);
        ConversionError::at(&pointer, message)
    }

    fn under<T>(
        &mut self,
        token: &str,
        f: impl FnOnce(&mut Converter) -> Result<T, ConversionError>,
    ) -> Result<T, ConversionError> {
        let len = self.pointer.len();
        push_token(&mut self.pointer, token);
        let result = f(self);
        self.pointer.truncate(len);
        result
    }

    fn val(&mut self, v: &Value, ty: &Type, depth: usize) -> Result<Val, ConversionError> {
        if depth > MAX_TYPE_DEPTH {
            return Err(self.refuse(format!("the type nests deeper than {MAX_TYPE_DEPTH}")));
        }
        let next = depth + 1;
        Ok(match ty {
            Type::Bool => match v {
                Value::Bool(b) => Val::Bool(*b),
                _ => return Err(self.expected("a boolean", v)),
            },
            Type::U8 => Val::U8(self.integer(v, "u8")?),
            Type::U16 => Val::U16(self.integer(v, "u16")?),
            Type::U32 => Val::U32(self.integer(v, "u32")?),
            Type::U64 => Val::U64(self.integer(v, "u64")?),
            Type::S8 => Val::S8(self.integer(v, "s8")?),
            Type::S16 => Val::S16(self.integer(v, "s16")?),
            Type::S32 => Val::S32(self.integer(v, "s32")?),
            Type::S64 => Val::S64(self.integer(v, "s64")?),
            Type::Float64 => Val::Float64(self.number(v)?),
            Type::Float32 => {
                let x = self.number(v)?;
                if x.abs() > f64::from(f32::MAX) {
                    return Err(self.refuse("the number is beyond the range of an f32"));
                }
                // Rounds to the nearest f32: inherent, and documented.
                Val::Float32(x as f32)
            }
            Type::Char => match v {
                Value::String(s) => {
                    let mut chars = s.chars();
                    match (chars.next(), chars.next()) {
                        (Some(c), None) => Val::Char(c),
                        _ => {
                            return Err(self.refuse(
                                "expected a string of exactly one character (char), got a \
                                 string of another length",
                            ));
                        }
                    }
                }
                _ => return Err(self.expected("a string of one character (char)", v)),
            },
            Type::String => match v {
                Value::String(s) => Val::String(s.clone()),
                _ => return Err(self.expected("a string", v)),
            },
            Type::List(list) => {
                let items = self.array(v, None)?;
                let ty = list.ty();
                Val::List(self.items(items, |_| ty.clone(), next)?)
            }
            Type::FixedLengthList(list) => {
                let items = self.array(v, Some(list.len() as usize))?;
                let ty = list.ty();
                Val::FixedLengthList(self.items(items, |_| ty.clone(), next)?)
            }
            Type::Tuple(tuple) => {
                let types: Vec<Type> = tuple.types().collect();
                let items = self.array(v, Some(types.len()))?;
                Val::Tuple(self.items(items, |i| types[i].clone(), next)?)
            }
            Type::Record(record) => {
                let Value::Object(map) = v else {
                    return Err(self.expected("an object (a record)", v));
                };
                let fields = record.fields().map(|f| (f.name, f.ty));
                Val::Record(self.members(map, fields, depth, ("field", "record"))?)
            }
            Type::Enum(cases) => match v {
                Value::String(s) => match cases.names().find(|n| *n == s.as_str()) {
                    Some(name) => Val::Enum(name.to_string()),
                    None => {
                        return Err(
                            self.refuse(format!("{} is not one of the enum's cases", quoted(s)))
                        );
                    }
                },
                _ => return Err(self.expected("a string (an enum case)", v)),
            },
            Type::Flags(flags) => {
                let Value::Object(map) = v else {
                    return Err(self.expected("an object of booleans (flags)", v));
                };
                let mut set = Vec::new();
                let mut seen = 0;
                for name in flags.names() {
                    match map.get(name) {
                        Some(Value::Bool(b)) => {
                            seen += 1;
                            if *b {
                                set.push(name.to_string());
                            }
                        }
                        Some(other) => {
                            return Err(self.refuse_at(name, expectation("a boolean", other)));
                        }
                        None => {}
                    }
                }
                if seen < map.len() {
                    let names: HashSet<&str> = flags.names().collect();
                    return Err(self.unknown_key(map, |k| names.contains(k), "flag", "type"));
                }
                Val::Flags(set)
            }
            Type::Variant(variant) => {
                let Value::Object(map) = v else {
                    return Err(
                        self.expected(r#"an object {"tag": case, "val": …} (a variant)"#, v)
                    );
                };
                let tag = match map.get("tag") {
                    Some(Value::String(tag)) => tag,
                    Some(other) => {
                        return Err(
                            self.refuse_at("tag", expectation("a string (a case name)", other))
                        );
                    }
                    None => return Err(self.refuse(r#"the variant has no "tag""#)),
                };
                let Some(case) = variant.cases().find(|c| c.name == tag.as_str()) else {
                    let message = format!("{} is not one of the variant's cases", quoted(tag));
                    return Err(self.refuse_at("tag", message));
                };
                let payload = match (&case.ty, map.get("val")) {
                    (Some(ty), Some(val)) => {
                        Some(Box::new(self.under("val", |c| c.val(val, ty, next))?))
                    }
                    (Some(_), None) => {
                        return Err(self.refuse(format!(
                            r#"the case {} has a payload: "val" is missing"#,
                            quoted(tag)
                        )));
                    }
                    (None, _) => None,
                };
                let allowed = 1 + usize::from(case.ty.is_some());
                if map.len() > allowed {
                    let with_val = case.ty.is_some();
                    return Err(self.unknown_key(
                        map,
                        |k| k == "tag" || (with_val && k == "val"),
                        "member",
                        "case",
                    ));
                }
                Val::Variant(tag.clone(), payload)
            }
            Type::Option(option) => {
                let inner = option.ty();
                if matches!(inner, Type::Option(_)) {
                    return Err(self.refuse(
                        "an option<option<…>> has no exact JSON form (null would mean none and \
                         some(none))",
                    ));
                }
                match v {
                    Value::Null => Val::Option(None),
                    v => Val::Option(Some(Box::new(self.val(v, &inner, next)?))),
                }
            }
            Type::Result(result) => {
                let Value::Object(map) = v else {
                    return Err(self.expected(r#"an object {"ok": …} or {"err": …} (a result)"#, v));
                };
                let mut entries = map.iter();
                let (side, payload) = match (entries.next(), entries.next()) {
                    (Some(entry), None) => entry,
                    _ => {
                        return Err(self.refuse(format!(
                            r#"expected an object with exactly one of "ok" and "err", got {} members"#,
                            map.len()
                        )));
                    }
                };
                let ty = match side.as_str() {
                    "ok" => result.ok(),
                    "err" => result.err(),
                    _ => {
                        return Err(self.refuse(format!(
                            r#"expected "ok" or "err", got the member {}"#,
                            quoted(side)
                        )));
                    }
                };
                let payload = self.under(side, |c| match (ty, payload) {
                    (Some(ty), v) => Ok(Some(Box::new(c.val(v, &ty, next)?))),
                    (None, Value::Null) => Ok(None),
                    (None, other) => Err(c.expected("null (this side has no payload)", other)),
                })?;
                Val::Result(if side == "ok" {
                    Ok(payload)
                } else {
                    Err(payload)
                })
            }
            Type::Own(_) | Type::Borrow(_) => {
                return Err(self.refuse("a resource handle cannot be passed as JSON"));
            }
            Type::Future(_) | Type::Stream(_) | Type::ErrorContext | Type::Map(_) => {
                return Err(self.refuse(
                    "this type (future, stream, error-context or map) cannot be passed as JSON",
                ));
            }
        })
    }

    /// A JSON integer in the range of `T`. As for JSON Schema's `integer` (which the schema
    /// stage enforces first, so that the two stages agree), a number with no fractional part
    /// is one, however it is written: `3.0` and `1e2` are the integers 3 and 100. The value
    /// taken is the one the JSON parser holds (a number written with a fraction or exponent is
    /// read as an f64, exact up to 2^53), never a string's.
    fn integer<T>(&self, v: &Value, name: &str) -> Result<T, ConversionError>
    where
        T: TryFrom<i128> + Bounded,
    {
        let what = || format!("an integer from {} to {} ({name})", T::MIN, T::MAX);
        let Value::Number(n) = v else {
            return Err(self.expected(&what(), v));
        };
        // 2^127: every f64 below it with no fraction converts to i128 exactly.
        const I128_LIMIT: f64 = 1.7014118346046923e38;
        let whole = n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .or_else(|| {
                n.as_f64()
                    .filter(|x| x.fract() == 0.0 && x.abs() < I128_LIMIT)
                    .map(|x| x as i128)
            });
        match whole {
            Some(x) => T::try_from(x).map_err(|_| {
                self.refuse(format!(
                    "expected {}, got a number out of that range",
                    what()
                ))
            }),
            None => Err(self.refuse(format!("expected {}, got {}", what(), not_integer(n)))),
        }
    }

    /// Any JSON number, as the nearest f64 (JSON numbers are always finite).
    fn number(&self, v: &Value) -> Result<f64, ConversionError> {
        match v {
            Value::Number(n) => n
                .as_f64()
                .ok_or_else(|| self.refuse("the number has no f64 value")),
            _ => Err(self.expected("a number", v)),
        }
    }

    /// `v` as an array, of exactly `len` items when given.
    fn array<'v>(&self, v: &'v Value, len: Option<usize>) -> Result<&'v [Value], ConversionError> {
        let Value::Array(items) = v else {
            return Err(match len {
                Some(n) => self.expected(&format!("an array of {n} items"), v),
                None => self.expected("an array", v),
            });
        };
        match len {
            Some(n) if items.len() != n => Err(self.refuse(format!(
                "expected an array of exactly {n} items, got {}",
                items.len()
            ))),
            _ => Ok(items),
        }
    }

    fn items(
        &mut self,
        items: &[Value],
        ty: impl Fn(usize) -> Type,
        depth: usize,
    ) -> Result<Vec<Val>, ConversionError> {
        let mut vals = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let ty = ty(i);
            vals.push(self.under(&i.to_string(), |c| c.val(item, &ty, depth))?);
        }
        Ok(vals)
    }

    /// An object whose members are all required and the only ones allowed (a record's fields,
    /// a function's parameters), in the members' order. `(noun, owner)` name a member and what
    /// has it, in messages.
    fn members<'a>(
        &mut self,
        map: &Map<String, Value>,
        members: impl Iterator<Item = (&'a str, Type)>,
        depth: usize,
        (noun, owner): (&str, &str),
    ) -> Result<Vec<(String, Val)>, ConversionError> {
        let mut vals = Vec::new();
        let mut names = HashSet::new();
        for (name, ty) in members {
            let Some(v) = map.get(name) else {
                return Err(self.refuse(format!("the {noun} {} is missing", quoted(name))));
            };
            vals.push((
                name.to_string(),
                self.under(name, |c| c.val(v, &ty, depth + 1))?,
            ));
            names.insert(name);
        }
        if map.len() > vals.len() {
            return Err(self.unknown_key(map, |k| names.contains(k), noun, owner));
        }
        Ok(vals)
    }

    /// The refusal of the first key of `map` that `known` does not know.
    fn unknown_key(
        &self,
        map: &Map<String, Value>,
        known: impl Fn(&str) -> bool,
        noun: &str,
        owner: &str,
    ) -> ConversionError {
        match map.keys().find(|k| !known(k)) {
            Some(key) => self.refuse(format!("{} is not a {noun} of this {owner}", quoted(key))),
            None => self.refuse("the object has duplicate members"),
        }
    }
}

fn expectation(what: &str, got: &Value) -> String {
    format!("expected {what}, got {}", json_type_name(got))
}

/// What a JSON number that is not an exact integer is, for the message.
fn not_integer(n: &Number) -> &'static str {
    match n.as_f64() {
        Some(x) if x.fract() == 0.0 => "a number out of that range",
        _ => "a number with a fraction",
    }
}

/// The range of an integer type, for messages.
trait Bounded: Sized {
    const MIN: i128;
    const MAX: i128;
}

macro_rules! bounded {
    ($($t:ty),*) => {$(
        impl Bounded for $t {
            const MIN: i128 = <$t>::MIN as i128;
            const MAX: i128 = <$t>::MAX as i128;
        }
    )*};
}

bounded!(u8, u16, u32, u64, i8, i16, i32, i64);
