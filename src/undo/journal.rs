//! A turn's history directory: `<history>/<turn>/` with `turn.json` (what
//! ran, when, how it ended), `decisions.jsonl` (the audit log) and
//! `journal.jsonl` (every mutation, written and fsynced *before* the
//! operation is done, so a turn killed midway can still be undone).

use std::borrow::Cow;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::append::AppendLog;
use super::fs::{scope_path, FsScope};
use crate::policy::UtcTime;
use crate::state::AuditStore;

/// Why the history could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// A file or directory of the history could not be read or written.
    #[error("cannot {action} `{path}`")]
    Io {
        /// What was being done (`create`, `write`, `read`, …).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: crate::util::IoCause,
    },
    /// A record could not be encoded as JSON.
    #[error("cannot encode a record for `{path}`")]
    Encode {
        /// The file the record was for.
        path: PathBuf,
        /// The encoding error.
        #[source]
        source: serde_json::Error,
    },
    /// A writer holding the file's lock panicked.
    #[error("`{path}` is held by a writer that panicked")]
    Poisoned {
        /// The file.
        path: PathBuf,
    },
    /// A line of a history file does not parse.
    #[error("`{path}` line {line}: {source}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with it.
        source: serde_json::Error,
    },
    /// No turn has this id in the history.
    #[error("no turn `{0}` in the history")]
    NoSuchTurn(String),
    /// The turn ran on another node of the fleet, which holds its journal
    /// and backups.
    #[error("turn `{turn}` ran on node `{node}`, which holds its journal: undo it there")]
    OtherNode {
        /// The turn.
        turn: String,
        /// The node that ran it.
        node: String,
    },
    /// The undo of this turn was cancelled before it changed anything.
    #[error("the undo of turn `{0}` was cancelled before it began")]
    Cancelled(String),
    /// The audit chain could not be written or pruned.
    #[error(transparent)]
    Chain(#[from] crate::state::StateError),
}

fn io(action: &'static str, path: &Path, e: std::io::Error) -> HistoryError {
    HistoryError::Io {
        action,
        path: path.to_path_buf(),
        source: e.into(),
    }
}

/// One reversible operation, as journaled before it happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Operation {
    /// A memory key set; `previous` is what it held (`None`: it was new).
    MemorySet {
        /// The memory scope.
        scope: String,
        /// The key.
        key: String,
        /// The value it held before; `None`: it was new.
        previous: Option<String>,
        /// sha256 of the value written.
        value_sha256: String,
    },
    /// A memory key deleted; `previous` is what it held.
    MemoryDelete {
        /// The memory scope.
        scope: String,
        /// The key.
        key: String,
        /// The value it held; `None`: it held none.
        previous: Option<String>,
    },
    /// A file the turn created (it did not exist). Paths are canonical
    /// host paths.
    FileCreate {
        /// The file created, canonical.
        path: String,
    },
    /// An existing file opened to be written or truncated; `blob` is the
    /// sha256 of its bytes before, stored at `<turn>/blob/<blob>.bin`.
    FileOverwrite {
        /// The file, canonical.
        path: String,
        /// sha256 of its bytes before, the name of its blob.
        blob: String,
    },
    /// A file deleted; `blob` holds its bytes (`None`: its content was the
    /// turn's own, restored by an earlier operation of the turn).
    FileDelete {
        /// The file, canonical.
        path: String,
        /// sha256 of its bytes, the name of its blob; `None`: see above.
        blob: Option<String>,
    },
    /// A symbolic link deleted; `target` is what it pointed to.
    SymlinkDelete {
        /// The link, canonical.
        path: String,
        /// What it pointed to, as written.
        target: String,
    },
    /// A directory the turn created.
    DirCreate {
        /// The directory created, canonical.
        path: String,
    },
    /// An (empty) directory the turn removed.
    DirRemove {
        /// The directory removed, canonical.
        path: String,
    },
    /// `from` moved to `to`; what `to` held before: a file (`replaced_blob`),
    /// an empty directory (`replaced_dir`), or nothing.
    Rename {
        /// The path moved, canonical.
        from: String,
        /// Where it moved to, canonical.
        to: String,
        /// sha256 of the file `to` held before, the name of its blob; `None`: no file.
        replaced_blob: Option<String>,
        /// Whether `to` was an empty directory before.
        #[serde(default)]
        replaced_dir: bool,
    },
    /// A symbolic or hard link the turn created.
    LinkCreate {
        /// The link created, canonical.
        path: String,
    },
}

