//! Writing the files of `gatehouse wit --out DIR` and `gatehouse new
//! --dir DIR` without following a symbolic link below DIR (security round
//! 2, item 6).
//!
//! A repository may hold `wit/executor.wit` as a link to the person's
//! configuration; a plain `std::fs::write` would replace the configuration
//! with WIT text. Here DIR (the directory the person named, links in its
//! own path followed) is opened once, and every directory below it is
//! reached from that descriptor one component at a time with
//! `O_NOFOLLOW | O_DIRECTORY`, made with `mkdirat` when missing. Each file
//! is written to a new temporary file in its directory (`O_CREAT |
//! O_EXCL`, which never follows a link) and renamed into place
//! (`renameat`, which replaces a name, never what a link points to). A
//! target, or a directory on the way, that is a link is refused before
//! anything is written, naming the path.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::AuthoringError;

const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC)
    .union(OFlags::RDONLY);

/// Writes each `(relative path, text)` of `files` beneath `dir` (created
/// if needed), directories on the way made, files already there
/// replaced; returns their paths. Refuses ([`AuthoringError::Symlink`]) a
/// target or a directory below `dir` that is a symbolic link, checked for
/// every file before any is written.
pub(super) fn write_files<P: AsRef<Path>, T: AsRef<[u8]>>(
    dir: &Path,
    files: impl IntoIterator<Item = (P, T)>,
) -> Result<Vec<PathBuf>, AuthoringError> {
    let files: Vec<(Vec<String>, T)> = files
        .into_iter()
        .map(|(rel, text)| Ok((parts(dir, rel.as_ref())?, text)))
        .collect::<Result<_, AuthoringError>>()?;
    std::fs::create_dir_all(dir).map_err(|source| AuthoringError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let base = rustix::fs::open(
        dir,
        OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::RDONLY,
        Mode::empty(),
    )
    .map_err(|e| AuthoringError::Write {
        path: dir.to_path_buf(),
        source: e.into(),
    })?;
    // First every path as it is now, so that a link refuses the command
    // before it has written anything.
    for (parts, _) in &files {
        check(dir, &base, parts)?;
    }
    let mut written = Vec::new();
    for (parts, text) in files {
        let (name, dirs) = match parts.split_last() {
            Some(split) => split,
            None => continue,
        };
        let parent = open_dirs(dir, &base, dirs, true)?.ok_or_else(|| {
            // Made just above: only a concurrent removal gets here.
            AuthoringError::Write {
                path: below(dir, dirs),
                source: Errno::NOENT.into(),
            }
        })?;
        let path = below(dir, &parts);
        refuse_link(&parent, name, &path)?;
        replace(&parent, name, text.as_ref()).map_err(|source| AuthoringError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// The components of `rel`, which must be a relative path of plain names.
fn parts(dir: &Path, rel: &Path) -> Result<Vec<String>, AuthoringError> {
    rel.components()
        .map(|c| match c {
            Component::Normal(name) => name.to_str().map(str::to_string),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .filter(|p| !p.is_empty())
        .ok_or_else(|| AuthoringError::Write {
            path: dir.join(rel),
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        })
}

/// `dir` joined with `parts`.
fn below(dir: &Path, parts: &[String]) -> PathBuf {
    parts.iter().fold(dir.to_path_buf(), |p, c| p.join(c))
}

/// The file `parts` below `base` as it is now: a link on the way or in
/// its place is refused; a missing directory ends the check (it will be
/// made).
fn check(dir: &Path, base: &OwnedFd, parts: &[String]) -> Result<(), AuthoringError> {
    let Some((name, dirs)) = parts.split_last() else {
        return Ok(());
    };
    match open_dirs(dir, base, dirs, false)? {
        Some(parent) => refuse_link(&parent, name, &below(dir, parts)),
        None => Ok(()),
    }
}

/// The directory `dirs` below `base`, each component opened from the one
/// before without following a link, made first when `create`; `None`
/// when one is missing and not `create`.
fn open_dirs(
    dir: &Path,
    base: &OwnedFd,
    dirs: &[String],
    create: bool,
) -> Result<Option<OwnedFd>, AuthoringError> {
    let mut cur = rustix::io::fcntl_dupfd_cloexec(base, 0).map_err(|e| AuthoringError::Write {
        path: dir.to_path_buf(),
        source: e.into(),
    })?;
    for (i, part) in dirs.iter().enumerate() {
        let path = below(dir, &dirs[..=i]);
        if create {
            match rustix::fs::mkdirat(&cur, part.as_str(), Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => {
                    return Err(AuthoringError::Write {
                        path,
                        source: e.into(),
                    })
                }
            }
        }
        cur = match rustix::fs::openat(&cur, part.as_str(), DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) if !create => return Ok(None),
            Err(e @ (Errno::LOOP | Errno::NOTDIR)) => {
                refuse_link(&cur, part, &path)?;
                return Err(AuthoringError::Write {
                    path,
                    source: e.into(),
                });
            }
            Err(e) => {
                return Err(AuthoringError::Write {
                    path,
                    source: e.into(),
                })
            }
        };
    }
    Ok(Some(cur))
}

/// Refuses `name` in `parent` (at `path`) when it is a symbolic link.
fn refuse_link(parent: &OwnedFd, name: &str, path: &Path) -> Result<(), AuthoringError> {
    match rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
            Err(AuthoringError::Symlink {
                path: path.to_path_buf(),
            })
        }
        Ok(_) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(AuthoringError::Write {
            path: path.to_path_buf(),
            source: e.into(),
        }),
    }
}

/// Writes `text` to a new temporary file in `parent`, then renames it
/// over `name`; the temporary file is removed when that fails.
fn replace(parent: &OwnedFd, name: &str, text: &[u8]) -> std::io::Result<()> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let mut made = None;
    for _ in 0..100 {
        let tmp = format!(
            ".{name}.gatehouse-{}-{}.tmp",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        match rustix::fs::openat(
            parent,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o666),
        ) {
            Ok(fd) => {
                made = Some((tmp, fd));
                break;
            }
            // A name another run left: the next one.
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    let Some((tmp, fd)) = made else {
        return Err(Errno::EXIST.into());
    };
    let done = std::fs::File::from(fd).write_all(text).and_then(|()| {
        rustix::fs::renameat(parent, tmp.as_str(), parent, name).map_err(std::io::Error::from)
    });
    if done.is_err() {
        let _ = rustix::fs::unlinkat(parent, tmp.as_str(), AtFlags::empty());
    }
    done
}
