//! The command line, end to end: each test runs the real binary in its own
//! sealed temporary environment.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::support::{s, Env};

// ---------------------------------------------------------------------------
// policy check / table / registry / codes

#[test]
fn check_supervised_write_needs_approval_and_read_only_denies() {
    let env = Env::new();
    env.run(&["policy", "check", "Supervised", "fs:write"])
        .expect_stdout(4, &["approval_required"]);
    env.run(&["policy", "check", "ReadOnly", "fs:write"])
        .expect_stdout(2, &["denied"]);
    env.run(&["policy", "check", "Full", "fs:write"])
        .expect_stdout(0, &["allowed"]);
    env.run(&["policy", "check", "ReadOnly", "compute:pure"])
        .expect_stdout(0, &["allowed"]);
    // --json gives the matrix cell and the effective outcome.
    let run = env.run(&["--json", "policy", "check", "Supervised", "fs:write"]);
    run.expect(4);
    let v = &run.json_lines()[0];
    assert_eq!(v["level"], "Supervised");
    assert_eq!(v["capability"], "fs:write");
    assert_eq!(v["matrix"], "approval_required");
    assert_eq!(v["outcome"], "approval_required");
    assert_eq!(v["grant_id"], Value::Null);
}

/// The registry as DESIGN.md states it: name, critical, approval, target.
const REGISTRY: [(&str, bool, &str, &str); 14] = [
    ("compute:pure", false, "none", "none"),
    ("time:read", false, "none", "none"),
    ("env:read", false, "per_target", "exact"),
    ("fs:read", false, "per_target", "path_glob"),
    ("fs:write", true, "per_target", "path_glob"),
    ("network:sites", false, "per_target", "host"),
    ("memory:read", false, "per_target", "exact"),
    ("memory:write", true, "per_target", "exact"),
    ("human:ask", false, "none", "none"),
    ("delegate:call", false, "per_target", "exact"),
    ("code:exec", true, "always", "exact"),
    ("system:admin", true, "always", "none"),
    ("provider:access", false, "per_target", "exact"),
    ("config:read", false, "per_target", "exact"),
];

#[test]
fn registry_has_the_fourteen_entries_with_their_fields() {
    let env = Env::new();
    let run = env.run(&["policy", "registry"]);
    run.expect(0);
    let rows = run.json_lines();
    assert_eq!(rows.len(), 14, "{run:#?}");
    for (row, (name, critical, approval, target)) in rows.iter().zip(REGISTRY) {
        assert_eq!(row["name"], name, "{row}");
        assert_eq!(row["critical"], critical, "{row}");
        assert_eq!(row["default_approval"], approval, "{row}");
        assert_eq!(row["target_kind"], target, "{row}");
        assert!(
            row["bound_to"].as_str().is_some_and(|b| !b.is_empty()),
            "{row}"
        );
        let keys: BTreeSet<&str> = row
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            BTreeSet::from([
                "name",
                "critical",
                "default_approval",
                "target_kind",
                "bound_to"
            ])
        );
    }
}

/// The three rules of metnos-policy §3.1, recomputed here from the
/// registry the binary prints (not from the library).
fn rule(level: &str, class: &str, critical: bool, name: &str) -> &'static str {
    match level {
        "ReadOnly" => {
            if class == "none" && !critical {
                "allowed"
            } else if [
                "fs:read",
                "env:read",
                "memory:read",
                "network:sites",
                "provider:access",
                "config:read",
            ]
            .contains(&name)
            {
                "approval_required"
            } else {
                "denied"
            }
        }
        "Supervised" => {
            if class == "none" {
                "allowed"
            } else {
                "approval_required"
            }
        }
        "Full" => {
            if class == "always" {
                "approval_required"
            } else {
                "allowed"
            }
        }
        other => panic!("unexpected level {other}"),
    }
}

#[test]
fn table_has_42_lines_that_agree_with_the_three_rules() {
    let env = Env::new();
    let registry = env.run(&["policy", "registry"]);
    registry.expect(0);
    let specs: BTreeMap<String, (String, bool)> = registry
        .json_lines()
        .into_iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                (
                    r["default_approval"].as_str().unwrap().to_string(),
                    r["critical"].as_bool().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(specs.len(), 14);

    let table = env.run(&["policy", "table"]);
    table.expect(0);
    let lines = table.lines();
    assert_eq!(lines.len(), 42, "{table:#?}");
    let mut cells = BTreeSet::new();
    for row in table.json_lines() {
        let level = row["level"].as_str().unwrap();
        let cap = row["capability"].as_str().unwrap();
        let outcome = row["outcome"].as_str().unwrap();
        let (class, critical) = &specs[cap];
        assert_eq!(
            outcome,
            rule(level, class, *critical, cap),
            "cell {level} × {cap} disagrees with the rules"
        );
        assert!(
            cells.insert((level.to_string(), cap.to_string())),
            "duplicate {row}"
        );
    }
    let levels: BTreeSet<&str> = cells.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(levels, BTreeSet::from(["ReadOnly", "Supervised", "Full"]));
    // And `policy check` agrees with the table, cell by cell.
    for (level, cap) in &cells {
        let (class, critical) = &specs[cap];
        let want = rule(level, class, *critical, cap);
        let code = match want {
            "allowed" => 0,
            "denied" => 2,
            _ => 4,
        };
        env.run(&["policy", "check", level, cap])
            .expect_stdout(code, &[want]);
    }
}

/// The codes issue 3 defines (the sandbox adds its own after them).
const ISSUE3_CODES: [&str; 25] = [
    "UNKNOWN_REQUEST",
    "UNKNOWN_ACTOR",
    "UNKNOWN_TARGET",
    "DELEGATION_NOT_ALLOWED",
    "PRIVATE_MEMORY_DENIED",
    "MEMORY_NOT_GRANTED",
    "WORKSPACE_NOT_GRANTED",
    "WORKSPACE_READ_ONLY",
    "WORKSPACE_SCOPE_MISMATCH",
    "PATH_RESOLUTION_FAILED",
    "POLICY_MUTATION_DENIED",
    "DEFINITION_MUTATION_DENIED",
    "RAW_RUNTIME_TOOL_DENIED",
    "INDIRECT_TOOL_REQUEST",
    "TOOL_NOT_GRANTED",
    "SKILL_NOT_GRANTED",
    "SUBAGENT_NOT_GRANTED",
    "MCP_SERVER_NOT_GRANTED",
    "CAPABILITY_UNKNOWN",
    "CAPABILITY_DENIED",
    "TARGET_MISMATCH",
    "APPROVAL_REQUIRED",
    "APPROVAL_REFUSED",
    "SNAPSHOT_MISMATCH",
    "DIGEST_MISMATCH",
];

#[test]
fn codes_lists_every_code_with_its_meaning() {
    let env = Env::new();
    let run = env.run(&["policy", "codes"]);
    run.expect(0);
    let rows = run.json_lines();
    let names: Vec<&str> = rows.iter().map(|r| r["code"].as_str().unwrap()).collect();
    assert_eq!(names[..ISSUE3_CODES.len()], ISSUE3_CODES);
    let unique: BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), names.len(), "duplicate code");
    let lib: Vec<&str> = gatehouse::policy::DenyCode::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    assert_eq!(names, lib);
    for r in &rows {
        assert!(r["meaning"].as_str().is_some_and(|m| !m.is_empty()), "{r}");
        assert!(r["family"].as_str().is_some_and(|f| !f.is_empty()), "{r}");
    }
}

