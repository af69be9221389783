//! Issue 5, first part: the isolation probe, the degraded-mode report,
//! `gatehouse isolation`, the report attached to runs, and the fail-closed
//! switch.
//!
//! Degradation is real in every test here: the child `gatehouse` runs under
//! a seccomp filter that makes one syscall fail (installed with `pre_exec`,
//! everything else allowed), or with an engine really built without
//! signals-based traps or without a guard region (`[engine]` in
//! `gatehouse.toml`), read back from wasmtime by the probe.
//!
//! When the tests run as root (as on CI), the child drops to uid/gid 65534
//! so that the `host_process` layer is enforced and each degradation below
//! is the only one: a control run under the same conditions is `full`
//! wherever the kernel offers `openat2` and Landlock.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;

use serde_json::Value;

use crate::support::guests::{component, guest};
use crate::support::seccomp::seccomp_errno;
use crate::support::{s, Env, Run};

const WRITE: &str = r#"{"path":"out/a.txt","content":"x"}"#;

const LAYERS: [&str; 9] = [
    "linear_memory_guards",
    "signals_based_traps",
    "epoch_deadlines",
    "memory_limits",
    "hostcall_fuel",
    "path_resolution",
    "host_process",
    "landlock",
    "code_exec",
];

/// How the child is degraded.
#[derive(Debug, Clone, Copy)]
enum Degrade {
    /// Nothing: the control.
    None,
    /// A seccomp filter makes this syscall fail with this errno.
    Seccomp(i64, i32),
    /// `[engine]` settings (a TOML fragment) build a weaker engine.
    Engine(&'static str),
}

fn euid() -> u32 {
    // `/proc/self` is owned by the effective user of the process.
    std::fs::metadata("/proc/self").unwrap().uid()
}

/// This process's own answer to `openat2(tmp, ".", RESOLVE_BENEATH)`: the
/// expectation the child's report is checked against.
fn openat2_works() -> bool {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: libc::RESOLVE_BENEATH,
    };
    let dir = std::fs::File::open(std::env::temp_dir()).unwrap();
    // SAFETY: a valid descriptor, a NUL-terminated path and a valid
    // `open_how` with its size; the kernel writes no memory.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            std::os::fd::AsRawFd::as_raw_fd(&dir),
            c".".as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd >= 0 {
        // SAFETY: `fd` was just returned to us and is closed once.
        unsafe { libc::close(fd as i32) };
    }
    fd >= 0
}

/// This process's own `landlock_create_ruleset(NULL, 0, VERSION)`.
fn landlock_abi() -> Option<i64> {
    // SAFETY: null attributes, size 0, the VERSION flag: no memory is read
    // or written.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    (v >= 0).then_some(v)
}

/// Whether an unprivileged child on this host should report `full`.
fn host_can_be_full() -> bool {
    openat2_works() && landlock_abi().is_some()
}

/// Runs `args` in `env` as an unprivileged child degraded by `how`.
fn run(env: &Env, how: Degrade, args: &[&str]) -> Run {
    if let Degrade::Engine(toml) = how {
        env.write(
            "config/gatehouse/gatehouse.toml",
            &format!("[actors.main]\nskills = [\"*\"]\n{toml}"),
        );
    }
    let mut cmd = env.command();
    cmd.args(args);
    if euid() == 0 {
        let root = env.root();
        chown_tree(&root);
        cmd.uid(65534).gid(65534);
    }
    if let Degrade::Seccomp(syscall, errno) = how {
        seccomp_errno(&mut cmd, syscall, errno);
    }
    let out = cmd.output().expect("run gatehouse");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// Hands the test's temporary tree to uid/gid 65534.
fn chown_tree(dir: &Path) {
    std::os::unix::fs::chown(dir, Some(65534), Some(65534)).unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() && !p.is_symlink() {
            chown_tree(&p);
        } else {
            std::os::unix::fs::lchown(&p, Some(65534), Some(65534)).unwrap();
        }
    }
}

