//! Issue 32, first part: the state databases carry a schema version.
//! `gatehouse migrate` creates each database or brings it to the version
//! this build knows; a database of a later version is refused by
//! `migrate`, by a run and by a server, before anything is written.

use serde_json::{json, Value};

use crate::support::guests::guest;
use crate::support::{s, Env};

/// The audit chain's file in `state`.
const CHAIN: &str = "audit-chain.jsonl";

/// SQLite's `user_version` of `path`, or the version the audit chain's
/// header records.
fn version(path: &std::path::Path) -> i64 {
    if path.ends_with(CHAIN) {
        let text = std::fs::read_to_string(path).unwrap();
        let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        return header["version"].as_i64().unwrap();
    }
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

fn set_version(path: &std::path::Path, v: i64) {
    if path.ends_with(CHAIN) {
        let text = std::fs::read_to_string(path).unwrap();
        let (header, rest) = text.split_once('\n').unwrap();
        let mut header: Value = serde_json::from_str(header).unwrap();
        header["version"] = json!(v);
        std::fs::write(path, format!("{header}\n{rest}")).unwrap();
        return;
    }
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.pragma_update(None, "user_version", v).unwrap();
}

#[test]
fn migrate_creates_every_state_database_at_its_schema_version_and_is_idempotent() {
    let env = Env::bare();
    let state = env.state_dir();
    let want: Vec<Value> = [
        ("grants", "grants.db"),
        ("approvals", "approvals.db"),
        ("memory", "memory.db"),
        ("audit", CHAIN),
    ]
    .iter()
    .map(|(name, file)| json!({"database": name, "path": s(&state.join(file)), "version": 1}))
    .collect();
    for _ in 0..2 {
        let run = env.run(&["--json", "migrate"]);
        run.expect(0);
        assert_eq!(run.json_lines(), want, "{run:#?}");
    }
    for file in ["grants.db", "approvals.db", "memory.db", CHAIN] {
        assert_eq!(version(&state.join(file)), 1, "{file}");
    }
    // The lines a person reads.
    let run = env.run(&["migrate"]);
    run.expect(0);
    assert_eq!(
        run.lines(),
        [
            format!("grants    schema 1  {}", s(&state.join("grants.db"))),
            format!("approvals schema 1  {}", s(&state.join("approvals.db"))),
            format!("memory    schema 1  {}", s(&state.join("memory.db"))),
            format!("audit     schema 1  {}", s(&state.join(CHAIN))),
        ]
    );
}

/// A node started against a schema version it does not know refuses to
/// start: `migrate`, `run` and `serve` each exit 1 naming the database and
/// both versions, and nothing runs.
///
/// Positive control: the same run succeeds before the version moves.
#[test]
fn a_database_of_a_later_schema_version_is_refused_before_anything_runs() {
    let env = Env::bare();
    let ws = env.mkdir("ws");
    let hello = guest("hello");
    env.run(&["migrate"]).expect(0);
    let run = || env.run(&["run", s(&hello), "--workspace", s(&ws), "--input", "{}"]);
    run().expect(0);
    let state = env.state_dir();
    for (file, what) in [
        ("approvals.db", "approvals database"),
        ("memory.db", "memory store"),
        (CHAIN, "audit chain"),
    ] {
        let path = state.join(file);
        set_version(&path, 7);
        let schema = if file == CHAIN { "" } else { "schema " };
        let message = format!(
            "{what} `{}`: its {schema}version 7 is newer than this build knows (1); run a newer gatehouse",
            s(&path)
        );
        env.run(&["migrate"]).expect_err(1, &[&message]);
        let refused = run();
        refused.expect_err(1, &[&message]);
        assert!(!refused.stdout.contains("hello"), "{refused:#?}");
        env.run(&[
            "serve",
            "--mcp",
            "--workspace",
            s(&ws),
            "--executor",
            s(&hello),
        ])
        .expect_err(1, &[&message]);
        // Nothing was written over it.
        assert_eq!(version(&path), 7);
        set_version(&path, 1);
        run().expect(0);
    }
    // The grants database was refused already (exit 3, as a file that is
    // not a grants database).
    let grants = state.join("grants.db");
    set_version(&grants, 9);
    run().expect_err(
        3,
        &[&format!(
            "`{}` is not a grants database (its schema version is 9; this gatehouse knows versions up to 1)",
            s(&grants)
        )],
    );
}