impl Operation {
    /// The reverse pattern of the catalogue that undoes it.
    pub fn reverse_pattern(&self) -> &'static str {
        match self {
            Operation::MemorySet { previous: None, .. } => "delete_memory_by_id",
            Operation::MemorySet { .. } | Operation::MemoryDelete { .. } => "restore_blob_backup",
            Operation::FileCreate { .. } | Operation::LinkCreate { .. } => "delete_created_paths",
            Operation::DirCreate { .. } => "delete_created_dirs",
            Operation::FileOverwrite { .. }
            | Operation::FileDelete { .. }
            | Operation::SymlinkDelete { .. }
            | Operation::DirRemove { .. } => "restore_blob_backup",
            Operation::Rename { .. } => "swap_src_dst",
        }
    }
}

/// A journal line: the operation and its sequence number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The operation's number in the journal, in the order they happened.
    pub seq: u64,
    /// The operation journaled.
    #[serde(flatten)]
    pub op: Operation,
}

/// `turn.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// The turn's id, the name of its history directory.
    pub turn: String,
    /// The executor that ran.
    pub executor: String,
    /// The actor it ran as.
    pub actor: String,
    /// The autonomy level of the turn (`ReadOnly`, `Supervised`, `Full`).
    pub level: Cow<'static, str>,
    /// When the turn started.
    pub started_at: UtcTime,
    /// When it ended; `None` while it runs.
    pub finished_at: Option<UtcTime>,
    /// `running` until the turn ends; `ok`, `error` or a limit code after.
    pub status: TurnStatus,
    /// `none`, `undone` or `partly_undone`.
    pub undo: UndoState,
    /// A command's `argv[1..]` (`gatehouse run X -- ARGS`); absent when
    /// there were none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

/// Where a turn is: written as `running`, `ok`, `error`, or the code that
/// stopped it (`LIMIT_DEADLINE`, …), as `turn.json` and the audit always
/// had it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum TurnStatus {
    /// The turn has not ended (or its process died before it did).
    Running,
    /// The guest returned its output.
    Ok,
    /// The guest returned an error, or the run failed without a code.
    Error,
    /// A limit or a cancel stopped the run.
    Stopped(crate::policy::DenyCode),
}

impl TurnStatus {
    /// The stable string.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Running => "running",
            TurnStatus::Ok => "ok",
            TurnStatus::Error => "error",
            TurnStatus::Stopped(code) => code.as_str(),
        }
    }
}

impl std::fmt::Display for TurnStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<TurnStatus> for String {
    fn from(s: TurnStatus) -> String {
        s.as_str().to_string()
    }
}

impl TryFrom<String> for TurnStatus {
    type Error = String;
    fn try_from(s: String) -> Result<TurnStatus, String> {
        Ok(match s.as_str() {
            "running" => TurnStatus::Running,
            "ok" => TurnStatus::Ok,
            "error" => TurnStatus::Error,
            code => TurnStatus::Stopped(
                crate::policy::DenyCode::from_name(code)
                    .ok_or_else(|| format!("unknown turn status `{code}`"))?,
            ),
        })
    }
}

/// What undo did to a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UndoState {
    /// Not undone.
    None,
    /// Every operation was reversed.
    Undone,
    /// Some operations could not be reversed (changed since, say).
    PartlyUndone,
}

