//! Executors in Python (issue 30): the `python` executor
//! (`guests/python`, CPython through componentize-py, built by
//! `setup.sh`) runs the code it is given under its turn's grants and
//! nothing else. Each test runs it as a user would (`gatehouse run`) and
//! asserts the exact result, the bytes on disk, or the deny code.
//!
//! Compiling the 24 MB component takes the debug binary seconds, so the
//! first test to need it compiles it once into a shared cache and every
//! test's state starts with a copy of it (`seed_python_cache`).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::guests::{guest, output, run_json, seed_python_cache};
use crate::support::{s, Env};

/// A sealed environment whose state starts with the `python` executor
/// compiled, and its workspace `ws` (with `ws/out/`).
fn env_with_python() -> (Env, PathBuf) {
    let env = Env::new();
    seed_python_cache(&env);
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    (env, ws)
}

/// Runs `code` in the `python` executor at level Full; the CLI's run and
/// its JSON line.
fn python(env: &Env, ws: &Path, code: &str, extra: &[&str]) -> (crate::support::Run, Value) {
    let input = json!({ "code": code }).to_string();
    run_json(env, &guest("python"), ws, "Full", &input, extra)
}

/// The executor's result (`stdout`, `stderr`, `exception`) of a turn that
/// ended well.
fn result(run: &crate::support::Run, v: &Value) -> Value {
    run.expect(0);
    output(v)
}

#[test]
fn python_runs_arithmetic_and_prints() {
    let (env, ws) = env_with_python();
    let (run, v) = python(&env, &ws, "x = 6 * 7\nprint(x)\nprint(2 ** 100)", &[]);
    assert_eq!(
        result(&run, &v),
        json!({"stdout": "42\n1267650600228229401496703205376\n", "stderr": "", "exception": null})
    );
    // The standard library the executor snapshots with it (app.py's STDLIB).
    let (run, v) = python(
        &env,
        &ws,
        "import hashlib, statistics, datetime\nprint(hashlib.sha256(b'abc').hexdigest()[:12], statistics.mean([1, 2, 3, 4]), datetime.date(2026, 12, 6).isoformat())",
        &[],
    );
    assert_eq!(result(&run, &v)["stdout"], "ba7816bf8f01 2.5 2026-12-06\n");
}

#[test]
fn python_reads_stdin_and_writes_stderr() {
    let (env, ws) = env_with_python();
    let input = json!({"code": "import sys\nname = input()\nprint('hi', name)\nprint('warned', file=sys.stderr)", "stdin": "ada\n"});
    let (run, v) = run_json(&env, &guest("python"), &ws, "Full", &input.to_string(), &[]);
    assert_eq!(
        result(&run, &v),
        json!({"stdout": "hi ada\n", "stderr": "warned\n", "exception": null})
    );
}

#[test]
fn python_an_exception_is_a_result_with_its_traceback() {
    let (env, ws) = env_with_python();
    let (run, v) = python(&env, &ws, "print('before')\n1 / 0", &[]);
    let out = result(&run, &v);
    assert_eq!(out["stdout"], "before\n");
    assert_eq!(
        out["exception"],
        "Traceback (most recent call last):\n  File \"<code>\", line 2, in <module>\nZeroDivisionError: division by zero\n"
    );
    // A syntax error too, and sys.exit with a status.
    let (run, v) = python(&env, &ws, "def (", &[]);
    let exception = result(&run, &v)["exception"].as_str().unwrap().to_string();
    assert!(
        exception.ends_with("SyntaxError: invalid syntax\n"),
        "{exception}"
    );
    let (run, v) = python(&env, &ws, "import sys\nsys.exit(3)", &[]);
    assert_eq!(result(&run, &v)["exception"], "SystemExit: 3");
}

