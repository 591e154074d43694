//! [`HostBuilder`]: the tools, the policy, the store and the keys a host starts with; `build`
//! admits every tool.

use super::error::HostError;
use super::{Host, Inner};
use crate::dispatch::{EngineSettings, Runtime};
use crate::policy::Policy;
use crate::revocation::Revocations;
use crate::signing::HostKey;
use crate::store::Store;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Builds a [`Host`]. Deny by default: with no policy set, every tool is refused.
pub struct HostBuilder {
    settings: EngineSettings,
    policy: Policy,
    sources: Vec<(String, Vec<u8>)>,
    store: Store,
    key: Option<HostKey>,
    signing: crate::signing::Signing,
    registry: crate::registry::Registry,
    secrets: Option<Arc<dyn crate::secrets::SecretSource>>,
    approver: Option<Arc<dyn crate::approval::Approver>>,
}

impl Default for HostBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl HostBuilder {
    /// No tools, a policy that grants nothing, default engine settings (AOT cache in the user's
    /// cache directory).
    pub fn new() -> Self {
        HostBuilder {
            settings: EngineSettings::default(),
            policy: Policy::deny_all(),
            sources: Vec::new(),
            store: Store::default(),
            key: None,
            signing: crate::signing::Signing::default(),
            registry: crate::registry::Registry::builtin(),
            secrets: crate::secrets::FileSecrets::default_path()
                .ok()
                .map(|p| Arc::new(crate::secrets::FileSecrets::new(p)) as _),
            approver: None,
        }
    }

