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
    let missing = |what: String| {
        format!(
            "the credential {:?} is bound to {what}, which this host does not hold",
            credential.alias
        )
    };
    match &credential.secret {
        SecretRef::Env(var) => std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .map(SecretValue::new)
            .ok_or_else(|| missing(format!("the environment variable {var}"))),
        SecretRef::Stored(name) => match source.map(|s| s.get(name)) {
            Some(Ok(Some(v))) => Ok(v),
            Some(Err(e)) => Err(format!("the credential {:?}: {e}", credential.alias)),
            _ => Err(missing(format!("the secret {name:?}"))),
        },
    }
}

/// The scrubber for a call under `grant`: every credential value it could use, labelled with
/// the aliases that bind it. Built once per call (the values are read then: a value changed
/// during the call is not injected, see `capabilities::http`).
pub fn scrubber_for(source: Option<&dyn SecretSource>, grant: &ToolGrant) -> Scrubber {
    let Some(http) = grant.http() else {
        return Scrubber::none();
    };
    if http.credentials.is_empty() {
        return Scrubber::none();
    }
    Scrubber::labelled(
        http.credentials
            .values()
            .filter_map(|c| resolve(source, c).ok().map(|v| (v, c.alias.clone()))),
    )
}
