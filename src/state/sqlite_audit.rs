//! The audit chain on the embedded backend: `<state>/audit.db`.
//!
//! One table of records, `chain`, and `checkpoint`, the last record a
//! prune removed. An append is one `BEGIN IMMEDIATE` transaction: SQLite's
//! write lock, taken first, serializes every appender on the head (the
//! threads of a host, which share the store's one connection behind a
//! mutex, and other processes, which wait for the lock up to
//! [`BUSY_TIMEOUT`]); the head is read, the record linked to it and
//! inserted, and the transaction committed before the append returns.
//! The log is written ahead (WAL) with `synchronous = NORMAL`: a commit
//! survives the process being killed at any point after it; a power loss
//! may lose the last commits, as it may the lines of `audit.jsonl` not yet
//! synced.
//!
//! The file is created at the first append (or by `gatehouse migrate`): a
//! host that records nothing leaves none, and reading a missing one finds
//! an empty chain.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::audit::{AuditStore, StateError};
use super::chain::{link_hash, verify, ChainRow, Checkpoint, GENESIS};

/// The schema version this build writes and reads (SQLite's
/// `user_version`). A database of a later version is refused, never
/// written.
pub const SCHEMA_VERSION: i64 = 1;

/// How long an appender waits for another connection's write lock.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS chain (
 seq INTEGER PRIMARY KEY,
 kind TEXT NOT NULL,
 turn TEXT NOT NULL,
 time TEXT NOT NULL,
 body TEXT NOT NULL,
 prev TEXT NOT NULL,
 hash TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoint (
 seq INTEGER NOT NULL,
 hash TEXT NOT NULL
);";

/// The audit chain in one SQLite file.
pub struct SqliteAudit {
    path: PathBuf,
    /// Opened at the first append: turns take turns with it.
    conn: OnceLock<Mutex<Connection>>,
}

impl std::fmt::Debug for SqliteAudit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteAudit")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteAudit {
    /// The chain in `path` (`<state>/audit.db`); nothing is opened or
    /// created yet.
    pub fn new(path: &Path) -> SqliteAudit {
        SqliteAudit {
            path: path.to_path_buf(),
            conn: OnceLock::new(),
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sqlite(&self) -> impl Fn(rusqlite::Error) -> StateError + '_ {
        move |e| StateError::Sqlite {
            path: self.path.clone(),
            source: crate::util::Lowered(e),
        }
    }

    /// Opens the file (creating it and its directory), in WAL mode,
    /// brought to [`SCHEMA_VERSION`]; refuses a later version.
    fn open(&self) -> Result<Connection, StateError> {
        if let Some(parent) = self.path.parent() {
            if !parent.as_os_str().is_empty() && !parent.exists() {
                std::fs::create_dir_all(parent).map_err(|e| StateError::CreateDir {
                    path: parent.to_path_buf(),
                    source: e.into(),
                })?;
            }
        }
        let err = self.sqlite();
        // Other processes may be creating the same file at this moment:
        // the schema is set up under the write lock, retried while busy.
        let (conn, made) = crate::util::sqlite::open_versioned(
            &self.path,
            BUSY_TIMEOUT,
            SCHEMA,
            SCHEMA_VERSION,
            |_| Ok(()),
        )
        .map_err(&err)?;
        // In WAL mode a commit is durable against the process dying
        // without a sync per commit (see the module documentation).
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(&err)?;
        if let Err(version) = made {
            return Err(StateError::Newer {
                path: self.path.clone(),
                version,
                known: SCHEMA_VERSION,
            });
        }
        Ok(conn)
    }

    /// The store's connection, opened at the first call.
    fn conn(&self) -> Result<std::sync::MutexGuard<'_, Connection>, StateError> {
        let m = match self.conn.get() {
            Some(m) => m,
            None => {
                let opened = self.open()?;
                // Another thread may have opened it meanwhile: one is kept.
                self.conn.get_or_init(|| Mutex::new(opened))
            }
        };
        Ok(crate::util::lock(m))
    }

    /// The connection, or `None` when the file does not exist and was
    /// never opened: reading never creates it.
    fn existing(&self) -> Result<Option<std::sync::MutexGuard<'_, Connection>>, StateError> {
        if self.conn.get().is_none() && !self.path.exists() {
            return Ok(None);
        }
        self.conn().map(Some)
    }

    /// Creates the database, or brings it to [`SCHEMA_VERSION`]; its
    /// version then. Refuses a later version.
    pub fn migrate(&self) -> Result<i64, StateError> {
        drop(self.conn()?);
        Ok(SCHEMA_VERSION)
    }
}

