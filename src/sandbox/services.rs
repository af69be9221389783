//! The narrow services a run is given besides its [`Plan`](super::Plan).
//!
//! The sandbox never sees the policy snapshot, the manifests or the gate:
//! what it needs of the host comes through three traits, each already
//! bound to the turn's actor by the host that implements them.
//!
//! - [`AuditSink`]: where the run's own decisions go (a command call, a
//!   refusal of the filesystem layer); the sink adds the turn, the actor's
//!   identity and the snapshot's hashes.
//! - [`CommandScreen`]: the policy's answer for one command line of
//!   `code:exec`, for this actor.
//! - [`NestedTurn`]: a delegated turn (`delegate:call`), which passes the
//!   same gate as any turn.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::policy::DenyCode;
use crate::undo::TurnJournal;

/// Where the decisions made during a run go.
pub trait AuditSink: Send + Sync {
    /// Records one decision made during the run: `line` has at least
    /// `request` and `decision`; the sink adds who and under which policy.
    fn decision(&self, line: serde_json::Value);
}

/// The policy's answer for a command line, bound to one actor.
pub trait CommandScreen: Send + Sync {
    /// `Ok` when `command` (the exact argv, shell-quoted) of program
    /// `tool` may run; the deny code and reason when not.
    fn screen(&self, tool: &str, command: &str) -> Result<(), (DenyCode, String)>;
}

/// Who answers a guest's question (`human:ask`) when the person is not at
/// the controlling terminal: an MCP client's elicitation, say.
pub trait Asker: Send + Sync {
    /// The person's answer to `question` (the guest's text, cut to
    /// [`super::human::MAX_TEXT`]), waiting at most `left`; or the denial
    /// the guest gets (`code`, `reason`).
    fn ask(&self, question: &str, left: std::time::Duration) -> Result<String, (DenyCode, String)>;
}

/// A shared [`Asker`], as a request carries it.
#[derive(Clone)]
pub struct AskerRef(pub Arc<dyn Asker>);

impl std::fmt::Debug for AskerRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AskerRef")
    }
}

/// How a delegated call ended when it produced no output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NestedError {
    /// Refused before or while it ran (a deny or limit code).
    Denied {
        /// The deny or limit code.
        code: DenyCode,
        /// The refusal in words.
        reason: String,
    },
    /// It ran and failed.
    Failed(String),
}

/// Runs another executor as a nested turn: of the same actor for
/// `EXECUTOR`, of ACTOR for `ACTOR/EXECUTOR` (a delegation the policy
/// decides).
pub trait NestedTurn: Send + Sync {
    /// Runs `executor` on `input` at nesting `depth` (1 for a call made by
    /// a top-level turn), within `left` (what remains of the caller's
    /// deadline), journaled into `journal` like its caller.
    fn call(
        &self,
        executor: &str,
        input: &str,
        depth: u32,
        left: std::time::Duration,
        journal: Option<TurnJournal>,
    ) -> Result<String, NestedError>;
}

/// A turn's cancel switch: set it from any thread, and the run stops at
/// its next deadline check (within one epoch tick) as a deadline would
/// stop it, with `TURN_CANCELLED`.
#[derive(Clone, Default)]
pub struct CancelHandle {
    flag: Arc<AtomicBool>,
    /// Another source of cancellation, asked at each check (a server's
    /// request token), so nothing has to watch it and set the flag.
    also: Option<Arc<dyn Fn() -> bool + Send + Sync>>,
}

impl std::fmt::Debug for CancelHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelHandle")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl CancelHandle {
    /// A handle that is not cancelled.
    pub fn new() -> CancelHandle {
        CancelHandle::default()
    }

    /// A switch that also counts as set once `cancelled` says so (asked at
    /// each check: it must be cheap, an atomic load).
    pub fn also_when(cancelled: impl Fn() -> bool + Send + Sync + 'static) -> CancelHandle {
        CancelHandle {
            flag: Arc::default(),
            also: Some(Arc::new(cancelled)),
        }
    }

    /// Asks the turn to stop.
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }

    /// Whether the turn was asked to stop, through this handle or the other source it asks.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst) || self.also.as_ref().is_some_and(|also| also())
    }
}

/// Everything a run is given besides its plan; the host builds it for each
/// run (`host::nested::services`).
#[derive(Clone)]
pub struct RunServices {
    /// The host's memory database (`<state>/memory.db`), for a plan that
    /// grants memory: the run cannot name another.
    pub memory: Arc<crate::memory::MemoryDb>,
    /// How deep in delegated calls this run is (0 for a turn).
    pub depth: u32,
    /// Where mutations are journaled for undo (`None`: not journaled).
    /// Delegated calls share their caller's journal, so undoing a turn
    /// undoes what its callees did.
    pub journal: Option<TurnJournal>,
    /// Where the run's decisions are recorded (the turn's audit).
    pub audit: Arc<dyn AuditSink>,
    /// The policy's screen for the command lines the guest asks to run (`code:exec`).
    pub screen: Arc<dyn CommandScreen>,
    /// Runs `delegate:call`s as nested turns; `None`: the host gave none, so every call is
    /// refused.
    pub nested: Option<Arc<dyn NestedTurn>>,
    /// Stops the run from another thread, like its deadline.
    pub cancel: CancelHandle,
    /// Who answers `human:ask`; `None`: nobody (the caller passes the
    /// terminal's asker when a person is there).
    pub asker: Option<AskerRef>,
    /// The values of the plan's `env:read` variables that are set, read
    /// by the host at the edge: the sandbox reads no process environment.
    pub env: Vec<(String, String)>,
    /// How HTTP requests connect: the TLS roots and the pinned names.
    pub http: Arc<HttpClient>,
    /// The values of the plan's providers (`provider:access`), read by the
    /// host at the edge; only the HTTP unit's sender sees them.
    pub secrets: Vec<ProviderSecret>,
}

/// How the host's HTTP sender connects, whatever the turn.
pub struct HttpClient {
    /// rustls' client configuration: the webpki roots, and those of
    /// `[network] ca_file`.
    pub tls: Arc<rustls::ClientConfig>,
    /// `[network] resolve`: names answered with these addresses instead of
    /// the system resolver's (the addresses are vetted all the same).
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
    ) -> Result<HttpClient, String> {
        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        for cert in extra {
            roots
                .add(cert)
                .map_err(|e| format!("a certificate of the ca file is not a root: {e}"))?;
        }
        // ring, as wasmtime-wasi-http builds rustls (aws-lc-rs, which has
        // the post-quantum groups, needs a C toolchain step we avoid).
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("tls: {e}"))?
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

/// A provider's value as the host read it: never printed, never
/// serialized.
#[derive(Clone)]
pub struct ProviderSecret {
    /// The provider's name, the `provider:access` target.
    pub name: String,
    value: Result<String, String>,
}

impl ProviderSecret {
    /// The value of provider `name`, or why it could not be read.
    pub fn new(name: String, value: Result<String, String>) -> ProviderSecret {
        ProviderSecret { name, value }
    }

    /// The value.
    ///
    /// # Security
    /// The credential itself: only the HTTP sender may put it anywhere.
    pub fn value(&self) -> Result<&str, &str> {
        self.value.as_deref().map_err(String::as_str)
    }
}

impl std::fmt::Debug for ProviderSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProviderSecret({}, <hidden>)", self.name)
    }
}
