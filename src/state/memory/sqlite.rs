//! The embedded memory store: `memory.db` in the state directory.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};

use super::{check_key, check_value, MemoryBackend, MemoryError, StoreCause};

/// The schema version this build writes and reads (SQLite's
/// `user_version`; 0 is the same table before versions were recorded). A
/// database of a later version is refused, never written.
pub const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS memory (
 scope TEXT NOT NULL,
 key TEXT NOT NULL,
 value TEXT NOT NULL,
 PRIMARY KEY (scope, key)
);";

/// The host's memory database: where it is, and its one connection once a
/// run used it (turns take turns with it).
#[derive(Debug)]
pub struct MemoryDb {
    path: PathBuf,
    store: std::sync::OnceLock<std::sync::Mutex<MemoryStore>>,
}

impl MemoryDb {
    /// The database at `path`, not opened yet.
    pub fn new(path: PathBuf) -> MemoryDb {
        MemoryDb {
            path,
            store: std::sync::OnceLock::new(),
        }
    }

    /// Its connection, opened (and the file created) at the first call.
    pub fn store(&self) -> Result<std::sync::MutexGuard<'_, MemoryStore>, MemoryError> {
        if self.store.get().is_none() {
            let opened = MemoryStore::open(&self.path)?;
            // Another run may have opened it meanwhile: one is kept.
            let _ = self.store.set(std::sync::Mutex::new(opened));
        }
        match self.store.get() {
            Some(m) => Ok(crate::util::lock(m)),
            None => Err(MemoryError::Store {
                path: self.path.clone(),
                source: StoreCause::NotKept,
            }),
        }
    }
}

/// How long a write waits for another connection's lock.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// One connection to the memory database.
#[derive(Debug)]
pub struct MemoryStore {
    path: PathBuf,
    conn: Connection,
}

impl MemoryStore {
    /// Opens (creating) `path`, in WAL mode.
    pub fn open(path: &Path) -> Result<MemoryStore, MemoryError> {
        let err = |source: StoreCause| MemoryError::Store {
            path: path.to_path_buf(),
            source,
        };
        let sqlite = |e| err(StoreCause::Sqlite(e));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| err(StoreCause::Io(e)))?;
        }
        // Other processes may be creating the same file at this moment:
        // the schema is set up under the write lock, retried while busy.
        let (conn, made) =
            crate::util::sqlite::open_versioned(path, BUSY_TIMEOUT, SCHEMA, SCHEMA_VERSION, |_| {
                Ok(())
            })
            .map_err(&sqlite)?;
        if let Err(version) = made {
            return Err(err(StoreCause::Newer {
                version,
                known: SCHEMA_VERSION,
            }));
        }
        Ok(MemoryStore {
            path: path.to_path_buf(),
            conn,
        })
    }

    fn err(&self, e: rusqlite::Error) -> MemoryError {
        sqlite_at(&self.path)(e)
    }

    fn check_key(key: &str) -> Result<(), MemoryError> {
        check_key(key)
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction (SQLite's write
    /// lock, for every process on the file), committed when it returns
    /// `Ok`, else rolled back.
    fn write_tx<T>(
        &mut self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        let sqlite = sqlite_at(&self.path);
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&sqlite)?;
        let out = f(&tx)?;
        tx.commit().map_err(&sqlite)?;
        Ok(out)
    }

    /// The value of `key` in `scope`; `None` when it has none.
    pub fn get(&self, scope: &str, key: &str) -> Result<Option<String>, MemoryError> {
        Self::check_key(key)?;
        self.conn
            .prepare_cached("SELECT value FROM memory WHERE scope = ?1 AND key = ?2")
            .and_then(|mut s| s.query_row(params![scope, key], |r| r.get(0)).optional())
            .map_err(|e| self.err(e))
    }

    /// Sets `key` in `scope` to `value`, replacing what it held.
    pub fn set(&self, scope: &str, key: &str, value: &str) -> Result<(), MemoryError> {
        Self::check_key(key)?;
        check_value(key, value)?;
        self.conn
            .prepare_cached(
                "INSERT INTO memory (scope, key, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value",
            )
            .and_then(|mut s| s.execute(params![scope, key, value]))
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Removes `key`; whether it existed.
    pub fn delete(&self, scope: &str, key: &str) -> Result<bool, MemoryError> {
        Self::check_key(key)?;
        self.conn
            .prepare_cached("DELETE FROM memory WHERE scope = ?1 AND key = ?2")
            .and_then(|mut s| s.execute(params![scope, key]))
            .map(|n| n > 0)
            .map_err(|e| self.err(e))
    }

    /// How many keys `scope` holds.
    pub fn count(&self, scope: &str) -> Result<u64, MemoryError> {
        self.conn
            .prepare_cached("SELECT COUNT(*) FROM memory WHERE scope = ?1")
            .and_then(|mut s| s.query_row(params![scope], |r| r.get::<_, i64>(0)))
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(|e| self.err(e))
    }

    /// The keys of `scope` that start with `prefix`, sorted.
    pub fn list(&self, scope: &str, prefix: &str) -> Result<Vec<String>, MemoryError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT key FROM memory WHERE scope = ?1 AND substr(key, 1, length(?2)) = ?2 ORDER BY key")
            .map_err(|e| self.err(e))?;
        let keys = stmt
            .query_map(params![scope, prefix], |r| r.get(0))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<String>>>())
            .map_err(|e| self.err(e))?;
        Ok(keys)
    }
}

