//! Whether files may have changed, without a `stat` per question.
//!
//! A long-lived host asks at every turn whether the grants database and
//! the component it runs are still the files it read: a `stat` of each
//! path, every turn. A [`Watcher`] answers the same question with one
//! non-blocking `read(2)` of an inotify descriptor: the kernel queues an
//! event for every change to a watched file (`write`, `truncate`, a
//! `rename` or `unlink` of it or of any directory on its path, `chmod`,
//! `touch`) before the call that made the change returns, so a change that
//! happened before a turn started is in the queue when the turn reads it.
//! The caller then does exactly what it did before: `stat`, compare, reload.
//!
//! A path is watched only where that reasoning holds, else
//! [`Watcher::watch`] says no and the caller keeps a `stat` per turn:
//! - an absolute path with no symbolic link on the way (a link could be
//!   re-pointed through a directory that is not watched);
//! - every directory on it on a local filesystem (ext2/3/4, XFS, Btrfs,
//!   tmpfs): a change made by another machine to a network filesystem
//!   raises no event here.
//!
//! What raises no event: a write through a shared writable `mmap` of the
//! file (it changes the mtime, not the queue). For that, and anything
//! else unforeseen, every watched path is checked again at least every
//! [`RECHECK_EVERY`] even when its queue is quiet. A queue overflow marks
//! everything changed.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

/// How long a watched path may go without a real check.
pub const RECHECK_EVERY: Duration = Duration::from_secs(1);

/// One set of watched paths (see [`Watcher::watch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchKey(usize);

/// An inotify descriptor and what its watches stand for.
pub struct Watcher {
    /// Distinct for every watcher of the process: a key is only ever
    /// asked of the watcher that gave it.
    id: u64,
    inner: Mutex<Inner>,
}

struct Inner {
    fd: OwnedFd,
    /// Per watch descriptor: `(name, key)`: an event on an entry `name`
    /// of the watched directory (`None`: any event on the watched inode
    /// itself) means `key` may have changed.
    wds: HashMap<i32, Vec<(Option<CString>, usize)>>,
    keys: Vec<KeyState>,
}

struct KeyState {
    paths: Vec<PathBuf>,
    changed: bool,
    checked: Instant,
}

/// Events on a directory entry that change what its path leads to.
fn entry_events() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::ATTRIB
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
}

/// Events on a file that change its contents or identity.
fn file_events() -> WatchFlags {
    WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
}

/// Filesystems whose every change raises its events on this machine.
fn local_filesystem(dir: &Path) -> bool {
    const EXT: i64 = 0xEF53;
    const XFS: i64 = 0x5846_5342;
    const BTRFS: i64 = 0x9123_683E;
    const TMPFS: i64 = 0x0102_1994;
    match rustix::fs::statfs(dir) {
        // `f_type`'s integer type differs between targets.
        #[allow(clippy::unnecessary_cast)]
        Ok(s) => [EXT, XFS, BTRFS, TMPFS].contains(&(s.f_type as i64)),
        Err(_) => false,
    }
}

