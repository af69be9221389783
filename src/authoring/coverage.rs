//! `gatehouse manifest check` with its component: import by import,
//! whether the manifest's capabilities cover it; which declared
//! capabilities the component cannot use; and each capability in plain
//! words. What an import needs comes from the table of bindings, what a
//! capability is from the registry and the matrix.

use serde::Serialize;

use super::inspect::{Inspection, Needs};
use crate::manifest::Manifest;
use crate::policy::{matrix, ApprovalClass, Capability, Level, TargetKind};
use crate::sandbox::table::{Authority, BINDINGS};

/// How one import fares against the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportStatus {
    /// Always linked.
    Baseline,
    /// A declared capability links it.
    Covered,
    /// Nothing declared links it: the run is refused (`IMPORT_NOT_GRANTED`).
    Uncovered,
}

/// One import of the component, checked.
#[derive(Debug, Clone, Serialize)]
pub struct ImportCheck {
    /// The import's name (`wasi:filesystem/types@0.2.6`, …).
    pub import: String,
    /// What it needs to be linked.
    pub needs: Needs,
    /// Whether the manifest covers it.
    pub status: ImportStatus,
    /// The declared capability that links it.
    pub covered_by: Option<&'static str>,
    /// For an uncovered import: what is wrong and what a run will do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// One declared capability, in plain words.
#[derive(Debug, Clone, Serialize)]
pub struct Explained {
    /// The capability's registry name.
    pub name: &'static str,
    /// Its target as the manifest declares it; `None` for a capability that takes none.
    pub target: Option<String>,
    /// What it lets the executor do.
    pub lets: &'static str,
    /// Whether it is irreversible or high-stakes (write, exec, admin).
    pub critical: bool,
    /// How it is approved, in words.
    pub approval: String,
    /// The matrix's answer at each level, before grants.
    pub levels: Vec<LevelOutcome>,
    /// Whether the component imports an interface through which it acts.
    pub usable: bool,
}

/// The matrix's answer for a capability at one level.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LevelOutcome {
    /// The level's name (`ReadOnly`, `Supervised`, `Full`).
    pub level: &'static str,
    /// The matrix cell (`allowed`, `approval_required`, `denied`).
    pub outcome: &'static str,
}

/// The whole check of a manifest against its component.
#[derive(Debug, Clone, Serialize)]
pub struct Coverage {
    /// Every import of the component, checked.
    pub imports: Vec<ImportCheck>,
    /// Declared capabilities the component cannot use, with why.
    pub unusable: Vec<String>,
    /// Every declared capability, explained.
    pub capabilities: Vec<Explained>,
}

impl Coverage {
    /// The imports no declared capability covers.
    pub fn uncovered(&self) -> impl Iterator<Item = &ImportCheck> {
        self.imports
            .iter()
            .filter(|i| i.status == ImportStatus::Uncovered)
    }
}

