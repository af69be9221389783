//! A fleet's grants in PostgreSQL: [`PgGrants`] and its change
//! [`Listener`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;

use super::{GrantBackend, GrantError, NewGrant, COLUMNS};
use crate::policy::{Capability, Grant, Identity, UtcTime};
use crate::state::pg::{Pg, SharedError};

/// How often the listener asks for the grants' version when no
/// notification came.
pub const POLL: Duration = Duration::from_millis(50);

/// How long a listener's last answer counts: past it a turn reads the
/// version itself.
pub const FRESH: Duration = Duration::from_millis(60);

/// The PostgreSQL schema of the grants (part of version 1): the table of
/// the SQLite store, one unrevoked grant per tuple, and the statement
/// trigger that bumps `grants_version` and notifies `gatehouse_grants`
/// in the transaction of every change (so the notification is sent at
/// its commit, never before). Nodes may record grants and lengthen their
/// expiry; only an approver (or the owner) may revoke.
pub const SCHEMA: &str = "
CREATE TABLE grants (
 id bigserial PRIMARY KEY,
 channel text NOT NULL,
 sender_id text NOT NULL,
 capability text NOT NULL,
 target text NOT NULL,
 granted_at text NOT NULL,
 expires_at text,
 granted_by text,
 revoked_at text
);
CREATE UNIQUE INDEX grants_one_per_tuple
 ON grants (channel, sender_id, capability, target) WHERE revoked_at IS NULL;
CREATE FUNCTION gatehouse_grants_changed() RETURNS trigger
 LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE v bigint;
BEGIN
  UPDATE gatehouse_meta SET value = value + 1 WHERE key = 'grants_version' RETURNING value INTO v;
  PERFORM pg_notify('gatehouse_grants', v::text);
  RETURN NULL;
END $$;
CREATE TRIGGER grants_changed AFTER INSERT OR UPDATE OR DELETE ON grants
 FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_grants_changed();
GRANT SELECT ON gatehouse_meta TO gatehouse_node, gatehouse_approver;
GRANT SELECT, INSERT ON grants TO gatehouse_node, gatehouse_approver;
GRANT UPDATE (expires_at) ON grants TO gatehouse_node;
GRANT UPDATE ON grants TO gatehouse_approver;
GRANT USAGE ON SEQUENCE grants_id_seq TO gatehouse_node, gatehouse_approver;
";

