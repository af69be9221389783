//! Every deny code gatehouse can return, in one place.
//!
//! The strings are stable: tests, logs and callers match on them. Adding a
//! code means adding a variant, its string, its meaning and a test that
//! produces it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DenyCode {
    /// `UNKNOWN_REQUEST`: the request does not have a known kind or shape; anything not
    /// explicitly handled is refused.
    UnknownRequest,
    /// `UNKNOWN_ACTOR`: the asking actor is not defined in the host configuration.
    UnknownActor,
    /// `UNKNOWN_TARGET`: the actor to delegate to is not defined in the host configuration.
    UnknownTarget,
    /// `DELEGATION_NOT_ALLOWED`: the target actor is not in the asking actor's
    /// `delegates_to`.
    DelegationNotAllowed,
    /// `PRIVATE_MEMORY_DENIED`: the memory scope is another actor's private scope.
    PrivateMemoryDenied,
    /// `MEMORY_NOT_GRANTED`: the memory scope is not one of the actor's memory scopes.
    MemoryNotGranted,
    /// `WORKSPACE_NOT_GRANTED`: the resolved path is under none of the actor's workspace
    /// roots.
    WorkspaceNotGranted,
    /// `WORKSPACE_READ_ONLY`: a write to a path under a workspace root granted read-only.
    WorkspaceReadOnly,
    /// `WORKSPACE_SCOPE_MISMATCH`: the resolved path is under an actor root but outside
    /// this turn's workspace.
    WorkspaceScopeMismatch,
    /// `PATH_RESOLUTION_FAILED`: the path could not be canonicalized (neither it nor its
    /// parent resolves).
    PathResolutionFailed,
    /// `POLICY_MUTATION_DENIED`: a write to the host's policy: configuration, grants
    /// database or history.
    PolicyMutationDenied,
    /// `DEFINITION_MUTATION_DENIED`: a write to an actor or executor definition (manifests,
    /// executor directories).
    DefinitionMutationDenied,
    /// `RAW_RUNTIME_TOOL_DENIED`: the tool or a command segment invokes a raw agent runtime
    /// (herdr, paseo, create_agent, spawn_agent).
    RawRuntimeToolDenied,
    /// `INDIRECT_TOOL_REQUEST`: the command hides what it runs (eval, backticks, $(...),
    /// process substitution, base64, xxd, sh -c, xargs, ...).
    IndirectToolRequest,
    /// `TOOL_NOT_GRANTED`: the tool, or a program a command segment runs, is not in the
    /// actor's tools.
    ToolNotGranted,
    /// `SKILL_NOT_GRANTED`: the actor may not run this executor.
    SkillNotGranted,
    /// `SUBAGENT_NOT_GRANTED`: the actor may not use this subagent.
    SubagentNotGranted,
    /// `MCP_SERVER_NOT_GRANTED`: the actor may not use this MCP server (also for
    /// `mcp__<server>__<tool>` tools).
    McpServerNotGranted,
    /// `CAPABILITY_UNKNOWN`: the capability name is not in the closed registry.
    CapabilityUnknown,
    /// `CAPABILITY_DENIED`: the autonomy matrix denies the capability at this level; no
    /// grant can change it.
    CapabilityDenied,
    /// `TARGET_MISMATCH`: the target is missing, malformed, of the wrong kind, or outside
    /// what was declared.
    TargetMismatch,
    /// `APPROVAL_REQUIRED`: the capability needs an approval and no one gave it (no
    /// terminal to ask on, or the approver queued it).
    ApprovalRequired,
    /// `APPROVAL_REFUSED`: the person asked refused the approval.
    ApprovalRefused,
    /// `SNAPSHOT_MISMATCH`: the policy snapshot differs from the policy recomputed from its
    /// sources.
    SnapshotMismatch,
    /// `DIGEST_MISMATCH`: the component's sha256 differs from the digest its manifest pins.
    DigestMismatch,
    /// `IMPORT_NOT_GRANTED`: the component imports an interface that carries authority its
    /// turn was not granted; refused before instantiation.
    ImportNotGranted,
    /// `ISOLATION_DEGRADED`: the host's isolation is degraded (see `gatehouse isolation`)
    /// and `isolation.on_degraded` refuses this turn: a critical capability under
    /// `refuse-critical`, any turn under `refuse-all`; refused before anything is built.
    IsolationDegraded,
    /// `LIMIT_MEMORY`: the guest tried to grow its linear memory past the cap.
    LimitMemory,
    /// `LIMIT_TABLE`: the guest tried to grow a table past the cap.
    LimitTable,
    /// `LIMIT_DEADLINE`: the run passed its wall-clock deadline and was interrupted.
    LimitDeadline,
    /// `LIMIT_OUTPUT`: the guest wrote more to stdout or stderr than the cap; the output
    /// was cut.
    LimitOutput,
    /// `LIMIT_HOSTCALLS`: the guest made more host calls than its hostcall fuel allows.
    LimitHostcalls,
    /// `LIMIT_RESOURCES`: the guest held more host resources (handles) than the
    /// resource-table cap.
    LimitResources,
    /// `LIMIT_JOURNAL`: the change would back up more bytes than the turn's journal cap
    /// (`[limits] journal_mib`, default 256); refused before anything changed.
    LimitJournal,
    /// `LIMIT_MEMORY_KEYS`: a new memory key would pass the scope's cap on keys (`[limits]
    /// memory_keys`, default 10000); nothing was stored.
    LimitMemoryKeys,
    /// `TURN_CANCELLED`: the turn was cancelled through its cancel handle and interrupted
    /// like a deadline.
    TurnCancelled,
    /// `HOST_STATE_HIDDEN`: a read of the host's own state (grants and memory databases,
    /// history and its blobs, audit logs, cache): no executor may read it, whatever root
    /// holds it.
    HostStateHidden,
    /// `NETWORK_NOT_GRANTED`: an HTTP request whose scheme, host, port, path or method no
    /// `network:sites` grant of the turn covers; nothing was sent.
    NetworkNotGranted,
    /// `LIMIT_HTTP_REQUESTS`: the turn made more HTTP requests than its cap (`[limits]
    /// http_requests`, default 100); the one past it was not sent.
    LimitHttpRequests,
    /// `STATE_UNAVAILABLE`: the shared state the turn needs (a fleet's PostgreSQL: its
    /// grants, its audit) could not be reached or refused; nothing was run.
    StateUnavailable,
    /// `LIMIT_HTTP_RESPONSE`: the turn's HTTP responses passed their cap on bytes
    /// (`[limits] http_response_mib`, default 64); the body was cut.
    LimitHttpResponse,
    /// `SECRET_ENV_DENIED`: `env:read` of a variable that holds a host secret or
    /// setting: a configured provider's `value_env`, or any `GATEHOUSE_*` variable;
    /// refused at the gate at every level, whatever a grant says.
    SecretEnvDenied,
    /// `CALLER_NOT_MAPPED`: the account connecting to `gatehouse daemon` (its socket
    /// peer's uid) is in no actor's `uids`.
    CallerNotMapped,
    /// `ANSWER_NOT_A_PERSON`: an approval answer over the daemon's socket came from an
    /// account not in `[approvals] people`.
    AnswerNotAPerson,
    /// `ANSWER_BY_ITS_ACTOR`: an approval answer over the daemon's socket came from an
    /// account of the actor whose turn waits for it.
    AnswerByItsActor,
}

