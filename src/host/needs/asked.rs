//! What a turn's gate asked and what waits for a person: each question
//! and its answer ([`Step`]), each capability that needs an approval
//! ([`Pending`]), and what a person allowed for the turn only ([`Once`]).

use serde::Serialize;

use crate::policy::{Capability, Decision, Request};

/// One question asked of the policy, and its answer.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// The request, as the policy decides it.
    pub request: Request,
    /// The policy's answer.
    pub decision: Decision,
    /// Set when an approval turned `approval_required` into a go.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<&'static str>,
}

/// A capability waiting for a person's approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pending {
    /// The capability that needs approval.
    pub capability: Capability,
    /// The target where it really is: for a path glob, its literal
    /// directory canonical (every symlink resolved, `~` expanded), its
    /// wildcards kept. "Allow and remember" records this target.
    pub target: Option<String>,
    /// The target as the executor declared it, when it resolves elsewhere
    /// (`WS/out/**` for `target` `WS/private/**`, `out` a link).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared_target: Option<String>,
    /// For a path glob with a `mount`: the directory's name in the guest
    /// (the prompt shows both names).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount: Option<String>,
    /// Whether the capability can change or destroy data.
    pub critical: bool,
    /// Whether "allow and remember" may record a grant for it (never for
    /// an `always`-class capability).
    pub rememberable: bool,
    /// Why it needs an approval.
    pub reason: String,
}

/// What a person allowed for one turn only.
#[derive(Debug, Clone, Default)]
pub struct Once {
    /// Each pending item a person allowed once (its capability and
    /// canonical target are what the gate matches).
    pub items: Vec<Pending>,
    /// The command lines (argv) approved for a `code:exec` allowed once:
    /// those the queued answer the turn took was given for.
    pub commands: Vec<Vec<String>>,
}

impl From<&Pending> for crate::state::approvals::QueuedItem {
    fn from(p: &Pending) -> crate::state::approvals::QueuedItem {
        crate::state::approvals::QueuedItem {
            capability: p.capability,
            target: p.target.clone(),
            critical: p.critical,
            rememberable: p.rememberable,
            reason: p.reason.clone(),
        }
    }
}

/// What `pending` needs, as the approval queue keeps it.
pub(in crate::host) fn queued(pending: &[Pending]) -> Vec<crate::state::approvals::QueuedItem> {
    pending.iter().map(Into::into).collect()
}
