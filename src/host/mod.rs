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
//! What it writes: a request that ends before guest code starts (a gate
//! denial, `APPROVAL_REQUIRED`, a refused approval, `ISOLATION_DEGRADED`,
//! `IMPORT_NOT_GRANTED`, `DIGEST_MISMATCH`, `TURN_CANCELLED` before the
//! start) writes one line to `<state>/denials.jsonl` and nothing else. A
//! turn that runs and mutates nothing writes one line to
//! `<state>/audit.jsonl`; a turn that mutates gets `<history>/<turn>/` at
//! its first mutation, its decisions synced there before it. Every record
//! is one `write(2)` before [`Host::run`] returns (see
//! [`crate::undo::append`]).
//!
//! What the sandbox sees: the [`Plan`](crate::sandbox::Plan) and three
//! narrow services built here ([`crate::sandbox::services`]): a command
//! screen bound to the actor, a nested-turn callback for delegation, the
//! turn's audit sink. Never the snapshot, the manifests or the gate.

pub mod approver;
pub mod audit;
pub(crate) mod gate;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock, RwLock};

use serde::Serialize;

use crate::config::{chain, HostConfig, StatePaths};
use crate::grants::{now_utc, GrantError, GrantStore, NewGrant};
use crate::manifest::Manifest;
use crate::policy::snapshot::sha256_hex;
use crate::policy::{
    decide, Capability, Decision, DenyCode, Level, Request, RequestKind, Snapshot,
};
use crate::sandbox::services::{CommandScreen, NestedError, NestedTurn};
use crate::sandbox::{execute, EngineProfile, RunError, RunServices, Sandbox};
// The sandbox's types a caller of the host handles: it needs nothing else
// from the sandbox.
pub use crate::sandbox::{
    CancelHandle, GuestResult, IsolationReport, Limits, OnDegraded, RunReport,
};
use crate::snapshot::{self, SnapshotError, Sources};
use crate::undo::{AppendLog, HistoryError, TurnJournal, TurnRecord};

pub use approver::{ApprovalRequest, Approver, Choice, NoOne, Scripted, TerminalApprover};
pub use audit::{DenialRecord, Hashes};
pub use gate::{Pending, Step};

use audit::TurnAudit;
use gate::{gate, Gate, TurnInput};

/// Why a host could not be opened or could not keep its state.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    Grants(#[from] GrantError),
    #[error(transparent)]
    History(#[from] HistoryError),
    #[error("cannot start the engine")]
    Engine(#[source] Arc<wasmtime::Error>),
}

/// What a host is opened with.
///
/// Defaults ([`HostOptions::new`]): the configuration's level, its
/// `on_degraded`, the default limits' memory cap for the engine, no
/// executors beyond the configuration's directories.
pub struct HostOptions {
    pub config: HostConfig,
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
    /// Who the record of a remembered grant names as its approver.
    pub granted_by: Option<String>,
    /// Whether turns journal their mutations for undo (default `true`).
    /// `false` is for measuring the journal's cost only: such a host's
    /// turns cannot be undone.
    pub journaled: bool,
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
            granted_by: None,
            journaled: true,
        }
    }
}

/// One turn: actor A asks to run executor E on an input.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    pub executor: String,
    pub actor: String,
    /// The input: `run`'s argument, or a command's stdin.
    pub input: String,
    pub limits: Limits,
    /// Cancels the turn from another thread: it ends like a deadline,
    /// with `TURN_CANCELLED`.
    pub cancel: CancelHandle,
}

impl TurnRequest {
    /// A request by `actor` to run `executor` on `input`, with the default
    /// limits and a fresh cancel handle.
    pub fn new(
        executor: impl Into<String>,
        actor: impl Into<String>,
        input: impl Into<String>,
    ) -> TurnRequest {
        TurnRequest {
            executor: executor.into(),
            actor: actor.into(),
            input: input.into(),
            limits: Limits::default(),
            cancel: CancelHandle::new(),
        }
    }
}

