//! The one audit path of a host.
//!
//! - Every decision of a turn that runs (its gate's, its approvals, its
//!   delegated turns', every command call and every refusal of the
//!   filesystem layer) goes through the turn's [`TurnAudit`], which adds
//!   the turn, the actor's identity and the snapshot's two hashes, and
//!   hands the line to the turn's journal: to `<turn>/decisions.jsonl` once
//!   the turn has mutated something, else kept and written at the end as
//!   one record of `<state>/audit.jsonl`.
//! - A request that ends before guest code starts writes exactly one
//!   [`DenialRecord`] to `<state>/denials.jsonl`, and nothing else.

use std::sync::Arc;

use serde::Serialize;

use crate::policy::{DenyCode, Identity, UtcTime};
use crate::sandbox::AuditSink;
use crate::undo::TurnJournal;

/// The snapshot's two hashes, as every audit line carries them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hashes {
    #[serde(rename = "definitionHash")]
    pub definition: String,
    #[serde(rename = "policyHash")]
    pub policy: String,
}

/// A turn's audit: who, under which policy, into which journal.
pub struct TurnAudit {
    pub(crate) turn: String,
    pub(crate) actor: String,
    pub(crate) identity: Option<Identity>,
    pub(crate) hashes: Arc<Hashes>,
    pub(crate) journal: TurnJournal,
}

impl TurnAudit {
    /// Adds the turn, actor, identity and hashes where `line` lacks them
    /// (a delegated turn's lines carry their own turn id).
    fn complete(&self, mut line: serde_json::Value) -> serde_json::Value {
        if let Some(obj) = line.as_object_mut() {
            obj.entry("turn")
                .or_insert_with(|| serde_json::json!(self.turn));
            obj.entry("actor")
                .or_insert_with(|| serde_json::json!(self.actor));
            obj.entry("identity")
                .or_insert_with(|| serde_json::json!(self.identity));
            obj.entry("snapshot")
                .or_insert_with(|| serde_json::json!(*self.hashes));
        }
        line
    }
}

impl TurnAudit {
    /// Records a gate's decisions and the approval answers; `turn` names a
    /// nested turn (its decisions go to its caller's audit).
    pub(crate) fn record_gate(
        &self,
        turn: Option<&str>,
        steps: &[super::Step],
        answers: &[super::Answer],
    ) {
        for s in steps {
            let mut line = serde_json::json!({
                "request": s.request,
                "decision": s.decision,
                "approval": s.approval,
                "grant": s.decision.grant(),
            });
            if let Some(turn) = turn {
                line["turn"] = serde_json::json!(turn);
            }
            self.decision(line);
        }
        for a in answers {
            self.decision(serde_json::json!({ "approval": a }));
        }
    }
}

impl AuditSink for TurnAudit {
    fn decision(&self, line: serde_json::Value) {
        if let Err(e) = self.journal.decision(&self.complete(line)) {
            tracing::warn!("the audit of turn `{}` lost a line: {e}", self.turn);
        }
    }
}

/// One line of `<state>/denials.jsonl`: a request that ended before any
/// guest code ran. The input itself is never recorded, only its digest and
/// size.
#[derive(Debug, Clone, Serialize)]
pub struct DenialRecord {
    pub time: UtcTime,
    pub turn: String,
    pub actor: String,
    pub channel: Option<String>,
    pub sender: Option<String>,
    pub executor: String,
    /// The component's sha256 when it is known without running anything
    /// (the digest the manifest pins, or the one computed before a
    /// `DIGEST_MISMATCH` or `IMPORT_NOT_GRANTED`).
    pub component_sha256: Option<String>,
    pub input_sha256: String,
    pub input_bytes: usize,
    pub code: DenyCode,
    pub reason: String,
    #[serde(flatten)]
    pub hashes: Hashes,
}