/// Which part of the gate produces a code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CodeFamily {
    /// Checked before dispatching on the request kind.
    Gate,
    /// Delegation requests: an unknown target actor, or one the asking actor may not
    /// delegate to.
    Delegation,
    /// Memory requests: a scope that is another actor's private one or not granted.
    Memory,
    /// Filesystem paths: outside the workspace roots, read-only, outside the turn's
    /// workspace, or unresolvable.
    Workspace,
    /// Writes to the host's policy or definitions, and reads of the host's own state.
    Configuration,
    /// Tool requests and commands: raw agent runtimes, hidden commands, tools not granted.
    Tool,
    /// Running an executor (a skill) the actor may not run.
    Skill,
    /// Using a subagent the actor may not use.
    Subagent,
    /// Using an MCP server the actor may not use.
    Mcp,
    /// Capabilities: the registry, the autonomy matrix, targets, approvals and network
    /// grants.
    Capability,
    /// The policy snapshot against its sources.
    Snapshot,
    /// The component: its digest and the interfaces it imports.
    Component,
    /// The host's isolation report: a layer is degraded and the
    /// configuration refuses the turn while it is.
    Isolation,
    /// A limit of the sandbox stopped the run.
    Limit,
    /// The host's shared state (a fleet's database) could not be used.
    State,
    /// The daemon's socket: who connects, and who may answer an approval.
    Channel,
}

