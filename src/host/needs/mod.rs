//! What the gate asks of each capability the executor declared
//! ([`super::gate`]). It asks the policy about the capability with its
//! target; when that allows, a capability whose only rule is its own
//! decision is put in its unit's part of the plan by the unit itself
//! ([`crate::sandbox::Parts::allow`]), so a new one of that kind needs
//! nothing here. The capabilities with rules of their own have a need
//! function here, which asks them too (the workspace rule for a path, the
//! scope rule for memory, the tool layers for a program, a site's methods,
//! a provider's base URLs) and fills its unit's part
//! ([`crate::sandbox::Parts`]). I/O a question needs (resolving a path)
//! happens here, before `decide`, and its result is passed in.

mod asked;
mod exec;
mod fs;
mod memory;
mod network;

use crate::manifest::Manifest;
use crate::policy::{
    decide, ApprovalClass, Capability, Decision, DenyCode, Request, RequestKind, Snapshot, UtcTime,
};
use crate::sandbox::{Allowed, Parts};

pub(super) use asked::queued;
pub use asked::{Once, Pending, Step};

pub(super) use fs::finish;

/// Why the gate stops: the first deny.
#[derive(Debug)]
pub(super) struct Stop {
    pub code: DenyCode,
    pub reason: String,
}

impl Stop {
    pub fn new(code: DenyCode, reason: impl Into<String>) -> Stop {
        Stop {
            code,
            reason: reason.into(),
        }
    }
}

/// The questions of one turn so far, and what they allowed.
pub(super) struct Asking<'a> {
    pub snapshot: &'a Snapshot,
    pub actor: &'a str,
    pub now: UtcTime,
    /// Approvals given once, for this turn only.
    pub approved_once: &'a Once,
    pub steps: Vec<Step>,
    pub pending: Vec<Pending>,
    pub allowed: Vec<Allowed>,
}

impl Asking<'_> {
    /// Asks the policy `kind`; a deny stops the gate. The step keeps the
    /// decision; the caller gets what it acts on.
    pub fn ask(&mut self, kind: RequestKind) -> Result<Decision, Stop> {
        let request = Request::new(self.actor, kind);
        let decision = decide(self.snapshot, &request, self.now);
        // An allow's reason is the step's alone: not copied.
        let answer = match &decision {
            Decision::Allow { .. } => Decision::Allow {
                reason: String::new(),
                grant: None,
            },
            other => other.clone(),
        };
        self.steps.push(Step {
            request,
            decision,
            approval: None,
        });
        match answer {
            Decision::Deny { code, reason } => Err(Stop { code, reason }),
            other => Ok(other),
        }
    }

    /// Asks about the declared capability itself, its target matched where
    /// it really is (`canonical`, when the need resolved it). An approval
    /// it needs is pending unless given once for this turn; either way the
    /// need goes on to its unit's own rules, and the capability is kept as
    /// allowed with the target it was matched on.
    pub fn capability(&mut self, need: &Need<'_>, canonical: Option<String>) -> Result<(), Stop> {
        self.capability_asked(need, canonical, false).map(|_| ())
    }

    /// As [`Asking::capability`], for a capability a person is asked
    /// about later, one command line at a time (a component's
    /// `code:exec`): an approval it needs is not pending at the gate.
    /// Whether it needs one.
    pub fn capability_per_line(&mut self, need: &Need<'_>) -> Result<bool, Stop> {
        self.capability_asked(need, None, true)
    }

    fn capability_asked(
        &mut self,
        need: &Need<'_>,
        canonical: Option<String>,
        per_line: bool,
    ) -> Result<bool, Stop> {
        let cap = need.cap;
        let matched = canonical
            .clone()
            .or_else(|| need.target.map(str::to_string));
        let decision = self.ask(RequestKind::Capability {
            capability: cap,
            target: need.target.map(str::to_string),
            canonical_target: canonical,
            executor: Some(need.executor.to_string()),
        })?;
        let mut asked_per_line = false;
        if let Decision::ApprovalRequired {
            target: asked,
            reason,
            ..
        } = decision
        {
            if per_line {
                if let Some(last) = self.steps.last_mut() {
                    last.approval = Some("asked_per_command_line");
                }
                asked_per_line = true;
            } else if self
                .approved_once
                .items
                .iter()
                .any(|p| p.capability == cap && p.target == asked)
            {
                if let Some(last) = self.steps.last_mut() {
                    last.approval = Some("allow_once");
                }
            } else {
                self.pending.push(Pending {
                    capability: cap,
                    declared_target: need
                        .target
                        .map(str::to_string)
                        .filter(|t| Some(t) != asked.as_ref()),
                    target: asked,
                    mount: need.mount.map(str::to_string),
                    critical: cap.critical(),
                    rememberable: cap.default_approval() != ApprovalClass::Always,
                    reason,
                });
            }
        }
        self.allowed.push(Allowed {
            capability: cap,
            target: matched,
        });
        Ok(asked_per_line)
    }
}

/// One capability an executor declared.
pub(super) struct Need<'a> {
    pub cap: Capability,
    pub target: Option<&'a str>,
    /// For a path: the directory's name in the guest, when declared.
    pub mount: Option<&'a str>,
    /// Its place in the manifest's `capabilities` (for messages).
    pub index: usize,
    pub executor: &'a str,
    pub manifest: &'a Manifest,
    /// The turn's workspace (canonical; empty when none).
    pub workspace: &'a str,
    /// For `network:sites`: the HTTP methods allowed (`None`: any).
    pub methods: Option<&'a [String]>,
    /// The units' runtimes (`provider:access` asks the HTTP unit's which
    /// providers the host defines).
    pub units: &'a crate::sandbox::Runtimes,
}

/// Asks the policy for `need` and fills its unit's part of `parts`.
pub(super) fn need(
    parts: &mut Parts,
    asking: &mut Asking<'_>,
    need: &Need<'_>,
) -> Result<(), Stop> {
    match need.cap {
        Capability::FsRead | Capability::FsWrite => fs::need(&mut parts.fs, asking, need),
        Capability::MemoryRead | Capability::MemoryWrite => {
            memory::need(&mut parts.memory, asking, need)
        }
        Capability::CodeExec => exec::need(&mut parts.exec, asking, need),
        Capability::NetworkSites => {
            network::network(&mut parts.network, &mut parts.http, asking, need)
        }
        Capability::ProviderAccess => network::provider(&mut parts.http, asking, need),
        // The others' only rule is the capability's own decision: the
        // unit that serves it puts the target in its part (none for
        // `compute:pure` and `system:admin`, whose decision is the whole
        // answer).
        cap => {
            asking.capability(need, None)?;
            parts.allow(cap, need.target);
            Ok(())
        }
    }
}
