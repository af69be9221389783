//! Turns, the journal and undo.
//!
//! Every turn that runs gets `<history>/<turn>/` (see [`journal`]). `undo`
//! reverses a turn's journaled operations in reverse order with the closed
//! catalogue of reverse patterns, and never overwrites data newer than the
//! turn: an operation whose target changed since is `skipped`.
//!
//! The catalogue (`crate::manifest::REVERSE_PATTERNS`): `swap_src_dst`,
//! `delete_created_dirs`, `delete_created_paths`, `restore_blob_backup`,
//! `delete_memory_by_id`. Memory operations use the last two; files and
//! directories, journaled by `crate::sandbox::journal_fs`, all of them
//! but the last (see [`fs`]).

pub mod append;
pub(crate) mod beneath;
pub mod fs;
pub mod journal;
pub mod prune;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

pub use append::AppendLog;
pub use journal::{
    AuditRecord, Entry, HistoryError, Operation, TurnJournal, TurnRecord, TurnStatus, UndoState,
};
pub use prune::{prune, LogKind, PruneReport};

use crate::policy::snapshot::sha256_hex;
use crate::state::history::TurnIndex;
use crate::state::memory::MemoryBackend;

/// What happened to one operation on undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UndoStatus {
    /// Reversed.
    Done,
    /// The target changed since the turn; left as it is.
    Skipped,
    /// The reversal was tried and failed; the reason says why.
    Failed,
    /// `--dry-run`: what would be done.
    WouldDo,
}

/// One journaled operation of an undo, and what became of it.
#[derive(Debug, Clone, Serialize)]
pub struct UndoStep {
    /// The operation's number in the turn's journal.
    pub seq: u64,
    /// The operation.
    #[serde(flatten)]
    pub op: Operation,
    /// The reverse pattern that undoes it (see [`Operation::reverse_pattern`]).
    pub pattern: &'static str,
    /// What happened to it.
    pub status: UndoStatus,
    /// What was done, or why it was skipped or failed.
    pub reason: String,
}

/// What an undo of one turn did (or, dry, would do).
#[derive(Debug, Clone, Serialize)]
pub struct UndoReport {
    /// The turn undone.
    pub turn: String,
    /// Whether it was `--dry-run`: nothing was changed.
    pub dry_run: bool,
    /// The turn had been undone before: nothing was done this time.
    pub already_undone: bool,
    /// Every operation, newest first.
    pub steps: Vec<UndoStep>,
}

/// One turn as `history` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct TurnSummary {
    /// The turn's `turn.json`.
    #[serde(flatten)]
    pub record: TurnRecord,
    /// How many operations it journaled (0 for a turn of the audit log).
    pub operations: usize,
    /// The node of the fleet that ran it (a fleet's history only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// The history directory.
pub struct History {
    dir: PathBuf,
    /// `<state>/audit.jsonl`: the turns that mutated nothing.
    audit: Option<PathBuf>,
    /// A fleet's history index: every node's turns.
    index: Option<Arc<dyn TurnIndex>>,
}

/// A turn of a fleet's index as [`History::turns`] lists it.
fn indexed_summary(t: crate::state::history::IndexedTurn) -> Result<TurnSummary, HistoryError> {
    let record = serde_json::from_value(t.record).map_err(|e| HistoryError::Corrupt {
        path: PathBuf::from("turns"),
        line: 0,
        source: e,
    })?;
    Ok(TurnSummary {
        record,
        operations: usize::try_from(t.operations).unwrap_or(usize::MAX),
        node: Some(t.node),
    })
}

impl History {
    /// The history under `dir`, without the audit log's turns.
    pub fn new(dir: &Path) -> History {
        History {
            dir: dir.to_path_buf(),
            audit: None,
            index: None,
        }
    }

    /// Lists the turns of a fleet's `index` (every node's) instead of this
    /// node's directory, and records each undo's outcome in it. `None`:
    /// unchanged (the embedded backend).
    pub fn with_index(self, index: Option<Arc<dyn TurnIndex>>) -> History {
        History { index, ..self }
    }

