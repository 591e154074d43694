//! JSON parsing that refuses duplicate object keys. A document with a duplicated key means two
//! things at once: the host would validate one value while a tool's parser may take the other.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(Strict)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "the key {key:?} appears twice in one object"
                )));
            }
            let value = map.next_value_seed(Strict)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// Parse `text` as JSON, refusing duplicate keys in any object.
pub fn parse(text: &str) -> Result<Value, serde_json::Error> {
    let mut d = serde_json::Deserializer::from_str(text);
    let v = Strict.deserialize(&mut d)?;
    d.end()?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        assert!(parse(r#"{"a":1,"b":{"c":[1,{"d":2}]}}"#).is_ok());
        let e = parse(r#"{"zone":"UTC","zone":"Mars"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("twice"), "{e}");
        assert!(parse(r#"{"a":[{"x":1,"x":2}]}"#).is_err());
        assert!(parse(r#"{"a":1} trailing"#).is_err());
        assert!(parse(r#"{"a":"\ud800"}"#).is_err(), "a lone surrogate");
        assert!(parse(r#"{"a":1e400}"#).is_err(), "a number past f64");
        assert_eq!(
            parse(r#"{"n":18446744073709551615}"#).unwrap()["n"],
            u64::MAX
        );
    }
}