// ---------------------------------------------------------------------------
// the always-class hole, closed

#[test]
fn code_exec_cannot_be_granted_and_stays_approval_required() {
    let env = Env::new();
    let check = |cap: &str, target: Option<&str>| {
        let mut args = vec!["policy", "check", "Full", cap];
        if let Some(t) = target {
            args.extend(["--target", t]);
        }
        args.extend(["--channel", "cli", "--sender", "alice"]);
        env.run(&args).expect_stdout(4, &["approval_required"]);
    };
    check("code:exec", Some("ls"));

    let run = env.run(&[
        "grants",
        "add",
        "--channel",
        "cli",
        "--sender",
        "alice",
        "code:exec",
        "ls",
    ]);
    assert_ne!(run.code, 0, "{run:#?}");
    run.expect_err(3, &["`code:exec`", "always-class"])
        .expect_lowercase_message();
    assert_eq!(run.stdout, "");
    check("code:exec", Some("ls"));

    let run = env.run(&[
        "grants",
        "add",
        "--channel",
        "cli",
        "--sender",
        "alice",
        "system:admin",
        "x",
    ]);
    run.expect_err(3, &["`system:admin`", "always-class"])
        .expect_lowercase_message();
    check("code:exec", Some("ls"));
    check("system:admin", None);

    // Nothing was recorded; not even the database was created.
    assert!(!env.grants_db().exists());
    env.run(&["grants", "list", "--all"]).expect_stdout(0, &[]);
}

#[test]
fn a_hand_inserted_code_exec_row_is_ignored() {
    let env = Env::bare();
    // Create the store through the CLI, then insert behind its back.
    env.run(&[
        "grants",
        "add",
        "--channel",
        "cli",
        "--sender",
        "alice",
        "fs:read",
        "/tmp/**",
    ])
    .expect(0);
    let conn = rusqlite::Connection::open(env.grants_db()).unwrap();
    conn.execute(
        "INSERT INTO grants (channel, sender_id, capability, target, granted_at) \
         VALUES ('cli', 'alice', 'code:exec', 'ls', '2020-01-01T00:00:00Z')",
        [],
    )
    .unwrap();
    drop(conn);
    let all = env.run(&["grants", "list"]);
    assert_eq!(all.json_lines().len(), 2, "{all:#?}");
    env.run(&[
        "policy",
        "check",
        "Full",
        "code:exec",
        "--target",
        "ls",
        "--channel",
        "cli",
        "--sender",
        "alice",
    ])
    .expect_stdout(4, &["approval_required"]);
}

// ---------------------------------------------------------------------------
// grants

fn add(env: &Env, sender: &str, cap: &str, target: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "grants",
        "add",
        "--channel",
        "cli",
        "--sender",
        sender,
        cap,
        target,
    ];
    args.extend(extra);
    let run = env.run(&args);
    run.expect(0);
    let rows = run.json_lines();
    assert_eq!(rows.len(), 1, "{run:#?}");
    rows.into_iter().next().unwrap()
}

fn check(env: &Env, level: &str, target: &str, sender: &str) -> (i32, String) {
    let run = env.run(&[
        "policy",
        "check",
        level,
        "fs:write",
        "--target",
        target,
        "--channel",
        "cli",
        "--sender",
        sender,
    ]);
    assert_eq!(run.lines().len(), 1, "{run:#?}");
    (run.code, run.stdout.trim_end().to_string())
}

fn allowed() -> (i32, String) {
    (0, "allowed".into())
}
fn approval() -> (i32, String) {
    (4, "approval_required".into())
}
fn denied() -> (i32, String) {
    (2, "denied".into())
}

#[test]
fn a_grant_lifts_approval_for_exactly_its_identity_and_target() {
    let env = Env::new();
    assert_eq!(check(&env, "Supervised", "/tmp/x/a", "alice"), approval());

    let g = add(&env, "alice", "fs:write", "/tmp/x/**", &[]);
    assert_eq!(g["channel"], "cli");
    assert_eq!(g["sender_id"], "alice");
    assert_eq!(g["capability"], "fs:write");
    assert_eq!(g["target"], "/tmp/x/**");
    assert_eq!(g["revoked_at"], Value::Null);
    assert_eq!(g["expires_at"], Value::Null);
    let id = g["id"].as_i64().unwrap().to_string();

    assert_eq!(check(&env, "Supervised", "/tmp/x/a", "alice"), allowed());
    assert_eq!(
        check(&env, "Supervised", "/tmp/x/deeper/b", "alice"),
        allowed()
    );
    assert_eq!(check(&env, "Supervised", "/tmp/x/a", "bob"), approval());
    assert_eq!(check(&env, "Supervised", "/tmp/y/a", "alice"), approval());
    assert_eq!(check(&env, "ReadOnly", "/tmp/x/a", "alice"), denied());
    // Another channel with the same sender is another identity.
    env.run(&[
        "policy",
        "check",
        "Supervised",
        "fs:write",
        "--target",
        "/tmp/x/a",
        "--channel",
        "mcp",
        "--sender",
        "alice",
    ])
    .expect_stdout(4, &["approval_required"]);

    // --json names the grant.
    let run = env.run(&[
        "--json",
        "policy",
        "check",
        "Supervised",
        "fs:write",
        "--target",
        "/tmp/x/a",
        "--channel",
        "cli",
        "--sender",
        "alice",
    ]);
    run.expect(0);
    let v = &run.json_lines()[0];
    assert_eq!(v["matrix"], "approval_required");
    assert_eq!(v["outcome"], "allowed");
    assert_eq!(v["grant_id"].to_string(), id);

    let revoked = env.run(&["grants", "revoke", &id]);
    revoked.expect(0);
    let r = &revoked.json_lines()[0];
    assert_eq!(r["id"].to_string(), id);
    assert!(r["revoked_at"].is_string(), "{r}");
    assert_eq!(check(&env, "Supervised", "/tmp/x/a", "alice"), approval());

    // Revoking twice, or an unknown id, is invalid input naming it.
    env.run(&["grants", "revoke", &id])
        .expect_err(3, &[&format!("`{id}`"), "already revoked"])
        .expect_lowercase_message();
    env.run(&["grants", "revoke", "999"])
        .expect_err(3, &["`999`"])
        .expect_lowercase_message();
    env.run(&["grants", "revoke", "abc"])
        .expect_err(3, &["`abc`"])
        .expect_lowercase_message();
}

