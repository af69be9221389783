//! The host side of the capabilities that keep something for the life
//! of the process: built once when the host opens, from the
//! configuration and the stores, and shared by every turn, delegated ones
//! included (they hold the same [`Runtimes`]).
//!
//! - `delegate:call`: the executors a call may name;
//! - `network:sites` and `provider:access`: how HTTP requests connect,
//!   the providers, and their values read from files;
//! - `memory:read` / `memory:write`: the store;
//! - `env:read`: the process's environment, read here (the host's edge),
//!   never in the sandbox.
//!
//! A turn's services ([`super::services`]) take from here only what its
//! plan was allowed.

use std::sync::Arc;

use crate::config::{NetworkConfig, ProviderDef, ValueSource};
use crate::manifest::Manifest;
use crate::sandbox::services::{HttpClient, ProviderSecret};
use crate::sandbox::Plan;
use crate::state::memory::MemoryBackend;
use crate::util::identity::FileIdentity;
use crate::util::watch::Watcher;

use super::{CaFileError, HostError, NetworkError};

/// What the capabilities' host sides keep for the life of the process.
pub(crate) struct Runtimes {
    /// The executors this host knows: what a turn or a `delegate:call`
    /// may name.
    pub manifests: Arc<Vec<Manifest>>,
    /// How HTTP requests connect, and the providers' values.
    pub http: HttpRuntime,
    /// The memory store behind `gatehouse:executor/memory`.
    pub memory: Arc<dyn MemoryBackend>,
}

impl Runtimes {
    /// The runtimes of a host of `network` and `providers`, knowing
    /// `manifests`, whose memory is `memory` (the stores').
    pub fn open(
        network: &NetworkConfig,
        providers: &[ProviderDef],
        manifests: Vec<Manifest>,
        memory: Arc<dyn MemoryBackend>,
    ) -> Result<Runtimes, HostError> {
        Ok(Runtimes {
            manifests: Arc::new(manifests),
            http: HttpRuntime {
                client: Arc::new(http_client(network)?),
                providers: providers.into(),
                value_files: ValueFiles::default(),
            },
            memory,
        })
    }

    /// The values of `plan`'s `env:read` variables that are set.
    pub fn env_values(plan: &Plan) -> Vec<(String, String)> {
        plan.parts()
            .env
            .names
            .iter()
            .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
            .collect()
    }
}

/// The HTTP sender's runtime: its client, the providers, and the values
/// read from their files.
pub(crate) struct HttpRuntime {
    /// How HTTP requests connect (`[network]`).
    pub client: Arc<HttpClient>,
    /// `[providers.NAME]`.
    pub providers: Arc<[ProviderDef]>,
    /// The provider values read from files (see [`ValueFiles`]).
    value_files: ValueFiles,
}

impl HttpRuntime {
    /// The values of the providers `plan` was allowed, read now (the
    /// host's edge), each a refusal in words when it cannot be read.
    /// With `watcher` (read at this turn's start), a file read before is
    /// looked at again only when the watch says it may have changed.
    pub fn secrets(&self, plan: &Plan, watcher: Option<&Watcher>) -> Vec<ProviderSecret> {
        plan.parts()
            .http
            .providers
            .iter()
            .filter_map(|p| self.providers.iter().find(|d| d.name == p.name))
            .map(|d| ProviderSecret::new(d.name.clone(), self.read_value(d, watcher)))
            .collect()
    }

    /// The value of provider `def`, from the host's environment or a file
    /// that only its owner may read. With `watcher`, a file read before is
    /// looked at again only when the watch says it may have changed: a
    /// write, a rename over it, a `chmod` (see [`crate::util::watch`]).
    fn read_value(&self, def: &ProviderDef, watcher: Option<&Watcher>) -> Result<String, String> {
        match &def.value {
            ValueSource::Env(var) => std::env::var(var).map_err(|_| {
                format!(
                    "provider `{}`: the variable `{var}` is not set on the host",
                    def.name
                )
            }),
            ValueSource::File(path) => self.read_file(def, path, watcher),
        }
    }

