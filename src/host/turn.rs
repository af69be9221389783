//! The pipeline of one turn: answers taken, the gate, the probe, the run,
//! and how each way of ending is recorded (see the module documentation of
//! [`super`] for what is written when). A delegated turn is a kind of the
//! same pipeline ([`Kind`]): one function ([`Kind::pipeline`]) takes every
//! turn from its gate to its run's end.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::audit::TurnAudit;
use super::gate::{gate, Gate, TurnInput};
use super::queue::{self, ApprovalQueue, TurnKey, Verdict};
use super::roots::{Waited, WriteRoots};
use super::{
    build_snapshot, nested, Answer, ApprovalRequest, Choice, DenialRecord, Frozen, HostError,
    Inner, Pending, Step, TurnEnd, TurnOutcome, TurnRequest,
};
use crate::config::chain;
use crate::grants::{now_utc, NewGrant};
use crate::manifest::Manifest;
use crate::policy::snapshot::sha256_hex;
use crate::policy::{Capability, DenyCode, UtcTime};
use crate::sandbox::{
    execute, EngineProfile, GuestResult, IsolationReport, Limits, OnDegraded, Plan, RunError,
    RunReport, Runnable, Sandbox, Stopped,
};
use crate::undo::{TurnJournal, TurnRecord};

/// The grants database as `stat` sees it: size and modification time of
/// the file and of its write-ahead log (where SQLite commits first).
pub(super) type GrantsStamp = [Option<(u64, std::time::SystemTime)>; 2];

/// The grants database and its write-ahead log.
pub(super) struct GrantsPaths([std::path::PathBuf; 2]);

impl GrantsPaths {
    pub(super) fn each(&self) -> [&std::path::Path; 2] {
        [&self.0[0], &self.0[1]]
    }
}

/// The files of `state`'s grants database.
pub(super) fn grants_paths(state: &crate::config::StatePaths) -> GrantsPaths {
    let mut wal = state.grants_db.clone().into_os_string();
    wal.push("-wal");
    GrantsPaths([state.grants_db.clone(), wal.into()])
}

/// The [`GrantsStamp`] of `state`'s grants database now.
pub(super) fn grants_stamp(state: &crate::config::StatePaths) -> GrantsStamp {
    let of = |p: &std::path::Path| {
        std::fs::metadata(p)
            .ok()
            .and_then(|m| Some((m.len(), m.modified().ok()?)))
    };
    let paths = grants_paths(state);
    let [db, wal] = paths.each();
    [of(db), of(wal)]
}

/// Where [`Inner::advance`] got to.
pub(super) enum Advance {
    Done(Box<TurnOutcome>),
    /// The gate needs approvals and none were given yet.
    Parked(ApprovalRequest),
}

/// A turn in progress: what it was asked, what it is decided against, and
/// what it has gathered so far (all of it in the outcome, however it ends).
pub(super) struct Turn<'a> {
    request: &'a TurnRequest,
    id: &'a str,
    frozen: Arc<Frozen>,
    decisions: Vec<Step>,
    approvals: Vec<Answer>,
    pending: Vec<Pending>,
    pending_id: Option<String>,
    isolation: Option<Arc<IsolationReport>>,
}

impl<'a> Turn<'a> {
    /// Turn `id`, asked by `request`, decided against `frozen`: nothing
    /// gathered yet.
    pub(super) fn new(request: &'a TurnRequest, id: &'a str, frozen: Arc<Frozen>) -> Turn<'a> {
        Turn {
            request,
            id,
            frozen,
            decisions: Vec::new(),
            approvals: Vec::new(),
            pending: Vec::new(),
            pending_id: None,
            isolation: None,
        }
    }

    /// The gate's answer for running `manifest` as the request's actor,
    /// under its limits, with `approved_once` allowed for this turn only:
    /// the one place a turn of either kind is gated.
    fn gate(
        &self,
        manifest: &Manifest,
        approved_once: &[(Capability, Option<String>)],
        now: UtcTime,
    ) -> Gate {
        gate(TurnInput {
            snapshot: &self.frozen.snapshot,
            actor: &self.request.actor,
            manifest,
            turn_id: self.id.to_string(),
            limits: self.request.limits,
            approved_once,
            now,
        })
    }

    fn end(self, end: TurnEnd) -> TurnOutcome {
        TurnOutcome {
            turn: self.id.to_string(),
            executor: self.request.executor.clone(),
            actor: self.request.actor.clone(),
            level: self.frozen.snapshot.level.as_str(),
            decisions: self.decisions,
            approvals: self.approvals,
            pending: self.pending,
            pending_id: self.pending_id,
            limits: self.request.limits,
            isolation: self.isolation,
            end,
        }
    }
}

