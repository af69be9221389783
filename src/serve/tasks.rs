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

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolResponse, CreateTaskResult, DetailedTask, ElicitRequestParams, ElicitResult, ErrorData,
    GetTaskResult, InputResponses, JsonObject, Task, TaskPayload, TaskStatus,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::elicitation::elicitation;
use super::mrtr::{approval_requests, random_hex, APPROVAL_KEY};
use super::sessions::session_of;
use super::{Offered, Server};
use crate::host::{Begun, CancelHandle, Parked};
use crate::util::lock;

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
        task
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
        let mut request = self.request_for(&offered.name, command, arguments, context);
        // The task outlives the `tools/call` request (rmcp ends its token
        // when the handle is sent): `tasks/cancel` is its switch.
        let cancel = CancelHandle::new();
        request.cancel = cancel.clone();
        let id = new_id().map_err(|e| ErrorData::internal_error(e, None))?;
        let created = now();
        let entry = Entry {
            session: session_of(context),
            created_at: created.clone(),
            updated_at: created,
            ended: None,
            state: State::Working,
            cancel,
        };
        let task = entry.task(&id);
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
        let server = self.clone();
        let executor = offered.name.clone();
        let context = context.clone();
        tokio::spawn(async move {
            let outcome = server.begin(request, None).await;
            server
                .task_turn_ended(&id, &executor, outcome, &context)
                .await;
        });
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    /// Records where the task's turn got to: its result, or the form it
    /// waits on.
    async fn task_turn_ended(
        &self,
        id: &str,
        executor: &str,
        outcome: Result<Begun, String>,
        context: &RequestContext<RoleServer>,
    ) {
        let state = match outcome {
            Ok(Begun::Parked(parked)) => {
                let form = elicitation(&parked.approval, self.inner.options.remember);
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
        let mut tasks = lock(&self.inner.tasks);
        if let Some(entry) = tasks.get_mut(id) {
            // A task cancelled while its turn ended stays cancelled.
            if !matches!(entry.state, State::Cancelled) {
                entry.set(state);
            }
        }
    }

    /// `tasks/get`.
    pub(super) fn task(
        &self,
        id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let mut tasks = lock(&self.inner.tasks);
        own(&mut tasks, id, context).map(|e| GetTaskResult::new(e.detailed(id)))
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
        let parked = {
            let mut tasks = lock(&self.inner.tasks);
            let entry = own(&mut tasks, id, context)?;
            if !matches!(entry.state, State::InputRequired { .. }) {
                return Err(ErrorData::invalid_params(
                    format!("task `{id}` is not waiting for input"),
                    None,
                ));
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
        let mut tasks = lock(&self.inner.tasks);
        let entry = own(&mut tasks, id, context)?;
        match entry.state {
            // Its run ends at its next check, `TURN_CANCELLED`, and the
            // task with it.
            State::Working => entry.cancel.cancel(),
            // It never ran: nothing to stop.
            State::InputRequired { .. } => entry.set(State::Cancelled),
            State::Completed(_) | State::Cancelled => {}
        }
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