    /// Who answers approvals for tools and scopes the policy marks `ask` (default: the call's
    /// client, asked with an elicitation form, where it can answer; else the call is refused
    /// with `approval_required`).
    pub fn approver(mut self, approver: Arc<dyn crate::approval::Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Where the values of the policy's credential aliases come from (default: the secrets file
    /// `vak secret` manages; credentials bound to `env` read the host's environment instead).
    pub fn secrets(mut self, secrets: Arc<dyn crate::secrets::SecretSource>) -> Self {
        self.secrets = Some(secrets);
        self
    }

    /// Register a payload schema (beside the built-in ones) with its material fields but no
    /// bindings: no receipt can back its fields, so its results are never `verified`. See
    /// [`HostBuilder::payload_schema_bound`].
    pub fn payload_schema(
        mut self,
        id: &str,
        document: serde_json::Value,
        material: Vec<String>,
    ) -> Result<Self, crate::schema::SchemaCompileError> {
        self.registry.register(id, document, material)?;
        Ok(self)
    }

    /// Register a payload schema with its material fields and what backs each field (which
    /// receipts, how the value relates, or which computation the host redoes): see
    /// [`crate::registry`].
    pub fn payload_schema_bound(
        mut self,
        id: &str,
        document: serde_json::Value,
        material: Vec<String>,
        bindings: Vec<crate::registry::FieldBinding>,
    ) -> Result<Self, crate::registry::RegistryError> {
        self.registry
            .register_bound(id, document, material, bindings)?;
        Ok(self)
    }

    /// Append every record to `journal`, written before the call returns (a local store;
    /// replaces a shared one).
    pub fn journal(mut self, journal: Arc<crate::journal::Journal>) -> Self {
        let revocations = self.store.revocations().clone();
        self.store = Store::Local(crate::store::Local {
            journal: Some(journal),
            revocations,
        });
        self
    }

    /// Keep the journal, the revocations and the session ledgers in `store` (for a shared
    /// store: with every other node of it).
    pub fn store(mut self, store: Store) -> Self {
        self.store = store;
        self
    }

    /// The key that signs every record (default: a fresh key for this host, signing whole).
    /// A key [`HostKey::with_nonces_ahead`] makes its nonces between calls (see
    /// [`crate::signing`], and when not to).
    pub fn signing_key(mut self, key: HostKey) -> Self {
        self.key = Some(key);
        self
    }

    /// What the key signs: checkpoints, off the call path (the default: of the local journal's
    /// chain, or, without a journal, of a chain in memory when [`Host::proof`] asks), or every
    /// record on it (see [`crate::signing::Signing`]).
    pub fn signing(mut self, signing: crate::signing::Signing) -> Self {
        self.signing = signing;
        self
    }

    /// Where revocations are kept (default: in memory only; a local store, replacing a
    /// shared one).
    pub fn revocations(mut self, revocations: Arc<Revocations>) -> Self {
        let journal = self.store.local().cloned();
        self.store = Store::Local(crate::store::Local {
            journal,
            revocations,
        });
        self
    }

    /// The policy every admission and call is checked against.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Engine limits and the cache directory.
    pub fn engine_settings(mut self, settings: EngineSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Where compiled components are cached (`None`: compile at every start).
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.settings.cache_dir = dir;
        self
    }

    /// Add the tools bundled with vak (`clock`, `stats`, `compare`, `replace`, `research`).
    pub fn bundled_tools(mut self) -> Self {
        for (name, bytes) in crate::bundled::TOOLS {
            self.sources
                .push((format!("bundled:{name}"), bytes.to_vec()));
        }
        self
    }

    /// Add one component; `source` names it in messages.
    pub fn component(mut self, source: impl Into<String>, bytes: Vec<u8>) -> Self {
        self.sources.push((source.into(), bytes));
        self
    }

    /// Add every `*.wasm` file of `dir` (in name order).
    pub fn tools_dir(mut self, dir: &Path) -> Result<Self, HostError> {
        let read_err = |source| HostError::ReadTools {
            path: dir.display().to_string(),
            source,
        };
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(read_err)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
            .collect();
        paths.sort();
        for path in paths {
            let bytes = std::fs::read(&path).map_err(|source| HostError::ReadTools {
                path: path.display().to_string(),
                source,
            })?;
            self.sources.push((path.display().to_string(), bytes));
        }
        Ok(self)
    }

    /// Start the engine and admit every component. Refused components are kept as
    /// `Examination`s with their reasons; the host serves the admitted ones.
    pub async fn build(self) -> Result<Host, HostError> {
        let key = match self.key {
            Some(k) => k,
            None => HostKey::generate()?,
        };
        let runtime = Runtime::new(self.settings)?;
        let mut tools = BTreeMap::new();
        let mut examinations = Vec::new();
        // Components are admitted a few at a time (one per core, at least two): their compiles
        // (each on a thread of its own, and parallel inside Cranelift) overlap with each other's
        // serial parts, and a host with many tools does not start a compile thread for each at
        // once. Verdicts come in the order the components were given, so a duplicate name is
        // refused for the later one.
        let at_once = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
        let admitted_all: Vec<_> = {
            use futures::StreamExt as _;
            futures::stream::iter(&self.sources)
                .map(|(source, bytes)| runtime.admit(source, bytes, &self.policy))
                .buffered(at_once)
                .collect()
                .await
        };
        for (mut exam, admitted) in admitted_all {
            // A component's tools are served together or not at all: one whose name another
            // component already provides refuses the later component as a whole.
            let taken = admitted.iter().find(|t| tools.contains_key(t.name()));
            if let Some(taken) = taken {
                exam.verdict = crate::admission::AdmissionError::DuplicateName {
                    tool: taken.name().to_string(),
                }
                .verdict();
            } else {
                for tool in admitted {
                    tools.insert(tool.name().to_string(), Arc::new(tool));
                }
            }
            examinations.push(exam);
        }
        let key = Arc::new(key);
        // Checkpoints: the local journal's indexer signs them; without a journal, records are
        // hashed into a chain in memory, signed when a proof is asked for ([`Host::proof`]). A
        // shared store signs each record.
        let mut chain = None;
        if let (crate::signing::Signing::Checkpoints, Store::Local(local)) =
            (self.signing, &self.store)
        {
            match &local.journal {
                Some(journal) => journal.sign_checkpoints(key.clone()),
                None => chain = Some(Arc::new(crate::signing::MemoryChain::new(key.clone()))),
            }
        }
        let grant_digests = tools
            .iter()
            .map(|(name, tool)| {
                let digest = crate::digest::sha256_hex(format!("{:?}", tool.grant).as_bytes());
                (name.clone(), digest)
            })
            .collect();
        Ok(Host {
            inner: Arc::new(Inner {
                grant_digests,
                runtime,
                policy: self.policy,
                tools,
                examinations,
                store: self.store,
                named: std::sync::Mutex::default(),
                key,
                chain,
                registry: self.registry,
                secrets: self.secrets,
                approver: self.approver,
            }),
        })
    }
}
