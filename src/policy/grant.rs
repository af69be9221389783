//! Grants as the core sees them, and the pure part of `effective_outcome`.
//!
//! The SQLite store (`crate::state::grants`) reads rows and passes the active ones
//! in; the rule that combines the matrix with them lives here, once.

use serde::{Deserialize, Serialize};

use super::matrix::{matrix, Level, Outcome};
use super::registry::{ApprovalClass, Capability, TargetKind};
use super::target::pattern_covers;
use super::time::UtcTime;

/// Who a grant is for: the channel a request came in on and its sender.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Identity {
    /// The channel a request came in on (`cli`, …).
    pub channel: String,
    /// The sender's id within that channel.
    pub sender_id: String,
}

impl Identity {
    /// The identity of `sender_id` on `channel`.
    pub fn new(channel: impl Into<String>, sender_id: impl Into<String>) -> Identity {
        Identity {
            channel: channel.into(),
            sender_id: sender_id.into(),
        }
    }
}

/// One row of the `grants` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The row's id, the `grant #<id>` decisions name.
    pub id: i64,
    /// The channel of the identity it is for.
    pub channel: String,
    /// The sender of the identity it is for.
    pub sender_id: String,
    /// Kept as text: a hand-edited database may hold a name the registry
    /// does not know, and such a row must simply never match.
    pub capability: String,
    /// The target pattern it covers (matched with `pattern_covers`).
    pub target: String,
    /// When it was recorded.
    pub granted_at: UtcTime,
    /// When it stops counting; `None`: never.
    pub expires_at: Option<UtcTime>,
    /// Who recorded it, if known.
    pub granted_by: Option<String>,
    /// When it was revoked; `None`: not revoked.
    pub revoked_at: Option<UtcTime>,
}

impl Grant {
    /// Unrevoked and unexpired at `now`.
    pub fn is_active(&self, now: UtcTime) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|e| e > now)
    }

    /// Whether this grant covers `capability` on `target` for `identity`
    /// (identity and capability exact, target by pattern).
    pub fn covers(
        &self,
        capability: Capability,
        target: Option<&str>,
        identity: &Identity,
    ) -> bool {
        if self.channel != identity.channel
            || self.sender_id != identity.sender_id
            || self.capability != capability.as_str()
        {
            return false;
        }
        match (capability.target_kind(), target) {
            (TargetKind::None, _) | (_, None) => false,
            (kind, Some(t)) => pattern_covers(kind, &self.target, t),
        }
    }
}

/// The result of combining the matrix with grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effective {
    /// The outcome after grants.
    pub outcome: Outcome,
    /// The matrix cell before grants.
    pub matrix: Outcome,
    /// The grant that turned `approval_required` into `allowed`.
    pub grant_id: Option<i64>,
}

/// `effective_outcome` over already-active grants: the matrix decides
/// `allowed` and `denied` alone; `approval_required` becomes `allowed` only
/// when a grant covers the target, and never for an `always`-class
/// capability (the hole metnos-policy §5 admits, closed here as well as at
/// record time, so a hand-inserted row cannot open it).
pub fn effective_outcome<'a>(
    level: Level,
    capability: Capability,
    target: Option<&str>,
    identity: &Identity,
    active_grants: impl IntoIterator<Item = &'a Grant>,
) -> Effective {
    let cell = matrix(level, capability);
    let mut result = Effective {
        outcome: cell,
        matrix: cell,
        grant_id: None,
    };
    if cell != Outcome::ApprovalRequired || capability.default_approval() == ApprovalClass::Always {
        return result;
    }
    if let Some(g) = active_grants
        .into_iter()
        .find(|g| g.covers(capability, target, identity))
    {
        result.outcome = Outcome::Allowed;
        result.grant_id = Some(g.id);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(cap: &str, target: &str) -> Grant {
        Grant {
            id: 7,
            channel: "cli".into(),
            sender_id: "alice".into(),
            capability: cap.into(),
            target: target.into(),
            granted_at: UtcTime(0),
            expires_at: Some(UtcTime(100)),
            granted_by: None,
            revoked_at: None,
        }
    }

    #[test]
    fn a_grant_lifts_approval_but_never_denial_or_always() {
        let alice = Identity::new("cli", "alice");
        let g = [grant("fs:write", "/tmp/x/**")];
        let e = effective_outcome(
            Level::Supervised,
            Capability::FsWrite,
            Some("/tmp/x/a"),
            &alice,
            &g,
        );
        assert_eq!((e.outcome, e.grant_id), (Outcome::Allowed, Some(7)));
        let e = effective_outcome(
            Level::ReadOnly,
            Capability::FsWrite,
            Some("/tmp/x/a"),
            &alice,
            &g,
        );
        assert_eq!(e.outcome, Outcome::Denied);
        let e = effective_outcome(
            Level::Supervised,
            Capability::FsWrite,
            Some("/tmp/y/a"),
            &alice,
            &g,
        );
        assert_eq!(e.outcome, Outcome::ApprovalRequired);
        let bob = Identity::new("cli", "bob");
        let e = effective_outcome(
            Level::Supervised,
            Capability::FsWrite,
            Some("/tmp/x/a"),
            &bob,
            &g,
        );
        assert_eq!(e.outcome, Outcome::ApprovalRequired);
        let exec = [grant("code:exec", "ls")];
        let e = effective_outcome(Level::Full, Capability::CodeExec, Some("ls"), &alice, &exec);
        assert_eq!(e.outcome, Outcome::ApprovalRequired);
    }

    #[test]
    fn activity() {
        let mut g = grant("fs:write", "/a");
        assert!(g.is_active(UtcTime(99)));
        assert!(!g.is_active(UtcTime(100)));
        g.expires_at = None;
        g.revoked_at = Some(UtcTime(5));
        assert!(!g.is_active(UtcTime(1)));
    }
}
