//! Issue 16: `gatehouse conformance`, on this host: every attack held,
//! every must-succeed program correct; and the same guests run through a
//! deliberately weak host built here, outside gatehouse (plain wasmtime +
//! wasmtime-wasi, `/` preopened read-write, sockets and the environment
//! inherited), where the relevant cases turn `broken`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use gatehouse::conformance::{self, classify, Case, Observed, Verdict, World};

use crate::support::guests::component;
use crate::support::{s, Env};

/// The guests' build directory (built by setup.sh on first use).
fn guests_dir() -> PathBuf {
    let attack = component("cf-attack");
    attack
        .ancestors()
        .nth(3)
        .expect("guests/target")
        .to_path_buf()
}

/// `gatehouse --json conformance ARGS` in a sealed environment: exit code
/// and the report.
fn conformance_json(env: &Env, args: &[&str]) -> (i32, serde_json::Value) {
    let mut all = vec!["--json", "conformance"];
    all.extend_from_slice(args);
    let run = env.run(&all);
    let v = serde_json::from_str(run.stdout.trim()).unwrap_or(serde_json::Value::Null);
    (run.code, v)
}

#[test]
fn conformance_every_case_holds_or_is_correct_on_this_host() {
    let env = Env::new();
    let dir = guests_dir();
    let (code, v) = conformance_json(&env, &["--guests", s(&dir)]);
    assert_eq!(code, 0, "{v:#}");
    let records = v["records"].as_array().expect("records");
    let by_name: BTreeMap<&str, &serde_json::Value> = records
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r))
        .collect();
    // Every case of the table ran, by name, and ended in its one expected
    // outcome (the runner compares exactly; the record says which).
    let cases = conformance::cases();
    assert!(cases.len() >= 80, "only {} cases", cases.len());
    assert_eq!(by_name.len(), cases.len(), "case names are not unique");
    for case in &cases {
        let r = by_name
            .get(case.name.as_str())
            .unwrap_or_else(|| panic!("no record of {}", case.name));
        let want = match case.half {
            conformance::Half::Holds => "held",
            conformance::Half::Correct => "correct",
        };
        assert_eq!(r["verdict"], want, "{}: {r:#}", case.name);
        assert_eq!(r["expect"], serde_json::to_value(&case.expect).unwrap());
    }
    // Counts per half and per world.
    let n = |half: &str, key: &str| v[half][key].as_u64().unwrap();
    assert_eq!(n("counts", "cases") as usize, cases.len());
    assert_eq!(
        n("counts", "broken") + n("counts", "incorrect") + n("counts", "error"),
        0
    );
    assert_eq!(n("holds", "held"), n("holds", "cases"));
    assert_eq!(n("correct", "correct"), n("correct", "cases"));
    assert!(n("holds", "cases") >= 80, "{}", v["holds"]);
    assert!(n("p1", "cases") >= 50 && n("p2", "cases") >= 70, "{v:#}");
    assert_eq!(n("p1", "cases") + n("p2", "cases"), n("counts", "cases"));
    // The isolation report is on top.
    assert_eq!(v["isolation"]["version"], 1);
    // What some of them saw, exactly.
    for (name, observed) in [
        ("fs.dotdot.p2", "exit 0, stdout \"held EPERM\""),
        ("fs.dotdot.p1", "exit 0, stdout \"held EPERM\""),
        ("fs.absolute-path.p2", "exit 0, stdout \"held ENOENT\""),
        (
            "fs.symlink-relative-out.p1",
            "exit 0, stdout \"held EPERM\"",
        ),
        ("fs.symlink-loop.p2", "exit 0, stdout \"held ELOOP\""),
        (
            "fs.dangling-symlink-nofollow.p2",
            "exit 0, stdout \"held ELOOP\"",
        ),
        ("ro.open-truncate.p1", "exit 0, stdout \"held EPERM\""),
        ("ro.link-out-of.p2", "exit 0, stdout \"held EPERM\""),
        ("state.read-host-state.p2", "exit 0, stdout \"held EACCES\""),
        (
            "leak.host-environment.p1",
            "exit 0, stdout \"held no environment variables\"",
        ),
        ("exhaust.tight-loop.p1", "stopped LIMIT_DEADLINE"),
        ("exhaust.memory-grow.p2", "stopped LIMIT_MEMORY"),
        ("exhaust.unbounded-stdout.p2", "stopped LIMIT_OUTPUT"),
        ("exhaust.many-descriptors.p2", "stopped LIMIT_RESOURCES"),
        ("exhaust.table-grow.p1", "stopped LIMIT_TABLE"),
        ("exhaust.table-grow.p2", "stopped LIMIT_TABLE"),
        ("exhaust.huge-list-to-host.p1", "stopped LIMIT_OUTPUT"),
        (
            "net.tcp-neighbour-port.p2",
            "exit 0, stdout \"held EACCES\"",
        ),
        (
            "leak.previous-instance-memory.p2",
            "exit 0, stdout \"held no residue\"",
        ),
        ("ok.exit-code.p1", "exit 7, stdout \"exit 7\""),
        ("ok.filesystem.p2", "exit 0, stdout \"ok fs-all 22 steps\""),
        (
            "ok.wasi-filesystem-every-function.p2",
            "exit 0, stdout \"ok fs-p2 30 functions\"",
        ),
    ] {
        assert_eq!(by_name[name]["observed"], observed, "{name}");
    }
    for (name, prefix) in [
        ("imports.memory.p2", "refused IMPORT_NOT_GRANTED: "),
        ("imports.sockets-std.p2", "refused IMPORT_NOT_GRANTED: "),
        ("malformed.digest-mismatch.p2", "refused DIGEST_MISMATCH: "),
        ("malformed.truncated-component.p2", "invalid: "),
        ("exhaust.deep-recursion.p2", "trapped: "),
        ("malformed.precompiled-artifact.p2", "invalid: "),
        (
            "imports.mismatched-version.p2",
            "refused IMPORT_NOT_GRANTED: the component's imports do not match what gatehouse provides: component imports instance `wasi:random/random@0.9.0`",
        ),
        ("exhaust.hostcall-fuel.p2", "stopped LIMIT_HOSTCALLS"),
        // The list is refused whole (wasmtime-wasi's cap of 4 096 bytes a
        // call), not written in part.
        (
            "exhaust.huge-list-to-host.p2",
            "trapped: the guest trapped: Buffer too large for blocking-write-and-flush (expected at most 4096)",
        ),
        (
            "malformed.invalid-utf8-across-the-boundary.p2",
            "trapped: the guest trapped: invalid utf-8 sequence of 1 bytes from index 4",
        ),
        (
            "exec.program-not-granted.p2",
            "exit 1, stdout \"error {\\\"denied\\\":{\\\"code\\\":\\\"TOOL_NOT_GRANTED\\\"",
        ),
    ] {
        let o = by_name[name]["observed"].as_str().unwrap();
        assert!(o.starts_with(prefix), "{name}: {o}");
    }
    // A command in the OS sandbox is refused by the kernel (Landlock),
    // unless the report says the layer is missing here.
    for name in [
        "exec.read-outside-roots.p2",
        "exec.write-outside-write-roots.p2",
    ] {
        let o = by_name[name]["observed"].as_str().unwrap();
        assert!(
            o.contains("\\\"status\\\":1,") && o.contains("Permission denied"),
            "{name}: {o}"
        );
    }
    // What no command needs, refused by the OS sandbox (seccomp): a new
    // namespace, a UNIX socket (not `ENOENT`: none is there), `ptrace`
    // (the native probe, built beside the binary here).
    for (name, status, stream, line) in [
        (
            "exec.namespace-unshare.p2",
            1,
            "stderr",
            "unshare: unshare failed: Operation not permitted\\\\n",
        ),
        (
            "exec.unix-socket.p2",
            1,
            "stderr",
            "/outside/log.sock: Operation not permitted\\\\n",
        ),
        (
            "exec.ptrace.p2",
            12,
            "stdout",
            "ptrace: Operation not permitted (os error 1)\\\\n",
        ),
    ] {
        let o = by_name[name]["observed"].as_str().unwrap();
        assert!(
            o.contains(&format!("\\\"status\\\":{status},"))
                && o.contains(&format!("\\\"{stream}\\\":\\\""))
                && o.contains(line),
            "{name}: {o}"
        );
    }
    // Nothing of the operator's state was written: the suite ran in a
    // temporary directory.
    assert!(!env.state_dir().exists(), "the state directory was written");
}

