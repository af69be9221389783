//! The SQLite grant store and `effective_outcome` over it.
//!
//! A grant remembers an approval: *this* identity (channel, sender id) may
//! use *this* capability on targets matching *this* pattern, until an
//! optional expiry or a revocation. The table is the one of
//! `metnos-policy.txt` §4.1, verbatim ([`SCHEMA`]); times are stored as
//! [`UtcTime`] text (`YYYY-MM-DDTHH:MM:SSZ`).
//!
//! The rule that combines the matrix with grants lives once, in
//! [`crate::policy::effective_outcome`]; [`GrantStore::effective_outcome`]
//! only loads the active rows it needs and hands them over. Two guarantees
//! follow from that rule and from [`GrantStore::record`]:
//!
//! - a grant never turns `denied` into `allowed`;
//! - a grant never elevates an `always`-class capability: recording one is
//!   refused, and a hand-inserted row is ignored by the rule anyway.
//!
//! Each [`GrantStore`] owns one connection; there is no global session.
//! The store does not authenticate identities: separating users is the job
//! of whoever supplies the [`Identity`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, ErrorCode, OptionalExtension};

use super::{grants_can_lift, validated, GrantBackend, GrantError, NewGrant, WrongSchema, COLUMNS};

use crate::policy::{Capability, Effective, Grant, Identity, Level, UtcTime};

/// The schema of the `grants` table, exactly as `metnos-policy.txt` §4.1
/// defines it.
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS grants (
 id INTEGER PRIMARY KEY AUTOINCREMENT,
 channel TEXT NOT NULL,
 sender_id TEXT NOT NULL,
 capability TEXT NOT NULL,
 target TEXT NOT NULL,
 granted_at TEXT NOT NULL,
 expires_at TEXT,
 granted_by TEXT,
 revoked_at TEXT
);";

/// The version of the grants database this build writes and reads
/// (SQLite's `user_version`): 0 is the reference schema as first created;
/// 1 adds one unrevoked grant per (channel, sender, capability, target),
/// duplicates merged. A newer version is refused.
pub const SCHEMA_VERSION: i64 = 1;

/// Version 1: duplicates of one tuple among unrevoked grants merged into
/// the oldest (the latest expiry kept, none if any had none), then the
/// index that keeps it so.
const MIGRATE_TO_1: &str = "
UPDATE grants AS g SET expires_at = (
  SELECT CASE WHEN count(*) > count(d.expires_at) THEN NULL ELSE max(d.expires_at) END
  FROM grants AS d
  WHERE d.revoked_at IS NULL AND d.channel = g.channel AND d.sender_id = g.sender_id
    AND d.capability = g.capability AND d.target = g.target)
WHERE g.revoked_at IS NULL;
DELETE FROM grants WHERE revoked_at IS NULL AND id NOT IN (
  SELECT min(id) FROM grants WHERE revoked_at IS NULL
  GROUP BY channel, sender_id, capability, target);
CREATE UNIQUE INDEX IF NOT EXISTS grants_one_per_tuple
  ON grants (channel, sender_id, capability, target) WHERE revoked_at IS NULL;
PRAGMA user_version = 1;
";

/// How long a statement waits for another connection's lock.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The grant store: one SQLite file and one owned connection to it.
///
/// Not `Sync`: share it between threads by opening one store per thread
/// (SQLite's WAL mode and the busy timeout make concurrent stores safe).
#[derive(Debug)]
pub struct GrantStore {
    path: PathBuf,
    conn: Connection,
    /// Unrevoked rows per (identity, capability), valid while the database
    /// is unchanged: see [`GrantStore::unrevoked_for`].
    cache: std::cell::RefCell<RowCache>,
}

/// Decoded rows, stamped with what proves them current: SQLite's
/// `data_version` (moves when *another* connection commits) and this
/// connection's `total_changes` (moves when this one writes).
#[derive(Debug, Default)]
struct RowCache {
    stamp: Option<(i64, u64)>,
    rows: std::collections::HashMap<(Identity, Capability), std::rc::Rc<Vec<Grant>>>,
}