impl Watcher {
    /// A watcher, or `None` where inotify is not available.
    pub fn new() -> Option<Watcher> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()?;
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Some(Watcher {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            inner: Mutex::new(Inner {
                fd,
                wds: HashMap::new(),
                keys: Vec::new(),
            }),
        })
    }

    /// What tells this watcher from every other one of the process, for a
    /// caller that keeps keys of several.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Watches `paths` (files that may not exist yet) as one key; `None`
    /// when one of them cannot be watched soundly (see the module
    /// documentation): the caller checks them itself every time. Watch
    /// first, then read the files: a change after this call is seen.
    ///
    /// The same paths watched again (a file that could not be read, asked
    /// for at the next turn) get the key they had.
    pub fn watch(&self, paths: &[&Path]) -> Option<WatchKey> {
        let mut inner = self.inner.lock().ok()?;
        let same = |k: &KeyState| {
            k.paths.len() == paths.len() && k.paths.iter().zip(paths).all(|(a, b)| a == b)
        };
        let (key, known) = match inner.keys.iter().position(same) {
            Some(k) => (k, true),
            None => (inner.keys.len(), false),
        };
        for p in paths {
            inner.arm(p, key)?;
        }
        let state = KeyState {
            paths: paths.iter().map(|p| p.to_path_buf()).collect(),
            changed: false,
            checked: Instant::now(),
        };
        if known {
            inner.keys[key] = state;
        } else {
            inner.keys.push(state);
        }
        Some(WatchKey(key))
    }

    /// Runs `check` when the paths of `key` may have changed since it
    /// last ran (or [`RECHECK_EVERY`] went by), with the watcher held:
    /// a turn that finds nothing changed never runs ahead of a check
    /// another turn is making. Returns what `check` returned, or `None`
    /// when it did not run. On any failure of the watcher itself, `check`
    /// runs.
    pub fn check<R>(&self, key: WatchKey, check: impl FnOnce() -> R) -> Option<R> {
        self.check_inner(key, true, check)
    }

    /// Reads the queue now: what it holds is noted for every key, for the
    /// next [`Watcher::check_drained`] of each.
    pub fn drain(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.drain();
        }
    }

    /// [`Watcher::check`] without reading the queue: it answers for the
    /// moment of the last [`Watcher::drain`] (or `check`) by anyone. For a
    /// caller that drains once at the start of each turn and then asks
    /// about several keys: one `read(2)` per turn, not one per key. A
    /// poisoned watcher runs `check`.
    pub fn check_drained<R>(&self, key: WatchKey, check: impl FnOnce() -> R) -> Option<R> {
        self.check_inner(key, false, check)
    }

    fn check_inner<R>(&self, key: WatchKey, drain: bool, check: impl FnOnce() -> R) -> Option<R> {
        let mut inner = match self.inner.lock() {
            Ok(i) => i,
            Err(_) => return Some(check()),
        };
        if drain {
            inner.drain();
        }
        let now = Instant::now();
        let Some(state) = inner.keys.get_mut(key.0) else {
            return Some(check());
        };
        if !state.changed && now.duration_since(state.checked) < RECHECK_EVERY {
            return None;
        }
        state.changed = false;
        state.checked = now;
        // Re-armed before the check: a directory created since (the state
        // directory, the file itself) is watched from now on.
        let paths = state.paths.clone();
        for p in &paths {
            if inner.arm(p, key.0).is_none() {
                // No longer watchable: checked every time from now on.
                if let Some(s) = inner.keys.get_mut(key.0) {
                    s.changed = true;
                }
            }
        }
        Some(check())
    }
}

impl Inner {
    fn add(&mut self, path: &Path, flags: WatchFlags, name: Option<CString>, key: usize) -> bool {
        match inotify::add_watch(&self.fd, path, flags | WatchFlags::MASK_ADD) {
            Ok(wd) => {
                let entries = self.wds.entry(wd).or_default();
                if !entries.iter().any(|(n, k)| *k == key && *n == name) {
                    entries.push((name, key));
                }
                true
            }
            Err(_) => false,
        }
    }

    /// Watches every directory entry on `path`'s way and the file itself
    /// (when it exists) for `key`; `None` when the path cannot be watched
    /// soundly.
    fn arm(&mut self, path: &Path, key: usize) -> Option<()> {
        if !path.is_absolute() {
            return None;
        }
        let mut dir = PathBuf::from("/");
        let mut exists = true;
        for c in path.components() {
            match c {
                Component::RootDir | Component::CurDir => {}
                // `dir` holds no link: its parent is the lexical one.
                Component::ParentDir => {
                    dir.pop();
                }
                Component::Prefix(_) => return None,
                Component::Normal(name) => {
                    if !exists {
                        // Below a missing directory: its creation, seen in
                        // the deepest existing one, is the change.
                        continue;
                    }
                    if !local_filesystem(&dir) {
                        return None;
                    }
                    let cname = CString::new(name.as_bytes()).ok()?;
                    if !self.add(&dir, entry_events() | WatchFlags::ONLYDIR, Some(cname), key) {
                        return None;
                    }
                    let next = dir.join(name);
                    match std::fs::symlink_metadata(&next) {
                        Ok(m) if m.file_type().is_symlink() => return None,
                        Ok(_) => dir = next,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => exists = false,
                        Err(_) => return None,
                    }
                }
            }
        }
        // The file itself: its contents, its attributes.
        if exists && !self.add(&dir, file_events() | WatchFlags::DONT_FOLLOW, None, key) {
            return None;
        }
        Some(())
    }

