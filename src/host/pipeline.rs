//! One pipeline for every turn: a top-level turn and a delegated one
//! take the same steps from their gate to their run's end, in one
//! function ([`Kind::pipeline`]); what differs by kind is said step by
//! step in [`Kind`]'s documentation. Before it, a top-level turn takes its
//! answers ([`super::turn`]) and a nested one its delegation decision
//! ([`super::delegate`]); after it, each answers with the end in its own
//! way.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::audit::TurnAudit;
use super::gate::{gate, Gate, TurnInput};
use super::needs::Once;
use super::roots::{Held, Waited, WriteRoots};
use super::runtimes::Runtimes;
use super::{Answer, Frozen, Inner, Pending, Phase, Step, TurnEnd, TurnOutcome, TurnRequest};
use crate::manifest::Manifest;
use crate::policy::{Capability, DenyCode, UtcTime};
use crate::sandbox::{
    execute, GuestResult, IsolationReport, OnDegraded, Plan, RunError, RunReport, Runnable,
    Sandbox, Stopped,
};
use crate::state::grants::now_utc;
use crate::undo::{TurnJournal, TurnRecord, TurnStatus, UndoState};
use crate::util::chain;

/// A turn in progress: what it was asked, what it is decided against, and
/// what it has gathered so far (all of it in the outcome, however it ends).
pub(super) struct Turn<'a> {
    pub(super) request: &'a TurnRequest,
    pub(super) id: &'a str,
    pub(super) frozen: Arc<Frozen>,
    pub(super) decisions: Vec<Step>,
    pub(super) approvals: Vec<Answer>,
    pub(super) pending: Vec<Pending>,
    pub(super) pending_id: Option<String>,
    pub(super) isolation: Option<Arc<IsolationReport>>,
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
    pub(super) fn gate(
        &self,
        manifest: &Manifest,
        approved_once: &Once,
        now: UtcTime,
        units: &crate::sandbox::Runtimes,
    ) -> Gate {
        gate(TurnInput {
            snapshot: &self.frozen.snapshot,
            actor: &self.request.actor,
            manifest,
            turn_id: self.id.to_string(),
            limits: self.request.limits,
            approved_once,
            now,
            units,
        })
    }

    pub(super) fn end(self, end: TurnEnd) -> TurnOutcome {
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

/// The kind of turn [`Kind::pipeline`] runs. Every turn takes the same
/// steps from its gate to its run's report, in this order; what differs
/// by kind is said at each step:
///
/// 1. **The gate** ([`Turn::gate`]): as the request's actor, under its
///    limits. *Top-level:* with the approvals given. *Nested:* with none,
///    as the actor the call runs as (its caller decided `ACTOR/EXECUTOR`
///    first, see [`super::delegate`]).
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
/// 7. **The services** ([`Kind::services`]), at the kind's depth (0 for
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
    pub scope: &'a Scope,
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

/// What the services of one turn (and its nested turns) are bound to.
#[derive(Clone)]
pub(super) struct Scope {
    /// The host's runtimes, which a delegated turn shares.
    pub runtimes: Arc<Runtimes>,
    pub on_degraded: OnDegraded,
    pub frozen: Arc<Frozen>,
    pub sandbox: Arc<Sandbox>,
    pub audit: Arc<TurnAudit>,
    pub request: TurnRequest,
    /// The id of the turn these services run (`<caller>.<callee>` when
    /// nested).
    pub turn: String,
    /// The host's write-root lock, which a delegated turn enters too.
    pub write_roots: Arc<WriteRoots>,
    /// The write roots this turn and its callers hold: a callee may use
    /// what lies within them without waiting for itself.
    pub held: Vec<PathBuf>,
}

/// A turn's audit and journals (see [`Kind::records`]).
pub(super) struct Records {
    pub(super) audit: Arc<TurnAudit>,
    /// The turn's own journal, ended with its run: a top-level turn's.
    own: Option<TurnJournal>,
    /// Where the run's mutations are journaled.
    pub(super) journal: Option<TurnJournal>,
}

impl Kind<'_> {
    /// Takes turn `t` from its gate to its run's end (the steps, and how
    /// they differ by kind, are in [`Kind`]'s documentation).
    pub(super) fn pipeline(
        &self,
        t: &mut Turn<'_>,
        manifest: &Manifest,
        approved_once: &Once,
        now: UtcTime,
    ) -> Ended {
        let plan = match self.gated(t, manifest, approved_once, now) {
            Ok(plan) => plan,
            Err(ended) => return ended,
        };
        let sandbox = match self.sandbox() {
            Ok(s) => s,
            Err(message) => return Ended::Failed(message),
        };
        if let Some(refused) = self.refused_by_isolation(t, &plan, &sandbox) {
            return refused;
        }
        let held = match self.enter(t, &plan) {
            Ok(held) => held,
            Err(refused) => return refused,
        };
        let records = self.records(t);
        let services = self.services(t, &plan, &records, approved_once, || Scope {
            runtimes: self.runtimes().clone(),
            on_degraded: self.on_degraded(),
            frozen: t.frozen.clone(),
            sandbox: sandbox.clone(),
            audit: records.audit.clone(),
            request: t.request.clone(),
            turn: t.id.to_string(),
            write_roots: self.write_roots().clone(),
            held: self
                .callers_roots()
                .iter()
                .chain(held.roots())
                .cloned()
                .collect(),
        });
        // Perhaps long after the turn began (a wait for write roots, a call
        // late in its caller's run): the component is looked at as it is
        // now. A top-level turn that did not wait read the watch when it
        // began, a moment ago: one `read(2)` per turn is enough.
        if held.waited() || self.depth() > 0 {
            sandbox.drain_watch();
        }
        t.request.reached(Phase::Running);
        let ended = ran(
            execute(&sandbox, &plan, &t.request.input, &t.request.io, &services),
            &plan,
        );
        if let Some(journal) = records.own {
            records.audit.finish();
            // A turn whose record is not durable is not acknowledged as
            // having run: the caller learns that it ran unrecorded.
            if let Err(message) = close(&journal, t.id, &ended) {
                return Ended::Failed(message);
            }
        }
        ended
    }

    /// Steps 1 to 3: the gate, its audit for a nested turn, and the end
    /// of the pipeline when it refuses or an approval is needed; else the
    /// plan.
    fn gated(
        &self,
        t: &mut Turn<'_>,
        manifest: &Manifest,
        approved_once: &Once,
        now: UtcTime,
    ) -> Result<Box<Plan>, Ended> {
        let answer = t.gate(manifest, approved_once, now, &self.runtimes().units);
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
        match answer {
            Gate::Denied {
                steps,
                code,
                reason,
            } => {
                t.decisions = steps;
                Err(Ended::Refused { code, reason })
            }
            Gate::ApprovalRequired { steps, pending } => {
                t.decisions = steps;
                t.request.reached(Phase::Decided);
                Err(Ended::Approval(pending))
            }
            Gate::Ready { steps, plan } => {
                t.decisions = steps;
                t.request.reached(Phase::Decided);
                Ok(plan)
            }
        }
    }

    /// Step 4: `ISOLATION_DEGRADED` when the engine's isolation is
    /// degraded in a way the host's `on_degraded` refuses for what `plan`
    /// needs. The turn keeps the isolation report either way.
    fn refused_by_isolation(
        &self,
        t: &mut Turn<'_>,
        plan: &Plan,
        sandbox: &Sandbox,
    ) -> Option<Ended> {
        let isolation = sandbox.isolation_shared();
        let needs: Vec<Capability> = plan.allowed().iter().map(|a| a.capability).collect();
        let refusal = isolation.refusal(self.on_degraded(), &needs);
        t.isolation = Some(isolation);
        refusal.map(|reason| Ended::Refused {
            code: DenyCode::IsolationDegraded,
            reason,
        })
    }

    /// Step 5: the cancel check, then the write roots `plan` may write,
    /// one writer per place at a time (see `super::roots`).
    fn enter(&self, t: &Turn<'_>, plan: &Plan) -> Result<Held<'_>, Ended> {
        let cancelled = || Ended::Refused {
            code: DenyCode::TurnCancelled,
            reason: self.said("the turn was cancelled before it started"),
        };
        if t.request.cancel.is_cancelled() {
            return Err(cancelled());
        }
        self.write_roots()
            .enter_within(
                plan.write_roots(),
                self.callers_roots(),
                &t.request.cancel,
                self.left().map(|left| Instant::now() + left),
            )
            .map_err(|waited| match waited {
                Waited::Cancelled => cancelled(),
                Waited::Deadline => Ended::Refused {
                    code: DenyCode::LimitDeadline,
                    reason: self
                        .said("its deadline passed while another turn wrote where it would write"),
                },
            })
    }

    /// The engine: a top-level turn's is built (and its isolation probed)
    /// on first use; a nested turn's is its caller's.
    fn sandbox(&self) -> Result<Arc<Sandbox>, String> {
        match self {
            Kind::Top(inner) => inner.sandbox().cloned().map_err(|e| chain(&e)),
            Kind::Nested(call) => Ok(call.scope.sandbox.clone()),
        }
    }

    /// The capabilities' runtimes: its host's, which a nested turn
    /// shares.
    pub(super) fn runtimes(&self) -> &Arc<Runtimes> {
        match self {
            Kind::Top(inner) => &inner.runtimes,
            Kind::Nested(call) => &call.scope.runtimes,
        }
    }

    /// What a degraded isolation refuses: its host's setting.
    fn on_degraded(&self) -> OnDegraded {
        match self {
            Kind::Top(inner) => inner.settings.on_degraded,
            Kind::Nested(call) => call.scope.on_degraded,
        }
    }

    /// The host's write-root lock, which every turn enters.
    fn write_roots(&self) -> &Arc<WriteRoots> {
        match self {
            Kind::Top(inner) => &inner.write_roots,
            Kind::Nested(call) => &call.scope.write_roots,
        }
    }

    /// The write roots the turn's callers hold: a callee may use what lies
    /// within them without waiting for itself.
    fn callers_roots(&self) -> &[PathBuf] {
        match self {
            Kind::Top(_) => &[],
            Kind::Nested(call) => &call.scope.held,
        }
    }

    /// What is left of the caller's deadline: when the wait for write
    /// roots ends (two calls that wait on each other's roots end there,
    /// not never). `None`: a top-level turn waits as long as it takes.
    fn left(&self) -> Option<Duration> {
        match self {
            Kind::Top(_) => None,
            Kind::Nested(call) => Some(call.left),
        }
    }

    /// How deep in delegated calls the turn is: 0 for a top-level turn.
    pub(super) fn depth(&self) -> u32 {
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

    /// The turn's audit, its own journal, and the journal its run's
    /// mutations go to. A top-level turn opens its audit and journal now,
    /// the gate's lines and the answers first, and journals its run into
    /// them (unless its host journals nothing); a nested turn has none of
    /// its own and writes into its caller's.
    fn records(&self, t: &Turn<'_>) -> Records {
        let inner = match self {
            Kind::Top(inner) => inner,
            Kind::Nested(call) => {
                return Records {
                    audit: call.scope.audit.clone(),
                    own: None,
                    journal: call.journal.clone(),
                }
            }
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
                status: TurnStatus::Running,
                undo: UndoState::None,
                args: t.request.io.args.clone(),
            },
            Some(inner.logs.audit.clone()),
        )
        .with_chain(inner.stores.audit.clone());
        let journal = match &inner.stores.fleet {
            Some(fleet) => journal.on_node(&fleet.node),
            None => journal,
        };
        let audit = Arc::new(TurnAudit::new(
            t.id,
            t.frozen.tail(&t.request.actor),
            journal.clone(),
        ));
        audit.record_turn_gate(&t.frozen.encoded, &t.decisions, &t.approvals);
        Records {
            audit,
            journal: inner.settings.journaled.then(|| journal.clone()),
            own: Some(journal),
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
                Runnable::Component { path, sha256 } => crate::util::sha256_file(path)
                    .ok()
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

/// Ends a top-level turn's journal as its run ended: finished with
/// the run's status, or discarded when no guest code ran. A record that
/// could not be committed (`turn.json`, the audit log, the audit chain)
/// is the turn's failure, in words: its effects stand, unacknowledged.
fn close(journal: &TurnJournal, id: &str, ended: &Ended) -> Result<(), String> {
    let status = match ended {
        Ended::Ran(TurnEnd::Ran { run }) => match run.result {
            GuestResult::Ok { .. } => TurnStatus::Ok,
            GuestResult::Err { .. } => TurnStatus::Error,
        },
        Ended::Ran(TurnEnd::Stopped { code, .. }) => {
            code.map_or(TurnStatus::Error, TurnStatus::Stopped)
        }
        _ => {
            journal.discard();
            return Ok(());
        }
    };
    journal.finish(status, now_utc()).map_err(|e| {
        format!(
            "turn `{id}` ran, but its record was not committed: {}; the turn is not acknowledged, and whatever it did stands",
            chain(&e)
        )
    })
}
