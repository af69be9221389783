//! Each command line of a `code:exec` a person allowed once is asked about
//! before it runs ([`CommandApproval`]): "once" covers the command line
//! shown, not every command the guest runs in the turn.
//!
//! A component's command lines are known only when its guest runs them,
//! so the approval the gate asked for covers the capability, and each
//! command line is then asked about on its own: by the request's
//! approver (the terminal's prompt shows the argv), and when no one
//! answers, by the pending-approval queue. A queued entry is bound to the
//! turn's key and set of approvals like any other, and carries every
//! command line approved so far plus the new one: the retry that takes
//! the answer may run exactly those.

use std::sync::Arc;

use super::needs::Pending;
use super::{ApprovalRequest, ApproverRef, Choice, Shown, TurnRequest};
use crate::policy::Capability;
use crate::sandbox::services::{CommandApproval, CommandApproved};
use crate::state::approvals::{self as queue, ApprovalBackend, TurnKey};
use crate::state::grants::now_utc;
use crate::util::chain;

/// The [`CommandApproval`] of one top-level turn.
pub(super) struct EachCommand {
    /// The pending-approval queue, when the host keeps one.
    pub queue: Option<std::sync::Arc<dyn ApprovalBackend>>,
    /// What a queued answer is matched on.
    pub key: TurnKey,
    pub turn: String,
    pub request: TurnRequest,
    /// The turn's workspace, where a command's file arguments are looked
    /// for.
    pub workspace: String,
    /// What a person allowed once for the turn: an entry queued now asks
    /// for the same set, so that the retry's gate matches it.
    pub once: Vec<Pending>,
    pub approver: Option<ApproverRef>,
}

impl CommandApproval for EachCommand {
    fn approve(&self, tool: &str, argv: &[String], approved: &[Vec<String>]) -> CommandApproved {
        if let Some(ApproverRef(approver)) = &self.approver {
            let request = ApprovalRequest {
                turn: self.turn.clone(),
                executor: self.request.executor.clone(),
                actor: self.request.actor.clone(),
                pending: vec![Pending {
                    capability: Capability::CodeExec,
                    target: Some(tool.to_string()),
                    declared_target: None,
                    mount: None,
                    critical: true,
                    // One command line, for this turn: a grant is given
                    // on the capability, not here.
                    rememberable: false,
                    reason: format!(
                        "the guest runs `{tool}`: `code:exec` is approved one command line at a time"
                    ),
                }],
                shown: Shown {
                    executor_sha256: self.key.executor_sha256.clone(),
                    input: queue::input_preview(&self.request.input),
                    input_bytes: self.request.input.len(),
                    argv: Vec::new(),
                    files: super::turn::file_args(argv, &self.workspace),
                    commands: vec![argv.to_vec()],
                },
            };
            match approver.ask(&request).first() {
                Some(Choice::Once) => return CommandApproved::Once,
                // "Remember" cannot be given for one command line: taken
                // as a refusal, as for an always-class capability.
                Some(Choice::Deny | Choice::Remember { .. }) => return CommandApproved::Refused,
                Some(Choice::Queue) | None => {}
            }
        }
        let Some(queue) = &self.queue else {
            return CommandApproved::NoOne;
        };
        // An answer a person already gave to this line, queued by an
        // earlier run of the same turn whose gate asked nothing (its gate
        // takes the answer otherwise).
        match queue.take_line(
            &self.turn,
            &self.key,
            &super::needs::queued(&self.once),
            argv,
            now_utc(),
        ) {
            Ok(Some(queue::Verdict::Allowed { .. })) => return CommandApproved::Once,
            Ok(Some(queue::Verdict::Denied(_))) => return CommandApproved::Refused,
            Ok(None) => {}
            Err(e) => tracing::warn!(
                "turn `{}`: cannot read the approval queue: {}",
                self.turn,
                chain(&e)
            ),
        }
        let mut key = self.key.clone();
        key.commands = approved.to_vec();
        key.commands.push(argv.to_vec());
        match queue.enqueue(
            &self.turn,
            &key,
            &super::needs::queued(&self.once),
            &self.request.input,
            now_utc(),
        ) {
            Ok(entry) => CommandApproved::Queued(entry.id),
            Err(e) => {
                tracing::warn!(
                    "turn `{}`: cannot queue the approval of a command line: {}",
                    self.turn,
                    chain(&e)
                );
                CommandApproved::NoOne
            }
        }
    }
}

/// The command approval of a top-level turn whose plan asks about each
/// command line; `None` when it asks about none.
pub(super) fn for_turn(
    inner: &super::Inner,
    plan: &crate::sandbox::Plan,
    turn: &str,
    request: &TurnRequest,
    once: &[Pending],
) -> Option<Arc<dyn CommandApproval>> {
    if plan.parts().exec.ask_each.is_empty() {
        return None;
    }
    Some(Arc::new(EachCommand {
        queue: inner
            .settings
            .approval_queue
            .then(|| inner.stores.approvals.clone()),
        key: inner.turn_key(request),
        turn: turn.to_string(),
        request: request.clone(),
        workspace: inner.settings.workspace.clone(),
        once: once.to_vec(),
        approver: request.approver.clone(),
    }))
}
