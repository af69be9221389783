//! The grant store as the host's callers see it: the one place grants are
//! read and written, whether by an "allow and remember" answer of a turn
//! or by the `grants` commands.
//!
//! Reading never creates the database: a store that does not exist holds
//! no grants. Recording validates the grant first, so a refused one (an
//! always-class capability, a wrong target kind, a wildcard over an
//! address) leaves no file behind.

use std::path::PathBuf;

use crate::config::StatePaths;
use crate::grants::GrantStore;
use crate::policy::{Capability, Effective, Identity, Level, UtcTime};

pub use crate::grants::{
    now_utc, parse_duration, remember_for, GrantError, NewGrant, DEFAULT_REMEMBER_SECS,
};
pub use crate::policy::Grant;

/// The grants of one state directory.
pub struct GrantBook {
    path: PathBuf,
}

impl GrantBook {
    /// The grants under `state` (nothing is opened yet).
    pub fn new(state: &StatePaths) -> GrantBook {
        GrantBook {
            path: state.grants_db.clone(),
        }
    }

    fn existing(&self) -> Result<Option<GrantStore>, GrantError> {
        if self.path.exists() {
            GrantStore::open(&self.path).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Records `new` at `now`, after validating it.
    ///
    /// # Security
    /// A grant turns `approval_required` into `allowed` for its identity
    /// and target until it expires or is revoked; never for an
    /// always-class capability, never past a denial.
    pub fn record(&self, new: &NewGrant, now: UtcTime) -> Result<Grant, GrantError> {
        GrantStore::validate(new, now)?;
        GrantStore::open(&self.path)?.record(new, now)
    }

    /// The grants in force at `now` (with `all`, revoked and expired ones
    /// too).
    pub fn list(&self, all: bool, now: UtcTime) -> Result<Vec<Grant>, GrantError> {
        match self.existing()? {
            Some(store) => store.list(all, now),
            None => Ok(Vec::new()),
        }
    }

    /// Revokes grant `id`; `None` when there is no grants database at all.
    pub fn revoke(&self, id: i64, now: UtcTime) -> Result<Option<Grant>, GrantError> {
        match self.existing()? {
            Some(store) => store.revoke(id, now).map(Some),
            None => Ok(None),
        }
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
        match self.existing()? {
            Some(store) => store.revoke_tuple(identity, capability, target, now),
            None => Ok(None),
        }
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
        match self.existing()? {
            Some(store) => store
                .effective_outcome(level, capability, target, identity, now)
                .map(Some),
            None => Ok(None),
        }
    }
}
