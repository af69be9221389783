//! `[isolation] on_degraded`: what a host does with critical work while
//! its isolation is degraded.
//!
//! A pure setting that the configuration parses and the sandbox's
//! isolation report applies (`IsolationReport::refusal`): it lives in the
//! core both of them may name, so neither names the other.

use serde::Serialize;

/// What a host does with critical work while its isolation is degraded
/// (`[isolation] on_degraded` in `gatehouse.toml`, `run --on-degraded`).
///
/// Default: [`OnDegraded::Warn`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnDegraded {
    /// Run, with the report attached to the result.
    #[default]
    Warn,
    /// Refuse a turn that needs a critical capability (fs:write,
    /// memory:write, code:exec, system:admin) with `ISOLATION_DEGRADED`.
    RefuseCritical,
    /// Refuse every turn with `ISOLATION_DEGRADED`.
    RefuseAll,
}

/// An `on_degraded` value that is not one of the three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown value `{0}` (expected `warn`, `refuse-critical` or `refuse-all`)")]
pub struct UnknownOnDegraded(pub String);

impl std::str::FromStr for OnDegraded {
    type Err = UnknownOnDegraded;

    fn from_str(s: &str) -> Result<OnDegraded, UnknownOnDegraded> {
        match s {
            "warn" => Ok(OnDegraded::Warn),
            "refuse-critical" => Ok(OnDegraded::RefuseCritical),
            "refuse-all" => Ok(OnDegraded::RefuseAll),
            _ => Err(UnknownOnDegraded(s.to_string())),
        }
    }
}

impl OnDegraded {
    /// The value as written in `gatehouse.toml` (`warn`, `refuse-critical`, `refuse-all`).
    pub fn as_str(self) -> &'static str {
        match self {
            OnDegraded::Warn => "warn",
            OnDegraded::RefuseCritical => "refuse-critical",
            OnDegraded::RefuseAll => "refuse-all",
        }
    }
}
