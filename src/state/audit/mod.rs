//! The audit chain behind one trait: what every backend of it answers
//! ([`AuditStore`]), and how it fails ([`StateError`]).

use std::path::PathBuf;

pub mod chain;
pub mod file;
pub mod legacy;
pub mod pg;

use chain::{Broken, ChainRow, Checkpoint};

/// What a record of the chain is: a turn's audit record.
pub const KIND_TURN: &str = "turn";
/// What a record of the chain is: a denial record.
pub const KIND_DENIAL: &str = "denial";

/// Why a state store could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The directory that holds the database could not be created.
    #[error("cannot create `{path}`")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: crate::util::IoCause,
    },
    /// SQLite refused to open, read or write the audit database.
    #[error("audit database `{path}`")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// Why.
        #[source]
        source: crate::util::Lowered<rusqlite::Error>,
    },
    /// The database's schema is of a later version than this build knows.
    #[error("audit chain `{path}`: its version {version} is newer than this build knows ({known}); run a newer gatehouse")]
    Newer {
        /// The database file.
        path: PathBuf,
        /// The version it records.
        version: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// The records a prune verified changed before it could remove them
    /// (another prune, or someone writing the file).
    #[error("audit chain `{path}` changed while it was being pruned; nothing was pruned")]
    Changed {
        /// The database file.
        path: PathBuf,
    },
    /// The chain's file could not be opened, read or written.
    #[error("audit chain `{path}`: cannot {action}")]
    File {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: crate::util::IoCause,
    },
    /// A line of the chain's file that must be read is not what it must
    /// be (line 0: its last line).
    #[error("audit chain `{path}`: {}{why}", if *line > 0 { format!("line {line}: ") } else { String::new() })]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The line (1: the header; 0: the last one).
        line: usize,
        /// What is wrong with it.
        why: String,
    },
    /// A fleet's database could not be used.
    #[error(transparent)]
    Shared(#[from] super::pg::SharedError),
    /// The batch this record was committed in failed (the leader's error,
    /// in words: every record of the batch failed with it).
    #[error("{0}")]
    Batch(String),
    /// A prune would remove a part of the chain that does not verify:
    /// removing it would hide the tampering behind a new checkpoint.
    #[error("audit chain `{path}`: {broken}; nothing was pruned (a prune never removes a broken part of the chain)")]
    Broken {
        /// The database file.
        path: PathBuf,
        /// The first bad record.
        broken: Broken,
    },
}

/// The audit chain of a state backend: one hash-chained log per database
/// of every turn's audit record and every denial record (see
/// [`chain`]).
///
/// Object-safe: a host holds an `Arc<dyn AuditStore>`, whichever backend
/// it runs on.
pub trait AuditStore: Send + Sync {
    /// Appends one record (`kind` is [`KIND_TURN`] or [`KIND_DENIAL`]),
    /// linked to the chain's head; its sequence number.
    ///
    /// The record is committed (durable) before this returns, and only
    /// then is it acknowledged: never the other way round. Concurrent
    /// appenders, threads and processes alike, are serialized on the
    /// chain's head, so each links to the one before it.
    fn append(&self, kind: &str, turn: &str, time: &str, body: &str) -> Result<i64, StateError>;

    /// [`AuditStore::append`] of a body the caller encoded itself as one
    /// JSON object on one line (the host's audit and denial lines): a
    /// store that keeps a body that is JSON as it is need not parse it
    /// again to know it is. Otherwise the same as `append`.
    fn append_json(
        &self,
        kind: &str,
        turn: &str,
        time: &str,
        body: &str,
    ) -> Result<i64, StateError> {
        self.append(kind, turn, time, body)
    }

    /// [`AuditStore::append`] of a turn's record that also indexes the
    /// turn as run on `node` with `operations` journaled, in the same
    /// commit, when the store keeps a fleet's index (PostgreSQL's does);
    /// otherwise the same as `append`.
    fn append_indexed(
        &self,
        kind: &str,
        turn: &str,
        time: &str,
        body: &str,
        node: &str,
        operations: u64,
    ) -> Result<i64, StateError> {
        let _ = (node, operations);
        self.append(kind, turn, time, body)
    }

    /// The kept checkpoint (the last record pruned, if any) and every
    /// record after it, in stored order (by sequence number), read at one
    /// moment. A store that was never written has none.
    fn rows(&self) -> Result<(Option<Checkpoint>, Vec<ChainRow>), StateError>;

    /// Removes the records before the first one at or after `cutoff`
    /// (times compare as the RFC 3339 UTC strings they are), and keeps
    /// the last one removed as the checkpoint, in one transaction; with
    /// `dry_run`, only counts them. Refuses ([`StateError::Broken`]) to
    /// remove records that do not verify. How many records it removed (or
    /// would).
    fn prune_before(&self, cutoff: &str, dry_run: bool) -> Result<u64, StateError>;
}
