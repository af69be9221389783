//! Issue 6: the journaling filesystem layer and undo of file changes.
//! Every turn is a real guest (`write-file`) mutating a real workspace;
//! every claim is checked on the bytes on disk.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::guests::{component, guest, manifest, output, run_json, tree};
use crate::support::{s, Env};

/// A workspace with files and directories to mutate.
fn workspace(env: &Env) -> PathBuf {
    let ws = env.mkdir("ws");
    env.write("ws/out/keep.txt", "keep\n");
    env.write("ws/out/over.txt", "the original bytes of over\n");
    env.write("ws/out/trunc.txt", "to be truncated\n");
    env.write("ws/out/del.txt", "to be deleted\n");
    env.write("ws/out/ren.txt", "to be renamed\n");
    env.write("ws/out/target.txt", "to be replaced by a rename\n");
    env.write("ws/out/sub/inner.txt", "inside sub\n");
    env.mkdir("ws/out/empty");
    ws
}

/// Runs one `batch` turn of write-file; every request must succeed.
fn batch(env: &Env, ws: &Path, ops: Value) -> (String, Value) {
    let input = json!({"op": "batch", "ops": ops}).to_string();
    let (run, v) = run_json(env, &guest("write-file"), ws, "Full", &input, &[]);
    run.expect(0);
    let out = output(&v);
    (v["turn"].as_str().unwrap().to_string(), out)
}

fn all_ok(out: &Value) {
    for r in out["results"].as_array().unwrap() {
        assert!(r.get("ok").is_some(), "a request failed: {out:#}");
    }
}

fn undo(env: &Env, turn: &str) -> Value {
    let run = env.run(&["--json", "undo", "--turn", turn]);
    run.expect(0);
    serde_json::from_str(run.stdout.trim()).unwrap()
}