impl std::fmt::Display for UndoState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UndoState::None => "none",
            UndoState::Undone => "undone",
            UndoState::PartlyUndone => "partly_undone",
        })
    }
}

/// The writer of one turn's history, shared by the host interfaces of the
/// run (hence the mutex: host calls are sequential, but bindings hold it).
///
/// The directory `<history>/<turn>/` is created at the turn's first
/// journaled mutation ([`TurnJournal::record`], or [`TurnJournal::ensure`]
/// before a backup): until then the turn's decisions are kept in memory.
/// Creating it writes `turn.json` and every decision so far to
/// `decisions.jsonl`, synced, *before* the mutation is journaled. A turn
/// that mutates nothing never has a directory: [`TurnJournal::finish`]
/// appends its whole audit record (the turn and its decisions) as one line
/// to the host's audit log (`<state>/audit.jsonl`) instead.
///
/// With an audit chain ([`TurnJournal::with_chain`]), every turn that
/// records itself also appends one record to the chain at its finish:
/// the `audit.jsonl` line itself, or, for a turn with a directory, a line
/// of the same shape (its final `turn.json` fields and the decisions it
/// wrote to `decisions.jsonl`, kept in memory for this).
#[derive(Clone)]
pub struct TurnJournal {
    inner: Arc<Mutex<Inner>>,
    dir: PathBuf,
}

struct Inner {
    record: TurnRecord,
    /// Decisions made before the directory exists, each one JSON line.
    pending: Vec<String>,
    open: Option<OpenFiles>,
    next_seq: u64,
    /// Where the record of a turn without a directory goes.
    audit: Option<Arc<AppendLog>>,
    /// The audit chain every recorded turn appends one record to.
    chain: Option<Arc<dyn AuditStore>>,
    /// This node's name in a fleet's history index: the chain record is
    /// then appended with it, and the chain indexes the turn.
    node: Option<String>,
    /// With a chain: the lines written to `decisions.jsonl`, for the
    /// turn's chain record.
    written: Vec<String>,
    finished: bool,
    /// What the turn's filesystem layers could write; those from
    /// `scopes_written` on are not in `fs-scope.jsonl` yet.
    scopes: Vec<FsScope>,
    scopes_written: usize,
}

struct OpenFiles {
    journal: File,
    decisions: File,
}

impl TurnJournal {
    /// The journal of `record.turn` under `history`; nothing is written
    /// until the first mutation or [`TurnJournal::finish`]. `audit` is
    /// where a turn that mutated nothing records itself (`None`: such a
    /// turn leaves no record, as in benchmarks).
    pub fn lazy(history: &Path, record: TurnRecord, audit: Option<Arc<AppendLog>>) -> TurnJournal {
        TurnJournal {
            dir: history.join(&record.turn),
            inner: Arc::new(Mutex::new(Inner {
                record,
                pending: Vec::new(),
                open: None,
                next_seq: 0,
                audit,
                chain: None,
                node: None,
                written: Vec::new(),
                finished: false,
                scopes: Vec::new(),
                scopes_written: 0,
            })),
        }
    }

    /// The journal with `chain`: a turn that records itself (it has an
    /// audit log) also appends its record to the chain at its finish.
    pub fn with_chain(self, chain: Arc<dyn AuditStore>) -> TurnJournal {
        if let Ok(mut inner) = self.inner.lock() {
            inner.chain = Some(chain);
        }
        self
    }

    /// The journal of a fleet's node named `node`: a turn that records
    /// itself appends its chain record with the node's name and its
    /// operation count, and a fleet's chain indexes the turn from it
    /// ([`AuditStore::append_indexed`]) in the same commit.
    pub fn on_node(self, node: &str) -> TurnJournal {
        if let Ok(mut inner) = self.inner.lock() {
            inner.node = Some(node.to_string());
        }
        self
    }

