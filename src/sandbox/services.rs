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

use serde::Serialize;

use crate::policy::DenyCode;
use crate::undo::TurnJournal;

/// Where the decisions made during a run go.
pub trait AuditSink: Send + Sync {
    /// Records one decision made during the run; the sink adds who and
    /// under which policy.
    fn decision(&self, entry: RunDecision);
}

/// One decision made while a run went on, as the audit records it: what
/// was asked, the answer, and what came of it. Every string in it may be
/// the guest's: the sink bounds them.
#[derive(Debug, Clone, Serialize)]
pub struct RunDecision {
    /// What was asked.
    pub request: RunRequest,
    /// The answer.
    pub decision: RunVerdict,
    /// A command's end (`code:exec`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandEnd>,
    /// An allowed HTTP request's end.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub response: Option<ResponseEnd>,
    /// The provider whose credential the request carried (its name only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// What a run asked, by kind.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunRequest {
    /// A command line of `code:exec`.
    Tool {
        /// The program's name (or its granted path).
        tool: String,
        /// The exact argv, shell-quoted.
        command: String,
    },
    /// An operation of the filesystem layer.
    Filesystem {
        /// `open`, `write`, `rename`, … or `more-refusals`.
        operation: String,
        /// The guest's path, when the operation has one.
        #[serde(skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// An HTTP request, canonical.
    Http {
        /// Uppercase.
        method: String,
        /// `http` or `https`.
        scheme: &'static str,
        /// Lowercase ASCII.
        host: String,
        /// Explicit.
        port: u16,
        /// Percent-decoded once.
        path: String,
        /// The query's sha256, never the query.
        query_sha256: Option<String>,
        /// The query's length in bytes.
        query_bytes: Option<usize>,
    },
    /// An HTTP request that has no canonical form (a bad path, userinfo):
    /// its URI without query and userinfo.
    #[serde(rename = "http")]
    HttpUnnamed {
        /// As the guest gave it.
        method: String,
        /// `scheme://host[:port]/path`.
        uri: String,
    },
}

/// The answer to a run's request.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum RunVerdict {
    /// Allowed.
    Allow {
        /// Why, when the screen said.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Refused.
    Deny {
        /// The deny code, when the refusal has one.
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<DenyCode>,
        /// Why.
        reason: String,
    },
}

/// How a command call ended.
#[derive(Debug, Clone, Serialize)]
pub struct CommandEnd {
    /// Whether a process started.
    pub spawned: bool,
    /// Its exit status, when it exited.
    pub status: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
    /// Whether it was killed at its timeout.
    pub timed_out: bool,
}

/// How an allowed HTTP request ended.
#[derive(Debug, Clone, Serialize)]
pub struct ResponseEnd {
    /// The response's status.
    pub status: u16,
    /// The body's bytes the guest read, as the server sent them (before
    /// any replacement of a provider's value).
    pub bytes: u64,
    /// From the request to the response's head.
    pub first_byte_ms: f64,
    /// From the request to the body's end.
    pub duration_ms: f64,
    /// Why the body ended early, if it did.
    pub error: Option<String>,
    /// On a request that carried a provider's credential: how many times
    /// the host replaced the provider's value in the response's headers
    /// and body before the guest read them. `None` on any other request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redacted: Option<u64>,
}

/// The policy's answer for a command line, bound to one actor.
pub trait CommandScreen: Send + Sync {
    /// `Ok` when `command` (the exact argv, shell-quoted) of program
    /// `tool` may run; the deny code and reason when not.
    fn screen(&self, tool: &str, command: &str) -> Result<(), (DenyCode, String)>;
}

/// A person's answer about one command line of a `code:exec` that was
/// allowed once ([`CommandApproval::approve`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandApproved {
    /// It may run, in this turn only.
    Once,
    /// The person refused it (`APPROVAL_REFUSED`).
    Refused,
    /// No one could answer now: it waits in the pending-approval queue as
    /// this entry, which a retry of the turn can take (`APPROVAL_REQUIRED`).
    Queued(String),
    /// No one can be asked and nothing can wait (`APPROVAL_REQUIRED`).
    NoOne,
}

/// Who is asked about each command line a guest runs under a `code:exec`
/// that a person allowed once: "once" covers the one command line shown,
/// so every other one is asked about again (or queued).
pub trait CommandApproval: Send + Sync {
    /// The answer for `argv` (program `tool`), given that the command
    /// lines `approved` were approved for this turn already.
    fn approve(&self, tool: &str, argv: &[String], approved: &[Vec<String>]) -> CommandApproved;
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
/// run (`host::services`). All of it is the turn's but the units'
/// runtimes, which every turn shares.
#[derive(Clone)]
pub struct RunServices {
    /// What each unit keeps for the life of the process (the memory
    /// store, the HTTP client and providers, the host's environment),
    /// opened when the host opened: a unit's `prepare` takes from it only
    /// what the plan's part allows.
    pub runtimes: Arc<super::bindings::Runtimes>,
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
    /// Who is asked about each command line of a `code:exec` allowed once
    /// ([`crate::sandbox::bindings::exec::ExecPart::ask_each`]); `None`:
    /// no one, and such a command line is refused with
    /// `APPROVAL_REQUIRED`.
    pub commands: Option<Arc<dyn CommandApproval>>,
    /// Who answers `human:ask`; `None`: nobody (the caller passes the
    /// terminal's asker when a person is there).
    pub asker: Option<AskerRef>,
}
