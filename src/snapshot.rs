//! `policy.json`: freezing a turn's policy and checking it later.
//!
//! [`build`] gathers the sources (configuration, manifests, grants in force,
//! roots) into a [`Snapshot`]; [`prepare`] writes its frozen form;
//! [`verify`] rebuilds the expected bytes from the sources and refuses a
//! file that differs by a single byte with `SNAPSHOT_MISMATCH`.

use std::path::{Path, PathBuf};

use crate::config::{resolve_ancestor, HostConfig, StatePaths};
use crate::manifest::Manifest;
use crate::policy::{FrozenSnapshot, Grant, Level, ProtectedKind, ProtectedPath, Roots, Snapshot};
use crate::util::IoCause;

/// Why a snapshot could not be built, written or accepted.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The configuration could not be read or resolved.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// A manifest could not be read or is invalid.
    #[error(transparent)]
    Manifest(#[from] crate::manifest::ManifestError),
    /// A file of the snapshot could not be read or written.
    #[error("cannot {action} `{path}`: {source}")]
    Io {
        /// What was being done (`read`, `write`, …).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: IoCause,
    },
    /// `SNAPSHOT_MISMATCH`: the snapshot differs from the policy recomputed from its
    /// sources.
    #[error("SNAPSHOT_MISMATCH: `{path}`: {reason}")]
    Mismatch {
        /// The snapshot file.
        path: PathBuf,
        /// What differs.
        reason: String,
    },
}

/// Everything a snapshot is built from.
pub struct Sources<'a> {
    /// The host configuration: level, actors, and the places to protect.
    pub config: &'a HostConfig,
    /// Where the host's state is (protected from every executor).
    pub state: &'a StatePaths,
    /// Every executor the snapshot defines.
    pub manifests: &'a [Manifest],
    /// The turn's workspace, canonical.
    pub turn_workspace: &'a str,
    /// Where `~` in targets points.
    pub home: Option<&'a Path>,
    /// Overrides the configured level.
    pub level: Option<Level>,
    /// Grants active now (read by the caller from the store).
    pub grants: Vec<Grant>,
}

fn protect(out: &mut Vec<ProtectedPath>, path: &Path, kind: ProtectedKind) {
    let path = resolve_ancestor(path).display().to_string();
    match out.iter_mut().find(|p| p.path == path) {
        // A path protected twice keeps the stricter kind: state is
        // hidden from reads as well as writes.
        Some(known) if kind == ProtectedKind::State => known.kind = kind,
        Some(_) => {}
        None => out.push(ProtectedPath { path, kind }),
    }
}

/// Protects `path` as `kind`, and its name too when it is a link (the
/// canonical form is the link's target): the name is what a guest would
/// open, the target where the bytes are.
fn protect_named(out: &mut Vec<ProtectedPath>, path: &Path, kind: ProtectedKind) {
    protect(out, path, kind);
    if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
        let named = resolve_ancestor(parent).join(name);
        protect(out, &named, kind);
    }
}

/// The paths no executor may write: the configuration file and every
/// place configuration is discovered from, the state directory (grants
/// and memory databases, history, cache), the grants database, the
/// pending-approval queue and history wherever they are, every place state is discovered from (these
/// are [`ProtectedKind::State`]: hidden from reads too), executor
/// directories, manifests and their components (issue 12, items 3, 14
/// and 17). Canonical even when they do not exist yet.
pub fn protected_paths(
    config: &HostConfig,
    state: &StatePaths,
    manifests: &[Manifest],
) -> Vec<ProtectedPath> {
    let mut out = Vec::new();
    if let Some(src) = &config.source {
        // A configuration that holds a database password is a secret too
        // (security round 3, item 2).
        let kind = if config.holds_secret() {
            ProtectedKind::State
        } else {
            ProtectedKind::Policy
        };
        protect_named(&mut out, src, kind);
    }
    // Every provider's value file: the credential the guest must never
    // see, hidden from reads even before it exists (security round 3,
    // item 2).
    for file in config.secret_files() {
        protect_named(&mut out, file, ProtectedKind::State);
    }
    // Where a later invocation would look for its configuration.
    for p in &config.places.config {
        protect(&mut out, p, ProtectedKind::Policy);
    }
    protect(&mut out, &state.state_dir, ProtectedKind::State);
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = state.grants_db.clone().into_os_string();
        p.push(suffix);
        protect(&mut out, Path::new(&p), ProtectedKind::State);
    }
    // The pending-approval queue: an executor that could write it could
    // approve its own turn.
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = state.approvals_db.clone().into_os_string();
        p.push(suffix);
        protect(&mut out, Path::new(&p), ProtectedKind::State);
    }
    protect(&mut out, &state.history_dir, ProtectedKind::State);
    protect(&mut out, &state.cache_dir, ProtectedKind::State);
    // Where a later invocation would find its state.
    for p in &config.places.state {
        protect(&mut out, p, ProtectedKind::State);
    }
    for d in &config.executor_dirs {
        protect(&mut out, d, ProtectedKind::Definition);
    }
    for m in manifests {
        protect(&mut out, &m.path, ProtectedKind::Definition);
        if !m.component.as_os_str().is_empty() {
            // The name itself too, in case it is a link: replacing the
            // link would substitute the code as surely as the file.
            protect_named(&mut out, &m.component, ProtectedKind::Definition);
        }
    }
    out
}

