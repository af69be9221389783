//! Executors in Python and JavaScript (issue 30): the `python` executor
//! (`guests/python`, CPython through componentize-py) and the `js`
//! executor (`guests/js`, StarlingMonkey through ComponentizeJS), both
//! built by `setup.sh`, run the code they are given under their turn's
//! grants and nothing else. Each test runs both as a user would
//! (`gatehouse run`) and asserts the exact result, the bytes on disk, or
//! the deny code.
//!
//! Compiling the interpreters takes the debug binary seconds, so the first
//! test to need them compiles them once into a shared cache and every
//! test's state starts with a copy of it (`seed_lang_cache`).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::guests::{guest, lang_manifest_text, output, run_json, seed_lang_cache};
use crate::support::{s, Env, Run};

/// The two interpreters, by executor name.
const LANGS: [&str; 2] = ["python", "js"];

/// A sealed environment whose state starts with the interpreters compiled,
/// and its workspace `ws` (with `ws/out/`).
fn env_with_interpreters() -> (Env, PathBuf) {
    let env = Env::new();
    seed_lang_cache(&env);
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    (env, ws)
}

/// Runs `code` in executor `lang` at level Full; the CLI's run and its
/// JSON line.
fn run_code(env: &Env, ws: &Path, lang: &str, code: &str, extra: &[&str]) -> (Run, Value) {
    let input = json!({ "code": code }).to_string();
    run_json(env, &guest(lang), ws, "Full", &input, extra)
}

/// The executor's result (`stdout`, `stderr`, `exception`) of a turn that
/// ended well.
fn result(run: &Run, v: &Value) -> Value {
    run.expect(0);
    output(v)
}

#[test]
fn interpreters_run_arithmetic_and_print() {
    let (env, ws) = env_with_interpreters();
    for (lang, code) in [
        ("python", "x = 6 * 7\nprint(x)\nprint(2 ** 100)"),
        (
            "js",
            "const x = 6 * 7\nconsole.log(x)\nconsole.log(String(2n ** 100n))",
        ),
    ] {
        let (run, v) = run_code(&env, &ws, lang, code, &[]);
        assert_eq!(
            result(&run, &v),
            json!({"stdout": "42\n1267650600228229401496703205376\n", "stderr": "", "exception": null}),
            "{lang}"
        );
    }
    // The standard library the Python executor snapshots with it (app.py's
    // STDLIB).
    let (run, v) = run_code(
        &env,
        &ws,
        "python",
        "import hashlib, statistics, datetime\nprint(hashlib.sha256(b'abc').hexdigest()[:12], statistics.mean([1, 2, 3, 4]), datetime.date(2026, 12, 6).isoformat())",
        &[],
    );
    assert_eq!(result(&run, &v)["stdout"], "ba7816bf8f01 2.5 2026-12-06\n");
}

#[test]
fn interpreters_read_stdin_and_write_stderr() {
    let (env, ws) = env_with_interpreters();
    for (lang, code) in [
        (
            "python",
            "import sys\nname = input()\nprint('hi', name)\nprint('warned', file=sys.stderr)",
        ),
        (
            "js",
            "const name = readline()\nconsole.log('hi', name)\nconsole.error('warned')",
        ),
    ] {
        let input = json!({"code": code, "stdin": "ada\n"}).to_string();
        let (run, v) = run_json(&env, &guest(lang), &ws, "Full", &input, &[]);
        assert_eq!(
            result(&run, &v),
            json!({"stdout": "hi ada\n", "stderr": "warned\n", "exception": null}),
            "{lang}"
        );
    }
}

#[test]
fn interpreters_return_an_exception_as_a_result() {
    let (env, ws) = env_with_interpreters();
    for (lang, code, exception) in [
        (
            "python",
            "print('before')\n1 / 0",
            "Traceback (most recent call last):\n  File \"<code>\", line 2, in <module>\nZeroDivisionError: division by zero\n",
        ),
        (
            "js",
            "console.log('before');\nnull.x",
            "TypeError: can't access property \"x\" of null\n@<code>:2:1",
        ),
    ] {
        let (run, v) = run_code(&env, &ws, lang, code, &[]);
        assert_eq!(
            result(&run, &v),
            json!({"stdout": "before\n", "stderr": "", "exception": exception}),
            "{lang}"
        );
    }
    // Syntax errors, and Python's sys.exit with a status.
    for (lang, code, end) in [
        ("python", "def (", "SyntaxError: invalid syntax\n"),
        ("js", "def (", "SyntaxError: expected expression, got '}'"),
    ] {
        let (run, v) = run_code(&env, &ws, lang, code, &[]);
        let exception = result(&run, &v)["exception"].as_str().unwrap().to_string();
        assert!(exception.ends_with(end), "{lang}: {exception}");
    }
    let (run, v) = run_code(&env, &ws, "python", "import sys\nsys.exit(3)", &[]);
    assert_eq!(result(&run, &v)["exception"], "SystemExit: 3");
}