    /// Reads every queued event, marking the keys they concern.
    fn drain(&mut self) {
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        let mut hits: Vec<(i32, Option<Vec<u8>>, bool)> = Vec::new();
        let mut all = false;
        loop {
            match reader.next() {
                Ok(event) => {
                    let flags = event.events();
                    if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                        all = true;
                    }
                    hits.push((
                        event.wd(),
                        event.file_name().map(|n| n.to_bytes().to_vec()),
                        flags.contains(ReadFlags::IGNORED),
                    ));
                }
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => continue,
                // The watcher is broken: everything counts as changed.
                Err(_) => {
                    all = true;
                    break;
                }
            }
            if reader.is_buffer_empty() && hits.len() > 4096 {
                all = true;
                break;
            }
        }
        if all {
            for k in &mut self.keys {
                k.changed = true;
            }
        }
        for (wd, name, ignored) in hits {
            let Some(entries) = self.wds.get(&wd) else {
                continue;
            };
            for (watched, key) in entries {
                let hit = match (watched, &name) {
                    // Any event on the watched inode itself.
                    (None, _) => true,
                    // The directory itself moved, went or changed mode.
                    (Some(_), None) => true,
                    (Some(w), Some(n)) => OsStr::from_bytes(w.to_bytes()) == OsStr::from_bytes(n),
                };
                if hit {
                    if let Some(k) = self.keys.get_mut(*key) {
                        k.changed = true;
                    }
                }
            }
            if ignored {
                // The kernel dropped the watch (its inode is gone): the
                // next check re-arms what still exists.
                self.wds.remove(&wd);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(w: &Watcher, key: WatchKey) -> bool {
        w.check(key, || ()).is_some()
    }

    /// A watcher and a temporary directory (canonical) it can watch;
    /// `None` where inotify or a local filesystem is missing.
    fn watched_tempdir() -> Option<(Watcher, tempfile::TempDir, PathBuf)> {
        let w = Watcher::new()?;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        local_filesystem(&root).then_some((w, dir, root))
    }

    /// `check_drained` answers for the last read of the queue: a change
    /// after it is seen only once the queue is read again.
    #[test]
    fn check_drained_sees_what_the_last_drain_read() {
        let Some((w, _dir, root)) = watched_tempdir() else {
            return;
        };
        let file = root.join("f.txt");
        let key = w.watch(&[&file]).unwrap();
        std::fs::write(&file, "a").unwrap();
        assert!(w.check_drained(key, || ()).is_none(), "not read yet");
        w.drain();
        assert!(w.check_drained(key, || ()).is_some());
        assert!(w.check_drained(key, || ()).is_none());
    }

    #[test]
    fn a_quiet_path_is_not_checked_and_each_kind_of_change_is() {
        let Some((w, _dir, root)) = watched_tempdir() else {
            return;
        };
        let file = root.join("sub/f.txt");
        let missing = root.join("sub/none.db");
        let key = w.watch(&[&file, &missing]).unwrap();
        assert!(!ran(&w, key), "nothing changed yet");

        // The directory on the way is created, then the file.
        std::fs::create_dir(root.join("sub")).unwrap();
        assert!(ran(&w, key));
        assert!(!ran(&w, key));
        std::fs::write(&file, "a").unwrap();
        assert!(ran(&w, key));
        assert!(!ran(&w, key));
        // Written in place.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap()
            .write_all(b"b")
            .unwrap();
        assert!(ran(&w, key));
        assert!(!ran(&w, key));
        // Replaced by a rename.
        std::fs::write(root.join("sub/g.txt"), "c").unwrap();
        assert!(!ran(&w, key), "another file of the directory is no change");
        std::fs::rename(root.join("sub/g.txt"), &file).unwrap();
        assert!(ran(&w, key));
        assert!(!ran(&w, key));
        // Its mode changed.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(ran(&w, key));
        // The missing file appears.
        std::fs::write(&missing, "").unwrap();
        assert!(ran(&w, key));
        assert!(!ran(&w, key));
        // The directory on the way is renamed and replaced.
        std::fs::rename(root.join("sub"), root.join("old")).unwrap();
        assert!(ran(&w, key));
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(&file, "d").unwrap();
        assert!(ran(&w, key));
        assert!(!ran(&w, key));
        // (A change to what the path named before may still count: a
        // check too many, never one too few.)
        std::fs::remove_file(&file).unwrap();
        assert!(ran(&w, key));
    }

    #[test]
    fn the_same_paths_watched_again_get_their_key() {
        let Some((w, _dir, root)) = watched_tempdir() else {
            return;
        };
        let missing = root.join("none.wasm");
        let a = w.watch(&[&missing]).unwrap();
        let b = w.watch(&[&missing]).unwrap();
        assert_eq!(a, b);
        assert_ne!(w.watch(&[&root.join("other")]).unwrap(), a);
        std::fs::write(&missing, "").unwrap();
        assert!(ran(&w, a));
    }

    #[test]
    fn a_path_through_a_link_or_a_relative_path_is_not_watched() {
        let Some(w) = Watcher::new() else { return };
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        assert!(w.watch(&[&root.join("link/f")]).is_none());
        assert!(w.watch(&[Path::new("relative/f")]).is_none());
    }

    use std::io::Write as _;
}
