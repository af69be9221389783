//! The one way a command opens a host: `run`, `serve`, `policy decide`,
//! `snapshot`, `test`, `tier3` and the demo each resolve their flags into
//! a [`HostFlags`] and call [`open`]; and what those commands share before
//! and after it: their level, their executors, the tier-3 suite's hosts.

use std::path::PathBuf;

use gatehouse::config::{HostConfig, StatePaths};
use gatehouse::host::{EngineKind, Host, HostError, HostOptions};
use gatehouse::manifest::Manifest;
use gatehouse::policy::{Level, OnDegraded};
use gatehouse::state::grants::now_utc;
use gatehouse::tier3;

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

pub(super) fn parse_level(s: &str) -> Result<Level, Failure> {
    s.parse()
        .map_err(|e: gatehouse::policy::matrix::UnknownLevel| Failure::invalid(e.to_string()))
}

/// Every manifest in the configured executor directories, plus `extra`.
pub(super) fn gather_manifests(
    dirs: &[PathBuf],
    extra: &[PathBuf],
) -> Result<Vec<Manifest>, Failure> {
    let loaded = extra
        .iter()
        .map(|p| Manifest::load(p))
        .collect::<Result<Vec<_>, _>>()?;
    merge_manifests(gatehouse::manifest::discover(dirs)?, loaded)
}

/// `found` plus `extra` (manifests already loaded, such as the one a bare
/// `.wasm` stands for, which has no file): a name defined by two files is
/// an error.
pub(super) fn merge_manifests(
    mut manifests: Vec<Manifest>,
    extra: Vec<Manifest>,
) -> Result<Vec<Manifest>, Failure> {
    for m in extra {
        if let Some(other) = manifests
            .iter()
            .find(|o| o.name == m.name && o.path != m.path)
        {
            return Err(Failure::invalid(format!(
                "executor `{}` is defined twice: `{}` and `{}`",
                m.name,
                other.path.display(),
                m.path.display()
            )));
        }
        if !manifests.iter().any(|o| o.path == m.path) {
            manifests.push(m);
        }
    }
    manifests.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(manifests)
}

/// Runs the tier-3 suite on the fixture configuration derived from the
/// configuration of `on` (see [`tier3::fixture`]), on its state, turn
/// workspace, executors, home and level.
///
/// The second path of every case is the host's own decision entry point,
/// [`Host::decide_json`], on a host opened on the fixture configuration
/// (its own frozen snapshot, read at its own clock), beside the pure
/// `policy::decide_json` the suite asks on a clone of that snapshot at the
/// time given here. The turn gate (`Host::begin`) is not used: it asks
/// only the skill, capability, workspace, memory and tool kinds, never
/// the gate's unknown request or actor, delegation, subagent, mcp or
/// configuration kinds, and it would write a denial line for each case.
/// The `capability.denied` case is asked of a second host opened at
/// `ReadOnly`.
pub(super) fn run_tier3(
    on: HostFlags,
    only: Option<&str>,
) -> Result<Vec<tier3::CaseResult>, Failure> {
    let (config, fixtures) = tier3::fixture(&on.config, &on.workspace);
    let open = |level: Option<Level>| {
        open(HostFlags {
            config: config.clone(),
            level,
            engine: gatehouse::host::EngineKind::OneShot,
            ..on.clone()
        })
    };
    let host = open(on.level)?;
    let read_only = open(Some(Level::ReadOnly))?;
    let second = |request: &serde_json::Value, level: Option<Level>| match level {
        Some(Level::ReadOnly) => read_only.decide_json(request),
        Some(_) | None => host.decide_json(request),
    };
    Ok(tier3::run(
        &host.snapshot(),
        &fixtures,
        only,
        now_utc(),
        &second,
    ))
}
