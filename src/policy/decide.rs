//! `decide`: the single gate.
//!
//! Order: the request's shape (`UNKNOWN_REQUEST`), the actor
//! (`UNKNOWN_ACTOR`), then the rule of its kind. Each rule is written
//! deny-first and ends in a deny: nothing is allowed by falling through.

use serde::{Deserialize, Serialize};

use super::codes::DenyCode;
use super::command;
use super::grant::effective_outcome;
use super::matrix::{Level, Outcome};
use super::registry::{Capability, TargetKind};
use super::request::{Access, ConfigSubject, JsonRequest, Request, RequestKind, ResolvedPath};
use super::snapshot::{Actor, ProtectedKind, Snapshot, WorkspaceMode};
use super::target::{TargetError, TargetPattern};
use super::time::UtcTime;

/// The answer of the gate, with its reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// The request may go ahead.
    Allow {
        /// Why: the level's rule, or the grant that covered it.
        reason: String,
        /// The id of the grant that turned `approval_required` into this.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grant: Option<i64>,
    },
    /// The matrix asks for an approval and no grant covers the target.
    ApprovalRequired {
        /// The capability to approve.
        capability: Capability,
        /// The target to approve it on (canonical for a path glob), if it takes one.
        target: Option<String>,
        /// Why an approval is needed.
        reason: String,
    },
    /// The request is refused.
    Deny {
        /// Which rule refused it.
        code: DenyCode,
        /// The refusal in words, naming what was asked.
        reason: String,
    },
}

impl Decision {
    fn deny(code: DenyCode, reason: impl Into<String>) -> Decision {
        Decision::Deny {
            code,
            reason: reason.into(),
        }
    }

    fn allow(reason: impl Into<String>) -> Decision {
        Decision::Allow {
            reason: reason.into(),
            grant: None,
        }
    }

    /// The id of the grant that allowed it, if one did.
    pub fn grant(&self) -> Option<i64> {
        match self {
            Decision::Allow { grant, .. } => *grant,
            _ => None,
        }
    }

    /// Whether the request may go ahead.
    pub fn is_allow(&self) -> bool {
        matches!(self, Decision::Allow { .. })
    }

