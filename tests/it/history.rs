//! Issue 32: the tamper-evident audit on the embedded backend. Every
//! turn's audit record and every denial record also goes, byte for byte,
//! into one hash-chained log (`<state>/audit-chain.jsonl`); `gatehouse history
//! verify` recomputes it, exits 0 when it is whole and 2 naming the first
//! record edited, deleted or reordered; `history prune` removes its old
//! records and keeps a checkpoint, so it still verifies.
//!
//! Each tamper test first verifies the same log untouched (the positive
//! control), then changes one thing: in the file with a text edit, in
//! PostgreSQL with SQL as the table's owner.

use serde_json::{json, Value};

use crate::support::guests::{guest, run_json};
use crate::support::pg::Database;
use crate::support::{s, Env};

/// One record of the chain as stored.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    seq: i64,
    kind: String,
    turn: String,
    body: String,
    hash: String,
}

fn chain_file(env: &Env) -> std::path::PathBuf {
    env.state_dir().join("audit-chain.jsonl")
}

/// One record line of the chain's file, as far as these tests read it.
#[derive(serde::Deserialize)]
struct Line<'a> {
    seq: i64,
    kind: String,
    turn: String,
    #[serde(borrow)]
    body: &'a serde_json::value::RawValue,
    hash: String,
}

/// The lines of the chain's file (its header first).
fn chain_lines(env: &Env) -> Vec<String> {
    lines(&chain_file(env))
}

/// Rewrites the chain's file with `f` applied to its lines (header
/// first).
fn edit_chain(env: &Env, f: impl FnOnce(&mut Vec<String>)) {
    let mut lines = chain_lines(env);
    f(&mut lines);
    std::fs::write(chain_file(env), lines.join("\n") + "\n").unwrap();
}

/// Where the record `seq` is among `lines`.
fn line_of(lines: &[String], seq: i64) -> usize {
    let prefix = format!("{{\"seq\":{seq},");
    lines.iter().position(|l| l.starts_with(&prefix)).unwrap()
}

/// What each tamper test does to the chain, on either backend.
enum Change {
    /// Record 2's status changed from ok to error.
    EditStatusOfTwo,
    /// Record 3 removed.
    DeleteThree,
    /// Records 2 and 3 swapped, each keeping its place's number.
    SwapTwoAndThree,
    /// Record 3's time changed.
    EditTimeOfThree,
}

fn tamper(env: &Env, change: Change) {
    if env.database_url.is_some() {
        return sql(
            env,
            match change {
                Change::EditStatusOfTwo => "UPDATE chain SET body = replace(body, '\"status\":\"ok\"', '\"status\":\"error\"') WHERE seq = 2",
                Change::DeleteThree => "DELETE FROM chain WHERE seq = 3",
                Change::SwapTwoAndThree => "BEGIN; UPDATE chain SET seq = -1 WHERE seq = 2; UPDATE chain SET seq = 2 WHERE seq = 3;
                 UPDATE chain SET seq = 3 WHERE seq = -1; COMMIT;",
                Change::EditTimeOfThree => "UPDATE chain SET time = '2020-01-01T00:00:00Z' WHERE seq = 3",
            },
        );
    }
    edit_chain(env, |lines| match change {
        Change::EditStatusOfTwo => {
            let i = line_of(lines, 2);
            lines[i] = lines[i].replace("\"status\":\"ok\"", "\"status\":\"error\"");
        }
        Change::DeleteThree => {
            let i = line_of(lines, 3);
            lines.remove(i);
        }
        Change::SwapTwoAndThree => {
            let (two, three) = (line_of(lines, 2), line_of(lines, 3));
            lines.swap(two, three);
            lines[two] = lines[two].replacen("{\"seq\":3,", "{\"seq\":2,", 1);
            lines[three] = lines[three].replacen("{\"seq\":2,", "{\"seq\":3,", 1);
        }
        Change::EditTimeOfThree => {
            let i = line_of(lines, 3);
            let start = lines[i].find("\"time\":\"").unwrap() + 8;
            let end = start + lines[i][start..].find('"').unwrap();
            lines[i].replace_range(start..end, "2020-01-01T00:00:00Z");
        }
    });
}

fn rows(env: &Env) -> Vec<Row> {
    if let Some(url) = &env.database_url {
        let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
        return c
            .query(
                "SELECT seq, kind, turn, body, hash FROM audit_chain ORDER BY seq",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| Row {
                seq: r.get(0),
                kind: r.get(1),
                turn: r.get(2),
                body: r.get(3),
                hash: r.get(4),
            })
            .collect();
    }
    chain_lines(env)
        .iter()
        .skip(1)
        .map(|l| {
            let line: Line = serde_json::from_str(l).unwrap();
            Row {
                seq: line.seq,
                kind: line.kind,
                turn: line.turn,
                body: line.body.get().to_string(),
                hash: line.hash,
            }
        })
        .collect()
}

