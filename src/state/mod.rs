//! The shared state of a host and its backends.
//!
//! Each store the host keeps is a trait, so that the embedded backend
//! (SQLite files in the state directory) and a shared one (PostgreSQL,
//! for a fleet) answer the same calls.
//!
//! - [`audit`] — the audit chain's trait ([`AuditStore`]): one
//!   hash-chained log of every turn's audit record and every denial,
//!   which `gatehouse history verify` recomputes.
//! - [`chain`] — its pure part: the link hash, the rows, the verifier.
//! - [`sqlite_audit`] — its embedded backend, `<state>/audit.db`.

pub mod audit;
pub mod chain;
pub mod sqlite_audit;

pub use audit::{AuditStore, StateError, KIND_DENIAL, KIND_TURN};
pub use chain::{link_hash, verify, Broken, ChainRow, Checkpoint, Tamper, Verified, GENESIS};
pub use sqlite_audit::SqliteAudit;
