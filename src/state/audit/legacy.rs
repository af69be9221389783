//! The audit chain as builds before the chain's file kept it: SQLite,
//! `<state>/audit.db`, tables `chain` and `checkpoint`. Only read, to be
//! imported into `audit-chain.jsonl` ([`super::file`]); never
//! created or written.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::chain::{ChainRow, Checkpoint};
use super::StateError;

/// The one schema version those builds wrote (SQLite's `user_version`).
pub const SCHEMA_VERSION: i64 = 1;

/// The tables as those builds made them (for tests that make one).
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS chain (
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

/// The kept checkpoint and every record of the store at `path`, by
/// sequence number, read at one moment. A store of a later version is
/// refused.
pub fn read(path: &Path) -> Result<(Option<Checkpoint>, Vec<ChainRow>), StateError> {
    let err = |e| StateError::Sqlite {
        path: path.to_path_buf(),
        source: crate::util::Lowered(e),
    };
    let mut conn =
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(err)?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(err)?;
    if version > SCHEMA_VERSION {
        return Err(StateError::Newer {
            path: path.to_path_buf(),
            version,
            known: SCHEMA_VERSION,
        });
    }
    // One read transaction: the checkpoint and the rows of one moment.
    let tx = conn.transaction().map_err(err)?;
    let checkpoint = tx
        .query_row(
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
        .map_err(err)?;
    let rows = {
        let mut stmt = tx
            .prepare("SELECT seq, kind, turn, time, body, prev, hash FROM chain ORDER BY seq")
            .map_err(err)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(ChainRow {
                    seq: r.get(0)?,
                    kind: r.get(1)?,
                    turn: r.get(2)?,
                    time: r.get(3)?,
                    body: r.get(4)?,
                    prev: r.get(5)?,
                    hash: r.get(6)?,
                    format: super::chain::FORMAT_1,
                    node: None,
                    operations: None,
                })
            })
            .map_err(err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(err)?
    };
    tx.commit().map_err(err)?;
    Ok((checkpoint, rows))
}