    fn read_file(
        &self,
        def: &ProviderDef,
        path: &std::path::Path,
        watcher: Option<&Watcher>,
    ) -> Result<String, String> {
        use std::os::unix::fs::PermissionsExt;
        // Watched before it is looked at: a change after this is seen.
        // A key this watcher gave is re-armed by its own check; a path
        // it could not watch is not tried again (a `stat` every turn).
        let mut watch = None;
        if let Some(w) = watcher {
            let key = match self.value_files.watched(path, w.id()) {
                Some((value, Some(key))) => {
                    if w.check_drained(key, || ()).is_none() {
                        return Ok(value);
                    }
                    Some(key)
                }
                Some((_, None)) => None,
                None => w.watch(&[path]),
            };
            watch = Some((w.id(), key));
        }
        let shown = path.display();
        let failed = |e: std::io::Error| {
            format!(
                "provider `{}`: `{shown}`: {}",
                def.name,
                crate::util::lower(&e.to_string())
            )
        };
        let meta = std::fs::metadata(path).map_err(failed)?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(format!(
                "provider `{}`: `{shown}` may be read by others (mode {:o}); make it 0600",
                def.name,
                meta.permissions().mode() & 0o777
            ));
        }
        let stamp = FileIdentity::of(&meta);
        if let Some(value) = self.value_files.get(path, &stamp, watch) {
            return Ok(value);
        }
        let value = std::fs::read_to_string(path)
            .map(|v| v.trim_end_matches(['\n', '\r']).to_string())
            .map_err(failed)?;
        self.value_files.put(path, stamp, &value, watch);
        Ok(value)
    }
}

/// The provider values read from files, each kept while its file's
/// [`FileIdentity`] holds: a turn then costs one `stat` of the file (its
/// mode is checked at every turn) instead of an open and reads, or
/// nothing while the host's watch says the file is unchanged. Process
/// memory the values are in anyway while turns use them.
#[derive(Default)]
struct ValueFiles {
    read: std::sync::Mutex<Vec<Kept>>,
}

/// One value kept by [`ValueFiles`].
struct Kept {
    path: std::path::PathBuf,
    stamp: FileIdentity,
    value: String,
    /// The watcher that looked at the path before the value was read,
    /// and its key (`None`: it cannot watch the path).
    watch: Option<(u64, Option<crate::util::watch::WatchKey>)>,
}

/// A watcher's id and its key for a path (`None`: it cannot watch it).
type Watch = Option<(u64, Option<crate::util::watch::WatchKey>)>;

impl ValueFiles {
    /// The value kept for `path` and its key in watcher `watcher` (`None`:
    /// that watcher cannot watch it), when that watcher looked at it.
    fn watched(
        &self,
        path: &std::path::Path,
        watcher: u64,
    ) -> Option<(String, Option<crate::util::watch::WatchKey>)> {
        crate::util::lock(&self.read)
            .iter()
            .find(|k| k.path == path)
            .and_then(|k| match k.watch {
                Some((w, key)) if w == watcher => Some((k.value.clone(), key)),
                _ => None,
            })
    }

    /// The value read from `path` when its stamp was `stamp`, now under
    /// `watch` (armed before the stamp was taken).
    fn get(&self, path: &std::path::Path, stamp: &FileIdentity, watch: Watch) -> Option<String> {
        let mut read = crate::util::lock(&self.read);
        let kept = read
            .iter_mut()
            .find(|k| k.path == path && k.stamp == *stamp)?;
        kept.watch = watch;
        Some(kept.value.clone())
    }

    /// Keeps `value`, read from `path` at `stamp` under `watch` (replacing
    /// what was kept for it).
    fn put(&self, path: &std::path::Path, stamp: FileIdentity, value: &str, watch: Watch) {
        let mut read = crate::util::lock(&self.read);
        read.retain(|k| k.path != path);
        read.push(Kept {
            path: path.to_path_buf(),
            stamp,
            value: value.to_string(),
            watch,
        });
    }
}

/// The HTTP sender's client of `[network]`: the webpki roots and those
/// of `ca_file`, and the pinned names.
fn http_client(network: &NetworkConfig) -> Result<HttpClient, HostError> {
    use rustls::pki_types::pem::PemObject;
    let mut extra = Vec::new();
    if let Some(path) = &network.ca_file {
        let bad = |source: CaFileError| NetworkError::CaFile {
            path: path.clone(),
            source,
        };
        let pem = std::fs::read(path).map_err(|e| bad(CaFileError::Read(e.into())))?;
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
            extra.push(cert.map_err(|e| bad(CaFileError::Pem(e)))?);
        }
        if extra.is_empty() {
            return Err(bad(CaFileError::Empty).into());
        }
    }
    Ok(HttpClient::new(extra, network.resolve.clone()).map_err(NetworkError::from)?)
}
