//! The pending-approval queue: approvals asked where no one could answer
//! (`gatehouse run` without a terminal, an MCP client without elicitation,
//! an elicitation nobody answered), answered later by the person with
//! `gatehouse approvals allow | deny`.
//!
//! One SQLite file, `<state>/approvals.db` ([`StatePaths::approvals_db`]),
//! protected like the grants database: no executor may read or write it,
//! whatever root holds it. An entry records who asked (actor and
//! identity), what ran (the executor and its digest), the exact set of
//! (capability, canonical target) pairs that needed approval, the
//! sha256 of the input and of a command's arguments, and both snapshot
//! hashes. Entries expire [`ENTRY_TTL_SECS`] after they were queued.
//!
//! An "allow" is consumed by the first turn that matches *all* of them
//! ([`ApprovalQueue::take`]: one `UPDATE … WHERE status = 'allowed'`, so
//! two turns cannot both consume it): swapping the input, the executor's
//! code, the configuration or the grants after the approval makes it
//! match nothing. A "deny" answers the first matching turn with
//! `APPROVAL_REFUSED`, the same way. "Allow and remember" records grants
//! instead (never for an `always`-class capability) and is consumed by no
//! turn.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde::Serialize;

use crate::config::StatePaths;
use crate::grants::{GrantError, NewGrant};
use crate::policy::snapshot::{canonical_json, sha256_hex};
use crate::policy::{Capability, Identity, UtcTime};

use super::gate::Pending;
use super::GrantBook;

/// How long an entry waits for an answer, and how long an answer waits for
/// its turn: 24 hours from when it was queued.
pub const ENTRY_TTL_SECS: i64 = 24 * 60 * 60;

/// Unanswered entries one actor may have waiting: past it the oldest are
/// dropped (and counted), so a client cannot bury the request that matters
/// under thousands of others (security round 2, item 8).
pub const MAX_PENDING_PER_ACTOR: usize = 32;

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

/// Why the queue could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The state directory that holds the database could not be created.
    #[error("cannot create `{path}`: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: crate::util::IoCause,
    },
    /// SQLite refused to open, read or write the database.
    #[error("approvals database `{path}`: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// Why.
        source: crate::util::Lowered<rusqlite::Error>,
    },
    /// The database's schema is of a later version than this build knows.
    #[error("approvals database `{path}`: its schema version {version} is newer than this build knows ({known}); run a newer gatehouse")]
    Newer {
        /// The database file.
        path: PathBuf,
        /// The version it records.
        version: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// No entry has this id.
    #[error("no pending approval `{0}`")]
    NoSuchEntry(String),
    /// The entry passed its expiry before it was answered.
    #[error("pending approval `{id}` expired at {expires_at}")]
    Expired {
        /// The entry's id.
        id: String,
        /// When it expired.
        expires_at: UtcTime,
    },
    /// The entry is no longer `pending`.
    #[error("pending approval `{id}` was already answered (`{status}`)")]
    AlreadyAnswered {
        /// The entry's id.
        id: String,
        /// Its status now (`allowed`, `denied`, `remembered` or `consumed`).
        status: String,
    },
    /// "Allow and remember" for an entry with an `always`-class item.
    #[error("`{capability}` is an always-class capability: it is never remembered; allow pending approval `{id}` once (without `--remember`)")]
    NotRememberable {
        /// The entry's id.
        id: String,
        /// The `always`-class capability.
        capability: Capability,
    },
    /// "Allow and remember" for an entry queued without an identity.
    #[error("pending approval `{0}` has no identity to remember a grant for")]
    NoIdentity(String),
    /// Recording a remembered grant failed.
    #[error(transparent)]
    Grant(#[from] GrantError),
}

impl QueueError {
    /// Whether the error is the caller's input (exit 3) rather than a
    /// failure of the host.
    pub fn is_invalid_input(&self) -> bool {
        match self {
            QueueError::NoSuchEntry(_)
            | QueueError::Expired { .. }
            | QueueError::AlreadyAnswered { .. }
            | QueueError::NotRememberable { .. }
            | QueueError::NoIdentity(_) => true,
            QueueError::Grant(e) => e.is_invalid_input(),
            QueueError::CreateDir { .. } | QueueError::Sqlite { .. } | QueueError::Newer { .. } => {
                false
            }
        }
    }
}

/// One item of an entry: what needs approval and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct QueuedItem {
    /// The capability that needs approval.
    pub capability: Capability,
    /// The canonical target (what a grant would record).
    pub target: Option<String>,
    /// Whether the capability can change or destroy data.
    pub critical: bool,
    /// Whether "allow and remember" may record a grant for it (never for an `always`-class
    /// capability).
    pub rememberable: bool,
    /// Why it needs an approval.
    pub reason: String,
}

