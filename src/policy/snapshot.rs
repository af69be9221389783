//! The frozen policy of a turn and its two hashes.
//!
//! A [`Snapshot`] holds everything `decide` reads: the level, the actors,
//! the executor definitions, the grants in force and the roots. It is built
//! by the host (after all I/O: canonicalized paths, grants looked up) and
//! frozen into `policy.json` with a `definitionHash` (actors and executors)
//! and a `policyHash` (the whole frozen policy), both sha256 over canonical
//! JSON: keys sorted, no insignificant whitespace.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::grant::{Grant, Identity};
use super::matrix::Level;
use super::registry::Capability;

/// How a workspace root may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkspaceMode {
    /// Reads only: writes under the root are `WORKSPACE_READ_ONLY`.
    ReadOnly,
    /// Reads and writes.
    ReadWrite,
}

/// A canonical absolute directory an actor may work in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceRoot {
    /// The root, canonical and absolute.
    pub path: String,
    /// Whether the actor may only read under it or also write.
    pub mode: WorkspaceMode,
}

/// Whoever asks, as the policy knows them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Actor {
    /// The channel and sender its grants are recorded for; `None` matches no grant (an
    /// empty identity is used).
    pub identity: Option<Identity>,
    /// Executors it may run; `*` means any.
    pub skills: Vec<String>,
    /// Subagents it may use (`SUBAGENT_NOT_GRANTED` otherwise).
    pub subagents: Vec<String>,
    /// MCP servers it may use (`MCP_SERVER_NOT_GRANTED` otherwise).
    pub mcp_servers: Vec<String>,
    /// Actors it may delegate to (`DELEGATION_NOT_ALLOWED` otherwise).
    pub delegates_to: Vec<String>,
    /// Memory scopes it may use besides its own `private:<name>`.
    pub memory: Vec<String>,
    /// Programs and tools it may run (basenames, or full paths).
    pub tools: Vec<String>,
    /// Its workspace roots, canonical; a path under none of them is
    /// `WORKSPACE_NOT_GRANTED`.
    pub workspaces: Vec<WorkspaceRoot>,
}

/// One capability an executor declares, with its (resolved) target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredCapability {
    /// The capability declared.
    pub capability: Capability,
    /// Its target, resolved (a path glob made absolute); `None` for a capability whose
    /// target kind is `none`.
    pub target: Option<String>,
    /// The guest's name for a path glob's directory (`mount` in the
    /// manifest); absent when the manifest gives none, so definitions
    /// without one hash as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount: Option<String>,
    /// For `network:sites`: the HTTP methods allowed (`None`: any);
    /// absent when the manifest gives none, so definitions hash as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub methods: Option<Vec<String>>,
}

/// An executor definition, as frozen from its manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutorDef {
    /// The component file; empty for a command executor.
    pub component: String,
    /// A command executor's argv (`code:exec`); empty for a component.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// The sha256 the manifest pins the component to, lowercase hex; `None` when unpinned.
    pub sha256: Option<String>,
    /// The capabilities the manifest declares; a request outside them is `TARGET_MISMATCH`.
    pub capabilities: Vec<DeclaredCapability>,
    /// Whether the manifest declares its effects undoable.
    pub revertible: bool,
    /// The reverse pattern that undoes it, one of `REVERSE_PATTERNS`; set exactly when
    /// `revertible` is.
    pub reverse_pattern: Option<String>,
    /// The tools a command executor may run (`code:exec`); empty otherwise.
    pub tools: Vec<String>,
}

/// Why a path is off limits to every executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProtectedKind {
    /// Configuration, grants database, history, state: `POLICY_MUTATION_DENIED`.
    Policy,
    /// Manifests and executor directories: `DEFINITION_MUTATION_DENIED`.
    Definition,
    /// The host's own state (the state directory: grants and memory
    /// databases, history, audit logs, cache; and where state would be
    /// found): written, `POLICY_MUTATION_DENIED`; read,
    /// `HOST_STATE_HIDDEN`.
    State,
}

impl ProtectedKind {
    /// The code of a write to a path of this kind.
    pub fn write_code(self) -> super::codes::DenyCode {
        use super::codes::DenyCode;
        match self {
            ProtectedKind::Policy | ProtectedKind::State => DenyCode::PolicyMutationDenied,
            ProtectedKind::Definition => DenyCode::DefinitionMutationDenied,
        }
    }
}

