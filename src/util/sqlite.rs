//! Opening a SQLite file that other processes may be opening, creating
//! or migrating at the same moment.
//!
//! A busy timeout makes a connection wait for most locks, but not all:
//! switching a new file to WAL, recovering another connection's WAL
//! index, and a write that follows a read made stale by another
//! connection's commit (`SQLITE_BUSY_SNAPSHOT`, as when two processes
//! create the same tables at once) return `SQLITE_BUSY` at once. Two
//! hosts starting on one state directory meet exactly these, so every
//! store opens through [`open_wal`]: the WAL switch is retried, and the
//! schema is set up in one `BEGIN IMMEDIATE` transaction (the write lock
//! first, so nothing read in it can go stale), retried the same way.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags, Transaction, TransactionBehavior};

/// Whether `e` is a lock SQLite did not wait for: worth trying again.
pub fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Runs `f` until it succeeds, fails other than busy, or `timeout` has
/// passed since the first try; sleeps a little longer each time.
pub fn retry_busy<T>(
    timeout: Duration,
    mut f: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match f() {
            Err(e) if is_busy(&e) && start.elapsed() < timeout => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// Opens (creating) the database at `path` read-write, with `busy` as
/// its busy timeout, in WAL mode, then runs `setup` once in a
/// `BEGIN IMMEDIATE` transaction that it commits when `setup` returns
/// `Ok(Ok(_))` (an `Ok(Err(_))`, a refusal of the caller's own, rolls it
/// back). Both steps are retried while busy, up to `busy`.
///
/// No `SQLITE_OPEN_URI`: a path is a path, even one starting `file:`.
/// The caller creates the parent directory.
pub fn open_wal<T, E>(
    path: &Path,
    busy: Duration,
    mut setup: impl FnMut(&Transaction<'_>) -> rusqlite::Result<Result<T, E>>,
) -> rusqlite::Result<(Connection, Result<T, E>)> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(busy)?;
    retry_busy(busy, || {
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
    })?;
    let outcome = retry_busy(busy, || {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let outcome = setup(&tx)?;
        if outcome.is_ok() {
            tx.commit()?;
        }
        Ok(outcome)
    })?;
    Ok((conn, outcome))
}

/// [`open_wal`] of a database whose schema is `schema` at version
/// `version` (SQLite's `user_version`): under the write lock, a later
/// version is refused (`Err(found)`, nothing written), else `schema` runs
/// (idempotent: `CREATE … IF NOT EXISTS`), then `upgrade` (for what
/// `schema` cannot express, such as added columns), and the version is
/// recorded.
pub fn open_versioned(
    path: &Path,
    busy: Duration,
    schema: &str,
    version: i64,
    mut upgrade: impl FnMut(&Transaction<'_>) -> rusqlite::Result<()>,
) -> rusqlite::Result<(Connection, Result<(), i64>)> {
    open_wal(path, busy, |tx| {
        let found: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if found > version {
            return Ok(Err(found));
        }
        tx.execute_batch(schema)?;
        upgrade(tx)?;
        if found < version {
            tx.pragma_update(None, "user_version", version)?;
        }
        Ok(Ok(()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    #[test]
    fn processes_creating_one_file_at_once_all_open_it() {
        for round in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("x.db");
            let barrier = Arc::new(Barrier::new(4));
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    let (path, barrier) = (path.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        let (conn, made) = open_wal(&path, Duration::from_secs(10), |tx| {
                            let v: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
                            tx.execute_batch(
                                "CREATE TABLE IF NOT EXISTS t (a INTEGER); PRAGMA user_version = 1;",
                            )?;
                            Ok(Ok::<_, ()>(v == 0))
                        })
                        .unwrap_or_else(|e| panic!("round {round}: {e}"));
                        conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
                        made.unwrap()
                    })
                })
                .collect();
            let made: Vec<bool> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            // Exactly one of them created the schema.
            assert_eq!(made.iter().filter(|m| **m).count(), 1, "{made:?}");
            let conn = Connection::open(&path).unwrap();
            let n: i64 = conn
                .query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
                .unwrap();
            assert_eq!(n, 4);
        }
    }

    #[test]
    fn a_refusal_of_the_callers_rolls_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        let (conn, refused) = open_wal(&path, Duration::from_secs(1), |tx| {
            tx.execute_batch("CREATE TABLE t (a INTEGER)")?;
            Ok(Err::<(), _>("newer"))
        })
        .unwrap();
        assert_eq!(refused, Err("newer"));
        let n: i64 = conn
            .query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0);
    }
}
