//! `env:read` → only the named environment variables.

use wasmtime_wasi::WasiCtxBuilder;

use super::plan::Plan;
use super::services::RunServices;

/// Copies the granted variables that are set on the host (their values as
/// the host read them into `services`); nothing else.
///
/// # Security
/// Hands the guest the values of the plan's variables.
pub fn apply(b: &mut WasiCtxBuilder, plan: &Plan, services: &RunServices) -> Vec<String> {
    let mut given = Vec::new();
    for (name, value) in &services.env {
        // Only what the plan names, whatever the services hold.
        if plan.env_names().contains(name) {
            b.env(name, value);
            given.push(name.clone());
        }
    }
    given
}
