//! `gatehouse history prune --older-than 30d`: removes old turns, audit
//! and denial records, and the audit chain's old records.
//!
//! The chain goes first, in one transaction of its store: its records
//! before the first one at or after the cutoff are deleted and the last
//! of them kept as its checkpoint, so `gatehouse history verify` still
//! passes. A part of the chain that does not verify is never removed
//! (that would hide the tampering): the prune then stops before it has
//! removed anything.
//!
//! A turn's directory goes whole when it started before the cutoff. The
//! two logs (`audit.jsonl`, `denials.jsonl`) are appended to by running
//! hosts at the same time, with `O_APPEND` and without a lock (one
//! `write(2)` per record, see [`super::append`]), so they are never
//! rewritten or replaced: that would lose a record a server appends
//! meanwhile. Their old records, a prefix of the file, are *punched out*
//! instead (`fallocate(PUNCH_HOLE | KEEP_SIZE)`): the blocks are freed and
//! read back as zero bytes, the size and every later offset stay, and
//! appends go on at the end undisturbed. Readers skip the hole
//! ([`read_log`]). Where the filesystem cannot punch holes the logs are
//! left whole and the report says so.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::journal::{self, HistoryError};
use crate::policy::UtcTime;
use crate::state::AuditStore;

/// What a prune removed (or, in a dry run, would remove).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PruneReport {
    /// Records and turns that started before this time are removed.
    pub cutoff: UtcTime,
    /// Whether it was `--dry-run`: nothing was removed.
    pub dry_run: bool,
    /// Turn directories removed.
    pub turns: usize,
    /// Records removed from the audit log.
    pub audit_records: usize,
    /// Records removed from the denial log.
    pub denial_records: usize,
    /// Records removed from the audit chain.
    pub chain_records: u64,
    /// The bytes of the turn directories removed and of the log records
    /// punched out.
    pub bytes: u64,
    /// Logs whose old records could not be removed, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

fn io(action: &'static str, path: &Path, e: std::io::Error) -> HistoryError {
    HistoryError::Io {
        action,
        path: path.to_path_buf(),
        source: e.into(),
    }
}

/// A log's text: its hole (records pruned before) skipped.
pub(crate) fn read_log(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let start = first_data(&mut file)?;
    file.seek(SeekFrom::Start(start))?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    // A hole's end that is not block-aligned reads as zero bytes.
    Ok(match text.find(|c| c != '\0') {
        Some(0) => text,
        Some(i) => text.split_off(i),
        None => String::new(),
    })
}

/// The offset of the first data in `file` (past a punched hole).
fn first_data(file: &mut std::fs::File) -> std::io::Result<u64> {
    match rustix::fs::seek(&*file, rustix::fs::SeekFrom::Data(0)) {
        Ok(at) => Ok(at),
        // ENXIO: no data at all (empty, or all hole).
        Err(rustix::io::Errno::NXIO) => file.seek(SeekFrom::End(0)),
        // A filesystem without SEEK_DATA: read from the start.
        Err(_) => Ok(0),
    }
}

