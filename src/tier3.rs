//! The tier-3 suite: for every configured actor, one deny-path request per
//! deny code of the request kinds, each of which must come back with its
//! exact code. No wasm runs and nothing is written: these decisions happen
//! entirely before anything would.
//!
//! A case that has no deny path for an actor (an actor allowed every
//! executor has no `SKILL_NOT_GRANTED` path) is reported `skipped` with the
//! reason, never counted as a pass.

use std::path::Path;

use serde::Serialize;
use serde_json::json;

use crate::config::resolve_path;
use crate::policy::{
    decide_json, is_within, Access, Actor, DenyCode, Level, ProtectedKind, ResolvedPath, Snapshot,
    UtcTime,
};

/// How a case ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseStatus {
    Pass,
    Fail,
    Skipped,
}

/// One deny-path case and its result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    pub actor: String,
    pub kind: &'static str,
    pub expected: DenyCode,
    /// The code (or outcome) `decide` returned; `None` when skipped.
    pub got: Option<String>,
    pub status: CaseStatus,
    pub request: Option<serde_json::Value>,
    pub reason: String,
}

struct Case {
    kind: &'static str,
    expected: DenyCode,
    request: Result<serde_json::Value, String>,
    /// Decide against this level instead of the snapshot's.
    level: Option<Level>,
}

fn case(kind: &'static str, expected: DenyCode, request: serde_json::Value) -> Case {
    Case {
        kind,
        expected,
        request: Ok(request),
        level: None,
    }
}

