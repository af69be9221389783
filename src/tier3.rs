//! The tier-3 suite: for every configured actor, one deny-path request per
//! deny code of the request kinds (24 cases), each of which must come back
//! with its exact code. No wasm runs and nothing is written: these
//! decisions happen entirely before anything would.
//!
//! Every case runs on any host configuration: [`fixture`] derives, from
//! the host's configuration, fixture actors and roots that make each code
//! reachable (a read-only root on the turn's workspace, a root outside it,
//! an actor that may not run every executor), and the suite falls back on
//! them where a configured actor has no deny path of its own. A case that
//! still cannot run (the turn's workspace is `/`, so no root lies outside
//! it) is `skipped` with the reason, never counted as a pass; the command
//! line counts a skip as a failure unless it is told otherwise.
//!
//! Each case is decided twice, by two independent entry points: the pure
//! [`decide_json`] on the suite's snapshot at the `now` it is given, and a
//! second decider the caller supplies (the command line's is the host's
//! own decision entry point, `Host::decide_json`, on a host opened on the
//! fixture configuration, with its own frozen snapshot and clock). A case
//! passes only when both give its exact code; it counts once.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::json;

use crate::config::{resolve_path, ActorConfig, HostConfig};
use crate::policy::{
    decide_json, is_within, Access, Actor, Decision, DenyCode, Level, ProtectedKind, ResolvedPath,
    Snapshot, UtcTime, WorkspaceMode,
};

/// How a case ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseStatus {
    /// Both deciders returned the expected code.
    Pass,
    /// At least one decider returned something else.
    Fail,
    /// The case could not be made on this configuration; `reason` says why.
    Skipped,
}

/// One deny-path case and its result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    /// The configured actor the case belongs to.
    pub actor: String,
    /// The case's name (`workspace.read_only`).
    pub case: &'static str,
    /// The request kind the case exercises, the first part of its name (`workspace`).
    pub kind: &'static str,
    /// The deny code both deciders must return.
    pub expected: DenyCode,
    /// The fixture actor the request was made for (or names), when the
    /// configured actor has no deny path of its own.
    pub fixture: Option<String>,
    /// The code (or outcome) the pure `decide_json` returned; `None` when
    /// skipped.
    pub got: Option<String>,
    /// The code (or outcome) the second decider (the host) returned.
    pub host_got: Option<String>,
    /// Whether the case passed, failed or was skipped.
    pub status: CaseStatus,
    /// The request decided, as JSON; `None` when skipped.
    pub request: Option<serde_json::Value>,
    /// The decision's reason (the failing decider's, on a failure), or why the case was
    /// skipped.
    pub reason: String,
}

/// One case to decide: what is asked and the one code that must come back.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The configured actor it belongs to.
    pub actor: String,
    /// The case's name (`workspace.read_only`).
    pub name: &'static str,
    /// The request kind it exercises, the first part of its name.
    pub kind: &'static str,
    /// The deny code it must come back with.
    pub expected: DenyCode,
    /// The request, or why it cannot be made.
    pub request: Result<serde_json::Value, String>,
    /// Decide against this level instead of the snapshot's.
    pub level: Option<Level>,
    /// The fixture actor involved, if any.
    pub fixture: Option<String>,
}

/// The fixture actors of one configured actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureActors {
    /// The turn's workspace as its one root, read-only; it may not run
    /// every executor and delegates to no one.
    pub read_only: String,
    /// One read-write root outside the turn's workspace (its parent);
    /// `None` when the turn's workspace is `/`.
    pub elsewhere: Option<String>,
}

/// The fixture actors of every configured actor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fixtures {
    /// The fixture actors, by the name of the configured actor they stand in for.
    pub by_actor: BTreeMap<String, FixtureActors>,
}

