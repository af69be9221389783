//! `fs:read` → read-only preopen; `fs:write` → read-write preopen.

use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use super::plan::{DirAccess, Plan};

/// Preopens exactly the plan's directories.
///
/// # Security
/// Each preopen hands the guest its directory tree (symlinks out of it are
/// refused by wasmtime-wasi's `cap-std` resolution); the plan holds only
/// directories the policy allowed.
pub fn apply(b: &mut WasiCtxBuilder, plan: &Plan) -> wasmtime::Result<Vec<String>> {
    let mut linked = Vec::new();
    for p in plan.preopens() {
        let perms = match p.access {
            DirAccess::ReadOnly => FsPerms::ReadOnly,
            DirAccess::ReadWrite => FsPerms::ReadWrite,
        };
        // The directory the plan pinned, not what its path names now.
        b.preopened_dir(p.dir.proc_path(), &p.guest, perms)?;
        linked.push(format!(
            "preopen `{}` -> `{}` ({})",
            p.guest,
            p.host.display(),
            match p.access {
                DirAccess::ReadOnly => "read-only",
                DirAccess::ReadWrite => "read-write",
            }
        ));
    }
    Ok(linked)
}
