//! The host: one type that owns everything a turn needs for as long as the
//! process lives, and one method that runs a turn for every caller (the
//! command line, the demo, delegation, the benches, the MCP server).
//!
//! A turn, deny-first:
//!
//! ```text
//! request ─► gate (policy::decide per need, pure) ─► approvals (Approver)
//!         ─► isolation probe (lazy, once per host) ─► Plan ─► sandbox
//!         ─► journal finish + audit
//! ```
//!
//! A delegated turn (a guest's `delegate:call`) takes the same steps, as
//! the other kind of the one pipeline (`pipeline::Kind`): no approver (an
//! approval it needs ends it `APPROVAL_REQUIRED`), its caller's engine,
//! journal and audit, and the write roots its callers hold its own.
//!
//! What it writes: a request that ends before guest code starts (a gate
//! denial, `APPROVAL_REQUIRED`, a refused approval, `ISOLATION_DEGRADED`,
//! `IMPORT_NOT_GRANTED`, `DIGEST_MISMATCH`, `TURN_CANCELLED` before the
//! start) writes one line to `<state>/denials.jsonl` and nothing else. A
//! turn that runs and mutates nothing writes one line to
//! `<state>/audit.jsonl`; a turn that mutates gets `<history>/<turn>/` at
//! its first mutation, its decisions synced there before it. Every record
//! is one `write(2)` before [`Host::run`] returns (see
//! [`crate::undo::append`]). Each of these records (for a turn that
//! mutated, one of the same shape at its end) also goes into the audit
//! chain, `<state>/audit-chain.jsonl` ([`crate::state`]), written before
//! [`Host::run`] returns.
//!
//! What the sandbox sees: the [`Plan`](crate::sandbox::Plan) and three
//! narrow services built here ([`crate::sandbox::services`]): a command
//! screen bound to the actor, a nested-turn callback for delegation, the
//! turn's audit sink. Never the snapshot, the manifests or the gate.

pub mod approver;
pub mod audit;
mod delegate;
mod each_command;
pub(crate) mod gate;
mod needs;
mod notify;
mod own;
mod pipeline;
mod request;
mod roots;
mod runtimes;
mod services;
mod turn;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock, RwLock};

use crate::config::{HostConfig, StatePaths};
use crate::manifest::Manifest;
use crate::policy::{Level, Snapshot};
pub use crate::sandbox::{EngineKind, EngineProfile};
use crate::sandbox::{
    Sandbox, DEFAULT_HTTP_REQUESTS, DEFAULT_HTTP_RESPONSE_BYTES, DEFAULT_JOURNAL_BYTES,
    DEFAULT_MEMORY_KEYS,
};
use crate::state::grants::GrantError;
use crate::util::watch::{WatchKey, Watcher};
// The sandbox's types a caller of the host handles: it needs nothing else
// from the sandbox.
pub use crate::sandbox::{
    Asker, AskerRef, CancelHandle, GuestResult, HostStdin, IsolationReport, Limits, OnDegraded,
    RunIo, RunReport, StdinFrom,
};
use crate::snapshot::{self, SnapshotError, Sources};
use crate::undo::AppendLog;

pub use approver::{ApprovalRequest, Approver, Choice, NoOne, Scripted, Shown, TerminalApprover};
pub use audit::{DenialRecord, Hashes, MAX_TURN_AUDIT_BYTES};
pub use needs::{Pending, Step};
pub use request::{
    new_turn_id, Answer, ApproverRef, Begun, Parked, Phase, ProgressRef, TurnEnd, TurnOutcome,
    TurnRequest,
};
// What `own_turns` and `undo_own` answer with.
pub use crate::state::approvals::{
    current_uid, QueueAnswer, QueueEntry, QueueError, MAX_PENDING_PER_ACTOR,
};
pub use crate::state::parked::{Claim, ParkedRow, ParkedStore};
pub use crate::state::tasks::{
    asked_sha256 as task_asked_sha256, status as task_status, TaskRow, TaskStore,
};
pub use crate::undo::{HistoryError, TurnSummary, UndoReport, UndoStatus};
// What a person's answer remembers, for the callers that ask (MCP's forms).
pub use crate::state::grants::{now_utc, remember_for, DEFAULT_REMEMBER_SECS};
pub use crate::state::Stores;