fn skip(kind: &'static str, expected: DenyCode, why: String) -> Case {
    Case {
        kind,
        expected,
        request: Err(why),
        level: None,
    }
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

fn cases_for(snapshot: &Snapshot, name: &str, actor: &Actor) -> Vec<Case> {
    use DenyCode as D;
    let mut out = Vec::new();
    out.push(case(
        "gate",
        D::UnknownRequest,
        json!({"kind": "teleport", "actor": name}),
    ));
    let ghost = fresh(&format!("{name}-not-configured"), |n| {
        snapshot.actors.contains_key(n)
    });
    out.push(case(
        "gate",
        D::UnknownActor,
        json!({"kind": "skill", "actor": ghost, "skill": "hello"}),
    ));

    let undefined = fresh("tier3-undefined-actor", |n| snapshot.actors.contains_key(n));
    out.push(case(
        "delegation",
        D::UnknownTarget,
        json!({"kind": "delegation", "actor": name, "target": undefined}),
    ));
    out.push(
        match snapshot
            .actors
            .keys()
            .find(|a| !actor.delegates_to.contains(a))
        {
            Some(t) => case(
                "delegation",
                D::DelegationNotAllowed,
                json!({"kind": "delegation", "actor": name, "target": t}),
            ),
            None => skip(
                "delegation",
                D::DelegationNotAllowed,
                format!("`{name}` may delegate to every actor"),
            ),
        },
    );

    let other = snapshot
        .actors
        .keys()
        .find(|a| *a != name)
        .cloned()
        .unwrap_or_else(|| fresh("tier3-other", |n| n == name));
    out.push(case("memory", D::PrivateMemoryDenied, json!({"kind": "memory", "actor": name, "scope": format!("private:{other}"), "access": "read"})));
    let scope = fresh("tier3-ungranted-scope", |s| {
        actor.memory.iter().any(|m| m == s)
    });
    out.push(case(
        "memory",
        D::MemoryNotGranted,
        json!({"kind": "memory", "actor": name, "scope": scope, "access": "read"}),
    ));

    // Resolved for real: the resolver is part of what is tested.
    let missing = resolve_path(Path::new("/gatehouse-tier3-missing/no/such/file"));
    out.push(case(
        "workspace",
        D::PathResolutionFailed,
        workspace_req(name, &missing, Access::Read),
    ));
    let protected = |p: &str| {
        snapshot
            .roots
            .protected
            .iter()
            .any(|r| is_within(p, &r.path))
    };
    let outside = ["/", "/proc", "/dev", "/etc", "/usr", "/var", "/tmp"]
        .into_iter()
        .filter_map(|p| match resolve_path(Path::new(p)) {
            ResolvedPath::Resolved(r) => Some(r),
            ResolvedPath::Failed { .. } => None,
        })
        .find(|p| !actor.workspaces.iter().any(|w| is_within(p, &w.path)));
    out.push(match outside {
        Some(p) => case(
            "workspace",
            D::WorkspaceNotGranted,
            workspace_req(name, &ResolvedPath::Resolved(p), Access::Read),
        ),
        None => skip(
            "workspace",
            D::WorkspaceNotGranted,
            format!("`{name}` has a root that contains every probe path"),
        ),
    });
    let in_turn = |p: &str| {
        snapshot
            .roots
            .turn_workspace
            .as_deref()
            .is_none_or(|t| is_within(p, t))
    };
    let ro_probe = actor
        .workspaces
        .iter()
        .filter(|w| w.mode == crate::policy::WorkspaceMode::ReadOnly)
        .map(|w| format!("{}/gatehouse-tier3-probe", w.path.trim_end_matches('/')))
        .find(|p| {
            in_turn(p) && !protected(p) && {
                // The read-only root must be the most specific root of the probe.
                let best = actor
                    .workspaces
                    .iter()
                    .filter(|w| is_within(p, &w.path))
                    .max_by_key(|w| w.path.len());
                best.is_some_and(|w| w.mode == crate::policy::WorkspaceMode::ReadOnly)
            }
        });
    out.push(match ro_probe {
        Some(p) => case(
            "workspace",
            D::WorkspaceReadOnly,
            workspace_req(name, &ResolvedPath::Resolved(p), Access::Write),
        ),
        None => skip(
            "workspace",
            D::WorkspaceReadOnly,
            format!("`{name}` has no read-only root inside this turn's workspace"),
        ),
    });
    let mismatch = actor
        .workspaces
        .iter()
        .map(|w| w.path.clone())
        .find(|p| !in_turn(p));
    out.push(match mismatch {
        Some(p) => case(
            "workspace",
            D::WorkspaceScopeMismatch,
            workspace_req(name, &ResolvedPath::Resolved(p), Access::Read),
        ),
        None => skip(
            "workspace",
            D::WorkspaceScopeMismatch,
            format!("every root of `{name}` is inside this turn's workspace"),
        ),
    });

    out.push(case("configuration", D::PolicyMutationDenied, json!({"kind": "configuration", "actor": name, "subject": "policy", "what": "gatehouse.toml"})));
    if let Some(p) = snapshot
        .roots
        .protected
        .iter()
        .find(|p| matches!(p.kind, ProtectedKind::Policy | ProtectedKind::State))
    {
        out.push(case(
            "configuration",
            D::PolicyMutationDenied,
            workspace_req(name, &ResolvedPath::Resolved(p.path.clone()), Access::Write),
        ));
    }
    out.push(case(
        "configuration",
        D::DefinitionMutationDenied,
        json!({"kind": "configuration", "actor": name, "subject": "definition", "what": format!("actors.{name}")}),
    ));

    out.push(case(
        "tool",
        D::RawRuntimeToolDenied,
        json!({"kind": "tool", "actor": name, "tool": "shell", "command": "ls; herdr run"}),
    ));
    out.push(case(
        "tool",
        D::IndirectToolRequest,
        json!({"kind": "tool", "actor": name, "tool": "shell", "command": "echo $(id)"}),
    ));
    let tool = fresh("tier3-ungranted-tool", |t| {
        actor.tools.iter().any(|x| x == t)
    });
    out.push(case(
        "tool",
        D::ToolNotGranted,
        json!({"kind": "tool", "actor": name, "tool": tool}),
    ));
    let server = fresh("tier3-ungranted-server", |s| {
        actor.mcp_servers.iter().any(|x| x == s)
    });
    out.push(case(
        "tool",
        D::McpServerNotGranted,
        json!({"kind": "tool", "actor": name, "tool": format!("mcp__{server}__call")}),
    ));

    out.push(if actor.skills.iter().any(|s| s == "*") {
        skip(
            "skill",
            D::SkillNotGranted,
            format!("`{name}` may run every executor (`*`)"),
        )
    } else {
        let skill = fresh("tier3-ungranted-skill", |s| {
            actor.skills.iter().any(|x| x == s)
        });
        case(
            "skill",
            D::SkillNotGranted,
            json!({"kind": "skill", "actor": name, "skill": skill}),
        )
    });
    let sub = fresh("tier3-ungranted-subagent", |s| {
        actor.subagents.iter().any(|x| x == s)
    });
    out.push(case(
        "subagent",
        D::SubagentNotGranted,
        json!({"kind": "subagent", "actor": name, "subagent": sub}),
    ));
    out.push(case(
        "mcp",
        D::McpServerNotGranted,
        json!({"kind": "mcp", "actor": name, "server": server}),
    ));

    out.push(case(
        "capability",
        D::CapabilityUnknown,
        json!({"kind": "capability", "actor": name, "capability": "fs:delete", "target": "/x"}),
    ));
    out.push(case("capability", D::TargetMismatch, json!({"kind": "capability", "actor": name, "capability": "fs:read", "target": "relative/**"})));
    out.push(Case {
        level: Some(Level::ReadOnly),
        ..case("capability", D::CapabilityDenied, json!({"kind": "capability", "actor": name, "capability": "fs:write", "target": "/tmp/x"}))
    });
    out
}

/// Runs the suite for `only` (or every actor) against `snapshot`, the
/// decisions taken at `now`.
pub fn run(snapshot: &Snapshot, only: Option<&str>, now: UtcTime) -> Vec<CaseResult> {
    let mut results = Vec::new();
    for (name, actor) in &snapshot.actors {
        if only.is_some_and(|o| o != name) {
            continue;
        }
        for c in cases_for(snapshot, name, actor) {
            let result = match c.request {
                Err(why) => CaseResult {
                    actor: name.clone(),
                    kind: c.kind,
                    expected: c.expected,
                    got: None,
                    status: CaseStatus::Skipped,
                    request: None,
                    reason: why,
                },
                Ok(req) => {
                    let decision = match c.level {
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
                    let got = decision
                        .code()
                        .map(|c| c.as_str().to_string())
                        .unwrap_or_else(|| decision.outcome().as_str().to_string());
                    CaseResult {
                        actor: name.clone(),
                        kind: c.kind,
                        expected: c.expected,
                        status: if decision.code() == Some(c.expected) {
                            CaseStatus::Pass
                        } else {
                            CaseStatus::Fail
                        },
                        got: Some(got),
                        request: Some(req),
                        reason: decision.reason().to_string(),
                    }
                }
            };
            results.push(result);
        }
    }
    results
}
