//! The pending-approval queue: approvals asked where no one could answer
//! (`gatehouse run` without a terminal, an MCP client without elicitation,
//! an elicitation nobody answered), answered later by the person with
//! `gatehouse approvals allow | deny`.
//!
//! The entries live in the state's backend ([`crate::state::approvals`]):
//! `<state>/approvals.db`, or a fleet's PostgreSQL database.
//! [`ApprovalQueue`] is the callers' facade over either.
//!
//! An "allow" is consumed by the first turn that matches *all* of an
//! entry ([`ApprovalQueue::take`]: one `UPDATE` that only an unconsumed
//! answer matches, so two turns, of any node, cannot both consume it):
//! swapping the input, the executor's code, the configuration or the
//! grants after the approval makes it match nothing. A "deny" answers the
//! first matching turn with `APPROVAL_REFUSED`, the same way. "Allow and
//! remember" records grants instead (never for an `always`-class
//! capability) and is consumed by no turn.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::config::StatePaths;
use crate::policy::UtcTime;
pub use crate::state::approvals::sqlite::{SqliteApprovals, SCHEMA_VERSION};
pub use crate::state::approvals::{
    args_sha256, current_uid, input_preview, ApprovalBackend, FileArg, QueueAnswer, QueueEntry,
    QueueError, QueuedItem, TurnKey, Verdict, ENTRY_TTL_SECS, INPUT_SHOWN, MAX_PENDING_PER_ACTOR,
};

use super::gate::Pending;

impl From<&Pending> for QueuedItem {
    fn from(p: &Pending) -> QueuedItem {
        QueuedItem {
            capability: p.capability,
            target: p.target.clone(),
            critical: p.critical,
            rememberable: p.rememberable,
            reason: p.reason.clone(),
        }
    }
}

/// What `pending` needs, as the queue keeps it.
fn items(pending: &[Pending]) -> Vec<QueuedItem> {
    pending.iter().map(QueuedItem::from).collect()
}

impl QueueEntry {
    /// What the entry shows of the turn it allows, as the approval that
    /// queued it showed it.
    pub fn shown(&self) -> super::Shown {
        super::Shown {
            executor_sha256: self.executor_sha256.clone(),
            input: self.input_preview.clone(),
            input_bytes: self.input_bytes,
            argv: self.argv.clone(),
            files: self.files.clone(),
            commands: self.commands.clone(),
        }
    }
}

/// The queue of one state: the callers' facade over its backend, picked
/// at first use from [`StatePaths::database_url`]. Reading never creates
/// the SQLite database.
pub struct ApprovalQueue {
    state: StatePaths,
    backend: OnceLock<Arc<dyn ApprovalBackend>>,
}

impl ApprovalQueue {
    /// The queue under `state` (nothing is opened yet).
    pub fn new(state: &StatePaths) -> ApprovalQueue {
        ApprovalQueue {
            state: state.clone(),
            backend: OnceLock::new(),
        }
    }

    /// The SQLite database file (unused with a fleet's database).
    pub fn path(&self) -> &Path {
        &self.state.approvals_db
    }

    fn backend(&self) -> Result<&dyn ApprovalBackend, QueueError> {
        if let Some(b) = self.backend.get() {
            return Ok(&**b);
        }
        let made = crate::state::approval_backend(&self.state)?;
        Ok(&**self.backend.get_or_init(|| made))
    }

    /// Creates the SQLite database, or brings it to [`SCHEMA_VERSION`];
    /// its version then. Refuses a later version. (A fleet's `pending`
    /// table is made by [`crate::state::pg::Pg::migrate`].)
    pub fn migrate(&self) -> Result<i64, QueueError> {
        SqliteApprovals::new(&self.state).migrate()
    }

    /// Queues the approval a turn could not get, at `now`; returns the
    /// entry. Expired entries are removed on the way.
    pub fn enqueue(
        &self,
        turn: &str,
        key: &TurnKey,
        pending: &[Pending],
        input: &str,
        now: UtcTime,
    ) -> Result<QueueEntry, QueueError> {
        self.backend()?
            .enqueue(turn, key, &items(pending), input, now)
    }

    /// The answer waiting for a turn of `key` that needs `pending`, taken
    /// at `now` by turn `turn`: the first unexpired entry, answered allow
    /// (once) or deny, matching all of the key and exactly the set of
    /// (capability, canonical target) pairs. Taking it consumes it, for
    /// every node of a fleet: exactly one turn takes an answer.
    ///
    /// # Security
    /// An `Allowed` verdict stands for the person's approval of exactly
    /// this turn: the caller allows the pending items once, for this turn.
    pub fn take(
        &self,
        turn: &str,
        key: &TurnKey,
        pending: &[Pending],
        now: UtcTime,
    ) -> Result<Option<Verdict>, QueueError> {
        self.backend()?.take(turn, key, &items(pending), now)
    }

    /// Per actor, how many unanswered entries were dropped past
    /// [`MAX_PENDING_PER_ACTOR`] so far.
    pub fn dropped(&self) -> Result<Vec<(String, u64)>, QueueError> {
        self.backend()?.dropped()
    }

    /// The entries not yet expired at `now` (with `all`, consumed ones
    /// too), newest first.
    pub fn list(&self, all: bool, now: UtcTime) -> Result<Vec<QueueEntry>, QueueError> {
        self.backend()?.list(all, now)
    }

    /// Entry `id`, expired or not.
    pub fn get(&self, id: &str) -> Result<Option<QueueEntry>, QueueError> {
        self.backend()?.get(id)
    }

