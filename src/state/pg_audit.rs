//! The audit chain in a fleet's PostgreSQL: one chain for every node.
//!
//! The database links each record, not the node: a `BEFORE INSERT`
//! trigger (owned by the schema's owner, `SECURITY DEFINER`) takes the
//! chain's head under a transaction-scoped advisory lock, and sets the
//! record's `seq`, `prev` and `hash` ([`super::chain::link_hash`], computed
//! in SQL). A node's role may only `INSERT` (and read): it can neither
//! choose a link nor edit, delete or reorder a record, so its credentials
//! cannot rewrite the chain consistently. Pruning is the owner's.
//!
//! Appends are committed in groups: the first appender of a host that
//! finds no batch being written writes every record waiting at that
//! moment in one statement (one round trip, one commit), while the
//! records that arrive meanwhile wait for the next batch. Each appender
//! returns only once its record's batch committed (on the server's disk
//! as its `synchronous_commit` says): a record is never acknowledged
//! first. A failed batch fails every record in it.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};

use super::audit::{AuditStore, StateError};
use super::chain::{ChainRow, Checkpoint};
use super::pg::Pg;

/// The PostgreSQL schema of the audit chain (part of version 1).
pub const SCHEMA: &str = "
CREATE TABLE audit_chain (
 seq bigint PRIMARY KEY,
 kind text NOT NULL,
 turn text NOT NULL,
 time text NOT NULL,
 body text NOT NULL,
 prev text NOT NULL,
 hash text NOT NULL
);
CREATE TABLE audit_checkpoint (
 one boolean PRIMARY KEY DEFAULT true CHECK (one),
 seq bigint NOT NULL,
 hash text NOT NULL
);
CREATE FUNCTION gatehouse_audit_link() RETURNS trigger
 LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE head_seq bigint; head_hash text;
BEGIN
  PERFORM pg_advisory_xact_lock(7137002);
  SELECT seq, hash INTO head_seq, head_hash FROM audit_chain ORDER BY seq DESC LIMIT 1;
  IF head_seq IS NULL THEN
    SELECT seq, hash INTO head_seq, head_hash FROM audit_checkpoint;
  END IF;
  IF head_seq IS NULL THEN
    head_seq := 0;
    head_hash := repeat('0', 64);
  END IF;
  NEW.seq := head_seq + 1;
  NEW.prev := head_hash;
  NEW.hash := encode(sha256(convert_to(
    NEW.prev || E'\\n' || NEW.kind || E'\\n' || NEW.turn || E'\\n' || NEW.time || E'\\n' || NEW.body,
    'UTF8')), 'hex');
  RETURN NEW;
END $$;
CREATE TRIGGER audit_link BEFORE INSERT ON audit_chain
 FOR EACH ROW EXECUTE FUNCTION gatehouse_audit_link();
GRANT SELECT, INSERT ON audit_chain TO gatehouse_node, gatehouse_approver;
GRANT SELECT ON audit_checkpoint TO gatehouse_node, gatehouse_approver;
";

/// A fleet's audit chain.
pub struct PgAudit {
    pg: Arc<Pg>,
    group: Mutex<Group>,
    /// Wakes the appenders when a batch ends.
    ended: Condvar,
}

/// One record to append.
struct Record {
    kind: String,
    turn: String,
    time: String,
    body: String,
    /// The node and operation count a turn's record is indexed with.
    node: Option<String>,
    operations: Option<i64>,
}

/// One record, linked by the trigger (seq, prev and hash are its to set),
/// indexed by the other trigger when it names a node.
const INSERT_ONE: &str = "INSERT INTO audit_chain \
     (seq, kind, turn, time, body, prev, hash, node, operations) \
     VALUES (0, $1, $2, $3, $4, '', '', $5, $6) RETURNING seq";