#[test]
fn an_expired_grant_no_longer_applies() {
    let env = Env::new();
    // A grant with a distant expiry applies.
    add(
        &env,
        "alice",
        "fs:write",
        "/tmp/long/**",
        &["--expires-in", "1h"],
    );
    assert_eq!(check(&env, "Supervised", "/tmp/long/a", "alice"), allowed());

    let g = add(
        &env,
        "alice",
        "fs:write",
        "/tmp/x/**",
        &["--expires-in", "1s"],
    );
    let at = |k: &str| gatehouse::policy::UtcTime::parse(g[k].as_str().unwrap()).unwrap();
    assert_eq!(at("expires_at"), at("granted_at").plus_seconds(1));
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(check(&env, "Supervised", "/tmp/x/a", "alice"), approval());
    assert_eq!(check(&env, "Supervised", "/tmp/long/a", "alice"), allowed());
    // Expired grants leave the active list but stay in --all.
    let active = env.run(&["grants", "list"]);
    let targets: Vec<String> = active
        .json_lines()
        .iter()
        .map(|g| g["target"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(targets, ["/tmp/long/**"]);
    assert_eq!(env.run(&["grants", "list", "--all"]).json_lines().len(), 2);
}

#[test]
fn grants_list_is_json_lines_and_all_includes_revoked() {
    let env = Env::new();
    // No database yet: an empty list, and no file created by reading.
    env.run(&["grants", "list"]).expect_stdout(0, &[]);
    assert!(!env.grants_db().exists());

    let a = add(&env, "alice", "fs:write", "/tmp/x/**", &[]);
    let b = add(&env, "bob", "network:sites", "Example.COM:443", &[]);
    let c = add(
        &env,
        "alice",
        "env:read",
        "HOME",
        &["--granted-by", "carol"],
    );
    // Host patterns are stored canonical (lowercase).
    assert_eq!(b["target"], "example.com:443");
    assert_eq!(c["granted_by"], "carol");
    // The default granted_by is the login name.
    assert_eq!(a["granted_by"], "tester");

    let run = env.run(&["grants", "list"]);
    run.expect(0);
    let rows = run.json_lines();
    assert_eq!(rows, vec![a.clone(), b.clone(), c.clone()]);
    for r in &rows {
        let keys: BTreeSet<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            BTreeSet::from([
                "id",
                "channel",
                "sender_id",
                "capability",
                "target",
                "granted_at",
                "expires_at",
                "granted_by",
                "revoked_at"
            ])
        );
    }

    env.run(&["grants", "revoke", &b["id"].to_string()])
        .expect(0);
    let ids = |rows: Vec<Value>| {
        rows.iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect::<Vec<_>>()
    };
    let active = env.run(&["grants", "list"]);
    assert_eq!(
        ids(active.json_lines()),
        [a["id"].as_i64().unwrap(), c["id"].as_i64().unwrap()]
    );
    let all = env.run(&["grants", "list", "--all"]);
    let all_rows = all.json_lines();
    assert_eq!(all_rows.len(), 3);
    assert!(all_rows[1]["revoked_at"].is_string(), "{all:#?}");
    assert_eq!(all_rows[1]["id"], b["id"]);
}

#[test]
fn grants_for_a_target_of_the_wrong_kind_or_no_target_are_refused() {
    let env = Env::new();
    let add = |cap: &str, target: &str| {
        env.run(&[
            "grants",
            "add",
            "--channel",
            "cli",
            "--sender",
            "alice",
            cap,
            target,
        ])
    };
    add("time:read", "x")
        .expect_err(3, &["`time:read`", "takes no target"])
        .expect_lowercase_message();
    add("network:sites", "/tmp/x")
        .expect_err(3, &["`/tmp/x`"])
        .expect_lowercase_message();
    add("env:read", "HO*")
        .expect_err(3, &["`HO*`"])
        .expect_lowercase_message();
    assert!(!env.grants_db().exists());
}

// ---------------------------------------------------------------------------
// tier 3

fn tier3(env: &Env, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["--json", "test", "--tier", "3"];
    args.extend(extra);
    let run = env.run(&args);
    run.expect(0);
    let rows = run.json_lines();
    assert!(!rows.is_empty());
    for r in &rows {
        match r["status"].as_str().unwrap() {
            // Both paths (the policy and the host) gave the exact code.
            "pass" => {
                assert_eq!(r["expected"], r["got"], "{r}");
                assert_eq!(r["expected"], r["host_got"], "{r}");
            }
            other => panic!("case status {other}: {r}"),
        }
    }
    rows
}

/// The 24 cases of one actor, in order.
const TIER3_CASES: [(&str, &str); 24] = [
    ("gate.unknown_request", "UNKNOWN_REQUEST"),
    ("gate.unknown_actor", "UNKNOWN_ACTOR"),
    ("delegation.unknown_target", "UNKNOWN_TARGET"),
    ("delegation.not_allowed", "DELEGATION_NOT_ALLOWED"),
    ("memory.private", "PRIVATE_MEMORY_DENIED"),
    ("memory.not_granted", "MEMORY_NOT_GRANTED"),
    ("workspace.path_resolution", "PATH_RESOLUTION_FAILED"),
    ("workspace.not_granted", "WORKSPACE_NOT_GRANTED"),
    ("workspace.read_only", "WORKSPACE_READ_ONLY"),
    ("workspace.scope_mismatch", "WORKSPACE_SCOPE_MISMATCH"),
    ("configuration.policy", "POLICY_MUTATION_DENIED"),
    ("configuration.policy_path", "POLICY_MUTATION_DENIED"),
    ("configuration.definition", "DEFINITION_MUTATION_DENIED"),
    ("tool.raw_runtime", "RAW_RUNTIME_TOOL_DENIED"),
    ("tool.indirect", "INDIRECT_TOOL_REQUEST"),
    ("tool.not_granted", "TOOL_NOT_GRANTED"),
    ("tool.mcp_server", "MCP_SERVER_NOT_GRANTED"),
    ("skill.not_granted", "SKILL_NOT_GRANTED"),
    ("subagent.not_granted", "SUBAGENT_NOT_GRANTED"),
    ("mcp.not_granted", "MCP_SERVER_NOT_GRANTED"),
    ("capability.unknown", "CAPABILITY_UNKNOWN"),
    ("capability.target_mismatch", "TARGET_MISMATCH"),
    ("capability.secret_env", "SECRET_ENV_DENIED"),
    ("capability.denied", "CAPABILITY_DENIED"),
];

#[test]
fn tier3_runs_all_24_cases_on_the_default_config_and_skips_none() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let rows = tier3(&env, &["--workspace", s(&ws)]);
    let got: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["case"].as_str().unwrap(), r["expected"].as_str().unwrap()))
        .collect();
    assert_eq!(got, TIER3_CASES.to_vec());
    assert!(rows.iter().all(|r| r["actor"] == "main"));
    // The three former holes run on the suite's own fixture actors.
    let fixture = |case: &str| {
        rows.iter().find(|r| r["case"] == case).unwrap()["fixture"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(fixture("workspace.read_only"), "main.tier3-read-only");
    assert_eq!(fixture("skill.not_granted"), "main.tier3-read-only");
    assert_eq!(fixture("workspace.scope_mismatch"), "main.tier3-elsewhere");
    let ro = rows
        .iter()
        .find(|r| r["case"] == "workspace.read_only")
        .unwrap();
    assert_eq!(
        ro["request"]["path"]["resolved"],
        format!("{}/gatehouse-tier3-probe", s(&ws))
    );
    // Plain output ends with the summary line, exactly.
    let run = env.run(&["test", "--tier", "3", "--workspace", s(&ws)]);
    run.expect(0);
    assert_eq!(run.lines().len(), 25);
    assert_eq!(
        *run.lines().last().unwrap(),
        "tier 3: 24 passed, 0 failed, 0 skipped"
    );
    assert!(run.lines()[..24].iter().all(|l| l.starts_with("pass  ")));
    assert_eq!(run.stderr, "");
}

#[test]
fn tier3_agent_test_actor_is_test_with_actor() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let seed = env.run(&[
        "agent",
        "test",
        "main",
        "--tier",
        "3",
        "--workspace",
        s(&ws),
    ]);
    seed.expect(0);
    assert_eq!(
        *seed.lines().last().unwrap(),
        "tier 3: 24 passed, 0 failed, 0 skipped"
    );
    let plain = env.run(&[
        "test",
        "--tier",
        "3",
        "--actor",
        "main",
        "--workspace",
        s(&ws),
    ]);
    plain.expect(0);
    assert_eq!(seed.stdout, plain.stdout);
    env.run(&[
        "agent",
        "test",
        "nobody",
        "--tier",
        "3",
        "--workspace",
        s(&ws),
    ])
    .expect_err(3, &["unknown actor `nobody`", "`main`"])
    .expect_lowercase_message();
    env.run(&[
        "agent",
        "test",
        "main",
        "--tier",
        "2",
        "--workspace",
        s(&ws),
    ])
    .expect_err(3, &["unknown tier `2`"])
    .expect_lowercase_message();
}