fn statuses(report: &Value) -> Vec<(String, String)> {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["pattern"].as_str().unwrap().to_string(),
                s["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// For each reverse pattern: a turn, then undo, and the workspace is the
/// one before the turn, byte for byte (content, file set, directory set).
#[test]
fn undo_restores_the_workspace_for_every_reverse_pattern() {
    let cases: Vec<(&str, Value)> = vec![
        (
            "restore_blob_backup",
            json!([
                {"path": "out/over.txt", "content": "overwritten"},
                {"op": "truncate", "path": "out/trunc.txt"},
                {"op": "delete", "path": "out/del.txt"},
                {"op": "append", "path": "out/keep.txt", "content": "more"},
                {"op": "rmdir", "path": "out/empty"},
                // Twice in a turn: the first bytes are the ones restored.
                {"path": "out/over.txt", "content": "overwritten again"},
            ]),
        ),
        (
            "delete_created_paths",
            json!([
                {"path": "out/new.txt", "content": "new"},
                {"op": "create", "path": "out/empty.txt"},
                {"path": "out/sub/new.txt", "content": "new inside"},
                {"op": "append", "path": "out/log.txt", "content": "line"},
            ]),
        ),
        (
            "delete_created_dirs",
            json!([
                {"op": "mkdir", "path": "out/d1"},
                {"op": "mkdir", "path": "out/d1/d2"},
                {"path": "out/d1/d2/f.txt", "content": "deep"},
                {"op": "mkdir", "path": "out/d3"},
            ]),
        ),
        (
            "swap_src_dst",
            json!([
                {"op": "rename", "path": "out/ren.txt", "to": "out/moved.txt"},
                {"op": "rename", "path": "out/keep.txt", "to": "out/target.txt"},
                {"op": "rename", "path": "out/sub", "to": "out/sub2"},
                {"path": "out/sub2/inner.txt", "content": "changed after the move"},
                {"op": "rename", "path": "out/moved.txt", "to": "out/moved-again.txt"},
            ]),
        ),
    ];
    for (pattern, ops) in cases {
        let env = Env::new();
        let ws = workspace(&env);
        let before = tree(&ws);
        let (turn, out) = batch(&env, &ws, ops);
        all_ok(&out);
        assert_ne!(tree(&ws), before, "{pattern}: the turn changed nothing");
        let report = undo(&env, &turn);
        let steps = statuses(&report);
        assert!(
            steps.iter().all(|(_, st)| st == "done"),
            "{pattern}: {report:#}"
        );
        assert!(
            steps.iter().any(|(p, _)| p == pattern),
            "{pattern} not used: {report:#}"
        );
        assert_eq!(tree(&ws), before, "{pattern}: not restored: {report:#}");
        let h = env
            .run(&["--json", "history", "--turn", &turn])
            .json_lines();
        assert_eq!(h[0]["undo"], "undone");
        assert_eq!(h[0]["operations"].as_u64().unwrap() as usize, steps.len());
    }
}

/// All of it in one turn, with a dry run first that changes nothing.
#[test]
fn one_turn_of_every_kind_is_undone_and_a_dry_run_changes_nothing() {
    let env = Env::new();
    let ws = workspace(&env);
    let before = tree(&ws);
    let (turn, out) = batch(
        &env,
        &ws,
        json!([
            {"op": "mkdir", "path": "out/new"},
            {"path": "out/new/a.txt", "content": "a"},
            {"path": "out/over.txt", "content": "x"},
            {"op": "truncate", "path": "out/trunc.txt"},
            {"op": "rename", "path": "out/new", "to": "out/renamed"},
            {"op": "rename", "path": "out/ren.txt", "to": "out/target.txt"},
            {"op": "delete", "path": "out/del.txt"},
            {"path": "out/del.txt", "content": "recreated"},
            {"op": "delete", "path": "out/sub/inner.txt"},
            {"op": "rmdir", "path": "out/sub"},
        ]),
    );
    all_ok(&out);
    let after = tree(&ws);
    let run = env.run(&["--json", "undo", "--dry-run", "--turn", &turn]);
    run.expect(0);
    let dry: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let dry_steps = statuses(&dry);
    assert_eq!(dry_steps.len(), 10, "{dry:#}");
    assert!(dry_steps.iter().all(|(_, st)| st != "failed"), "{dry:#}");
    assert_eq!(tree(&ws), after, "the dry run changed the workspace");
    let report = undo(&env, &turn);
    assert!(
        statuses(&report).iter().all(|(_, st)| st == "done"),
        "{report:#}"
    );
    assert_eq!(tree(&ws), before, "{report:#}");
    env.run(&["undo", "--turn", &turn]).expect_stdout(
        0,
        &[&format!("turn `{turn}` is already undone; nothing to do")],
    );
}

/// An operation journaled ahead that then failed (an `rmdir` of a full
/// directory, a rename onto one) is not reported as changed since.
#[test]
fn operations_that_failed_after_being_journaled_are_done_on_undo() {
    let env = Env::new();
    let ws = workspace(&env);
    let before = tree(&ws);
    let (turn, out) = batch(
        &env,
        &ws,
        json!([
            {"path": "out/over.txt", "content": "x"},
            {"op": "rmdir", "path": "out/sub"},
            {"op": "rename", "path": "out/ren.txt", "to": "out/sub"},
        ]),
    );
    let ok: Vec<bool> = out["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.get("ok").is_some())
        .collect();
    assert_eq!(ok, vec![true, false, false], "{out:#}");
    let report = undo(&env, &turn);
    assert!(
        statuses(&report).iter().all(|(_, st)| st == "done"),
        "{report:#}"
    );
    assert_eq!(tree(&ws), before);
}

#[test]
fn a_file_changed_after_the_turn_is_skipped_and_keeps_the_newer_bytes() {
    let env = Env::new();
    let ws = workspace(&env);
    let (turn, out) = batch(
        &env,
        &ws,
        json!([
            {"path": "out/over.txt", "content": "the turn's bytes"},
            {"path": "out/new.txt", "content": "made by the turn"},
            {"path": "out/trunc.txt", "content": "the turn's too"},
        ]),
    );
    all_ok(&out);
    // Someone else, after the turn.
    std::fs::write(ws.join("out/over.txt"), "newer, by someone else").unwrap();
    std::fs::write(ws.join("out/new.txt"), "newer too").unwrap();
    let report = undo(&env, &turn);
    let steps = statuses(&report);
    assert_eq!(
        steps,
        vec![
            ("restore_blob_backup".into(), "done".into()),
            ("delete_created_paths".into(), "skipped".into()),
            ("restore_blob_backup".into(), "skipped".into()),
        ],
        "{report:#}"
    );
    assert!(report["steps"][1]["reason"]
        .as_str()
        .unwrap()
        .contains("changed since the turn"));
    assert_eq!(
        std::fs::read(ws.join("out/over.txt")).unwrap(),
        b"newer, by someone else"
    );
    assert_eq!(std::fs::read(ws.join("out/new.txt")).unwrap(), b"newer too");
    // What nobody touched since is restored.
    assert_eq!(
        std::fs::read(ws.join("out/trunc.txt")).unwrap(),
        b"to be truncated\n"
    );
    let h = env
        .run(&["--json", "history", "--turn", &turn])
        .json_lines();
    assert_eq!(h[0]["undo"], "partly_undone");
}

#[test]
fn a_created_directory_that_gained_a_file_is_not_removed() {
    let env = Env::new();
    let ws = workspace(&env);
    let (turn, out) = batch(
        &env,
        &ws,
        json!([
            {"op": "mkdir", "path": "out/d"},
            {"path": "out/d/mine.txt", "content": "the turn's"},
        ]),
    );
    all_ok(&out);
    std::fs::write(ws.join("out/d/theirs.txt"), "someone else's").unwrap();
    let report = undo(&env, &turn);
    assert_eq!(
        statuses(&report),
        vec![
            ("delete_created_paths".into(), "done".into()),
            ("delete_created_dirs".into(), "skipped".into()),
        ],
        "{report:#}"
    );
    assert!(!ws.join("out/d/mine.txt").exists());
    assert_eq!(
        std::fs::read(ws.join("out/d/theirs.txt")).unwrap(),
        b"someone else's"
    );
}

fn decisions(env: &Env, turn: &str) -> Vec<Value> {
    env.run(&["history", "--turn", turn, "--decisions"])
        .json_lines()
        .into_iter()
        .filter(|d| d["request"]["kind"] == "filesystem")
        .collect()
}

#[test]
fn fs_write_on_a_glob_allows_what_it_matches_and_refuses_the_rest() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.write("ws/notes/a.txt", "the original a.txt\n");
    env.write("ws/notes/old.md", "old\n");
    let m = manifest(
        &env,
        "notes-writer",
        &component("write-file"),
        &[("fs:write", Some("notes/*.md"))],
    );
    let before = tree(&ws);
    let ops = json!([
        {"path": "notes/a.md", "content": "allowed"},
        {"path": "notes/a.txt", "content": "pwned"},
        {"op": "truncate", "path": "notes/a.txt"},
        {"op": "delete", "path": "notes/a.txt"},
        {"op": "rename", "path": "notes/a.txt", "to": "notes/x.md"},
        {"op": "rename", "path": "notes/old.md", "to": "notes/old.txt"},
        {"path": "notes/b.txt", "content": "new"},
        {"op": "mkdir", "path": "notes/sub"},
        {"op": "read", "path": "notes/a.txt"},
        {"op": "read", "path": "notes/old.md"},
    ]);
    let input = json!({"op": "batch", "ops": ops}).to_string();
    let (run, v) = run_json(&env, &m, &ws, "Full", &input, &[]);
    run.expect(0);
    // The preopen is the glob's directory, not the workspace.
    let linked = v["run"]["linked"].to_string();
    assert!(linked.contains("preopen `notes`"), "{linked}");
    let results = output(&v)["results"].as_array().unwrap().clone();
    let ok: Vec<bool> = results.iter().map(|r| r.get("ok").is_some()).collect();
    assert_eq!(
        ok,
        vec![true, false, false, false, false, false, false, false, false, true],
        "{results:#?}"
    );
    assert!(
        results[1]["err"]
            .as_str()
            .unwrap()
            .contains("not permitted"),
        "{results:#?}"
    );
    // The bytes on disk: a.md is new, nothing else changed.
    let mut expected = before.clone();
    expected.push(("notes/a.md".into(), b"allowed".to_vec()));
    expected.sort();
    assert_eq!(tree(&ws), expected);
    let denied = decisions(&env, v["turn"].as_str().unwrap());
    assert_eq!(denied.len(), 8, "{denied:#?}");
    for d in &denied {
        assert_eq!(d["decision"]["code"], "TARGET_MISMATCH", "{d:#}");
        assert_eq!(d["actor"], "main");
    }
}

#[test]
fn protected_paths_inside_a_write_root_cannot_be_changed() {
    // The state directory (grants database, history, cache) lies inside
    // the read-write workspace: the layer refuses every mutation of it.
    let env = Env::bare();
    let ws = env.root();
    env.run(&[
        "grants",
        "add",
        "--channel",
        "cli",
        "--sender",
        "someone",
        "fs:read",
        "/nowhere/**",
    ])
    .expect(0);
    let db = env.grants_db();
    assert!(db.is_file());
    let m = manifest(
        &env,
        "write-everything",
        &component("write-file"),
        &[("fs:write", Some("**"))],
    );
    let bytes = std::fs::read(&db).unwrap();
    let ops = json!([
        {"path": "state/grants.db", "content": "pwned"},
        {"op": "truncate", "path": "state/grants.db"},
        {"op": "append", "path": "state/grants.db", "content": "pwned"},
        {"op": "rename", "path": "state/grants.db", "to": "stolen.db"},
        {"op": "rename", "path": "cwd/x.db", "to": "state/grants.db"},
        {"op": "delete", "path": "state/grants.db"},
        {"op": "rename", "path": "state", "to": "state2"},
        {"op": "mkdir", "path": "state/history/evil"},
        {"path": "state/history/forged.json", "content": "{}"},
        {"path": "manifests/write-everything.toml", "content": "name = \"x\""},
        {"path": "cwd/fine.txt", "content": "allowed"},
    ]);
    env.write("cwd/x.db", "replacement");
    // The history directory exists once any turn has mutated something.
    env.mkdir("state/history");
    let input = json!({"op": "batch", "ops": ops}).to_string();
    let (run, v) = run_json(&env, &m, &ws, "Full", &input, &[]);
    run.expect(0);
    let results = output(&v)["results"].as_array().unwrap().clone();
    let ok: Vec<bool> = results.iter().map(|r| r.get("ok").is_some()).collect();
    let mut expected = vec![false; 10];
    expected.push(true);
    assert_eq!(ok, expected, "{results:#?}");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        bytes,
        "the grants database changed"
    );
    assert!(!env.root().join("stolen.db").exists());
    assert!(!env.root().join("state2").exists());
    assert!(env.root().join("cwd/x.db").exists());
    assert!(!env.state_dir().join("history/evil").exists());
    let turn = v["turn"].as_str().unwrap();
    let codes: Vec<String> = decisions(&env, turn)
        .iter()
        .map(|d| d["decision"]["code"].as_str().unwrap().to_string())
        .collect();
    let mut want = vec!["POLICY_MUTATION_DENIED"; 9];
    want.push("DEFINITION_MUTATION_DENIED");
    assert_eq!(codes, want);
    // The grants still work (the database is intact).
    let grants = env.run(&["grants", "list"]).json_lines();
    assert_eq!(grants.len(), 1);
}

/// The host is killed (SIGKILL) in the middle of a turn writing many files:
/// the write-ahead journal is enough for undo to restore the workspace.
#[test]
fn undo_restores_a_turn_whose_host_was_killed_midway() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    for i in 0..20 {
        env.write(&format!("ws/out/f{i}.txt"), &format!("original {i}\n"));
    }
    let before = tree(&ws);
    let input =
        json!({"op": "many", "dir": "out", "count": 100_000, "size": 4096, "spin": 200_000})
            .to_string();
    let mut child = env
        .command()
        .args([
            "--json",
            "run",
            s(&guest("write-file")),
            "--workspace",
            s(&ws),
            "--level",
            "Full",
            "--deadline-ms",
            "600000",
            "--input",
            &input,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until it has overwritten the originals and created some more.
    let started = std::time::Instant::now();
    loop {
        let n = std::fs::read_dir(ws.join("out")).unwrap().count();
        if n >= 60 {
            break;
        }
        assert!(
            started.elapsed().as_secs() < 120,
            "the turn did not get going"
        );
        assert!(child.try_wait().unwrap().is_none(), "the turn ended early");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success());
    assert_ne!(tree(&ws), before);
    let turns = env.run(&["--json", "history"]).json_lines();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0]["status"], "running", "{:#?}", turns[0]);
    let turn = turns[0]["turn"].as_str().unwrap().to_string();
    let report = undo(&env, &turn);
    assert!(
        statuses(&report).iter().all(|(_, st)| st == "done"),
        "{report:#}"
    );
    assert_eq!(tree(&ws), before, "{report:#}");
}

