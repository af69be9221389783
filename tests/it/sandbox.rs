//! Issue 4: executors run as components in a sandbox built from the plan.
//! Every security claim here is tested by a guest that tries.

use std::path::Path;

use crate::support::guests::{
    build_guests, component, guest, manifest, output, run_json, tree, GUESTS,
};
use crate::support::{s, Env, Run};

#[test]
fn hello_runs_and_a_second_run_does_no_compilation() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let (run, v) = run_json(&env, &guest("hello"), &ws, "Supervised", r#"{"a":1}"#, &[]);
    run.expect(0);
    assert_eq!(output(&v), serde_json::json!({"echo": {"a": 1}}));
    assert_eq!(v["run"]["cache_hit"], false);
    assert_eq!(v["run"]["log"][0]["level"], "info");
    let (run, v) = run_json(&env, &guest("hello"), &ws, "Supervised", r#"{"a":2}"#, &[]);
    run.expect(0);
    assert_eq!(v["run"]["cache_hit"], true, "{v:#}");
    assert_eq!(output(&v), serde_json::json!({"echo": {"a": 2}}));
}

/// The (first) compiled entry in `env`'s cache.
fn cache_entry(env: &Env) -> std::path::PathBuf {
    std::fs::read_dir(env.state_dir().join("cache"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .unwrap()
}

#[test]
fn a_corrupt_cache_entry_is_rebuilt_not_loaded() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    run_json(&env, &guest("hello"), &ws, "Supervised", "{}", &[])
        .0
        .expect(0);
    let entry = cache_entry(&env);
    let mut bytes = std::fs::read(&entry).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();
    let (run, v) = run_json(&env, &guest("hello"), &ws, "Supervised", "{}", &[]);
    run.expect(0);
    assert_eq!(
        v["run"]["cache_hit"], false,
        "a corrupt entry must not count as a hit"
    );
    assert_eq!(output(&v), serde_json::json!({"echo": {}}));
}

#[test]
fn a_denied_run_touches_nothing() {
    let env = Env::bare();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let (run, v) = run_json(
        &env,
        &guest("write-file"),
        &ws,
        "ReadOnly",
        r#"{"path":"out/a.txt","content":"x"}"#,
        &[],
    );
    run.expect(2);
    assert_eq!(v["code"], "CAPABILITY_DENIED");
    assert!(
        v.get("isolation").is_none(),
        "a denied request was probed: {v:#}"
    );
    // No cache entry, no grants database, no history: one denial line,
    // and its record in the audit chain.
    let mut state = tree(&env.state_dir());
    let names: Vec<&str> = state.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["audit-chain.jsonl", "denials.jsonl"]);
    state.retain(|(n, _)| n != "audit-chain.jsonl");
    let d: serde_json::Value = serde_json::from_slice(&state[0].1).unwrap();
    assert_eq!(d["code"], "CAPABILITY_DENIED");
    assert_eq!(d["executor"], "write-file");
    assert_eq!(tree(&ws), vec![("out/".to_string(), vec![])]);
}

#[test]
fn write_file_writes_only_inside_its_grant() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    env.write("ws/secret.txt", "keep");
    let (run, v) = run_json(
        &env,
        &guest("write-file"),
        &ws,
        "Full",
        r#"{"path":"out/a.txt","content":"hello\n"}"#,
        &[],
    );
    run.expect(0);
    assert_eq!(
        output(&v),
        serde_json::json!({"path": "out/a.txt", "bytes": 6})
    );
    assert_eq!(std::fs::read(ws.join("out/a.txt")).unwrap(), b"hello\n");
    let before = tree(&ws);
    let outside = env.path("outside.txt");
    for path in ["secret.txt", "../x", s(&outside), "out/../secret.txt"] {
        let input = serde_json::json!({"path": path, "content": "pwned"}).to_string();
        let (run, v) = run_json(&env, &guest("write-file"), &ws, "Full", &input, &[]);
        run.expect(1);
        assert!(
            v["run"]["result"]["error"]["failed"].as_str().is_some(),
            "{path}: {v:#}"
        );
        assert_eq!(tree(&ws), before, "{path} changed the workspace");
        assert!(!outside.exists() && !env.root().join("x").exists());
    }
}

#[test]
fn read_file_cannot_mutate_anything() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.write("ws/a.txt", "original");
    env.mkdir("ws/d");
    let (run, v) = run_json(
        &env,
        &guest("read-file"),
        &ws,
        "Full",
        r#"{"path":"a.txt"}"#,
        &[],
    );
    run.expect(0);
    assert_eq!(output(&v)["content"], "original");
    let before = tree(&ws);
    for input in [
        r#"{"op":"create","path":"new.txt"}"#,
        r#"{"op":"truncate","path":"a.txt"}"#,
        r#"{"op":"append","path":"a.txt"}"#,
        r#"{"op":"rename","path":"a.txt","to":"b.txt"}"#,
        r#"{"op":"delete","path":"a.txt"}"#,
        r#"{"op":"mkdir","path":"e"}"#,
        r#"{"op":"rmdir","path":"d"}"#,
    ] {
        let (run, v) = run_json(&env, &guest("read-file"), &ws, "Full", input, &[]);
        run.expect(1);
        assert!(
            v["run"]["result"]["error"]["failed"].as_str().is_some(),
            "{input}: {v:#}"
        );
        assert_eq!(tree(&ws), before, "{input} changed the workspace");
    }
}

