//! The audit chain on the embedded backend: `<state>/audit-chain.jsonl`,
//! one hash-linked record per line.
//!
//! The first line is the header, `{"format":"gatehouse-audit-chain",
//! "version":1,"checkpoint":…}` (the checkpoint is the last record a prune
//! removed, or `null`); every later line is one record, `{"seq":…,
//! "kind":…,"turn":…,"time":…,"prev":…,"hash":…,"body":…}`, its body the
//! audit or denial line itself (or, for a body that is not one line of
//! JSON, `"text":` and the body as a string).
//!
//! An append is one `write(2)` of one line, made under an exclusive
//! `flock` of the file, and acknowledged only once written: every
//! appender, the threads of a host (which share the store's one
//! descriptor behind a mutex) and other processes alike, links to the
//! head it reads under that lock. The head is kept between appends; it is
//! read again (the file's last line, found from its end) only when the
//! file changed size or was replaced since. Like `audit.jsonl`, a written
//! record survives the process being killed at any point after the write
//! (it is in the kernel's page cache); the file is synced every
//! [`SYNC_EVERY`] after a write and when the store is dropped, so a power
//! loss may lose the last records, as it may the lines of `audit.jsonl`.
//!
//! Why a file and not SQLite: a transaction per turn (its write lock, its
//! three log frames, its checkpoints) cost a turn ≈ 100 µs on these
//! machines; the line costs one `write`. A store written by an earlier
//! build (`audit.db`) is imported at the first append, `gatehouse migrate`
//! or read, and renamed `audit.db.imported`: the chain goes on from its
//! last record.
//!
//! A process killed in the middle of a write leaves a torn last line (no
//! newline): it was never acknowledged, readers skip it, and the next
//! appender removes it before it writes.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::chain::{link_hash, verify, ChainRow, Checkpoint, GENESIS};
use super::{AuditStore, StateError};

/// The format version this build writes and reads (the header's
/// `version`). A file of a later version is refused, never written.
pub const FORMAT_VERSION: i64 = 1;

/// What the header's `format` says.
const FORMAT: &str = "gatehouse-audit-chain";

/// How every header this build writes begins.
const HEADER_START: &str = "{\"format\":\"gatehouse-audit-chain\"";

/// How often a written chain is synced to disk (as `audit.jsonl` is).
pub const SYNC_EVERY: Duration = crate::util::sync::LOG_SYNC_EVERY;

/// How much of the file's end is read at a time when looking for its
/// last line.
const TAIL_CHUNK: usize = 16 << 10;

/// The first line of the file.
#[derive(Deserialize)]
struct Header {
    format: String,
    version: i64,
    checkpoint: Option<Checkpoint>,
}

/// One record line, its body borrowed as written.
#[derive(Deserialize)]
struct Line<'a> {
    seq: i64,
    kind: String,
    turn: String,
    time: String,
    prev: String,
    hash: String,
    #[serde(borrow, default)]
    body: Option<&'a RawValue>,
    #[serde(default)]
    text: Option<String>,
}

impl Line<'_> {
    fn into_row(self) -> ChainRow {
        let body = match (self.body, self.text) {
            (Some(raw), _) => raw.get().to_string(),
            (None, Some(text)) => text,
            (None, None) => String::new(),
        };
        ChainRow {
            seq: self.seq,
            kind: self.kind,
            turn: self.turn,
            time: self.time,
            body,
            prev: self.prev,
            hash: self.hash,
            // The file holds no other field: format 1 hashes all of them.
            format: super::chain::FORMAT_1,
            node: None,
            operations: None,
        }
    }
}

/// The chain's newest link: the sequence number and hash the next record
/// follows.
#[derive(Debug, Clone)]
struct Head {
    seq: i64,
    hash: String,
}

/// The file as this store has it open.
struct Opened {
    /// Shared with a sync in progress, which runs without the store's
    /// lock: appends go on while the file is synced.
    file: Arc<File>,
    /// Its size after this store's last append, and the head there.
    known: Option<(u64, Head)>,
}

/// The audit chain in one append-only file.
pub struct FileAudit {
    path: PathBuf,
    /// The store an earlier build kept (`audit.db`), imported once.
    legacy: Option<PathBuf>,
    opened: Mutex<Option<Opened>>,
    dirty: AtomicBool,
    syncer: std::sync::Once,
    this: Weak<FileAudit>,
}

impl std::fmt::Debug for FileAudit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileAudit")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// What a header or a record line of the file fails as.
fn bad_file(path: &Path, line: usize, why: &str) -> StateError {
    StateError::Unreadable {
        path: path.to_path_buf(),
        line,
        why: why.to_string(),
    }
}

fn header_line(checkpoint: Option<&Checkpoint>) -> String {
    let checkpoint = match checkpoint {
        Some(c) => format!(
            "{{\"seq\":{},\"hash\":{}}}",
            c.seq,
            serde_json::Value::from(c.hash.as_str())
        ),
        None => "null".into(),
    };
    format!(
        "{{\"format\":\"{FORMAT}\",\"version\":{FORMAT_VERSION},\"checkpoint\":{checkpoint}}}\n"
    )
}