impl From<&Pending> for QueuedItem {
    fn from(p: &Pending) -> QueuedItem {
        QueuedItem {
            capability: p.capability,
            target: p.target.clone(),
            critical: p.critical,
            rememberable: p.rememberable,
            reason: p.reason.clone(),
        }
    }
}

/// What a turn is matched on: everything an answer was given for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnKey {
    /// The actor the turn runs as.
    pub actor: String,
    /// The actor's identity; `None` when it has none (no grant can be remembered).
    pub identity: Option<Identity>,
    /// The executor's name.
    pub executor: String,
    /// The component's sha256 (a command executor: of its argv).
    pub executor_sha256: String,
    /// sha256 of the turn's input.
    pub input_sha256: String,
    /// sha256 of the canonical JSON array of a command's arguments.
    pub args_sha256: String,
    /// The snapshot's `definitionHash`: the actors and executors.
    pub definition_hash: String,
    /// The snapshot's `policyHash`: the whole frozen policy, grants included.
    pub policy_hash: String,
    /// A command executor's argv (its manifest's command, then the
    /// turn's arguments); empty for a component.
    pub argv: Vec<String>,
    /// Each argv word that names a regular file in the workspace, with
    /// the file's sha256: the approval is bound to these bytes (a script
    /// changed between the approval and the retry no longer matches).
    pub files: Vec<FileArg>,
    /// The command lines a guest ran, or asked to run, under a
    /// `code:exec` allowed once: what an entry queued while it ran lets
    /// the retry run (empty for an entry queued by the gate). Not matched
    /// on: the turn that takes the entry gets them.
    pub commands: Vec<Vec<String>>,
}

/// A file an argv word names, and its bytes' digest when the approval
/// was asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct FileArg {
    /// The argv word as written.
    pub arg: String,
    /// The regular file in the workspace it names, canonical.
    pub path: String,
    /// The file's sha256 when the approval was asked for.
    pub sha256: String,
}

impl TurnKey {
    /// sha256 of the canonical JSON of [`TurnKey::files`]: what the queue
    /// matches a retry on.
    pub fn files_sha256(&self) -> String {
        sha256_hex(canonical_json(&self.files).as_bytes())
    }
}

/// The set of (capability, canonical target) pairs, in one canonical
/// text: sorted, duplicates removed.
fn scope_of<'a>(items: impl Iterator<Item = (Capability, Option<&'a str>)>) -> String {
    let mut pairs: Vec<(&str, Option<&str>)> = items.map(|(c, t)| (c.as_str(), t)).collect();
    pairs.sort();
    pairs.dedup();
    canonical_json(&pairs)
}

/// sha256 of a command's arguments as a canonical JSON array.
pub fn args_sha256(args: &[String]) -> String {
    sha256_hex(canonical_json(&args).as_bytes())
}

/// An entry as `approvals list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueEntry {
    /// The entry's id, the one `approvals allow | deny` takes.
    pub id: String,
    /// The turn that queued it.
    pub turn: String,
    /// When it was queued.
    pub queued_at: UtcTime,
    /// When it expires: [`ENTRY_TTL_SECS`] after it was queued.
    pub expires_at: UtcTime,
    /// The actor the turn ran as.
    pub actor: String,
    /// The actor's identity, which a remembered grant is recorded for.
    pub identity: Option<Identity>,
    /// The executor's name.
    pub executor: String,
    /// The component's sha256 (a command executor: of its argv).
    pub executor_sha256: String,
    /// What needs approval.
    pub items: Vec<QueuedItem>,
    /// sha256 of the turn's input.
    pub input_sha256: String,
    /// sha256 of the canonical JSON array of a command's arguments.
    pub args_sha256: String,
    /// The snapshot's `definitionHash` when it was queued.
    #[serde(rename = "definitionHash")]
    pub definition_hash: String,
    /// The snapshot's `policyHash` when it was queued.
    #[serde(rename = "policyHash")]
    pub policy_hash: String,
    /// `pending`, `allowed`, `denied`, `remembered` or `consumed`.
    pub status: String,
    /// When it was answered, if it was.
    pub answered_at: Option<UtcTime>,
    /// Who answered it, if known.
    pub answered_by: Option<String>,
    /// The turn that consumed the answer.
    pub consumed_by: Option<String>,
    /// The grants "allow and remember" recorded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<i64>,
    /// The OS account (effective uid) of the process that queued it: an
    /// answer without a terminal is taken only from another account.
    pub queued_uid: Option<u32>,
    /// The input, its first [`INPUT_SHOWN`] bytes (what the person sees),
    /// and its full size.
    pub input_preview: String,
    /// The input's full size, in bytes.
    pub input_bytes: usize,
    /// A command executor's argv, and the files its words name (with
    /// their sha256), which the approval is bound to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// The files the argv's words name, with their sha256.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileArg>,
    /// The command lines (argv) of a `code:exec` allowed once that the
    /// answer lets the turn's guest run: each is shown, and the turn that
    /// takes the answer may run exactly these.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<Vec<String>>,
}

