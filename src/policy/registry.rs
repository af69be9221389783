//! The closed capability registry.
//!
//! Every action an executor can be granted is one of these entries.
//! There is no runtime registration: adding a capability means adding a
//! variant here and a row to [`REGISTRY`], then the other files the book's
//! recipe lists (`docs/src/internals/adding-a-capability.md`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How a capability is approved by default; the input of the matrix rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalClass {
    /// Needs no approval (still subject to the level's rule for critical ones).
    None,
    /// Approved per target; a remembered grant can stand in for the approval.
    PerTarget,
    /// Every use needs a fresh approval; never satisfied by a grant.
    Always,
}

impl ApprovalClass {
    /// The stable lowercase name used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalClass::None => "none",
            ApprovalClass::PerTarget => "per_target",
            ApprovalClass::Always => "always",
        }
    }
}

/// What a capability's target names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// An absolute path glob (`/home/a/notes/**`).
    PathGlob,
    /// A host name or IP with an optional port (`example.com`,
    /// `localhost:8080`), or a URL pattern (`https://api.example.com/v1/**`).
    Host,
    /// An exact name (an environment variable, a memory scope, an executor).
    Exact,
    /// The capability takes no target.
    None,
}

impl TargetKind {
    /// The stable lowercase name used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::PathGlob => "path_glob",
            TargetKind::Host => "host",
            TargetKind::Exact => "exact",
            TargetKind::None => "none",
        }
    }
}

/// One capability of the closed registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// `compute:pure`: the executor's own code; always available.
    ComputePure,
    /// `time:read`: real wall and monotonic clocks (without it, a frozen clock).
    TimeRead,
    /// `env:read`: named environment variables only.
    EnvRead,
    /// `fs:read`: a read-only preopen.
    FsRead,
    /// `fs:write`: a read-write preopen, journaled for undo.
    FsWrite,
    /// `network:sites`: name lookup, connections and HTTP to a host or under a URL pattern.
    NetworkSites,
    /// `memory:read`: the host key-value memory, one scope.
    MemoryRead,
    /// `memory:write`: writes to the host key-value memory, reversible by id.
    MemoryWrite,
    /// `human:ask`: ask the person a question.
    HumanAsk,
    /// `delegate:call`: call another executor by name.
    DelegateCall,
    /// `code:exec`: run a host command in the OS sandbox.
    CodeExec,
    /// `system:admin`: change the host's own configuration.
    SystemAdmin,
    /// `provider:access`: the host adds a provider's credential to HTTP requests under its
    /// base URL; the guest never sees it.
    ProviderAccess,
    /// `config:read`: one named value of the host's `[values]`, through
    /// `wasi:config/store`.
    ConfigRead,
}

/// The registry row of a capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapabilitySpec {
    /// The capability this row describes.
    pub capability: Capability,
    /// `family:mode`, e.g. `fs:read`.
    pub name: &'static str,
    /// Irreversible or high-stakes (write, exec, admin).
    pub critical: bool,
    /// How it is approved by default; an input of the matrix rules.
    pub default_approval: ApprovalClass,
    /// What its target names.
    pub target_kind: TargetKind,
    /// What the sandbox binds when the capability is granted.
    pub bound_to: &'static str,
}

const fn spec(
    capability: Capability,
    name: &'static str,
    critical: bool,
    default_approval: ApprovalClass,
    target_kind: TargetKind,
    bound_to: &'static str,
) -> CapabilitySpec {
    CapabilitySpec {
        capability,
        name,
        critical,
        default_approval,
        target_kind,
        bound_to,
    }
}

use ApprovalClass as A;
use Capability as C;
use TargetKind as T;

