//! Issue 14: an ordinary WASI program runs under `gatehouse run` as under
//! `wasmtime run` (argv, mounts, exit statuses, stdio, environment), with
//! only the authority its grants give. Every case runs twice: `wasi-prog`
//! built for wasm32-wasip2 (a `wasi:cli/command` component) and for
//! wasm32-wasip1 (a core module the host componentizes with the adapter).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::guests::{guest, manifest};
use crate::support::{s, Env, Run};

const GUESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/guests");

/// The two builds of the program: (executor name, its component file).
fn twins() -> [(&'static str, PathBuf); 2] {
    // The shipped manifests name these files; the tests write their own
    // manifests around them, with the capabilities each case needs.
    let component = |manifest: PathBuf, target: &str| {
        assert!(manifest.exists(), "{}", manifest.display());
        Path::new(GUESTS)
            .join("target")
            .join(target)
            .join("release/wasi_prog.wasm")
    };
    [
        ("wasi-prog", component(guest("wasi-prog"), "wasm32-wasip2")),
        (
            "wasi-prog-p1",
            component(guest("wasi-prog-p1"), "wasm32-wasip1"),
        ),
    ]
}

/// `gatehouse run MANIFEST --workspace WS EXTRA… -- ARGS…` with `stdin`.
fn run_prog(
    env: &Env,
    manifest: &Path,
    ws: &Path,
    extra: &[&str],
    args: &[&str],
    stdin: &[u8],
) -> Run {
    let mut cmd = env.command();
    cmd.args(["run", s(manifest), "--workspace", s(ws)])
        .args(extra)
        .arg("--")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn gatehouse");
    let mut input = child.stdin.take().expect("stdin");
    // Fed from a thread: a program may write before it has read it all.
    let stdin = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let out = child.wait_with_output().expect("wait");
    feeder.join().expect("feeder");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A manifest for `component` named `name` with raw TOML capability blocks.
fn manifest_toml(env: &Env, name: &str, component: &Path, caps: &str) -> PathBuf {
    env.write(
        &format!("manifests/{name}.toml"),
        &format!(
            "name = \"{name}\"\ncomponent = \"{}\"\n{caps}",
            s(component)
        ),
    )
}

#[test]
fn arguments_after_the_double_dash_are_the_programs_argv_and_audited() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    for (name, wasm) in twins() {
        let m = manifest(&env, name, &wasm, &[("compute:pure", None)]);
        let run = run_prog(
            &env,
            &m,
            &ws,
            &[],
            &["args", "a", "b c", "--flag", "ü"],
            b"",
        );
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (0, format!("{name}\nargs\na\nb c\n--flag\nü\n").as_str()),
            "{name}: {run:#?}"
        );
        assert_eq!(
            run.stderr, "",
            "{name}: nothing of gatehouse's own without --verbose"
        );
        let audit = std::fs::read_to_string(env.state_dir().join("audit.jsonl")).unwrap();
        let last: serde_json::Value = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
        assert_eq!(last["executor"], name, "{last:#}");
        assert_eq!(
            last["args"],
            serde_json::json!(["args", "a", "b c", "--flag", "ü"]),
            "{last:#}"
        );
    }
}

#[test]
fn a_bare_wasm_file_runs_with_compute_pure_only() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.write("ws/f.txt", "x");
    for (name, wasm) in twins() {
        let run = env.run(&["run", s(&wasm), "--workspace", s(&ws), "--", "args", "z"]);
        assert_eq!(run.code, 0, "{name}: {run:#?}");
        assert!(run.stdout.ends_with("args\nz\n"), "{name}: {run:#?}");
        // No preopen at all: the workspace's file is not there.
        let run = env.run(&[
            "run",
            s(&wasm),
            "--workspace",
            s(&ws),
            "--",
            "read",
            "f.txt",
        ]);
        assert_eq!(run.code, 2, "{name}: {run:#?}");
        assert_eq!(run.stdout, "", "{name}");
    }
    // A bare file that imports more than compute:pure: refused before it
    // runs, naming the manifest field that would grant the import.
    let fetch = crate::support::guests::component("fetch-socket");
    let run = env.run(&["run", s(&fetch), "--workspace", s(&ws)]);
    run.expect_err(
        2,
        &[
            "gatehouse: IMPORT_NOT_GRANTED: `wasi:sockets/",
            "`[[capabilities]] name = \"network:sites\"`",
        ],
    );
    assert_eq!(run.stderr.lines().count(), 1, "{run:#?}");
}