/// More distinct (identity, capability) pairs than this and the cache
/// starts over, so it cannot grow without bound.
const CACHE_ENTRIES: usize = 1024;

/// A row as SQLite returns it, before the times are parsed.
struct RawRow {
    id: i64,
    channel: String,
    sender_id: String,
    capability: String,
    target: String,
    granted_at: String,
    expires_at: Option<String>,
    granted_by: Option<String>,
    revoked_at: Option<String>,
}

impl RawRow {
    fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawRow> {
        Ok(RawRow {
            id: row.get(0)?,
            channel: row.get(1)?,
            sender_id: row.get(2)?,
            capability: row.get(3)?,
            target: row.get(4)?,
            granted_at: row.get(5)?,
            expires_at: row.get(6)?,
            granted_by: row.get(7)?,
            revoked_at: row.get(8)?,
        })
    }
}

impl GrantStore {
    /// Opens (creating if missing) the grants database at `path`, creating
    /// its parent directory if needed, switching it to WAL journal mode,
    /// setting a [`BUSY_TIMEOUT`] and creating the table.
    ///
    /// A file that is not SQLite fails here with
    /// [`GrantError::NotADatabase`], and an SQLite file whose `grants` table
    /// lacks a column with [`GrantError::WrongSchema`], not on first use.
    /// If the file system cannot hold a WAL, SQLite keeps its rollback
    /// journal and the store still works.
    pub fn open(path: &Path) -> Result<GrantStore, GrantError> {
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() && !parent.exists() {
                std::fs::create_dir_all(parent).map_err(|source| GrantError::CreateDir {
                    path: parent.to_path_buf(),
                    source,
                })?;
            }
        }
        let err = |e| sqlite_error(path, e);
        // Other processes may be creating the same file at this moment:
        // the schema is set up and migrated under the write lock, retried
        // while busy. A file that is not a database fails at its first
        // read.
        let (conn, made) = crate::util::sqlite::open_wal(path, BUSY_TIMEOUT, |tx| {
            tx.execute_batch(SCHEMA)?;
            if let Err(e) = tx.prepare(&format!("SELECT {COLUMNS} FROM grants LIMIT 0")) {
                return Ok(Err(WrongSchema::Columns(e)));
            }
            let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if version > SCHEMA_VERSION {
                return Ok(Err(WrongSchema::Newer {
                    version,
                    known: SCHEMA_VERSION,
                }));
            }
            if version < 1 {
                tx.execute_batch(MIGRATE_TO_1)?;
            }
            Ok(Ok(()))
        })
        .map_err(err)?;
        if let Err(why) = made {
            return Err(GrantError::WrongSchema {
                path: path.to_path_buf(),
                why,
            });
        }
        Ok(GrantStore {
            path: path.to_path_buf(),
            conn,
            cache: Default::default(),
        })
    }

    /// The database file this store was opened on.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks `new` exactly as [`GrantStore::record`] would at `now`,
    /// without a database: callers use it to refuse a grant before creating
    /// any file. Returns the first refusal, if any.
    pub fn validate(new: &NewGrant, now: UtcTime) -> Result<(), GrantError> {
        validated(new, now).map(|_| ())
    }

    /// Records a grant at `now` and returns it with its new id.
    ///
    /// Refused, with nothing written: an unknown capability name; an
    /// `always`-class capability (`code:exec`, `system:admin`), whose every
    /// use needs a fresh approval; a capability that takes no target
    /// (`compute:pure`, `time:read`, `human:ask`); a target that is not a
    /// valid pattern of the capability's kind; an empty channel or sender
    /// id; an expiry at or before `now`. The target is stored in its
    /// canonical form (a host pattern lowercased).
    ///
    /// # Security
    ///
    /// This hands out authority: once recorded, the grant turns every
    /// `approval_required` use of the capability on a covered target by
    /// that identity into `allowed`, without asking, until it expires or is
    /// revoked. Call it only on an explicit approval by the person the
    /// identity stands for ("allow and remember"), with the identity the
    /// request really came from — the store does not authenticate it. A
    /// broad pattern (`/**`, `*.com`) grants broadly. It can never turn a
    /// `denied` cell into `allowed` nor stand in for an `always` approval.
    pub fn record(&self, new: &NewGrant, now: UtcTime) -> Result<Grant, GrantError> {
        self.record_once(new, now, false)
    }

    fn record_once(
        &self,
        new: &NewGrant,
        now: UtcTime,
        retried: bool,
    ) -> Result<Grant, GrantError> {
        let (capability, pattern) = validated(new, now)?;
        // One unrevoked grant per (channel, sender, capability, target):
        // recording the tuple again returns it, with the later expiry.
        let existing = self
            .conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM grants WHERE revoked_at IS NULL AND channel = ?1 \
                 AND sender_id = ?2 AND capability = ?3 AND target = ?4"
            ))
            .and_then(|mut st| {
                st.query_row(
                    params![
                        new.identity.channel,
                        new.identity.sender_id,
                        capability.as_str(),
                        pattern.as_str()
                    ],
                    RawRow::from_row,
                )
                .optional()
            })
            .map_err(|e| self.err(e))?;
        if let Some(raw) = existing {
            return self.lengthened(raw, new.expires_at);
        }
        let grant = Grant {
            id: 0,
            channel: new.identity.channel.clone(),
            sender_id: new.identity.sender_id.clone(),
            capability: capability.as_str().to_string(),
            target: pattern.as_str().to_string(),
            granted_at: now,
            expires_at: new.expires_at,
            granted_by: new.granted_by.clone(),
            revoked_at: None,
        };
        let mut stmt = self
            .conn
            .prepare_cached(
                "INSERT INTO grants (channel, sender_id, capability, target, granted_at, expires_at, granted_by) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(|e| self.err(e))?;
        let id = match stmt.insert(params![
            grant.channel,
            grant.sender_id,
            grant.capability,
            grant.target,
            grant.granted_at.to_string(),
            grant.expires_at.map(|t| t.to_string()),
            grant.granted_by,
        ]) {
            Ok(id) => id,
            // Another connection recorded the same tuple between the look
            // and the insert: it is the one grant now.
            Err(rusqlite::Error::SqliteFailure(f, _))
                if f.code == ErrorCode::ConstraintViolation && !retried =>
            {
                drop(stmt);
                return self.record_once(new, now, true);
            }
            Err(e) => return Err(self.err(e)),
        };
        Ok(Grant { id, ..grant })
    }

    /// The tuple's existing grant `raw`, its expiry the later of its own
    /// and `expires_at` (`None`, forever, is the latest).
    fn lengthened(&self, raw: RawRow, expires_at: Option<UtcTime>) -> Result<Grant, GrantError> {
        let old = self.decode(raw)?;
        let later = match (old.expires_at, expires_at) {
            (None, _) | (_, None) => None,
            (Some(a), Some(b)) => Some(a.max(b)),
        };
        if later != old.expires_at {
            self.conn
                .prepare_cached("UPDATE grants SET expires_at = ?1 WHERE id = ?2")
                .and_then(|mut st| st.execute(params![later.map(|t| t.to_string()), old.id]))
                .map_err(|e| self.err(e))?;
        }
        Ok(Grant {
            expires_at: later,
            ..old
        })
    }

    /// Revokes grant `id` at `now` and returns the revoked row. An expired
    /// grant can still be revoked; revoking twice is an error.
    pub fn revoke(&self, id: i64, now: UtcTime) -> Result<Grant, GrantError> {
        let changed = self
            .conn
            .prepare_cached(
                "UPDATE grants SET revoked_at = ?1 WHERE id = ?2 AND revoked_at IS NULL",
            )
            .and_then(|mut s| s.execute(params![now.to_string(), id]))
            .map_err(|e| self.err(e))?;
        let row = self.get(id)?;
        match row {
            None => Err(GrantError::NoSuchGrant(id)),
            Some(_) if changed == 0 => Err(GrantError::AlreadyRevoked(id)),
            Some(g) => Ok(g),
        }
    }

    /// The id of the one unrevoked grant of `identity` on `capability` and
    /// `target` (as stored: canonical), if there is one.
    fn unrevoked_id(
        &self,
        identity: &Identity,
        capability: &str,
        target: &str,
    ) -> Result<Option<i64>, GrantError> {
        self.conn
            .prepare_cached(
                "SELECT id FROM grants WHERE revoked_at IS NULL AND channel = ?1 \
                 AND sender_id = ?2 AND capability = ?3 AND target = ?4",
            )
            .and_then(|mut st| {
                st.query_row(
                    params![identity.channel, identity.sender_id, capability, target],
                    |r| r.get(0),
                )
                .optional()
            })
            .map_err(|e| self.err(e))
    }

    /// Every grant ordered by id: all of them with `include_inactive`, else
    /// only those active (unrevoked and unexpired) at `now`.
    pub fn list(&self, include_inactive: bool, now: UtcTime) -> Result<Vec<Grant>, GrantError> {
        let sql = if include_inactive {
            format!("SELECT {COLUMNS} FROM grants ORDER BY id")
        } else {
            format!("SELECT {COLUMNS} FROM grants WHERE revoked_at IS NULL ORDER BY id")
        };
        let rows = self.query(&sql, [])?;
        let grants = rows
            .into_iter()
            .map(|r| self.decode(r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(if include_inactive {
            grants
        } else {
            grants.into_iter().filter(|g| g.is_active(now)).collect()
        })
    }

    /// The grants active at `now` for exactly this identity and capability,
    /// ordered by id. Targets are not filtered: matching a target is the
    /// policy rule's job.
    pub fn active_for(
        &self,
        identity: &Identity,
        capability: Capability,
        now: UtcTime,
    ) -> Result<Vec<Grant>, GrantError> {
        let rows = self.unrevoked_for(identity, capability)?;
        Ok(rows.iter().filter(|g| g.is_active(now)).cloned().collect())
    }

    /// Every grant active at `now`, ordered by id (what a turn's snapshot
    /// freezes).
    pub fn active_all(&self, now: UtcTime) -> Result<Vec<Grant>, GrantError> {
        self.list(false, now)
    }

    /// The matrix cell for `level` × `capability`, lifted from
    /// `approval_required` to `allowed` when an active grant of `identity`
    /// covers `target`. The rule is [`crate::policy::effective_outcome`];
    /// this only supplies the rows, and reads none when the matrix alone
    /// decides (`allowed`, `denied`) or the capability is `always`-class.
    pub fn effective_outcome(
        &self,
        level: Level,
        capability: Capability,
        target: Option<&str>,
        identity: &Identity,
        now: UtcTime,
    ) -> Result<Effective, GrantError> {
        if !grants_can_lift(level, capability) {
            return Ok(crate::policy::effective_outcome(
                level,
                capability,
                target,
                identity,
                std::iter::empty(),
            ));
        }
        let rows = self.unrevoked_for(identity, capability)?;
        Ok(crate::policy::effective_outcome(
            level,
            capability,
            target,
            identity,
            rows.iter().filter(|g| g.is_active(now)),
        ))
    }

    /// The unrevoked rows of `identity` for `capability` (expired ones
    /// included: expiry is checked against `now` by the caller), served
    /// from the cache while the database has not changed. Checking costs
    /// one `PRAGMA data_version`, far less than decoding the rows again.
    pub fn unrevoked_for(
        &self,
        identity: &Identity,
        capability: Capability,
    ) -> Result<std::rc::Rc<Vec<Grant>>, GrantError> {
        let version: i64 = self
            .conn
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(|e| self.err(e))?;
        let stamp = (version, self.conn.total_changes());
        let key = (identity.clone(), capability);
        {
            let mut cache = self.cache.borrow_mut();
            if cache.stamp != Some(stamp) || cache.rows.len() >= CACHE_ENTRIES {
                cache.rows.clear();
                cache.stamp = Some(stamp);
            }
            if let Some(rows) = cache.rows.get(&key) {
                return Ok(rows.clone());
            }
        }
        let raw = self.query(
            &format!(
                "SELECT {COLUMNS} FROM grants \
                 WHERE channel = ?1 AND sender_id = ?2 AND capability = ?3 AND revoked_at IS NULL \
                 ORDER BY id"
            ),
            params![identity.channel, identity.sender_id, capability.as_str()],
        )?;
        let rows = std::rc::Rc::new(
            raw.into_iter()
                .map(|r| self.decode(r))
                .collect::<Result<Vec<_>, _>>()?,
        );
        self.cache.borrow_mut().rows.insert(key, rows.clone());
        Ok(rows)
    }

    fn get(&self, id: i64) -> Result<Option<Grant>, GrantError> {
        let raw = self
            .conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM grants WHERE id = ?1"))
            .and_then(|mut s| s.query_row([id], RawRow::from_row).optional())
            .map_err(|e| self.err(e))?;
        raw.map(|r| self.decode(r)).transpose()
    }

    fn query(&self, sql: &str, params: impl rusqlite::Params) -> Result<Vec<RawRow>, GrantError> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params, RawRow::from_row)
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| self.err(e))?;
        Ok(rows)
    }

    fn decode(&self, r: RawRow) -> Result<Grant, GrantError> {
        let time = |column: &'static str, value: &str| {
            UtcTime::parse(value).map_err(|_| GrantError::MalformedRow {
                path: self.path.clone(),
                id: r.id,
                column,
                value: value.to_string(),
            })
        };
        let opt_time =
            |column, value: &Option<String>| value.as_deref().map(|v| time(column, v)).transpose();
        Ok(Grant {
            granted_at: time("granted_at", &r.granted_at)?,
            expires_at: opt_time("expires_at", &r.expires_at)?,
            revoked_at: opt_time("revoked_at", &r.revoked_at)?,
            id: r.id,
            channel: r.channel,
            sender_id: r.sender_id,
            capability: r.capability,
            target: r.target,
            granted_by: r.granted_by,
        })
    }

    fn err(&self, e: rusqlite::Error) -> GrantError {
        sqlite_error(&self.path, e)
    }
}

