//! Issue 32: a fleet of hosts on one PostgreSQL database. Each test has
//! a database of its own on the throwaway server `./test.sh` starts
//! ([`crate::support::pg`]); each "node" is an [`Env`] of its own (its
//! own state directory and configuration) whose commands name the same
//! database through `GATEHOUSE_DATABASE_URL`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::guests::{component, guest, manifest, output, run_json};
use crate::support::pg::{as_role, Database};
use crate::support::serve::{args, executors, Client};
use crate::support::{s, Env};

fn no_elicitation(_: &Value) -> Value {
    panic!("elicited")
}

/// How long after a change commits every node's next decision sees it
/// (the bound the docs state is 60 ms plus one round trip).
const BOUND: Duration = Duration::from_millis(100);

/// `gatehouse migrate` creates the shared schema and the two roles, once;
/// a node refuses a database that was never migrated, and one of a schema
/// version it does not know, before anything runs.
///
/// Positive control: the same run succeeds between the two refusals.
#[test]
fn fleet_migrate_creates_the_shared_schema_and_a_node_refuses_a_version_it_does_not_know() {
    let db = Database::new();
    let env = Env::on(&db);
    let ws = env.mkdir("ws");
    let hello = guest("hello");
    let run = || env.run(&["run", s(&hello), "--workspace", s(&ws), "--input", "{}"]);
    run().expect_err(
        1,
        &[&format!(
            "postgresql at `{}` has no gatehouse schema: run `gatehouse migrate` with an owner's url first",
            db.url
        )],
    );
    for _ in 0..2 {
        let m = env.run(&["--json", "migrate"]);
        m.expect(0);
        assert_eq!(
            m.json_lines()[0],
            json!({"database": "postgresql", "path": db.url, "version": 6}),
            "{m:#?}"
        );
    }
    let mut c = db.client();
    let roles: Vec<String> = c
        .query(
            "SELECT rolname FROM pg_roles WHERE rolname LIKE 'gatehouse_%' ORDER BY rolname",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(roles, ["gatehouse_approver", "gatehouse_node"]);
    run().expect(0);
    c.execute(
        "UPDATE gatehouse_meta SET value = 7 WHERE key = 'schema_version'",
        &[],
    )
    .unwrap();
    let refusal = format!(
        "postgresql at `{}`: its schema version is 7; this gatehouse knows versions up to 6",
        db.url
    );
    run().expect_err(1, &[&refusal]);
    env.run(&["migrate"]).expect_err(1, &[&refusal]);
    let serve = env
        .command()
        .args([
            "serve",
            "--mcp",
            "--workspace",
            s(&ws),
            "--executor",
            s(&hello),
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(serve.status.code(), Some(1), "{serve:?}");
    assert!(
        String::from_utf8_lossy(&serve.stderr).contains(&refusal),
        "{serve:?}"
    );
}

/// `grants add` through `node` for the sealed identity (`cli`, `tester`):
/// its id.
fn add(node: &Env, target: &str, extra: &[&str]) -> String {
    let mut a = vec![
        "grants",
        "add",
        "--channel",
        "cli",
        "--sender",
        "tester",
        "fs:write",
        target,
    ];
    a.extend(extra);
    let run = node.run(&a);
    run.expect(0);
    run.json_lines()[0]["id"].to_string()
}

/// Two long-lived servers on one database, each with its own state
/// directory: a grant added through node A applies on B's next call, a
/// revoke made through B stops A's next call, and a grant that expires
/// between two calls stops applying at its expiry on both, although
/// nothing in the database changed.
///
/// Positive controls: each node is refused before the grant, and writes
/// the file while it is in force.
#[test]
fn fleet_a_grant_a_revoke_and_an_expiry_made_on_one_node_apply_on_the_others_next_turn() {
    let db = Database::migrated();
    let (a, b) = (Env::on(&db), Env::on(&db));
    let ws = a.mkdir("ws");
    a.mkdir("ws/out");
    let ex = executors(&a);
    let server_args = args(&ws, &ex, "Supervised");
    let mut node_a = Client::start(&a, &server_args, false);
    let mut node_b = Client::start(&b, &server_args, false);
    let write = |name: &str| json!({"path": format!("out/{name}.txt"), "content": name});
    let call = |node: &mut Client, name: &str| {
        let r = node.call("write-file", write(name), &mut no_elicitation);
        let written = ws.join(format!("out/{name}.txt")).exists();
        (r, written)
    };
    for (node, name) in [(&mut node_a, "a0"), (&mut node_b, "b0")] {
        let (r, written) = call(node, name);
        assert_eq!(r["structuredContent"]["code"], "APPROVAL_REQUIRED", "{r:#}");
        assert!(!written);
    }
    let glob = format!("{}/out/**", s(&ws));
    let id = add(&a, &glob, &[]);
    std::thread::sleep(BOUND);
    let (r, written) = call(&mut node_b, "b1");
    assert_eq!(r["isError"], false, "{r:#}");
    assert!(written);
    let (r, written) = call(&mut node_a, "a1");
    assert_eq!(r["isError"], false, "{r:#}");
    assert!(written);
    b.run(&["grants", "revoke", &id]).expect(0);
    std::thread::sleep(BOUND);
    let (r, written) = call(&mut node_a, "a2");
    assert_eq!(r["structuredContent"]["code"], "APPROVAL_REQUIRED", "{r:#}");
    assert!(!written);
    // An expiry: nothing changes in the database when it passes.
    add(&b, &glob, &["--expires-in", "3s"]);
    std::thread::sleep(BOUND);
    let (r, written) = call(&mut node_a, "a3");
    assert_eq!(r["isError"], false, "{r:#}");
    assert!(written);
    let listed = a.run(&["grants", "list"]).json_lines();
    assert_eq!(listed.len(), 1, "{listed:#?}");
    let until = Instant::now() + Duration::from_secs(20);
    while !a.run(&["grants", "list"]).json_lines().is_empty() {
        assert!(Instant::now() < until, "the grant never expired");
        std::thread::sleep(Duration::from_millis(100));
    }
    for (node, name) in [(&mut node_a, "a4"), (&mut node_b, "b4")] {
        let (r, written) = call(node, name);
        assert_eq!(r["structuredContent"]["code"], "APPROVAL_REQUIRED", "{r:#}");
        assert!(!written);
    }
    assert_eq!(node_a.finish(), 0);
    assert_eq!(node_b.finish(), 0);
}

/// The grants a node reads come from the database, not its state
/// directory: nothing is created there, and `grants list` of another node
/// shows what this one recorded.
#[test]
fn fleet_grants_live_in_the_database_and_not_in_the_state_directory() {
    let db = Database::migrated();
    let (a, b) = (Env::on(&db), Env::on(&db));
    let id = add(&a, "/srv/data/**", &["--expires-in", "1h"]);
    let listed = b.run(&["grants", "list"]).json_lines();
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0]["id"].to_string(), id);
    assert_eq!(listed[0]["target"], "/srv/data/**");
    assert!(!a.grants_db().exists());
    assert!(!b.grants_db().exists());
    // Recording the tuple again is the one grant, as on SQLite.
    assert_eq!(add(&b, "/srv/data/**", &[]), id);
    let listed = a.run(&["grants", "list"]).json_lines();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0]["expires_at"],
        Value::Null,
        "forever beats an hour"
    );
}