#[test]
fn conformance_table_and_only_and_usage_errors() {
    let env = Env::new();
    let dir = guests_dir();
    let run = env.run(&[
        "conformance",
        "--guests",
        s(&dir),
        "--only",
        "leak.host-argv",
    ]);
    run.expect(0);
    let lines = run.lines();
    assert!(lines[0].starts_with("isolation "), "{run:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("held") && l.contains("leak.host-argv.p1")),
        "{run:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("total    2 cases: 2 held")),
        "{run:#?}"
    );
    assert_eq!(
        lines.last().unwrap().split(" in ").next(),
        Some("result   pass")
    );
    // Usage errors: exit 3.
    env.run(&["conformance", "--guests", s(&dir), "--only", "no-such-case"])
        .expect_err(3, &["no case matches `no-such-case`"]);
    env.run(&["conformance", "--guests", "/nonexistent-guests"])
        .expect_err(3, &["is not a directory"]);
    let empty = env.mkdir("empty");
    env.run(&["conformance", "--guests", s(&empty)])
        .expect_err(3, &["no conformance guests in", "setup.sh"]);
}

#[test]
fn conformance_guests_are_embedded_in_the_binary() {
    let env = Env::new();
    guests_dir();
    let run = env.run(&["--json", "conformance", "--only", "ok.args"]);
    if run.code == 3 && run.stderr.contains("built without its conformance guests") {
        eprintln!("SKIPPED: gatehouse was built before setup.sh built the guests");
        return;
    }
    run.expect(0);
    let v: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(v["guests"], "embedded");
    assert_eq!(v["counts"]["correct"], 2, "{v:#}");
}