/// Runs `statements` on the chain's table (`audit_chain` in the fleet's
/// database), as its owner.
fn sql(env: &Env, statements: &str) {
    let url = env.database_url.as_ref().unwrap();
    postgres::Client::connect(url, postgres::NoTls)
        .unwrap()
        .batch_execute(&statements.replace(" chain ", " audit_chain "))
        .unwrap();
}

/// `gatehouse --json history verify`: its exit code and its one object.
fn verify_json(env: &Env) -> (i32, Value) {
    let run = env.run(&["--json", "history", "verify"]);
    let lines = run.json_lines();
    assert_eq!(lines.len(), 1, "{run:#?}");
    (run.code, lines[0].clone())
}

/// Asserts the chain verifies whole with `records` records from `first`
/// to `last`; its head.
#[track_caller]
fn assert_whole(env: &Env, records: u64, first: i64, last: i64) -> String {
    let (code, v) = verify_json(env);
    assert_eq!(code, 0, "{v:#}");
    let head = v["head"].as_str().unwrap().to_string();
    assert_eq!(
        v,
        json!({"whole": true, "records": records, "first": first, "last": last, "head": head})
    );
    let run = env.run(&["history", "verify"]);
    run.expect_stdout(
        0,
        &[&format!(
            "audit chain whole: {records} record{} ({first}..{last}), head {head}",
            if records == 1 { "" } else { "s" }
        )],
    );
    head
}

/// Asserts verify exits 2 naming record `seq` of turn `turn` as `tamper`,
/// as JSON and as the message a person reads.
#[track_caller]
fn assert_broken(env: &Env, seq: i64, turn: &str, tamper: &str) {
    let (code, v) = verify_json(env);
    assert_eq!(code, 2, "{v:#}");
    assert_eq!(
        v,
        json!({"whole": false, "seq": seq, "turn": turn, "tamper": tamper})
    );
    let said = match tamper {
        "deleted" => format!("record {seq} was deleted (the record after it is turn `{turn}`)"),
        how => format!("record {seq} (turn `{turn}`) was {how}"),
    };
    env.run(&["history", "verify"]).expect_err(
        2,
        &[&format!(
            "audit chain broken: {said} (`{}`)",
            env.database_url
                .clone()
                .unwrap_or_else(|| s(&chain_file(env)).to_string())
        )],
    );
}

/// Real turns: `hello` twice (they mutate nothing), one `write-file` that
/// writes (it has a history directory), one request denied at ReadOnly,
/// then `hello` again. Their turn ids, in order.
fn five_turns(env: &Env) -> Vec<String> {
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let hello = guest("hello");
    let write = guest("write-file");
    let mut turns = Vec::new();
    let mut turn = |manifest: &std::path::Path, level: &str, input: &str, code: i32| {
        let (run, v) = run_json(env, manifest, &ws, level, input, &[]);
        run.expect(code);
        turns.push(v["turn"].as_str().unwrap().to_string());
    };
    turn(&hello, "Supervised", r#"{"n":1}"#, 0);
    turn(&hello, "Supervised", r#"{"n":2}"#, 0);
    turn(&write, "Full", r#"{"path":"out/a.txt","content":"a"}"#, 0);
    turn(
        &write,
        "ReadOnly",
        r#"{"path":"out/b.txt","content":"b"}"#,
        2,
    );
    turn(&hello, "Supervised", r#"{"n":3}"#, 0);
    turns
}

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn history_verify_passes_on_an_untouched_log_of_real_turns_and_denials() {
    let env = Env::bare();
    // No record yet: whole, empty, and nothing created.
    let (code, v) = verify_json(&env);
    assert_eq!(code, 0);
    assert_eq!(
        v,
        json!({"whole": true, "records": 0, "first": null, "last": null, "head": "0".repeat(64)})
    );
    env.run(&["history", "verify"]).expect_stdout(
        0,
        &[&format!(
            "audit chain whole: 0 records, head {}",
            "0".repeat(64)
        )],
    );
    let turns = five_turns(&env);
    assert!(chain_file(&env).exists());
    // Five turns and denials made: five records.
    let head = assert_whole(&env, 5, 1, 5);
    let rows = rows(&env);
    assert_eq!(rows[4].hash, head);
    let kinds: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.kind.as_str(), r.turn.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("turn", turns[0].as_str()),
            ("turn", turns[1].as_str()),
            ("turn", turns[2].as_str()),
            ("denial", turns[3].as_str()),
            ("turn", turns[4].as_str()),
        ]
    );
    // The logs are as they were, and the chain holds their lines byte
    // for byte.
    let state = env.state_dir();
    let audit = lines(&state.join("audit.jsonl"));
    assert_eq!(audit, [rows[0].body.as_str(), &rows[1].body, &rows[4].body]);
    assert_eq!(lines(&state.join("denials.jsonl")), [rows[3].body.as_str()]);
    // The turn that wrote has its directory and no audit.jsonl line; its
    // chain record is the same shape: its final turn.json and the
    // decisions it wrote.
    let dir = state.join("history").join(&turns[2]);
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("turn.json")).unwrap()).unwrap();
    let decisions: Vec<Value> = lines(&dir.join("decisions.jsonl"))
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!decisions.is_empty());
    let mut want = record.clone();
    want["decisions"] = Value::Array(decisions);
    let body: Value = serde_json::from_str(&rows[2].body).unwrap();
    assert_eq!(body, want);
    assert_eq!(record["status"], "ok");
    // The mutating turn's record reads as an audit.jsonl line does.
    let line: Value = serde_json::from_str(&audit[0]).unwrap();
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(keys(&line), keys(&body));
}