/// The checkpoint, if a prune kept one.
fn read_checkpoint(conn: &Connection) -> rusqlite::Result<Option<Checkpoint>> {
    conn.query_row(
        "SELECT seq, hash FROM checkpoint ORDER BY seq DESC LIMIT 1",
        [],
        |r| {
            Ok(Checkpoint {
                seq: r.get(0)?,
                hash: r.get(1)?,
            })
        },
    )
    .optional()
}

/// Every record, by sequence number.
fn read_rows(conn: &Connection) -> rusqlite::Result<Vec<ChainRow>> {
    read_rows_before(conn, None)
}

/// Every record before sequence number `end` (`None`: every record), by
/// sequence number.
fn read_rows_before(conn: &Connection, end: Option<i64>) -> rusqlite::Result<Vec<ChainRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, kind, turn, time, body, prev, hash FROM chain \
         WHERE ?1 IS NULL OR seq < ?1 ORDER BY seq",
    )?;
    let rows = stmt.query_map(params![end], |r| {
        Ok(ChainRow {
            seq: r.get(0)?,
            kind: r.get(1)?,
            turn: r.get(2)?,
            time: r.get(3)?,
            body: r.get(4)?,
            prev: r.get(5)?,
            hash: r.get(6)?,
        })
    })?;
    rows.collect()
}

