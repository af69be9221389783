//! One function per subcommand.

use std::path::{Path, PathBuf};

use serde_json::json;

use gatehouse::authoring::coverage::Coverage;
use gatehouse::authoring::inspect::Inspection;
use gatehouse::config::resolve_glob;
use gatehouse::host::Host;
use gatehouse::manifest::{Manifest, ManifestError};
use gatehouse::policy::{
    check_target, matrix, Capability, DenyCode, Identity, Level, Outcome, Snapshot, UtcTime,
    REGISTRY,
};
use gatehouse::snapshot::{self, SnapshotError};
use gatehouse::state::grants::{effective, now_utc, parse_duration, GrantError, NewGrant};
use gatehouse::state::Stores;
use gatehouse::tier3;

use super::args::{
    AgentCmd, CheckArgs, Command, GrantAddArgs, GrantRevokeArgs, GrantsCmd, ManifestCmd, PolicyCmd,
    SnapshotCmd, SnapshotSources, TestCommon,
};
use super::host::{gather_manifests, parse_level, run_tier3, HostFlags};
use super::{out, out_json, CmdResult, Context, Exit, Failure};

pub fn run(ctx: &Context, command: Command) -> CmdResult {
    match command {
        Command::Policy(PolicyCmd::Registry) => registry(),
        Command::Policy(PolicyCmd::Table) => table(),
        Command::Policy(PolicyCmd::Check(args)) => check(ctx, args),
        Command::Policy(PolicyCmd::Codes) => codes(),
        Command::Policy(PolicyCmd::Decide(args)) => policy_decide(
            ctx,
            &args.request,
            args.workspace.as_deref(),
            args.level.as_deref(),
        ),
        Command::Grants(cmd) => grants(ctx, cmd),
        Command::Manifest(ManifestCmd::Check { path, workspace }) => {
            manifest_check(ctx, &path, workspace.as_deref())
        }
        Command::Manifest(ManifestCmd::Schema) => super::authoring::manifest_schema(),
        Command::Inspect { component } => super::authoring::inspect(ctx, &component),
        Command::Wit(args) => super::authoring::wit_cmd(ctx, args),
        Command::New(args) => super::authoring::new(ctx, args),
        Command::Snapshot(cmd) => snapshot_cmd(ctx, cmd),
        Command::Test(args) => test(ctx, args.tier, args.actor, args.common),
        Command::Agent(AgentCmd::Test {
            actor,
            tier,
            common,
        }) => test(ctx, tier, Some(actor), common),
        Command::Run(args) => super::run::run(ctx, args),
        Command::Isolation => super::isolation::run(ctx),
        Command::Migrate => migrate(ctx),
        Command::Conformance(args) => super::conformance::run(ctx, args),
        Command::History(args) => super::history::history(ctx, args),
        Command::Undo(args) => super::history::undo(ctx, args),
        Command::Demo => super::demo::run(ctx),
        Command::Approvals(args) => super::approvals::run(ctx, args),
        Command::Serve(args) => super::serve::run(ctx, args),
        Command::Daemon(args) => super::daemon::daemon(ctx, args),
        Command::Connect(args) => super::daemon::connect(args),
    }
}

fn parse_capability(s: &str) -> Result<Capability, Failure> {
    s.parse()
        .map_err(|e: gatehouse::policy::registry::UnknownCapability| {
            Failure::invalid(e.to_string())
        })
}

impl From<GrantError> for Failure {
    fn from(e: GrantError) -> Failure {
        Failure::of(&e, e.is_invalid_input())
    }
}

impl From<ManifestError> for Failure {
    fn from(e: ManifestError) -> Failure {
        let exit = if e.deny_code().is_some() {
            Exit::Denied
        } else if e.is_invalid_input() {
            Exit::Invalid
        } else {
            Exit::Error
        };
        Failure {
            exit,
            message: gatehouse::util::chain(&e),
        }
    }
}

impl From<SnapshotError> for Failure {
    fn from(e: SnapshotError) -> Failure {
        match e {
            SnapshotError::Config(c) => c.into(),
            SnapshotError::Manifest(m) => m.into(),
            SnapshotError::Io { .. } => Failure::error(e.to_string()),
            SnapshotError::Mismatch { .. } => Failure::denied(e.to_string()),
        }
    }
}