/// A batch of records, inserted in the batch's order (the trigger links
/// each row under its lock as it is inserted, so the sequence numbers rise
/// in that order).
const INSERT_MANY: &str = "INSERT INTO audit_chain \
     (seq, kind, turn, time, body, prev, hash, node, operations) \
     SELECT 0, k, t, ti, b, '', '', nd, ops \
     FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[]) \
       WITH ORDINALITY AS x(k, t, ti, b, nd, ops, n) ORDER BY n \
     RETURNING seq";

/// The group commit's state: the records waiting for the next batch, and
/// the outcomes of the batches written, by ticket.
#[derive(Default)]
struct Group {
    next_ticket: u64,
    waiting: Vec<(u64, Record)>,
    outcomes: HashMap<u64, Result<i64, String>>,
    /// Whether an appender is writing a batch now.
    writing: bool,
    /// How many batches were written (for tests and the benchmark).
    batches: u64,
}

impl PgAudit {
    /// The chain of the database `pg` (nothing is connected yet).
    pub fn new(pg: Arc<Pg>) -> PgAudit {
        PgAudit {
            pg,
            group: Mutex::new(Group::default()),
            ended: Condvar::new(),
        }
    }

    /// How many batches (commits) this store wrote so far.
    pub fn batches(&self) -> u64 {
        crate::util::lock(&self.group).batches
    }

    /// Writes `batch` in one statement and one commit; each record's
    /// sequence number, in order.
    fn write(&self, batch: &[(u64, Record)]) -> Result<Vec<i64>, StateError> {
        if let [(_, r)] = batch {
            // Prepared once per connection: one round trip.
            return Ok(self.pg.with_prepared(
                "cannot append to the audit",
                INSERT_ONE,
                |c, insert| {
                    let row = c.query_one(
                        insert,
                        &[&r.kind, &r.turn, &r.time, &r.body, &r.node, &r.operations],
                    )?;
                    Ok(vec![row.get::<_, i64>(0)])
                },
            )?);
        }
        let text = |f: fn(&Record) -> &String| -> Vec<&str> {
            batch.iter().map(|(_, r)| f(r).as_str()).collect()
        };
        let (kinds, turns, times, bodies) = (
            text(|r| &r.kind),
            text(|r| &r.turn),
            text(|r| &r.time),
            text(|r| &r.body),
        );
        let nodes: Vec<Option<&str>> = batch.iter().map(|(_, r)| r.node.as_deref()).collect();
        let operations: Vec<Option<i64>> = batch.iter().map(|(_, r)| r.operations).collect();
        Ok(self
            .pg
            .with_prepared("cannot append to the audit", INSERT_MANY, |c, insert| {
                let rows = c.query(
                    insert,
                    &[&kinds, &turns, &times, &bodies, &nodes, &operations],
                )?;
                let mut seqs: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
                seqs.sort_unstable();
                Ok(seqs)
            })?)
    }