impl CodeFamily {
    /// The stable snake_case name of the family, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            CodeFamily::Gate => "gate",
            CodeFamily::Delegation => "delegation",
            CodeFamily::Memory => "memory",
            CodeFamily::Workspace => "workspace",
            CodeFamily::Configuration => "configuration",
            CodeFamily::Tool => "tool",
            CodeFamily::Skill => "skill",
            CodeFamily::Subagent => "subagent",
            CodeFamily::Mcp => "mcp",
            CodeFamily::Capability => "capability",
            CodeFamily::Snapshot => "snapshot",
            CodeFamily::Component => "component",
            CodeFamily::Isolation => "isolation",
            CodeFamily::Limit => "limit",
            CodeFamily::State => "state",
            CodeFamily::Channel => "channel",
        }
    }
}

use DenyCode as D;

impl DenyCode {
    /// Every code, in documentation order (a code added later comes
    /// after the ones before it, so the order of the older ones holds).
    pub const ALL: [DenyCode; 45] = [
        D::UnknownRequest,
        D::UnknownActor,
        D::UnknownTarget,
        D::DelegationNotAllowed,
        D::PrivateMemoryDenied,
        D::MemoryNotGranted,
        D::WorkspaceNotGranted,
        D::WorkspaceReadOnly,
        D::WorkspaceScopeMismatch,
        D::PathResolutionFailed,
        D::PolicyMutationDenied,
        D::DefinitionMutationDenied,
        D::RawRuntimeToolDenied,
        D::IndirectToolRequest,
        D::ToolNotGranted,
        D::SkillNotGranted,
        D::SubagentNotGranted,
        D::McpServerNotGranted,
        D::CapabilityUnknown,
        D::CapabilityDenied,
        D::TargetMismatch,
        D::ApprovalRequired,
        D::ApprovalRefused,
        D::SnapshotMismatch,
        D::DigestMismatch,
        D::ImportNotGranted,
        D::IsolationDegraded,
        D::LimitMemory,
        D::LimitTable,
        D::LimitDeadline,
        D::LimitOutput,
        D::LimitHostcalls,
        D::LimitResources,
        D::LimitJournal,
        D::TurnCancelled,
        D::HostStateHidden,
        D::LimitMemoryKeys,
        D::NetworkNotGranted,
        D::LimitHttpRequests,
        D::LimitHttpResponse,
        D::StateUnavailable,
        D::SecretEnvDenied,
        D::CallerNotMapped,
        D::AnswerNotAPerson,
        D::AnswerByItsActor,
    ];