/// Why a host could not be opened or could not keep its state.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The policy snapshot could not be prepared or verified.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The grants database could not be opened or read.
    #[error(transparent)]
    Grants(#[from] GrantError),
    /// The history could not be written or read.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// The wasmtime engine could not be built.
    #[error("cannot start the engine")]
    Engine(#[source] Arc<wasmtime::Error>),
    /// A unit's runtime cannot be opened (`[network]`: an unreadable or
    /// malformed `ca_file`).
    #[error(transparent)]
    Unit(crate::sandbox::OpenError),
    /// The pending-approval queue could not be opened, or its schema is
    /// newer than this build knows.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// The memory database could not be opened, or its schema is newer
    /// than this build knows.
    #[error(transparent)]
    Memory(#[from] crate::state::memory::MemoryError),
    /// A fleet's shared database could not be used.
    #[error(transparent)]
    Shared(#[from] crate::state::pg::SharedError),
    /// The audit chain could not be opened, or its schema is newer than
    /// this build knows.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    /// The level asked for (`--level`) is above the configuration's
    /// `max_level`: invalid input, refused before anything is opened.
    #[error("level `{asked}` is above the configuration's `max_level` `{max}`")]
    LevelAboveMax {
        /// The level asked for.
        asked: Level,
        /// The configuration's `max_level`.
        max: Level,
    },
}

/// What a host is opened with.
///
/// Defaults ([`HostOptions::new`]): the configuration's level, its
/// `on_degraded`, the default limits' memory cap for the engine, no
/// executors beyond the configuration's directories, an engine for a
/// long-lived host ([`EngineKind::LongLived`]), no pending-approval queue.
pub struct HostOptions {
    /// The parsed `gatehouse.toml`: actors, level, limits, isolation, network.
    pub config: HostConfig,
    /// Where the host keeps its state: grants, history, audit and denial logs, cache.
    pub state: StatePaths,
    /// The canonical workspace of every turn of this host: no request can
    /// change it.
    pub workspace: String,
    /// Where `~` in targets points.
    pub home: Option<PathBuf>,
    /// Overrides the configuration's level.
    pub level: Option<Level>,
    /// Every executor the host knows: the configuration's directories
    /// plus any named by the caller.
    pub manifests: Vec<Manifest>,
    /// Overrides `[isolation] on_degraded`.
    pub on_degraded: Option<OnDegraded>,
    /// The largest linear memory any turn may ask for (sizes the engine).
    pub max_memory_bytes: usize,
    /// The kind of host, which sizes the engine's pool: default
    /// [`EngineKind::LongLived`] (many turns: slots kept resident and
    /// reset in place); `gatehouse run` sets [`EngineKind::OneShot`] (one
    /// turn: a pool just large enough for it and its nested turns).
    pub engine: EngineKind,
    /// Who the record of a remembered grant names as its approver.
    pub granted_by: Option<String>,
    /// Whether turns journal their mutations for undo (default `true`).
    /// `false` is for measuring the journal's cost only: such a host's
    /// turns cannot be undone.
    pub journaled: bool,
    /// Whether approvals no one gave go to the pending-approval queue
    /// (`<state>/approvals.db`, see [`Stores::approvals`]) and answers given there
    /// are taken by the turn they match (default `false`: the turn just
    /// ends with `APPROVAL_REQUIRED`). `gatehouse run` and `gatehouse
    /// serve` set it.
    pub approval_queue: bool,
}

impl HostOptions {
    /// Options for `config` and `state` with `workspace` (canonical) and
    /// `manifests`; everything else at its default.
    pub fn new(
        config: HostConfig,
        state: StatePaths,
        workspace: String,
        manifests: Vec<Manifest>,
    ) -> HostOptions {
        HostOptions {
            config,
            state,
            workspace,
            home: None,
            level: None,
            manifests,
            on_degraded: None,
            max_memory_bytes: Limits::default().memory_bytes,
            engine: EngineKind::LongLived,
            granted_by: None,
            journaled: true,
            approval_queue: false,
        }
    }
}

/// The host. Cheap to clone (one shared state).
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

/// What a [`Host`] holds: ten parts, each shared by every turn.
struct Inner {
    config: HostConfig,
    state: StatePaths,
    /// What the host was opened with, resolved once.
    settings: Settings,
    /// Every store of the state (grants, approvals, memory, the audit
    /// chain, a fleet's index, parked turns and tasks), chosen once.
    stores: Stores,
    /// What the capabilities' host sides keep for the life of the
    /// process, shared by every turn, delegated ones included.
    runtimes: Arc<runtimes::Runtimes>,
    /// The policy turns are decided against, and what says it is current.
    policy: PolicyState,
    /// Tells when the grants database or a component may have changed,
    /// so that a turn need not `stat` them (a long-lived host only). Its
    /// queue is read at the start of each turn (and of each resumed one),
    /// and again just before any turn's run, delegated ones included; the
    /// engine shares it.
    watcher: Option<Arc<Watcher>>,
    /// The engine, built (and its isolation probed) at the first turn that
    /// gets past the policy and its approvals.
    sandbox: OnceLock<Result<Arc<Sandbox>, Arc<wasmtime::Error>>>,
    /// `audit.jsonl` and `denials.jsonl`.
    logs: Logs,
    /// The write roots of the turns running now: turns that may write the
    /// same place run one after the other.
    write_roots: Arc<roots::WriteRoots>,
}

/// [`HostOptions`] as a host keeps them (see there).
struct Settings {
    workspace: String,
    home: Option<PathBuf>,
    level: Option<Level>,
    on_degraded: OnDegraded,
    max_memory_bytes: usize,
    engine: EngineKind,
    granted_by: Option<String>,
    journaled: bool,
    approval_queue: bool,
}

/// The policy every turn is decided against, and what tells whether it
/// is still current.
struct PolicyState {
    /// The policy every turn is decided against, rebuilt when a grant is
    /// remembered.
    snapshot: RwLock<Arc<Frozen>>,
    /// What the grants database looked like when the snapshot was built
    /// (see [`turn::grants_stamp`]): a turn that finds it changed (a
    /// `grants revoke` or `add` by another process) rebuilds the snapshot
    /// first, so grants are read at each decision.
    grants_stamp: std::sync::Mutex<turn::GrantsStamp>,
    /// The shared grants' version the snapshot was built at (`None`: the
    /// grants are a file, watched through `grants_stamp`).
    grants_generation: std::sync::Mutex<Option<u64>>,
    /// The grants database's watch (`None`: its state directory cannot
    /// be watched, and every turn compares the stamp).
    grants_key: Option<WatchKey>,
    /// Set by [`Host::freeze_allow_set`]: the only grants turns may use
    /// (those of the verified snapshot); a rebuilt snapshot keeps those of
    /// them still in force, as they were frozen, and no other.
    allow_set: OnceLock<Vec<crate::policy::Grant>>,
}

/// The host's two append-only logs.
struct Logs {
    /// `audit.jsonl`: every turn's record.
    audit: Arc<AppendLog>,
    /// `denials.jsonl`: every refusal.
    denials: Arc<AppendLog>,
}

impl From<crate::state::OpenError> for HostError {
    fn from(e: crate::state::OpenError) -> HostError {
        use crate::state::OpenError;
        match e {
            OpenError::Shared(e) => e.into(),
            OpenError::Grants(e) => e.into(),
            OpenError::Queue(e) => e.into(),
            OpenError::Memory(e) => e.into(),
            OpenError::Audit(e) => e.into(),
        }
    }
}

/// A snapshot with its hashes, computed once.
struct Frozen {
    snapshot: Snapshot,
    hashes: Arc<Hashes>,
    /// Each actor's audit-line tail under this snapshot, encoded once.
    tails: std::collections::BTreeMap<String, Arc<str>>,
    /// The gate steps of turns under this snapshot, encoded once each.
    encoded: audit::EncodedSteps,
}

impl Frozen {
    fn new(snapshot: Snapshot) -> Frozen {
        let hashes = Arc::new(Hashes {
            definition: snapshot.definition_hash(),
            policy: snapshot.policy_hash(),
        });
        let tails = snapshot
            .actors
            .iter()
            .map(|(name, a)| {
                let tail = audit::tail(name, a.identity.as_ref(), &hashes);
                (name.clone(), Arc::from(tail))
            })
            .collect();
        Frozen {
            snapshot,
            hashes,
            tails,
            encoded: audit::EncodedSteps::default(),
        }
    }

    /// The audit-line tail of `actor` (encoded now for an actor the
    /// snapshot does not define, whose turn the gate refuses anyway).
    fn tail(&self, actor: &str) -> Arc<str> {
        match self.tails.get(actor) {
            Some(t) => t.clone(),
            None => Arc::from(audit::tail(actor, None, &self.hashes)),
        }
    }
}

impl Host {
    /// Opens a host: builds the policy snapshot from the configuration,
    /// the executors and the grants in force. Nothing else happens until a
    /// turn needs it: no engine, no probe, no file written.
    ///
    /// # Security
    /// The host hands each turn exactly what its gate allowed; the grant
    /// store is written only by an "allow and remember" answer.
    pub fn open(mut options: HostOptions) -> Result<Host, HostError> {
        // Whoever starts the process does not choose a level above the
        // configuration's cap (security round 3, item 9).
        if let (Some(asked), Some(max)) = (options.level, options.config.max_level) {
            if asked > max {
                return Err(HostError::LevelAboveMax { asked, max });
            }
        }
        options.state = options.state.with_config(&options.config);
        // The grants' backend, and the refusal of a shared database this
        // build does not know (unreachable, not migrated, newer), before
        // anything else.
        let mut stores = Stores::open(&options.state)?;
        let grants_generation = match stores.grants.generation() {
            Some(g) => Some(g?),
            None => None,
        };
        let audit_log = AppendLog::new(&options.state.state_dir.join("audit.jsonl"));
        // Watched before the stamp is taken: a change after it is seen.
        // One watcher for the grants and the components (shared with the
        // engine): its queue is read once per turn.
        let watcher = (options.engine == EngineKind::LongLived)
            .then(Watcher::new)
            .flatten()
            .map(Arc::new);
        let grants_key = watcher
            .as_ref()
            .and_then(|w| w.watch(&turn::grants_paths(&options.state).each()));
        let stamp = turn::grants_stamp(&options.state);
        let denials_log = AppendLog::new(&options.state.state_dir.join("denials.jsonl"));
        let snap = build_snapshot(
            &*stores.grants,
            &options.config,
            &options.state,
            &options.manifests,
            &options.workspace,
            options.home.as_deref(),
            options.level,
        )?;
        let runtimes = Arc::new(
            runtimes::Runtimes::open(&options.config, &stores, options.manifests, watcher.clone())
                .map_err(HostError::Unit)?,
        );
        if let (true, Some(def)) = (options.approval_queue, &options.config.approvals.notify) {
            // `[approvals] notify`: each entry this host queues is
            // announced, on a thread of its own (never waited for).
            match notify::Notifier::start(def.clone(), runtimes.units.http.client.clone()) {
                Ok(notifier) => {
                    stores.approvals = Arc::new(notify::Announcing {
                        inner: stores.approvals.clone(),
                        notifier,
                    })
                }
                Err(e) => tracing::warn!("approval notices are off: {e}"),
            }
        }
        let inner = Inner {
            runtimes,
            settings: Settings {
                on_degraded: options.on_degraded.unwrap_or(options.config.on_degraded),
                workspace: options.workspace,
                home: options.home,
                level: options.level,
                max_memory_bytes: options.max_memory_bytes,
                engine: options.engine,
                granted_by: options.granted_by,
                journaled: options.journaled,
                approval_queue: options.approval_queue,
            },
            config: options.config,
            state: options.state,
            policy: PolicyState {
                snapshot: RwLock::new(Arc::new(Frozen::new(snap))),
                grants_stamp: std::sync::Mutex::new(stamp),
                grants_generation: std::sync::Mutex::new(grants_generation),
                grants_key,
                allow_set: OnceLock::new(),
            },
            stores,
            watcher,
            write_roots: Arc::default(),
            sandbox: OnceLock::new(),
            logs: Logs {
                audit: audit_log,
                denials: denials_log,
            },
        };
        Ok(Host {
            inner: Arc::new(inner),
        })
    }

    /// Freezes the allow set: from now on turns may use only the grants of
    /// the current snapshot (the one a person verified with `--snapshot`).
    /// A grant recorded later, by anyone, is not used; a revoke still
    /// applies (a revoked grant leaves the set) and so does expiry (judged
    /// at each decision, as the frozen grant says), since they only
    /// narrow. Calling it again changes nothing.
    pub fn freeze_allow_set(&self) {
        let grants = self.inner.frozen().snapshot.grants.clone();
        let _ = self.inner.policy.allow_set.set(grants);
    }

    /// The snapshot turns are decided against now.
    pub fn snapshot(&self) -> Snapshot {
        self.inner.frozen().snapshot.clone()
    }

    /// The policy's answer to one request against this host's snapshot,
    /// now (a grant expired since the snapshot was built no longer
    /// counts). Pure but for the clock: it writes nothing, asks no one
    /// and probes nothing.
    pub fn decide(&self, request: &crate::policy::Request) -> crate::policy::Decision {
        crate::policy::decide(&self.inner.frozen().snapshot, request, now_utc())
    }

    /// [`Host::decide`] of a request in its JSON form, as `policy decide`
    /// takes it.
    pub fn decide_json(&self, request: &serde_json::Value) -> crate::policy::Decision {
        crate::policy::decide_json(&self.inner.frozen().snapshot, request, now_utc())
    }

    /// A fleet's parked MCP turns and this node's name, for a server
    /// whose retries may reach any node; `None` on the embedded backend.
    pub fn fleet_parked(&self) -> Option<(Arc<dyn ParkedStore>, String)> {
        let fleet = self.inner.stores.fleet.as_ref()?;
        Some((fleet.parked.clone(), fleet.node.clone()))
    }

    /// A fleet's MCP tasks and this node's name, for a server whose
    /// `tasks/*` requests may reach any node; `None` on the embedded
    /// backend.
    pub fn fleet_tasks(&self) -> Option<(Arc<dyn TaskStore>, String)> {
        let fleet = self.inner.stores.fleet.as_ref()?;
        Some((fleet.tasks.clone(), fleet.node.clone()))
    }

    /// The executors this host knows.
    pub fn manifests(&self) -> &[Manifest] {
        &self.inner.runtimes.manifests
    }

    /// Whether the isolation probe ran (and the engine was built): not
    /// before a turn got past the policy and its approvals.
    pub fn probed(&self) -> bool {
        self.inner.sandbox.get().is_some()
    }

    /// The isolation report, probing it (and building the engine) on first
    /// use.
    pub fn isolation(&self) -> Result<IsolationReport, HostError> {
        Ok(self.inner.sandbox()?.isolation().clone())
    }

    /// Runs one turn, asking `approver` once if something needs approval.
    pub fn run(&self, request: TurnRequest, approver: &dyn Approver) -> TurnOutcome {
        match self.begin(request) {
            Begun::Done(outcome) => *outcome,
            Begun::Parked(parked) => {
                let answers = approver.ask(&parked.approval);
                self.resume(*parked, answers)
            }
        }
    }

    /// Starts a turn: the gate, and the run itself if nothing needs an
    /// approval; otherwise the turn is parked for [`Host::resume`].
    ///
    /// The configuration's `[limits] journal_mib`, `memory_keys`,
    /// `http_requests` and `http_response_mib` set the request's caps: how
    /// much a turn may back up, store or fetch is the host's to say.
    pub fn begin(&self, mut request: TurnRequest) -> Begun {
        let config = &self.inner.config;
        request.limits.journal_bytes = config.journal_bytes.unwrap_or(DEFAULT_JOURNAL_BYTES);
        request.limits.memory_keys = config.memory_keys.unwrap_or(DEFAULT_MEMORY_KEYS);
        request.limits.http_requests = config.http_requests.unwrap_or(DEFAULT_HTTP_REQUESTS);
        request.limits.http_response_bytes = config
            .http_response_bytes
            .unwrap_or(DEFAULT_HTTP_RESPONSE_BYTES);
        let turn = new_turn_id(now_utc());
        if let Err(reason) = self.inner.reread_grants() {
            return Begun::Done(Box::new(self.inner.unavailable(&request, &turn, reason)));
        }
        match self.inner.advance(&request, &turn, Vec::new(), None) {
            turn::Advance::Done(outcome) => Begun::Done(outcome),
            turn::Advance::Parked(approval) => {
                if let Some(outcome) = self.inner.answered_by_queue(&request, &turn, &approval) {
                    return Begun::Done(Box::new(outcome));
                }
                Begun::Parked(Box::new(Parked {
                    request,
                    turn,
                    approval: *approval,
                }))
            }
        }
    }

    /// Whether the policy denies `request` now: [`Host::refusal`] without
    /// writing anything (no I/O: a decision on the frozen snapshot), for a
    /// caller that must not block on the denial's write unless there is
    /// one.
    pub fn denies(&self, request: &TurnRequest) -> bool {
        self.inner.gate_denies(request, "")
    }

    /// The turn's end if the policy denies it outright (the gate, asked
    /// with no approvals): recorded as [`Host::begin`] would (one denial
    /// line), and nothing else is done. `None` when the policy does not
    /// deny it (it may still need approvals): run it with
    /// [`Host::begin`]. A server calls this before taking a concurrency
    /// slot, so a denied call takes none and costs no instantiation.
    pub fn refusal(&self, request: &TurnRequest) -> Option<TurnOutcome> {
        let turn = new_turn_id(now_utc());
        self.inner.refused_by_gate(request, &turn)
    }

    /// Finishes a parked turn with the person's `answers` (one per pending
    /// item, in order; missing ones count as [`Choice::Queue`]). The
    /// decision is taken again, on the grants in force now: a grant
    /// revoked since [`Host::begin`] no longer covers the turn. Nobody is
    /// asked twice: what the answers leave pending ends the turn with
    /// `APPROVAL_REQUIRED`.
    pub fn resume(&self, parked: Parked, answers: Vec<Choice>) -> TurnOutcome {
        // The answer may come long after the turn began: the decision is
        // taken again on the grants and the component as they are now (a
        // grant revoked while the person was asked no longer covers it).
        if let Err(reason) = self.inner.reread_grants() {
            return self
                .inner
                .unavailable(&parked.request, &parked.turn, reason);
        }
        let given = parked
            .approval
            .pending
            .iter()
            .enumerate()
            .map(|(i, p)| (p.clone(), answers.get(i).copied().unwrap_or(Choice::Queue)))
            .collect();
        self.inner
            .answered(&parked.request, &parked.turn, given, None)
    }

    /// The stores of this host's state.
    pub fn stores(&self) -> &Stores {
        &self.inner.stores
    }
}

/// The snapshot of `config`, the executors and the grants in force now.
fn build_snapshot(
    grants: &dyn crate::state::grants::GrantBackend,
    config: &HostConfig,
    state: &StatePaths,
    manifests: &[Manifest],
    workspace: &str,
    home: Option<&std::path::Path>,
    level: Option<Level>,
) -> Result<Snapshot, HostError> {
    // No grants database yet: no grants (and none is created by reading).
    let grants = grants.list(false, now_utc())?;
    Ok(snapshot::build(Sources {
        config,
        state,
        manifests,
        turn_workspace: workspace,
        home,
        level,
        grants,
    })?)
}

/// The isolation report of the engine `config` asks for, for a `kind` of
/// host (built, read back, nothing run, nothing written), and the profile
/// it was built with: what `gatehouse isolation` shows, without opening a
/// host.
pub fn isolation_report(
    config: &HostConfig,
    state: &StatePaths,
    kind: EngineKind,
) -> Result<(IsolationReport, EngineProfile), HostError> {
    let profile = engine_profile(config, kind, Limits::default().memory_bytes);
    let sandbox = Sandbox::with_profile(&state.cache_dir, &profile)
        .map_err(|e| HostError::Engine(Arc::new(e)))?;
    Ok((sandbox.isolation().clone(), *sandbox.profile()))
}

/// The engine profile `config`'s `[engine]` asks for, for a `kind` of
/// host, every memory bounded at `max_memory`.
pub(crate) fn engine_profile(
    config: &HostConfig,
    kind: EngineKind,
    max_memory: usize,
) -> EngineProfile {
    EngineProfile::configured(
        config.engine.signals_based_traps,
        config.engine.guard_bytes,
        kind,
        max_memory,
    )
}
