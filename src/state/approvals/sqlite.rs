//! The embedded default: the queue in `<state>/approvals.db`
//! ([`StatePaths::approvals_db`]), protected like the grants database: no
//! executor may read or write it, whatever root holds it. An answer is
//! consumed with one `UPDATE … WHERE status = 'allowed'`, so two turns
//! cannot both take it.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};

use super::{
    answerable, new_entry, remembered, scope_of, ApprovalBackend, QueueAnswer, QueueEntry,
    QueueError, QueuedItem, TurnKey, Verdict, MAX_PENDING_PER_ACTOR,
};
use crate::config::StatePaths;
use crate::policy::snapshot::canonical_json;
use crate::policy::{Identity, UtcTime};
use crate::state::grants::{GrantBackend, SqliteGrants};

/// The schema version this build writes and reads (SQLite's
/// `user_version`; 0 is a queue made before versions were recorded, which
/// gains its missing columns). A database of a later version is refused,
/// never written.
pub const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS pending (
 id TEXT PRIMARY KEY,
 turn TEXT NOT NULL,
 queued_at TEXT NOT NULL,
 expires_at TEXT NOT NULL,
 actor TEXT NOT NULL,
 channel TEXT,
 sender_id TEXT,
 executor TEXT NOT NULL,
 executor_sha256 TEXT NOT NULL,
 items TEXT NOT NULL,
 scope TEXT NOT NULL,
 input_sha256 TEXT NOT NULL,
 args_sha256 TEXT NOT NULL,
 definition_hash TEXT NOT NULL,
 policy_hash TEXT NOT NULL,
 status TEXT NOT NULL,
 answered_at TEXT,
 answered_by TEXT,
 consumed_by TEXT,
 grants TEXT,
 queued_uid INTEGER,
 input_preview TEXT,
 input_bytes INTEGER,
 argv TEXT,
 files TEXT,
 files_sha256 TEXT,
 commands TEXT
);
CREATE TABLE IF NOT EXISTS dropped (
 actor TEXT PRIMARY KEY,
 count INTEGER NOT NULL
);";

const COLUMNS: &str = "id, turn, queued_at, expires_at, actor, channel, sender_id, executor, \
     executor_sha256, items, input_sha256, args_sha256, definition_hash, policy_hash, status, \
     answered_at, answered_by, consumed_by, grants, queued_uid, input_preview, input_bytes, \
     argv, files, commands";

/// The embedded default: `<state>/approvals.db`, one connection per call.
pub struct SqliteApprovals {
    path: PathBuf,
    state: StatePaths,
}

fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> QueueError + '_ {
    move |e| QueueError::Sqlite {
        path: path.to_path_buf(),
        source: crate::util::Lowered(e),
    }
}

impl SqliteApprovals {
    /// The queue under `state` (nothing is opened yet).
    pub fn new(state: &StatePaths) -> SqliteApprovals {
        SqliteApprovals {
            path: state.approvals_db.clone(),
            state: state.clone(),
        }
    }

    fn open(&self, create: bool) -> Result<Option<Connection>, QueueError> {
        if !create && !self.path.exists() {
            return Ok(None);
        }
        if let Some(parent) = self.path.parent() {
            if !parent.as_os_str().is_empty() && !parent.exists() {
                std::fs::create_dir_all(parent).map_err(|e| QueueError::CreateDir {
                    path: parent.to_path_buf(),
                    source: e.into(),
                })?;
            }
        }
        let err = sqlite(&self.path);
        // Other processes may be creating the same file at this moment:
        // the schema is set up under the write lock, retried while busy.
        let (conn, made) = crate::util::sqlite::open_versioned(
            &self.path,
            crate::state::grants::BUSY_TIMEOUT,
            SCHEMA,
            SCHEMA_VERSION,
            |tx| {
                // A queue made before entries recorded the account that
                // queued them gains the column (its old entries have none).
                for (column, kind) in [
                    ("queued_uid", "INTEGER"),
                    ("input_preview", "TEXT"),
                    ("input_bytes", "INTEGER"),
                    ("argv", "TEXT"),
                    ("files", "TEXT"),
                    ("files_sha256", "TEXT"),
                    ("commands", "TEXT"),
                ] {
                    if tx
                        .prepare(&format!("SELECT {column} FROM pending LIMIT 0"))
                        .is_err()
                    {
                        tx.execute_batch(&format!(
                            "ALTER TABLE pending ADD COLUMN {column} {kind}"
                        ))?;
                    }
                }
                Ok(())
            },
        )
        .map_err(&err)?;
        if let Err(version) = made {
            return Err(QueueError::Newer {
                path: self.path.clone(),
                version,
                known: SCHEMA_VERSION,
            });
        }
        Ok(Some(conn))
    }