/// Issue 12, item 4, the confirmed recipe: turn 1 deletes
/// `out/d/gatehouse.toml`; turn 2 renames `out/d` away and renames a
/// relative symlink standing in for repository content (`out/link`, which
/// points at the configuration directory gatehouse loads from) to
/// `out/d`. Undoing turn 1 must not restore the file through the link
/// into the configuration directory: the step is `skipped`, saying why.
/// The control, in the same set-up: with turn 2 undone first (the link
/// moved back, `out/d` back in place), the same undo of turn 1 restores
/// the file where the turn deleted it.
#[test]
fn undo_does_not_follow_a_planted_symlink() {
    const EVIL: &str =
        "level = \"Full\"\n[actors.main]\nskills = [\"*\"]\ntools = [\"sh\", \"bash\"]\n";
    for attack in [true, false] {
        let env = Env::new();
        let ws = env.mkdir("ws");
        env.write("ws/out/d/gatehouse.toml", EVIL);
        // The configuration directory exists, without a configuration.
        let config_dir = env.mkdir("config/gatehouse");
        std::os::unix::fs::symlink("../../config/gatehouse", ws.join("out/link")).unwrap();
        let (t1, out1) = batch(
            &env,
            &ws,
            json!([{"op": "delete", "path": "out/d/gatehouse.toml"}]),
        );
        all_ok(&out1);
        let (t2, out2) = batch(
            &env,
            &ws,
            json!([
                {"op": "rename", "path": "out/d", "to": "out/d-away"},
                {"op": "rename", "path": "out/link", "to": "out/d"},
            ]),
        );
        all_ok(&out2);
        assert_eq!(
            std::fs::read_link(ws.join("out/d")).unwrap(),
            Path::new("../../config/gatehouse")
        );
        if !attack {
            let report = undo(&env, &t2);
            assert_eq!(
                statuses(&report),
                vec![
                    ("swap_src_dst".into(), "done".into()),
                    ("swap_src_dst".into(), "done".into()),
                ],
                "{report:#}"
            );
        }
        let report = undo(&env, &t1);
        let config_file = config_dir.join("gatehouse.toml");
        if attack {
            assert_eq!(
                statuses(&report),
                vec![("restore_blob_backup".into(), "skipped".into())],
                "{report:#}"
            );
            let reason = report["steps"][0]["reason"].as_str().unwrap();
            assert!(
                reason.contains("symbolic link") && reason.contains("no longer what the turn left"),
                "{reason}"
            );
            assert!(!config_file.exists(), "undo wrote through the link");
            assert_eq!(tree(&config_dir), vec![]);
            assert!(!ws.join("out/d-away/gatehouse.toml").exists());
            let h = env.run(&["--json", "history", "--turn", &t1]).json_lines();
            assert_eq!(h[0]["undo"], "partly_undone");
            // The next invocation still runs on the safe default.
            let v = env.run(&["--json", "policy", "check", "Supervised", "fs:write"]);
            v.expect(4);
        } else {
            assert_eq!(
                statuses(&report),
                vec![("restore_blob_backup".into(), "done".into())],
                "{report:#}"
            );
            assert!(!config_file.exists());
            assert_eq!(
                std::fs::read_to_string(ws.join("out/d/gatehouse.toml")).unwrap(),
                EVIL
            );
            assert!(std::fs::symlink_metadata(ws.join("out/link"))
                .unwrap()
                .file_type()
                .is_symlink());
        }
    }
}