#[test]
fn imports_without_their_grant_are_refused_before_instantiation() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let sneaky = manifest(&env, "sneaky-memory", &component("sneaky-memory"), &[]);
    let (run, v) = run_json(&env, &sneaky, &ws, "Full", "{}", &[]);
    run.expect(2);
    assert_eq!(v["code"], "IMPORT_NOT_GRANTED");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("`gatehouse:executor/memory@0.1.0`"),
        "{v:#}"
    );
    // Refused before any instance existed: a denial line with the
    // component's digest, no turn directory.
    let denials = std::fs::read_to_string(env.state_dir().join("denials.jsonl")).unwrap();
    let d: serde_json::Value = serde_json::from_str(denials.lines().last().unwrap()).unwrap();
    assert_eq!(d["code"], "IMPORT_NOT_GRANTED");
    assert_eq!(
        d["component_sha256"],
        gatehouse::policy::snapshot::sha256_hex(
            &std::fs::read(component("sneaky-memory")).unwrap()
        )
    );
    assert!(!env.state_dir().join("history").exists());
    assert!(!env.state_dir().join("audit.jsonl").exists());
    let fetch = manifest(&env, "fetch-ungranted", &component("fetch-socket"), &[]);
    let (run, v) = run_json(
        &env,
        &fetch,
        &ws,
        "Full",
        r#"{"url":"http://localhost:1/"}"#,
        &[],
    );
    run.expect(2);
    assert_eq!(v["code"], "IMPORT_NOT_GRANTED");
    assert!(
        v["reason"].as_str().unwrap().contains("`wasi:sockets/"),
        "{v:#}"
    );
    // The same guests with their grants pass the import check (and fail, or
    // not, later for their own reasons).
    let granted = manifest(
        &env,
        "sneaky-memory-granted",
        &component("sneaky-memory"),
        &[("memory:read", Some("notes"))],
    );
    let (_, v) = run_json(&env, &granted, &ws, "Full", "{}", &[]);
    assert_ne!(v["code"], "IMPORT_NOT_GRANTED", "{v:#}");
    assert_ne!(v["error"]["code"], "IMPORT_NOT_GRANTED", "{v:#}");
}

#[test]
fn environment_variables_are_invisible_without_env_read() {
    // Every Rust guest imports wasi:cli/environment (std does), so the
    // authority is in its contents: without env:read, no variables at all.
    let env = Env::new();
    let ws = env.mkdir("ws");
    let (run, v) = run_json(&env, &guest("sneaky-env"), &ws, "Full", "{}", &[]);
    run.expect(0);
    let out = output(&v);
    assert!(
        out.to_string().contains("null") || out["HOME"].is_null(),
        "HOME leaked: {out:#}"
    );
    let e = manifest(
        &env,
        "env-granted",
        &component("env"),
        &[("env:read", Some("TEST_VISIBLE_VAR"))],
    );
    let run = env
        .command()
        .env("TEST_VISIBLE_VAR", "visible")
        .env("TEST_HIDDEN_VAR", "hidden")
        .args([
            "--json",
            "run",
            s(&e),
            "--workspace",
            s(&ws),
            "--level",
            "Full",
            "--input",
            r#"{"names":["TEST_VISIBLE_VAR","TEST_HIDDEN_VAR","HOME"]}"#,
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let out = output(&v);
    assert_eq!(
        out["values"],
        serde_json::json!({"TEST_VISIBLE_VAR": "visible", "TEST_HIDDEN_VAR": null, "HOME": null})
    );
    assert_eq!(out["all"], serde_json::json!(["TEST_VISIBLE_VAR"]));
}

#[test]
fn clocks_are_frozen_without_time_read() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let (run, v) = run_json(&env, &guest("clock"), &ws, "Supervised", "{}", &[]);
    run.expect(0);
    assert!(output(&v)["wall_unix_ms"].as_u64().unwrap() > 1_700_000_000_000);
    let frozen = manifest(
        &env,
        "clock-frozen",
        &component("clock"),
        &[("compute:pure", None)],
    );
    let (run, v) = run_json(&env, &frozen, &ws, "Supervised", "{}", &[]);
    run.expect(0);
    assert_eq!(
        output(&v),
        serde_json::json!({"wall_unix_ms": 0, "monotonic_ns": 0})
    );
}

#[test]
fn limits_stop_the_guest_and_are_reported_by_code() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    for (manifest, code, extra) in [
        (guest("spin"), "LIMIT_DEADLINE", ["--deadline-ms", "300"]),
        (guest("grow"), "LIMIT_MEMORY", ["--memory-mib", "16"]),
        (guest("flood"), "LIMIT_OUTPUT", ["--output-kib", "8"]),
        (guest("hello"), "LIMIT_HOSTCALLS", ["--hostcalls", "0"]),
    ] {
        let (run, v) = run_json(&env, &manifest, &ws, "Supervised", "{}", &extra);
        // A limit once guest code ran: 134, as `wasmtime run` exits.
        run.expect_err(134, &[code]);
        assert_eq!(v["error"]["code"], code, "{}: {v:#}", manifest.display());
    }
}

#[test]
fn approval_required_without_a_terminal_ends_the_turn() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let (run, v) = run_json(
        &env,
        &guest("env"),
        &ws,
        "Supervised",
        r#"{"names":[]}"#,
        &[],
    );
    run.expect(4);
    assert_eq!(v["code"], "APPROVAL_REQUIRED");
    assert_eq!(v["pending"][0]["capability"], "env:read");
}

#[test]
fn a_command_component_reads_stdin_and_writes_stdout() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let (run, v) = run_json(
        &env,
        &guest("cli-echo"),
        &ws,
        "Supervised",
        "line one\nline two\n",
        &[],
    );
    run.expect(0);
    assert_eq!(v["run"]["result"]["output"], "line one\nline two\n");
    assert!(
        v["run"]["stderr"]
            .as_str()
            .unwrap()
            .starts_with("args: cli-echo"),
        "{v:#}"
    );
}