#[test]
fn conformance_http_cases_hold_and_their_control_is_correct() {
    // wasi:http through `fetch` under `http://127.0.0.1:PORT/ok/**` with
    // `methods = ["GET"]`, against the runner's own plain HTTP servers:
    // the control gets the granted server's answer (its request line as
    // the body), every other request is refused before it is sent (the
    // runner judges a case broken when either server received anything).
    let env = Env::new();
    let dir = guests_dir();
    let (code, v) = conformance_json(&env, &["--guests", s(&dir), "--only", "http."]);
    assert_eq!(code, 0, "{v:#}");
    let got: BTreeMap<&str, (&str, &str)> = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap(),
                (
                    r["verdict"].as_str().unwrap(),
                    r["observed"].as_str().unwrap(),
                ),
            )
        })
        .collect();
    let denied = r#"exit 0, stdout "{\"error\":\"HttpRequestDenied\"}""#;
    let mut want: BTreeMap<&str, (&str, &str)> = [
        "http.other-path.p2",
        "http.sibling-prefix.p2",
        "http.other-port.p2",
        "http.method-not-granted.p2",
        "http.dotdot-segment.p2",
        "http.encoded-dotdot-segment.p2",
        "http.userinfo.p2",
        "http.scheme-not-granted.p2",
        "http.name-for-granted-address.p2",
    ]
    .into_iter()
    .map(|n| (n, ("held", denied)))
    .collect();
    want.insert(
        "http.granted-get.p2",
        (
            "correct",
            r#"exit 0, stdout "{\"body\":\"GET /ok/item HTTP/1.1\",\"headers\":{\"content-length\":\"21\"},\"status\":200}""#,
        ),
    );
    // `--only` matches by substring: the import cases of both HTTP
    // clients are in too, refused before they start.
    for name in ["imports.wasi-http.p2", "imports.sockets-http.p2"] {
        let (verdict, observed) = got[name];
        assert_eq!(verdict, "held", "{name}: {observed}");
        assert!(
            observed.starts_with("refused IMPORT_NOT_GRANTED: "),
            "{name}: {observed}"
        );
        want.insert(name, (verdict, observed));
    }
    assert_eq!(got, want, "{v:#}");
    assert_eq!(v["counts"]["held"], 11, "{v:#}");
    assert_eq!(v["counts"]["correct"], 1, "{v:#}");
    // Each case's manifest as the report gives it: the one grant, GET only.
    let table = conformance::cases();
    let granted = table.iter().find(|c| c.name == "http.userinfo.p2").unwrap();
    assert_eq!(
        serde_json::to_value(&granted.caps).unwrap(),
        serde_json::json!([{
            "name": "network:sites",
            "target": "http://127.0.0.1:{http}/ok/**",
            "methods": ["GET"],
        }])
    );
}