#[test]
fn history_verify_names_an_edited_record() {
    history_verify_names_an_edited_record_on(&Env::bare());
}

#[test]
fn fleet_verify_names_an_edited_record_in_postgresql() {
    let db = Database::migrated();
    history_verify_names_an_edited_record_on(&Env::on(&db));
}

fn history_verify_names_an_edited_record_on(env: &Env) {
    let turns = five_turns(env);
    assert_whole(env, 5, 1, 5);
    tamper(env, Change::EditStatusOfTwo);
    assert!(rows(env)[1].body.contains("\"status\":\"error\""));
    assert_broken(env, 2, &turns[1], "edited");
}

#[test]
fn history_verify_names_a_deleted_record_by_its_number() {
    history_verify_names_a_deleted_record_by_its_number_on(&Env::bare());
}

#[test]
fn fleet_verify_names_a_deleted_record_by_its_number_in_postgresql() {
    let db = Database::migrated();
    history_verify_names_a_deleted_record_by_its_number_on(&Env::on(&db));
}

fn history_verify_names_a_deleted_record_by_its_number_on(env: &Env) {
    let turns = five_turns(env);
    assert_whole(env, 5, 1, 5);
    tamper(env, Change::DeleteThree);
    // Record 3 is missing; the record after it is the denial's.
    assert_broken(env, 3, &turns[3], "deleted");
}

#[test]
fn history_verify_names_two_swapped_records_reordered() {
    history_verify_names_two_swapped_records_reordered_on(&Env::bare());
}

#[test]
fn fleet_verify_names_two_swapped_records_reordered_in_postgresql() {
    let db = Database::migrated();
    history_verify_names_two_swapped_records_reordered_on(&Env::on(&db));
}

fn history_verify_names_two_swapped_records_reordered_on(env: &Env) {
    let turns = five_turns(env);
    assert_whole(env, 5, 1, 5);
    tamper(env, Change::SwapTwoAndThree);
    // Each still hashes as itself: not an edit. Record 2 is now the
    // third turn, which links to the one now at 3.
    assert_broken(env, 2, &turns[2], "reordered");
}

#[test]
fn history_verify_names_a_line_moved_in_the_chains_file_reordered() {
    let env = Env::bare();
    let turns = five_turns(&env);
    assert_whole(&env, 5, 1, 5);
    // The second record's line moved after the third, numbers and all.
    edit_chain(&env, |lines| {
        let (two, three) = (line_of(lines, 2), line_of(lines, 3));
        lines.swap(two, three);
    });
    // The record that belongs second is found one line further on.
    assert_broken(&env, 2, &turns[1], "reordered");
}

