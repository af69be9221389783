//! Paths beneath a turn's roots, opened without following any symbolic
//! link.
//!
//! Undo acts on the host paths a turn journaled, long after the turn: by
//! then a later turn (or anyone) may have replaced a directory on the way
//! with a symbolic link, and a plain `std::fs` call would follow it out of
//! the workspace. Here a path is always reached from its root, held open,
//! with `openat2(2)` and `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`; where the
//! kernel has no `openat2` (before Linux 5.6, or a seccomp filter that
//! refuses it) one component at a time with `O_NOFOLLOW | O_DIRECTORY`,
//! which refuses a link and a non-directory the same way. The root itself
//! is opened from `/` the same way: its recorded path was canonical when
//! the turn ran, so a link anywhere in it now means it is not what the turn
//! left. The last component is never followed either: every operation
//! here is an `*at` call on the parent directory that does not follow it
//! (`O_NOFOLLOW`, `AT_SYMLINK_NOFOLLOW`, `unlinkat`, `renameat2`).
//!
//! Linux only, like the journaling filesystem layer.

use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;

pub(crate) use crate::util::nofollow::{components, open_below, open_root, Reach, DIR_FLAGS};
use rustix::io::Errno;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};

/// One path beneath one root: the root's components and the path's below
/// it (at least one: the root itself is never a target).
#[derive(Debug, Clone)]
pub(crate) struct Beneath {
    root: Vec<String>,
    below: Vec<String>,
}

/// What is at a path, read without following it.
#[derive(Debug)]
pub(crate) enum Found {
    Absent,
    File { sha256: String },
    Dir,
    Symlink { target: String },
    Other,
}

impl Beneath {
    /// `path` below `root` (both canonical); `None` when it is not
    /// strictly below.
    pub(crate) fn new(root: &str, path: &str) -> Option<Beneath> {
        let r = components(root)?;
        let p = components(path)?;
        if p.len() <= r.len() || p[..r.len()] != r[..] {
            return None;
        }
        Some(Beneath {
            root: r.iter().map(|s| s.to_string()).collect(),
            below: p[r.len()..].iter().map(|s| s.to_string()).collect(),
        })
    }

    /// How many components lie between the root and the path.
    pub(crate) fn depth(&self) -> usize {
        self.below.len()
    }

    fn name(&self) -> &str {
        self.below.last().map(String::as_str).unwrap_or(".")
    }

    /// The parent directory, held open.
    fn parent(&self) -> Result<OwnedFd, Reach> {
        let root: Vec<&str> = self.root.iter().map(String::as_str).collect();
        let below: Vec<&str> = self.below[..self.below.len() - 1]
            .iter()
            .map(String::as_str)
            .collect();
        let root = open_root(&root)?;
        open_below(&root, &below)
    }