/// A deliberately weak host, built here with plain wasmtime and
/// wasmtime-wasi (no gatehouse): the case's workspace preopened
/// read-write as `.` whatever the grant says, the environment, the
/// network and name lookups inherited, no limits; with `root`, the host's
/// `/` preopened too (read-only: this test must not write outside its
/// temporary directory, and a preopen of `/` makes wasi-libc resolve
/// relative paths there, so only the cases that name absolute paths run
/// in that one).
mod weak {
    use wasmtime::component::{Component, Linker, ResourceTable};
    use wasmtime::{Engine, Store};
    use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};
    use wasmtime_wasi::{FsPerms, I32Exit, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

    use gatehouse::conformance::Observed;

    struct State {
        ctx: WasiCtx,
        table: ResourceTable,
    }

    impl WasiView for State {
        fn ctx(&mut self) -> WasiCtxView<'_> {
            WasiCtxView {
                ctx: &mut self.ctx,
                table: &mut self.table,
            }
        }
    }

    /// One engine for every case, each guest compiled once.
    pub fn engine() -> Engine {
        Engine::default()
    }

    pub fn compile(engine: &Engine, bytes: &[u8]) -> Result<Component, String> {
        Component::from_binary(engine, bytes).map_err(|e| e.to_string())
    }

    pub fn run(
        engine: &Engine,
        root: bool,
        component: &Result<Component, String>,
        ws: &std::path::Path,
        args: &[String],
        input: &str,
    ) -> Observed {
        let engine = engine.clone();
        let mut linker: Linker<State> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).unwrap();
        let stdout = MemoryOutputPipe::new(1 << 20);
        let stderr = MemoryOutputPipe::new(1 << 20);
        let mut argv = vec!["weak".to_string()];
        argv.extend_from_slice(args);
        let mut b = WasiCtxBuilder::new();
        b.args(&argv)
            .inherit_env()
            .inherit_network()
            .allow_ip_name_lookup(true)
            .allow_tcp(true)
            .allow_udp(true)
            .stdin(MemoryInputPipe::new(input.to_string()))
            .stdout(stdout.clone())
            .stderr(stderr.clone());
        b.preopened_dir(ws, ".", FsPerms::ReadWrite).unwrap();
        if root {
            b.preopened_dir("/", "/", FsPerms::ReadOnly).unwrap();
        }
        let mut store = Store::new(
            &engine,
            State {
                ctx: b.build(),
                table: ResourceTable::new(),
            },
        );
        let component = match component {
            Ok(c) => c,
            Err(e) => return Observed::Invalid { message: e.clone() },
        };
        let command = match wasmtime_wasi::p2::bindings::sync::Command::instantiate(
            &mut store, component, &linker,
        ) {
            Ok(c) => c,
            Err(e) => {
                return Observed::Error {
                    message: format!("{e:#}"),
                }
            }
        };
        let result = command.wasi_cli_run().call_run(&mut store);
        let out = String::from_utf8_lossy(&stdout.contents()).into_owned();
        let err = String::from_utf8_lossy(&stderr.contents()).into_owned();
        match result {
            Ok(Ok(())) => Observed::Ran {
                exit: 0,
                stdout: out,
                stderr: err,
            },
            Ok(Err(())) => Observed::Ran {
                exit: 1,
                stdout: out,
                stderr: err,
            },
            Err(e) => match e.downcast_ref::<I32Exit>() {
                Some(I32Exit(n)) => Observed::Ran {
                    exit: *n,
                    stdout: out,
                    stderr: err,
                },
                None => Observed::Stopped {
                    code: None,
                    message: format!("{e:#}"),
                    stdout: out,
                },
            },
        }
    }
}