/// Issue 12, item 4: a guest cannot make the link undo would have
/// followed. `symlink-at` refuses a target that is absolute or whose `..`
/// climbs out of the preopened directory (here `out`) at any step; links
/// that stay inside are made, read through, and undone.
#[test]
fn symlink_at_refuses_targets_that_leave_the_preopen() {
    let env = Env::new();
    let ws = workspace(&env);
    env.write("ws/secret.txt", "outside the grant\n");
    env.mkdir("config/gatehouse");
    let before = tree(&ws);
    let input = json!({"op": "batch", "ops": [
        {"op": "symlink", "path": "out/abs", "to": "/etc"},
        {"op": "symlink", "path": "out/up", "to": "../../config/gatehouse"},
        {"op": "symlink", "path": "out/sub/up", "to": "../../secret.txt"},
        {"op": "symlink", "path": "out/zig", "to": "sub/../../out/keep.txt"},
        {"op": "symlink", "path": "out/ok", "to": "sub/inner.txt"},
        {"op": "symlink", "path": "out/sub/ok", "to": "../keep.txt"},
        {"op": "read", "path": "out/ok"},
        {"op": "read", "path": "out/sub/ok"},
    ]})
    .to_string();
    let (run, v) = run_json(&env, &guest("write-file"), &ws, "Full", &input, &[]);
    run.expect(0);
    let results = output(&v)["results"].as_array().unwrap().clone();
    let ok: Vec<bool> = results.iter().map(|r| r.get("ok").is_some()).collect();
    assert_eq!(
        ok,
        vec![false, false, false, false, true, true, true, true],
        "{results:#?}"
    );
    assert_eq!(results[6]["ok"]["content"], "inside sub\n");
    assert_eq!(results[7]["ok"]["content"], "keep\n");
    for refused in ["out/abs", "out/up", "out/sub/up", "out/zig"] {
        assert!(
            std::fs::symlink_metadata(ws.join(refused)).is_err(),
            "{refused} was made"
        );
    }
    assert_eq!(
        std::fs::read_link(ws.join("out/ok")).unwrap(),
        Path::new("sub/inner.txt")
    );
    assert_eq!(
        std::fs::read_link(ws.join("out/sub/ok")).unwrap(),
        Path::new("../keep.txt")
    );
    let turn = v["turn"].as_str().unwrap();
    let denied = decisions(&env, turn);
    assert_eq!(denied.len(), 4, "{denied:#?}");
    for d in &denied {
        assert_eq!(d["request"]["operation"], "symlink-at", "{d:#}");
        assert_eq!(d["decision"]["code"], "TARGET_MISMATCH", "{d:#}");
    }
    assert!(denied[1]["decision"]["reason"]
        .as_str()
        .unwrap()
        .contains("leads out of its preopened directory"));
    // The links the turn made are undone like any created path.
    let report = undo(&env, turn);
    assert_eq!(
        statuses(&report),
        vec![
            ("delete_created_paths".into(), "done".into()),
            ("delete_created_paths".into(), "done".into()),
        ],
        "{report:#}"
    );
    assert_eq!(tree(&ws), before);
}

