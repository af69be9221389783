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
//! - From schema version 6 a node's role may change only what a node must
//!   (status, result, timestamps, the cancel mark, the runner): never the
//!   call, the form, the session or the node that created the task. The
//!   call and the form are written once, when the task parks, by
//!   `gatehouse_task_park` ([`SCHEMA_6`]), with [`asked_sha256`] of the
//!   two, so a node that answers the task elsewhere runs the call the
//!   person was shown, or nothing.

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

/// What schema version 6 changes in the tasks (security round 3, item 5):
/// the node that runs a task is `runner` (NULL: the node that created
/// it), so `node` never changes; the node's role may write only the
/// columns a node must change, by column grants; the call, the form and
/// `asked_sha256` (the hash that binds the two) are written once, when
/// the task parks, by `gatehouse_task_park`, and by nothing else a node
/// may run. A task that parked under version 5 has no `asked_sha256`: it
/// is answered on the node that parked it, not elsewhere.
pub const SCHEMA_6: &str = "
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS runner text;
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS asked_sha256 text;
REVOKE INSERT, UPDATE ON tasks FROM gatehouse_node;
GRANT INSERT (id_sha256, node, session, status, created_at, updated_at, result, expires_at)
 ON tasks TO gatehouse_node;
GRANT UPDATE (status, updated_at, result, expires_at, cancel_asked, runner)
 ON tasks TO gatehouse_node;
CREATE OR REPLACE FUNCTION gatehouse_task_park(p_id text, p_node text, p_session text,
 p_created_at text, p_updated_at text, p_call text, p_form text, p_asked text, p_ttl_ms bigint)
 RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
  -- Once per task: only a working task of p_node that never parked (no
  -- runner, no call, no form, no hash) takes a call and a form.
  INSERT INTO tasks AS t (id_sha256, node, session, status, created_at, updated_at, call, form,
    asked_sha256, expires_at)
  VALUES (p_id, p_node, p_session, 'input_required', p_created_at, p_updated_at, p_call::jsonb,
    p_form::jsonb, p_asked, now() + make_interval(secs => p_ttl_ms / 1000.0))
  ON CONFLICT (id_sha256) DO UPDATE SET status = 'input_required',
    updated_at = excluded.updated_at, call = excluded.call, form = excluded.form,
    asked_sha256 = excluded.asked_sha256, expires_at = excluded.expires_at
  WHERE t.node = excluded.node AND t.runner IS NULL AND t.status = 'working'
    AND t.call IS NULL AND t.form IS NULL AND t.asked_sha256 IS NULL;
  RETURN FOUND;
END $$;
REVOKE ALL ON FUNCTION gatehouse_task_park(text, text, text, text, text, text, text, text, bigint)
 FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gatehouse_task_park(text, text, text, text, text, text, text, text, bigint)
 TO gatehouse_node;
";

/// The hash that binds a parked task's call to the form its person is
/// shown: the lowercase hex sha256 of `gatehouse-task-asked-1`, the
/// call's canonical JSON and the form's (keys sorted at every level), each
/// on a line of its own. The parking node records it with the two; a node
/// that answers the task elsewhere recomputes it from the stored call and
/// form and refuses a task where it differs.
pub fn asked_sha256(call: Option<&serde_json::Value>, form: Option<&serde_json::Value>) -> String {
    use crate::policy::snapshot::{canonical_json, sha256_hex};
    let bytes = format!(
        "gatehouse-task-asked-1\n{}\n{}",
        canonical_json(&call),
        canonical_json(&form)
    );
    sha256_hex(bytes.as_bytes())
}

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
    /// The node that runs it (or parked it): the runner once another node
    /// took it.
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
    /// As read: the [`asked_sha256`] the parking node recorded with the
    /// call and the form (`None` before it parked, or under schema
    /// version 5). Ignored when writing: [`TaskStore::put`] computes it.
    pub asked_sha256: Option<String>,
}