/// The host's configuration with fixture actors added, and their names.
/// Build the suite's snapshot from the returned configuration: every code
/// is then reachable whatever the host's own actors look like.
pub fn fixture(config: &HostConfig, turn_workspace: &str) -> (HostConfig, Fixtures) {
    let mut out = config.clone();
    let mut fixtures = Fixtures::default();
    let parent = Path::new(turn_workspace)
        .parent()
        .map(|p| p.display().to_string());
    for (name, actor) in &config.actors {
        let taken = |n: &str, out: &HostConfig| out.actors.contains_key(n);
        let read_only = fresh(&format!("{name}.tier3-read-only"), |n| taken(n, &out));
        out.actors.insert(
            read_only.clone(),
            ActorConfig {
                skills: actor.skills.iter().filter(|s| *s != "*").cloned().collect(),
                delegates_to: Vec::new(),
                workspaces: Some(vec![(turn_workspace.to_string(), WorkspaceMode::ReadOnly)]),
                ..actor.clone()
            },
        );
        let elsewhere = parent.as_ref().map(|p| {
            let n = fresh(&format!("{name}.tier3-elsewhere"), |n| taken(n, &out));
            out.actors.insert(
                n.clone(),
                ActorConfig {
                    skills: Vec::new(),
                    delegates_to: Vec::new(),
                    workspaces: Some(vec![(p.clone(), WorkspaceMode::ReadWrite)]),
                    ..actor.clone()
                },
            );
            n
        });
        fixtures.by_actor.insert(
            name.clone(),
            FixtureActors {
                read_only,
                elsewhere,
            },
        );
    }
    (out, fixtures)
}

/// A name not used by `taken`.
fn fresh(base: &str, taken: impl Fn(&str) -> bool) -> String {
    let mut name = base.to_string();
    while taken(&name) {
        name.push('_');
    }
    name
}

fn workspace_req(actor: &str, path: &ResolvedPath, access: Access) -> serde_json::Value {
    json!({"kind": "workspace", "actor": actor, "path": path, "access": access})
}

/// Builds the cases of one configured actor.
struct Builder<'a> {
    actor: &'a str,
    out: Vec<Case>,
}

impl Builder<'_> {
    fn case(&mut self, name: &'static str, expected: DenyCode, request: serde_json::Value) {
        self.push(name, expected, Ok(request), None);
    }

    fn push(
        &mut self,
        name: &'static str,
        expected: DenyCode,
        request: Result<serde_json::Value, String>,
        fixture: Option<&str>,
    ) {
        let kind = name.split('.').next().unwrap_or(name);
        self.out.push(Case {
            actor: self.actor.to_string(),
            name,
            kind,
            expected,
            request,
            level: None,
            fixture: fixture.map(str::to_string),
        });
    }
}