    /// Also reads the turns recorded in `audit_log` (`<state>/audit.jsonl`):
    /// those that ran and mutated nothing, so have no directory.
    pub fn with_audit_log(self, audit_log: &Path) -> History {
        History {
            audit: Some(audit_log.to_path_buf()),
            ..self
        }
    }

    fn audit_records(&self) -> Result<Vec<AuditRecord>, HistoryError> {
        match &self.audit {
            Some(path) => journal::read_lines(path),
            None => Ok(Vec::new()),
        }
    }

    /// Every turn, oldest first: this node's, or with an index the
    /// fleet's.
    pub fn turns(&self) -> Result<Vec<TurnSummary>, HistoryError> {
        if let Some(index) = &self.index {
            let mut out = index
                .turns()?
                .into_iter()
                .map(indexed_summary)
                .collect::<Result<Vec<TurnSummary>, HistoryError>>()?;
            // This node's turns the index has not heard of: those still
            // running, or whose host died before they finished (their
            // journal is here, and undo works on them).
            let known: std::collections::HashSet<String> =
                out.iter().map(|t| t.record.turn.clone()).collect();
            out.extend(
                self.local_turns()?
                    .into_iter()
                    .filter(|t| !known.contains(&t.record.turn)),
            );
            out.sort_by(|a, b| {
                (a.record.started_at, &a.record.turn).cmp(&(b.record.started_at, &b.record.turn))
            });
            return Ok(out);
        }
        self.local_turns()
    }

    /// One turn, as [`History::turns`] lists it. With a fleet's index it
    /// is looked up there (one indexed query, not the whole fleet's
    /// list), else among this node's turns.
    pub fn turn(&self, turn: &str) -> Result<TurnSummary, HistoryError> {
        if let Some(index) = &self.index {
            if let Some(t) = index.get(turn)? {
                return indexed_summary(t);
            }
        }
        self.local_turns()?
            .into_iter()
            .find(|t| t.record.turn == turn)
            .ok_or_else(|| HistoryError::NoSuchTurn(turn.to_string()))
    }