/// The node role may not revoke grants, and may not touch the schema
/// version; the approver role may revoke (and add, where the node role
/// may not: security round 3, item 5).
#[test]
fn fleet_a_node_s_role_cannot_revoke_grants_and_the_approver_s_role_can() {
    let db = Database::migrated();
    let node = Env {
        database_url: Some(as_role(&db.url, "gatehouse_node")),
        ..Env::bare()
    };
    let approver = Env {
        database_url: Some(as_role(&db.url, "gatehouse_approver")),
        ..Env::bare()
    };
    let id = add(&approver, "/srv/data/**", &[]);
    node.run(&["grants", "revoke", &id])
        .expect_err(1, &["permission denied for table grants"]);
    assert_eq!(node.run(&["grants", "list"]).json_lines().len(), 1);
    approver.run(&["grants", "revoke", &id]).expect(0);
    assert!(node.run(&["grants", "list"]).json_lines().is_empty());
    node.run(&["migrate"]).expect_err(1, &["permission denied"]);
}

/// The SQLSTATE of `sql` run through `client` (`None`: it succeeded).
fn sqlstate(client: &mut postgres::Client, sql: &str) -> Option<postgres::error::SqlState> {
    client
        .batch_execute(sql)
        .err()
        .and_then(|e| e.code().cloned())
}

