//! Every store of one state, each backend chosen once: [`Stores::new`]
//! picks SQLite files in the state directory (the embedded default) or a
//! fleet's PostgreSQL database (`[state] database_url`) for all of them
//! together, so no caller chooses a backend again.
//!
//! [`Stores::open`] also refuses what this build cannot use: a shared
//! database that is unreachable, not migrated or of a later schema, and
//! an SQLite file of a later schema version. [`migrate`] creates or
//! upgrades them.

use std::path::Path;
use std::sync::Arc;

use super::approvals::{pg::PgApprovals, sqlite::SqliteApprovals, ApprovalBackend, QueueError};
use super::audit::file as file_audit;
use super::audit::pg::PgAudit;
use super::grants::{GrantBackend, GrantError, GrantStore, PgGrants, SqliteGrants};
use super::history::{PgTurnIndex, TurnIndex};
use super::memory::{MemoryBackend, MemoryDb, MemoryError, MemoryStore, PgMemory, StoreCause};
use super::parked::{ParkedStore, PgParked};
use super::pg::{Pg, SharedError};
use super::tasks::{PgTasks, TaskStore};
use super::{AuditStore, FileAudit, StateError};
use crate::config::StatePaths;

/// The stores of one state. Choosing them opens nothing: each SQLite
/// file is opened (and created) at its first use, and a shared
/// database's pool connects at its first query.
#[derive(Clone)]
pub struct Stores {
    /// The grants: remembered approvals, per identity and target.
    pub grants: Arc<dyn GrantBackend>,
    /// The pending-approval queue (whose "allow and remember" grants go
    /// to [`Stores::grants`]'s database).
    pub approvals: Arc<dyn ApprovalBackend>,
    /// The memory store behind `gatehouse:executor/memory`.
    pub memory: Arc<dyn MemoryBackend>,
    /// The hash-chained audit: `audit-chain.jsonl` (importing an earlier
    /// build's `audit.db`), or the fleet's chain.
    pub audit: Arc<dyn AuditStore>,
    /// What only a fleet has; `None` on the embedded backend, whose
    /// history index is the history directory itself and whose parked
    /// turns and tasks are its server's own.
    pub fleet: Option<Fleet>,
}

/// The stores only a fleet's database holds.
#[derive(Clone)]
pub struct Fleet {
    /// This node's name in the fleet (the history index's and the
    /// chain's).
    pub node: String,
    /// Every node's turns.
    pub index: Arc<dyn TurnIndex>,
    /// Parked MCP turns, answerable on any node.
    pub parked: Arc<dyn ParkedStore>,
    /// MCP tasks, readable on any node.
    pub tasks: Arc<dyn TaskStore>,
}

/// Why the stores of a state cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The shared database: a URL that does not parse, unreachable, not
    /// migrated, of a later schema.
    #[error(transparent)]
    Shared(#[from] SharedError),
    /// The grants database.
    #[error(transparent)]
    Grants(#[from] GrantError),
    /// The approvals database.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// The memory database.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// The audit chain.
    #[error(transparent)]
    Audit(#[from] StateError),
}

impl Stores {
    /// The stores `state` names: its PostgreSQL database
    /// (`state.database_url`), else its SQLite files. Nothing is opened;
    /// fails only on a database URL that does not parse.
    pub fn new(state: &StatePaths) -> Result<Stores, SharedError> {
        let Some(url) = &state.database_url else {
            return Ok(Stores {
                grants: Arc::new(SqliteGrants::new(state.grants_db.clone())),
                approvals: Arc::new(SqliteApprovals::new(state)),
                memory: Arc::new(MemoryDb::new(state.memory_db())),
                audit: FileAudit::new(&state.audit_chain, Some(&state.audit_db)),
                fleet: None,
            });
        };
        let pg = Pg::shared(url)?;
        let grants: Arc<dyn GrantBackend> = Arc::new(PgGrants::new(pg.clone()));
        Ok(Stores {
            approvals: Arc::new(PgApprovals::new(pg.clone(), grants.clone())),
            grants,
            memory: Arc::new(PgMemory::new(pg.clone())),
            audit: Arc::new(PgAudit::new(pg.clone())),
            fleet: Some(Fleet {
                node: state.node_name(),
                index: Arc::new(PgTurnIndex::new(pg.clone())),
                parked: Arc::new(PgParked::new(pg.clone())),
                tasks: Arc::new(PgTasks::new(pg)),
            }),
        })
    }

    /// The stores of `state`, refusing a shared database this build does
    /// not know (unreachable, not migrated, newer) and an SQLite file of
    /// a later schema version, so a host fails when it opens, not at the
    /// turn that first needs the store.
    pub fn open(state: &StatePaths) -> Result<Stores, OpenError> {
        if let Some(url) = &state.database_url {
            Pg::shared(url)?.check()?;
        }
        let stores = Stores::new(state)?;
        check_files(state)?;
        Ok(stores)
    }
}

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
/// (see [`Pg::migrate`]); that needs an owner's URL.
pub fn migrate(state: &StatePaths) -> Result<Vec<Migrated>, OpenError> {
    // The grants, the pending approvals, the memory store and the audit
    // chain are parts of the shared schema: no file is made beside it.
    if let Some(url) = &state.database_url {
        let pg = Pg::shared(url)?;
        let (_, version) = pg.migrate()?;
        return Ok(vec![Migrated {
            database: "postgresql",
            path: pg.url().to_string(),
            version,
        }]);
    }
    GrantStore::open(&state.grants_db)?;
    let mut done = vec![Migrated {
        database: "grants",
        path: state.grants_db.display().to_string(),
        version: super::grants::SCHEMA_VERSION,
    }];
    done.push(Migrated {
        database: "approvals",
        path: state.approvals_db.display().to_string(),
        version: SqliteApprovals::new(state).migrate()?,
    });
    let memory = state.memory_db();
    MemoryStore::open(&memory)?;
    done.push(Migrated {
        database: "memory",
        path: memory.display().to_string(),
        version: super::memory::SCHEMA_VERSION,
    });
    let audit_version = FileAudit::new(&state.audit_chain, Some(&state.audit_db)).migrate()?;
    done.push(Migrated {
        database: "audit",
        path: state.audit_chain.display().to_string(),
        version: audit_version,
    });
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
/// checked by [`Pg::check`]), and an approvals.db left in the state
/// directory is not looked at.
fn check_files(state: &StatePaths) -> Result<(), OpenError> {
    let known = super::approvals::sqlite::SCHEMA_VERSION;
    let approvals = state.database_url.is_none().then_some(&state.approvals_db);
    if let Some(version) = approvals.and_then(|p| header_version(p)) {
        if version > known {
            return Err(QueueError::Newer {
                path: state.approvals_db.clone(),
                version,
                known,
            }
            .into());
        }
    }
    let memory = state.memory_db();
    let known = super::memory::SCHEMA_VERSION;
    if let Some(version) = header_version(&memory) {
        if version > known {
            return Err(MemoryError::Store {
                path: memory,
                source: StoreCause::Newer { version, known },
            }
            .into());
        }
    }
    let known = file_audit::FORMAT_VERSION;
    if let Some(version) = file_audit::header_version(&state.audit_chain) {
        if version > known {
            return Err(StateError::Newer {
                path: state.audit_chain.clone(),
                version,
                known,
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
