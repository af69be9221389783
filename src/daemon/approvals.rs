//! The daemon's approval queue, answered over its socket by a person's
//! account: the peer uid alone decides.

use super::wire::{ApprovalOp, Reply};
use super::Daemon;
use crate::host::QueueAnswer;
use crate::policy::DenyCode;
use crate::state::approvals::answerable;
use crate::state::grants::{now_utc, remember_for};

impl Daemon {
    /// The accounts that may answer approvals: `[approvals] people`, else
    /// the daemon's own.
    pub(super) fn people(&self) -> Vec<u32> {
        if self.config.approvals.people.is_empty() {
            vec![self.own_uid]
        } else {
            self.config.approvals.people.clone()
        }
    }

    /// One approval operation of the account `uid`.
    ///
    /// # Security
    /// The peer uid alone decides: a person's account (`people`) answers
    /// without a terminal; the actor's own accounts never do.
    pub fn approval(&self, uid: u32, op: &ApprovalOp) -> Reply {
        let people = self.people();
        let person = people.contains(&uid);
        let not_a_person = || {
            Reply::refused(
                Some(DenyCode::AnswerNotAPerson.as_str()),
                format!("uid `{uid}` is not one of `[approvals] people`: only a person's account reads or answers the queue"),
                false,
            )
        };
        if !person && self.config.actor_of_uid(uid).is_none() {
            return not_a_person();
        }
        let failed = |e: crate::host::QueueError| {
            let invalid = e.is_invalid_input();
            Reply::refused(None, crate::util::chain(&e), invalid)
        };
        let now = now_utc();
        match op {
            ApprovalOp::List { all } => {
                if !person {
                    return not_a_person();
                }
                match self.queue.list(*all, now) {
                    Ok(entries) => Reply::done(serde_json::to_value(entries).unwrap_or_default()),
                    Err(e) => failed(e),
                }
            }
            ApprovalOp::Get { id } | ApprovalOp::Allow { id, .. } | ApprovalOp::Deny { id } => {
                let entry = match self.queue.get(id) {
                    Ok(Some(e)) => e,
                    Ok(None) => return failed(crate::host::QueueError::NoSuchEntry(id.clone())),
                    Err(e) => return failed(e),
                };
                let its_actor = self
                    .config
                    .actors
                    .get(&entry.actor)
                    .is_some_and(|a| a.uids.contains(&uid));
                if its_actor && op.answers().is_some() {
                    return Reply::refused(
                        Some(DenyCode::AnswerByItsActor.as_str()),
                        format!(
                            "uid `{uid}` is an account of actor `{}`, whose turn waits for `{id}`: an agent cannot answer its own request",
                            entry.actor
                        ),
                        false,
                    );
                }
                if !person {
                    return not_a_person();
                }
                let answer = match op {
                    ApprovalOp::Get { .. } => {
                        return Reply::done(serde_json::to_value(&entry).unwrap_or_default())
                    }
                    ApprovalOp::Deny { .. } => QueueAnswer::Deny,
                    ApprovalOp::Allow {
                        remember: false, ..
                    } => QueueAnswer::Once,
                    ApprovalOp::Allow {
                        remember: true,
                        expires_in,
                        ..
                    } => {
                        let secs = match remember_for(expires_in.as_deref().unwrap_or_default()) {
                            Ok(s) => s.map(|s| u64::try_from(s).unwrap_or(0)),
                            Err(e) => return Reply::refused(None, e.to_string(), true),
                        };
                        QueueAnswer::Remember {
                            expires_in_secs: Some(self.config.approvals.remembered_for(secs)),
                        }
                    }
                    ApprovalOp::List { .. } => return not_a_person(),
                };
                if let Err(e) = answerable(&entry, id, now) {
                    return failed(e);
                }
                let by = format!("uid:{uid}");
                match self.queue.answer(id, answer, Some(&by), now) {
                    Ok(e) => {
                        tracing::info!("approval `{id}` answered by uid {uid}: {}", e.status);
                        Reply::done(serde_json::to_value(&e).unwrap_or_default())
                    }
                    Err(e) => failed(e),
                }
            }
        }
    }
}
