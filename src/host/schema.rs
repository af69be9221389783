//! The schema versions of the host's state databases (SQLite's
//! `user_version`): `gatehouse migrate` creates each database or brings
//! it to the version this build knows, and a host refuses to open on a
//! database of a later version, which it could misread or write what the
//! newer build cannot read.

use std::path::PathBuf;

use super::queue::{ApprovalQueue, QueueError};
use super::HostError;
use crate::config::StatePaths;
use crate::grants::GrantStore;
use crate::memory::{MemoryError, MemoryStore, StoreCause};

/// One database as [`migrate`] left it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Migrated {
    /// What it holds: `grants`, `approvals` or `memory`.
    pub database: &'static str,
    /// Its file.
    pub path: PathBuf,
    /// Its schema version now.
    pub version: i64,
}

/// The memory database of `state`.
pub(super) fn memory_db(state: &StatePaths) -> PathBuf {
    state.state_dir.join("memory.db")
}

/// Creates every state database of `state` that is missing, and brings
/// each to the schema version this build knows (in one transaction per
/// database where it changes anything). Refuses, changing nothing more,
/// a database of a later version.
///
/// # Security
/// Writes the host's own state (the grants, the approvals, the memory
/// store): run it as the account that owns them.
pub fn migrate(state: &StatePaths) -> Result<Vec<Migrated>, HostError> {
    GrantStore::open(&state.grants_db)?;
    let approvals = ApprovalQueue::new(state);
    let approvals_version = approvals.migrate()?;
    let memory = memory_db(state);
    MemoryStore::open(&memory)?;
    Ok(vec![
        Migrated {
            database: "grants",
            path: state.grants_db.clone(),
            version: crate::grants::SCHEMA_VERSION,
        },
        Migrated {
            database: "approvals",
            path: approvals.path().to_path_buf(),
            version: approvals_version,
        },
        Migrated {
            database: "memory",
            path: memory,
            version: crate::memory::SCHEMA_VERSION,
        },
    ])
}

/// Refuses a state database of a later schema version than this build
/// knows. A missing one is fine (it is made at its first use), and so,
/// here, is one that cannot be read at all: the turn that needs it says
/// why, and the others run. The grants database is checked where the
/// snapshot reads it.
pub(super) fn check(state: &StatePaths) -> Result<(), HostError> {
    if let Err(e @ QueueError::Newer { .. }) = ApprovalQueue::new(state).check() {
        return Err(e.into());
    }
    let memory = memory_db(state);
    if memory.exists() {
        if let Err(
            e @ MemoryError::Store {
                source: StoreCause::Newer { .. },
                ..
            },
        ) = MemoryStore::open(&memory)
        {
            return Err(e.into());
        }
    }
    Ok(())
}