/// Appends `s` as a JSON string: as it is between quotes when nothing in
/// it needs escaping (ids, times, hashes), else escaped by serde_json.
fn push_str(line: &mut Vec<u8>, s: &str) {
    if s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        line.push(b'"');
        line.extend_from_slice(s.as_bytes());
        line.push(b'"');
    } else {
        // Encoding a string into a vector cannot fail.
        let _ = serde_json::to_writer(&mut *line, s);
    }
}

/// Whether `body` can stand in a line as the JSON it is: one object or
/// array on one line, read back as exactly these bytes. With `encoded`
/// (the caller encoded it as JSON: [`AuditStore::append_json`]) its
/// shape is checked, not parsed again.
fn raw_body(body: &str, encoded: bool) -> bool {
    let b = body.as_bytes();
    matches!(
        (b.first(), b.last()),
        (Some(b'{'), Some(b'}')) | (Some(b'['), Some(b']'))
    ) && !b.contains(&b'\n')
        && !b.contains(&b'\r')
        && (encoded || serde_json::from_str::<&RawValue>(body).is_ok())
}

/// One record as its line, newline included (`encoded`: see
/// [`raw_body`]).
#[allow(clippy::too_many_arguments)]
fn record_line(
    seq: i64,
    kind: &str,
    turn: &str,
    time: &str,
    body: &str,
    prev: &str,
    hash: &str,
    encoded: bool,
) -> Vec<u8> {
    let mut line = Vec::with_capacity(body.len() + turn.len() + 240);
    let _ = write!(line, "{{\"seq\":{seq},\"kind\":");
    push_str(&mut line, kind);
    for (key, value) in [
        ("turn", turn),
        ("time", time),
        ("prev", prev),
        ("hash", hash),
    ] {
        line.extend_from_slice(b",\"");
        line.extend_from_slice(key.as_bytes());
        line.extend_from_slice(b"\":");
        push_str(&mut line, value);
    }
    if raw_body(body, encoded) {
        line.extend_from_slice(b",\"body\":");
        line.extend_from_slice(body.as_bytes());
    } else {
        line.extend_from_slice(b",\"text\":");
        push_str(&mut line, body);
    }
    line.extend_from_slice(b"}\n");
    line
}

/// The file's contents, parsed: its header's checkpoint, its records, and
/// where each record's line ends.
struct Parsed {
    checkpoint: Option<Checkpoint>,
    rows: Vec<ChainRow>,
    ends: Vec<usize>,
}

/// Parses the file's bytes. A line that is not a record stands as a row
/// that hashes as nothing (verification names it edited); a torn last
/// line is skipped.
fn parse(path: &Path, bytes: &[u8]) -> Result<Parsed, StateError> {
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let mut lines = bytes[..complete].split_inclusive(|&b| b == b'\n');
    let mut end = 0usize;
    let Some(first) = lines.next() else {
        return Ok(Parsed {
            checkpoint: None,
            rows: Vec::new(),
            ends: Vec::new(),
        });
    };
    end += first.len();
    let header = read_header(path, first)?;
    let (mut rows, mut ends) = (Vec::new(), Vec::new());
    let mut next_seq = header
        .checkpoint
        .as_ref()
        .map_or(1, |c| c.seq.saturating_add(1));
    for line in lines {
        end += line.len();
        let row = match serde_json::from_slice::<Line>(line) {
            Ok(l) => l.into_row(),
            Err(_) => ChainRow {
                seq: next_seq,
                kind: String::new(),
                turn: String::new(),
                time: String::new(),
                body: String::from_utf8_lossy(line).trim_end().to_string(),
                prev: String::new(),
                hash: String::new(),
                format: super::chain::FORMAT_1,
                node: None,
                operations: None,
            },
        };
        next_seq = row.seq.saturating_add(1);
        rows.push(row);
        ends.push(end);
    }
    Ok(Parsed {
        checkpoint: header.checkpoint,
        rows,
        ends,
    })
}

/// The header in `line` (the file's first, its newline or not), refused
/// when it is not a chain's or of a later version than this build's.
fn read_header(path: &Path, line: &[u8]) -> Result<Header, StateError> {
    let header: Header = serde_json::from_slice(line)
        .ok()
        .filter(|h: &Header| h.format == FORMAT)
        .ok_or_else(|| bad_file(path, 1, "its header is not a gatehouse audit chain's"))?;
    if header.version > FORMAT_VERSION {
        return Err(StateError::Newer {
            path: path.to_path_buf(),
            version: header.version,
            known: FORMAT_VERSION,
        });
    }
    Ok(header)
}

/// The format version the header of the file at `path` records; `None`
/// for a missing or empty file, or one whose first line is not a header.
pub fn header_version(path: &Path) -> Option<i64> {
    let file = File::open(path).ok()?;
    let mut buf = vec![0u8; 256];
    let n = file.read_at(&mut buf, 0).ok()?;
    let first = buf[..n].split(|&b| b == b'\n').next()?;
    serde_json::from_slice::<Header>(first)
        .ok()
        .filter(|h| h.format == FORMAT)
        .map(|h| h.version)
}