#[test]
fn tier3_counts_a_skip_as_a_failure_unless_allowed() {
    // With `/` as the turn's workspace no root can lie outside it, nor a
    // probe path outside every root: two cases cannot run.
    let env = Env::new();
    let run = env.run(&["test", "--tier", "3", "--workspace", "/"]);
    run.expect(1);
    assert_eq!(
        *run.lines().last().unwrap(),
        "tier 3: 22 passed, 0 failed, 2 skipped"
    );
    let skipped: Vec<&str> = run
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("skip  "))
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(
        skipped[0].contains(" workspace.not_granted "),
        "{skipped:?}"
    );
    assert!(
        skipped[1].contains(" workspace.scope_mismatch "),
        "{skipped:?}"
    );
    assert_eq!(
        run.stderr,
        "gatehouse: 2 case(s) skipped: a skip fails the run unless --allow-skips is given\n"
    );
    let allowed = env.run(&["test", "--tier", "3", "--workspace", "/", "--allow-skips"]);
    allowed.expect(0);
    assert_eq!(
        *allowed.lines().last().unwrap(),
        "tier 3: 22 passed, 0 failed, 2 skipped"
    );
}

/// The codes of the eight ALP kinds (plus the gate).
const ALP_CODES: [&str; 18] = [
    "UNKNOWN_REQUEST",
    "UNKNOWN_ACTOR",
    "UNKNOWN_TARGET",
    "DELEGATION_NOT_ALLOWED",
    "PRIVATE_MEMORY_DENIED",
    "MEMORY_NOT_GRANTED",
    "WORKSPACE_NOT_GRANTED",
    "WORKSPACE_READ_ONLY",
    "WORKSPACE_SCOPE_MISMATCH",
    "PATH_RESOLUTION_FAILED",
    "POLICY_MUTATION_DENIED",
    "DEFINITION_MUTATION_DENIED",
    "RAW_RUNTIME_TOOL_DENIED",
    "INDIRECT_TOOL_REQUEST",
    "TOOL_NOT_GRANTED",
    "SKILL_NOT_GRANTED",
    "SUBAGENT_NOT_GRANTED",
    "MCP_SERVER_NOT_GRANTED",
];

/// Two actors, each with a read-only root inside the turn's workspace and
/// a root outside it, neither allowed every executor.
fn rich_config(env: &Env) -> (std::path::PathBuf, std::path::PathBuf) {
    let turn = env.mkdir("project");
    let docs = env.mkdir("project/docs");
    let vendor = env.mkdir("project/vendor");
    let notes = env.mkdir("notes");
    let scratch = env.mkdir("scratch");
    let config = env.write(
        "etc/gatehouse.toml",
        &format!(
            r#"level = "Supervised"

[actors.main]
channel = "cli"
sender = "alice"
skills = ["hello", "write-file"]
subagents = ["reviewer"]
mcp_servers = ["github"]
delegates_to = ["worker"]
memory = ["team"]
tools = ["ls", "git"]
workspaces = [
  {{ path = "{turn}", mode = "read-write" }},
  {{ path = "{docs}", mode = "read-only" }},
  {{ path = "{notes}", mode = "read-only" }},
]

[actors.worker]
channel = "cli"
sender = "worker-bot"
skills = ["echo"]
memory = ["scratchpad"]
tools = ["cat"]
workspaces = [
  {{ path = "{vendor}", mode = "read-only" }},
  {{ path = "{scratch}", mode = "read-write" }},
]
"#,
            turn = s(&turn),
            docs = s(&docs),
            notes = s(&notes),
            vendor = s(&vendor),
            scratch = s(&scratch),
        ),
    );
    (config, turn)
}