/// security round 3, item 5: a node's role records a grant only as the
/// grant of an answer. A bare `INSERT INTO grants`, a longer expiry set
/// on a grant, and `grants add` through a node's url are refused
/// (SQLSTATE 42501, permission denied). A person's "allow and remember"
/// (one hour) given to a node's server is recorded by
/// `gatehouse_remember`: the answer (its turn, item, lifetime and the
/// role that gave it) in `node_answers`, and the grant, tied to it, with
/// the answer's item and lifetime. When the owner turns node answers off
/// (`node_answers` = 0), the next such answer is refused too, and nothing
/// is written.
///
/// Positive controls: the approver's role inserts a grant with the same
/// SQL; the remembered answer's grant answers the next call, with no one
/// asked.
#[test]
fn fleet_a_node_s_role_records_a_grant_only_as_the_grant_of_an_answer() {
    use postgres::error::SqlState;
    let db = Database::migrated();
    let node = as_env(&db, "gatehouse_node");
    let mut as_node =
        postgres::Client::connect(&as_role(&db.url, "gatehouse_node"), postgres::NoTls).unwrap();
    let mut as_approver =
        postgres::Client::connect(&as_role(&db.url, "gatehouse_approver"), postgres::NoTls)
            .unwrap();
    let insert = "INSERT INTO grants (channel, sender_id, capability, target, granted_at) \
                  VALUES ('cli', 'tester', 'fs:write', '/srv/**', '2026-12-07T00:00:00Z')";
    assert_eq!(
        sqlstate(&mut as_node, insert),
        Some(SqlState::INSUFFICIENT_PRIVILEGE)
    );
    assert_eq!(sqlstate(&mut as_approver, insert), None);
    assert_eq!(
        sqlstate(&mut as_node, "UPDATE grants SET expires_at = NULL"),
        Some(SqlState::INSUFFICIENT_PRIVILEGE)
    );
    node.run(&[
        "grants",
        "add",
        "--channel",
        "cli",
        "--sender",
        "tester",
        "fs:write",
        "/srv/x/**",
    ])
    .expect_err(1, &["permission denied for table grants"]);
    db.client().batch_execute("DELETE FROM grants").unwrap();

    // A remembered answer given to a node's server (whose operator lets
    // the client's answer remember).
    node.elicited_remember();
    let ws = node.mkdir("ws");
    node.mkdir("ws/out");
    let ex = executors(&node);
    let server_args = args(&ws, &ex, "Supervised");
    let mut server = Client::start(&node, &server_args, true);
    let mut asked = 0;
    let mut remember = |_: &Value| {
        asked += 1;
        json!({"action": "accept",
               "content": {"decision": "allow_and_remember", "expires_in": "1h"}})
    };
    let write = |name: &str| json!({"path": format!("out/{name}.txt"), "content": name});
    let r = server.call("write-file", write("r1"), &mut remember);
    assert_eq!(r["isError"], false, "{r:#}");
    assert!(ws.join("out/r1.txt").exists());
    let r = server.call("write-file", write("r2"), &mut remember);
    assert_eq!(r["isError"], false, "{r:#}");
    assert!(ws.join("out/r2.txt").exists());
    assert_eq!(asked, 1, "the remembered answer answers the next call");
    let mut owner = db.client();
    let rows = owner
        .query(
            "SELECT g.capability, g.target, a.role::text, a.turn, a.capability, a.target, \
             a.expires_in_secs, a.grant_id = g.id, \
             extract(epoch FROM g.expires_at::timestamptz - g.granted_at::timestamptz)::bigint \
             FROM grants g JOIN node_answers a ON a.id = g.answer",
            &[],
        )
        .unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    let target = format!("{}/out/**", s(&ws));
    assert_eq!(r.get::<_, String>(0), "fs:write");
    assert_eq!(r.get::<_, String>(1), target);
    assert_eq!(r.get::<_, String>(2), "gatehouse_node");
    assert!(r.get::<_, String>(3).len() > 8, "the answer names its turn");
    assert_eq!(r.get::<_, String>(4), "fs:write");
    assert_eq!(r.get::<_, String>(5), target);
    assert_eq!(r.get::<_, Option<i64>>(6), Some(3600));
    assert!(r.get::<_, bool>(7));
    assert_eq!(r.get::<_, i64>(8), 3600);

    // The owner turns answers given to a node off.
    owner
        .batch_execute(
            "UPDATE gatehouse_meta SET value = 0 WHERE key = 'node_answers'; \
             DELETE FROM grants; DELETE FROM node_answers",
        )
        .unwrap();
    std::thread::sleep(BOUND);
    let r = server.call(
        "write-file",
        write("r3"),
        &mut |_: &Value| json!({"action": "accept", "content": {"decision": "allow_and_remember"}}),
    );
    assert_eq!(r["isError"], true, "{r:#}");
    assert!(
        r.to_string()
            .contains("this fleet takes no remembered answer given to a node"),
        "{r:#}"
    );
    assert!(!ws.join("out/r3.txt").exists());
    assert_eq!(
        sqlstate(
            &mut as_node,
            "SELECT gatehouse_remember('t', 'cli', 'tester', 'fs:write', '/srv/**', NULL, NULL)"
        ),
        Some(SqlState::INSUFFICIENT_PRIVILEGE)
    );
    let n: i64 = owner
        .query_one("SELECT count(*) FROM grants", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    assert_eq!(server.finish(), 0);
}

/// Turns a database's connections off (`false`: the node cannot reach it
/// at all, as when the server is down) or on again; the connections it
/// has are closed.
fn reachable(db: &Database, on: bool) {
    let name = db.url.rsplit('/').next().unwrap().to_string();
    let mut admin =
        postgres::Client::connect(&crate::support::pg::server_url(), postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS {on}"))
        .unwrap();
    if !on {
        admin
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
                &[&name],
            )
            .unwrap();
    }
}

/// A node that cannot reach its database refuses every turn with
/// `STATE_UNAVAILABLE` (nothing runs: a write is not made), and runs
/// again once the database is back.
///
/// Positive controls: the same calls succeed before and after.
#[test]
fn fleet_a_node_that_cannot_reach_the_database_refuses_its_turns_with_state_unavailable() {
    let db = Database::migrated();
    let env = Env::on(&db);
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let ex = executors(&env);
    let mut node = Client::start(&env, &args(&ws, &ex, "Full"), false);
    let write = |name: &str| json!({"path": format!("out/{name}.txt"), "content": name});
    let r = node.call("write-file", write("before"), &mut no_elicitation);
    assert_eq!(r["isError"], false, "{r:#}");
    reachable(&db, false);
    // Within the bound, the node knows.
    std::thread::sleep(BOUND);
    for name in ["down1", "down2"] {
        let r = node.call("write-file", write(name), &mut no_elicitation);
        assert_eq!(r["structuredContent"]["code"], "STATE_UNAVAILABLE", "{r:#}");
        assert!(!ws.join(format!("out/{name}.txt")).exists());
    }
    let r = node.call("hello", json!({"text": "hi"}), &mut no_elicitation);
    assert_eq!(r["structuredContent"]["code"], "STATE_UNAVAILABLE", "{r:#}");
    reachable(&db, true);
    let r = node.call("write-file", write("after"), &mut no_elicitation);
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(std::fs::read(ws.join("out/after.txt")).unwrap(), b"after");
    assert_eq!(node.finish(), 0);
    // The database is dropped with its connections on.
}

/// A queued `write-file` turn (Supervised, no terminal) through `node`:
/// exit 4, `APPROVAL_REQUIRED`; its pending id.
fn queued_on(node: &Env, ws: &std::path::Path, input: &str) -> String {
    let (run, v) = run_json(node, &guest("write-file"), ws, "Supervised", input, &[]);
    run.expect(4);
    assert_eq!(v["code"], "APPROVAL_REQUIRED", "{v:#}");
    v["pending_id"].as_str().unwrap().to_string()
}

/// A migrated database, a node's and an approver's environment on it,
/// and an entry the node queued: a `write-file` of `content` to
/// `out/NAME` in the node's `ws`. The database lives as long as the pair.
struct Queued {
    db: Database,
    node: Env,
    approver: Env,
    ws: std::path::PathBuf,
    /// The turn's input, for its retries.
    input: String,
    id: String,
}

fn queued_pair(name: &str, content: &str) -> Queued {
    let db = Database::migrated();
    let node = as_env(&db, "gatehouse_node");
    let approver = as_env(&db, "gatehouse_approver");
    let ws = node.mkdir("ws");
    node.mkdir("ws/out");
    let input =
        serde_json::json!({ "path": format!("out/{name}"), "content": content }).to_string();
    let id = queued_on(&node, &ws, &input);
    Queued {
        db,
        node,
        approver,
        ws,
        input,
        id,
    }
}

/// An environment whose commands log in as `role`.
fn as_env(db: &Database, role: &str) -> Env {
    Env {
        database_url: Some(as_role(&db.url, role)),
        ..Env::bare()
    }
}

/// A deny given through the database refuses the next retry of the turn
/// with `APPROVAL_REFUSED` (nothing is written), once: the retry after it
/// is queued anew. `approvals list` of another node shows the entry, and
/// neither node has an approvals.db: the queue is the database's.
///
/// An approval is bound to the policy hash, which covers the protected
/// paths (the state directory, the configuration's places): the nodes of
/// a fleet that retry each other's turns run with the same paths, as on
/// machines of one image. Here the retrying node is another process of
/// the queuing node's layout; the other `Env` lists.
///
/// Positive control: the entry is listed, waiting, before the answer.
#[test]
fn fleet_a_deny_given_through_the_database_refuses_the_next_retry_on_the_other_node() {
    let db = Database::migrated();
    let (a, b) = (Env::on(&db), Env::on(&db));
    let ws = a.mkdir("ws");
    a.mkdir("ws/out");
    let input = r#"{"path":"out/a.txt","content":"denied"}"#;
    let id = queued_on(&a, &ws, input);
    let listed = b.run(&["approvals", "list"]).json_lines();
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["status"], "pending");
    let approver = as_env(&db, "gatehouse_approver");
    let (run, e) = approver.answer_on_terminal(&["approvals", "deny", &id]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(e["status"], "denied", "{e:#}");
    assert_eq!(
        b.run(&["approvals", "list"]).json_lines()[0]["status"],
        "denied"
    );
    let (run, v) = run_json(&a, &guest("write-file"), &ws, "Supervised", input, &[]);
    run.expect(2);
    assert_eq!(v["code"], "APPROVAL_REFUSED", "{v:#}");
    assert_eq!(v["pending_id"], id.as_str(), "{v:#}");
    assert!(!ws.join("out/a.txt").exists());
    assert_ne!(queued_on(&a, &ws, input), id);
    let all = b.run(&["approvals", "list", "--all"]).json_lines();
    let denied: Vec<&Value> = all.iter().filter(|e| e["id"] == id.as_str()).collect();
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["status"], "consumed");
    assert_eq!(denied[0]["consumed_by"], v["turn"]);
    for node in [&a, &b] {
        assert!(!node.state_dir().join("approvals.db").exists());
    }
}

