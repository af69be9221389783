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
use crate::state::{FileAudit, StateError};

/// One database as [`migrate`] left it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Migrated {
    /// What it holds: `grants`, `approvals`, `memory` or `audit`;
    /// `postgresql` for a fleet's shared database.
    pub database: &'static str,
    /// Its file, or the shared database's URL (its password redacted).
    pub path: String,
    /// Its schema version now.
    pub version: i64,
}

/// The memory database of `state`.
pub(super) fn memory_db(state: &StatePaths) -> PathBuf {
    state.memory_db()
}

/// Creates every state database of `state` that is missing, and brings
/// each to the schema version this build knows (in one transaction per
/// database where it changes anything). Refuses, changing nothing more,
/// a database of a later version.
///
/// # Security
/// Writes the host's own state (the grants, the approvals, the memory
/// store, the audit chain): run it as the account that owns them.
///
/// With a shared database (`state.database_url`), its schema and roles
/// are created or upgraded instead of the SQLite files of what it holds
/// (see [`crate::state::pg::Pg::migrate`]); that needs an owner's URL.
pub fn migrate(state: &StatePaths) -> Result<Vec<Migrated>, HostError> {
    let mut done = Vec::new();
    match &state.database_url {
        // The grants and the pending approvals are parts of the shared
        // schema: no approvals.db is made beside it.
        Some(url) => {
            let pg = crate::state::pg::Pg::shared(url)?;
            let (_, version) = pg.migrate()?;
            done.push(Migrated {
                database: "postgresql",
                path: pg.url().to_string(),
                version,
            });
        }
        None => {
            GrantStore::open(&state.grants_db)?;
            done.push(Migrated {
                database: "grants",
                path: state.grants_db.display().to_string(),
                version: crate::grants::SCHEMA_VERSION,
            });
            let approvals = ApprovalQueue::new(state);
            let approvals_version = approvals.migrate()?;
            done.push(Migrated {
                database: "approvals",
                path: approvals.path().display().to_string(),
                version: approvals_version,
            });
        }
    }
    // A fleet's memory store and audit chain are parts of the shared
    // schema.
    if state.database_url.is_none() {
        let memory = memory_db(state);
        MemoryStore::open(&memory)?;
        done.push(Migrated {
            database: "memory",
            path: memory.display().to_string(),
            version: crate::memory::SCHEMA_VERSION,
        });
        let audit_version = FileAudit::new(&state.audit_chain, Some(&state.audit_db)).migrate()?;
        done.push(Migrated {
            database: "audit",
            path: state.audit_chain.display().to_string(),
            version: audit_version,
        });
    }
    Ok(done)
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
///
/// With a shared database the approvals are in it (its version is
/// checked by [`crate::state::pg::Pg::check`]), and an approvals.db left
/// in the state directory is not looked at.
pub(super) fn check(state: &StatePaths) -> Result<(), HostError> {
    let approvals = ApprovalQueue::new(state);
    let file = state.database_url.is_none().then(|| approvals.path());
    if let Some(version) = file.and_then(header_version) {
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
    if let Some(version) = crate::state::file_audit::header_version(&state.audit_chain) {
        if version > crate::state::file_audit::FORMAT_VERSION {
            return Err(StateError::Newer {
                path: state.audit_chain.clone(),
                version,
                known: crate::state::file_audit::FORMAT_VERSION,
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