#[test]
fn history_prune_removes_the_chains_old_records_and_verify_still_passes() {
    let env = Env::bare();
    let ws = env.mkdir("ws");
    let hello = guest("hello");
    let write = guest("write-file");
    // Two old records: a turn and a denial.
    run_json(&env, &hello, &ws, "Supervised", "{}", &[])
        .0
        .expect(0);
    run_json(
        &env,
        &write,
        &ws,
        "ReadOnly",
        r#"{"path":"out/a","content":"a"}"#,
        &[],
    )
    .0
    .expect(2);
    assert_whole(&env, 2, 1, 2);
    // Records carry whole seconds: the next one is recorded at least five
    // seconds later, and the prunes right after it remove what is older
    // than four (two commands run in between: it is not old yet).
    std::thread::sleep(std::time::Duration::from_millis(5100));
    run_json(&env, &hello, &ws, "Supervised", "{}", &[])
        .0
        .expect(0);
    let before = rows(&env);
    assert_eq!(before.len(), 3);
    let head = before[2].hash.clone();
    // A dry run counts and removes nothing.
    let run = env.run(&["history", "prune", "--older-than", "4s", "--dry-run"]);
    run.expect(0);
    assert!(
        run.stdout.contains(
            "would remove 2 audit chain record(s); `gatehouse history verify` checks the rest"
        ),
        "{run:#?}"
    );
    assert_eq!(rows(&env), before);
    let run = env.run(&["--json", "history", "prune", "--older-than", "4s"]);
    run.expect(0);
    assert_eq!(run.json_lines()[0]["chain_records"], 2, "{run:#?}");
    // The last record is left, after the checkpoint of record 2.
    assert_eq!(assert_whole(&env, 1, 3, 3), head);
    assert_eq!(rows(&env).len(), 1);
    // The chain goes on from it.
    run_json(&env, &hello, &ws, "Supervised", "{}", &[])
        .0
        .expect(0);
    assert_whole(&env, 2, 3, 4);
    // Tampering after a prune is still seen.
    tamper(&env, Change::EditTimeOfThree);
    let turn = rows(&env)[0].turn.clone();
    assert_broken(&env, 3, &turn, "edited");
    // And a prune will not remove the broken part: exit 2, nothing gone.
    env.run(&["history", "prune", "--older-than", "1s"])
        .expect_err(2, &["record 3 (turn `", "was edited; nothing was pruned"]);
    assert_eq!(rows(&env).len(), 2);
}

#[test]
fn two_processes_recording_at_once_leave_one_whole_chain() {
    let env = Env::bare();
    let ws = env.mkdir("ws");
    let hello = guest("hello");
    const EACH: usize = 4;
    std::thread::scope(|scope| {
        for t in 0..2 {
            let (env, ws, hello) = (&env, &ws, &hello);
            scope.spawn(move || {
                for i in 0..EACH {
                    let input = format!("{{\"t\":{t},\"i\":{i}}}");
                    run_json(env, hello, ws, "Supervised", &input, &[])
                        .0
                        .expect(0);
                }
            });
        }
    });
    let n = 2 * EACH as i64;
    assert_whole(&env, n as u64, 1, n);
    assert_eq!(
        rows(&env).iter().map(|r| r.seq).collect::<Vec<_>>(),
        (1..=n).collect::<Vec<_>>()
    );
}

#[test]
fn a_turn_whose_audit_record_cannot_be_committed_is_not_acknowledged() {
    let env = Env::bare();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    // The chain's file is a directory: no record can be committed to it.
    std::fs::create_dir_all(chain_file(&env)).unwrap();
    let (run, v) = run_json(&env, &guest("hello"), &ws, "Supervised", "{}", &[]);
    run.expect(1);
    let turn = v["turn"].as_str().unwrap();
    assert_eq!(v["error"]["code"], Value::Null, "{v:#}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "turn `{turn}` ran, but its record was not committed: audit chain `{}`: cannot open",
            chain_file(&env).display()
        )),
        "{message}"
    );
    assert!(
        message.ends_with("; the turn is not acknowledged, and whatever it did stands"),
        "{message}"
    );
    // A mutating turn: its write stands, and it is reported failed too.
    let (run, v) = run_json(
        &env,
        &guest("write-file"),
        &ws,
        "Full",
        r#"{"path":"out/a.txt","content":"kept"}"#,
        &[],
    );
    run.expect(1);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ran, but its record was not committed"),
        "{v:#}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("out/a.txt")).unwrap(),
        "kept"
    );
}

/// The owner's connection to the fleet's database of `env`.
fn owner(env: &Env) -> postgres::Client {
    postgres::Client::connect(env.database_url.as_ref().unwrap(), postgres::NoTls).unwrap()
}