/// One request of `twin` (`fs-cmd` or `fs-cmd-p1`) in its own turn: the
/// exit status, the JSON line the guest printed, and the turn.
fn twin_request(env: &Env, twin: &str, ws: &Path, request: Value) -> (i32, Value, String) {
    let (run, v) = run_json(env, &guest(twin), ws, "Full", &request.to_string(), &[]);
    let line = v["run"]["result"]["output"]
        .as_str()
        .or_else(|| v["run"]["stdout"].as_str())
        .unwrap_or_else(|| panic!("no guest output in {v:#}"));
    let turn = v["turn"].as_str().unwrap_or_default().to_string();
    (run.code, serde_json::from_str(line.trim()).unwrap(), turn)
}

/// security round 3, item 7, through both WASI worlds (`fs-cmd`, a
/// preview-2 component, and `fs-cmd-p1`, its preview-1 twin whose
/// `path_symlink`/`path_rename`/`path_link` reach the same layer through
/// the adapter): a link made where its `..` stay inside `out/` (the
/// preopen), `out/a/b/c/l/passwd -> ../../../../etc/passwd`, may not be
/// moved to where they climb out: not with its directory (`out/a/b/c/l`
/// to `out/l`), not alone, not as a hard link; and a link whose `..`
/// follows a name (`out/x -> s/..`, with `out/s -> .`, is `out`'s parent)
/// is not made. Each is `EPERM` to the guest, and no link on disk leads
/// out. The controls: `passwd` renamed within its own directory; links
/// that stay inside (`ok -> file.txt`, `up -> ../sib.txt`) are made, and
/// once `passwd` is gone the directory moves to `out/l` with them, where
/// `ok` still reads the file.
#[test]
fn a_rename_may_not_move_a_link_to_where_its_target_climbs_out() {
    const EPERM: &str = "Operation not permitted (os error 63)";
    for twin in ["fs-cmd", "fs-cmd-p1"] {
        let env = Env::new();
        let ws = env.mkdir("ws");
        env.write("ws/out/a/b/c/l/file.txt", "inside\n");
        let deep = "out/a/b/c/l";
        let ok = |(code, line, _): (i32, Value, String)| {
            assert_eq!(code, 0, "{twin}: {line:#}");
        };
        // Refused by the layer, with the reason it gives, and nothing else.
        let refused = |(code, line, turn): (i32, Value, String), what: &str, operation: &str| {
            assert_eq!(
                (code, line["error"].as_str().unwrap_or_default()),
                (1, format!("{what}: {EPERM}").as_str()),
                "{twin}: {line:#}"
            );
            let denied = decisions(&env, &turn);
            assert_eq!(denied.len(), 1, "{twin}: {denied:#?}");
            assert_eq!(denied[0]["request"]["operation"], operation, "{twin}");
            assert_eq!(denied[0]["decision"]["code"], "TARGET_MISMATCH", "{twin}");
            let reason = denied[0]["decision"]["reason"].as_str().unwrap();
            assert!(
                reason.contains("out of its preopened directory"),
                "{reason}"
            );
        };
        let req = |r: Value| twin_request(&env, twin, &ws, r);
        ok(req(
            json!({"op": "symlink", "path": format!("{deep}/passwd"), "to": "../../../../etc/passwd"}),
        ));
        refused(
            req(json!({"op": "rename", "path": deep, "to": "out/l"})),
            &format!("rename `{deep}` to `out/l`"),
            "rename-at",
        );
        refused(
            req(json!({"op": "rename", "path": format!("{deep}/passwd"), "to": "out/passwd"})),
            &format!("rename `{deep}/passwd` to `out/passwd`"),
            "rename-at",
        );
        refused(
            req(json!({"op": "link", "path": format!("{deep}/passwd"), "to": "out/passwd"})),
            &format!("link `{deep}/passwd` to `out/passwd`"),
            "link-at",
        );
        // Within its own directory a link's `..` lead where they led.
        ok(req(
            json!({"op": "rename", "path": format!("{deep}/passwd"), "to": format!("{deep}/pw")}),
        ));
        ok(req(json!({"op": "symlink", "path": "out/s", "to": "."})));
        refused(
            req(json!({"op": "symlink", "path": "out/x", "to": "s/.."})),
            "symlink `out/x` to `s/..`",
            "symlink-at",
        );
        // The controls.
        ok(req(
            json!({"op": "symlink", "path": format!("{deep}/ok"), "to": "file.txt"}),
        ));
        ok(req(
            json!({"op": "symlink", "path": format!("{deep}/up"), "to": "../sib.txt"}),
        ));
        ok(req(json!({"op": "delete", "path": format!("{deep}/pw")})));
        ok(req(json!({"op": "rename", "path": deep, "to": "out/l"})));
        let (code, line, _) = req(json!({"op": "read", "path": "out/l/ok"}));
        assert_eq!((code, &line["content"]), (0, &json!("inside\n")), "{twin}");
        // On disk: exactly the links that stay inside.
        let mut links = Vec::new();
        let mut dirs = vec![ws.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                let kind = std::fs::symlink_metadata(&p).unwrap().file_type();
                if kind.is_symlink() {
                    let rel = p.strip_prefix(&ws).unwrap().display().to_string();
                    links.push((rel, std::fs::read_link(&p).unwrap()));
                } else if kind.is_dir() {
                    dirs.push(p);
                }
            }
        }
        links.sort();
        assert_eq!(
            links,
            vec![
                ("out/l/ok".to_string(), PathBuf::from("file.txt")),
                ("out/l/up".to_string(), PathBuf::from("../sib.txt")),
                ("out/s".to_string(), PathBuf::from(".")),
            ],
            "{twin}"
        );
    }
}
