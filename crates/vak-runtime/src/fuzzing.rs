//! Entry points for the `cargo fuzz` targets in `fuzz/`: the untrusted boundaries that are
//! private to their modules (a guest's workspace path, a guest's HTTP request) exposed as plain
//! functions, so the fuzzers drive the very code the host runs. Not a stable API.

/// The workspace capability's path check, then the capability layer's own resolution under
/// `root` (cap-std, which refuses any escape by `..`, an absolute path or a symlink). Returns
/// the bytes read, or why the read was refused.
pub fn workspace_read(root: &std::path::Path, path: &str) -> Result<Vec<u8>, String> {
    crate::capabilities::workspace::check_path(path, false)?;
    let dir = cap_std::fs::Dir::open_ambient_dir(root, cap_std::ambient_authority())
        .map_err(|e| format!("root: {e}"))?;
    dir.read(path).map_err(|e| e.to_string())
}

/// The http capability's request check: method, headers and URL as a guest sends them.
pub fn http_validate(
    method: &str,
    url: &str,
    headers: &[(String, String)],
) -> Result<url::Url, String> {
    let request = crate::dispatch::bindings::vak::tool::http::Request {
        method: method.to_string(),
        url: url.to_string(),
        headers: headers
            .iter()
            .map(
                |(name, value)| crate::dispatch::bindings::vak::tool::http::Header {
                    name: name.clone(),
                    value: value.clone(),
                },
            )
            .collect(),
        body: None,
    };
    crate::capabilities::http::validate(&request).map_err(|e| format!("{e:?}"))
}
