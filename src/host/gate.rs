//! The gate of a turn: every need of an executor asked of `policy::decide`,
//! and a [`Plan`] only when all of them are allowed.
//!
//! Order (deny-first): may the actor run this executor (skill); then each
//! declared capability with its target (matrix + grants, within what the
//! executor declared); for path targets, the workspace rule on the
//! directory the sandbox would open; for memory, the scope rule. The first
//! deny ends the turn and nothing was touched: no component read, no
//! engine used, no file opened. The host then asks for approvals, and only
//! after them probes the isolation of the engine (see `super::Host`).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::{resolve_glob, GlobRoot};
use crate::manifest::Manifest;
use crate::policy::{
    decide, Access, Capability, Decision, DenyCode, HostPattern, PathGlob, Request, RequestKind,
    Snapshot, UtcTime,
};
use crate::sandbox::plan::PlanParts;
use crate::sandbox::{Allowed, DirAccess, Limits, MemoryGrant, PinnedDir, Plan, Preopen};

/// One question asked of the policy, and its answer.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub request: Request,
    pub decision: Decision,
    /// Set when an approval turned `approval_required` into a go.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<&'static str>,
}

/// A capability waiting for a person's approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pending {
    pub capability: Capability,
    /// The target where it really is: for a path glob, its literal
    /// directory canonical (every symlink resolved, `~` expanded), its
    /// wildcards kept. "Allow and remember" records this target.
    pub target: Option<String>,
    /// The target as the executor declared it, when it resolves elsewhere
    /// (`WS/out/**` for `target` `WS/private/**`, `out` a link).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared_target: Option<String>,
    /// For a path glob with a `mount`: the directory's name in the guest
    /// (the prompt shows both names).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount: Option<String>,
    /// Whether the capability can change or destroy data.
    pub critical: bool,
    /// Whether "allow and remember" may record a grant for it (never for
    /// an `always`-class capability).
    pub rememberable: bool,
    /// Why it needs an approval.
    pub reason: String,
}

/// The gate's answer.
#[derive(Debug, Serialize)]
#[serde(tag = "gate", rename_all = "snake_case")]
pub enum Gate {
    Denied {
        steps: Vec<Step>,
        code: DenyCode,
        reason: String,
    },
    ApprovalRequired {
        steps: Vec<Step>,
        pending: Vec<Pending>,
    },
    Ready {
        steps: Vec<Step>,
        #[serde(skip)]
        plan: Box<Plan>,
    },
}

/// What the gate needs for one turn.
pub struct TurnInput<'a> {
    pub snapshot: &'a Snapshot,
    pub actor: &'a str,
    pub manifest: &'a Manifest,
    pub turn_id: String,
    pub limits: Limits,
    /// Approvals given once, for this turn only.
    pub approved_once: &'a [(Capability, Option<String>)],
    /// The time of the decision, read from the clock by the caller: a
    /// grant counts only while unexpired at it.
    pub now: UtcTime,
}

fn deny(steps: Vec<Step>, code: DenyCode, reason: impl Into<String>) -> Gate {
    Gate::Denied {
        steps,
        code,
        reason: reason.into(),
    }
}

/// The guest name of a directory in the workspace: relative to it.
/// `None` when `dir` is not in the workspace.
fn guest_path(dir: &str, workspace: &str) -> Option<String> {
    if dir == workspace {
        Some(".".to_string())
    } else if workspace == "/" {
        Some(dir.trim_start_matches('/').to_string())
    } else {
        dir.strip_prefix(workspace)
            .and_then(|r| r.strip_prefix('/'))
            .map(str::to_string)
    }
}