#[test]
fn python_input_that_is_not_code_is_refused_as_invalid_input() {
    let (env, ws) = env_with_python();
    for (input, message) in [
        ("not json", "the input is not JSON"),
        (r#"{"code": 1}"#, "the input needs `code`, a string"),
        (r#"{"code": "", "env": {}}"#, "unknown field `env`"),
    ] {
        let (run, v) = run_json(&env, &guest("python"), &ws, "Full", input, &[]);
        assert_ne!(run.code, 0, "{input}: {v:#}");
        let text = v.to_string();
        assert!(
            text.contains("invalid") && text.contains(message),
            "{input}: {v:#}"
        );
    }
}

#[test]
fn python_reads_a_file_under_its_granted_root() {
    let (env, ws) = env_with_python();
    env.write("ws/data/notes.txt", "line one\nline two\n");
    let (run, v) = python(
        &env,
        &ws,
        "import os, pathlib\nprint(sorted(os.listdir('data')))\nprint(pathlib.Path('data/notes.txt').read_text().splitlines()[1])",
        &[],
    );
    assert_eq!(
        result(&run, &v),
        json!({"stdout": "['notes.txt']\nline two\n", "stderr": "", "exception": null})
    );
}

#[test]
fn python_a_write_under_its_grant_is_undone_by_gatehouse_undo() {
    let (env, ws) = env_with_python();
    env.write("ws/out/kept.txt", "the original\n");
    let (run, v) = python(
        &env,
        &ws,
        "open('out/new.txt', 'w').write('made by python\\n')\nopen('out/kept.txt', 'a').write('appended\\n')",
        &[],
    );
    assert_eq!(result(&run, &v)["exception"], Value::Null);
    assert_eq!(
        std::fs::read_to_string(ws.join("out/new.txt")).unwrap(),
        "made by python\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("out/kept.txt")).unwrap(),
        "the original\nappended\n"
    );
    let turn = v["turn"].as_str().unwrap();
    env.run(&["--json", "undo", "--turn", turn]).expect(0);
    assert!(!ws.join("out/new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("out/kept.txt")).unwrap(),
        "the original\n"
    );
}

#[test]
fn python_a_write_outside_its_grant_fails_inside_python_and_is_audited() {
    let (env, ws) = env_with_python();
    let (run, v) = python(
        &env,
        &ws,
        "try:\n    open('escape.txt', 'w')\nexcept PermissionError as e:\n    print('refused', e.errno)",
        &[],
    );
    let out = result(&run, &v);
    assert_eq!(out["stdout"], "refused 63\n", "{out:#}");
    assert!(!ws.join("escape.txt").exists());
    let audit = std::fs::read_to_string(env.state_dir().join("audit.jsonl")).unwrap();
    let turn = v["turn"].as_str().unwrap();
    let line: Value = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["turn"] == turn)
        .expect("the turn's audit line");
    let refused: Vec<&Value> = line["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["decision"]["decision"] == "deny")
        .collect();
    assert_eq!(refused.len(), 1, "{line:#}");
    assert_eq!(refused[0]["decision"]["code"], "TARGET_MISMATCH");
    assert_eq!(
        refused[0]["request"]["path"],
        s(&ws.canonicalize().unwrap().join("escape.txt"))
    );
}

#[test]
fn python_sees_no_environment_variable_it_was_not_granted() {
    let (env, ws) = env_with_python();
    let (run, v) = python(
        &env,
        &ws,
        "import os\nprint(dict(os.environ), os.getenv('HOME'), os.getenv('GATEHOUSE_STATE_DIR'))",
        &[],
    );
    assert_eq!(result(&run, &v)["stdout"], "{} None None\n");
}

#[test]
fn python_has_no_network_without_a_grant() {
    let (env, ws) = env_with_python();
    // A listener on loopback: nothing may reach it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = format!(
        "try:\n    import socket\n    socket.create_connection(('127.0.0.1', {port}))\nexcept Exception as e:\n    print(type(e).__name__, e)"
    );
    let (run, v) = python(&env, &ws, &code, &[]);
    // The interpreter has no `socket` module, and the component no
    // `wasi:sockets` (see the imports test).
    assert_eq!(
        result(&run, &v)["stdout"],
        "ModuleNotFoundError No module named 'socket'\n"
    );
    assert!(
        listener.accept().is_err(),
        "a connection reached the listener"
    );
}

#[test]
fn python_imports_only_what_its_manifest_grants() {
    let env = Env::new();
    let component = guest("python")
        .parent()
        .unwrap()
        .join("../target/lang/python.wasm");
    let inspect = env.run(&["--json", "inspect", s(&component)]);
    inspect.expect(0);
    let imports: Vec<String> = inspect.json_lines()[0]["imports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        imports
            .iter()
            .all(|i| !i.starts_with("wasi:sockets/") && !i.starts_with("wasi:http/")),
        "{imports:#?}"
    );
    assert!(imports.contains(&"wasi:filesystem/preopens@0.2.9".to_string()));
    let check = env.run(&["manifest", "check", s(&guest("python"))]);
    check.expect(0);
}

#[test]
fn python_limits_end_the_turn_with_their_codes() {
    let (env, ws) = env_with_python();
    for (code, deny, extra) in [
        (
            "while True: pass",
            "LIMIT_DEADLINE",
            ["--deadline-ms", "1500"],
        ),
        (
            "blocks = []\nwhile True: blocks.append(bytearray(1 << 20))",
            "LIMIT_MEMORY",
            ["--memory-mib", "64"],
        ),
        (
            "while True: print('flood ' * 10)",
            "LIMIT_OUTPUT",
            ["--output-kib", "64"],
        ),
    ] {
        let (run, v) = python(&env, &ws, code, &extra);
        run.expect_err(134, &[deny]);
        assert_eq!(v["error"]["code"], deny, "{code}: {v:#}");
    }
}