fn cases_for(
    snapshot: &Snapshot,
    configured: &[String],
    name: &str,
    actor: &Actor,
    fx: &FixtureActors,
) -> Vec<Case> {
    use DenyCode as D;
    let mut b = Builder {
        actor: name,
        out: Vec::new(),
    };
    let fixture = |n: &str| snapshot.actors.get(n);
    b.case(
        "gate.unknown_request",
        D::UnknownRequest,
        json!({"kind": "teleport", "actor": name}),
    );
    let ghost = fresh(&format!("{name}-not-configured"), |n| {
        snapshot.actors.contains_key(n)
    });
    b.case(
        "gate.unknown_actor",
        D::UnknownActor,
        json!({"kind": "skill", "actor": ghost, "skill": "hello"}),
    );

    let undefined = fresh("tier3-undefined-actor", |n| snapshot.actors.contains_key(n));
    b.case(
        "delegation.unknown_target",
        D::UnknownTarget,
        json!({"kind": "delegation", "actor": name, "target": undefined}),
    );
    // A configured actor it may not delegate to, else the fixture (an
    // actor no configuration names).
    match configured.iter().find(|a| !actor.delegates_to.contains(a)) {
        Some(t) => b.case(
            "delegation.not_allowed",
            D::DelegationNotAllowed,
            json!({"kind": "delegation", "actor": name, "target": t}),
        ),
        None => b.push(
            "delegation.not_allowed",
            D::DelegationNotAllowed,
            Ok(json!({"kind": "delegation", "actor": name, "target": fx.read_only})),
            Some(&fx.read_only),
        ),
    }

    // Another configured actor's private scope, else the fixture's.
    let other = configured.iter().find(|a| *a != name);
    b.push(
        "memory.private",
        D::PrivateMemoryDenied,
        Ok(json!({
            "kind": "memory",
            "actor": name,
            "scope": format!("private:{}", other.unwrap_or(&fx.read_only)),
            "access": "read",
        })),
        other.is_none().then_some(fx.read_only.as_str()),
    );
    let scope = fresh("tier3-ungranted-scope", |s| {
        actor.memory.iter().any(|m| m == s)
    });
    b.case(
        "memory.not_granted",
        D::MemoryNotGranted,
        json!({"kind": "memory", "actor": name, "scope": scope, "access": "read"}),
    );

    // Resolved for real: the resolver is part of what is tested.
    let missing = resolve_path(Path::new("/gatehouse-tier3-missing/no/such/file"));
    b.case(
        "workspace.path_resolution",
        D::PathResolutionFailed,
        workspace_req(name, &missing, Access::Read),
    );
    let protected = |p: &str| {
        snapshot
            .roots
            .protected
            .iter()
            .any(|r| is_within(p, &r.path))
    };
    let outside_of = |a: &Actor| {
        ["/", "/proc", "/dev", "/etc", "/usr", "/var", "/tmp"]
            .into_iter()
            .filter_map(|p| match resolve_path(Path::new(p)) {
                ResolvedPath::Resolved(r) => Some(r),
                ResolvedPath::Failed { .. } => None,
            })
            .find(|p| !protected(p) && !a.workspaces.iter().any(|w| is_within(p, &w.path)))
    };
    let ro_fixture = fixture(&fx.read_only);
    match (outside_of(actor), ro_fixture.and_then(outside_of)) {
        (Some(p), _) => b.case(
            "workspace.not_granted",
            D::WorkspaceNotGranted,
            workspace_req(name, &ResolvedPath::Resolved(p), Access::Read),
        ),
        (None, Some(p)) => b.push(
            "workspace.not_granted",
            D::WorkspaceNotGranted,
            Ok(workspace_req(
                &fx.read_only,
                &ResolvedPath::Resolved(p),
                Access::Read,
            )),
            Some(&fx.read_only),
        ),
        (None, None) => b.push(
            "workspace.not_granted",
            D::WorkspaceNotGranted,
            Err(format!(
                "every probe path is under a root of `{name}` and of its fixture"
            )),
            Some(&fx.read_only),
        ),
    }
    let in_turn = |p: &str| {
        snapshot
            .roots
            .turn_workspace
            .as_deref()
            .is_none_or(|t| is_within(p, t))
    };
    let ro_probe = |a: &Actor| {
        a.workspaces
            .iter()
            .filter(|w| w.mode == WorkspaceMode::ReadOnly)
            .map(|w| format!("{}/gatehouse-tier3-probe", w.path.trim_end_matches('/')))
            .find(|p| {
                in_turn(p) && !protected(p) && {
                    // The read-only root must be the most specific root of the probe.
                    let best = a
                        .workspaces
                        .iter()
                        .filter(|w| is_within(p, &w.path))
                        .max_by_key(|w| w.path.len());
                    best.is_some_and(|w| w.mode == WorkspaceMode::ReadOnly)
                }
            })
    };
    match (ro_probe(actor), ro_fixture.and_then(ro_probe)) {
        (Some(p), _) => b.case(
            "workspace.read_only",
            D::WorkspaceReadOnly,
            workspace_req(name, &ResolvedPath::Resolved(p), Access::Write),
        ),
        (None, Some(p)) => b.push(
            "workspace.read_only",
            D::WorkspaceReadOnly,
            Ok(workspace_req(
                &fx.read_only,
                &ResolvedPath::Resolved(p),
                Access::Write,
            )),
            Some(&fx.read_only),
        ),
        (None, None) => b.push(
            "workspace.read_only",
            D::WorkspaceReadOnly,
            Err(format!(
                "the turn's workspace is protected: `{name}` and its fixture have no writable probe in it"
            )),
            Some(&fx.read_only),
        ),
    }
    let mismatch = |a: &Actor| {
        a.workspaces
            .iter()
            .map(|w| w.path.clone())
            .find(|p| !in_turn(p))
    };
    let elsewhere = fx.elsewhere.as_deref();
    match (
        mismatch(actor),
        elsewhere.and_then(fixture).and_then(mismatch),
        elsewhere,
    ) {
        (Some(p), _, _) => b.case(
            "workspace.scope_mismatch",
            D::WorkspaceScopeMismatch,
            workspace_req(name, &ResolvedPath::Resolved(p), Access::Read),
        ),
        (None, Some(p), Some(f)) => b.push(
            "workspace.scope_mismatch",
            D::WorkspaceScopeMismatch,
            Ok(workspace_req(f, &ResolvedPath::Resolved(p), Access::Read)),
            Some(f),
        ),
        _ => b.push(
            "workspace.scope_mismatch",
            D::WorkspaceScopeMismatch,
            Err("the turn's workspace is `/`: no root lies outside it".to_string()),
            elsewhere,
        ),
    }

    b.case(
        "configuration.policy",
        D::PolicyMutationDenied,
        json!({"kind": "configuration", "actor": name, "subject": "policy", "what": "gatehouse.toml"}),
    );
    match snapshot
        .roots
        .protected
        .iter()
        .find(|p| matches!(p.kind, ProtectedKind::Policy | ProtectedKind::State))
    {
        Some(p) => b.case(
            "configuration.policy_path",
            D::PolicyMutationDenied,
            workspace_req(name, &ResolvedPath::Resolved(p.path.clone()), Access::Write),
        ),
        None => b.push(
            "configuration.policy_path",
            D::PolicyMutationDenied,
            Err("the snapshot protects no configuration or state path".to_string()),
            None,
        ),
    }
    b.case(
        "configuration.definition",
        D::DefinitionMutationDenied,
        json!({"kind": "configuration", "actor": name, "subject": "definition", "what": format!("actors.{name}")}),
    );

    b.case(
        "tool.raw_runtime",
        D::RawRuntimeToolDenied,
        json!({"kind": "tool", "actor": name, "tool": "shell", "command": "ls; herdr run"}),
    );
    b.case(
        "tool.indirect",
        D::IndirectToolRequest,
        json!({"kind": "tool", "actor": name, "tool": "shell", "command": "echo $(id)"}),
    );
    let tool = fresh("tier3-ungranted-tool", |t| {
        actor.tools.iter().any(|x| x == t)
    });
    b.case(
        "tool.not_granted",
        D::ToolNotGranted,
        json!({"kind": "tool", "actor": name, "tool": tool}),
    );
    let server = fresh("tier3-ungranted-server", |s| {
        actor.mcp_servers.iter().any(|x| x == s)
    });
    b.case(
        "tool.mcp_server",
        D::McpServerNotGranted,
        json!({"kind": "tool", "actor": name, "tool": format!("mcp__{server}__call")}),
    );

    let ungranted_skill =
        |a: &Actor| fresh("tier3-ungranted-skill", |s| a.skills.iter().any(|x| x == s));
    if actor.skills.iter().any(|s| s == "*") {
        match ro_fixture.filter(|f| !f.skills.iter().any(|s| s == "*")) {
            Some(f) => b.push(
                "skill.not_granted",
                D::SkillNotGranted,
                Ok(json!({"kind": "skill", "actor": fx.read_only, "skill": ungranted_skill(f)})),
                Some(&fx.read_only),
            ),
            None => b.push(
                "skill.not_granted",
                D::SkillNotGranted,
                Err(format!("`{name}` and its fixture may run every executor")),
                Some(&fx.read_only),
            ),
        }
    } else {
        b.case(
            "skill.not_granted",
            D::SkillNotGranted,
            json!({"kind": "skill", "actor": name, "skill": ungranted_skill(actor)}),
        );
    }
    let sub = fresh("tier3-ungranted-subagent", |s| {
        actor.subagents.iter().any(|x| x == s)
    });
    b.case(
        "subagent.not_granted",
        D::SubagentNotGranted,
        json!({"kind": "subagent", "actor": name, "subagent": sub}),
    );
    b.case(
        "mcp.not_granted",
        D::McpServerNotGranted,
        json!({"kind": "mcp", "actor": name, "server": server}),
    );

    b.case(
        "capability.unknown",
        D::CapabilityUnknown,
        json!({"kind": "capability", "actor": name, "capability": "fs:delete", "target": "/x"}),
    );
    b.case(
        "capability.target_mismatch",
        D::TargetMismatch,
        json!({"kind": "capability", "actor": name, "capability": "fs:read", "target": "relative/**"}),
    );
    // The host's own variables are refused on every configuration (a
    // provider's `value_env` only where one is configured).
    b.case(
        "capability.secret_env",
        D::SecretEnvDenied,
        json!({"kind": "capability", "actor": name, "capability": "env:read", "target": "GATEHOUSE_DATABASE_URL"}),
    );
    b.case(
        "capability.denied",
        D::CapabilityDenied,
        json!({"kind": "capability", "actor": name, "capability": "fs:write", "target": "/tmp/x"}),
    );
    if let Some(last) = b.out.last_mut() {
        last.level = Some(Level::ReadOnly);
    }
    b.out
}

