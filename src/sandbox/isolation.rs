//! The isolation probe and the degraded-mode report.
//!
//! The host says, layer by layer, how well it isolates on this machine with
//! this engine, instead of staying silent when a layer is weaker than
//! designed. The report is computed from two inputs, which are the seam
//! unit tests use:
//!
//! - [`EngineProfile`]: what the wasmtime engine runs with, read back from
//!   the built engine through `Engine::get_*` ([`EngineProfile::of`]), or,
//!   before a turn builds anything, the profile it is about to build;
//! - [`HostFacts`]: the answers of the kernel — `openat2(2)` with
//!   `RESOLVE_BENEATH`, `landlock_create_ruleset(2)`, `/proc/self/status` —
//!   probed once per process ([`host_facts`], a `OnceLock`).
//!
//! [`classify`] is a pure function of both; [`probe`] applies it to the
//! process's facts.
//!
//! # The document (`version` 1)
//!
//! ```json
//! {"version":1,"overall":"degraded",
//!  "reasons":["path_resolution: openat2(2) is unavailable (enosys): ..."],
//!  "layers":[{"name":"linear_memory_guards","state":"enforced","counted":true,
//!             "reason":"...","details":{"memory_reservation":4294967296,...}}, ...]}
//! ```
//!
//! - `version`: 1; a field that changes meaning bumps it.
//! - `overall`: `full` when every counted layer is `enforced`, else
//!   `degraded`.
//! - `reasons`: `<layer>: <reason>` for every counted layer that is not
//!   `enforced`, in layer order (empty when `full`).
//! - `layers[].name`: one of the names below, always all of them, in this
//!   order.
//! - `layers[].state`: `enforced` (works here at full strength), `partial`
//!   (works in a weaker form; the reason says which) or `unavailable`.
//! - `layers[].counted`: whether the layer counts toward `overall` (every
//!   layer does today; the field stays so that a layer can be reported
//!   without weighing on `overall`).
//! - `layers[].reason`: one lowercase sentence; for a layer that is not
//!   enforced, what to do about it.
//! - `layers[].details`: the facts the state was derived from.
//!
//! | layer | enforced when |
//! |---|---|
//! | `linear_memory_guards` | a reservation of at least 4 GiB, a guard region, and signals-based traps: out-of-bounds accesses land on unmapped pages |
//! | `signals_based_traps` | the engine turns faults in compiled guest code into traps |
//! | `epoch_deadlines` | epoch interruption is on, so every run's deadline can stop it |
//! | `memory_limits` | the pooling allocator bounds every memory, and each run's store limits cap memory and tables |
//! | `hostcall_fuel` | always: every run counts its host calls |
//! | `path_resolution` | `openat2(2)` with `RESOLVE_BENEATH` works (and refuses `..`), so cap-std resolves guest paths in the kernel |
//! | `host_process` | gatehouse runs as a user other than root with no effective capabilities |
//! | `landlock` | the kernel offers Landlock (its ABI version in `details.abi`) |
//! | `code_exec` | Landlock and seccomp filters can both be applied to a `code:exec` command (see `crate::exec`) |

use serde::Serialize;
use serde_json::{json, Value};

pub use crate::exec::facts::{host_facts, HostFacts, Openat2, ProcStatus};
pub use crate::policy::{OnDegraded, UnknownOnDegraded};

use super::limits::{Limits, EPOCH_TICK_MS};
use super::profile::EngineProfile;
use crate::policy::Capability;

/// The version of the report document.
pub const REPORT_VERSION: u32 = 1;

/// The layer names, in report order.
pub const LAYERS: [&str; 9] = [
    "linear_memory_guards",
    "signals_based_traps",
    "epoch_deadlines",
    "memory_limits",
    "hostcall_fuel",
    "path_resolution",
    "host_process",
    "landlock",
    "code_exec",
];

/// How well one layer works on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerState {
    /// Works here at full strength.
    Enforced,
    /// Works in a weaker form; the reason says which.
    Partial,
    /// Does not work here.
    Unavailable,
}

impl LayerState {
    /// The state's name in the report (`enforced`, `partial`, `unavailable`).
    pub fn as_str(self) -> &'static str {
        match self {
            LayerState::Enforced => "enforced",
            LayerState::Partial => "partial",
            LayerState::Unavailable => "unavailable",
        }
    }
}

