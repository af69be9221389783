//! A turn as its callers see it: what they ask ([`TurnRequest`]), how far
//! it got ([`Phase`]), how it ends ([`TurnOutcome`], [`TurnEnd`]), and a
//! turn that waits for a person ([`Begun::Parked`]).

use std::sync::{Arc, OnceLock};

use serde::Serialize;

use super::{ApprovalRequest, Approver, Pending, Step};
use crate::policy::{Capability, DenyCode};
use crate::sandbox::services::{AskerRef, CancelHandle};
use crate::sandbox::{GuestResult, IsolationReport, Limits, RunIo, RunReport};

/// One turn: actor A asks to run executor E on an input.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    /// The executor to run, by name.
    pub executor: String,
    /// The actor asking, by name.
    pub actor: String,
    /// The input: `run`'s argument, or a command's stdin.
    pub input: String,
    /// The sandbox's limits for this turn (default [`Limits::default`]).
    pub limits: Limits,
    /// Cancels the turn from another thread: it ends like a deadline,
    /// with `TURN_CANCELLED`.
    pub cancel: CancelHandle,
    /// A command's arguments (recorded in the audit) and standard streams;
    /// by default no arguments, stdin the input, output kept.
    pub io: RunIo,
    /// Who answers the guest's `human:ask` questions (default `None`: the
    /// person at the controlling terminal, if any).
    pub asker: Option<AskerRef>,
    /// Told each [`Phase`] a top-level turn reaches (default `None`); a
    /// delegated call's turn reports none of its own.
    pub progress: Option<ProgressRef>,
    /// Who is asked, while the guest runs, about each command line of a
    /// `code:exec` a person allowed once (default `None`: nobody then; the
    /// command line waits in the pending-approval queue when the host
    /// keeps one, and is refused with `APPROVAL_REQUIRED`). The run's
    /// deadline keeps running while the person is asked.
    pub approver: Option<ApproverRef>,
}

/// A shared [`Approver`], as a request carries it.
#[derive(Clone)]
pub struct ApproverRef(pub Arc<dyn Approver>);

impl std::fmt::Debug for ApproverRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApproverRef")
    }
}

/// A phase of a turn, as [`TurnRequest::progress`] is told it: in this
/// order, each at most once per [`super::Host::begin`] or [`super::Host::resume`] (a
/// resumed turn is decided again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// The policy decided: the turn may run, or needs an approval.
    Decided,
    /// It waits for a person's answer (told by whoever asks: the host
    /// parks the turn and returns).
    WaitingForApproval,
    /// Its guest is about to run.
    Running,
    /// It ended (told by whoever delivers the outcome).
    Done,
}

impl Phase {
    /// Its name in messages: `decided`, `waiting for approval`, `running`,
    /// `done`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Decided => "decided",
            Phase::WaitingForApproval => "waiting for approval",
            Phase::Running => "running",
            Phase::Done => "done",
        }
    }

    /// Its place in the order, from 1 (`decided`) to [`Phase::COUNT`].
    pub fn ordinal(self) -> u32 {
        self as u32 + 1
    }

    /// How many phases there are.
    pub const COUNT: u32 = 4;
}

/// Who is told a turn's phases: called on the turn's own thread, so it
/// must return quickly (queue the phase, do not send it).
#[derive(Clone)]
pub struct ProgressRef(pub Arc<dyn Fn(Phase) + Send + Sync>);

impl std::fmt::Debug for ProgressRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressRef")
    }
}

impl TurnRequest {
    /// Tells the request's progress, if anyone listens, that the turn
    /// reached `phase`.
    pub(crate) fn reached(&self, phase: Phase) {
        if let Some(p) = &self.progress {
            (p.0)(phase);
        }
    }

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
            io: RunIo::default(),
            asker: None,
            progress: None,
            approver: None,
        }
    }
}

/// An approval answer, as the outcome and the audit record it.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    /// The capability answered.
    pub capability: Capability,
    /// Its canonical target, if it takes one.
    pub target: Option<String>,
    /// The choice as the audit records it (`allow_once`, `allow_and_remember`, `deny`,
    /// `queue`).
    pub choice: &'static str,
    /// The grant "allow and remember" recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<i64>,
    /// The pending approval (`gatehouse approvals allow`) the answer was
    /// given in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queued: Option<String>,
}