    /// The deny code, if this is a denial.
    pub fn code(&self) -> Option<DenyCode> {
        match self {
            Decision::Deny { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The reason, whatever the decision.
    pub fn reason(&self) -> &str {
        match self {
            Decision::Allow { reason, .. }
            | Decision::ApprovalRequired { reason, .. }
            | Decision::Deny { reason, .. } => reason,
        }
    }

    /// `allowed`, `approval_required` or `denied`.
    pub fn outcome(&self) -> Outcome {
        match self {
            Decision::Allow { .. } => Outcome::Allowed,
            Decision::ApprovalRequired { .. } => Outcome::ApprovalRequired,
            Decision::Deny { .. } => Outcome::Denied,
        }
    }
}

/// Decides a request given as JSON: a value that is not one of the request
/// shapes is `UNKNOWN_REQUEST`; a capability not in the registry is
/// `CAPABILITY_UNKNOWN`, after the shape and actor checks every request
/// passes first.
pub fn decide_json(snapshot: &Snapshot, request: &serde_json::Value, now: UtcTime) -> Decision {
    let request = match JsonRequest::deserialize(request) {
        Ok(request) => request,
        Err(e) => {
            return Decision::deny(
                DenyCode::UnknownRequest,
                format!("the request has no known shape: {e}"),
            )
        }
    };
    let actor = match admit(snapshot, &request) {
        Ok(actor) => actor,
        Err(denied) => return denied,
    };
    match request.typed() {
        Ok(request) => rule(snapshot, actor, &request, now),
        Err(name) => Decision::deny(
            DenyCode::CapabilityUnknown,
            format!("`{name}` is not in the registry"),
        ),
    }
}

/// The gate. Pure: reads only `snapshot`, `request` and `now`, the time
/// of the decision, which the caller read from the clock: a grant of the
/// snapshot counts only while it is unexpired at `now` (a long-lived host
/// decides many turns against one snapshot, and expiry is judged at each
/// of them, not when the snapshot was built).
pub fn decide(snapshot: &Snapshot, request: &Request, now: UtcTime) -> Decision {
    let actor = match admit(snapshot, request) {
        Ok(actor) => actor,
        Err(denied) => return denied,
    };
    rule(snapshot, actor, request, now)
}

/// The rule of the request's kind, for an admitted request by `actor`.
fn rule(snapshot: &Snapshot, actor: &Actor, request: &Request, now: UtcTime) -> Decision {
    let name = request.actor.as_str();
    match &request.kind {
        RequestKind::Delegation { target } => delegation(snapshot, actor, target),
        RequestKind::Memory { scope, .. } => memory(name, actor, scope),
        RequestKind::Workspace { path, access } => workspace(snapshot, actor, path, *access),
        RequestKind::Configuration { subject, what } => configuration(*subject, what),
        RequestKind::Tool { tool, command } => tool_request(actor, tool, command.as_deref()),
        RequestKind::Skill { skill } => by_name(
            &actor.skills,
            skill,
            true,
            DenyCode::SkillNotGranted,
            "executor",
        ),
        RequestKind::Subagent { subagent } => by_name(
            &actor.subagents,
            subagent,
            false,
            DenyCode::SubagentNotGranted,
            "subagent",
        ),
        RequestKind::Mcp { server } => by_name(
            &actor.mcp_servers,
            server,
            false,
            DenyCode::McpServerNotGranted,
            "mcp server",
        ),
        RequestKind::Capability {
            capability,
            target,
            canonical_target,
            executor,
        } => capability_request(
            snapshot,
            actor,
            *capability,
            target.as_deref(),
            canonical_target.as_deref(),
            executor.as_deref(),
            now,
        ),
    }
}

/// What every request passes before the rule of its kind: its shape
/// (`UNKNOWN_REQUEST`), then its actor (`UNKNOWN_ACTOR`), who is returned.
fn admit<'s, C: AsRef<str>>(
    snapshot: &'s Snapshot,
    request: &Request<C>,
) -> Result<&'s Actor, Decision> {
    if let Some(why) = shape_problem(request) {
        return Err(Decision::deny(DenyCode::UnknownRequest, why));
    }
    snapshot.actors.get(&request.actor).ok_or_else(|| {
        Decision::deny(
            DenyCode::UnknownActor,
            format!("actor `{}` is not defined", request.actor),
        )
    })
}

fn shape_problem<C: AsRef<str>>(request: &Request<C>) -> Option<String> {
    for text in request.texts() {
        if text.is_empty() {
            return Some(format!(
                "a `{}` request has an empty field",
                request.kind.name()
            ));
        }
        if text.chars().any(char::is_control) {
            return Some(format!(
                "a `{}` request has a control character in `{}`",
                request.kind.name(),
                text.escape_default()
            ));
        }
    }
    None
}

fn delegation(snapshot: &Snapshot, actor: &Actor, target: &str) -> Decision {
    if !snapshot.actors.contains_key(target) {
        return Decision::deny(
            DenyCode::UnknownTarget,
            format!("actor `{target}` is not defined"),
        );
    }
    if actor.delegates_to.iter().any(|t| t == target) {
        return Decision::allow(format!("`{target}` is in `delegates_to`"));
    }
    Decision::deny(
        DenyCode::DelegationNotAllowed,
        format!("`{target}` is not in `delegates_to`"),
    )
}

/// The private scope of an actor.
pub fn private_scope(actor: &str) -> String {
    format!("private:{actor}")
}

fn memory(name: &str, actor: &Actor, scope: &str) -> Decision {
    if let Some(owner) = scope.strip_prefix("private:") {
        if owner == name {
            return Decision::allow("an actor's own private scope");
        }
        return Decision::deny(
            DenyCode::PrivateMemoryDenied,
            format!("`{scope}` is the private scope of `{owner}`"),
        );
    }
    if actor.memory.iter().any(|s| s == scope) {
        return Decision::allow(format!("`{scope}` is one of the actor's memory scopes"));
    }
    Decision::deny(
        DenyCode::MemoryNotGranted,
        format!("memory scope `{scope}` is not granted"),
    )
}

/// Whether `path` is `root` or below it (both canonical).
pub fn is_within(path: &str, root: &str) -> bool {
    if root == "/" {
        return path.starts_with('/');
    }
    path == root || (path.starts_with(root) && path.as_bytes().get(root.len()) == Some(&b'/'))
}

/// Whether `path` is absolute and normalized: no `.`, `..` or empty
/// segment (`//`, a trailing `/`). A resolver's output always is; a path
/// that is not was never resolved, and comparing it with a root as text
/// would let `/ws/../etc` pass as under `/ws`. (That it holds no symlink
/// cannot be checked here: that is the resolver's promise.)
pub fn is_normalized(path: &str) -> bool {
    match path.strip_prefix('/') {
        None => false,
        Some("") => true,
        Some(rest) => rest
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != ".."),
    }
}