    /// This node's turns (its directory and audit log), oldest first.
    fn local_turns(&self) -> Result<Vec<TurnSummary>, HistoryError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => Some(e),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(HistoryError::Io {
                    action: "read",
                    path: self.dir.clone(),
                    source: e.into(),
                })
            }
        };
        let mut out: Vec<TurnSummary> = self
            .audit_records()?
            .into_iter()
            .map(|r| TurnSummary {
                record: r.record,
                operations: 0,
                node: None,
            })
            .collect();
        for e in entries.into_iter().flatten().flatten() {
            let dir = e.path();
            let record_path = dir.join("turn.json");
            if !record_path.is_file() {
                continue;
            }
            let record = journal::read_record(&record_path)?;
            let operations = journal::read_lines::<Entry>(&dir.join("journal.jsonl"))?.len();
            out.push(TurnSummary {
                record,
                operations,
                node: None,
            });
        }
        out.sort_by(|a, b| {
            (a.record.started_at, &a.record.turn).cmp(&(b.record.started_at, &b.record.turn))
        });
        Ok(out)
    }

    /// The audit log of `turn`: its `decisions.jsonl` when it mutated
    /// something, else its record in `audit_log` (`<state>/audit.jsonl`),
    /// each decision handed to `each` as it is read: the logs are streamed,
    /// never read whole.
    pub fn each_decision(
        &self,
        turn: &str,
        mut each: impl FnMut(serde_json::Value),
    ) -> Result<(), HistoryError> {
        let corrupt = |path: &Path, line: usize, e: serde_json::Error| HistoryError::Corrupt {
            path: path.to_path_buf(),
            line,
            source: e,
        };
        if let Ok(dir) = self.turn_dir(turn) {
            let path = dir.join("decisions.jsonl");
            return journal::each_line(&path, |n, line| {
                each(serde_json::from_str(line).map_err(|e| corrupt(&path, n, e))?);
                Ok(())
            });
        }
        let Some(path) = &self.audit else {
            return Err(HistoryError::NoSuchTurn(turn.to_string()));
        };
        // Only the record of this turn is parsed: the others are skipped
        // on a cheap look at their text.
        let field = format!("\"turn\":{}", serde_json::Value::from(turn));
        let mut found = false;
        journal::each_line(path, |n, line| {
            if found || !line.contains(&field) {
                return Ok(());
            }
            let record: AuditRecord =
                serde_json::from_str(line).map_err(|e| corrupt(path, n, e))?;
            if record.record.turn == turn {
                found = true;
                record.decisions.into_iter().for_each(&mut each);
            }
            Ok(())
        })?;
        if found {
            Ok(())
        } else {
            Err(HistoryError::NoSuchTurn(turn.to_string()))
        }
    }

    /// Every record of the denials log (`<state>/denials.jsonl`).
    pub fn denials(path: &Path) -> Result<Vec<serde_json::Value>, HistoryError> {
        journal::read_lines(path)
    }

    fn turn_dir(&self, turn: &str) -> Result<PathBuf, HistoryError> {
        // A turn id is a single path component: never `..` or a path.
        if turn.is_empty() || turn.contains('/') || turn == "." || turn == ".." {
            return Err(HistoryError::NoSuchTurn(turn.to_string()));
        }
        let dir = self.dir.join(turn);
        if !dir.join("turn.json").is_file() {
            return Err(HistoryError::NoSuchTurn(turn.to_string()));
        }
        Ok(dir)
    }

    /// The newest turn that journaled operations (what `undo` without
    /// `--turn` reverses): a turn that only read has nothing to undo and
    /// is passed over.
    pub fn last_undoable_turn(&self) -> Result<Option<String>, HistoryError> {
        // This node's: another node's turn is undone there.
        Ok(self
            .local_turns()?
            .into_iter()
            .rev()
            .find(|t| t.operations > 0)
            .map(|t| t.record.turn))
    }

    /// A turn with no journal here: another node's (its journal is
    /// there), one that mutated nothing (nothing to undo), or `e`.
    fn undo_unjournaled(
        &self,
        turn: &str,
        dry_run: bool,
        e: HistoryError,
    ) -> Result<UndoReport, HistoryError> {
        // Another node's turn: its journal is there.
        if let Some(index) = &self.index {
            if let Some(t) = index.get(turn)? {
                if t.operations > 0 {
                    return Err(HistoryError::OtherNode {
                        turn: turn.to_string(),
                        node: t.node,
                    });
                }
                return Ok(UndoReport {
                    turn: turn.to_string(),
                    dry_run,
                    already_undone: false,
                    steps: vec![],
                });
            }
        }
        if self.audit_records()?.iter().any(|r| r.record.turn == turn) {
            return Ok(UndoReport {
                turn: turn.to_string(),
                dry_run,
                already_undone: false,
                steps: vec![],
            });
        }
        Err(e)
    }

    /// Reverses `turn`'s operations, newest first. `memory` is the host's
    /// memory store (used only if the turn touched memory).
    pub fn undo(
        &self,
        turn: &str,
        dry_run: bool,
        memory: &dyn MemoryBackend,
    ) -> Result<UndoReport, HistoryError> {
        let dir = match self.turn_dir(turn) {
            Ok(dir) => dir,
            // A turn that mutated nothing has nothing to undo.
            Err(e) => return self.undo_unjournaled(turn, dry_run, e),
        };
        let record_path = dir.join("turn.json");
        let mut record = journal::read_record(&record_path)?;
        if record.undo != UndoState::None {
            return Ok(UndoReport {
                turn: turn.to_string(),
                dry_run,
                already_undone: true,
                steps: vec![],
            });
        }
        let mut entries: Vec<Entry> = journal::read_lines(&dir.join("journal.jsonl"))?;
        entries.reverse();
        let mut files = fs::FsUndo::load(&dir)?;
        let mut steps = Vec::new();
        for entry in entries {
            let pattern = entry.op.reverse_pattern();
            let (status, reason) = match files.reverse(&entry.op, dry_run) {
                Some(done) => done,
                None => reverse_memory(memory, &entry.op, dry_run),
            };
            steps.push(UndoStep {
                seq: entry.seq,
                op: entry.op,
                pattern,
                status,
                reason,
            });
        }
        if !dry_run {
            let all_done = steps.iter().all(|s| s.status == UndoStatus::Done);
            record.undo = if all_done {
                UndoState::Undone
            } else {
                UndoState::PartlyUndone
            };
            journal::write_record(&record_path, &record)?;
            if let Some(index) = &self.index {
                index.set_undo(turn, &record.undo.to_string())?;
            }
        }
        Ok(UndoReport {
            turn: turn.to_string(),
            dry_run,
            already_undone: false,
            steps,
        })
    }
}

