//! A turn's history directory: `<history>/<turn>/` with `turn.json` (what
//! ran, when, how it ended), `decisions.jsonl` (the audit log) and
//! `journal.jsonl` (every mutation, written and fsynced *before* the
//! operation is done, so a turn killed midway can still be undone).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::policy::UtcTime;

/// Why the history could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("cannot {action} `{path}`: {reason}")]
    Io {
        action: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("`{path}` line {line}: {reason}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("no turn `{0}` in the history")]
    NoSuchTurn(String),
}

fn io(action: &'static str, path: &Path, e: std::io::Error) -> HistoryError {
    HistoryError::Io {
        action,
        path: path.to_path_buf(),
        reason: crate::config::lower(&e.to_string()),
    }
}

/// One reversible operation, as journaled before it happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Operation {
    /// A memory key set; `previous` is what it held (`None`: it was new).
    MemorySet {
        scope: String,
        key: String,
        previous: Option<String>,
        value_sha256: String,
    },
    /// A memory key deleted; `previous` is what it held.
    MemoryDelete {
        scope: String,
        key: String,
        previous: Option<String>,
    },
    /// A file the turn created (it did not exist). Paths are canonical
    /// host paths.
    FileCreate { path: String },
    /// An existing file opened to be written or truncated; `blob` is the
    /// sha256 of its bytes before, stored at `<turn>/blob/<blob>.bin`.
    FileOverwrite { path: String, blob: String },
    /// A file deleted; `blob` holds its bytes (`None`: its content was the
    /// turn's own, restored by an earlier operation of the turn).
    FileDelete { path: String, blob: Option<String> },
    /// A symbolic link deleted; `target` is what it pointed to.
    SymlinkDelete { path: String, target: String },
    /// A directory the turn created.
    DirCreate { path: String },
    /// An (empty) directory the turn removed.
    DirRemove { path: String },
    /// `from` moved to `to`; what `to` held before: a file (`replaced_blob`),
    /// an empty directory (`replaced_dir`), or nothing.
    Rename {
        from: String,
        to: String,
        replaced_blob: Option<String>,
        #[serde(default)]
        replaced_dir: bool,
    },
    /// A symbolic or hard link the turn created.
    LinkCreate { path: String },
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
    pub seq: u64,
    #[serde(flatten)]
    pub op: Operation,
}

/// `turn.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnRecord {
    pub turn: String,
    pub executor: String,
    pub actor: String,
    pub level: String,
    pub started_at: UtcTime,
    pub finished_at: Option<UtcTime>,
    /// `running` until the turn ends; `ok`, `error` or a limit code after.
    pub status: String,
    /// `none`, `undone` or `partly_undone`.
    pub undo: String,
}

/// The writer of one turn's history, shared by the host interfaces of the
/// run (hence the mutex: host calls are sequential, but bindings hold it).
#[derive(Clone)]
pub struct TurnJournal {
    inner: Arc<Mutex<Inner>>,
    dir: PathBuf,
}

struct Inner {
    journal: File,
    next_seq: u64,
}

fn append_line(file: &mut File, path: &Path, value: &impl Serialize) -> Result<(), HistoryError> {
    let mut line = serde_json::to_vec(value).map_err(|e| HistoryError::Io {
        action: "encode",
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    line.push(b'\n');
    file.write_all(&line).map_err(|e| io("write", path, e))?;
    // Written ahead: the operation is acknowledged only after this.
    file.sync_data().map_err(|e| io("sync", path, e))
}

/// Writes a JSON file atomically (temp + rename).
fn write_json(path: &Path, value: &impl Serialize) -> Result<(), HistoryError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| HistoryError::Io {
        action: "encode",
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, bytes).map_err(|e| io("write", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io("write", path, e))
}

impl TurnJournal {
    /// Creates `<history>/<turn>/` with its record and the audit log.
    pub fn create(
        history: &Path,
        record: &TurnRecord,
        decisions: &[serde_json::Value],
    ) -> Result<TurnJournal, HistoryError> {
        let dir = history.join(&record.turn);
        std::fs::create_dir_all(&dir).map_err(|e| io("create", &dir, e))?;
        write_json(&dir.join("turn.json"), record)?;
        let dpath = dir.join("decisions.jsonl");
        let mut dfile = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&dpath)
            .map_err(|e| io("open", &dpath, e))?;
        for d in decisions {
            append_line(&mut dfile, &dpath, d)?;
        }
        let jpath = dir.join("journal.jsonl");
        let journal = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&jpath)
            .map_err(|e| io("open", &jpath, e))?;
        Ok(TurnJournal {
            inner: Arc::new(Mutex::new(Inner {
                journal,
                next_seq: 0,
            })),
            dir,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Journals `op` (fsynced) before the caller performs it.
    pub fn record(&self, op: Operation) -> Result<u64, HistoryError> {
        let path = self.dir.join("journal.jsonl");
        let mut inner = self.inner.lock().map_err(|_| HistoryError::Io {
            action: "lock",
            path: path.clone(),
            reason: "a previous writer panicked".into(),
        })?;
        let seq = inner.next_seq;
        append_line(&mut inner.journal, &path, &Entry { seq, op })?;
        inner.next_seq += 1;
        Ok(seq)
    }

    /// Appends one line to the turn's audit log (`decisions.jsonl`), as
    /// a refusal by the filesystem layer during the run.
    pub fn decision(&self, value: &serde_json::Value) -> Result<(), HistoryError> {
        let path = self.dir.join("decisions.jsonl");
        let _guard = self.inner.lock().map_err(|_| HistoryError::Io {
            action: "lock",
            path: path.clone(),
            reason: "a previous writer panicked".into(),
        })?;
        let mut file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| io("open", &path, e))?;
        append_line(&mut file, &path, value)
    }

    /// Marks the turn finished with `status`.
    pub fn finish(&self, status: &str, now: UtcTime) -> Result<(), HistoryError> {
        let path = self.dir.join("turn.json");
        let mut record = read_record(&path)?;
        record.finished_at = Some(now);
        record.status = status.to_string();
        write_json(&path, &record)
    }
}

pub(crate) fn read_record(path: &Path) -> Result<TurnRecord, HistoryError> {
    let bytes = std::fs::read(path).map_err(|e| io("read", path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| HistoryError::Corrupt {
        path: path.to_path_buf(),
        line: e.line(),
        reason: e.to_string(),
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
    let text = match std::fs::read_to_string(path) {
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
                    reason: e.to_string(),
                })
            }
        }
    }
    Ok(out)
}
