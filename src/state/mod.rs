//! The shared state of a host and its backends.
//!
//! What a host keeps beyond one turn (grants, pending approvals, the
//! audit, the memory store, the history index) lives either in SQLite
//! files in the state directory (the embedded default) or, for a fleet of
//! hosts, in one PostgreSQL database named by `[state] database_url` in
//! `gatehouse.toml` or `$GATEHOUSE_DATABASE_URL` ([`pg`]). Each kind of
//! state is one trait with an implementation per backend; [`Stores`]
//! picks them all once, from [`crate::config::StatePaths::database_url`].
//!
//! - [`audit`] — the audit chain's trait ([`AuditStore`]): one
//!   hash-chained log of every turn's audit record and every denial,
//!   which `gatehouse history verify` recomputes; [`audit::chain`] its pure
//!   part, [`audit::file`] and [`audit::pg`] its backends
//!   ([`audit::legacy`]: the SQLite chain of earlier builds, imported).
//! - [`grants`], [`approvals`]: the grant store and the pending-approval
//!   queue, each a trait with a SQLite and a PostgreSQL implementation.
//! - [`history`]: a fleet's history index (every node's turns).
//! - [`parked`]: a fleet's parked MCP turns, answerable on any node.
//! - [`memory`]: the memory store behind `gatehouse:executor/memory`.

pub mod approvals;
pub mod audit;
pub mod grants;
pub mod history;
pub mod memory;
pub mod parked;
pub mod pg;
pub mod stores;
pub mod tasks;

pub use audit::chain::{
    link_hash, verify, Broken, ChainRow, Checkpoint, Tamper, Verified, GENESIS,
};
pub use audit::file::FileAudit;
pub use audit::{AuditStore, StateError, KIND_DENIAL, KIND_TURN};
pub use stores::{migrate, Fleet, Migrated, OpenError, Stores};

/// The PostgreSQL schema of version 1, in the order `migrate` runs it
/// (after `gatehouse_meta` and the roles exist).
pub const SCHEMA_1: &[&str] = &[grants::pg::SCHEMA, approvals::pg::SCHEMA, audit::pg::SCHEMA];

/// What version 2 adds to version 1: the shared memory store, the
/// history index and the parked MCP turns.
pub const SCHEMA_2: &[&str] = &[memory::pg::SCHEMA, history::SCHEMA, parked::SCHEMA];

/// What version 3 adds: the fleet's MCP tasks.
pub const SCHEMA_3: &[&str] = &[tasks::SCHEMA];

/// What version 4 changes: each node links its own audit records, and the
/// history index is read from the chain's turn rows (no trigger runs in a
/// turn's commit).
pub const SCHEMA_4: &[&str] = &[audit::pg::SCHEMA_4, history::SCHEMA_4];

/// What version 5 adds: the chain's rows indexed by turn, for the history
/// index's lookups.
pub const SCHEMA_5: &[&str] = &[history::SCHEMA_5];

/// What version 6 changes (security round 3): a node's role may change
/// only a task's status, result, timestamps, cancel mark and runner, and
/// writes a task's call and form once, bound by a hash; it records a
/// grant only as the grant of an answer; the chain's records hash their
/// node and operation count (format 2).
pub const SCHEMA_6: &[&str] = &[tasks::SCHEMA_6, grants::pg::SCHEMA_6, audit::pg::SCHEMA_6];

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
