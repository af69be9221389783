//! Approvals for clients on protocol 2026-07-28 or later, which forbids a
//! server's requests to the client (so no elicitation request): the call
//! that needs an approval returns an input-required result (SEP-2322:
//! `resultType: "input_required"`, the approval form as the one
//! `inputRequests["approval"]`, and an opaque `requestState`), and the
//! client's retry of the same call with `inputResponses` and that
//! `requestState` resumes the parked turn.
//!
//! The state is a handle to a turn kept on the server, 256 random bits:
//! nothing a client could forge, and one use only (a sealed state alone
//! could be replayed). The handle is bound to the turn, the actor, the
//! scope of the approval (its capability and target pairs), both snapshot
//! hashes, the tool, the sha256 of the call's arguments and the HTTP
//! session it came in on. A retry that does not match all of them, or a
//! handle that is unknown, expired or used, is refused with an error and
//! consumes nothing: the parked turn's own retry still works. A turn
//! nobody resumes within the elicitation timeout goes to the pending
//! queue, as an unanswered elicitation does.
//!
//! In a fleet (a shared database) the parking node also records the
//! binding and the form under the state's sha256
//! ([`crate::host::ParkedStore`]), so a retry that the fleet's proxy sends to
//! another node is answered there: that node takes the record (once across
//! the fleet, as the parking node does for a retry of its own), checks the
//! same binding, and runs the call afresh with the person's answer, which
//! applies only if its own decision asks the same question under the same
//! hashes (else the approval is queued). The parking node then drops its
//! turn, never queueing it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use rmcp::model::{
    CallToolResponse, ElicitRequest, ElicitRequestParams, ElicitResult, ErrorData, InputRequest,
    InputRequests, InputRequiredResult, InputResponses, MetaObject,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::elicitation::elicitation;
use super::sessions::session_of;
use super::Server;
use crate::host::{CancelHandle, Choice, Parked};
use crate::policy::snapshot::{canonical_json, sha256_hex};
use crate::util::lock;

/// The key of the approval form in `inputRequests` and `inputResponses`.
pub(super) const APPROVAL_KEY: &str = "approval";

/// What a turn's cancel switch asks: the current request's token (a
/// closure, so as not to name rmcp's token type).
type Source = Arc<RwLock<Box<dyn Fn() -> bool + Send + Sync>>>;

/// What a request state is bound to: a retry must match every field.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Binding {
    turn: String,
    actor: String,
    /// The approval's (capability, target) pairs, canonical.
    scope: String,
    definition_hash: String,
    policy_hash: String,
    tool: String,
    arguments_sha256: String,
    /// The HTTP session (`Mcp-Session-Id`) the call came in on, if any.
    session: Option<String>,
}

impl Binding {
    /// Whether a retry of `tool` with arguments hashing to
    /// `arguments_sha256`, in `session`, by `actor` is the call this state
    /// was issued for.
    fn issued_for(
        &self,
        tool: &str,
        arguments_sha256: &str,
        session: &Option<String>,
        actor: &str,
    ) -> bool {
        self.tool == tool
            && self.arguments_sha256 == arguments_sha256
            && &self.session == session
            && self.actor == actor
    }
}

/// The retry's answer to the approval form, or an invalid-params error.
fn elicit_result(answer: Value) -> Result<ElicitResult, ErrorData> {
    serde_json::from_value::<ElicitResult>(answer).map_err(|_| {
        ErrorData::invalid_params(
            format!("`inputResponses.{APPROVAL_KEY}` is not an elicitation result"),
            None,
        )
    })
}

/// One call of a 2026-07-28 client: what its turn is bound to, and the
/// source its cancel switch asks (the retry's request replaces the first
/// one's, which rmcp cancels when the input-required result is sent).
pub(super) struct Call {
    pub(super) tool: String,
    pub(super) arguments_sha256: String,
    pub(super) session: Option<String>,
    pub(super) cancel: CancelHandle,
    pub(super) source: Source,
}