/// The offset of the last newline before `before`, read backwards from
/// there in chunks.
fn rfind_newline(file: &File, before: u64) -> std::io::Result<Option<u64>> {
    let mut end = before;
    let mut buf = vec![0u8; TAIL_CHUNK];
    while end > 0 {
        let start = end.saturating_sub(TAIL_CHUNK as u64);
        let len = (end - start) as usize;
        file.read_exact_at(&mut buf[..len], start)?;
        if let Some(p) = buf[..len].iter().rposition(|&b| b == b'\n') {
            return Ok(Some(start + p as u64));
        }
        end = start;
    }
    Ok(None)
}

impl FileAudit {
    /// The chain in `path` (`<state>/audit-chain.jsonl`), importing the
    /// chain an earlier build kept in `legacy` (`<state>/audit.db`) when
    /// it first opens the file. Nothing is opened or created yet.
    pub fn new(path: &Path, legacy: Option<&Path>) -> Arc<FileAudit> {
        Arc::new_cyclic(|this| FileAudit {
            path: path.to_path_buf(),
            legacy: legacy.map(Path::to_path_buf),
            opened: Mutex::new(None),
            dirty: AtomicBool::new(false),
            syncer: std::sync::Once::new(),
            this: this.clone(),
        })
    }

    /// The chain's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, action: &'static str) -> impl Fn(std::io::Error) -> StateError + '_ {
        move |e| StateError::File {
            action,
            path: self.path.clone(),
            source: e.into(),
        }
    }

    /// Opens the file for appending (creating it and its directory, mode
    /// 0600).
    fn open(&self) -> Result<Opened, StateError> {
        if let Some(parent) = self.path.parent() {
            if !parent.as_os_str().is_empty() && !parent.exists() {
                std::fs::create_dir_all(parent).map_err(|e| StateError::CreateDir {
                    path: parent.to_path_buf(),
                    source: e.into(),
                })?;
            }
        }
        let mut o = OpenOptions::new();
        o.read(true).append(true).create(true);
        {
            use std::os::unix::fs::OpenOptionsExt;
            o.mode(0o600);
        }
        let file = o.open(&self.path).map_err(self.io("open"))?;
        let meta = file.metadata().map_err(self.io("read"))?;
        if !meta.is_file() {
            return Err(StateError::File {
                action: "open",
                path: self.path.clone(),
                source: std::io::Error::other("not a regular file").into(),
            });
        }
        Ok(Opened {
            file: Arc::new(file),
            known: None,
        })
    }

    /// Runs `f` with the file open and exclusively locked (the one at the
    /// path now: a prune may have replaced the one this store had), and
    /// its size.
    fn locked<T>(
        &self,
        f: impl FnOnce(&mut Opened, u64) -> Result<T, StateError>,
    ) -> Result<T, StateError> {
        let mut slot = crate::util::lock(&self.opened);
        loop {
            let opened = match slot.as_mut() {
                Some(o) => o,
                None => slot.insert(self.open()?),
            };
            opened.file.lock().map_err(self.io("lock"))?;
            // The descriptor's own `fstat`, not a lookup of the path: a
            // prune renames a new file over the path, and removing it
            // leaves this one with no link, so a file that still has one
            // is still the chain (the file only ever moves by a rename
            // over it, or by its removal).
            let size = match opened.file.metadata() {
                Ok(now) if now.nlink() > 0 => Some(now.len()),
                Ok(_) => None,
                Err(e) => {
                    let _ = opened.file.unlock();
                    return Err(self.io("read")(e));
                }
            };
            let Some(size) = size else {
                // Replaced (pruned) or removed: open what is there now.
                let _ = opened.file.unlock();
                *slot = None;
                continue;
            };
            let result = f(opened, size);
            let unlocked = opened.file.unlock().map_err(self.io("unlock"));
            if result.is_err() {
                // What this store knew may be stale: read afresh next time.
                *slot = None;
            }
            return result.and_then(|v| unlocked.map(|()| v));
        }
    }

    /// The head at `size`, read from the file's end (its torn last line,
    /// if any, removed first); writes the header (and imports an earlier
    /// build's chain) into an empty file.
    fn head(&self, opened: &mut Opened, size: u64) -> Result<(u64, Head), StateError> {
        if let Some((end, head)) = &opened.known {
            if *end == size {
                return Ok((size, head.clone()));
            }
        }
        let file = &*opened.file;
        let complete = rfind_newline(file, size)
            .map_err(self.io("read"))?
            .map_or(0, |p| p + 1);
        if complete == 0 {
            if size > 0 {
                // Only a first write cut short (a torn header) is this
                // store's to remove; any other bytes are left as they are.
                let mut torn = vec![0u8; size.min(4096) as usize];
                file.read_exact_at(&mut torn, 0).map_err(self.io("read"))?;
                let n = torn.len().min(HEADER_START.len());
                if torn[..n] != HEADER_START.as_bytes()[..n] {
                    return Err(bad_file(
                        &self.path,
                        1,
                        "its header is not a gatehouse audit chain's",
                    ));
                }
                file.set_len(0).map_err(self.io("write"))?;
            }
            return self.start(file);
        }
        if opened.known.is_none() {
            // First read of this file: its header says what it is (before
            // anything in it is touched).
            let mut first = vec![0u8; 512.min(complete as usize)];
            file.read_exact_at(&mut first, 0).map_err(self.io("read"))?;
            let line = first.split(|&b| b == b'\n').next().unwrap_or_default();
            read_header(&self.path, line)?;
        }
        if complete < size {
            // A torn line, never acknowledged.
            file.set_len(complete).map_err(self.io("write"))?;
        }
        let start = rfind_newline(file, complete - 1)
            .map_err(self.io("read"))?
            .map_or(0, |p| p + 1);
        let mut last = vec![0u8; (complete - 1 - start) as usize];
        file.read_exact_at(&mut last, start)
            .map_err(self.io("read"))?;
        let head = if start == 0 {
            match read_header(&self.path, &last)?.checkpoint {
                Some(c) => Head {
                    seq: c.seq,
                    hash: c.hash,
                },
                None => Head {
                    seq: 0,
                    hash: GENESIS.to_string(),
                },
            }
        } else {
            let line: Line = serde_json::from_slice(&last).map_err(|_| {
                bad_file(
                    &self.path,
                    0,
                    "its last record cannot be read, so no record can be linked to it; `gatehouse history verify` names it",
                )
            })?;
            Head {
                seq: line.seq,
                hash: line.hash,
            }
        };
        Ok((complete, head))
    }

    /// Writes an empty file's header, with the records of an earlier
    /// build's chain when there is one; the head after them.
    fn start(&self, file: &File) -> Result<(u64, Head), StateError> {
        let imported = match &self.legacy {
            Some(legacy) if legacy.exists() => {
                let (checkpoint, rows) = super::legacy::read(legacy)?;
                Some((legacy.clone(), checkpoint, rows))
            }
            _ => None,
        };
        let (checkpoint, rows) = match &imported {
            Some((_, c, r)) => (c.clone(), r.as_slice()),
            None => (None, &[][..]),
        };
        let mut bytes = header_line(checkpoint.as_ref()).into_bytes();
        for r in rows {
            bytes.extend(record_line(
                r.seq, &r.kind, &r.turn, &r.time, &r.body, &r.prev, &r.hash, false,
            ));
        }
        let mut writer = file;
        writer.write_all(&bytes).map_err(self.io("write"))?;
        if let Some((legacy, _, _)) = &imported {
            // Synced before the old store goes out of the way.
            file.sync_data().map_err(self.io("sync"))?;
            let mut moved = legacy.clone().into_os_string();
            moved.push(".imported");
            std::fs::rename(legacy, &moved).map_err(|e| StateError::File {
                action: "rename",
                path: legacy.clone(),
                source: e.into(),
            })?;
        }
        let head = match (rows.last(), checkpoint) {
            (Some(r), _) => Head {
                seq: r.seq,
                hash: r.hash.clone(),
            },
            (None, Some(c)) => Head {
                seq: c.seq,
                hash: c.hash,
            },
            (None, None) => Head {
                seq: 0,
                hash: GENESIS.to_string(),
            },
        };
        Ok((bytes.len() as u64, head))
    }

    /// Creates the file (importing an earlier build's chain), or checks
    /// the one there; its format version. Refuses a later version.
    pub fn migrate(&self) -> Result<i64, StateError> {
        self.locked(|opened, size| {
            let (end, head) = self.head(opened, size)?;
            opened.known = Some((end, head));
            Ok(FORMAT_VERSION)
        })
    }

    /// The file's bytes, or `None` when there is none.
    fn read_all(&self) -> Result<Option<Vec<u8>>, StateError> {
        match std::fs::read(&self.path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io("read")(e)),
        }
    }

    /// How many of `rows` (after `checkpoint`) a prune at `cutoff` removes:
    /// those before the first one recorded at or after it (a record
    /// appended late with an earlier time stays with those after it).
    /// Refuses ([`StateError::Broken`]) when they do not verify: a new
    /// checkpoint past a tampered record would hide it for good.
    fn prunable(
        &self,
        checkpoint: Option<&Checkpoint>,
        rows: &[ChainRow],
        cutoff: &str,
    ) -> Result<usize, StateError> {
        let keep_from = rows
            .iter()
            .position(|r| r.time.as_str() >= cutoff)
            .unwrap_or(rows.len());
        if let Err(broken) = verify(checkpoint, &rows[..keep_from]) {
            return Err(StateError::Broken {
                path: self.path.clone(),
                broken,
            });
        }
        Ok(keep_from)
    }

    /// Syncs the file if something was written since the last sync.
    pub fn sync(&self) -> Result<(), StateError> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let file = crate::util::lock(&self.opened)
            .as_ref()
            .map(|o| o.file.clone());
        match file {
            Some(f) => f.sync_data().map_err(self.io("sync")),
            None => Ok(()),
        }
    }

    fn written(&self) {
        if !self.dirty.load(Ordering::Acquire) {
            self.dirty.store(true, Ordering::Release);
        }
        self.syncer.call_once(|| {
            crate::util::sync::every(SYNC_EVERY, "gatehouse-chain-sync", self.this.clone(), |c| {
                c.sync().map_err(|e| e.to_string())
            });
        });
    }
}