#[test]
fn mount_names_the_preopen_in_the_guest() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.write("ws/data/f.txt", "in data\n");
    env.write("ws/more/o.txt", "more\n");
    env.write("outside/o.txt", "outside\n");
    let outside = env.root().join("outside");
    for (name, wasm) in twins() {
        for (mount, path) in [("/data", "/data/f.txt"), ("/", "/f.txt")] {
            let m = manifest_toml(
                &env,
                name,
                &wasm,
                &format!(
                    "[[capabilities]]\nname = \"fs:read\"\ntarget = \"data/**\"\nmount = \"{mount}\"\n"
                ),
            );
            let run = run_prog(&env, &m, &ws, &["--level", "Full"], &["read", path], b"");
            assert_eq!(
                (run.code, run.stdout.as_str()),
                (0, "in data\n"),
                "{name} mount {mount}: {run:#?}"
            );
            // The host's path means nothing in the guest.
            let host_path = ws.join("data/f.txt");
            let run = run_prog(
                &env,
                &m,
                &ws,
                &["--level", "Full"],
                &["read", s(&host_path)],
                b"",
            );
            assert_eq!(
                (run.code, run.stdout.as_str()),
                (2, ""),
                "{name} mount {mount}: {run:#?}"
            );
        }
        // Nested mounts: the longest prefix wins.
        let m = manifest_toml(
            &env,
            name,
            &wasm,
            "[[capabilities]]\nname = \"fs:read\"\ntarget = \"data/**\"\nmount = \"/\"\n\
             [[capabilities]]\nname = \"fs:read\"\ntarget = \"more/**\"\nmount = \"/data\"\n",
        );
        let run = run_prog(
            &env,
            &m,
            &ws,
            &["--level", "Full"],
            &["read", "/data/o.txt"],
            b"",
        );
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (0, "more\n"),
            "{name} nested: {run:#?}"
        );
        let run = run_prog(
            &env,
            &m,
            &ws,
            &["--level", "Full"],
            &["read", "/f.txt"],
            b"",
        );
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (0, "in data\n"),
            "{name} nested: {run:#?}"
        );
        // A root outside the workspace without `mount`: a manifest error
        // naming the field; with `--json`, the guest never ran.
        let m = manifest_toml(
            &env,
            name,
            &wasm,
            &format!(
                "[[capabilities]]\nname = \"fs:read\"\ntarget = \"{}/**\"\n",
                s(&outside)
            ),
        );
        let run = run_prog(
            &env,
            &m,
            &ws,
            &["--level", "Full"],
            &["read", "/o.txt"],
            b"",
        );
        run.expect_err(3, &["capabilities[0].mount", "outside the workspace"]);
        assert_eq!(run.stderr.lines().count(), 1, "one line: {run:#?}");
        assert!(run.stderr.starts_with("gatehouse: "), "{run:#?}");
    }
}

#[test]
fn mounts_are_validated_and_must_agree() {
    let env = Env::new();
    let wasm = &twins()[0].1;
    for (caps, field, fragment) in [
        (
            "[[capabilities]]\nname = \"fs:read\"\ntarget = \"data/**\"\nmount = \"data\"\n",
            "capabilities[0].mount",
            "absolute",
        ),
        (
            "[[capabilities]]\nname = \"fs:read\"\ntarget = \"data/**\"\nmount = \"/a/../b\"\n",
            "capabilities[0].mount",
            "`..`",
        ),
        (
            "[[capabilities]]\nname = \"fs:read\"\ntarget = \"data/**\"\nmount = \"/a/\"\n",
            "capabilities[0].mount",
            "end with",
        ),
        (
            "[[capabilities]]\nname = \"env:read\"\ntarget = \"HOME\"\nmount = \"/a\"\n",
            "capabilities[0].mount",
            "only `fs:read` and `fs:write`",
        ),
        (
            "[[capabilities]]\nname = \"fs:read\"\ntarget = \"data/**\"\nmount = \"/a\"\n\
             [[capabilities]]\nname = \"fs:write\"\ntarget = \"data/*.txt\"\nmount = \"/b\"\n",
            "capabilities[1].mount",
            "must agree",
        ),
        (
            "[[capabilities]]\nname = \"fs:read\"\ntarget = \"data/**\"\nmount = \"/a\"\n\
             [[capabilities]]\nname = \"fs:read\"\ntarget = \"other/**\"\nmount = \"/a\"\n",
            "capabilities[1].mount",
            "may not share",
        ),
    ] {
        let m = manifest_toml(&env, "bad-mount", wasm, caps);
        let run = env.run(&["manifest", "check", s(&m)]);
        run.expect_err(3, &[field, fragment]);
        run.expect_lowercase_message();
    }
    // The same directory under one mount is fine, and so are nested ones.
    let m = manifest_toml(
        &env,
        "good-mount",
        wasm,
        "[[capabilities]]\nname = \"fs:read\"\ntarget = \"data/**\"\nmount = \"/d\"\n\
         [[capabilities]]\nname = \"fs:write\"\ntarget = \"data/*.txt\"\nmount = \"/d\"\n\
         [[capabilities]]\nname = \"fs:read\"\ntarget = \"data/in/**\"\nmount = \"/d/in\"\n",
    );
    env.run(&["manifest", "check", s(&m)]).expect(0);
}

