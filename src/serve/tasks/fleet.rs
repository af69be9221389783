//! Tasks in a fleet: every state of a task recorded in the database, so
//! that a `tasks/*` request may reach any node (see the parent module).

use std::time::Duration;

use rmcp::model::{
    DetailedTask, ElicitRequestParams, ErrorData, JsonObject, Task, TaskPayload, TaskStatus,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::{not_waiting, now, own, unknown, Entry, State, POLL_MS, TASK_TTL};
use crate::host::{task_status as status, Begun, CancelHandle, TaskRow, TaskStore};
use crate::policy::snapshot::sha256_hex;
use crate::serve::mrtr::{approval_requests, Asked};
use crate::serve::sessions::session_of;
use crate::serve::Server;
use crate::util::lock;

/// What a node that answers another node's task must know of the call.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct FleetCall {
    pub(super) tool: String,
    pub(super) command: bool,
    pub(super) arguments: serde_json::Map<String, Value>,
    pub(super) actor: String,
    /// Set when the task parks: the question the person is asked, and the
    /// policy it was asked under.
    #[serde(default)]
    pub(super) scope: String,
    #[serde(default)]
    pub(super) definition_hash: String,
    #[serde(default)]
    pub(super) policy_hash: String,
    /// Set when the task parks: the turn the form names (a node that
    /// answers elsewhere asks its fresh question under it, to compare
    /// the two forms).
    #[serde(default)]
    pub(super) turn: String,
}

/// Task `id` as the fleet recorded it (see [`Entry::detailed`]).
pub(super) fn detailed_of(id: &str, row: &TaskRow) -> DetailedTask {
    let (task_status, payload) = match row.status.as_str() {
        status::INPUT_REQUIRED => {
            let form = row
                .form
                .clone()
                .and_then(|f| serde_json::from_value::<ElicitRequestParams>(f).ok());
            match form {
                Some(form) => (
                    TaskStatus::InputRequired,
                    TaskPayload::InputRequired {
                        input_requests: approval_requests(&form),
                    },
                ),
                None => (TaskStatus::Working, TaskPayload::Working),
            }
        }
        status::COMPLETED => (
            TaskStatus::Completed,
            TaskPayload::Completed {
                result: match &row.result {
                    Some(Value::Object(o)) => o.clone(),
                    _ => JsonObject::new(),
                },
            },
        ),
        status::CANCELLED => (TaskStatus::Cancelled, TaskPayload::Cancelled),
        _ => (TaskStatus::Working, TaskPayload::Working),
    };
    let mut task = Task::new(id, task_status, &row.created_at, &row.updated_at)
        .with_ttl_ms(TASK_TTL.as_millis() as u64)
        .with_poll_interval_ms(POLL_MS);
    if matches!(task_status, TaskStatus::InputRequired) {
        task = task.with_status_message("waiting for a person's approval");
    }
    DetailedTask::new(task, payload)
}

pub(super) fn id_sha256(id: &str) -> String {
    sha256_hex(id.as_bytes())
}

