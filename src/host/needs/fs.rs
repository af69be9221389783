//! `fs:read` / `fs:write` on a path glob: the capability, matched where the
//! path really is; then the workspace rule on the directory the sandbox
//! would open; then the directory, opened now and held for the turn.
//!
//! The preopened directory is the glob's longest literal directory
//! (`<dir>` for `<dir>/**` or a literal directory); the filesystem layer
//! (`sandbox::journal_fs`) enforces the glob itself at every open and
//! mutation, so `notes/*.md` preopens `notes` and the layer refuses
//! `notes/a.txt`.

use std::path::{Path, PathBuf};

use super::{Asking, Need, Stop};
use crate::config::{resolve_glob, GlobRoot};
use crate::policy::{Access, Capability, DenyCode, PathGlob, RequestKind, ResolvedPath, Snapshot};
use crate::sandbox::bindings::fs::FsPart;
use crate::sandbox::{DirAccess, PinnedDir, Preopen};

pub(super) fn need(
    part: &mut FsPart,
    asking: &mut Asking<'_>,
    need: &Need<'_>,
) -> Result<(), Stop> {
    let cap = need.cap;
    // A path target is matched, asked about and allowed where it really
    // is: its literal directory resolved, so a link on the way
    // (`out -> private`) is not covered by a grant on the name (`out/**`).
    // Resolving is I/O: here, before `decide`.
    let root = need
        .target
        .and_then(|t| PathGlob::parse(t).ok())
        .map(|g| resolve_glob(&g));
    asking.capability(need, root.as_ref().and_then(|r| r.canonical.clone()))?;
    let Some(GlobRoot {
        dir: resolved,
        rest,
        ..
    }) = root
    else {
        return Err(Stop::new(
            DenyCode::TargetMismatch,
            format!("`{cap}` needs a path glob target"),
        ));
    };
    let write = cap == Capability::FsWrite;
    let canonical = match &resolved {
        ResolvedPath::Resolved(p) => p.clone(),
        ResolvedPath::Failed { .. } => String::new(),
    };
    asking.ask(RequestKind::Workspace {
        path: resolved,
        access: if write { Access::Write } else { Access::Read },
    })?;
    let host = Path::new(&canonical);
    // The directory the decision named, opened now from its canonical
    // path following no link, and held for the whole turn (see
    // `sandbox::pinned`).
    let dir = match part.preopens.iter().find(|p| p.host == host) {
        Some(p) => p.dir.clone(),
        None => PinnedDir::open(host)
            .map_err(|e| Stop::new(DenyCode::PathResolutionFailed, e.to_string()))?,
    };
    // A read-write preopen may contain host configuration (the grants
    // database, the history, manifests): the filesystem layer refuses
    // every mutation of a protected path inside it.
    let rebased =
        PathGlob::parse(&format!("{}/{rest}", canonical.trim_end_matches('/'))).map_err(|_| {
            Stop::new(
                DenyCode::TargetMismatch,
                format!(
                    "`{}` cannot be rebased on `{canonical}`",
                    need.target.unwrap_or_default()
                ),
            )
        })?;
    if write {
        part.write_globs.push(rebased);
    } else {
        part.read_globs.push(rebased);
    }
    let access = if write {
        DirAccess::ReadWrite
    } else {
        DirAccess::ReadOnly
    };
    preopen(part, need, &canonical, access, dir)
}

/// Adds the preopen of `canonical`, opened as `dir`, with `access` (a
/// directory already preopened keeps its one preopen, read-write if either
/// asks it), named in the guest as `need`'s mount says; refused when the
/// name and the directory do not match one to one.
fn preopen(
    part: &mut FsPart,
    need: &Need<'_>,
    canonical: &str,
    access: DirAccess,
    dir: PinnedDir,
) -> Result<(), Stop> {
    let host = Path::new(canonical);
    let guest = guest_name(need, canonical)?;
    // Names compared as the guest resolves them (`/out` is `out`, `/` is
    // `.`).
    let resolved_name = crate::manifest::guest_name(&guest);
    if let Some(clash) = part
        .preopens
        .iter()
        .find(|p| (p.host == host) != (crate::manifest::guest_name(&p.guest) == resolved_name))
    {
        return Err(Stop::new(
            DenyCode::TargetMismatch,
            format!(
                "capabilities[{}].mount: `{canonical}` as `{guest}` clashes with `{}` as `{}`: one directory has one name in the guest, and one name one directory",
                need.index,
                clash.host.display(),
                clash.guest
            ),
        ));
    }
    match part.preopens.iter_mut().find(|p| p.host == host) {
        Some(p) if access == DirAccess::ReadWrite => p.access = access,
        Some(_) => {}
        None => part.preopens.push(Preopen {
            guest,
            host: PathBuf::from(canonical),
            access,
            dir,
        }),
    }
    Ok(())
}

/// The guest's name for the directory: the manifest's `mount`, else its
/// place in the workspace. A directory that resolved out of the workspace
/// (a link on the way) has no such place, and its host path is not the
/// guest's to learn.
fn guest_name(need: &Need<'_>, canonical: &str) -> Result<String, Stop> {
    if let Some(mount) = need.mount {
        return Ok(mount.to_string());
    }
    let workspace = need.workspace;
    let relative = if canonical == workspace {
        Some(".".to_string())
    } else if workspace == "/" {
        Some(canonical.trim_start_matches('/').to_string())
    } else {
        canonical
            .strip_prefix(workspace)
            .and_then(|r| r.strip_prefix('/'))
            .map(str::to_string)
    };
    relative.ok_or_else(|| {
        Stop::new(
            DenyCode::TargetMismatch,
            format!(
                "capabilities[{}].mount: `{canonical}` lies outside the workspace `{workspace}`; name it in the guest with `mount`",
                need.index
            ),
        )
    })
}

/// Completes the part once every need was allowed. The workspace rule was
/// asked about each preopened directory; the actor's roots inside a
/// read-write one (a read-only `out/ro` in a read-write workspace) go to
/// the filesystem layer, which holds every path to the most specific root.
/// Protected paths matter only beneath a preopened directory (to the
/// filesystem layer and a command's roots): a turn without one does not
/// copy them.
pub(in crate::host) fn finish(part: &mut FsPart, snapshot: &Snapshot, actor: &str) {
    if part.preopens.is_empty() {
        return;
    }
    part.nested_roots = snapshot
        .actors
        .get(actor)
        .map(|a| {
            a.workspaces
                .iter()
                .filter(|r| {
                    part.preopens.iter().any(|p| {
                        let dir = p.host.display().to_string();
                        p.access == DirAccess::ReadWrite
                            && r.path != dir
                            && crate::policy::is_within(&r.path, &dir)
                    })
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    part.protected = snapshot.roots.protected.clone();
}