    /// Creates `<history>/<turn>/` at once with its record and `decisions`.
    pub fn create(
        history: &Path,
        record: &TurnRecord,
        decisions: &[serde_json::Value],
    ) -> Result<TurnJournal, HistoryError> {
        let j = TurnJournal::lazy(history, record.clone(), None);
        for d in decisions {
            j.decision(d)?;
        }
        j.ensure()?;
        Ok(j)
    }

    /// The turn's directory (it exists once [`TurnJournal::ensure`] or
    /// [`TurnJournal::record`] succeeded).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Inner>, HistoryError> {
        self.inner.lock().map_err(|_| HistoryError::Poisoned {
            path: self.dir.clone(),
        })
    }

    /// Whether the turn's directory exists (it mutated something).
    pub fn is_open(&self) -> bool {
        self.lock().map(|i| i.open.is_some()).unwrap_or(false)
    }

    /// Creates the turn's directory if it does not exist yet: `turn.json`,
    /// the decisions so far (synced), an empty journal.
    pub fn ensure(&self) -> Result<(), HistoryError> {
        let mut inner = self.lock()?;
        self.open_locked(&mut inner)
    }

    fn open_locked(&self, inner: &mut Inner) -> Result<(), HistoryError> {
        if inner.open.is_some() {
            return Ok(());
        }
        let dir = &self.dir;
        std::fs::create_dir_all(dir).map_err(|e| io("create", dir, e))?;
        write_json(&dir.join("turn.json"), &inner.record)?;
        let dpath = dir.join("decisions.jsonl");
        let mut decisions = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&dpath)
            .map_err(|e| io("open", &dpath, e))?;
        let mut bytes = Vec::new();
        for d in &inner.pending {
            bytes.extend_from_slice(d.as_bytes());
            bytes.push(b'\n');
        }
        decisions
            .write_all(&bytes)
            .map_err(|e| io("write", &dpath, e))?;
        // The decisions that allowed the mutation are on disk before it.
        decisions.sync_data().map_err(|e| io("sync", &dpath, e))?;
        if inner.chained() {
            let pending = std::mem::take(&mut inner.pending);
            inner.written.extend(pending);
        } else {
            inner.pending.clear();
        }
        let jpath = dir.join("journal.jsonl");
        let journal = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&jpath)
            .map_err(|e| io("open", &jpath, e))?;
        inner.open = Some(OpenFiles { journal, decisions });
        Ok(())
    }

    /// Notes what a filesystem layer of the turn could write (its
    /// read-write roots, its globs, the protected paths): undo acts only
    /// beneath those roots, within those globs (see [`super::fs`]).
    /// Nothing is written here: the scopes not yet on disk are appended
    /// to `fs-scope.jsonl`, synced, before the next operation is
    /// journaled. A scope with no root is ignored; one already noted is
    /// not noted twice.
    pub fn fs_scope(&self, scope: FsScope) {
        if scope.roots.is_empty() {
            return;
        }
        if let Ok(mut inner) = self.lock() {
            if !inner.scopes.contains(&scope) {
                inner.scopes.push(scope);
            }
        }
    }

    fn write_scopes_locked(&self, inner: &mut Inner) -> Result<(), HistoryError> {
        if inner.scopes_written == inner.scopes.len() {
            return Ok(());
        }
        let path = scope_path(&self.dir);
        let mut bytes = Vec::new();
        for scope in &inner.scopes[inner.scopes_written..] {
            push_line(&mut bytes, &path, scope)?;
        }
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| io("open", &path, e))?;
        f.write_all(&bytes).map_err(|e| io("write", &path, e))?;
        f.sync_data().map_err(|e| io("sync", &path, e))?;
        inner.scopes_written = inner.scopes.len();
        Ok(())
    }

    /// Journals `op` (fsynced) before the caller performs it; the scopes
    /// noted so far are on disk before it.
    pub fn record(&self, op: Operation) -> Result<u64, HistoryError> {
        let path = self.dir.join("journal.jsonl");
        let mut inner = self.lock()?;
        self.open_locked(&mut inner)?;
        self.write_scopes_locked(&mut inner)?;
        let seq = inner.next_seq;
        let Some(files) = inner.open.as_mut() else {
            return Err(HistoryError::NoSuchTurn(inner.record.turn.clone()));
        };
        append_line(&mut files.journal, &path, &Entry { seq, op })?;
        inner.next_seq += 1;
        Ok(seq)
    }

    /// Adds one line to the turn's audit: to `decisions.jsonl` when the
    /// directory exists, else kept for it (or for the audit log).
    pub fn decision(&self, value: &serde_json::Value) -> Result<(), HistoryError> {
        let line = serde_json::to_string(value).map_err(|e| HistoryError::Encode {
            path: self.dir.join("decisions.jsonl"),
            source: e,
        })?;
        self.decision_line(line)
    }

    /// [`TurnJournal::decision`] of a line already encoded: one JSON object,
    /// no newline.
    pub fn decision_line(&self, mut line: String) -> Result<(), HistoryError> {
        let mut inner = self.lock()?;
        match inner.open.as_mut() {
            Some(files) => {
                let path = self.dir.join("decisions.jsonl");
                line.push('\n');
                files
                    .decisions
                    .write_all(line.as_bytes())
                    .map_err(|e| io("write", &path, e))?;
                files
                    .decisions
                    .sync_data()
                    .map_err(|e| io("sync", &path, e))?;
                if inner.chained() {
                    line.pop();
                    inner.written.push(line);
                }
                Ok(())
            }
            None => {
                inner.pending.push(line);
                Ok(())
            }
        }
    }

    /// Ends the turn with `status`: rewrites `turn.json` when the turn has
    /// a directory, else appends its audit record (the turn record and its
    /// decisions, one line) to the host's audit log. Either way, with a
    /// chain, appends the turn's record to it, committed before this
    /// returns. Once only.
    pub fn finish(&self, status: TurnStatus, now: UtcTime) -> Result<(), HistoryError> {
        let mut inner = self.lock()?;
        if inner.finished {
            return Ok(());
        }
        inner.finished = true;
        inner.record.finished_at = Some(now);
        inner.record.status = status;
        // A fleet's chain indexes the turn with its record, in one commit.
        let index = inner.node.clone().map(|node| (node, inner.next_seq));
        self.write_finish(&mut inner, now, index.as_ref())
    }

    /// Writes the finished record where it goes.
    fn write_finish(
        &self,
        inner: &mut Inner,
        now: UtcTime,
        index: Option<&(String, u64)>,
    ) -> Result<(), HistoryError> {
        let chain = if inner.chained() {
            inner.chain.clone()
        } else {
            None
        };
        if inner.open.is_some() {
            let path = self.dir.join("turn.json");
            let written = write_json(&path, &inner.record);
            // Its chain record whatever happened to `turn.json`: the
            // decisions are on disk, and the chain must not miss the turn.
            let chained = match &chain {
                Some(chain) => {
                    let decisions = std::mem::take(&mut inner.written);
                    audit_line(&inner.record, &decisions, &path).and_then(|line| {
                        append_chain(chain.as_ref(), &inner.record, now, &line, index)
                    })
                }
                None => Ok(()),
            };
            return written.and(chained);
        }
        let Some(audit) = inner.audit.clone() else {
            return Ok(());
        };
        let pending = std::mem::take(&mut inner.pending);
        let mut line = audit_line(&inner.record, &pending, audit.path())?;
        // The log's line with its newline, and the chain's body the same
        // bytes without it: one buffer, not a copy.
        line.push('\n');
        let logged = audit.append_terminated(line.as_bytes());
        match chain {
            // The chain's body is the audit log's line, byte for byte.
            Some(chain) => {
                let body = &line[..line.len() - 1];
                let chained = append_chain(chain.as_ref(), &inner.record, now, body, index);
                logged.and(chained)
            }
            None => logged,
        }
    }

    /// Drops the turn's unrecorded decisions without writing anything: for
    /// a request refused before any guest code ran, whose one record is its
    /// denial line.
    pub fn discard(&self) {
        if let Ok(mut inner) = self.lock() {
            inner.finished = true;
            inner.pending.clear();
        }
    }
}

