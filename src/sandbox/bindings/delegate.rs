//! `delegate:call` → `gatehouse:executor/delegate`: run another executor as
//! its own turn, through the same gate, with its own grants.
//!
//! The callee must be one the plan lists (`delegate:call` on its name,
//! `EXECUTOR` or `ACTOR/EXECUTOR`, compared as written); the host's
//! [`NestedTurn`] then runs it like any turn (skill, capabilities,
//! workspace): of the same actor for `EXECUTOR`, of ACTOR, if the policy
//! allows that delegation, for `ACTOR/EXECUTOR`. Its decisions go to the
//! caller's audit. An
//! approval it would need cannot be asked from inside a call, so it comes
//! back as a denial value. The sandbox itself never sees the gate.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;
use wasmtime::component::{HasData, Linker};

use super::wit::gatehouse::executor::delegate;
use super::wit::gatehouse::executor::types::{Denial, Error};
use super::{Open, OpenError, Prepare, PrepareError, Unit};
use crate::policy::Capability;
use crate::policy::DenyCode;
use crate::sandbox::services::{NestedError, NestedTurn};
use crate::sandbox::HostState;
use crate::undo::TurnJournal;

/// Calls nest at most this deep.
pub const MAX_DEPTH: u32 = 4;

/// The executors `delegate:call` was granted on (`EXECUTOR` or
/// `ACTOR/EXECUTOR`, as written); empty, and nothing linked, without it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DelegatePart {
    /// The executors it may call, as granted.
    pub callees: Vec<String>,
}

/// What a run needs to start nested turns.
pub struct DelegateState {
    /// The host's nested turns (`None` when the host gave none: every call
    /// is refused).
    pub nested: Option<Arc<dyn NestedTurn>>,
    /// Executor names the plan allows `delegate:call` on.
    pub allowed: Vec<String>,
    /// This run's depth (0 for a top-level turn).
    pub depth: u32,
    /// The caller's journal, shared with its callees.
    pub journal: Option<TurnJournal>,
}

fn denial(code: DenyCode, reason: String) -> Error {
    Error::Denied(Denial {
        code: code.as_str().into(),
        reason,
    })
}

impl DelegateState {
    fn call(
        &self,
        executor: String,
        input: String,
        left: std::time::Duration,
    ) -> Result<String, Error> {
        let Some(nested) = self.nested.as_ref().filter(|_| !self.allowed.is_empty()) else {
            return Err(denial(
                DenyCode::TargetMismatch,
                "no delegation was granted".into(),
            ));
        };
        if !self.allowed.contains(&executor) {
            return Err(denial(
                DenyCode::TargetMismatch,
                format!(
                    "`delegate:call` is granted for {}, not `{executor}`",
                    quoted(&self.allowed)
                ),
            ));
        }
        if self.depth + 1 > MAX_DEPTH {
            return Err(denial(
                DenyCode::DelegationNotAllowed,
                format!("calls nest at most {MAX_DEPTH} deep"),
            ));
        }
        match nested.call(
            &executor,
            &input,
            self.depth + 1,
            left,
            self.journal.clone(),
        ) {
            Ok(output) => Ok(output),
            Err(NestedError::Denied { code, reason }) => Err(denial(code, reason)),
            Err(NestedError::Failed(m)) => Err(Error::Failed(m)),
        }
    }
}

/// What the binding works on: the run's delegation, when granted, and the
/// run's deadline (a callee's time is the caller's: it gets what is left).
pub struct DelegateView<'a> {
    /// The run's delegation state.
    pub state: &'a DelegateState,
    /// When the run's deadline passes; a callee gets what is left.
    pub deadline: std::time::Instant,
}

impl delegate::Host for DelegateView<'_> {
    fn call(&mut self, executor: String, input: String) -> Result<String, Error> {
        let left = self
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(denial(
                DenyCode::LimitDeadline,
                "the run's deadline has passed; no call starts".into(),
            ));
        }
        self.state.call(executor, input, left)
    }
}

struct HasDelegate;

impl HasData for HasDelegate {
    type Data<'a> = DelegateView<'a>;
}

/// The delegation unit.
pub struct Delegate;

impl Unit for Delegate {
    type Part = DelegatePart;
    type State = DelegateState;
    type Runtime = ();
    const FILLED_BY: &'static [Capability] = &[Capability::DelegateCall];

    fn open(_: &Open<'_>) -> Result<(), OpenError> {
        Ok(())
    }

    /// The callee (`EXECUTOR` or `ACTOR/EXECUTOR`) passes its own gate
    /// when it is called.
    fn allow(part: &mut DelegatePart, _: Capability, target: Option<&str>) {
        part.callees.extend(target.map(str::to_string));
    }

    /// The host's nested turns, bound to the part's callees, at the run's
    /// depth, journaled like the run.
    ///
    /// # Security
    /// Lets the guest start turns of the part's executors, each through
    /// the host's gate.
    fn prepare(
        part: &DelegatePart,
        _: &(),
        cx: &mut Prepare<'_>,
    ) -> Result<DelegateState, PrepareError> {
        Ok(DelegateState {
            nested: cx.services.nested.clone(),
            allowed: part.callees.clone(),
            depth: cx.services.depth,
            journal: cx.services.journal.clone(),
        })
    }

    fn describe(part: &DelegatePart, _: &DelegateState, out: &mut Vec<Cow<'static, str>>) {
        if !part.callees.is_empty() {
            out.push(Cow::Owned(format!("delegate to {}", quoted(&part.callees))));
        }
    }
}

/// `` `a`, `b` ``.
fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|a| format!("`{a}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Links `gatehouse:executor/delegate`.
///
/// # Security
/// Lets the guest start nested turns of the executors the state lists,
/// each through the host's gate; the table links it only with
/// `delegate:call` granted.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    delegate::add_to_linker::<HostState, HasDelegate>(linker, |s| DelegateView {
        state: &s.delegate,
        deadline: s.deadline,
    })
}
