//! The fixed shapes of requests the gate answers.
//!
//! A request arrives as JSON (`{"kind": "...", "actor": "...", ...}`) or is
//! built by the host. Anything that does not parse into one of these shapes
//! is `UNKNOWN_REQUEST` (see [`super::decide_json`]).

use serde::{Deserialize, Serialize};

/// A path as the resolver left it: canonical, or the reason it is not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolvedPath {
    /// Canonical and absolute: symlinks resolved, no `.`/`..`.
    Resolved(String),
    /// Neither the path nor its parent could be canonicalized.
    Failed { input: String, reason: String },
}

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Read,
    Write,
}

/// What a configuration request wants to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigSubject {
    /// Policy source: configuration, grants, levels.
    Policy,
    /// An actor's or executor's definition, including the asker's own.
    Definition,
}

/// The kinds of request, each answered by its own rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RequestKind {
    /// May the actor hand work to another actor?
    Delegation { target: String },
    /// May the actor use this memory scope?
    Memory { scope: String, access: Access },
    /// May the actor touch this (resolved) path?
    Workspace { path: ResolvedPath, access: Access },
    /// May the actor change the host's policy or definitions? Never.
    Configuration {
        subject: ConfigSubject,
        what: String,
    },
    /// May the actor run this tool / command?
    Tool {
        tool: String,
        #[serde(default)]
        command: Option<String>,
    },
    /// May the actor run this executor?
    Skill { skill: String },
    /// May the actor use this subagent?
    Subagent { subagent: String },
    /// May the actor use this MCP server?
    Mcp { server: String },
    /// Matrix + grants for one capability on one target; with `executor`,
    /// the target must also be within what that executor declared.
    ///
    /// `canonical_target` (path globs only) is `target` as the resolver
    /// left it: its literal directory canonicalized (symlinks resolved),
    /// its wildcards kept. Grants are matched against it, and it is what
    /// an approval is asked for; the executor's declaration is checked
    /// against `target`. The host always sets it for a path glob:
    /// resolving is I/O, done before `decide`.
    Capability {
        capability: String,
        #[serde(default)]
        target: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        canonical_target: Option<String>,
        #[serde(default)]
        executor: Option<String>,
    },
}

impl RequestKind {
    pub fn name(&self) -> &'static str {
        match self {
            RequestKind::Delegation { .. } => "delegation",
            RequestKind::Memory { .. } => "memory",
            RequestKind::Workspace { .. } => "workspace",
            RequestKind::Configuration { .. } => "configuration",
            RequestKind::Tool { .. } => "tool",
            RequestKind::Skill { .. } => "skill",
            RequestKind::Subagent { .. } => "subagent",
            RequestKind::Mcp { .. } => "mcp",
            RequestKind::Capability { .. } => "capability",
        }
    }
}

/// One request: who asks, and for what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub actor: String,
    #[serde(flatten)]
    pub kind: RequestKind,
}

impl Request {
    pub fn new(actor: impl Into<String>, kind: RequestKind) -> Request {
        Request {
            actor: actor.into(),
            kind,
        }
    }

    /// The text fields of the request, for the shape check in `decide`.
    pub(super) fn texts(&self) -> Vec<&str> {
        let mut out = vec![self.actor.as_str()];
        match &self.kind {
            RequestKind::Delegation { target } => out.push(target),
            RequestKind::Memory { scope, .. } => out.push(scope),
            RequestKind::Workspace { path, .. } => match path {
                ResolvedPath::Resolved(p) => out.push(p),
                ResolvedPath::Failed { input, .. } => out.push(input),
            },
            RequestKind::Configuration { what, .. } => out.push(what),
            RequestKind::Tool { tool, .. } => out.push(tool),
            RequestKind::Skill { skill } => out.push(skill),
            RequestKind::Subagent { subagent } => out.push(subagent),
            RequestKind::Mcp { server } => out.push(server),
            RequestKind::Capability {
                capability,
                canonical_target,
                ..
            } => {
                out.push(capability);
                out.extend(canonical_target.as_deref());
            }
        }
        out
    }
}
