//! The shared state of a host and its backends.
//!
//! What a host keeps beyond one turn (grants, pending approvals, the
//! audit, the memory store, the history index) lives either in SQLite
//! files in the state directory (the embedded default) or, for a fleet of
//! hosts, in one PostgreSQL database named by `[state] database_url` in
//! `gatehouse.toml` or `$GATEHOUSE_DATABASE_URL` ([`pg`]). Each kind of
//! state is one trait with an implementation per backend; the host picks
//! them once, from [`crate::config::StatePaths::database_url`].

pub mod approvals;
pub mod grants;
pub mod pg;

use std::sync::Arc;

use crate::config::StatePaths;

/// The PostgreSQL schema of version 1, in the order `migrate` runs it
/// (after `gatehouse_meta` and the roles exist).
pub const SCHEMA_1: &[&str] = &[grants::SCHEMA, approvals::pg::SCHEMA];

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