#[test]
fn interpreters_refuse_input_that_is_not_code_as_invalid_input() {
    let (env, ws) = env_with_interpreters();
    for lang in LANGS {
        for (input, message) in [
            ("not json", "the input is not JSON"),
            (r#"{"code": 1}"#, "the input needs `code`, a string"),
            (r#"{"code": "", "env": {}}"#, "unknown field `env`"),
        ] {
            let (run, v) = run_json(&env, &guest(lang), &ws, "Full", input, &[]);
            run.expect(1);
            let error = v["run"]["result"]["error"]["invalid_input"]
                .as_str()
                .unwrap_or_else(|| panic!("{lang} {input}: {v:#}"));
            assert!(error.starts_with(message), "{lang} {input}: {error}");
        }
    }
}

#[test]
fn interpreters_read_a_file_under_their_granted_root() {
    let (env, ws) = env_with_interpreters();
    env.write("ws/data/notes.txt", "line one\nline two\n");
    for (lang, code, listing) in [
        (
            "python",
            "import os, pathlib\nprint(sorted(os.listdir('data')))\nprint(pathlib.Path('data/notes.txt').read_text().splitlines()[1])",
            "['notes.txt']",
        ),
        (
            "js",
            "console.log(fs.readdirSync('data'))\nconsole.log(fs.readFileSync('data/notes.txt', 'utf8').split('\\n')[1])",
            "[ 'notes.txt' ]",
        ),
    ] {
        let (run, v) = run_code(&env, &ws, lang, code, &[]);
        assert_eq!(
            result(&run, &v),
            json!({"stdout": format!("{listing}\nline two\n"), "stderr": "", "exception": null}),
            "{lang}"
        );
    }
}

#[test]
fn interpreters_write_under_their_grant_and_gatehouse_undo_reverses_it() {
    let (env, ws) = env_with_interpreters();
    for (lang, code) in [
        (
            "python",
            "open('out/new.txt', 'w').write('made by python\\n')\nopen('out/kept.txt', 'a').write('appended\\n')",
        ),
        (
            "js",
            "fs.writeFileSync('out/new.txt', 'made by js\\n')\nfs.appendFileSync('out/kept.txt', 'appended\\n')",
        ),
    ] {
        env.write("ws/out/kept.txt", "the original\n");
        let (run, v) = run_code(&env, &ws, lang, code, &[]);
        assert_eq!(result(&run, &v)["exception"], Value::Null, "{lang}: {v:#}");
        assert_eq!(
            std::fs::read_to_string(ws.join("out/new.txt")).unwrap(),
            format!("made by {lang}\n")
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("out/kept.txt")).unwrap(),
            "the original\nappended\n"
        );
        let turn = v["turn"].as_str().unwrap();
        env.run(&["--json", "undo", "--turn", turn]).expect(0);
        assert!(!ws.join("out/new.txt").exists(), "{lang}");
        assert_eq!(
            std::fs::read_to_string(ws.join("out/kept.txt")).unwrap(),
            "the original\n",
            "{lang}"
        );
    }
}

#[test]
fn interpreters_writing_outside_their_grant_fail_in_the_language_and_are_audited() {
    let (env, ws) = env_with_interpreters();
    for (lang, code, printed) in [
        (
            "python",
            "try:\n    open('escape.txt', 'w')\nexcept PermissionError as e:\n    print('refused', e.errno)",
            "refused 63\n",
        ),
        (
            "js",
            "try { fs.writeFileSync('escape.txt', 'x') } catch (e) { console.log('refused', e.code) }",
            "refused EPERM\n",
        ),
    ] {
        let (run, v) = run_code(&env, &ws, lang, code, &[]);
        assert_eq!(result(&run, &v)["stdout"], printed, "{lang}: {v:#}");
        assert!(!ws.join("escape.txt").exists());
        let refused = denials(&env, &v["turn"]);
        assert_eq!(refused.len(), 1, "{lang}: {refused:#?}");
        assert_eq!(refused[0]["decision"]["code"], "TARGET_MISMATCH", "{lang}");
        assert_eq!(
            refused[0]["request"]["path"],
            s(&ws.canonicalize().unwrap().join("escape.txt")),
            "{lang}"
        );
    }
}

#[test]
fn interpreters_see_no_environment_variable_they_were_not_granted() {
    let (env, ws) = env_with_interpreters();
    let (run, v) = run_code(
        &env,
        &ws,
        "python",
        "import os\nprint(dict(os.environ), os.getenv('HOME'), os.getenv('GATEHOUSE_STATE_DIR'))",
        &[],
    );
    assert_eq!(result(&run, &v)["stdout"], "{} None None\n");
    let (run, v) = run_code(
        &env,
        &ws,
        "js",
        "console.log(JSON.stringify(process.env))",
        &[],
    );
    assert_eq!(result(&run, &v)["stdout"], "{}\n");
}

#[test]
fn interpreters_have_no_network_without_a_grant() {
    let (env, ws) = env_with_interpreters();
    // A listener on loopback: nothing may reach it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    for (lang, code, printed) in [
        (
            // No `socket` module, and no `wasi:sockets` in the component.
            "python",
            format!("try:\n    import socket\n    socket.create_connection(('127.0.0.1', {port}))\nexcept Exception as e:\n    print(type(e).__name__, e)"),
            "ModuleNotFoundError No module named 'socket'\n",
        ),
        (
            // No `wasi:http` in the component: fetch rejects.
            "js",
            format!("try {{ await fetch('http://127.0.0.1:{port}/') }} catch (e) {{ console.log(e.name) }}"),
            "TypeError\n",
        ),
    ] {
        let (run, v) = run_code(&env, &ws, lang, &code, &[]);
        assert_eq!(result(&run, &v)["stdout"], printed, "{lang}");
    }
    assert!(
        listener.accept().is_err(),
        "a connection reached the listener"
    );
}

