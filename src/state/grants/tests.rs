use super::*;
use crate::policy::{Level, Outcome};

const T0: &str = "2026-01-01T00:00:00Z";

fn t0() -> UtcTime {
    UtcTime::parse(T0).unwrap()
}

fn store() -> (tempfile::TempDir, GrantStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = GrantStore::open(&dir.path().join("state/grants.db")).unwrap();
    (dir, store)
}

fn alice() -> Identity {
    Identity::new("cli", "alice")
}

fn new_grant(cap: &str, target: &str) -> NewGrant {
    NewGrant {
        identity: alice(),
        capability: cap.into(),
        target: target.into(),
        expires_at: Some(t0().plus_seconds(3600)),
        granted_by: Some("alice".into()),
    }
}

fn outcome(
    store: &GrantStore,
    level: Level,
    target: &str,
    who: &Identity,
    now: UtcTime,
) -> Effective {
    store
        .effective_outcome(level, Capability::FsWrite, Some(target), who, now)
        .unwrap()
}

fn refusal(store: &GrantStore, cap: &str, target: &str) -> GrantError {
    let new = new_grant(cap, target);
    let early = GrantStore::validate(&new, t0()).unwrap_err().to_string();
    let err = store.record(&new, t0()).unwrap_err();
    assert_eq!(early, err.to_string(), "validate and record agree");
    assert!(err.is_invalid_input(), "{err}");
    assert!(
        store.list(true, t0()).unwrap().is_empty(),
        "nothing written"
    );
    err
}

#[test]
fn a_grant_allows_exactly_what_it_names() {
    let (_dir, store) = store();
    GrantStore::validate(&new_grant("fs:write", "/tmp/x/**"), t0()).unwrap();
    let g = store
        .record(&new_grant("fs:write", "/tmp/x/**"), t0())
        .unwrap();
    assert_eq!(
        g,
        Grant {
            id: 1,
            channel: "cli".into(),
            sender_id: "alice".into(),
            capability: "fs:write".into(),
            target: "/tmp/x/**".into(),
            granted_at: t0(),
            expires_at: Some(t0().plus_seconds(3600)),
            granted_by: Some("alice".into()),
            revoked_at: None,
        }
    );
    let now = t0().plus_seconds(60);
    assert_eq!(
        outcome(&store, Level::Supervised, "/tmp/x/a", &alice(), now),
        Effective {
            outcome: Outcome::Allowed,
            matrix: Outcome::ApprovalRequired,
            grant_id: Some(1),
        }
    );
    let not_lifted = Effective {
        outcome: Outcome::ApprovalRequired,
        matrix: Outcome::ApprovalRequired,
        grant_id: None,
    };
    let bob = Identity::new("cli", "bob");
    assert_eq!(
        outcome(&store, Level::Supervised, "/tmp/x/a", &bob, now),
        not_lifted
    );
    let other_channel = Identity::new("matrix", "alice");
    assert_eq!(
        outcome(&store, Level::Supervised, "/tmp/x/a", &other_channel, now),
        not_lifted
    );
    assert_eq!(
        outcome(&store, Level::Supervised, "/tmp/y/a", &alice(), now),
        not_lifted
    );
    // Another capability on the same target is not covered.
    assert_eq!(
        store
            .effective_outcome(
                Level::Supervised,
                Capability::FsRead,
                Some("/tmp/x/a"),
                &alice(),
                now
            )
            .unwrap(),
        not_lifted
    );
    // Expired: at the expiry instant and after.
    let expiry = t0().plus_seconds(3600);
    assert_eq!(
        outcome(&store, Level::Supervised, "/tmp/x/a", &alice(), expiry),
        not_lifted
    );
    assert!(store
        .active_for(&alice(), Capability::FsWrite, expiry)
        .unwrap()
        .is_empty());
    // Never turns denied into allowed.
    assert_eq!(
        outcome(&store, Level::ReadOnly, "/tmp/x/a", &alice(), now),
        Effective {
            outcome: Outcome::Denied,
            matrix: Outcome::Denied,
            grant_id: None,
        }
    );
    // Full allows by the matrix alone.
    assert_eq!(
        outcome(&store, Level::Full, "/tmp/x/a", &alice(), now),
        Effective {
            outcome: Outcome::Allowed,
            matrix: Outcome::Allowed,
            grant_id: None,
        }
    );
    // Revoked.
    let revoked = store.revoke(1, now).unwrap();
    assert_eq!(revoked.revoked_at, Some(now));
    assert_eq!(
        outcome(&store, Level::Supervised, "/tmp/x/a", &alice(), now),
        not_lifted
    );
}

