//! Issue 12, the filesystem and journal items (1, 3, 9, 10, 12, 14, 17):
//! each attack as a guest, a manifest and a configuration, with its
//! positive control in the same set-up (the same guest doing the allowed
//! thing succeeds), checked on the bytes on disk and by deny code.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::exec::{confined_host, tool_call, tool_manifest};
use crate::sandbox::{component, guest, manifest, output, run_json, tree};
use crate::support::{s, Env, Run};

/// The filesystem refusals a turn recorded in its audit.
fn fs_denials(env: &Env, turn: &str) -> Vec<Value> {
    env.run(&["history", "--turn", turn, "--decisions"])
        .json_lines()
        .into_iter()
        .filter(|d| d["request"]["kind"] == "filesystem")
        .collect()
}

/// The deny codes of a turn's filesystem refusals, in order.
fn fs_codes(env: &Env, turn: &str) -> Vec<String> {
    fs_denials(env, turn)
        .iter()
        .map(|d| d["decision"]["code"].as_str().unwrap().to_string())
        .collect()
}

/// `gatehouse run` of a manifest with a configuration, the JSON report.
fn run_with(env: &Env, config: &Path, manifest: &Path, ws: &Path, input: &str) -> (Run, Value) {
    run_json(env, manifest, ws, "Full", input, &["--config", s(config)])
}

/// Which requests of a `batch` turn succeeded.
fn oks(v: &Value) -> Vec<bool> {
    output(v)["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {v:#}"))
        .iter()
        .map(|r| r.get("ok").is_some())
        .collect()
}

fn batch(ops: Value) -> String {
    json!({"op": "batch", "ops": ops}).to_string()
}

fn undo(env: &Env, turn: &str) -> Value {
    let run = env.run(&["--json", "undo", "--turn", turn]);
    run.expect(0);
    serde_json::from_str(run.stdout.trim()).unwrap()
}

fn turn_of(v: &Value) -> String {
    v["turn"].as_str().unwrap().to_string()
}

// ---------------------------------------------------------------------------
// item 1: a read-only root nested in a read-write root

/// The recipe's configuration: `WS` read-write, `WS/out/ro` read-only,
/// level Full.
fn nested_read_only(env: &Env) -> (PathBuf, PathBuf) {
    let ws = env.mkdir("ws");
    env.write("ws/out/ro/keep.txt", "read-only bytes\n");
    let config = env.write(
        "gatehouse.toml",
        &format!(
            "level = \"Full\"\n[actors.main]\nskills = [\"*\"]\nworkspaces = [{{path = \"{ws}\", mode = \"read-write\"}}, {{path = \"{ws}/out/ro\", mode = \"read-only\"}}]\n",
            ws = s(&ws)
        ),
    );
    (ws, config)
}

#[test]
fn item01_a_nested_read_only_root_is_not_written() {
    let env = Env::new();
    let (ws, config) = nested_read_only(&env);
    // The policy says so.
    let run = env.run(&[
        "--json",
        "--config",
        s(&config),
        "policy",
        "decide",
        &json!({"kind": "workspace", "actor": "main", "access": "write",
                "path": {"resolved": format!("{}/out/ro/k.txt", s(&ws))}})
        .to_string(),
        "--workspace",
        s(&ws),
    ]);
    run.expect(2);
    assert_eq!(run.json_lines()[0]["code"], "WORKSPACE_READ_ONLY");
    // The recipe: fs-cmd writes `out/ro/k.txt`. Refused, nothing written.
    let (run, v) = run_with(
        &env,
        &config,
        &guest("fs-cmd"),
        &ws,
        r#"{"op":"write","path":"out/ro/k.txt","content":"pwned"}"#,
    );
    assert!(!ws.join("out/ro/k.txt").exists(), "{run:#?}");
    run.expect(1);
    assert_eq!(fs_codes(&env, &turn_of(&v)), vec!["WORKSPACE_READ_ONLY"]);
    // The positive control: the same guest writes beside it.
    let (run, _) = run_with(
        &env,
        &config,
        &guest("fs-cmd"),
        &ws,
        r#"{"op":"write","path":"out/k.txt","content":"fine"}"#,
    );
    run.expect(0);
    assert_eq!(std::fs::read(ws.join("out/k.txt")).unwrap(), b"fine");
}

