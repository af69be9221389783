//! The errors of the grant store.

use std::path::PathBuf;

use crate::policy::registry::UnknownCapability;
use crate::policy::{Capability, TargetError, UtcTime};

/// How a `grants` table differs from the one this gatehouse reads.
#[derive(Debug, thiserror::Error)]
pub enum WrongSchema {
    /// Its columns: SQLite's refusal to select them.
    #[error(transparent)]
    Columns(rusqlite::Error),
    /// A newer schema version.
    #[error("its schema version is {version}; this gatehouse knows versions up to {known}")]
    Newer {
        /// The file's version.
        version: i64,
        /// The newest this gatehouse knows.
        known: i64,
    },
}

/// Everything that can go wrong opening, reading or writing the grant store.
///
/// Messages are lowercase and put user input in backticks.
/// [`GrantError::is_invalid_input`] splits them into "the input was wrong"
/// (the CLI's validation exit code) and "the host failed" (plain failure).
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// The capability name is not in the closed registry.
    #[error(transparent)]
    UnknownCapability(#[from] UnknownCapability),
    /// An `always`-class capability: a grant could never stand in for its
    /// per-use approval, so recording one is refused.
    #[error(
        "`{0}` is an always-class capability: every use needs a fresh approval, so it cannot be granted"
    )]
    AlwaysClass(Capability),
    /// A capability that takes no target (and is approved by the matrix
    /// alone), so there is nothing for a grant to name.
    #[error("`{0}` takes no target and needs no grant")]
    NoTarget(Capability),
    /// The target is not a valid pattern for the capability's target kind.
    #[error("invalid target for `{capability}`: {source}")]
    BadTarget {
        /// The capability.
        capability: Capability,
        /// Why the target is not a valid pattern.
        #[source]
        source: TargetError,
    },
    /// The identity's channel or sender id is empty.
    #[error("a grant needs a non-empty {0}")]
    EmptyIdentity(&'static str),
    /// The requested expiry is not after the recording time.
    #[error("expiry `{expires_at}` is not in the future (now is `{now}`)")]
    ExpiryNotInFuture {
        /// The expiry asked for.
        expires_at: UtcTime,
        /// The recording time.
        now: UtcTime,
    },
    /// A duration such as `10m` could not be parsed.
    #[error("malformed duration `{value}`: {why}")]
    BadDuration {
        /// The duration as written.
        value: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// No row has this id.
    #[error("no grant with id `{0}`")]
    NoSuchGrant(i64),
    /// The grant was revoked before.
    #[error("grant `{0}` is already revoked")]
    AlreadyRevoked(i64),
    /// The file exists but is not an SQLite database.
    #[error("`{}` is not a grants database (file is not a database)", path.display())]
    NotADatabase {
        /// The file.
        path: PathBuf,
    },
    /// The file is an SQLite database whose `grants` table does not have the
    /// expected columns.
    #[error("`{}` is not a grants database ({why})", path.display())]
    WrongSchema {
        /// The file.
        path: PathBuf,
        /// How its `grants` table differs from the expected one (shown
        /// inside the message, so not its source).
        why: WrongSchema,
    },
    /// A row holds a value the store cannot read back (a hand-edited
    /// database). Reading that row fails, so it can never count as an
    /// active grant.
    #[error("grant `{id}` in `{}` has a malformed `{column}`: `{value}`", path.display())]
    MalformedRow {
        /// The database file.
        path: PathBuf,
        /// The row's id.
        id: i64,
        /// The column that cannot be read.
        column: &'static str,
        /// The value it holds.
        value: String,
    },
    /// The parent directory of the database could not be created.
    #[error("cannot create directory `{}`: {}", path.display(), crate::util::lower(&source.to_string()))]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The shared state (a fleet's PostgreSQL) failed or refused: a
    /// [`crate::state::pg::SharedError`], boxed so that the grants, below
    /// the state layer, need not name it.
    #[error(transparent)]
    Shared(Box<dyn std::error::Error + Send + Sync>),
    /// Any other SQLite failure (I/O, locking, permissions).
    #[error("grants database `{}`: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
}

impl GrantError {
    /// Whether the error is the caller's input being wrong — a validation
    /// failure, an unknown or already revoked id, a file that is not a
    /// grants database, a malformed row — rather than the host failing
    /// (I/O, locking, permissions). The CLI maps `true` to its validation
    /// exit code and `false` to plain failure.
    pub fn is_invalid_input(&self) -> bool {
        match self {
            GrantError::UnknownCapability(_)
            | GrantError::AlwaysClass(_)
            | GrantError::NoTarget(_)
            | GrantError::BadTarget { .. }
            | GrantError::EmptyIdentity(_)
            | GrantError::ExpiryNotInFuture { .. }
            | GrantError::BadDuration { .. }
            | GrantError::NoSuchGrant(_)
            | GrantError::AlreadyRevoked(_)
            | GrantError::NotADatabase { .. }
            | GrantError::WrongSchema { .. }
            | GrantError::MalformedRow { .. } => true,
            GrantError::CreateDir { .. } | GrantError::Sqlite { .. } | GrantError::Shared(_) => {
                false
            }
        }
    }
}
