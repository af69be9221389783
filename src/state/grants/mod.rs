//! The grants: [`GrantBackend`], with the embedded SQLite file
//! ([`SqliteGrants`] over [`GrantStore`], the default) and a fleet's
//! PostgreSQL ([`PgGrants`]).
//!
//!
//! Both keep one unrevoked grant per (channel, sender, capability,
//! target), validate before writing ([`crate::state::grants::GrantStore::validate`])
//! and leave the rule that combines grants with the matrix to
//! [`crate::policy::effective_outcome`].
//!
//! A host must see a change made anywhere before its next decision.
//! SQLite's change is seen on the file (the host stats or watches it); a
//! PostgreSQL change bumps `gatehouse_meta.grants_version` in the same
//! transaction and notifies `gatehouse_grants`. A listener thread per
//! host ([`Listener`]) takes the notification, and polls the version every
//! [`POLL`] besides; while it has not answered for [`FRESH`], each turn
//! reads the version itself. So a change committed at time T is seen by
//! every decision that starts after T + [`FRESH`] plus one round trip, and
//! usually within a millisecond.

mod clock;
mod error;
pub mod pg;
pub mod sqlite;

pub use clock::{now_utc, parse_duration, remember_for, DEFAULT_REMEMBER_SECS};
pub use error::{GrantError, WrongSchema};
pub use pg::{Listener, PgGrants, FRESH, POLL};
pub use sqlite::{GrantStore, SqliteGrants, BUSY_TIMEOUT, SCHEMA_VERSION};

use crate::policy::{
    matrix, ApprovalClass, Capability, Effective, Grant, Identity, Level, Outcome, TargetKind,
    TargetPattern, UtcTime,
};

/// The `grants` table's columns, in the order rows are decoded (the
/// PostgreSQL store's table has the same).
pub(crate) const COLUMNS: &str =
    "id, channel, sender_id, capability, target, granted_at, expires_at, granted_by, revoked_at";

/// A grant to record: everything but the id and the times the store sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewGrant {
    /// Who the grant is for; both parts must be non-empty.
    pub identity: Identity,
    /// A registry name such as `fs:write`.
    pub capability: String,
    /// A pattern of the capability's target kind (`/home/a/notes/**`,
    /// `example.com:443`, `HOME`).
    pub target: String,
    /// When the grant stops applying; `None` means until revoked.
    pub expires_at: Option<UtcTime>,
    /// Free text naming who approved it, for the record.
    pub granted_by: Option<String>,
}

/// The grants of one state: read, recorded and revoked.
pub trait GrantBackend: Send + Sync {
    /// Records `new` at `now` (validated first; the tuple's existing
    /// grant is returned, with the later expiry, if there is one).
    ///
    /// # Security
    /// A grant turns `approval_required` into `allowed` for its identity
    /// and target until it expires or is revoked.
    fn record(&self, new: &NewGrant, now: UtcTime) -> Result<Grant, GrantError>;
    /// Records the grant of an "allow and remember" answer a person gave
    /// to this host in turn `turn`: `new`'s identity, capability and
    /// target, for `expires_in_secs` from now (`None`: forever; `new`'s
    /// own expiry says the same as of `now`).
    ///
    /// # Security
    /// On PostgreSQL a node's role may not write `grants` (schema version
    /// 6): the database records the answer and the grant it makes,
    /// together and from its own clock (`gatehouse_remember`, [`pg::SCHEMA_6`]).
    fn remember(
        &self,
        new: &NewGrant,
        turn: &str,
        expires_in_secs: Option<u64>,
        now: UtcTime,
    ) -> Result<Grant, GrantError> {
        let _ = (turn, expires_in_secs);
        self.record(new, now)
    }
    /// Revokes grant `id`; `None` when there is no grants store at all.
    fn revoke(&self, id: i64, now: UtcTime) -> Result<Option<Grant>, GrantError>;
    /// Revokes the unrevoked grant of `identity` on `capability` and
    /// `target` (canonical); `None` when there is none.
    fn revoke_tuple(
        &self,
        identity: &Identity,
        capability: &str,
        target: &str,
        now: UtcTime,
    ) -> Result<Option<Grant>, GrantError>;
    /// The grants in force at `now`, by id (with `all`, every one).
    fn list(&self, all: bool, now: UtcTime) -> Result<Vec<Grant>, GrantError>;
    /// The unrevoked grants of `identity` on `capability`, by id (expiry
    /// is the caller's to judge, at its decision's time).
    fn unrevoked_for(
        &self,
        identity: &Identity,
        capability: Capability,
    ) -> Result<Vec<Grant>, GrantError>;
    /// A number that moves whenever the grants changed anywhere, when the
    /// backend has one; `None`: watch the file instead (SQLite).
    fn generation(&self) -> Option<Result<u64, GrantError>> {
        None
    }
}

/// The matrix and the grants' answer for one capability on `target` for
/// `identity` at `level`, now.
pub fn effective(
    backend: &dyn GrantBackend,
    level: Level,
    capability: Capability,
    target: Option<&str>,
    identity: &Identity,
    now: UtcTime,
) -> Result<Effective, GrantError> {
    let rows = if crate::state::grants::grants_can_lift(level, capability) {
        backend.unrevoked_for(identity, capability)?
    } else {
        Vec::new()
    };
    Ok(crate::policy::effective_outcome(
        level,
        capability,
        target,
        identity,
        rows.iter().filter(|g| g.is_active(now)),
    ))
}

/// Whether a grant could lift `capability` at `level`: only an
/// `approval_required` cell of a capability that is not always-class.
/// Where it cannot, the matrix alone decides and no grant is read.
pub fn grants_can_lift(level: Level, capability: Capability) -> bool {
    matrix(level, capability) == Outcome::ApprovalRequired
        && capability.default_approval() != ApprovalClass::Always
}

/// The checks of [`GrantStore::record`]; returns the capability and the
/// parsed target pattern.
pub(crate) fn validated(
    new: &NewGrant,
    now: UtcTime,
) -> Result<(Capability, TargetPattern), GrantError> {
    let capability: Capability = new.capability.parse()?;
    if capability.default_approval() == ApprovalClass::Always {
        return Err(GrantError::AlwaysClass(capability));
    }
    let kind = capability.target_kind();
    if kind == TargetKind::None {
        return Err(GrantError::NoTarget(capability));
    }
    let pattern = TargetPattern::parse(kind, &new.target)
        .map_err(|source| GrantError::BadTarget { capability, source })?;
    if new.identity.channel.is_empty() {
        return Err(GrantError::EmptyIdentity("channel"));
    }
    if new.identity.sender_id.is_empty() {
        return Err(GrantError::EmptyIdentity("sender id"));
    }
    if let Some(expires_at) = new.expires_at {
        if expires_at <= now {
            return Err(GrantError::ExpiryNotInFuture { expires_at, now });
        }
    }
    Ok((capability, pattern))
}