#[test]
fn a_p1_module_has_the_grants_and_refusals_of_its_p2_twin() {
    let env = Env::new();
    // The twin really is a core preview-1 module (componentized on load).
    build_guests();
    let p1 =
        std::fs::read(Path::new(GUESTS).join("target/wasm32-wasip1/release/fs_cmd.wasm")).unwrap();
    assert_eq!(&p1[..8], b"\0asm\x01\0\0\0", "not a core module");
    for (twin, manifest) in [
        ("fs-cmd", guest("fs-cmd")),
        ("fs-cmd-p1", guest("fs-cmd-p1")),
    ] {
        let ws = env.mkdir(&format!("{twin}/ws"));
        env.mkdir(&format!("{twin}/ws/out"));
        env.write(&format!("{twin}/ws/secret.txt"), "keep");
        let (run, v) = run_json(
            &env,
            &manifest,
            &ws,
            "Full",
            r#"{"op":"write","path":"out/a.txt","content":"twin"}"#,
            &[],
        );
        run.expect(0);
        assert_eq!(
            std::fs::read(ws.join("out/a.txt")).unwrap(),
            b"twin",
            "{twin}: {v:#}"
        );
        let before = tree(&ws);
        let (run, _) = run_json(
            &env,
            &manifest,
            &ws,
            "Full",
            r#"{"op":"write","path":"secret.txt","content":"pwned"}"#,
            &[],
        );
        run.expect(1);
        assert_eq!(tree(&ws), before, "{twin}");
    }
}

#[test]
fn every_guest_is_used_by_a_test() {
    // The sources of tests/it, its helpers in support/ included.
    let mut sources = String::new();
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                sources.push_str(&std::fs::read_to_string(p).unwrap());
            }
        }
    }
    for e in std::fs::read_dir(GUESTS).unwrap() {
        let p = e.unwrap().path();
        if !p.join("executor.toml").exists() {
            continue;
        }
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        assert!(
            sources.contains(&format!("guest(\"{name}\")"))
                || sources.contains(&format!("component(\"{name}\")")),
            "guest `{name}` has no test that uses it"
        );
    }
}

// The gatehouse host interfaces: memory, human, delegate (code:exec's
// `exec` is in `exec.rs`), and network:sites.

#[test]
fn remember_stores_and_reads_back_in_its_scope_only() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let config = env.write(
        "gatehouse.toml",
        "[actors.main]\nskills = [\"*\"]\nmemory = [\"notes\", \"other\"]\n",
    );
    let cfg = ["--config", s(&config)];
    let (run, _) = run_json(
        &env,
        &guest("remember"),
        &ws,
        "Full",
        r#"{"op":"set","key":"k","value":"v"}"#,
        &cfg,
    );
    run.expect(0);
    let (run, v) = run_json(
        &env,
        &guest("remember"),
        &ws,
        "Full",
        r#"{"op":"get","key":"k"}"#,
        &cfg,
    );
    run.expect(0);
    assert_eq!(output(&v)["value"], "v", "{v:#}");
    // The same guest bound to another scope does not see `notes`.
    let other = manifest(
        &env,
        "remember-other",
        &component("remember"),
        &[
            ("memory:read", Some("other")),
            ("memory:write", Some("other")),
        ],
    );
    let (run, v) = run_json(&env, &other, &ws, "Full", r#"{"op":"get","key":"k"}"#, &cfg);
    run.expect(0);
    assert!(output(&v)["value"].is_null(), "{v:#}");
    // Read-only memory: a set is a denial value, not a trap.
    let ro = manifest(
        &env,
        "remember-ro",
        &component("remember"),
        &[("memory:read", Some("notes"))],
    );
    let (run, v) = run_json(
        &env,
        &ro,
        &ws,
        "Full",
        r#"{"op":"set","key":"k","value":"w"}"#,
        &cfg,
    );
    run.expect(1);
    assert_eq!(
        v["run"]["result"]["error"]["denied"]["code"], "MEMORY_NOT_GRANTED",
        "{v:#}"
    );
    // Without the scope in the actor's configuration, the turn is denied.
    let (run, v) = run_json(
        &env,
        &guest("remember"),
        &ws,
        "Full",
        r#"{"op":"get","key":"k"}"#,
        &[],
    );
    run.expect(2);
    assert_eq!(v["code"], "MEMORY_NOT_GRANTED");
}

#[test]
fn ask_without_a_terminal_is_denied_as_a_value() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let (run, v) = run_json(
        &env,
        &guest("ask"),
        &ws,
        "Full",
        r#"{"question":"ok?"}"#,
        &[],
    );
    run.expect(1);
    assert_eq!(
        v["run"]["result"]["error"]["denied"]["code"],
        "APPROVAL_REQUIRED"
    );
}

#[test]
fn ask_on_a_terminal_reads_the_answer_there_not_from_the_turns_stdin() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let m = guest("ask");
    let args = [
        "--json",
        "run",
        s(&m),
        "--workspace",
        s(&ws),
        "--level",
        "Full",
        "--input",
        r#"{"question":"ok?"}"#,
    ];
    // The turn's stdin is /dev/null: the answer can only come from the
    // terminal.
    let mut cmd = env.terminal_command_with(&args, &[], "< /dev/null");
    let r = crate::support::type_answers(&mut cmd, "yes, go\n");
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(r.stdout.contains("the executor asks: ok?"), "{r:#?}");
    let line = r.stdout.lines().last().unwrap();
    let v: serde_json::Value = serde_json::from_str(&line[line.find("{\"").unwrap()..]).unwrap();
    assert_eq!(output(&v)["answer"], "yes, go", "{v:#}");
}

/// security round 2, item 3: a question on the terminal waits no longer
/// than the run's deadline. Nobody types (the terminal stays open); with
/// `--deadline-ms 300` the turn ends with `LIMIT_DEADLINE` instead of
/// waiting for ever.
///
/// Positive control: `ask_on_a_terminal_reads_the_answer_there_not_from_the_turns_stdin`
/// (the same prompt, answered).
#[test]
fn a_question_on_the_terminal_ends_at_the_runs_deadline() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let m = guest("ask");
    let args = [
        "--json",
        "run",
        s(&m),
        "--workspace",
        s(&ws),
        "--level",
        "Full",
        "--deadline-ms",
        "300",
        "--input",
        r#"{"question":"anyone?"}"#,
    ];
    let mut child = env
        .terminal_command_with(&args, &[], "< /dev/null")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Held open and never written: nobody answers.
    let _keyboard = child.stdin.take().unwrap();
    let started = std::time::Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the turn waited for an answer past its deadline")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("the executor asks: anyone?"), "{stdout}");
    assert!(
        stdout.contains("(no answer before the run's deadline)"),
        "{stdout}"
    );
    let line = stdout.lines().rev().find(|l| l.contains("{\"")).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(line[line.find("{\"").unwrap()..].trim()).unwrap();
    // Whichever sees the deadline first ends the turn: the run's epoch
    // check (the turn stopped) or the terminal's wait (the guest gets the
    // denial value and returns it).
    let code = if v["error"]["code"].is_string() {
        &v["error"]["code"]
    } else {
        &v["run"]["result"]["error"]["denied"]["code"]
    };
    assert_eq!(code, "LIMIT_DEADLINE", "{v:#}");
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