fn workspace(snapshot: &Snapshot, actor: &Actor, path: &ResolvedPath, access: Access) -> Decision {
    let path = match path {
        ResolvedPath::Resolved(p) if is_normalized(p) => p.as_str(),
        ResolvedPath::Resolved(p) => {
            return Decision::deny(
                DenyCode::PathResolutionFailed,
                format!("`{p}` is not an absolute canonical path (no `.`, `..` or empty segment)"),
            )
        }
        ResolvedPath::Failed { input, reason } => {
            return Decision::deny(
                DenyCode::PathResolutionFailed,
                format!("`{input}` could not be resolved: {reason}"),
            )
        }
    };
    if access == Access::Write {
        if let Some(p) = snapshot
            .roots
            .protected
            .iter()
            .find(|p| is_within(path, &p.path))
        {
            return Decision::deny(
                p.kind.write_code(),
                format!(
                    "`{path}` is host configuration (`{}`); no executor may write it",
                    p.path
                ),
            );
        }
    }
    if access == Access::Read {
        if let Some(p) = snapshot
            .roots
            .protected
            .iter()
            .find(|p| p.kind == ProtectedKind::State && is_within(path, &p.path))
        {
            return Decision::deny(
                DenyCode::HostStateHidden,
                format!(
                    "`{path}` is the host's own state (`{}`); no executor may read it",
                    p.path
                ),
            );
        }
    }
    // The most specific root decides its mode.
    let root = actor
        .workspaces
        .iter()
        .filter(|r| is_within(path, &r.path))
        .max_by_key(|r| r.path.len());
    let Some(root) = root else {
        return Decision::deny(
            DenyCode::WorkspaceNotGranted,
            format!("`{path}` is under none of the actor's workspace roots"),
        );
    };
    if let Some(turn) = &snapshot.roots.turn_workspace {
        if !is_within(path, turn) {
            return Decision::deny(
                DenyCode::WorkspaceScopeMismatch,
                format!(
                    "`{path}` is under root `{}` but outside this turn's workspace `{turn}`",
                    root.path
                ),
            );
        }
    }
    if access == Access::Write && root.mode == WorkspaceMode::ReadOnly {
        return Decision::deny(
            DenyCode::WorkspaceReadOnly,
            format!("root `{}` is read-only", root.path),
        );
    }
    Decision::allow(format!("`{path}` is under root `{}`", root.path))
}

fn configuration(subject: ConfigSubject, what: &str) -> Decision {
    match subject {
        ConfigSubject::Policy => Decision::deny(
            DenyCode::PolicyMutationDenied,
            format!("`{what}` is policy; no executor may change it"),
        ),
        ConfigSubject::Definition => Decision::deny(
            DenyCode::DefinitionMutationDenied,
            format!("`{what}` is a definition; no executor may change it"),
        ),
    }
}

