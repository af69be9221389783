//! The pure policy core.
//!
//! Everything here is a function of its arguments: no wasmtime, no
//! filesystem, no environment, no process spawning, no clock. Anything that
//! needs I/O (canonicalizing a path, reading grants, reading the time)
//! happens before [`decide`] and is passed in, inside the [`Snapshot`] or
//! the [`Request`]. The test `policy_core_is_pure` in `tests/` reads these
//! sources and fails if one of them names an I/O facility.

pub mod codes;
pub mod command;
pub mod decide;
pub mod grant;
pub mod http;
pub mod matrix;
pub mod on_degraded;
pub mod registry;
pub mod request;
pub mod snapshot;
pub mod target;
pub mod text;
pub mod time;

pub use codes::{CodeFamily, DenyCode};
pub use decide::{check_target, decide, decide_json, is_within, private_scope, Decision};
pub use grant::{effective_outcome, Effective, Grant, Identity};
pub use http::{decide_request, HttpRequest, HttpRule, SitePattern, UrlPattern};
pub use matrix::{matrix, Level, Outcome};
pub use on_degraded::{OnDegraded, UnknownOnDegraded};
pub use registry::{ApprovalClass, Capability, CapabilitySpec, TargetKind, REGISTRY};
pub use request::{Access, ConfigSubject, JsonRequest, Request, RequestKind, ResolvedPath};
pub use snapshot::{
    Actor, DeclaredCapability, ExecutorDef, FrozenSnapshot, ProtectedKind, ProtectedPath, Roots,
    Snapshot, WorkspaceMode, WorkspaceRoot,
};
pub use target::{HostPattern, PathGlob, TargetError, TargetPattern};
pub use text::{bound_strings, bounded, MAX_KEPT};
pub use time::UtcTime;