impl Inner {
    /// Whether the turn's record goes to a chain: it has one, and it
    /// records itself at all (a journal without an audit log, as in
    /// benchmarks, records nothing).
    fn chained(&self) -> bool {
        self.chain.is_some() && self.audit.is_some()
    }
}

/// The record of a turn as one `audit.jsonl` line: its own fields, then
/// its decisions, already encoded (an [`AuditRecord`], with no decision
/// decoded and encoded again). `path` is what an encoding error names.
fn audit_line(
    record: &TurnRecord,
    decisions: &[String],
    path: &Path,
) -> Result<String, HistoryError> {
    let mut line = serde_json::to_string(record).map_err(|e| HistoryError::Encode {
        path: path.to_path_buf(),
        source: e,
    })?;
    line.reserve(16 + decisions.iter().map(|l| l.len() + 1).sum::<usize>());
    if line.ends_with('}') {
        line.pop();
    }
    if !line.ends_with('{') {
        line.push(',');
    }
    line.push_str("\"decisions\":[");
    for (i, decision) in decisions.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        line.push_str(decision);
    }
    line.push_str("]}");
    Ok(line)
}

/// Appends the turn record `line` to `chain`, as of `now`; indexed as run
/// on a node with its operation count, when given.
fn append_chain(
    chain: &dyn AuditStore,
    record: &TurnRecord,
    now: UtcTime,
    line: &str,
    index: Option<&(String, u64)>,
) -> Result<(), HistoryError> {
    let (kind, time) = (crate::state::KIND_TURN, now.to_string());
    match index {
        Some((node, operations)) => {
            chain.append_indexed(kind, &record.turn, &time, line, node, *operations)?
        }
        // The host encoded it: one JSON object on one line.
        None => chain.append_json(kind, &record.turn, &time, line)?,
    };
    Ok(())
}

