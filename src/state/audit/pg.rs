//! The audit chain in a fleet's PostgreSQL: one chain for every node.
//!
//! Each node links its records itself, to the head it knows: it inserts
//! `seq = head + 1`, `prev` = the head's hash and `hash`
//! ([`super::chain::link_hash_2`], format 2 since schema version 6) in
//! one plain `INSERT`, one round trip and
//! one commit, with no trigger to run. The primary key on `seq` is what
//! serializes the fleet: when another node appended meanwhile, the insert
//! fails on the key and changes nothing, and the node reads the head again
//! and links anew. A node's role may only `INSERT` (and read): it can
//! neither edit, delete nor reorder a record, so its credentials cannot
//! rewrite the chain. A node that inserts a record with a wrong link or
//! hash cannot hide anything either: `history verify` names that record.
//! Pruning is the owner's.
//!
//! (Schema versions 1 to 3 linked each record in a `SECURITY DEFINER`
//! trigger instead, and indexed turns in another: ≈ 90 µs of the server's
//! time in every turn on these machines, more than a bare commit's whole
//! round trip. Version 4 drops both.)
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

use postgres::error::SqlState;

use super::chain::{link_hash_2, ChainRow, Checkpoint, FORMAT_1, GENESIS};
use super::{AuditStore, StateError};
use crate::state::pg::Pg;

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

/// What schema version 6 changes in the chain (security round 3, item
/// 6): each record's format (`NULL`: format 1, every record written
/// before). Records from version 6 on are of format 2, whose hash also
/// covers `node` and `operations` ([`super::chain::link_hash_2`]), the
/// two columns the history index reads; `history verify` checks each
/// record by its own format.
pub const SCHEMA_6: &str = "
ALTER TABLE audit_chain ADD COLUMN IF NOT EXISTS format smallint;
";

/// What schema version 4 changes in the chain: the nodes link their
/// records, so the linking trigger goes.
pub const SCHEMA_4: &str = "
DROP TRIGGER IF EXISTS audit_link ON audit_chain;
DROP FUNCTION IF EXISTS gatehouse_audit_link();
";

/// How many times an append links anew after another node took the
/// place it linked to, before it gives up.
const MAX_RELINKS: usize = 100;

/// A fleet's audit chain.
pub struct PgAudit {
    pg: Arc<Pg>,
    /// The head this node's last append left (`None`: read it first).
    head: Mutex<Option<(i64, String)>>,
    /// How many times an append found its place taken and linked anew.
    relinks: std::sync::atomic::AtomicU64,
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

/// One record, linked by this node (format 2).
const INSERT_ONE: &str = "INSERT INTO audit_chain \
     (seq, kind, turn, time, body, prev, hash, node, operations, format) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 2)";

/// A batch of records, linked by this node one after the other (format
/// 2).
const INSERT_MANY: &str = "INSERT INTO audit_chain \
     (seq, kind, turn, time, body, prev, hash, node, operations, format) \
     SELECT *, 2 FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], \
       $6::text[], $7::text[], $8::text[], $9::bigint[])";

/// The chain's head: its newest record, else the checkpoint a prune kept.
const HEAD: &str = "SELECT seq, hash FROM (\
     (SELECT seq, hash FROM audit_chain ORDER BY seq DESC LIMIT 1) \
     UNION ALL SELECT seq, hash FROM audit_checkpoint) h ORDER BY seq DESC LIMIT 1";

/// The group commit's state: the records waiting for the next batch, and
/// the outcomes of the batches written, by ticket.
#[derive(Default)]
struct Group {
    next_ticket: u64,
    waiting: Vec<(u64, Record)>,
    outcomes: HashMap<u64, Result<i64, String>>,
    /// Whether an appender is writing a batch now.
    writing: bool,
    /// How many appenders wait for a batch to end (none: a batch's end
    /// wakes no one, and makes no system call).
    waiters: usize,
    /// How many batches were written (for tests and the benchmark).
    batches: u64,
}

impl PgAudit {
    /// The chain of the database `pg` (nothing is connected yet).
    pub fn new(pg: Arc<Pg>) -> PgAudit {
        PgAudit {
            pg,
            head: Mutex::new(None),
            relinks: Default::default(),
            group: Mutex::new(Group::default()),
            ended: Condvar::new(),
        }
    }