/// An approval answer, as the outcome and the audit record it.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub capability: Capability,
    pub target: Option<String>,
    pub choice: &'static str,
    /// The grant "allow and remember" recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<i64>,
}

/// How a turn ended.
#[derive(Debug, Serialize)]
#[serde(tag = "end", rename_all = "snake_case")]
pub enum TurnEnd {
    /// Ended before any guest code ran; one line in `denials.jsonl`.
    Refused { code: DenyCode, reason: String },
    /// The guest ran and returned (ok or its own error).
    Ran { run: Box<RunReport> },
    /// The guest started but was stopped: a limit, a trap, a cancel.
    Stopped {
        code: Option<DenyCode>,
        message: String,
    },
    /// The request cannot be run as given (an unknown executor, an
    /// unreadable component); nothing was recorded.
    Invalid { message: String },
    /// The host failed (engine, history).
    Failed { message: String },
}

/// Everything a caller learns of a turn.
#[derive(Debug, Serialize)]
pub struct TurnOutcome {
    pub turn: String,
    pub executor: String,
    pub actor: String,
    pub level: &'static str,
    pub decisions: Vec<Step>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<Answer>,
    /// What still needs an approval (`APPROVAL_REQUIRED`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<Pending>,
    pub limits: Limits,
    /// The isolation report; absent when the turn ended before the probe
    /// (a policy denial never probes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isolation: Option<IsolationReport>,
    #[serde(flatten)]
    pub end: TurnEnd,
}

impl TurnOutcome {
    /// The deny or limit code the turn ended with, if any.
    pub fn code(&self) -> Option<DenyCode> {
        match &self.end {
            TurnEnd::Refused { code, .. } => Some(*code),
            TurnEnd::Stopped { code, .. } => *code,
            _ => None,
        }
    }

    /// Whether the guest ran and returned `ok`.
    pub fn is_ok(&self) -> bool {
        matches!(&self.end, TurnEnd::Ran { run } if matches!(run.result, GuestResult::Ok { .. }))
    }
}

/// A turn parked while its approvals are asked elsewhere (by elicitation,
/// or through the pending queue): [`Host::resume`] finishes it.
#[derive(Debug)]
pub struct Parked {
    request: TurnRequest,
    turn: String,
    /// The question to put to the person.
    pub approval: ApprovalRequest,
}

/// What [`Host::begin`] got to.
#[derive(Debug)]
pub enum Begun {
    /// The turn ended (denied, or run because nothing needed approval).
    Done(Box<TurnOutcome>),
    /// It waits for answers to `approval`.
    Parked(Box<Parked>),
}

/// The host. Cheap to clone (one shared state).
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

struct Inner {
    config: HostConfig,
    state: StatePaths,
    workspace: String,
    home: Option<PathBuf>,
    level: Option<Level>,
    manifests: Vec<Manifest>,
    on_degraded: OnDegraded,
    max_memory_bytes: usize,
    granted_by: Option<String>,
    journaled: bool,
    /// The policy every turn is decided against, rebuilt when a grant is
    /// remembered.
    snapshot: RwLock<Arc<Frozen>>,
    /// The engine, built (and its isolation probed) at the first turn that
    /// gets past the policy and its approvals.
    sandbox: OnceLock<Result<Arc<Sandbox>, Arc<wasmtime::Error>>>,
    audit_log: Arc<AppendLog>,
    denials_log: Arc<AppendLog>,
}

/// A snapshot with its hashes, computed once.
struct Frozen {
    snapshot: Snapshot,
    hashes: Arc<Hashes>,
}

