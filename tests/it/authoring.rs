//! Issue 17: authoring executors. `inspect`, `manifest check` against the
//! component, `wit`, `new` (built for real and run), `manifest schema`,
//! and a trap's backtrace.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::support::guests::{component, guest, manifest, run_json};
use crate::support::{s, Env};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

// ---------------------------------------------------------------------------
// inspect

#[test]
fn authoring_inspect_names_each_import_and_what_it_needs() {
    let env = Env::new();
    let fetch = component("fetch-socket");
    let run = env.run(&["--json", "inspect", s(&fetch)]);
    run.expect(0);
    let v = &run.json_lines()[0];
    assert_eq!(v["kind"], "component");
    assert_eq!(v["command"], false);
    let imports = v["imports"].as_array().unwrap();
    let find = |prefix: &str| {
        imports
            .iter()
            .find(|i| i["name"].as_str().unwrap().starts_with(prefix))
            .unwrap_or_else(|| panic!("no import {prefix} in {v:#}"))
    };
    assert_eq!(
        find("wasi:sockets/tcp@")["needs"],
        json!({"kind": "capability", "any_of": ["network:sites"]})
    );
    assert_eq!(find("wasi:sockets/tcp@")["binding"], "wasi:sockets");
    assert_eq!(
        find("wasi:io/streams@")["needs"],
        json!({"kind": "baseline"})
    );
    assert!(find("gatehouse:executor/types@")["functions"] == json!([]));
    assert!(v["exports"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["name"] == "run"));

    // The same, for people: one line per import.
    let human = env.run(&["inspect", s(&fetch)]);
    human.expect(0);
    assert_eq!(
        human.lines()[0],
        format!("component `{}`", s(&fetch)),
        "{human:#?}"
    );
    assert!(
        human
            .lines()
            .iter()
            .any(|l| l.starts_with("import   wasi:sockets/tcp@")
                && l.contains("  needs `network:sites` (")),
        "{human:#?}"
    );
    assert!(human.lines().iter().any(|l| l.starts_with("export   run")));

    // A preview 1 module: the WASI functions it imports, and the
    // interfaces the adapter links it with.
    let p1 = Path::new(ROOT).join("guests/target/wasm32-wasip1/release/fs_cmd.wasm");
    let run = env.run(&["--json", "inspect", s(&p1)]);
    run.expect(0);
    let v = &run.json_lines()[0];
    assert_eq!(v["kind"], "core_module");
    assert_eq!(v["command"], true);
    let wasi: Vec<&str> = v["wasi_functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        wasi.contains(&"wasi_snapshot_preview1.fd_write"),
        "{wasi:?}"
    );
    assert!(
        wasi.contains(&"wasi_snapshot_preview1.path_open"),
        "{wasi:?}"
    );
    assert!(v["imports"].as_array().unwrap().iter().any(|i| i["name"]
        .as_str()
        .unwrap()
        .starts_with("wasi:filesystem/preopens@")
        && i["needs"] == json!({"kind": "baseline"})));

    // Not wasm, or not there: invalid input.
    let junk = env.write("junk.wasm", "not wasm");
    env.run(&["inspect", s(&junk)])
        .expect_err(
            3,
            &[&format!("`{}` is not a webassembly component", s(&junk))],
        )
        .expect_lowercase_message();
    env.run(&["inspect", "nowhere.wasm"])
        .expect_err(3, &["`nowhere.wasm` does not exist"])
        .expect_lowercase_message();
}

// ---------------------------------------------------------------------------
// manifest check against the component

