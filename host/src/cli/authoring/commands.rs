//! `vak new` and `vak build` as the command runs them: what they print, and the admission a
//! built project goes through under its own policy.

use super::super::{setup, tools, usage_error};
use super::Lang;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use vak_host::Policy;

/// `vak new NAME`: make the project and say what to do next.
pub fn new(name: &str, lang: Lang, dir: Option<&Path>, sdk: Option<&Path>) -> ExitCode {
    match super::new_project(name, lang, dir, sdk) {
        Ok(made) => {
            say!("made {}: a {} tool project", made.display(), lang.title());
            say!("next:  cd {} && vak build", made.display());
            ExitCode::SUCCESS
        }
        Err(e) => usage_error(e),
    }
}

/// `vak build`: build, then examine the component under the policy as `vak inspect` does
/// (`policy`, else the project's policy.toml, else one that grants nothing).
pub async fn build(
    dir: &Path,
    json: bool,
    policy: Option<Policy>,
    cache_dir: Option<PathBuf>,
    no_cache: bool,
) -> ExitCode {
    let wasm = match super::build_project(dir) {
        Ok(w) => w,
        Err(e) => return usage_error(e),
    };
    let own_policy = dir.join("policy.toml");
    let policy = match policy {
        Some(p) => p,
        None if own_policy.is_file() => match Policy::load(&own_policy) {
            Ok(p) => p,
            Err(e) => return usage_error(e),
        },
        None => Policy::deny_all(),
    };
    let host = match setup::builder(policy, cache_dir, no_cache).build().await {
        Ok(h) => h,
        Err(e) => return usage_error(e),
    };
    let bytes = match std::fs::read(&wasm) {
        Ok(b) => b,
        Err(e) => return usage_error(format!("cannot read {}: {e}", wasm.display())),
    };
    let exam = host.examine(&wasm.display().to_string(), &bytes).await;
    tools::print_examination(&exam, host.policy(), json);
    match (&exam.verdict, &exam.descriptor) {
        (vak_host::Verdict::Admitted { .. }, Some(d)) => {
            if !json {
                let folder = wasm.parent().unwrap_or(Path::new("."));
                say_err!(
                    "\ncall it:  vak --tools {} --policy {} call {} '{{...}}'",
                    folder.display(),
                    own_policy.display(),
                    d.name
                );
            }
            ExitCode::SUCCESS
        }
        _ => ExitCode::from(2),
    }
}
