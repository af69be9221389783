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
//!
//! Every path is reached beneath the turn's roots and never through a
//! symbolic link (see [`super::beneath`]): each layer of the turn records,
//! before its first journaled operation, what it could write
//! (`<turn>/fs-scope.jsonl`: its read-write preopened directories, its
//! `fs:write` globs, the protected paths). Undo re-checks every path
//! against them and reports it `skipped`, with the reason, when it is
//! outside them, protected, or no longer what the turn left (a directory
//! on the way replaced by a link); a turn that recorded no scope has its
//! file operations skipped.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::beneath::{Beneath, Found, Reach};
use super::journal::{read_lines, HistoryError, Operation};
use super::UndoStatus;
use crate::policy::snapshot::{sha256_hex, ProtectedPath};
use crate::policy::{is_within, PathGlob};

/// What one filesystem layer of a turn could write, recorded before its
/// first journaled operation (one line of `<turn>/fs-scope.jsonl`; a
/// delegated call's layer adds its own).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsScope {
    /// The read-write preopened directories (canonical host paths).
    pub roots: Vec<String>,
    /// The `fs:write` globs (canonical).
    pub write_globs: Vec<String>,
    /// The paths no executor may write.
    pub protected: Vec<ProtectedPath>,
    /// The actor's read-only roots inside the read-write ones (issue 12,
    /// item 1): the turn could not write there, so undo does not either.
    #[serde(default)]
    pub read_only: Vec<String>,
}

/// The file where a turn's scopes are appended.
pub fn scope_path(turn_dir: &Path) -> PathBuf {
    turn_dir.join("fs-scope.jsonl")
}