/// The whole registry, in its documented order.
pub const REGISTRY: [CapabilitySpec; 14] = [
    spec(
        C::ComputePure,
        "compute:pure",
        false,
        A::None,
        T::None,
        "the executor's own code; always available",
    ),
    spec(
        C::TimeRead,
        "time:read",
        false,
        A::None,
        T::None,
        "real wall and monotonic clocks (without it: a frozen clock)",
    ),
    spec(
        C::EnvRead,
        "env:read",
        false,
        A::PerTarget,
        T::Exact,
        "named environment variables only",
    ),
    spec(
        C::FsRead,
        "fs:read",
        false,
        A::PerTarget,
        T::PathGlob,
        "read-only preopen",
    ),
    spec(
        C::FsWrite,
        "fs:write",
        true,
        A::PerTarget,
        T::PathGlob,
        "read-write preopen, journaled for undo",
    ),
    spec(
        C::NetworkSites,
        "network:sites",
        false,
        A::PerTarget,
        T::Host,
        "a host pattern: name lookup, connections and HTTPS to that host only; a URL pattern: HTTP requests under it only",
    ),
    spec(
        C::MemoryRead,
        "memory:read",
        false,
        A::PerTarget,
        T::Exact,
        "host key-value memory, one namespace",
    ),
    spec(
        C::MemoryWrite,
        "memory:write",
        true,
        A::PerTarget,
        T::Exact,
        "host key-value memory writes, reversible by id",
    ),
    spec(
        C::HumanAsk,
        "human:ask",
        false,
        A::None,
        T::None,
        "ask the person a question",
    ),
    spec(
        C::DelegateCall,
        "delegate:call",
        false,
        A::PerTarget,
        T::Exact,
        "call another executor by name",
    ),
    spec(
        C::CodeExec,
        "code:exec",
        true,
        A::Always,
        T::Exact,
        "run a host command (OS-sandboxed)",
    ),
    spec(
        C::SystemAdmin,
        "system:admin",
        true,
        A::Always,
        T::None,
        "change the host's own configuration",
    ),
    spec(
        C::ProviderAccess,
        "provider:access",
        false,
        A::PerTarget,
        T::Exact,
        "the host adds a provider's credential to HTTP requests under its base URL; the guest never sees it",
    ),
    spec(
        C::ConfigRead,
        "config:read",
        false,
        A::PerTarget,
        T::Exact,
        "one named value of the host's `[values]`, through `wasi:config/store`",
    ),
];

impl Capability {
    /// Every capability, in registry order.
    pub const ALL: [Capability; 14] = [
        C::ComputePure,
        C::TimeRead,
        C::EnvRead,
        C::FsRead,
        C::FsWrite,
        C::NetworkSites,
        C::MemoryRead,
        C::MemoryWrite,
        C::HumanAsk,
        C::DelegateCall,
        C::CodeExec,
        C::SystemAdmin,
        C::ProviderAccess,
        C::ConfigRead,
    ];

    /// This capability's registry row.
    pub fn spec(self) -> &'static CapabilitySpec {
        // The registry is indexed in the same order as the enum; the test
        // `registry_rows_line_up` proves it.
        &REGISTRY[self as usize]
    }

    /// The canonical `family:mode` name.
    pub fn as_str(self) -> &'static str {
        self.spec().name
    }

    /// Whether it is irreversible or high-stakes (write, exec, admin).
    pub fn critical(self) -> bool {
        self.spec().critical
    }

    /// How it is approved by default.
    pub fn default_approval(self) -> ApprovalClass {
        self.spec().default_approval
    }

    /// What its target names.
    pub fn target_kind(self) -> TargetKind {
        self.spec().target_kind
    }

    /// Looks a name up in the closed registry.
    pub fn from_name(name: &str) -> Option<Capability> {
        REGISTRY
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.capability)
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a capability name that is not in the registry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown capability `{0}` (see `gatehouse policy registry`)")]
pub struct UnknownCapability(pub String);

impl AsRef<str> for Capability {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl FromStr for Capability {
    type Err = UnknownCapability;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Capability::from_name(s).ok_or_else(|| UnknownCapability(s.to_string()))
    }
}

impl Serialize for Capability {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Capability {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_rows_line_up() {
        for (i, cap) in Capability::ALL.iter().enumerate() {
            assert_eq!(REGISTRY[i].capability, *cap);
            assert_eq!(cap.spec().capability, *cap);
            assert_eq!(Capability::from_name(cap.as_str()), Some(*cap));
        }
    }

    #[test]
    fn unknown_names_are_rejected() {
        assert_eq!(
            "fs:delete".parse::<Capability>().unwrap_err().to_string(),
            "unknown capability `fs:delete` (see `gatehouse policy registry`)"
        );
        assert!("FS:READ".parse::<Capability>().is_err());
    }
}
