//! The services a run gets (see [`crate::sandbox::services`]): the
//! units' runtimes ([`super::runtimes`]), and what its plan can use of
//! the turn. The command screen is bound to the actor only for a plan
//! that may run a command (`code:exec`, a command executor), delegation
//! only for one allowed `delegate:call`; any other plan gets a screen that
//! refuses every command and no delegation, which its run never asks for
//! (the `exec` and `delegate` interfaces are not linked for it).

use std::sync::Arc;

use super::delegate::Nested;
use super::needs::Once;
use super::pipeline::{Kind, Records, Scope, Turn};
use super::Frozen;
use crate::policy::{decide, Decision, DenyCode, Request, RequestKind};
use crate::sandbox::services::{CommandScreen, NestedTurn};
use crate::sandbox::{Plan, RunServices};

impl Kind<'_> {
    /// The services of turn `t`'s run of `plan`, at this kind's depth,
    /// journaled into `records`' journal; delegation (and the [`Scope`] it
    /// keeps, made by `scope`) only when `plan` may call.
    pub(super) fn services(
        &self,
        t: &Turn<'_>,
        plan: &Plan,
        records: &Records,
        approved_once: &Once,
        scope: impl FnOnce() -> Scope,
    ) -> RunServices {
        let screen: Arc<dyn CommandScreen> =
            if plan.parts().exec.tools.is_empty() && !plan.runnable().is_command() {
                Arc::new(NoCommands)
            } else {
                Arc::new(ActorScreen {
                    frozen: t.frozen.clone(),
                    actor: t.request.actor.clone(),
                })
            };
        let nested: Option<Arc<dyn NestedTurn>> = if plan.parts().delegate.callees.is_empty() {
            None
        } else {
            Some(Arc::new(Nested(scope())))
        };
        RunServices {
            runtimes: self.runtimes().units.clone(),
            depth: self.depth(),
            journal: records.journal.clone(),
            audit: records.audit.clone(),
            screen,
            cancel: t.request.cancel.clone(),
            asker: t.request.asker.clone(),
            // Who is asked about each command line of a `code:exec`
            // allowed once: a top-level turn's approver (a nested turn
            // takes no approvals).
            commands: match self {
                Kind::Top(inner) => super::each_command::for_turn(
                    inner,
                    plan,
                    t.id,
                    t.request,
                    &approved_once.items,
                ),
                Kind::Nested(_) => None,
            },
            nested,
        }
    }
}

/// The screen of a plan that may run no command.
struct NoCommands;

impl CommandScreen for NoCommands {
    fn screen(&self, tool: &str, _command: &str) -> Result<(), (DenyCode, String)> {
        Err((
            DenyCode::ToolNotGranted,
            format!("`{tool}`: this turn was allowed no command"),
        ))
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
        match decide(
            &self.frozen.snapshot,
            &request,
            crate::state::grants::now_utc(),
        ) {
            Decision::Allow { .. } => Ok(()),
            Decision::Deny { code, reason } => Err((code, reason)),
            Decision::ApprovalRequired { reason, .. } => Err((DenyCode::ApprovalRequired, reason)),
        }
    }
}