/// Builds the snapshot of a turn from its sources.
pub fn build(sources: Sources<'_>) -> Result<Snapshot, SnapshotError> {
    let actors = sources.config.policy_actors(sources.turn_workspace)?;
    let mut executors = std::collections::BTreeMap::new();
    for m in sources.manifests {
        executors.insert(
            m.name.clone(),
            m.to_definition(Path::new(sources.turn_workspace), sources.home)?,
        );
    }
    let mut grants = sources.grants;
    grants.sort_by_key(|g| g.id);
    Ok(Snapshot {
        level: sources.level.unwrap_or(sources.config.level),
        actors,
        executors,
        grants,
        roots: Roots {
            turn_workspace: Some(sources.turn_workspace.to_string()),
            protected: protected_paths(sources.config, sources.state, sources.manifests),
            secret_env: sources.config.secret_env(),
        },
    })
}

/// Writes the frozen snapshot to `out` (through a temporary file and a
/// rename, so a reader never sees half a file).
pub fn prepare(snapshot: Snapshot, out: &Path) -> Result<FrozenSnapshot, SnapshotError> {
    let frozen = snapshot.freeze();
    let tmp = out.with_extension("json.tmp");
    let io = |action, e: std::io::Error| SnapshotError::Io {
        action,
        path: out.to_path_buf(),
        source: IoCause(e),
    };
    std::fs::write(&tmp, frozen.to_bytes()).map_err(|e| io("write", e))?;
    std::fs::rename(&tmp, out).map_err(|e| io("write", e))?;
    Ok(frozen)
}

/// Checks the file at `path` against the snapshot rebuilt from the sources:
/// the bytes must be identical. The error says which hash moved.
pub fn verify(path: &Path, recomputed: Snapshot) -> Result<FrozenSnapshot, SnapshotError> {
    let bytes = std::fs::read(path).map_err(|e| SnapshotError::Io {
        action: "read",
        path: path.to_path_buf(),
        source: IoCause(e),
    })?;
    let expected = recomputed.freeze();
    if bytes == expected.to_bytes() {
        return Ok(expected);
    }
    let mismatch = |reason: String| SnapshotError::Mismatch {
        path: path.to_path_buf(),
        reason,
    };
    let Ok(found) = serde_json::from_slice::<FrozenSnapshot>(&bytes) else {
        return Err(mismatch("the file is not a policy snapshot".into()));
    };
    let reason = if found.definition_hash != expected.definition_hash {
        format!(
            "definitionHash `{}` differs from the sources' `{}`",
            found.definition_hash, expected.definition_hash
        )
    } else if found.policy_hash != expected.policy_hash {
        format!(
            "policyHash `{}` differs from the sources' `{}`",
            found.policy_hash, expected.policy_hash
        )
    } else if found.policy.definition_hash() != found.definition_hash
        || found.policy.policy_hash() != found.policy_hash
    {
        "the frozen policy no longer matches its own hashes (edited by hand)".to_string()
    } else {
        "the file's bytes differ from the canonical form (edited by hand)".to_string()
    };
    Err(mismatch(reason))
}