fn registry() -> CmdResult {
    for s in REGISTRY {
        out_json(&json!({
            "name": s.name,
            "critical": s.critical,
            "default_approval": s.default_approval.as_str(),
            "target_kind": s.target_kind.as_str(),
            "bound_to": s.bound_to,
        }));
    }
    Ok(Exit::Ok)
}

fn table() -> CmdResult {
    for level in Level::ALL {
        for cap in Capability::ALL {
            out_json(
                &json!({"level": level.as_str(), "capability": cap.as_str(), "outcome": matrix(level, cap).as_str()}),
            );
        }
    }
    Ok(Exit::Ok)
}

fn codes() -> CmdResult {
    for code in DenyCode::ALL {
        out_json(
            &json!({"code": code.as_str(), "family": code.family().as_str(), "meaning": code.meaning()}),
        );
    }
    Ok(Exit::Ok)
}

fn outcome_exit(outcome: Outcome) -> Exit {
    match outcome {
        Outcome::Allowed => Exit::Ok,
        Outcome::Denied => Exit::Denied,
        Outcome::ApprovalRequired => Exit::Approval,
    }
}

fn check(ctx: &Context, args: CheckArgs) -> CmdResult {
    let level = parse_level(&args.level)?;
    let cap = parse_capability(&args.capability)?;
    if args.target.is_some() || !matches!(cap.target_kind(), gatehouse::policy::TargetKind::None) {
        if let Some(t) = &args.target {
            check_target(cap, Some(t)).map_err(Failure::invalid)?;
        }
    }
    let identity = match (&args.channel, &args.sender) {
        (Some(c), Some(s)) => Some(Identity::new(c.clone(), s.clone())),
        _ => None,
    };
    let cell = matrix(level, cap);
    let mut grant_id = None;
    let mut outcome = cell;
    // A path is matched where it really is (its literal directory
    // resolved), as a turn's gate matches it.
    let canonical = match (cap.target_kind(), &args.target) {
        (gatehouse::policy::TargetKind::PathGlob, Some(t)) => gatehouse::policy::PathGlob::parse(t)
            .ok()
            .and_then(|g| resolve_glob(&g).canonical),
        _ => None,
    };
    if let (Some(identity), Some(target)) = (&identity, canonical.as_ref().or(args.target.as_ref()))
    {
        let grants = Stores::new(&ctx.state)?.grants;
        let e = effective(&*grants, level, cap, Some(target), identity, now_utc())?;
        outcome = e.outcome;
        grant_id = e.grant_id;
    }
    if ctx.json {
        out_json(&json!({
            "level": level.as_str(),
            "capability": cap.as_str(),
            "target": args.target,
            "canonical_target": canonical,
            "identity": identity,
            "matrix": cell.as_str(),
            "outcome": outcome.as_str(),
            "grant_id": grant_id,
        }));
    } else {
        out(outcome.as_str());
    }
    Ok(outcome_exit(outcome))
}

/// A host on the configuration, the workspace and level of `sources`, and
/// the executors of the configured directories plus `sources.executors`:
/// what `policy decide`, `snapshot` and `test` ask their questions of.
/// Opening it writes nothing.
pub(super) fn open_host(ctx: &Context, sources: &SnapshotSources) -> Result<Host, Failure> {
    let config = ctx.config()?;
    let level = sources.level.as_deref().map(parse_level).transpose()?;
    let workspace = ctx.workspace(sources.workspace.as_deref())?;
    let manifests = gather_manifests(&config.executor_dirs, &sources.executors)?;
    super::host::open(HostFlags {
        level,
        ..HostFlags::of(ctx, config, workspace, manifests)
    })
}

pub(super) fn build_snapshot(
    ctx: &Context,
    sources: &SnapshotSources,
) -> Result<Snapshot, Failure> {
    Ok(open_host(ctx, sources)?.snapshot())
}

