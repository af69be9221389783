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
//!   [`sqlite_audit`] and [`pg_audit`] its backends.

pub mod approvals;
pub mod audit;
pub mod chain;
pub mod grants;
pub mod pg;
pub mod pg_audit;
pub mod sqlite_audit;

pub use audit::{AuditStore, StateError, KIND_DENIAL, KIND_TURN};
pub use chain::{link_hash, verify, Broken, ChainRow, Checkpoint, Tamper, Verified, GENESIS};
pub use sqlite_audit::SqliteAudit;

use std::sync::Arc;

use crate::config::StatePaths;

/// The PostgreSQL schema of version 1, in the order `migrate` runs it
/// (after `gatehouse_meta` and the roles exist).
pub const SCHEMA_1: &[&str] = &[grants::SCHEMA, approvals::pg::SCHEMA, pg_audit::SCHEMA];

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

/// The audit chain `state` names: its PostgreSQL database, else
/// `audit.db` in the state directory.
pub fn audit_backend(state: &StatePaths) -> Result<Arc<dyn AuditStore>, pg::SharedError> {
    Ok(match &state.database_url {
        Some(url) => Arc::new(pg_audit::PgAudit::new(pg::Pg::shared(url)?)),
        None => Arc::new(SqliteAudit::new(&state.audit_db)),
    })
}
