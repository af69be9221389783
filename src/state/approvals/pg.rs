//! A fleet's pending approvals, in the `pending` table of its
//! PostgreSQL database.
//!
//! The duties are split by role, so that a node's credentials cannot
//! approve for the node: a node queues entries and marks an answered one
//! consumed (`consumed_by`, `consumed_at`), and only an approver gives the
//! answer (`status`, `answered_at`, `answered_by`, `grants`). A row
//! trigger holds what no role may do: consume an unanswered entry,
//! un-consume one, or answer one twice. An entry shows as `consumed` once
//! it has a `consumed_by`, as in the SQLite file.

use std::sync::Arc;

use super::{
    answerable, new_entry, remembered, scope_of, ApprovalBackend, FileArg, QueueAnswer, QueueEntry,
    QueueError, QueuedItem, TurnKey, Verdict, MAX_PENDING_PER_ACTOR,
};
use crate::policy::snapshot::canonical_json;
use crate::policy::{Identity, UtcTime};
use crate::state::grants::GrantBackend;
use crate::state::pg::{Pg, SharedError};

/// The PostgreSQL schema of the pending approvals (part of version 1):
/// the SQLite file's `pending` table, with `seq` for the order entries
/// were queued in (SQLite's rowid) and `consumed_at`, and its `dropped`
/// counts as `pending_dropped`.
///
/// A node may queue an entry, but not with an answer (`status` takes its
/// default, `pending`), and may mark an answered entry consumed; it never
/// deletes: removing expired entries and an actor's surplus goes through
/// `gatehouse_pending_prune`, which deletes nothing else. Only an
/// approver (or the owner) answers.
pub const SCHEMA: &str = "
CREATE TABLE pending (
 seq bigserial NOT NULL UNIQUE,
 id text PRIMARY KEY,
 turn text NOT NULL,
 queued_at text NOT NULL,
 expires_at text NOT NULL,
 actor text NOT NULL,
 channel text,
 sender_id text,
 executor text NOT NULL,
 executor_sha256 text NOT NULL,
 items text NOT NULL,
 scope text NOT NULL,
 input_sha256 text NOT NULL,
 args_sha256 text NOT NULL,
 definition_hash text NOT NULL,
 policy_hash text NOT NULL,
 status text NOT NULL DEFAULT 'pending'
  CHECK (status IN ('pending', 'allowed', 'denied', 'remembered')),
 answered_at text,
 answered_by text,
 consumed_by text,
 consumed_at text,
 grants text,
 queued_uid bigint,
 input_preview text,
 input_bytes bigint,
 argv text,
 files text,
 files_sha256 text,
 commands text
);
CREATE INDEX pending_by_actor ON pending (actor, status);
CREATE TABLE pending_dropped (actor text PRIMARY KEY, count bigint NOT NULL);
CREATE FUNCTION gatehouse_pending_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.consumed_by IS NOT NULL AND NEW.consumed_by IS DISTINCT FROM OLD.consumed_by THEN
    RAISE EXCEPTION 'pending approval `%` is consumed already', OLD.id;
  END IF;
  IF NEW.consumed_by IS NOT NULL AND NEW.status NOT IN ('allowed', 'denied') THEN
    RAISE EXCEPTION 'pending approval `%` has no answer to consume', OLD.id;
  END IF;
  IF OLD.status <> 'pending' AND NEW.status IS DISTINCT FROM OLD.status THEN
    RAISE EXCEPTION 'pending approval `%` was answered already', OLD.id;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER pending_guard BEFORE UPDATE ON pending
 FOR EACH ROW EXECUTE FUNCTION gatehouse_pending_guard();
CREATE FUNCTION gatehouse_pending_prune(p_actor text, p_now text, p_keep integer) RETURNS void
 LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE n bigint;
BEGIN
  -- One pruner at a time: two deleting overlapping rows in another
  -- order would deadlock.
  PERFORM pg_advisory_xact_lock(7137002);
  DELETE FROM pending WHERE expires_at <= p_now;
  DELETE FROM pending WHERE seq IN (SELECT seq FROM pending
   WHERE actor = p_actor AND status = 'pending' AND consumed_by IS NULL
   ORDER BY queued_at DESC, seq DESC OFFSET greatest(p_keep, 0));
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n > 0 THEN
    INSERT INTO pending_dropped (actor, count) VALUES (p_actor, n)
     ON CONFLICT (actor) DO UPDATE SET count = pending_dropped.count + excluded.count;
  END IF;