/// The cases for `only` (or every configured actor of `fixtures`) against
/// `snapshot`, built from the fixture configuration (see [`fixture`]).
pub fn cases(snapshot: &Snapshot, fixtures: &Fixtures, only: Option<&str>) -> Vec<Case> {
    let mut out = Vec::new();
    let configured: Vec<String> = fixtures.by_actor.keys().cloned().collect();
    for (name, fx) in &fixtures.by_actor {
        if only.is_some_and(|o| o != name) {
            continue;
        }
        if let Some(actor) = snapshot.actors.get(name) {
            out.extend(cases_for(snapshot, &configured, name, actor, fx));
        }
    }
    out
}

fn answer(decision: &Decision) -> String {
    decision
        .code()
        .map(|c| c.as_str().to_string())
        .unwrap_or_else(|| decision.outcome().as_str().to_string())
}

/// Decides every case twice, with the pure [`decide_json`] on `snapshot`
/// at `now` and with `second` (given the request and the level to decide
/// it at, if not the snapshot's), and compares both with its code.
pub fn check(
    snapshot: &Snapshot,
    cases: Vec<Case>,
    now: UtcTime,
    second: &dyn Fn(&serde_json::Value, Option<Level>) -> Decision,
) -> Vec<CaseResult> {
    cases
        .into_iter()
        .map(|c| match c.request {
            Err(why) => CaseResult {
                actor: c.actor,
                case: c.name,
                kind: c.kind,
                expected: c.expected,
                fixture: c.fixture,
                got: None,
                host_got: None,
                status: CaseStatus::Skipped,
                request: None,
                reason: why,
            },
            Ok(req) => {
                let first = match c.level {
                    Some(level) => decide_json(
                        &Snapshot {
                            level,
                            ..snapshot.clone()
                        },
                        &req,
                        now,
                    ),
                    None => decide_json(snapshot, &req, now),
                };
                let other = second(&req, c.level);
                let pass = first.code() == Some(c.expected) && other.code() == Some(c.expected);
                let reason = if pass || first.code() != Some(c.expected) {
                    first.reason().to_string()
                } else {
                    other.reason().to_string()
                };
                CaseResult {
                    actor: c.actor,
                    case: c.name,
                    kind: c.kind,
                    expected: c.expected,
                    fixture: c.fixture,
                    got: Some(answer(&first)),
                    host_got: Some(answer(&other)),
                    status: if pass {
                        CaseStatus::Pass
                    } else {
                        CaseStatus::Fail
                    },
                    request: Some(req),
                    reason,
                }
            }
        })
        .collect()
}