    /// Creates the database, or brings it to [`SCHEMA_VERSION`]; its
    /// version then. Refuses a later version.
    pub fn migrate(&self) -> Result<i64, QueueError> {
        self.open(true)?;
        Ok(SCHEMA_VERSION)
    }
}

impl ApprovalBackend for SqliteApprovals {
    /// Queues the approval a turn could not get, at `now`; returns the
    /// entry. Expired entries are removed on the way.
    fn enqueue(
        &self,
        turn: &str,
        key: &TurnKey,
        items: &[QueuedItem],
        input: &str,
        now: UtcTime,
    ) -> Result<QueueEntry, QueueError> {
        let Some(conn) = self.open(true)? else {
            return Err(QueueError::NoSuchEntry(String::new()));
        };
        let err = sqlite(&self.path);
        conn.execute(
            "DELETE FROM pending WHERE expires_at <= ?1",
            params![now.to_string()],
        )
        .map_err(&err)?;
        let (entry, scope) = new_entry(turn, key, items, input, now);
        conn.execute(
            "INSERT INTO pending (id, turn, queued_at, expires_at, actor, channel, sender_id, \
             executor, executor_sha256, items, scope, input_sha256, args_sha256, \
             definition_hash, policy_hash, status, queued_uid, input_preview, input_bytes, \
             argv, files, files_sha256, commands) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, 'pending', \
             ?16, ?17, ?18, ?19, ?20, ?21, ?22)",
            params![
                entry.id,
                entry.turn,
                entry.queued_at.to_string(),
                entry.expires_at.to_string(),
                entry.actor,
                entry.identity.as_ref().map(|i| i.channel.clone()),
                entry.identity.as_ref().map(|i| i.sender_id.clone()),
                entry.executor,
                entry.executor_sha256,
                canonical_json(&entry.items),
                scope,
                entry.input_sha256,
                entry.args_sha256,
                entry.definition_hash,
                entry.policy_hash,
                entry.queued_uid,
                entry.input_preview,
                entry.input_bytes as i64,
                canonical_json(&entry.argv),
                canonical_json(&entry.files),
                key.files_sha256(),
                canonical_json(&entry.commands),
            ],
        )
        .map_err(&err)?;
        // At most MAX_PENDING_PER_ACTOR unanswered entries per actor: the
        // oldest beyond go, counted.
        let dropped = conn
            .execute(
                "DELETE FROM pending WHERE rowid IN (SELECT rowid FROM pending \
                 WHERE actor = ?1 AND status = 'pending' \
                 ORDER BY queued_at DESC, rowid DESC LIMIT -1 OFFSET ?2)",
                params![entry.actor, MAX_PENDING_PER_ACTOR as i64],
            )
            .map_err(&err)?;
        if dropped > 0 {
            conn.execute(
                "INSERT INTO dropped (actor, count) VALUES (?1, ?2) \
                 ON CONFLICT(actor) DO UPDATE SET count = count + excluded.count",
                params![entry.actor, dropped as i64],
            )
            .map_err(&err)?;
        }
        Ok(entry)
    }

    /// The answer waiting for a turn of `key` that needs `items`, taken
    /// at `now` by turn `turn`: the first unexpired entry, answered allow
    /// (once) or deny, matching all of the key and exactly the set of
    /// (capability, canonical target) pairs. Taking it consumes it.
    ///
    /// # Security
    /// An `Allowed` verdict stands for the person's approval of exactly
    /// this turn: the caller allows the pending items once, for this turn.
    fn take(
        &self,
        turn: &str,
        key: &TurnKey,
        items: &[QueuedItem],
        now: UtcTime,
    ) -> Result<Option<Verdict>, QueueError> {
        self.take_where(turn, key, items, None, now)
    }

    fn take_line(
        &self,
        turn: &str,
        key: &TurnKey,
        items: &[QueuedItem],
        line: &[String],
        now: UtcTime,
    ) -> Result<Option<Verdict>, QueueError> {
        self.take_where(turn, key, items, Some(line), now)
    }

    /// Per actor, how many unanswered entries were dropped past
    /// [`MAX_PENDING_PER_ACTOR`] so far.
    fn dropped(&self) -> Result<Vec<(String, u64)>, QueueError> {
        let Some(conn) = self.open(false)? else {
            return Ok(Vec::new());
        };
        let err = sqlite(&self.path);
        let mut stmt = conn
            .prepare("SELECT actor, count FROM dropped ORDER BY actor")
            .map_err(&err)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .map_err(&err)?;
        rows.map(|r| r.map(|(a, n)| (a, u64::try_from(n).unwrap_or(0))))
            .collect::<Result<_, _>>()
            .map_err(&err)
    }