    /// The stable string of the code.
    pub fn as_str(self) -> &'static str {
        self.row().0
    }

    /// The part of the gate that produces it.
    pub fn family(self) -> CodeFamily {
        self.row().1
    }

    /// One line saying what the code means.
    pub fn meaning(self) -> &'static str {
        self.row().2
    }

    /// The code whose stable string is `name`, or `None` if no code has it.
    pub fn from_name(name: &str) -> Option<DenyCode> {
        DenyCode::ALL.into_iter().find(|c| c.as_str() == name)
    }

    fn row(self) -> (&'static str, CodeFamily, &'static str) {
        use CodeFamily as F;
        match self {
            D::UnknownRequest => ("UNKNOWN_REQUEST", F::Gate, "the request does not have a known kind or shape; anything not explicitly handled is refused"),
            D::UnknownActor => ("UNKNOWN_ACTOR", F::Gate, "the asking actor is not defined in the host configuration"),
            D::UnknownTarget => ("UNKNOWN_TARGET", F::Delegation, "the actor to delegate to is not defined in the host configuration"),
            D::DelegationNotAllowed => ("DELEGATION_NOT_ALLOWED", F::Delegation, "the target actor is not in the asking actor's `delegates_to`"),
            D::PrivateMemoryDenied => ("PRIVATE_MEMORY_DENIED", F::Memory, "the memory scope is another actor's private scope"),
            D::MemoryNotGranted => ("MEMORY_NOT_GRANTED", F::Memory, "the memory scope is not one of the actor's memory scopes"),
            D::WorkspaceNotGranted => ("WORKSPACE_NOT_GRANTED", F::Workspace, "the resolved path is under none of the actor's workspace roots"),
            D::WorkspaceReadOnly => ("WORKSPACE_READ_ONLY", F::Workspace, "a write to a path under a workspace root granted read-only"),
            D::WorkspaceScopeMismatch => ("WORKSPACE_SCOPE_MISMATCH", F::Workspace, "the resolved path is under an actor root but outside this turn's workspace"),
            D::PathResolutionFailed => ("PATH_RESOLUTION_FAILED", F::Workspace, "the path could not be canonicalized (neither it nor its parent resolves)"),
            D::PolicyMutationDenied => ("POLICY_MUTATION_DENIED", F::Configuration, "a write to the host's policy: configuration, grants database or history"),
            D::DefinitionMutationDenied => ("DEFINITION_MUTATION_DENIED", F::Configuration, "a write to an actor or executor definition (manifests, executor directories)"),
            D::HostStateHidden => ("HOST_STATE_HIDDEN", F::Configuration, "a read of the host's own state (grants and memory databases, history and its blobs, audit logs, cache): no executor may read it, whatever root holds it"),
            D::RawRuntimeToolDenied => ("RAW_RUNTIME_TOOL_DENIED", F::Tool, "the tool or a command segment invokes a raw agent runtime (herdr, paseo, create_agent, spawn_agent)"),
            D::IndirectToolRequest => ("INDIRECT_TOOL_REQUEST", F::Tool, "the command hides what it runs (eval, backticks, $(...), process substitution, base64, xxd, sh -c, xargs, ...)"),
            D::ToolNotGranted => ("TOOL_NOT_GRANTED", F::Tool, "the tool, or a program a command segment runs, is not in the actor's tools"),
            D::SkillNotGranted => ("SKILL_NOT_GRANTED", F::Skill, "the actor may not run this executor"),
            D::SubagentNotGranted => ("SUBAGENT_NOT_GRANTED", F::Subagent, "the actor may not use this subagent"),
            D::McpServerNotGranted => ("MCP_SERVER_NOT_GRANTED", F::Mcp, "the actor may not use this MCP server (also for `mcp__<server>__<tool>` tools)"),
            D::CapabilityUnknown => ("CAPABILITY_UNKNOWN", F::Capability, "the capability name is not in the closed registry"),
            D::CapabilityDenied => ("CAPABILITY_DENIED", F::Capability, "the autonomy matrix denies the capability at this level; no grant can change it"),
            D::TargetMismatch => ("TARGET_MISMATCH", F::Capability, "the target is missing, malformed, of the wrong kind, or outside what was declared"),
            D::ApprovalRequired => ("APPROVAL_REQUIRED", F::Capability, "the capability needs an approval and no one gave it (no terminal to ask on, or the approver queued it)"),
            D::ApprovalRefused => ("APPROVAL_REFUSED", F::Capability, "the person asked refused the approval"),
            D::SnapshotMismatch => ("SNAPSHOT_MISMATCH", F::Snapshot, "the policy snapshot differs from the policy recomputed from its sources"),
            D::DigestMismatch => ("DIGEST_MISMATCH", F::Component, "the component's sha256 differs from the digest its manifest pins"),
            D::ImportNotGranted => ("IMPORT_NOT_GRANTED", F::Component, "the component imports an interface that carries authority its turn was not granted; refused before instantiation"),
            D::IsolationDegraded => ("ISOLATION_DEGRADED", F::Isolation, "the host's isolation is degraded (see `gatehouse isolation`) and `isolation.on_degraded` refuses this turn: a critical capability under `refuse-critical`, any turn under `refuse-all`; refused before anything is built"),
            D::LimitMemory => ("LIMIT_MEMORY", F::Limit, "the guest tried to grow its linear memory past the cap"),
            D::LimitTable => ("LIMIT_TABLE", F::Limit, "the guest tried to grow a table past the cap"),
            D::LimitDeadline => ("LIMIT_DEADLINE", F::Limit, "the run passed its wall-clock deadline and was interrupted"),
            D::LimitOutput => ("LIMIT_OUTPUT", F::Limit, "the guest wrote more to stdout or stderr than the cap; the output was cut"),
            D::LimitHostcalls => ("LIMIT_HOSTCALLS", F::Limit, "the guest made more host calls than its hostcall fuel allows"),
            D::LimitResources => ("LIMIT_RESOURCES", F::Limit, "the guest held more host resources (handles) than the resource-table cap"),
            D::LimitMemoryKeys => ("LIMIT_MEMORY_KEYS", F::Limit, "a new memory key would pass the scope's cap on keys (`[limits] memory_keys`, default 10000); nothing was stored"),
            D::LimitJournal => ("LIMIT_JOURNAL", F::Limit, "the change would back up more bytes than the turn's journal cap (`[limits] journal_mib`, default 256); refused before anything changed"),
            D::NetworkNotGranted => ("NETWORK_NOT_GRANTED", F::Capability, "an HTTP request whose scheme, host, port, path or method no `network:sites` grant of the turn covers; nothing was sent"),
            D::LimitHttpRequests => ("LIMIT_HTTP_REQUESTS", F::Limit, "the turn made more HTTP requests than its cap (`[limits] http_requests`, default 100); the one past it was not sent"),
            D::LimitHttpResponse => ("LIMIT_HTTP_RESPONSE", F::Limit, "the turn's HTTP responses passed their cap on bytes (`[limits] http_response_mib`, default 64); the body was cut"),
            D::SecretEnvDenied => ("SECRET_ENV_DENIED", F::Configuration, "`env:read` of a variable that holds a host secret or setting: a configured provider's `value_env`, or any `GATEHOUSE_*` variable; refused at the gate at every level, whatever a grant says"),
            D::CallerNotMapped => ("CALLER_NOT_MAPPED", F::Channel, "the account connecting to `gatehouse daemon` (its socket peer's uid) is in no actor's `uids`"),
            D::AnswerNotAPerson => ("ANSWER_NOT_A_PERSON", F::Channel, "an approval answer over the daemon's socket came from an account not in `[approvals] people` (by default the daemon's own)"),
            D::AnswerByItsActor => ("ANSWER_BY_ITS_ACTOR", F::Channel, "an approval answer over the daemon's socket came from an account of the actor whose turn waits for it, listed in `people` or not"),
            D::StateUnavailable => ("STATE_UNAVAILABLE", F::State, "the shared state the turn needs (a fleet's PostgreSQL: its grants, its audit) could not be reached or refused; nothing was run"),
            D::TurnCancelled => ("TURN_CANCELLED", F::Limit, "the turn was cancelled through its cancel handle and interrupted like a deadline"),
        }
    }
}

impl fmt::Display for DenyCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for DenyCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for DenyCode {
    fn deserialize<D2: serde::Deserializer<'de>>(d: D2) -> Result<Self, D2::Error> {
        let name = String::deserialize(d)?;
        DenyCode::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown deny code `{name}`")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_unique_and_round_trip() {
        let mut seen = std::collections::BTreeSet::new();
        for code in DenyCode::ALL {
            assert!(seen.insert(code.as_str()), "duplicate {code}");
            assert_eq!(DenyCode::from_name(code.as_str()), Some(code));
            assert!(code
                .as_str()
                .chars()
                .all(|c| c.is_ascii_uppercase() || c == '_'));
            assert!(!code.meaning().is_empty());
        }
    }
}