#[test]
fn authoring_manifest_check_names_an_import_no_capability_covers() {
    let env = Env::new();
    // fetch imports wasi:sockets; this manifest declares compute:pure only.
    let m = manifest(
        &env,
        "fetch",
        &component("fetch-socket"),
        &[("compute:pure", None)],
    );
    let run = env.run(&["manifest", "check", s(&m)]);
    run.expect_err(
        2,
        &["gatehouse: IMPORT_NOT_GRANTED: no declared capability covers 7 of the component's imports: a run of `fetch` would be refused"],
    );
    let errors: Vec<&str> = run
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert!(!errors.is_empty(), "{run:#?}");
    for e in &errors {
        let rest = e.strip_prefix("error: imports `wasi:sockets/").unwrap();
        assert!(
            rest.ends_with(
                "` but declares no `network:sites`: this executor will be refused with IMPORT_NOT_GRANTED"
            ),
            "{e}"
        );
    }
    assert!(errors.iter().any(|e| e.contains("`wasi:sockets/tcp@")));
    let json = env.run(&["--json", "manifest", "check", s(&m)]);
    json.expect(2);
    let v = &json.json_lines()[0];
    assert_eq!(v["uncovered"].as_array().unwrap().len(), errors.len());
    let tcp = v["imports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| {
            i["import"]
                .as_str()
                .unwrap()
                .starts_with("wasi:sockets/tcp@")
        })
        .unwrap();
    assert_eq!(tcp["status"], "uncovered");
    assert_eq!(v["explained"][0]["name"], "compute:pure");
    assert_eq!(
        v["explained"][0]["levels"][0],
        json!({"level": "ReadOnly", "outcome": "allowed"})
    );

    // And the run is refused exactly so.
    let ws = env.mkdir("ws");
    let (run, v) = run_json(&env, &m, &ws, "Full", "{}", &[]);
    run.expect(2);
    assert_eq!(v["code"], "IMPORT_NOT_GRANTED");

    // Control: the shipped manifest declares network:sites and passes,
    // explaining it.
    let ok = env.run(&["manifest", "check", s(&guest("fetch-socket"))]);
    ok.expect(0);
    assert!(
        ok.lines()
            .iter()
            .any(|l| l.starts_with("import   wasi:sockets/tcp@")
                && l.ends_with(": covered by `network:sites`")),
        "{ok:#?}"
    );
    assert!(ok.lines().contains(
        &"capability `network:sites` `localhost`: a host pattern: name lookup, connections and HTTPS to that host only; a URL pattern: HTTP requests under it only; not critical; approved per target: the person is asked for the declared target, and \"allow and remember\" records a grant that answers later turns (ReadOnly approval required, Supervised approval required, Full allowed)"
    ), "{ok:#?}");
}

#[test]
fn authoring_manifest_check_warns_of_a_capability_the_component_cannot_use() {
    let env = Env::new();
    // hello imports no filesystem and no sockets.
    let m = manifest(
        &env,
        "hello",
        &component("hello"),
        &[
            ("compute:pure", None),
            ("fs:read", Some("**")),
            ("system:admin", None),
        ],
    );
    let run = env.run(&["manifest", "check", s(&m)]);
    run.expect(0);
    let warnings: Vec<&str> = run
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("warning: "))
        .collect();
    assert_eq!(
        warnings,
        [
            "warning: declares `fs:read` but the component cannot use it: it imports none of `wasi:filesystem/types`, `wasi:filesystem/preopens`",
            "warning: declares `system:admin` but no interface gatehouse provides acts on it: the component cannot use it",
        ],
        "{run:#?}"
    );
    assert!(run.lines().contains(
        &"capability `system:admin`: change the host's own configuration; critical; approved on every turn: asked each time, never remembered as a grant (ReadOnly denied, Supervised approval required, Full approval required)"
    ), "{run:#?}");

    // A missing component is invalid input.
    let m = manifest(&env, "gone", &env.root().join("gone.wasm"), &[]);
    env.run(&["manifest", "check", s(&m)])
        .expect_err(3, &["field `component`", "gone.wasm` does not exist"])
        .expect_lowercase_message();
}

// ---------------------------------------------------------------------------
// wit

/// Every file under `dir`, relative, with its text.
fn files(dir: &Path) -> Vec<(String, String)> {
    crate::support::guests::tree(dir)
        .into_iter()
        .filter(|(p, _)| !p.ends_with('/'))
        .map(|(p, b)| (p, String::from_utf8(b).unwrap()))
        .collect()
}

#[test]
fn authoring_wit_prints_and_writes_the_package_with_its_deps() {
    let env = Env::new();
    let wit = Path::new(ROOT).join("wit");
    let run = env.run(&["wit"]);
    run.expect(0);
    assert_eq!(
        run.stdout,
        std::fs::read_to_string(wit.join("executor.wit")).unwrap()
    );
    let out = env.root().join("out");
    env.run(&["wit", "--out", s(&out)]).expect(0);
    assert_eq!(files(&out), files(&wit));
    // It resolves as one package with its WASI dependencies.
    let mut resolve = wit_parser::Resolve::default();
    let (pkg, _) = resolve.push_dir(&out).unwrap();
    assert_eq!(
        resolve.packages[pkg].name.to_string(),
        "gatehouse:executor@0.1.0"
    );
    resolve.select_world(&[pkg], Some("executor")).unwrap();
    let names: Vec<String> = resolve
        .packages
        .iter()
        .map(|(_, p)| p.name.to_string())
        .collect();
    for dep in ["wasi:io", "wasi:cli", "wasi:sockets", "wasi:filesystem"] {
        assert!(names.iter().any(|n| n.starts_with(dep)), "{names:?}");
    }
}

