//! A fleet's parked MCP turns: what a retry needs to be answered on any
//! node.
//!
//! A turn of a 2026-07-28 client that needs an approval is parked on the
//! node that began it, under a request state (256 random bits) the client
//! carries to its retry. Behind a fleet's proxy the retry may reach
//! another node. So the parking node also records, under the state's
//! sha256 (never the state itself: a reader of the table cannot answer
//! for the client), what the state is bound to and the form that was
//! asked. Whichever node the retry reaches takes the row, once across the
//! fleet ([`ParkedStore::take`]: one `UPDATE … WHERE taken_by IS NULL`):
//! the parking node resumes its turn, another node runs the call afresh
//! with the person's answer; the parking node's own turn is then dropped,
//! never queued.

use std::sync::Arc;
use std::time::Duration;

use postgres::types::Type;

use super::audit::StateError;
use super::pg::Pg;

/// The parked-turn table (schema version 2). A node parks and takes;
/// nobody updates anything else of a row.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS parked (
 state_sha256 text PRIMARY KEY,
 node text NOT NULL,
 turn text NOT NULL,
 binding jsonb NOT NULL,
 form jsonb NOT NULL,
 expires_at timestamptz NOT NULL,
 taken_by text,
 taken_at timestamptz
);
GRANT SELECT, INSERT ON parked TO gatehouse_node;
GRANT UPDATE (taken_by, taken_at) ON parked TO gatehouse_node;
";

/// One parked turn as the fleet sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParkedRow {
    /// The node that parked it.
    pub node: String,
    /// The turn it parked.
    pub turn: String,
    /// What a retry must match (the serving side's binding, as JSON).
    pub binding: serde_json::Value,
    /// The form the person was asked (for a retry that did not answer).
    pub form: serde_json::Value,
}

/// What [`ParkedStore::take`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// Taken now, by the caller: the row.
    Taken(ParkedRow),
    /// No such state was parked (or it was never recorded).
    Unknown,
    /// It was taken already, or it expired.
    Gone,
}

/// A fleet's parked turns.
pub trait ParkedStore: Send + Sync {
    /// Records the turn parked under the state whose sha256 is
    /// `state_sha256`, answerable for `ttl`.
    fn park(&self, state_sha256: &str, row: &ParkedRow, ttl: Duration) -> Result<(), StateError>;

    /// The row parked under `state_sha256`, if it is still to be taken
    /// (not taken, not expired); nothing is changed.
    fn get(&self, state_sha256: &str) -> Result<Option<ParkedRow>, StateError>;

    /// Takes the row for `node`: [`Claim::Taken`] for exactly one caller
    /// across the fleet, while it is unexpired. The node that parked it
    /// takes it at any time (its own timer expires its turn, and queues
    /// it if no other node took it first).
    fn take(&self, state_sha256: &str, node: &str) -> Result<Claim, StateError>;
}

/// The parked turns in a fleet's PostgreSQL.
pub struct PgParked {
    pg: Arc<Pg>,
}

impl PgParked {
    /// The store of `pg`'s database (nothing is connected yet).
    pub fn new(pg: Arc<Pg>) -> PgParked {
        PgParked { pg }
    }
}

fn parked_row(r: &postgres::Row) -> ParkedRow {
    let json =
        |i: usize| serde_json::from_str(r.get::<_, &str>(i)).unwrap_or(serde_json::Value::Null);
    ParkedRow {
        node: r.get(0),
        turn: r.get(1),
        binding: json(2),
        form: json(3),
    }
}

impl ParkedStore for PgParked {
    fn park(&self, state_sha256: &str, row: &ParkedRow, ttl: Duration) -> Result<(), StateError> {
        let (binding, form) = (row.binding.to_string(), row.form.to_string());
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        Ok(self.pg.with("cannot record the parked turn", |c| {
            c.execute_typed(
                "INSERT INTO parked (state_sha256, node, turn, binding, form, expires_at) \
                 VALUES ($1, $2, $3, ($4::text)::jsonb, ($5::text)::jsonb, \
                 now() + make_interval(secs => $6::bigint / 1000.0))",
                &[
                    (&state_sha256, Type::TEXT),
                    (&row.node, Type::TEXT),
                    (&row.turn, Type::TEXT),
                    (&binding, Type::TEXT),
                    (&form, Type::TEXT),
                    (&ttl_ms, Type::INT8),
                ],
            )
            .map(|_| ())
        })?)
    }

    fn get(&self, state_sha256: &str) -> Result<Option<ParkedRow>, StateError> {
        Ok(self.pg.with("cannot read the parked turns", |c| {
            Ok(c.query_opt(
                "SELECT node, turn, binding::text, form::text FROM parked \
                 WHERE state_sha256 = $1 AND taken_by IS NULL AND expires_at > now()",
                &[&state_sha256],
            )?
            .as_ref()
            .map(parked_row))
        })?)
    }

    fn take(&self, state_sha256: &str, node: &str) -> Result<Claim, StateError> {
        Ok(self.pg.with("cannot take the parked turn", |c| {
            let taken = c.query_opt(
                "UPDATE parked SET taken_by = $2, taken_at = now() \
                 WHERE state_sha256 = $1 AND taken_by IS NULL \
                 AND (node = $2 OR expires_at > now()) \
                 RETURNING node, turn, binding::text, form::text",
                &[&state_sha256, &node],
            )?;
            if let Some(r) = taken {
                return Ok(Claim::Taken(parked_row(&r)));
            }
            let exists = c
                .query_opt(
                    "SELECT 1 FROM parked WHERE state_sha256 = $1",
                    &[&state_sha256],
                )?
                .is_some();
            Ok(if exists { Claim::Gone } else { Claim::Unknown })
        })?)
    }
}