/// Removes every turn of `history_dir` and every record of the logs that
/// started before `cutoff`, and the records of `chain` before the first
/// one at or after it (keeping a checkpoint); with `dry_run`, only counts
/// them. A part of the chain that does not verify stops the prune before
/// anything is removed ([`crate::state::StateError::Broken`]).
///
/// # Security
/// Deletes history: a pruned turn can no longer be undone or audited.
pub fn prune(
    history_dir: &Path,
    logs: &[(&Path, LogKind)],
    chain: Option<&dyn AuditStore>,
    cutoff: UtcTime,
    dry_run: bool,
) -> Result<PruneReport, HistoryError> {
    let chain_records = match chain {
        Some(chain) => chain.prune_before(&cutoff.to_string(), dry_run)?,
        None => 0,
    };
    let mut report = PruneReport {
        cutoff,
        dry_run,
        turns: 0,
        audit_records: 0,
        denial_records: 0,
        chain_records,
        bytes: 0,
        skipped: vec![],
    };
    prune_turns(history_dir, cutoff, dry_run, &mut report)?;
    for (path, kind) in logs {
        let (records, bytes) = match prune_log(path, cutoff, dry_run) {
            Ok(done) => done,
            Err(LogError::CannotPunch(e)) => {
                report.skipped.push(format!(
                    "`{}`: the filesystem cannot free part of a file ({}); its records are kept",
                    path.display(),
                    crate::util::lower(&e.to_string())
                ));
                continue;
            }
            Err(LogError::History(e)) => return Err(e),
        };
        report.bytes += bytes;
        match kind {
            LogKind::Audit => report.audit_records += records,
            LogKind::Denials => report.denial_records += records,
        }
    }
    Ok(report)
}

/// Which log a path is (for the report's counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogKind {
    /// `<state>/audit.jsonl`.
    Audit,
    /// `<state>/denials.jsonl`.
    Denials,
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

fn prune_turns(
    history_dir: &Path,
    cutoff: UtcTime,
    dry_run: bool,
    report: &mut PruneReport,
) -> Result<(), HistoryError> {
    let entries = match std::fs::read_dir(history_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("read", history_dir, e)),
    };
    let mut old: Vec<PathBuf> = Vec::new();
    for e in entries.flatten() {
        let dir = e.path();
        let record = dir.join("turn.json");
        if !record.is_file() {
            continue;
        }
        if journal::read_record(&record)?.started_at < cutoff {
            old.push(dir);
        }
    }
    for dir in old {
        report.bytes += dir_bytes(&dir);
        report.turns += 1;
        if !dry_run {
            std::fs::remove_dir_all(&dir).map_err(|e| io("remove", &dir, e))?;
        }
    }
    Ok(())
}

enum LogError {
    CannotPunch(std::io::Error),
    History(HistoryError),
}

impl From<HistoryError> for LogError {
    fn from(e: HistoryError) -> LogError {
        LogError::History(e)
    }
}

/// The time a log line records: a turn's `started_at`, a denial's `time`.
fn line_time(line: &str) -> Option<UtcTime> {
    #[derive(serde::Deserialize)]
    struct Stamp {
        started_at: Option<UtcTime>,
        time: Option<UtcTime>,
    }
    let s: Stamp = serde_json::from_str(line).ok()?;
    s.started_at.or(s.time)
}

/// Punches out the old prefix of one log: the records before the first
/// one at or after `cutoff` (records are appended in time order, so the
/// old ones are a prefix). The count of records and bytes removed.
fn prune_log(path: &Path, cutoff: UtcTime, dry_run: bool) -> Result<(usize, u64), LogError> {
    let mut file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(io("open", path, e).into()),
    };
    let start = first_data(&mut file).map_err(|e| io("read", path, e))?;
    file.seek(SeekFrom::Start(start))
        .map_err(|e| io("read", path, e))?;
    let mut reader = BufReader::new(&file);
    let mut at = start;
    let mut end = start;
    let mut records = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| io("read", path, e))?;
        // The end, or a record still being written: stop before it.
        if n == 0 || line.last() != Some(&b'\n') {
            break;
        }
        at += n as u64;
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_start_matches('\0').trim_end();
        if text.is_empty() {
            end = at;
            continue;
        }
        match line_time(text) {
            Some(t) if t < cutoff => {
                records += 1;
                end = at;
            }
            _ => break,
        }
    }
    drop(reader);
    let len = end - start;
    if len == 0 || dry_run {
        return Ok((records, len));
    }
    use rustix::fs::FallocateFlags;
    rustix::fs::fallocate(
        &file,
        FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
        start,
        len,
    )
    .map_err(|e| LogError::CannotPunch(e.into()))?;
    Ok((records, len))
}
