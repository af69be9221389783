//! `env:read` → only the named environment variables.

use wasmtime_wasi::WasiCtxBuilder;

use super::plan::Plan;

/// Copies the granted variables that are set on the host; nothing else.
///
/// # Security
/// Hands the guest the values of the plan's variables.
pub fn apply(b: &mut WasiCtxBuilder, plan: &Plan) -> Vec<String> {
    let mut given = Vec::new();
    for name in plan.env_names() {
        if let Ok(value) = std::env::var(name) {
            b.env(name, value);
            given.push(name.clone());
        }
    }
    given
}
