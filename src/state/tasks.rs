//! A fleet's MCP tasks (the Tasks extension): what `tasks/get`,
//! `tasks/update` and `tasks/cancel` need on whichever node they reach.
//!
//! Behind a fleet's proxy a client's `tasks/*` requests may reach another
//! node than the one that created the task. So the node that runs a task
//! records each of its states here, under the sha256 of the task's id
//! (never the id itself: a reader of the table cannot act for the
//! client): working, input-required (with the approval form and the call
//! to run again), completed (with the call's result) or cancelled.
//!
//! - An input-required task is taken once across the fleet
//!   ([`TaskStore::take_input`]: one `UPDATE … WHERE status =
//!   'input_required'`): the node that answers it becomes its runner (the
//!   node that parked it drops its turn, which never ran, and answers from
//!   here from then on).
//! - Only the task's runner writes its states ([`TaskStore::put`] changes
//!   nothing of a row another node runs); a cancelled task stays
//!   cancelled.
//! - A cancel that reaches another node than the runner marks the row
//!   ([`TaskStore::ask_cancel`]); the runner looks at the mark while the
//!   task works and stops its turn.

use std::sync::Arc;
use std::time::Duration;

use postgres::types::Type;

use super::audit::StateError;
use super::pg::Pg;

/// The tasks table (schema version 3).
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tasks (
 id_sha256 text PRIMARY KEY,
 node text NOT NULL,
 session text,
 status text NOT NULL,
 created_at text NOT NULL,
 updated_at text NOT NULL,
 call jsonb,
 form jsonb,
 result jsonb,
 cancel_asked boolean NOT NULL DEFAULT false,
 expires_at timestamptz NOT NULL
);
GRANT SELECT, INSERT, UPDATE ON tasks TO gatehouse_node;
";

/// A task's status, as the table holds it (the Tasks extension's names).
pub mod status {
    /// Its turn runs.
    pub const WORKING: &str = "working";
    /// Its turn waits for a person's answer.
    pub const INPUT_REQUIRED: &str = "input_required";
    /// Its call ended; the row has the result.
    pub const COMPLETED: &str = "completed";
    /// Cancelled.
    pub const CANCELLED: &str = "cancelled";
}

/// One task as the fleet sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    /// The node that runs it (or parked it).
    pub node: String,
    /// The HTTP session it was created in, if any.
    pub session: Option<String>,
    /// One of [`status`].
    pub status: String,
    /// When it was created (ISO 8601, UTC).
    pub created_at: String,
    /// When it last changed (ISO 8601, UTC).
    pub updated_at: String,
    /// While input-required: the call to run again on another node, and
    /// what the person's answer must match (the serving side's JSON).
    pub call: Option<serde_json::Value>,
    /// While input-required: the approval form.
    pub form: Option<serde_json::Value>,
    /// Once completed: the call's result.
    pub result: Option<serde_json::Value>,
    /// Whether a cancel reached another node than the runner.
    pub cancel_asked: bool,
}

/// A fleet's tasks.
pub trait TaskStore: Send + Sync {
    /// Records task `id_sha256`'s state `row`, kept for `ttl` from now:
    /// created, or changed when `row.node` runs it and it is not
    /// cancelled. Whether it was written.
    fn put(&self, id_sha256: &str, row: &TaskRow, ttl: Duration) -> Result<bool, StateError>;

    /// The unexpired task `id_sha256`.
    fn get(&self, id_sha256: &str) -> Result<Option<TaskRow>, StateError>;

    /// Takes the input-required task `id_sha256` for `node`, which becomes
    /// its runner (status working): the row as it was, for exactly one
    /// caller across the fleet; `None` when it is not input-required (or
    /// unknown, or expired).
    fn take_input(&self, id_sha256: &str, node: &str) -> Result<Option<TaskRow>, StateError>;

    /// Asks the runner of task `id_sha256` to cancel it (an input-required
    /// task is cancelled at once): the row as it is now, `None` when
    /// unknown.
    fn ask_cancel(&self, id_sha256: &str) -> Result<Option<TaskRow>, StateError>;
}

/// The tasks in a fleet's PostgreSQL.
pub struct PgTasks {
    pg: Arc<Pg>,
}