#[test]
fn tier3_on_a_rich_config_runs_every_alp_code_and_skips_nothing() {
    let env = Env::new();
    let (config, turn) = rich_config(&env);
    let rows = tier3(&env, &["--config", s(&config), "--workspace", s(&turn)]);
    assert_eq!(rows.len(), 2 * 24);
    for r in &rows {
        assert_eq!(r["status"], "pass", "nothing may be skipped here: {r}");
    }
    // Every code has a deny path on these actors' own roots and lists:
    // no fixture was needed.
    assert!(rows.iter().all(|r| r["fixture"].is_null()), "{rows:?}");
    for actor in ["main", "worker"] {
        let mine: BTreeSet<&str> = rows
            .iter()
            .filter(|r| r["actor"] == actor)
            .map(|r| r["expected"].as_str().unwrap())
            .collect();
        for code in ALP_CODES {
            assert!(mine.contains(code), "no `{code}` case for `{actor}`");
        }
    }
    // The workspace cases ran on the configured roots.
    let ro = rows
        .iter()
        .find(|r| r["actor"] == "main" && r["expected"] == "WORKSPACE_READ_ONLY")
        .unwrap();
    assert!(
        ro["request"]["path"]["resolved"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{}/", s(&turn.join("docs")))),
        "{ro}"
    );
    let mismatch = rows
        .iter()
        .find(|r| r["actor"] == "main" && r["expected"] == "WORKSPACE_SCOPE_MISMATCH")
        .unwrap();
    assert_eq!(
        mismatch["request"]["path"]["resolved"],
        s(&env.root().join("notes"))
    );

    // --actor narrows to one actor.
    let only = tier3(
        &env,
        &[
            "--config",
            s(&config),
            "--workspace",
            s(&turn),
            "--actor",
            "worker",
        ],
    );
    assert!(only.iter().all(|r| r["actor"] == "worker"));
    assert_eq!(
        only.len(),
        rows.iter().filter(|r| r["actor"] == "worker").count()
    );
}

#[test]
fn tier3_refuses_an_unknown_actor_and_tier() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.run(&[
        "test",
        "--tier",
        "3",
        "--workspace",
        s(&ws),
        "--actor",
        "nobody",
    ])
    .expect_err(3, &["`nobody`"])
    .expect_lowercase_message();
    env.run(&["test", "--tier", "2", "--workspace", s(&ws)])
        .expect_err(3, &["`2`"])
        .expect_lowercase_message();
    let (config, turn) = rich_config(&env);
    env.run(&[
        "test",
        "--tier",
        "3",
        "--config",
        s(&config),
        "--workspace",
        s(&turn),
        "--actor",
        "nobody",
    ])
    .expect_err(3, &["`nobody`", "`main`", "`worker`"]);
}

// ---------------------------------------------------------------------------
// snapshot

fn prepare(env: &Env, file: &std::path::Path, ws: &std::path::Path) {
    let run = env.run(&[
        "snapshot",
        "prepare",
        "--out",
        s(file),
        "--workspace",
        s(ws),
    ]);
    run.expect(0);
    let v = &run.json_lines()[0];
    let text = std::fs::read_to_string(file).unwrap();
    let frozen: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["policyHash"], frozen["policyHash"]);
    assert_eq!(v["definitionHash"], frozen["definitionHash"]);
}

fn verify(env: &Env, file: &std::path::Path, ws: &std::path::Path) -> crate::support::Run {
    env.run(&["snapshot", "verify", s(file), "--workspace", s(ws)])
}

/// Replaces the byte at `at` in a copy of `src` and returns the copy's path.
fn edited(
    env: &Env,
    src: &std::path::Path,
    name: &str,
    edit: impl Fn(&mut Vec<u8>),
) -> std::path::PathBuf {
    let mut bytes = std::fs::read(src).unwrap();
    let before = bytes.clone();
    edit(&mut bytes);
    assert_ne!(bytes, before);
    env.write(name, std::str::from_utf8(&bytes).unwrap())
}

fn flip_hex(bytes: &mut [u8], key: &str) {
    let text = std::str::from_utf8(bytes).unwrap();
    let at = text.find(&format!("\"{key}\": \"")).unwrap() + key.len() + 5;
    bytes[at] = if bytes[at] == b'a' { b'b' } else { b'a' };
}

#[test]
fn snapshot_verifies_unedited_and_refuses_one_byte_edits() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let file = env.path("out/policy.json");
    prepare(&env, &file, &ws);
    verify(&env, &file, &ws).expect(0);
    let v = &verify(&env, &file, &ws).json_lines()[0];
    assert_eq!(v["verified"], true);

    // One hex character of each hash.
    for key in ["policyHash", "definitionHash"] {
        let f = edited(&env, &file, &format!("out/{key}.json"), |b| {
            flip_hex(b, key)
        });
        verify(&env, &f, &ws).expect_err(2, &["SNAPSHOT_MISMATCH", key]);
    }
    // One space removed inside the policy body (same JSON value, other bytes).
    let f = edited(&env, &file, "out/space.json", |b| {
        let text = std::str::from_utf8(b).unwrap();
        let at = text.find("\"level\": ").unwrap() + "\"level\":".len();
        assert_eq!(b[at], b' ');
        b.remove(at);
    });
    verify(&env, &f, &ws).expect_err(2, &["SNAPSHOT_MISMATCH", "`", "edited by hand"]);
    // One character changed inside the policy body (hashes left alone).
    let f = edited(&env, &file, "out/char.json", |b| {
        let text = std::str::from_utf8(b).unwrap();
        let at = text.find("\"sender_id\": \"tester\"").unwrap() + "\"sender_id\": \"teste".len();
        assert_eq!(b[at], b'r');
        b[at] = b's';
    });
    verify(&env, &f, &ws).expect_err(2, &["SNAPSHOT_MISMATCH", "edited by hand"]);
    // A trailing byte.
    let f = edited(&env, &file, "out/trailing.json", |b| b.push(b'\n'));
    verify(&env, &f, &ws).expect_err(2, &["SNAPSHOT_MISMATCH"]);
    // The original still verifies.
    verify(&env, &file, &ws).expect(0);
}

#[test]
fn snapshot_refuses_when_the_grants_in_force_changed() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let file = env.path("policy.json");
    prepare(&env, &file, &ws);
    verify(&env, &file, &ws).expect(0);
    add(&env, "alice", "fs:write", "/tmp/x/**", &[]);
    verify(&env, &file, &ws).expect_err(2, &["SNAPSHOT_MISMATCH", "policyHash"]);
    // Re-preparing freezes the new grant, which then verifies.
    prepare(&env, &file, &ws);
    let frozen: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(frozen["policy"]["grants"][0]["target"], "/tmp/x/**");
    verify(&env, &file, &ws).expect(0);
    // A different workspace is a different policy too.
    let other = env.mkdir("other");
    verify(&env, &file, &other).expect_err(2, &["SNAPSHOT_MISMATCH"]);
}

// ---------------------------------------------------------------------------
// bad input: exit 3, lowercase, naming the input

#[test]
fn an_unknown_level_or_capability_is_invalid_input() {
    let env = Env::new();
    env.run(&["policy", "check", "Max", "fs:write"])
        .expect_err(3, &["unknown level `Max`"])
        .expect_lowercase_message();
    env.run(&["policy", "check", "Supervised", "fs:delete"])
        .expect_err(3, &["unknown capability `fs:delete`"])
        .expect_lowercase_message();
    env.run(&[
        "grants",
        "add",
        "--channel",
        "cli",
        "--sender",
        "alice",
        "fs:delete",
        "/tmp/x",
    ])
    .expect_err(3, &["unknown capability `fs:delete`"])
    .expect_lowercase_message();
    assert!(!env.grants_db().exists());
}