    /// How many times an append of this store found the place it linked
    /// to taken by another node, and linked anew.
    pub fn relinks(&self) -> u64 {
        self.relinks.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many batches (commits) this store wrote so far.
    pub fn batches(&self) -> u64 {
        crate::util::lock(&self.group).batches
    }

    /// Writes `batch` in one statement and one commit, linked to the
    /// chain's head; each record's sequence number, in order.
    fn write(&self, batch: &[(u64, Record)]) -> Result<Vec<i64>, StateError> {
        let sql = if batch.len() == 1 {
            INSERT_ONE
        } else {
            INSERT_MANY
        };
        let known = crate::util::lock(&self.head).take();
        let written = self
            .pg
            .with_prepared("cannot append to the audit", sql, |c, insert| {
                let mut head = known;
                for _ in 0..MAX_RELINKS {
                    let (last, prev) = match head.take() {
                        Some(h) => h,
                        None => read_head(c)?,
                    };
                    let links = link(batch, last, prev);
                    match insert_linked(c, insert, batch, &links) {
                        Ok(()) => return Ok(Some(links)),
                        // Another node took the place: link anew.
                        Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                            self.relinks
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(e) => return Err(e),
                    }
                }
                Ok(None)
            })?;
        let Some(links) = written else {
            return Err(StateError::Batch(format!(
                "postgresql at `{}`: other nodes took the chain's head {MAX_RELINKS} times in a row; the audit records were not written",
                self.pg.url()
            )));
        };
        if let Some((seq, _, hash)) = links.last() {
            *crate::util::lock(&self.head) = Some((*seq, hash.clone()));
        }
        Ok(links.into_iter().map(|(seq, _, _)| seq).collect())
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
                group.waiters += 1;
                group = self
                    .ended
                    .wait(group)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                group.waiters -= 1;
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
                if group.waiters > 0 {
                    self.ended.notify_all();
                }
                return Err(e);
            }
            if group.waiters > 0 {
                self.ended.notify_all();
            }
        }
    }
}

/// The chain's head as the database has it now.
fn read_head(c: &mut postgres::Client) -> Result<(i64, String), postgres::Error> {
    Ok(c.query_opt(HEAD, &[])?
        .map_or((0, GENESIS.to_string()), |r| (r.get(0), r.get(1))))
}

/// The batch's links after the head `(last, prev)`: each record's
/// sequence number, the hash before it and its own.
fn link(batch: &[(u64, Record)], last: i64, prev: String) -> Vec<(i64, String, String)> {
    let mut links: Vec<(i64, String, String)> = Vec::with_capacity(batch.len());
    let (mut seq, mut prev) = (last, prev);
    for (_, r) in batch {
        seq = seq.saturating_add(1);
        let hash = link_hash_2(
            &prev,
            &r.kind,
            &r.turn,
            &r.time,
            r.node.as_deref(),
            r.operations,
            &r.body,
        );
        links.push((seq, std::mem::replace(&mut prev, hash.clone()), hash));
    }
    links
}

/// Inserts `batch` with its `links`, in one statement.
fn insert_linked(
    c: &mut postgres::Client,
    insert: &postgres::Statement,
    batch: &[(u64, Record)],
    links: &[(i64, String, String)],
) -> Result<(), postgres::Error> {
    if let ([(_, r)], [(seq, prev, hash)]) = (batch, links) {
        c.execute(
            insert,
            &[
                seq,
                &r.kind,
                &r.turn,
                &r.time,
                &r.body,
                prev,
                hash,
                &r.node,
                &r.operations,
            ],
        )?;
        return Ok(());
    }
    let text = |f: fn(&Record) -> &String| -> Vec<&str> {
        batch.iter().map(|(_, r)| f(r).as_str()).collect()
    };
    let seqs: Vec<i64> = links.iter().map(|l| l.0).collect();
    let prevs: Vec<&str> = links.iter().map(|l| l.1.as_str()).collect();
    let hashes: Vec<&str> = links.iter().map(|l| l.2.as_str()).collect();
    let nodes: Vec<Option<&str>> = batch.iter().map(|(_, r)| r.node.as_deref()).collect();
    let operations: Vec<Option<i64>> = batch.iter().map(|(_, r)| r.operations).collect();
    c.execute(
        insert,
        &[
            &seqs,
            &text(|r| &r.kind),
            &text(|r| &r.turn),
            &text(|r| &r.time),
            &text(|r| &r.body),
            &prevs,
            &hashes,
            &nodes,
            &operations,
        ],
    )?;
    Ok(())
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
        format: r.get::<_, Option<i16>>(7).map_or(FORMAT_1, i64::from),
        node: r.get(8),
        operations: r.get(9),
    }
}

const COLUMNS: &str = "seq, kind, turn, time, body, prev, hash, format, node, operations";

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
            // Two prunes run one after the other. Appenders need not wait:
            // they only add records after the head, which a prune of
            // records before a cutoff leaves where it is (and when it
            // removes them all, the checkpoint it keeps is the head).
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
