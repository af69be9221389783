//! Long calls as tasks (the Tasks extension, SEP-2663,
//! `io.modelcontextprotocol/tasks`). A client that declares the extension
//! gets a task handle for an executor's call at once (`resultType:
//! "task"`), and then:
//!
//! - `tasks/get` tells the task's state: `working`; `input_required` with
//!   the approval form as `inputRequests["approval"]` (the same form as an
//!   elicitation) while its turn waits for a person; `completed` with the
//!   call's result (a refusal or a stopped run is a completed call whose
//!   result is an error, as without tasks); `cancelled`.
//! - `tasks/update` answers the form (`inputResponses["approval"]`, an
//!   elicitation result): the parked turn is resumed with the answer.
//! - `tasks/cancel` stops it: a running turn ends `TURN_CANCELLED` with
//!   its journal finished (its result says so); a turn waiting for a
//!   person is dropped (it never ran).
//!
//! A task is bound to the HTTP session it was created in (none over
//! stdio): another session is told it does not exist. Finished tasks are
//! kept for [`TASK_TTL`], and at most [`MAX_TASKS`] tasks at once.
//! A client without the extension keeps synchronous calls.
//!
//! In a fleet ([`crate::host::TaskStore`]) every state of a task is also
//! recorded in the database, so a `tasks/*` request may reach any node:
//! `tasks/get` answers from the record where this node has no task (or
//! its own was taken by another node); `tasks/update` of a task parked on
//! another node takes it once for the fleet and runs the call afresh here
//! with the answer (the question must be the same one, under the same
//! policy, or the approval goes to the queue), and the parking node drops
//! its turn; `tasks/cancel` of a task that runs on another node marks it,
//! and the node that runs it stops its turn within [`POLL_MS`].

mod fleet;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolResponse, CreateTaskResult, DetailedTask, ElicitRequestParams, ElicitResult, ErrorData,
    GetTaskResult, InputResponses, JsonObject, Task, TaskPayload, TaskStatus,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::elicitation::elicitation;
use super::mrtr::{approval_requests, random_hex, scope_of, APPROVAL_KEY};
use super::sessions::session_of;
use super::{Offered, Server};
use crate::host::{task_status as status, Begun, CancelHandle, Parked, TaskRow};
use crate::util::lock;
use fleet::{detailed_of, fleet_error, id_sha256, FleetCall};

/// How long a finished task is kept for `tasks/get`.
pub(super) const TASK_TTL: Duration = Duration::from_secs(3600);

/// The most tasks kept at once: a new one beyond it is refused.
pub(super) const MAX_TASKS: usize = 1024;

/// How often a client is asked to poll, in milliseconds.
const POLL_MS: u64 = 200;

/// Whether the call's client declared the Tasks extension.
pub(super) fn wanted(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .is_some_and(|c| c.supports_tasks())
}

/// Where a task is.
enum State {
    Working,
    /// Its turn waits for the person's answer to `form`.
    InputRequired {
        parked: Box<Parked>,
        form: ElicitRequestParams,
    },
    Completed(JsonObject),
    Cancelled,
}

/// One task.
pub(super) struct Entry {
    session: Option<String>,
    created_at: String,
    updated_at: String,
    /// When it ended, for its time to live.
    ended: Option<Instant>,
    state: State,
    cancel: CancelHandle,
    /// In a fleet: the call (tool, command, arguments, actor), to be run
    /// again by another node that answers the task's approval.
    call: Option<FleetCall>,
    /// While working: the pending approval a person is to answer (no one
    /// may be asked through the client), the call run again once they do.
    waiting_for: Option<String>,
}

impl Entry {
    fn set(&mut self, state: State) {
        if matches!(state, State::Completed(_) | State::Cancelled) {
            self.ended = Some(Instant::now());
        }
        self.state = state;
        self.updated_at = now();
    }

    fn task(&self, id: &str) -> Task {
        let status = match self.state {
            State::Working => TaskStatus::Working,
            State::InputRequired { .. } => TaskStatus::InputRequired,
            State::Completed(_) => TaskStatus::Completed,
            State::Cancelled => TaskStatus::Cancelled,
        };
        let mut task = Task::new(id, status, &self.created_at, &self.updated_at)
            .with_ttl_ms(TASK_TTL.as_millis() as u64)
            .with_poll_interval_ms(POLL_MS);
        if let State::InputRequired { .. } = self.state {
            task = task.with_status_message("waiting for a person's approval");
        }
        if let (State::Working, Some(pending)) = (&self.state, &self.waiting_for) {
            task = task.with_status_message(format!(
                "waiting for a person to answer pending approval `{pending}` (`gatehouse approvals`)"
            ));
        }
        task
    }