/// How a turn ended.
#[derive(Debug, Serialize)]
#[serde(tag = "end", rename_all = "snake_case")]
pub enum TurnEnd {
    /// Ended before any guest code ran; one line in `denials.jsonl`.
    Refused {
        /// Which rule refused it.
        code: DenyCode,
        /// The refusal in words.
        reason: String,
    },
    /// The guest ran and returned (ok or its own error).
    Ran {
        /// The guest's result, output and counters.
        run: Box<RunReport>,
    },
    /// The guest started but was stopped: a limit, a trap, a cancel.
    Stopped {
        /// The limit code (or `TURN_CANCELLED`) that stopped it; `None` for anything else,
        /// such as a trap.
        code: Option<DenyCode>,
        /// What stopped it, in words.
        message: String,
        /// What the guest wrote until it was stopped.
        #[serde(skip_serializing_if = "Option::is_none")]
        run: Option<Box<RunReport>>,
    },
    /// The request cannot be run as given (an unknown executor, an
    /// unreadable component); nothing was recorded.
    Invalid {
        /// What is wrong with the request.
        message: String,
    },
    /// The host failed (engine, history).
    Failed {
        /// What failed.
        message: String,
    },
}

/// Everything a caller learns of a turn.
#[derive(Debug, Serialize)]
pub struct TurnOutcome {
    /// The turn's id (its history directory's name).
    pub turn: String,
    /// The executor that was asked for.
    pub executor: String,
    /// The actor that asked.
    pub actor: String,
    /// The autonomy level the turn was decided at.
    pub level: &'static str,
    /// Every question asked of the policy, in order, with its answer.
    pub decisions: Vec<Step>,
    /// The approval answers the turn was given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<Answer>,
    /// What still needs an approval (`APPROVAL_REQUIRED`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<Pending>,
    /// The pending-approval queue entry the turn left (`APPROVAL_REQUIRED`
    /// with the queue on) or was answered by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_id: Option<String>,
    /// The limits the turn ran under.
    pub limits: Limits,
    /// The isolation report; absent when the turn ended before the probe
    /// (a policy denial never probes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Arc<IsolationReport>>,
    /// How the turn ended.
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
/// or through the pending queue): [`super::Host::resume`] finishes it.
#[derive(Debug)]
pub struct Parked {
    pub(super) request: TurnRequest,
    pub(super) turn: String,
    /// The question to put to the person.
    pub approval: ApprovalRequest,
}

impl Parked {
    /// Who is told the phases of the rest of the turn (when it is resumed
    /// by another call than the one that began it).
    pub fn report_progress_to(&mut self, progress: Option<ProgressRef>) {
        self.request.progress = progress;
    }
}

/// What [`super::Host::begin`] got to.
#[derive(Debug)]
pub enum Begun {
    /// The turn ended (denied, or run because nothing needed approval).
    Done(Box<TurnOutcome>),
    /// It waits for answers to `approval`.
    Parked(Box<Parked>),
}

/// A new turn id: UTC time and a per-process counter with the pid.
pub fn new_turn_id(now: crate::policy::UtcTime) -> String {
    use std::fmt::Write as _;
    use std::sync::atomic::{AtomicU32, Ordering};
    static SEQ: AtomicU32 = AtomicU32::new(0);
    // One `getpid` per process, not per turn.
    static PID: OnceLock<u32> = OnceLock::new();
    let mut id = String::with_capacity(40);
    match now.to_ascii() {
        Some(ascii) => id.extend(
            ascii
                .iter()
                .filter(|b| b.is_ascii_digit())
                .map(|&b| char::from(b)),
        ),
        None => id.extend(now.to_string().chars().filter(char::is_ascii_digit)),
    }
    let pid = *PID.get_or_init(std::process::id);
    let _ = write!(id, "-{pid}-{}", SEQ.fetch_add(1, Ordering::Relaxed));
    id
}