impl Drop for FileAudit {
    fn drop(&mut self) {
        if let Err(e) = self.sync() {
            tracing::warn!("{e}");
        }
    }
}

impl FileAudit {
    /// Appends one record (`encoded`: see [`raw_body`]).
    fn append_line(
        &self,
        kind: &str,
        turn: &str,
        time: &str,
        body: &str,
        encoded: bool,
    ) -> Result<i64, StateError> {
        let seq = self.locked(|opened, size| {
            let (end, head) = self.head(opened, size)?;
            let seq = head.seq.saturating_add(1);
            let hash = link_hash(&head.hash, kind, turn, time, body);
            let line = record_line(seq, kind, turn, time, body, &head.hash, &hash, encoded);
            // One write of the whole line; acknowledged only once made.
            let mut writer = &*opened.file;
            if let Err(e) = writer.write_all(&line) {
                // A part written is a torn line: removed now if it can
                // be, else by the next appender.
                let _ = opened.file.set_len(end);
                return Err(self.io("write")(e));
            }
            opened.known = Some((end + line.len() as u64, Head { seq, hash }));
            Ok(seq)
        })?;
        self.written();
        Ok(seq)
    }
}

impl AuditStore for FileAudit {
    fn append(&self, kind: &str, turn: &str, time: &str, body: &str) -> Result<i64, StateError> {
        self.append_line(kind, turn, time, body, false)
    }