#[test]
fn grants_persist_across_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grants.db");
    let id = {
        let store = GrantStore::open(&path).unwrap();
        store
            .record(&new_grant("network:sites", "Example.COM:443"), t0())
            .unwrap()
            .id
    };
    let store = GrantStore::open(&path).unwrap();
    assert_eq!(store.path(), path);
    let active = store.active_all(t0()).unwrap();
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].id, id);
    assert_eq!(active[0].target, "example.com:443", "stored canonical");
    let e = store
        .effective_outcome(
            Level::ReadOnly,
            Capability::NetworkSites,
            Some("example.com:443"),
            &alice(),
            t0(),
        )
        .unwrap();
    assert_eq!((e.outcome, e.grant_id), (Outcome::Allowed, Some(id)));
}

#[test]
fn list_revoke_and_their_errors() {
    let (_dir, store) = store();
    let now = t0();
    let a = store.record(&new_grant("fs:read", "/a/**"), now).unwrap();
    let mut forever = new_grant("env:read", "HOME");
    forever.expires_at = None;
    forever.granted_by = None;
    let b = store.record(&forever, now).unwrap();
    let c = store
        .record(&new_grant("memory:read", "notes"), now)
        .unwrap();
    assert_eq!((a.id, b.id, c.id), (1, 2, 3));
    store.revoke(2, now).unwrap();
    let ids = |v: Vec<Grant>| v.into_iter().map(|g| g.id).collect::<Vec<_>>();
    assert_eq!(ids(store.list(true, now).unwrap()), [1, 2, 3]);
    assert_eq!(ids(store.list(false, now).unwrap()), [1, 3]);
    assert_eq!(ids(store.active_all(now).unwrap()), [1, 3]);
    let later = now.plus_seconds(7200);
    assert_eq!(ids(store.list(false, later).unwrap()), Vec::<i64>::new());
    assert_eq!(ids(store.list(true, later).unwrap()), [1, 2, 3]);

    let err = store.revoke(2, now).unwrap_err();
    assert!(matches!(err, GrantError::AlreadyRevoked(2)));
    assert_eq!(err.to_string(), "grant `2` is already revoked");
    assert!(err.is_invalid_input());
    let err = store.revoke(99, now).unwrap_err();
    assert!(matches!(err, GrantError::NoSuchGrant(99)));
    assert_eq!(err.to_string(), "no grant with id `99`");
    assert!(err.is_invalid_input());
    // An expired grant can still be revoked.
    assert_eq!(store.revoke(1, later).unwrap().revoked_at, Some(later));
}