/// Asks the policy for every need of the turn.
pub(crate) fn gate(input: TurnInput<'_>) -> Gate {
    let snap = input.snapshot;
    let actor = input.actor;
    let name = input.manifest.name.as_str();
    let mut steps: Vec<Step> = Vec::new();
    let ask = |steps: &mut Vec<Step>, kind: RequestKind| -> Decision {
        let request = Request::new(actor, kind);
        let decision = decide(snap, &request, input.now);
        // The step keeps the decision; the caller gets what it acts on (an
        // allow's reason is the step's alone: not copied).
        let answer = match &decision {
            Decision::Allow { .. } => Decision::Allow {
                reason: String::new(),
                grant: None,
            },
            other => other.clone(),
        };
        steps.push(Step {
            request,
            decision,
            approval: None,
        });
        answer
    };

    if let Decision::Deny { code, reason } = ask(
        &mut steps,
        RequestKind::Skill {
            skill: name.to_string(),
        },
    ) {
        return deny(steps, code, reason);
    }
    let Some(def) = snap.executors.get(name) else {
        return deny(
            steps,
            DenyCode::UnknownRequest,
            format!("executor `{name}` is not in this turn's snapshot"),
        );
    };
    let workspace = snap.roots.turn_workspace.clone().unwrap_or_default();
    let mut pending = Vec::new();
    let mut allowed = Vec::new();
    let mut preopens: Vec<Preopen> = Vec::new();
    let mut env_names = Vec::new();
    let mut hosts = Vec::new();
    let mut memory: Option<MemoryGrant> = None;
    let mut delegates = Vec::new();
    let mut exec_tools: Vec<String> = Vec::new();
    let mut write_globs = Vec::new();
    let mut read_globs = Vec::new();

    for (index, declared) in def.capabilities.iter().enumerate() {
        let cap = declared.capability;
        let target = declared.target.clone();
        // A path target is matched, asked about and allowed where it
        // really is: its literal directory resolved, so a link on the way
        // (`out -> private`) is not covered by a grant on the name
        // (`out/**`). Resolving is I/O: here, before `decide`.
        let fs_root = match cap {
            Capability::FsRead | Capability::FsWrite => target
                .as_deref()
                .and_then(|t| PathGlob::parse(t).ok())
                .map(|g| resolve_glob(&g)),
            _ => None,
        };
        let canonical_target = fs_root.as_ref().and_then(|r| r.canonical.clone());
        let matched = canonical_target.clone().or_else(|| target.clone());
        let decision = ask(
            &mut steps,
            RequestKind::Capability {
                capability: cap.as_str().to_string(),
                target: target.clone(),
                canonical_target,
                executor: Some(name.to_string()),
            },
        );
        match decision {
            Decision::Deny { code, reason } => return deny(steps, code, reason),
            Decision::ApprovalRequired {
                target: asked,
                reason,
                ..
            } => {
                if input
                    .approved_once
                    .iter()
                    .any(|(c, t)| *c == cap && *t == asked)
                {
                    if let Some(last) = steps.last_mut() {
                        last.approval = Some("allow_once");
                    }
                } else {
                    pending.push(Pending {
                        capability: cap,
                        declared_target: target.clone().filter(|t| Some(t) != asked.as_ref()),
                        target: asked,
                        mount: declared.mount.clone(),
                        critical: cap.critical(),
                        rememberable: cap.default_approval()
                            != crate::policy::ApprovalClass::Always,
                        reason,
                    });
                }
            }
            Decision::Allow { .. } => {}
        }
        match cap {
            Capability::FsRead | Capability::FsWrite => {
                let Some(GlobRoot {
                    dir: resolved,
                    rest,
                    ..
                }) = fs_root
                else {
                    return deny(
                        steps,
                        DenyCode::TargetMismatch,
                        format!("`{cap}` needs a path glob target"),
                    );
                };
                // The preopened directory is the glob's longest literal
                // directory (`<dir>` for `<dir>/**` or a literal directory);
                // the filesystem layer (`sandbox::journal_fs`) enforces the
                // glob itself at every open and mutation, so `notes/*.md`
                // preopens `notes` and the layer refuses `notes/a.txt`.
                let access = if cap == Capability::FsWrite {
                    Access::Write
                } else {
                    Access::Read
                };
                let canonical = match &resolved {
                    crate::policy::ResolvedPath::Resolved(p) => p.clone(),
                    crate::policy::ResolvedPath::Failed { .. } => String::new(),
                };
                if let Decision::Deny { code, reason } = ask(
                    &mut steps,
                    RequestKind::Workspace {
                        path: resolved,
                        access,
                    },
                ) {
                    return deny(steps, code, reason);
                }
                // The directory the decision named, opened now from its
                // canonical path following no link, and held for the whole
                // turn (see `sandbox::pinned`).
                let dir = match preopens.iter().find(|p| p.host == Path::new(&canonical)) {
                    Some(p) => p.dir.clone(),
                    None => match PinnedDir::open(Path::new(&canonical)) {
                        Ok(dir) => dir,
                        Err(e) => {
                            return deny(steps, DenyCode::PathResolutionFailed, e.to_string())
                        }
                    },
                };
                // A read-write preopen may contain host configuration (the
                // grants database, the history, manifests): the filesystem
                // layer refuses every mutation of a protected path inside
                // it with `POLICY_MUTATION_DENIED`/`DEFINITION_MUTATION_DENIED`.
                let Ok(rebased) =
                    PathGlob::parse(&format!("{}/{rest}", canonical.trim_end_matches('/')))
                else {
                    return deny(
                        steps,
                        DenyCode::TargetMismatch,
                        format!(
                            "`{}` cannot be rebased on `{canonical}`",
                            target.as_deref().unwrap_or_default()
                        ),
                    );
                };
                if cap == Capability::FsWrite {
                    write_globs.push(rebased);
                } else {
                    read_globs.push(rebased);
                }
                let access = if cap == Capability::FsWrite {
                    DirAccess::ReadWrite
                } else {
                    DirAccess::ReadOnly
                };
                // The guest's name for it: the manifest's `mount`, else its
                // place in the workspace. A directory that resolved out of
                // the workspace (a link on the way) has no such place, and
                // its host path is not the guest's to learn.
                let guest = match (&declared.mount, guest_path(&canonical, &workspace)) {
                    (Some(mount), _) => mount.clone(),
                    (None, Some(relative)) => relative,
                    (None, None) => {
                        return deny(
                            steps,
                            DenyCode::TargetMismatch,
                            format!(
                                "capabilities[{index}].mount: `{canonical}` lies outside the workspace `{workspace}`; name it in the guest with `mount`"
                            ),
                        )
                    }
                };
                // Names compared as the guest resolves them (`/out` is
                // `out`, `/` is `.`).
                let resolved_name = crate::manifest::guest_name(&guest);
                if let Some(clash) = preopens.iter().find(|p| {
                    (p.host == Path::new(&canonical))
                        != (crate::manifest::guest_name(&p.guest) == resolved_name)
                }) {
                    return deny(
                        steps,
                        DenyCode::TargetMismatch,
                        format!(
                            "capabilities[{index}].mount: `{canonical}` as `{guest}` clashes with `{}` as `{}`: one directory has one name in the guest, and one name one directory",
                            clash.host.display(),
                            clash.guest
                        ),
                    );
                }
                match preopens
                    .iter_mut()
                    .find(|p| p.host == Path::new(&canonical))
                {
                    Some(p) if access == DirAccess::ReadWrite => p.access = access,
                    Some(_) => {}
                    None => preopens.push(Preopen {
                        guest,
                        host: PathBuf::from(&canonical),
                        access,
                        dir,
                    }),
                }
            }
            Capability::MemoryRead | Capability::MemoryWrite => {
                let scope = target.clone().unwrap_or_default();
                let access = if cap == Capability::MemoryWrite {
                    Access::Write
                } else {
                    Access::Read
                };
                if let Decision::Deny { code, reason } = ask(
                    &mut steps,
                    RequestKind::Memory {
                        scope: scope.clone(),
                        access,
                    },
                ) {
                    return deny(steps, code, reason);
                }
                let m = memory.get_or_insert(MemoryGrant {
                    scope: scope.clone(),
                    read: false,
                    write: false,
                });
                if m.scope != scope {
                    return deny(
                        steps,
                        DenyCode::TargetMismatch,
                        format!(
                            "an executor may use one memory scope, not `{}` and `{scope}`",
                            m.scope
                        ),
                    );
                }
                if cap == Capability::MemoryWrite {
                    m.write = true;
                } else {
                    m.read = true;
                }
            }
            Capability::EnvRead => env_names.extend(target.clone()),
            Capability::NetworkSites => {
                if let Some(h) = target.as_deref().and_then(|t| HostPattern::parse(t).ok()) {
                    hosts.push(h);
                }
            }
            Capability::DelegateCall => delegates.extend(target.clone()),
            Capability::ComputePure | Capability::TimeRead | Capability::HumanAsk => {}
            Capability::CodeExec => {
                // The program must be one the manifest lists in `tools`,
                // and one the actor may run (the tool layers); each
                // command is screened again, with its arguments, when
                // the guest runs it.
                let tool = target.clone().unwrap_or_default();
                if !input
                    .manifest
                    .tools
                    .iter()
                    .any(|t| t == &tool || crate::policy::command::basename(t) == tool)
                {
                    return deny(
                        steps,
                        DenyCode::TargetMismatch,
                        format!(
                            "`code:exec` on `{tool}`: `{tool}` is not in the manifest's `tools`"
                        ),
                    );
                }
                if let Decision::Deny { code, reason } = ask(
                    &mut steps,
                    RequestKind::Tool {
                        tool: tool.clone(),
                        command: None,
                    },
                ) {
                    return deny(steps, code, reason);
                }
                if !exec_tools.contains(&tool) {
                    exec_tools.push(tool);
                }
            }
            Capability::SystemAdmin => {}
        }
        allowed.push(Allowed {
            capability: cap,
            target: matched,
        });
    }
    if !pending.is_empty() {
        return Gate::ApprovalRequired { steps, pending };
    }
    // The workspace rule was asked about each preopened directory; the
    // actor's roots inside a read-write one (a read-only `out/ro` in a
    // read-write workspace) go to the filesystem layer, which holds every
    // path to the most specific root.
    let nested_roots = snap
        .actors
        .get(actor)
        .map(|a| {
            a.workspaces
                .iter()
                .filter(|r| {
                    preopens.iter().any(|p| {
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
    // Protected paths matter only beneath a preopened directory (to the
    // filesystem layer and a command's roots): a turn without one does not
    // copy them.
    let protected = if preopens.is_empty() {
        Vec::new()
    } else {
        snap.roots.protected.clone()
    };
    let plan = Plan::from_allowed(PlanParts {
        turn_id: input.turn_id,
        executor: name.to_string(),
        component: input.manifest.component.clone(),
        command: input.manifest.command.clone(),
        sha256: input.manifest.sha256.clone(),
        allowed,
        preopens,
        env_names,
        hosts,
        memory,
        delegates,
        exec_tools,
        limits: input.limits,
        workspace: PathBuf::from(workspace),
        write_globs,
        read_globs,
        protected,
        nested_roots,
    });
    Gate::Ready {
        steps,
        plan: Box::new(plan),
    }
}