    fn append_json(
        &self,
        kind: &str,
        turn: &str,
        time: &str,
        body: &str,
    ) -> Result<i64, StateError> {
        self.append_line(kind, turn, time, body, true)
    }

    fn rows(&self) -> Result<(Option<Checkpoint>, Vec<ChainRow>), StateError> {
        let Some(bytes) = self.read_all()? else {
            // Not yet imported: the earlier build's chain is the chain.
            return match &self.legacy {
                Some(legacy) if legacy.exists() => super::legacy::read(legacy),
                _ => Ok((None, Vec::new())),
            };
        };
        let parsed = parse(&self.path, &bytes)?;
        Ok((parsed.checkpoint, parsed.rows))
    }

    fn prune_before(&self, cutoff: &str, dry_run: bool) -> Result<u64, StateError> {
        if self.legacy.as_ref().is_some_and(|l| l.exists()) && !dry_run {
            // The earlier build's chain becomes this file first.
            self.migrate()?;
        }
        // First read and verify what would go, without the lock:
        // appenders are not held back while it is hashed.
        let Some(bytes) = self.read_all()? else {
            // Not imported yet (a dry run): the earlier build's chain is
            // what would be pruned.
            let (checkpoint, rows) = self.rows()?;
            let keep_from = self.prunable(checkpoint.as_ref(), &rows, cutoff)?;
            return Ok(keep_from as u64);
        };
        let parsed = parse(&self.path, &bytes)?;
        let keep_from = self.prunable(parsed.checkpoint.as_ref(), &parsed.rows, cutoff)?;
        if keep_from == 0 || dry_run {
            return Ok(keep_from as u64);
        }
        let removed = keep_from as u64;
        let gone = &parsed.rows[..keep_from];
        let cut = parsed.ends[keep_from - 1];
        let last = &gone[gone.len() - 1];
        let checkpoint = Checkpoint {
            seq: last.seq,
            hash: last.hash.clone(),
        };
        // Then, under the lock, the same bytes up to the cut (only appends
        // may have happened meanwhile) are replaced by a header with the
        // new checkpoint: a new file, renamed over the old one.
        self.locked(|opened, size| {
            let mut now = vec![0u8; size as usize];
            opened
                .file
                .read_exact_at(&mut now, 0)
                .map_err(self.io("read"))?;
            if now.len() < cut || now[..cut] != bytes[..cut] {
                return Err(StateError::Changed {
                    path: self.path.clone(),
                });
            }
            let complete = now.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
            let mut fresh = header_line(Some(&checkpoint)).into_bytes();
            fresh.extend_from_slice(&now[cut..complete.max(cut)]);
            let mut tmp = self.path.clone().into_os_string();
            tmp.push(".tmp");
            let tmp = PathBuf::from(tmp);
            let mut o = OpenOptions::new();
            o.write(true).create(true).truncate(true);
            {
                use std::os::unix::fs::OpenOptionsExt;
                o.mode(0o600);
            }
            let mut out = o.open(&tmp).map_err(self.io("write"))?;
            out.write_all(&fresh).map_err(self.io("write"))?;
            out.sync_data().map_err(self.io("sync"))?;
            std::fs::rename(&tmp, &self.path).map_err(self.io("rename"))?;
            if let Some(dir) = self.path.parent().and_then(|d| File::open(d).ok()) {
                let _ = dir.sync_all();
            }
            // This store's descriptor is of the old file now.
            opened.known = None;
            Ok(())
        })?;
        // The next append opens the new file.
        *crate::util::lock(&self.opened) = None;
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{verify, Tamper};

    fn time(s: u32) -> String {
        format!("2026-12-06T10:{:02}:{:02}Z", s / 60, s % 60)
    }

    fn store(dir: &Path) -> Arc<FileAudit> {
        FileAudit::new(&dir.join("audit-chain.jsonl"), None)
    }

    #[test]
    fn nothing_is_created_until_the_first_append_and_the_header_comes_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/audit-chain.jsonl");
        let store = FileAudit::new(&path, None);
        assert_eq!(store.rows().unwrap(), (None, vec![]));
        assert_eq!(store.prune_before(&time(100), false).unwrap(), 0);
        assert!(!path.exists());
        assert_eq!(
            store.append("turn", "t-1", &time(1), "{\"n\":1}").unwrap(),
            1
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "{\"format\":\"gatehouse-audit-chain\",\"version\":1,\"checkpoint\":null}"
        );
        let hash = link_hash(GENESIS, "turn", "t-1", &time(1), "{\"n\":1}");
        assert_eq!(
            lines[1],
            format!(
                "{{\"seq\":1,\"kind\":\"turn\",\"turn\":\"t-1\",\"time\":\"{}\",\"prev\":\"{GENESIS}\",\"hash\":\"{hash}\",\"body\":{{\"n\":1}}}}",
                time(1)
            )
        );
        assert_eq!(lines.len(), 2);
        assert_eq!(header_version(&path), Some(1));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn bodies_that_are_not_one_line_of_json_are_kept_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let bodies = [
            "{}",
            "{\"a\":\"x\\ny\"}",
            "not json",
            "{\"a\":1}\n{\"b\":2}",
            " {\"a\":1}",
            "{\"a\":1} ",
            "{\"a\":",
            "",
            "[1,2]",
            "\"just a string\"",
        ];
        for (i, b) in bodies.iter().enumerate() {
            store
                .append("denial", &format!("t-{i}"), &time(1), b)
                .unwrap();
        }
        let (_, rows) = store.rows().unwrap();
        let got: Vec<&str> = rows.iter().map(|r| r.body.as_str()).collect();
        assert_eq!(got, bodies);
        assert_eq!(verify(None, &rows).unwrap().records, bodies.len() as u64);
        // Each record is one line of the file.
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert_eq!(text.lines().count(), 1 + bodies.len());
    }