#[test]
fn mount_is_part_of_the_definition_hash() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.mkdir("ws/data");
    let wasm = &twins()[0].1;
    let mut hashes = Vec::new();
    for mount in ["/data", "/other"] {
        let m = manifest_toml(
            &env,
            "hashed",
            wasm,
            &format!(
                "[[capabilities]]\nname = \"fs:read\"\ntarget = \"data/**\"\nmount = \"{mount}\"\n"
            ),
        );
        let out = env.root().join(format!("policy{}.json", hashes.len()));
        env.run(&[
            "snapshot",
            "prepare",
            "--out",
            s(&out),
            "--workspace",
            s(&ws),
            "--executor",
            s(&m),
        ])
        .expect(0);
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(
            v["policy"]["executors"]["hashed"]["capabilities"][0]["mount"], mount,
            "{v:#}"
        );
        hashes.push(v["definitionHash"].as_str().unwrap().to_string());
    }
    assert_ne!(hashes[0], hashes[1]);
}

#[test]
fn the_guests_exit_status_is_gatehouses() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    for (name, wasm) in twins() {
        let m = manifest(&env, name, &wasm, &[("compute:pure", None)]);
        for code in [0, 1, 33] {
            let run = run_prog(&env, &m, &ws, &[], &["exit", &code.to_string()], b"");
            // Output is kept on failure: the program's own lines, as written.
            assert_eq!(
                (run.code, run.stdout.as_str(), run.stderr.as_str()),
                (code, "out\n", "err\n"),
                "{name} exit {code}: {run:#?}"
            );
        }
        // A trap: 134, as `wasmtime run` on Unix; the output before it kept.
        let run = run_prog(&env, &m, &ws, &[], &["trap"], b"");
        assert_eq!(run.code, 134, "{name}: {run:#?}");
        assert_eq!(run.stdout, "before trap\n", "{name}: {run:#?}");
        assert!(run.stderr.starts_with("before trap\n"), "{name}: {run:#?}");
    }
}

#[test]
fn json_tells_the_guests_status_from_gatehouses() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    for (name, wasm) in twins() {
        let m = manifest(&env, name, &wasm, &[("compute:pure", None)]);
        let run = run_prog(&env, &m, &ws, &["--json"], &["exit", "2"], b"");
        assert_eq!(run.code, 2, "{name}: {run:#?}");
        assert_eq!(run.stdout.lines().count(), 1, "one JSON line: {run:#?}");
        let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(v["ran"], true, "{v:#}");
        assert_eq!(v["exit_code"], 2, "{v:#}");
        assert_eq!(v["guest_exit_code"], 2, "{v:#}");
        assert_eq!(v["run"]["stdout"], "out\n", "{v:#}");
        assert_eq!(v["run"]["stderr"], "err\n", "{v:#}");
        assert!(
            v["code"].is_null(),
            "the guest's own 2 is no deny code: {v:#}"
        );

        let run = run_prog(&env, &m, &ws, &["--json"], &["trap"], b"");
        assert_eq!(run.code, 134, "{name}: {run:#?}");
        let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(v["ran"], true, "{v:#}");
        assert_eq!(v["exit_code"], 134, "{v:#}");
        assert_eq!(v["run"]["stdout"], "before trap\n", "{v:#}");

        // Denied before guest code: gatehouse's 2, and the guest never ran.
        let run = run_prog(
            &env,
            &m,
            &ws,
            &["--json", "--actor", "nobody"],
            &["exit", "0"],
            b"",
        );
        assert_eq!(run.code, 2, "{name}: {run:#?}");
        let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(v["ran"], false, "{v:#}");
        assert_eq!(v["code"], "UNKNOWN_ACTOR", "{v:#}");
        assert!(v["guest_exit_code"].is_null(), "{v:#}");
    }
}

