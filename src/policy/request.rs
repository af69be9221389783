//! The fixed shapes of requests the gate answers.
//!
//! A request arrives as JSON (`{"kind": "...", "actor": "...", ...}`) or is
//! built by the host. Anything that does not parse into one of these shapes
//! is `UNKNOWN_REQUEST` (see [`super::decide_json`]).
//!
//! The host builds a [`Request`], whose capability request carries a
//! [`Capability`] of the registry. JSON names its capability by a string
//! that may be in no registry: it parses into a [`JsonRequest`] (the same
//! shapes, the capability still a name), which [`super::decide_json`]
//! turns into a `Request` ([`JsonRequest::typed`]) or answers
//! `CAPABILITY_UNKNOWN`. Both serialize alike.

use serde::{Deserialize, Serialize};

use super::registry::Capability;

/// A path as the resolver left it: canonical, or the reason it is not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolvedPath {
    /// Canonical and absolute: symlinks resolved, no `.`/`..`.
    Resolved(String),
    /// Neither the path nor its parent could be canonicalized.
    Failed {
        /// The path as asked for.
        input: String,
        /// Why neither it nor its parent resolved.
        reason: String,
    },
}

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Reading: a read-only root is enough.
    Read,
    /// Writing: needs a read-write root, and never a protected path.
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
///
/// `C` is how a capability request names its capability: a [`Capability`]
/// inside the host, a `String` as JSON gives it ([`JsonRequest`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RequestKind<C = Capability> {
    /// May the actor hand work to another actor?
    Delegation {
        /// The actor to hand the work to.
        target: String,
    },
    /// May the actor use this memory scope?
    Memory {
        /// The memory scope (`private:<name>`, or a shared scope name).
        scope: String,
        /// Whether the scope is read or written.
        access: Access,
    },
    /// May the actor touch this (resolved) path?
    Workspace {
        /// The path, as the resolver left it.
        path: ResolvedPath,
        /// Whether the path is read or written.
        access: Access,
    },
    /// May the actor change the host's policy or definitions? Never.
    Configuration {
        /// Policy or definition.
        subject: ConfigSubject,
        /// What would be changed, for the reason given with the denial.
        what: String,
    },
    /// May the actor run this tool / command?
    Tool {
        /// The tool's name (a program basename, a full path, or an agent tool).
        tool: String,
        /// The command line it runs, if any; every segment is screened.
        #[serde(default)]
        command: Option<String>,
    },
    /// May the actor run this executor?
    Skill {
        /// The executor's name.
        skill: String,
    },
    /// May the actor use this subagent?
    Subagent {
        /// The subagent's name.
        subagent: String,
    },
    /// May the actor use this MCP server?
    Mcp {
        /// The MCP server's name.
        server: String,
    },
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
        /// The capability (as JSON gives it, a name; one outside the
        /// registry is `CAPABILITY_UNKNOWN`).
        capability: C,
        /// The target the capability is used on, if its kind takes one.
        #[serde(default)]
        target: Option<String>,
        /// `target` with its literal directory canonicalized (path globs only); see above.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        canonical_target: Option<String>,
        /// The executor whose declaration must cover the target, if any.
        #[serde(default)]
        executor: Option<String>,
    },
}

impl<C> RequestKind<C> {
    /// The kind's stable snake_case name (`delegation`, `memory`, …).
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

/// One request: who asks, and for what. `C` as in [`RequestKind`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request<C = Capability> {
    /// The name of the actor asking.
    pub actor: String,
    /// What it asks for.
    #[serde(flatten)]
    pub kind: RequestKind<C>,
}

/// A request as JSON gives it: a capability request names its capability,
/// which may be in no registry.
pub type JsonRequest = Request<String>;

impl<C> Request<C> {
    /// A request by `actor` of `kind`.
    pub fn new(actor: impl Into<String>, kind: RequestKind<C>) -> Request<C> {
        Request {
            actor: actor.into(),
            kind,
        }
    }
}

impl JsonRequest {
    /// The request with its capability's name looked up in the registry;
    /// a name not in it is given back as the error.
    pub fn typed(self) -> Result<Request, String> {
        use RequestKind as K;
        let kind = match self.kind {
            K::Delegation { target } => K::Delegation { target },
            K::Memory { scope, access } => K::Memory { scope, access },
            K::Workspace { path, access } => K::Workspace { path, access },
            K::Configuration { subject, what } => K::Configuration { subject, what },
            K::Tool { tool, command } => K::Tool { tool, command },
            K::Skill { skill } => K::Skill { skill },
            K::Subagent { subagent } => K::Subagent { subagent },
            K::Mcp { server } => K::Mcp { server },
            K::Capability {
                capability,
                target,
                canonical_target,
                executor,
            } => K::Capability {
                capability: Capability::from_name(&capability).ok_or(capability)?,
                target,
                canonical_target,
                executor,
            },
        };
        Ok(Request::new(self.actor, kind))
    }
}

impl<C: AsRef<str>> Request<C> {
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
                out.push(capability.as_ref());
                out.extend(canonical_target.as_deref());
            }
        }
        out
    }
}