#[test]
fn record_refuses_what_a_grant_cannot_mean() {
    let (_dir, store) = store();
    let msg = |cap: &str, target: &str| refusal(&store, cap, target).to_string();
    assert_eq!(
        msg("code:exec", "ls"),
        "`code:exec` is an always-class capability: every use needs a fresh approval, so it cannot be granted"
    );
    assert_eq!(
        msg("system:admin", "x"),
        "`system:admin` is an always-class capability: every use needs a fresh approval, so it cannot be granted"
    );
    assert_eq!(
        msg("time:read", "x"),
        "`time:read` takes no target and needs no grant"
    );
    assert_eq!(
        msg("compute:pure", "x"),
        "`compute:pure` takes no target and needs no grant"
    );
    assert_eq!(
        msg("human:ask", "x"),
        "`human:ask` takes no target and needs no grant"
    );
    assert_eq!(
        msg("fs:delete", "/a"),
        "unknown capability `fs:delete` (see `gatehouse policy registry`)"
    );
    assert_eq!(
        msg("fs:write", "/tmp/[ab]"),
        "invalid target for `fs:write`: malformed path glob `/tmp/[ab]`: brackets and braces are not supported; use `*`, `?` and `**`"
    );
    assert_eq!(
        msg("fs:read", "tmp/x"),
        "invalid target for `fs:read`: malformed path glob `tmp/x`: it must be an absolute path"
    );
    assert_eq!(
        msg("network:sites", "a.*.com"),
        "invalid target for `network:sites`: malformed host `a.*.com`: a wildcard is only allowed as a leading `*.`"
    );
    assert_eq!(
        msg("network:sites", "/tmp/x"),
        "invalid target for `network:sites`: malformed host `/tmp/x`: a host name may contain only letters, digits, `-` and `.`"
    );
    assert_eq!(
        msg("env:read", "HO*"),
        "invalid target for `env:read`: malformed name `HO*`: an exact name cannot contain wildcards"
    );

    let mut g = new_grant("fs:read", "/a/**");
    g.identity.channel.clear();
    let err = store.record(&g, t0()).unwrap_err();
    assert_eq!(err.to_string(), "a grant needs a non-empty channel");
    assert!(err.is_invalid_input());
    let mut g = new_grant("fs:read", "/a/**");
    g.identity.sender_id.clear();
    assert_eq!(
        store.record(&g, t0()).unwrap_err().to_string(),
        "a grant needs a non-empty sender id"
    );
    for expiry in [t0(), t0().plus_seconds(-1)] {
        let mut g = new_grant("fs:read", "/a/**");
        g.expires_at = Some(expiry);
        let err = store.record(&g, t0()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("expiry `{expiry}` is not in the future (now is `{T0}`)")
        );
        assert!(err.is_invalid_input());
    }
    assert!(store.list(true, t0()).unwrap().is_empty());
}

#[test]
fn a_hand_inserted_always_row_never_elevates() {
    let (_dir, store) = store();
    store
        .conn
        .execute(
            "INSERT INTO grants (channel, sender_id, capability, target, granted_at) \
             VALUES ('cli', 'alice', 'code:exec', 'ls', ?1)",
            [T0],
        )
        .unwrap();
    for level in Level::ALL {
        let e = store
            .effective_outcome(level, Capability::CodeExec, Some("ls"), &alice(), t0())
            .unwrap();
        assert_ne!(e.outcome, Outcome::Allowed, "{level}");
        assert_eq!(e.grant_id, None);
    }
    // The row exists and is listed, for an administrator to revoke.
    assert_eq!(store.active_all(t0()).unwrap().len(), 1);
}

#[test]
fn a_malformed_row_fails_closed() {
    let (_dir, store) = store();
    store
        .conn
        .execute(
            "INSERT INTO grants (channel, sender_id, capability, target, granted_at, expires_at) \
             VALUES ('cli', 'alice', 'fs:write', '/tmp/x/**', ?1, 'next tuesday')",
            [T0],
        )
        .unwrap();
    let err = store
        .effective_outcome(
            Level::Supervised,
            Capability::FsWrite,
            Some("/tmp/x/a"),
            &alice(),
            t0(),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "grant `1` in `{}` has a malformed `expires_at`: `next tuesday`",
            store.path().display()
        )
    );
    assert!(err.is_invalid_input());
}

#[test]
fn junk_is_not_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grants.db");
    std::fs::write(
        &path,
        b"this is not sqlite, just some junk bytes\n".repeat(200),
    )
    .unwrap();
    let err = GrantStore::open(&path).unwrap_err();
    assert!(matches!(&err, GrantError::NotADatabase { path: p } if *p == path));
    assert_eq!(
        err.to_string(),
        format!(
            "`{}` is not a grants database (file is not a database)",
            path.display()
        )
    );
    assert!(err.is_invalid_input());
}

#[test]
fn another_grants_table_is_the_wrong_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grants.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE grants (id INTEGER PRIMARY KEY, who TEXT);")
        .unwrap();
    let err = GrantStore::open(&path).unwrap_err();
    assert!(matches!(err, GrantError::WrongSchema { .. }), "{err}");
    assert!(err
        .to_string()
        .starts_with(&format!("`{}` is not a grants database (", path.display())));
    assert!(err.is_invalid_input());
}