/// The names in `dir`, sorted (a link is listed, not followed).
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// security round 2, item 6: `gatehouse wit --out DIR` over a repository
/// whose `wit/executor.wit` is a link to the person's configuration (or
/// whose `wit/deps` is a link to the configuration's directory, or whose
/// `wit/deps/io.wit` is a link) exits 3 naming the link, writes nothing,
/// and leaves the configuration's bytes as they were; `gatehouse new
/// --dir` writes through the same code.
///
/// Positive controls: the same command into a fresh directory writes the
/// package's files, a second run over its own regular files succeeds and
/// leaves exactly the package (no temporary file), and in the repository
/// once the link is gone it succeeds too, so each refusal is the link's.
#[test]
fn wit_out_refuses_a_symbolic_link_below_its_directory_and_writes_through_none() {
    use std::os::unix::fs::symlink;
    let env = Env::new();
    let package = files(&Path::new(ROOT).join("wit"));
    let config_text = "level = \"ReadOnly\"\n[tools]\nallow = [\"cat\"]\n";
    let config = env.write("home/.config/gatehouse/gatehouse.toml", config_text);
    let config_dir = config.parent().unwrap().to_path_buf();
    let refused = |dir: &Path, link: &Path| {
        env.run(&["wit", "--out", s(dir)])
            .expect_err(
                3,
                &[&format!(
                    "gatehouse: `{}` is a symbolic link: refusing to write through it (remove it or give another directory)\n",
                    s(link)
                )],
            )
            .expect_lowercase_message();
        assert_eq!(std::fs::read_to_string(&config).unwrap(), config_text);
        assert_eq!(names(&config_dir), ["gatehouse.toml"]);
    };

    // The recipe: the target file is a link.
    let wit = env.mkdir("repo/wit");
    let target = wit.join("executor.wit");
    symlink(&config, &target).unwrap();
    refused(&wit, &target);
    // Nothing was written, not even the files checked before the link.
    assert_eq!(names(&wit), ["executor.wit"]);
    assert!(std::fs::symlink_metadata(&target)
        .unwrap()
        .file_type()
        .is_symlink());

    // A directory on the way is a link.
    let wit2 = env.mkdir("repo2/wit");
    let deps = wit2.join("deps");
    symlink(&config_dir, &deps).unwrap();
    refused(&wit2, &deps);
    assert_eq!(names(&wit2), ["deps"]);

    // A file below a directory on the way is a link.
    let wit3 = env.mkdir("repo3/wit");
    let io = env.mkdir("repo3/wit/deps").join("io.wit");
    symlink(&config, &io).unwrap();
    refused(&wit3, &io);
    assert_eq!(names(&wit3), ["deps"]);
    assert_eq!(names(&wit3.join("deps")), ["io.wit"]);

    // The controls. A fresh directory gets the package...
    let fresh = env.root().join("fresh/wit");
    env.run(&["wit", "--out", s(&fresh)]).expect(0);
    assert_eq!(files(&fresh), package);
    // ...and a second run over its own regular files replaces them.
    std::fs::write(fresh.join("executor.wit"), "stale\n").unwrap();
    env.run(&["wit", "--out", s(&fresh)]).expect(0);
    assert_eq!(files(&fresh), package);
    // In the repository, once the link is gone, the same command works
    // and the configuration still holds its bytes.
    std::fs::remove_file(&target).unwrap();
    env.run(&["wit", "--out", s(&wit)]).expect(0);
    assert_eq!(files(&wit), package);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), config_text);
    // `new` writes the same way: into an empty directory, every file.
    let crate_dir = env.mkdir("crate");
    env.run(&["new", "linked", "--dir", s(&crate_dir)])
        .expect(0);
    assert!(crate_dir.join("wit/executor.wit").is_file());
    assert_eq!(
        files(&crate_dir.join("wit")),
        package,
        "`new` writes the package under wit/"
    );
}

// ---------------------------------------------------------------------------
// new