/// What a path holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PathState {
    /// Nothing is there.
    Absent,
    /// A regular file.
    File {
        /// sha256 of its bytes.
        sha256: String,
    },
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink {
        /// What it points to, as written.
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
                sha256: super::journal::sha256_file(path)?,
            }
        } else {
            PathState::Other
        })
    }

    fn from_found(found: Found) -> PathState {
        match found {
            Found::Absent => PathState::Absent,
            Found::File { sha256 } => PathState::File { sha256 },
            Found::Dir => PathState::Dir,
            Found::Symlink { target } => PathState::Symlink { target },
            Found::Other => PathState::Other,
        }
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
    /// The path, canonical.
    pub path: String,
    /// What the turn left it holding.
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

/// The blob directory of `turn_dir`, made (and the turn's directory
/// synced, so the new entry is durable) if it does not exist yet.
pub(crate) fn blob_dir(turn_dir: &Path) -> std::io::Result<PathBuf> {
    let dir = turn_dir.join("blob");
    if !dir.is_dir() {
        std::fs::create_dir_all(&dir)?;
        File::open(turn_dir)?.sync_all()?;
    }
    Ok(dir)
}

/// Stores `bytes` as a blob (once: content addressed), durable before it
/// returns; returns its sha256.
pub fn store_blob(turn_dir: &Path, bytes: &[u8]) -> std::io::Result<String> {
    let sha = sha256_hex(bytes);
    let dest = blob_path(turn_dir, &sha);
    if dest.is_file() {
        return Ok(sha);
    }
    let tmp = blob_dir(turn_dir)?.join(format!("{sha}.tmp"));
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
    /// What the turn's layers could write.
    scopes: Vec<FsScope>,
}

/// How one reversal ended early: its status and why.
type Stop = (UndoStatus, String);

fn is_below(path: &str, dir: &str) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

impl FsUndo {
    /// Reads what the turn at `turn_dir` left each path holding (`fs-left.jsonl`) and what
    /// its layers could write.
    pub fn load(turn_dir: &Path) -> Result<FsUndo, HistoryError> {
        let mut expected = HashMap::new();
        for l in read_lines::<LeftState>(&left_path(turn_dir))? {
            expected.insert(l.path, l.state);
        }
        Ok(FsUndo {
            turn_dir: turn_dir.to_path_buf(),
            expected,
            scopes: read_lines(&scope_path(turn_dir))?,
        })
    }

    /// `path` beneath the root of the turn that holds it, once it passes
    /// the turn's globs and protected paths; otherwise why it is skipped.
    fn locate(&self, path: &str) -> Result<Beneath, Stop> {
        let skip = |why: String| (UndoStatus::Skipped, why);
        if self.scopes.is_empty() {
            return Err(skip(format!(
                "the turn recorded no roots to undo `{path}` beneath (journaled by an older gatehouse); it is left as it is"
            )));
        }
        if let Some(p) = self
            .scopes
            .iter()
            .flat_map(|s| &s.protected)
            .find(|p| is_within(path, &p.path) || is_within(&p.path, path))
        {
            return Err(skip(format!(
                "`{path}` is host configuration (`{}`); undo never writes it",
                p.path
            )));
        }
        if let Some(ro) = self
            .scopes
            .iter()
            .flat_map(|s| &s.read_only)
            .find(|r| path == r.as_str() || is_within(path, r))
        {
            return Err(skip(format!(
                "`{path}` is beneath the read-only root `{ro}`; undo never writes it"
            )));
        }
        let glob_ok = self
            .scopes
            .iter()
            .flat_map(|s| &s.write_globs)
            .any(|g| PathGlob::parse(g).is_ok_and(|g| g.matches(path)));
        if !glob_ok {
            return Err(skip(format!(
                "`{path}` matches none of the turn's `fs:write` globs; it is left as it is"
            )));
        }
        // The innermost root: the fewest components between it and `path`.
        self.scopes
            .iter()
            .flat_map(|s| &s.roots)
            .filter_map(|r| Beneath::new(r, path))
            .min_by_key(|b| b.depth())
            .ok_or_else(|| {
                skip(format!(
                    "`{path}` is not beneath any directory the turn could write; it is left as it is"
                ))
            })
    }

    /// The current state of `path` (reached beneath its root, no link
    /// followed), and whether it is what the turn left (or what the
    /// reversals so far restored). Unknown counts as yes.
    fn current(&self, path: &str) -> Result<(PathState, Option<String>, Beneath), Stop> {
        let at = self.locate(path)?;
        let cur = match at.found() {
            Ok(found) => PathState::from_found(found),
            Err(Reach::Changed) => return Err(changed_on_the_way(path)),
            Err(Reach::Missing) => PathState::Absent,
            Err(Reach::Io(e)) => {
                return Err((
                    UndoStatus::Failed,
                    format!(
                        "cannot inspect `{path}`: {}",
                        crate::util::lower(&e.to_string())
                    ),
                ))
            }
        };
        let changed = match self.expected.get(path) {
            Some(exp) if *exp != cur => Some(format!(
                "`{path}` changed since the turn (it is {}, the turn left {}); the newer data is kept",
                cur.describe(),
                exp.describe()
            )),
            _ => None,
        };
        Ok((cur, changed, at))
    }

    fn blob(&self, sha: &str) -> Result<Vec<u8>, Stop> {
        let p = blob_path(&self.turn_dir, sha);
        let bytes = std::fs::read(&p).map_err(|e| {
            (
                UndoStatus::Failed,
                format!(
                    "cannot read the backup `{}`: {}",
                    p.display(),
                    crate::util::lower(&e.to_string())
                ),
            )
        })?;
        if sha256_hex(&bytes) != sha {
            return Err((
                UndoStatus::Failed,
                format!("the backup `{}` is corrupt", p.display()),
            ));
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
                None => self
                    .current(path)
                    .map(|(cur, _, _)| self.deleted_own_file(path, cur)),
            },
            Operation::SymlinkDelete { path, target } => self
                .current(path)
                .map(|(cur, _, at)| self.relink(path, target, cur, at, dry_run)),
            Operation::DirCreate { path } => self
                .current(path)
                .map(|(cur, _, at)| self.remove_created_dir(path, cur, at, dry_run)),
            Operation::DirRemove { path } => self
                .current(path)
                .map(|(cur, _, at)| self.recreate_dir(path, cur, at, dry_run)),
            Operation::Rename {
                from,
                to,
                replaced_blob,
                replaced_dir,
            } => self.swap_back(from, to, replaced_blob.as_deref(), *replaced_dir, dry_run),
            Operation::MemorySet { .. } | Operation::MemoryDelete { .. } => return None,
        };
        Some(r.unwrap_or_else(|stop| stop))
    }

    /// A file the turn deleted whose bytes were its own (no blob): an earlier
    /// operation restores what was there.
    fn deleted_own_file(&mut self, path: &str, cur: PathState) -> (UndoStatus, String) {
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
    }

    /// A link the turn deleted, now `cur` at `at`: recreated if nothing took
    /// its place.
    fn relink(
        &mut self,
        path: &str,
        target: &str,
        cur: PathState,
        at: Beneath,
        dry_run: bool,
    ) -> (UndoStatus, String) {
        let link = PathState::Symlink {
            target: target.to_string(),
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
                target: target.to_string(),
            },
        );
        act(
            dry_run,
            format!("recreate the link `{path}` -> `{target}`"),
            || at.symlink(target),
        )
    }

    /// A directory the turn created, now `cur` at `at`: removed if it is still
    /// an empty directory.
    fn remove_created_dir(
        &mut self,
        path: &str,
        cur: PathState,
        at: Beneath,
        dry_run: bool,
    ) -> (UndoStatus, String) {
        match cur {
            PathState::Absent => {
                self.set(path, PathState::Absent);
                (UndoStatus::Done, format!("`{path}` is already gone"))
            }
            PathState::Dir => {
                let empty = match at.is_empty_dir() {
                    Ok(empty) => empty,
                    Err(Reach::Changed) => return changed_on_the_way(path),
                    Err(_) => false,
                };
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
                    || at.remove_dir(),
                )
            }
            other => (
                UndoStatus::Skipped,
                format!(
                    "`{path}` is {} now, not the directory the turn made; it is kept",
                    other.describe()
                ),
            ),
        }
    }

    /// A directory the turn removed, now `cur` at `at`: recreated if nothing
    /// took its place.
    fn recreate_dir(
        &mut self,
        path: &str,
        cur: PathState,
        at: Beneath,
        dry_run: bool,
    ) -> (UndoStatus, String) {
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
            at.create_dir()
        })
    }

    fn delete_created(
        &mut self,
        path: &str,
        link: bool,
        dry_run: bool,
    ) -> Result<(UndoStatus, String), Stop> {
        let (cur, changed, at) = self.current(path)?;
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
            || at.remove_file(),
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
    ) -> Result<(UndoStatus, String), Stop> {
        let (cur, changed, at) = self.current(path)?;
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
        Ok(act(dry_run, what, || at.write_file(&bytes, false)))
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
    ) -> Result<(UndoStatus, String), Stop> {
        let (cur_to, changed, at_to) = self.current(to)?;
        let (cur_from, _, at_from) = self.current(from)?;
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
                at_to.rename_to(&at_from)?;
                if let Some(bytes) = &bytes {
                    at_to.write_file(bytes, true)?;
                } else if replaced_dir {
                    at_to.create_dir()?;
                }
                Ok(())
            },
        ))
    }
}