impl AuditStore for SqliteAudit {
    fn append(&self, kind: &str, turn: &str, time: &str, body: &str) -> Result<i64, StateError> {
        let err = self.sqlite();
        let mut conn = self.conn()?;
        // The write lock first: no other appender reads the same head.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        let head: Option<(i64, String)> = tx
            .prepare_cached("SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1")
            .and_then(|mut s| s.query_row([], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .map_err(&err)?;
        let (last, prev) = match head {
            Some(h) => h,
            // Everything pruned: the chain goes on from the checkpoint.
            None => match read_checkpoint(&tx).map_err(&err)? {
                Some(c) => (c.seq, c.hash),
                None => (0, GENESIS.to_string()),
            },
        };
        let seq = last.saturating_add(1);
        let hash = link_hash(&prev, kind, turn, time, body);
        tx.prepare_cached(
            "INSERT INTO chain (seq, kind, turn, time, body, prev, hash) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .and_then(|mut s| s.execute(params![seq, kind, turn, time, body, prev, hash]))
        .map_err(&err)?;
        // Acknowledged only once committed.
        tx.commit().map_err(&err)?;
        Ok(seq)
    }

    fn rows(&self) -> Result<(Option<Checkpoint>, Vec<ChainRow>), StateError> {
        let err = self.sqlite();
        let Some(mut conn) = self.existing()? else {
            return Ok((None, Vec::new()));
        };
        // One read transaction: the checkpoint and the rows of one moment
        // (a prune commits both together).
        let tx = conn.transaction().map_err(&err)?;
        let checkpoint = read_checkpoint(&tx).map_err(&err)?;
        let rows = read_rows(&tx).map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok((checkpoint, rows))
    }

    fn prune_before(&self, cutoff: &str, dry_run: bool) -> Result<u64, StateError> {
        let err = self.sqlite();
        let Some(mut conn) = self.existing()? else {
            return Ok(0);
        };
        // First read and verify what would go, in a read transaction:
        // appenders are not held back while it is hashed.
        let tx = conn.transaction().map_err(&err)?;
        // Records go in order: up to the first one at or after the cutoff
        // (a record appended late with an earlier time stays with those
        // after it).
        let keep_from: Option<i64> = tx
            .query_row(
                "SELECT MIN(seq) FROM chain WHERE time >= ?1",
                params![cutoff],
                |r| r.get(0),
            )
            .map_err(&err)?;
        let checkpoint = read_checkpoint(&tx).map_err(&err)?;
        let rows = read_rows_before(&tx, keep_from).map_err(&err)?;
        tx.commit().map_err(&err)?;
        let Some(last) = rows.last() else {
            return Ok(0);
        };
        // The part removed must verify: a new checkpoint past a tampered
        // record would hide it for good.
        if let Err(broken) = verify(checkpoint.as_ref(), &rows) {
            return Err(StateError::Broken {
                path: self.path.clone(),
                broken,
            });
        }
        let removed = rows.len() as u64;
        if dry_run {
            return Ok(removed);
        }
        // Then remove them under the write lock, if they are still what
        // was verified (the same checkpoint, the same count, the same last
        // hash): only appends may have happened meanwhile.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        let (count, last_hash): (i64, Option<String>) = tx
            .query_row(
                "SELECT COUNT(*), (SELECT hash FROM chain WHERE seq = ?1) FROM chain WHERE seq <= ?1",
                params![last.seq],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(&err)?;
        let same = read_checkpoint(&tx).map_err(&err)? == checkpoint
            && u64::try_from(count).is_ok_and(|c| c == removed)
            && last_hash.as_deref() == Some(last.hash.as_str());
        if !same {
            return Err(StateError::Changed {
                path: self.path.clone(),
            });
        }
        tx.execute("DELETE FROM chain WHERE seq <= ?1", params![last.seq])
            .map_err(&err)?;
        tx.execute("DELETE FROM checkpoint", []).map_err(&err)?;
        tx.execute(
            "INSERT INTO checkpoint (seq, hash) VALUES (?1, ?2)",
            params![last.seq, last.hash],
        )
        .map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{verify, Tamper};
    use std::sync::Arc;

    fn time(s: u32) -> String {
        format!("2026-12-06T10:{:02}:{:02}Z", s / 60, s % 60)
    }

    #[test]
    fn nothing_is_created_until_the_first_append() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/audit.db");
        let store = SqliteAudit::new(&path);
        assert_eq!(store.rows().unwrap(), (None, vec![]));
        assert_eq!(store.prune_before(&time(100), false).unwrap(), 0);
        assert!(!path.exists());
        assert_eq!(store.append("turn", "t-1", &time(1), "{}").unwrap(), 1);
        assert!(path.exists());
        let conn = Connection::open(&path).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn appended_records_link_and_verify() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteAudit::new(&dir.path().join("audit.db"));
        for i in 1..=5u32 {
            let seq = store
                .append(
                    "turn",
                    &format!("t-{i}"),
                    &time(i),
                    &format!("{{\"n\":{i}}}"),
                )
                .unwrap();
            assert_eq!(seq, i64::from(i));
        }
        let (cp, rows) = store.rows().unwrap();
        assert_eq!(cp, None);
        assert_eq!(rows[0].prev, GENESIS);
        assert_eq!(rows[0].body, "{\"n\":1}");
        let v = verify(None, &rows).unwrap();
        assert_eq!((v.records, v.first_seq, v.last_seq), (5, Some(1), Some(5)));
        // Another connection (another process) reads the same chain.
        let other = SqliteAudit::new(store.path());
        assert_eq!(other.rows().unwrap().1, rows);
    }

    #[test]
    fn a_later_schema_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        SqliteAudit::new(&path).migrate().unwrap();
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", 2)
            .unwrap();
        let e = SqliteAudit::new(&path)
            .append("turn", "t", &time(1), "{}")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "audit database `{}`: its schema version 2 is newer than this build knows (1); run a newer gatehouse",
                path.display()
            )
        );
    }

    #[test]
    fn prune_keeps_a_checkpoint_and_the_rest_still_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteAudit::new(&dir.path().join("audit.db"));
        for i in 1..=6u32 {
            store
                .append("turn", &format!("t-{i}"), &time(i), "{}")
                .unwrap();
        }
        let (_, before) = store.rows().unwrap();
        // A dry run counts and removes nothing.
        assert_eq!(store.prune_before(&time(4), true).unwrap(), 3);
        assert_eq!(store.rows().unwrap(), (None, before.clone()));
        assert_eq!(store.prune_before(&time(4), false).unwrap(), 3);
        let (cp, rows) = store.rows().unwrap();
        assert_eq!(
            cp,
            Some(Checkpoint {
                seq: 3,
                hash: before[2].hash.clone()
            })
        );
        assert_eq!(rows, before[3..]);
        let v = verify(cp.as_ref(), &rows).unwrap();
        assert_eq!((v.records, v.first_seq, v.last_seq), (3, Some(4), Some(6)));
        // Nothing older left: nothing more goes.
        assert_eq!(store.prune_before(&time(4), false).unwrap(), 0);
        // Everything goes; the chain goes on from the checkpoint.
        assert_eq!(store.prune_before(&time(100), false).unwrap(), 3);
        let (cp, rows) = store.rows().unwrap();
        assert_eq!(cp.as_ref().map(|c| c.seq), Some(6));
        assert!(rows.is_empty());
        assert_eq!(store.append("denial", "t-7", &time(7), "{}").unwrap(), 7);
        let (cp, rows) = store.rows().unwrap();
        assert_eq!(rows[0].prev, before[5].hash);
        assert_eq!(verify(cp.as_ref(), &rows).unwrap().records, 1);
    }