/// Whether `program` is one of `tools`: a tool granted by full path is
/// that path only; a tool granted by name is that name, bare or in one of
/// the directories the exec layer resolves names from
/// ([`command::PROGRAM_DIRS`]). Any other path is another program, even
/// with the same basename (`/tmp/evil/ls` is not `ls`). Pure: which file
/// a name resolves to is the exec layer's business (it runs exactly that
/// file, and a path a guest gives must be the same file).
fn tool_granted(tools: &[String], program: &str) -> bool {
    let name = command::standard_name(program);
    tools.iter().any(|t| {
        if t.contains('/') {
            t == program
        } else {
            name == Some(t.as_str())
        }
    })
}

fn tool_request(actor: &Actor, tool: &str, cmd: Option<&str>) -> Decision {
    // Layer 1: raw runtime tools, by name or inside the command.
    if command::is_raw_runtime_tool(tool) {
        return Decision::deny(
            DenyCode::RawRuntimeToolDenied,
            format!("`{tool}` is a raw runtime tool"),
        );
    }
    // The host's own program, whatever the actor's tools say: it could
    // approve its own turns or change grants and configuration.
    if command::is_host_program(tool) {
        return Decision::deny(
            DenyCode::PolicyMutationDenied,
            format!("`{tool}` is this host's own program: no command may run it"),
        );
    }
    // Split and looked through once; every layer reads the same result.
    let screened = cmd.map(|c| (c, command::screen(c)));
    if let Some(host) = screened
        .as_ref()
        .and_then(|(c, s)| command::host_program_in(c, s))
    {
        return Decision::deny(
            DenyCode::PolicyMutationDenied,
            format!("the command runs `{host}`, this host's own program"),
        );
    }
    if let Some(raw) = screened
        .as_ref()
        .and_then(|(c, s)| command::raw_runtime_in(c, s))
    {
        return Decision::deny(
            DenyCode::RawRuntimeToolDenied,
            format!("the command runs raw runtime tool `{raw}`"),
        );
    }
    // Layer 2: commands whose meaning cannot be read off their text.
    if let Some(construct) = screened
        .as_ref()
        .and_then(|(c, s)| command::indirect_in(c, s))
    {
        return Decision::deny(
            DenyCode::IndirectToolRequest,
            format!("the command uses {construct}"),
        );
    }
    // Layer 3: MCP tools need their server.
    if let Some(rest) = tool.strip_prefix("mcp__") {
        return mcp_tool(actor, tool, rest);
    }
    // Layer 4: the tool, and every program the command runs, must be granted.
    if !tool_granted(&actor.tools, tool) {
        return Decision::deny(
            DenyCode::ToolNotGranted,
            format!("tool `{tool}` is not granted"),
        );
    }
    if let Some((_, screened)) = &screened {
        if let Some(denied) = programs_not_granted(actor, screened) {
            return denied;
        }
    }
    Decision::allow(format!("tool `{tool}` is granted"))
}

/// Layer 3 for an MCP tool (`mcp__<server>__<tool>`, `rest` after the
/// prefix): allowed when the actor has its server.
fn mcp_tool(actor: &Actor, tool: &str, rest: &str) -> Decision {
    let server = rest.split("__").next().unwrap_or_default();
    if !server.is_empty() && rest.len() > server.len() + 2 {
        if actor.mcp_servers.iter().any(|s| s == server) {
            return Decision::allow(format!("mcp server `{server}` is granted"));
        }
        return Decision::deny(
            DenyCode::McpServerNotGranted,
            format!("mcp server `{server}` of tool `{tool}` is not granted"),
        );
    }
    Decision::deny(
        DenyCode::UnknownRequest,
        format!("`{tool}` is not of the form `mcp__<server>__<tool>`"),
    )
}