fn policy_decide(
    ctx: &Context,
    request: &str,
    workspace: Option<&Path>,
    level: Option<&str>,
) -> CmdResult {
    let mut value: serde_json::Value = serde_json::from_str(request)
        .map_err(|e| Failure::invalid(format!("the request is not json: {e}")))?;
    // `{"raw": PATH}` is canonicalized here (I/O), relative to the
    // workspace; `decide` only ever sees a resolved path.
    let base = PathBuf::from(ctx.workspace(workspace)?);
    gatehouse::config::resolve_raw_path(&mut value, &base, ctx.env.home.as_deref());
    let host = open_host(
        ctx,
        &SnapshotSources {
            workspace: workspace.map(Path::to_path_buf),
            level: level.map(str::to_string),
            executors: vec![],
        },
    )?;
    let decision = host.decide_json(&value);
    if ctx.json {
        out_json(&decision);
    } else {
        match decision.code() {
            Some(code) => out(format!("denied {code}: {}", decision.reason())),
            None => out(format!("{}: {}", decision.outcome(), decision.reason())),
        }
    }
    Ok(outcome_exit(decision.outcome()))
}

fn grants(ctx: &Context, cmd: GrantsCmd) -> CmdResult {
    match cmd {
        GrantsCmd::Add(args) => grant_add(ctx, args),
        GrantsCmd::List { all } => {
            for g in Stores::new(&ctx.state)?.grants.list(all, now_utc())? {
                out_json(&g);
            }
            Ok(Exit::Ok)
        }
        GrantsCmd::Revoke(args) => grant_revoke(ctx, args),
    }
}

fn grant_revoke(ctx: &Context, args: GrantRevokeArgs) -> CmdResult {
    let book = Stores::new(&ctx.state)?.grants;
    let g = match (args.channel, args.sender, args.what.as_slice()) {
        (None, None, [id]) => {
            let id: i64 = id
                .parse()
                .map_err(|_| Failure::invalid(format!("grant id `{id}` is not a number")))?;
            book.revoke(id, now_utc())?.ok_or_else(|| {
                Failure::invalid(format!(
                    "no grant with id `{id}`: the grants database is empty"
                ))
            })?
        }
        (Some(channel), Some(sender), [capability, target]) => {
            let target = canonical_target(capability, target);
            book.revoke_tuple(
                &Identity::new(channel, sender),
                capability,
                &target,
                now_utc(),
            )?
            .ok_or_else(|| {
                Failure::invalid(format!(
                    "no grant in force of `{capability}` on `{target}` for that identity"
                ))
            })?
        }
        _ => {
            return Err(Failure::invalid(
                "give a grant id, or --channel, --sender, a capability and a target".to_string(),
            ))
        }
    };
    out_json(&g);
    Ok(Exit::Ok)
}

/// A target as grants are recorded and matched: a path glob where the
/// path really is (its literal directory resolved; kept as given when it
/// does not resolve), anything else as given.
fn canonical_target(capability: &str, target: &str) -> String {
    match Capability::from_name(capability).map(|c| c.target_kind()) {
        Some(gatehouse::policy::TargetKind::PathGlob) => gatehouse::policy::PathGlob::parse(target)
            .ok()
            .and_then(|g| resolve_glob(&g).canonical)
            .unwrap_or_else(|| target.to_string()),
        _ => target.to_string(),
    }
}

fn grant_add(ctx: &Context, args: GrantAddArgs) -> CmdResult {
    let now = now_utc();
    let expires_at = match (&args.expires_in, &args.expires_at) {
        (Some(d), _) => Some(now.plus_seconds(parse_duration(d)?)),
        (None, Some(t)) => Some(UtcTime::parse(t).map_err(|e| Failure::invalid(e.to_string()))?),
        (None, None) => None,
    };
    // A path grant is recorded where the path really is (its literal
    // directory resolved), as "allow and remember" records it and as the
    // gate matches it; a directory that does not resolve is kept as given.
    let target = canonical_target(&args.capability, &args.target);
    let new = NewGrant {
        identity: Identity::new(args.channel, args.sender),
        capability: args.capability,
        target,
        expires_at,
        granted_by: args.granted_by.or_else(|| ctx.env.login.clone()),
    };
    // Validated before any file is created: a refused grant leaves no state.
    let g = Stores::new(&ctx.state)?.grants.record(&new, now)?;
    out_json(&g);
    Ok(Exit::Ok)
}

