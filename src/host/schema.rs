//! The schema versions of the host's state databases (SQLite's
//! `user_version`): `gatehouse migrate` creates each database or brings
//! it to the version this build knows, and a host refuses to open on a
//! database of a later version, which it could misread or write what the
//! newer build cannot read.

use std::path::{Path, PathBuf};

use super::queue::{ApprovalQueue, QueueError};
use super::HostError;
use crate::config::StatePaths;
use crate::grants::GrantStore;
use crate::memory::{MemoryError, MemoryStore, StoreCause};
use crate::state::{SqliteAudit, StateError};

/// One database as [`migrate`] left it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Migrated {
    /// What it holds: `grants`, `approvals`, `memory` or `audit`.
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
/// store, the audit chain): run it as the account that owns them.
pub fn migrate(state: &StatePaths) -> Result<Vec<Migrated>, HostError> {
    GrantStore::open(&state.grants_db)?;
    let approvals = ApprovalQueue::new(state);
    let approvals_version = approvals.migrate()?;
    let memory = memory_db(state);
    MemoryStore::open(&memory)?;
    let audit_version = SqliteAudit::new(&state.audit_db).migrate()?;
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
        Migrated {
            database: "audit",
            path: state.audit_db.clone(),
            version: audit_version,
        },
    ])
}

/// Refuses a state database of a later schema version than this build
/// knows, from the version its file's header records: no SQLite
/// connection is opened (closing one checkpoints its log: milliseconds a
/// one-shot `gatehouse run` would pay for every database). A missing file
/// is fine (it is made at its first use), and so, here, is one that is not
/// a database: the turn that needs it says why, and the others run. A
/// version not yet in the header (still in the write-ahead log of a newer
/// build's open connection) is refused when the database is first opened.
/// The grants database is checked where the snapshot reads it.
pub(super) fn check(state: &StatePaths) -> Result<(), HostError> {
    let approvals = ApprovalQueue::new(state);
    if let Some(version) = header_version(approvals.path()) {
        if version > super::queue::SCHEMA_VERSION {
            return Err(QueueError::Newer {
                path: approvals.path().to_path_buf(),
                version,
                known: super::queue::SCHEMA_VERSION,
            }
            .into());
        }
    }
    let memory = memory_db(state);
    if let Some(version) = header_version(&memory) {
        if version > crate::memory::SCHEMA_VERSION {
            return Err(MemoryError::Store {
                path: memory,
                source: StoreCause::Newer {
                    version,
                    known: crate::memory::SCHEMA_VERSION,
                },
            }
            .into());
        }
    }
    if let Some(version) = header_version(&state.audit_db) {
        if version > crate::state::sqlite_audit::SCHEMA_VERSION {
            return Err(StateError::Newer {
                path: state.audit_db.clone(),
                version,
                known: crate::state::sqlite_audit::SCHEMA_VERSION,
            }
            .into());
        }
    }
    Ok(())
}

/// The `user_version` an SQLite file's header records (four bytes,
/// big-endian, at offset 60); `None` for a missing file or one that is not
/// an SQLite database.
fn header_version(path: &Path) -> Option<i64> {
    use std::io::Read;
    let mut header = [0u8; 64];
    std::fs::File::open(path)
        .ok()?
        .read_exact(&mut header)
        .ok()?;
    if &header[..16] != b"SQLite format 3\0" {
        return None;
    }
    let mut version = [0u8; 4];
    version.copy_from_slice(&header[60..64]);
    Some(i64::from(i32::from_be_bytes(version)))
}