/// `full` or `degraded`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Overall {
    /// Every counted layer is enforced.
    Full,
    /// At least one counted layer is not.
    Degraded,
}

impl Overall {
    /// The name in the report (`full`, `degraded`).
    pub fn as_str(self) -> &'static str {
        match self {
            Overall::Full => "full",
            Overall::Degraded => "degraded",
        }
    }
}

/// One layer of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Layer {
    /// One of [`LAYERS`].
    pub name: &'static str,
    /// How well it works here.
    pub state: LayerState,
    /// Whether the layer counts toward [`IsolationReport::overall`].
    pub counted: bool,
    /// Lowercase; for a layer not enforced, what to do about it.
    pub reason: String,
    /// The facts the state was derived from.
    pub details: Value,
}

/// The degraded-mode report (see the module documentation for the fields).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IsolationReport {
    /// The document's version, [`REPORT_VERSION`].
    pub version: u32,
    /// `full` when every counted layer is enforced, else `degraded`.
    pub overall: Overall,
    /// `<layer>: <reason>` for every counted layer that is not enforced, in layer order.
    pub reasons: Vec<String>,
    /// Every layer of [`LAYERS`], in that order.
    pub layers: Vec<Layer>,
}

impl IsolationReport {
    /// Whether some counted layer is not enforced.
    pub fn is_degraded(&self) -> bool {
        self.overall == Overall::Degraded
    }

    /// The counted layers that are not enforced, in report order.
    pub fn degraded_layers(&self) -> Vec<&Layer> {
        self.layers
            .iter()
            .filter(|l| l.counted && l.state != LayerState::Enforced)
            .collect()
    }

    /// The layer named `name`.
    pub fn layer(&self, name: &str) -> Option<&Layer> {
        self.layers.iter().find(|l| l.name == name)
    }

