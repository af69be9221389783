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

use std::sync::Arc;

use wasmtime::component::{HasData, Linker};

use super::bindings::gatehouse::executor::delegate;
use super::bindings::gatehouse::executor::types::{Denial, Error};
use super::services::{NestedError, NestedTurn};
use crate::policy::DenyCode;
use crate::undo::TurnJournal;

/// Calls nest at most this deep.
pub const MAX_DEPTH: u32 = 4;

/// What a run needs to start nested turns.
pub struct DelegateBinding {
    pub nested: Arc<dyn NestedTurn>,
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

impl DelegateBinding {
    fn call(
        &self,
        executor: String,
        input: String,
        left: std::time::Duration,
    ) -> Result<String, Error> {
        if !self.allowed.contains(&executor) {
            return Err(denial(
                DenyCode::TargetMismatch,
                format!(
                    "`delegate:call` is granted for {}, not `{executor}`",
                    self.allowed
                        .iter()
                        .map(|a| format!("`{a}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        if self.depth + 1 > MAX_DEPTH {
            return Err(denial(
                DenyCode::DelegationNotAllowed,
                format!("calls nest at most {MAX_DEPTH} deep"),
            ));
        }
        match self.nested.call(
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
    pub binding: Option<&'a DelegateBinding>,
    pub deadline: std::time::Instant,
}

impl delegate::Host for DelegateView<'_> {
    fn call(&mut self, executor: String, input: String) -> Result<String, Error> {
        let Some(d) = self.binding else {
            return Err(denial(
                DenyCode::TargetMismatch,
                "no delegation was granted".into(),
            ));
        };
        let left = self
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(denial(
                DenyCode::LimitDeadline,
                "the run's deadline has passed; no call starts".into(),
            ));
        }
        d.call(executor, input, left)
    }
}

struct HasDelegate;

impl HasData for HasDelegate {
    type Data<'a> = DelegateView<'a>;
}

/// Links `gatehouse:executor/delegate`.
///
/// # Security
/// Lets the guest start nested turns of the executors the binding lists,
/// each through the host's gate; link only with a binding built from the
/// plan.
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    getter: fn(&mut T) -> DelegateView<'_>,
) -> wasmtime::Result<()> {
    delegate::add_to_linker::<T, HasDelegate>(linker, getter)
}