/// A canonical path that no executor may write (itself and everything
/// below); of kind [`ProtectedKind::State`], nor read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectedPath {
    /// The path, canonical; itself and everything below it are protected.
    pub path: String,
    /// Which code a write to it (or, for state, a read) is refused with.
    pub kind: ProtectedKind,
}

/// The roots of a turn.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Roots {
    /// This turn's workspace, canonical; paths outside it are out of scope
    /// even when an actor root contains them.
    pub turn_workspace: Option<String>,
    /// Paths no executor may write (state: nor read), whatever root holds them.
    pub protected: Vec<ProtectedPath>,
    /// Environment variables that hold a host secret (every provider's
    /// `value_env`): no `env:read` may name them, at any level, whatever
    /// a grant says. `GATEHOUSE_*` is refused by rule and is not listed.
    /// Left out of the serialized form when empty, so a snapshot of a
    /// host without providers keeps its hashes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_env: Vec<String>,
}

/// Everything a decision depends on, frozen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The autonomy level the matrix is read at.
    pub level: Level,
    /// The actors of the configuration, by name.
    pub actors: BTreeMap<String, Actor>,
    /// The executor definitions, by name.
    pub executors: BTreeMap<String, ExecutorDef>,
    /// Grants active when the snapshot was prepared. Each still counts
    /// only while it is unexpired at the time of a decision (`decide`'s
    /// `now`).
    pub grants: Vec<Grant>,
    /// The turn's workspace and the protected paths.
    pub roots: Roots,
}

/// The serialized form: the policy and its two hashes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrozenSnapshot {
    /// The format version, [`SNAPSHOT_VERSION`].
    pub version: u32,
    /// sha256 of the actor and executor definitions ([`Snapshot::definition_hash`]).
    #[serde(rename = "definitionHash")]
    pub definition_hash: String,
    /// sha256 of the whole frozen policy ([`Snapshot::policy_hash`]).
    #[serde(rename = "policyHash")]
    pub policy_hash: String,
    /// The frozen policy itself.
    pub policy: Snapshot,
}

/// The version of the `policy.json` format.
pub const SNAPSHOT_VERSION: u32 = 1;

/// Canonical JSON: object keys sorted (serde_json's default map is ordered),
/// no whitespace.
pub fn canonical_json<T: Serialize>(value: &T) -> String {
    // Serializing our own plain data types cannot fail (no maps with
    // non-string keys, no failing Serialize impls); fall back to an empty
    // document rather than panic.
    serde_json::to_value(value)
        .and_then(|v| serde_json::to_string(&v))
        .unwrap_or_default()
}

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

impl Snapshot {
    /// sha256 of the canonical JSON of the actor and executor definitions.
    pub fn definition_hash(&self) -> String {
        #[derive(Serialize)]
        struct Definitions<'a> {
            actors: &'a BTreeMap<String, Actor>,
            executors: &'a BTreeMap<String, ExecutorDef>,
        }
        sha256_hex(
            canonical_json(&Definitions {
                actors: &self.actors,
                executors: &self.executors,
            })
            .as_bytes(),
        )
    }

    /// sha256 of the canonical JSON of the whole frozen policy.
    pub fn policy_hash(&self) -> String {
        sha256_hex(canonical_json(self).as_bytes())
    }

    /// Computes both hashes and wraps the snapshot in the `policy.json` form.
    pub fn freeze(self) -> FrozenSnapshot {
        FrozenSnapshot {
            version: SNAPSHOT_VERSION,
            definition_hash: self.definition_hash(),
            policy_hash: self.policy_hash(),
            policy: self,
        }
    }
}

impl FrozenSnapshot {
    /// The exact bytes of `policy.json`: pretty-printed canonical JSON and a
    /// final newline, so the same policy always gives the same file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let value = serde_json::to_value(self).unwrap_or_default();
        let mut out = serde_json::to_vec_pretty(&value).unwrap_or_default();
        out.push(b'\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys() {
        let mut m = BTreeMap::new();
        m.insert("b", 1);
        m.insert("a", 2);
        assert_eq!(canonical_json(&m), r#"{"a":2,"b":1}"#);
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
