//! `environment`: what a foreign component (one written for another host) reads of the host's
//! configuration through the standard interfaces `wasi:config/store` and `wasi:cli/environment`:
//! exactly the keys its grant names, with their values read when the call starts (from a host
//! variable or a stored secret). A key the grant does not name does not exist for the guest.
//! Values are scrubbed from the record and from what reaches the client, and an http request
//! carrying one goes only where the key's audience allows (`capabilities::http`).
//!
//! It is not one of vak's own capabilities (no `vak:tool` interface, no claim): vak's own tools
//! get credentials injected by the http broker and never hold them.

pub mod grant;

use crate::secrets::SecretSource;
use grant::EnvKey;

/// The `wasi:config/store@0.2.0-draft` interface (Wassette's, and the draft most components
/// were built against).
mod config_draft {
    wasmtime::component::bindgen!({
        path: "../../wit/foreign/wasi-config-draft.wit",
        world: "wasi:config/imports@0.2.0-draft",
    });
}

/// The values of the granted keys that this host holds, read now (a key whose source is not
/// set is absent, as it would be from an environment).
pub fn values(keys: &[EnvKey], source: Option<&dyn SecretSource>) -> Vec<(String, String)> {
    keys.iter()
        .filter_map(|k| {
            let value =
                crate::capabilities::http::credentials::resolve_source(source, &k.source).ok()?;
            Some((k.key.clone(), value.expose().to_string()))
        })
        .collect()
}

/// The call's view of its configuration store.
pub struct ConfigStore<'a> {
    pub(crate) values: &'a [(String, String)],
}

impl config_draft::wasi::config::store::Host for ConfigStore<'_> {
    fn get(
        &mut self,
        key: String,
    ) -> Result<Option<String>, config_draft::wasi::config::store::ConfigError> {
        Ok(self
            .values
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone()))
    }

    fn get_all(
        &mut self,
    ) -> Result<Vec<(String, String)>, config_draft::wasi::config::store::ConfigError> {
        Ok(self.values.to_vec())
    }
}

struct HasConfig;

impl wasmtime::component::HasData for HasConfig {
    type Data<'a> = ConfigStore<'a>;
}

/// Link `wasi:config/store@0.2.0-draft` into `linker`, served from what `view` returns.
pub fn link_config<T: 'static>(
    linker: &mut wasmtime::component::Linker<T>,
    view: fn(&mut T) -> ConfigStore<'_>,
) -> wasmtime::Result<()> {
    config_draft::wasi::config::store::add_to_linker::<T, HasConfig>(linker, view)
}
