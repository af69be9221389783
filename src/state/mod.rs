//! The shared state of a host and its backends.
//!
//! What a host keeps beyond one turn (grants, pending approvals, the
//! audit, the memory store, the history index) lives either in SQLite
//! files in the state directory (the embedded default) or, for a fleet of
//! hosts, in one PostgreSQL database named by `[state] database_url` in
//! `gatehouse.toml` or `$GATEHOUSE_DATABASE_URL` ([`pg`]). Each kind of
//! state is one trait with an implementation per backend; the host picks
//! them once, from [`crate::config::StatePaths::database_url`].
//!
//! - [`audit`] — the audit chain's trait ([`AuditStore`]): one
//!   hash-chained log of every turn's audit record and every denial,
//!   which `gatehouse history verify` recomputes; [`chain`] its pure part,
//!   [`file_audit`] and [`pg_audit`] its backends ([`legacy_audit`]: the
//!   SQLite chain of earlier builds, imported).
//! - [`grants`], [`approvals`]: the grant store and the pending-approval
//!   queue, each a trait with a SQLite and a PostgreSQL implementation.
//! - [`history`]: a fleet's history index (every node's turns).
//! - [`parked`]: a fleet's parked MCP turns, answerable on any node.
//! - [`memory`]: the memory store's PostgreSQL implementation (the trait
//!   and the SQLite one are [`crate::memory`]'s).

pub mod approvals;
pub mod audit;
pub mod chain;
pub mod file_audit;
pub mod grants;
pub mod history;
pub mod legacy_audit;
pub mod memory;
pub mod parked;
pub mod pg;
pub mod pg_audit;
pub mod tasks;

pub use audit::{AuditStore, StateError, KIND_DENIAL, KIND_TURN};
pub use chain::{link_hash, verify, Broken, ChainRow, Checkpoint, Tamper, Verified, GENESIS};
pub use file_audit::FileAudit;

use std::sync::Arc;

use crate::config::StatePaths;

/// The PostgreSQL schema of version 1, in the order `migrate` runs it
/// (after `gatehouse_meta` and the roles exist).
pub const SCHEMA_1: &[&str] = &[grants::SCHEMA, approvals::pg::SCHEMA, pg_audit::SCHEMA];

/// What version 2 adds to version 1: the shared memory store, the
/// history index and the parked MCP turns.
pub const SCHEMA_2: &[&str] = &[memory::SCHEMA, history::SCHEMA, parked::SCHEMA];

/// What version 3 adds: the fleet's MCP tasks.
pub const SCHEMA_3: &[&str] = &[tasks::SCHEMA];

/// What version 4 changes: each node links its own audit records, and the
/// history index is read from the chain's turn rows (no trigger runs in a
/// turn's commit).
pub const SCHEMA_4: &[&str] = &[pg_audit::SCHEMA_4, history::SCHEMA_4];

/// What version 5 adds: the chain's rows indexed by turn, for the history
/// index's lookups.
pub const SCHEMA_5: &[&str] = &[history::SCHEMA_5];

/// What version 6 changes (security round 3): a node's role may change
/// only a task's status, result, timestamps, cancel mark and runner, and
/// writes a task's call and form once, bound by a hash; it records a
/// grant only as the grant of an answer; the chain's records hash their
/// node and operation count (format 2).
pub const SCHEMA_6: &[&str] = &[tasks::SCHEMA_6, grants::SCHEMA_6, pg_audit::SCHEMA_6];

/// Each schema version and what `migrate` runs to reach it from the one
/// before, in order.
pub const MIGRATIONS: &[(i64, &[&str])] = &[
    (1, SCHEMA_1),
    (2, SCHEMA_2),
    (3, SCHEMA_3),
    (4, SCHEMA_4),
    (5, SCHEMA_5),
    (6, SCHEMA_6),
];

/// The grant store `state` names: its PostgreSQL database, else its
/// SQLite file.
pub fn grant_backend(state: &StatePaths) -> Result<Arc<dyn grants::GrantBackend>, pg::SharedError> {
    Ok(match &state.database_url {
        Some(url) => Arc::new(grants::PgGrants::new(pg::Pg::shared(url)?)),
        None => Arc::new(grants::SqliteGrants::new(state.grants_db.clone())),
    })
}

/// The pending-approval queue `state` names: its PostgreSQL database
/// (whose "allow and remember" grants go to the same database), else its
/// SQLite file.
pub fn approval_backend(
    state: &StatePaths,
) -> Result<Arc<dyn approvals::ApprovalBackend>, pg::SharedError> {
    Ok(match &state.database_url {
        Some(url) => Arc::new(approvals::pg::PgApprovals::new(
            pg::Pg::shared(url)?,
            grant_backend(state)?,
        )),
        None => Arc::new(approvals::sqlite::SqliteApprovals::new(state)),
    })
}

/// The memory store `state` names: its PostgreSQL database, else
/// `memory.db` in the state directory. Nothing is opened yet.
pub fn memory_backend(
    state: &StatePaths,
) -> Result<Arc<dyn crate::memory::MemoryBackend>, pg::SharedError> {
    Ok(match &state.database_url {
        Some(url) => Arc::new(memory::PgMemory::new(pg::Pg::shared(url)?)),
        None => Arc::new(crate::memory::MemoryDb::new(state.memory_db())),
    })
}

/// The fleet's history index when `state` names a database; `None` on
/// the embedded backend, whose index is the history directory itself.
pub fn turn_index(
    state: &StatePaths,
) -> Result<Option<Arc<dyn history::TurnIndex>>, pg::SharedError> {
    Ok(match &state.database_url {
        Some(url) => Some(Arc::new(history::PgTurnIndex::new(pg::Pg::shared(url)?))),
        None => None,
    })
}

/// The fleet's parked MCP turns when `state` names a database; `None`
/// on the embedded backend (a parked turn is its server's alone).
pub fn parked_store(
    state: &StatePaths,
) -> Result<Option<Arc<dyn parked::ParkedStore>>, pg::SharedError> {
    Ok(match &state.database_url {
        Some(url) => Some(Arc::new(parked::PgParked::new(pg::Pg::shared(url)?))),
        None => None,
    })
}

/// A fleet's MCP tasks when `state` names a database; `None` on the
/// embedded backend, whose tasks are the server's own.
pub fn task_store(
    state: &StatePaths,
) -> Result<Option<Arc<dyn tasks::TaskStore>>, pg::SharedError> {
    Ok(match &state.database_url {
        Some(url) => Some(Arc::new(tasks::PgTasks::new(pg::Pg::shared(url)?))),
        None => None,
    })
}

/// The audit chain `state` names: its PostgreSQL database, else
/// `audit-chain.jsonl` in the state directory (importing an earlier
/// build's `audit.db`).
pub fn audit_backend(state: &StatePaths) -> Result<Arc<dyn AuditStore>, pg::SharedError> {
    Ok(match &state.database_url {
        Some(url) => Arc::new(pg_audit::PgAudit::new(pg::Pg::shared(url)?)),
        None => FileAudit::new(&state.audit_chain, Some(&state.audit_db)),
    })
}