#[test]
fn stdin_is_streamed_without_input_and_is_the_input_with_it() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let big: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    for (name, wasm) in twins() {
        let m = manifest(&env, name, &wasm, &[("compute:pure", None)]);
        let run = run_prog(&env, &m, &ws, &[], &["cat"], &big);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        assert_eq!(run.stdout.as_bytes(), &big[..], "{name}: streamed stdin");
        let run = run_prog(&env, &m, &ws, &["--input", "given\n"], &["cat"], b"ignored");
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (0, "given\n"),
            "{name}: {run:#?}"
        );
    }
}

#[test]
fn in_a_pipeline_stdout_carries_only_the_programs_output() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    for (name, wasm) in twins() {
        let m = manifest(&env, name, &wasm, &[("compute:pure", None)]);
        let line = format!(
            "'{}' run '{}' --workspace '{}' --verbose -- args x y | tr a-z A-Z",
            env!("CARGO_BIN_EXE_gatehouse"),
            s(&m),
            s(&ws)
        );
        let cmd = env.command();
        let out = Command::new("sh")
            .args(["-c", &line])
            .envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
            .current_dir(env.root().join("cwd"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{}\nARGS\nX\nY\n", name.to_uppercase()),
            "{name}"
        );
        // What gatehouse says itself (`--verbose`) went to stderr.
        assert!(!out.stderr.is_empty(), "{name}: --verbose says something");
    }
}

#[test]
fn granted_variables_with_quotes_and_newlines_reach_both_worlds() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    for (name, wasm) in twins() {
        let m = manifest(
            &env,
            name,
            &wasm,
            &[
                ("env:read", Some("GH_QUOTED")),
                ("env:read", Some("GH_LINES")),
                ("env:read", Some("GH_EMPTY")),
            ],
        );
        let mut cmd = env.command();
        cmd.args([
            "run",
            s(&m),
            "--workspace",
            s(&ws),
            "--level",
            "Full",
            "--",
            "env",
        ])
        .env("GH_QUOTED", "say \"hi\" and 'bye'")
        .env("GH_LINES", "line1\nline2\n\"=x\"")
        .env("GH_EMPTY", "")
        .env("GH_SECRET", "not granted")
        .stdin(Stdio::null());
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{name}: {out:?}");
        let mut lines: Vec<&str> = stdout.lines().collect();
        lines.sort();
        assert_eq!(
            lines,
            [
                "GH_EMPTY=",
                "GH_LINES=line1\\nline2\\n\\\"=x\\\"",
                "GH_QUOTED=say \\\"hi\\\" and \\'bye\\'",
            ],
            "{name}: only the granted variables, exact: {out:?}"
        );
    }
}

#[test]
fn a_glob_refusal_is_the_same_through_preview_1_as_through_preview_2() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.write("ws/data/ok.txt", "fine\n");
    env.write("ws/data/secret.md", "hidden\n");
    let mut refusals = Vec::new();
    for (name, wasm) in twins() {
        let m = manifest(&env, name, &wasm, &[("fs:read", Some("data/*.txt"))]);
        let run = run_prog(
            &env,
            &m,
            &ws,
            &["--level", "Full"],
            &["read", "data/ok.txt"],
            b"",
        );
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (0, "fine\n"),
            "{name}: {run:#?}"
        );
        let run = run_prog(
            &env,
            &m,
            &ws,
            &["--level", "Full", "--json"],
            &["read", "data/secret.md"],
            b"",
        );
        let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(v["exit_code"], 2, "{name}: {v:#}");
        assert_eq!(v["run"]["stdout"], "", "{name}: {v:#}");
        refusals.push(v["run"]["stderr"].as_str().unwrap().to_string());
    }
    assert!(
        refusals[0].starts_with("read: "),
        "the program saw an error: {refusals:?}"
    );
    assert_eq!(refusals[0], refusals[1], "p2 then p1");
}

