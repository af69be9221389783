//! The HTTP unit's runtime: how requests connect (the TLS roots of
//! `[network]` and its pinned names), the providers of `[providers]`, and
//! their values, read at the host's edge (its environment, through
//! [`Environment`], or a file only its owner may read) and kept while
//! their file is unchanged. Opened once when the host opens; every turn
//! reads it, delegated ones included.

use std::path::PathBuf;
use std::sync::Arc;

use crate::config::{NetworkConfig, ProviderDef, ValueSource};
use crate::sandbox::bindings::Environment;
use crate::util::identity::FileIdentity;
use crate::util::watch::Watcher;

/// The HTTP sender's runtime: its client, the providers, and the values
/// read from their files.
pub struct HttpRuntime {
    /// How HTTP requests connect (`[network]`).
    pub client: Arc<HttpClient>,
    /// `[providers.NAME]`.
    pub providers: Arc<[ProviderDef]>,
    /// The provider values read from files (see [`ValueFiles`]).
    value_files: ValueFiles,
    /// The host's watch, read at each turn's start (a long-lived host).
    watcher: Option<Arc<Watcher>>,
    /// How the host reads its environment.
    environment: Environment,
}

impl HttpRuntime {
    /// The runtime of `[network]` and `[providers]`, reading values
    /// through `environment` and, with `watcher`, the host's watch.
    pub fn open(
        network: &NetworkConfig,
        providers: &[ProviderDef],
        watcher: Option<Arc<Watcher>>,
        environment: Environment,
    ) -> Result<HttpRuntime, NetworkError> {
        Ok(HttpRuntime {
            client: Arc::new(http_client(network)?),
            providers: providers.into(),
            value_files: ValueFiles::default(),
            watcher,
            environment,
        })
    }

    /// The provider named `name` (`[providers.NAME]`), if the host
    /// defines one.
    pub fn provider(&self, name: &str) -> Option<&ProviderDef> {
        self.providers.iter().find(|d| d.name == name)
    }

    /// The value of provider `name`, read now (the host's edge), or a
    /// refusal in words when there is none or it cannot be read.
    pub fn value_of(&self, name: &str) -> Result<String, String> {
        match self.provider(name) {
            Some(def) => self.read_value(def),
            None => Err(format!("provider `{name}` has no value on this host")),
        }
    }

    /// The value of provider `def`, from the host's environment or a file
    /// that only its owner may read. With the host's watch, a file read
    /// before is looked at again only when the watch says it may have
    /// changed: a write, a rename over it, a `chmod` (see
    /// [`crate::util::watch`]).
    fn read_value(&self, def: &ProviderDef) -> Result<String, String> {
        match &def.value {
            ValueSource::Env(var) => (self.environment)(var).ok_or_else(|| {
                format!(
                    "provider `{}`: the variable `{var}` is not set on the host",
                    def.name
                )
            }),
            ValueSource::File(path) => self.read_file(def, path),
        }
    }

    fn read_file(&self, def: &ProviderDef, path: &std::path::Path) -> Result<String, String> {
        use std::os::unix::fs::PermissionsExt;
        // Watched before it is looked at: a change after this is seen.
        // A key this watcher gave is re-armed by its own check; a path
        // it could not watch is not tried again (a `stat` every turn).
        let mut watch = None;
        if let Some(w) = self.watcher.as_deref() {
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
fn http_client(network: &NetworkConfig) -> Result<HttpClient, NetworkError> {
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
            return Err(bad(CaFileError::Empty));
        }
    }
    Ok(HttpClient::new(extra, network.resolve.clone())?)
}

/// Why `[network]` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// `ca_file` cannot be read, or holds no certificate.
    #[error("`[network] ca_file` `{}`: {source}", path.display())]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: CaFileError,
    },
    /// The HTTP client cannot be built with those roots.
    #[error(transparent)]
    Client(#[from] HttpClientError),
}

/// What is wrong with `[network] ca_file`.
#[derive(Debug, thiserror::Error)]
pub enum CaFileError {
    /// It cannot be read.
    #[error(transparent)]
    Read(crate::util::IoCause),
    /// One of its blocks is not a PEM certificate.
    #[error("not a PEM certificate: {0}")]
    Pem(#[source] rustls::pki_types::pem::Error),
    /// It holds none.
    #[error("it holds no certificate")]
    Empty,
}

/// Why the HTTP sender's client cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum HttpClientError {
    /// A certificate of `[network] ca_file` is not a usable root.
    #[error("a certificate of the ca file is not a root: {0}")]
    NotARoot(#[source] rustls::Error),
    /// rustls refuses the configuration.
    #[error("tls: {0}")]
    Tls(#[source] rustls::Error),
}

/// How the host's HTTP sender connects, whatever the turn.
pub struct HttpClient {
    /// rustls' client configuration: the webpki roots, and those of
    /// `[network] ca_file`.
    pub tls: Arc<rustls::ClientConfig>,
    /// `[network] resolve`: names answered with these addresses instead of
    /// the system resolver's (the addresses are vetted all the same), by
    /// the sender and by the `wasi:sockets` lookup alike.
    pub resolve: std::collections::BTreeMap<String, Vec<std::net::IpAddr>>,
}

impl HttpClient {
    /// A client trusting the webpki roots and `extra` (DER certificates).
    ///
    /// # Security
    /// Every root added is trusted for every host a turn may call.
    pub fn new(
        extra: Vec<rustls::pki_types::CertificateDer<'static>>,
        resolve: std::collections::BTreeMap<String, Vec<std::net::IpAddr>>,
    ) -> Result<HttpClient, HttpClientError> {
        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        for cert in extra {
            roots.add(cert).map_err(HttpClientError::NotARoot)?;
        }
        // ring, as wasmtime-wasi-http builds rustls (aws-lc-rs, which has
        // the post-quantum groups, needs a C toolchain step we avoid).
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(HttpClientError::Tls)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(HttpClient {
            tls: Arc::new(tls),
            resolve,
        })
    }
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("resolve", &self.resolve)
            .finish_non_exhaustive()
    }
}
