//! The pending-approval queue's entries and where they live:
//! [`ApprovalBackend`], with the embedded SQLite file
//! ([`sqlite::SqliteApprovals`], the default, `<state>/approvals.db`) and
//! a fleet's PostgreSQL ([`pg::PgApprovals`]). The host's callers use it
//! through [`super::Stores::approvals`].
//!
//! An entry records who asked (actor and identity), what ran (the
//! executor and its digest), the exact set of (capability, canonical
//! target) pairs that needed approval, the sha256 of the input and of a
//! command's arguments, and both snapshot hashes ([`TurnKey`]). Entries
//! expire [`ENTRY_TTL_SECS`] after they were queued. Both backends match
//! a retry on all of it and consume an answer exactly once.

pub mod pg;
pub mod sqlite;

use std::path::PathBuf;

use serde::Serialize;

use super::pg::SharedError;
use crate::policy::snapshot::{canonical_json, sha256_hex};
use crate::policy::{Capability, Identity, UtcTime};
use crate::state::grants::{GrantError, NewGrant};

/// How long an entry waits for an answer, and how long an answer waits for
/// its turn: 24 hours from when it was queued.
pub const ENTRY_TTL_SECS: i64 = 24 * 60 * 60;

/// Unanswered entries one actor may have waiting: past it the oldest are
/// dropped (and counted), so a client cannot bury the request that matters
/// under thousands of others (security round 2, item 8).
pub const MAX_PENDING_PER_ACTOR: usize = 32;

/// The pending approvals of one state: queued by turns, answered by the
/// person, taken by the one turn that matches.
pub trait ApprovalBackend: Send + Sync {
    /// Queues the approval turn `turn` of `key` could not get for
    /// `items`, at `now`; returns the entry. Expired entries, and an
    /// actor's unanswered ones past [`MAX_PENDING_PER_ACTOR`], are removed
    /// on the way.
    fn enqueue(
        &self,
        turn: &str,
        key: &TurnKey,
        items: &[QueuedItem],
        input: &str,
        now: UtcTime,
    ) -> Result<QueueEntry, QueueError>;
    /// Takes the answer waiting for turn `turn` of `key` that needs
    /// exactly `items`, at `now`: consumes it, so no other turn (of any node)
    /// takes it too.
    ///
    /// # Security
    /// An `Allowed` verdict stands for the person's approval of exactly
    /// this turn.
    fn take(
        &self,
        turn: &str,
        key: &TurnKey,
        items: &[QueuedItem],
        now: UtcTime,
    ) -> Result<Option<Verdict>, QueueError>;
    /// As [`ApprovalBackend::take`], only an answer given to an entry
    /// whose command lines include `line`: the answer to one command line
    /// a guest runs (the gate asked nothing; issue 46, item 7).
    ///
    /// # Security
    /// An `Allowed` verdict stands for the person's approval of `line`
    /// in exactly this turn.
    fn take_line(
        &self,
        turn: &str,
        key: &TurnKey,
        items: &[QueuedItem],
        line: &[String],
        now: UtcTime,
    ) -> Result<Option<Verdict>, QueueError>;
    /// Per actor, how many unanswered entries were dropped so far.
    fn dropped(&self) -> Result<Vec<(String, u64)>, QueueError>;
    /// The entries not yet expired at `now` (with `all`, consumed ones
    /// too), newest first.
    fn list(&self, all: bool, now: UtcTime) -> Result<Vec<QueueEntry>, QueueError>;
    /// Entry `id`, expired or not.
    fn get(&self, id: &str) -> Result<Option<QueueEntry>, QueueError>;
    /// Answers entry `id` at `now` on behalf of `by`.
    ///
    /// # Security
    /// Hands out authority: call it only on the person's own answer.
    fn answer(
        &self,
        id: &str,
        answer: QueueAnswer,
        by: Option<&str>,
        now: UtcTime,
    ) -> Result<QueueEntry, QueueError>;
}

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
    /// The shared state (PostgreSQL) failed or refused.
    #[error(transparent)]
    Shared(#[from] SharedError),
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
            QueueError::CreateDir { .. }
            | QueueError::Sqlite { .. }
            | QueueError::Newer { .. }
            | QueueError::Shared(_) => false,
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

/// The set of (capability, canonical target) pairs of `items`, in one
/// canonical text: sorted, duplicates removed.
pub fn scope_of(items: &[QueuedItem]) -> String {
    let mut pairs: Vec<(&str, Option<&str>)> = items
        .iter()
        .map(|i| (i.capability.as_str(), i.target.as_deref()))
        .collect();
    pairs.sort();
    pairs.dedup();
    canonical_json(&pairs)
}

/// sha256 of a command's arguments as a canonical JSON array.
pub fn args_sha256(args: &[String]) -> String {
    sha256_hex(canonical_json(&args).as_bytes())
}

/// An entry as `approvals list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// The files the argv's words name, with their sha256.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileArg>,
    /// The command lines (argv) of a `code:exec` allowed once that the
    /// answer lets the turn's guest run: each is shown, and the turn that
    /// takes the answer may run exactly these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<Vec<String>>,
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

/// The entry a turn queues, not yet stored, and its scope (the
/// canonical set of its (capability, target) pairs): the same on every
/// backend.
pub fn new_entry(
    turn: &str,
    key: &TurnKey,
    items: &[QueuedItem],
    input: &str,
    now: UtcTime,
) -> (QueueEntry, String) {
    let scope = scope_of(items);
    let entry = QueueEntry {
        id: new_id(turn, &scope),
        turn: turn.to_string(),
        queued_at: now,
        expires_at: now.plus_seconds(ENTRY_TTL_SECS),
        actor: key.actor.clone(),
        identity: key.identity.clone(),
        executor: key.executor.clone(),
        executor_sha256: key.executor_sha256.clone(),
        items: items.to_vec(),
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
    (entry, scope)
}

/// Refuses an answer to `entry` (id `id`) at `now`: one that is no
/// longer `pending`, or expired.
pub fn answerable(entry: &QueueEntry, id: &str, now: UtcTime) -> Result<(), QueueError> {
    if entry.status != "pending" {
        return Err(QueueError::AlreadyAnswered {
            id: id.into(),
            status: entry.status.clone(),
        });
    }
    if entry.expires_at <= now {
        return Err(QueueError::Expired {
            id: id.into(),
            expires_at: entry.expires_at,
        });
    }
    Ok(())
}

/// The grants "allow and remember" records for `entry`, every one
/// validated: none for an entry with an `always`-class item or without
/// an identity.
pub fn remembered(
    entry: &QueueEntry,
    expires_in_secs: Option<u64>,
    by: Option<&str>,
    now: UtcTime,
) -> Result<Vec<NewGrant>, QueueError> {
    if let Some(i) = entry.items.iter().find(|i| !i.rememberable) {
        return Err(QueueError::NotRememberable {
            id: entry.id.clone(),
            capability: i.capability,
        });
    }
    let identity = entry
        .identity
        .clone()
        .ok_or_else(|| QueueError::NoIdentity(entry.id.clone()))?;
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
        crate::state::grants::GrantStore::validate(n, now)?;
    }
    Ok(news)
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