#[test]
fn wal_mode_and_the_verbatim_schema() {
    let (_dir, store) = store();
    let mode: String = store
        .conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let sql: String = store
        .conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'grants'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    // SQLite stores the statement as written, minus `IF NOT EXISTS` and the `;`.
    assert_eq!(
        sql,
        "CREATE TABLE grants (
 id INTEGER PRIMARY KEY AUTOINCREMENT,
 channel TEXT NOT NULL,
 sender_id TEXT NOT NULL,
 capability TEXT NOT NULL,
 target TEXT NOT NULL,
 granted_at TEXT NOT NULL,
 expires_at TEXT,
 granted_by TEXT,
 revoked_at TEXT
)"
    );
    assert_eq!(
        SCHEMA.replacen("CREATE TABLE IF NOT EXISTS", "CREATE TABLE", 1),
        format!("{sql};")
    );
    // Times are stored as UtcTime text.
    store.record(&new_grant("fs:read", "/a"), t0()).unwrap();
    let (granted, expires): (String, String) = store
        .conn
        .query_row("SELECT granted_at, expires_at FROM grants", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(
        (granted.as_str(), expires.as_str()),
        (T0, "2026-01-01T01:00:00Z")
    );
}

#[test]
fn sqlite_failures_are_not_invalid_input() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should be: SQLite cannot open it.
    let err = GrantStore::open(dir.path()).unwrap_err();
    assert!(matches!(err, GrantError::Sqlite { .. }), "{err}");
    assert!(!err.is_invalid_input());
}

#[test]
fn the_matrix_alone_reads_no_rows() {
    let (_dir, store) = store();
    store.conn.execute_batch("DROP TABLE grants").unwrap();
    let check = |level, cap, target| store.effective_outcome(level, cap, target, &alice(), t0());
    // Decided by the matrix (or always-class): the table is never queried.
    let e = check(Level::ReadOnly, Capability::FsWrite, Some("/a")).unwrap();
    assert_eq!(e.outcome, Outcome::Denied);
    let e = check(Level::Full, Capability::FsWrite, Some("/a")).unwrap();
    assert_eq!(e.outcome, Outcome::Allowed);
    let e = check(Level::Full, Capability::CodeExec, Some("ls")).unwrap();
    assert_eq!(e.outcome, Outcome::ApprovalRequired);
    let e = check(Level::Supervised, Capability::TimeRead, None).unwrap();
    assert_eq!(e.outcome, Outcome::Allowed);
    // approval_required on a per-target capability: the query runs (and fails).
    let err = check(Level::Supervised, Capability::FsWrite, Some("/a")).unwrap_err();
    assert!(matches!(err, GrantError::Sqlite { .. }), "{err}");
    assert!(!err.is_invalid_input());
}

#[test]
fn a_busy_timeout_is_set() {
    let (_dir, store) = store();
    let ms: i64 = store
        .conn
        .query_row("PRAGMA busy_timeout", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ms, 5000);
}

#[test]
fn the_row_cache_sees_writes_from_this_and_other_connections() {
    let (dir, store) = store();
    let now = t0().plus_seconds(1);
    let target = "/tmp/x/a";
    assert_eq!(
        outcome(&store, Level::Supervised, target, &alice(), now).outcome,
        Outcome::ApprovalRequired
    );
    // A write through this connection.
    let g = store
        .record(&new_grant("fs:write", "/tmp/x/**"), t0())
        .unwrap();
    assert_eq!(
        outcome(&store, Level::Supervised, target, &alice(), now).outcome,
        Outcome::Allowed
    );
    // A write through another connection (another gatehouse process).
    let other = GrantStore::open(&dir.path().join("state/grants.db")).unwrap();
    other.revoke(g.id, now).unwrap();
    assert_eq!(
        outcome(&store, Level::Supervised, target, &alice(), now).outcome,
        Outcome::ApprovalRequired
    );
    // And back: a new grant recorded elsewhere is seen at once.
    other
        .record(&new_grant("fs:write", "/tmp/x/**"), t0())
        .unwrap();
    assert_eq!(
        outcome(&store, Level::Supervised, target, &alice(), now).outcome,
        Outcome::Allowed
    );
    // Expiry is checked at each call, not frozen into the cache.
    let later = t0().plus_seconds(7200);
    assert_eq!(
        outcome(&store, Level::Supervised, target, &alice(), later).outcome,
        Outcome::ApprovalRequired
    );
}
