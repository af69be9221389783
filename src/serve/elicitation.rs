//! Asking the person through the client: an approval as one MCP
//! elicitation for the whole pending set ([`elicitation`]), and a guest's
//! questions (`human:ask`).

use std::time::Duration;

use rmcp::model::{
    ConstTitle, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    EnumSchema, PrimitiveSchemaDefinition, SingleSelectEnumSchema, StringSchema,
    TitledSingleSelectEnumSchema,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::Server;
use crate::host::{ApprovalRequest, Asker, Choice};
use crate::policy::DenyCode;

impl Server {
    /// Whether a client is asked about approvals at all (`[approvals]
    /// elicitation` is not `off`).
    pub(super) fn elicits(&self) -> bool {
        self.inner.options.elicitation != crate::config::Elicitation::Off
    }

    /// Whether a client's form offers "allow and remember", and its
    /// answer may record a grant: `[approvals] elicitation = "remember"`,
    /// on a server not started from a verified snapshot.
    pub(super) fn offers_remember(&self) -> bool {
        self.inner.options.remember
            && self.inner.options.elicitation == crate::config::Elicitation::Remember
    }

    /// Asks the person through elicitation, if the client declared it:
    /// one question for the whole pending set. No answer (no elicitation,
    /// a dismissal, the timeout, a malformed answer): every item queued.
    pub(super) async fn ask(
        &self,
        approval: &ApprovalRequest,
        context: &RequestContext<RoleServer>,
    ) -> Vec<Choice> {
        let queued = vec![Choice::Queue; approval.pending.len()];
        if !supports_elicitation(context) || !self.elicits() {
            return queued;
        }
        let params = elicitation(approval, self.offers_remember());
        let answer = context
            .peer
            .create_elicitation_with_timeout(params, Some(self.inner.options.elicitation_timeout))
            .await;
        let result = match answer {
            Ok(r) => r,
            Err(e) => {
                tracing::info!(
                    "turn `{}`: no answer to the elicitation: {e}",
                    approval.turn
                );
                return queued;
            }
        };
        let choice = self.choice_of(result);
        vec![choice; approval.pending.len()]
    }

    /// The choice an answer to the approval form makes: the whole pending
    /// set gets it. A dismissal, a malformed answer or a remember this
    /// server may not record: the queue.
    pub(super) fn choice_of(&self, result: ElicitResult) -> Choice {
        match result.action {
            ElicitationAction::Accept => {
                let content = result.content.unwrap_or_default();
                match content.get("decision").and_then(Value::as_str) {
                    Some("allow_once") => Choice::Once,
                    Some("allow_and_remember") if !self.offers_remember() => Choice::Queue,
                    Some("allow_and_remember") => {
                        let answer = content
                            .get("expires_in")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        match crate::host::remember_for(answer) {
                            Ok(secs) => Choice::Remember {
                                expires_in_secs: secs.and_then(|s| u64::try_from(s).ok()),
                            },
                            Err(_) => Choice::Queue,
                        }
                    }
                    Some("deny") => Choice::Deny,
                    _ => Choice::Queue,
                }
            }
            ElicitationAction::Decline => Choice::Deny,
            _ => Choice::Queue,
        }
    }
}

/// Whether the client declared elicitation: when it connected
/// (2025-11-25), or in the call's own `_meta` (2026-07-28).
pub(super) fn supports_elicitation(context: &RequestContext<RoleServer>) -> bool {
    // The call's own capabilities first, as rmcp's `client_capabilities`
    // does, without its copy of the session's on every call.
    if let Some(caps) = context.meta.client_capabilities() {
        return caps.elicitation.is_some();
    }
    context
        .peer
        .peer_info()
        .is_some_and(|i| i.capabilities.elicitation.is_some())
}

/// A guest's questions (`human:ask`) asked of the person through the
/// client's elicitation, from the turn's blocking thread.
pub(super) struct ElicitAsker {
    pub(super) peer: rmcp::service::Peer<RoleServer>,
    pub(super) runtime: tokio::runtime::Handle,
    pub(super) timeout: Duration,
    /// Why no one can be asked (`None`: the client can be).
    pub(super) refusal: Option<&'static str>,
    pub(super) executor: String,
}

impl Asker for ElicitAsker {
    fn ask(&self, question: &str, left: Duration) -> Result<String, (DenyCode, String)> {
        if let Some(why) = self.refusal {
            return Err((DenyCode::ApprovalRequired, why.into()));
        }
        let params = form(
            format!("executor `{}` asks: {question}", self.executor),
            [("answer", string("Answer", None))],
            "answer",
        );
        let wait = self.timeout.min(left);
        let answer = self.runtime.block_on(
            self.peer
                .create_elicitation_with_timeout(params, Some(wait)),
        );
        match answer {
            Ok(r) if r.action == ElicitationAction::Accept => Ok(r
                .content
                .as_ref()
                .and_then(|c| c.get("answer"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()),
            Ok(_) => Err((
                DenyCode::ApprovalRefused,
                "the person declined to answer".into(),
            )),
            Err(e) => Err((
                DenyCode::ApprovalRequired,
                format!("no answer from the person: {e}"),
            )),
        }
    }
}

/// The elicitation that asks about `approval`: every item with its
/// capability, canonical target, whether it is critical and why; "allow
/// and remember" offered only when `remember` and every item may be
/// remembered. The choices are a titled single-select (`oneOf` of
/// `const` and `title`, the 2025-11-25 standard form, not the legacy
/// `enumNames`); the consts `allow_once`, `allow_and_remember` and `deny`
/// are what clients answer with, and do not change.
pub fn elicitation(approval: &ApprovalRequest, remember: bool) -> ElicitRequestParams {
    let mut message = format!(
        "executor `{}` (actor `{}`, turn `{}`) needs your approval for:",
        approval.executor, approval.actor, approval.turn
    );
    for p in &approval.pending {
        message.push_str(&format!(
            "\n- `{}` on `{}` ({}): {}",
            p.capability,
            p.target.as_deref().unwrap_or("-"),
            if p.critical {
                "critical"
            } else {
                "not critical"
            },
            p.reason
        ));
        if let Some(d) = &p.declared_target {
            message.push_str(&format!(" (declared as `{d}`)"));
        }
    }
    // What else it allows: the executor's digest, the input, a command's
    // argv and the files it names (escaped: guest and client text).
    for line in approval.shown.lines() {
        message.push('\n');
        message.push_str(&crate::util::printable(&line));
    }
    let all_rememberable = approval.pending.iter().all(|p| p.rememberable);
    let rememberable = remember && all_rememberable;
    let allow_once = ConstTitle::new("allow_once", "Allow once");
    let deny = ConstTitle::new("deny", "Deny");
    if rememberable {
        let remember = ConstTitle::new("allow_and_remember", "Allow and remember (writes a grant)");
        return form(
            message,
            [
                ("decision", choice(vec![allow_once, remember, deny])),
                (
                    "expires_in",
                    string(
                        "Remember for",
                        Some("with allow and remember: 30s, 10m, 2h, 7d or forever; empty: 24h"),
                    ),
                ),
            ],
            "decision",
        );
    }
    if !all_rememberable {
        message.push_str("\n(an always-class capability: it cannot be remembered)");
    }
    form(
        message,
        [("decision", choice(vec![allow_once, deny]))],
        "decision",
    )
}

/// A form elicitation: `message`, and an object of `properties` of which
/// `required` is required.
fn form<const N: usize>(
    message: String,
    properties: [(&str, PrimitiveSchemaDefinition); N],
    required: &str,
) -> ElicitRequestParams {
    let properties = properties
        .into_iter()
        .map(|(name, schema)| (name.to_string(), schema))
        .collect();
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: ElicitationSchema::new(properties)
            .with_required(vec![required.to_string()]),
    }
}

/// A string property titled `title`.
fn string(title: &'static str, description: Option<&'static str>) -> PrimitiveSchemaDefinition {
    let schema = StringSchema::new().title(title);
    PrimitiveSchemaDefinition::String(match description {
        Some(d) => schema.description(d),
        None => schema,
    })
}

/// The titled single-select `Decision` of `choices`.
fn choice(choices: Vec<ConstTitle>) -> PrimitiveSchemaDefinition {
    let mut schema = TitledSingleSelectEnumSchema::new(choices);
    schema.title = Some("Decision".into());
    PrimitiveSchemaDefinition::Enum(EnumSchema::Single(SingleSelectEnumSchema::Titled(schema)))
}
