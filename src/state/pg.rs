//! The PostgreSQL backend's connection: one small pool per database URL
//! and process, the schema (`gatehouse migrate`), its version check, and
//! the roles a fleet separates its duties with.
//!
//! The client is the `postgres` crate (sync, over `tokio-postgres`): every
//! store here is called from a turn's own thread, as the SQLite stores are.
//! A URL is kept only in its redacted form for messages ([`redact`]): a
//! password in it never reaches a log line or an error.

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use postgres::{Client, Config, NoTls};

/// The version of the PostgreSQL schema this build writes and reads
/// (`gatehouse_meta.schema_version`). A newer one is refused.
pub const SCHEMA_VERSION: i64 = 6;

/// How long connecting may take before the state counts as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Idle connections a pool keeps; more are opened when needed and closed
/// when returned past this many.
const IDLE: usize = 16;

/// The role a node's URL should log in as: it reads the policy state,
/// records turns, records a grant only as the grant of an answer
/// (`gatehouse_remember`), changes only what a node must of a task, and
/// may only INSERT into the audit.
pub const NODE_ROLE: &str = "gatehouse_node";
/// The role of the people who answer approvals: the only one that may
/// change a pending approval's answer.
pub const APPROVER_ROLE: &str = "gatehouse_approver";

/// Why the shared state could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    /// The URL does not parse.
    #[error("invalid database url `{url}`: {source}")]
    BadUrl {
        /// The URL, redacted.
        url: String,
        /// The parser's refusal.
        #[source]
        source: postgres::Error,
    },
    /// No connection could be made, or a query failed.
    #[error("postgresql at `{url}`: {action}")]
    Postgres {
        /// The URL, redacted.
        url: String,
        /// What was being done.
        action: &'static str,
        /// The client's error.
        #[source]
        source: postgres::Error,
    },
    /// The database has no gatehouse schema yet.
    #[error("postgresql at `{url}` has no gatehouse schema: run `gatehouse migrate` with an owner's url first")]
    NotMigrated {
        /// The URL, redacted.
        url: String,
    },
    /// A newer build migrated the database.
    #[error("postgresql at `{url}`: its schema version is {version}; this gatehouse knows versions up to {known}")]
    Newer {
        /// The URL, redacted.
        url: String,
        /// The database's version.
        version: i64,
        /// The newest this gatehouse knows.
        known: i64,
    },
    /// An older build migrated the database, and `migrate` has not
    /// brought it up since.
    #[error("postgresql at `{url}`: its schema version is {version}; this gatehouse needs version {known}: run `gatehouse migrate` with an owner's url")]
    Older {
        /// The URL, redacted.
        url: String,
        /// The database's version.
        version: i64,
        /// The version this gatehouse needs.
        known: i64,
    },
    /// A row holds a value this build cannot read.
    #[error("postgresql at `{url}`: {what}")]
    Malformed {
        /// The URL, redacted.
        url: String,
        /// What is wrong, naming the row.
        what: String,
    },
}

impl From<SharedError> for crate::state::grants::GrantError {
    fn from(e: SharedError) -> Self {
        crate::state::grants::GrantError::Shared(Box::new(e))
    }
}

impl SharedError {
    /// Whether the database could not be reached (or answered with a
    /// connection-level failure): the turn is refused with
    /// `STATE_UNAVAILABLE` rather than failing as a bug.
    pub fn is_unreachable(&self) -> bool {
        match self {
            SharedError::Postgres { source, .. } => source.is_closed() || source.code().is_none(),
            _ => false,
        }
    }
}

pub use crate::util::redact_url as redact;

/// A pooled connection and the statements prepared on it, by their
/// (static) text.
struct Pooled {
    client: Client,
    prepared: Vec<(&'static str, postgres::Statement)>,
}

/// One database: its parsed configuration and a pool of idle connections.
pub struct Pg {
    url: String,
    config: Config,
    idle: Mutex<Vec<Pooled>>,
    /// Grant writes begun through this pool (this process, this URL):
    /// a host reads the grants' version again after one.
    grant_writes: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Pg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pg").field("url", &self.url).finish()
    }
}