fn last_json(run: &Run) -> Value {
    run.stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no json on stdout: {run:#?}"))
}

fn report(env: &Env, how: Degrade) -> Value {
    let r = run(env, how, &["--json", "isolation"]);
    r.expect(0);
    last_json(&r)
}

fn layer<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no layer {name} in {report:#}"))
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    k.sort();
    k
}

/// The document's invariants, whatever the host.
fn check_document(r: &Value) {
    assert_eq!(
        keys(r),
        ["layers", "overall", "reasons", "version"],
        "{r:#}"
    );
    assert_eq!(r["version"], 1);
    let layers = r["layers"].as_array().unwrap();
    let names: Vec<&str> = layers.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, LAYERS);
    let mut expected_reasons = Vec::new();
    for l in layers {
        assert_eq!(
            keys(l),
            ["counted", "details", "name", "reason", "state"],
            "{l:#}"
        );
        let state = l["state"].as_str().unwrap();
        assert!(
            ["enforced", "partial", "unavailable"].contains(&state),
            "{l:#}"
        );
        let reason = l["reason"].as_str().unwrap();
        let first = reason.chars().next().unwrap();
        assert!(!first.is_uppercase(), "reason is not lowercase: {l:#}");
        assert!(l["details"].is_object(), "{l:#}");
        assert_eq!(l["counted"], true, "{l:#}");
        if l["counted"] == true && state != "enforced" {
            expected_reasons.push(Value::String(format!(
                "{}: {reason}",
                l["name"].as_str().unwrap()
            )));
        }
    }
    assert_eq!(r["reasons"].as_array().unwrap(), &expected_reasons);
    assert_eq!(
        r["overall"],
        if expected_reasons.is_empty() {
            "full"
        } else {
            "degraded"
        }
    );
    // code_exec follows Landlock here (seccomp filters can be installed
    // wherever these tests run: they install one themselves).
    let exec = layer(r, "code_exec");
    let landlock = layer(r, "landlock");
    assert_eq!(exec["details"]["seccomp"], "ok", "{exec:#}");
    assert_eq!(exec["details"]["landlock_abi"], landlock["details"]["abi"]);
    if landlock["state"] == "enforced" {
        assert_eq!(exec["state"], "enforced", "{exec:#}");
        assert!(exec["reason"]
            .as_str()
            .unwrap()
            .starts_with("each command runs with landlock abi"));
    } else {
        assert_eq!(exec["state"], "partial", "{exec:#}");
        assert!(exec["reason"]
            .as_str()
            .unwrap()
            .starts_with("landlock is unavailable"));
    }
    let denied: Vec<&str> = exec["details"]["denied_syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for name in [
        "ptrace",
        "mount",
        "bpf",
        "kexec_load",
        "unshare",
        "io_uring_setup",
        "setsid",
    ] {
        assert!(denied.contains(&name), "{name} is not denied: {exec:#}");
    }
}