/// Builds the crate in `dir` for wasm32-wasip2 into `dir/target`,
/// whatever CARGO_TARGET_DIR says, with its own lock.
fn cargo_build(dir: &Path) {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            "wasm32-wasip2",
            "--target-dir",
        ])
        .arg(dir.join("target"))
        .current_dir(dir)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo build failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `gatehouse new` (with `flag`: `--command`, `--http`) then `gatehouse
/// wit --out` over its `wit/` (the test that wit-bindgen accepts what
/// `wit` writes), built, checked.
fn new_crate(env: &Env, name: &str, flag: Option<&str>) -> PathBuf {
    let dir = env.root().join("work").join(name);
    let mut args = vec!["new", name, "--dir", s(&dir)];
    args.extend(flag);
    let run = env.run(&args);
    run.expect(0);
    assert_eq!(
        run.lines()[0],
        format!(
            "created executor `{name}` in `{}` ({} files); next, in that directory:",
            s(&dir),
            6 + gatehouse::authoring::wit::FILES.len()
        )
    );
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert_eq!(readme.lines().count(), 3, "{readme}");
    let toml = std::fs::read_to_string(dir.join("executor.toml")).unwrap();
    let least = if flag == Some("--http") {
        "name = \"network:sites\""
    } else {
        "name = \"compute:pure\""
    };
    assert!(toml.contains(least), "{toml}");
    std::fs::remove_dir_all(dir.join("wit")).unwrap();
    env.run(&["wit", "--out", s(&dir.join("wit"))]).expect(0);
    cargo_build(&dir);
    let check = env.run(&["manifest", "check", s(&dir.join("executor.toml"))]);
    check.expect(0);
    assert!(
        !check
            .lines()
            .iter()
            .any(|l| l.starts_with("warning: ") || l.starts_with("error: ")),
        "{check:#?}"
    );
    dir
}

#[test]
fn authoring_new_executor_builds_passes_check_and_runs() {
    let env = Env::new();
    let dir = new_crate(&env, "my-tool", None);
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    assert!(lib.contains("impl Guest for Executor"), "{lib}");
    let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(cargo.contains(&format!(
        "wit-bindgen = {{ version = \"={}\"",
        gatehouse::authoring::template::WIT_BINDGEN
    )));
    // The pin is the guests' own.
    let guests = std::fs::read_to_string(Path::new(ROOT).join("guests/Cargo.toml")).unwrap();
    assert!(guests.contains(&format!(
        "wit-bindgen = {{ version = \"{}\"",
        gatehouse::authoring::template::WIT_BINDGEN
    )));
    let run = env.run(&["--json", "run", s(&dir.join("executor.toml"))]);
    run.expect(0);
    let v = &run.json_lines()[0];
    assert_eq!(
        v["run"]["result"]["output"], r#"{"executor":"my-tool","input_bytes":2}"#,
        "{v:#}"
    );
    assert_eq!(v["run"]["log"][0]["message"], "my-tool: 2 bytes of input");
    // Its imports: the executor world's `log` and the std baseline only.
    let inspect = env.run(&[
        "--json",
        "inspect",
        s(&dir.join("target/wasm32-wasip2/release/my_tool.wasm")),
    ]);
    let i = &inspect.json_lines()[0];
    assert!(
        i["imports"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["needs"] == json!({"kind": "baseline"})),
        "{i:#}"
    );
}

#[test]
fn authoring_new_command_builds_passes_check_and_runs() {
    let env = Env::new();
    let dir = new_crate(&env, "my-cmd", Some("--command"));
    assert!(dir.join("src/main.rs").is_file());
    // stdin closed, no arguments: the command's own output, exactly.
    env.run(&["run", s(&dir.join("executor.toml"))])
        .expect_stdout(0, &["my-cmd: 0 bytes of input, 0 arguments"]);
    env.run(&["run", s(&dir.join("executor.toml")), "--", "a", "b"])
        .expect_stdout(0, &["my-cmd: 0 bytes of input, 2 arguments"]);
}

/// A plain HTTP/1.1 server on 127.0.0.1 (no TLS: the grant names
/// `http://`) that answers every request `200` with `body` and records its
/// request line.
pub(crate) fn plain_http_server(body: &'static str) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut stream) = conn else { continue };
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let text = String::from_utf8_lossy(&head).into_owned();
            record
                .lock()
                .unwrap()
                .push(text.lines().next().unwrap_or_default().to_string());
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, seen)
}