impl QueueEntry {
    /// What the entry shows of the turn it allows, as the approval that
    /// queued it showed it.
    pub fn shown(&self) -> super::Shown {
        super::Shown {
            executor_sha256: self.executor_sha256.clone(),
            input: self.input_preview.clone(),
            input_bytes: self.input_bytes,
            argv: self.argv.clone(),
            files: self.files.clone(),
            commands: self.commands.clone(),
        }
    }
}

/// Bytes of a turn's input an approval shows.
pub const INPUT_SHOWN: usize = 1024;

/// The first [`INPUT_SHOWN`] bytes of `input` (cut at a character
/// boundary).
pub fn input_preview(input: &str) -> String {
    let mut end = input.len().min(INPUT_SHOWN);
    while !input.is_char_boundary(end) {
        end -= 1;
    }
    input[..end].to_string()
}

/// The effective uid of this process: who queues or answers an entry.
pub fn current_uid() -> u32 {
    // SAFETY: `geteuid(2)` takes no arguments, touches no memory and
    // cannot fail.
    unsafe { libc::geteuid() }
}

/// What the queue answers a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed once by the person: the entry is now consumed.
    Allowed {
        /// The entry.
        id: String,
        /// The command lines it lets the turn's guest run (see
        /// [`QueueEntry::commands`]).
        commands: Vec<Vec<String>>,
    },
    /// Denied by the person: the entry is now consumed.
    Denied(String),
}

/// The person's answer to an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueAnswer {
    /// For the first matching turn only.
    Once,
    /// Records a grant per item for the entry's identity, valid for
    /// `expires_in_secs` (`None`: until revoked).
    Remember {
        /// How long each grant lasts, in seconds; `None`: until revoked.
        expires_in_secs: Option<u64>,
    },
    /// Refuses the first matching turn with `APPROVAL_REFUSED`.
    Deny,
}

/// The queue of one state directory. Reading never creates the database.
pub struct ApprovalQueue {
    path: PathBuf,
    state: StatePaths,
}

fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> QueueError + '_ {
    move |e| QueueError::Sqlite {
        path: path.to_path_buf(),
        source: crate::util::Lowered(e),
    }
}

impl ApprovalQueue {
    /// The queue under `state` (nothing is opened yet).
    pub fn new(state: &StatePaths) -> ApprovalQueue {
        ApprovalQueue {
            path: state.approvals_db.clone(),
            state: state.clone(),
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
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
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&self.path, flags).map_err(&err)?;
        conn.busy_timeout(crate::grants::BUSY_TIMEOUT)
            .map_err(&err)?;
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
            .map_err(&err)?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(&err)?;
        if version > SCHEMA_VERSION {
            return Err(QueueError::Newer {
                path: self.path.clone(),
                version,
                known: SCHEMA_VERSION,
            });
        }
        conn.execute_batch(SCHEMA).map_err(&err)?;
        // A queue made before entries recorded the account that queued
        // them gains the column (its old entries have none).
        for (column, kind) in [
            ("queued_uid", "INTEGER"),
            ("input_preview", "TEXT"),
            ("input_bytes", "INTEGER"),
            ("argv", "TEXT"),
            ("files", "TEXT"),
            ("files_sha256", "TEXT"),
            ("commands", "TEXT"),
        ] {
            if conn
                .prepare(&format!("SELECT {column} FROM pending LIMIT 0"))
                .is_err()
            {
                conn.execute_batch(&format!("ALTER TABLE pending ADD COLUMN {column} {kind}"))
                    .map_err(&err)?;
            }
        }
        if version < SCHEMA_VERSION {
            conn.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(&err)?;
        }
        Ok(Some(conn))
    }

    /// Creates the database, or brings it to [`SCHEMA_VERSION`]; its
    /// version then. Refuses a later version.
    pub fn migrate(&self) -> Result<i64, QueueError> {
        self.open(true)?;
        Ok(SCHEMA_VERSION)
    }