#[test]
fn interpreters_import_only_what_their_manifests_grant() {
    let env = Env::new();
    for (lang, manifest) in [("python", guest("python")), ("js", guest("js"))] {
        let component = manifest
            .parent()
            .unwrap()
            .join(format!("../target/lang/{lang}.wasm"));
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
            "{lang}: {imports:#?}"
        );
        assert!(
            imports
                .iter()
                .any(|i| i.starts_with("wasi:filesystem/preopens@")),
            "{lang}: {imports:#?}"
        );
        env.run(&["manifest", "check", s(&manifest)]).expect(0);
    }
}

#[test]
fn interpreters_are_stopped_by_limits_with_their_codes() {
    let (env, ws) = env_with_interpreters();
    for (lang, code, deny, extra) in [
        (
            "python",
            "while True: pass",
            "LIMIT_DEADLINE",
            ["--deadline-ms", "1500"],
        ),
        (
            "js",
            "for (;;) {}",
            "LIMIT_DEADLINE",
            ["--deadline-ms", "1500"],
        ),
        (
            "python",
            "blocks = []\nwhile True: blocks.append(bytearray(1 << 20))",
            "LIMIT_MEMORY",
            ["--memory-mib", "64"],
        ),
        (
            "js",
            "const a = []\nfor (;;) a.push(new Array(1e6).fill(1))",
            "LIMIT_MEMORY",
            ["--memory-mib", "64"],
        ),
        (
            "python",
            "while True: print('flood ' * 10)",
            "LIMIT_OUTPUT",
            ["--output-kib", "64"],
        ),
        (
            // The host stops a write past the cap: JavaScript's console,
            // which ignores write errors, cannot print on until the deadline.
            "js",
            "for (;;) console.log('flood '.repeat(10))",
            "LIMIT_OUTPUT",
            ["--output-kib", "64"],
        ),
    ] {
        let (run, v) = run_code(&env, &ws, lang, code, &extra);
        run.expect_err(134, &[deny]);
        assert_eq!(v["error"]["code"], deny, "{lang} {code}: {v:#}");
    }
}