#[test]
fn item01_renames_and_links_do_not_reach_a_nested_read_only_root() {
    let env = Env::new();
    let (ws, config) = nested_read_only(&env);
    env.write("ws/out/mine.txt", "mine\n");
    let m = manifest(
        &env,
        "writer",
        &component("write-file"),
        &[("fs:write", Some("**"))],
    );
    let before = tree(&ws);
    let (run, v) = run_with(
        &env,
        &config,
        &m,
        &ws,
        &batch(json!([
            {"op": "rename", "path": "out/mine.txt", "to": "out/ro/mine.txt"},
            {"op": "rename", "path": "out/ro/keep.txt", "to": "out/keep.txt"},
            {"op": "link", "path": "out/mine.txt", "to": "out/ro/linked.txt"},
            {"op": "link", "path": "out/ro/keep.txt", "to": "out/linked.txt"},
            {"op": "delete", "path": "out/ro/keep.txt"},
            {"op": "mkdir", "path": "out/ro/sub"},
            // Moving the directory that holds the root would carry it.
            {"op": "rename", "path": "out", "to": "moved"},
            // Read-only means readable.
            {"op": "read", "path": "out/ro/keep.txt"},
            // The control: the same guest writes beside the root.
            {"path": "out/fine.txt", "content": "fine"},
        ])),
    );
    run.expect(0);
    assert_eq!(
        oks(&v),
        vec![false, false, false, false, false, false, false, true, true],
        "{v:#}"
    );
    let mut expected = before;
    expected.push(("out/fine.txt".into(), b"fine".to_vec()));
    expected.sort();
    assert_eq!(tree(&ws), expected);
    assert_eq!(
        fs_codes(&env, &turn_of(&v)),
        vec!["WORKSPACE_READ_ONLY"; 7],
        "{v:#}"
    );
}

#[test]
fn item01_a_write_root_holding_a_read_only_root_runs_no_command() {
    assert!(confined_host(), "this host lacks landlock or seccomp");
    let env = Env::new();
    let (ws, _) = nested_read_only(&env);
    let config = |nested: bool| {
        let mut workspaces = format!("{{path = \"{}\", mode = \"read-write\"}}", s(&ws));
        if nested {
            workspaces.push_str(&format!(
                ", {{path = \"{}/out/ro\", mode = \"read-only\"}}",
                s(&ws)
            ));
        }
        env.write(
            &format!("config-{nested}.toml"),
            &format!(
                "[actors.main]\nskills = [\"*\"]\ntools = [\"cat\", \"touch\"]\nworkspaces = [{workspaces}]\n"
            ),
        )
    };
    let m = tool_manifest(&env);
    // Landlock cannot carve `out/ro` out of the write root: no command.
    let (run, v) = tool_call(&env, &m, &ws, &config(true), "touch", &["out/ro/k.txt"]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert_eq!(
        v["run"]["result"]["error"]["denied"]["code"], "WORKSPACE_READ_ONLY",
        "{v:#}"
    );
    assert_eq!(v["run"]["commands"][0]["spawned"], false, "{v:#}");
    assert!(!ws.join("out/ro/k.txt").exists());
    // The control: without the nested root the same command runs.
    let (run, v) = tool_call(&env, &m, &ws, &config(false), "touch", &["out/ro/k.txt"]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(v["run"]["commands"][0]["spawned"], true, "{v:#}");
    assert!(ws.join("out/ro/k.txt").is_file());
}

// ---------------------------------------------------------------------------
// item 9: TRUNCATE with EXCLUSIVE but without CREATE

#[test]
fn item09_truncate_exclusive_without_create_is_journaled() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.write("ws/out/plain.txt", "plain original\n");
    env.write("ws/out/excl.txt", "exclusive original\n");
    let (run, v) = run_json(
        &env,
        &guest("write-file"),
        &ws,
        "Full",
        &batch(json!([
            {"op": "truncate", "path": "out/plain.txt"},
            {"op": "truncate-exclusive", "path": "out/excl.txt"},
        ])),
        &[],
    );
    run.expect(0);
    assert_eq!(oks(&v), vec![true, true], "{v:#}");
    // Both were truncated (wasmtime-wasi honours EXCLUSIVE only with CREATE).
    assert_eq!(std::fs::read(ws.join("out/plain.txt")).unwrap(), b"");
    assert_eq!(std::fs::read(ws.join("out/excl.txt")).unwrap(), b"");
    // Both are undone: their bytes were saved before.
    let report = undo(&env, &turn_of(&v));
    assert_eq!(
        std::fs::read(ws.join("out/plain.txt")).unwrap(),
        b"plain original\n",
        "{report:#}"
    );
    assert_eq!(
        std::fs::read(ws.join("out/excl.txt")).unwrap(),
        b"exclusive original\n",
        "{report:#}"
    );
}
