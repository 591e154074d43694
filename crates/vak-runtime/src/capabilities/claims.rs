//! A tool's claim of scopes against what a grant lists: the check each capability's grant
//! module makes at admission.

/// `Err` naming the claimed scopes that `granted` does not cover.
pub(crate) fn outside(
    claimed: &[String],
    capability: &str,
    what: &str,
    granted: impl Fn(&str) -> bool,
) -> Result<(), String> {
    let missing: Vec<&str> = claimed
        .iter()
        .map(String::as_str)
        .filter(|s| !granted(s))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "`{capability}` is claimed for {what} {missing:?}, which the policy does not grant"
        ))
    }
}