    /// Appends `record` in the next batch; its sequence number once that
    /// batch committed.
    fn append_record(&self, record: Record) -> Result<i64, StateError> {
        let mut group = crate::util::lock(&self.group);
        let ticket = group.next_ticket;
        group.next_ticket += 1;
        group.waiting.push((ticket, record));
        loop {
            if let Some(outcome) = group.outcomes.remove(&ticket) {
                return outcome.map_err(StateError::Batch);
            }
            if group.writing {
                // Another appender writes a batch: this record goes in
                // the next one (or is in this one, whose end wakes us).
                group = self
                    .ended
                    .wait(group)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            // Lead: write every record waiting now, this one among them.
            group.writing = true;
            let batch = std::mem::take(&mut group.waiting);
            drop(group);
            let written = self.write(&batch);
            group = crate::util::lock(&self.group);
            group.writing = false;
            group.batches += 1;
            let mine = match written {
                Ok(seqs) if seqs.len() == batch.len() => {
                    for ((t, _), seq) in batch.iter().zip(&seqs) {
                        group.outcomes.insert(*t, Ok(*seq));
                    }
                    Ok(())
                }
                Ok(seqs) => Err(StateError::Batch(format!(
                    "postgresql at `{}`: a batch of {} audit records returned {} sequence numbers",
                    self.pg.url(),
                    batch.len(),
                    seqs.len()
                ))),
                Err(e) => Err(e),
            };
            if let Err(e) = mine {
                let message = crate::util::chain(&e);
                for (t, _) in &batch {
                    if *t != ticket {
                        group.outcomes.insert(*t, Err(message.clone()));
                    }
                }
                group.outcomes.remove(&ticket);
                self.ended.notify_all();
                return Err(e);
            }
            self.ended.notify_all();
        }
    }
}

fn row(r: &postgres::Row) -> ChainRow {
    ChainRow {
        seq: r.get(0),
        kind: r.get(1),
        turn: r.get(2),
        time: r.get(3),
        body: r.get(4),
        prev: r.get(5),
        hash: r.get(6),
    }
}

const COLUMNS: &str = "seq, kind, turn, time, body, prev, hash";

impl AuditStore for PgAudit {
    fn append(&self, kind: &str, turn: &str, time: &str, body: &str) -> Result<i64, StateError> {
        self.append_record(Record {
            kind: kind.to_string(),
            turn: turn.to_string(),
            time: time.to_string(),
            body: body.to_string(),
            node: None,
            operations: None,
        })
    }

    fn append_indexed(
        &self,
        kind: &str,
        turn: &str,
        time: &str,
        body: &str,
        node: &str,
        operations: u64,
    ) -> Result<i64, StateError> {
        self.append_record(Record {
            kind: kind.to_string(),
            turn: turn.to_string(),
            time: time.to_string(),
            body: body.to_string(),
            node: Some(node.to_string()),
            operations: Some(i64::try_from(operations).unwrap_or(i64::MAX)),
        })
    }

    fn rows(&self) -> Result<(Option<Checkpoint>, Vec<ChainRow>), StateError> {
        Ok(self.pg.with("cannot read the audit", |c| {
            // One snapshot for both reads.
            let mut tx = c
                .build_transaction()
                .isolation_level(postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let checkpoint = tx
                .query_opt("SELECT seq, hash FROM audit_checkpoint", &[])?
                .map(|r| Checkpoint {
                    seq: r.get(0),
                    hash: r.get(1),
                });
            let rows = tx
                .query(
                    &format!("SELECT {COLUMNS} FROM audit_chain ORDER BY seq"),
                    &[],
                )?
                .iter()
                .map(row)
                .collect();
            tx.commit()?;
            Ok((checkpoint, rows))
        })?)
    }

    fn prune_before(&self, cutoff: &str, dry_run: bool) -> Result<u64, StateError> {
        let (checkpoint, rows) = self.rows()?;
        // The prefix before the first record at or after the cutoff.
        let end = rows
            .iter()
            .position(|r| r.time.as_str() >= cutoff)
            .unwrap_or(rows.len());
        if end == 0 {
            return Ok(0);
        }
        if let Err(broken) = super::chain::verify(checkpoint.as_ref(), &rows[..end]) {
            return Err(StateError::Broken {
                path: self.pg.url().into(),
                broken,
            });
        }
        let count = u64::try_from(end).unwrap_or(u64::MAX);
        if dry_run {
            return Ok(count);
        }
        let last = &rows[end - 1];
        self.pg.with("cannot prune the audit", |c| {
            let mut tx = c.transaction()?;
            // Appenders wait: the head does not move while the prefix goes.
            tx.execute("SELECT pg_advisory_xact_lock(7137002)", &[])?;
            tx.execute(
                "INSERT INTO audit_checkpoint (one, seq, hash) VALUES (true, $1, $2) \
                 ON CONFLICT (one) DO UPDATE SET seq = $1, hash = $2",
                &[&last.seq, &last.hash],
            )?;
            tx.execute("DELETE FROM audit_chain WHERE seq <= $1", &[&last.seq])?;
            tx.commit()
        })?;
        Ok(count)
    }
}
