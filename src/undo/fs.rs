//! Filesystem operations of a turn: the blobs, the states the turn left,
//! and their reversal.
//!
//! The journaling layer (`crate::sandbox::journal_fs`) stores a file's bytes
//! once per turn at `<turn>/blob/<sha256>.bin` before its first destructive
//! change, journals every mutation ahead, and at the end of the run appends
//! to `<turn>/fs-left.jsonl` the state each path it touched was left in.
//! Undo walks the journal newest first with an *expected* state per path
//! (initially what the turn left; a path the turn never finished with, as
//! after a crash, is unknown and not checked), and reverses an operation
//! only while its target is still in the expected state: otherwise it is
//! `skipped` and the newer data is kept.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::journal::{read_lines, HistoryError, Operation};
use super::UndoStatus;
use crate::policy::snapshot::sha256_hex;

/// What a path holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PathState {
    Absent,
    File {
        sha256: String,
    },
    Dir,
    Symlink {
        target: String,
    },
    /// A device, socket or fifo: never touched by undo.
    Other,
}

impl PathState {
    /// The current state of `path` (symbolic links not followed).
    pub fn of(path: &Path) -> std::io::Result<PathState> {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(PathState::Absent),
            Err(e) => return Err(e),
        };
        let ty = meta.file_type();
        Ok(if ty.is_symlink() {
            PathState::Symlink {
                target: std::fs::read_link(path)?.to_string_lossy().into_owned(),
            }
        } else if ty.is_dir() {
            PathState::Dir
        } else if ty.is_file() {
            PathState::File {
                sha256: sha256_hex(&std::fs::read(path)?),
            }
        } else {
            PathState::Other
        })
    }

    fn describe(&self) -> String {
        match self {
            PathState::Absent => "absent".into(),
            PathState::File { sha256 } => format!("a file with sha256 `{}`", &sha256[..12]),
            PathState::Dir => "a directory".into(),
            PathState::Symlink { target } => format!("a link to `{target}`"),
            PathState::Other => "a special file".into(),
        }
    }
}

/// One line of `fs-left.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftState {
    pub path: String,
    #[serde(flatten)]
    pub state: PathState,
}

/// The file where a turn's end states are appended (the last line for a
/// path wins: a delegated call's layer finishes before its caller's).
pub fn left_path(turn_dir: &Path) -> PathBuf {
    turn_dir.join("fs-left.jsonl")
}

/// Appends the end states of `paths` (fsynced once).
pub fn record_left<'a>(
    turn_dir: &Path,
    paths: impl IntoIterator<Item = &'a String>,
) -> std::io::Result<()> {
    let mut text = Vec::new();
    for p in paths {
        let line = LeftState {
            path: p.clone(),
            state: PathState::of(Path::new(p))?,
        };
        serde_json::to_writer(&mut text, &line)?;
        text.push(b'\n');
    }
    if text.is_empty() {
        return Ok(());
    }
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(left_path(turn_dir))?;
    f.write_all(&text)?;
    f.sync_data()
}

/// The blob store of one turn.
pub fn blob_path(turn_dir: &Path, sha256: &str) -> PathBuf {
    turn_dir.join("blob").join(format!("{sha256}.bin"))
}