/// Layer 4 for the command: the denial when it cannot be split, or runs a
/// program (or a privileged wrapper) the actor was not granted.
fn programs_not_granted(
    actor: &Actor,
    screened: &Result<command::ScreenedCommand, command::LexError>,
) -> Option<Decision> {
    let screened = match screened {
        Ok(s) => s,
        Err(command::LexError(why)) => {
            return Some(Decision::deny(
                DenyCode::IndirectToolRequest,
                format!("the command cannot be split ({why})"),
            ))
        }
    };
    for inv in &screened.invocations {
        for program in inv
            .privileged_wrappers
            .iter()
            .chain(std::iter::once(&inv.program))
        {
            if !tool_granted(&actor.tools, program) {
                return Some(Decision::deny(
                    DenyCode::ToolNotGranted,
                    format!("the command runs `{program}`, which is not granted"),
                ));
            }
        }
    }
    None
}

/// `parts` joined, in one allocation: the reasons every allowed turn
/// carries are built without the formatting machinery.
fn concat(parts: &[&str]) -> String {
    let mut s = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        s.push_str(p);
    }
    s
}

fn by_name(granted: &[String], name: &str, wildcard: bool, code: DenyCode, what: &str) -> Decision {
    if granted.iter().any(|g| g == name || (wildcard && g == "*")) {
        return Decision::allow(concat(&[what, " `", name, "` is granted"]));
    }
    Decision::deny(code, format!("{what} `{name}` is not granted"))
}

/// Checks a capability's target against its kind; the error says why.
pub fn check_target(capability: Capability, target: Option<&str>) -> Result<(), String> {
    match (capability.target_kind(), target) {
        (TargetKind::None, None) => Ok(()),
        (TargetKind::None, Some(t)) => Err(TargetError::Unexpected {
            capability: capability.to_string(),
            value: t.to_string(),
        }
        .to_string()),
        (kind, None) => Err(format!("`{capability}` needs a `{}` target", kind.as_str())),
        (kind, Some(t)) => TargetPattern::parse(kind, t)
            .map(|_| ())
            .map_err(|e| e.to_string()),
    }
}

/// The segments of a path glob from its first wildcard on (none for a
/// literal path): what canonicalizing its literal directory keeps.
fn wildcard_tail(glob: &str) -> impl Iterator<Item = &str> {
    glob.split('/').skip_while(|s| !s.contains(['*', '?']))
}

/// Why `canonical` cannot stand for `target` (a path glob already
/// checked): it must be an absolute, normalized glob with the same
/// wildcards.
fn canonical_problem(
    capability: Capability,
    target: Option<&str>,
    canonical: &str,
) -> Option<Decision> {
    let Some(target) = target.filter(|_| capability.target_kind() == TargetKind::PathGlob) else {
        return Some(Decision::deny(
            DenyCode::UnknownRequest,
            format!("`{capability}` has no path glob target to be canonical for"),
        ));
    };
    if let Err(e) = TargetPattern::parse(TargetKind::PathGlob, canonical) {
        return Some(Decision::deny(
            DenyCode::PathResolutionFailed,
            format!("the canonical target is not an absolute, normalized glob: {e}"),
        ));
    }
    if !wildcard_tail(canonical).eq(wildcard_tail(target)) {
        return Some(Decision::deny(
            DenyCode::TargetMismatch,
            format!("the canonical target `{canonical}` does not keep the wildcards of `{target}`"),
        ));
    }
    None
}

/// The prefix of the host's own variables: its state, its configuration,
/// a fleet's database URL with its password. No executor reads them.
pub const HOST_ENV_PREFIX: &str = "GATEHOUSE_";

/// Why `env:read` of variable `name` is refused as a host secret, if it
/// is: one of the host's own variables ([`HOST_ENV_PREFIX`]) or a
/// provider's credential (`secret_env`, every `value_env`). The gate and
/// `manifest check` apply this one rule.
pub fn secret_env_reason(secret_env: &[String], name: &str) -> Option<String> {
    if name.starts_with(HOST_ENV_PREFIX) {
        return Some(format!(
            "`{name}` is one of the host's own variables (`{HOST_ENV_PREFIX}*`); no executor may read it"
        ));
    }
    if secret_env.iter().any(|s| s == name) {
        return Some(format!(
            "`{name}` holds a provider's credential (`value_env`); no executor may read it"
        ));
    }
    None
}