/// A preview 1 module as a component, with wasmtime's own adapter.
fn componentize(module: &[u8]) -> Vec<u8> {
    wit_component::ComponentEncoder::default()
        .module(module)
        .unwrap()
        .adapter(
            "wasi_snapshot_preview1",
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER,
        )
        .unwrap()
        .validate(true)
        .encode()
        .unwrap()
}

/// Whether the weak host can run `case` at all: no limits there, so no
/// exhaustion (it would run forever); no gatehouse interfaces; nothing
/// that depends on the network beyond loopback.
fn weak_can_run(case: &Case) -> bool {
    let name = case.name.as_str();
    (case.guest == "cf_attack.wasm" || case.guest == "cf_net.wasm")
        && case.special.is_none()
        && !name.starts_with("exhaust.")
        && !name.starts_with("ok.")
        && ![
            "net.tcp-ipv6-loopback.p2",
            "net.tcp-cloud-metadata.p2",
            "net.tcp-ip-literal.p2",
        ]
        .contains(&name)
}

#[test]
fn conformance_a_weak_host_turns_the_relevant_cases_broken() {
    let env = Env::new();
    let dir = guests_dir();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let neighbour = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let neighbour_port = neighbour.local_addr().unwrap().port().to_string();
    let mut verdicts: BTreeMap<String, (Verdict, String)> = BTreeMap::new();
    let engine = weak::engine();
    let mut components = BTreeMap::new();
    for (i, case) in conformance::cases()
        .iter()
        .filter(|c| weak_can_run(c))
        .enumerate()
    {
        let bytes = components
            .entry((case.world.as_str(), case.guest))
            .or_insert_with(|| {
                let path = dir
                    .join(case.world.target())
                    .join("release")
                    .join(case.guest);
                let raw = std::fs::read(&path).unwrap();
                let bytes = match case.world {
                    World::P1 => componentize(&raw),
                    World::P2 => raw,
                };
                weak::compile(&engine, &bytes)
            });
        let (ws, outside) = conformance::set_up(&env.root().join(format!("weak/{i}"))).unwrap();
        let fill = |a: &str| {
            a.replace("{outside}", s(&outside))
                .replace("{port}", &port)
                .replace("{neighbour}", &neighbour_port)
        };
        let args: Vec<String> = case.args.iter().map(|a| fill(a)).collect();
        let root = case
            .args
            .iter()
            .any(|a| a.starts_with('/') || a.starts_with("{outside}"))
            || case.args.first().is_some_and(|a| a == "list-root");
        if root && case.caps.iter().any(|c| c.name == "fs:write") {
            // It names a workspace path too, which would resolve in `/`.
            continue;
        }
        let observed = weak::run(&engine, root, bytes, &ws, &args, &case.input);
        verdicts.insert(case.name.clone(), classify(case, &observed));
    }
    let broken: Vec<&str> = verdicts
        .iter()
        .filter(|(_, (v, _))| *v == Verdict::Broken)
        .map(|(n, _)| n.as_str())
        .collect();
    let mut expected = vec![
        "fs.absolute-path",
        "fs.host-file",
        "fs.root-listing",
        "ro.write",
        "ro.open-truncate",
        "ro.append",
        "ro.create",
        "ro.mkdir",
        "ro.unlink",
        "ro.rmdir",
        "ro.rename-within",
        "ro.rename-out-of",
        "ro.rename-into",
        "ro.link-into",
        "ro.link-out-of",
        "ro.set-times",
        "ro.symlink-create",
        "glob.write-outside-the-glob",
        "glob.rename-out-of-the-glob",
        "leak.host-environment",
        "leak.real-clock-without-time-read",
    ]
    .into_iter()
    .flat_map(|n| [format!("{n}.p1"), format!("{n}.p2")])
    .collect::<Vec<String>>();
    expected.extend(
        [
            "imports.sockets-std.p2",
            "net.tcp-neighbour-port.p2",
            "net.udp-loopback.p2",
            "net.name-lookup.p2",
        ]
        .map(String::from),
    );
    expected.sort();
    assert_eq!(broken, expected, "{verdicts:#?}");
    // What a broken case reports is what its guest achieved.
    let (_, what) = &verdicts["fs.host-file.p2"];
    assert!(what.starts_with("BROKEN read `/etc/hostname`"), "{what}");
    // Linked without a grant, the socket connects.
    let (_, what) = &verdicts["imports.sockets-std.p2"];
    assert!(
        what.starts_with("BROKEN connected to `127.0.0.1:"),
        "{what}"
    );
    // The rest still hold there (cap-std refuses `..` beneath a preopen in
    // any host), or differ from gatehouse's exact answer (an error, never
    // a pass that was not earned).
    for (name, (v, why)) in &verdicts {
        assert!(
            matches!(v, Verdict::Broken | Verdict::Held | Verdict::Error),
            "{name}: {v:?} {why}"
        );
    }
    assert_eq!(verdicts["fs.dotdot.p2"].0, Verdict::Held);
    assert_eq!(verdicts["fs.symlink-relative-out.p1"].0, Verdict::Held);
    drop((listener, neighbour));
}