/// One line of `<state>/audit.jsonl`: a turn that mutated nothing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditRecord {
    /// The turn.
    #[serde(flatten)]
    pub record: TurnRecord,
    /// The turn's decisions, as `decisions.jsonl` would hold them.
    pub decisions: Vec<serde_json::Value>,
}

fn push_line(buf: &mut Vec<u8>, path: &Path, value: &impl Serialize) -> Result<(), HistoryError> {
    serde_json::to_writer(&mut *buf, value).map_err(|e| HistoryError::Encode {
        path: path.to_path_buf(),
        source: e,
    })?;
    buf.push(b'\n');
    Ok(())
}

fn append_line(file: &mut File, path: &Path, value: &impl Serialize) -> Result<(), HistoryError> {
    let mut line = Vec::new();
    push_line(&mut line, path, value)?;
    file.write_all(&line).map_err(|e| io("write", path, e))?;
    // Written ahead: the operation is acknowledged only after this.
    file.sync_data().map_err(|e| io("sync", path, e))
}

/// Writes a JSON file atomically (temp + rename).
fn write_json(path: &Path, value: &impl Serialize) -> Result<(), HistoryError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| HistoryError::Encode {
        path: path.to_path_buf(),
        source: e,
    })?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, bytes).map_err(|e| io("write", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io("write", path, e))
}