impl MemoryBackend for MemoryDb {
    fn get(&self, scope: &str, key: &str) -> Result<Option<String>, MemoryError> {
        self.store()?.get(scope, key)
    }

    fn list(&self, scope: &str, prefix: &str) -> Result<Vec<String>, MemoryError> {
        self.store()?.list(scope, prefix)
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
        let mut store = self.store()?;
        let path = store.path.clone();
        let sqlite = sqlite_at(&path);
        store.write_tx(|tx| {
            let previous = read_value(tx, scope, key).map_err(&sqlite)?;
            let count = count_keys(tx, scope).map_err(&sqlite)?;
            if !check(previous.as_deref(), count) {
                return Ok(false);
            }
            tx.prepare_cached(
                "INSERT INTO memory (scope, key, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value",
            )
            .and_then(|mut s| s.execute(params![scope, key, value]))
            .map_err(&sqlite)?;
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
        let mut store = self.store()?;
        let path = store.path.clone();
        let sqlite = sqlite_at(&path);
        store.write_tx(|tx| {
            let previous = read_value(tx, scope, key).map_err(&sqlite)?;
            if !check(previous.as_deref()) {
                return Ok(None);
            }
            tx.prepare_cached("DELETE FROM memory WHERE scope = ?1 AND key = ?2")
                .and_then(|mut s| s.execute(params![scope, key]))
                .map(|n| Some(n > 0))
                .map_err(&sqlite)
        })
    }
}

/// The error of SQLite `e` on the database at `path`.
fn sqlite_at(path: &Path) -> impl Fn(rusqlite::Error) -> MemoryError + '_ {
    move |e| MemoryError::Store {
        path: path.to_path_buf(),
        source: StoreCause::Sqlite(e),
    }
}

fn read_value(conn: &Connection, scope: &str, key: &str) -> rusqlite::Result<Option<String>> {
    conn.prepare_cached("SELECT value FROM memory WHERE scope = ?1 AND key = ?2")
        .and_then(|mut s| s.query_row(params![scope, key], |r| r.get(0)).optional())
}

fn count_keys(conn: &Connection, scope: &str) -> rusqlite::Result<u64> {
    conn.prepare_cached("SELECT COUNT(*) FROM memory WHERE scope = ?1")
        .and_then(|mut s| s.query_row(params![scope], |r| r.get::<_, i64>(0)))
        .map(|n| u64::try_from(n).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::memory::MAX_VALUE;

    #[test]
    fn scopes_are_separate_namespaces() {
        let dir = tempfile::tempdir().unwrap();
        let m = MemoryStore::open(&dir.path().join("memory.db")).unwrap();
        m.set("notes", "a", "1").unwrap();
        m.set("notes", "ab", "2").unwrap();
        m.set("other", "a", "x").unwrap();
        assert_eq!(m.get("notes", "a").unwrap().as_deref(), Some("1"));
        assert_eq!(m.get("other", "a").unwrap().as_deref(), Some("x"));
        assert_eq!(m.list("notes", "a").unwrap(), vec!["a", "ab"]);
        assert_eq!(m.list("notes", "ab").unwrap(), vec!["ab"]);
        assert_eq!(m.list("notes", "%").unwrap(), Vec::<String>::new());
        assert!(m.delete("notes", "a").unwrap());
        assert!(!m.delete("notes", "a").unwrap());
        assert_eq!(m.get("notes", "a").unwrap(), None);
        assert!(matches!(
            m.set("notes", "", "v"),
            Err(MemoryError::BadKey(_))
        ));
        assert!(matches!(
            m.set("notes", "k", &"v".repeat(MAX_VALUE + 1)),
            Err(MemoryError::BadValue(_))
        ));
    }

    #[test]
    fn a_refused_check_writes_nothing_and_sees_the_previous_value_and_count() {
        let dir = tempfile::tempdir().unwrap();
        let db = MemoryDb::new(dir.path().join("memory.db"));
        db.set("notes", "a", "1").unwrap();
        let mut seen = Vec::new();
        let written = db
            .set_if("notes", "a", "2", &mut |previous, count| {
                seen.push((previous.map(String::from), count));
                false
            })
            .unwrap();
        assert!(!written);
        assert_eq!(seen, vec![(Some("1".to_string()), 1)]);
        assert_eq!(
            MemoryBackend::get(&db, "notes", "a").unwrap().as_deref(),
            Some("1")
        );
        assert_eq!(db.delete_if("notes", "a", &mut |_| false).unwrap(), None);
        assert_eq!(MemoryBackend::list(&db, "notes", "").unwrap(), vec!["a"]);
        assert_eq!(
            db.delete_if("notes", "a", &mut |p| p == Some("1")).unwrap(),
            Some(true)
        );
        assert!(!MemoryBackend::delete(&db, "notes", "a").unwrap());
        assert!(matches!(
            db.set_if("notes", "", "v", &mut |_, _| true),
            Err(MemoryError::BadKey(_))
        ));
    }
}