/// A node's credentials cannot answer a pending approval: `approvals
/// allow` and `deny` confirmed at a terminal fail with `permission
/// denied`, and the entry stays pending; nor can the node's role give
/// itself an answer in SQL (queue an entry already allowed, answer one, or
/// take back a consumption). The approver's role answers, and the node's
/// next retry runs once.
///
/// Positive control: the approver's `allow` succeeds and the retry
/// writes the file.
#[test]
fn fleet_a_node_s_role_cannot_answer_a_pending_approval_and_the_approver_s_role_can() {
    let Queued {
        db,
        node,
        approver,
        ws,
        input,
        id,
    } = queued_pair("a.txt", "approved");
    for verb in ["allow", "deny"] {
        let (run, _) = node.answer_on_terminal(&["approvals", verb, &id]);
        assert_eq!(run.code, 1, "{run:#?}");
        for part in [
            "cannot answer the pending approval",
            "permission denied for table pending",
        ] {
            assert!(run.stdout.contains(part), "{run:#?}");
        }
    }
    let listed = node.run(&["approvals", "list"]).json_lines();
    assert_eq!(listed[0]["status"], "pending", "{listed:#?}");
    let mut sql =
        postgres::Client::connect(&as_role(&db.url, "gatehouse_node"), postgres::NoTls).unwrap();
    let refused = |sql: &mut postgres::Client, q: &str| {
        let e = sql.batch_execute(q).unwrap_err();
        e.as_db_error().unwrap().message().to_string()
    };
    assert_eq!(
        refused(
            &mut sql,
            &format!("UPDATE pending SET status = 'allowed' WHERE id = '{id}'")
        ),
        "permission denied for table pending"
    );
    assert_eq!(
        refused(
            &mut sql,
            "INSERT INTO pending (id, turn, queued_at, expires_at, actor, executor,              executor_sha256, items, scope, input_sha256, args_sha256, definition_hash,              policy_hash, status) VALUES ('p-x', 't', 'q', 'e', 'main', 'w', 's', '[]', '[]',              'i', 'a', 'd', 'p', 'allowed')"
        ),
        "permission denied for table pending"
    );
    assert_eq!(
        refused(&mut sql, "DELETE FROM pending"),
        "permission denied for table pending"
    );
    let (run, e) = approver.answer_on_terminal(&["approvals", "allow", &id]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(e["status"], "allowed", "{e:#}");
    let (run, v) = run_json(&node, &guest("write-file"), &ws, "Supervised", &input, &[]);
    run.expect(0);
    assert_eq!(v["pending_id"], id.as_str(), "{v:#}");
    assert_eq!(std::fs::read(ws.join("out/a.txt")).unwrap(), b"approved");
    assert_eq!(
        refused(
            &mut sql,
            &format!("UPDATE pending SET consumed_by = NULL WHERE id = '{id}'")
        ),
        format!("pending approval `{id}` is consumed already")
    );
}

/// Sends `n` calls of `tool` with `arguments` to `node` at once (all
/// written before the first answer is read): their results, in any order.
fn call_at_once(node: &mut Client, n: usize, tool: &str, arguments: &Value) -> Vec<Value> {
    for _ in 0..n {
        let id = node.next;
        node.next += 1;
        node.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": tool, "arguments": arguments}}));
    }
    let mut results = Vec::new();
    while results.len() < n {
        let msg = node.recv();
        if msg.get("method").is_some() {
            // A notification (progress, a log line): not an answer.
            continue;
        }
        results.push(msg.get("result").cloned().unwrap_or(msg));
    }
    results
}

/// Issue 32: an entry queued by node A and answered once with `approvals
/// allow` (as the approver's role) runs exactly one turn while both nodes
/// retry it 100 times at the same moment: one call succeeds, and one
/// append is on disk; the 199 others end as a single node's retry after
/// the consumption does, `APPROVAL_REQUIRED`, queued anew. The entry is
/// consumed by the turn that ran.
///
/// The two nodes are two servers of one layout (an approval is bound to
/// the policy hash, which covers the protected paths; see the deny test
/// above), each with its own connections to the database.
///
/// Positive control: before the answer, node A's call is refused and
/// queued, and nothing is on disk.
#[test]
fn fleet_an_approval_queued_by_node_a_and_answered_once_runs_exactly_one_turn_while_both_nodes_retry_it_100_times_concurrently(
) {
    const RETRIES: usize = 100;
    let db = Database::migrated();
    let env = Env::on(&db);
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let ex = executors(&env);
    let server_args = args(&ws, &ex, "Supervised");
    let mut node_a = Client::start(&env, &server_args, false);
    let node_b = Client::start(&env, &server_args, false);
    let append = json!({"op": "append", "path": "out/once.txt", "content": "once\n"});
    let r = node_a.call("write-file", append.clone(), &mut no_elicitation);
    assert_eq!(r["structuredContent"]["code"], "APPROVAL_REQUIRED", "{r:#}");
    let id = r["structuredContent"]["pending_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!ws.join("out/once.txt").exists());
    let (run, e) =
        as_env(&db, "gatehouse_approver").answer_on_terminal(&["approvals", "allow", &id]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(e["status"], "allowed", "{e:#}");
    let start = std::sync::Arc::new(std::sync::Barrier::new(2));
    let retries: Vec<_> = [node_a, node_b]
        .into_iter()
        .map(|mut node| {
            let (start, append) = (start.clone(), append.clone());
            std::thread::spawn(move || {
                start.wait();
                let results = call_at_once(&mut node, RETRIES, "write-file", &append);
                (node, results)
            })
        })
        .collect();
    let mut results = Vec::new();
    for retry in retries {
        let (node, r) = retry.join().unwrap();
        results.extend(r);
        assert_eq!(node.finish(), 0);
    }
    assert_eq!(results.len(), 2 * RETRIES);
    let ran: Vec<&Value> = results.iter().filter(|r| r["isError"] == false).collect();
    assert_eq!(ran.len(), 1, "{ran:#?}");
    assert_eq!(ran[0]["structuredContent"]["op"], "append", "{:#}", ran[0]);
    let required = results
        .iter()
        .filter(|r| r["structuredContent"]["code"] == "APPROVAL_REQUIRED")
        .count();
    assert_eq!(required, 2 * RETRIES - 1);
    assert_eq!(std::fs::read(ws.join("out/once.txt")).unwrap(), b"once\n");
    // Each refused retry queued an entry; an actor keeps its newest 32
    // waiting, the others are dropped and counted, across both nodes.
    let cap = gatehouse::host::MAX_PENDING_PER_ACTOR;
    let listed = env.run(&["approvals", "list"]);
    listed.expect(0);
    assert_eq!(
        listed.stderr.trim_end(),
        format!(
            "{cap} entries listed, newest first; {cap} waiting for an answer; {} older unanswered entries of actor `main` dropped (at most {cap} wait per actor)",
            2 * RETRIES - 1 - cap
        )
    );
    let all = env.run(&["approvals", "list", "--all"]).json_lines();
    let consumed: Vec<&Value> = all.iter().filter(|e| e["status"] == "consumed").collect();
    assert_eq!(consumed.len(), 1, "{consumed:#?}");
    assert_eq!(consumed[0]["id"], id.as_str());
    assert_eq!(
        consumed[0]["consumed_by"],
        ran[0]["_meta"]["gatehouse/turn"]
    );
    assert!(!env.state_dir().join("approvals.db").exists());
}

/// With a database URL the pending approvals are a part of the shared
/// schema: `gatehouse migrate` makes no approvals.db (it lists the
/// database and the memory store), and a node does not look at an
/// approvals.db left in its state directory, even one of a schema version
/// it would refuse.
///
/// Positive control: without the URL, the same state directory's
/// approvals.db of version 7 is refused, naming it.
#[test]
fn fleet_migrate_makes_no_approvals_db_and_a_node_does_not_read_one() {
    let db = Database::new();
    let env = Env::on(&db);
    let ws = env.mkdir("ws");
    let hello = guest("hello");
    let m = env.run(&["--json", "migrate"]);
    m.expect(0);
    let made: Vec<Value> = m
        .json_lines()
        .iter()
        .map(|l| l["database"].clone())
        .collect();
    assert_eq!(made, [json!("postgresql")], "{m:#?}");
    let stray = env.state_dir().join("approvals.db");
    assert!(!stray.exists());
    // Nothing of the fleet's state is in the state directory at all.
    assert!(!env.state_dir().exists());
    std::fs::create_dir_all(env.state_dir()).unwrap();
    let conn = rusqlite::Connection::open(&stray).unwrap();
    conn.pragma_update(None, "user_version", 7).unwrap();
    drop(conn);
    let run = |env: &Env| env.run(&["run", s(&hello), "--workspace", s(&ws), "--input", "{}"]);
    run(&env).expect(0);
    let sqlite = Env {
        database_url: None,
        dir: env.dir,
        own_db: None,
    };
    run(&sqlite).expect_err(
        1,
        &[&format!(
            "approvals database `{}`: its schema version 7 is newer than this build knows (1)",
            s(&stray)
        )],
    );
}

/// "Allow and remember" given through the database records its grants in
/// the database (as the approver's role): the entry is `remembered` with
/// the grant's id, `grants list` of any node shows the grant, and the
/// node's retry runs on the grant without consuming anything.
///
/// Positive control: the retry before the answer is refused and queued.
#[test]
fn fleet_allow_and_remember_through_the_database_records_the_grants_in_it() {
    let db = Database::migrated();
    let node = Env::on(&db);
    let ws = node.mkdir("ws");
    node.mkdir("ws/out");
    let input = r#"{"path":"out/a.txt","content":"remembered"}"#;
    let id = queued_on(&node, &ws, input);
    let (run, e) = as_env(&db, "gatehouse_approver").answer_on_terminal(&[
        "approvals",
        "allow",
        &id,
        "--remember",
    ]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(e["status"], "remembered", "{e:#}");
    let grants = node.run(&["grants", "list"]).json_lines();
    assert_eq!(grants.len(), 1, "{grants:#?}");
    assert_eq!(e["grants"], json!([grants[0]["id"]]));
    assert_eq!(grants[0]["target"], format!("{}/out/**", s(&ws)));
    assert!(!node.grants_db().exists());
    let (run, v) = run_json(&node, &guest("write-file"), &ws, "Supervised", input, &[]);
    run.expect(0);
    assert_eq!(v["pending_id"], Value::Null, "{v:#}");
    assert_eq!(std::fs::read(ws.join("out/a.txt")).unwrap(), b"remembered");
}

/// The fleet's audit chain: every node's turns in one chain that
/// `history verify` of any node finds whole; a node's role may append
/// (through its turns) and read, but not edit, delete or relink a
/// record. Nodes link their own records: one a node inserts by hand with
/// a forged link is named by verify, and the turns after it still link
/// on (to it), so nothing is hidden behind it.
///
/// Positive control: the owner's edit of an earlier record is caught by
/// verify too, and named first.
#[test]
fn fleet_one_audit_chain_for_every_node_that_a_node_s_role_cannot_rewrite() {
    let db = Database::migrated();
    let (a, b) = (Env::on(&db), Env::on(&db));
    let ws = a.mkdir("ws");
    let hello = guest("hello");
    for node in [&a, &b, &a] {
        node.run(&["run", s(&hello), "--workspace", s(&ws), "--input", "{}"])
            .expect(0);
    }
    let whole = b.run(&["--json", "history", "verify"]);
    whole.expect(0);
    assert_eq!(whole.json_lines()[0]["records"], 3, "{whole:#?}");
    assert!(!a.state_dir().join("audit-chain.jsonl").exists());
    let node_url = as_role(&db.url, "gatehouse_node");
    let mut node = postgres::Client::connect(&node_url, postgres::NoTls).unwrap();
    for statement in [
        "UPDATE audit_chain SET body = 'x' WHERE seq = 2",
        "DELETE FROM audit_chain WHERE seq = 2",
        "UPDATE audit_chain SET seq = 9 WHERE seq = 2",
        "DELETE FROM audit_checkpoint",
    ] {
        let e = node.batch_execute(statement).unwrap_err();
        let message = e.as_db_error().map(|d| d.message().to_string());
        assert!(
            message
                .as_deref()
                .is_some_and(|m| m.starts_with("permission denied")),
            "{statement}: {e:?}"
        );
    }
    // A forged link: the database takes it (the node links its records),
    // and verify names it.
    node.batch_execute(
        "INSERT INTO audit_chain (seq, kind, turn, time, body, prev, hash) \
         VALUES (4, 'turn', 'forged', '2026-01-01T00:00:00Z', '{}', 'x', 'y')",
    )
    .unwrap();
    a.run(&["history", "verify"])
        .expect_err(2, &["record 4 (turn `forged`) was edited"]);
    // A node that forges a place already taken is refused by the key.
    let taken = node
        .batch_execute(
            "INSERT INTO audit_chain (seq, kind, turn, time, body, prev, hash) \
             VALUES (2, 'turn', 'again', '2026-01-01T00:00:00Z', '{}', 'x', 'y')",
        )
        .unwrap_err();
    assert_eq!(
        taken.code(),
        Some(&postgres::error::SqlState::UNIQUE_VIOLATION),
        "{taken:?}"
    );
    // The next turn links after the forged record: the chain goes on.
    b.run(&["run", s(&hello), "--workspace", s(&ws), "--input", "{}"])
        .expect(0);
    let last: (i64, String) = node
        .query_one(
            "SELECT seq, prev FROM audit_chain ORDER BY seq DESC LIMIT 1",
            &[],
        )
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(last, (5, "y".to_string()));
    db.client()
        .batch_execute("UPDATE audit_chain SET body = body || ' ' WHERE seq = 2")
        .unwrap();
    a.run(&["history", "verify"])
        .expect_err(2, &["record 2 (turn `"]);
}

/// `kill -9` of a node right after a turn returned loses no audit record
/// of that turn: it is committed to the database before the reply.
#[test]
fn fleet_kill_9_right_after_a_turn_returns_loses_no_audit_record() {
    let db = Database::migrated();
    let env = Env::on(&db);
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let ex = executors(&env);
    let mut node = Client::start(&env, &args(&ws, &ex, "Full"), false);
    let r = node.call("hello", json!({"text": "hi"}), &mut no_elicitation);
    assert_eq!(r["isError"], false, "{r:#}");
    let turn = r["_meta"]["gatehouse/turn"].as_str().unwrap().to_string();
    node.child.kill().unwrap();
    node.child.wait().unwrap();
    let rows = db
        .client()
        .query("SELECT turn FROM audit_chain", &[])
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<Vec<_>>();
    assert_eq!(rows, [turn]);
    env.run(&["history", "verify"]).expect(0);
}

/// A database migrated by an older build (schema version 1, before the
/// shared memory store) is refused by a node until `gatehouse migrate`
/// upgrades it, in place: what version 1 held (a grant) is kept, and the
/// memory table is added.
///
/// Positive control: after the upgrade the same run succeeds and the
/// grant still applies.
#[test]
fn fleet_migrate_upgrades_an_older_schema_which_a_node_refuses_until_then() {
    let db = Database::new();
    let pg = gatehouse::state::pg::Pg::new(&db.url).unwrap();
    assert_eq!(pg.migrate_to(1).unwrap(), (0, 1));
    let env = Env::on(&db);
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let out = format!("{}/out/**", s(&ws));
    // What version 1 holds: a grant, recorded in SQL as an older node did.
    db.client()
        .execute(
            "INSERT INTO grants (channel, sender_id, capability, target, granted_at) \
             VALUES ('cli', 'tester', 'fs:write', $1, '2026-12-06T00:00:00Z')",
            &[&out],
        )
        .unwrap();
    let input = r#"{"path":"out/a.txt","content":"after"}"#;
    let write = || run_json(&env, &guest("write-file"), &ws, "Supervised", input, &[]).0;
    write().expect_err(
        1,
        &[&format!(
            "postgresql at `{}`: its schema version is 1; this gatehouse needs version 6: run `gatehouse migrate` with an owner's url",
            db.url
        )],
    );
    assert!(!ws.join("out/a.txt").exists());
    let m = env.run(&["--json", "migrate"]);
    m.expect(0);
    assert_eq!(
        m.json_lines()[0],
        json!({"database": "postgresql", "path": db.url, "version": 6})
    );
    let memory: Option<String> = db
        .client()
        .query_one("SELECT to_regclass('memory')::text", &[])
        .unwrap()
        .get(0);
    assert_eq!(memory.as_deref(), Some("memory"));
    write().expect(0);
    assert_eq!(std::fs::read(ws.join("out/a.txt")).unwrap(), b"after");
}

/// `gatehouse --json history` on `node`: each turn's id, node, operation
/// count and undo state, in the order listed.
fn listed(node: &Env) -> Vec<(String, String, u64, String)> {
    let run = node.run(&["--json", "history"]);
    run.expect(0);
    run.json_lines()
        .iter()
        .map(|t| {
            (
                t["turn"].as_str().unwrap().to_string(),
                t["node"].as_str().unwrap().to_string(),
                t["operations"].as_u64().unwrap(),
                t["undo"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A database of schema version 3 (where a trigger linked the chain and
/// filled a `turns` table) upgrades in place to version 4: the turns
/// indexed before keep their node and undo state, the chain verifies
/// across the records the trigger linked and those the nodes link after.
///
/// Positive control: before the upgrade the version-3 index (its table)
/// holds the same turns.
#[test]
fn fleet_migrate_from_version_3_keeps_the_index_and_the_chain_goes_on() {
    let db = Database::new();
    let pg = gatehouse::state::pg::Pg::new(&db.url).unwrap();
    assert_eq!(pg.migrate_to(3).unwrap(), (0, 3));
    // A version-3 node would run these turns; the schema's own trigger
    // links and indexes them (what a version-3 build's nodes relied on).
    let mut c = db.client();
    let record = |turn: &str, undo: &str| {
        json!({"turn": turn, "executor": "hello", "actor": "main", "level": "Supervised",
               "started_at": format!("2026-12-06T10:00:0{}Z", &turn[2..]),
               "finished_at": "2026-12-06T10:00:09Z", "status": "ok", "undo": undo, "decisions": []})
        .to_string()
    };
    for (turn, ops) in [("t-1", 1i64), ("t-2", 0)] {
        c.execute(
            "INSERT INTO audit_chain (seq, kind, turn, time, body, prev, hash, node, operations) \
             VALUES (0, 'turn', $1, '2026-12-06T10:00:09Z', $2, '', '', 'old-node', $3)",
            &[&turn, &record(turn, "none"), &ops],
        )
        .unwrap();
    }
    c.execute("UPDATE turns SET undo = 'undone' WHERE turn = 't-1'", &[])
        .unwrap();
    let env = Env::on(&db);
    let before = vec![
        (
            "t-1".to_string(),
            "old-node".to_string(),
            1,
            "undone".to_string(),
        ),
        (
            "t-2".to_string(),
            "old-node".to_string(),
            0,
            "none".to_string(),
        ),
    ];
    let old: Vec<(String, String, u64, String)> = c
        .query(
            "SELECT turn, node, operations, undo FROM turns ORDER BY turn",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get::<_, i64>(2) as u64, r.get(3)))
        .collect();
    assert_eq!(old, before);
    assert_eq!(pg.migrate().unwrap(), (3, 6));
    let triggers: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'audit_chain'::regclass",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(triggers, 0);
    assert_eq!(listed(&env), before);
    // The nodes of this build link on from the trigger's last record.
    let ws = env.mkdir("ws");
    env.run(&[
        "run",
        s(&guest("hello")),
        "--workspace",
        s(&ws),
        "--input",
        "{}",
    ])
    .expect(0);
    let whole = env.run(&["--json", "history", "verify"]);
    whole.expect(0);
    assert_eq!(whole.json_lines()[0]["records"], 3, "{whole:#?}");
    let listed_now = listed(&env);
    assert_eq!(listed_now.len(), 3, "{listed_now:#?}");
    assert_eq!(listed_now[..2], before[..]);
    assert_eq!(listed_now[2].1, env.node());
}

/// Schema version 5 indexes the chain's rows by turn, and the history
/// index's lookup of one turn (`history show`, `undo`) is answered from
/// that index, not by reading the whole chain; the lookup still finds the
/// turn a node recorded.
///
/// Positive control: at version 4 (no such index) the same query's plan
/// does not name it.
#[test]
fn fleet_a_turn_is_looked_up_through_the_chains_turn_index_from_schema_version_5() {
    let db = Database::new();
    let pg = gatehouse::state::pg::Pg::new(&db.url).unwrap();
    let mut c = db.client();
    // A sequential scan is always possible; with it priced out, the plan
    // shows which index the query can use at all.
    let plan = |c: &mut postgres::Client| -> String {
        let mut tx = c.transaction().unwrap();
        tx.execute("SET LOCAL enable_seqscan = off", &[]).unwrap();
        let rows = tx
            .query(
                &format!("EXPLAIN {}", gatehouse::state::history::LOOKUP),
                &[&"20261207000000-1-0"],
            )
            .unwrap();
        let plan: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        tx.rollback().unwrap();
        plan.join("\n")
    };
    assert_eq!(pg.migrate_to(4).unwrap(), (0, 4));
    let before = plan(&mut c);
    assert!(!before.contains("audit_chain_turn"), "{before}");
    assert_eq!(pg.migrate_to(5).unwrap(), (4, 5));
    let after = plan(&mut c);
    assert!(
        after.contains("Bitmap Index Scan on audit_chain_turn"),
        "{after}"
    );
    // This build's nodes need the newest version.
    assert_eq!(pg.migrate().unwrap().0, 5);
    // The lookup still finds what a node recorded: node B is told which
    // node holds the journal of a turn A ran.
    let (a, b) = (Env::on(&db), Env::on(&db));
    let ws = a.mkdir("ws");
    a.mkdir("ws/out");
    let wrote = write_a(&a, &ws);
    refused_elsewhere(&b, &wrote, &a);
    // `history --turn` on B is answered by the same lookup.
    let shown = b.run(&["--json", "history", "--turn", &wrote]);
    shown.expect(0);
    let lines = shown.json_lines();
    assert_eq!(lines.len(), 1, "{shown:#?}");
    assert_eq!(
        (
            &lines[0]["turn"],
            &lines[0]["node"],
            &lines[0]["operations"]
        ),
        (&json!(wrote), &json!(a.node()), &json!(1))
    );
    b.run(&["history", "--turn", "20990101000000-1-1"])
        .expect_err(3, &["no turn `20990101000000-1-1` in the history"]);
}

/// A `write-file` turn through `node` writing `out/a.txt` in `ws`: its id.
fn write_a(node: &Env, ws: &std::path::Path) -> String {
    let (run, v) = run_json(
        node,
        &guest("write-file"),
        ws,
        "Full",
        r#"{"path":"out/a.txt","content":"a"}"#,
        &[],
    );
    run.expect(0);
    v["turn"].as_str().unwrap().to_string()
}

/// `undo --turn turn` on `node` is refused, naming `holder`, the node
/// that holds the turn's journal.
fn refused_elsewhere(node: &Env, turn: &str, holder: &Env) {
    node.run(&["undo", "--turn", turn]).expect_err(
        3,
        &[&format!(
            "turn `{turn}` ran on node `{}`, which holds its journal: undo it there",
            holder.node()
        )],
    );
}

/// A `remember` turn through `node` with `input`, as the node's role, in
/// the scopes and cap of `config`: its JSON.
fn remember_on(
    node: &Env,
    config: &std::path::Path,
    ws: &std::path::Path,
    input: &str,
) -> (crate::support::Run, Value) {
    run_json(
        node,
        &guest("remember"),
        ws,
        "Full",
        input,
        &["--config", s(config)],
    )
}

/// The memory store is the fleet's: a key a turn sets on node A is read
/// by node B's next turn, in the same scope only; the cap counts every
/// node's keys; a node's role (not the owner) reads and writes it; and an
/// undo of A's turn, made on A, removes the key for B too.
///
/// Positive controls: B reads the key before the undo; a key under the
/// cap is stored.
#[test]
fn fleet_the_memory_store_is_shared_by_the_nodes_with_its_scopes_and_cap() {
    let db = Database::migrated();
    let (a, b) = (as_env(&db, "gatehouse_node"), as_env(&db, "gatehouse_node"));
    let config = a.write(
        "gatehouse.toml",
        "[actors.main]\nskills = [\"*\"]\nmemory = [\"notes\", \"other\"]\n[limits]\nmemory_keys = 2\n",
    );
    let ws = a.mkdir("ws");
    let (run, set) = remember_on(
        &a,
        &config,
        &ws,
        r#"{"op":"set","key":"k","value":"from a"}"#,
    );
    run.expect(0);
    let (run, v) = remember_on(&b, &config, &ws, r#"{"op":"get","key":"k"}"#);
    run.expect(0);
    assert_eq!(output(&v)["value"], "from a", "{v:#}");
    // Nothing of it on either node's disk.
    assert!(!a.state_dir().join("memory.db").exists());
    assert!(!b.state_dir().join("memory.db").exists());
    // Another scope does not see it.
    let other = manifest(
        &b,
        "remember-other",
        &component("remember"),
        &[
            ("memory:read", Some("other")),
            ("memory:write", Some("other")),
        ],
    );
    let (run, v) = run_json(
        &b,
        &other,
        &ws,
        "Full",
        r#"{"op":"get","key":"k"}"#,
        &["--config", s(&config)],
    );
    run.expect(0);
    assert!(output(&v)["value"].is_null(), "{v:#}");
    // The cap (2) counts A's key: B's first new key fits, its second not.
    remember_on(
        &b,
        &config,
        &ws,
        r#"{"op":"set","key":"j","value":"from b"}"#,
    )
    .0
    .expect(0);
    let (run, v) = remember_on(&a, &config, &ws, r#"{"op":"set","key":"l","value":"x"}"#);
    run.expect(1);
    assert_eq!(
        v["run"]["result"]["error"]["denied"]["code"], "LIMIT_MEMORY_KEYS",
        "{v:#}"
    );
    let (_, v) = remember_on(&b, &config, &ws, r#"{"op":"list"}"#);
    assert_eq!(output(&v)["keys"], json!(["j", "k"]), "{v:#}");
    // The undo of A's turn, made on A, where its journal is.
    let turn = set["turn"].as_str().unwrap();
    a.run(&["undo", "--turn", turn]).expect(0);
    let (_, v) = remember_on(&b, &config, &ws, r#"{"op":"get","key":"k"}"#);
    assert!(output(&v)["value"].is_null(), "{v:#}");
    let (_, v) = remember_on(&b, &config, &ws, r#"{"op":"list"}"#);
    assert_eq!(output(&v)["keys"], json!(["j"]), "{v:#}");
}

/// The history index is the fleet's: `history` on any node lists every
/// node's turns with the node that ran each; `undo` of another node's turn
/// is refused (exit 3, naming the node that holds its journal) and
/// changes nothing; the undo made on that node reverses the write and
/// every node's `history` shows the turn undone. Both nodes log in with
/// the node role.
///
/// Positive control: the file is there until the undo on its own node.
#[test]
fn fleet_history_lists_every_node_s_turns_and_an_undo_runs_on_the_node_that_holds_the_journal() {
    let db = Database::migrated();
    let (a, b) = (as_env(&db, "gatehouse_node"), as_env(&db, "gatehouse_node"));
    let ws = a.mkdir("ws");
    a.mkdir("ws/out");
    let wrote = write_a(&a, &ws);
    let (run, v) = run_json(&b, &guest("hello"), &ws, "Supervised", "{}", &[]);
    run.expect(0);
    let read = v["turn"].as_str().unwrap().to_string();
    let both = vec![
        (wrote.clone(), a.node(), 1, "none".to_string()),
        (read.clone(), b.node(), 0, "none".to_string()),
    ];
    assert_eq!(listed(&a), both);
    assert_eq!(listed(&b), both);
    refused_elsewhere(&b, &wrote, &a);
    assert_eq!(std::fs::read(ws.join("out/a.txt")).unwrap(), b"a");
    a.run(&["undo", "--turn", &wrote]).expect(0);
    assert!(!ws.join("out/a.txt").exists());
    let mut undone = both.clone();
    undone[0].3 = "undone".to_string();
    assert_eq!(listed(&b), undone);
}

/// Appends to a fleet's audit chain are committed in groups: 8 threads of
/// one host appending 40 records each at once get 320 distinct sequence
/// numbers, 1 to 320, every record linked into one whole chain, in fewer
/// commits than records; each append returned only after its batch
/// committed (its record is there for a fresh reader at once).
#[test]
fn fleet_concurrent_audit_appends_are_committed_in_groups_and_make_one_whole_chain() {
    use gatehouse::state::AuditStore;
    let db = Database::migrated();
    let pg = gatehouse::state::pg::Pg::shared(&as_role(&db.url, "gatehouse_node")).unwrap();
    let store = std::sync::Arc::new(gatehouse::state::audit::pg::PgAudit::new(pg));
    let reader = gatehouse::state::audit::pg::PgAudit::new(std::sync::Arc::new(
        gatehouse::state::pg::Pg::new(&db.url).unwrap(),
    ));
    const THREADS: usize = 8;
    const EACH: usize = 40;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut seqs = Vec::new();
                for i in 0..EACH {
                    let seq = store
                        .append("turn", &format!("t{t}-{i}"), "2026-12-06T10:00:00Z", "{}")
                        .unwrap();
                    seqs.push(seq);
                }
                seqs
            })
        })
        .collect();
    let mut seqs: Vec<i64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    seqs.sort_unstable();
    let all = (THREADS * EACH) as i64;
    assert_eq!(seqs, (1..=all).collect::<Vec<_>>());
    let (checkpoint, rows) = reader.rows().unwrap();
    assert_eq!(rows.len(), THREADS * EACH);
    let whole = gatehouse::state::verify(checkpoint.as_ref(), &rows).unwrap();
    assert_eq!(whole.records, (THREADS * EACH) as u64);
    // Each thread's records are in its own order.
    for t in 0..THREADS {
        let mine: Vec<String> = rows
            .iter()
            .filter(|r| r.turn.starts_with(&format!("t{t}-")))
            .map(|r| r.turn.clone())
            .collect();
        let expected: Vec<String> = (0..EACH).map(|i| format!("t{t}-{i}")).collect();
        assert_eq!(mine, expected);
    }
    let batches = store.batches();
    assert!(
        batches < (THREADS * EACH) as u64,
        "{batches} commits for {} records",
        THREADS * EACH
    );
}

/// Two nodes appending at once (each its own connections and head) link
/// one chain: a node whose head another took meanwhile is refused by the
/// key, reads the head again and links anew, so every record gets its own
/// number and the chain verifies whole.
#[test]
fn fleet_two_nodes_appending_at_once_relink_into_one_whole_chain() {
    use gatehouse::state::AuditStore;
    let db = Database::migrated();
    let node_url = as_role(&db.url, "gatehouse_node");
    let nodes: Vec<_> = (0..2)
        .map(|_| {
            std::sync::Arc::new(gatehouse::state::audit::pg::PgAudit::new(
                std::sync::Arc::new(gatehouse::state::pg::Pg::new(&node_url).unwrap()),
            ))
        })
        .collect();
    // One after the other: B takes the place A's head points past, so A
    // is refused once and links after B's record.
    let time = "2026-12-06T10:00:00Z";
    assert_eq!(nodes[0].append("turn", "a-1", time, "{}").unwrap(), 1);
    assert_eq!(nodes[1].append("turn", "b-1", time, "{}").unwrap(), 2);
    assert_eq!(nodes[0].append("turn", "a-2", time, "{}").unwrap(), 3);
    assert_eq!((nodes[0].relinks(), nodes[1].relinks()), (1, 0));
    // Then at once, from three threads of each.
    const THREADS: usize = 3;
    const EACH: usize = 40;
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2 * THREADS));
    let handles: Vec<_> = (0..2 * THREADS)
        .map(|t| {
            let (store, barrier) = (nodes[t % 2].clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                (0..EACH)
                    .map(|i| {
                        store
                            .append("turn", &format!("t{t}-{i}"), "2026-12-06T10:00:00Z", "{}")
                            .unwrap()
                    })
                    .collect::<Vec<i64>>()
            })
        })
        .collect();
    let mut seqs: Vec<i64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    seqs.sort_unstable();
    let all = (2 * THREADS * EACH) as i64 + 3;
    assert_eq!(seqs, (4..=all).collect::<Vec<_>>());
    let (checkpoint, rows) = nodes[0].rows().unwrap();
    let whole = gatehouse::state::verify(checkpoint.as_ref(), &rows).unwrap();
    assert_eq!(whole.records, all as u64);
}

/// In a fleet, `approvals allow --yes` is taken from any account (user
/// ids of different machines mean nothing): the separation is the
/// database's role. The approver's role answers without a terminal, from
/// the very account that queued the entry, and the node's next retry runs
/// once; the node's role is refused by the database (`permission denied`)
/// and the entry stays pending.
///
/// Positive control: before the approver's answer the entry is pending
/// and nothing is written.
#[test]
fn fleet_approvals_yes_is_separated_by_the_database_role_not_the_account() {
    let Queued {
        db: _db,
        node,
        approver,
        ws,
        input,
        id,
    } = queued_pair("y.txt", "yes");
    node.run(&["approvals", "allow", &id, "--yes"])
        .expect_err(1, &["permission denied"]);
    let listed = approver.run(&["approvals", "list"]).json_lines();
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["status"], "pending");
    assert!(!ws.join("out/y.txt").exists());
    let run = approver.run(&["approvals", "allow", &id, "--yes"]);
    run.expect(0);
    assert_eq!(run.json_lines()[0]["status"], "allowed", "{run:#?}");
    let (run, _) = run_json(&node, &guest("write-file"), &ws, "Supervised", &input, &[]);
    run.expect(0);
    assert_eq!(std::fs::read(ws.join("out/y.txt")).unwrap(), b"yes");
}