impl Call {
    /// A call of `tool` with `arguments`, its cancel switch asking the
    /// current request's token (`source`).
    pub(super) fn new(
        tool: &str,
        arguments: &serde_json::Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Call {
        let ct = context.ct.clone();
        let source: Source = Arc::new(RwLock::new(Box::new(move || ct.is_cancelled())));
        let asked = source.clone();
        // Poisoned only if a writer panicked: stop rather than run on.
        let cancel = CancelHandle::also_when(move || asked.read().map(|f| f()).unwrap_or(true));
        Call {
            tool: tool.to_string(),
            arguments_sha256: arguments_sha256(arguments),
            session: session_of(context),
            cancel,
            source,
        }
    }
}

/// The scope of `approval`: its (capability, target) pairs, sorted and
/// deduplicated, as canonical JSON.
pub(super) fn scope_of(approval: &crate::host::ApprovalRequest) -> String {
    let mut pairs: Vec<(&str, Option<&str>)> = approval
        .pending
        .iter()
        .map(|p| (p.capability.as_str(), p.target.as_deref()))
        .collect();
    pairs.sort();
    pairs.dedup();
    canonical_json(&pairs)
}

/// sha256 of the canonical JSON of a call's arguments.
pub(super) fn arguments_sha256(arguments: &serde_json::Map<String, Value>) -> String {
    sha256_hex(canonical_json(arguments).as_bytes())
}

/// A turn parked until its client's retry answers the form.
pub(super) struct Waiting {
    parked: Box<Parked>,
    binding: Binding,
    cancel: CancelHandle,
    source: Source,
    /// The elicitation form, sent again to a retry that did not answer it.
    form: ElicitRequestParams,
}

/// The turns waiting for a retry, by request state.
pub(super) type WaitingTurns = HashMap<String, Waiting>;

/// `N` random bytes from the kernel, in hex; `what` names the use in the
/// error.
pub(super) fn random_hex<const N: usize>(what: &str) -> Result<String, String> {
    use std::io::Read;
    let mut bytes = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("cannot make {what}: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// 256 random bits from the kernel, in hex, as a request state.
fn new_state() -> Result<String, String> {
    Ok(format!("gh1.{}", random_hex::<32>("a request state")?))
}

/// The approval form `form` as the one input request of its kind
/// (`inputRequests["approval"]`, an `elicitation/create`).
pub(super) fn approval_requests(form: &ElicitRequestParams) -> InputRequests {
    let request = InputRequest::Elicitation(ElicitRequest::new(form.clone()));
    InputRequests::from([(APPROVAL_KEY.to_string(), request)])
}

/// The input-required result that asks `form` under `state`.
fn input_required(form: &ElicitRequestParams, state: &str, turn: &str) -> InputRequiredResult {
    let mut meta = MetaObject::new();
    meta.insert("gatehouse/turn".into(), Value::String(turn.to_string()));
    InputRequiredResult::new(Some(approval_requests(form)), Some(state.to_string())).with_meta(meta)
}

/// Why a retry's request state is refused (a JSON-RPC invalid-params
/// error; nothing is consumed).
fn refused(why: &str) -> ErrorData {
    ErrorData::invalid_params(format!("the request state is refused: {why}"), None)
}

impl Server {
    /// The current (definition, policy) hashes of the host's snapshot.
    pub(super) fn hashes(&self) -> (String, String) {
        let snapshot = self.inner.host.snapshot();
        (snapshot.definition_hash(), snapshot.policy_hash())
    }

    /// Parks `parked` for `call`'s retry and returns the input-required
    /// result that asks the person; an unanswered turn is queued after the
    /// elicitation timeout.
    pub(super) fn park(
        &self,
        parked: Box<Parked>,
        call: Call,
    ) -> Result<InputRequiredResult, String> {
        let approval = &parked.approval;
        let (definition_hash, policy_hash) = self.hashes();
        let binding = Binding {
            turn: approval.turn.clone(),
            actor: approval.actor.clone(),
            scope: scope_of(approval),
            definition_hash,
            policy_hash,
            tool: call.tool,
            arguments_sha256: call.arguments_sha256,
            session: call.session,
        };
        let form = elicitation(approval, self.offers_remember());
        let state = new_state()?;
        let result = input_required(&form, &state, &approval.turn);
        let timeout = self.inner.options.elicitation_timeout;
        if let Some((store, node)) = self.inner.host.fleet_parked() {
            let row = crate::host::ParkedRow {
                node,
                turn: approval.turn.clone(),
                binding: serde_json::to_value(&binding).unwrap_or(Value::Null),
                form: serde_json::to_value(&form).unwrap_or(Value::Null),
            };
            // Without the record, only this node can answer the state.
            let hash = sha256_hex(state.as_bytes());
            if let Err(e) = tokio::task::block_in_place(|| store.park(&hash, &row, timeout)) {
                tracing::warn!(
                    "turn `{}`: its request state is answerable on this node only: {}",
                    approval.turn,
                    crate::util::chain(&e)
                );
            }
        }
        lock(&self.inner.waiting).insert(
            state.clone(),
            Waiting {
                parked,
                binding,
                cancel: call.cancel,
                source: call.source,
                form,
            },
        );
        let server = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            server.expire(&state).await;
        });
        Ok(result)
    }

    /// Queues the turn parked under `state` if no retry took it.
    async fn expire(&self, state: &str) {
        let Some(waiting) = lock(&self.inner.waiting).remove(state) else {
            return;
        };
        let turn = waiting.binding.turn.clone();
        if self.taken_elsewhere(state).await {
            tracing::info!("turn `{turn}`: another node of the fleet answered its retry");
            return;
        }
        tracing::info!("turn `{turn}`: no retry answered its approval: queued");
        // Nothing runs for a queued turn; the first request's token is
        // cancelled already, so the switch asks a fresh one.
        if let Ok(mut source) = waiting.source.write() {
            *source = Box::new(|| false);
        }
        let queued = vec![Choice::Queue; waiting.parked.approval.pending.len()];
        let host = self.inner.host.clone();
        let parked = waiting.parked;
        if let Err(e) = tokio::task::spawn_blocking(move || host.resume(*parked, queued)).await {
            tracing::warn!("turn `{turn}`: cannot queue it: {e}");
        }
    }

    /// Queues every waiting turn: their client's session ended before
    /// it retried (as an elicitation left unanswered by a client that
    /// goes away).
    pub(super) async fn queue_waiting(&self) {
        let states: Vec<String> = lock(&self.inner.waiting).keys().cloned().collect();
        for state in states {
            self.expire(&state).await;
        }
    }

    /// A 2026-07-28 client's retry with `state` and `responses`: the
    /// parked turn resumed with the answer, the form again when the retry
    /// did not answer it, or an error that consumes nothing.
    pub(super) async fn retry(
        &self,
        tool: &str,
        command: bool,
        arguments: &serde_json::Map<String, Value>,
        state: &str,
        responses: Option<&InputResponses>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments_sha256 = arguments_sha256(arguments);
        let session = session_of(context);
        let answer = responses.and_then(|r| r.get(APPROVAL_KEY)).cloned();
        // Parked on another node of the fleet, perhaps.
        if !lock(&self.inner.waiting).contains_key(state) {
            return self
                .retry_elsewhere(tool, command, arguments, state, answer, context)
                .await;
        }
        // Checked and taken under one lock: two retries cannot both take it.
        let (waiting, result) = {
            let mut waiting = lock(&self.inner.waiting);
            let Some(w) = waiting.get(state) else {
                return Err(refused("it is unknown, expired or already used"));
            };
            let b = &w.binding;
            if !b.issued_for(tool, &arguments_sha256, &session, &self.inner.options.actor) {
                return Err(refused("it was issued for another call"));
            }
            let Some(answer) = answer else {
                // Not answered: the same form again, under the same state.
                return Ok(CallToolResponse::from(input_required(
                    &w.form, state, &b.turn,
                )));
            };
            let result = elicit_result(answer)?;
            let Some(w) = waiting.remove(state) else {
                return Err(refused("it is unknown, expired or already used"));
            };
            (w, result)
        };
        // Taken here; in a fleet, taken for the fleet too (another node
        // may have answered the same state first: then it ran the call).
        if self.taken_elsewhere(state).await {
            return Err(refused("it is unknown, expired or already used"));
        }
        let n = waiting.parked.approval.pending.len();
        let choices = self.choices_for(&waiting.binding, result, n);
        // From now on the retry's request is the one that cancels the turn
        // (and the end of its HTTP session).
        let ct = context.ct.clone();
        if let Ok(mut source) = waiting.source.write() {
            *source = Box::new(move || ct.is_cancelled());
        }
        let registered = session
            .as_deref()
            .map(|s| (s, self.register(s, waiting.cancel.clone())));
        let mut parked = waiting.parked;
        // The retry's own progress token, if it carries one, is told the
        // rest of the turn.
        let progress = super::progress::Progress::start(context);
        parked.report_progress_to(progress.as_ref().map(super::progress::Progress::reporter));
        let outcome = self.resume(parked, choices).await;
        if let Some((s, key)) = registered {
            self.unregister(s, key);
        }
        if let Some(p) = progress {
            p.finish(Some(crate::host::Phase::Done)).await;
        }
        Ok(self.finish(tool, outcome, context).await.into())
    }

    /// In a fleet, takes `state`'s record for this node: whether another
    /// node took it first (so this node must not run or queue its turn).
    async fn taken_elsewhere(&self, state: &str) -> bool {
        let Some((store, node)) = self.inner.host.fleet_parked() else {
            return false;
        };
        let hash = sha256_hex(state.as_bytes());
        match tokio::task::block_in_place(|| store.take(&hash, &node)) {
            Ok(crate::host::Claim::Gone) => true,
            Ok(_) => false,
            Err(e) => {
                // The database cannot say: this node's own turn goes on.
                tracing::warn!(
                    "cannot take a parked turn in the fleet: {}",
                    crate::util::chain(&e)
                );
                false
            }
        }
    }

    /// The choices a retry's answer `result` makes for the `n` pending
    /// approvals of the turn `binding` names: the person answered the
    /// question as it was asked; if the configuration or the grants
    /// changed since, the answer is not taken and the approval goes to the
    /// queue.
    fn choices_for(&self, binding: &Binding, result: ElicitResult, n: usize) -> Vec<Choice> {
        let (definition_hash, policy_hash) = self.hashes();
        if definition_hash != binding.definition_hash || policy_hash != binding.policy_hash {
            tracing::info!(
                "turn `{}`: the policy changed while the person was asked: queued",
                binding.turn
            );
            vec![Choice::Queue; n]
        } else {
            vec![self.choice_of(result); n]
        }
    }

    /// A retry whose state this node did not issue: in a fleet, the state
    /// of a turn parked on another node, answered here by running the
    /// call afresh with the person's answer. Refused, consuming nothing,
    /// when the state is unknown, expired, used, or bound to another call.
    async fn retry_elsewhere(
        &self,
        tool: &str,
        command: bool,
        arguments: &serde_json::Map<String, Value>,
        state: &str,
        answer: Option<Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let unknown = || refused("it is unknown, expired or already used");
        let Some((store, node)) = self.inner.host.fleet_parked() else {
            return Err(unknown());
        };
        let hash = sha256_hex(state.as_bytes());
        let row = match tokio::task::block_in_place(|| store.get(&hash)) {
            Ok(Some(row)) => row,
            Ok(None) => return Err(unknown()),
            Err(e) => {
                return Err(ErrorData::internal_error(
                    format!(
                        "cannot read the fleet's parked turns: {}",
                        crate::util::chain(&e)
                    ),
                    None,
                ))
            }
        };
        let Ok(binding) = serde_json::from_value::<Binding>(row.binding) else {
            return Err(unknown());
        };
        if !binding.issued_for(
            tool,
            &arguments_sha256(arguments),
            &session_of(context),
            &self.inner.options.actor,
        ) {
            return Err(refused("it was issued for another call"));
        }
        let Some(answer) = answer else {
            // Not answered: the same form again, under the same state.
            let Ok(form) = serde_json::from_value::<ElicitRequestParams>(row.form) else {
                return Err(unknown());
            };
            return Ok(CallToolResponse::from(input_required(
                &form,
                state,
                &binding.turn,
            )));
        };
        let result = elicit_result(answer)?;
        // Once across the fleet: the parking node drops its turn.
        match tokio::task::block_in_place(|| store.take(&hash, &node)) {
            Ok(crate::host::Claim::Taken(_)) => {}
            Ok(_) => return Err(unknown()),
            Err(e) => {
                return Err(ErrorData::internal_error(
                    format!("cannot take the parked turn: {}", crate::util::chain(&e)),
                    None,
                ))
            }
        }
        tracing::info!(
            "turn `{}` of node `{}`: answered here, run afresh",
            binding.turn,
            row.node
        );
        self.run_afresh(tool, command, arguments, &binding, result, context)
            .await
    }

    /// The call of a turn parked on another node (`binding`), run here
    /// afresh with the person's answer `result`.
    async fn run_afresh(
        &self,
        tool: &str,
        command: bool,
        arguments: &serde_json::Map<String, Value>,
        binding: &Binding,
        result: ElicitResult,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut request = self.request_for(tool, command, arguments.clone(), context);
        let ct = context.ct.clone();
        request.cancel = CancelHandle::also_when(move || ct.is_cancelled());
        let progress = super::progress::Progress::start(context);
        request.progress = progress.as_ref().map(super::progress::Progress::reporter);
        let asked = Asked {
            scope: &binding.scope,
            definition_hash: &binding.definition_hash,
            policy_hash: &binding.policy_hash,
            form: None,
        };
        let outcome = self
            .run_answered(request, progress.as_ref(), &asked, self.choice_of(result))
            .await;
        if let Some(p) = progress {
            p.finish(Some(crate::host::Phase::Done)).await;
        }
        Ok(self.finish(tool, outcome, context).await.into())
    }

    /// Runs `request` afresh on this node with a person's answer `choice`
    /// given on another node to the question `asked`: the answer applies
    /// only where this node's decision asks the same question under the
    /// same hashes; otherwise the approval is queued.
    pub(super) async fn run_answered(
        &self,
        request: crate::host::TurnRequest,
        progress: Option<&super::progress::Progress>,
        asked: &Asked<'_>,
        choice: Choice,
    ) -> Result<crate::host::TurnOutcome, String> {
        match self.begin(request, progress).await {
            Err(e) => Err(e),
            Ok(crate::host::Begun::Done(outcome)) => Ok(*outcome),
            Ok(crate::host::Begun::Parked(parked)) => {
                let (definition_hash, policy_hash) = self.hashes();
                let same = scope_of(&parked.approval) == asked.scope
                    && definition_hash == asked.definition_hash
                    && policy_hash == asked.policy_hash
                    && asked
                        .form
                        .is_none_or(|(turn, form)| self.asks(&parked.approval, turn, form));
                let n = parked.approval.pending.len();
                let choices = if same {
                    vec![choice; n]
                } else {
                    tracing::info!(
                        "turn `{}`: another question than the one answered: queued",
                        parked.approval.turn
                    );
                    vec![Choice::Queue; n]
                };
                self.resume(parked, choices).await
            }
        }
    }
}

/// The question a person answered on another node: its scope and the
/// hashes it was asked under.
pub(super) struct Asked<'a> {
    pub(super) scope: &'a str,
    pub(super) definition_hash: &'a str,
    pub(super) policy_hash: &'a str,
    /// The form the person was shown and the turn it named, when the
    /// record holds it (a task's): this node's fresh question must be
    /// that form, word for word, but for its own turn id.
    pub(super) form: Option<(&'a str, &'a ElicitRequestParams)>,
}

impl Server {
    /// Whether this node's fresh question `approval`, asked under `turn`,
    /// is the form `shown`.
    fn asks(
        &self,
        approval: &crate::host::ApprovalRequest,
        turn: &str,
        shown: &ElicitRequestParams,
    ) -> bool {
        let mut fresh = approval.clone();
        fresh.turn = turn.to_string();
        let fresh = elicitation(&fresh, self.offers_remember());
        matches!(
            (serde_json::to_value(&fresh), serde_json::to_value(shown)),
            (Ok(a), Ok(b)) if a == b
        )
    }
}