    /// Answers entry `id` at `now` on behalf of `by`.
    ///
    /// Refused: an unknown, expired or already answered entry; "remember"
    /// for an entry with an `always`-class item (nothing is recorded).
    ///
    /// # Security
    /// Hands out authority: "once" lets the next turn that matches the
    /// entry exactly run with its items allowed; "remember" records a
    /// grant per item for the entry's identity (see
    /// [`super::GrantBook::record`]). Call it only on the person's own
    /// answer.
    pub fn answer(
        &self,
        id: &str,
        answer: QueueAnswer,
        by: Option<&str>,
        now: UtcTime,
    ) -> Result<QueueEntry, QueueError> {
        self.backend()?.answer(id, answer, by, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Capability, Identity};

    fn pending(cap: Capability, target: &str) -> Pending {
        Pending {
            capability: cap,
            target: Some(target.into()),
            declared_target: None,
            mount: None,
            critical: cap.critical(),
            rememberable: cap.default_approval() != crate::policy::ApprovalClass::Always,
            reason: "why".into(),
        }
    }

    fn key() -> TurnKey {
        TurnKey {
            argv: Vec::new(),
            files: Vec::new(),
            commands: Vec::new(),
            actor: "main".into(),
            identity: Some(Identity::new("cli", "tester")),
            executor: "write-file".into(),
            executor_sha256: "e".repeat(64),
            input_sha256: "i".repeat(64),
            args_sha256: args_sha256(&[]),
            definition_hash: "d".repeat(64),
            policy_hash: "p".repeat(64),
        }
    }

    #[test]
    fn an_allow_is_consumed_once_and_only_by_an_exact_match() {
        let dir = tempfile::tempdir().unwrap();
        let state = StatePaths::under(dir.path(), None, None);
        let q = ApprovalQueue::new(&state);
        let now = UtcTime(1_000_000);
        let p = vec![pending(Capability::FsWrite, "/w/out/**")];
        assert_eq!(q.take("t0", &key(), &p, now).unwrap(), None);
        assert!(!q.path().exists(), "taking created the database");
        let e = q.enqueue("t1", &key(), &p, "{}", now).unwrap();
        assert_eq!(e.expires_at, UtcTime(1_000_000 + 86_400));
        // Not answered yet: nothing to take.
        assert_eq!(q.take("t2", &key(), &p, now).unwrap(), None);
        q.answer(&e.id, QueueAnswer::Once, Some("alice"), now)
            .unwrap();
        // Another input, another scope, another policy: no match.
        let mut other = key();
        other.input_sha256 = "x".repeat(64);
        assert_eq!(q.take("t3", &other, &p, now).unwrap(), None);
        let mut other = key();
        other.policy_hash = "x".repeat(64);
        assert_eq!(q.take("t3", &other, &p, now).unwrap(), None);
        let wider = vec![
            pending(Capability::FsWrite, "/w/out/**"),
            pending(Capability::EnvRead, "HOME"),
        ];
        assert_eq!(q.take("t3", &key(), &wider, now).unwrap(), None);
        // Expired: no match.
        assert_eq!(
            q.take("t3", &key(), &p, now.plus_seconds(86_400)).unwrap(),
            None
        );
        assert_eq!(
            q.take("t4", &key(), &p, now).unwrap(),
            Some(Verdict::Allowed {
                id: e.id.clone(),
                commands: Vec::new()
            })
        );
        assert_eq!(q.take("t5", &key(), &p, now).unwrap(), None);
        let got = q.get(&e.id).unwrap().unwrap();
        assert_eq!(got.status, "consumed");
        assert_eq!(got.consumed_by.as_deref(), Some("t4"));
        assert_eq!(got.answered_by.as_deref(), Some("alice"));
        assert!(q.list(false, now).unwrap().is_empty());
        assert_eq!(q.list(true, now).unwrap().len(), 1);
    }

    #[test]
    fn always_class_is_never_remembered_and_an_answer_is_given_once() {
        let dir = tempfile::tempdir().unwrap();
        let state = StatePaths::under(dir.path(), None, None);
        let q = ApprovalQueue::new(&state);
        let now = UtcTime(1_000_000);
        let p = vec![pending(Capability::CodeExec, "cat")];
        let e = q.enqueue("t1", &key(), &p, "{}", now).unwrap();
        let r = q.answer(
            &e.id,
            QueueAnswer::Remember {
                expires_in_secs: None,
            },
            None,
            now,
        );
        assert!(
            matches!(
                r,
                Err(QueueError::NotRememberable {
                    capability: Capability::CodeExec,
                    ..
                })
            ),
            "{r:?}"
        );
        assert!(!state.grants_db.exists(), "a grant was written");
        q.answer(&e.id, QueueAnswer::Deny, None, now).unwrap();
        assert!(matches!(
            q.answer(&e.id, QueueAnswer::Once, None, now),
            Err(QueueError::AlreadyAnswered { .. })
        ));
        assert_eq!(
            q.take("t2", &key(), &p, now).unwrap(),
            Some(Verdict::Denied(e.id.clone()))
        );
        // Expired entries cannot be answered and are pruned by the next one.
        let late = q.enqueue("t3", &key(), &p, "{}", now).unwrap();
        let then = now.plus_seconds(ENTRY_TTL_SECS);
        assert!(matches!(
            q.answer(&late.id, QueueAnswer::Once, None, then),
            Err(QueueError::Expired { .. })
        ));
        q.enqueue("t4", &key(), &p, "{}", then).unwrap();
        assert!(q.get(&late.id).unwrap().is_none());
    }
}
