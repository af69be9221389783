//! The gate of a turn: every need of an executor asked of `policy::decide`,
//! and a [`Plan`] only when all of them are allowed.
//!
//! Order (deny-first): may the actor run this executor (skill); then each
//! declared capability with its target (matrix + grants, within what the
//! executor declared), and the rules its need function adds
//! ([`super::needs`]): for path targets, the workspace rule on the
//! directory the sandbox would open; for memory, the scope rule; for a
//! program, the tool layers. The first
//! deny ends the turn and nothing was touched: no component read, no
//! engine used, no file opened. The host then asks for approvals, and only
//! after them probes the isolation of the engine (see `super::Host`).

use std::path::PathBuf;

use serde::Serialize;

use super::needs::{self, Asking, Need, Once, Pending, Step, Stop};
use crate::manifest::Manifest;
use crate::policy::{DenyCode, RequestKind, Snapshot, UtcTime};
use crate::sandbox::{Limits, Parts, Plan, Runnable};

/// The gate's answer.
#[derive(Debug, Serialize)]
#[serde(tag = "gate", rename_all = "snake_case")]
pub enum Gate {
    Denied {
        steps: Vec<Step>,
        code: DenyCode,
        reason: String,
    },
    ApprovalRequired {
        steps: Vec<Step>,
        pending: Vec<Pending>,
    },
    Ready {
        steps: Vec<Step>,
        #[serde(skip)]
        plan: Box<Plan>,
    },
}

/// What the gate needs for one turn.
pub struct TurnInput<'a> {
    pub snapshot: &'a Snapshot,
    pub actor: &'a str,
    pub manifest: &'a Manifest,
    pub turn_id: String,
    pub limits: Limits,
    /// Approvals given once, for this turn only.
    pub approved_once: &'a Once,
    /// The time of the decision, read from the clock by the caller: a
    /// grant counts only while unexpired at it.
    pub now: UtcTime,
    /// The units' runtimes (a need asks the HTTP unit's which
    /// providers the host defines).
    pub units: &'a crate::sandbox::Runtimes,
}

/// Asks the policy for every need of the turn: the skill first, then each
/// declared capability through its need function (`super::needs`), which
/// fills its unit's part of the plan.
pub(crate) fn gate(input: TurnInput<'_>) -> Gate {
    let snap = input.snapshot;
    let name = input.manifest.name.as_str();
    let mut asking = Asking {
        snapshot: snap,
        actor: input.actor,
        now: input.now,
        approved_once: input.approved_once,
        steps: Vec::new(),
        pending: Vec::new(),
        allowed: Vec::new(),
    };
    let denied = |asking: Asking<'_>, stop: Stop| Gate::Denied {
        steps: asking.steps,
        code: stop.code,
        reason: stop.reason,
    };
    if let Err(stop) = asking.ask(RequestKind::Skill {
        skill: name.to_string(),
    }) {
        return denied(asking, stop);
    }
    let Some(def) = snap.executors.get(name) else {
        let stop = Stop::new(
            DenyCode::UnknownRequest,
            format!("executor `{name}` is not in this turn's snapshot"),
        );
        return denied(asking, stop);
    };
    let workspace = snap.roots.turn_workspace.clone().unwrap_or_default();
    let mut parts = Parts::default();
    for (index, declared) in def.capabilities.iter().enumerate() {
        let need = Need {
            cap: declared.capability,
            target: declared.target.as_deref(),
            mount: declared.mount.as_deref(),
            index,
            executor: name,
            manifest: input.manifest,
            workspace: &workspace,
            methods: declared.methods.as_deref(),
            units: input.units,
        };
        if let Err(stop) = needs::need(&mut parts, &mut asking, &need) {
            return denied(asking, stop);
        }
    }
    if !asking.pending.is_empty() {
        return Gate::ApprovalRequired {
            steps: asking.steps,
            pending: asking.pending,
        };
    }
    needs::finish(&mut parts.fs, snap, input.actor);
    let m = input.manifest;
    let plan = Plan::from_allowed(
        input.turn_id,
        name.to_string(),
        Runnable::of(&m.component, &m.command, m.sha256.as_deref()),
        asking.allowed,
        input.limits,
        PathBuf::from(workspace),
        parts,
    );
    Gate::Ready {
        steps: asking.steps,
        plan: Box::new(plan),
    }
}
