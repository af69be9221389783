//! Issue 6 (in part): the turn history, the audit log, and undo of memory
//! writes. Every claim is checked on the store's real contents.

use crate::support::guests::{guest, output, run_json};
use crate::support::{s, Env};

fn memory_env() -> (Env, std::path::PathBuf, Vec<String>) {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let config = env.write(
        "gatehouse.toml",
        "[actors.main]\nskills = [\"*\"]\nmemory = [\"notes\"]\n",
    );
    (
        env,
        ws,
        vec!["--config".to_string(), s(&config).to_string()],
    )
}

fn remember(
    env: &Env,
    ws: &std::path::Path,
    cfg: &[String],
    input: &str,
) -> (String, serde_json::Value) {
    let extra: Vec<&str> = cfg.iter().map(String::as_str).collect();
    let (run, v) = run_json(env, &guest("remember"), ws, "Full", input, &extra);
    run.expect(0);
    (v["turn"].as_str().unwrap().to_string(), output(&v))
}

#[test]
fn undo_reverses_memory_writes_turn_by_turn() {
    let (env, ws, cfg) = memory_env();
    let (t1, _) = remember(&env, &ws, &cfg, r#"{"op":"set","key":"a","value":"1"}"#);
    let (t2, _) = remember(&env, &ws, &cfg, r#"{"op":"set","key":"a","value":"2"}"#);
    let (_t3, _) = remember(&env, &ws, &cfg, r#"{"op":"delete","key":"a"}"#);
    let get = |env: &Env| remember(env, &ws, &cfg, r#"{"op":"get","key":"a"}"#).1["value"].clone();
    assert!(get(&env).is_null());

    // A dry run says what it would do and changes nothing.
    let args: Vec<&str> = ["--json", "undo", "--dry-run"]
        .into_iter()
        .chain(cfg.iter().map(String::as_str))
        .collect();
    let dry = env.run(&args);
    dry.expect(0);
    let report: serde_json::Value = serde_json::from_str(dry.stdout.trim()).unwrap();
    // Issue 27, point 9: the newest turn is the `get` just run, which
    // journaled nothing: undo passes over it to the delete (turn 3), and a
    // dry run changes nothing.
    assert_eq!(report["turn"], _t3.as_str(), "{report:#}");
    assert_eq!(report["steps"][0]["status"], "would_do", "{report:#}");
    assert_eq!(report["steps"][0]["pattern"], "restore_blob_backup");

    // Undo the delete (turn 3 is the third-newest now; name it).
    let history = env.run(&["--json", "history"]);
    let turns: Vec<serde_json::Value> = history.json_lines();
    assert_eq!(turns.len(), 4);
    assert_eq!(
        turns
            .iter()
            .map(|t| t["operations"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![1, 1, 1, 0]
    );
    let t3 = turns[2]["turn"].as_str().unwrap().to_string();
    let run = env.run(&["--json", "undo", "--turn", &t3]);
    run.expect(0);
    let report: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(report["steps"][0]["status"], "done", "{report:#}");
    assert_eq!(report["steps"][0]["pattern"], "restore_blob_backup");
    assert_eq!(get(&env), "2");
    // Twice is a no-op with a clear message.
    env.run(&["undo", "--turn", &t3]).expect_stdout(
        0,
        &[&format!("turn `{t3}` is already undone; nothing to do")],
    );
    // Turn 2 overwrote 1 with 2: undo restores 1; turn 1 created it: undo deletes it.
    env.run(&["undo", "--turn", &t2]).expect(0);
    assert_eq!(get(&env), "1");
    let run = env.run(&["--json", "undo", "--turn", &t1]);
    let report: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(report["steps"][0]["pattern"], "delete_memory_by_id");
    assert!(get(&env).is_null());
    let history = env.run(&["--json", "history", "--turn", &t1]).json_lines();
    assert_eq!(history[0]["undo"], "undone");
}

#[test]
fn undo_never_overwrites_a_newer_value() {
    let (env, ws, cfg) = memory_env();
    let (t1, _) = remember(&env, &ws, &cfg, r#"{"op":"set","key":"b","value":"mine"}"#);
    remember(&env, &ws, &cfg, r#"{"op":"set","key":"b","value":"newer"}"#);
    let run = env.run(&["--json", "undo", "--turn", &t1]);
    run.expect(0);
    let report: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(report["steps"][0]["status"], "skipped", "{report:#}");
    assert_eq!(
        remember(&env, &ws, &cfg, r#"{"op":"get","key":"b"}"#).1["value"],
        "newer"
    );
    assert_eq!(
        env.run(&["--json", "history", "--turn", &t1]).json_lines()[0]["undo"],
        "partly_undone"
    );
}

#[test]
fn every_decision_of_a_turn_is_in_its_audit_log() {
    let (env, ws, cfg) = memory_env();
    let (t, _) = remember(&env, &ws, &cfg, r#"{"op":"set","key":"c","value":"1"}"#);
    let log = env.run(&["history", "--turn", &t, "--decisions"]);
    log.expect(0);
    let lines = log.json_lines();
    let kinds: Vec<&str> = lines
        .iter()
        .map(|l| l["request"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        vec!["skill", "capability", "memory", "capability", "memory"]
    );
    for l in &lines {
        assert_eq!(l["turn"], t.as_str());
        assert_eq!(l["actor"], "main");
        assert_eq!(
            l["identity"],
            serde_json::json!({"channel": "cli", "sender_id": "main"})
        );
        assert_eq!(l["decision"]["decision"], "allow");
        assert_eq!(l["snapshot"]["policyHash"].as_str().unwrap().len(), 64);
    }
    // An unknown turn is invalid input naming it.
    env.run(&["history", "--turn", "nope", "--decisions"])
        .expect_err(3, &["no turn `nope` in the history"]);
    env.run(&["undo", "--turn", "../etc"])
        .expect_err(3, &["no turn `../etc`"]);
}