#[test]
fn a_malformed_glob_is_invalid_input() {
    let env = Env::new();
    for glob in ["tmp/x", "/tmp/[ab]", "/tmp/a**", "/tmp/../etc"] {
        env.run(&[
            "grants",
            "add",
            "--channel",
            "cli",
            "--sender",
            "alice",
            "fs:write",
            glob,
        ])
        .expect_err(3, &[&format!("malformed path glob `{glob}`")])
        .expect_lowercase_message();
    }
    // A target of `policy check` is checked the same way.
    env.run(&[
        "policy",
        "check",
        "Supervised",
        "fs:write",
        "--target",
        "tmp/x",
    ])
    .expect_err(3, &["`tmp/x`"])
    .expect_lowercase_message();
    assert!(!env.grants_db().exists());
}

#[test]
fn a_manifest_with_a_typo_in_a_field_name_is_invalid_input() {
    let env = Env::new();
    let m = env.write(
        "exec/executor.toml",
        "name = \"hello\"\ncomponent = \"hello.wasm\"\nrevertable = true\n",
    );
    env.run(&["manifest", "check", s(&m)])
        .expect_err(3, &["unknown field `revertable`", &format!("`{}`", s(&m))])
        .expect_lowercase_message();
    // An unknown capability in a manifest names its field.
    let m = env.write(
        "exec2/executor.toml",
        "name = \"hello\"\ncomponent = \"hello.wasm\"\n[[capabilities]]\nname = \"fs:delete\"\ntarget = \"/x\"\n",
    );
    env.run(&["manifest", "check", s(&m)])
        .expect_err(3, &["capabilities[0].name", "`fs:delete`"])
        .expect_lowercase_message();
}

/// `(component)`: the magic, the component version and layer.
const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

#[test]
fn a_manifest_pinning_the_wrong_digest_is_denied() {
    let env = Env::new();
    // The smallest component (a header, no sections): it imports nothing.
    std::fs::create_dir_all(env.root().join("exec")).unwrap();
    std::fs::write(env.root().join("exec/hello.wasm"), EMPTY_COMPONENT).unwrap();
    let wrong = "0".repeat(64);
    let m = env.write(
        "exec/executor.toml",
        &format!("name = \"hello\"\ncomponent = \"hello.wasm\"\nsha256 = \"{wrong}\"\n"),
    );
    env.run(&["manifest", "check", s(&m)])
        .expect_err(2, &["DIGEST_MISMATCH", &format!("`{wrong}`"), "hello.wasm"]);

    // The right digest passes.
    let digest = gatehouse::policy::snapshot::sha256_hex(EMPTY_COMPONENT);
    let m = env.write(
        "exec/executor.toml",
        &format!("name = \"hello\"\ncomponent = \"hello.wasm\"\nsha256 = \"{digest}\"\n"),
    );
    let ok = env.run(&["manifest", "check", s(&m)]);
    ok.expect(0);
    assert_eq!(
        ok.lines()[0],
        format!("ok: `{}` is a valid manifest for executor `hello`", s(&m))
    );
}