    #[test]
    fn prune_refuses_to_remove_a_broken_part_of_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let store = SqliteAudit::new(&path);
        for i in 1..=4u32 {
            store
                .append("turn", &format!("t-{i}"), &time(i), "{}")
                .unwrap();
        }
        Connection::open(&path)
            .unwrap()
            .execute("UPDATE chain SET body = '{\"x\":1}' WHERE seq = 2", [])
            .unwrap();
        for dry_run in [true, false] {
            let e = store.prune_before(&time(100), dry_run).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "audit database `{}`: record 2 (turn `t-2`) was edited; nothing was pruned (a prune never removes a broken part of the chain)",
                    path.display()
                )
            );
        }
        let (cp, rows) = store.rows().unwrap();
        assert_eq!((cp, rows.len()), (None, 4));
        assert_eq!(verify(None, &rows).unwrap_err().how, Tamper::Edited);
    }

    #[test]
    fn a_prune_while_records_are_appended_leaves_a_whole_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let store = SqliteAudit::new(&path);
        store.append("turn", "t-0", &time(0), "{}").unwrap();
        let appender = {
            let path = path.clone();
            std::thread::spawn(move || {
                let store = SqliteAudit::new(&path);
                for i in 1..=300u32 {
                    store
                        .append("turn", &format!("t-{i}"), &time(i), "{}")
                        .unwrap();
                }
            })
        };
        let mut removed = 0;
        while !appender.is_finished() {
            match store.prune_before(&time(150), false) {
                Ok(n) => removed += n,
                // Another prune's race: nothing removed, tried again.
                Err(StateError::Changed { .. }) => {}
                Err(e) => panic!("{e}"),
            }
        }
        appender.join().unwrap();
        removed += store.prune_before(&time(150), false).unwrap();
        assert_eq!(removed, 150);
        let (cp, rows) = store.rows().unwrap();
        assert_eq!(cp.as_ref().map(|c| c.seq), Some(150));
        let v = verify(cp.as_ref(), &rows).unwrap();
        assert_eq!(
            (v.records, v.first_seq, v.last_seq),
            (151, Some(151), Some(301))
        );
    }

    #[test]
    fn processes_appending_their_first_record_at_once_all_succeed() {
        // Each store is a process of its own that finds no file yet: they
        // create it, switch it to WAL and make its tables at one moment.
        for round in 0..10 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("audit.db");
            let barrier = Arc::new(std::sync::Barrier::new(4));
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    let (path, barrier) = (path.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        let store = SqliteAudit::new(&path);
                        barrier.wait();
                        store
                            .append("turn", &format!("t{t}"), &time(0), "{}")
                            .unwrap_or_else(|e| panic!("round {round}: {e}"))
                    })
                })
                .collect();
            let mut seqs: Vec<i64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            seqs.sort_unstable();
            assert_eq!(seqs, vec![1, 2, 3, 4]);
            let (cp, rows) = SqliteAudit::new(&path).rows().unwrap();
            assert_eq!(verify(cp.as_ref(), &rows).unwrap().records, 4);
        }
    }

    #[test]
    fn concurrent_appenders_make_one_whole_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let shared = Arc::new(SqliteAudit::new(&path));
        const EACH: usize = 200;
        // Two threads on one store (one connection, as in a host) and two
        // with stores of their own (separate connections, as separate
        // processes have), all at once.
        let mut handles = Vec::new();
        for t in 0..4 {
            let store: Arc<SqliteAudit> = if t < 2 {
                shared.clone()
            } else {
                Arc::new(SqliteAudit::new(&path))
            };
            handles.push(std::thread::spawn(move || {
                let mut seqs = Vec::new();
                for i in 0..EACH {
                    seqs.push(
                        store
                            .append("turn", &format!("t{t}-{i}"), &time(0), "{}")
                            .unwrap(),
                    );
                }
                seqs
            }));
        }
        let mut seqs: Vec<i64> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        seqs.sort_unstable();
        let all = (4 * EACH) as i64;
        assert_eq!(seqs, (1..=all).collect::<Vec<_>>());
        let (cp, rows) = shared.rows().unwrap();
        let v = verify(cp.as_ref(), &rows).unwrap();
        assert_eq!(
            (v.records, v.first_seq, v.last_seq),
            (all as u64, Some(1), Some(all))
        );
    }
}