/// What the answers given so far allow.
#[derive(Default)]
struct Answered {
    once: Vec<(Capability, Option<String>)>,
    refused: Option<Pending>,
}

impl Inner {
    pub(super) fn frozen(&self) -> Arc<Frozen> {
        match self.snapshot.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Rebuilds the snapshot when the grants database changed since it
    /// was built; a database that cannot be read keeps the snapshot
    /// (logged). With a watch on the database, its files are looked at
    /// only when the watch says they may have changed (a write, a rename,
    /// a new write-ahead log: see [`crate::config::watch`]); the check and
    /// the rebuild happen with the watcher held, so no turn runs ahead of
    /// a rebuild another turn is making.
    pub(super) fn reread_grants(&self) {
        match (&self.watcher, self.grants_key) {
            (Some(watcher), Some(key)) => {
                watcher.check(key, || self.reread_grants_now());
            }
            (Some(watcher), None) => {
                watcher.drain();
                self.reread_grants_now();
            }
            (None, _) => self.reread_grants_now(),
        }
    }

    fn reread_grants_now(&self) {
        let now = grants_stamp(&self.state);
        let changed = match self.grants_stamp.lock() {
            Ok(s) => *s != now,
            Err(_) => true,
        };
        if changed {
            if let Err(e) = self.refresh_snapshot() {
                tracing::warn!("cannot reread the grants: {}", chain(&e));
            }
        }
    }

    fn refresh_snapshot(&self) -> Result<(), HostError> {
        // Stamped before reading: a change made while reading shows up as
        // a change at the next turn.
        let stamp = grants_stamp(&self.state);
        let mut snap = build_snapshot(
            &self.config,
            &self.state,
            &self.manifests,
            &self.workspace,
            self.home.as_deref(),
            self.level,
        )?;
        if let Some(frozen) = self.allow_set.get() {
            // A frozen allow set only narrows: of its grants, those still
            // unrevoked (by id), each as it was frozen (a later expiry
            // recorded since does not lengthen it); nothing recorded since.
            snap.grants = frozen
                .iter()
                .filter(|g| snap.grants.iter().any(|now| now.id == g.id))
                .cloned()
                .collect();
        }
        let mut guard = match self.snapshot.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        *guard = Arc::new(Frozen::new(snap));
        drop(guard);
        match self.grants_stamp.lock() {
            Ok(mut s) => *s = stamp,
            Err(poisoned) => *poisoned.into_inner() = stamp,
        }
        Ok(())
    }

    pub(super) fn profile(&self) -> EngineProfile {
        EngineProfile::configured(
            &self.config.engine,
            self.engine,
            self.max_memory_bytes.max(Limits::default().memory_bytes),
        )
    }

    /// The engine, built and probed on first use.
    pub(super) fn sandbox(&self) -> Result<&Arc<Sandbox>, HostError> {
        self.sandbox
            .get_or_init(|| {
                Sandbox::with_profile(&self.state.cache_dir, &self.profile())
                    .map(|mut s| {
                        if let Some(w) = &self.watcher {
                            s.share_watcher(w.clone());
                        }
                        s.isolation().log();
                        Arc::new(s)
                    })
                    .map_err(Arc::new)
            })
            .as_ref()
            .map_err(|e| HostError::Engine(e.clone()))
    }

    pub(super) fn manifest(&self, name: &str) -> Option<&Manifest> {
        self.manifests.iter().find(|m| m.name == name)
    }

    /// Finishes a turn with the answers `given`; never parks it again.
    pub(super) fn answered(
        &self,
        request: &TurnRequest,
        id: &str,
        given: Vec<(Pending, Choice)>,
        queued: Option<&str>,
    ) -> TurnOutcome {
        match self.advance(request, id, given, queued) {
            Advance::Done(outcome) => *outcome,
            // Unreachable with answers given (the gate then ends the turn
            // itself); ended the same way rather than trusted.
            Advance::Parked(approval) => {
                let mut t = self.turn(request, id);
                t.pending = approval.pending;
                self.refuse(
                    t,
                    DenyCode::ApprovalRequired,
                    "the approvals given do not cover the turn".into(),
                    None,
                )
            }
        }
    }

    fn turn<'a>(&self, request: &'a TurnRequest, id: &'a str) -> Turn<'a> {
        Turn::new(request, id, self.frozen())
    }

    /// What a queued answer is matched on, for `request` under the
    /// current snapshot.
    fn turn_key(&self, request: &TurnRequest) -> TurnKey {
        let frozen = self.frozen();
        let executor_sha256 = match self.manifest(&request.executor) {
            Some(m) if m.sha256.is_some() => m.sha256.clone().unwrap_or_default(),
            Some(m) if !m.command.is_empty() => {
                sha256_hex(crate::policy::snapshot::canonical_json(&m.command).as_bytes())
            }
            Some(m) => std::fs::read(&m.component)
                .map(|b| sha256_hex(&b))
                .unwrap_or_else(|_| "unreadable".into()),
            None => String::new(),
        };
        let argv: Vec<String> = match self.manifest(&request.executor) {
            Some(m) if !m.command.is_empty() => {
                m.command.iter().chain(&request.io.args).cloned().collect()
            }
            _ => Vec::new(),
        };
        let files = file_args(&argv, &self.workspace);
        TurnKey {
            argv,
            files,
            actor: request.actor.clone(),
            identity: frozen
                .snapshot
                .actors
                .get(&request.actor)
                .and_then(|a| a.identity.clone()),
            executor: request.executor.clone(),
            executor_sha256,
            input_sha256: sha256_hex(request.input.as_bytes()),
            args_sha256: queue::args_sha256(&request.io.args),
            definition_hash: frozen.hashes.definition.clone(),
            policy_hash: frozen.hashes.policy.clone(),
        }
    }

    /// A parked turn answered from the pending-approval queue: an entry
    /// the person allowed (once) or denied that matches this turn
    /// exactly, consumed by it. `None`: the queue is off or holds no such
    /// answer (a queue that cannot be read counts as empty, logged).
    pub(super) fn answered_by_queue(
        &self,
        request: &TurnRequest,
        id: &str,
        approval: &ApprovalRequest,
    ) -> Option<TurnOutcome> {
        if !self.approval_queue {
            return None;
        }
        let key = self.turn_key(request);
        let verdict =
            match ApprovalQueue::new(&self.state).take(id, &key, &approval.pending, now_utc()) {
                Ok(v) => v?,
                Err(e) => {
                    tracing::warn!("turn `{id}`: cannot read the approval queue: {}", chain(&e));
                    return None;
                }
            };
        match verdict {
            Verdict::Allowed(entry) => {
                let given = approval
                    .pending
                    .iter()
                    .map(|p| (p.clone(), Choice::Once))
                    .collect();
                let mut outcome = self.answered(request, id, given, Some(&entry));
                outcome.pending_id = Some(entry);
                Some(outcome)
            }
            Verdict::Denied(entry) => {
                let mut t = self.turn(request, id);
                t.pending = approval.pending.clone();
                t.pending_id = Some(entry.clone());
                let reason = format!("pending approval `{entry}` was denied by the person asked");
                Some(self.refuse(t, DenyCode::ApprovalRefused, reason, None))
            }
        }
    }

    /// Queues what `pending` needs, for a turn that ends with
    /// `APPROVAL_REQUIRED`; the entry's id, or `None` (the queue is off or
    /// cannot be written, logged).
    fn enqueue(&self, request: &TurnRequest, id: &str, pending: &[Pending]) -> Option<String> {
        if !self.approval_queue || pending.is_empty() {
            return None;
        }
        let key = self.turn_key(request);
        match ApprovalQueue::new(&self.state).enqueue(id, &key, pending, &request.input, now_utc())
        {
            Ok(entry) => Some(entry.id),
            Err(e) => {
                tracing::warn!("turn `{id}`: cannot queue the approval: {}", chain(&e));
                None
            }
        }
    }

    /// The turn as far as it can go with the answers `given`.
    pub(super) fn advance(
        &self,
        request: &TurnRequest,
        id: &str,
        given: Vec<(Pending, Choice)>,
        queued: Option<&str>,
    ) -> Advance {
        let mut t = self.turn(request, id);
        let Some(manifest) = self.manifest(&request.executor) else {
            let message = format!(
                "no executor named `{}` is known to this host",
                request.executor
            );
            return Advance::Done(Box::new(t.end(TurnEnd::Invalid { message })));
        };
        let answered = match self.take_answers(&mut t, &given, queued) {
            Ok(a) => a,
            Err(message) => return Advance::Done(Box::new(t.end(TurnEnd::Failed { message }))),
        };
        if let Some(p) = answered.refused {
            let reason = format!(
                "`{}` on `{}` was refused by the person asked",
                p.capability,
                p.target.as_deref().unwrap_or("-")
            );
            return Advance::Done(Box::new(self.refuse(
                t,
                DenyCode::ApprovalRefused,
                reason,
                None,
            )));
        }
        match Kind::Top(self).pipeline(&mut t, manifest, &answered.once, now_utc()) {
            Ended::Approval(pending) if given.is_empty() => {
                let key = self.turn_key(request);
                Advance::Parked(ApprovalRequest {
                    turn: id.to_string(),
                    executor: request.executor.clone(),
                    actor: request.actor.clone(),
                    pending,
                    shown: super::Shown {
                        executor_sha256: key.executor_sha256,
                        input: queue::input_preview(&request.input),
                        input_bytes: request.input.len(),
                        argv: key.argv,
                        files: key.files,
                    },
                })
            }
            Ended::Approval(pending) => {
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
                let mut reason =
                    format!("approval needed for {} and no one gave it", what.join(", "));
                // The whole set the person was asked about goes to the
                // queue: a retry of the same turn needs all of it again.
                let asked: Vec<Pending> = given.iter().map(|(p, _)| p.clone()).collect();
                t.pending_id = self.enqueue(request, id, &asked);
                if let Some(entry) = &t.pending_id {
                    reason.push_str(&format!(
                        "; queued as pending approval `{entry}`, which a person can answer with `gatehouse approvals`"
                    ));
                }
                t.pending = pending;
                Advance::Done(Box::new(self.refuse(
                    t,
                    DenyCode::ApprovalRequired,
                    reason,
                    None,
                )))
            }
            Ended::Refused { code, reason } => {
                Advance::Done(Box::new(self.refuse(t, code, reason, None)))
            }
            Ended::RunRefused {
                code,
                reason,
                digest,
            } => Advance::Done(Box::new(self.refuse(t, code, reason, digest))),
            Ended::Failed(message) => Advance::Done(Box::new(t.end(TurnEnd::Failed { message }))),
            Ended::Ran(end) => Advance::Done(Box::new(t.end(end))),
        }
    }

    /// The turn's end when the gate denies it with no approvals given;
    /// `None` otherwise (an unknown executor is left to `advance`).
    pub(super) fn refused_by_gate(&self, request: &TurnRequest, id: &str) -> Option<TurnOutcome> {
        let mut t = self.turn(request, id);
        let manifest = self.manifest(&request.executor)?;
        match t.gate(manifest, &[], now_utc()) {
            Gate::Denied {
                steps,
                code,
                reason,
            } => {
                t.decisions = steps;
                Some(self.refuse(t, code, reason, None))
            }
            Gate::ApprovalRequired { .. } | Gate::Ready { .. } => None,
        }
    }

    /// Records the answers `given`: "allow once" for this turn, "allow and
    /// remember" as a grant (the snapshot is then rebuilt), the first
    /// refusal. Fails only when a grant cannot be recorded.
    fn take_answers(
        &self,
        t: &mut Turn<'_>,
        given: &[(Pending, Choice)],
        queued: Option<&str>,
    ) -> Result<Answered, String> {
        let mut answered = Answered::default();
        let mut remembered = false;
        for (p, choice) in given {
            let mut answer = Answer {
                capability: p.capability,
                target: p.target.clone(),
                choice: choice.as_str(),
                grant: None,
                queued: queued.map(str::to_string),
            };
            match choice {
                Choice::Once => answered.once.push((p.capability, p.target.clone())),
                Choice::Remember { expires_in_secs } if p.rememberable => {
                    let id = self
                        .remember(&t.frozen, &t.request.actor, p, *expires_in_secs)
                        .map_err(|e| format!("cannot remember the approval: {}", chain(&e)))?;
                    answer.grant = Some(id);
                    remembered = true;
                }
                // An always-class capability cannot be remembered: the
                // answer is taken as a refusal, never as a grant.
                Choice::Remember { .. } | Choice::Deny => {
                    answered.refused.get_or_insert_with(|| p.clone());
                }
                Choice::Queue => {}
            }
            t.approvals.push(answer);
        }
        if remembered {
            self.refresh_snapshot()
                .map_err(|e| format!("cannot reload the grants: {}", chain(&e)))?;
            t.frozen = self.frozen();
        }
        Ok(answered)
    }

    /// Records a grant for the actor's identity from an "allow and
    /// remember" answer.
    fn remember(
        &self,
        frozen: &Frozen,
        actor: &str,
        p: &Pending,
        expires_in_secs: Option<u64>,
    ) -> Result<i64, HostError> {
        let identity = frozen
            .snapshot
            .actors
            .get(actor)
            .and_then(|a| a.identity.clone())
            .unwrap_or_default();
        let now = now_utc();
        let grant = super::GrantBook::new(&self.state).record(
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

    /// Ends a top-level turn's journal as its run ended: finished with
    /// the run's status, or discarded when no guest code ran.
    fn close(&self, journal: &TurnJournal, id: &str, ended: &Ended) {
        let status = match ended {
            Ended::Ran(TurnEnd::Ran { run }) => match run.result {
                GuestResult::Ok { .. } => "ok",
                GuestResult::Err { .. } => "error",
            },
            Ended::Ran(TurnEnd::Stopped { code, .. }) => code.map_or("error", |c| c.as_str()),
            _ => {
                journal.discard();
                return;
            }
        };
        if let Err(e) = journal.finish(status, now_utc()) {
            tracing::warn!("turn `{id}`: {}", chain(&e));
        }
    }

    /// Ends a turn before any guest code ran: exactly one line in the
    /// denial log. `component_sha256`: the digest when it was computed,
    /// else the one the manifest pins.
    fn refuse(
        &self,
        t: Turn<'_>,
        code: DenyCode,
        reason: String,
        component_sha256: Option<String>,
    ) -> TurnOutcome {
        let request = t.request;
        let identity = t
            .frozen
            .snapshot
            .actors
            .get(&request.actor)
            .and_then(|a| a.identity.clone());
        let line = DenialRecord {
            time: now_utc(),
            turn: t.id.to_string(),
            actor: request.actor.clone(),
            channel: identity.as_ref().map(|i| i.channel.clone()),
            sender: identity.as_ref().map(|i| i.sender_id.clone()),
            executor: request.executor.clone(),
            component_sha256: component_sha256.or_else(|| {
                self.manifest(&request.executor)
                    .and_then(|m| m.sha256.clone())
            }),
            input_sha256: sha256_hex(request.input.as_bytes()),
            input_bytes: request.input.len(),
            args: request.io.args.clone(),
            code,
            reason: reason.clone(),
            pending_id: t.pending_id.clone(),
            hashes: (*t.frozen.hashes).clone(),
        };
        if let Err(e) = self.denials_log.append(&line) {
            tracing::warn!(
                "turn `{}`: the denial was not recorded: {}",
                t.id,
                chain(&e)
            );
        }
        t.end(TurnEnd::Refused { code, reason })
    }
}

/// The kind of turn [`Kind::pipeline`] runs. Every turn takes the same
/// steps from its gate to its run's report, in this order; what differs
/// by kind is said at each step:
///
/// 1. **The gate** ([`Turn::gate`]): as the request's actor, under its
///    limits. *Top-level:* with the approvals given. *Nested:* with none,
///    as the actor the call runs as (its caller decided `ACTOR/EXECUTOR`
///    first, see [`nested`]).
/// 2. **The gate's audit.** *Top-level:* in the turn's own audit, once
///    it is opened at step 6 (a turn refused before that writes only its
///    denial line). *Nested:* in the caller's audit at once, whatever the
///    gate answers.
/// 3. **An approval needed** ends the pipeline ([`Ended::Approval`]).
///    *Top-level:* the turn is parked and the approver asked (or, with
///    answers given, it ends `APPROVAL_REQUIRED`). *Nested:* no one can
///    be asked inside a call: `APPROVAL_REQUIRED`.
/// 4. **The engine and its isolation refusal** (`ISOLATION_DEGRADED`).
///    *Top-level:* the engine is built and probed at the first turn that
///    gets this far. *Nested:* the caller's engine.
/// 5. **The cancel check, then the write roots** (see [`super::roots`]).
///    *Top-level:* it waits for its roots as long as it takes.
///    *Nested:* the roots its callers hold are its own; it waits for the
///    others until what is left of its caller's deadline.
/// 6. **Its journal and audit.** *Top-level:* its own, opened now with
///    the gate's lines and the answers, and finished at the end.
///    *Nested:* its caller's.
/// 7. **The services** ([`nested::services`]), at the kind's depth (0 for
///    a top-level turn).
/// 8. **The run**, after the component watch is read: the component is
///    looked at as it is now, perhaps long after the turn began.
///    *Top-level:* on the request's input and streams. *Nested:* on the
///    call's input, with no streams.
/// 9. **The run's end** ([`ran`]), which each kind then answers with in
///    its own way: a top-level turn's [`TurnOutcome`] (and its denial
///    line), a nested turn's output or [`NestedError`] for its caller's
///    guest.
///
/// [`NestedError`]: crate::sandbox::services::NestedError
pub(super) enum Kind<'a> {
    /// A turn a caller of the host asked for ([`super::Host::begin`]).
    Top(&'a Inner),
    /// A turn a guest's `delegate:call` started.
    Nested(Call<'a>),
}

/// A delegated call, as [`Kind::Nested`] runs it.
pub(super) struct Call<'a> {
    /// What the caller's services are bound to: its engine, audit, write
    /// roots and the roots it holds.
    pub scope: &'a nested::Scope,
    /// The callee as the caller named it (`EXECUTOR` or `ACTOR/EXECUTOR`),
    /// which the reasons of what ends it name.
    pub callee: &'a str,
    /// 1 for a call made by a top-level turn.
    pub depth: u32,
    /// The caller's journal, shared with its callees.
    pub journal: Option<TurnJournal>,
    /// What is left of the caller's deadline.
    pub left: Duration,
}

/// Where [`Kind::pipeline`] ended a turn.
pub(super) enum Ended {
    /// The gate needs these approvals (its steps are the turn's
    /// decisions).
    Approval(Vec<Pending>),
    /// Refused before any guest code ran: by the gate, the isolation
    /// check, the cancel check or the wait for write roots.
    Refused { code: DenyCode, reason: String },
    /// Refused by the run itself before any guest code ran (the import
    /// check, the pinned digest); `digest`: the one the file really has.
    RunRefused {
        code: DenyCode,
        reason: String,
        digest: Option<String>,
    },
    /// The engine could not be started.
    Failed(String),
    /// The run's end: it ran, was stopped, or could not be loaded.
    Ran(TurnEnd),
}

impl Kind<'_> {
    /// Takes turn `t` from its gate to its run's end (the steps, and how
    /// they differ by kind, are in [`Kind`]'s documentation).
    pub(super) fn pipeline(
        &self,
        t: &mut Turn<'_>,
        manifest: &Manifest,
        approved_once: &[(Capability, Option<String>)],
        now: UtcTime,
    ) -> Ended {
        let answer = t.gate(manifest, approved_once, now);
        if let Kind::Nested(call) = self {
            let (Gate::Denied { steps, .. }
            | Gate::ApprovalRequired { steps, .. }
            | Gate::Ready { steps, .. }) = &answer;
            // Its lines name the actor it is gated as, and its identity
            // (a delegated callee's own calls run as its actor, not the
            // turn's).
            call.scope
                .audit
                .record_nested_gate(t.id, &t.frozen.tail(&t.request.actor), steps);
        }
        let plan = match answer {
            Gate::Denied {
                steps,
                code,
                reason,
            } => {
                t.decisions = steps;
                return Ended::Refused { code, reason };
            }
            Gate::ApprovalRequired { steps, pending } => {
                t.decisions = steps;
                return Ended::Approval(pending);
            }
            Gate::Ready { steps, plan } => {
                t.decisions = steps;
                plan
            }
        };
        let sandbox = match self.sandbox() {
            Ok(s) => s,
            Err(message) => return Ended::Failed(message),
        };
        let isolation = sandbox.isolation_shared();
        let needs: Vec<Capability> = plan.allowed().iter().map(|a| a.capability).collect();
        let refusal = isolation.refusal(self.on_degraded(), &needs);
        t.isolation = Some(isolation);
        if let Some(reason) = refusal {
            return Ended::Refused {
                code: DenyCode::IsolationDegraded,
                reason,
            };
        }
        let cancelled = || Ended::Refused {
            code: DenyCode::TurnCancelled,
            reason: self.said("the turn was cancelled before it started"),
        };
        if t.request.cancel.is_cancelled() {
            return cancelled();
        }
        // One writer per place at a time (see `super::roots`).
        let held = match self.write_roots().enter_within(
            plan.write_roots(),
            self.callers_roots(),
            &t.request.cancel,
            self.until(),
        ) {
            Ok(held) => held,
            Err(Waited::Cancelled) => return cancelled(),
            Err(Waited::Deadline) => {
                return Ended::Refused {
                    code: DenyCode::LimitDeadline,
                    reason: self
                        .said("its deadline passed while another turn wrote where it would write"),
                }
            }
        };
        let (audit, own) = self.records(t);
        let services = nested::services(
            nested::Base {
                memory_db: self.memory_db(),
                frozen: &t.frozen,
                audit: &audit,
                request: t.request,
            },
            &plan,
            self.depth(),
            self.services_journal(own.as_ref()),
            || nested::Scope {
                manifests: self.manifests().clone(),
                on_degraded: self.on_degraded(),
                memory_db: self.memory_db(),
                frozen: t.frozen.clone(),
                sandbox: sandbox.clone(),
                audit: audit.clone(),
                request: t.request.clone(),
                turn: t.id.to_string(),
                write_roots: self.write_roots().clone(),
                held: self
                    .callers_roots()
                    .iter()
                    .chain(held.roots())
                    .cloned()
                    .collect(),
            },
        );
        sandbox.drain_watch();
        let ended = ran(
            execute(&sandbox, &plan, &t.request.input, &t.request.io, &services),
            &plan,
        );
        if let (Kind::Top(inner), Some(journal)) = (self, own) {
            audit.finish();
            inner.close(&journal, t.id, &ended);
        }
        ended
    }

    /// The engine: a top-level turn's is built (and its isolation probed)
    /// on first use; a nested turn's is its caller's.
    fn sandbox(&self) -> Result<Arc<Sandbox>, String> {
        match self {
            Kind::Top(inner) => inner.sandbox().cloned().map_err(|e| chain(&e)),
            Kind::Nested(call) => Ok(call.scope.sandbox.clone()),
        }
    }

    fn on_degraded(&self) -> OnDegraded {
        match self {
            Kind::Top(inner) => inner.on_degraded,
            Kind::Nested(call) => call.scope.on_degraded,
        }
    }

    fn manifests(&self) -> &Arc<Vec<Manifest>> {
        match self {
            Kind::Top(inner) => &inner.manifests,
            Kind::Nested(call) => &call.scope.manifests,
        }
    }

    fn memory_db(&self) -> PathBuf {
        match self {
            Kind::Top(inner) => inner.state.state_dir.join("memory.db"),
            Kind::Nested(call) => call.scope.memory_db.clone(),
        }
    }

    fn write_roots(&self) -> &Arc<WriteRoots> {
        match self {
            Kind::Top(inner) => &inner.write_roots,
            Kind::Nested(call) => &call.scope.write_roots,
        }
    }

    /// The write roots the turn's callers hold: a callee may use what
    /// lies within them without waiting for itself.
    fn callers_roots(&self) -> &[PathBuf] {
        match self {
            Kind::Top(_) => &[],
            Kind::Nested(call) => &call.scope.held,
        }
    }

    /// When the wait for write roots ends: a nested turn's deadline (two
    /// calls that wait on each other's roots end there, not never).
    fn until(&self) -> Option<Instant> {
        match self {
            Kind::Top(_) => None,
            Kind::Nested(call) => Some(Instant::now() + call.left),
        }
    }

    fn depth(&self) -> u32 {
        match self {
            Kind::Top(_) => 0,
            Kind::Nested(call) => call.depth,
        }
    }

    /// `reason` as the turn's refusal says it: a nested turn's names the
    /// callee, for the caller's guest that gets it.
    fn said(&self, reason: &str) -> String {
        match self {
            Kind::Top(_) => reason.to_string(),
            Kind::Nested(call) => format!("`{}`: {reason}", call.callee),
        }
    }

    /// The turn's audit, and its own journal: a top-level turn opens both
    /// now, the gate's lines and the answers first; a nested turn writes
    /// into its caller's and has no journal of its own.
    fn records(&self, t: &Turn<'_>) -> (Arc<TurnAudit>, Option<TurnJournal>) {
        let inner = match self {
            Kind::Top(inner) => inner,
            Kind::Nested(call) => return (call.scope.audit.clone(), None),
        };
        let journal = TurnJournal::lazy(
            &inner.state.history_dir,
            TurnRecord {
                turn: t.id.to_string(),
                executor: t.request.executor.clone(),
                actor: t.request.actor.clone(),
                level: t.frozen.snapshot.level.as_str().into(),
                started_at: now_utc(),
                finished_at: None,
                status: "running".into(),
                undo: "none".into(),
                args: t.request.io.args.clone(),
            },
            Some(inner.audit_log.clone()),
        );
        let audit = Arc::new(TurnAudit::new(
            t.id,
            t.frozen.tail(&t.request.actor),
            journal.clone(),
        ));
        audit.record_turn_gate(&t.frozen.encoded, &t.decisions, &t.approvals);
        (audit, Some(journal))
    }

    /// The journal the run's mutations go to: a top-level turn's own
    /// (none on a host that journals nothing), a nested turn's caller's.
    fn services_journal(&self, own: Option<&TurnJournal>) -> Option<TurnJournal> {
        match self {
            Kind::Top(inner) => own.filter(|_| inner.journaled).cloned(),
            Kind::Nested(call) => call.journal.clone(),
        }
    }
}

/// The end of a run of `plan`, for a turn of either kind.
fn ran(ran: Result<RunReport, RunError>, plan: &Plan) -> Ended {
    let end = match ran {
        Ok(report) => TurnEnd::Ran {
            run: Box::new(report),
        },
        Err(RunError::Refused { code, reason }) => {
            // Refused before any guest code ran (the import check, the
            // pinned digest). The digest is the one the file really has.
            let digest = match plan.runnable() {
                Runnable::Component { path, sha256 } => std::fs::read(path)
                    .ok()
                    .map(|b| sha256_hex(&b))
                    .or_else(|| sha256.clone()),
                Runnable::Command { .. } => None,
            };
            return Ended::RunRefused {
                code,
                reason,
                digest,
            };
        }
        Err(RunError::Load(e)) => TurnEnd::Invalid { message: chain(&e) },
        Err(RunError::Stopped(stopped)) => {
            let Stopped { error, report } = *stopped;
            TurnEnd::Stopped {
                code: error.code(),
                message: chain(&error),
                run: Some(Box::new(report)),
            }
        }
        Err(e) => TurnEnd::Stopped {
            code: e.code(),
            message: chain(&e),
            run: None,
        },
    };
    Ended::Ran(end)
}

/// The words of `argv` that name a regular file in `workspace` (the
/// command runs there), each with the file's sha256 now: what an approval
/// of the command is bound to. A word that names nothing there, a
/// directory, or a file outside the workspace binds nothing (the files a
/// script imports stay unbound; README says so).
fn file_args(argv: &[String], workspace: &str) -> Vec<queue::FileArg> {
    let root = std::path::Path::new(workspace);
    let mut out = Vec::new();
    for arg in argv.iter().skip(1) {
        if arg.is_empty() || arg.starts_with('-') {
            continue;
        }
        let Ok(real) = std::fs::canonicalize(root.join(arg)) else {
            continue;
        };
        if !real.starts_with(root) || !real.is_file() {
            continue;
        }
        let Ok(sha256) = crate::undo::journal::sha256_file(&real) else {
            continue;
        };
        out.push(queue::FileArg {
            arg: arg.clone(),
            path: real.display().to_string(),
            sha256,
        });
    }
    out
}