pub(super) fn fleet_error(e: &(dyn std::error::Error + 'static)) -> ErrorData {
    ErrorData::internal_error(
        format!("cannot reach the fleet's tasks: {}", crate::util::chain(e)),
        None,
    )
}

impl Server {
    /// The fleet's task store and this node's name (`None` without one).
    pub(super) fn fleet_tasks(&self) -> Option<(std::sync::Arc<dyn TaskStore>, String)> {
        self.inner.host.fleet_tasks()
    }

    /// Records task `id`'s state `row` in the fleet (when there is one).
    /// A failed write is logged: the task goes on on this node.
    pub(super) fn record(&self, id: &str, row: Option<TaskRow>) {
        let (Some((store, _)), Some(row)) = (self.fleet_tasks(), row) else {
            return;
        };
        if let Err(e) = tokio::task::block_in_place(|| store.put(&id_sha256(id), &row, TASK_TTL)) {
            tracing::warn!(
                "task `{id}`: its state is known to this node only: {}",
                crate::util::chain(&e)
            );
        }
    }

    /// The fleet's record of task `id`, if this node is in a fleet and the
    /// record is the caller's (its session).
    pub(super) fn fleet_row(
        &self,
        id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<TaskRow>, ErrorData> {
        let Some((store, _)) = self.fleet_tasks() else {
            return Ok(None);
        };
        let row = tokio::task::block_in_place(|| store.get(&id_sha256(id)))
            .map_err(|e| fleet_error(&e))?;
        Ok(row.filter(|r| r.session == session_of(context)))
    }

    /// Whether this node has task `id` of the caller's session, waiting
    /// for a person's answer.
    pub(super) fn waits_here(&self, id: &str, context: &RequestContext<RoleServer>) -> bool {
        matches!(
            own(&mut lock(&self.inner.tasks), id, context).map(|e| &e.state),
            Ok(State::InputRequired { .. })
        )
    }

    /// Whether this node's input-required task `id` was taken (answered
    /// or cancelled) through another node: then its parked turn, which
    /// never ran, is dropped with the entry.
    pub(super) fn superseded(&self, id: &str, context: &RequestContext<RoleServer>) -> bool {
        let Some((_, node)) = self.fleet_tasks() else {
            return false;
        };
        match self.fleet_row(id, context) {
            Ok(Some(row)) => row.node != node || row.status != status::INPUT_REQUIRED,
            _ => false,
        }
    }

    /// In a fleet, stops task `id`'s turn when a cancel reaches another
    /// node: the record is looked at every [`POLL_MS`] while the task
    /// works here.
    pub(super) fn watch_cancel(&self, id: &str) {
        let Some((store, _)) = self.fleet_tasks() else {
            return;
        };
        let server = self.clone();
        let id = id.to_string();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
                let cancel = {
                    let tasks = lock(&server.inner.tasks);
                    match tasks.get(&id) {
                        Some(e) if matches!(e.state, State::Working) => e.cancel.clone(),
                        _ => return,
                    }
                };
                let hash = id_sha256(&id);
                let store = store.clone();
                let asked = tokio::task::spawn_blocking(move || store.get(&hash))
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .flatten()
                    .is_some_and(|r| r.cancel_asked);
                if asked {
                    cancel.cancel();
                    return;
                }
            }
        });
    }

    /// `tasks/cancel` of a task this node does not have: in a fleet, the
    /// record is marked (an input-required task is cancelled at once; the
    /// node that runs a working one stops it). `unknown` otherwise.
    pub(super) fn cancel_elsewhere(
        &self,
        id: &str,
        context: &RequestContext<RoleServer>,
        unknown: ErrorData,
    ) -> Result<(), ErrorData> {
        let Some((store, _)) = self.fleet_tasks() else {
            return Err(unknown);
        };
        if self.fleet_row(id, context)?.is_none() {
            return Err(unknown);
        }
        tokio::task::block_in_place(|| store.ask_cancel(&id_sha256(id)))
            .map_err(|e| fleet_error(&e))?;
        Ok(())
    }

    /// `tasks/update` of a task this node does not have: in a fleet, one
    /// parked on another node, taken once for the fleet and run afresh
    /// here with the person's answer.
    pub(super) fn answer_elsewhere(
        &self,
        id: &str,
        answer: rmcp::model::ElicitResult,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (Some((store, node)), Some(row)) = (self.fleet_tasks(), self.fleet_row(id, context)?)
        else {
            return Err(unknown(id));
        };
        if row.status != status::INPUT_REQUIRED {
            return Err(not_waiting(id));
        }
        let call = row
            .call
            .clone()
            .and_then(|c| serde_json::from_value::<FleetCall>(c).ok())
            .ok_or_else(|| unknown(id))?;
        if call.actor != self.inner.options.actor {
            return Err(unknown(id));
        }
        let form = bound_form(id, &row)?;
        let Some(was) = tokio::task::block_in_place(|| store.take_input(&id_sha256(id), &node))
            .map_err(|e| fleet_error(&e))?
        else {
            return Err(not_waiting(id));
        };
        // Taken as read: no node may change these columns, so only the
        // owner could have meanwhile; then nothing runs.
        if (&was.call, &was.form, &was.asked_sha256) != (&row.call, &row.form, &row.asked_sha256) {
            tracing::warn!("task `{id}`: its record changed while it was taken: not run");
            return Err(not_waiting(id));
        }
        tracing::info!(
            "task `{id}` of node `{}`: answered here, run afresh",
            was.node
        );
        self.run_answered_here(id, &row, call, form, answer, context);
        Ok(())
    }

    /// Runs the call of task `id`, taken from another node, afresh here
    /// with the person's `answer` to `form`: the task works on this node.
    fn run_answered_here(
        &self,
        id: &str,
        row: &TaskRow,
        call: FleetCall,
        form: ElicitRequestParams,
        answer: rmcp::model::ElicitResult,
        context: &RequestContext<RoleServer>,
    ) {
        let mut request =
            self.request_for(&call.tool, call.command, call.arguments.clone(), context);
        let cancel = CancelHandle::new();
        request.cancel = cancel.clone();
        let entry = Entry {
            session: row.session.clone(),
            created_at: row.created_at.clone(),
            updated_at: now(),
            ended: None,
            state: State::Working,
            cancel,
            call: None,
            waiting_for: None,
        };
        lock(&self.inner.tasks).insert(id.to_string(), entry);
        self.watch_cancel(id);
        let choice = self.choice_of(answer);
        let server = self.clone();
        let id = id.to_string();
        let context = context.clone();
        tokio::spawn(async move {
            let asked = Asked {
                scope: &call.scope,
                definition_hash: &call.definition_hash,
                policy_hash: &call.policy_hash,
                form: Some((&call.turn, &form)),
            };
            let outcome = server.run_answered(request, None, &asked, choice).await;
            server
                .task_turn_ended(
                    &id,
                    &call.tool,
                    outcome.map(|o| Begun::Done(Box::new(o))),
                    &context,
                )
                .await;
        });
    }
}

/// The form task `row` asked, when its record binds the call to it.
fn bound_form(id: &str, row: &TaskRow) -> Result<ElicitRequestParams, ErrorData> {
    // The call is run only as the form the person was shown: the
    // parking node recorded the hash of the two, in a column no node
    // may change; a record where they no longer match is refused
    // before anything is taken (the parking node can still be
    // answered).
    let form = row
        .form
        .clone()
        .and_then(|f| serde_json::from_value::<ElicitRequestParams>(f).ok());
    let bound = row.asked_sha256.as_deref()
        == Some(crate::host::task_asked_sha256(row.call.as_ref(), row.form.as_ref()).as_str());
    form.filter(|_| bound).ok_or_else(|| {
        tracing::warn!("task `{id}`: its record does not bind its call to the form asked");
        ErrorData::invalid_params(
            format!(
                "task `{id}`: the fleet's record of its call does not match the question asked; answer it through the node that asked it"
            ),
            None,
        )
    })
}