impl Pg {
    /// The pool of `url`, shared by every store of this process that
    /// names the same URL (nothing is connected yet).
    pub fn shared(url: &str) -> Result<Arc<Pg>, SharedError> {
        /// Each URL's pool, while some store holds it.
        type Pools = Mutex<Vec<(String, Weak<Pg>)>>;
        static POOLS: OnceLock<Pools> = OnceLock::new();
        let pools = POOLS.get_or_init(Default::default);
        let mut pools = crate::util::lock(pools);
        pools.retain(|(_, p)| p.strong_count() > 0);
        if let Some(pg) = pools
            .iter()
            .find(|(u, _)| u == url)
            .and_then(|(_, p)| p.upgrade())
        {
            return Ok(pg);
        }
        let pg = Arc::new(Pg::new(url)?);
        pools.push((url.to_string(), Arc::downgrade(&pg)));
        Ok(pg)
    }

    /// A pool of its own for `url` (the benchmark's and the listener's).
    pub fn new(url: &str) -> Result<Pg, SharedError> {
        let mut config: Config = url.parse().map_err(|source| SharedError::BadUrl {
            url: redact(url),
            source,
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.keepalives(true);
        config.application_name("gatehouse");
        Ok(Pg {
            url: redact(url),
            config,
            idle: Mutex::new(Vec::new()),
            grant_writes: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Notes a grant write about to be made through this pool.
    pub fn note_grant_write(&self) {
        self.grant_writes
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// How many grant writes were begun through this pool.
    pub fn grant_writes(&self) -> u64 {
        self.grant_writes.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The URL, redacted.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// An error of this database.
    pub fn error(&self, action: &'static str, source: postgres::Error) -> SharedError {
        SharedError::Postgres {
            url: self.url.clone(),
            action,
            source,
        }
    }

    /// A new connection (not from the pool).
    pub fn connect(&self) -> Result<Client, SharedError> {
        self.config
            .connect(NoTls)
            .map_err(|e| self.error("cannot connect", e))
    }

    /// Runs `f` on a pooled connection. A connection that broke is not
    /// returned to the pool.
    pub fn with<T>(
        &self,
        action: &'static str,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, SharedError> {
        self.with_pooled(action, |p| f(&mut p.client))
    }

    /// Runs `f` on a pooled connection with `sql` prepared on it: once
    /// per connection, then kept (a statement run every turn is parsed
    /// and planned once, and then costs one round trip).
    pub fn with_prepared<T>(
        &self,
        action: &'static str,
        sql: &'static str,
        f: impl FnOnce(&mut Client, &postgres::Statement) -> Result<T, postgres::Error>,
    ) -> Result<T, SharedError> {
        self.with_pooled(action, |p| {
            let found = p.prepared.iter().find(|(q, _)| *q == sql);
            let statement = match found {
                Some((_, s)) => s.clone(),
                None => {
                    let s = p.client.prepare(sql)?;
                    p.prepared.push((sql, s.clone()));
                    s
                }
            };
            f(&mut p.client, &statement)
        })
    }

    fn with_pooled<T>(
        &self,
        action: &'static str,
        f: impl FnOnce(&mut Pooled) -> Result<T, postgres::Error>,
    ) -> Result<T, SharedError> {
        let pooled = crate::util::lock(&self.idle).pop();
        let mut pooled = match pooled {
            Some(p) if !p.client.is_closed() => p,
            _ => Pooled {
                client: self.connect()?,
                prepared: Vec::new(),
            },
        };
        let result = f(&mut pooled);
        if !pooled.client.is_closed() {
            let mut idle = crate::util::lock(&self.idle);
            if idle.len() < IDLE {
                idle.push(pooled);
            }
        }
        result.map_err(|e| self.error(action, e))
    }

    /// The schema version recorded in the database: `None` before the
    /// first `gatehouse migrate`.
    pub fn version(&self) -> Result<Option<i64>, SharedError> {
        self.with("cannot read the schema version", |c| {
            let table: Option<String> = c
                .query_one("SELECT to_regclass('gatehouse_meta')::text", &[])?
                .get(0);
            if table.is_none() {
                return Ok(None);
            }
            Ok(c.query_opt(
                "SELECT value FROM gatehouse_meta WHERE key = 'schema_version'",
                &[],
            )?
            .map(|r| r.get::<_, i64>(0)))
        })
    }

    /// Refuses a database this build cannot work with: unreachable, not
    /// migrated, or of a newer schema.
    pub fn check(&self) -> Result<(), SharedError> {
        match self.version()? {
            None => Err(SharedError::NotMigrated {
                url: self.url.clone(),
            }),
            Some(v) if v > SCHEMA_VERSION => Err(SharedError::Newer {
                url: self.url.clone(),
                version: v,
                known: SCHEMA_VERSION,
            }),
            // An older schema lacks what this build uses: `migrate`
            // brings it up first.
            Some(v) if v < SCHEMA_VERSION => Err(SharedError::Older {
                url: self.url.clone(),
                version: v,
                known: SCHEMA_VERSION,
            }),
            Some(_) => Ok(()),
        }
    }

    /// Creates or upgrades the schema to [`SCHEMA_VERSION`], and the two
    /// roles, in one transaction (under an advisory lock, so two
    /// `migrate`s at once are one after the other). Returns the versions
    /// before and after.
    ///
    /// # Security
    /// Needs an owner's URL (one that may create tables and roles). The
    /// roles are created without a password and without privileges beyond
    /// their tables; giving them a way to log in is the operator's step.
    pub fn migrate(&self) -> Result<(i64, i64), SharedError> {
        self.migrate_to(SCHEMA_VERSION)
    }

    /// Creates or upgrades the schema up to version `target` (at most
    /// [`SCHEMA_VERSION`]; a lower one is for tests of an upgrade).
    /// Returns the versions before and after.
    ///
    /// # Security
    /// As [`Pg::migrate`]: needs an owner's URL.
    pub fn migrate_to(&self, target: i64) -> Result<(i64, i64), SharedError> {
        let target = target.min(SCHEMA_VERSION);
        let before = self.version()?.unwrap_or(0);
        if before > SCHEMA_VERSION {
            return Err(SharedError::Newer {
                url: self.url.clone(),
                version: before,
                known: SCHEMA_VERSION,
            });
        }
        ensure_roles(self)?;
        let after = self.with("cannot migrate", |c| {
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock(7137001)", &[])?;
            tx.batch_execute(META)?;
            // Read again under the lock: another `migrate` may have run.
            let mut now: i64 = tx
                .query_opt(
                    "SELECT value FROM gatehouse_meta WHERE key = 'schema_version'",
                    &[],
                )?
                .map_or(0, |r| r.get(0));
            for (version, parts) in super::MIGRATIONS {
                if *version <= now || *version > target {
                    continue;
                }
                for part in *parts {
                    tx.batch_execute(part)?;
                }
                now = *version;
            }
            tx.execute(
                "INSERT INTO gatehouse_meta (key, value) VALUES ('schema_version', $1) \
                 ON CONFLICT (key) DO UPDATE SET value = $1",
                &[&now],
            )?;
            tx.commit()?;
            Ok(now)
        })?;
        Ok((before, after))
    }
}

/// The table every version has: the schema version and the counters the
/// stores bump when they change (`grants_version`).
const META: &str = "
CREATE TABLE IF NOT EXISTS gatehouse_meta (key text PRIMARY KEY, value bigint NOT NULL);
INSERT INTO gatehouse_meta (key, value) VALUES ('grants_version', 0) ON CONFLICT (key) DO NOTHING;
";

/// Creates the node and approver roles when missing. Roles belong to the
/// whole cluster, so two databases of one server share them (their
/// privileges are per database); two `migrate`s racing on a fresh cluster
/// both succeed.
fn ensure_roles(pg: &Pg) -> Result<(), SharedError> {
    for role in [NODE_ROLE, APPROVER_ROLE] {
        let sql = format!(
            "DO $$ BEGIN CREATE ROLE {role} LOGIN; \
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
        );
        pg.with("cannot create the roles", |c| c.batch_execute(&sql))?;
    }
    Ok(())
}