fn sqlite_error(path: &Path, e: rusqlite::Error) -> GrantError {
    match &e {
        rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::NotADatabase => {
            GrantError::NotADatabase {
                path: path.to_path_buf(),
            }
        }
        _ => GrantError::Sqlite {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

/// The embedded default: `grants.db`, one connection per call. Reading
/// never creates the file: a store that does not exist holds no grants.
pub struct SqliteGrants {
    path: PathBuf,
}

impl SqliteGrants {
    /// The grants database at `path` (nothing is opened yet).
    pub fn new(path: PathBuf) -> SqliteGrants {
        SqliteGrants { path }
    }

    fn existing(&self) -> Result<Option<GrantStore>, GrantError> {
        if self.path.exists() {
            GrantStore::open(&self.path).map(Some)
        } else {
            Ok(None)
        }
    }
}

impl GrantBackend for SqliteGrants {
    fn record(&self, new: &NewGrant, now: UtcTime) -> Result<Grant, GrantError> {
        GrantStore::validate(new, now)?;
        GrantStore::open(&self.path)?.record(new, now)
    }

    fn revoke(&self, id: i64, now: UtcTime) -> Result<Option<Grant>, GrantError> {
        match self.existing()? {
            Some(store) => store.revoke(id, now).map(Some),
            None => Ok(None),
        }
    }

    fn revoke_tuple(
        &self,
        identity: &Identity,
        capability: &str,
        target: &str,
        now: UtcTime,
    ) -> Result<Option<Grant>, GrantError> {
        match self.existing()? {
            Some(store) => match store.unrevoked_id(identity, capability, target)? {
                Some(id) => store.revoke(id, now).map(Some),
                None => Ok(None),
            },
            None => Ok(None),
        }
    }

    fn list(&self, all: bool, now: UtcTime) -> Result<Vec<Grant>, GrantError> {
        match self.existing()? {
            Some(store) => store.list(all, now),
            None => Ok(Vec::new()),
        }
    }

    fn unrevoked_for(
        &self,
        identity: &Identity,
        capability: Capability,
    ) -> Result<Vec<Grant>, GrantError> {
        match self.existing()? {
            Some(store) => Ok(store.unrevoked_for(identity, capability)?.to_vec()),
            None => Ok(Vec::new()),
        }
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