#[test]
fn the_report_of_this_host_names_every_layer_with_what_is_knowable() {
    let env = Env::new();
    let r = env.run(&["--json", "isolation"]);
    r.expect(0);
    let v = last_json(&r);
    check_document(&v);
    // The engine's layers, read back from the default engine.
    let guards = layer(&v, "linear_memory_guards");
    assert_eq!(guards["state"], "enforced", "{guards:#}");
    assert_eq!(guards["details"]["memory_reservation"], 4u64 << 30);
    assert_eq!(guards["details"]["memory_guard_size"], 32u64 << 20);
    assert_eq!(layer(&v, "signals_based_traps")["state"], "enforced");
    assert_eq!(layer(&v, "signals_based_traps")["details"]["enabled"], true);
    let epoch = layer(&v, "epoch_deadlines");
    assert_eq!(epoch["state"], "enforced");
    assert_eq!(epoch["details"]["tick_ms"], 10);
    assert_eq!(epoch["details"]["default_deadline_ms"], 5000);
    let mem = layer(&v, "memory_limits");
    assert_eq!(mem["state"], "enforced");
    assert_eq!(mem["details"]["pool_max_memory_size"], 64u64 << 20);
    // `gatehouse isolation` shows the engine `gatehouse run` builds: the
    // one-shot pool, nothing kept resident.
    assert_eq!(mem["details"]["engine_kind"], "one_shot");
    assert_eq!(mem["details"]["pooling_allocator"], true);
    assert_eq!(mem["details"]["pool_total_memories"], 40);
    assert_eq!(mem["details"]["pool_memory_keep_resident"], 0);
    assert_eq!(mem["details"]["pool_pagemap_scan"], false);
    assert_eq!(layer(&v, "hostcall_fuel")["state"], "enforced");
    assert_eq!(
        layer(&v, "hostcall_fuel")["details"]["default_hostcalls"],
        1_000_000
    );
    // The kernel's layers, against this process's own syscalls.
    let path = layer(&v, "path_resolution");
    if openat2_works() {
        assert_eq!(path["state"], "enforced", "{path:#}");
        assert_eq!(path["details"]["openat2"], "ok");
        assert_eq!(path["details"]["escape_refused"], true);
    } else {
        assert_eq!(path["state"], "partial", "{path:#}");
    }
    let landlock = layer(&v, "landlock");
    match landlock_abi() {
        Some(abi) => {
            assert_eq!(landlock["state"], "enforced", "{landlock:#}");
            assert_eq!(landlock["details"]["abi"], abi);
        }
        None => assert_eq!(landlock["state"], "unavailable", "{landlock:#}"),
    }
    let host = layer(&v, "host_process");
    assert_eq!(host["details"]["euid"], euid());
    assert_eq!(host["details"]["root"], euid() == 0);
    if euid() == 0 {
        assert_eq!(host["state"], "partial", "{host:#}");
        assert!(host["reason"]
            .as_str()
            .unwrap()
            .starts_with("running as root"));
    }
    assert!(host["details"]["cap_eff"]
        .as_str()
        .unwrap()
        .starts_with("0x"));

    // The human table: one row per layer, with its state.
    let table = env.run(&["isolation"]);
    table.expect(0);
    assert!(
        table
            .stdout
            .starts_with(&format!("overall  {}", v["overall"].as_str().unwrap())),
        "{table:#?}"
    );
    assert!(
        table.lines().contains(
            &"engine   one_shot: pooling allocator, 40 memory slots, 0 KiB of each kept resident, pagemap_scan off"
        ),
        "{table:#?}"
    );
    for name in LAYERS {
        let l = layer(&v, name);
        let row = table
            .lines()
            .into_iter()
            .find(|row| row.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row for {name}: {table:#?}"));
        assert!(row.contains(l["state"].as_str().unwrap()), "{row}");
        assert!(row.contains(l["reason"].as_str().unwrap()), "{row}");
    }
}

#[test]
fn openat2_hidden_by_seccomp_leaves_path_resolution_to_the_manual_fallback() {
    let env = Env::new();
    let control = report(&env, Degrade::None);
    check_document(&control);
    assert_eq!(layer(&control, "host_process")["state"], "enforced");
    assert_eq!(
        layer(&control, "host_process")["details"]["seccomp"],
        "disabled"
    );
    if host_can_be_full() {
        assert_eq!(control["overall"], "full", "{control:#}");
    }
    for (errno, word) in [(libc::ENOSYS, "enosys"), (libc::EPERM, "eperm")] {
        let r = report(&env, Degrade::Seccomp(libc::SYS_openat2, errno));
        check_document(&r);
        let path = layer(&r, "path_resolution");
        assert_eq!(path["state"], "partial", "{path:#}");
        assert_eq!(path["details"]["openat2"], word);
        assert_eq!(path["details"]["fallback"], "manual");
        let reason = path["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!("({word})"))
                && reason.contains("cap-std falls back to manual resolution"),
            "{reason}"
        );
        assert_eq!(r["overall"], "degraded");
        assert!(r["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x.as_str().unwrap().starts_with("path_resolution: ")));
        // The filter is really there, and the probe sees it.
        let host = layer(&r, "host_process");
        assert_eq!(host["details"]["seccomp"], "filter", "{host:#}");
        assert_eq!(host["details"]["no_new_privs"], true);
        // Nothing else changed.
        for name in LAYERS {
            if name != "path_resolution" && name != "host_process" {
                assert_eq!(layer(&r, name), layer(&control, name), "{name}");
            }
        }
    }
}

#[test]
fn landlock_hidden_by_seccomp_is_unavailable() {
    let env = Env::new();
    let r = report(
        &env,
        Degrade::Seccomp(libc::SYS_landlock_create_ruleset, libc::ENOSYS),
    );
    check_document(&r);
    let landlock = layer(&r, "landlock");
    assert_eq!(landlock["state"], "unavailable", "{landlock:#}");
    assert_eq!(landlock["details"]["abi"], Value::Null);
    assert_eq!(landlock["details"]["errno"], "enosys");
    assert!(landlock["reason"].as_str().unwrap().contains("(enosys)"));
    assert_eq!(r["overall"], "degraded");
    // Commands would lose their filesystem confinement, and the report
    // says so in the code_exec layer too.
    let exec = layer(&r, "code_exec");
    assert_eq!(exec["state"], "partial", "{exec:#}");
    assert!(exec["reason"]
        .as_str()
        .unwrap()
        .starts_with("landlock is unavailable (enosys): a command's files are not confined"));
    assert_eq!(exec["details"]["landlock_abi"], Value::Null);
    assert_eq!(
        layer(&r, "path_resolution")["state"],
        layer(&report(&env, Degrade::None), "path_resolution")["state"]
    );
}

#[test]
fn an_engine_without_signals_or_without_a_guard_region_reports_those_layers_partial() {
    let env = Env::new();
    let r = report(
        &env,
        Degrade::Engine("[engine]\nsignals_based_traps = false\n"),
    );
    check_document(&r);
    let signals = layer(&r, "signals_based_traps");
    assert_eq!(signals["state"], "partial", "{signals:#}");
    assert_eq!(signals["details"]["enabled"], false);
    let guards = layer(&r, "linear_memory_guards");
    assert_eq!(guards["state"], "partial", "{guards:#}");
    assert_eq!(guards["details"]["signals_based_traps"], false);
    assert_eq!(guards["details"]["bounds_checks"], "explicit");
    assert_eq!(r["overall"], "degraded");

    let env = Env::new();
    let r = report(&env, Degrade::Engine("[engine]\nguard_bytes = 0\n"));
    check_document(&r);
    let guards = layer(&r, "linear_memory_guards");
    assert_eq!(guards["state"], "partial", "{guards:#}");
    assert_eq!(guards["details"]["memory_guard_size"], 0);
    assert_eq!(guards["details"]["guard_before_linear_memory"], false);
    assert!(guards["reason"]
        .as_str()
        .unwrap()
        .starts_with("there is no guard region"));
    assert_eq!(layer(&r, "signals_based_traps")["state"], "enforced");
    assert_eq!(r["overall"], "degraded");
    assert_eq!(
        r["reasons"][0].as_str().unwrap().split(':').next().unwrap(),
        "linear_memory_guards"
    );
}

#[test]
fn a_bad_switch_value_is_invalid_input_naming_the_field() {
    let env = Env::new();
    env.write(
        "config/gatehouse/gatehouse.toml",
        "[actors.main]\n[isolation]\non_degraded = \"sometimes\"\n",
    );
    env.run(&["isolation"])
        .expect_err(
            3,
            &["field `isolation.on_degraded`", "unknown value `sometimes`"],
        )
        .expect_lowercase_message();
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.run(&[
        "run",
        s(&guest("hello")),
        "--workspace",
        s(&ws),
        "--on-degraded",
        "never",
    ])
    .expect_err(3, &["`--on-degraded`: unknown value `never`"])
    .expect_lowercase_message();
}

/// Every way of degrading the host, and the layer it degrades.
fn cases() -> [(Degrade, &'static str, &'static str); 4] {
    [
        (
            Degrade::Seccomp(libc::SYS_openat2, libc::ENOSYS),
            "path_resolution",
            "partial",
        ),
        (
            Degrade::Seccomp(libc::SYS_landlock_create_ruleset, libc::ENOSYS),
            "landlock",
            "unavailable",
        ),
        (
            Degrade::Engine(
                "[isolation]\non_degraded = \"refuse-critical\"\n[engine]\nsignals_based_traps = false\n",
            ),
            "signals_based_traps",
            "partial",
        ),
        (
            Degrade::Engine(
                "[isolation]\non_degraded = \"refuse-critical\"\n[engine]\nguard_bytes = 0\n",
            ),
            "linear_memory_guards",
            "partial",
        ),
    ]
}

fn write_turn(env: &Env, how: Degrade, ws: &Path, mode: Option<&str>) -> (Run, Value) {
    let manifest = guest("write-file");
    let mut args = vec![
        "--json",
        "run",
        s(&manifest),
        "--level",
        "Full",
        "--workspace",
        s(ws),
        "--input",
        WRITE,
    ];
    if let Some(m) = mode {
        args.extend(["--on-degraded", m]);
    }
    let r = run(env, how, &args);
    let v = last_json(&r);
    (r, v)
}

#[test]
fn refuse_critical_refuses_fs_write_in_each_degraded_case_and_warn_runs_it() {
    for (how, name, state) in cases() {
        // refuse-critical: by flag for the seccomp cases, by the
        // configuration for the engine cases.
        let env = Env::bare();
        let ws = env.mkdir("ws");
        env.mkdir("ws/out");
        let mode = match how {
            Degrade::Engine(_) => None,
            _ => Some("refuse-critical"),
        };
        let (r, v) = write_turn(&env, how, &ws, mode);
        r.expect(2);
        assert_eq!(v["code"], "ISOLATION_DEGRADED", "{how:?}: {v:#}");
        let reason = v["reason"].as_str().unwrap();
        assert!(
            reason.starts_with("`fs:write` is critical")
                && reason.contains(&format!("{name} {state}"))
                && reason.contains("`refuse-critical`"),
            "{how:?}: {reason}"
        );
        assert_eq!(v["isolation"]["overall"], "degraded");
        assert_eq!(layer(&v["isolation"], name)["state"], state, "{how:?}");
        // Nothing was built or written: no file, no compiled component, no
        // history; the state holds the one line of the denial log and its
        // record in the audit chain.
        assert_eq!(std::fs::read_dir(ws.join("out")).unwrap().count(), 0);
        let mut files: Vec<String> = std::fs::read_dir(env.state_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(
            files,
            ["audit-chain.jsonl", "denials.jsonl"],
            "{how:?}: state was written"
        );
        let denials = std::fs::read_to_string(env.state_dir().join("denials.jsonl")).unwrap();
        assert_eq!(denials.lines().count(), 1, "{how:?}");
        assert!(
            denials.contains("\"code\":\"ISOLATION_DEGRADED\""),
            "{denials}"
        );
        std::fs::remove_file(env.state_dir().join("denials.jsonl")).unwrap();

        // warn (the flag overriding the configuration): it runs, and the
        // report is attached.
        let (r, v) = write_turn(&env, how, &ws, Some("warn"));
        r.expect(0);
        assert_eq!(std::fs::read(ws.join("out/a.txt")).unwrap(), b"x");
        assert_eq!(v["isolation"]["overall"], "degraded", "{v:#}");
        assert_eq!(layer(&v["isolation"], name)["state"], state);
        assert!(v["isolation"]["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x.as_str().unwrap().starts_with(&format!("{name}: "))));
        check_document(&v["isolation"]);
    }
}

#[test]
fn on_a_full_host_refuse_critical_lets_fs_write_run() {
    if !host_can_be_full() {
        eprintln!("skipped: this kernel lacks openat2 or landlock, so no child can be full");
        return;
    }
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let (r, v) = write_turn(&env, Degrade::None, &ws, Some("refuse-critical"));
    r.expect(0);
    assert_eq!(v["isolation"]["overall"], "full", "{v:#}");
    assert_eq!(std::fs::read(ws.join("out/a.txt")).unwrap(), b"x");
}

#[test]
fn refuse_all_refuses_a_pure_turn_that_refuse_critical_lets_run() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let how = Degrade::Engine("[engine]\nguard_bytes = 0\n");
    let hello = guest("hello");
    let args = |mode: &'static str| {
        vec![
            "run".to_string(),
            s(&hello).to_string(),
            "--workspace".into(),
            s(&ws).to_string(),
            "--on-degraded".into(),
            mode.into(),
        ]
    };
    let a = args("refuse-critical");
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let r = run(&env, how, &a);
    r.expect(0);
    // The human output carries the report in one line.
    assert!(
        r.lines()
            .contains(&"isolation degraded (linear_memory_guards)")
            || r.lines()
                .iter()
                .any(|l| l.starts_with("isolation degraded (linear_memory_guards")),
        "{r:#?}"
    );
    let a = args("refuse-all");
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let r = run(&env, how, &a);
    r.expect(2);
    // Refused before guest code: exactly one line on stderr.
    let last = r.stderr.lines().last().unwrap_or_default();
    assert_eq!(r.stderr.lines().count(), 1, "{r:#?}");
    assert!(
        last.starts_with(
            "gatehouse: ISOLATION_DEGRADED: this host's isolation is degraded (linear_memory_guards partial"
        ) && last.ends_with("`isolation.on_degraded` is `refuse-all`"),
        "{r:#?}"
    );
}

#[test]
fn a_delegated_turn_meets_the_same_switch() {
    // call-other needs only delegate:call (not critical); the write it
    // delegates to needs fs:write, and is refused inside the call.
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let caller = env.write(
        "manifests/caller.toml",
        &format!(
            "name = \"caller\"\ncomponent = \"{}\"\n[[capabilities]]\nname = \"delegate:call\"\ntarget = \"write-file\"\n",
            s(&component("call-other"))
        ),
    );
    let callee = guest("write-file");
    let input = serde_json::json!({"executor": "write-file", "input": WRITE}).to_string();
    let how = Degrade::Engine("[engine]\nguard_bytes = 0\n");
    let turn = |mode: &str| {
        let r = run(
            &env,
            how,
            &[
                "--json",
                "run",
                s(&caller),
                "--level",
                "Full",
                "--workspace",
                s(&ws),
                "--with",
                s(&callee),
                "--input",
                &input,
                "--on-degraded",
                mode,
                // The callee is compiled inside the call, and all of a
                // call's time is the caller's: room for a slow debug build.
                "--deadline-ms",
                "60000",
            ],
        );
        let v = last_json(&r);
        (r, v)
    };
    let (r, v) = turn("refuse-critical");
    r.expect(1);
    assert_eq!(
        v["run"]["result"]["error"]["denied"]["code"], "ISOLATION_DEGRADED",
        "{v:#}"
    );
    assert_eq!(std::fs::read_dir(ws.join("out")).unwrap().count(), 0);
    let (r, _) = turn("warn");
    r.expect(0);
    assert_eq!(std::fs::read(ws.join("out/a.txt")).unwrap(), b"x");
}

/// A `code:exec` turn on `cat`: the configured actor may run `cat`, and
/// the manifest `body` (a `component` or a `command` line) declares
/// `code:exec` on it. Returns the workspace and the arguments of a JSON
/// run at level Full under `mode`.
fn cat_turn(env: &Env, body: &str, mode: &str) -> Vec<String> {
    let ws = env.mkdir("ws");
    env.write(
        "config/gatehouse/gatehouse.toml",
        "[actors.main]\nskills = [\"*\"]\ntools = [\"cat\"]\n",
    );
    let m = env.write(
        "manifests/cat.toml",
        &format!(
            "name = \"cat\"\n{body}\ntools = [\"cat\"]\n[[capabilities]]\nname = \"code:exec\"\ntarget = \"cat\"\n"
        ),
    );
    [
        "--json",
        "run",
        s(&m),
        "--level",
        "Full",
        "--workspace",
        s(&ws),
        "--on-degraded",
        mode,
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn refuse_critical_refuses_a_code_exec_turn_when_landlock_is_hidden() {
    // The same turn runs on the control host (the gate asks nothing of a
    // component's `code:exec`; the guest, given no command, runs none).
    // Once Landlock is hidden, the probe (the gate's last step) refuses
    // it with ISOLATION_DEGRADED before anything runs, no one asked.
    let env = Env::new();
    let body = format!("component = \"{}\"", s(&component("run-tool")));
    let args = cat_turn(&env, &body, "refuse-critical");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    if host_can_be_full() {
        let r = run(&env, Degrade::None, &args);
        r.expect(1);
        assert_eq!(last_json(&r)["ran"], true);
    }
    let mut cmd = env.terminal_command(&args, &[]);
    seccomp_errno(&mut cmd, libc::SYS_landlock_create_ruleset, libc::ENOSYS);
    let r = crate::support::type_answers(&mut cmd, "");
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(!r.stdout.contains("asks for approval"), "{r:#?}");
    let line = r.stdout.lines().last().unwrap();
    let v: Value = serde_json::from_str(&line[line.find("{\"").unwrap()..]).unwrap();
    assert_eq!(v["code"], "ISOLATION_DEGRADED", "{v:#}");
    // Refused before anything ran: one denial line, no turn directory.
    let denials = std::fs::read_to_string(env.state_dir().join("denials.jsonl")).unwrap();
    let last: Value = serde_json::from_str(denials.lines().last().unwrap()).unwrap();
    assert_eq!(last["code"], "ISOLATION_DEGRADED");
    assert!(!env.state_dir().join("history").exists());
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("`code:exec` is critical")
            && reason.contains("landlock unavailable")
            && reason.contains("code_exec partial"),
        "{reason}"
    );
}

#[test]
fn warn_runs_a_code_exec_turn_without_landlock_and_the_outcome_says_so() {
    // The same host with Landlock hidden for real (a seccomp filter on the
    // terminal's `script` and so on gatehouse and its commands): under
    // `warn` the command runs, unconfined in its files, and both the
    // report and the command's record say so.
    let env = Env::new();
    let args = cat_turn(&env, r#"command = ["cat", "/etc/hostname"]"#, "warn");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = env.terminal_command(&args, &[]);
    seccomp_errno(&mut cmd, libc::SYS_landlock_create_ruleset, libc::ENOSYS);
    let r = crate::support::type_answers(&mut cmd, "o\n");
    assert_eq!(r.code, 0, "{r:#?}");
    let line = r.stdout.lines().last().unwrap();
    let v: Value = serde_json::from_str(&line[line.find("{\"").unwrap()..]).unwrap();
    assert_eq!(
        v["run"]["result"]["output"].as_str().unwrap().as_bytes(),
        std::fs::read("/etc/hostname").unwrap()
    );
    assert_eq!(layer(&v["isolation"], "landlock")["state"], "unavailable");
    assert_eq!(layer(&v["isolation"], "code_exec")["state"], "partial");
    let c = &v["run"]["commands"][0]["confinement"];
    assert_eq!(c["landlock_abi"], Value::Null, "{c:#}");
    assert_eq!(c["seccomp"], true);
    assert_eq!(
        c["skipped"][0],
        format!("landlock: unavailable on this host (errno {}): the command can read and write whatever the host user can", libc::ENOSYS)
    );
}
