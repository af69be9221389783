//! The import check: a component's imports compared with its plan, before
//! any instance exists.
//!
//! Interfaces that carry no authority on their own form the baseline of
//! `compute:pure` and are always linked: `wasi:io`, stdio into capped pipes,
//! `exit`, the terminal queries, `random`, the clocks (frozen without
//! `time:read`), `wasi:cli/environment` (empty without `env:read`) and
//! `wasi:filesystem` (which reaches nothing without a preopen). Everything else needs its capability; an import of one without
//! the grant is `IMPORT_NOT_GRANTED` naming the import. Interfaces gatehouse
//! does not provide at all are refused the same way.

use serde::Serialize;

use super::plan::Plan;
use crate::policy::Capability;

/// Whether an interface needs a grant, and which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Authority {
    /// Always linked.
    Baseline,
    /// Linked only when one of these capabilities is granted.
    Needs(&'static [Capability]),
    /// gatehouse has no host for it.
    Unsupported,
}

/// What an interface (without its `@version`) needs.
pub fn authority(interface: &str) -> Authority {
    use Capability as C;
    let (package, name) = interface.split_once('/').unwrap_or((interface, ""));
    match (package, name) {
        ("wasi:io", _) | ("wasi:random", _) | ("wasi:clocks", "wall-clock" | "monotonic-clock") => {
            Authority::Baseline
        }
        ("wasi:cli", "stdin" | "stdout" | "stderr" | "exit") => Authority::Baseline,
        ("wasi:cli", n) if n.starts_with("terminal-") => Authority::Baseline,
        // Every Rust guest imports it (std's runtime does), so the authority
        // is in its contents: no variables without `env:read`, and only the
        // granted ones with it; arguments only for commands.
        ("wasi:cli", "environment") => Authority::Baseline,
        ("wasi:filesystem", "types" | "preopens") => Authority::Baseline,
        ("wasi:sockets", _) => Authority::Needs(&[C::NetworkSites]),
        ("gatehouse:executor", "log" | "types") => Authority::Baseline,
        ("gatehouse:executor", "memory") => Authority::Needs(&[C::MemoryRead, C::MemoryWrite]),
        ("gatehouse:executor", "human") => Authority::Needs(&[C::HumanAsk]),
        ("gatehouse:executor", "delegate") => Authority::Needs(&[C::DelegateCall]),
        ("gatehouse:executor", "exec") => Authority::Needs(&[C::CodeExec]),
        _ => Authority::Unsupported,
    }
}

/// The first import the plan does not allow, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedImport {
    pub import: String,
    pub reason: String,
}

/// Strips `@0.2.6` from `wasi:cli/environment@0.2.6`.
pub fn interface_name(import: &str) -> &str {
    import.split('@').next().unwrap_or(import)
}

/// Checks every import name against the plan.
pub fn check(imports: &[String], plan: &Plan) -> Result<(), RefusedImport> {
    for import in imports {
        match authority(interface_name(import)) {
            Authority::Baseline => {}
            Authority::Needs(caps) if caps.iter().any(|c| plan.grants(*c)) => {}
            Authority::Needs(caps) => {
                let names: Vec<&str> = caps.iter().map(|c| c.as_str()).collect();
                return Err(RefusedImport {
                    import: import.clone(),
                    reason: format!(
                        "`{import}` needs `{}`, which this turn was not granted",
                        names.join("` or `")
                    ),
                });
            }
            Authority::Unsupported => {
                return Err(RefusedImport {
                    import: import.clone(),
                    reason: format!("`{import}` is not an interface gatehouse provides"),
                })
            }
        }
    }
    Ok(())
}