/// security round 3, item 6: every stored column of a fleet's audit
/// chain is bound, so `history verify` finds an edit of any of them. On
/// five real turns, one turn's record (the `write-file` turn, which a
/// node indexed with its name and operation count) has each column edited
/// in turn by the table's owner: `node`, `operations`, `body`, `turn`,
/// `time`, `kind`, `prev`, `hash` and `format`. Each edit makes verify
/// exit 2 naming that record as edited; it is undone before the next.
///
/// Positive control: the untouched chain verifies (exit 0), and again
/// after each edit is undone.
#[test]
fn fleet_verify_finds_an_edit_of_every_column_of_a_chain_record() {
    let db = Database::migrated();
    let env = Env::on(&db);
    let turns = five_turns(&env);
    assert_whole(&env, 5, 1, 5);
    let mut c = owner(&env);
    let (node, operations, format): (Option<String>, Option<i64>, Option<i16>) = c
        .query_one(
            "SELECT node, operations, format FROM audit_chain WHERE seq = 3",
            &[],
        )
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .unwrap();
    assert!(node.is_some(), "the turn is indexed with its node");
    assert!(operations.is_some(), "and its operation count");
    assert_eq!(format, Some(2));
    c.batch_execute("CREATE TABLE kept AS SELECT * FROM audit_chain WHERE seq = 3")
        .unwrap();
    for (column, edit, named) in [
        ("node", "'elsewhere'", turns[2].as_str()),
        ("operations", "operations + 7", turns[2].as_str()),
        ("body", "body || ' '", turns[2].as_str()),
        ("turn", "'t-forged'", "t-forged"),
        ("time", "'2020-01-01T00:00:00Z'", turns[2].as_str()),
        ("kind", "'denial'", turns[2].as_str()),
        ("prev", "repeat('a', 64)", turns[2].as_str()),
        ("hash", "repeat('b', 64)", turns[2].as_str()),
        ("format", "1", turns[2].as_str()),
        ("format", "NULL", turns[2].as_str()),
    ] {
        c.batch_execute(&format!(
            "UPDATE audit_chain SET {column} = {edit} WHERE seq = 3"
        ))
        .unwrap();
        assert_broken(&env, 3, named, "edited");
        c.batch_execute(&format!(
            "UPDATE audit_chain SET {column} = k.{column} FROM kept k WHERE audit_chain.seq = 3"
        ))
        .unwrap();
        assert_whole(&env, 5, 1, 5);
    }
}

/// security round 3, item 6: records written before the chain hashed its
/// node and operation count (format 1, schema version 5) keep verifying
/// after `migrate`, and the records after them are of format 2. Two
/// records are written as a version-5 node wrote them (linked by
/// `link_hash`, indexed with a node and a count); after the upgrade a
/// turn appends a third, and the chain is whole. An edit of the new
/// record's node exits 2.
///
/// Positive control: the chain verifies whole before the upgrade's
/// record and after it.
#[test]
fn fleet_records_of_the_old_hash_format_still_verify_after_migrate() {
    let db = Database::new();
    let pg = gatehouse::state::pg::Pg::new(&db.url).unwrap();
    assert_eq!(pg.migrate_to(5).unwrap(), (0, 5));
    let env = Env::on(&db);
    let mut c = owner(&env);
    let mut prev = gatehouse::state::GENESIS.to_string();
    for (seq, turn) in [(1i64, "t-old-1"), (2, "t-old-2")] {
        let time = format!("2026-12-06T10:00:0{seq}Z");
        let body = json!({"turn": turn, "executor": "hello", "actor": "main",
                          "level": "Supervised", "started_at": time, "status": "ok",
                          "undo": "none", "decisions": []})
        .to_string();
        let hash = gatehouse::state::link_hash(&prev, "turn", turn, &time, &body);
        c.execute(
            "INSERT INTO audit_chain (seq, kind, turn, time, body, prev, hash, node, operations) \
             VALUES ($1, 'turn', $2, $3, $4, $5, $6, 'old-node', 0)",
            &[&seq, &turn, &time, &body, &prev, &hash],
        )
        .unwrap();
        prev = hash;
    }
    assert_eq!(pg.migrate().unwrap(), (5, 6));
    assert_whole(&env, 2, 1, 2);
    let ws = env.mkdir("ws");
    run_json(&env, &guest("hello"), &ws, "Supervised", "{}", &[])
        .0
        .expect(0);
    assert_whole(&env, 3, 1, 3);
    let formats: Vec<Option<i16>> = c
        .query("SELECT format FROM audit_chain ORDER BY seq", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(formats, [None, None, Some(2)]);
    let turn: String = c
        .query_one("SELECT turn FROM audit_chain WHERE seq = 3", &[])
        .unwrap()
        .get(0);
    c.batch_execute("UPDATE audit_chain SET node = 'elsewhere' WHERE seq = 3")
        .unwrap();
    assert_broken(&env, 3, &turn, "edited");
}