/// The C program built with wasi-libc (guests/c, by setup.sh) calls every
/// preview-1 `fd_*` / `path_*` function once inside a granted root and
/// checks each result exactly.
#[test]
fn a_wasi_libc_program_passes_every_filesystem_check() {
    let env = Env::new();
    guest("wasi-prog"); // runs setup.sh, which builds the C guest when it can
    let wasm = Path::new(GUESTS).join("c/target/wasi_fs_all.wasm");
    if !wasm.exists() {
        eprintln!(
            "SKIPPED: no wasi-libc toolchain installed (pip `ziglang`, or apt `clang lld wasi-libc`): {} not built",
            wasm.display()
        );
        return;
    }
    let ws = env.mkdir("ws");
    env.mkdir("ws/work");
    for (mount, dir) in [(None, "work"), (Some("/w"), "/w")] {
        let caps = match mount {
            None => "[[capabilities]]\nname = \"fs:write\"\ntarget = \"work/**\"\n".to_string(),
            Some(m) => format!(
                "[[capabilities]]\nname = \"fs:write\"\ntarget = \"work/**\"\nmount = \"{m}\"\n"
            ),
        };
        let m = manifest_toml(&env, "wasi-fs-all", &wasm, &caps);
        let run = run_prog(&env, &m, &ws, &["--level", "Full"], &[dir], b"");
        let failed: Vec<&str> = run
            .stdout
            .lines()
            .filter(|l| l.starts_with("FAIL"))
            .collect();
        assert!(failed.is_empty(), "{dir}: {failed:#?}\n{run:#?}");
        let last = run.stdout.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("wasi_fs_all: ") && last.ends_with(" ok, 0 failed"),
            "{dir}: {run:#?}"
        );
        let oks: usize = last["wasi_fs_all: ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(oks >= 80, "{dir}: only {oks} checks: {run:#?}");
        assert_eq!(run.code, 0, "{dir}: {run:#?}");
        // It cleaned up after itself, and nothing outside `work` changed.
        assert_eq!(std::fs::read_dir(ws.join("work")).unwrap().count(), 0);
    }
}

#[test]
fn ctrl_c_stops_the_program_with_130_and_keeps_what_it_wrote() {
    use std::io::{BufRead, BufReader};
    let env = Env::new();
    let ws = env.mkdir("ws");
    for (name, wasm) in twins() {
        let m = manifest(&env, name, &wasm, &[("compute:pure", None)]);
        let mut child = env
            .command()
            .args(["run", s(&m), "--workspace", s(&ws), "--", "cat"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"partial\n").unwrap();
        stdin.flush().unwrap();
        // `cat` copies what arrives, then waits for more, which never
        // comes: it is blocked in a host read when the interrupt arrives.
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        assert_eq!(first, "partial\n", "{name}: streamed through as written");
        std::thread::sleep(std::time::Duration::from_millis(200));
        // SAFETY: sends SIGINT to the child this test spawned and still owns.
        let sent = unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        assert_eq!(sent, 0);
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
        let status = child.wait().unwrap();
        drop(stdin);
        assert_eq!(status.code(), Some(130), "{name}: {rest:?}");
        assert_eq!(rest, "", "{name}: nothing after the interrupt");
    }
}

#[test]
fn the_prompt_shows_the_host_directory_and_its_mount() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.write("ws/data/f.txt", "in data\n");
    let wasm = &twins()[0].1;
    let m = manifest_toml(
        &env,
        "wasi-prog",
        wasm,
        "[[capabilities]]\nname = \"fs:read\"\ntarget = \"data/**\"\nmount = \"/data\"\n",
    );
    let wsc = s(&ws).to_string();
    // Refused at the prompt: nothing ran.
    let run = env.run_on_terminal(
        &[
            "run",
            s(&m),
            "--workspace",
            &wsc,
            "--",
            "read",
            "/data/f.txt",
        ],
        &[],
        "d\n",
    );
    assert_eq!(run.code, 2, "{run:#?}");
    assert!(
        run.stdout.contains(&format!(
            "executor `wasi-prog` asks for `fs:read` on `{wsc}/data/**`"
        )),
        "{run:#?}"
    );
    assert!(
        run.stdout
            .contains("in the guest its directory is mounted at `/data`"),
        "{run:#?}"
    );
    assert!(run.stdout.contains("APPROVAL_REFUSED"), "{run:#?}");
    assert!(!run.stdout.contains("in data"), "{run:#?}");
    // Allowed once: the program reads it under its mount.
    let run = env.run_on_terminal(
        &[
            "run",
            s(&m),
            "--workspace",
            &wsc,
            "--",
            "read",
            "/data/f.txt",
        ],
        &[],
        "o\n",
    );
    assert_eq!(run.code, 0, "{run:#?}");
    assert!(run.stdout.contains("in data"), "{run:#?}");
}