/// A fleet's tasks.
pub trait TaskStore: Send + Sync {
    /// Records task `id_sha256`'s state `row`, kept for `ttl` from now:
    /// created, or changed when `row.node` runs it and it is not
    /// cancelled. An input-required state records the call and the form,
    /// once: only a working task that never parked takes them. Whether it
    /// was written.
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

/// The columns [`task_row`] reads; the node is the runner's, once
/// another node took the task.
const COLUMNS: &str = "coalesce(runner, node) AS node, session, status, created_at, updated_at, \
                       call::text AS call, form::text AS form, result::text AS result, \
                       cancel_asked, asked_sha256";

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
        asked_sha256: r.get(9),
    }
}

impl TaskStore for PgTasks {
    fn put(&self, id_sha256: &str, row: &TaskRow, ttl: Duration) -> Result<bool, StateError> {
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        if row.status == status::INPUT_REQUIRED {
            // The call and the form, with the hash that binds them, in the
            // one write a node's role may make of them.
            let text = |v: &Option<serde_json::Value>| v.as_ref().map(serde_json::Value::to_string);
            let (call, form) = (text(&row.call), text(&row.form));
            let asked = asked_sha256(row.call.as_ref(), row.form.as_ref());
            return Ok(self.pg.with("cannot record the task", |c| {
                c.query_one(
                    "SELECT gatehouse_task_park($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                    &[
                        &id_sha256,
                        &row.node,
                        &row.session,
                        &row.created_at,
                        &row.updated_at,
                        &call,
                        &form,
                        &asked,
                        &ttl_ms,
                    ],
                )
                .map(|r| r.get::<_, bool>(0))
            })?);
        }
        let result = row.result.as_ref().map(serde_json::Value::to_string);
        Ok(self.pg.with("cannot record the task", |c| {
            c.execute_typed(
                "INSERT INTO tasks (id_sha256, node, session, status, created_at, updated_at, \
                   result, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, ($7::text)::jsonb, \
                   now() + make_interval(secs => $8::bigint / 1000.0)) \
                 ON CONFLICT (id_sha256) DO UPDATE SET status = excluded.status, \
                   updated_at = excluded.updated_at, result = excluded.result, \
                   expires_at = excluded.expires_at \
                 WHERE coalesce(tasks.runner, tasks.node) = excluded.node \
                   AND tasks.status <> 'cancelled'",
                &[
                    (&id_sha256, Type::TEXT),
                    (&row.node, Type::TEXT),
                    (&row.session, Type::TEXT),
                    (&row.status, Type::TEXT),
                    (&row.created_at, Type::TEXT),
                    (&row.updated_at, Type::TEXT),
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
                    "UPDATE tasks SET runner = $2, status = 'working' \
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

#[cfg(test)]
mod tests {
    use super::asked_sha256;

    /// The hash is of the call's and the form's content, not of how a
    /// `jsonb` column orders their keys when they are read back; a change
    /// of a single value changes it.
    #[test]
    fn the_asked_hash_ignores_key_order_and_sees_every_value() {
        let parse = |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap();
        let call = parse(r#"{"name":"write-file","arguments":{"path":"out/a.txt","mode":1}}"#);
        let reordered = parse(r#"{"arguments":{"mode":1,"path":"out/a.txt"},"name":"write-file"}"#);
        let form = parse(r#"{"message":"allow?","items":[{"b":1,"a":2}]}"#);
        let h = asked_sha256(Some(&call), Some(&form));
        assert_eq!(h, asked_sha256(Some(&reordered), Some(&form)));
        assert_eq!(h.len(), 64);
        let evil = parse(r#"{"name":"write-file","arguments":{"path":"out/b.txt","mode":1}}"#);
        assert_ne!(h, asked_sha256(Some(&evil), Some(&form)));
        assert_ne!(h, asked_sha256(Some(&call), None));
    }
}
