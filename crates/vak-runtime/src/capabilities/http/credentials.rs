//! The http broker's credentials and the secret store: the value a credential is bound to, and
//! the scrubber of every value a call's grant could inject.

use super::grant::{Credential, SecretRef};
use crate::capabilities::ToolGrant;
use crate::secrets::{Scrubber, SecretSource, SecretValue};

/// The value of `credential`'s secret from `source` (or the environment), or why there is
/// none.
pub fn resolve(
    source: Option<&dyn SecretSource>,
    credential: &Credential,
) -> Result<SecretValue, String> {
    resolve_source(source, &credential.secret).map_err(|e| match e {
        Unresolved::Missing(what) => format!(
            "the credential {:?} is bound to {what}, which this host does not hold",
            credential.alias
        ),
        Unresolved::Failed(why) => format!("the credential {:?}: {why}", credential.alias),
    })
}

/// Why a secret's value is not available.
#[derive(Debug)]
pub enum Unresolved {
    /// Not set: the variable or the stored secret (named) does not exist here.
    Missing(String),
    /// The secret store failed to read it.
    Failed(String),
}

/// The scrubber for a call under `grant`: every credential value it could use, labelled with
/// the aliases that bind it. Built once per call (the values are read then: a value changed
/// during the call is not injected, see `capabilities::http`).
pub fn scrubber_for(source: Option<&dyn SecretSource>, grant: &ToolGrant) -> Scrubber {
    let credentials = grant.http().map(|h| &h.credentials);
    if credentials.is_none_or(|c| c.is_empty()) && grant.environment.is_empty() {
        return Scrubber::none();
    }
    let credentials = credentials
        .into_iter()
        .flat_map(|c| c.values())
        .filter_map(|c| resolve(source, c).ok().map(|v| (v, c.alias.clone())));
    // The values of a foreign component's environment keys are the guest's to read, and the
    // record's and the client's never to see.
    let environment = grant.environment.iter().filter_map(|k| {
        resolve_source(source, &k.source)
            .ok()
            .map(|v| (v, environment_label(&k.key)))
    });
    Scrubber::labelled(credentials.chain(environment))
}

/// The scrubber's label of environment key `key`'s value (credential aliases are bare names).
pub fn environment_label(key: &str) -> String {
    format!("environment:{key}")
}

/// The value behind `source`, or why there is none.
pub fn resolve_source(
    source: Option<&dyn SecretSource>,
    secret: &SecretRef,
) -> Result<SecretValue, Unresolved> {
    match secret {
        SecretRef::Env(var) => std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .map(SecretValue::new)
            .ok_or_else(|| Unresolved::Missing(format!("the environment variable {var}"))),
        SecretRef::Stored(name) => match source.map(|s| s.get(name)) {
            Some(Ok(Some(v))) => Ok(v),
            Some(Err(e)) => Err(Unresolved::Failed(e.to_string())),
            _ => Err(Unresolved::Missing(format!("the secret {name:?}"))),
        },
    }
}
