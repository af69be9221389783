//! The grant store as the host's callers see it: the one place grants are
//! read and written, whether by an "allow and remember" answer of a turn
//! or by the `grants` commands, on whichever backend the state names
//! ([`crate::state::grants`]).
//!
//! Reading never creates the database: a store that does not exist holds
//! no grants. Recording validates the grant first, so a refused one (an
//! always-class capability, a wrong target kind, a wildcard over an
//! address) leaves no file behind.

use std::sync::Arc;

use crate::config::StatePaths;
use crate::policy::{Capability, Effective, Identity, Level, UtcTime};
use crate::state::grants::GrantBackend;

pub use crate::grants::{
    now_utc, parse_duration, remember_for, GrantError, NewGrant, DEFAULT_REMEMBER_SECS,
};
pub use crate::policy::Grant;

/// The grants of one state: its SQLite file or its fleet's database.
pub struct GrantBook {
    backend: Arc<dyn GrantBackend>,
}

impl GrantBook {
    /// The grants of `state` (nothing is opened yet). Fails only on a
    /// database URL that does not parse.
    pub fn new(state: &StatePaths) -> Result<GrantBook, GrantError> {
        Ok(GrantBook {
            backend: crate::state::grant_backend(state)?,
        })
    }

    /// The backend itself (for a host that keeps it for its turns).
    pub fn backend(&self) -> &Arc<dyn GrantBackend> {
        &self.backend
    }

    /// Records `new` at `now`, after validating it.
    ///
    /// # Security
    /// A grant turns `approval_required` into `allowed` for its identity
    /// and target until it expires or is revoked; never for an
    /// always-class capability, never past a denial.
    pub fn record(&self, new: &NewGrant, now: UtcTime) -> Result<Grant, GrantError> {
        self.backend.record(new, now)
    }

    /// The grants in force at `now` (with `all`, revoked and expired ones
    /// too).
    pub fn list(&self, all: bool, now: UtcTime) -> Result<Vec<Grant>, GrantError> {
        self.backend.list(all, now)
    }

    /// Revokes grant `id`; `None` when there is no grants database at all.
    pub fn revoke(&self, id: i64, now: UtcTime) -> Result<Option<Grant>, GrantError> {
        self.backend.revoke(id, now)
    }

    /// Revokes the grant of `identity` on `capability` and `target` (as
    /// recorded: canonical); `None` when there is none.
    pub fn revoke_tuple(
        &self,
        identity: &Identity,
        capability: &str,
        target: &str,
        now: UtcTime,
    ) -> Result<Option<Grant>, GrantError> {
        self.backend.revoke_tuple(identity, capability, target, now)
    }

    /// The matrix and the grants' answer for one capability on `target`
    /// for `identity` at `level`, now.
    pub fn effective(
        &self,
        level: Level,
        capability: Capability,
        target: Option<&str>,
        identity: &Identity,
        now: UtcTime,
    ) -> Result<Option<Effective>, GrantError> {
        crate::state::grants::effective(&*self.backend, level, capability, target, identity, now)
            .map(Some)
    }
}
