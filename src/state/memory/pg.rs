//! The memory store in a fleet's PostgreSQL: every node's actors share
//! one `memory` table, with the scope rules and caps of the embedded
//! store (the binding checks the grant and the cap; the store checks keys
//! and values the same way, [`super::check_key`]).
//!
//! A write is one transaction that first takes a transaction-scoped
//! advisory lock on its scope: the previous value and the scope's key
//! count that the caller's check sees (the cap, the journal's "before")
//! are still true when the write commits, whichever node writes next.

use std::sync::Arc;

use super::{check_key, check_value, MemoryBackend, MemoryError};
use crate::state::pg::{Pg, SharedError};

/// The memory table (schema version 2). The node role reads and writes
/// it; the approver has nothing to do with it.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS memory (
 scope text NOT NULL,
 key text NOT NULL,
 value text NOT NULL,
 PRIMARY KEY (scope, key)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON memory TO gatehouse_node;
";

/// The advisory lock space of memory scopes (the second key is the
/// scope's hash: two scopes may share a lock, never a scope two).
const LOCK_SPACE: i32 = 7_137_003;

/// The memory store in the shared database.
#[derive(Debug)]
pub struct PgMemory {
    pg: Arc<Pg>,
}

impl PgMemory {
    /// The store of `pg`'s database (nothing is connected yet).
    pub fn new(pg: Arc<Pg>) -> PgMemory {
        PgMemory { pg }
    }

    fn shared(e: SharedError) -> MemoryError {
        MemoryError::Shared(Box::new(e))
    }

    /// Runs `f` in one transaction holding `scope`'s write lock.
    fn locked<T>(
        &self,
        action: &'static str,
        scope: &str,
        f: impl FnOnce(&mut postgres::Transaction<'_>) -> Result<T, postgres::Error>,
    ) -> Result<T, MemoryError> {
        self.pg
            .with(action, |c| {
                let mut tx = c.transaction()?;
                tx.execute(
                    "SELECT pg_advisory_xact_lock($1, hashtext($2))",
                    &[&LOCK_SPACE, &scope],
                )?;
                let out = f(&mut tx)?;
                tx.commit()?;
                Ok(out)
            })
            .map_err(Self::shared)
    }
}

fn previous(
    tx: &mut postgres::Transaction<'_>,
    scope: &str,
    key: &str,
) -> Result<Option<String>, postgres::Error> {
    Ok(tx
        .query_opt(
            "SELECT value FROM memory WHERE scope = $1 AND key = $2",
            &[&scope, &key],
        )?
        .map(|r| r.get(0)))
}

impl MemoryBackend for PgMemory {
    fn get(&self, scope: &str, key: &str) -> Result<Option<String>, MemoryError> {
        check_key(key)?;
        self.pg
            .with("cannot read the memory store", |c| {
                Ok(c.query_opt(
                    "SELECT value FROM memory WHERE scope = $1 AND key = $2",
                    &[&scope, &key],
                )?
                .map(|r| r.get(0)))
            })
            .map_err(Self::shared)
    }

    fn list(&self, scope: &str, prefix: &str) -> Result<Vec<String>, MemoryError> {
        // Bytewise, as SQLite sorts: `COLLATE "C"`; the prefix compared as
        // bytes too (no LIKE, whose `%` and `_` a key may hold).
        self.pg
            .with("cannot read the memory store", |c| {
                Ok(c.query(
                    "SELECT key FROM memory WHERE scope = $1 \
                     AND left(key, length($2)) = $2 ORDER BY key COLLATE \"C\"",
                    &[&scope, &prefix],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect())
            })
            .map_err(Self::shared)
    }

    fn set_if(
        &self,
        scope: &str,
        key: &str,
        value: &str,
        check: &mut dyn FnMut(Option<&str>, u64) -> bool,
    ) -> Result<bool, MemoryError> {
        check_key(key)?;
        check_value(key, value)?;
        self.locked("cannot write the memory store", scope, |tx| {
            let previous = previous(tx, scope, key)?;
            let count: i64 = tx
                .query_one("SELECT count(*) FROM memory WHERE scope = $1", &[&scope])?
                .get(0);
            if !check(previous.as_deref(), u64::try_from(count).unwrap_or(0)) {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO memory (scope, key, value) VALUES ($1, $2, $3) \
                 ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value",
                &[&scope, &key, &value],
            )?;
            Ok(true)
        })
    }

    fn delete_if(
        &self,
        scope: &str,
        key: &str,
        check: &mut dyn FnMut(Option<&str>) -> bool,
    ) -> Result<Option<bool>, MemoryError> {
        check_key(key)?;
        self.locked("cannot write the memory store", scope, |tx| {
            let previous = previous(tx, scope, key)?;
            if !check(previous.as_deref()) {
                return Ok(None);
            }
            let n = tx.execute(
                "DELETE FROM memory WHERE scope = $1 AND key = $2",
                &[&scope, &key],
            )?;
            Ok(Some(n > 0))
        })
    }
}
