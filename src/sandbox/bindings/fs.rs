//! `fs:read` → read-only preopen; `fs:write` → read-write preopen; both
//! through the journaling layer ([`crate::sandbox::journal_fs`]), which holds
//! every open and mutation to the globs, the protected paths and the
//! nested read-only roots, and journals each mutation for undo.

use std::borrow::Cow;
use std::path::PathBuf;

use serde::Serialize;
use wasmtime::component::Linker;
use wasmtime_wasi::FsPerms;

use super::{Finished, Open, OpenError, Prepare, PrepareError, Unit};
use crate::policy::snapshot::{ProtectedPath, WorkspaceMode, WorkspaceRoot};
use crate::policy::PathGlob;
use crate::sandbox::journal_fs::{self, FsLayer};
use crate::sandbox::HostState;
use crate::undo::fs::FsScope;

/// How a preopened directory may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirAccess {
    /// The guest may only read.
    ReadOnly,
    /// The guest may read and write (journaled).
    ReadWrite,
}

/// One directory the guest sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preopen {
    /// Canonical host directory.
    pub host: PathBuf,
    /// The name the guest opens it by: relative to the turn's workspace
    /// (`.`, `out`), or the absolute host path when outside it.
    pub guest: String,
    /// Whether the guest may only read it, or also write.
    pub access: DirAccess,
    /// The directory itself, opened when the plan was made: the guest's
    /// preopen and a command's root are this descriptor, not whatever the
    /// path names later.
    #[serde(skip)]
    pub dir: crate::sandbox::PinnedDir,
}

/// What the filesystem unit was allowed: the directories and the globs
/// within them. Empty (no preopen: the guest reaches no file) without an
/// `fs:read` or `fs:write` grant.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FsPart {
    /// The directories the guest may open, one preopen each.
    pub preopens: Vec<Preopen>,
    /// `fs:write` globs, rebased on the canonical preopened directory: the
    /// filesystem layer refuses any mutation of a path none matches.
    pub write_globs: Vec<PathGlob>,
    /// `fs:read` globs, likewise: a file's content may be read when one
    /// of these or of the write globs matches it.
    pub read_globs: Vec<PathGlob>,
    /// Paths no executor may write, even inside a read-write preopen (the
    /// snapshot's `roots.protected`; empty without a preopen).
    pub protected: Vec<ProtectedPath>,
    /// The actor's workspace roots strictly inside a read-write preopen:
    /// the gate asked the workspace rule about the preopened directory
    /// only, so the filesystem layer holds every path below it to the
    /// most specific of these (a read-only one refuses the write with
    /// `WORKSPACE_READ_ONLY`), and a command may not run with a write
    /// root that holds a read-only one.
    pub nested_roots: Vec<WorkspaceRoot>,
}

impl FsPart {
    /// What a run of this part can write, as undo records it: the
    /// read-write preopened directories, the `fs:write` globs, the
    /// protected paths (undo acts only within them).
    pub fn fs_scope(&self) -> FsScope {
        FsScope {
            roots: self
                .preopens
                .iter()
                .filter(|p| p.access == DirAccess::ReadWrite)
                .filter_map(|p| p.host.to_str().map(str::to_string))
                .collect(),
            write_globs: self
                .write_globs
                .iter()
                .map(|g| g.as_str().to_string())
                .collect(),
            protected: self.protected.clone(),
            read_only: self.read_only_roots().map(str::to_string).collect(),
        }
    }

    /// The read-write preopened directories (canonical): where a run may
    /// write, which the host serializes turns on.
    pub fn write_roots(&self) -> Vec<PathBuf> {
        self.preopens
            .iter()
            .filter(|p| p.access == DirAccess::ReadWrite)
            .map(|p| p.host.clone())
            .collect()
    }

    /// The nested roots that are read-only.
    pub fn read_only_roots(&self) -> impl Iterator<Item = &str> {
        self.nested_roots
            .iter()
            .filter(|r| r.mode == WorkspaceMode::ReadOnly)
            .map(|r| r.path.as_str())
    }
}

/// The filesystem unit.
pub struct Fs;

impl Unit for Fs {
    type Part = FsPart;
    type State = FsLayer;
    type Runtime = ();

    fn open(_: &Open<'_>) -> Result<(), OpenError> {
        Ok(())
    }

    /// Preopens exactly the part's directories, each the descriptor the
    /// plan pinned (not what its path names now).
    ///
    /// # Security
    /// Each preopen hands the guest its directory tree (symlinks out of it
    /// are refused by wasmtime-wasi's `cap-std` resolution); the part holds
    /// only directories the policy allowed.
    fn prepare(part: &FsPart, _: &(), cx: &mut Prepare<'_>) -> Result<FsLayer, PrepareError> {
        for p in &part.preopens {
            let perms = match p.access {
                DirAccess::ReadOnly => FsPerms::ReadOnly,
                DirAccess::ReadWrite => FsPerms::ReadWrite,
            };
            cx.wasi
                .preopened_dir(p.dir.proc_path(), &p.guest, perms)
                .map_err(|e| PreopenFailed {
                    host: p.host.clone(),
                    source: e.into(),
                })?;
        }
        Ok(FsLayer::new(
            cx.plan,
            cx.services.journal.clone(),
            cx.services.audit.clone(),
        ))
    }

    fn describe(part: &FsPart, _: &FsLayer, out: &mut Vec<Cow<'static, str>>) {
        out.extend(part.preopens.iter().map(|p| {
            Cow::Owned(format!(
                "preopen `{}` -> `{}` ({})",
                p.guest,
                p.host.display(),
                match p.access {
                    DirAccess::ReadOnly => "read-only",
                    DirAccess::ReadWrite => "read-write",
                }
            ))
        }));
    }

    /// Writes what the run left each touched path as, for undo (a run
    /// killed before this still has its write-ahead journal).
    fn finish(layer: &mut FsLayer, _: &mut Finished) -> Result<(), PrepareError> {
        Ok(layer.finish()?)
    }
}

/// Links `wasi:filesystem`: the preopens, and `types` through the
/// journaling layer.
///
/// # Security
/// Reaches nothing without a preopen; the preopens come from the part.
pub fn add_to_linker(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    super::wasi::link_preopens(l)?;
    journal_fs::add_to_linker(l)
}

/// A directory of the plan could not be preopened.
#[derive(Debug, thiserror::Error)]
#[error("cannot preopen `{}`: {source}", host.display())]
struct PreopenFailed {
    host: std::path::PathBuf,
    source: PrepareError,
}