END $$;
REVOKE ALL ON FUNCTION gatehouse_pending_prune(text, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gatehouse_pending_prune(text, text, integer) TO gatehouse_node;
GRANT SELECT ON pending, pending_dropped TO gatehouse_node, gatehouse_approver;
GRANT INSERT (id, turn, queued_at, expires_at, actor, channel, sender_id, executor,
 executor_sha256, items, scope, input_sha256, args_sha256, definition_hash, policy_hash,
 queued_uid, input_preview, input_bytes, argv, files, files_sha256, commands)
 ON pending TO gatehouse_node;
GRANT USAGE ON SEQUENCE pending_seq_seq TO gatehouse_node;
GRANT UPDATE (consumed_by, consumed_at) ON pending TO gatehouse_node;
GRANT UPDATE (status, answered_at, answered_by, grants) ON pending TO gatehouse_approver;
";

/// The columns [`PgApprovals::decode`] reads, in the order of the SQLite
/// queue's; `status` is `consumed` once the entry is.
const COLUMNS: &str = "id, turn, queued_at, expires_at, actor, channel, sender_id, executor, \
     executor_sha256, items, input_sha256, args_sha256, definition_hash, policy_hash, \
     CASE WHEN consumed_by IS NULL THEN status ELSE 'consumed' END, answered_at, answered_by, \
     consumed_by, grants, queued_uid, input_preview, input_bytes, argv, files, commands";

/// A fleet's pending approvals, in PostgreSQL.
pub struct PgApprovals {
    pg: Arc<Pg>,
    grants: Arc<dyn GrantBackend>,
}

impl PgApprovals {
    /// The queue of the database `pg`; "allow and remember" records its
    /// grants in `grants` (nothing is connected yet).
    pub fn new(pg: Arc<Pg>, grants: Arc<dyn GrantBackend>) -> PgApprovals {
        PgApprovals { pg, grants }
    }

    fn malformed(&self, id: &str, column: &str, value: &str) -> QueueError {
        QueueError::Shared(SharedError::Malformed {
            url: self.pg.url().to_string(),
            what: format!("pending approval `{id}` has a malformed `{column}`: `{value}`"),
        })
    }

    fn decode(&self, row: &postgres::Row) -> Result<QueueEntry, QueueError> {
        let id: String = row.get(0);
        let time = |i: usize, column: &str| -> Result<UtcTime, QueueError> {
            let value: String = row.get(i);
            UtcTime::parse(&value).map_err(|_| self.malformed(&id, column, &value))
        };
        let opt_time = |i: usize, column: &str| -> Result<Option<UtcTime>, QueueError> {
            let value: Option<String> = row.get(i);
            value
                .map(|v| UtcTime::parse(&v).map_err(|_| self.malformed(&id, column, &v)))
                .transpose()
        };
        let channel: Option<String> = row.get(5);
        let sender: Option<String> = row.get(6);
        let items: String = row.get(9);
        let items: Vec<QueuedItem> =
            serde_json::from_str(&items).map_err(|_| self.malformed(&id, "items", &items))?;
        let grants: Option<String> = row.get(18);
        let grants: Vec<i64> = match grants {
            Some(g) => serde_json::from_str(&g).map_err(|_| self.malformed(&id, "grants", &g))?,
            None => Vec::new(),
        };
        let uid: Option<i64> = row.get(19);
        let bytes: Option<i64> = row.get(21);
        Ok(QueueEntry {
            turn: row.get(1),
            queued_at: time(2, "queued_at")?,
            expires_at: time(3, "expires_at")?,
            actor: row.get(4),
            identity: match (channel, sender) {
                (Some(c), Some(s)) => Some(Identity::new(c, s)),
                _ => None,
            },
            executor: row.get(7),
            executor_sha256: row.get(8),
            items,
            input_sha256: row.get(10),
            args_sha256: row.get(11),
            definition_hash: row.get(12),
            policy_hash: row.get(13),
            status: row.get(14),
            answered_at: opt_time(15, "answered_at")?,
            answered_by: row.get(16),
            consumed_by: row.get(17),
            grants,
            queued_uid: uid.and_then(|u| u32::try_from(u).ok()),
            input_preview: row.get::<_, Option<String>>(20).unwrap_or_default(),
            input_bytes: bytes.and_then(|n| usize::try_from(n).ok()).unwrap_or(0),
            argv: self.json(row, 22, &id, "argv")?,
            files: self.json::<Vec<FileArg>>(row, 23, &id, "files")?,
            commands: self.json(row, 24, &id, "commands")?,
            id,
        })
    }

    /// A JSON column (none: empty).
    fn json<T: serde::de::DeserializeOwned + Default>(
        &self,
        row: &postgres::Row,
        i: usize,
        id: &str,
        column: &str,
    ) -> Result<T, QueueError> {
        match row.get::<_, Option<String>>(i) {
            None => Ok(T::default()),
            Some(t) => serde_json::from_str(&t).map_err(|_| self.malformed(id, column, &t)),
        }
    }
}

impl ApprovalBackend for PgApprovals {
    fn enqueue(
        &self,
        turn: &str,
        key: &TurnKey,
        items: &[QueuedItem],
        input: &str,
        now: UtcTime,
    ) -> Result<QueueEntry, QueueError> {
        let (entry, scope) = new_entry(turn, key, items, input, now);
        let (channel, sender) = match &entry.identity {
            Some(i) => (Some(&i.channel), Some(&i.sender_id)),
            None => (None, None),
        };
        let queued_at = entry.queued_at.to_string();
        let expires_at = entry.expires_at.to_string();
        let items = canonical_json(&entry.items);
        let uid = entry.queued_uid.map(i64::from);
        let bytes = i64::try_from(entry.input_bytes).unwrap_or(i64::MAX);
        let (argv, files) = (canonical_json(&entry.argv), canonical_json(&entry.files));
        let commands = canonical_json(&entry.commands);
        let files_sha256 = key.files_sha256();
        let keep = i32::try_from(MAX_PENDING_PER_ACTOR).unwrap_or(i32::MAX);
        self.pg.with("cannot queue the approval", |c| {
            let mut tx = c.transaction()?;
            tx.execute(
                "INSERT INTO pending (id, turn, queued_at, expires_at, actor, channel, sender_id, \
                 executor, executor_sha256, items, scope, input_sha256, args_sha256, \
                 definition_hash, policy_hash, queued_uid, input_preview, input_bytes, argv, \
                 files, files_sha256, commands) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
                 $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)",
                &[
                    &entry.id,
                    &entry.turn,
                    &queued_at,
                    &expires_at,
                    &entry.actor,
                    &channel,
                    &sender,
                    &entry.executor,
                    &entry.executor_sha256,
                    &items,
                    &scope,
                    &entry.input_sha256,
                    &entry.args_sha256,
                    &entry.definition_hash,
                    &entry.policy_hash,
                    &uid,
                    &entry.input_preview,
                    &bytes,
                    &argv,
                    &files,
                    &files_sha256,
                    &commands,
                ],
            )?;
            // In the same transaction: the entry and the pruning it
            // causes are seen together.
            tx.execute(
                "SELECT gatehouse_pending_prune($1, $2, $3)",
                &[&entry.actor, &queued_at, &keep],
            )?;
            tx.commit()
        })?;
        Ok(entry)
    }

    fn take(
        &self,
        turn: &str,
        key: &TurnKey,
        items: &[QueuedItem],
        now: UtcTime,
    ) -> Result<Option<Verdict>, QueueError> {
        self.take_where(turn, key, items, None, now)
    }

    fn take_line(
        &self,
        turn: &str,
        key: &TurnKey,
        items: &[QueuedItem],
        line: &[String],
        now: UtcTime,
    ) -> Result<Option<Verdict>, QueueError> {
        self.take_where(turn, key, items, Some(line), now)
    }

    fn dropped(&self) -> Result<Vec<(String, u64)>, QueueError> {
        let rows = self.pg.with("cannot read the pending approvals", |c| {
            c.query(
                "SELECT actor, count FROM pending_dropped ORDER BY actor",
                &[],
            )
        })?;
        Ok(rows
            .iter()
            .map(|r| {
                let n: i64 = r.get(1);
                (r.get(0), u64::try_from(n).unwrap_or(0))
            })
            .collect())
    }

    fn list(&self, all: bool, now: UtcTime) -> Result<Vec<QueueEntry>, QueueError> {
        let now = now.to_string();
        let rows = self.pg.with("cannot read the pending approvals", |c| {
            c.query(
                &format!(
                    "SELECT {COLUMNS} FROM pending WHERE expires_at > $1 \
                     ORDER BY queued_at DESC, seq DESC"
                ),
                &[&now],
            )
        })?;
        let entries = rows
            .iter()
            .map(|r| self.decode(r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(entries
            .into_iter()
            .filter(|e| all || e.status != "consumed")
            .collect())
    }

    fn get(&self, id: &str) -> Result<Option<QueueEntry>, QueueError> {
        let row = self.pg.with("cannot read the pending approvals", |c| {
            c.query_opt(
                &format!("SELECT {COLUMNS} FROM pending WHERE id = $1"),
                &[&id],
            )
        })?;
        row.map(|r| self.decode(&r)).transpose()
    }

    fn answer(
        &self,
        id: &str,
        answer: QueueAnswer,
        by: Option<&str>,
        now: UtcTime,
    ) -> Result<QueueEntry, QueueError> {
        let at = now.to_string();
        let answered = self.pg.with("cannot answer the pending approval", |c| {
            let mut tx = c.transaction()?;
            // Locked until the answer commits: a second answer waits, then
            // finds this one.
            let Some(row) = tx.query_opt(
                &format!("SELECT {COLUMNS} FROM pending WHERE id = $1 FOR UPDATE"),
                &[&id],
            )?
            else {
                return Ok(Err(QueueError::NoSuchEntry(id.into())));
            };
            let entry = match self
                .decode(&row)
                .and_then(|e| answerable(&e, id, now).map(|()| e))
            {
                Ok(e) => e,
                Err(e) => return Ok(Err(e)),
            };
            let (status, news) = match answer {
                QueueAnswer::Once => ("allowed", Vec::new()),
                QueueAnswer::Deny => ("denied", Vec::new()),
                QueueAnswer::Remember { expires_in_secs } => {
                    match remembered(&entry, expires_in_secs, by, now) {
                        Ok(news) => ("remembered", news),
                        Err(e) => return Ok(Err(e)),
                    }
                }
            };
            // The answer first: credentials that may not answer (a
            // node's) are refused here, before any grant is recorded.
            tx.execute(
                "UPDATE pending SET status = $1, answered_at = $2, answered_by = $3 WHERE id = $4",
                &[&status, &at, &by, &id],
            )?;
            let mut grants = Vec::new();
            for n in &news {
                match self.grants.record(n, now) {
                    Ok(g) => grants.push(g.id),
                    Err(e) => return Ok(Err(e.into())),
                }
            }
            if !grants.is_empty() {
                tx.execute(
                    "UPDATE pending SET grants = $1 WHERE id = $2",
                    &[&canonical_json(&grants), &id],
                )?;
            }
            let row = tx.query_one(
                &format!("SELECT {COLUMNS} FROM pending WHERE id = $1"),
                &[&id],
            )?;
            tx.commit()?;
            Ok(Ok(row))
        })??;
        self.decode(&answered)
    }
}

impl PgApprovals {
    /// The oldest answer matching `key` and `items` (and, with `line`,
    /// one whose command lines include it), consumed by `turn` for the
    /// whole fleet.
    fn take_where(
        &self,
        turn: &str,
        key: &TurnKey,
        items: &[QueuedItem],
        line: Option<&[String]>,
        now: UtcTime,
    ) -> Result<Option<Verdict>, QueueError> {
        let scope = scope_of(items);
        let (channel, sender) = match &key.identity {
            Some(i) => (Some(&i.channel), Some(&i.sender_id)),
            None => (None, None),
        };
        let now = now.to_string();
        let files_sha256 = key.files_sha256();
        // With a command line: an entry whose command lines include it.
        let line: Option<String> = line.map(|l| canonical_json(&[l]));
        // One statement: the oldest matching answer, locked (an entry
        // another node's turn is taking is skipped, not waited for), is
        // marked consumed by this turn; a row another turn consumed
        // meanwhile no longer matches `consumed_by IS NULL`. So each
        // answer is taken by exactly one turn of the fleet.
        let row = self.pg.with("cannot take the pending approval", |c| {
            c.query_opt(
                "UPDATE pending SET consumed_by = $1, consumed_at = $2 WHERE consumed_by IS NULL \
                 AND id = (SELECT id FROM pending WHERE status IN ('allowed', 'denied') \
                 AND consumed_by IS NULL AND expires_at > $2 AND actor = $3 \
                 AND channel IS NOT DISTINCT FROM $4 AND sender_id IS NOT DISTINCT FROM $5 \
                 AND executor = $6 AND executor_sha256 = $7 AND scope = $8 \
                 AND input_sha256 = $9 AND args_sha256 = $10 AND definition_hash = $11 \
                 AND policy_hash = $12 AND files_sha256 IS NOT DISTINCT FROM $13 \
                 AND ($14::text IS NULL OR commands::jsonb @> $14::jsonb) \
                 ORDER BY queued_at, seq LIMIT 1 FOR UPDATE SKIP LOCKED) \
                 RETURNING id, status, commands",
                &[
                    &turn,
                    &now,
                    &key.actor,
                    &channel,
                    &sender,
                    &key.executor,
                    &key.executor_sha256,
                    &scope,
                    &key.input_sha256,
                    &key.args_sha256,
                    &key.definition_hash,
                    &key.policy_hash,
                    &files_sha256,
                    &line,
                ],
            )
        })?;
        let Some(row) = row else { return Ok(None) };
        let id: String = row.get(0);
        let status: String = row.get(1);
        Ok(Some(if status == "allowed" {
            let commands = self.json(&row, 2, &id, "commands")?;
            Verdict::Allowed { id, commands }
        } else {
            Verdict::Denied(id)
        }))
    }
}
