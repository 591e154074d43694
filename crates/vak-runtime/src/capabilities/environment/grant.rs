//! The `environment` section of a tool's policy: the keys a foreign component may read through
//! `wasi:config/store` and `wasi:cli/environment`, each bound to where its value comes from (a
//! variable of the host's environment or a stored secret). Nothing else of the host's
//! environment is visible; the values are scrubbed from the record as secrets are.

use super::super::http::grant::{Origin, SecretRef, parse_origin};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The policy section, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentGrantFile {
    keys: BTreeMap<String, KeyFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    /// The name in the secrets file (`vak secret set NAME`).
    secret: Option<String>,
    /// Or the host's environment variable holding the value.
    env: Option<String>,
    /// The origins the value may be sent to over `http`; absent: anywhere the http grant
    /// allows (as under Wassette, whose policies name no audience).
    audience: Option<Vec<String>>,
}

/// One granted key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvKey {
    /// The name the component reads.
    pub key: String,
    pub source: SecretRef,
    /// Where the value may be sent, when the policy says.
    pub audience: Option<Vec<Origin>>,
}

/// Longest key accepted: keys are names, not data.
const MAX_KEY_BYTES: usize = 256;

/// Whether `key` is a name a component may read: printable ASCII without `=` (which separates
/// a name from its value in an environment).
fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_KEY_BYTES
        && key.bytes().all(|b| b.is_ascii_graphic() && b != b'=')
}

/// Check and compile the section.
pub fn compile(file: EnvironmentGrantFile) -> Result<Vec<EnvKey>, String> {
    let mut keys = Vec::with_capacity(file.keys.len());
    for (key, k) in file.keys {
        if !valid_key(&key) {
            return Err(format!(
                "environment key {key:?} must be 1-{MAX_KEY_BYTES} printable ASCII characters without `=`"
            ));
        }
        let field = format!("environment.keys.{key}");
        let source = match (k.secret, k.env) {
            (Some(name), None) if crate::secrets::valid_name(&name) => SecretRef::Stored(name),
            (Some(name), None) => {
                return Err(format!("`{field}.secret` {name:?} is not a secret name"));
            }
            (None, Some(var)) if valid_key(&var) => SecretRef::Env(var),
            (None, Some(var)) => {
                return Err(format!("`{field}.env` {var:?} is not a variable name"));
            }
            _ => return Err(format!("`{field}` needs exactly one of `secret` and `env`")),
        };
        let audience = match k.audience {
            None => None,
            Some(list) if list.is_empty() => {
                return Err(format!(
                    "`{field}.audience` is empty: leave it out to allow every granted origin"
                ));
            }
            Some(list) => Some(
                list.iter()
                    .map(|o| parse_origin(o, &format!("{field}.audience")))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        keys.push(EnvKey {
            key,
            source,
            audience,
        });
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<EnvKey>, String> {
        let file: EnvironmentGrantFile = toml::from_str(text).map_err(|e| e.to_string())?;
        compile(file)
    }

    #[test]
    fn keys_are_bound_to_a_variable_or_a_secret() {
        let keys = parse(
            "[keys]\nOPENWEATHER_API_KEY = { env = \"OPENWEATHER_API_KEY\" }\nTOKEN = { secret = \"token\", audience = [\"https://api.example.com\"] }",
        )
        .expect("parses");
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].key, "OPENWEATHER_API_KEY");
        assert_eq!(keys[0].source, SecretRef::Env("OPENWEATHER_API_KEY".into()));
        assert_eq!(keys[0].audience, None);
        assert_eq!(keys[1].source, SecretRef::Stored("token".into()));
        assert_eq!(keys[1].audience.as_ref().map(Vec::len), Some(1));
    }

    #[test]
    fn bad_keys_and_sources_are_refused() {
        for (text, says) in [
            ("[keys]\n\"A=B\" = { env = \"A\" }", "without `=`"),
            ("[keys]\nA = {}", "exactly one of"),
            (
                "[keys]\nA = { env = \"A\", secret = \"a\" }",
                "exactly one of",
            ),
            ("[keys]\nA = { secret = \"../a\" }", "not a secret name"),
            ("[keys]\nA = { env = \"A\", audience = [] }", "is empty"),
            (
                "[keys]\nA = { env = \"A\", value = \"x\" }",
                "unknown field",
            ),
        ] {
            let error = parse(text).expect_err(text);
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