impl Frozen {
    fn new(snapshot: Snapshot) -> Frozen {
        let hashes = Arc::new(Hashes {
            definition: snapshot.definition_hash(),
            policy: snapshot.policy_hash(),
        });
        Frozen { snapshot, hashes }
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
    pub fn open(options: HostOptions) -> Result<Host, HostError> {
        let audit_log = AppendLog::new(&options.state.state_dir.join("audit.jsonl"));
        let denials_log = AppendLog::new(&options.state.state_dir.join("denials.jsonl"));
        let snap = build_snapshot(
            &options.config,
            &options.state,
            &options.manifests,
            &options.workspace,
            options.home.as_deref(),
            options.level,
        )?;
        let inner = Inner {
            on_degraded: options.on_degraded.unwrap_or(options.config.on_degraded),
            config: options.config,
            state: options.state,
            workspace: options.workspace,
            home: options.home,
            level: options.level,
            manifests: options.manifests,
            max_memory_bytes: options.max_memory_bytes,
            granted_by: options.granted_by,
            journaled: options.journaled,
            snapshot: RwLock::new(Arc::new(Frozen::new(snap))),
            sandbox: OnceLock::new(),
            audit_log,
            denials_log,
        };
        Ok(Host {
            inner: Arc::new(inner),
        })
    }

    /// The snapshot turns are decided against now.
    pub fn snapshot(&self) -> Snapshot {
        self.inner.frozen().snapshot.clone()
    }

    /// The executors this host knows.
    pub fn manifests(&self) -> &[Manifest] {
        &self.inner.manifests
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
    pub fn begin(&self, request: TurnRequest) -> Begun {
        let turn = new_turn_id(now_utc());
        self.inner.step(request, turn, Vec::new())
    }

    /// Finishes a parked turn with the person's `answers` (one per pending
    /// item, in order; missing ones count as [`Choice::Queue`]).
    pub fn resume(&self, parked: Parked, answers: Vec<Choice>) -> TurnOutcome {
        let Parked {
            request,
            turn,
            approval,
        } = parked;
        let mut given = Vec::new();
        for (i, p) in approval.pending.iter().enumerate() {
            given.push((p.clone(), answers.get(i).copied().unwrap_or(Choice::Queue)));
        }
        match self.inner.step(request, turn, given) {
            Begun::Done(outcome) => *outcome,
            // Every answer was taken; a second round means a remembered
            // grant did not cover its item. Nobody is asked twice.
            Begun::Parked(parked) => {
                let outcome = self.inner.step(
                    parked.request,
                    parked.turn,
                    parked
                        .approval
                        .pending
                        .into_iter()
                        .map(|p| (p, Choice::Queue))
                        .collect(),
                );
                match outcome {
                    Begun::Done(o) => *o,
                    Begun::Parked(p) => self.inner.end_before_start(
                        &p.request,
                        &p.turn,
                        Vec::new(),
                        Vec::new(),
                        p.approval.pending.clone(),
                        None,
                        DenyCode::ApprovalRequired,
                        "the approvals given do not cover the turn".into(),
                        None,
                    ),
                }
            }
        }
    }
}

impl Inner {
    fn frozen(&self) -> Arc<Frozen> {
        match self.snapshot.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn refresh_snapshot(&self) -> Result<(), HostError> {
        let snap = build_snapshot(
            &self.config,
            &self.state,
            &self.manifests,
            &self.workspace,
            self.home.as_deref(),
            self.level,
        )?;
        let mut guard = match self.snapshot.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        *guard = Arc::new(Frozen::new(snap));
        Ok(())
    }

    fn profile(&self) -> EngineProfile {
        EngineProfile::configured(
            &self.config.engine,
            self.max_memory_bytes.max(Limits::default().memory_bytes),
        )
    }

    fn sandbox(&self) -> Result<&Arc<Sandbox>, HostError> {
        self.sandbox
            .get_or_init(|| {
                Sandbox::with_profile(&self.state.cache_dir, &self.profile())
                    .map(|s| {
                        s.isolation().log();
                        Arc::new(s)
                    })
                    .map_err(Arc::new)
            })
            .as_ref()
            .map_err(|e| HostError::Engine(e.clone()))
    }

    fn manifest(&self, name: &str) -> Option<&Manifest> {
        self.manifests.iter().find(|m| m.name == name)
    }

    /// One pass of the turn with the approvals `given` so far.
    fn step(
        self: &Inner,
        request: TurnRequest,
        turn: String,
        given: Vec<(Pending, Choice)>,
    ) -> Begun {
        let frozen = self.frozen();
        let Some(manifest) = self.manifest(&request.executor) else {
            return Begun::Done(Box::new(self.outcome(
                &request,
                &turn,
                &frozen,
                Vec::new(),
                Vec::new(),
                TurnEnd::Invalid {
                    message: format!(
                        "no executor named `{}` is known to this host",
                        request.executor
                    ),
                },
            )));
        };
        let mut answers: Vec<Answer> = Vec::new();
        let mut once: Vec<(Capability, Option<String>)> = Vec::new();
        let mut refused: Option<Pending> = None;
        let mut queued: Vec<Pending> = Vec::new();
        let mut remembered = false;
        for (p, choice) in &given {
            let mut answer = Answer {
                capability: p.capability,
                target: p.target.clone(),
                choice: choice.as_str(),
                grant: None,
            };
            match choice {
                Choice::Once => once.push((p.capability, p.target.clone())),
                Choice::Remember { expires_in_secs } if p.rememberable => {
                    match self.remember(&frozen.snapshot, &request.actor, p, *expires_in_secs) {
                        Ok(id) => {
                            answer.grant = Some(id);
                            remembered = true;
                        }
                        Err(e) => {
                            return Begun::Done(Box::new(self.outcome(
                                &request,
                                &turn,
                                &frozen,
                                Vec::new(),
                                answers,
                                TurnEnd::Failed {
                                    message: format!("cannot remember the approval: {}", chain(&e)),
                                },
                            )))
                        }
                    }
                }
                // An always-class capability cannot be remembered: the
                // answer is taken as a refusal, never as a grant.
                Choice::Remember { .. } | Choice::Deny => {
                    if refused.is_none() {
                        refused = Some(p.clone());
                    }
                }
                Choice::Queue => queued.push(p.clone()),
            }
            answers.push(answer);
        }
        let frozen = if remembered {
            if let Err(e) = self.refresh_snapshot() {
                return Begun::Done(Box::new(self.outcome(
                    &request,
                    &turn,
                    &frozen,
                    Vec::new(),
                    answers,
                    TurnEnd::Failed {
                        message: format!("cannot reload the grants: {}", chain(&e)),
                    },
                )));
            }
            self.frozen()
        } else {
            frozen
        };
        if let Some(p) = refused {
            return Begun::Done(Box::new(self.end_before_start(
                &request,
                &turn,
                Vec::new(),
                answers,
                Vec::new(),
                None,
                DenyCode::ApprovalRefused,
                format!(
                    "`{}` on `{}` was refused by the person asked",
                    p.capability,
                    p.target.as_deref().unwrap_or("-")
                ),
                Some(&frozen),
            )));
        }
        let g = gate(TurnInput {
            snapshot: &frozen.snapshot,
            actor: &request.actor,
            manifest,
            turn_id: turn.clone(),
            limits: request.limits,
            approved_once: &once,
        });
        let (steps, plan) = match g {
            Gate::Denied {
                steps,
                code,
                reason,
            } => {
                return Begun::Done(Box::new(self.end_before_start(
                    &request,
                    &turn,
                    steps,
                    answers,
                    Vec::new(),
                    None,
                    code,
                    reason,
                    Some(&frozen),
                )))
            }
            Gate::ApprovalRequired { steps, pending } => {
                if !given.is_empty() || !queued.is_empty() {
                    let what: Vec<String> = pending
                        .iter()
                        .map(|p| {
                            format!(
                                "`{}` on `{}`",
                                p.capability,
                                p.target.as_deref().unwrap_or("-")
                            )
                        })
                        .collect();
                    return Begun::Done(Box::new(self.end_before_start(
                        &request,
                        &turn,
                        steps,
                        answers,
                        pending,
                        None,
                        DenyCode::ApprovalRequired,
                        format!("approval needed for {} and no one gave it", what.join(", ")),
                        Some(&frozen),
                    )));
                }
                let approval = ApprovalRequest {
                    turn: turn.clone(),
                    executor: request.executor.clone(),
                    actor: request.actor.clone(),
                    pending,
                };
                return Begun::Parked(Box::new(Parked {
                    request,
                    turn,
                    approval,
                }));
            }
            Gate::Ready { steps, plan } => (steps, plan),
        };
        // The isolation probe: lazily, once per host, after policy and
        // approvals, before the switch.
        let sandbox = match self.sandbox() {
            Ok(s) => s.clone(),
            Err(e) => {
                return Begun::Done(Box::new(self.outcome(
                    &request,
                    &turn,
                    &frozen,
                    steps,
                    answers,
                    TurnEnd::Failed { message: chain(&e) },
                )))
            }
        };
        let isolation = sandbox.isolation().clone();
        let needs: Vec<Capability> = plan.allowed().iter().map(|a| a.capability).collect();
        if let Some(reason) = isolation.refusal(self.on_degraded, &needs) {
            return Begun::Done(Box::new(self.end_before_start(
                &request,
                &turn,
                steps,
                answers,
                Vec::new(),
                Some(isolation),
                DenyCode::IsolationDegraded,
                reason,
                Some(&frozen),
            )));
        }
        if request.cancel.is_cancelled() {
            return Begun::Done(Box::new(self.end_before_start(
                &request,
                &turn,
                steps,
                answers,
                Vec::new(),
                Some(isolation),
                DenyCode::TurnCancelled,
                "the turn was cancelled before it started".into(),
                Some(&frozen),
            )));
        }
        Begun::Done(Box::new(self.execute(
            &request, &turn, &frozen, &sandbox, steps, answers, isolation, &plan,
        )))
    }

    /// Records a grant for the actor's identity from an "allow and
    /// remember" answer.
    fn remember(
        &self,
        snapshot: &Snapshot,
        actor: &str,
        p: &Pending,
        expires_in_secs: Option<u64>,
    ) -> Result<i64, HostError> {
        let identity = snapshot
            .actors
            .get(actor)
            .and_then(|a| a.identity.clone())
            .unwrap_or_default();
        let store = GrantStore::open(&self.state.grants_db)?;
        let now = now_utc();
        let grant = store.record(
            &NewGrant {
                identity,
                capability: p.capability.as_str().into(),
                target: p.target.clone().unwrap_or_default(),
                expires_at: expires_in_secs
                    .map(|s| now.plus_seconds(i64::try_from(s).unwrap_or(i64::MAX))),
                granted_by: self.granted_by.clone(),
            },
            now,
        )?;
        Ok(grant.id)
    }

    #[allow(clippy::too_many_arguments)]
    fn execute(
        &self,
        request: &TurnRequest,
        turn: &str,
        frozen: &Arc<Frozen>,
        sandbox: &Arc<Sandbox>,
        steps: Vec<Step>,
        answers: Vec<Answer>,
        isolation: IsolationReport,
        plan: &crate::sandbox::Plan,
    ) -> TurnOutcome {
        let snapshot = &frozen.snapshot;
        let record = TurnRecord {
            turn: turn.to_string(),
            executor: request.executor.clone(),
            actor: request.actor.clone(),
            level: snapshot.level.as_str().to_string(),
            started_at: now_utc(),
            finished_at: None,
            status: "running".into(),
            undo: "none".into(),
        };
        let journal = TurnJournal::lazy(
            &self.state.history_dir,
            record,
            Some(self.audit_log.clone()),
        );
        let audit = Arc::new(TurnAudit {
            turn: turn.to_string(),
            actor: request.actor.clone(),
            identity: snapshot
                .actors
                .get(&request.actor)
                .and_then(|a| a.identity.clone()),
            hashes: frozen.hashes.clone(),
            journal: journal.clone(),
        });
        record_steps(&audit, &steps, &answers);
        let services = self.services(request, turn, frozen, sandbox, &audit, journal.clone(), 0);
        let result = execute(sandbox, plan, &request.input, &services);
        let end = match result {
            Ok(report) => {
                let status = match report.result {
                    GuestResult::Ok { .. } => "ok",
                    GuestResult::Err { .. } => "error",
                };
                if let Err(e) = journal.finish(status, now_utc()) {
                    tracing::warn!("turn `{turn}`: {e}");
                }
                TurnEnd::Ran {
                    run: Box::new(report),
                }
            }
            Err(RunError::Refused { code, reason }) => {
                // Refused before any guest code ran (the import check, the
                // pinned digest): one denial line, nothing else.
                journal.discard();
                // The digest the file really has (a `DIGEST_MISMATCH`
                // names the pinned one in its reason).
                let digest = std::fs::read(plan.component())
                    .ok()
                    .map(|b| sha256_hex(&b))
                    .or_else(|| plan.sha256().map(str::to_string));
                self.deny_line(request, turn, frozen, digest, code, &reason);
                TurnEnd::Refused { code, reason }
            }
            Err(RunError::Load(e)) => {
                journal.discard();
                TurnEnd::Invalid { message: chain(&e) }
            }
            Err(e) => {
                let code = e.code();
                let status = code.map(|c| c.as_str()).unwrap_or("error");
                if let Err(e) = journal.finish(status, now_utc()) {
                    tracing::warn!("turn `{turn}`: {e}");
                }
                TurnEnd::Stopped {
                    code,
                    message: chain(&e),
                }
            }
        };
        let mut outcome = self.outcome(request, turn, frozen, steps, answers, end);
        outcome.isolation = Some(isolation);
        outcome
    }

    /// The services of a run at `depth` of turn `turn`.
    #[allow(clippy::too_many_arguments)]
    fn services(
        &self,
        request: &TurnRequest,
        turn: &str,
        frozen: &Arc<Frozen>,
        sandbox: &Arc<Sandbox>,
        audit: &Arc<TurnAudit>,
        journal: TurnJournal,
        depth: u32,
    ) -> RunServices {
        let screen = Arc::new(ActorScreen {
            frozen: frozen.clone(),
            actor: request.actor.clone(),
        });
        let nested = Arc::new(Nested {
            host: self.self_ref(),
            frozen: frozen.clone(),
            sandbox: sandbox.clone(),
            audit: audit.clone(),
            parent: turn.to_string(),
            request: request.clone(),
        });
        RunServices {
            memory_db: self.state.state_dir.join("memory.db"),
            depth,
            journal: self.journaled.then_some(journal),
            audit: audit.clone(),
            screen,
            nested: Some(nested),
            cancel: request.cancel.clone(),
        }
    }

    fn self_ref(&self) -> NestedHost {
        NestedHost {
            manifests: self.manifests.clone(),
            on_degraded: self.on_degraded,
            memory_db: self.state.state_dir.join("memory.db"),
        }
    }

    /// Ends a turn before any guest code ran: one denial line.
    #[allow(clippy::too_many_arguments)]
    fn end_before_start(
        &self,
        request: &TurnRequest,
        turn: &str,
        steps: Vec<Step>,
        answers: Vec<Answer>,
        pending: Vec<Pending>,
        isolation: Option<IsolationReport>,
        code: DenyCode,
        reason: String,
        frozen: Option<&Arc<Frozen>>,
    ) -> TurnOutcome {
        let frozen = frozen.cloned().unwrap_or_else(|| self.frozen());
        let digest = self
            .manifest(&request.executor)
            .and_then(|m| m.sha256.clone());
        self.deny_line(request, turn, &frozen, digest, code, &reason);
        let mut outcome = self.outcome(
            request,
            turn,
            &frozen,
            steps,
            answers,
            TurnEnd::Refused { code, reason },
        );
        outcome.pending = pending;
        outcome.isolation = isolation;
        outcome
    }

    fn deny_line(
        &self,
        request: &TurnRequest,
        turn: &str,
        frozen: &Frozen,
        component_sha256: Option<String>,
        code: DenyCode,
        reason: &str,
    ) {
        let identity = frozen
            .snapshot
            .actors
            .get(&request.actor)
            .and_then(|a| a.identity.clone());
        let line = DenialRecord {
            time: now_utc(),
            turn: turn.to_string(),
            actor: request.actor.clone(),
            channel: identity.as_ref().map(|i| i.channel.clone()),
            sender: identity.as_ref().map(|i| i.sender_id.clone()),
            executor: request.executor.clone(),
            component_sha256,
            input_sha256: sha256_hex(request.input.as_bytes()),
            input_bytes: request.input.len(),
            code,
            reason: reason.to_string(),
            hashes: (*frozen.hashes).clone(),
        };
        if let Err(e) = self.denials_log.append(&line) {
            tracing::warn!("turn `{turn}`: the denial was not recorded: {e}");
        }
    }

    fn outcome(
        &self,
        request: &TurnRequest,
        turn: &str,
        frozen: &Frozen,
        decisions: Vec<Step>,
        approvals: Vec<Answer>,
        end: TurnEnd,
    ) -> TurnOutcome {
        TurnOutcome {
            turn: turn.to_string(),
            executor: request.executor.clone(),
            actor: request.actor.clone(),
            level: frozen.snapshot.level.as_str(),
            decisions,
            approvals,
            pending: Vec::new(),
            limits: request.limits,
            isolation: None,
            end,
        }
    }
}

/// The snapshot of `config`, the executors and the grants in force now.
fn build_snapshot(
    config: &HostConfig,
    state: &StatePaths,
    manifests: &[Manifest],
    workspace: &str,
    home: Option<&std::path::Path>,
    level: Option<Level>,
) -> Result<Snapshot, HostError> {
    // No grants database yet: no grants (and none is created by reading).
    let grants = if state.grants_db.exists() {
        GrantStore::open(&state.grants_db)?.active_all(now_utc())?
    } else {
        Vec::new()
    };
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

/// Writes a turn's gate decisions and approval answers to its audit.
fn record_steps(audit: &TurnAudit, steps: &[Step], answers: &[Answer]) {
    use crate::sandbox::AuditSink;
    for s in steps {
        audit.decision(serde_json::json!({
            "request": s.request,
            "decision": s.decision,
            "approval": s.approval,
            "grant": s.decision.grant(),
        }));
    }
    for a in answers {
        audit.decision(serde_json::json!({ "approval": a }));
    }
}

/// The `tool` layers of the policy, bound to one actor and snapshot.
struct ActorScreen {
    frozen: Arc<Frozen>,
    actor: String,
}

impl CommandScreen for ActorScreen {
    fn screen(&self, tool: &str, command: &str) -> Result<(), (DenyCode, String)> {
        let request = Request::new(
            &self.actor,
            RequestKind::Tool {
                tool: tool.to_string(),
                command: Some(command.to_string()),
            },
        );
        match decide(&self.frozen.snapshot, &request) {
            Decision::Allow { .. } => Ok(()),
            Decision::Deny { code, reason } => Err((code, reason)),
            Decision::ApprovalRequired { reason, .. } => Err((DenyCode::ApprovalRequired, reason)),
        }
    }
}

/// What a nested turn needs of the host (no cycle through `Inner`).
struct NestedHost {
    manifests: Vec<Manifest>,
    on_degraded: OnDegraded,
    memory_db: PathBuf,
}

/// Delegation: a callee runs as a turn of the same actor, through the same
/// gate and snapshot, its decisions in the caller's audit.
struct Nested {
    host: NestedHost,
    frozen: Arc<Frozen>,
    sandbox: Arc<Sandbox>,
    audit: Arc<TurnAudit>,
    parent: String,
    request: TurnRequest,
}

impl NestedTurn for Nested {
    fn call(
        &self,
        executor: &str,
        input: &str,
        depth: u32,
        journal: Option<TurnJournal>,
    ) -> Result<String, NestedError> {
        use crate::sandbox::AuditSink;
        let turn = format!("{}.{executor}", self.parent);
        let Some(manifest) = self.host.manifests.iter().find(|m| m.name == executor) else {
            return Err(NestedError::Denied {
                code: DenyCode::UnknownRequest,
                reason: format!("executor `{executor}` is not known to this turn"),
            });
        };
        let g = gate(TurnInput {
            snapshot: &self.frozen.snapshot,
            actor: &self.request.actor,
            manifest,
            turn_id: turn.clone(),
            limits: self.request.limits,
            approved_once: &[],
        });
        let steps = match &g {
            Gate::Denied { steps, .. }
            | Gate::ApprovalRequired { steps, .. }
            | Gate::Ready { steps, .. } => steps,
        };
        for s in steps {
            self.audit.decision(serde_json::json!({
                "turn": turn,
                "request": s.request,
                "decision": s.decision,
                "grant": s.decision.grant(),
            }));
        }
        let plan = match g {
            Gate::Ready { plan, .. } => plan,
            Gate::Denied { code, reason, .. } => return Err(NestedError::Denied { code, reason }),
            Gate::ApprovalRequired { pending, .. } => {
                let what: Vec<String> = pending
                    .iter()
                    .map(|p| format!("`{}`", p.capability))
                    .collect();
                return Err(NestedError::Denied {
                    code: DenyCode::ApprovalRequired,
                    reason: format!(
                        "`{executor}` needs an approval for {} that cannot be asked inside a call",
                        what.join(", ")
                    ),
                });
            }
        };
        let needs: Vec<Capability> = plan.allowed().iter().map(|a| a.capability).collect();
        if let Some(reason) = self
            .sandbox
            .isolation()
            .refusal(self.host.on_degraded, &needs)
        {
            return Err(NestedError::Denied {
                code: DenyCode::IsolationDegraded,
                reason,
            });
        }
        let services = RunServices {
            memory_db: self.host.memory_db.clone(),
            depth,
            journal,
            audit: self.audit.clone(),
            screen: Arc::new(ActorScreen {
                frozen: self.frozen.clone(),
                actor: self.request.actor.clone(),
            }),
            nested: Some(Arc::new(Nested {
                host: NestedHost {
                    manifests: self.host.manifests.clone(),
                    on_degraded: self.host.on_degraded,
                    memory_db: self.host.memory_db.clone(),
                },
                frozen: self.frozen.clone(),
                sandbox: self.sandbox.clone(),
                audit: self.audit.clone(),
                parent: turn.clone(),
                request: self.request.clone(),
            })),
            cancel: self.request.cancel.clone(),
        };
        match execute(&self.sandbox, &plan, input, &services) {
            Ok(report) => match report.result {
                GuestResult::Ok { output } => Ok(output),
                GuestResult::Err { error } => Err(NestedError::Failed(format!(
                    "`{executor}` returned an error: {error}"
                ))),
            },
            Err(e) => match e.code() {
                Some(code) => Err(NestedError::Denied {
                    code,
                    reason: format!("`{executor}`: {}", chain(&e)),
                }),
                None => Err(NestedError::Failed(format!("`{executor}`: {}", chain(&e)))),
            },
        }
    }
}

/// The isolation report of the engine `config` asks for (built, read
/// back, nothing run, nothing written): what `gatehouse isolation` shows,
/// without opening a host.
pub fn isolation_report(
    config: &HostConfig,
    state: &StatePaths,
) -> Result<IsolationReport, HostError> {
    let profile = EngineProfile::configured(&config.engine, Limits::default().memory_bytes);
    let sandbox = Sandbox::with_profile(&state.cache_dir, &profile)
        .map_err(|e| HostError::Engine(Arc::new(e)))?;
    Ok(sandbox.isolation().clone())
}

/// A new turn id: UTC time and a per-process counter with the pid.
pub fn new_turn_id(now: crate::policy::UtcTime) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let compact: String = now
        .to_string()
        .chars()
        .filter(|c| c.is_ascii_digit())
        .collect();
    format!(
        "{compact}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}