/// What schema version 6 changes in the grants (security round 3, item
/// 5): a node's role may no longer write `grants`. A grant recorded from
/// a node is the grant of an answer: `gatehouse_remember` (a `SECURITY
/// DEFINER` function, the one way a node's role records a grant) writes
/// the answer to `node_answers` (its turn, the item, the lifetime, the
/// database role that gave it) and the grant with the answer's item and
/// lifetime, timed by the database's clock, tied to it by `answer`. The
/// owner may refuse every answer given to a node (`node_answers` = 0 in
/// `gatehouse_meta`): then only an approver's answer (`gatehouse
/// approvals allow --remember`, which the approver's role records itself)
/// makes a grant.
pub const SCHEMA_6: &str = r#"
CREATE TABLE IF NOT EXISTS node_answers (
 id bigserial PRIMARY KEY,
 role name NOT NULL DEFAULT session_user,
 turn text NOT NULL,
 channel text NOT NULL,
 sender_id text NOT NULL,
 capability text NOT NULL,
 target text NOT NULL,
 expires_in_secs bigint CHECK (expires_in_secs > 0),
 answered_at text NOT NULL,
 granted_by text,
 grant_id bigint
);
ALTER TABLE grants ADD COLUMN IF NOT EXISTS answer bigint REFERENCES node_answers (id);
INSERT INTO gatehouse_meta (key, value) VALUES ('node_answers', 1) ON CONFLICT (key) DO NOTHING;
REVOKE UPDATE (expires_at) ON grants FROM gatehouse_node;
REVOKE INSERT, UPDATE ON grants FROM gatehouse_node;
REVOKE USAGE ON SEQUENCE grants_id_seq FROM gatehouse_node;
GRANT SELECT ON node_answers TO gatehouse_node, gatehouse_approver;
CREATE OR REPLACE FUNCTION gatehouse_remember(p_turn text, p_channel text, p_sender text,
 p_capability text, p_target text, p_expires_in_secs bigint, p_granted_by text)
 RETURNS SETOF grants LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  v_now timestamptz := now();
  v_at text := to_char(v_now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"');
  v_until text;
  v_answer bigint;
  v_grant grants;
BEGIN
  IF coalesce((SELECT value FROM gatehouse_meta WHERE key = 'node_answers'), 0) <> 1 THEN
    RAISE EXCEPTION 'this fleet takes no remembered answer given to a node: answer through `gatehouse approvals allow --remember`'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF p_expires_in_secs IS NOT NULL THEN
    v_until := to_char((v_now + make_interval(secs => p_expires_in_secs)) AT TIME ZONE 'UTC',
      'YYYY-MM-DD"T"HH24:MI:SS"Z"');
  END IF;
  INSERT INTO node_answers (turn, channel, sender_id, capability, target, expires_in_secs,
    answered_at, granted_by)
  VALUES (p_turn, p_channel, p_sender, p_capability, p_target, p_expires_in_secs, v_at,
    p_granted_by)
  RETURNING id INTO v_answer;
  INSERT INTO grants (channel, sender_id, capability, target, granted_at, expires_at, granted_by,
    answer)
  VALUES (p_channel, p_sender, p_capability, p_target, v_at, v_until, p_granted_by, v_answer)
  ON CONFLICT (channel, sender_id, capability, target) WHERE revoked_at IS NULL DO NOTHING
  RETURNING * INTO v_grant;
  IF v_grant.id IS NULL THEN
    -- The tuple's one unrevoked grant: the later expiry wins, none at
    -- all (forever) beats any.
    SELECT * INTO v_grant FROM grants WHERE revoked_at IS NULL AND channel = p_channel
      AND sender_id = p_sender AND capability = p_capability AND target = p_target FOR UPDATE;
    IF v_grant.expires_at IS NOT NULL AND (v_until IS NULL OR v_until > v_grant.expires_at) THEN
      UPDATE grants SET expires_at = v_until, answer = v_answer WHERE id = v_grant.id
        RETURNING * INTO v_grant;
    END IF;
  END IF;
  UPDATE node_answers SET grant_id = v_grant.id WHERE id = v_answer;
  RETURN NEXT v_grant;
END $$;
REVOKE ALL ON FUNCTION gatehouse_remember(text, text, text, text, text, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gatehouse_remember(text, text, text, text, text, bigint, text)
 TO gatehouse_node, gatehouse_approver;
"#;

/// A fleet's grants, in PostgreSQL.
pub struct PgGrants {
    pg: Arc<Pg>,
    listener: Mutex<Option<Arc<Listener>>>,
    /// [`Pg::grant_writes`] when this store last read the version.
    seen_writes: Mutex<u64>,
}

impl PgGrants {
    /// The grants of the database `pg` (nothing is connected yet).
    pub fn new(pg: Arc<Pg>) -> PgGrants {
        PgGrants {
            pg,
            listener: Mutex::new(None),
            seen_writes: Mutex::new(0),
        }
    }

    fn decode(&self, row: &postgres::Row) -> Result<Grant, GrantError> {
        let id: i64 = row.get(0);
        let time = |column: &str, value: &str| {
            UtcTime::parse(value).map_err(|_| {
                GrantError::from(SharedError::Malformed {
                    url: self.pg.url().to_string(),
                    what: format!("grant `{id}` has a malformed `{column}`: `{value}`"),
                })
            })
        };
        let opt = |column, value: Option<String>| value.map(|v| time(column, &v)).transpose();
        Ok(Grant {
            id,
            channel: row.get(1),
            sender_id: row.get(2),
            capability: row.get(3),
            target: row.get(4),
            granted_at: time("granted_at", &row.get::<_, String>(5))?,
            expires_at: opt("expires_at", row.get(6))?,
            granted_by: row.get(7),
            revoked_at: opt("revoked_at", row.get(8))?,
        })
    }

    fn rows(
        &self,
        action: &'static str,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<Grant>, GrantError> {
        let rows = self.pg.with(action, |c| c.query(sql, params))?;
        rows.iter().map(|r| self.decode(r)).collect()
    }

    fn listener(&self) -> Arc<Listener> {
        let mut slot = crate::util::lock(&self.listener);
        match &*slot {
            Some(l) => l.clone(),
            None => {
                let l = Listener::start(self.pg.clone());
                *slot = Some(l.clone());
                l
            }
        }
    }
}

impl GrantBackend for PgGrants {
    fn record(&self, new: &NewGrant, now: UtcTime) -> Result<Grant, GrantError> {
        self.pg.note_grant_write();
        let (capability, pattern) = crate::state::grants::validated(new, now)?;
        let (channel, sender) = (&new.identity.channel, &new.identity.sender_id);
        let (cap, target) = (capability.as_str(), pattern.as_str());
        let granted_at = now.to_string();
        let expires_at = new.expires_at.map(|t| t.to_string());
        let row = self.pg.with("cannot record the grant", |c| {
            let mut tx = c.transaction()?;
            // The tuple's one unrevoked grant, locked: a second recorder
            // waits, then finds it.
            let insert = format!(
                "INSERT INTO grants (channel, sender_id, capability, target, granted_at, expires_at, granted_by) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) \
                 ON CONFLICT (channel, sender_id, capability, target) WHERE revoked_at IS NULL DO NOTHING \
                 RETURNING {COLUMNS}"
            );
            if let Some(row) = tx.query_opt(
                &insert,
                &[channel, sender, &cap, &target, &granted_at, &expires_at, &new.granted_by],
            )? {
                tx.commit()?;
                return Ok(row);
            }
            let old = tx.query_one(
                &format!(
                    "SELECT {COLUMNS} FROM grants WHERE revoked_at IS NULL AND channel = $1 \
                     AND sender_id = $2 AND capability = $3 AND target = $4 FOR UPDATE"
                ),
                &[channel, sender, &cap, &target],
            )?;
            // The later expiry wins; none at all (forever) beats any.
            let old_expiry: Option<String> = old.get(6);
            let later = match (&old_expiry, &expires_at) {
                (None, _) | (_, None) => None,
                (Some(a), Some(b)) => Some(a.max(b).clone()),
            };
            let row = if later != old_expiry {
                tx.query_one(
                    &format!("UPDATE grants SET expires_at = $1 WHERE id = $2 RETURNING {COLUMNS}"),
                    &[&later, &old.get::<_, i64>(0)],
                )?
            } else {
                old
            };
            tx.commit()?;
            Ok(row)
        })?;
        self.decode(&row)
    }

    fn remember(
        &self,
        new: &NewGrant,
        turn: &str,
        expires_in_secs: Option<u64>,
        now: UtcTime,
    ) -> Result<Grant, GrantError> {
        self.pg.note_grant_write();
        let (capability, pattern) = crate::state::grants::validated(new, now)?;
        let (cap, target) = (capability.as_str(), pattern.as_str());
        let secs = expires_in_secs.map(|s| i64::try_from(s).unwrap_or(i64::MAX));
        let row = self.pg.with("cannot record the remembered answer", |c| {
            c.query_one(
                &format!("SELECT {COLUMNS} FROM gatehouse_remember($1, $2, $3, $4, $5, $6, $7)"),
                &[
                    &turn,
                    &new.identity.channel,
                    &new.identity.sender_id,
                    &cap,
                    &target,
                    &secs,
                    &new.granted_by,
                ],
            )
        })?;
        self.decode(&row)
    }

    fn revoke(&self, id: i64, now: UtcTime) -> Result<Option<Grant>, GrantError> {
        self.pg.note_grant_write();
        let now = now.to_string();
        let (changed, row) = self.pg.with("cannot revoke the grant", |c| {
            let changed = c.execute(
                "UPDATE grants SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL",
                &[&now, &id],
            )?;
            let row = c.query_opt(
                &format!("SELECT {COLUMNS} FROM grants WHERE id = $1"),
                &[&id],
            )?;
            Ok((changed, row))
        })?;
        match row {
            None => Err(GrantError::NoSuchGrant(id)),
            Some(_) if changed == 0 => Err(GrantError::AlreadyRevoked(id)),
            Some(r) => self.decode(&r).map(Some),
        }
    }

    fn revoke_tuple(
        &self,
        identity: &Identity,
        capability: &str,
        target: &str,
        now: UtcTime,
    ) -> Result<Option<Grant>, GrantError> {
        self.pg.note_grant_write();
        let now = now.to_string();
        let rows = self.rows(
            "cannot revoke the grant",
            &format!(
                "UPDATE grants SET revoked_at = $1 WHERE revoked_at IS NULL AND channel = $2 \
                 AND sender_id = $3 AND capability = $4 AND target = $5 RETURNING {COLUMNS}"
            ),
            &[
                &now,
                &identity.channel,
                &identity.sender_id,
                &capability,
                &target,
            ],
        )?;
        Ok(rows.into_iter().next())
    }

    fn list(&self, all: bool, now: UtcTime) -> Result<Vec<Grant>, GrantError> {
        let sql = if all {
            format!("SELECT {COLUMNS} FROM grants ORDER BY id")
        } else {
            format!("SELECT {COLUMNS} FROM grants WHERE revoked_at IS NULL ORDER BY id")
        };
        let grants = self.rows("cannot read the grants", &sql, &[])?;
        Ok(if all {
            grants
        } else {
            grants.into_iter().filter(|g| g.is_active(now)).collect()
        })
    }

    fn unrevoked_for(
        &self,
        identity: &Identity,
        capability: Capability,
    ) -> Result<Vec<Grant>, GrantError> {
        self.rows(
            "cannot read the grants",
            &format!(
                "SELECT {COLUMNS} FROM grants WHERE channel = $1 AND sender_id = $2 \
                 AND capability = $3 AND revoked_at IS NULL ORDER BY id"
            ),
            &[&identity.channel, &identity.sender_id, &capability.as_str()],
        )
    }

    fn generation(&self) -> Option<Result<u64, GrantError>> {
        let listener = self.listener();
        // A grant written through this process since the last turn: read
        // the version now (a process reads its own writes at once; other
        // nodes' within the stated bound).
        let writes = self.pg.grant_writes();
        let mut seen = crate::util::lock(&self.seen_writes);
        if *seen == writes {
            if let Some(v) = listener.fresh() {
                return Some(Ok(v));
            }
        }
        *seen = writes;
        drop(seen);
        // The listener has not answered lately (starting, or its
        // connection broke): this turn asks itself.
        Some(
            read_version(&self.pg)
                .inspect(|v| listener.saw(*v))
                .map_err(GrantError::from),
        )
    }
}

fn read_version(pg: &Pg) -> Result<u64, SharedError> {
    pg.with("cannot read the grants' version", |c| {
        let v: i64 = c
            .query_one(
                "SELECT value FROM gatehouse_meta WHERE key = 'grants_version'",
                &[],
            )?
            .get(0);
        Ok(u64::try_from(v).unwrap_or(0))
    })
}

/// A host's listener on `gatehouse_grants`: the latest version seen, and
/// when the database last answered it. Its thread ends within [`POLL`]
/// once the last [`PgGrants`] holding it is gone.
pub struct Listener {
    version: AtomicU64,
    /// Nanoseconds after `base` of the last answer; 0: none yet.
    answered: AtomicU64,
    base: Instant,
    stopped: AtomicBool,
}

impl Listener {
    fn start(pg: Arc<Pg>) -> Arc<Listener> {
        let listener = Arc::new(Listener {
            version: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            base: Instant::now(),
            stopped: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&listener);
        let spawned = std::thread::Builder::new()
            .name("gatehouse-grants".into())
            .spawn(move || listen(&pg, &weak));
        if spawned.is_err() {
            // No thread: every turn reads the version itself.
            listener.stopped.store(true, Ordering::Relaxed);
        }
        listener
    }

    /// Records an answer: version `v`, now.
    fn saw(&self, v: u64) {
        self.version.fetch_max(v, Ordering::AcqRel);
        let at = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.answered.store(at.max(1), Ordering::Release);
    }

    /// Forgets the last answer: the connection broke, so until it
    /// answers again each turn asks the database itself.
    fn lost(&self) {
        self.answered.store(0, Ordering::Release);
    }

    /// The version, if the database answered within [`FRESH`].
    fn fresh(&self) -> Option<u64> {
        let at = self.answered.load(Ordering::Acquire);
        if at == 0 || self.stopped.load(Ordering::Relaxed) {
            return None;
        }
        let now = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let fresh = u64::try_from(FRESH.as_nanos()).unwrap_or(u64::MAX);
        (now.saturating_sub(at) < fresh).then(|| self.version.load(Ordering::Acquire))
    }
}

/// The listener's loop: connect, `LISTEN`, then take notifications and
/// poll the version every [`POLL`]; on a broken connection, start over
/// after [`POLL`]. Ends when nobody holds the listener any more.
fn listen(pg: &Pg, listener: &Weak<Listener>) {
    while listener.strong_count() > 0 {
        let Ok(mut client) = pg.connect() else {
            std::thread::sleep(POLL);
            continue;
        };
        if client.batch_execute("LISTEN gatehouse_grants").is_err() {
            std::thread::sleep(POLL);
            continue;
        }
        loop {
            let Some(l) = listener.upgrade() else { return };
            let polled = client
                .query_one(
                    "SELECT value FROM gatehouse_meta WHERE key = 'grants_version'",
                    &[],
                )
                .map(|r| u64::try_from(r.get::<_, i64>(0)).unwrap_or(0));
            match polled {
                Ok(v) => l.saw(v),
                Err(_) => {
                    l.lost();
                    break;
                }
            }
            drop(l);
            let mut notifications = client.notifications();
            let mut waiting = notifications.timeout_iter(POLL);
            let broken = loop {
                match waiting.next() {
                    Ok(Some(n)) => {
                        let Some(l) = listener.upgrade() else { return };
                        l.saw(n.payload().parse().unwrap_or(0));
                    }
                    // Nothing for POLL: poll the version.
                    Ok(None) => break false,
                    Err(_) => break true,
                }
            };
            if broken {
                if let Some(l) = listener.upgrade() {
                    l.lost();
                }
                break;
            }
        }
    }
}
