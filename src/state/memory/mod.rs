//! The memory store behind `gatehouse:executor/memory`: one namespace per
//! scope, in SQLite in the state directory (`memory.db`, [`MemoryDb`]) or
//! in a fleet's PostgreSQL ([`PgMemory`]).
//!
//! The host holds one [`MemoryDb`] and hands it to the runs whose plan
//! grants memory; it is opened at the first call that uses it, so a denied
//! turn never creates it, and a run cannot name another database. Every write through the binding is
//! journaled ahead of it (`crate::sandbox::bindings::memory`: a journal that cannot
//! be written fails the write), so `gatehouse undo` reverses it with the
//! `delete_memory_by_id` pattern, skipping a key changed since.

pub mod pg;
pub mod sqlite;

use std::path::PathBuf;

pub use pg::PgMemory;
pub use sqlite::{MemoryDb, MemoryStore, SCHEMA_VERSION};

/// Keys are at most this long (bytes).
pub const MAX_KEY: usize = 256;
/// Values are at most this long (bytes).
pub const MAX_VALUE: usize = 64 << 10;

/// Why the memory store failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// SQLite refused to open, read or write the database.
    #[error("memory store `{path}`: {source}")]
    Store {
        /// The database file.
        path: PathBuf,
        /// Why.
        source: StoreCause,
    },
    /// A key that is empty or longer than 256 bytes (its first 64 characters).
    #[error("key `{0}` is empty or longer than 256 bytes")]
    BadKey(String),
    /// A value longer than 64 KiB (the key it was for).
    #[error("the value for `{0}` is longer than 64 KiB")]
    BadValue(String),
    /// The fleet's shared database failed (its message names it, its
    /// password redacted).
    #[error(transparent)]
    Shared(Box<dyn std::error::Error + Send + Sync>),
}

/// The memory store, on whichever backend the host's state is: the
/// embedded SQLite file ([`MemoryDb`]) or a fleet's PostgreSQL database
/// ([`PgMemory`]). Keys and values are checked the
/// same way on both ([`check_key`], [`check_value`]).
pub trait MemoryBackend: Send + Sync + std::fmt::Debug {
    /// The value of `key` in `scope`; `None` when it has none.
    fn get(&self, scope: &str, key: &str) -> Result<Option<String>, MemoryError>;

    /// The keys of `scope` that start with `prefix`, sorted (bytewise).
    fn list(&self, scope: &str, prefix: &str) -> Result<Vec<String>, MemoryError>;

    /// Sets `key` in `scope` to `value`, if `check` agrees: under the
    /// scope's write lock (no other writer of the scope, on any host of
    /// the backend, comes between), `check` is given the key's previous
    /// value and the number of keys the scope holds; the write is made
    /// only when it returns `true`. Returns whether it was made.
    fn set_if(
        &self,
        scope: &str,
        key: &str,
        value: &str,
        check: &mut dyn FnMut(Option<&str>, u64) -> bool,
    ) -> Result<bool, MemoryError>;

    /// Removes `key` from `scope`, if `check` agrees (given the key's
    /// previous value, under the scope's write lock as for
    /// [`MemoryBackend::set_if`]). Returns `None` when `check` refused,
    /// else whether the key existed.
    fn delete_if(
        &self,
        scope: &str,
        key: &str,
        check: &mut dyn FnMut(Option<&str>) -> bool,
    ) -> Result<Option<bool>, MemoryError>;

    /// Sets `key` in `scope` to `value`, replacing what it held.
    fn set(&self, scope: &str, key: &str, value: &str) -> Result<(), MemoryError> {
        self.set_if(scope, key, value, &mut |_, _| true).map(|_| ())
    }

    /// Removes `key`; whether it existed.
    fn delete(&self, scope: &str, key: &str) -> Result<bool, MemoryError> {
        self.delete_if(scope, key, &mut |_| true)
            .map(|d| d.unwrap_or(false))
    }
}

/// Refuses a key that is empty or longer than [`MAX_KEY`].
pub fn check_key(key: &str) -> Result<(), MemoryError> {
    if key.is_empty() || key.len() > MAX_KEY {
        return Err(MemoryError::BadKey(key.chars().take(64).collect()));
    }
    Ok(())
}

/// Refuses a value longer than [`MAX_VALUE`] (naming its key).
pub fn check_value(key: &str, value: &str) -> Result<(), MemoryError> {
    if value.len() > MAX_VALUE {
        return Err(MemoryError::BadValue(key.to_string()));
    }
    Ok(())
}

/// Why the memory database failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreCause {
    /// Its directory could not be created.
    #[error(transparent)]
    Io(std::io::Error),
    /// SQLite refused.
    #[error(transparent)]
    Sqlite(rusqlite::Error),
    /// Its opened connection was not kept.
    #[error("it could not be kept open")]
    NotKept,
    /// Its schema is of a later version than this build knows.
    #[error("its schema version {version} is newer than this build knows ({known}); run a newer gatehouse")]
    Newer {
        /// The version the database records.
        version: i64,
        /// The newest version this build knows.
        known: i64,
    },
}