/// `js-http` (the `js` executor built with fetch): `fetch` goes through
/// wasi:http, each request decided by the policy. Under a grant of one
/// loopback URL pattern, a fetch beneath it reaches the server; a fetch of
/// another path is refused inside the language (a `TypeError`), reaches
/// nothing, and is audited with `NETWORK_NOT_GRANTED`.
#[test]
fn js_http_fetches_what_its_grant_covers_and_nothing_else() {
    let (env, ws) = env_with_interpreters();
    let (port, seen) = crate::authoring::plain_http_server(r#"{"answer":42}"#);
    let manifest = http_manifest(
        &env,
        &guest("js-http"),
        Some(&format!("http://127.0.0.1:{port}/api/**")),
    );
    let code = format!(
        "const r = await fetch('http://127.0.0.1:{port}/api/answer')\n\
         console.log(r.status, (await r.json()).answer)\n\
         try {{ await fetch('http://127.0.0.1:{port}/admin') }} catch (e) {{ console.log('refused', e.name) }}"
    );
    let input = json!({ "code": code }).to_string();
    let (run, v) = run_json(&env, &manifest, &ws, "Full", &input, &[]);
    assert_eq!(
        result(&run, &v),
        json!({"stdout": "200 42\nrefused TypeError\n", "stderr": "", "exception": null})
    );
    assert_eq!(*seen.lock().unwrap(), ["GET /api/answer HTTP/1.1"]);
    assert_eq!(denied_codes(&env, &v["turn"]), ["NETWORK_NOT_GRANTED"]);
}

/// The name of a shipped language build (`guests/NAME/executor.toml`).
fn shipped_name(shipped: &Path) -> &str {
    shipped
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
}

/// The shipped manifest of an HTTP build (`guest("js-http")` or
/// `guest("python-http")`) written into `env` with its component's
/// absolute path and `grant` as its network:sites target (or, with `None`,
/// no network:sites at all).
fn http_manifest(env: &Env, shipped: &Path, grant: Option<&str>) -> PathBuf {
    let name = shipped_name(shipped);
    let text = lang_manifest_text(name);
    let block = "[[capabilities]]\nname = \"network:sites\"\ntarget = \"https://example.com/**\"\nmethods = [\"GET\"]\n";
    assert!(text.contains(block), "{name}: {text}");
    let (text, file) = match grant {
        Some(target) => (
            text.replace("https://example.com/**", target),
            format!("manifests/{name}.toml"),
        ),
        None => (
            text.replace(block, ""),
            format!("manifests/{name}-no-network.toml"),
        ),
    };
    env.write(&file, &text)
}

/// The decisions of `turn` in the audit that were denies.
fn denials(env: &Env, turn: &Value) -> Vec<Value> {
    let audit = std::fs::read_to_string(env.state_dir().join("audit.jsonl")).unwrap();
    let line: Value = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["turn"] == *turn)
        .expect("the turn's audit line");
    line["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["decision"]["decision"] == "deny")
        .cloned()
        .collect()
}

/// The decisions of `turn` in the audit that were denies, by code.
fn denied_codes(env: &Env, turn: &Value) -> Vec<String> {
    denials(env, turn)
        .iter()
        .map(|d| d["decision"]["code"].as_str().unwrap().to_string())
        .collect()
}

/// `python-http` (the `python` executor built with wasi:http): `requests`
/// (over requests-wasi-http's adapter) and `urllib.request` go through
/// wasi:http, each request decided by the policy. Under a grant of one
/// loopback URL pattern, a GET beneath it reaches the server; a GET of
/// another path is refused inside the language (`ConnectionError` in
/// requests, `URLError` in urllib), reaches nothing, and is audited with
/// `NETWORK_NOT_GRANTED`.
#[test]
fn python_http_fetches_what_its_grant_covers_and_nothing_else() {
    let (env, ws) = env_with_interpreters();
    let (port, seen) = crate::authoring::plain_http_server(r#"{"answer":42}"#);
    let manifest = http_manifest(
        &env,
        &guest("python-http"),
        Some(&format!("http://127.0.0.1:{port}/api/**")),
    );
    for (code, printed, line) in [
        (
            format!(
                "import requests\n\
                 r = requests.get('http://127.0.0.1:{port}/api/answer')\n\
                 print(r.status_code, r.json()['answer'])\n\
                 try:\n    requests.get('http://127.0.0.1:{port}/admin')\n\
                 except Exception as e:\n    print('refused', type(e).__name__)"
            ),
            "200 42\nrefused ConnectionError\n",
            "GET /api/answer HTTP/1.1",
        ),
        (
            format!(
                "import json, urllib.request\n\
                 with urllib.request.urlopen('http://127.0.0.1:{port}/api/urllib') as r:\n    print(r.status, json.load(r)['answer'])\n\
                 try:\n    urllib.request.urlopen('http://127.0.0.1:{port}/admin')\n\
                 except Exception as e:\n    print('refused', type(e).__name__)"
            ),
            "200 42\nrefused URLError\n",
            "GET /api/urllib HTTP/1.1",
        ),
    ] {
        seen.lock().unwrap().clear();
        let input = json!({ "code": code }).to_string();
        let (run, v) = run_json(&env, &manifest, &ws, "Full", &input, &[]);
        assert_eq!(
            result(&run, &v),
            json!({"stdout": printed, "stderr": "", "exception": null}),
            "{code}"
        );
        assert_eq!(*seen.lock().unwrap(), [line]);
        assert_eq!(denied_codes(&env, &v["turn"]), ["NETWORK_NOT_GRANTED"]);
    }
    // requests brings `socket` in, but a socket is no way around the
    // policy: the plugged-in deny-sockets refuses it inside the component.
    seen.lock().unwrap().clear();
    let code = format!(
        "import socket\n\
         try:\n    socket.create_connection(('127.0.0.1', {port}))\n\
         except OSError as e:\n    print('refused', type(e).__name__)"
    );
    let (run, v) = run_code(&env, &ws, "python-http", &code, &[]);
    assert_eq!(result(&run, &v)["stdout"], "refused PermissionError\n");
    assert!(seen.lock().unwrap().is_empty());
}

/// The HTTP builds import `wasi:http` and still no `wasi:sockets`, and
/// their `wasi:http` imports need `network:sites`: without it the manifest
/// check names them and nothing else.
#[test]
fn http_interpreters_import_wasi_http_which_needs_network_sites() {
    let env = Env::new();
    for shipped in [guest("python-http"), guest("js-http")] {
        let name = shipped_name(&shipped);
        let component = shipped
            .parent()
            .unwrap()
            .join(format!("../target/lang/{name}.wasm"));
        let inspect = env.run(&["--json", "inspect", s(&component)]);
        inspect.expect(0);
        let imports: Vec<String> = inspect.json_lines()[0]["imports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap().to_string())
            .collect();
        assert!(
            imports.iter().all(|i| !i.starts_with("wasi:sockets/")),
            "{name}: {imports:#?}"
        );
        assert!(
            imports
                .iter()
                .any(|i| i.starts_with("wasi:http/outgoing-handler@0.2.")),
            "{name}: {imports:#?}"
        );
        env.run(&["manifest", "check", s(&shipped)]).expect(0);
        let check = env.run(&[
            "--json",
            "manifest",
            "check",
            s(&http_manifest(&env, &shipped, None)),
        ]);
        check.expect(2);
        let v = &check.json_lines()[0];
        let uncovered = v["uncovered"].as_array().unwrap();
        assert!(!uncovered.is_empty(), "{name}: {v:#}");
        for u in uncovered {
            assert!(u.to_string().contains("wasi:http/"), "{name}: {u}");
        }
    }
}

/// Environment variables as granted: an interpreter whose manifest adds
/// `env:read` on `GREETING` sees that variable and no other, though the
/// host process has both.
#[test]
fn interpreters_see_exactly_the_environment_variables_they_were_granted() {
    let (env, ws) = env_with_interpreters();
    for (lang, code, printed) in [
        (
            "python",
            "import os\nprint(sorted(os.environ.items()))",
            "[('GREETING', 'hello')]\n",
        ),
        (
            "js",
            "console.log(JSON.stringify(process.env))",
            "{\"GREETING\":\"hello\"}\n",
        ),
    ] {
        let manifest = env.write(
            &format!("manifests/{lang}-env.toml"),
            &lang_manifest_text(lang).replace(
                "[input_schema]",
                "[[capabilities]]\nname = \"env:read\"\ntarget = \"GREETING\"\n\n[input_schema]",
            ),
        );
        let input = json!({ "code": code }).to_string();
        let out = env
            .command()
            .args([
                "--json",
                "run",
                s(&manifest),
                "--workspace",
                s(&ws),
                "--level",
                "Full",
                "--input",
                &input,
            ])
            .env("GREETING", "hello")
            .env("SECRET_TOKEN", "never")
            .output()
            .unwrap();
        assert!(out.status.success(), "{lang}: {out:?}");
        let v: Value = serde_json::from_slice(out.stdout.trim_ascii()).unwrap();
        assert_eq!(output(&v)["stdout"], printed, "{lang}");
    }
}

/// The symbolic links below `dir`, as (path relative to `dir`, target),
/// sorted.
fn links_below(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let kind = std::fs::symlink_metadata(&p).unwrap().file_type();
            if kind.is_symlink() {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                let target = std::fs::read_link(&p).unwrap().display().to_string();
                out.push((rel, target));
            } else if kind.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// security round 3, item 7, the recipe: the `python` executor (with
/// `fs:write out/**`) makes `out/d1/…/d12/l/passwd -> ../…/etc/passwd`,
/// thirteen levels up, so that it stays inside `out/`, then renames
/// `out/d1/…/d12/l` to `out/l`, from where the same `..` reach
/// `/etc/passwd`. The rename is refused (`EPERM`, `TARGET_MISMATCH` in the
/// audit) and no link on disk leads out of the workspace; so is a link
/// whose `..` follows a name (`out/x -> s/../..` with `out/s -> .` is the
/// workspace's parent). The controls: the same directory renamed within
/// its own directory, then (without `passwd`) to `out/l`, carrying a link
/// into it (`ok -> file.txt`) and one whose leading `..` stay inside
/// (`up -> ../sibling.txt`): both moves are made and `ok` still reads the
/// file.
#[test]
fn python_cannot_move_a_link_to_where_its_target_climbs_out() {
    let (env, ws) = env_with_interpreters();
    let code = r#"
import errno, os
deep = 'out/' + '/'.join('d%d' % i for i in range(1, 13))
os.makedirs(deep + '/l')
os.symlink('../' * 13 + 'etc/passwd', deep + '/l/passwd')
open(deep + '/l/file.txt', 'w').write('inside\n')
os.symlink('file.txt', deep + '/l/ok')
os.symlink('../sibling.txt', deep + '/l/up')
def attempt(what, f):
    try:
        f()
        print(what, 'ok')
    except OSError as e:
        print(what, errno.errorcode[e.errno])
attempt('rename beside', lambda: os.rename(deep + '/l', deep + '/m'))
attempt('rename up', lambda: os.rename(deep + '/m', 'out/l'))
os.symlink('.', 'out/s')
attempt('symlink s/../..', lambda: os.symlink('s/../..', 'out/x'))
os.unlink(deep + '/m/passwd')
attempt('rename up without passwd', lambda: os.rename(deep + '/m', 'out/l'))
print(open('out/l/ok').read(), end='')
"#;
    let (run, v) = run_code(&env, &ws, "python", code, &[]);
    assert_eq!(
        result(&run, &v),
        json!({
            "stdout": "rename beside ok\nrename up EPERM\nsymlink s/../.. EPERM\nrename up without passwd ok\ninside\n",
            "stderr": "",
            "exception": null
        }),
        "{v:#}"
    );
    // On disk: exactly the links that stay inside.
    assert_eq!(
        links_below(&ws),
        vec![
            ("out/l/ok".to_string(), "file.txt".to_string()),
            ("out/l/up".to_string(), "../sibling.txt".to_string()),
            ("out/s".to_string(), ".".to_string()),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("out/l/ok")).unwrap(),
        "inside\n"
    );
    let turn = v["turn"].as_str().unwrap();
    let decisions = env
        .run(&["history", "--turn", turn, "--decisions"])
        .json_lines();
    let refused: Vec<(&str, &str)> = decisions
        .iter()
        .filter(|d| d["request"]["kind"] == "filesystem")
        .map(|d| {
            (
                d["request"]["operation"].as_str().unwrap(),
                d["decision"]["code"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        refused,
        vec![
            ("rename-at", "TARGET_MISMATCH"),
            ("symlink-at", "TARGET_MISMATCH")
        ]
    );
}
