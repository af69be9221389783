//! The `Plan`: the only input a sandbox can be built from.
//!
//! A plan lists what a turn was *allowed*: nothing else. Its fields are
//! private and its constructor is `pub(crate)`, called in one place, the
//! gate in `crate::host::gate`, after `policy::decide` allowed every need of the
//! turn. Code outside the crate can read a plan but never make one, so a
//! sandbox cannot be built around the policy.
//!
//! What each capability was allowed is its unit's part ([`Parts`], one
//! field per unit of [`super::bindings`]), which the host's need function
//! for the capability built.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::bindings::Parts;
use super::limits::Limits;
use crate::policy::snapshot::{ProtectedPath, WorkspaceRoot};
use crate::policy::{Capability, PathGlob};
use crate::undo::fs::FsScope;

pub use super::bindings::fs::{DirAccess, Preopen};

/// One capability the turn was allowed, with its resolved target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Allowed {
    /// The capability.
    pub capability: Capability,
    /// Its target, resolved; `None` for a capability that takes none.
    pub target: Option<String>,
}

/// What a turn runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Runnable {
    /// A WebAssembly component (an executor, or a `wasi:cli` command).
    Component {
        /// The component file.
        path: PathBuf,
        /// The digest its manifest pins, if any.
        sha256: Option<String>,
    },
    /// A host command (argv, non-empty), run in the OS sandbox of
    /// `code:exec`.
    Command {
        /// The program and its arguments.
        argv: Vec<String>,
    },
}

impl Runnable {
    /// The runnable of a manifest: its command when it names one, else
    /// its component.
    pub fn of(component: &Path, command: &[String], sha256: Option<&str>) -> Runnable {
        if command.is_empty() {
            Runnable::Component {
                path: component.to_path_buf(),
                sha256: sha256.map(str::to_string),
            }
        } else {
            Runnable::Command {
                argv: command.to_vec(),
            }
        }
    }

    /// Whether it is a host command rather than a component.
    pub fn is_command(&self) -> bool {
        matches!(self, Runnable::Command { .. })
    }
}

/// What one turn may do, and nothing more.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    turn_id: String,
    executor: String,
    runnable: Runnable,
    allowed: Vec<Allowed>,
    limits: Limits,
    workspace: PathBuf,
    parts: Parts,
}

impl Plan {
    /// Only the gate (`crate::host::gate`) calls this, with parts its need
    /// functions derived from `Allow` decisions.
    pub(crate) fn from_allowed(
        turn_id: String,
        executor: String,
        runnable: Runnable,
        allowed: Vec<Allowed>,
        limits: Limits,
        workspace: PathBuf,
        parts: Parts,
    ) -> Plan {
        Plan {
            turn_id,
            executor,
            runnable,
            allowed,
            limits,
            workspace,
            parts,
        }
    }

    /// The turn's id.
    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }
    /// The executor's name.
    pub fn executor(&self) -> &str {
        &self.executor
    }
    /// What runs: a component or a host command.
    pub fn runnable(&self) -> &Runnable {
        &self.runnable
    }
    /// Every capability the gate allowed, with its target.
    pub fn allowed(&self) -> &[Allowed] {
        &self.allowed
    }
    /// Whether the gate allowed `capability` on any target.
    pub fn grants(&self, capability: Capability) -> bool {
        self.allowed.iter().any(|a| a.capability == capability)
    }
    /// What each unit was allowed.
    pub fn parts(&self) -> &Parts {
        &self.parts
    }
    /// The sandbox's limits for the run.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
    /// The turn's workspace, canonical.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }
    /// The directories the guest sees.
    pub fn preopens(&self) -> &[Preopen] {
        &self.parts.fs.preopens
    }
    /// The `fs:write` globs (canonical): the filesystem layer refuses any
    /// mutation of a path none of them matches.
    pub fn write_globs(&self) -> &[PathGlob] {
        &self.parts.fs.write_globs
    }
    /// The `fs:read` globs (canonical).
    pub fn read_globs(&self) -> &[PathGlob] {
        &self.parts.fs.read_globs
    }
    /// Paths no executor may write, even inside a read-write preopen.
    pub fn protected(&self) -> &[ProtectedPath] {
        &self.parts.fs.protected
    }
    /// The actor's workspace roots strictly inside a read-write preopen
    /// (see [`super::bindings::fs::FsPart::nested_roots`]).
    pub fn nested_roots(&self) -> &[WorkspaceRoot] {
        &self.parts.fs.nested_roots
    }
    /// What a run of this plan can write, as undo records it.
    pub fn fs_scope(&self) -> FsScope {
        self.parts.fs.fs_scope()
    }
    /// The read-write preopened directories (canonical): where a run of
    /// this plan may write, which the host serializes turns on.
    pub fn write_roots(&self) -> Vec<PathBuf> {
        self.parts.fs.write_roots()
    }
}