/// Where the configured actors may write: each actor's read-write
/// workspaces, or the turn's workspace for an actor without any.
fn write_roots(ctx: &Context, workspace: Option<&Path>) -> Result<Vec<(String, String)>, Failure> {
    let config = ctx.config()?;
    let mut roots = Vec::new();
    for (name, actor) in &config.actors {
        match &actor.workspaces {
            None => roots.push((name.clone(), ctx.workspace(workspace)?)),
            Some(list) => {
                for (p, mode) in list {
                    if *mode == gatehouse::policy::WorkspaceMode::ReadWrite {
                        let real = gatehouse::config::resolve_ancestor(Path::new(p));
                        roots.push((name.clone(), real.display().to_string()));
                    }
                }
            }
        }
    }
    Ok(roots)
}

/// The warnings of `manifest check`: an unpinned component inside a
/// write root can be replaced by an executor allowed to write there
/// (issue 12, item 17).
fn component_warnings(
    ctx: &Context,
    m: &Manifest,
    workspace: Option<&Path>,
) -> Result<Vec<String>, Failure> {
    if m.command.is_empty() && m.sha256.is_none() {
        let component = gatehouse::config::resolve_ancestor(&m.component)
            .display()
            .to_string();
        let roots = write_roots(ctx, workspace)?;
        if let Some((actor, root)) = roots
            .iter()
            .find(|(_, root)| gatehouse::policy::is_within(&component, root))
        {
            return Ok(vec![format!(
                "component `{component}` is not pinned (no `sha256`) and lies in `{root}`, a write root of actor `{actor}`: an executor allowed to write there could replace it; pin it or keep it outside every write root"
            )]);
        }
    }
    Ok(Vec::new())
}

fn manifest_check(ctx: &Context, path: &Path, workspace: Option<&Path>) -> CmdResult {
    let m = Manifest::load(path)?;
    let mut warnings = component_warnings(ctx, &m, workspace)?;
    let is_command = !m.command.is_empty();
    // A missing component is invalid input (exit 3), as a bad pin is a
    // denial (exit 2), before anything is inspected.
    let (component, checked) = if is_command {
        (serde_json::Value::Null, None)
    } else {
        let digest = m.verify_component()?;
        let (inspection, coverage) = super::authoring::component_check(&m)?;
        warnings.extend(coverage.unusable.iter().cloned());
        (
            json!({"path": m.component, "sha256": digest, "pinned": m.sha256.is_some()}),
            Some((inspection, coverage)),
        )
    };
    let uncovered: Vec<&str> = checked
        .iter()
        .flat_map(|(_, c)| c.uncovered().filter_map(|x| x.problem.as_deref()))
        .collect();
    let caps: Vec<_> = m
        .capabilities
        .iter()
        .map(|c| json!({"name": c.capability.as_str(), "target": c.target}))
        .collect();
    // `env:read` of a host secret: every run would be refused at the gate.
    let secrets = secret_env_refusals(ctx, &m)?;
    if ctx.json {
        out_json(&json!({
            "manifest": m.path,
            "name": m.name,
            "valid": true,
            "component": component,
            "command": if is_command { json!(m.command) } else { serde_json::Value::Null },
            "tools": m.tools,
            "capabilities": caps,
            "revertible": m.revertible,
            "reverse_pattern": m.reverse_pattern,
            "input_schema": m.input_schema,
            "imports": checked.as_ref().map(|(_, c)| &c.imports),
            "explained": checked.as_ref().map(|(_, c)| &c.capabilities),
            "uncovered": uncovered,
            "secret_env": secrets,
            "warnings": warnings,
        }));
    } else {
        print_manifest_check(&m, checked.as_ref(), &warnings);
    }
    if let Some(first) = secrets.first() {
        return Err(Failure::denied(format!(
            "SECRET_ENV_DENIED: {first}: a run of `{}` would be refused",
            m.name
        )));
    }
    if uncovered.is_empty() {
        Ok(Exit::Ok)
    } else {
        Err(Failure::denied(format!(
            "IMPORT_NOT_GRANTED: no declared capability covers {} of the component's imports: a run of `{}` would be refused",
            uncovered.len(),
            m.name
        )))
    }
}

