//! Directories of a turn, opened once when its plan is made and held for
//! the whole turn.
//!
//! The gate decides on path strings: `WS/data` is inside the workspace,
//! holds no host state, may be read. A path is only a name, and a turn
//! that may write its workspace can rename `data` away and put a link to
//! the host's state directory in its place. So every root of a turn
//! (the preopens of the wasm guest, the Landlock rules and the working
//! directory of its commands) is opened once, when the plan is made, from
//! its canonical path following no link, and the turn works on those
//! descriptors: what the decision named is what the sandbox gets, however
//! the names move afterwards. Before each command the host checks again
//! that each root's path still leads to the same directory, and refuses
//! the command when one does not (security round 2, item 1).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::util::nofollow::{open_canonical_dir, open_dir_below, Reach};
use crate::util::IoCause;

/// One directory, opened. Cloning shares the descriptor.
#[derive(Clone)]
pub struct PinnedDir {
    path: PathBuf,
    fd: Arc<OwnedFd>,
    /// (device, inode) of the directory when it was opened.
    id: (u64, u64),
}

impl std::fmt::Debug for PinnedDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedDir({:?}, fd {})", self.path, self.fd.as_raw_fd())
    }
}

impl PartialEq for PinnedDir {
    fn eq(&self, other: &PinnedDir) -> bool {
        self.path == other.path && self.id == other.id
    }
}
impl Eq for PinnedDir {}

/// Why a directory could not be pinned, or is no longer what it was.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// The path given is not canonical and absolute.
    #[error("`{0}` is not a canonical absolute path")]
    NotCanonical(String),
    /// The path now resolves to something other than the directory that was pinned.
    #[error("`{0}` no longer resolves to the directory this turn was planned with (a link or another directory is in its place)")]
    Moved(String),
    /// The path is not an existing directory.
    #[error("`{0}` is not an existing directory")]
    Missing(String),
    /// The directory could not be opened.
    #[error("`{path}` cannot be opened: {source}")]
    Io {
        /// The directory.
        path: String,
        /// Why.
        source: IoCause,
    },
}

fn identity(fd: &OwnedFd) -> std::io::Result<(u64, u64)> {
    let st = rustix::fs::fstat(fd)?;
    Ok((st.st_dev, st.st_ino))
}

impl PinnedDir {
    /// Opens the directory at `path`, which must be canonical (absolute,
    /// every link already resolved), from `/` following no link: a link
    /// anywhere on the way means it is no longer the path that was
    /// decided on, and it is refused.
    ///
    /// # Security
    /// The descriptor is the authority over the directory's tree: whoever
    /// holds it reaches what is beneath, wherever the tree is moved.
    /// Open only a directory the policy allowed.
    pub fn open(path: &Path) -> Result<PinnedDir, PinError> {
        let text = path
            .to_str()
            .filter(|_| path.is_absolute())
            .ok_or_else(|| PinError::NotCanonical(path.display().to_string()))?;
        let fd = open_canonical_dir(text).map_err(|e| match e {
            // A file where a directory was expected is not a link.
            Reach::Changed if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) => {
                PinError::Missing(text.to_string())
            }
            e => reach_error(text, e),
        })?;
        let id = identity(&fd).map_err(|e| io_error(text, e))?;
        Ok(PinnedDir {
            path: path.to_path_buf(),
            fd: Arc::new(fd),
            id,
        })
    }

    /// The directory `path` beneath this one (`path` canonical and inside
    /// it), opened from this descriptor following no link.
    ///
    /// # Security
    /// As [`PinnedDir::open`].
    pub fn open_below(&self, path: &Path) -> Result<PinnedDir, PinError> {
        let text = path.display().to_string();
        let rel = path
            .strip_prefix(&self.path)
            .map_err(|_| PinError::NotCanonical(text.clone()))?;
        let rel_text = rel
            .to_str()
            .ok_or_else(|| PinError::NotCanonical(text.clone()))?;
        let fd = open_dir_below(&self.fd, rel_text).map_err(|e| reach_error(&text, e))?;
        let id = identity(&fd).map_err(|e| io_error(&text, e))?;
        Ok(PinnedDir {
            path: path.to_path_buf(),
            fd: Arc::new(fd),
            id,
        })
    }

    /// The canonical path it was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open directory's descriptor, borrowed.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The open directory's raw descriptor number.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// A path that opens exactly this directory, wherever it is now
    /// (`/proc/self/fd/N`): for APIs that take a path (wasmtime-wasi's
    /// preopens) and must get the pinned directory.
    pub fn proc_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// Whether its path still leads, following no link, to the directory
    /// that was opened: `Err(Moved)` when a link or another directory is
    /// in its place now.
    pub fn check_unmoved(&self) -> Result<(), PinError> {
        let text = self.path.display().to_string();
        let now = open_canonical_dir(&text).map_err(|e| match e {
            Reach::Changed | Reach::Missing => PinError::Moved(text.clone()),
            Reach::Io(e) => io_error(&text, e),
        })?;
        match identity(&now) {
            Ok(id) if id == self.id => Ok(()),
            Ok(_) => Err(PinError::Moved(text)),
            Err(e) => Err(io_error(&text, e)),
        }
    }
}

fn reach_error(path: &str, e: Reach) -> PinError {
    match e {
        Reach::Changed => PinError::Moved(path.to_string()),
        Reach::Missing => PinError::Missing(path.to_string()),
        Reach::Io(e) => io_error(path, e),
    }
}

fn io_error(path: &str, e: std::io::Error) -> PinError {
    PinError::Io {
        path: path.to_string(),
        source: IoCause(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_replaced_by_a_link_is_no_longer_the_pinned_one() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("data")).unwrap();
        std::fs::create_dir_all(root.join("elsewhere")).unwrap();
        let pinned = PinnedDir::open(&root.join("data")).unwrap();
        assert!(pinned.check_unmoved().is_ok());
        std::fs::rename(root.join("data"), root.join("data-old")).unwrap();
        std::os::unix::fs::symlink(root.join("elsewhere"), root.join("data")).unwrap();
        assert!(matches!(pinned.check_unmoved(), Err(PinError::Moved(_))));
        // Opening it now is refused too: a link is on the way.
        assert!(matches!(
            PinnedDir::open(&root.join("data")),
            Err(PinError::Moved(_))
        ));
        // The descriptor still reaches the directory that was opened.
        std::fs::write(root.join("data-old/a.txt"), "x").unwrap();
        let via = std::fs::read_to_string(pinned.proc_path().join("a.txt")).unwrap();
        assert_eq!(via, "x");
    }

    #[test]
    fn another_directory_in_its_place_is_moved_and_a_path_not_canonical_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("data")).unwrap();
        let pinned = PinnedDir::open(&root.join("data")).unwrap();
        std::fs::rename(root.join("data"), root.join("data-old")).unwrap();
        std::fs::create_dir_all(root.join("data")).unwrap();
        assert!(matches!(pinned.check_unmoved(), Err(PinError::Moved(_))));
        assert!(matches!(
            PinnedDir::open(Path::new("relative/x")),
            Err(PinError::NotCanonical(_))
        ));
        assert!(matches!(
            PinnedDir::open(&root.join("nothing")),
            Err(PinError::Missing(_))
        ));
    }
}