pub(crate) fn read_record(path: &Path) -> Result<TurnRecord, HistoryError> {
    let bytes = std::fs::read(path).map_err(|e| io("read", path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| HistoryError::Corrupt {
        path: path.to_path_buf(),
        line: e.line(),
        source: e,
    })
}

pub(crate) fn write_record(path: &Path, record: &TurnRecord) -> Result<(), HistoryError> {
    write_json(path, record)
}

/// Reads a JSON Lines file. A torn last line (the host killed while
/// writing it) is ignored: it was never acknowledged, so its operation was
/// never performed.
pub(crate) fn read_lines<T: for<'de> Deserialize<'de>>(
    path: &Path,
) -> Result<Vec<T>, HistoryError> {
    let text = match super::prune::read_log(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(io("read", path, e)),
    };
    let complete = text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str(line) {
            Ok(v) => out.push(v),
            Err(_) if i + 1 == lines.len() && !complete => {}
            Err(e) => {
                return Err(HistoryError::Corrupt {
                    path: path.to_path_buf(),
                    line: i + 1,
                    source: e,
                })
            }
        }
    }
    Ok(out)
}

/// Calls `each` with every line of the JSON Lines file `path`, read one
/// line at a time (never the whole file in memory). A missing file has no
/// lines; a last line cut short by a crash is skipped, as in
/// [`read_lines`].
pub(crate) fn each_line(
    path: &Path,
    mut each: impl FnMut(usize, &str) -> Result<(), HistoryError>,
) -> Result<(), HistoryError> {
    use std::io::BufRead;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("read", path, e)),
    };
    let mut reader = std::io::BufReader::new(file);
    let mut line = String::new();
    let mut n = 0;
    loop {
        line.clear();
        let read = reader
            .read_line(&mut line)
            .map_err(|e| io("read", path, e))?;
        if read == 0 {
            return Ok(());
        }
        n += 1;
        if !line.ends_with('\n') {
            // Cut short by a crash: no line yet.
            return Ok(());
        }
        // A pruned log starts with a hole, which reads as zero bytes.
        let text = line.trim_end_matches('\n').trim_start_matches('\0');
        if text.is_empty() {
            continue;
        }
        each(n, text)?;
    }
}

pub use crate::util::sha256_file;

/// What [`store_blob_file`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredBlob {
    /// Stored (or already there) as `<sha256>.bin`, `bytes` long.
    Stored {
        /// The file's sha256, the blob's name.
        sha256: String,
        /// The file's size, in bytes.
        bytes: u64,
    },
    /// The file is longer than the bytes allowed: nothing was kept.
    TooLarge,
}

/// Copies the file at `src` into the blob store of `turn_dir`
/// (`blob/<sha256>.bin`, durable before it returns), hashing and copying
/// in chunks, and at most `max_bytes` of it: a longer file is
/// [`StoredBlob::TooLarge`] and leaves nothing behind.
pub fn store_blob_file(turn_dir: &Path, src: &Path, max_bytes: u64) -> std::io::Result<StoredBlob> {
    use std::ops::ControlFlow;
    let dir = super::fs::blob_dir(turn_dir)?;
    let mut input = File::open(src)?;
    let tmp = tempfile_in(&dir)?;
    let result = (|| {
        let mut out = File::create(&tmp)?;
        let mut total: u64 = 0;
        let hashed = crate::util::hash::sha256_each(&mut input, |block| {
            total += block.len() as u64;
            if total > max_bytes {
                return Ok(ControlFlow::Break(()));
            }
            out.write_all(block)?;
            Ok(ControlFlow::Continue(()))
        })?;
        let Some(sha256) = hashed else {
            return Ok(StoredBlob::TooLarge);
        };
        out.sync_data()?;
        let dest = super::fs::blob_path(turn_dir, &sha256);
        if !dest.is_file() {
            std::fs::rename(&tmp, &dest)?;
        }
        Ok(StoredBlob::Stored {
            sha256,
            bytes: total,
        })
    })();
    // The temporary file is gone whatever happened (renamed, or removed).
    let _ = std::fs::remove_file(&tmp);
    result
}

/// A fresh name for a temporary file in `dir`.
fn tempfile_in(dir: &Path) -> std::io::Result<PathBuf> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    Ok(dir.join(format!(
        "incoming-{}-{}.tmp",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )))
}