    #[test]
    fn appended_records_link_and_verify_and_another_store_goes_on_from_the_head() {
        let dir = tempfile::tempdir().unwrap();
        let one = store(dir.path());
        let two = store(dir.path());
        for i in 1..=6u32 {
            let s = if i % 2 == 0 { &one } else { &two };
            let seq = s
                .append(
                    "turn",
                    &format!("t-{i}"),
                    &time(i),
                    &format!("{{\"n\":{i}}}"),
                )
                .unwrap();
            assert_eq!(seq, i64::from(i));
        }
        let (cp, rows) = one.rows().unwrap();
        assert_eq!(cp, None);
        assert_eq!(rows[0].prev, GENESIS);
        let v = verify(None, &rows).unwrap();
        assert_eq!((v.records, v.first_seq, v.last_seq), (6, Some(1), Some(6)));
    }

    #[test]
    fn a_torn_last_line_is_skipped_by_readers_and_removed_by_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        store.append("turn", "t-1", &time(1), "{}").unwrap();
        // A process killed in the middle of its write.
        let mut f = OpenOptions::new().append(true).open(store.path()).unwrap();
        f.write_all(b"{\"seq\":2,\"kind\":\"tu").unwrap();
        let (_, rows) = store.rows().unwrap();
        assert_eq!(rows.len(), 1);
        // Another store (process) appends: the torn part goes.
        let other = FileAudit::new(store.path(), None);
        assert_eq!(other.append("turn", "t-2", &time(2), "{}").unwrap(), 2);
        let (cp, rows) = other.rows().unwrap();
        assert_eq!(verify(cp.as_ref(), &rows).unwrap().records, 2);
        assert!(!std::fs::read_to_string(store.path())
            .unwrap()
            .contains("\"tu\n"));
        // And this store, whose size is stale, reads the head again.
        assert_eq!(store.append("turn", "t-3", &time(3), "{}").unwrap(), 3);
        let (cp, rows) = store.rows().unwrap();
        assert_eq!(verify(cp.as_ref(), &rows).unwrap().records, 3);
    }

    #[test]
    fn a_later_format_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit-chain.jsonl");
        // Alone, and followed by a record (whose line is the one an
        // appender reads the head from).
        let header = "{\"format\":\"gatehouse-audit-chain\",\"version\":2,\"checkpoint\":null}\n";
        let record = String::from_utf8(record_line(
            1,
            "turn",
            "t",
            &time(1),
            "{}",
            GENESIS,
            "h",
            false,
        ))
        .unwrap();
        for text in [header.to_string(), format!("{header}{record}")] {
            std::fs::write(&path, &text).unwrap();
            assert_eq!(header_version(&path), Some(2));
            let store = FileAudit::new(&path, None);
            let want = format!(
                "audit chain `{}`: its version 2 is newer than this build knows (1); run a newer gatehouse",
                path.display()
            );
            let e = store.append("turn", "t", &time(1), "{}").unwrap_err();
            assert_eq!(e.to_string(), want);
            assert_eq!(store.migrate().unwrap_err().to_string(), want);
            assert_eq!(store.rows().unwrap_err().to_string(), want);
            assert_eq!(
                std::fs::read_to_string(&path).unwrap(),
                text,
                "nothing written"
            );
        }
    }

    /// The refusal of the file at `path`, whose header is not a chain's.
    fn not_a_chain(path: &Path) -> String {
        format!(
            "audit chain `{}`: line 1: its header is not a gatehouse audit chain's",
            path.display()
        )
    }

    #[test]
    fn a_torn_header_is_replaced_and_bytes_that_are_not_one_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit-chain.jsonl");
        // A first write cut short: nothing was acknowledged.
        std::fs::write(&path, "{\"format\":\"gateh").unwrap();
        let store = FileAudit::new(&path, None);
        assert_eq!(store.append("turn", "t", &time(1), "{}").unwrap(), 1);
        assert_eq!(verify(None, &store.rows().unwrap().1).unwrap().records, 1);
        // Bytes of something else, without a newline, are not removed.
        std::fs::write(&path, "hello").unwrap();
        let store = FileAudit::new(&path, None);
        assert_eq!(
            store
                .append("turn", "t", &time(1), "{}")
                .unwrap_err()
                .to_string(),
            not_a_chain(&path)
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello");
    }

    #[test]
    fn a_file_that_is_not_a_chain_is_refused_and_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit-chain.jsonl");
        std::fs::write(&path, "hello\n").unwrap();
        let store = FileAudit::new(&path, None);
        let want = not_a_chain(&path);
        assert_eq!(
            store
                .append("turn", "t", &time(1), "{}")
                .unwrap_err()
                .to_string(),
            want
        );
        assert_eq!(store.rows().unwrap_err().to_string(), want);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello\n");
    }

    #[test]
    fn a_line_that_is_not_a_record_is_named_as_edited() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        for i in 1..=3u32 {
            store
                .append("turn", &format!("t-{i}"), &time(i), "{}")
                .unwrap();
        }
        let text = std::fs::read_to_string(store.path()).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines[2] = "garbage";
        std::fs::write(store.path(), lines.join("\n") + "\n").unwrap();
        let (cp, rows) = store.rows().unwrap();
        let broken = verify(cp.as_ref(), &rows).unwrap_err();
        assert_eq!((broken.seq, broken.how), (2, Tamper::Edited));
    }

    #[test]
    fn prune_keeps_a_checkpoint_and_the_rest_still_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        for i in 1..=6u32 {
            store
                .append("turn", &format!("t-{i}"), &time(i), "{}")
                .unwrap();
        }
        let (_, before) = store.rows().unwrap();
        assert_eq!(store.prune_before(&time(4), true).unwrap(), 3);
        assert_eq!(store.rows().unwrap(), (None, before.clone()));
        assert_eq!(store.prune_before(&time(4), false).unwrap(), 3);
        let (cp, rows) = store.rows().unwrap();
        assert_eq!(
            cp,
            Some(Checkpoint {
                seq: 3,
                hash: before[2].hash.clone()
            })
        );
        assert_eq!(rows, before[3..]);
        let v = verify(cp.as_ref(), &rows).unwrap();
        assert_eq!((v.records, v.first_seq, v.last_seq), (3, Some(4), Some(6)));
        assert_eq!(store.prune_before(&time(4), false).unwrap(), 0);
        // Everything goes; the chain goes on from the checkpoint, in this
        // store and in another that had the old file open.
        let other = store_at(store.path());
        other.append("turn", "t-7", &time(7), "{}").unwrap();
        assert_eq!(store.prune_before(&time(100), false).unwrap(), 4);
        let (cp, rows) = store.rows().unwrap();
        assert_eq!(cp.as_ref().map(|c| c.seq), Some(7));
        assert!(rows.is_empty());
        assert_eq!(other.append("denial", "t-8", &time(8), "{}").unwrap(), 8);
        assert_eq!(store.append("denial", "t-9", &time(9), "{}").unwrap(), 9);
        let (cp, rows) = store.rows().unwrap();
        assert_eq!(verify(cp.as_ref(), &rows).unwrap().records, 2);
        assert!(!dir.path().join("audit-chain.jsonl.tmp").exists());
    }

    fn store_at(path: &Path) -> Arc<FileAudit> {
        FileAudit::new(path, None)
    }

    #[test]
    fn prune_refuses_to_remove_a_broken_part_of_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        for i in 1..=4u32 {
            store
                .append("turn", &format!("t-{i}"), &time(i), "{}")
                .unwrap();
        }
        let text = std::fs::read_to_string(store.path()).unwrap();
        std::fs::write(
            store.path(),
            text.replacen("\"body\":{}", "\"body\":{\"x\":1}", 2)
                .replacen("\"body\":{\"x\":1}", "\"body\":{}", 1),
        )
        .unwrap();
        for dry_run in [true, false] {
            let e = store.prune_before(&time(100), dry_run).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "audit chain `{}`: record 2 (turn `t-2`) was edited; nothing was pruned (a prune never removes a broken part of the chain)",
                    store.path().display()
                )
            );
        }
        assert_eq!(store.rows().unwrap().1.len(), 4);
    }

    #[test]
    fn a_prune_while_records_are_appended_leaves_a_whole_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit-chain.jsonl");
        let store = store_at(&path);
        store.append("turn", "t-0", &time(0), "{}").unwrap();
        let appender = {
            let path = path.clone();
            std::thread::spawn(move || {
                let store = store_at(&path);
                for i in 1..=300u32 {
                    store
                        .append("turn", &format!("t-{i}"), &time(i), "{}")
                        .unwrap();
                }
            })
        };
        let mut removed = 0;
        while !appender.is_finished() {
            match store.prune_before(&time(150), false) {
                Ok(n) => removed += n,
                Err(StateError::Changed { .. }) => {}
                Err(e) => panic!("{e}"),
            }
        }
        appender.join().unwrap();
        removed += store.prune_before(&time(150), false).unwrap();
        assert_eq!(removed, 150);
        let (cp, rows) = store.rows().unwrap();
        assert_eq!(cp.as_ref().map(|c| c.seq), Some(150));
        let v = verify(cp.as_ref(), &rows).unwrap();
        assert_eq!(
            (v.records, v.first_seq, v.last_seq),
            (151, Some(151), Some(301))
        );
    }

    #[test]
    fn concurrent_appenders_make_one_whole_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit-chain.jsonl");
        let shared = store_at(&path);
        const EACH: usize = 200;
        // Two threads on one store (one descriptor, as in a host) and two
        // with stores of their own (as separate processes have), at once.
        let barrier = Arc::new(std::sync::Barrier::new(4));
        let mut handles = Vec::new();
        for t in 0..4 {
            let store = if t < 2 {
                shared.clone()
            } else {
                store_at(&path)
            };
            let barrier = barrier.clone();
            handles.push(std::thread::spawn(move || {
                barrier.wait();
                (0..EACH)
                    .map(|i| {
                        store
                            .append("turn", &format!("t{t}-{i}"), &time(0), "{}")
                            .unwrap()
                    })
                    .collect::<Vec<_>>()
            }));
        }
        let mut seqs: Vec<i64> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        seqs.sort_unstable();
        let all = (4 * EACH) as i64;
        assert_eq!(seqs, (1..=all).collect::<Vec<_>>());
        let (cp, rows) = shared.rows().unwrap();
        let v = verify(cp.as_ref(), &rows).unwrap();
        assert_eq!((v.records, v.last_seq), (all as u64, Some(all)));
    }

    #[test]
    fn an_earlier_builds_sqlite_chain_is_imported_once_and_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let legacy = dir.path().join("audit.db");
        // What an earlier build left: records 2..=4 after the checkpoint
        // of record 1.
        let conn = rusqlite::Connection::open(&legacy).unwrap();
        conn.execute_batch(crate::state::audit::legacy::SCHEMA)
            .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        let mut prev = link_hash(GENESIS, "turn", "t-1", &time(1), "{}");
        conn.execute("INSERT INTO checkpoint (seq, hash) VALUES (1, ?1)", [&prev])
            .unwrap();
        for i in 2..=4u32 {
            let turn = format!("t-{i}");
            let hash = link_hash(&prev, "turn", &turn, &time(i), "{}");
            conn.execute(
                "INSERT INTO chain VALUES (?1, 'turn', ?2, ?3, '{}', ?4, ?5)",
                rusqlite::params![i, turn, time(i), prev, hash],
            )
            .unwrap();
            prev = hash;
        }
        drop(conn);
        let (old_cp, old_rows) = crate::state::audit::legacy::read(&legacy).unwrap();
        assert_eq!(old_rows.len(), 3);
        let path = dir.path().join("audit-chain.jsonl");
        let store = FileAudit::new(&path, Some(&legacy));
        // Read before the import: the old chain.
        assert_eq!(store.rows().unwrap(), (old_cp.clone(), old_rows.clone()));
        // A dry-run prune counts in it, and imports nothing.
        assert_eq!(store.prune_before(&time(4), true).unwrap(), 2);
        assert!(!path.exists());
        assert_eq!(store.append("denial", "t-5", &time(5), "{}").unwrap(), 5);
        assert!(!legacy.exists());
        assert!(dir.path().join("audit.db.imported").exists());
        let (cp, rows) = store.rows().unwrap();
        assert_eq!(cp, old_cp);
        assert_eq!(rows[..3], old_rows[..]);
        let v = verify(cp.as_ref(), &rows).unwrap();
        assert_eq!((v.records, v.first_seq, v.last_seq), (4, Some(2), Some(5)));
        // Another store finds the file and imports nothing again.
        let again = FileAudit::new(&path, Some(&legacy));
        assert_eq!(again.append("turn", "t-6", &time(6), "{}").unwrap(), 6);
        assert_eq!(again.rows().unwrap().1.len(), 5);
    }
}
