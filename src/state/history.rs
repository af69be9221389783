//! The history index of a fleet: which turns exist, on which node, whose,
//! with what status and undo state, for every node.
//!
//! On the embedded backend the index is the history directory and
//! `audit.jsonl` themselves (`crate::undo::History`); a fleet's nodes each
//! keep those too (a turn's journal and backups stay on the node whose
//! workspace they belong to), and also write each turn's summary to the
//! database, so `gatehouse history` on any node lists the fleet's turns and
//! `gatehouse undo` can say which node holds a turn it does not.
//!
//! The summary is the turn's record in the audit chain itself: the node
//! passes its name and the turn's operation count with the record
//! ([`super::AuditStore::append_indexed`]), in the same row, so the turn is
//! indexed by the one insert that records it (no second write, no
//! trigger). The index reads those rows (`kind = 'turn'` with a node): the
//! record's fields come from its body, its undo state from `turn_undo`,
//! where an undo's end is written. A node's role may insert and change an
//! undo state, never delete one. (Schema versions 2 and 3 kept a table of
//! their own, `turns`, filled by a trigger; version 4 moves its undo
//! states to `turn_undo` and drops it.)

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

/// What schema version 4 changes in the index: it is read from the audit
/// chain, the undo states move to `turn_undo`, and `turns` and its
/// trigger go.
pub const SCHEMA_4: &str = "
DROP TRIGGER IF EXISTS audit_index ON audit_chain;
DROP FUNCTION IF EXISTS gatehouse_audit_index();
CREATE TABLE IF NOT EXISTS turn_undo (
 turn text PRIMARY KEY,
 undo text NOT NULL
);
INSERT INTO turn_undo (turn, undo) SELECT turn, undo FROM turns WHERE undo <> 'none'
 ON CONFLICT (turn) DO NOTHING;
DROP TABLE IF EXISTS turns;
GRANT SELECT, INSERT, UPDATE ON turn_undo TO gatehouse_node;
GRANT SELECT ON turn_undo TO gatehouse_approver;
";

/// The index's columns for the turn rows of the chain: the node, the
/// operation count and the record (the body without its decisions, its
/// undo state as of now).
const INDEXED: &str = "SELECT a.node, coalesce(a.operations, 0), \
     ((a.body::jsonb - 'decisions') || CASE WHEN u.undo IS NULL THEN '{}'::jsonb \
       ELSE jsonb_build_object('undo', u.undo) END)::text \
     FROM audit_chain a LEFT JOIN turn_undo u ON u.turn = a.turn \
     WHERE a.kind = 'turn' AND a.node IS NOT NULL";

/// What schema version 5 adds: an index of the chain's rows by turn, so
/// that looking one turn up (`history show`, `undo`, an undo's end) reads a
/// few pages, not the whole chain. A BRIN index: it keeps the least and
/// greatest turn id of each 32 pages, which is enough because a turn id
/// begins with its start time and the chain is appended in time order,
/// and it costs an append about 1–2 µs of the server's time where a B-tree
/// costs 3–4 (measured with `pgbench -M prepared`; BENCHMARKS.md). Each
/// new range is summarized by autovacuum as the chain grows.
pub const SCHEMA_5: &str = "
CREATE INDEX IF NOT EXISTS audit_chain_turn ON audit_chain USING brin (turn)
 WITH (pages_per_range = 32, autosummarize = on);
";

/// The query that looks one turn up in the index (`$1`: its id): its
/// latest turn row.
pub const LOOKUP: &str = "SELECT a.node, coalesce(a.operations, 0), \
     ((a.body::jsonb - 'decisions') || CASE WHEN u.undo IS NULL THEN '{}'::jsonb \
       ELSE jsonb_build_object('undo', u.undo) END)::text \
     FROM audit_chain a LEFT JOIN turn_undo u ON u.turn = a.turn \
     WHERE a.kind = 'turn' AND a.node IS NOT NULL AND a.turn = $1 \
     ORDER BY a.seq DESC LIMIT 1";

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
        Ok(self
            .pg
            .with("cannot record the undo in the history index", |c| {
                let n = c.execute(
                    "INSERT INTO turn_undo (turn, undo) SELECT $1, $2 \
                 WHERE EXISTS (SELECT 1 FROM audit_chain \
                   WHERE turn = $1 AND kind = 'turn' AND node IS NOT NULL) \
                 ON CONFLICT (turn) DO UPDATE SET undo = excluded.undo",
                    &[&turn, &undo],
                )?;
                Ok(n > 0)
            })?)
    }

    fn turns(&self) -> Result<Vec<IndexedTurn>, StateError> {
        Ok(self.pg.with("cannot read the history index", |c| {
            Ok(c.query(
                &format!("{INDEXED} ORDER BY a.body::jsonb->>'started_at', a.turn, a.seq"),
                &[],
            )?
            .iter()
            .map(indexed)
            .collect())
        })?)
    }

    fn prune_before(&self, cutoff: &str, dry_run: bool) -> Result<u64, StateError> {
        // The turns themselves go with the chain's records (its prune);
        // here, the turns finished before the cutoff are counted, and the
        // undo states of turns no longer in the chain are dropped.
        Ok(self.pg.with("cannot prune the history index", |c| {
            let n: i64 = c
                .query_one(
                    "SELECT count(*) FROM audit_chain WHERE kind = 'turn' AND node IS NOT NULL \
                     AND body::jsonb->>'finished_at' < $1",
                    &[&cutoff],
                )?
                .get(0);
            if !dry_run {
                c.execute(
                    "DELETE FROM turn_undo u WHERE NOT EXISTS \
                     (SELECT 1 FROM audit_chain a WHERE a.turn = u.turn)",
                    &[],
                )?;
            }
            Ok(u64::try_from(n).unwrap_or(0))
        })?)
    }

    fn get(&self, turn: &str) -> Result<Option<IndexedTurn>, StateError> {
        Ok(self.pg.with("cannot read the history index", |c| {
            Ok(c.query_opt(LOOKUP, &[&turn])?.as_ref().map(indexed))
        })?)
    }
}