/// Runs the suite for `only` (or every configured actor) against
/// `snapshot`, the decisions taken at `now`: [`cases`], then [`check`].
pub fn run(
    snapshot: &Snapshot,
    fixtures: &Fixtures,
    only: Option<&str>,
    now: UtcTime,
    second: &dyn Fn(&serde_json::Value, Option<Level>) -> Decision,
) -> Vec<CaseResult> {
    check(snapshot, cases(snapshot, fixtures, only), now, second)
}

/// How many cases passed, failed and were skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed.
    pub failed: usize,
    /// Cases that were skipped.
    pub skipped: usize,
}

impl Summary {
    /// The counts of `results`.
    pub fn of(results: &[CaseResult]) -> Summary {
        let count = |s| results.iter().filter(|r| r.status == s).count();
        Summary {
            passed: count(CaseStatus::Pass),
            failed: count(CaseStatus::Fail),
            skipped: count(CaseStatus::Skipped),
        }
    }

    /// Whether the run holds: nothing failed, and nothing was skipped
    /// unless skips are allowed.
    pub fn holds(&self, allow_skips: bool) -> bool {
        self.failed == 0 && (allow_skips || self.skipped == 0)
    }

    /// The last line of the human output.
    pub fn line(&self) -> String {
        format!(
            "tier 3: {} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }
}

/// One case as a line of the human output.
pub fn line(r: &CaseResult) -> String {
    let status = match r.status {
        CaseStatus::Pass => "pass",
        CaseStatus::Fail => "FAIL",
        CaseStatus::Skipped => "skip",
    };
    let got = match (&r.got, &r.host_got) {
        (Some(a), Some(b)) if a == b => a.clone(),
        (Some(a), Some(b)) => format!("{a} (host: {b})"),
        _ => "-".to_string(),
    };
    let actor = match &r.fixture {
        Some(f) => format!("{} via `{f}`", r.actor),
        None => r.actor.clone(),
    };
    format!(
        "{status:4}  {actor:<10} {:<26} {:<28} got {got:<28} {}",
        r.case,
        r.expected.as_str(),
        r.reason
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_adds_a_read_only_and_an_elsewhere_actor_per_configured_actor() {
        let config = HostConfig::safe_default("alice");
        let (fx_config, fixtures) = fixture(&config, "/home/alice/project");
        assert_eq!(
            fixtures.by_actor.get("main"),
            Some(&FixtureActors {
                read_only: "main.tier3-read-only".to_string(),
                elsewhere: Some("main.tier3-elsewhere".to_string()),
            })
        );
        let ro = &fx_config.actors["main.tier3-read-only"];
        assert_eq!(
            ro.workspaces,
            Some(vec![(
                "/home/alice/project".to_string(),
                WorkspaceMode::ReadOnly
            )])
        );
        assert!(!ro.skills.iter().any(|s| s == "*"));
        assert!(ro.delegates_to.is_empty());
        assert_eq!(
            fx_config.actors["main.tier3-elsewhere"].workspaces,
            Some(vec![("/home/alice".to_string(), WorkspaceMode::ReadWrite)])
        );
        // The configured actor is kept as it is.
        assert_eq!(fx_config.actors["main"], config.actors["main"]);
        assert_eq!(fx_config.actors.len(), 3);
    }

    #[test]
    fn fixture_on_the_root_workspace_has_no_elsewhere_actor() {
        let (fx_config, fixtures) = fixture(&HostConfig::safe_default("alice"), "/");
        assert_eq!(fixtures.by_actor["main"].elsewhere, None);
        assert_eq!(fx_config.actors.len(), 2);
    }

    #[test]
    fn a_skip_fails_the_summary_unless_allowed() {
        let s = Summary {
            passed: 21,
            failed: 0,
            skipped: 2,
        };
        assert!(!s.holds(false));
        assert!(s.holds(true));
        assert_eq!(s.line(), "tier 3: 21 passed, 0 failed, 2 skipped");
        let failed = Summary { failed: 1, ..s };
        assert!(!failed.holds(true));
    }
}