    /// The entries not yet expired at `now` (with `all`, consumed ones
    /// too), newest first.
    fn list(&self, all: bool, now: UtcTime) -> Result<Vec<QueueEntry>, QueueError> {
        let Some(conn) = self.open(false)? else {
            return Ok(Vec::new());
        };
        let err = sqlite(&self.path);
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM pending WHERE expires_at > ?1 ORDER BY queued_at DESC, rowid DESC"
            ))
            .map_err(&err)?;
        let rows = stmt
            .query_map(params![now.to_string()], decode)
            .map_err(&err)?;
        let entries: Vec<QueueEntry> = rows.collect::<Result<_, _>>().map_err(&err)?;
        Ok(entries
            .into_iter()
            .filter(|e| all || e.status != "consumed")
            .collect())
    }

    /// Entry `id`, expired or not.
    fn get(&self, id: &str) -> Result<Option<QueueEntry>, QueueError> {
        let Some(conn) = self.open(false)? else {
            return Ok(None);
        };
        get(&conn, &self.path, id)
    }

    /// Answers entry `id` at `now` on behalf of `by`.
    ///
    /// Refused: an unknown, expired or already answered entry; "remember"
    /// for an entry with an `always`-class item (nothing is recorded).
    ///
    /// # Security
    /// Hands out authority: "once" lets the next turn that matches the
    /// entry exactly run with its items allowed; "remember" records a
    /// grant per item for the entry's identity (see
    /// [`GrantBackend::record`]). Call it only on the person's own answer.
    fn answer(
        &self,
        id: &str,
        answer: QueueAnswer,
        by: Option<&str>,
        now: UtcTime,
    ) -> Result<QueueEntry, QueueError> {
        let Some(conn) = self.open(false)? else {
            return Err(QueueError::NoSuchEntry(id.to_string()));
        };
        let err = sqlite(&self.path);
        let entry =
            get(&conn, &self.path, id)?.ok_or_else(|| QueueError::NoSuchEntry(id.into()))?;
        answerable(&entry, id, now)?;
        let mut grants = Vec::new();
        let status = match answer {
            QueueAnswer::Once => "allowed",
            QueueAnswer::Deny => "denied",
            QueueAnswer::Remember { expires_in_secs } => {
                let news = remembered(&entry, expires_in_secs, by, now)?;
                // This backend is the state without a database URL: its
                // grants are in the SQLite file too.
                let book = SqliteGrants::new(self.state.grants_db.clone());
                for n in &news {
                    grants.push(book.record(n, now)?.id);
                }
                "remembered"
            }
        };
        let changed = conn
            .execute(
                "UPDATE pending SET status = ?1, answered_at = ?2, answered_by = ?3, grants = ?4 \
                 WHERE id = ?5 AND status = 'pending'",
                params![
                    status,
                    now.to_string(),
                    by,
                    (!grants.is_empty()).then(|| canonical_json(&grants)),
                    id
                ],
            )
            .map_err(&err)?;
        if changed != 1 {
            return Err(QueueError::AlreadyAnswered {
                id: id.into(),
                status: "answered meanwhile".into(),
            });
        }
        get(&conn, &self.path, id)?.ok_or_else(|| QueueError::NoSuchEntry(id.into()))
    }
}

fn get(conn: &Connection, path: &Path, id: &str) -> Result<Option<QueueEntry>, QueueError> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM pending WHERE id = ?1"),
        params![id],
        decode,
    )
    .optional()
    .map_err(sqlite(path))
}

