//! Issue 12, the filesystem and journal items (1, 3, 9, 10, 12, 14, 17):
//! each attack as a guest, a manifest and a configuration, with its
//! positive control in the same set-up (the same guest doing the allowed
//! thing succeeds), checked on the bytes on disk and by deny code.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::exec::{confined_host, tool_call, tool_manifest};
use crate::support::guests::{component, guest, manifest, output, run_json, tree};
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

/// A read-only root nested in a read-write root is not written (Issue 12, item
/// 1).
#[test]
fn a_nested_read_only_root_is_not_written() {
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

/// Renames and links do not reach into, or carry away, a nested read-only root
/// (Issue 12, item 1).
#[test]
fn renames_and_links_do_not_reach_a_nested_read_only_root() {
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

/// A write root that holds a read-only root runs no command
/// (`WORKSPACE_READ_ONLY`) (Issue 12, item 1).
#[test]
fn a_write_root_holding_a_read_only_root_runs_no_command() {
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

/// TRUNCATE with EXCLUSIVE but without CREATE is backed up and journaled (Issue
/// 12, item 9).
#[test]
fn truncate_exclusive_without_create_is_journaled() {
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

// ---------------------------------------------------------------------------
// item 10: a directory rename carries files between globs

/// A directory moves only within one `**` write glob (Issue 12, item 10).
#[test]
fn a_directory_rename_does_not_carry_files_between_globs() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.write("ws/src/sub/secret.txt", "the original secret\n");
    env.write("ws/src/top.txt", "top\n");
    env.write("ws/out/a/inner.txt", "inner\n");
    let m = manifest(
        &env,
        "two-globs",
        &component("write-file"),
        &[("fs:write", Some("src/*")), ("fs:write", Some("out/**"))],
    );
    let before = tree(&ws);
    let (run, v) = run_json(
        &env,
        &m,
        &ws,
        "Full",
        &batch(json!([
            // The recipe: out and back again through `out/**`.
            {"op": "rename", "path": "src/sub", "to": "out/sub"},
            {"path": "out/sub/secret.txt", "content": "pwned"},
            {"op": "rename", "path": "out/sub", "to": "src/sub"},
            // The other way round: a directory of `out/**` into `src/*`.
            {"op": "rename", "path": "out/a", "to": "src/a"},
        ])),
        &[],
    );
    run.expect(0);
    assert_eq!(oks(&v), vec![false, false, false, false], "{v:#}");
    assert_eq!(tree(&ws), before);
    // (The later two of the recipe find no `out/sub` to work on.)
    let codes = fs_codes(&env, &turn_of(&v));
    assert_eq!(codes, vec!["TARGET_MISMATCH"; 2], "{v:#}");
    let reason = fs_denials(&env, &turn_of(&v))[0]["decision"]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.contains("directory"), "{reason}");
    // The controls, same guest and globs: a directory moves within one
    // `**` glob, a file moves between the globs.
    let (run, v) = run_json(
        &env,
        &m,
        &ws,
        "Full",
        &batch(json!([
            {"op": "rename", "path": "out/a", "to": "out/b"},
            {"op": "rename", "path": "src/top.txt", "to": "out/top.txt"},
        ])),
        &[],
    );
    run.expect(0);
    assert_eq!(oks(&v), vec![true, true], "{v:#}");
    assert_eq!(
        std::fs::read(ws.join("out/b/inner.txt")).unwrap(),
        b"inner\n"
    );
    assert_eq!(std::fs::read(ws.join("out/top.txt")).unwrap(), b"top\n");
}

// ---------------------------------------------------------------------------
// item 3: where configuration would be found is protected before it exists

/// Runs the binary with `args`, `XDG_CONFIG_HOME` unset (so the
/// configuration directory is `~/.config/gatehouse`).
fn run_without_xdg_config(env: &Env, args: &[&str]) -> (Run, Value) {
    let out = env
        .command()
        .env_remove("XDG_CONFIG_HOME")
        .args(args)
        .output()
        .unwrap();
    let run = Run {
        code: out.status.code().unwrap(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    };
    let v = run
        .stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    (run, v)
}

const EVIL_CONFIG: &str =
    "level = \"Full\"\n[actors.main]\nskills = [\"*\"]\ntools = [\"sh\", \"bash\"]\n";

/// The configuration gatehouse would load cannot be created, nor any directory
/// above it (Issue 12, item 3).
#[test]
fn the_configuration_gatehouse_would_load_cannot_be_created() {
    let env = Env::new();
    let home = env.root().join("home");
    let m = manifest(
        &env,
        "home-writer",
        &component("write-file"),
        &[("fs:write", Some("**"))],
    );
    // No configuration file: the safe default, level Full on the command
    // line, the workspace at `$HOME`, `fs:write` on `**`.
    let turn = |ops: Value| {
        let input = batch(ops);
        let (run, v) = run_without_xdg_config(
            &env,
            &[
                "--json",
                "run",
                s(&m),
                "--workspace",
                s(&home),
                "--level",
                "Full",
                "--input",
                &input,
            ],
        );
        run.expect(0);
        let codes = fs_codes(&env, &turn_of(&v));
        (oks(&v), codes, v)
    };
    // The recipe, in a home without `~/.config`: create
    // `~/.config/gatehouse/gatehouse.toml`, or stage it and move it in.
    let (ok, codes, v) = turn(json!([
        {"op": "mkdir", "path": ".config"},
        {"op": "mkdir", "path": "staged"},
        {"op": "mkdir", "path": "staged/gatehouse"},
        {"path": "staged/gatehouse/gatehouse.toml", "content": EVIL_CONFIG},
        {"op": "rename", "path": "staged", "to": ".config"},
        // The state gatehouse would use without `$GATEHOUSE_STATE_DIR`.
        {"op": "mkdir", "path": ".local"},
        {"path": "notes.txt", "content": "fine"},
    ]));
    assert_eq!(
        ok,
        vec![false, true, true, true, false, false, true],
        "{v:#}"
    );
    assert_eq!(codes, vec!["POLICY_MUTATION_DENIED"; 3], "{v:#}");
    assert!(!home.join(".config").exists(), "{v:#}");
    assert!(!home.join(".local").exists(), "{v:#}");
    assert_eq!(std::fs::read(home.join("notes.txt")).unwrap(), b"fine");
    // A home with `~/.config` but no `gatehouse` in it.
    std::fs::create_dir(home.join(".config")).unwrap();
    let (ok, codes, v) = turn(json!([
        {"op": "mkdir", "path": ".config/gatehouse"},
        {"op": "rename", "path": "staged/gatehouse", "to": ".config/gatehouse"},
        {"path": ".config/other.txt", "content": "fine"},
    ]));
    assert_eq!(ok, vec![false, false, true], "{v:#}");
    assert_eq!(codes, vec!["POLICY_MUTATION_DENIED"; 2], "{v:#}");
    assert!(!home.join(".config/gatehouse").exists(), "{v:#}");
    // An empty `~/.config/gatehouse`: create, rename into, link into.
    std::fs::create_dir(home.join(".config/gatehouse")).unwrap();
    let (ok, codes, v) = turn(json!([
        {"path": ".config/gatehouse/gatehouse.toml", "content": EVIL_CONFIG},
        {"op": "rename", "path": "staged/gatehouse/gatehouse.toml", "to": ".config/gatehouse/gatehouse.toml"},
        {"op": "link", "path": "staged/gatehouse/gatehouse.toml", "to": ".config/gatehouse/gatehouse.toml"},
        {"path": "notes.txt", "content": "fine again"},
    ]));
    assert_eq!(ok, vec![false, false, false, true], "{v:#}");
    assert_eq!(codes, vec!["POLICY_MUTATION_DENIED"; 3], "{v:#}");
    assert!(
        !home.join(".config/gatehouse/gatehouse.toml").exists(),
        "{v:#}"
    );
    // The next invocation still has no configuration: the safe default.
    let (run, _) = run_without_xdg_config(&env, &["policy", "check", "Supervised", "fs:write"]);
    run.expect(4);
    let (run, v) = run_without_xdg_config(
        &env,
        &[
            "--json",
            "policy",
            "decide",
            r#"{"kind":"tool","actor":"main","tool":"sh"}"#,
        ],
    );
    run.expect(2);
    assert_eq!(v["code"], "TOOL_NOT_GRANTED", "{run:#?}");
}

/// Every place configuration is discovered from is protected, whichever
/// configuration is in use (Issue 12, item 3).
#[test]
fn every_place_configuration_is_found_is_protected_with_an_explicit_config() {
    // A configuration given with `--config`: the configuration directory
    // (`$XDG_CONFIG_HOME/gatehouse`) is still where the next invocation
    // without it would look.
    let env = Env::new();
    let ws = env.root();
    let config = env.write(
        "etc/gatehouse.toml",
        "level = \"Full\"\nexecutor_dirs = [\"../executors\"]\n[actors.main]\nskills = [\"*\"]\n",
    );
    let m = manifest(
        &env,
        "root-writer",
        &component("write-file"),
        &[("fs:write", Some("**"))],
    );
    let (run, v) = run_with(
        &env,
        &config,
        &m,
        &ws,
        &batch(json!([
            {"op": "mkdir", "path": "config/gatehouse"},
            {"path": "config/gatehouse/gatehouse.toml", "content": EVIL_CONFIG},
            {"path": "etc/gatehouse.toml", "content": EVIL_CONFIG},
            // An executor directory that does not exist yet.
            {"op": "mkdir", "path": "executors"},
            // The state `$XDG_STATE_HOME` would give.
            {"op": "mkdir", "path": "xdg-state/gatehouse"},
            {"path": "cwd/fine.txt", "content": "fine"},
        ])),
    );
    run.expect(0);
    assert_eq!(
        oks(&v),
        vec![false, false, false, false, false, true],
        "{v:#}"
    );
    assert!(!ws.join("config/gatehouse").exists());
    assert!(!ws.join("executors").exists());
    assert!(!ws.join("xdg-state/gatehouse").exists());
    // (`config/gatehouse/gatehouse.toml` has no directory to be made in.)
    assert_eq!(
        fs_codes(&env, &turn_of(&v)),
        vec![
            "POLICY_MUTATION_DENIED",
            "POLICY_MUTATION_DENIED",
            "DEFINITION_MUTATION_DENIED",
            "POLICY_MUTATION_DENIED"
        ],
        "{v:#}"
    );
    assert_eq!(std::fs::read(ws.join("cwd/fine.txt")).unwrap(), b"fine");
}

// ---------------------------------------------------------------------------
// item 14: host state is hidden from reads too

/// A read root that holds the state directory reads no host state
/// (`HOST_STATE_HIDDEN`) (Issue 12, item 14).
#[test]
fn a_read_root_holding_the_state_directory_reads_no_host_state() {
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
    // A turn that journals a backup: the history holds a blob.
    env.write("cwd/out/old.txt", "the bytes a blob keeps\n");
    let (run, v) = run_json(
        &env,
        &guest("write-file"),
        &env.root().join("cwd"),
        "Full",
        r#"{"path":"out/old.txt","content":"new"}"#,
        &[],
    );
    run.expect(0);
    let blob = env
        .state_dir()
        .join("history")
        .join(turn_of(&v))
        .join("blob")
        .join(format!(
            "{}.bin",
            gatehouse::policy::snapshot::sha256_hex(b"the bytes a blob keeps\n")
        ));
    assert!(blob.is_file());
    // A turn that mutates nothing: the audit log holds its record.
    let (run, _) = run_json(
        &env,
        &guest("hello"),
        &env.root().join("cwd"),
        "Full",
        "{}",
        &[],
    );
    run.expect(0);
    env.write("state/memory.db", "private memory of every actor");
    env.write("cwd/notes.txt", "readable\n");
    let m = manifest(
        &env,
        "reader",
        &component("write-file"),
        &[("fs:read", Some("**"))],
    );
    let rel = |p: &Path| p.strip_prefix(&ws).unwrap().display().to_string();
    let (run, v) = run_json(
        &env,
        &m,
        &ws,
        "Full",
        &batch(json!([
            {"op": "read", "path": "state/grants.db"},
            {"op": "read", "path": "state/memory.db"},
            {"op": "read", "path": rel(&blob)},
            {"op": "read", "path": "state/audit.jsonl"},
            // The control: the same guest reads the rest of its root.
            {"op": "read", "path": "cwd/notes.txt"},
        ])),
        &[],
    );
    run.expect(0);
    assert_eq!(oks(&v), vec![false, false, false, false, true], "{v:#}");
    assert_eq!(
        fs_codes(&env, &turn_of(&v)),
        vec!["HOST_STATE_HIDDEN"; 4],
        "{v:#}"
    );
    assert_eq!(
        output(&v)["results"][4]["ok"]["content"],
        "readable\n",
        "{v:#}"
    );
    // The policy says so too, and a read grant on the state is refused
    // at the gate.
    let run = env.run(&[
        "--json",
        "policy",
        "decide",
        &json!({"kind": "workspace", "actor": "main", "access": "read",
                "path": {"resolved": s(&env.grants_db())}})
        .to_string(),
        "--workspace",
        s(&ws),
    ]);
    run.expect(2);
    assert_eq!(run.json_lines()[0]["code"], "HOST_STATE_HIDDEN");
    let m = manifest(
        &env,
        "state-reader",
        &component("write-file"),
        &[("fs:read", Some("state/**"))],
    );
    let (run, v) = run_json(
        &env,
        &m,
        &ws,
        "Full",
        r#"{"op":"read","path":"grants.db"}"#,
        &[],
    );
    run.expect(2);
    assert_eq!(v["code"], "HOST_STATE_HIDDEN", "{v:#}");
}

/// A command whose read root holds host state runs not at all (Issue 12, item
/// 14).
#[test]
fn a_command_with_a_read_root_holding_host_state_is_refused() {
    assert!(confined_host(), "this host lacks landlock or seccomp");
    let env = Env::new();
    env.mkdir("state");
    env.write("state/memory.db", "private memory");
    env.write("cwd/notes.txt", "readable\n");
    let config = env.write(
        "gatehouse.toml",
        "[actors.main]\nskills = [\"*\"]\ntools = [\"cat\"]\n",
    );
    let m = env.write(
        "manifests/cat.toml",
        &format!(
            "name = \"cat\"\ncomponent = \"{}\"\ntools = [\"cat\"]\n\
             [[capabilities]]\nname = \"code:exec\"\ntarget = \"cat\"\n\
             [[capabilities]]\nname = \"fs:read\"\ntarget = \"**\"\n",
            s(&component("run-tool"))
        ),
    );
    let (run, v) = tool_call(&env, &m, &env.root(), &config, "cat", &["state/memory.db"]);
    assert_eq!(run.code, 1, "{run:#?}");
    assert_eq!(
        v["run"]["result"]["error"]["denied"]["code"], "HOST_STATE_HIDDEN",
        "{v:#}"
    );
    assert_eq!(v["run"]["commands"][0]["spawned"], false, "{v:#}");
    // The control: a read root without host state runs the command.
    let (run, v) = tool_call(
        &env,
        &m,
        &env.root().join("cwd"),
        &config,
        "cat",
        &["notes.txt"],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(v["run"]["commands"][0]["spawned"], true, "{v:#}");
}

// ---------------------------------------------------------------------------
// item 17: code substitution

/// A known component (as the file and as the manifest's name) and the
/// compiled-component cache cannot be replaced (Issue 12, item 17).
#[test]
fn a_known_component_and_the_cache_cannot_be_replaced() {
    let env = Env::new();
    let ws = env.root();
    // Another executor, known through the configured executor directory,
    // whose component lies in the attacker's write root.
    std::fs::create_dir_all(ws.join("cwd/bin")).unwrap();
    std::fs::copy(component("hello"), ws.join("cwd/bin/hello.wasm")).unwrap();
    env.write(
        "executors/hello/executor.toml",
        &format!(
            "name = \"hello-copy\"\ncomponent = \"{}\"\n",
            s(&ws.join("cwd/bin/hello.wasm"))
        ),
    );
    let config = env.write(
        "etc/gatehouse.toml",
        "level = \"Full\"\nexecutor_dirs = [\"../executors\"]\n[actors.main]\nskills = [\"*\"]\n",
    );
    // The cache exists once a component was compiled.
    let (run, _) = run_with(&env, &config, &guest("hello"), &ws, "{}");
    run.expect(0);
    let cache = env.state_dir().join("cache");
    let cached: Vec<PathBuf> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!cached.is_empty());
    let m = manifest(
        &env,
        "substitute",
        &component("write-file"),
        &[("fs:write", Some("**"))],
    );
    let bytes = std::fs::read(ws.join("cwd/bin/hello.wasm")).unwrap();
    let (run, v) = run_with(
        &env,
        &config,
        &m,
        &ws,
        &batch(json!([
            {"path": "cwd/bin/hello.wasm", "content": "evil"},
            {"op": "rename", "path": "cwd/bin", "to": "cwd/bin2"},
            {"path": rel_to(&ws, &cached[0]), "content": "evil"},
            {"path": "state/cache/new.bin", "content": "evil"},
            // The control: beside the component, the same guest writes.
            {"path": "cwd/bin/other.wasm", "content": "fine"},
        ])),
    );
    run.expect(0);
    assert_eq!(oks(&v), vec![false, false, false, false, true], "{v:#}");
    assert_eq!(std::fs::read(ws.join("cwd/bin/hello.wasm")).unwrap(), bytes);
    assert_eq!(
        fs_codes(&env, &turn_of(&v)),
        vec![
            "DEFINITION_MUTATION_DENIED",
            "DEFINITION_MUTATION_DENIED",
            "POLICY_MUTATION_DENIED",
            "POLICY_MUTATION_DENIED"
        ],
        "{v:#}"
    );
}

fn rel_to(base: &Path, p: &Path) -> String {
    p.strip_prefix(base).unwrap().display().to_string()
}

/// `manifest check` warns of a component that is neither pinned nor outside
/// every write root (Issue 12, item 17).
#[test]
fn manifest_check_warns_of_an_unpinned_component_in_a_write_root() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    std::fs::create_dir_all(ws.join("bin")).unwrap();
    std::fs::copy(component("hello"), ws.join("bin/hello.wasm")).unwrap();
    let digest =
        gatehouse::policy::snapshot::sha256_hex(&std::fs::read(component("hello")).unwrap());
    let write = |name: &str, component: &Path, pin: bool| {
        let mut text = format!("name = \"{name}\"\ncomponent = \"{}\"\n", s(component));
        if pin {
            text.push_str(&format!("sha256 = \"{digest}\"\n"));
        }
        env.write(&format!("manifests/{name}.toml"), &text)
    };
    let check = |m: &Path| {
        let run = env.run(&["--json", "manifest", "check", s(m), "--workspace", s(&ws)]);
        run.expect(0);
        run.json_lines()[0].clone()
    };
    // Unpinned, inside the workspace the default actor may write: a warning.
    let v = check(&write("loose", &ws.join("bin/hello.wasm"), false));
    let warnings = v["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{v:#}");
    let w = warnings[0].as_str().unwrap();
    assert!(w.contains("not pinned"), "{w}");
    assert!(w.contains(s(&ws)), "{w}");
    let human = env.run(&[
        "manifest",
        "check",
        s(&write("loose", &ws.join("bin/hello.wasm"), false)),
        "--workspace",
        s(&ws),
    ]);
    human.expect(0);
    assert!(
        human.stdout.lines().any(|l| l.starts_with("warning: ")),
        "{human:#?}"
    );
    // The controls: pinned, or outside every write root: no warning.
    let v = check(&write("pinned", &ws.join("bin/hello.wasm"), true));
    assert_eq!(v["warnings"], json!([]), "{v:#}");
    let v = check(&write("outside", &component("hello"), false));
    assert_eq!(v["warnings"], json!([]), "{v:#}");
}

// ---------------------------------------------------------------------------
// item 12: the journal is capped

/// A change whose backup would pass the journal cap is refused
/// (`LIMIT_JOURNAL`) and changes nothing (Issue 12, item 12).
#[test]
fn a_write_that_would_pass_the_journal_cap_is_refused_and_changes_nothing() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    env.write("ws/out/small.txt", "small original\n");
    let config = env.write(
        "gatehouse.toml",
        "level = \"Full\"\n[actors.main]\nskills = [\"*\"]\n[limits]\njournal_mib = 1\n",
    );
    // Turn 1: the guest makes a file it may write 2 MiB long (its own
    // file: nothing to back up).
    let (run, v) = run_with(
        &env,
        &config,
        &guest("write-file"),
        &ws,
        &batch(json!([
            {"op": "create", "path": "out/big.bin"},
            {"op": "resize", "path": "out/big.bin", "size": 2 * 1024 * 1024},
            {"op": "create", "path": "out/a.bin"},
            {"op": "resize", "path": "out/a.bin", "size": 600 * 1024},
            {"op": "create", "path": "out/b.bin"},
            {"op": "resize", "path": "out/b.bin", "size": 600 * 1024},
        ])),
    );
    run.expect(0);
    assert_eq!(oks(&v), vec![true; 6], "{v:#}");
    let before = tree(&ws);
    // Turn 2: overwriting it would back up 2 MiB, past the 1 MiB cap.
    let (run, v) = run_with(
        &env,
        &config,
        &guest("write-file"),
        &ws,
        &batch(json!([
            {"path": "out/big.bin", "content": "x"},
            {"op": "resize", "path": "out/big.bin", "size": 0},
            {"op": "delete", "path": "out/big.bin"},
            // 600 KiB fits; another 600 KiB would not.
            {"path": "out/a.bin", "content": "a"},
            {"path": "out/b.bin", "content": "b"},
            // The control: a small file is backed up and written.
            {"path": "out/small.txt", "content": "small new"},
        ])),
    );
    run.expect(0);
    assert_eq!(
        oks(&v),
        vec![false, false, false, true, false, true],
        "{v:#}"
    );
    let turn = turn_of(&v);
    assert_eq!(fs_codes(&env, &turn), vec!["LIMIT_JOURNAL"; 4], "{v:#}");
    let mut expected = before;
    for (path, bytes) in expected.iter_mut() {
        match path.as_str() {
            "out/a.bin" => *bytes = b"a".to_vec(),
            "out/small.txt" => *bytes = b"small new".to_vec(),
            _ => {}
        }
    }
    assert_eq!(tree(&ws), expected);
    // What was journaled is undone.
    undo(&env, &turn);
    assert_eq!(
        std::fs::read(ws.join("out/a.bin")).unwrap(),
        vec![0u8; 600 * 1024]
    );
    assert_eq!(
        std::fs::read(ws.join("out/small.txt")).unwrap(),
        b"small original\n"
    );
}

/// The journal cap is `[limits] journal_mib`, refused by name when invalid
/// (Issue 12, item 12).
#[test]
fn the_journal_cap_is_configured_by_name() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let config = env.write(
        "gatehouse.toml",
        "[actors.main]\nskills = [\"*\"]\n[limits]\njournal_mb = 1\n",
    );
    let (run, _) = run_with(&env, &config, &guest("hello"), &ws, "{}");
    run.expect_err(3, &["unknown field `journal_mb`"]);
    let config = env.write(
        "gatehouse.toml",
        "[actors.main]\nskills = [\"*\"]\n[limits]\njournal_mib = 0\n",
    );
    let (run, _) = run_with(&env, &config, &guest("hello"), &ws, "{}");
    run.expect_err(3, &["field `limits.journal_mib`"]);
}