    /// What is at the path now. A missing parent means the path is absent.
    pub(crate) fn found(&self) -> Result<Found, Reach> {
        let dir = match self.parent() {
            Ok(d) => d,
            Err(Reach::Missing) => return Ok(Found::Absent),
            Err(e) => return Err(e),
        };
        let name = self.name();
        let stat = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(s) => s,
            Err(Errno::NOENT) => return Ok(Found::Absent),
            Err(e) => return Err(Reach::Io(e.into())),
        };
        Ok(match FileType::from_raw_mode(stat.st_mode) {
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(&dir, name, Vec::new())
                    .map_err(|e| Reach::Io(e.into()))?;
                Found::Symlink {
                    target: target.to_string_lossy().into_owned(),
                }
            }
            FileType::Directory => Found::Dir,
            FileType::RegularFile => {
                let fd = rustix::fs::openat(
                    &dir,
                    name,
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
                    Mode::empty(),
                )?;
                Found::File {
                    sha256: crate::util::sha256_reader(File::from(fd)).map_err(Reach::Io)?,
                }
            }
            _ => Found::Other,
        })
    }

    /// Whether the path is a directory with no entries.
    pub(crate) fn is_empty_dir(&self) -> Result<bool, Reach> {
        let dir = self.parent()?;
        let fd = rustix::fs::openat(&dir, self.name(), DIR_FLAGS, Mode::empty())?;
        let entries = rustix::fs::Dir::read_from(&fd).map_err(|e| Reach::Io(e.into()))?;
        for entry in entries {
            let entry = entry.map_err(|e| Reach::Io(e.into()))?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Removes the file or link at the path (never a directory).
    pub(crate) fn remove_file(&self) -> std::io::Result<()> {
        let dir = self.parent().map_err(io)?;
        Ok(rustix::fs::unlinkat(&dir, self.name(), AtFlags::empty())?)
    }

    /// Removes the (empty) directory at the path.
    pub(crate) fn remove_dir(&self) -> std::io::Result<()> {
        let dir = self.parent().map_err(io)?;
        Ok(rustix::fs::unlinkat(&dir, self.name(), AtFlags::REMOVEDIR)?)
    }

    /// Creates a directory at the path.
    pub(crate) fn create_dir(&self) -> std::io::Result<()> {
        let dir = self.parent().map_err(io)?;
        Ok(rustix::fs::mkdirat(
            &dir,
            self.name(),
            Mode::from_raw_mode(0o777),
        )?)
    }

    /// Creates a symbolic link to `target` at the path.
    pub(crate) fn symlink(&self, target: &str) -> std::io::Result<()> {
        let dir = self.parent().map_err(io)?;
        Ok(rustix::fs::symlinkat(target, &dir, self.name())?)
    }

    /// Writes `bytes` to the regular file at the path, in place (it keeps
    /// its inode and mode), or to a new one; with `new`, only a new one.
    /// Durable before it returns.
    pub(crate) fn write_file(&self, bytes: &[u8], new: bool) -> std::io::Result<()> {
        let dir = self.parent().map_err(io)?;
        let mut flags = OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::TRUNC
            | OFlags::NOFOLLOW
            | OFlags::CLOEXEC
            | OFlags::NONBLOCK;
        if new {
            flags |= OFlags::EXCL;
        }
        let fd = rustix::fs::openat(&dir, self.name(), flags, Mode::from_raw_mode(0o666))?;
        let mut f = File::from(fd);
        if !f.metadata()?.is_file() {
            return Err(std::io::Error::other("it is not a regular file"));
        }
        f.write_all(bytes)?;
        f.sync_data()
    }

    /// Moves the entry at `self` to `to`, which must not exist.
    pub(crate) fn rename_to(&self, to: &Beneath) -> std::io::Result<()> {
        let from_dir = self.parent().map_err(io)?;
        let to_dir = to.parent().map_err(io)?;
        match rustix::fs::renameat_with(
            &from_dir,
            self.name(),
            &to_dir,
            to.name(),
            RenameFlags::NOREPLACE,
        ) {
            // A filesystem without `RENAME_NOREPLACE`: the caller found
            // `to` absent just before.
            Err(Errno::INVAL) => Ok(rustix::fs::renameat(
                &from_dir,
                self.name(),
                &to_dir,
                to.name(),
            )?),
            r => Ok(r?),
        }
    }
}

/// A [`Reach`] failure in the middle of an operation, as an I/O error.
fn io(r: Reach) -> std::io::Error {
    match r {
        Reach::Changed => std::io::Error::other(
            "a component of the path is now a symbolic link or not a directory",
        ),
        Reach::Missing => std::io::ErrorKind::NotFound.into(),
        Reach::Io(e) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::nofollow::walk;

    fn canonical(p: &std::path::Path) -> String {
        p.canonicalize().unwrap().to_str().unwrap().to_string()
    }

    #[test]
    fn components_refuse_what_is_not_canonical() {
        assert_eq!(components("/"), Some(vec![]));
        assert_eq!(components("/a/b"), Some(vec!["a", "b"]));
        for bad in ["a/b", "/a/../b", "/a/./b", "/a//b", "/a/", ""] {
            assert_eq!(components(bad), None, "{bad}");
        }
        assert!(Beneath::new("/a", "/a").is_none());
        assert!(Beneath::new("/a", "/ab/c").is_none());
        assert!(Beneath::new("/a", "/a/b").is_some());
    }

    /// A link anywhere on the way, in the root or below it, is refused by
    /// `openat2` and by the manual walk alike; a real directory passes.
    #[test]
    fn links_on_the_way_are_refused_by_both_resolvers() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::fs::create_dir_all(root.join("inside")).unwrap();
        std::fs::create_dir_all(tmp.path().join("outside")).unwrap();
        std::fs::write(root.join("real/f.txt"), "real").unwrap();
        std::fs::write(tmp.path().join("outside/f.txt"), "outside").unwrap();
        std::os::unix::fs::symlink("../outside", root.join("out")).unwrap();
        std::os::unix::fs::symlink("inside", root.join("in")).unwrap();
        std::os::unix::fs::symlink("root", tmp.path().join("root-link")).unwrap();
        let r = canonical(&root);

        let ok = Beneath::new(&r, &format!("{r}/real/f.txt")).unwrap();
        assert!(matches!(ok.found().unwrap(), Found::File { .. }));
        for via in ["out", "in"] {
            let b = Beneath::new(&r, &format!("{r}/{via}/f.txt")).unwrap();
            assert!(matches!(b.found(), Err(Reach::Changed)), "{via}");
            assert!(b.write_file(b"x", false).is_err());
        }
        // The link itself, as the last component, is seen, not followed.
        let link = Beneath::new(&r, &format!("{r}/out")).unwrap();
        assert!(
            matches!(link.found().unwrap(), Found::Symlink { target } if target == "../outside")
        );
        // A root reached through a link is not the root the turn had.
        let t = canonical(tmp.path());
        let b = Beneath::new(
            &format!("{t}/root-link"),
            &format!("{t}/root-link/real/f.txt"),
        )
        .unwrap();
        assert!(matches!(b.found(), Err(Reach::Changed)));
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("outside/f.txt")).unwrap(),
            "outside"
        );

        // The manual walk, used where there is no openat2.
        let base = rustix::fs::open(root.as_path(), DIR_FLAGS, Mode::empty()).unwrap();
        assert!(walk(&base, &["real"]).is_ok());
        assert!(matches!(walk(&base, &["out"]), Err(Reach::Changed)));
        assert!(matches!(walk(&base, &["in"]), Err(Reach::Changed)));
        assert!(matches!(walk(&base, &[".."]), Err(Reach::Changed)));
        assert!(matches!(
            walk(&base, &["real", "f.txt"]),
            Err(Reach::Changed)
        ));
        assert!(matches!(walk(&base, &["nothing"]), Err(Reach::Missing)));
    }
}
