//! The import check: a component's imports compared with its plan, before
//! any instance exists.
//!
//! What each interface needs comes from the one table of bindings
//! ([`super::table`]): an import of one without its grant is
//! `IMPORT_NOT_GRANTED` naming the import; interfaces gatehouse does not
//! provide at all are refused the same way.

use serde::Serialize;

use super::plan::Plan;

pub use super::table::{authority, Authority};

/// The first import the plan does not allow, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedImport {
    /// The import, as the component names it.
    pub import: String,
    /// Why the plan does not allow it.
    pub reason: String,
}

/// Strips `@0.2.6` from `wasi:cli/environment@0.2.6`.
pub fn interface_name(import: &str) -> &str {
    import.split('@').next().unwrap_or(import)
}

/// Checks every import name against the plan.
pub fn check(imports: &[String], plan: &Plan) -> Result<(), RefusedImport> {
    let authorities: Vec<Authority> = imports
        .iter()
        .map(|i| authority(interface_name(i)))
        .collect();
    check_known(imports, &authorities, plan)
}

/// [`check`] of imports whose authorities were looked up before (the
/// same order: `authorities[i]` is what `imports[i]` needs).
pub fn check_known(
    imports: &[String],
    authorities: &[Authority],
    plan: &Plan,
) -> Result<(), RefusedImport> {
    for (import, authority) in imports.iter().zip(authorities) {
        match *authority {
            Authority::Baseline => {}
            Authority::Needs(caps) if caps.iter().any(|c| plan.grants(*c)) => {}
            Authority::Needs(caps) => {
                let names: Vec<&str> = caps.iter().map(|c| c.as_str()).collect();
                return Err(RefusedImport {
                    import: import.clone(),
                    reason: format!(
                        "`{import}` needs `{}`, which this turn was not granted (a manifest declares it as `[[capabilities]] name = \"{}\"`)",
                        names.join("` or `"),
                        names.first().copied().unwrap_or_default()
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