/// security round 2, item 3: a question is guest text, shown on one line
/// with its newlines, carriage returns and bidi overrides escaped, so it
/// cannot print a line that looks like gatehouse's own.
///
/// Positive control: the answer typed after it still reaches the guest.
#[test]
fn a_question_cannot_forge_a_line_of_gatehouse_output() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let m = guest("ask");
    let question = "ok?\ngatehouse: decision fs:write /home allowed (grant 1)\r\u{202e}txt.exe";
    let input = serde_json::json!({ "question": question }).to_string();
    let args = [
        "--json",
        "run",
        s(&m),
        "--workspace",
        s(&ws),
        "--level",
        "Full",
        "--input",
        &input,
    ];
    let mut cmd = env.terminal_command_with(&args, &[], "< /dev/null");
    let r = crate::support::type_answers(&mut cmd, "yes\n");
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(
        r.stdout.contains(
            "the executor asks: ok?\\ngatehouse: decision fs:write /home allowed (grant 1)\\r\\u{202e}txt.exe"
        ),
        "{r:#?}"
    );
    assert!(
        !r.stdout
            .lines()
            .any(|l| l.trim_start().starts_with("gatehouse: decision")),
        "{r:#?}"
    );
    assert!(!r.stdout.contains('\u{202e}'), "{r:#?}");
    let line = r.stdout.lines().last().unwrap();
    let v: serde_json::Value = serde_json::from_str(&line[line.find("{\"").unwrap()..]).unwrap();
    assert_eq!(output(&v)["answer"], "yes", "{v:#}");
}

#[test]
fn call_other_runs_hello_through_the_gate() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let hello = guest("hello");
    // The callee compiles inside the call, on the caller's clock: room for
    // a slow debug build.
    let with = ["--with", s(&hello), "--deadline-ms", "60000"];
    let (run, v) = run_json(
        &env,
        &guest("call-other"),
        &ws,
        "Full",
        r#"{"executor":"hello","input":"{}"}"#,
        &with,
    );
    run.expect(0);
    assert_eq!(
        output(&v)["output"],
        serde_json::json!({"echo": {}}),
        "{v:#}"
    );
    // A callee it was not granted is a denial value.
    let (run, v) = run_json(
        &env,
        &guest("call-other"),
        &ws,
        "Full",
        r#"{"executor":"spin","input":"{}"}"#,
        &with,
    );
    run.expect(1);
    assert_eq!(
        v["run"]["result"]["error"]["denied"]["code"], "TARGET_MISMATCH",
        "{v:#}"
    );
    // The caller passes the gate first: at ReadOnly, delegate:call is denied.
    let (run, v) = run_json(
        &env,
        &guest("call-other"),
        &ws,
        "ReadOnly",
        r#"{"executor":"hello","input":"{}"}"#,
        &with,
    );
    run.expect(2);
    assert_eq!(v["code"], "CAPABILITY_DENIED");
}

/// A local HTTP server answering every connection with `200 ok`; its port.
fn ok_server() -> u16 {
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut c in server.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            let _ =
                c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    port
}

/// Runs `fetch` with `input` and returns the guest's `failed` message,
/// asserting the run failed that way (exit 1).
fn fetch_fails(env: &Env, m: &Path, ws: &Path, input: &str) -> String {
    let (run, v) = run_json(env, m, ws, "Full", input, &[]);
    run.expect(1);
    v["run"]["result"]["error"]["failed"]
        .as_str()
        .unwrap_or_else(|| panic!("{input}: no `failed` error in {v:#}"))
        .to_string()
}

/// What the guest sees when gatehouse's `socket_addr_check` refuses a
/// connect (wasi `access-denied` → EACCES), as opposed to the kernel's
/// "connection refused" or a lookup failure.
const CONNECT_DENIED: &str = "Permission denied";
/// What the guest sees when gatehouse's name lookup refuses a name.
const LOOKUP_REFUSED: &str = "failed to lookup address information";