/// Every expected outcome in the table is one the classifier can reach,
/// and a `BROKEN` line always wins over an unexpected outcome.
#[test]
fn conformance_classify_judges_by_the_exact_outcome() {
    let case = conformance::cases()
        .into_iter()
        .find(|c| c.name == "fs.dotdot.p2")
        .unwrap();
    let ran = |stdout: &str| Observed::Ran {
        exit: 0,
        stdout: stdout.to_string(),
        stderr: String::new(),
    };
    assert_eq!(classify(&case, &ran("held EPERM\n")).0, Verdict::Held);
    assert_eq!(classify(&case, &ran("held EACCES\n")).0, Verdict::Error);
    let (v, why) = classify(&case, &ran("BROKEN read `x`\n"));
    assert_eq!((v, why.as_str()), (Verdict::Broken, "BROKEN read `x`"));
    let correct = conformance::cases()
        .into_iter()
        .find(|c| c.name == "ok.args.p1")
        .unwrap();
    assert_eq!(
        classify(&correct, &ran("ok args a b c -d\n")).0,
        Verdict::Correct
    );
    assert_eq!(
        classify(&correct, &ran("ok args a\n")).0,
        Verdict::Incorrect
    );
}

#[test]
fn conformance_skips_a_case_whose_layer_the_report_says_is_missing() {
    // Landlock hidden for real (a seccomp filter on the child): the
    // command cases that need it are skipped with the report's reason,
    // the gate's refusals still hold, and a skip is not a failure.
    let env = Env::new();
    let dir = guests_dir();
    let mut cmd = env.command();
    cmd.args([
        "--json",
        "conformance",
        "--guests",
        s(&dir),
        "--only",
        "exec.",
    ]);
    crate::support::seccomp::seccomp_errno(
        &mut cmd,
        libc::SYS_landlock_create_ruleset,
        libc::ENOSYS,
    );
    let out = cmd.output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    let verdicts: BTreeMap<&str, (&str, &str)> = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap(),
                (
                    r["verdict"].as_str().unwrap(),
                    r["observed"].as_str().unwrap(),
                ),
            )
        })
        .collect();
    for name in [
        "exec.read-outside-roots.p2",
        "exec.write-outside-write-roots.p2",
    ] {
        let (verdict, why) = verdicts[name];
        assert_eq!(verdict, "skipped", "{name}: {why}");
        assert!(
            why.starts_with("the isolation report says `landlock` is unavailable: "),
            "{name}: {why}"
        );
    }
    assert_eq!(verdicts["exec.program-not-granted.p2"].0, "held");
    assert_eq!(verdicts["exec.shell-not-granted.p2"].0, "held");
    assert_eq!(v["counts"]["skipped"], 2, "{v:#}");
}

