//! The one way a command opens a host: `run`, `serve`, `policy decide`,
//! `snapshot`, `test`, `tier3` and the demo each resolve their flags into
//! a [`HostFlags`] and call [`open`].

use std::path::PathBuf;

use gatehouse::config::{HostConfig, StatePaths};
use gatehouse::host::{EngineKind, Host, HostError, HostOptions};
use gatehouse::manifest::Manifest;
use gatehouse::policy::{Level, OnDegraded};

use super::{Context, Failure};

/// A command's host, its flags resolved. The fields past `manifests` are
/// the library's defaults ([`HostOptions::new`]) unless a command sets
/// them.
#[derive(Clone)]
pub(super) struct HostFlags {
    pub config: HostConfig,
    pub state: StatePaths,
    /// Canonical: resolved by [`Context::workspace`] or the demo.
    pub workspace: String,
    pub manifests: Vec<Manifest>,
    /// Where `~` in targets points.
    pub home: Option<PathBuf>,
    /// `--level`.
    pub level: Option<Level>,
    /// `--on-degraded`.
    pub on_degraded: Option<OnDegraded>,
    /// `--memory-mib`, in bytes: sizes the engine.
    pub max_memory_bytes: Option<usize>,
    pub engine: EngineKind,
    /// Who a remembered grant names as its approver.
    pub granted_by: Option<String>,
    /// Approvals no one can give now wait in the queue for `gatehouse
    /// approvals allow`; an answer given there is taken by the turn it
    /// matches.
    pub approval_queue: bool,
}

impl HostFlags {
    /// A host on `config`, `state`, `workspace` and `manifests`, with
    /// nothing else set.
    pub fn new(
        config: HostConfig,
        state: StatePaths,
        workspace: String,
        manifests: Vec<Manifest>,
    ) -> HostFlags {
        HostFlags {
            config,
            state,
            workspace,
            manifests,
            home: None,
            level: None,
            on_degraded: None,
            max_memory_bytes: None,
            engine: EngineKind::LongLived,
            granted_by: None,
            approval_queue: false,
        }
    }

    /// A host on `config` with the state and home of the command's
    /// context.
    pub fn of(
        ctx: &Context,
        config: HostConfig,
        workspace: String,
        manifests: Vec<Manifest>,
    ) -> HostFlags {
        HostFlags {
            home: ctx.env.home.clone(),
            ..HostFlags::new(config, ctx.state.clone(), workspace, manifests)
        }
    }
}

/// Opens the host of `flags`; a failure as the command line reports it
/// ([`failure`]).
pub(super) fn open(flags: HostFlags) -> Result<Host, Failure> {
    let HostFlags {
        config,
        state,
        workspace,
        manifests,
        home,
        level,
        on_degraded,
        max_memory_bytes,
        engine,
        granted_by,
        approval_queue,
    } = flags;
    let mut options = HostOptions::new(config, state, workspace, manifests);
    options.home = home;
    options.level = level;
    options.on_degraded = on_degraded;
    if let Some(bytes) = max_memory_bytes {
        options.max_memory_bytes = bytes;
    }
    options.engine = engine;
    options.granted_by = granted_by;
    options.approval_queue = approval_queue;
    Host::open(options).map_err(failure)
}

/// A host error as the command line reports it.
pub(super) fn failure(e: HostError) -> Failure {
    match e {
        HostError::Snapshot(e) => Failure::from(e),
        HostError::Grants(e) => Failure::from(e),
        e @ HostError::LevelAboveMax { .. } => Failure::invalid(e.to_string()),
        e => Failure::error(gatehouse::util::chain(&e)),
    }
}