/// Checks `inspection` (the manifest's component) against `manifest`.
pub fn check(manifest: &Manifest, inspection: &Inspection) -> Coverage {
    let declared: Vec<Capability> = manifest.capabilities.iter().map(|c| c.capability).collect();
    let imports = inspection
        .imports
        .iter()
        .map(|i| import_check(&i.name, &i.needs, &declared))
        .collect();
    let imported: Vec<&str> = inspection
        .imports
        .iter()
        .filter_map(|i| i.binding)
        .collect();
    let mut unusable = Vec::new();
    let mut capabilities = Vec::new();
    for c in &manifest.capabilities {
        let cap = c.capability;
        let through = interfaces_of(cap);
        let usable = cap == Capability::ComputePure
            || BINDINGS
                .iter()
                .any(|b| imported.contains(&b.name) && acts_through(b, cap));
        if !usable {
            unusable.push(if through.is_empty() {
                format!(
                    "declares `{cap}` but no interface gatehouse provides acts on it: the component cannot use it"
                )
            } else {
                format!(
                    "declares `{cap}` but the component cannot use it: it imports none of {}",
                    through
                        .iter()
                        .map(|i| format!("`{i}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            });
        }
        capabilities.push(explain(cap, c.target.clone(), usable));
    }
    Coverage {
        imports,
        unusable,
        capabilities,
    }
}

/// The version of `gatehouse:executor` this host provides; imports of
/// another `0.1.x` link to it by semver.
pub const PACKAGE_VERSION: &str = "0.1.0";

fn import_check(import: &str, needs: &Needs, declared: &[Capability]) -> ImportCheck {
    let refused = "this executor will be refused with IMPORT_NOT_GRANTED";
    let other_version = import
        .strip_prefix("gatehouse:executor/")
        .and_then(|rest| rest.split_once('@'))
        .filter(|(_, v)| !v.starts_with("0.1."))
        .map(|(_, v)| v);
    if let Some(v) = other_version {
        return ImportCheck {
            import: import.to_string(),
            needs: needs.clone(),
            status: ImportStatus::Uncovered,
            covered_by: None,
            problem: Some(format!(
                "imports `{import}`, version `{v}`, but this gatehouse provides `gatehouse:executor@{PACKAGE_VERSION}`: the component cannot be linked"
            )),
        };
    }
    let (status, covered_by, problem) = match needs {
        Needs::Baseline => (ImportStatus::Baseline, None, None),
        Needs::Capability { any_of } => {
            match declared.iter().find(|d| any_of.contains(&d.as_str())) {
                Some(d) => (ImportStatus::Covered, Some(d.as_str()), None),
                None => (
                    ImportStatus::Uncovered,
                    None,
                    Some(format!(
                        "imports `{import}` but declares no {}: {refused}",
                        needs.describe()
                    )),
                ),
            }
        }
        Needs::Unsupported => (
            ImportStatus::Uncovered,
            None,
            Some(format!(
                "imports `{import}`, which gatehouse does not provide: {refused}"
            )),
        ),
    };
    ImportCheck {
        import: import.to_string(),
        needs: needs.clone(),
        status,
        covered_by,
        problem,
    }
}

/// Whether binding `b` is how `cap` reaches a guest: it links only with
/// `cap`, or `cap` fills it.
fn acts_through(b: &crate::sandbox::table::Binding, cap: Capability) -> bool {
    matches!(b.authority, Authority::Needs(caps) if caps.contains(&cap))
        || b.filled_by.contains(&cap)
}

/// The interfaces through which `cap` reaches a guest, from the table.
pub fn interfaces_of(cap: Capability) -> Vec<&'static str> {
    BINDINGS
        .iter()
        .filter(|b| acts_through(b, cap))
        .flat_map(|b| b.interfaces.iter().copied())
        .collect()
}

/// How a capability is approved, in words.
pub fn approval_words(class: ApprovalClass) -> &'static str {
    match class {
        ApprovalClass::None => "needs no approval where the level allows it",
        ApprovalClass::PerTarget => {
            "approved per target: the person is asked for the declared target, and \"allow and remember\" records a grant that answers later turns"
        }
        ApprovalClass::Always => {
            "approved on every turn: asked each time, never remembered as a grant"
        }
    }
}

/// What a capability's target names, in words.
pub fn target_words(kind: TargetKind) -> &'static str {
    match kind {
        TargetKind::PathGlob => {
            "a path glob: relative to the turn's workspace, under `~/`, or absolute"
        }
        TargetKind::Host => "a host name or IP address, with an optional port",
        TargetKind::Exact => "an exact name",
        TargetKind::None => "no target",
    }
}

/// `cap` in plain words.
pub fn explain(cap: Capability, target: Option<String>, usable: bool) -> Explained {
    let spec = cap.spec();
    Explained {
        name: spec.name,
        target,
        lets: spec.bound_to,
        critical: spec.critical,
        approval: approval_words(spec.default_approval).to_string(),
        levels: Level::ALL
            .iter()
            .map(|l| LevelOutcome {
                level: l.as_str(),
                outcome: matrix(*l, cap).as_str(),
            })
            .collect(),
        usable,
    }
}

impl Explained {
    /// One line for people.
    pub fn line(&self) -> String {
        let target = self
            .target
            .as_deref()
            .map(|t| format!(" `{t}`"))
            .unwrap_or_default();
        let levels = self
            .levels
            .iter()
            .map(|l| format!("{} {}", l.level, l.outcome.replace('_', " ")))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "`{}`{target}: {}; {}; {} ({levels})",
            self.name,
            self.lets,
            if self.critical {
                "critical"
            } else {
                "not critical"
            },
            self.approval
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_of_another_minor_version_is_not_covered() {
        let needs = Needs::of("gatehouse:executor/log@0.2.0");
        let x = import_check("gatehouse:executor/log@0.2.0", &needs, &[]);
        assert_eq!(x.status, ImportStatus::Uncovered);
        assert_eq!(
            x.problem.as_deref(),
            Some("imports `gatehouse:executor/log@0.2.0`, version `0.2.0`, but this gatehouse provides `gatehouse:executor@0.1.0`: the component cannot be linked")
        );
        // Another patch of 0.1 links by semver.
        let x = import_check("gatehouse:executor/log@0.1.3", &needs, &[]);
        assert_eq!(x.status, ImportStatus::Baseline);
    }

    #[test]
    fn a_gated_import_is_covered_by_any_capability_that_links_it() {
        let import = "gatehouse:executor/memory@0.1.0";
        let needs = Needs::of(import);
        let x = import_check(import, &needs, &[Capability::MemoryWrite]);
        assert_eq!(x.covered_by, Some("memory:write"));
        let x = import_check(import, &needs, &[Capability::FsRead]);
        assert_eq!(
            x.problem.as_deref(),
            Some("imports `gatehouse:executor/memory@0.1.0` but declares no `memory:read` or `memory:write`: this executor will be refused with IMPORT_NOT_GRANTED")
        );
        assert_eq!(
            interfaces_of(Capability::TimeRead),
            ["wasi:clocks/wall-clock", "wasi:clocks/monotonic-clock"]
        );
        assert!(interfaces_of(Capability::SystemAdmin).is_empty());
    }
}
