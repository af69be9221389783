//! An append-only JSON Lines log (`<state>/audit.jsonl`,
//! `<state>/denials.jsonl`).
//!
//! Every record is one `write(2)` to a file opened with `O_APPEND`, made
//! before [`AppendLog::append`] returns: once the caller has its answer,
//! the record is in the kernel's page cache, so a `kill -9` of the process
//! loses none. Only `fdatasync` is batched: a background thread syncs a
//! log that was written at least every [`SYNC_EVERY`], and the last sync
//! happens when the log is dropped (at shutdown), so a power loss costs at
//! most the last [`SYNC_EVERY`] (20 ms) of records. The file is created at its first
//! record: a process that records nothing leaves nothing.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock, Weak};
use std::time::Duration;

use super::journal::HistoryError;

/// How often a written log is synced to disk.
///
/// Each `fdatasync` costs the log's filesystem a journal commit: at 5 ms a
/// busy host spent ≈ 6% of its CPU in them (measured with `perf`, issue
/// 13); at 20 ms, a quarter of that.
pub const SYNC_EVERY: Duration = crate::util::sync::LOG_SYNC_EVERY;

/// How many descriptors a log may open (see `AppendLog::files`).
const STRIPES: usize = 8;

/// The stripe of the calling thread: threads take stripes in turn.
fn stripe() -> usize {
    use std::sync::atomic::AtomicUsize;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

/// One append-only log file.
pub struct AppendLog {
    path: PathBuf,
    /// Opened at the first record, and never replaced: writers and the
    /// syncer share them without a lock (an `O_APPEND` write places a
    /// record whole; a sync never holds a writer back). One descriptor per
    /// stripe of threads: the kernel serializes the writes of threads that
    /// share one open file on its position lock, even with `O_APPEND`
    /// (with two threads writing, a quarter of a turn's time went there).
    files: [OnceLock<File>; STRIPES],
    /// Held only while the file is first opened.
    opening: Mutex<()>,
    dirty: AtomicBool,
    syncer: Once,
    this: Weak<AppendLog>,
}

impl AppendLog {
    /// The log at `path`; nothing is opened or created until the first
    /// record.
    pub fn new(path: &Path) -> Arc<AppendLog> {
        Arc::new_cyclic(|this| AppendLog {
            path: path.to_path_buf(),
            files: std::array::from_fn(|_| OnceLock::new()),
            opening: Mutex::new(()),
            dirty: AtomicBool::new(false),
            syncer: Once::new(),
            this: this.clone(),
        })
    }

    /// The log's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, action: &'static str, e: std::io::Error) -> HistoryError {
        HistoryError::Io {
            action,
            path: self.path.clone(),
            source: e.into(),
        }
    }

    /// Appends `value` as one line, with one `write(2)`.
    pub fn append(&self, value: &impl serde::Serialize) -> Result<(), HistoryError> {
        let line = serde_json::to_string(value).map_err(|e| HistoryError::Encode {
            path: self.path.clone(),
            source: e,
        })?;
        self.append_line(line)
    }

    /// The calling thread's descriptor of the file, opened (and the
    /// file's directory created) at its first call.
    fn file(&self) -> Result<&File, HistoryError> {
        let slot = &self.files[stripe()];
        if let Some(file) = slot.get() {
            return Ok(file);
        }
        let _opening = self.opening.lock().map_err(|_| HistoryError::Poisoned {
            path: self.path.clone(),
        })?;
        if let Some(file) = slot.get() {
            return Ok(file);
        }
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| self.io("create", e))?;
        }
        let file = open_append(&self.path).map_err(|e| self.io("open", e))?;
        Ok(slot.get_or_init(|| file))
    }

    /// Appends `line` (one JSON value, no newline), with one `write(2)`.
    pub fn append_line(&self, line: String) -> Result<(), HistoryError> {
        self.append_bytes(line.into_bytes())
    }

    /// Appends `line` (the bytes of one JSON value, no newline), with one
    /// `write(2)`.
    pub fn append_bytes(&self, mut line: Vec<u8>) -> Result<(), HistoryError> {
        line.push(b'\n');
        self.append_terminated(&line)
    }

    /// Appends `line` (the bytes of one JSON value and its newline), with
    /// one `write(2)`.
    pub fn append_terminated(&self, line: &[u8]) -> Result<(), HistoryError> {
        let mut file = self.file()?;
        // One write: O_APPEND places it whole at the end, even with other
        // threads and processes appending to the same log.
        let n = file.write(line).map_err(|e| self.io("write", e))?;
        if n != line.len() {
            return Err(self.io(
                "write",
                std::io::Error::new(std::io::ErrorKind::WriteZero, "short write"),
            ));
        }
        // Looked at before it is set: with turns on every core, a store at
        // each record would move the flag's cache line between cores.
        if !self.dirty.load(Ordering::Acquire) {
            self.dirty.store(true, Ordering::Release);
        }
        self.start_syncer();
        Ok(())
    }

    /// Syncs the file if something was written since the last sync. Writers
    /// go on meanwhile: what they add is synced now or at the next round.
    pub fn sync(&self) -> Result<(), HistoryError> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        // Any descriptor syncs the file's data, whoever wrote it.
        match self.files.iter().find_map(OnceLock::get) {
            Some(f) => f.sync_data().map_err(|e| self.io("sync", e)),
            None => Ok(()),
        }
    }

    fn start_syncer(&self) {
        self.syncer.call_once(|| {
            crate::util::sync::every(SYNC_EVERY, "gatehouse-log-sync", self.this.clone(), |log| {
                log.sync().map_err(|e| e.to_string())
            });
        });
    }
}

impl Drop for AppendLog {
    fn drop(&mut self) {
        if let Err(e) = self.sync() {
            tracing::warn!("{e}");
        }
    }
}

/// Opens `path` for appending, created with mode 0600: the audit is host
/// state, readable by its owner only.
fn open_append(path: &Path) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_created_before_the_first_record_and_each_record_is_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/audit.jsonl");
        let log = AppendLog::new(&path);
        assert!(!path.exists());
        log.append(&serde_json::json!({"a": 1})).unwrap();
        log.append(&serde_json::json!({"b": "x\ny"})).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"a\":1}\n{\"b\":\"x\\ny\"}\n"
        );
        log.sync().unwrap();
        drop(log);
    }

    /// Threads on different descriptors (more threads than stripes): every
    /// record lands whole, once, on its own line.
    #[test]
    fn records_of_many_threads_land_whole_each_on_its_own_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AppendLog::new(&path);
        let threads = 2 * STRIPES + 1;
        std::thread::scope(|s| {
            for t in 0..threads {
                let log = &log;
                s.spawn(move || {
                    for n in 0..200 {
                        let pad = "x".repeat(100 * (t % 5) + n % 7);
                        log.append(&serde_json::json!({"t": t, "n": n, "pad": pad}))
                            .unwrap();
                    }
                });
            }
        });
        log.sync().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut seen: Vec<(u64, u64)> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (v["t"].as_u64().unwrap(), v["n"].as_u64().unwrap())
            })
            .collect();
        seen.sort_unstable();
        let expected: Vec<(u64, u64)> = (0..threads as u64)
            .flat_map(|t| (0..200).map(move |n| (t, n)))
            .collect();
        assert_eq!(seen, expected);
    }
}