#[test]
fn fetch_reaches_only_its_granted_host() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let port = ok_server();
    let m = manifest(
        &env,
        "fetch-local",
        &component("fetch-socket"),
        &[("network:sites", Some(&format!("localhost:{port}")))],
    );
    let (run, v) = run_json(
        &env,
        &m,
        &ws,
        "Full",
        &format!(r#"{{"url":"http://localhost:{port}/"}}"#),
        &[],
    );
    run.expect(0);
    assert_eq!(output(&v), serde_json::json!({"status": 200, "body": "ok"}));
    let linked = v["run"]["linked"].to_string();
    assert!(
        linked.contains(&format!("name lookup: `localhost:{port}`")),
        "{linked}"
    );
    // 127.0.0.2 has no listener: without the check the kernel would answer
    // "connection refused"; the check refuses before any syscall.
    let e = fetch_fails(&env, &m, &ws, &format!(r#"{{"addr":"127.0.0.2:{port}"}}"#));
    assert!(
        e.starts_with(&format!("connect `127.0.0.2:{port}`: ")),
        "{e}"
    );
    assert!(e.contains(CONNECT_DENIED), "{e}");
    // 127.0.0.1:PORT is where the server listens and what `localhost`
    // resolves to, but as a literal it was never looked up or granted.
    let e = fetch_fails(&env, &m, &ws, &format!(r#"{{"addr":"127.0.0.1:{port}"}}"#));
    assert!(
        e.starts_with(&format!("connect `127.0.0.1:{port}`: ")),
        "{e}"
    );
    assert!(e.contains(CONNECT_DENIED), "{e}");
    // A name that was not granted is not looked up.
    let e = fetch_fails(&env, &m, &ws, r#"{"url":"http://example.com/"}"#);
    assert!(e.starts_with("connect `example.com:80`: "), "{e}");
    assert!(e.contains(LOOKUP_REFUSED), "{e}");
    // The granted name on another port resolves, but the connect is refused.
    let e = fetch_fails(&env, &m, &ws, r#"{"url":"http://localhost:1/"}"#);
    assert!(e.starts_with("connect `localhost:1`: "), "{e}");
    assert!(e.contains(CONNECT_DENIED), "{e}");
}

#[test]
fn fetch_refuses_a_name_that_resolves_but_was_not_granted() {
    // `localhost` resolves on every host, and the server listens where it
    // points: only gatehouse's lookup stands between the guest and it.
    let env = Env::new();
    let ws = env.mkdir("ws");
    let port = ok_server();
    let m = manifest(
        &env,
        "fetch-other-name",
        &component("fetch-socket"),
        &[("network:sites", Some(&format!("example.com:{port}")))],
    );
    let e = fetch_fails(
        &env,
        &m,
        &ws,
        &format!(r#"{{"url":"http://localhost:{port}/"}}"#),
    );
    assert!(
        e.starts_with(&format!("connect `localhost:{port}`: ")),
        "{e}"
    );
    assert!(e.contains(LOOKUP_REFUSED), "{e}");
}

#[test]
fn a_grant_for_another_port_does_not_open_this_one() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let port = ok_server();
    let other = ok_server();
    let m = manifest(
        &env,
        "fetch-other-port",
        &component("fetch-socket"),
        &[("network:sites", Some(&format!("localhost:{other}")))],
    );
    let (run, v) = run_json(
        &env,
        &m,
        &ws,
        "Full",
        &format!(r#"{{"url":"http://localhost:{other}/"}}"#),
        &[],
    );
    run.expect(0);
    assert_eq!(output(&v), serde_json::json!({"status": 200, "body": "ok"}));
    let e = fetch_fails(
        &env,
        &m,
        &ws,
        &format!(r#"{{"url":"http://localhost:{port}/"}}"#),
    );
    assert!(
        e.starts_with(&format!("connect `localhost:{port}`: ")),
        "{e}"
    );
    assert!(e.contains(CONNECT_DENIED), "{e}");
}

#[test]
fn a_granted_ip_literal_is_reached_without_a_lookup() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let port = ok_server();
    let m = manifest(
        &env,
        "fetch-literal",
        &component("fetch-socket"),
        &[("network:sites", Some(&format!("127.0.0.1:{port}")))],
    );
    let (run, v) = run_json(
        &env,
        &m,
        &ws,
        "Full",
        &format!(r#"{{"addr":"127.0.0.1:{port}"}}"#),
        &[],
    );
    run.expect(0);
    assert_eq!(output(&v), serde_json::json!({"status": 200, "body": "ok"}));
    // The literal grant does not make a name resolvable, even one that
    // points at it.
    let e = fetch_fails(
        &env,
        &m,
        &ws,
        &format!(r#"{{"url":"http://localhost:{port}/"}}"#),
    );
    assert!(e.contains(LOOKUP_REFUSED), "{e}");
}

#[test]
fn a_component_that_does_not_match_its_pinned_digest_is_refused() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let text = format!(
        "name = \"hello-pinned\"\ncomponent = \"{}\"\nsha256 = \"{}\"\n",
        s(&component("hello")),
        "0".repeat(64)
    );
    let m = env.write("manifests/hello-pinned.toml", &text);
    let (run, v) = run_json(&env, &m, &ws, "Supervised", "{}", &[]);
    run.expect(2);
    assert_eq!(v["code"], "DIGEST_MISMATCH", "{v:#}");
    // Nothing was compiled or cached for it; one denial line names the
    // digest the file really has.
    assert!(!env.state_dir().join("cache").exists());
    let denials = std::fs::read_to_string(env.state_dir().join("denials.jsonl")).unwrap();
    let d: serde_json::Value = serde_json::from_str(denials.trim()).unwrap();
    assert_eq!(d["code"], "DIGEST_MISMATCH");
    assert_eq!(
        d["component_sha256"],
        gatehouse::policy::snapshot::sha256_hex(&std::fs::read(component("hello")).unwrap())
    );
}

/// How long a file must rest before the cache records its identity
/// (`sandbox::memo::SETTLED`), with a margin.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(2300);

/// Rewrites the file at `path` in place with `bytes` (the same length),
/// then sets its mtime back to what it was: only its ctime tells.
fn rewrite_keeping_mtime(path: &std::path::Path, bytes: &[u8]) {
    let mtime = std::fs::metadata(path).unwrap().modified().unwrap();
    assert_eq!(std::fs::metadata(path).unwrap().len(), bytes.len() as u64);
    std::fs::write(path, bytes).unwrap();
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(mtime).unwrap();
    drop(f);
    assert_eq!(std::fs::metadata(path).unwrap().modified().unwrap(), mtime);
}

/// The cache remembers a settled component's digest by its identity, so
/// that a new process finds the compiled entry without hashing it again;
/// a component then rewritten in place with the same size and its mtime
/// set back is hashed anew (its ctime changed) and its pin refuses it.
///
/// Positive controls: the record holds the component's digest, and the
/// pinned run succeeds from the cache before the rewrite.
#[test]
fn a_component_rewritten_in_place_after_its_digest_was_remembered_is_refused_by_its_pin() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let wasm = env.path("c/hello.wasm");
    std::fs::create_dir_all(wasm.parent().unwrap()).unwrap();
    let bytes = std::fs::read(component("hello")).unwrap();
    std::fs::write(&wasm, &bytes).unwrap();
    let digest = gatehouse::policy::snapshot::sha256_hex(&bytes);
    let m = env.write(
        "manifests/hello-pinned.toml",
        &format!(
            "name = \"hello-pinned\"\ncomponent = \"{}\"\nsha256 = \"{digest}\"\n",
            s(&wasm)
        ),
    );
    std::thread::sleep(SETTLE);
    // The first run compiles (and creates the cache); the second records
    // the settled file's digest; the third finds the entry through it.
    for hit in [false, true, true] {
        let (run, v) = run_json(&env, &m, &ws, "Supervised", "{}", &[]);
        run.expect(0);
        assert_eq!(v["run"]["cache_hit"], hit, "{v:#}");
    }
    let cache = env.state_dir().join("cache");
    let records: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "digest"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].lines().nth(1), Some(digest.as_str()));
    // The attack: the same length, one byte changed, the mtime put back.
    let mut evil = bytes.clone();
    let last = evil.len() - 1;
    evil[last] ^= 0x01;
    rewrite_keeping_mtime(&wasm, &evil);
    let (run, v) = run_json(&env, &m, &ws, "Supervised", "{}", &[]);
    run.expect(2);
    assert_eq!(v["code"], "DIGEST_MISMATCH", "{v:#}");
}

/// A cache entry found whole once is not hashed again while it keeps its
/// identity; one then corrupted in place with its mtime set back is
/// hashed anew, found corrupt, and rebuilt, never loaded.
///
/// Positive control: the entry's verification is recorded, and the run
/// before the corruption is a hit.
#[test]
fn a_verified_cache_entry_corrupted_in_place_is_rebuilt_not_loaded() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    run_json(&env, &guest("hello"), &ws, "Supervised", "{}", &[])
        .0
        .expect(0);
    std::thread::sleep(SETTLE);
    let (run, v) = run_json(&env, &guest("hello"), &ws, "Supervised", "{}", &[]);
    run.expect(0);
    assert_eq!(v["run"]["cache_hit"], true, "{v:#}");
    let entry = cache_entry(&env);
    assert!(entry.with_extension("verified").is_file());
    let mut bytes = std::fs::read(&entry).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    rewrite_keeping_mtime(&entry, &bytes);
    let (run, v) = run_json(&env, &guest("hello"), &ws, "Supervised", "{}", &[]);
    run.expect(0);
    assert_eq!(
        v["run"]["cache_hit"], false,
        "a corrupt entry must not count as a hit"
    );
    assert_eq!(output(&v), serde_json::json!({"echo": {}}));
}

#[test]
fn executors_are_found_by_name_in_the_executor_directories() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let config = env.write(
        "gatehouse.toml",
        &format!("executor_dirs = [\"{GUESTS}\"]\n[actors.main]\nskills = [\"hello\"]\n"),
    );
    let (run, v) = run_json(
        &env,
        Path::new("hello"),
        &ws,
        "Supervised",
        r#""hi""#,
        &["--config", s(&config)],
    );
    run.expect(0);
    assert_eq!(output(&v), serde_json::json!({"echo": "hi"}));
    assert_eq!(v["run"]["compiled"], 1);
    // Another executor of the same directories: the actor may not run it.
    let (run, v) = run_json(
        &env,
        Path::new("clock"),
        &ws,
        "Supervised",
        "{}",
        &["--config", s(&config)],
    );
    run.expect(2);
    assert_eq!(v["code"], "SKILL_NOT_GRANTED");
    let run = env.run(&["run", "no-such-executor", "--config", s(&config)]);
    run.expect_err(3, &["no executor named `no-such-executor`"]);
}

/// Runs `gatehouse run` under a pseudo-terminal, typing `answer` at the
/// approval prompt.
fn run_on_a_terminal(env: &Env, manifest: &Path, ws: &Path, answer: &str) -> Run {
    env.run_on_terminal(
        &[
            "run",
            s(manifest),
            "--workspace",
            s(ws),
            "--input",
            r#"{"names":["DEMO_GREETING"]}"#,
        ],
        &[("DEMO_GREETING", "shown")],
        answer,
    )
}

#[test]
fn approval_on_a_terminal_allows_once_remembers_or_refuses() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let m = guest("env");
    // The prompt states the action, the scope and the choices.
    let run = run_on_a_terminal(&env, &m, &ws, "o\n");
    assert_eq!(run.code, 0, "{run:#?}");
    assert!(
        run.stdout
            .contains("executor `env` asks for `env:read` on `DEMO_GREETING`"),
        "{run:#?}"
    );
    assert!(
        run.stdout
            .contains("[o] allow once  [r] allow and remember"),
        "{run:#?}"
    );
    // Issue 27, point 3: the prompt shows the input and the digest.
    assert!(
        run.stdout
            .contains(r#"  input: {"names":["DEMO_GREETING"]}"#),
        "{run:#?}"
    );
    assert!(run.stdout.contains("  executor sha256 "), "{run:#?}");
    assert!(
        run.stdout.contains(r#""DEMO_GREETING":"shown""#),
        "{run:#?}"
    );
    // Allow once remembers nothing: without a terminal it asks again.
    let (again, _) = run_json(&env, &m, &ws, "Supervised", r#"{"names":[]}"#, &[]);
    again.expect(4);
    // Deny ends the turn with APPROVAL_REFUSED.
    let run = run_on_a_terminal(&env, &m, &ws, "d\n");
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(run.stdout.contains("APPROVAL_REFUSED"), "{run:#?}");
    // Allow and remember writes a grant (for the default day: the answer
    // to "how long" is empty): the next run needs no terminal.
    let run = run_on_a_terminal(&env, &m, &ws, "r\n\n");
    assert_eq!(run.code, 0, "{run:#?}");
    let (after, v) = run_json(&env, &m, &ws, "Supervised", r#"{"names":[]}"#, &[]);
    after.expect(0);
    assert!(
        v["decisions"][1]["decision"]["reason"]
            .as_str()
            .unwrap()
            .contains("grant #1 covers it"),
        "{v:#}"
    );
    let grants = env.run(&["grants", "list"]);
    assert_eq!(grants.json_lines()[0]["target"], "DEMO_GREETING");
}

/// Issue 27, point 6: the terminal's "allow and remember" asks for how
/// long. Empty is the default (a day, as for the queue and elicitation),
/// `2h` is two hours, `forever` is as long as `[approvals] remember_max`
/// allows (7 days by default: issue 46, only `grants add` records a grant
/// for ever); an answer it cannot read is asked again.
///
/// Positive control: each answer writes its grant (so the expiry seen is
/// the one asked for, not a grant that was never written).
#[test]
fn remember_on_a_terminal_asks_for_how_long() {
    use gatehouse::policy::UtcTime;
    let m = guest("env");
    for (answers, expect) in [
        ("r\n2h\n", Some(2 * 3600)),
        (
            "r\nsoon\n\n",
            Some(gatehouse::state::grants::DEFAULT_REMEMBER_SECS),
        ),
        ("r\nforever\n", Some(7 * 24 * 3600)),
    ] {
        let env = Env::new();
        let ws = env.mkdir("ws");
        let before = gatehouse::state::grants::now_utc();
        let run = run_on_a_terminal(&env, &m, &ws, answers);
        assert_eq!(run.code, 0, "{run:#?}");
        assert!(
            run.stdout
                .contains("remember for how long? 30s, 10m, 2h, 7d or `forever` (at most `[approvals] remember_max`, 7d by default) [24h]: "),
            "{run:#?}"
        );
        let grants = env.run(&["grants", "list"]).json_lines();
        assert_eq!(grants.len(), 1, "{answers:?}: {run:#?}");
        let expires = grants[0]["expires_at"]
            .as_str()
            .map(|t| UtcTime::parse(t).unwrap().0 - before.0);
        match expect {
            None => assert_eq!(expires, None, "{answers:?}"),
            Some(secs) => {
                let got = expires.unwrap_or_else(|| panic!("{answers:?}: no expiry"));
                assert!((secs..secs + 60).contains(&got), "{answers:?}: {got}");
            }
        }
        if answers.contains("soon") {
            assert!(
                run.stdout.contains("invalid duration `soon`") || run.stdout.contains("`soon`"),
                "{run:#?}"
            );
        }
    }
}

#[test]
fn a_write_root_that_holds_host_configuration_is_guarded_by_the_layer() {
    // The state directory (grants database, history, cache) lies inside
    // the workspace: the read-write preopen of the workspace is granted,
    // and the filesystem layer refuses every mutation inside the state
    // directory (more in `undo_fs`).
    let env = Env::new();
    let ws = env.root();
    env.mkdir("state");
    let m = manifest(
        &env,
        "write-everything",
        &component("write-file"),
        &[("fs:write", Some("**"))],
    );
    let (run, v) = run_json(
        &env,
        &m,
        &ws,
        "Full",
        r#"{"path":"state/grants.db","content":"pwned"}"#,
        &[],
    );
    run.expect(1);
    assert!(
        v["run"]["result"]["error"]["failed"]
            .as_str()
            .unwrap()
            .contains("ermission denied"),
        "{v:#}"
    );
    assert!(!env.state_dir().join("grants.db").exists());
    let turn = v["turn"].as_str().unwrap();
    let log = env
        .run(&["history", "--turn", turn, "--decisions"])
        .json_lines();
    assert_eq!(
        log.last().unwrap()["decision"]["code"],
        "POLICY_MUTATION_DENIED"
    );
}

/// Issue 12, item 8, at the prompt: with `out` a link to `private`, a
/// remembered grant on `WS/out/**` does not cover the turn, and the
/// person is asked for the canonical `WS/private/**` (and told what the
/// executor declared). The control: with `out` a real directory again,
/// the same grant covers the same turn, no terminal needed.
#[test]
fn the_prompt_shows_the_canonical_target() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.mkdir("ws/private");
    let wsc = s(&ws).to_string();
    env.run(&[
        "grants",
        "add",
        "--channel",
        "cli",
        "--sender",
        "tester",
        "fs:write",
        &format!("{wsc}/out/**"),
    ])
    .expect(0);
    std::os::unix::fs::symlink("private", ws.join("out")).unwrap();
    // `policy check` matches the grant where the path really is, too.
    let target = format!("{wsc}/out/a.txt");
    let check = [
        "--json",
        "policy",
        "check",
        "Supervised",
        "fs:write",
        "--target",
        &target,
        "--channel",
        "cli",
        "--sender",
        "tester",
    ];
    let v = &env.run(&check).expect(4).json_lines()[0];
    assert_eq!(v["canonical_target"], format!("{wsc}/private/a.txt"));
    assert_eq!(v["grant_id"], serde_json::Value::Null);
    let m = guest("write-file");
    let run = env.run_on_terminal(
        &[
            "run",
            s(&m),
            "--workspace",
            s(&ws),
            "--input",
            r#"{"path":"private/a.txt","content":"x"}"#,
        ],
        &[],
        "d\n",
    );
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.stdout.contains(&format!(
            "executor `write-file` asks for `fs:write` on `{wsc}/private/**`"
        )),
        "{run:#?}"
    );
    assert!(
        run.stdout.contains(&format!(
            "declared as `{wsc}/out/**`: a symbolic link on the way leads to `{wsc}/private/**`"
        )),
        "{run:#?}"
    );
    assert!(run.stdout.contains("APPROVAL_REFUSED"), "{run:#?}");
    assert!(!ws.join("private/a.txt").exists());
    // The control: `out` a directory, the grant covers the turn.
    std::fs::remove_file(ws.join("out")).unwrap();
    env.mkdir("ws/out");
    let (run, v) = run_json(
        &env,
        &m,
        &ws,
        "Supervised",
        r#"{"path":"out/a.txt","content":"x"}"#,
        &[],
    );
    run.expect(0);
    assert!(
        v["decisions"][1]["decision"]["reason"]
            .as_str()
            .unwrap()
            .contains("grant #1 covers it"),
        "{v:#}"
    );
    assert_eq!(std::fs::read_to_string(ws.join("out/a.txt")).unwrap(), "x");
    let v = &env.run(&check).expect(0).json_lines()[0];
    assert_eq!(v["canonical_target"], target);
    assert_eq!(v["grant_id"], 1);
    // `grants add` records a path where it really is, too.
    std::os::unix::fs::symlink("private", ws.join("link")).unwrap();
    let add = env.run(&[
        "grants",
        "add",
        "--channel",
        "cli",
        "--sender",
        "tester",
        "fs:write",
        &format!("{wsc}/link/**"),
    ]);
    assert_eq!(
        add.expect(0).json_lines()[0]["target"],
        format!("{wsc}/private/**")
    );
}

/// Issue 12, item 15: what a guest says reaches a person's terminal as
/// text, never as control sequences. A guest's output (a command's
/// stdout), its log line, the argv of a command it asks for, and a file
/// name it made (in `undo`'s report) each carry `ESC [2J` (clear the
/// screen) and a forged `decision … allowed` line: the human output
/// shows them escaped (`\u{1b}`, `\n`), every line ends with the newline
/// gatehouse wrote, and no line of it is the forgery. The control, in the
/// same runs: `--json` keeps the guest's bytes exact.
#[test]
fn guest_text_cannot_drive_the_terminal() {
    const FORGED: &str = "decision capability  allowed: fs:write on `/` (grant #1)";
    let evil = format!("\u{1b}[2J\n{FORGED}\n");
    let escaped = format!("\\u{{1b}}[2J\\n{FORGED}\\n");
    let clean = |text: &str, what: &str| {
        assert!(!text.contains('\u{1b}'), "{what}: a raw ESC: {text:?}");
        assert!(
            text.chars()
                .all(|c| !c.is_control() || c == '\n' || c == '\r'),
            "{what}: a raw control character: {text:?}"
        );
        assert!(
            text.lines()
                .all(|l| !l.trim_start_matches('\r').starts_with(FORGED)),
            "{what}: the forged line is a line: {text:?}"
        );
    };
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");

    // A command's stdout: `cli-echo` copies its input. It is the
    // program's own stream, copied through unmodified as `wasmtime run`
    // does (issue 14); what gatehouse itself says (`--verbose`, on
    // stderr) is escaped.
    let echo = guest("cli-echo");
    let run = env.run(&[
        "run",
        s(&echo),
        "--workspace",
        s(&ws),
        "--input",
        &evil,
        "--verbose",
    ]);
    run.expect(0);
    assert_eq!(run.stdout, evil, "{run:#?}");
    clean(&run.stderr, "gatehouse's own lines");
    let (run, v) = run_json(&env, &echo, &ws, "Supervised", &evil, &[]);
    run.expect(0);
    assert_eq!(v["run"]["result"]["output"], evil.as_str());

    // A log line: `hello` logs the text it is given.
    let input = serde_json::json!({ "log": evil }).to_string();
    let hello = guest("hello");
    let run = env.run(&["run", s(&hello), "--workspace", s(&ws), "--input", &input]);
    run.expect(0);
    clean(&run.stdout, "log");
    assert!(
        run.stdout.contains(&format!("log      [info] {escaped}")),
        "{run:#?}"
    );
    let (run, v) = run_json(&env, &hello, &ws, "Supervised", &input, &[]);
    run.expect(0);
    assert_eq!(v["run"]["log"][1]["message"], evil.as_str());

    // A file name, in `undo`'s report.
    let name = "out/\u{1b}[2J.txt";
    let input = serde_json::json!({ "path": name, "content": "x" }).to_string();
    let (run, v) = run_json(&env, &guest("write-file"), &ws, "Full", &input, &[]);
    run.expect(0);
    let turn = v["turn"].as_str().unwrap().to_string();
    let dry = env.run(&["--json", "undo", "--dry-run", "--turn", &turn]);
    dry.expect(0);
    let report: serde_json::Value = serde_json::from_str(dry.stdout.trim()).unwrap();
    let file = format!("{}/{name}", s(&ws));
    assert_eq!(
        report["steps"][0]["reason"],
        format!("delete `{file}`, created by the turn")
    );
    let run = env.run(&["undo", "--turn", &turn]);
    run.expect(0);
    clean(&run.stdout, "undo");
    assert!(
        run.stdout.contains(&format!(
            "delete `{}/out/\\u{{1b}}[2J.txt`, created by the turn",
            s(&ws)
        )),
        "{run:#?}"
    );
    assert!(!ws.join(name).exists());

    // A command's argv: `run-tool` asks for `cat` with the text as its
    // argument (the screen refuses it: no process starts).
    let config = env.write(
        "gatehouse.toml",
        "[actors.main]\nskills = [\"*\"]\ntools = [\"cat\", \"ls\", \"wc\"]\n",
    );
    let input = serde_json::json!({ "program": "cat", "args": [evil] }).to_string();
    let tool = guest("run-tool");
    let args = [
        "run",
        s(&tool),
        "--workspace",
        s(&ws),
        "--config",
        s(&config),
        "--level",
        "Full",
        "--input",
        &input,
    ];
    let run = env.run_on_terminal(&args, &[], "o\no\no\no\n");
    assert_eq!(run.code, 1, "{run:#?}");
    clean(&run.stdout, "command");
    assert!(
        run.stdout
            .contains(&format!("command  cat {escaped} -> not started")),
        "{run:#?}"
    );
    let mut json_args = vec!["--json"];
    json_args.extend_from_slice(&args);
    let run = env.run_on_terminal(&json_args, &[], "o\no\no\no\n");
    // On a terminal the last prompt and the JSON share a line.
    let v = run
        .stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l[l.find("{\"")?..].trim()).ok())
        .unwrap_or_else(|| panic!("no JSON: {run:#?}"));
    assert_eq!(v["run"]["commands"][0]["args"][0], evil.as_str());
}