fn decode(r: &rusqlite::Row<'_>) -> rusqlite::Result<QueueEntry> {
    let time = |i: usize| -> rusqlite::Result<UtcTime> {
        let s: String = r.get(i)?;
        UtcTime::parse(&s).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
        })
    };
    let opt_time = |i: usize| -> rusqlite::Result<Option<UtcTime>> {
        let s: Option<String> = r.get(i)?;
        s.map(|s| {
            UtcTime::parse(&s).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(
                    i,
                    rusqlite::types::Type::Text,
                    Box::new(e),
                )
            })
        })
        .transpose()
    };
    let channel: Option<String> = r.get(5)?;
    let sender: Option<String> = r.get(6)?;
    let items: String = r.get(9)?;
    let items: Vec<QueuedItem> = serde_json::from_str(&items).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(9, rusqlite::types::Type::Text, Box::new(e))
    })?;
    let grants: Option<String> = r.get(18)?;
    let grants: Vec<i64> = grants
        .and_then(|g| serde_json::from_str(&g).ok())
        .unwrap_or_default();
    Ok(QueueEntry {
        id: r.get(0)?,
        turn: r.get(1)?,
        queued_at: time(2)?,
        expires_at: time(3)?,
        actor: r.get(4)?,
        identity: match (channel, sender) {
            (Some(c), Some(s)) => Some(Identity::new(c, s)),
            _ => None,
        },
        executor: r.get(7)?,
        executor_sha256: r.get(8)?,
        items,
        input_sha256: r.get(10)?,
        args_sha256: r.get(11)?,
        definition_hash: r.get(12)?,
        policy_hash: r.get(13)?,
        status: r.get(14)?,
        answered_at: opt_time(15)?,
        answered_by: r.get(16)?,
        consumed_by: r.get(17)?,
        grants,
        queued_uid: r.get(19)?,
        input_preview: r.get::<_, Option<String>>(20)?.unwrap_or_default(),
        input_bytes: r
            .get::<_, Option<i64>>(21)?
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0),
        argv: json_column(r, 22)?,
        files: json_column(r, 23)?,
        commands: json_column(r, 24)?,
    })
}

/// A JSON column (absent in an older queue: empty).
fn json_column<T: serde::de::DeserializeOwned + Default>(
    r: &rusqlite::Row<'_>,
    i: usize,
) -> rusqlite::Result<T> {
    let text: Option<String> = r.get(i)?;
    match text {
        None => Ok(T::default()),
        Some(t) => serde_json::from_str(&t).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
        }),
    }
}