/// The step of a path that a link now stands in the way of.
fn changed_on_the_way(path: &str) -> Stop {
    (
        UndoStatus::Skipped,
        format!(
            "`{path}` is no longer what the turn left: a directory on the way is now a symbolic link or not a directory; nothing is done through it"
        ),
    )
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
            format!("{what}: {}", crate::util::lower(&e.to_string())),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::snapshot::ProtectedKind;

    /// A turn directory whose one layer could write `globs` beneath `root`,
    /// with `protected` off limits; returns the undo and a blob's sha256.
    fn turn(
        root: &str,
        globs: &[&str],
        protected: &[&str],
        scoped: bool,
    ) -> (tempfile::TempDir, FsUndo, String) {
        turn_with(root, globs, protected, &[], scoped)
    }

    /// [`turn`] with `read_only` roots inside `root`.
    fn turn_with(
        root: &str,
        globs: &[&str],
        protected: &[&str],
        read_only: &[&str],
        scoped: bool,
    ) -> (tempfile::TempDir, FsUndo, String) {
        let dir = tempfile::tempdir().unwrap();
        let sha = store_blob(dir.path(), b"before the turn\n").unwrap();
        if scoped {
            let scope = FsScope {
                roots: vec![root.to_string()],
                write_globs: globs.iter().map(|g| g.to_string()).collect(),
                protected: protected
                    .iter()
                    .map(|p| ProtectedPath {
                        path: p.to_string(),
                        kind: ProtectedKind::Policy,
                    })
                    .collect(),
                read_only: read_only.iter().map(|p| p.to_string()).collect(),
            };
            let line = serde_json::to_string(&scope).unwrap();
            std::fs::write(scope_path(dir.path()), format!("{line}\n")).unwrap();
        }
        let undo = FsUndo::load(dir.path()).unwrap();
        (dir, undo, sha)
    }

    fn restore(undo: &mut FsUndo, path: &str, sha: &str) -> (UndoStatus, String) {
        let op = Operation::FileDelete {
            path: path.to_string(),
            blob: Some(sha.to_string()),
        };
        undo.reverse(&op, false).unwrap()
    }

    /// Issue 12, items 1 and 4: undo writes nothing beneath a read-only
    /// root nested in the turn's read-write one, which the turn itself
    /// could not write; the control beside it is restored.
    #[test]
    fn undo_writes_nothing_beneath_a_nested_read_only_root() {
        let ws = tempfile::tempdir().unwrap();
        let r = ws.path().canonicalize().unwrap();
        let r = r.to_str().unwrap();
        std::fs::create_dir_all(format!("{r}/out/ro")).unwrap();
        let glob = format!("{r}/**");
        let ro = format!("{r}/out/ro");
        let (_d, mut undo, sha) = turn_with(r, &[&glob], &[], &[&ro], true);
        let (st, why) = restore(&mut undo, &format!("{r}/out/ro/k.txt"), &sha);
        assert_eq!(st, UndoStatus::Skipped, "{why}");
        assert!(why.contains("read-only root"), "{why}");
        assert!(!Path::new(&format!("{r}/out/ro/k.txt")).exists());
        let (st, why) = restore(&mut undo, &format!("{r}/out/k.txt"), &sha);
        assert_eq!(st, UndoStatus::Done, "{why}");
    }

    /// Issue 12, item 4: a path is restored only beneath the turn's roots,
    /// within its globs, outside the protected paths, and with no link on
    /// the way (even one that stays inside the root); the control, a
    /// plain path in the same root, is restored.
    #[test]
    fn undo_rechecks_roots_globs_protected_paths_and_links() {
        let ws = tempfile::tempdir().unwrap();
        let r = ws.path().canonicalize().unwrap();
        let r = r.to_str().unwrap();
        std::fs::create_dir_all(format!("{r}/real")).unwrap();
        std::fs::create_dir_all(format!("{r}/state")).unwrap();
        std::fs::create_dir_all(format!("{r}/other")).unwrap();
        std::os::unix::fs::symlink("real", format!("{r}/link")).unwrap();
        let glob = format!("{r}/**");
        let state = format!("{r}/state");
        let (_d, mut undo, sha) = turn(r, &[&glob], &[&state], true);

        let (st, why) = restore(&mut undo, &format!("{r}/link/a.txt"), &sha);
        assert_eq!(st, UndoStatus::Skipped, "{why}");
        assert!(why.contains("no longer what the turn left"), "{why}");
        assert!(!Path::new(&format!("{r}/real/a.txt")).exists());

        let (st, why) = restore(&mut undo, &format!("{r}/state/grants.db"), &sha);
        assert_eq!(st, UndoStatus::Skipped, "{why}");
        assert!(why.contains("host configuration"), "{why}");
        assert!(!Path::new(&format!("{r}/state/grants.db")).exists());

        let (st, why) = restore(&mut undo, "/etc/gatehouse-undo-test", &sha);
        assert_eq!(st, UndoStatus::Skipped, "{why}");
        assert!(why.contains("none of the turn's `fs:write` globs"), "{why}");

        let (st, why) = restore(&mut undo, &format!("{r}/real/../x"), &sha);
        assert_eq!(st, UndoStatus::Skipped, "{why}");

        // The control: the same restore on a plain path of the root.
        let (st, why) = restore(&mut undo, &format!("{r}/real/b.txt"), &sha);
        assert_eq!(st, UndoStatus::Done, "{why}");
        assert_eq!(
            std::fs::read(format!("{r}/real/b.txt")).unwrap(),
            b"before the turn\n"
        );

        // Globs narrower than the root.
        let md = format!("{r}/real/*.md");
        let (_d, mut undo, sha) = turn(r, &[&md], &[], true);
        let (st, why) = restore(&mut undo, &format!("{r}/real/c.txt"), &sha);
        assert_eq!(st, UndoStatus::Skipped, "{why}");
        assert!(why.contains("globs"), "{why}");
        let (st, why) = restore(&mut undo, &format!("{r}/real/c.md"), &sha);
        assert_eq!(st, UndoStatus::Done, "{why}");

        // A glob the root does not hold.
        let other = format!("{r}/other/**");
        let (_d, mut undo, sha) = turn(&format!("{r}/real"), &[&other], &[], true);
        let (st, why) = restore(&mut undo, &format!("{r}/other/d.txt"), &sha);
        assert_eq!(st, UndoStatus::Skipped, "{why}");
        assert!(why.contains("not beneath any directory"), "{why}");

        // A turn that recorded no scope: nothing is done.
        let (_d, mut undo, sha) = turn(r, &[&glob], &[], false);
        let (st, why) = restore(&mut undo, &format!("{r}/real/e.txt"), &sha);
        assert_eq!(st, UndoStatus::Skipped, "{why}");
        assert!(why.contains("recorded no roots"), "{why}");
        assert!(!Path::new(&format!("{r}/real/e.txt")).exists());
    }
}