#[test]
fn conformance_under_refuse_all_skips_what_a_degraded_host_refuses() {
    // The operator's `[isolation]` setting is the suite's: with
    // `refuse-all`, a degraded host (running as root, say) refuses every
    // turn, and the cases say so as skipped; a full host runs them.
    let env = Env::new();
    env.write(
        "config/gatehouse/gatehouse.toml",
        "[actors.main]\nskills = [\"*\"]\n[isolation]\non_degraded = \"refuse-all\"\n",
    );
    let dir = guests_dir();
    let (code, v) = conformance_json(&env, &["--guests", s(&dir), "--only", "leak.host-argv"]);
    assert_eq!(code, 0, "{v:#}");
    let degraded = v["isolation"]["overall"] == "degraded";
    for r in v["records"].as_array().unwrap() {
        if degraded {
            assert_eq!(r["verdict"], "skipped", "{r:#}");
            let why = r["observed"].as_str().unwrap();
            assert!(
                why.starts_with(
                    "`[isolation] on_degraded = \"refuse-all\"` refused it on this degraded host: "
                ),
                "{why}"
            );
        } else {
            assert_eq!(r["verdict"], "held", "{r:#}");
        }
    }
}

#[test]
fn conformance_ptrace_is_skipped_where_the_native_probe_is_not_installed() {
    // The same binary, alone in a directory of its own (a hard link: no
    // `gatehouse-exec-probe` beside it): the case that needs the probe is
    // skipped with the reason, never `held` without having tried.
    let env = Env::new();
    let dir = guests_dir();
    let bin = env.mkdir("lonely-bin");
    let lonely = bin.join("gatehouse");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_gatehouse"), &lonely).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_gatehouse"), &lonely).unwrap();
    }
    let base = env.command();
    let mut cmd = std::process::Command::new(&lonely);
    if let Some(cwd) = base.get_current_dir() {
        cmd.current_dir(cwd);
    }
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.args([
        "--json",
        "conformance",
        "--guests",
        s(&dir),
        "--only",
        "exec.",
    ]);
    let out = cmd.output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    let records = v["records"].as_array().unwrap();
    let ptrace = records
        .iter()
        .find(|r| r["name"] == "exec.ptrace.p2")
        .unwrap();
    assert_eq!(ptrace["verdict"], "skipped", "{ptrace:#}");
    assert_eq!(
        ptrace["observed"],
        "the native probe `gatehouse-exec-probe` is not installed next to this gatehouse (a build from the source tree puts it there): no program of a stock system can try this"
    );
    // The cases that need no probe still ran.
    assert_eq!(v["counts"]["skipped"], 1, "{v:#}");
    assert_eq!(
        v["counts"]["held"].as_u64().unwrap(),
        records.len() as u64 - 1,
        "{v:#}"
    );
}

#[test]
fn conformance_skips_the_seccomp_cases_where_no_filter_can_be_installed() {
    // seccomp(2) hidden from a child `gatehouse conformance` for real (a
    // filter of its own): the report says a command's filter cannot be
    // installed, and the cases that only it refuses (a namespace, a UNIX
    // socket, ptrace) are skipped with that reason; Landlock's still hold.
    let env = Env::new();
    let dir = guests_dir();
    let mut cmd = env.command();
    cmd.args([
        "--json",
        "conformance",
        "--guests",
        s(&dir),
        "--only",
        "exec.",
    ]);
    crate::support::seccomp::seccomp_errno(&mut cmd, libc::SYS_seccomp, libc::ENOSYS);
    let out = cmd.output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    let verdicts: BTreeMap<&str, (&str, &str)> = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap(),
                (
                    r["verdict"].as_str().unwrap(),
                    r["observed"].as_str().unwrap(),
                ),
            )
        })
        .collect();
    for name in [
        "exec.namespace-unshare.p2",
        "exec.unix-socket.p2",
        "exec.ptrace.p2",
    ] {
        let (verdict, why) = verdicts[name];
        assert_eq!(verdict, "skipped", "{name}: {why}");
        assert!(
            why.starts_with(
                "the isolation report says a command's seccomp filter cannot be installed: seccomp filters cannot be installed (enosys): "
            ),
            "{name}: {why}"
        );
    }
    for name in [
        "exec.read-outside-roots.p2",
        "exec.write-outside-write-roots.p2",
        "exec.program-not-granted.p2",
        "exec.shell-not-granted.p2",
    ] {
        assert_eq!(verdicts[name].0, "held", "{name}: {}", verdicts[name].1);
    }
    assert_eq!(v["counts"]["skipped"], 3, "{v:#}");
}