/// Why each of `m`'s `env:read` of a host secret would be refused.
fn secret_env_refusals(ctx: &Context, m: &Manifest) -> Result<Vec<String>, Failure> {
    let secret_env = ctx.config()?.secret_env();
    Ok(m.capabilities
        .iter()
        .filter(|c| c.capability == Capability::EnvRead)
        .filter_map(|c| c.target.as_deref())
        .filter_map(|name| gatehouse::policy::decide::secret_env_reason(&secret_env, name))
        .collect())
}

/// `manifest check`'s lines without `--json`.
fn print_manifest_check(
    m: &Manifest,
    checked: Option<&(Inspection, Coverage)>,
    warnings: &[String],
) {
    out(format!(
        "ok: `{}` is a valid manifest for executor `{}`",
        m.path.display(),
        m.name
    ));
    if !m.command.is_empty() {
        out(format!(
            "command: `{}`, run in the OS sandbox of `code:exec`",
            m.command.join(" ")
        ));
    }
    if let Some((i, c)) = checked {
        for line in super::authoring::coverage_lines(i, c) {
            out(line);
        }
    }
    for w in warnings {
        out(format!("warning: {w}"));
    }
}

fn snapshot_cmd(ctx: &Context, cmd: SnapshotCmd) -> CmdResult {
    match cmd {
        SnapshotCmd::Prepare { out: file, sources } => {
            let snap = build_snapshot(ctx, &sources)?;
            let frozen = snapshot::prepare(snap, &file)?;
            out_json(
                &json!({"file": file, "definitionHash": frozen.definition_hash, "policyHash": frozen.policy_hash}),
            );
            Ok(Exit::Ok)
        }
        SnapshotCmd::Verify { file, sources } => {
            let snap = build_snapshot(ctx, &sources)?;
            let frozen = snapshot::verify(&file, snap)?;
            out_json(
                &json!({"file": file, "verified": true, "definitionHash": frozen.definition_hash, "policyHash": frozen.policy_hash}),
            );
            Ok(Exit::Ok)
        }
    }
}

fn test(ctx: &Context, tier: u8, actor: Option<String>, common: TestCommon) -> CmdResult {
    if tier != 3 {
        return Err(Failure::invalid(format!(
            "unknown tier `{tier}`: only tier 3 (the deny-path suite) exists"
        )));
    }
    let config = ctx.config()?;
    let workspace = ctx.workspace(common.workspace.as_deref())?;
    if let Some(a) = &actor {
        if !config.actors.contains_key(a) {
            return Err(Failure::invalid(format!(
                "unknown actor `{a}`: the configuration defines {}",
                names(config.actors.keys())
            )));
        }
    }
    let manifests = gather_manifests(&config.executor_dirs, &[])?;
    let results = run_tier3(
        HostFlags::of(ctx, config, workspace, manifests),
        actor.as_deref(),
    )?;
    let summary = tier3::Summary::of(&results);
    if ctx.json {
        for r in &results {
            out_json(r);
        }
    } else {
        for r in &results {
            out(tier3::line(r));
        }
        out(summary.line());
    }
    if summary.failed == 0 && summary.skipped > 0 && !common.allow_skips {
        super::err(format!(
            "gatehouse: {} case(s) skipped: a skip fails the run unless --allow-skips is given",
            summary.skipped
        ));
    }
    Ok(if summary.holds(common.allow_skips) {
        Exit::Ok
    } else {
        Exit::Error
    })
}

fn names<'a>(it: impl Iterator<Item = &'a String>) -> String {
    it.map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

/// `gatehouse migrate`: every state database created or brought to the
/// schema this build knows, one line each.
fn migrate(ctx: &Context) -> CmdResult {
    let migrated =
        gatehouse::state::migrate(&ctx.state).map_err(|e| super::host::failure(e.into()))?;
    for m in &migrated {
        if ctx.json {
            out_json(m);
        } else {
            out(format!(
                "{:<9} schema {}  {}",
                m.database, m.version, m.path
            ));
        }
    }
    Ok(Exit::Ok)
}