    /// The entry as the fleet records it, run by `node`.
    fn row(&self, node: &str) -> TaskRow {
        let (state, call, form, result) = match &self.state {
            State::Working => (status::WORKING, None, None, None),
            State::InputRequired { form, .. } => (
                status::INPUT_REQUIRED,
                self.call
                    .as_ref()
                    .and_then(|c| serde_json::to_value(c).ok()),
                serde_json::to_value(form).ok(),
                None,
            ),
            State::Completed(result) => (
                status::COMPLETED,
                None,
                None,
                Some(Value::Object(result.clone())),
            ),
            State::Cancelled => (status::CANCELLED, None, None, None),
        };
        TaskRow {
            node: node.to_string(),
            session: self.session.clone(),
            status: state.to_string(),
            created_at: self.created_at.clone(),
            updated_at: self.updated_at.clone(),
            call,
            form,
            result,
            cancel_asked: false,
            asked_sha256: None,
        }
    }

    fn detailed(&self, id: &str) -> DetailedTask {
        let payload = match &self.state {
            State::Working => TaskPayload::Working,
            State::InputRequired { form, .. } => TaskPayload::InputRequired {
                input_requests: approval_requests(form),
            },
            State::Completed(result) => TaskPayload::Completed {
                result: result.clone(),
            },
            State::Cancelled => TaskPayload::Cancelled,
        };
        DetailedTask::new(self.task(id), payload)
    }
}

/// The tasks of a server, by id.
pub(super) type Tasks = HashMap<String, Entry>;

/// Now, as the task's timestamps have it (ISO 8601, UTC, seconds).
fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    crate::policy::UtcTime(secs).to_string()
}

/// 128 random bits from the kernel, in hex, as a task id.
fn new_id() -> Result<String, String> {
    Ok(format!("task-{}", random_hex::<16>("a task id")?))
}

fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("no task `{id}`"), None)
}

fn not_waiting(id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("task `{id}` is not waiting for input"), None)
}

/// Task `id` of the session of `context`: another session's is unknown.
fn own<'a>(
    tasks: &'a mut Tasks,
    id: &str,
    context: &RequestContext<RoleServer>,
) -> Result<&'a mut Entry, ErrorData> {
    let session = session_of(context);
    tasks
        .get_mut(id)
        .filter(|e| e.session == session)
        .ok_or_else(|| unknown(id))
}