impl SqliteApprovals {
    /// The oldest answer matching `key` and `items` (and, with `line`,
    /// one whose command lines include it), consumed by `turn`.
    fn take_where(
        &self,
        turn: &str,
        key: &TurnKey,
        items: &[QueuedItem],
        line: Option<&[String]>,
        now: UtcTime,
    ) -> Result<Option<Verdict>, QueueError> {
        let Some(conn) = self.open(false)? else {
            return Ok(None);
        };
        let err = sqlite(&self.path);
        let scope = scope_of(items);
        let (channel, sender) = match &key.identity {
            Some(i) => (Some(i.channel.clone()), Some(i.sender_id.clone())),
            None => (None, None),
        };
        let candidates: Vec<(String, String, Vec<Vec<String>>)> = {
            let mut stmt = conn
                .prepare(
                    "SELECT id, status, commands FROM pending WHERE status IN ('allowed', 'denied') \
                     AND expires_at > ?1 AND actor = ?2 AND channel IS ?3 AND sender_id IS ?4 \
                     AND executor = ?5 AND executor_sha256 = ?6 AND scope = ?7 \
                     AND input_sha256 = ?8 AND args_sha256 = ?9 AND definition_hash = ?10 \
                     AND policy_hash = ?11 AND files_sha256 IS ?12 ORDER BY queued_at, rowid",
                )
                .map_err(&err)?;
            let rows = stmt
                .query_map(
                    params![
                        now.to_string(),
                        key.actor,
                        channel,
                        sender,
                        key.executor,
                        key.executor_sha256,
                        scope,
                        key.input_sha256,
                        key.args_sha256,
                        key.definition_hash,
                        key.policy_hash,
                        key.files_sha256(),
                    ],
                    |r| Ok((r.get(0)?, r.get(1)?, json_column(r, 2)?)),
                )
                .map_err(&err)?;
            rows.collect::<Result<_, _>>().map_err(&err)?
        };
        for (id, status, commands) in candidates {
            if line.is_some_and(|l| !commands.iter().any(|c| c.as_slice() == l)) {
                continue;
            }
            let changed = conn
                .execute(
                    "UPDATE pending SET status = 'consumed', consumed_by = ?1 \
                     WHERE id = ?2 AND status = ?3",
                    params![turn, id, status],
                )
                .map_err(&err)?;
            if changed == 1 {
                return Ok(Some(if status == "allowed" {
                    Verdict::Allowed { id, commands }
                } else {
                    Verdict::Denied(id)
                }));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Capability, Identity};
    use crate::state::approvals::{args_sha256, ENTRY_TTL_SECS};

    fn pending(cap: Capability, target: &str) -> QueuedItem {
        QueuedItem {
            capability: cap,
            target: Some(target.into()),
            critical: cap.critical(),
            rememberable: cap.default_approval() != crate::policy::ApprovalClass::Always,
            reason: "why".into(),
        }
    }

    fn key() -> TurnKey {
        TurnKey {
            argv: Vec::new(),
            files: Vec::new(),
            commands: Vec::new(),
            actor: "main".into(),
            identity: Some(Identity::new("cli", "tester")),
            executor: "write-file".into(),
            executor_sha256: "e".repeat(64),
            input_sha256: "i".repeat(64),
            args_sha256: args_sha256(&[]),
            definition_hash: "d".repeat(64),
            policy_hash: "p".repeat(64),
        }
    }

    #[test]
    fn an_allow_is_consumed_once_and_only_by_an_exact_match() {
        let dir = tempfile::tempdir().unwrap();
        let state = StatePaths::under(dir.path(), None, None);
        let q = SqliteApprovals::new(&state);
        let now = UtcTime(1_000_000);
        let p = vec![pending(Capability::FsWrite, "/w/out/**")];
        assert_eq!(q.take("t0", &key(), &p, now).unwrap(), None);
        assert!(!state.approvals_db.exists(), "taking created the database");
        let e = q.enqueue("t1", &key(), &p, "{}", now).unwrap();
        assert_eq!(e.expires_at, UtcTime(1_000_000 + 86_400));
        // Not answered yet: nothing to take.
        assert_eq!(q.take("t2", &key(), &p, now).unwrap(), None);
        q.answer(&e.id, QueueAnswer::Once, Some("alice"), now)
            .unwrap();
        // Another input, another scope, another policy: no match.
        let mut other = key();
        other.input_sha256 = "x".repeat(64);
        assert_eq!(q.take("t3", &other, &p, now).unwrap(), None);
        let mut other = key();
        other.policy_hash = "x".repeat(64);
        assert_eq!(q.take("t3", &other, &p, now).unwrap(), None);
        let wider = vec![
            pending(Capability::FsWrite, "/w/out/**"),
            pending(Capability::EnvRead, "HOME"),
        ];
        assert_eq!(q.take("t3", &key(), &wider, now).unwrap(), None);
        // Expired: no match.
        assert_eq!(
            q.take("t3", &key(), &p, now.plus_seconds(86_400)).unwrap(),
            None
        );
        assert_eq!(
            q.take("t4", &key(), &p, now).unwrap(),
            Some(Verdict::Allowed {
                id: e.id.clone(),
                commands: Vec::new()
            })
        );
        assert_eq!(q.take("t5", &key(), &p, now).unwrap(), None);
        let got = q.get(&e.id).unwrap().unwrap();
        assert_eq!(got.status, "consumed");
        assert_eq!(got.consumed_by.as_deref(), Some("t4"));
        assert_eq!(got.answered_by.as_deref(), Some("alice"));
        assert!(q.list(false, now).unwrap().is_empty());
        assert_eq!(q.list(true, now).unwrap().len(), 1);
    }

    #[test]
    fn always_class_is_never_remembered_and_an_answer_is_given_once() {
        let dir = tempfile::tempdir().unwrap();
        let state = StatePaths::under(dir.path(), None, None);
        let q = SqliteApprovals::new(&state);
        let now = UtcTime(1_000_000);
        let p = vec![pending(Capability::CodeExec, "cat")];
        let e = q.enqueue("t1", &key(), &p, "{}", now).unwrap();
        let r = q.answer(
            &e.id,
            QueueAnswer::Remember {
                expires_in_secs: None,
            },
            None,
            now,
        );
        assert!(
            matches!(
                r,
                Err(QueueError::NotRememberable {
                    capability: Capability::CodeExec,
                    ..
                })
            ),
            "{r:?}"
        );
        assert!(!state.grants_db.exists(), "a grant was written");
        q.answer(&e.id, QueueAnswer::Deny, None, now).unwrap();
        assert!(matches!(
            q.answer(&e.id, QueueAnswer::Once, None, now),
            Err(QueueError::AlreadyAnswered { .. })
        ));
        assert_eq!(
            q.take("t2", &key(), &p, now).unwrap(),
            Some(Verdict::Denied(e.id.clone()))
        );
        // Expired entries cannot be answered and are pruned by the next one.
        let late = q.enqueue("t3", &key(), &p, "{}", now).unwrap();
        let then = now.plus_seconds(ENTRY_TTL_SECS);
        assert!(matches!(
            q.answer(&late.id, QueueAnswer::Once, None, then),
            Err(QueueError::Expired { .. })
        ));
        q.enqueue("t4", &key(), &p, "{}", then).unwrap();
        assert!(q.get(&late.id).unwrap().is_none());
    }
}