    /// `full`, or `degraded (layer, layer)`.
    pub fn summary(&self) -> String {
        match self.overall {
            Overall::Full => "full".to_string(),
            Overall::Degraded => format!(
                "degraded ({})",
                self.degraded_layers()
                    .iter()
                    .map(|l| l.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// Why a turn needing `needs` must be refused under `mode`, or `None`
    /// when it may run. Pure: the gate calls it with the report it is given.
    pub fn refusal(&self, mode: OnDegraded, needs: &[Capability]) -> Option<String> {
        if !self.is_degraded() {
            return None;
        }
        // Named only in a refusal: a turn that is let through formats
        // nothing.
        let layers = || {
            self.degraded_layers()
                .iter()
                .map(|l| format!("{} {}", l.name, l.state.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match mode {
            OnDegraded::Warn => None,
            OnDegraded::RefuseAll => Some(format!(
                "this host's isolation is degraded ({}) and `isolation.on_degraded` is `refuse-all`",
                layers()
            )),
            OnDegraded::RefuseCritical => {
                let mut critical: Vec<String> = Vec::new();
                for c in needs.iter().filter(|c| c.critical()) {
                    let name = format!("`{c}`");
                    if !critical.contains(&name) {
                        critical.push(name);
                    }
                }
                if critical.is_empty() {
                    return None;
                }
                Some(format!(
                    "{} {} critical and this host's isolation is degraded ({}); `isolation.on_degraded` is `refuse-critical`",
                    critical.join(", "),
                    if critical.len() == 1 { "is" } else { "are" },
                    layers()
                ))
            }
        }
    }

    /// Logs the report through `tracing`: one event for the whole, one per
    /// layer at debug level. At `info`, degraded or not: the report is the
    /// answer of `gatehouse isolation` and part of every run's output; at
    /// `warn` (the default level) it would repeat that on every run of a
    /// degraded host.
    pub fn log(&self) {
        if self.is_degraded() {
            tracing::info!(
                overall = self.overall.as_str(),
                reasons = ?self.reasons,
                "isolation degraded"
            );
        } else {
            tracing::info!(overall = self.overall.as_str(), "isolation full");
        }
        for l in &self.layers {
            tracing::debug!(
                layer = l.name,
                state = l.state.as_str(),
                counted = l.counted,
                reason = %l.reason,
                "isolation layer"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// what the kernel says

/// The report for an engine with `profile` on this host.
pub fn probe(profile: &EngineProfile) -> IsolationReport {
    classify(profile, host_facts())
}

/// A short lowercase name for an errno.
fn errno_name(e: i32) -> String {
    let name = match e {
        libc::ENOSYS => "enosys",
        libc::EPERM => "eperm",
        libc::EACCES => "eacces",
        libc::EINVAL => "einval",
        libc::EXDEV => "exdev",
        libc::ENOENT => "enoent",
        libc::E2BIG => "e2big",
        libc::EAGAIN => "eagain",
        libc::EOPNOTSUPP => "eopnotsupp",
        _ => return format!("errno {e}"),
    };
    name.to_string()
}

/// `4 GiB`, `32 MiB`, `4096 bytes`.
fn size(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

// ---------------------------------------------------------------------------
// the classification (pure)

fn layer(name: &'static str, state: LayerState, reason: String, details: Value) -> Layer {
    Layer {
        name,
        state,
        counted: true,
        reason,
        details,
    }
}

/// The report for an engine with `engine` on a host with `host`. Pure.
pub fn classify(engine: &EngineProfile, host: &HostFacts) -> IsolationReport {
    let defaults = Limits::default();
    // In the order of [`LAYERS`], which the report keeps.
    let layers = vec![
        linear_memory_guards_layer(engine),
        signals_based_traps_layer(engine),
        epoch_deadlines_layer(engine, &defaults),
        memory_limits_layer(engine, &defaults),
        hostcall_fuel_layer(&defaults),
        path_resolution_layer(host),
        host_process_layer(host),
        landlock_layer(host),
        code_exec_layer(host),
    ];

    let reasons: Vec<String> = layers
        .iter()
        .filter(|l| l.counted && l.state != LayerState::Enforced)
        .map(|l| format!("{}: {}", l.name, l.reason))
        .collect();
    IsolationReport {
        version: REPORT_VERSION,
        overall: if reasons.is_empty() {
            Overall::Full
        } else {
            Overall::Degraded
        },
        reasons,
        layers,
    }
}

/// The `linear_memory_guards` layer: guard pages behind each linear memory.
fn linear_memory_guards_layer(engine: &EngineProfile) -> Layer {
    use LayerState::{Enforced, Partial};
    let covers_index_space = engine.memory_reservation >= 1 << 32;
    let elided = engine.signals_based_traps && covers_index_space && engine.memory_guard_size > 0;
    let (state, reason) = if !engine.signals_based_traps {
        (Partial, "signals-based traps are off, so a guard page cannot turn an out-of-bounds access into a trap: wasmtime checks every access in compiled code instead; remove `[engine] signals_based_traps = false` to get guard pages back".to_string())
    } else if engine.memory_guard_size == 0 {
        (Partial, "there is no guard region (`[engine] guard_bytes = 0`): an out-of-bounds access is stopped only by bounds checks compiled into the guest's code, with no unmapped pages behind them; remove `guard_bytes` to get the 32 MiB default back".to_string())
    } else if !covers_index_space {
        (Partial, format!("the reservation of {} is smaller than the 4 GiB a 32-bit memory can address: bounds are checked in compiled code, with the guard region only behind them; use the default 4 GiB reservation", size(engine.memory_reservation)))
    } else {
        (Enforced, format!("each linear memory has a {} reservation and a {} guard region: an out-of-bounds access of a 32-bit memory lands on unmapped pages and traps", size(engine.memory_reservation), size(engine.memory_guard_size)))
    };
    layer(
        "linear_memory_guards",
        state,
        reason,
        json!({
            "memory_reservation": engine.memory_reservation,
            "memory_guard_size": engine.memory_guard_size,
            "guard_before_linear_memory": engine.guard_before_linear_memory,
            "signals_based_traps": engine.signals_based_traps,
            "bounds_checks": if elided { "elided where the guard region covers the offset" } else { "explicit" },
        }),
    )
}

/// The `signals_based_traps` layer: faults in guest code become its traps.
fn signals_based_traps_layer(engine: &EngineProfile) -> Layer {
    use LayerState::{Enforced, Partial};
    let (state, reason) = if engine.signals_based_traps {
        (Enforced, "wasmtime's signal handlers turn faults in compiled guest code, such as an access to a guard page, into traps of that guest".to_string())
    } else {
        (Partial, "signals-based traps are off (`[engine] signals_based_traps = false`): compiled code checks bounds and trap conditions itself, and a fault those checks miss crashes the host process instead of trapping the guest; remove the setting to turn them back on".to_string())
    };
    layer(
        "signals_based_traps",
        state,
        reason,
        json!({ "enabled": engine.signals_based_traps }),
    )
}

/// The `epoch_deadlines` layer: a guest that never returns is stopped.
fn epoch_deadlines_layer(engine: &EngineProfile, defaults: &Limits) -> Layer {
    use LayerState::{Enforced, Unavailable};
    let (state, reason) = if engine.epoch_interruption {
        (Enforced, format!("every run has a wall-clock deadline (default {} ms, checked every {EPOCH_TICK_MS} ms tick): a guest still running at it is interrupted with `LIMIT_DEADLINE`", defaults.deadline_ms))
    } else {
        (Unavailable, "epoch interruption is off in this engine: a guest that never returns cannot be stopped; build the engine with epoch interruption".to_string())
    };
    layer(
        "epoch_deadlines",
        state,
        reason,
        json!({
            "epoch_interruption": engine.epoch_interruption,
            "tick_ms": EPOCH_TICK_MS,
            "default_deadline_ms": defaults.deadline_ms,
        }),
    )
}

/// The `memory_limits` layer: the pooling allocator and the store limits.
fn memory_limits_layer(engine: &EngineProfile, defaults: &Limits) -> Layer {
    use LayerState::{Enforced, Partial};
    let (state, reason) = match engine.pool_max_memory_size {
        Some(max) => (Enforced, format!("the pooling allocator bounds every linear memory at {}, and each run's store limits cap memory (default {}) and tables (default {} elements): growing past them ends the run with `LIMIT_MEMORY` or `LIMIT_TABLE`", size(max as u64), size(defaults.memory_bytes as u64), defaults.table_elements)),
        None => (Partial, format!("no pooling allocator: only each run's store limits cap memory (default {}) and tables (default {} elements); build the engine with the pooling allocator", size(defaults.memory_bytes as u64), defaults.table_elements)),
    };
    layer(
        "memory_limits",
        state,
        reason,
        json!({
            "engine_kind": engine.kind.as_str(),
            "pooling_allocator": engine.pool_max_memory_size.is_some(),
            "pool_memory_keep_resident": engine.pool_memory_keep_resident,
            "pool_pagemap_scan": engine.pool_pagemap_scan,
            "pool_max_memory_size": engine.pool_max_memory_size,
            "pool_total_memories": engine.pool_total_memories,
            "pool_table_elements": engine.pool_table_elements,
            "default_memory_bytes": defaults.memory_bytes,
            "default_table_elements": defaults.table_elements,
        }),
    )
}

/// The `hostcall_fuel` layer: the cap on calls into the host.
fn hostcall_fuel_layer(defaults: &Limits) -> Layer {
    use LayerState::Enforced;
    layer(
        "hostcall_fuel",
        Enforced,
        format!("every call from the guest into the host spends one unit of fuel (default {}): at zero the run ends with `LIMIT_HOSTCALLS`; host resources are capped at {} (`LIMIT_RESOURCES`)", defaults.hostcalls, defaults.resources),
        json!({
            "default_hostcalls": defaults.hostcalls,
            "resource_table_cap": defaults.resources,
        }),
    )
}

/// The `path_resolution` layer: whether the kernel resolves guest paths beneath their preopen.
fn path_resolution_layer(host: &HostFacts) -> Layer {
    use LayerState::{Enforced, Partial};
    let fallback =
        "cap-std falls back to manual resolution, walking each path component in user space";
    let (state, reason, result) = match &host.openat2 {
        Openat2::Works { escape_refused: true } => (Enforced, "openat2(2) with `RESOLVE_BENEATH` works and refuses `..` out of its directory: cap-std resolves every guest path in the kernel, which refuses any step out of the preopen".to_string(), json!("ok")),
        Openat2::Works { escape_refused: false } => (Partial, format!("openat2(2) with `RESOLVE_BENEATH` did not refuse `..` out of `{}`: the kernel's check cannot be relied on; run on a kernel whose `RESOLVE_BENEATH` works", host.openat2_dir), json!("ok")),
        Openat2::Fails(e) if *e == libc::ENOSYS => (Partial, format!("openat2(2) is unavailable ({}): the kernel is older than linux 5.6 or a seccomp filter hides it, so {fallback}; use linux 5.6 or newer and allow `openat2` in the seccomp profile", errno_name(*e)), json!(errno_name(*e))),
        Openat2::Fails(e) if *e == libc::EPERM => (Partial, format!("openat2(2) is refused ({}), as some seccomp profiles do, so {fallback}; allow `openat2` in the seccomp profile", errno_name(*e)), json!(errno_name(*e))),
        Openat2::Fails(e) => (Partial, format!("openat2(2) failed ({}) on `{}`, so {fallback}", errno_name(*e), host.openat2_dir), json!(errno_name(*e))),
        Openat2::NotTried(why) => (Partial, format!("openat2(2) could not be tried ({why}); cap-std may fall back to manual resolution; make the temporary directory readable"), json!(null)),
    };
    layer(
        "path_resolution",
        state,
        reason,
        json!({
            "dir": host.openat2_dir,
            "openat2": result,
            "escape_refused": match host.openat2 { Openat2::Works { escape_refused } => Some(escape_refused), _ => None },
            "fallback": if state == Enforced { None } else { Some("manual") },
        }),
    )
}

/// The `host_process` layer: whether the host runs privileged.
fn host_process_layer(host: &HostFacts) -> Layer {
    use LayerState::{Enforced, Partial};
    let (state, reason, details) = match &host.status {
        Err(e) => (
            Partial,
            format!("cannot read `/proc/self/status` ({e}): whether the host runs as root or with capabilities is unknown"),
            json!({ "error": e }),
        ),
        Ok(s) => {
            let caps = s.cap_eff.map(|c| format!("{c:#018x}"));
            let details = json!({
                "euid": s.euid,
                "root": s.euid.map(|u| u == 0),
                "cap_eff": caps,
                "no_new_privs": s.no_new_privs,
                "seccomp": s.seccomp.map(|m| match m { 0 => "disabled", 1 => "strict", 2 => "filter", _ => "unknown" }),
            });
            let caps = caps.unwrap_or_else(|| "unknown".into());
            let (state, reason) = match (s.euid, s.cap_eff) {
                (Some(0), _) => (Partial, format!("running as root (effective capabilities {caps}): an escape from the wasm sandbox would have root's authority; run gatehouse as an unprivileged user")),
                (Some(uid), Some(0)) => (Enforced, format!("running as uid {uid} with no effective capabilities")),
                (Some(uid), Some(_)) => (Partial, format!("running as uid {uid} with effective capabilities {caps}: an escape from the wasm sandbox would have them; run gatehouse without capabilities")),
                _ => (Partial, "`/proc/self/status` does not say the user or the capabilities: whether the host runs privileged is unknown".to_string()),
            };
            (state, reason, details)
        }
    };
    layer("host_process", state, reason, details)
}

/// The `landlock` layer.
fn landlock_layer(host: &HostFacts) -> Layer {
    use LayerState::{Enforced, Unavailable};
    let (state, reason, details) = match host.landlock {
        Ok(abi) => (Enforced, format!("landlock abi {abi} is available: the `code:exec` sandbox confines each command's files to its granted roots with it"), json!({ "abi": abi })),
        Err(e) if e == libc::EOPNOTSUPP => (Unavailable, format!("landlock is built into the kernel but disabled ({}): add `landlock` to the kernel's `lsm=` boot parameter", errno_name(e)), json!({ "abi": null, "errno": errno_name(e) })),
        Err(e) if e == libc::ENOSYS => (Unavailable, format!("landlock_create_ruleset(2) is unavailable ({}): the kernel lacks landlock or a seccomp filter hides it; use linux 5.13 or newer with landlock enabled and allow the landlock syscalls", errno_name(e)), json!({ "abi": null, "errno": errno_name(e) })),
        Err(e) => (Unavailable, format!("landlock_create_ruleset(2) failed ({}): landlock cannot be used here", errno_name(e)), json!({ "abi": null, "errno": errno_name(e) })),
    };
    layer("landlock", state, reason, details)
}

/// The `code_exec` layer: the confinement of a command.
fn code_exec_layer(host: &HostFacts) -> Layer {
    use LayerState::{Enforced, Partial, Unavailable};
    let seccomp = match host.seccomp {
        Ok(()) => json!("ok"),
        Err(e) => json!(errno_name(e)),
    };
    let tcp = if matches!(host.landlock, Ok(abi) if abi >= 4) {
        "; tcp bind and connect refused without `network:sites`"
    } else {
        ""
    };
    let (state, reason) = match (host.landlock, host.seccomp) {
        (Ok(abi), Ok(())) => (Enforced, format!("each command runs with landlock abi {abi} (files limited to its granted roots and the system's programs{tcp}), a seccomp filter (no internet sockets without `network:sites`; no ptrace, mount, bpf, kexec, modules, namespaces or io_uring), no_new_privs, rlimits, a cleared environment, a wall-clock timeout and capped output")),
        (Err(e), Ok(())) => (Partial, format!("landlock is unavailable ({}): a command's files are not confined, it can read and write whatever gatehouse's user can; the seccomp filter, rlimits, timeout and output cap still apply; enable landlock, or do not grant `code:exec`", errno_name(e))),
        (Ok(abi), Err(e)) => (Partial, format!("seccomp filters cannot be installed ({}): a command can open sockets and call ptrace, mount or unshare; landlock abi {abi} still confines its files; allow seccomp, or do not grant `code:exec`", errno_name(e))),
        (Err(l), Err(e)) => (Unavailable, format!("neither landlock ({}) nor seccomp filters ({}) can be used: a command would run with only rlimits, a cleared environment, a timeout and capped output; do not grant `code:exec` on this host", errno_name(l), errno_name(e))),
    };
    layer(
        "code_exec",
        state,
        reason,
        json!({
            "landlock_abi": host.landlock.ok(),
            "landlock_network": matches!(host.landlock, Ok(abi) if abi >= 4),
            "landlock_scoped": matches!(host.landlock, Ok(abi) if abi >= 6),
            "seccomp": seccomp,
            "denied_syscalls": crate::exec::DENIED_SYSCALLS.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full_host() -> HostFacts {
        HostFacts {
            openat2_dir: "/tmp".into(),
            openat2: Openat2::Works {
                escape_refused: true,
            },
            landlock: Ok(7),
            seccomp: Ok(()),
            status: Ok(ProcStatus {
                euid: Some(1000),
                cap_eff: Some(0),
                no_new_privs: Some(false),
                seccomp: Some(0),
            }),
        }
    }

    fn engine() -> EngineProfile {
        EngineProfile::new(64 << 20)
    }

    fn state(r: &IsolationReport, name: &str) -> LayerState {
        r.layer(name).unwrap().state
    }

    #[test]
    fn a_default_engine_on_a_good_host_is_full_with_every_layer_in_order() {
        let r = classify(&engine(), &full_host());
        assert_eq!(r.overall, Overall::Full, "{r:#?}");
        assert!(r.reasons.is_empty());
        let names: Vec<&str> = r.layers.iter().map(|l| l.name).collect();
        assert_eq!(names, LAYERS);
        for l in &r.layers {
            assert!(!l.reason.is_empty());
            assert!(l.reason.starts_with(|c: char| !c.is_uppercase()), "{l:?}");
        }
        assert_eq!(state(&r, "code_exec"), LayerState::Enforced);
        assert!(r
            .layer("code_exec")
            .unwrap()
            .reason
            .starts_with("each command runs with landlock abi 7"));
        assert_eq!(r.summary(), "full");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["overall"], "full");
        assert_eq!(v["layers"][0]["state"], "enforced");
    }

    #[test]
    fn each_weakness_is_its_own_layer() {
        let no_signals = engine().signals_based_traps(false);
        let r = classify(&no_signals, &full_host());
        assert_eq!(state(&r, "signals_based_traps"), LayerState::Partial);
        assert_eq!(state(&r, "linear_memory_guards"), LayerState::Partial);
        assert_eq!(r.overall, Overall::Degraded);

        let no_guard = engine().guard_bytes(0);
        let r = classify(&no_guard, &full_host());
        assert_eq!(state(&r, "linear_memory_guards"), LayerState::Partial);
        assert_eq!(state(&r, "signals_based_traps"), LayerState::Enforced);
        assert!(r.reasons[0].starts_with("linear_memory_guards: there is no guard region"));
        assert_eq!(r.summary(), "degraded (linear_memory_guards)");

        let mut small = engine();
        small.memory_reservation = 1 << 20;
        let r = classify(&small, &full_host());
        assert_eq!(state(&r, "linear_memory_guards"), LayerState::Partial);

        let mut no_epoch = engine();
        no_epoch.epoch_interruption = false;
        assert_eq!(
            state(&classify(&no_epoch, &full_host()), "epoch_deadlines"),
            LayerState::Unavailable
        );
    }

    #[test]
    fn path_resolution_falls_back_on_enosys_and_eperm() {
        for (errno, word) in [(libc::ENOSYS, "enosys"), (libc::EPERM, "eperm")] {
            let host = HostFacts {
                openat2: Openat2::Fails(errno),
                ..full_host()
            };
            let r = classify(&engine(), &host);
            let l = r.layer("path_resolution").unwrap();
            assert_eq!(l.state, LayerState::Partial);
            assert!(l.reason.contains(word), "{}", l.reason);
            assert!(l.reason.contains("cap-std falls back to manual resolution"));
            assert_eq!(l.details["fallback"], "manual");
            assert_eq!(r.overall, Overall::Degraded);
        }
        let host = HostFacts {
            openat2: Openat2::Works {
                escape_refused: false,
            },
            ..full_host()
        };
        assert_eq!(
            state(&classify(&engine(), &host), "path_resolution"),
            LayerState::Partial
        );
    }

    #[test]
    fn landlock_reports_its_abi_or_why_not() {
        let r = classify(&engine(), &full_host());
        assert_eq!(r.layer("landlock").unwrap().details["abi"], 7);
        for (errno, word) in [(libc::ENOSYS, "enosys"), (libc::EOPNOTSUPP, "lsm=")] {
            let host = HostFacts {
                landlock: Err(errno),
                ..full_host()
            };
            let r = classify(&engine(), &host);
            let l = r.layer("landlock").unwrap();
            assert_eq!(l.state, LayerState::Unavailable);
            assert!(l.reason.contains(word), "{}", l.reason);
            assert_eq!(r.overall, Overall::Degraded);
        }
    }

    #[test]
    fn root_or_capabilities_make_the_host_process_partial() {
        let status = |euid, caps| HostFacts {
            status: Ok(ProcStatus {
                euid: Some(euid),
                cap_eff: Some(caps),
                no_new_privs: Some(true),
                seccomp: Some(2),
            }),
            ..full_host()
        };
        let r = classify(&engine(), &status(0, 0x1ff_feff_ffff));
        let l = r.layer("host_process").unwrap();
        assert_eq!(l.state, LayerState::Partial);
        assert!(l.reason.starts_with("running as root"), "{}", l.reason);
        assert_eq!(l.details["cap_eff"], "0x000001fffeffffff");
        assert_eq!(l.details["seccomp"], "filter");
        assert_eq!(
            state(&classify(&engine(), &status(1000, 1 << 21)), "host_process"),
            LayerState::Partial
        );
        assert_eq!(
            state(&classify(&engine(), &status(1000, 0)), "host_process"),
            LayerState::Enforced
        );
        let unreadable = HostFacts {
            status: Err("no such file or directory".into()),
            ..full_host()
        };
        assert_eq!(
            state(&classify(&engine(), &unreadable), "host_process"),
            LayerState::Partial
        );
    }

    #[test]
    fn proc_status_lines_are_parsed() {
        let s = ProcStatus::parse(
            "Name:\tgatehouse\nUid:\t1000\t0\t0\t0\nCapEff:\t000001fffeffffff\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n",
        );
        assert_eq!(
            s,
            ProcStatus {
                euid: Some(0),
                cap_eff: Some(0x1ff_feff_ffff),
                no_new_privs: Some(true),
                seccomp: Some(2),
            }
        );
        assert_eq!(ProcStatus::parse(""), ProcStatus::default());
    }

    #[test]
    fn code_exec_needs_landlock_and_seccomp() {
        let r = classify(&engine(), &full_host());
        let l = r.layer("code_exec").unwrap();
        assert!(l.counted);
        assert_eq!(l.details["landlock_network"], true);
        assert_eq!(l.details["seccomp"], "ok");
        let cases = [
            (
                Err(libc::ENOSYS),
                Ok(()),
                LayerState::Partial,
                "landlock is unavailable (enosys)",
            ),
            (
                Ok(3),
                Err(libc::EINVAL),
                LayerState::Partial,
                "seccomp filters cannot be installed (einval)",
            ),
            (
                Err(libc::ENOSYS),
                Err(libc::EINVAL),
                LayerState::Unavailable,
                "neither landlock (enosys) nor seccomp filters (einval)",
            ),
        ];
        for (landlock, seccomp, want, start) in cases {
            let host = HostFacts {
                landlock,
                seccomp,
                ..full_host()
            };
            let r = classify(&engine(), &host);
            let l = r.layer("code_exec").unwrap();
            assert_eq!(l.state, want, "{l:?}");
            assert!(l.reason.starts_with(start), "{}", l.reason);
            assert_eq!(r.overall, Overall::Degraded);
            assert!(r.reasons.iter().any(|x| x.starts_with("code_exec: ")));
        }
        let old = HostFacts {
            landlock: Ok(3),
            ..full_host()
        };
        let l = classify(&engine(), &old)
            .layer("code_exec")
            .unwrap()
            .clone();
        assert_eq!(l.state, LayerState::Enforced);
        assert_eq!(l.details["landlock_network"], false);
        assert!(!l.reason.contains("tcp bind"), "{}", l.reason);
    }

    #[test]
    fn the_switch_refuses_what_it_says() {
        use Capability::*;
        let full = classify(&engine(), &full_host());
        let degraded = classify(&engine().guard_bytes(0), &full_host());
        for mode in [
            OnDegraded::Warn,
            OnDegraded::RefuseCritical,
            OnDegraded::RefuseAll,
        ] {
            assert_eq!(full.refusal(mode, &[FsWrite]), None);
            assert_eq!(degraded.refusal(OnDegraded::Warn, &[FsWrite]), None);
        }
        assert_eq!(
            degraded.refusal(OnDegraded::RefuseCritical, &[ComputePure, FsRead]),
            None
        );
        let why = degraded
            .refusal(OnDegraded::RefuseCritical, &[FsRead, FsWrite, FsWrite])
            .unwrap();
        assert_eq!(why, "`fs:write` is critical and this host's isolation is degraded (linear_memory_guards partial); `isolation.on_degraded` is `refuse-critical`");
        for c in [MemoryWrite, CodeExec, SystemAdmin] {
            assert!(degraded.refusal(OnDegraded::RefuseCritical, &[c]).is_some());
        }
        let why = degraded
            .refusal(OnDegraded::RefuseAll, &[ComputePure])
            .unwrap();
        assert!(why.contains("`refuse-all`"), "{why}");
    }

    #[test]
    fn on_degraded_parses_its_three_values_only() {
        for mode in [
            OnDegraded::Warn,
            OnDegraded::RefuseCritical,
            OnDegraded::RefuseAll,
        ] {
            assert_eq!(mode.as_str().parse::<OnDegraded>(), Ok(mode));
            assert_eq!(
                serde_json::to_value(mode).unwrap(),
                serde_json::json!(mode.as_str())
            );
        }
        assert_eq!(
            "refuse".parse::<OnDegraded>().unwrap_err().to_string(),
            "unknown value `refuse` (expected `warn`, `refuse-critical` or `refuse-all`)"
        );
        assert_eq!(OnDegraded::default(), OnDegraded::Warn);
    }

    #[test]
    fn a_built_engine_reads_back_the_profile_it_was_built_with() {
        let cache = std::env::temp_dir().join("gatehouse-never-written");
        for p in [
            engine(),
            engine().signals_based_traps(false),
            engine().guard_bytes(0),
            EngineProfile::for_kind(super::super::profile::EngineKind::OneShot, 64 << 20),
        ] {
            let sandbox = super::super::engine::Sandbox::with_profile(&cache, &p).unwrap();
            assert_eq!(sandbox.profile(), &p);
            assert_eq!(sandbox.isolation(), &probe(&p));
        }
        assert!(!cache.exists(), "building an engine wrote its cache");
    }

    #[test]
    fn the_probe_of_this_process_answers_every_question() {
        let facts = host_facts();
        assert!(std::ptr::eq(facts, host_facts()), "probed once");
        let r = probe(&engine());
        assert_eq!(r.layers.len(), LAYERS.len());
        if let Ok(s) = &facts.status {
            assert!(s.euid.is_some() && s.cap_eff.is_some(), "{s:?}");
        }
    }
}