#[test]
fn a_corrupt_config_file_is_invalid_input() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let bad = env.write("gatehouse.toml", "this is ][ not toml = = at all\n\u{1}");
    env.run(&[
        "test",
        "--tier",
        "3",
        "--config",
        s(&bad),
        "--workspace",
        s(&ws),
    ])
    .expect_err(3, &[&format!("`{}` is not valid toml", s(&bad))])
    .expect_lowercase_message();
    // A misspelt field and a bad level name the field and the value.
    let typo = env.write("typo.toml", "[actors.main]\nskils = [\"x\"]\n");
    env.run(&[
        "test",
        "--tier",
        "3",
        "--config",
        s(&typo),
        "--workspace",
        s(&ws),
    ])
    .expect_err(3, &["unknown field `skils`"])
    .expect_lowercase_message();
    let level = env.write("level.toml", "level = \"Max\"\n[actors.main]\n");
    env.run(&[
        "test",
        "--tier",
        "3",
        "--config",
        s(&level),
        "--workspace",
        s(&ws),
    ])
    .expect_err(3, &["field `level`", "unknown level `Max`"])
    .expect_lowercase_message();
    // The same file found through GATEHOUSE_CONFIG.
    let out = env
        .command()
        .env("GATEHOUSE_CONFIG", &bad)
        .args(["test", "--tier", "3", "--workspace", s(&ws)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    // And a missing --config file is an error naming it.
    let missing = env.root().join("missing.toml");
    let run = env.run(&[
        "test",
        "--tier",
        "3",
        "--config",
        s(&missing),
        "--workspace",
        s(&ws),
    ]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains(&format!("`{}`", s(&missing))),
        "{run:#?}"
    );
}

#[test]
fn a_grants_database_that_is_not_sqlite_is_invalid_input() {
    let env = Env::bare();
    std::fs::create_dir_all(env.state_dir()).unwrap();
    std::fs::write(
        env.grants_db(),
        "this is definitely not an sqlite database, just some junk bytes\n".repeat(20),
    )
    .unwrap();
    let db = format!("`{}`", s(&env.grants_db()));
    env.run(&["grants", "list"])
        .expect_err(3, &[&db, "is not a grants database"])
        .expect_lowercase_message();
    env.run(&[
        "grants",
        "add",
        "--channel",
        "cli",
        "--sender",
        "alice",
        "fs:write",
        "/tmp/x/**",
    ])
    .expect_err(3, &[&db, "is not a grants database"]);
    env.run(&[
        "policy",
        "check",
        "Supervised",
        "fs:write",
        "--target",
        "/tmp/x/a",
        "--channel",
        "cli",
        "--sender",
        "alice",
    ])
    .expect_err(3, &[&db, "is not a grants database"]);
}

#[test]
fn usage_errors_exit_3_and_help_exits_0() {
    let env = Env::new();
    env.run(&["--bogus"]).expect_err(3, &["--bogus"]);
    env.run(&["policy", "check", "--bogus", "Supervised", "fs:write"])
        .expect_err(3, &["--bogus"]);
    env.run(&["policy", "check", "Supervised"]).expect(3);
    env.run(&["policy", "frobnicate"]).expect(3);
    env.run::<&str>(&[]).expect(3);
    // --channel without --sender is a usage error too.
    env.run(&[
        "policy",
        "check",
        "Supervised",
        "fs:write",
        "--channel",
        "cli",
    ])
    .expect(3);
    for args in [
        vec!["--help"],
        vec!["policy", "--help"],
        vec!["policy", "check", "--help"],
        vec!["grants", "add", "--help"],
        vec!["manifest", "check", "--help"],
        vec!["snapshot", "verify", "--help"],
        vec!["test", "--help"],
    ] {
        let run = env.run(&args);
        run.expect(0);
        assert!(run.stdout.contains("Usage: gatehouse"), "{run:#?}");
    }
    let help = env.run(&["--help"]);
    for line in [
        "0  ok / allowed",
        "1  error",
        "2  denied",
        "3  invalid input",
        "4  approval required",
    ] {
        assert!(help.stdout.contains(line), "--help lacks {line:?}");
    }
}

#[test]
fn policy_decide_answers_a_json_request() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let decide = |request: &str| env.run(&["policy", "decide", request, "--workspace", s(&ws)]);
    decide(r#"{"kind":"skill","actor":"main","skill":"hello"}"#)
        .expect_stdout(0, &["allowed: executor `hello` is granted"]);
    decide(r#"{"kind":"tool","actor":"main","tool":"ls","command":"ls; herdr run"}"#)
        .expect_stdout(
            2,
            &["denied RAW_RUNTIME_TOOL_DENIED: the command runs raw runtime tool `herdr`"],
        );
    decide(r#"{"kind":"skill","actor":"nobody","skill":"hello"}"#)
        .expect_stdout(2, &["denied UNKNOWN_ACTOR: actor `nobody` is not defined"]);
    let run = decide(r#"{"kind":"skill","actor":"main"}"#);
    run.expect(2);
    assert!(
        run.stdout.starts_with("denied UNKNOWN_REQUEST: "),
        "{run:#?}"
    );
    // The grants database is host configuration: no write to it, ever.
    let db = env.grants_db();
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let run = env.run(&[
        "--json",
        "policy",
        "decide",
        &serde_json::json!({"kind": "workspace", "actor": "main", "path": {"resolved": s(&db)}, "access": "write"}).to_string(),
        "--workspace",
        s(&ws),
    ]);
    run.expect(2);
    assert_eq!(run.json_lines()[0]["code"], "POLICY_MUTATION_DENIED");
    // Not JSON at all is invalid input.
    decide("not json")
        .expect_err(3, &["the request is not json"])
        .expect_lowercase_message();
}

// ---------------------------------------------------------------------------
// issue 12: bypasses found by attack

/// `policy decide` refuses a `resolved` path that is not canonical, and
/// canonicalizes a `raw` one (Issue 12, item 6).
#[test]
fn a_resolved_path_must_be_canonical_and_raw_is_resolved_by_the_cli() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let ws_s = s(&ws).to_string();
    let decide = |path: Value| {
        env.run(&[
            "--json",
            "policy",
            "decide",
            &serde_json::json!({"kind": "workspace", "actor": "main", "access": "write", "path": path})
                .to_string(),
            "--workspace",
            &ws_s,
        ])
    };
    // The recipe: `..` in a "resolved" path walked out of the workspace.
    let run = decide(serde_json::json!({"resolved": format!("{ws_s}/../../etc/passwd")}));
    run.expect(2);
    let d = &run.json_lines()[0];
    assert_eq!(d["code"], "PATH_RESOLUTION_FAILED", "{run:#?}");
    assert_eq!(
        d["reason"],
        format!("`{ws_s}/../../etc/passwd` is not an absolute canonical path (no `.`, `..` or empty segment)")
    );
    for bad in [
        format!("{ws_s}/./a.txt"),
        format!("{ws_s}//a.txt"),
        format!("{ws_s}/a.txt/"),
        "a.txt".to_string(),
    ] {
        let run = decide(serde_json::json!({ "resolved": bad }));
        run.expect(2);
        assert_eq!(
            run.json_lines()[0]["code"],
            "PATH_RESOLUTION_FAILED",
            "{bad}"
        );
    }
    // The control: the same request on a canonical path is allowed.
    let run = decide(serde_json::json!({"resolved": format!("{ws_s}/a.txt")}));
    run.expect(0);
    assert_eq!(run.json_lines()[0]["decision"], "allow");

    // `raw` is canonicalized by the command line before the core sees it:
    // the same walk out resolves to `/etc/passwd`, outside every root.
    let run = decide(serde_json::json!({"raw": format!("{ws_s}/../../../../../../etc/passwd")}));
    run.expect(2);
    let d = &run.json_lines()[0];
    assert_eq!(d["code"], "WORKSPACE_NOT_GRANTED", "{run:#?}");
    assert_eq!(
        d["reason"],
        "`/etc/passwd` is under none of the actor's workspace roots"
    );
    // A relative raw path is taken in the workspace; a symlink out of it
    // resolves to where it points.
    let run = decide(serde_json::json!({"raw": "out.txt"}));
    run.expect(0);
    assert_eq!(
        run.json_lines()[0]["reason"],
        format!("`{ws_s}/out.txt` is under root `{ws_s}`")
    );
    let outside = env.mkdir("outside");
    std::os::unix::fs::symlink(&outside, ws.join("link")).unwrap();
    let run = decide(serde_json::json!({"raw": "link/x.txt"}));
    run.expect(2);
    assert_eq!(run.json_lines()[0]["code"], "WORKSPACE_NOT_GRANTED");
    let run = decide(serde_json::json!({"raw": "no/such/dir/x"}));
    run.expect(2);
    assert_eq!(run.json_lines()[0]["code"], "PATH_RESOLUTION_FAILED");
}

/// A host wildcard never covers an IP literal; one ending in a numeric label is
/// refused (Issue 12, item 7).
#[test]
fn a_wildcard_never_covers_an_ip_literal() {
    let env = Env::bare();
    // The recipe: `*.0.0.1` was recorded and then covered `127.0.0.1`.
    let run = env.run(&[
        "grants",
        "add",
        "--channel",
        "cli",
        "--sender",
        "alice",
        "network:sites",
        "*.0.0.1",
    ]);
    run.expect_err(3, &["`*.0.0.1`", "a wildcard cannot cover an IP address"])
        .expect_lowercase_message();
    assert!(!env.grants_db().exists());
    // Nor `*.1`, nor a hex last label, which resolvers read as an address.
    for bad in ["*.1", "*.0x1", "*.127.0.0.1:80"] {
        env.run(&[
            "grants",
            "add",
            "--channel",
            "cli",
            "--sender",
            "alice",
            "network:sites",
            bad,
        ])
        .expect(3);
    }
    // The control: a wildcard over a name is recorded and covers a name
    // under it, and an IP literal grant covers that address.
    env.run(&[
        "grants",
        "add",
        "--channel",
        "cli",
        "--sender",
        "alice",
        "network:sites",
        "*.example.com",
    ])
    .expect(0);
    let check = |target: &str| {
        env.run(&[
            "policy",
            "check",
            "Supervised",
            "network:sites",
            "--target",
            target,
            "--channel",
            "cli",
            "--sender",
            "alice",
        ])
    };
    check("api.example.com").expect_stdout(0, &["allowed"]);
    check("127.0.0.1").expect_stdout(4, &["approval_required"]);
    // A row inserted behind the store's back covers nothing.
    let conn = rusqlite::Connection::open(env.grants_db()).unwrap();
    conn.execute(
        "INSERT INTO grants (channel, sender_id, capability, target, granted_at) \
         VALUES ('cli', 'alice', 'network:sites', '*.0.0.1', '2020-01-01T00:00:00Z')",
        [],
    )
    .unwrap();
    drop(conn);
    check("127.0.0.1").expect_stdout(4, &["approval_required"]);
    check("0x7f.0.0.1").expect_stdout(4, &["approval_required"]);
    env.run(&[
        "grants",
        "add",
        "--channel",
        "cli",
        "--sender",
        "alice",
        "network:sites",
        "127.0.0.1",
    ])
    .expect(0);
    check("127.0.0.1").expect_stdout(0, &["allowed"]);

    // A manifest declaring such a wildcard is refused by the validator.
    let m = env.write(
        "manifests/wild.toml",
        "name = \"wild\"\ncomponent = \"x.wasm\"\n\
         [[capabilities]]\nname = \"network:sites\"\ntarget = \"*.0.0.1\"\n",
    );
    let run = env.run(&["manifest", "check", s(&m)]);
    run.expect(3);
    assert!(
        run.stderr.contains("a wildcard cannot cover an IP address"),
        "{run:#?}"
    );
}

/// Issue 27, point 5: one grant per (channel, sender, capability,
/// canonical target). The same `grants add` twice returns the same id
/// with the later expiry; `grants list` shows one; revoking it (by id, or
/// by the tuple) leaves `policy check` at `approval_required`, where two
/// rows used to leave the second in force.
///
/// Positive control: between the add and the revoke, `policy check` says
/// `allowed`.
#[test]
fn a_grant_is_one_per_identity_capability_and_target() {
    let env = Env::new();
    let dir = env.mkdir("x");
    let target = format!("{}/**", s(&dir));
    let add = |expires: &str| {
        let run = env.run(&[
            "grants",
            "add",
            "--channel",
            "cli",
            "--sender",
            "alice",
            "fs:write",
            &target,
            "--expires-in",
            expires,
        ]);
        run.expect(0);
        run.json_lines().remove(0)
    };
    let check = |code: i32, answer: &str| {
        env.run(&[
            "policy",
            "check",
            "Supervised",
            "fs:write",
            "--target",
            &format!("{}/a", s(&dir)),
            "--channel",
            "cli",
            "--sender",
            "alice",
        ])
        .expect_stdout(code, &[answer]);
    };
    let first = add("1h");
    let second = add("2h");
    let third = add("10m");
    assert_eq!(first["id"], second["id"]);
    assert_eq!(first["id"], third["id"]);
    assert!(second["expires_at"].as_str() > first["expires_at"].as_str());
    assert_eq!(
        third["expires_at"], second["expires_at"],
        "the later expiry is kept"
    );
    let list = env.run(&["grants", "list"]).json_lines();
    assert_eq!(list.len(), 1, "{list:#?}");
    assert_eq!(list[0]["expires_at"], second["expires_at"]);
    check(0, "allowed");
    let id = first["id"].to_string();
    env.run(&["grants", "revoke", &id]).expect(0);
    check(4, "approval_required");

    // Recorded again after the revoke: a new grant, revoked by its tuple.
    let again = add("1h");
    assert_ne!(again["id"], first["id"]);
    check(0, "allowed");
    let revoke_tuple = [
        "grants",
        "revoke",
        "--channel",
        "cli",
        "--sender",
        "alice",
        "fs:write",
        &target,
    ];
    env.run(&revoke_tuple).expect(0);
    check(4, "approval_required");
    env.run(&revoke_tuple)
        .expect_err(3, &["no grant in force of `fs:write` on `"]);
}

/// Issue 27, point 5: an existing `grants.db` with duplicate rows (made
/// before the rule) is migrated when it is opened: the duplicates merged
/// into the oldest row with the latest expiry (none when one had none),
/// revoked rows left as they were, the schema version recorded.
#[test]
fn an_old_grants_database_with_duplicates_is_merged_on_open() {
    let env = Env::bare();
    std::fs::create_dir_all(env.state_dir()).unwrap();
    let conn = rusqlite::Connection::open(env.grants_db()).unwrap();
    conn.execute_batch(gatehouse::state::grants::sqlite::SCHEMA)
        .unwrap();
    for (target, expires, revoked) in [
        ("/a/**", Some("2100-01-01T00:00:00Z"), None),
        ("/a/**", Some("2200-01-01T00:00:00Z"), None),
        (
            "/a/**",
            Some("2300-01-01T00:00:00Z"),
            Some("2020-01-01T00:00:00Z"),
        ),
        ("/b/**", Some("2100-01-01T00:00:00Z"), None),
        ("/b/**", None, None),
    ] {
        conn.execute(
            "INSERT INTO grants (channel, sender_id, capability, target, granted_at, expires_at, revoked_at) \
             VALUES ('cli', 'alice', 'fs:write', ?1, '2020-01-01T00:00:00Z', ?2, ?3)",
            rusqlite::params![target, expires, revoked],
        )
        .unwrap();
    }
    drop(conn);
    let all = env.run(&["grants", "list", "--all"]).json_lines();
    let rows: Vec<(i64, &str, Option<&str>, bool)> = all
        .iter()
        .map(|g| {
            (
                g["id"].as_i64().unwrap(),
                g["target"].as_str().unwrap(),
                g["expires_at"].as_str(),
                g["revoked_at"].is_string(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (1, "/a/**", Some("2200-01-01T00:00:00Z"), false),
            (3, "/a/**", Some("2300-01-01T00:00:00Z"), true),
            (4, "/b/**", None, false),
        ]
    );
    let conn = rusqlite::Connection::open(env.grants_db()).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, gatehouse::state::grants::SCHEMA_VERSION);
    // A version this build does not know is refused, naming it.
    conn.execute_batch("PRAGMA user_version = 99").unwrap();
    drop(conn);
    env.run(&["grants", "list"]).expect_err(
        3,
        &["its schema version is 99; this gatehouse knows versions up to 1"],
    );
}

/// Warnings reach stderr by default: a denial that cannot be written to
/// `denials.jsonl` (here a directory) is still refused with its code, and
/// stderr says, in plain text, that it was not recorded.
///
/// Control: `GATEHOUSE_LOG=off` silences the warning; the refusal stays.
#[test]
fn a_warning_reaches_stderr_by_default_and_gatehouse_log_off_silences_it() {
    let env = Env::bare();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    env.mkdir("state/denials.jsonl");
    let write = crate::support::guests::guest("write-file");
    let args = [
        "run",
        s(&write),
        "--workspace",
        s(&ws),
        "--level",
        "ReadOnly",
        "--input",
        r#"{"path":"out/a.txt","content":"x"}"#,
    ];
    let warned = "the denial was not recorded";
    let run = env.run(&args);
    run.expect_err(2, &["CAPABILITY_DENIED", warned]);
    assert!(
        !run.stderr.contains('\u{1b}'),
        "no colours in a pipe: {run:#?}"
    );
    let quiet = env
        .command()
        .args(args)
        .env("GATEHOUSE_LOG", "off")
        .output()
        .unwrap();
    let stderr = String::from_utf8(quiet.stderr).unwrap();
    assert_eq!(quiet.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("CAPABILITY_DENIED"), "{stderr}");
    assert!(!stderr.contains(warned), "{stderr}");
}