/// Stores `bytes` as a blob (once: content addressed), durable before it
/// returns; returns its sha256.
pub fn store_blob(turn_dir: &Path, bytes: &[u8]) -> std::io::Result<String> {
    let sha = sha256_hex(bytes);
    let dest = blob_path(turn_dir, &sha);
    if dest.is_file() {
        return Ok(sha);
    }
    let dir = turn_dir.join("blob");
    if !dir.is_dir() {
        std::fs::create_dir_all(&dir)?;
        File::open(turn_dir)?.sync_all()?;
    }
    let tmp = dir.join(format!("{sha}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_data()?;
    std::fs::rename(&tmp, &dest)?;
    Ok(sha)
}

/// Reverses filesystem operations newest first, tracking what each path
/// is expected to hold.
pub struct FsUndo {
    turn_dir: PathBuf,
    /// `None`: unknown (not checked).
    expected: HashMap<String, PathState>,
}

fn is_below(path: &str, dir: &str) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

impl FsUndo {
    pub fn load(turn_dir: &Path) -> Result<FsUndo, HistoryError> {
        let mut expected = HashMap::new();
        for l in read_lines::<LeftState>(&left_path(turn_dir))? {
            expected.insert(l.path, l.state);
        }
        Ok(FsUndo {
            turn_dir: turn_dir.to_path_buf(),
            expected,
        })
    }

    /// The current state of `path`, and whether it is what the turn left
    /// (or what the reversals so far restored). Unknown counts as yes.
    fn current(&self, path: &str) -> Result<(PathState, Option<String>), String> {
        let cur = PathState::of(Path::new(path)).map_err(|e| {
            format!(
                "cannot inspect `{path}`: {}",
                crate::config::lower(&e.to_string())
            )
        })?;
        let changed = match self.expected.get(path) {
            Some(exp) if *exp != cur => Some(format!(
                "`{path}` changed since the turn (it is {}, the turn left {}); the newer data is kept",
                cur.describe(),
                exp.describe()
            )),
            _ => None,
        };
        Ok((cur, changed))
    }

    fn blob(&self, sha: &str) -> Result<Vec<u8>, String> {
        let p = blob_path(&self.turn_dir, sha);
        let bytes = std::fs::read(&p).map_err(|e| {
            format!(
                "cannot read the backup `{}`: {}",
                p.display(),
                crate::config::lower(&e.to_string())
            )
        })?;
        if sha256_hex(&bytes) != sha {
            return Err(format!("the backup `{}` is corrupt", p.display()));
        }
        Ok(bytes)
    }

    fn set(&mut self, path: &str, state: PathState) {
        self.expected.insert(path.to_string(), state);
    }

    /// Reverses one filesystem operation (`None` for a memory operation).
    pub fn reverse(&mut self, op: &Operation, dry_run: bool) -> Option<(UndoStatus, String)> {
        let r = match op {
            Operation::FileCreate { path } | Operation::LinkCreate { path } => {
                self.delete_created(path, matches!(op, Operation::LinkCreate { .. }), dry_run)
            }
            Operation::FileOverwrite { path, blob } => self.restore_file(path, blob, dry_run, true),
            Operation::FileDelete { path, blob } => match blob {
                Some(b) => self.restore_file(path, b, dry_run, false),
                None => self.current(path).map(|(cur, _)| {
                    if cur != PathState::Absent {
                        (
                            UndoStatus::Skipped,
                            format!("`{path}` exists again since the turn; the newer data is kept"),
                        )
                    } else {
                        self.set(path, PathState::Absent);
                        (
                            UndoStatus::Done,
                            format!("`{path}` held the turn's own bytes; an earlier operation restores what was there"),
                        )
                    }
                }),
            },
            Operation::SymlinkDelete { path, target } => self.current(path).map(|(cur, _)| {
                let link = PathState::Symlink {
                    target: target.clone(),
                };
                if cur == link {
                    self.set(path, link);
                    return (
                        UndoStatus::Done,
                        format!("`{path}` is the link it was before the turn"),
                    );
                }
                if cur != PathState::Absent {
                    return (
                        UndoStatus::Skipped,
                        format!("`{path}` exists again since the turn; the newer data is kept"),
                    );
                }
                self.set(
                    path,
                    PathState::Symlink {
                        target: target.clone(),
                    },
                );
                act(dry_run, format!("recreate the link `{path}` -> `{target}`"), || {
                    std::os::unix::fs::symlink(target, path)
                })
            }),
            Operation::DirCreate { path } => self.current(path).map(|(cur, _)| match cur {
                PathState::Absent => {
                    self.set(path, PathState::Absent);
                    (UndoStatus::Done, format!("`{path}` is already gone"))
                }
                PathState::Dir => {
                    let empty = std::fs::read_dir(path)
                        .map(|mut d| d.next().is_none())
                        .unwrap_or(false);
                    if !empty {
                        return (
                            UndoStatus::Skipped,
                            format!("`{path}` gained entries since the turn; it is kept"),
                        );
                    }
                    self.set(path, PathState::Absent);
                    act(
                        dry_run,
                        format!("remove `{path}`, created by the turn"),
                        || std::fs::remove_dir(path),
                    )
                }
                other => (
                    UndoStatus::Skipped,
                    format!(
                        "`{path}` is {} now, not the directory the turn made; it is kept",
                        other.describe()
                    ),
                ),
            }),
            Operation::DirRemove { path } => self.current(path).map(|(cur, _)| {
                if cur == PathState::Dir {
                    // Journaled ahead, and the removal failed (not empty),
                    // or it is back: either way nothing to restore.
                    self.set(path, PathState::Dir);
                    return (
                        UndoStatus::Done,
                        format!("`{path}` is a directory; nothing to restore"),
                    );
                }
                if cur != PathState::Absent {
                    return (
                        UndoStatus::Skipped,
                        format!("`{path}` exists again since the turn; it is kept"),
                    );
                }
                self.set(path, PathState::Dir);
                act(dry_run, format!("recreate the directory `{path}`"), || {
                    std::fs::create_dir(path)
                })
            }),
            Operation::Rename {
                from,
                to,
                replaced_blob,
                replaced_dir,
            } => self.swap_back(from, to, replaced_blob.as_deref(), *replaced_dir, dry_run),
            Operation::MemorySet { .. } | Operation::MemoryDelete { .. } => return None,
        };
        Some(r.unwrap_or_else(|e| (UndoStatus::Failed, e)))
    }

    fn delete_created(
        &mut self,
        path: &str,
        link: bool,
        dry_run: bool,
    ) -> Result<(UndoStatus, String), String> {
        let (cur, changed) = self.current(path)?;
        if cur == PathState::Absent {
            self.set(path, PathState::Absent);
            return Ok((UndoStatus::Done, format!("`{path}` is already gone")));
        }
        if let Some(why) = changed {
            return Ok((UndoStatus::Skipped, why));
        }
        let ours = match cur {
            PathState::File { .. } => true,
            PathState::Symlink { .. } => link,
            _ => false,
        };
        if !ours {
            return Ok((
                UndoStatus::Skipped,
                format!(
                    "`{path}` is {} now, not what the turn made; it is kept",
                    cur.describe()
                ),
            ));
        }
        self.set(path, PathState::Absent);
        Ok(act(
            dry_run,
            format!("delete `{path}`, created by the turn"),
            || std::fs::remove_file(path),
        ))
    }

    /// `restore_blob_backup`: puts the bytes before the turn back, in
    /// place (the file keeps its inode and mode) or anew when it is gone.
    fn restore_file(
        &mut self,
        path: &str,
        blob: &str,
        dry_run: bool,
        overwrite: bool,
    ) -> Result<(UndoStatus, String), String> {
        let (cur, changed) = self.current(path)?;
        let before = PathState::File {
            sha256: blob.to_string(),
        };
        if cur == before {
            self.set(path, before);
            return Ok((
                UndoStatus::Done,
                format!("`{path}` already holds its bytes from before the turn"),
            ));
        }
        if let Some(why) = changed {
            return Ok((UndoStatus::Skipped, why));
        }
        match (&cur, overwrite) {
            (PathState::Absent, _) | (PathState::File { .. }, true) => {}
            _ => {
                return Ok((
                    UndoStatus::Skipped,
                    format!("`{path}` is {} now; the newer data is kept", cur.describe()),
                ))
            }
        }
        let bytes = self.blob(blob)?;
        self.set(path, before);
        let what = if overwrite {
            format!("restore the bytes of `{path}` from before the turn")
        } else {
            format!("restore deleted `{path}`")
        };
        Ok(act(dry_run, what, || {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)?;
            f.write_all(&bytes)?;
            f.sync_data()
        }))
    }

    /// `swap_src_dst`: moves `to` back to `from`, then restores what `to`
    /// held before.
    fn swap_back(
        &mut self,
        from: &str,
        to: &str,
        replaced_blob: Option<&str>,
        replaced_dir: bool,
        dry_run: bool,
    ) -> Result<(UndoStatus, String), String> {
        let (cur_to, changed) = self.current(to)?;
        let (cur_from, _) = self.current(from)?;
        let before_to = match (replaced_blob, replaced_dir) {
            (Some(b), _) => PathState::File { sha256: b.into() },
            (None, true) => PathState::Dir,
            (None, false) => PathState::Absent,
        };
        if cur_from != PathState::Absent {
            if cur_to == before_to && self.expected.get(to).is_none_or(|e| *e == before_to) {
                // Journaled ahead, then the host died: never performed.
                return Ok((
                    UndoStatus::Done,
                    format!("`{from}` was never moved to `{to}`"),
                ));
            }
            return Ok((
                UndoStatus::Skipped,
                format!("`{from}` exists again since the turn; nothing is moved over it"),
            ));
        }
        if cur_to == PathState::Absent {
            return Ok((
                UndoStatus::Skipped,
                format!("`{to}` is gone since the turn; nothing to move back"),
            ));
        }
        if let Some(why) = changed {
            return Ok((UndoStatus::Skipped, why));
        }
        let bytes = match replaced_blob {
            Some(b) => Some(self.blob(b)?),
            None => None,
        };
        // Expected states move with the entry: what was under `from`
        // (stale now) goes, what is under `to` moves to `from`.
        self.expected
            .retain(|k, _| k.as_str() != from && !is_below(k, from));
        let moved: Vec<(String, PathState)> = self
            .expected
            .iter()
            .filter(|(k, _)| k.as_str() == to || is_below(k, to))
            .map(|(k, v)| (format!("{from}{}", &k[to.len()..]), v.clone()))
            .collect();
        self.expected
            .retain(|k, _| k.as_str() != to && !is_below(k, to));
        self.expected.extend(moved);
        self.set(to, before_to);
        Ok(act(
            dry_run,
            format!("move `{to}` back to `{from}`"),
            || {
                std::fs::rename(to, from)?;
                if let Some(bytes) = &bytes {
                    let mut f = OpenOptions::new().write(true).create_new(true).open(to)?;
                    f.write_all(bytes)?;
                    f.sync_data()?;
                } else if replaced_dir {
                    std::fs::create_dir(to)?;
                }
                Ok(())
            },
        ))
    }
}

fn act(
    dry_run: bool,
    what: String,
    f: impl FnOnce() -> std::io::Result<()>,
) -> (UndoStatus, String) {
    if dry_run {
        return (UndoStatus::WouldDo, what);
    }
    match f() {
        Ok(()) => (UndoStatus::Done, what),
        Err(e) => (
            UndoStatus::Failed,
            format!("{what}: {}", crate::config::lower(&e.to_string())),
        ),
    }
}
