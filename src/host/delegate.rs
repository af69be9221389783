//! Delegation: a guest's `delegate:call` runs as a nested turn, through
//! the delegation decision and then the same pipeline as every turn
//! ([`Kind::Nested`]), with its decisions in the caller's audit.

use super::needs::Step;
use super::pipeline::{Call, Ended, Kind, Scope, Turn};
use super::{TurnEnd, TurnRequest};
use crate::policy::{decide, Decision, DenyCode, Request, RequestKind};
use crate::sandbox::services::{NestedError, NestedTurn};
use crate::sandbox::GuestResult;
use crate::undo::TurnJournal;

/// Delegation: a callee runs as a nested turn, through the same pipeline
/// ([`Kind::pipeline`]) and snapshot, under the caller's limits (its deadline what is left of the
/// caller's) and cancel switch, its decisions in the caller's audit. A
/// callee named `EXECUTOR` runs as the caller's own actor; one named
/// `ACTOR/EXECUTOR` is a delegation to ACTOR, which the policy's
/// `delegation` kind decides first (`DELEGATION_NOT_ALLOWED` when ACTOR is
/// not in the caller's `delegates_to`, `UNKNOWN_TARGET` when it is not
/// defined), and the callee is then gated and run as ACTOR: its skills,
/// workspaces, grants (its identity) and tools. The level is the
/// snapshot's one level (actors carry none). An approval it would need
/// cannot be asked from inside a call: it comes back as
/// `APPROVAL_REQUIRED`.
pub(super) struct Nested(pub(super) Scope);

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
        let now = crate::state::grants::now_utc();
        let (actor, name) = delegated(scope, executor, &turn, now)?;
        let Some(manifest) = scope.runtimes.manifests.iter().find(|m| m.name == name) else {
            return Err(NestedError::Denied {
                code: DenyCode::UnknownRequest,
                reason: format!("executor `{name}` is not known to this turn"),
            });
        };
        // The callee's request: the call's input and no streams, under the
        // caller's limits (its deadline what is left of the caller's),
        // cancel switch and asker, as the actor it runs as (its command
        // screen and its own delegations are bound to that actor).
        let request = TurnRequest {
            executor: name.to_string(),
            actor,
            input: input.to_string(),
            limits,
            cancel: scope.request.cancel.clone(),
            io: crate::sandbox::RunIo::default(),
            asker: scope.request.asker.clone(),
            progress: None,
            // A delegated turn takes no approvals: nobody is asked.
            approver: None,
        };
        let mut t = Turn::new(&request, &turn, scope.frozen.clone());
        let kind = Kind::Nested(Call {
            scope,
            callee: executor,
            depth,
            journal,
            left,
        });
        answer(
            executor,
            kind.pipeline(&mut t, manifest, &super::needs::Once::default(), now),
        )
    }
}

/// The actor a call of `executor` runs as, and the executor's name:
/// `ACTOR/EXECUTOR` delegates to ACTOR, as the policy's `delegation` kind
/// decides (its step in the caller's audit, as turn `turn`); a bare
/// `EXECUTOR` runs as the caller's own actor.
fn delegated<'e>(
    scope: &Scope,
    executor: &'e str,
    turn: &str,
    now: crate::policy::UtcTime,
) -> Result<(String, &'e str), NestedError> {
    Ok(match executor.split_once('/') {
        Some((target, name)) => {
            let request = Request::new(
                &scope.request.actor,
                RequestKind::Delegation {
                    target: target.to_string(),
                },
            );
            let decision = decide(&scope.frozen.snapshot, &request, now);
            let denied = match &decision {
                Decision::Allow { .. } => None,
                Decision::Deny { code, reason } => Some((*code, reason.clone())),
                Decision::ApprovalRequired { reason, .. } => {
                    Some((DenyCode::ApprovalRequired, reason.clone()))
                }
            };
            scope.audit.record_nested_gate(
                turn,
                &scope.frozen.tail(&scope.request.actor),
                &[Step {
                    request,
                    decision,
                    approval: None,
                }],
            );
            if let Some((code, reason)) = denied {
                return Err(NestedError::Denied {
                    code,
                    reason: format!("`{executor}`: {reason}"),
                });
            }
            (target.to_string(), name)
        }
        None => (scope.request.actor.clone(), executor),
    })
}

/// What the caller's guest gets of a nested turn that ended `ended`: the
/// callee's output, or why there is none, naming the callee as `callee`.
fn answer(callee: &str, ended: Ended) -> Result<String, NestedError> {
    let failed = |message: String| Err(NestedError::Failed(format!("`{callee}`: {message}")));
    match ended {
        Ended::Approval(pending) => {
            let what: Vec<String> = pending
                .iter()
                .map(|p| format!("`{}`", p.capability))
                .collect();
            Err(NestedError::Denied {
                code: DenyCode::ApprovalRequired,
                reason: format!(
                    "`{callee}` needs an approval for {} that cannot be asked inside a call",
                    what.join(", ")
                ),
            })
        }
        Ended::Refused { code, reason } => Err(NestedError::Denied { code, reason }),
        Ended::RunRefused { code, reason, .. } => Err(NestedError::Denied {
            code,
            reason: format!("`{callee}`: {code}: {reason}"),
        }),
        Ended::Failed(message) => failed(message),
        Ended::Ran(TurnEnd::Ran { run }) => match run.result {
            GuestResult::Ok { output } => Ok(output),
            GuestResult::Err { error } => Err(NestedError::Failed(format!(
                "`{callee}` returned an error: {error}"
            ))),
        },
        Ended::Ran(
            TurnEnd::Stopped {
                code: Some(code),
                message: reason,
                ..
            }
            | TurnEnd::Refused { code, reason },
        ) => Err(NestedError::Denied {
            code,
            reason: format!("`{callee}`: {reason}"),
        }),
        Ended::Ran(
            TurnEnd::Stopped { message, .. }
            | TurnEnd::Invalid { message }
            | TurnEnd::Failed { message },
        ) => failed(message),
    }
}
