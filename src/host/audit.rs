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
    turn: String,
    /// `"turn":…,` encoded once.
    turn_field: String,
    /// `"actor":…,"identity":…,"snapshot":{…}}`: how every line of the
    /// turn ends, encoded once per actor and snapshot ([`tail`]).
    tail: std::sync::Arc<str>,
    journal: TurnJournal,
}

/// One decision of a gate, as its audit line holds it.
#[derive(Serialize)]
struct GateLine<'a> {
    request: &'a crate::policy::Request,
    decision: &'a crate::policy::Decision,
    approval: Option<&'static str>,
    grant: Option<i64>,
}

/// An approval answer, as its audit line holds it.
#[derive(Serialize)]
struct AnswerLine<'a> {
    approval: &'a super::Answer,
}

/// How every audit line of a turn by `actor` (with `identity`) under the
/// snapshot of `hashes` ends: `"actor":…,"identity":…,"snapshot":{…}}`.
pub(crate) fn tail(actor: &str, identity: Option<&Identity>, hashes: &Hashes) -> String {
    format!(
        "\"actor\":{},\"identity\":{},\"snapshot\":{}}}",
        encode(&actor),
        encode(&identity),
        encode(hashes)
    )
}

fn encode(value: &impl Serialize) -> String {
    // Encoding these values cannot fail (string keys, no maps of other
    // keys); an empty object stands in rather than losing the line.
    serde_json::to_string(value).unwrap_or_else(|_| "{}".into())
}

impl TurnAudit {
    /// The audit of `turn`, each line ending with `tail` (see [`tail`]),
    /// kept in `journal`.
    pub(crate) fn new(turn: &str, tail: std::sync::Arc<str>, journal: TurnJournal) -> TurnAudit {
        // `"turn":"<id>",` in one buffer.
        let mut turn_field = String::with_capacity(turn.len() + 12);
        turn_field.push_str("\"turn\":");
        turn_field.push_str(&encode(&turn));
        turn_field.push(',');
        TurnAudit {
            turn: turn.to_string(),
            turn_field,
            tail,
            journal,
        }
    }

    /// Keeps `body` (one encoded JSON object), completed with the turn
    /// (unless the body names its own, as a delegated turn's lines do),
    /// the actor, its identity and the snapshot's hashes.
    fn keep(&self, body: String, has_turn: bool) {
        // The body's own buffer becomes the line: its closing brace goes,
        // the turn and the tail follow.
        let mut line = body;
        if line.ends_with('}') {
            line.pop();
        }
        let turn = if has_turn {
            ""
        } else {
            self.turn_field.as_str()
        };
        line.reserve(1 + turn.len() + self.tail.len());
        if !line.ends_with('{') {
            line.push(',');
        }
        line.push_str(turn);
        line.push_str(&self.tail);
        if let Err(e) = self.journal.decision_line(line) {
            tracing::warn!("the audit of turn `{}` lost a line: {e}", self.turn);
        }
    }

    /// Records a gate's decisions and the approval answers; `turn` names a
    /// nested turn (its decisions go to its caller's audit).
    pub(crate) fn record_gate(
        &self,
        turn: Option<&str>,
        steps: &[super::Step],
        answers: &[super::Answer],
    ) {
        let nested = turn.map(|t| format!("\"turn\":{},", encode(&t)));
        for s in steps {
            let body = encode(&GateLine {
                request: &s.request,
                decision: &s.decision,
                approval: s.approval,
                grant: s.decision.grant(),
            });
            match &nested {
                Some(field) => {
                    let body = format!("{{{field}{}", body.strip_prefix('{').unwrap_or(&body));
                    self.keep(body, true);
                }
                None => self.keep(body, false),
            }
        }
        for a in answers {
            self.keep(encode(&AnswerLine { approval: a }), false);
        }
    }
}

impl AuditSink for TurnAudit {
    fn decision(&self, line: serde_json::Value) {
        self.keep(encode(&line), line.get("turn").is_some());
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
    /// A command's `argv[1..]`; absent when there were none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    pub code: DenyCode,
    pub reason: String,
    /// The pending approval the request left in the queue, or that
    /// answered it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_id: Option<String>,
    #[serde(flatten)]
    pub hashes: Hashes,
}