#[test]
fn authoring_new_http_calls_an_api_through_wasi_http_under_its_grant() {
    let env = Env::new();
    // `--help` says what the flag makes; it is not a command as well.
    let help = env.run(&["new", "--help"]);
    help.expect(0);
    assert!(
        help.stdout.contains("--http")
            && help
                .stdout
                .contains("An executor that calls a web API through `wasi:http`"),
        "{help:#?}"
    );
    let both = env.run(&["new", "x", "--http", "--command"]);
    assert_ne!(both.code, 0, "{both:#?}");
    assert!(both.stderr.contains("cannot be used with"), "{both:#?}");
    let dir = new_crate(&env, "api-tool", Some("--http"));
    let toml = std::fs::read_to_string(dir.join("executor.toml")).unwrap();
    assert!(
        toml.contains(
            "[[capabilities]]\nname = \"network:sites\"\ntarget = \"https://api.example.com/**\"\nmethods = [\"GET\"]\n"
        ),
        "{toml}"
    );
    let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(cargo.contains("\nwasi = \"0.14\"\n"), "{cargo}");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert_eq!(
        readme.lines().last().unwrap(),
        "Run: `gatehouse run executor.toml --input '{\"url\":\"https://api.example.com/\"}'`"
    );
    // `manifest check`: both wasi:http interfaces covered by the grant.
    let check = env.run(&["manifest", "check", s(&dir.join("executor.toml"))]);
    check.expect(0);
    for import in [
        "wasi:http/types@0.2.12",
        "wasi:http/outgoing-handler@0.2.12",
    ] {
        let line = format!("import   {import}: covered by `network:sites`");
        assert!(check.lines().contains(&line.as_str()), "{line}: {check:#?}");
    }
    // `inspect`: they are the only imports that need a capability, and
    // that capability is `network:sites`.
    let wasm = dir.join("target/wasm32-wasip2/release/api_tool.wasm");
    let inspect = env.run(&["--json", "inspect", s(&wasm)]);
    inspect.expect(0);
    let i = &inspect.json_lines()[0];
    let needing: BTreeMap<&str, &Value> = i["imports"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["needs"] != json!({"kind": "baseline"}))
        .map(|x| (x["name"].as_str().unwrap(), &x["needs"]))
        .collect();
    let sites = json!({"kind": "capability", "any_of": ["network:sites"]});
    assert_eq!(
        needing,
        BTreeMap::from([
            ("wasi:http/outgoing-handler@0.2.12", &sites),
            ("wasi:http/types@0.2.12", &sites),
        ]),
        "{i:#}"
    );
    let human = env.run(&["inspect", s(&wasm)]);
    assert!(
        human.lines().contains(
            &"import   wasi:http/outgoing-handler@0.2.12  needs `network:sites` (handle)"
        ),
        "{human:#?}"
    );
    // Against a local plain-HTTP server, with its manifest's grant moved
    // there: one GET, its answer exactly.
    let (port, seen) = plain_http_server(r#"{"items":[1,2]}"#);
    let local = dir.join("local.toml");
    std::fs::write(
        &local,
        toml.replace(
            "https://api.example.com/**",
            &format!("http://127.0.0.1:{port}/**"),
        ),
    )
    .unwrap();
    let ws = env.mkdir("ws");
    let url = format!("http://127.0.0.1:{port}/v1/items?page=2");
    let input = json!({ "url": url }).to_string();
    let (run, v) = run_json(&env, &local, &ws, "Full", &input, &[]);
    run.expect(0);
    assert_eq!(
        v["run"]["result"]["output"], r#"{"body":"{\"items\":[1,2]}","status":200}"#,
        "{v:#}"
    );
    assert_eq!(*seen.lock().unwrap(), ["GET /v1/items?page=2 HTTP/1.1"]);
    // Control: under the template's own grant (`https://api.example.com`)
    // the same request is refused before it is sent.
    let (run, v) = run_json(&env, &dir.join("executor.toml"), &ws, "Full", &input, &[]);
    run.expect(1);
    assert_eq!(
        v["run"]["result"]["error"],
        json!({"failed": format!("GET `{url}`: ErrorCode::HttpRequestDenied")}),
        "{v:#}"
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn authoring_new_refuses_a_bad_name_and_a_non_empty_directory() {
    let env = Env::new();
    env.run(&["new", "My Tool"])
        .expect_err(3, &["invalid executor name `My Tool`"])
        .expect_lowercase_message();
    env.run(&["new", "fn"])
        .expect_err(3, &["invalid executor name `fn`", "keyword"])
        .expect_lowercase_message();
    let full = env.write("full/keep.txt", "mine");
    let dir = full.parent().unwrap();
    env.run(&["new", "ok-name", "--dir", s(dir)])
        .expect_err(
            3,
            &[&format!("directory `{}` exists and is not empty", s(dir))],
        )
        .expect_lowercase_message();
    assert_eq!(std::fs::read_dir(dir).unwrap().count(), 1);
    // An empty directory is fine, and so is the default `./NAME`.
    let empty = env.mkdir("empty");
    env.run(&["new", "ok-name", "--dir", s(&empty)]).expect(0);
    env.run(&["new", "ok-name"]).expect(0);
    assert!(env.root().join("cwd/ok-name/executor.toml").is_file());
}

// ---------------------------------------------------------------------------
// manifest schema

/// Checks `value` against the subset of JSON Schema the generated schema
/// uses; returns the problems.
fn validate(schema: &Value, root: &Value, value: &Value, at: &str, problems: &mut Vec<String>) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap();
        let def = root["$defs"]
            .get(name)
            .unwrap_or(&root["definitions"][name]);
        return validate(def, root, value, at, problems);
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
        let ok = any.iter().any(|s| {
            let mut p = Vec::new();
            validate(s, root, value, at, &mut p);
            p.is_empty()
        });
        if !ok {
            problems.push(format!("{at}: matches no alternative"));
        }
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            problems.push(format!("{at}: {value} not in {allowed:?}"));
        }
    }
    if let Some(ty) = schema.get("type") {
        let types: Vec<&str> = match ty {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap()).collect(),
            _ => vec![],
        };
        let actual = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        let integer = actual == "number" && types.contains(&"integer");
        if !types.contains(&actual) && !integer {
            problems.push(format!("{at}: a {actual}, not {types:?}"));
        }
    }
    if let (Some(props), Value::Object(obj)) = (schema.get("properties"), value) {
        for (k, v) in obj {
            match props.get(k) {
                Some(s) => validate(s, root, v, &format!("{at}.{k}"), problems),
                None if schema["additionalProperties"] == false => {
                    problems.push(format!("{at}: unknown field `{k}`"))
                }
                None => {}
            }
        }
        for r in schema["required"].as_array().into_iter().flatten() {
            if !obj.contains_key(r.as_str().unwrap()) {
                problems.push(format!("{at}: missing `{r}`"));
            }
        }
    }
    if let (Some(items), Value::Array(list)) = (schema.get("items"), value) {
        for (i, v) in list.iter().enumerate() {
            validate(items, root, v, &format!("{at}[{i}]"), problems);
        }
    }
}