/// security round 2, item 5: wasi-libc strips a preopen name's leading
/// `/`, so `mount = "/out"` and the workspace's own `out` are one name to
/// the guest, and `mount = "/"` is the workspace's `.`. Such a manifest is
/// refused (exit 3, naming both targets), and a run of it writes nothing.
///
/// Positive control: the same capabilities with `mount = "/other"` pass
/// the check, and the run writes into `other/`.
#[test]
fn a_mount_that_names_a_workspace_directory_is_refused() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    env.mkdir("ws/other");
    let write = |name: &str, mount: &str, target: &str| {
        env.write(
            &format!("m/{name}.toml"),
            &format!(
                "name = \"{name}\"\ncomponent = \"{}\"\n\
                 [[capabilities]]\nname = \"fs:write\"\ntarget = \"other/**\"\nmount = \"{mount}\"\n\
                 [[capabilities]]\nname = \"fs:write\"\ntarget = \"{target}\"\n",
                s(&component("write-file"))
            ),
        )
    };
    for (name, mount, target) in [("clash", "/out", "out/**"), ("root", "/", "**")] {
        let m = write(name, mount, target);
        env.run(&["manifest", "check", s(&m)]).expect_err(
            3,
            &[&format!(
                "field `capabilities[1]`: `{target}` and `other/**` preopen two directories that the guest would see under one name, `{}` (wasi-libc strips a mount's leading `/`)",
                if mount == "/" { "." } else { "out" }
            )],
        );
        let input = r#"{"path":"/out/b.txt","content":"meant for other"}"#;
        let (run, _) = run_json(&env, &m, &ws, "Full", input, &[]);
        assert_eq!(run.code, 3, "{run:#?}");
        assert!(!ws.join("out/b.txt").exists());
        assert!(!ws.join("other/b.txt").exists());
    }
    let m = write("fine", "/elsewhere", "out/**");
    env.run(&["manifest", "check", s(&m)]).expect(0);
    let input = r#"{"path":"/elsewhere/b.txt","content":"for other"}"#;
    let (run, _) = run_json(&env, &m, &ws, "Full", input, &[]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(std::fs::read(ws.join("other/b.txt")).unwrap(), b"for other");
}
