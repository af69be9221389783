//! `delegate:call` → `gatehouse:executor/delegate`: run another executor as
//! its own turn, through the same gate, with its own grants.
//!
//! The callee must be one the plan lists (`delegate:call` on its name); it
//! then passes `policy::decide` like any turn (skill, capabilities,
//! workspace) under the same actor and snapshot. An approval it would need
//! cannot be asked from inside a call, so it comes back as a denial value.

use std::sync::Arc;

use super::bindings::gatehouse::executor::delegate;
use super::bindings::gatehouse::executor::types::{Denial, Error};
use super::engine::Sandbox;
use super::run::{execute, GuestResult, TurnContext};
use super::state::HostState;
use crate::policy::DenyCode;
use crate::turn::{gate, Gate, TurnInput};

/// Calls nest at most this deep.
pub const MAX_DEPTH: u32 = 4;

/// What a run needs to start nested turns.
pub struct DelegateBinding {
    pub sandbox: Arc<Sandbox>,
    pub context: TurnContext,
    pub allowed: Vec<String>,
    pub limits: super::limits::Limits,
}

fn denial(code: DenyCode, reason: String) -> Error {
    Error::Denied(Denial {
        code: code.as_str().into(),
        reason,
    })
}

impl delegate::Host for HostState {
    fn call(&mut self, executor: String, input: String) -> Result<String, Error> {
        let Some(d) = self.delegate.as_ref() else {
            return Err(denial(
                DenyCode::TargetMismatch,
                "no delegation was granted".into(),
            ));
        };
        if !d.allowed.contains(&executor) {
            return Err(denial(
                DenyCode::TargetMismatch,
                format!(
                    "`delegate:call` is granted for {}, not `{executor}`",
                    d.allowed
                        .iter()
                        .map(|a| format!("`{a}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        if d.context.depth + 1 > MAX_DEPTH {
            return Err(denial(
                DenyCode::DelegationNotAllowed,
                format!("calls nest at most {MAX_DEPTH} deep"),
            ));
        }
        let Some(manifest) = d.context.manifests.iter().find(|m| m.name == executor) else {
            return Err(denial(
                DenyCode::UnknownRequest,
                format!("executor `{executor}` is not known to this turn"),
            ));
        };
        let turn_id = format!("{}.{}", d.context.turn_id, executor);
        let g = gate(TurnInput {
            snapshot: &d.context.snapshot,
            actor: &d.context.actor,
            manifest,
            turn_id: turn_id.clone(),
            limits: d.limits,
            approved_once: &[],
            isolation: d.sandbox.isolation(),
            on_degraded: d.context.on_degraded,
        });
        let plan = match g {
            Gate::Ready { plan, .. } => plan,
            Gate::Denied { code, reason, .. } => return Err(denial(code, reason)),
            Gate::ApprovalRequired { pending, .. } => {
                let what: Vec<String> = pending
                    .iter()
                    .map(|p| format!("`{}`", p.capability))
                    .collect();
                return Err(denial(
                    DenyCode::ApprovalRequired,
                    format!(
                        "`{executor}` needs an approval for {} that cannot be asked inside a call",
                        what.join(", ")
                    ),
                ));
            }
        };
        let context = TurnContext {
            turn_id,
            depth: d.context.depth + 1,
            ..d.context.clone()
        };
        let started = std::time::Instant::now();
        let result = execute(&d.sandbox, &plan, &input, &context);
        self.delegated += started.elapsed();
        match result {
            Ok(report) => match report.result {
                GuestResult::Ok { output } => Ok(output),
                GuestResult::Err { error } => Err(Error::Failed(format!(
                    "`{executor}` returned an error: {error}"
                ))),
            },
            Err(e) => match e.code() {
                Some(code) => Err(denial(code, format!("`{executor}`: {e}"))),
                None => Err(Error::Failed(format!("`{executor}`: {e}"))),
            },
        }
    }
}

pub fn add_to_linker(linker: &mut wasmtime::component::Linker<HostState>) -> wasmtime::Result<()> {
    delegate::add_to_linker::<HostState, wasmtime::component::HasSelf<HostState>>(linker, |s| s)
}
