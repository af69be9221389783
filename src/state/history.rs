//! The history index of a fleet: which turns exist, on which node, whose,
//! with what status and undo state, for every node in one table.
//!
//! On the embedded backend the index is the history directory and
//! `audit.jsonl` themselves (`crate::undo::History`); a fleet's nodes each
//! keep those too (a turn's journal and backups stay on the node whose
//! workspace they belong to), and also write each turn's summary here, so
//! `gatehouse history` on any node lists the fleet's turns and `gatehouse
//! undo` can say which node holds a turn it does not.
//!
//! The row is written with the turn's audit-chain record, by the chain's
//! own trigger, in the same statement (one round trip, one commit: the
//! record and its index row commit together): the node passes its name
//! and the turn's operation count with the record
//! ([`super::AuditStore::append_indexed`]), and the trigger puts the
//! record's turn fields in the index. Its undo state is set when an undo
//! ends; a node's role may insert rows and change the undo state, never
//! delete a row.

use std::sync::Arc;

use super::audit::StateError;
use super::pg::Pg;

/// The turn index table (schema version 2).
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS turns (
 turn text PRIMARY KEY,
 node text NOT NULL,
 actor text NOT NULL,
 started_at text NOT NULL,
 operations bigint NOT NULL,
 undo text NOT NULL,
 record jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_by_start ON turns (started_at, turn);
GRANT SELECT, INSERT ON turns TO gatehouse_node, gatehouse_approver;
GRANT UPDATE (undo, record, operations) ON turns TO gatehouse_node;
ALTER TABLE audit_chain ADD COLUMN IF NOT EXISTS node text;
ALTER TABLE audit_chain ADD COLUMN IF NOT EXISTS operations bigint;
CREATE OR REPLACE FUNCTION gatehouse_audit_index() RETURNS trigger
 LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE r jsonb;
BEGIN
  IF NEW.kind = 'turn' AND NEW.node IS NOT NULL THEN
    r := NEW.body::jsonb - 'decisions';
    INSERT INTO turns (turn, node, actor, started_at, operations, undo, record)
    VALUES (NEW.turn, NEW.node, coalesce(r->>'actor', ''), coalesce(r->>'started_at', ''),
            coalesce(NEW.operations, 0), coalesce(r->>'undo', 'none'), r)
    ON CONFLICT (turn) DO UPDATE SET operations = excluded.operations,
      undo = excluded.undo, record = excluded.record;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER audit_index AFTER INSERT ON audit_chain
 FOR EACH ROW EXECUTE FUNCTION gatehouse_audit_index();
";

/// One turn of the index.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IndexedTurn {
    /// The node that ran it, where its journal is.
    pub node: String,
    /// How many operations it journaled.
    pub operations: u64,
    /// Its record (`turn.json`'s fields, the undo state as of now).
    pub record: serde_json::Value,
}

/// A fleet's history index.
pub trait TurnIndex: Send + Sync {
    /// Sets `turn`'s undo state (`undone`, `partly_undone`); whether the
    /// index has the turn.
    fn set_undo(&self, turn: &str, undo: &str) -> Result<bool, StateError>;

    /// Every turn, oldest first (by start, then id).
    fn turns(&self) -> Result<Vec<IndexedTurn>, StateError>;

    /// One turn, if the index has it.
    fn get(&self, turn: &str) -> Result<Option<IndexedTurn>, StateError>;

    /// Removes the turns that finished before `cutoff` (an RFC 3339 UTC
    /// time; `history prune`'s, the owner's); how many. With `dry_run`,
    /// only counts them.
    fn prune_before(&self, cutoff: &str, dry_run: bool) -> Result<u64, StateError>;
}

/// The index in a fleet's PostgreSQL.
pub struct PgTurnIndex {
    pg: Arc<Pg>,
}

impl PgTurnIndex {
    /// The index of `pg`'s database (nothing is connected yet).
    pub fn new(pg: Arc<Pg>) -> PgTurnIndex {
        PgTurnIndex { pg }
    }
}

fn indexed(r: &postgres::Row) -> IndexedTurn {
    IndexedTurn {
        node: r.get(0),
        operations: u64::try_from(r.get::<_, i64>(1)).unwrap_or(0),
        // The database checked it is JSON when it was stored.
        record: serde_json::from_str(r.get::<_, &str>(2)).unwrap_or(serde_json::Value::Null),
    }
}

impl TurnIndex for PgTurnIndex {
    fn set_undo(&self, turn: &str, undo: &str) -> Result<bool, StateError> {
        Ok(self.pg.with("cannot record the undo in the history index", |c| {
            let n = c.execute(
                "UPDATE turns SET undo = $2, record = jsonb_set(record, '{undo}', to_jsonb($2::text)) \
                 WHERE turn = $1",
                &[&turn, &undo],
            )?;
            Ok(n > 0)
        })?)
    }

    fn turns(&self) -> Result<Vec<IndexedTurn>, StateError> {
        Ok(self.pg.with("cannot read the history index", |c| {
            Ok(c.query(
                "SELECT node, operations, record::text FROM turns ORDER BY started_at, turn",
                &[],
            )?
            .iter()
            .map(indexed)
            .collect())
        })?)
    }

    fn prune_before(&self, cutoff: &str, dry_run: bool) -> Result<u64, StateError> {
        let sql = if dry_run {
            "SELECT count(*) FROM turns WHERE record->>'finished_at' < $1"
        } else {
            "WITH gone AS (DELETE FROM turns WHERE record->>'finished_at' < $1 RETURNING 1) \
             SELECT count(*) FROM gone"
        };
        Ok(self.pg.with("cannot prune the history index", |c| {
            let n: i64 = c.query_one(sql, &[&cutoff])?.get(0);
            Ok(u64::try_from(n).unwrap_or(0))
        })?)
    }

    fn get(&self, turn: &str) -> Result<Option<IndexedTurn>, StateError> {
        Ok(self.pg.with("cannot read the history index", |c| {
            Ok(c.query_opt(
                "SELECT node, operations, record::text FROM turns WHERE turn = $1",
                &[&turn],
            )?
            .as_ref()
            .map(indexed))
        })?)
    }
}
