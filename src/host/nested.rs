//! The narrow services the host gives a run (see
//! [`crate::sandbox::services`]): the `tool` layers bound to the actor, and
//! delegation as a nested turn through the same gate, with its decisions in
//! the caller's audit.

use std::path::PathBuf;
use std::sync::Arc;

use super::audit::TurnAudit;
use super::gate::{gate, Gate, TurnInput};
use super::{Frozen, TurnRequest};
use crate::config::chain;
use crate::manifest::Manifest;
use crate::policy::{decide, Capability, Decision, DenyCode, Request, RequestKind};
use crate::sandbox::services::{CommandScreen, NestedError, NestedTurn};
use crate::sandbox::{execute, GuestResult, OnDegraded, RunServices, Sandbox};
use crate::undo::TurnJournal;

/// What the services of one turn (and its nested turns) are bound to.
#[derive(Clone)]
pub(super) struct Scope {
    pub manifests: Arc<Vec<Manifest>>,
    pub on_degraded: OnDegraded,
    pub memory_db: PathBuf,
    pub frozen: Arc<Frozen>,
    pub sandbox: Arc<Sandbox>,
    pub audit: Arc<TurnAudit>,
    pub request: TurnRequest,
    /// The id of the turn these services run (`<caller>.<callee>` when
    /// nested).
    pub turn: String,
}

/// The services of a run of `scope` at `depth`, journaled into `journal`.
pub(super) fn services(scope: Scope, depth: u32, journal: Option<TurnJournal>) -> RunServices {
    RunServices {
        memory_db: scope.memory_db.clone(),
        depth,
        journal,
        audit: scope.audit.clone(),
        screen: Arc::new(ActorScreen {
            frozen: scope.frozen.clone(),
            actor: scope.request.actor.clone(),
        }),
        cancel: scope.request.cancel.clone(),
        asker: scope.request.asker.clone(),
        nested: Some(Arc::new(Nested(scope))),
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

/// Delegation: a callee runs as a turn of the same actor, through the same
/// gate and snapshot, under the caller's limits and cancel switch, its
/// decisions in the caller's audit. An approval it would need cannot be
/// asked from inside a call: it comes back as `APPROVAL_REQUIRED`.
struct Nested(Scope);

impl NestedTurn for Nested {
    fn call(
        &self,
        executor: &str,
        input: &str,
        depth: u32,
        left: std::time::Duration,
        journal: Option<TurnJournal>,
    ) -> Result<String, NestedError> {
        let scope = &self.0;
        // The callee gets what is left of its caller's deadline, no more.
        let mut limits = scope.request.limits;
        limits.deadline_ms = limits
            .deadline_ms
            .min(u64::try_from(left.as_millis()).unwrap_or(u64::MAX))
            .max(1);
        let turn = format!("{}.{executor}", scope.turn);
        let Some(manifest) = scope.manifests.iter().find(|m| m.name == executor) else {
            return Err(NestedError::Denied {
                code: DenyCode::UnknownRequest,
                reason: format!("executor `{executor}` is not known to this turn"),
            });
        };
        let g = gate(TurnInput {
            snapshot: &scope.frozen.snapshot,
            actor: &scope.request.actor,
            manifest,
            turn_id: turn.clone(),
            limits,
            approved_once: &[],
        });
        let steps = match &g {
            Gate::Denied { steps, .. }
            | Gate::ApprovalRequired { steps, .. }
            | Gate::Ready { steps, .. } => steps,
        };
        scope.audit.record_gate(Some(&turn), steps, &[]);
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
        if let Some(reason) = scope.sandbox.isolation().refusal(scope.on_degraded, &needs) {
            return Err(NestedError::Denied {
                code: DenyCode::IsolationDegraded,
                reason,
            });
        }
        let mut callee = Scope {
            turn,
            ..scope.clone()
        };
        callee.request.limits = limits;
        let services = services(callee, depth, journal);
        match execute(
            &scope.sandbox,
            &plan,
            input,
            &crate::sandbox::RunIo::default(),
            &services,
        ) {
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