/// `SECRET_ENV_DENIED` for an `env:read` of a host secret
/// ([`secret_env_reason`]). Checked before the matrix and the grants, so
/// no level, grant or approval reaches it.
fn secret_env(
    snapshot: &Snapshot,
    capability: Capability,
    target: Option<&str>,
) -> Option<Decision> {
    let name = target.filter(|_| capability == Capability::EnvRead)?;
    secret_env_reason(&snapshot.roots.secret_env, name)
        .map(|reason| Decision::deny(DenyCode::SecretEnvDenied, reason))
}

fn capability_request(
    snapshot: &Snapshot,
    actor: &Actor,
    capability: Capability,
    target: Option<&str>,
    canonical: Option<&str>,
    executor: Option<&str>,
    now: UtcTime,
) -> Decision {
    if let Err(why) = check_target(capability, target) {
        return Decision::deny(DenyCode::TargetMismatch, why);
    }
    if let Some(denied) = secret_env(snapshot, capability, target) {
        return denied;
    }
    if let Some(problem) = canonical.and_then(|c| canonical_problem(capability, target, c)) {
        return problem;
    }
    if let Some(denied) = executor.and_then(|exec| undeclared(snapshot, exec, capability, target)) {
        return denied;
    }
    let level: Level = snapshot.level;
    let empty = Default::default();
    let identity = actor.identity.as_ref().unwrap_or(&empty);
    // Grants cover where the target really is, not the name it was
    // declared by (a link may stand on the way).
    let target = canonical.or(target);
    let active = snapshot.grants.iter().filter(|g| g.is_active(now));
    let effective = effective_outcome(level, capability, target, identity, active);
    match effective.outcome {
        Outcome::Allowed => match effective.grant_id {
            Some(id) => Decision::Allow {
                reason: format!("{level} needs approval for `{capability}`; grant #{id} covers it"),
                grant: Some(id),
            },
            None => Decision::allow(concat(&[
                level.as_str(),
                " allows `",
                capability.as_str(),
                "`",
            ])),
        },
        Outcome::Denied => Decision::deny(
            DenyCode::CapabilityDenied,
            format!("{level} denies `{capability}`; no grant can change that"),
        ),
        Outcome::ApprovalRequired => Decision::ApprovalRequired {
            capability,
            target: target.map(str::to_string),
            reason: if capability.default_approval() == super::registry::ApprovalClass::Always {
                format!("`{capability}` is always-class: every use needs a fresh approval")
            } else {
                format!("{level} needs an approval for `{capability}` and no grant covers it")
            },
        },
    }
}

/// The denial when executor `exec` is not defined or does not declare
/// `capability` on `target`.
fn undeclared(
    snapshot: &Snapshot,
    exec: &str,
    capability: Capability,
    target: Option<&str>,
) -> Option<Decision> {
    let Some(def) = snapshot.executors.get(exec) else {
        return Some(Decision::deny(
            DenyCode::UnknownRequest,
            format!("executor `{exec}` is not defined"),
        ));
    };
    let declared = def.capabilities.iter().any(|d| {
        d.capability == capability
            && match (&d.target, target) {
                (None, None) => true,
                (Some(p), Some(t)) => {
                    TargetPattern::parse(capability.target_kind(), p).is_ok_and(|p| p.covers(t))
                }
                _ => false,
            }
    });
    if !declared {
        return Some(Decision::deny(
            DenyCode::TargetMismatch,
            format!(
                "executor `{exec}` does not declare `{capability}` on `{}`",
                target.unwrap_or("-")
            ),
        ));
    }
    None
}