impl PgTasks {
    /// The store of `pg`'s database (nothing is connected yet).
    pub fn new(pg: Arc<Pg>) -> PgTasks {
        PgTasks { pg }
    }
}

const COLUMNS: &str = "node, session, status, created_at, updated_at, call::text, form::text, \
                       result::text, cancel_asked";

fn task_row(r: &postgres::Row) -> TaskRow {
    let json = |i: usize| {
        r.get::<_, Option<&str>>(i)
            .and_then(|t| serde_json::from_str(t).ok())
    };
    TaskRow {
        node: r.get(0),
        session: r.get(1),
        status: r.get(2),
        created_at: r.get(3),
        updated_at: r.get(4),
        call: json(5),
        form: json(6),
        result: json(7),
        cancel_asked: r.get(8),
    }
}

impl TaskStore for PgTasks {
    fn put(&self, id_sha256: &str, row: &TaskRow, ttl: Duration) -> Result<bool, StateError> {
        let text = |v: &Option<serde_json::Value>| v.as_ref().map(serde_json::Value::to_string);
        let (call, form, result) = (text(&row.call), text(&row.form), text(&row.result));
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        Ok(self.pg.with("cannot record the task", |c| {
            c.execute_typed(
                "INSERT INTO tasks (id_sha256, node, session, status, created_at, updated_at, \
                   call, form, result, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, ($7::text)::jsonb, ($8::text)::jsonb, \
                   ($9::text)::jsonb, now() + make_interval(secs => $10::bigint / 1000.0)) \
                 ON CONFLICT (id_sha256) DO UPDATE SET status = excluded.status, \
                   updated_at = excluded.updated_at, call = excluded.call, \
                   form = excluded.form, result = excluded.result, \
                   expires_at = excluded.expires_at \
                 WHERE tasks.node = excluded.node AND tasks.status <> 'cancelled'",
                &[
                    (&id_sha256, Type::TEXT),
                    (&row.node, Type::TEXT),
                    (&row.session, Type::TEXT),
                    (&row.status, Type::TEXT),
                    (&row.created_at, Type::TEXT),
                    (&row.updated_at, Type::TEXT),
                    (&call, Type::TEXT),
                    (&form, Type::TEXT),
                    (&result, Type::TEXT),
                    (&ttl_ms, Type::INT8),
                ],
            )
            .map(|n| n == 1)
        })?)
    }

    fn get(&self, id_sha256: &str) -> Result<Option<TaskRow>, StateError> {
        Ok(self.pg.with("cannot read the tasks", |c| {
            Ok(c.query_opt(
                &format!("SELECT {COLUMNS} FROM tasks WHERE id_sha256 = $1 AND expires_at > now()"),
                &[&id_sha256],
            )?
            .as_ref()
            .map(task_row))
        })?)
    }

    fn take_input(&self, id_sha256: &str, node: &str) -> Result<Option<TaskRow>, StateError> {
        Ok(self.pg.with("cannot take the task", |c| {
            // The row as it was: a sub-select sees it before the update.
            Ok(c.query_opt(
                &format!(
                    "UPDATE tasks SET node = $2, status = 'working', form = NULL \
                     FROM (SELECT {COLUMNS} FROM tasks WHERE id_sha256 = $1 FOR UPDATE) AS was \
                     WHERE tasks.id_sha256 = $1 AND tasks.status = 'input_required' \
                       AND tasks.expires_at > now() \
                     RETURNING was.*"
                ),
                &[&id_sha256, &node],
            )?
            .as_ref()
            .map(task_row))
        })?)
    }

    fn ask_cancel(&self, id_sha256: &str) -> Result<Option<TaskRow>, StateError> {
        Ok(self.pg.with("cannot cancel the task", |c| {
            Ok(c.query_opt(
                &format!(
                    "UPDATE tasks SET cancel_asked = true, \
                       status = CASE WHEN status = 'input_required' THEN 'cancelled' \
                                ELSE status END \
                     WHERE id_sha256 = $1 AND expires_at > now() \
                     RETURNING {COLUMNS}"
                ),
                &[&id_sha256],
            )?
            .as_ref()
            .map(task_row))
        })?)
    }
}