#[test]
fn authoring_manifest_schema_accepts_every_guest_manifest() {
    let env = Env::new();
    let run = env.run(&["manifest", "schema"]);
    run.expect(0);
    let schema: Value = serde_json::from_str(&run.stdout).unwrap();
    let props = schema["properties"].as_object().unwrap();
    for field in [
        "name",
        "description",
        "component",
        "command",
        "sha256",
        "revertible",
        "reverse_pattern",
        "tools",
        "input_schema",
        "capabilities",
    ] {
        assert!(props.contains_key(field), "no `{field}` in {schema:#}");
    }
    let mut checked = 0;
    for entry in std::fs::read_dir(Path::new(ROOT).join("guests")).unwrap() {
        let m = entry.unwrap().path().join("executor.toml");
        if !m.is_file() {
            continue;
        }
        let value: Value = serde_json::to_value(
            toml::from_str::<toml::Value>(&std::fs::read_to_string(&m).unwrap()).unwrap(),
        )
        .unwrap();
        let mut problems = Vec::new();
        validate(&schema, &schema, &value, "$", &mut problems);
        assert!(problems.is_empty(), "{}: {problems:?}", m.display());
        checked += 1;
    }
    assert!(checked >= 20, "{checked}");
    // Controls: what the validator refuses, the schema refuses.
    for (bad, why) in [
        (
            json!({"name": "x", "component": "x.wasm", "revertable": true}),
            "unknown field `revertable`",
        ),
        (
            json!({"name": "x", "component": "x.wasm", "capabilities": [{"name": "fs:delete"}]}),
            "fs:delete",
        ),
        (json!({"component": "x.wasm"}), "missing `\"name\"`"),
    ] {
        let mut problems = Vec::new();
        validate(&schema, &schema, &bad, "$", &mut problems);
        assert!(
            problems.iter().any(|p| p.contains(why)),
            "{bad}: {problems:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// a trap's backtrace

#[test]
fn authoring_a_trap_shows_the_guest_backtrace_with_function_names() {
    let env = Env::new();
    let m = guest("panic");
    let run = env.run(&["run", s(&m)]);
    run.expect(134);
    let lines: Vec<&str> = run.stderr.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "backtrace (innermost first):")
        .unwrap_or_else(|| panic!("no backtrace: {run:#?}"));
    assert!(
        lines[at + 1..]
            .iter()
            .any(|l| l.contains(": panic::deep_inside (at 0x")),
        "{run:#?}"
    );
    assert!(
        run.stderr.contains("gatehouse: the guest trapped: "),
        "{run:#?}"
    );
    let (run, v) = run_json(&env, &m, &env.root().join("cwd"), "Supervised", "{}", &[]);
    run.expect(134);
    let frames = v["run"]["backtrace"].as_array().unwrap();
    assert!(
        frames.iter().any(|f| f["function"] == "panic::deep_inside"),
        "{v:#}"
    );
    // Controls: a limit is not a trap (no backtrace), nor is a run that
    // returns.
    let (_, v) = run_json(
        &env,
        &guest("spin"),
        &env.root().join("cwd"),
        "Supervised",
        "{}",
        &["--deadline-ms", "200"],
    );
    assert_eq!(v["error"]["code"], "LIMIT_DEADLINE", "{v:#}");
    assert_eq!(v["run"].get("backtrace"), None, "{v:#}");
    let (_, v) = run_json(
        &env,
        &guest("hello"),
        &env.root().join("cwd"),
        "Supervised",
        "{}",
        &[],
    );
    assert_eq!(v["run"].get("backtrace"), None, "{v:#}");
}

// ---------------------------------------------------------------------------
// another language: Python through componentize-py

#[test]
fn authoring_python_component_passes_check_and_runs_with_compute_pure() {
    let Ok(version) = Command::new("componentize-py").arg("--version").output() else {
        eprintln!("skipped: componentize-py is not installed (pip install componentize-py)");
        return;
    };
    assert!(version.status.success());
    let env = Env::new();
    let dir = env.mkdir("py");
    env.run(&["wit", "--out", s(&dir.join("wit"))]).expect(0);
    env.write(
        "py/app.py",
        "import json\nimport wit_world\nfrom wit_world.imports import log\n\n\
         class WitWorld(wit_world.WitWorld):\n    def run(self, input: str) -> str:\n        \
         log.log(log.Level.INFO, f\"{len(input)} bytes of input\")\n        \
         return json.dumps({\"input_bytes\": len(input)})\n",
    );
    let out = Command::new("componentize-py")
        .args([
            "-d",
            "wit",
            "-w",
            "executor",
            "componentize",
            "app",
            "--stub-wasi",
            "-o",
            "app.wasm",
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "componentize-py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let inspect = env.run(&["--json", "inspect", s(&dir.join("app.wasm"))]);
    inspect.expect(0);
    let imports: Vec<String> = inspect.json_lines()[0]["imports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        imports,
        [
            "gatehouse:executor/log@0.1.0",
            "gatehouse:executor/types@0.1.0"
        ]
    );
    let m = manifest(
        &env,
        "py-tool",
        &dir.join("app.wasm"),
        &[("compute:pure", None)],
    );
    let check = env.run(&["manifest", "check", s(&m)]);
    check.expect(0);
    assert!(
        !check
            .lines()
            .iter()
            .any(|l| l.starts_with("error: ") || l.starts_with("warning: declares")),
        "{check:#?}"
    );
    // It runs (38 core instances: within the pools' 64 per component).
    let (run, v) = run_json(&env, &m, &env.mkdir("ws"), "Supervised", "{}", &[]);
    run.expect(0);
    // (A debug build compiles its 18 MB for about two minutes; the test
    // is skipped where componentize-py is not installed, as on CI.)
    assert_eq!(
        v["run"]["result"],
        json!({"status": "ok", "output": "{\"input_bytes\": 2}"}),
        "{v:#}"
    );
    assert_eq!(
        v["run"]["log"],
        json!([{"level": "info", "message": "2 bytes of input"}]),
        "{v:#}"
    );
}

/// What a language template's build must show: `build_output` on the
/// build's stdout, an `app.wasm` that imports `log` and nothing but the
/// baseline, a manifest `manifest check` accepts, and a run whose output
/// is `output` and whose log names `name`.
fn language_template_built_and_runs(
    env: &Env,
    dir: &Path,
    name: &str,
    build: &std::process::Output,
    output: &str,
) {
    assert!(
        build.status.success(),
        "the build failed:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&build.stdout), "built app.wasm\n");
    let inspect = env.run(&["--json", "inspect", s(&dir.join("app.wasm"))]);
    inspect.expect(0);
    let imports = inspect.json_lines()[0]["imports"].clone();
    let names: Vec<&str> = imports
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"gatehouse:executor/log@0.1.0"), "{names:?}");
    assert!(
        imports
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["needs"] == json!({"kind": "baseline"})),
        "{imports:#}"
    );
    env.run(&["manifest", "check", s(&dir.join("executor.toml"))])
        .expect(0);
    let run = env.run(&["--json", "run", s(&dir.join("executor.toml"))]);
    run.expect(0);
    let v = &run.json_lines()[0];
    assert_eq!(v["run"]["result"]["output"], output, "{v:#}");
    assert_eq!(
        v["run"]["log"][0]["message"],
        format!("{name}: 2 bytes of input")
    );
}

/// `gatehouse new --lang python` (issue 30): the template builds with its
/// own `build.sh` (here with the toolchains `setup.sh` installed, the
/// versions `build.sh` pins), imports nothing but WASI's baseline and
/// `log` (no `wasi:sockets`: `deny-sockets.wasm` is plugged in), passes
/// `manifest check` under `compute:pure` and runs.
#[test]
fn authoring_new_python_builds_passes_check_and_runs() {
    crate::support::guests::build_guests();
    let env = Env::new();
    let dir = env.root().join("work/py-tool");
    let run = env.run(&["new", "py-tool", "--lang", "python", "--dir", s(&dir)]);
    run.expect(0);
    assert_eq!(
        std::fs::read(dir.join("deny-sockets.wasm")).unwrap(),
        gatehouse::authoring::template::DENY_SOCKETS_WASM
    );
    let toolchains = Path::new(ROOT).join("guests/target/toolchains");
    let wac = std::env::var("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cargo"))
        .join("bin/wac");
    let out = Command::new("bash")
        .arg(dir.join("build.sh"))
        .env(
            "COMPONENTIZE_PY",
            toolchains.join("python/bin/componentize-py"),
        )
        .env("WAC", &wac)
        .output()
        .unwrap();
    language_template_built_and_runs(
        &env,
        &dir,
        "py-tool",
        &out,
        r#"{"executor": "py-tool", "input_bytes": 2}"#,
    );
    // `--command` and `--http` are Rust templates.
    env.run(&[
        "new",
        "x",
        "--lang",
        "python",
        "--http",
        "--dir",
        s(&env.root().join("x")),
    ])
    .expect_err(3, &["`--http` is a rust template"]);
}

/// The plug the Python template writes is the one `guests/deny-sockets`
/// builds, byte for byte (copy it to `src/authoring/template/` when the
/// guest changes).
#[test]
fn the_templates_deny_sockets_plug_is_the_guest_built_from_source() {
    let built = std::fs::read(component("deny-sockets")).unwrap();
    assert!(
        built == gatehouse::authoring::template::DENY_SOCKETS_WASM,
        "src/authoring/template/deny_sockets.wasm differs from guests/deny-sockets' build"
    );
}

/// `gatehouse new --lang js` (issue 30): the template's `package-lock.json`
/// is `guests/js`'s (the same pinned packages, here linked from there
/// instead of `npm ci` fetching them again), `node build.mjs` builds it,
/// it imports nothing but WASI's baseline and `log`, passes `manifest
/// check` under `compute:pure` and runs.
#[test]
fn authoring_new_js_builds_passes_check_and_runs() {
    crate::support::guests::build_guests();
    let env = Env::new();
    let dir = env.root().join("work/js-tool");
    env.run(&["new", "js-tool", "--lang", "js", "--dir", s(&dir)])
        .expect(0);
    let lock = std::fs::read_to_string(dir.join("package-lock.json")).unwrap();
    let guests_lock =
        std::fs::read_to_string(Path::new(ROOT).join("guests/js/package-lock.json")).unwrap();
    assert_eq!(
        lock,
        guests_lock.replace("\"gatehouse-js-executor\"", "\"js-tool\"")
    );
    std::os::unix::fs::symlink(
        Path::new(ROOT).join("guests/js/node_modules"),
        dir.join("node_modules"),
    )
    .unwrap();
    let out = Command::new("node")
        .arg("build.mjs")
        .current_dir(&dir)
        .output()
        .unwrap();
    language_template_built_and_runs(
        &env,
        &dir,
        "js-tool",
        &out,
        r#"{"executor":"js-tool","input_bytes":2}"#,
    );
    env.run(&[
        "new",
        "x",
        "--lang",
        "js",
        "--command",
        "--dir",
        s(&env.root().join("x")),
    ])
    .expect_err(3, &["`--command` is a rust template"]);
}