impl Server {
    /// Starts the call of executor `offered` with `arguments` as a task and
    /// returns its handle.
    pub(super) fn start_task(
        &self,
        offered: &Offered,
        arguments: serde_json::Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let command = matches!(offered.kind, super::Kind::Executor { command: true });
        let fleet = self.fleet_tasks();
        let fleet_arguments = fleet.as_ref().map(|_| arguments.clone());
        let mut request = self.request_for(&offered.name, command, arguments, context);
        // The task outlives the `tools/call` request (rmcp ends its token
        // when the handle is sent): `tasks/cancel` is its switch.
        let cancel = CancelHandle::new();
        request.cancel = cancel.clone();
        let id = new_id().map_err(|e| ErrorData::internal_error(e, None))?;
        let created = now();
        let call = fleet_arguments.map(|arguments| FleetCall {
            tool: offered.name.clone(),
            command,
            arguments,
            actor: self.inner.options.actor.clone(),
            scope: String::new(),
            definition_hash: String::new(),
            policy_hash: String::new(),
            turn: String::new(),
        });
        let entry = Entry {
            session: session_of(context),
            created_at: created.clone(),
            updated_at: created,
            ended: None,
            state: State::Working,
            cancel,
            call,
            waiting_for: None,
        };
        let task = entry.task(&id);
        let row = fleet.as_ref().map(|(_, node)| entry.row(node));
        {
            let mut tasks = lock(&self.inner.tasks);
            tasks.retain(|_, e| e.ended.is_none_or(|t| t.elapsed() < TASK_TTL));
            if tasks.len() >= MAX_TASKS {
                return Err(ErrorData::internal_error(
                    format!("the server keeps {MAX_TASKS} tasks at most: try again later"),
                    None,
                ));
            }
            tasks.insert(id.clone(), entry);
        }
        self.record(&id, row);
        self.watch_cancel(&id);
        let server = self.clone();
        let executor = offered.name.clone();
        let context = context.clone();
        tokio::spawn(async move {
            loop {
                let outcome = server.begin(request.clone(), None).await;
                let Some(pending) = server
                    .task_turn_ended(&id, &executor, outcome, &context)
                    .await
                else {
                    break;
                };
                // Queued for a person: the task stays working until they
                // answer, then the same call runs again and takes the
                // answer (or is queued anew if it no longer matches).
                if !server.wait_for_answer(&id, &pending).await {
                    break;
                }
            }
        });
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    /// Waits until the person answers pending approval `pending` of task
    /// `id` (or it expires): whether the call is to run again; a task
    /// cancelled meanwhile is marked so, and is not.
    async fn wait_for_answer(&self, id: &str, pending: &str) -> bool {
        let queue = self.inner.host.stores().approvals.clone();
        loop {
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
            {
                let mut tasks = lock(&self.inner.tasks);
                let Some(entry) = tasks.get_mut(id) else {
                    return false;
                };
                if entry.cancel.is_cancelled() || !matches!(entry.state, State::Working) {
                    if matches!(entry.state, State::Working) {
                        entry.set(State::Cancelled);
                    }
                    entry.waiting_for = None;
                    return false;
                }
            }
            let pending_id = pending.to_string();
            let queue = queue.clone();
            let entry = tokio::task::spawn_blocking(move || queue.get(&pending_id))
                .await
                .ok()
                .and_then(Result::ok)
                .flatten();
            let answered = match entry {
                // Gone, expired or answered: the call runs again and ends
                // as the queue now says.
                None => true,
                Some(e) => e.status != "pending" || e.expires_at <= crate::host::now_utc(),
            };
            if answered {
                if let Some(entry) = lock(&self.inner.tasks).get_mut(id) {
                    entry.waiting_for = None;
                }
                return true;
            }
        }
    }

    /// Records where the task's turn got to: its result, or the form it
    /// waits on; the pending approval it now waits for a person to answer,
    /// when no one may be asked through the client.
    async fn task_turn_ended(
        &self,
        id: &str,
        executor: &str,
        outcome: Result<Begun, String>,
        context: &RequestContext<RoleServer>,
    ) -> Option<String> {
        // No one may be asked through the client: the approval is
        // queued for a person, and the task waits for their answer.
        let outcome = match outcome {
            Ok(Begun::Parked(parked)) if !self.elicits() => {
                let queued = vec![crate::host::Choice::Queue; parked.approval.pending.len()];
                let outcome = self.resume(parked, queued).await;
                if let Ok(o) = &outcome {
                    if let (Some(crate::policy::DenyCode::ApprovalRequired), Some(pending)) =
                        (o.code(), o.pending_id.clone())
                    {
                        let mut tasks = lock(&self.inner.tasks);
                        if let Some(entry) = tasks.get_mut(id) {
                            if matches!(entry.state, State::Working) {
                                entry.waiting_for = Some(pending.clone());
                                entry.updated_at = now();
                                return Some(pending);
                            }
                        }
                    }
                }
                outcome.map(|o| Begun::Done(Box::new(o)))
            }
            other => other,
        };
        let mut asked = None;
        let state = match outcome {
            Ok(Begun::Parked(parked)) => {
                let form = elicitation(&parked.approval, self.offers_remember());
                let (definition_hash, policy_hash) = self.hashes();
                asked = Some((
                    scope_of(&parked.approval),
                    definition_hash,
                    policy_hash,
                    parked.approval.turn.clone(),
                ));
                State::InputRequired { parked, form }
            }
            Ok(Begun::Done(outcome)) => {
                let outcome = *outcome;
                let cancelled = outcome
                    .code()
                    .is_some_and(|c| c == crate::policy::DenyCode::TurnCancelled);
                let result = self.finish(executor, Ok(outcome), context).await;
                if cancelled {
                    State::Cancelled
                } else {
                    State::Completed(as_object(&result))
                }
            }
            Err(message) => State::Completed(as_object(
                &self.finish(executor, Err(message), context).await,
            )),
        };
        let node = self.fleet_tasks().map(|(_, node)| node);
        let row = {
            let mut tasks = lock(&self.inner.tasks);
            let entry = tasks.get_mut(id)?;
            // A task cancelled while its turn ended stays cancelled.
            if matches!(entry.state, State::Cancelled) {
                return None;
            }
            entry.set(state);
            if let (Some((scope, definition_hash, policy_hash, turn)), Some(call)) =
                (asked, entry.call.as_mut())
            {
                call.scope = scope;
                call.definition_hash = definition_hash;
                call.policy_hash = policy_hash;
                call.turn = turn;
            }
            node.map(|n| entry.row(&n))
        };
        self.record(id, row);
        None
    }

    /// `tasks/get`.
    pub(super) fn task(
        &self,
        id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        {
            let mut tasks = lock(&self.inner.tasks);
            if let Ok(e) = own(&mut tasks, id, context) {
                if !matches!(e.state, State::InputRequired { .. }) {
                    return Ok(GetTaskResult::new(e.detailed(id)));
                }
            }
        }
        // This node's waiting task, unless another node took it; else the
        // fleet's record of a task of another node.
        if self.superseded(id, context) {
            lock(&self.inner.tasks).remove(id);
        } else {
            let mut tasks = lock(&self.inner.tasks);
            if let Ok(e) = own(&mut tasks, id, context) {
                return Ok(GetTaskResult::new(e.detailed(id)));
            }
        }
        match self.fleet_row(id, context)? {
            Some(row) => Ok(GetTaskResult::new(detailed_of(id, &row))),
            None => Err(unknown(id)),
        }
    }

    /// `tasks/update`: the person's answer to the task's approval form.
    pub(super) fn answer_task(
        &self,
        id: &str,
        responses: &InputResponses,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let answer = responses
            .get(APPROVAL_KEY)
            .cloned()
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("`inputResponses.{APPROVAL_KEY}` is missing"),
                    None,
                )
            })
            .and_then(|a| {
                serde_json::from_value::<ElicitResult>(a).map_err(|_| {
                    ErrorData::invalid_params(
                        format!("`inputResponses.{APPROVAL_KEY}` is not an elicitation result"),
                        None,
                    )
                })
            })?;
        let local = own(&mut lock(&self.inner.tasks), id, context).is_ok();
        if !local {
            return self.answer_elsewhere(id, answer, context);
        }
        // In a fleet, taken for the fleet first: another node may have
        // answered or cancelled it (then this node's turn is dropped).
        if let Some((store, node)) = self.fleet_tasks() {
            if self.waits_here(id, context) {
                let taken = tokio::task::block_in_place(|| store.take_input(&id_sha256(id), &node))
                    .map_err(|e| fleet_error(&e))?;
                if taken.is_none() && self.fleet_row(id, context)?.is_some() {
                    lock(&self.inner.tasks).remove(id);
                    return Err(not_waiting(id));
                }
            }
        }
        let parked = {
            let mut tasks = lock(&self.inner.tasks);
            let entry = own(&mut tasks, id, context)?;
            if !matches!(entry.state, State::InputRequired { .. }) {
                return Err(not_waiting(id));
            }
            match std::mem::replace(&mut entry.state, State::Working) {
                State::InputRequired { parked, .. } => {
                    entry.updated_at = now();
                    parked
                }
                other => {
                    entry.state = other;
                    return Err(unknown(id));
                }
            }
        };
        let choice = self.choice_of(answer);
        let choices = vec![choice; parked.approval.pending.len()];
        let executor = parked.approval.executor.clone();
        self.watch_cancel(id);
        let server = self.clone();
        let id = id.to_string();
        let context = context.clone();
        tokio::spawn(async move {
            let outcome = server
                .resume(parked, choices)
                .await
                .map(|o| Begun::Done(Box::new(o)));
            server
                .task_turn_ended(&id, &executor, outcome, &context)
                .await;
        });
        Ok(())
    }

    /// `tasks/cancel`.
    pub(super) fn cancel_task_of(
        &self,
        id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let fleet = self.fleet_tasks();
        // In a fleet, a waiting task is cancelled in the record first, in
        // one statement: if another node took it meanwhile, the mark asks
        // that node to stop it, and this node's turn is dropped.
        if let Some((store, me)) = fleet.as_ref().filter(|_| self.waits_here(id, context)) {
            let row = tokio::task::block_in_place(|| store.ask_cancel(&id_sha256(id)))
                .map_err(|e| fleet_error(&e))?;
            if row.is_some_and(|r| &r.node != me || r.status != status::CANCELLED) {
                lock(&self.inner.tasks).remove(id);
                return Ok(());
            }
        }
        let row = {
            let mut tasks = lock(&self.inner.tasks);
            match own(&mut tasks, id, context) {
                Ok(entry) => match entry.state {
                    // Its run ends at its next check, `TURN_CANCELLED`, and
                    // the task with it.
                    State::Working => {
                        entry.cancel.cancel();
                        None
                    }
                    // It never ran: nothing to stop.
                    State::InputRequired { .. } => {
                        entry.set(State::Cancelled);
                        fleet.as_ref().map(|(_, n)| entry.row(n))
                    }
                    State::Completed(_) | State::Cancelled => None,
                },
                Err(e) => {
                    drop(tasks);
                    return self.cancel_elsewhere(id, context, e);
                }
            }
        };
        self.record(id, row);
        Ok(())
    }
}

/// A tool result as the JSON object a completed task carries.
fn as_object(result: &rmcp::model::CallToolResult) -> JsonObject {
    match serde_json::to_value(result) {
        Ok(Value::Object(o)) => o,
        _ => JsonObject::new(),
    }
}