fn reverse_memory(
    store: &dyn MemoryBackend,
    op: &Operation,
    dry_run: bool,
) -> (UndoStatus, String) {
    match op {
        Operation::FileCreate { .. }
        | Operation::FileOverwrite { .. }
        | Operation::FileDelete { .. }
        | Operation::SymlinkDelete { .. }
        | Operation::DirCreate { .. }
        | Operation::DirRemove { .. }
        | Operation::Rename { .. }
        | Operation::LinkCreate { .. } => (
            UndoStatus::Failed,
            "a filesystem operation reached the memory store".into(),
        ),
        Operation::MemorySet {
            scope,
            key,
            previous,
            value_sha256,
        } => reverse_memory_set(
            store,
            scope,
            key,
            previous.as_deref(),
            value_sha256,
            dry_run,
        ),
        Operation::MemoryDelete {
            scope,
            key,
            previous,
        } => reverse_memory_delete(store, scope, key, previous.as_deref(), dry_run),
    }
}

/// Does `f` (unless `dry_run`): the step's status, with `what` it did.
fn memory_step(
    dry_run: bool,
    f: &dyn Fn() -> Result<(), crate::state::memory::MemoryError>,
    what: String,
) -> (UndoStatus, String) {
    if dry_run {
        return (UndoStatus::WouldDo, what);
    }
    match f() {
        Ok(()) => (UndoStatus::Done, what),
        Err(e) => (UndoStatus::Failed, e.to_string()),
    }
}

/// Reverses the turn's set of `scope/key`, unless it changed since.
fn reverse_memory_set(
    store: &dyn MemoryBackend,
    scope: &str,
    key: &str,
    previous: Option<&str>,
    value_sha256: &str,
    dry_run: bool,
) -> (UndoStatus, String) {
    let current = match store.get(scope, key) {
        Ok(c) => c,
        Err(e) => return (UndoStatus::Failed, e.to_string()),
    };
    if current
        .as_deref()
        .map(|c| sha256_hex(c.as_bytes()))
        .as_deref()
        != Some(value_sha256)
    {
        return (
            UndoStatus::Skipped,
            format!("`{scope}/{key}` changed since the turn; the newer value is kept"),
        );
    }
    match previous {
        None => memory_step(
            dry_run,
            &|| store.delete(scope, key).map(|_| ()),
            format!("delete `{scope}/{key}`, created by the turn"),
        ),
        Some(p) => memory_step(
            dry_run,
            &|| store.set(scope, key, p),
            format!("restore the previous value of `{scope}/{key}`"),
        ),
    }
}

/// Restores `scope/key`, deleted by the turn, unless it was set since.
fn reverse_memory_delete(
    store: &dyn MemoryBackend,
    scope: &str,
    key: &str,
    previous: Option<&str>,
    dry_run: bool,
) -> (UndoStatus, String) {
    let Some(p) = previous else {
        return (
            UndoStatus::Done,
            format!("`{scope}/{key}` did not exist; nothing to restore"),
        );
    };
    match store.get(scope, key) {
        Ok(None) => memory_step(
            dry_run,
            &|| store.set(scope, key, p),
            format!("restore deleted `{scope}/{key}`"),
        ),
        Ok(Some(_)) => (
            UndoStatus::Skipped,
            format!("`{scope}/{key}` was set again since the turn; the newer value is kept"),
        ),
        Err(e) => (UndoStatus::Failed, e.to_string()),
    }
}
