//! The `Plan`: the only input a sandbox can be built from.
//!
//! A plan lists what a turn was *allowed*: nothing else. Its fields are
//! private and its constructor is `pub(crate)`, called in one place, the
//! gate in `crate::host::gate`, after `policy::decide` allowed every need of the
//! turn. Code outside the crate can read a plan but never make one, so a
//! sandbox cannot be built around the policy.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::limits::Limits;
use crate::policy::snapshot::{ProtectedPath, WorkspaceMode, WorkspaceRoot};
use crate::policy::{Capability, HostPattern, PathGlob};
use crate::undo::fs::FsScope;

/// How a preopened directory may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirAccess {
    ReadOnly,
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
    pub access: DirAccess,
    /// The directory itself, opened when the plan was made: the guest's
    /// preopen and a command's root are this descriptor, not whatever the
    /// path names later.
    #[serde(skip)]
    pub dir: super::PinnedDir,
}

/// The memory namespace a turn may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryGrant {
    pub scope: String,
    pub read: bool,
    pub write: bool,
}

/// One capability the turn was allowed, with its resolved target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Allowed {
    pub capability: Capability,
    pub target: Option<String>,
}

/// What one turn may do, and nothing more.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    turn_id: String,
    executor: String,
    component: PathBuf,
    command: Vec<String>,
    sha256: Option<String>,
    allowed: Vec<Allowed>,
    preopens: Vec<Preopen>,
    env_names: Vec<String>,
    real_clocks: bool,
    hosts: Vec<HostPattern>,
    memory: Option<MemoryGrant>,
    human: bool,
    delegates: Vec<String>,
    exec_tools: Vec<String>,
    limits: Limits,
    workspace: PathBuf,
    write_globs: Vec<PathGlob>,
    read_globs: Vec<PathGlob>,
    protected: Vec<ProtectedPath>,
    nested_roots: Vec<WorkspaceRoot>,
}

/// The parts of a plan, as the gate assembles them.
pub(crate) struct PlanParts {
    pub turn_id: String,
    pub executor: String,
    pub component: PathBuf,
    /// A command executor's argv (empty for a component).
    pub command: Vec<String>,
    pub sha256: Option<String>,
    pub allowed: Vec<Allowed>,
    pub preopens: Vec<Preopen>,
    pub env_names: Vec<String>,
    pub hosts: Vec<HostPattern>,
    pub memory: Option<MemoryGrant>,
    pub delegates: Vec<String>,
    /// Program names `code:exec` was allowed on that the manifest's
    /// `tools` lists too.
    pub exec_tools: Vec<String>,
    pub limits: Limits,
    pub workspace: PathBuf,
    /// `fs:write` globs, rebased on the canonical preopened directory.
    pub write_globs: Vec<PathGlob>,
    /// `fs:read` globs, likewise.
    pub read_globs: Vec<PathGlob>,
    /// The snapshot's protected paths (`roots.protected`).
    pub protected: Vec<ProtectedPath>,
    /// The actor's workspace roots that lie strictly inside a read-write
    /// preopen (canonical).
    pub nested_roots: Vec<WorkspaceRoot>,
}

impl Plan {
    /// Only the gate (`crate::host::gate`) calls this, with parts it derived from
    /// `Allow` decisions.
    pub(crate) fn from_allowed(parts: PlanParts) -> Plan {
        let has = |c: Capability| parts.allowed.iter().any(|a| a.capability == c);
        Plan {
            real_clocks: has(Capability::TimeRead),
            human: has(Capability::HumanAsk),
            turn_id: parts.turn_id,
            executor: parts.executor,
            component: parts.component,
            command: parts.command,
            sha256: parts.sha256,
            allowed: parts.allowed,
            preopens: parts.preopens,
            env_names: parts.env_names,
            hosts: parts.hosts,
            memory: parts.memory,
            delegates: parts.delegates,
            exec_tools: parts.exec_tools,
            limits: parts.limits,
            workspace: parts.workspace,
            write_globs: parts.write_globs,
            read_globs: parts.read_globs,
            protected: parts.protected,
            nested_roots: parts.nested_roots,
        }
    }

    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }
    pub fn executor(&self) -> &str {
        &self.executor
    }
    pub fn component(&self) -> &Path {
        &self.component
    }
    /// A command executor's argv: the run is that command in the OS
    /// sandbox of `code:exec`, not a component. Empty for a component.
    pub fn command(&self) -> &[String] {
        &self.command
    }
    pub fn sha256(&self) -> Option<&str> {
        self.sha256.as_deref()
    }
    pub fn allowed(&self) -> &[Allowed] {
        &self.allowed
    }
    pub fn grants(&self, capability: Capability) -> bool {
        self.allowed.iter().any(|a| a.capability == capability)
    }
    pub fn preopens(&self) -> &[Preopen] {
        &self.preopens
    }
    pub fn env_names(&self) -> &[String] {
        &self.env_names
    }
    pub fn real_clocks(&self) -> bool {
        self.real_clocks
    }
    pub fn hosts(&self) -> &[HostPattern] {
        &self.hosts
    }
    pub fn memory(&self) -> Option<&MemoryGrant> {
        self.memory.as_ref()
    }
    pub fn human(&self) -> bool {
        self.human
    }
    pub fn delegates(&self) -> &[String] {
        &self.delegates
    }
    /// The program names a command may run (`code:exec`); empty, and the
    /// `exec` interface not linked, without the grant.
    pub fn exec_tools(&self) -> &[String] {
        &self.exec_tools
    }
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }
    /// The `fs:write` globs (canonical): the filesystem layer refuses any
    /// mutation of a path none of them matches.
    pub fn write_globs(&self) -> &[PathGlob] {
        &self.write_globs
    }
    /// The `fs:read` globs (canonical): a file's content may be read when
    /// one of these or of the write globs matches it.
    pub fn read_globs(&self) -> &[PathGlob] {
        &self.read_globs
    }
    /// Paths no executor may write, even inside a read-write preopen.
    pub fn protected(&self) -> &[ProtectedPath] {
        &self.protected
    }

    /// What a run of this plan can write, as undo records it: the
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

    /// The read-write preopened directories (canonical): where a run of
    /// this plan may write, which the host serializes turns on.
    pub fn write_roots(&self) -> Vec<PathBuf> {
        self.preopens
            .iter()
            .filter(|p| p.access == DirAccess::ReadWrite)
            .map(|p| p.host.clone())
            .collect()
    }

    /// The actor's workspace roots strictly inside a read-write preopen:
    /// the gate asked the workspace rule about the preopened directory
    /// only, so the filesystem layer holds every path below it to the
    /// most specific of these (a read-only one refuses the write with
    /// `WORKSPACE_READ_ONLY`), and a command may not run with a write
    /// root that holds a read-only one.
    pub fn nested_roots(&self) -> &[WorkspaceRoot] {
        &self.nested_roots
    }
    /// The nested roots that are read-only.
    pub fn read_only_roots(&self) -> impl Iterator<Item = &str> {
        self.nested_roots
            .iter()
            .filter(|r| r.mode == WorkspaceMode::ReadOnly)
            .map(|r| r.path.as_str())
    }
}
