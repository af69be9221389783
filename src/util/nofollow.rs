//! Directories opened from a root without following any link
//! (`openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, or one
//! component at a time with `O_NOFOLLOW | O_DIRECTORY` where the kernel
//! has no `openat2`): what undo reaches a journaled path by
//! (`crate::undo`), and what a turn's roots are pinned with
//! (`crate::exec::pinned`). I/O, so not in the policy core; a leaf, so
//! both layers reach it without reaching the configuration.

use std::os::fd::OwnedFd;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Why a path could not be reached.
#[derive(Debug)]
pub(crate) enum Reach {
    /// A component on the way is a symbolic link, or not a directory:
    /// the path is no longer what the turn left.
    Changed,
    /// A directory on the way does not exist.
    Missing,
    /// Anything else.
    Io(std::io::Error),
}

impl From<Errno> for Reach {
    fn from(e: Errno) -> Reach {
        match e {
            Errno::LOOP | Errno::NOTDIR | Errno::XDEV => Reach::Changed,
            Errno::NOENT => Reach::Missing,
            e => Reach::Io(e.into()),
        }
    }
}

/// The components of a canonical absolute path below `/` (none for `/`).
/// `None` when it is not canonical (relative, `.`, `..`, an empty
/// segment).
pub(crate) fn components(path: &str) -> Option<Vec<&str>> {
    let rest = path.strip_prefix('/')?;
    if rest.is_empty() {
        return Some(Vec::new());
    }
    let parts: Vec<&str> = rest.split('/').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == "." || *p == "..")
    {
        return None;
    }
    Some(parts)
}

pub(crate) const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC)
    .union(OFlags::RDONLY);

/// Opens the directory `parts` below `base`, following no link: with
/// `openat2(2)` when the kernel has it, else one component at a time.
pub(crate) fn open_below(base: &OwnedFd, parts: &[&str]) -> Result<OwnedFd, Reach> {
    if parts.is_empty() {
        return rustix::io::fcntl_dupfd_cloexec(base, 0).map_err(Reach::from);
    }
    let rel = parts.join("/");
    match rustix::fs::openat2(
        base,
        rel.as_str(),
        DIR_FLAGS,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => Ok(fd),
        // No openat2 here (an old kernel, a filter): the manual walk.
        Err(Errno::NOSYS) | Err(Errno::PERM) => walk(base, parts),
        Err(e) => Err(e.into()),
    }
}

/// The manual walk: each component opened from the one before with
/// `O_NOFOLLOW | O_DIRECTORY` (a link fails with `ELOOP`, anything but a
/// directory with `ENOTDIR`); `components` already refused `.` and `..`.
pub(crate) fn walk(base: &OwnedFd, parts: &[&str]) -> Result<OwnedFd, Reach> {
    let mut cur = rustix::io::fcntl_dupfd_cloexec(base, 0).map_err(Reach::from)?;
    for part in parts {
        if part.is_empty() || *part == "." || *part == ".." || part.contains('/') {
            return Err(Reach::Changed);
        }
        cur = rustix::fs::openat(&cur, *part, DIR_FLAGS, Mode::empty())?;
    }
    Ok(cur)
}

/// The directory `dir` (canonical, absolute), opened from `/` without
/// following any link.
pub(crate) fn open_root(dir: &[&str]) -> Result<OwnedFd, Reach> {
    let slash = rustix::fs::open("/", DIR_FLAGS, Mode::empty())?;
    open_below(&slash, dir)
}

/// The directory at the canonical absolute `path`, opened from `/`
/// without following any link: `Reach::Changed` when a component is now a
/// link or not a directory (the path is no longer the canonical one).
pub(crate) fn open_canonical_dir(path: &str) -> Result<OwnedFd, Reach> {
    let parts = components(path).ok_or(Reach::Changed)?;
    open_root(&parts)
}

/// The directory `rel` (relative, no `.` or `..`) below the directory
/// `base`, following no link.
pub(crate) fn open_dir_below(base: &OwnedFd, rel: &str) -> Result<OwnedFd, Reach> {
    if rel.is_empty() || rel == "." {
        return open_below(base, &[]);
    }
    let parts: Vec<&str> = rel.split('/').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == "." || *p == "..")
    {
        return Err(Reach::Changed);
    }
    open_below(base, &parts)
}