    /// Queues the approval a turn could not get, at `now`; returns the
    /// entry. Expired entries are removed on the way.
    pub fn enqueue(
        &self,
        turn: &str,
        key: &TurnKey,
        pending: &[Pending],
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
        let items: Vec<QueuedItem> = pending.iter().map(QueuedItem::from).collect();
        let scope = scope_of(pending.iter().map(|p| (p.capability, p.target.as_deref())));
        let id = new_id(turn, &scope);
        let entry = QueueEntry {
            id: id.clone(),
            turn: turn.to_string(),
            queued_at: now,
            expires_at: now.plus_seconds(ENTRY_TTL_SECS),
            actor: key.actor.clone(),
            identity: key.identity.clone(),
            executor: key.executor.clone(),
            executor_sha256: key.executor_sha256.clone(),
            items,
            input_sha256: key.input_sha256.clone(),
            args_sha256: key.args_sha256.clone(),
            definition_hash: key.definition_hash.clone(),
            policy_hash: key.policy_hash.clone(),
            status: "pending".into(),
            answered_at: None,
            answered_by: None,
            consumed_by: None,
            grants: Vec::new(),
            queued_uid: Some(current_uid()),
            input_preview: input_preview(input),
            input_bytes: input.len(),
            argv: key.argv.clone(),
            files: key.files.clone(),
            commands: key.commands.clone(),
        };
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

    /// The answer waiting for a turn of `key` that needs `pending`, taken
    /// at `now` by turn `turn`: the first unexpired entry, answered allow
    /// (once) or deny, matching all of the key and exactly the set of
    /// (capability, canonical target) pairs. Taking it consumes it.
    ///
    /// # Security
    /// An `Allowed` verdict stands for the person's approval of exactly
    /// this turn: the caller allows the pending items once, for this turn.
    pub fn take(
        &self,
        turn: &str,
        key: &TurnKey,
        pending: &[Pending],
        now: UtcTime,
    ) -> Result<Option<Verdict>, QueueError> {
        let Some(conn) = self.open(false)? else {
            return Ok(None);
        };
        let err = sqlite(&self.path);
        let scope = scope_of(pending.iter().map(|p| (p.capability, p.target.as_deref())));
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

    /// Per actor, how many unanswered entries were dropped past
    /// [`MAX_PENDING_PER_ACTOR`] so far.
    pub fn dropped(&self) -> Result<Vec<(String, u64)>, QueueError> {
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
    pub fn list(&self, all: bool, now: UtcTime) -> Result<Vec<QueueEntry>, QueueError> {
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
    pub fn get(&self, id: &str) -> Result<Option<QueueEntry>, QueueError> {
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
    /// [`GrantBook::record`]). Call it only on the person's own answer.
    pub fn answer(
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
        if entry.status != "pending" {
            return Err(QueueError::AlreadyAnswered {
                id: id.into(),
                status: entry.status,
            });
        }
        if entry.expires_at <= now {
            return Err(QueueError::Expired {
                id: id.into(),
                expires_at: entry.expires_at,
            });
        }
        let mut grants = Vec::new();
        let status = match answer {
            QueueAnswer::Once => "allowed",
            QueueAnswer::Deny => "denied",
            QueueAnswer::Remember { expires_in_secs } => {
                if let Some(i) = entry.items.iter().find(|i| !i.rememberable) {
                    return Err(QueueError::NotRememberable {
                        id: id.into(),
                        capability: i.capability,
                    });
                }
                let identity = entry
                    .identity
                    .clone()
                    .ok_or_else(|| QueueError::NoIdentity(id.into()))?;
                let book = GrantBook::new(&self.state)?;
                let news: Vec<NewGrant> = entry
                    .items
                    .iter()
                    .map(|i| NewGrant {
                        identity: identity.clone(),
                        capability: i.capability.as_str().into(),
                        target: i.target.clone().unwrap_or_default(),
                        expires_at: expires_in_secs
                            .map(|s| now.plus_seconds(i64::try_from(s).unwrap_or(i64::MAX))),
                        granted_by: by.map(str::to_string),
                    })
                    .collect();
                // Every grant validated before the first is recorded.
                for n in &news {
                    crate::grants::GrantStore::validate(n, now)?;
                }
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

/// A new entry id: 12 hex digits of the sha256 of the queuing turn (unique
/// per process: time, pid, counter), its scope and the wall clock's
/// nanoseconds.
fn new_id(turn: &str, scope: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let digest = sha256_hex(format!("{turn}\n{scope}\n{nanos}").as_bytes());
    format!("p-{}", &digest[..12])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(cap: Capability, target: &str) -> Pending {
        Pending {
            capability: cap,
            target: Some(target.into()),
            declared_target: None,
            mount: None,
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
        let q = ApprovalQueue::new(&state);
        let now = UtcTime(1_000_000);
        let p = vec![pending(Capability::FsWrite, "/w/out/**")];
        assert_eq!(q.take("t0", &key(), &p, now).unwrap(), None);
        assert!(!q.path().exists(), "taking created the database");
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
        let q = ApprovalQueue::new(&state);
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
