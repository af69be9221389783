//! The case table. Every case's workspace holds, set up by the runner:
//!
//! ```text
//! ws/a.txt  ws/sub/inner.txt  ws/emptydir/  ws/out/w.txt  ws/out/n.md
//! ws/abs-link -> <outside>/secret.txt     ws/rel-link -> ../outside/secret.txt
//! ws/dir-link -> ../outside               ws/loop-a -> loop-b -> loop-a
//! ws/out/dangling -> ../../outside/created
//! outside/secret.txt                      (next to ws, never granted)
//! ```

use crate::policy::DenyCode;

use super::{Cap, Case, Expect, Half, Special, World};

const ATTACK: &str = "cf_attack.wasm";
const NET: &str = "cf_net.wasm";
/// The second guest of the residue case.
pub(super) const SCAN_RESIDUE: &str = "scan_residue.wasm";

fn cap(name: &'static str, target: &str) -> Cap {
    Cap {
        name,
        target: Some(target.to_string()),
        mount: None,
        methods: None,
    }
}

fn pure() -> Vec<Cap> {
    vec![Cap {
        name: "compute:pure",
        target: None,
        mount: None,
        methods: None,
    }]
}

/// The workspace read-only.
fn read_ws() -> Vec<Cap> {
    vec![cap("fs:read", "**")]
}

/// The workspace read-only, `out/` read-write.
fn write_out() -> Vec<Cap> {
    vec![cap("fs:read", "**"), cap("fs:write", "out/**")]
}

fn held(errno: &str) -> Expect {
    Expect::Output {
        exit: 0,
        stdout: format!("held {errno}\n"),
    }
}

fn output(stdout: &str) -> Expect {
    Expect::Output {
        exit: 0,
        stdout: stdout.to_string(),
    }
}

fn base(name: String, half: Half, world: World, guest: &'static str) -> Case {
    Case {
        name,
        half,
        world,
        guest,
        caps: pure(),
        args: Vec::new(),
        input: String::new(),
        special: None,
        deadline_ms: None,
        memory_mib: None,
        output_kib: None,
        tools: Vec::new(),
        hostcalls: None,
        layer: None,
        expect: output(""),
    }
}

/// A case of `cf-attack` in `world`: argv `args`, manifest `caps`.
fn attack(name: &str, world: World, caps: Vec<Cap>, args: &[&str], expect: Expect) -> Case {
    let mut c = base(
        format!("{name}.{}", world.as_str()),
        Half::Holds,
        world,
        ATTACK,
    );
    c.caps = caps;
    c.args = args.iter().map(|a| a.to_string()).collect();
    c.expect = expect;
    c
}

/// The outcomes of `exhaust.huge-list-to-host`.
const HUGE_LIST_P1: Expect = Expect::Limit {
    code: DenyCode::LimitOutput,
};
const HUGE_LIST_P2: Expect = Expect::Trap;

/// Every case, in report order.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for world in [World::P2, World::P1] {
        both_worlds(world, &mut out);
    }
    p2_only(&mut out);
    out
}

fn both_worlds(w: World, out: &mut Vec<Case>) {
    // Refused by the host (cap-std beneath the preopen): EPERM. A path no
    // preopen names is refused by wasi-libc itself: ENOENT.
    let notcap = || held("EPERM");
    let nopreopen = || held("ENOENT");
    // Filesystem escapes through a read grant on the workspace.
    let escapes: [(&str, &[&str], Expect); 17] = [
        (
            "fs.absolute-path",
            &["read", "{outside}/secret.txt"],
            nopreopen(),
        ),
        ("fs.dotdot", &["read", "../outside/secret.txt"], notcap()),
        ("fs.dip-out-and-back-in", &["read", "../ws/a.txt"], notcap()),
        (
            "fs.deep-dotdot",
            &["read", "sub/../../outside/secret.txt"],
            notcap(),
        ),
        (
            "fs.dotdot-from-child-descriptor",
            &["openat", "sub", "../../outside/secret.txt"],
            notcap(),
        ),
        (
            "fs.child-descriptor-to-parent",
            &["openat-dir", "sub", ".."],
            notcap(),
        ),
        ("fs.symlink-absolute-out", &["read", "abs-link"], notcap()),
        ("fs.symlink-relative-out", &["read", "rel-link"], notcap()),
        ("fs.symlink-dir-out", &["list", "dir-link"], notcap()),
        ("fs.symlink-loop", &["read", "loop-a"], held("ELOOP")),
        (
            "fs.symlink-nofollow-out",
            &["open-nofollow", "rel-link"],
            held("ELOOP"),
        ),
        ("fs.proc-self-fd", &["read", "/proc/self/fd/0"], nopreopen()),
        ("fs.host-file", &["read", "/etc/hostname"], nopreopen()),
        (
            "fs.root-listing",
            &["list-root"],
            output("held `/` shows only the granted directory\n"),
        ),
        (
            "fs.trailing-slash-symlink",
            &["read", "rel-link/"],
            notcap(),
        ),
        (
            "fs.trailing-slash-file",
            &["read", "a.txt/"],
            held("ENOTDIR"),
        ),
        (
            "fs.stat-outside",
            &["stat", "../outside/secret.txt"],
            notcap(),
        ),
    ];
    for (name, args, expect) in escapes {
        out.push(attack(name, w, read_ws(), args, expect));
    }
    // Escapes that need a write grant (on `out/`).
    let write_escapes: [(&str, &[&str], Expect); 5] = [
        (
            "fs.dangling-symlink-create",
            &["create", "out/dangling"],
            notcap(),
        ),
        (
            "fs.dangling-symlink-nofollow",
            &["create-nofollow", "out/dangling"],
            held("ELOOP"),
        ),
        (
            "fs.hard-link-from-outside",
            &["link", "../outside/secret.txt", "out/stolen"],
            notcap(),
        ),
        (
            "fs.hard-link-absolute",
            &["link", "{outside}/secret.txt", "out/stolen"],
            nopreopen(),
        ),
        // Preview 1's adapter traps on a name that is not UTF-8.
        (
            "fs.non-utf8-name",
            &["create-bytes", "out"],
            if w == World::P1 {
                Expect::Trap
            } else {
                held("EILSEQ")
            },
        ),
    ];
    for (name, args, expect) in write_escapes {
        out.push(attack(name, w, write_out(), args, expect));
    }
    // Writes through a read-only grant (the workspace), next to a
    // read-write one (`out/`).
    let ro = || held("EPERM");
    let writes: [(&str, &[&str], Expect); 15] = [
        ("ro.write", &["write", "a.txt"], ro()),
        ("ro.open-truncate", &["truncate", "a.txt"], ro()),
        ("ro.append", &["append", "a.txt"], ro()),
        ("ro.create", &["create", "new.txt"], ro()),
        ("ro.mkdir", &["mkdir", "newdir"], ro()),
        ("ro.unlink", &["unlink", "a.txt"], ro()),
        ("ro.rmdir", &["rmdir", "emptydir"], ro()),
        ("ro.rename-within", &["rename", "a.txt", "b.txt"], ro()),
        ("ro.rename-out-of", &["rename", "a.txt", "out/a.txt"], ro()),
        ("ro.rename-into", &["rename", "out/w.txt", "w.txt"], ro()),
        ("ro.link-into", &["link", "out/w.txt", "l.txt"], ro()),
        ("ro.link-out-of", &["link", "a.txt", "out/l.txt"], ro()),
        ("ro.set-times", &["set-times", "a.txt"], ro()),
        ("ro.set-size", &["set-size", "a.txt"], ro()),
        ("ro.symlink-create", &["symlink", "a.txt", "s.txt"], ro()),
    ];
    for (name, args, expect) in writes {
        out.push(attack(name, w, write_out(), args, expect));
    }
    // Fine globs: `out/*.md` may be written, nothing else in `out/`.
    let md = || vec![cap("fs:read", "**"), cap("fs:write", "out/*.md")];
    out.push(attack(
        "glob.write-outside-the-glob",
        w,
        md(),
        &["write", "out/x.txt"],
        ro(),
    ));
    out.push(attack(
        "glob.rename-out-of-the-glob",
        w,
        md(),
        &["rename", "out/n.md", "out/n.txt"],
        ro(),
    ));
    // Host state: the workspace holds gatehouse's state directory.
    let mut state_read = attack(
        "state.read-host-state",
        w,
        read_ws(),
        &["read", "state/conformance-probe.txt"],
        held("EACCES"),
    );
    state_read.special = Some(Special::StateInWorkspace);
    out.push(state_read);
    let mut state_write = attack(
        "state.write-host-state",
        w,
        vec![cap("fs:write", "**")],
        &["write", "state/conformance-probe.txt"],
        held("EACCES"),
    );
    state_write.special = Some(Special::StateInWorkspace);
    out.push(state_write);
    // The component this very case runs, and the configuration's place
    // (protected before a file exists there).
    let component = format!("guests/{}/{ATTACK}", w.target());
    for (name, path) in [
        ("state.write-own-component", component.as_str()),
        ("state.write-configuration", "config/gatehouse.toml"),
    ] {
        let mut c = attack(
            name,
            w,
            vec![cap("fs:write", "**")],
            &["write", path],
            held("EACCES"),
        );
        c.special = Some(Special::StateInWorkspace);
        out.push(c);
    }
    // Leakage.
    out.push(attack(
        "leak.host-environment",
        w,
        pure(),
        &["env"],
        output("held no environment variables\n"),
    ));
    out.push(attack(
        "leak.host-argv",
        w,
        pure(),
        &["argv", "x", "y"],
        output("held argv argv x y\n"),
    ));
    out.push(attack(
        "leak.host-cwd",
        w,
        pure(),
        &["cwd"],
        output("held cwd /\n"),
    ));
    out.push(attack(
        "leak.real-clock-without-time-read",
        w,
        pure(),
        &["clock"],
        output("held wall clock frozen\n"),
    ));
    // Exhaustion.
    let limit = |code| Expect::Limit { code };
    let mut spin = attack(
        "exhaust.tight-loop",
        w,
        pure(),
        &["spin"],
        limit(DenyCode::LimitDeadline),
    );
    spin.deadline_ms = Some(300);
    spin.layer = Some("epoch_deadlines");
    out.push(spin);
    let mut sleep = attack(
        "exhaust.blocked-in-host-past-deadline",
        w,
        pure(),
        &["sleep"],
        limit(DenyCode::LimitDeadline),
    );
    sleep.deadline_ms = Some(300);
    sleep.layer = Some("epoch_deadlines");
    out.push(sleep);
    let mut grow = attack(
        "exhaust.memory-grow",
        w,
        pure(),
        &["grow"],
        limit(DenyCode::LimitMemory),
    );
    grow.memory_mib = Some(16);
    grow.layer = Some("memory_limits");
    out.push(grow);
    out.push(attack(
        "exhaust.deep-recursion",
        w,
        pure(),
        &["recurse"],
        Expect::Trap,
    ));
    let mut flood = attack(
        "exhaust.unbounded-stdout",
        w,
        pure(),
        &["flood"],
        limit(DenyCode::LimitOutput),
    );
    flood.output_kib = Some(16);
    out.push(flood);
    // Preview 1's adapter has its own descriptor table (128 entries).
    let fds = match w {
        World::P2 => limit(DenyCode::LimitResources),
        World::P1 => output("held ENOMEM after 124 descriptors\n"),
    };
    out.push(attack(
        "exhaust.many-descriptors",
        w,
        read_ws(),
        &["fds", "a.txt"],
        fds,
    ));
    // The host refuses the length before allocating: a trap.
    out.push(attack(
        "exhaust.huge-random",
        w,
        pure(),
        &["random-huge"],
        Expect::Trap,
    ));
    // A table grown 1 000 elements at a time: the store's table cap
    // (20 000 elements) stops it. The guest is made by the suite itself
    // (no Rust program can grow a table).
    let mut table = base(
        format!("exhaust.table-grow.{}", w.as_str()),
        Half::Holds,
        w,
        super::guests::TABLE_GROW,
    );
    table.layer = Some("memory_limits");
    table.expect = limit(DenyCode::LimitTable);
    out.push(table);
    // One list of 32 MiB handed to a host import in one call (preview 1:
    // `fd_write` on stdout; preview 2: `blocking-write-and-flush`, below).
    let mut huge = attack(
        "exhaust.huge-list-to-host",
        w,
        pure(),
        &["huge-write"],
        HUGE_LIST_P1,
    );
    if w == World::P2 {
        huge.guest = "cf_fs_p2.wasm";
        huge.expect = HUGE_LIST_P2;
    }
    out.push(huge);
    // The correct half.
    let correct = |name: &str, caps: Vec<Cap>, args: &[&str], expect: Expect| {
        let mut c = attack(name, w, caps, args, expect);
        c.half = Half::Correct;
        c
    };
    out.push(correct(
        "ok.args",
        pure(),
        &["args", "a", "b c", "-d"],
        output("ok args a b c -d\n"),
    ));
    let mut stdio = correct(
        "ok.stdio",
        pure(),
        &["stdio"],
        output("line one\nline two\n"),
    );
    stdio.input = "line one\nline two\n".to_string();
    out.push(stdio);
    out.push(correct(
        "ok.exit-code",
        pure(),
        &["exit", "7"],
        Expect::Output {
            exit: 7,
            stdout: "exit 7\n".to_string(),
        },
    ));
    out.push(correct(
        "ok.clocks-with-time-read",
        vec![Cap {
            name: "time:read",
            target: None,
            mount: None,
            methods: None,
        }],
        &["clock-real"],
        output("ok wall and monotonic clocks are real\n"),
    ));
    out.push(correct(
        "ok.random",
        pure(),
        &["random"],
        output("ok random: two draws differ\n"),
    ));
    out.push(correct(
        "ok.filesystem",
        write_out(),
        &["fs-all", "out"],
        output("ok fs-all 22 steps\n"),
    ));
    out.push(correct(
        "ok.read-granted-file",
        read_ws(),
        &["read-ok", "a.txt"],
        output("ok read `a.txt`: 14 bytes: \"workspace file\"\n"),
    ));
}

fn p2_only(out: &mut Vec<Case>) {
    let p2 = World::P2;
    // Ungranted imports: each authority-carrying interface without its
    // grant, refused before instantiation.
    let imports: [(&str, &'static str); 7] = [
        ("imports.sockets-http", "fetch_socket.wasm"),
        ("imports.wasi-http", "fetch.wasm"),
        ("imports.memory", "sneaky_memory.wasm"),
        ("imports.memory-remember", "remember.wasm"),
        ("imports.human-ask", "ask.wasm"),
        ("imports.exec", "run_tool.wasm"),
        ("imports.delegate", "call_other.wasm"),
    ];
    for (name, guest) in imports {
        let mut c = base(format!("{name}.p2"), Half::Holds, p2, guest);
        c.caps = Vec::new();
        c.input = "{}".to_string();
        c.expect = Expect::Refused {
            code: DenyCode::ImportNotGranted,
        };
        out.push(c);
    }
    let mut version = base(
        "imports.mismatched-version.p2".to_string(),
        Half::Holds,
        p2,
        "cf_version.wasm",
    );
    // The name is one gatehouse provides, the version is not: refused
    // when the component is linked, before any instance exists.
    version.expect = Expect::Refused {
        code: DenyCode::ImportNotGranted,
    };
    out.push(version);
    let mut sockets = base("imports.sockets-std.p2".to_string(), Half::Holds, p2, NET);
    sockets.caps = Vec::new();
    sockets.args = vec!["tcp".into(), "127.0.0.1:{port}".into()];
    sockets.expect = Expect::Refused {
        code: DenyCode::ImportNotGranted,
    };
    out.push(sockets);
    // Network, with a grant for one loopback port only.
    let granted = || vec![cap("network:sites", "127.0.0.1:{port}")];
    let nets: [(&str, &[&str]); 6] = [
        ("net.tcp-neighbour-port", &["tcp", "127.0.0.1:{neighbour}"]),
        ("net.tcp-ipv6-loopback", &["tcp", "[::1]:{port6}"]),
        ("net.tcp-cloud-metadata", &["tcp", "169.254.169.254:80"]),
        ("net.tcp-ip-literal", &["tcp", "192.0.2.1:80"]),
        ("net.udp-loopback", &["udp", "127.0.0.1:{port}"]),
        ("net.name-lookup", &["lookup", "localhost"]),
    ];
    for (name, args) in nets {
        let mut c = base(format!("{name}.p2"), Half::Holds, p2, NET);
        c.caps = granted();
        c.args = args.iter().map(|a| a.to_string()).collect();
        // A name that was not granted does not resolve (the resolver's
        // error has no errno: its text is the outcome).
        c.expect = if name == "net.name-lookup" {
            held("failed to lookup address information: Name does not resolve")
        } else {
            held("EACCES")
        };
        out.push(c);
    }
    // A `string` that is not UTF-8, built in the guest and passed to
    // `open-at`: lifting it fails, the guest traps; the host never panics.
    let mut utf8 = base(
        "malformed.invalid-utf8-across-the-boundary.p2".to_string(),
        Half::Holds,
        p2,
        "cf_fs_p2.wasm",
    );
    utf8.caps = write_out();
    utf8.args = vec!["invalid-utf8".into(), "out".into()];
    utf8.expect = Expect::Trap;
    out.push(utf8);
    let mut ok = base("ok.tcp-granted-port.p2".to_string(), Half::Correct, p2, NET);
    ok.caps = granted();
    ok.args = vec!["tcp-ok".into(), "127.0.0.1:{port}".into()];
    ok.expect = output("ok connected to `127.0.0.1:{port}`\n");
    out.push(ok);
    http_cases(out);
    // The existing limit guests, as components.
    for (name, guest, code) in [
        (
            "exhaust.component-spin",
            "spin.wasm",
            DenyCode::LimitDeadline,
        ),
        ("exhaust.component-grow", "grow.wasm", DenyCode::LimitMemory),
        (
            "exhaust.component-flood",
            "flood.wasm",
            DenyCode::LimitOutput,
        ),
    ] {
        let mut c = base(format!("{name}.p2"), Half::Holds, p2, guest);
        c.input = "{}".to_string();
        c.deadline_ms = Some(300);
        c.memory_mib = Some(16);
        c.output_kib = Some(16);
        c.expect = Expect::Limit { code };
        out.push(c);
    }
    // Leakage between instances: a reused pool slot.
    let mut residue = base(
        "leak.previous-instance-memory.p2".to_string(),
        Half::Holds,
        p2,
        "plant_secret.wasm",
    );
    residue.special = Some(Special::Residue);
    residue.expect = output("held no residue\n");
    out.push(residue);
    // Malformed input.
    let mut cut = base(
        "malformed.truncated-component.p2".to_string(),
        Half::Holds,
        p2,
        ATTACK,
    );
    cut.special = Some(Special::Truncated);
    cut.expect = Expect::Invalid;
    out.push(cut);
    let mut pre = base(
        "malformed.precompiled-artifact.p2".to_string(),
        Half::Holds,
        p2,
        ATTACK,
    );
    pre.special = Some(Special::Precompiled);
    pre.expect = Expect::Invalid;
    out.push(pre);
    let mut fuel = base(
        "exhaust.hostcall-fuel.p2".to_string(),
        Half::Holds,
        p2,
        "hello.wasm",
    );
    fuel.input = "{}".to_string();
    fuel.hostcalls = Some(0);
    fuel.layer = Some("hostcall_fuel");
    fuel.expect = Expect::Limit {
        code: DenyCode::LimitHostcalls,
    };
    out.push(fuel);
    exec_cases(out);
    let mut digest = base(
        "malformed.digest-mismatch.p2".to_string(),
        Half::Holds,
        p2,
        ATTACK,
    );
    digest.special = Some(Special::DigestMismatch);
    digest.args = vec!["env".into()];
    digest.expect = Expect::Refused {
        code: DenyCode::DigestMismatch,
    };
    out.push(digest);
    // Pollables without end: host resources, capped.
    let mut polls = base(
        "exhaust.many-pollables.p2".to_string(),
        Half::Holds,
        p2,
        "cf_fs_p2.wasm",
    );
    polls.args = vec!["pollables".into()];
    polls.expect = Expect::Limit {
        code: DenyCode::LimitResources,
    };
    out.push(polls);
    // Every wasi:filesystem function, called directly (30 of them).
    let mut c = base(
        "ok.wasi-filesystem-every-function.p2".to_string(),
        Half::Correct,
        p2,
        "cf_fs_p2.wasm",
    );
    c.caps = write_out();
    c.args = vec!["out".into()];
    c.expect = output("ok fs-p2 30 functions\n");
    out.push(c);
    // The wasi-libc program calling every preview 1 fd_*/path_* function.
    let mut c = base(
        "ok.wasi-libc-fs-all.p1".to_string(),
        Half::Correct,
        World::P1,
        "wasi_fs_all.wasm",
    );
    c.caps = write_out();
    c.args = vec!["out".into()];
    c.expect = Expect::OutputEnds {
        exit: 0,
        suffix: " ok, 0 failed\n".to_string(),
    };
    out.push(c);
}

/// The grant of every `http.` case: one plain-HTTP URL pattern on the
/// runner's server (`{http}`), GET only. The suite has no TLS CA, so the
/// pattern names `http://` (which a host-only target never allows).
const HTTP_GRANT: &str = "http://127.0.0.1:{http}/ok/**";

/// The answer of the runner's server to a GET of `/ok/item`: its request
/// line is the body, so the output proves what the server received.
const HTTP_GRANTED_OUTPUT: &str =
    r#"{"body":"GET /ok/item HTTP/1.1","headers":{"content-length":"21"},"status":200}"#;

/// wasi:http through `fetch`, under [`HTTP_GRANT`]: each refusal must
/// reach the guest as `HttpRequestDenied` with nothing received by either
/// of the runner's servers (the runner checks), and the control must get
/// its answer from the granted one.
fn http_cases(out: &mut Vec<Case>) {
    let grant = || {
        vec![Cap {
            name: "network:sites",
            target: Some(HTTP_GRANT.to_string()),
            mount: None,
            methods: Some(&["GET"]),
        }]
    };
    let case = |name: &str, half: Half, input: serde_json::Value, expect: Expect| {
        let mut c = base(format!("{name}.p2"), half, World::P2, "fetch.wasm");
        c.caps = grant();
        c.input = input.to_string();
        c.special = Some(Special::HttpServers);
        c.expect = expect;
        c
    };
    let granted = "http://127.0.0.1:{http}/ok/item";
    out.push(case(
        "http.granted-get",
        Half::Correct,
        serde_json::json!({ "url": granted }),
        output(HTTP_GRANTED_OUTPUT),
    ));
    let denied = || output(r#"{"error":"HttpRequestDenied"}"#);
    let refusals: [(&str, serde_json::Value); 9] = [
        (
            "http.other-path",
            serde_json::json!({"url": "http://127.0.0.1:{http}/secret"}),
        ),
        // `/ok/**` ends at a segment boundary: `/okay` is not under it.
        (
            "http.sibling-prefix",
            serde_json::json!({"url": "http://127.0.0.1:{http}/okay"}),
        ),
        (
            "http.other-port",
            serde_json::json!({"url": "http://127.0.0.1:{http_other}/ok/item"}),
        ),
        // Without a body: `fetch` writes a body only after the request
        // was handed over, and a refused one's body stream is closed.
        (
            "http.method-not-granted",
            serde_json::json!({"url": granted, "method": "POST"}),
        ),
        // The guest sends the path as written: the host must refuse the
        // segment, not resolve it to `/secret` (nor match it as `/ok/…`).
        (
            "http.dotdot-segment",
            serde_json::json!({"url": "http://127.0.0.1:{http}/ok/../secret"}),
        ),
        (
            "http.encoded-dotdot-segment",
            serde_json::json!({"url": "http://127.0.0.1:{http}/ok/%2e%2e/secret"}),
        ),
        // The granted address as userinfo, in front of the other port's.
        (
            "http.userinfo",
            serde_json::json!({"url": "http://127.0.0.1:{http}@127.0.0.1:{http_other}/ok/item"}),
        ),
        // HTTPS where only `http://` is granted (the scheme is part of
        // the grant, both ways).
        (
            "http.scheme-not-granted",
            serde_json::json!({"url": "https://127.0.0.1:{http}/ok/item"}),
        ),
        // A name for the granted address: the grant names the address,
        // and a name is not it, whatever it resolves to.
        (
            "http.name-for-granted-address",
            serde_json::json!({"url": "http://localhost:{http}/ok/item"}),
        ),
    ];
    for (name, input) in refusals {
        out.push(case(name, Half::Holds, input, denied()));
    }
}

/// A part of the residue case: `guest` as a p2 component with
/// `compute:pure`.
pub(super) fn residue_part(guest: &'static str) -> Case {
    base(guest.to_string(), Half::Holds, World::P2, guest)
}

/// `code:exec` through `run-tool`: the command runs in the OS sandbox
/// (Landlock, seccomp); its answer is the case's output.
fn exec_cases(out: &mut Vec<Case>) {
    let exec = |name: &str, caps: Vec<Cap>, tools: &[&'static str], input: &str, expect: Expect| {
        let mut c = base(
            format!("{name}.p2"),
            Half::Holds,
            World::P2,
            "run_tool.wasm",
        );
        c.caps = caps;
        c.tools = tools.iter().map(|t| t.to_string()).collect();
        c.input = input.to_string();
        // What confines a command's files is Landlock: without it, the
        // file cases are skipped (the gate's refusals need no layer).
        if matches!(expect, Expect::Command { status: 1, .. }) {
            c.layer = Some("landlock");
        }
        c.expect = expect;
        c
    };
    let cat = || vec![cap("code:exec", "cat"), cap("fs:read", "**")];
    let touch = || vec![cap("code:exec", "touch"), cap("fs:write", "out/**")];
    let denied = || Expect::Command {
        status: 1,
        stdout: String::new(),
        stderr_suffix: ": Permission denied\n".to_string(),
    };
    let not_granted = |program: &str| {
        output(&format!(
            "error {{\"denied\":{{\"code\":\"TOOL_NOT_GRANTED\",\"reason\":\"`code:exec` is granted for `cat`, not `{program}`\"}}}}"
        ))
    };
    out.push(exec(
        "exec.read-outside-roots",
        cat(),
        &["cat"],
        r#"{"program":"cat","args":["/etc/hostname"]}"#,
        denied(),
    ));
    out.push(exec(
        "exec.write-outside-write-roots",
        touch(),
        &["touch"],
        r#"{"program":"touch","args":["{outside}/made-by-touch"]}"#,
        denied(),
    ));
    let mut ls = exec(
        "exec.program-not-granted",
        cat(),
        &["cat"],
        r#"{"program":"ls","args":["/"]}"#,
        not_granted("ls"),
    );
    if let Expect::Output { exit, .. } = &mut ls.expect {
        *exit = 1;
    }
    out.push(ls);
    let mut sh = exec(
        "exec.shell-not-granted",
        cat(),
        &["cat"],
        r#"{"program":"sh","args":["-c","cat /etc/hostname"]}"#,
        not_granted("sh"),
    );
    if let Expect::Output { exit, .. } = &mut sh.expect {
        *exit = 1;
    }
    out.push(sh);
    // The OS sandbox's refusals of what no command needs: a new
    // namespace (util-linux's `unshare`), a UNIX socket (`logger` sending
    // to a socket path).
    let mut ns = exec(
        "exec.namespace-unshare",
        vec![cap("code:exec", "unshare")],
        &["unshare"],
        r#"{"program":"unshare","args":["-U","true"]}"#,
        Expect::Command {
            status: 1,
            stdout: String::new(),
            stderr_suffix: "unshare: unshare failed: Operation not permitted\n".to_string(),
        },
    );
    ns.layer = Some("seccomp");
    out.push(ns);
    let mut unix = exec(
        "exec.unix-socket",
        vec![cap("code:exec", "logger")],
        &["logger"],
        r#"{"program":"logger","args":["--socket-errors=on","-u","{outside}/log.sock","probe"]}"#,
        // Not `ENOENT` (no socket is there): the socket is refused first.
        Expect::Command {
            status: 1,
            stdout: String::new(),
            stderr_suffix: "/outside/log.sock: Operation not permitted\n".to_string(),
        },
    );
    unix.layer = Some("seccomp");
    out.push(unix);
    // `ptrace` has no program on a stock system that tries it: the
    // native probe built with gatehouse does (skipped where it is not
    // installed beside the binary).
    let mut ptrace = exec(
        "exec.ptrace",
        vec![cap("code:exec", "{probe}"), cap("fs:read", "**")],
        &["{probe}"],
        r#"{"program":"{probe}","args":["ptrace"]}"#,
        Expect::Command {
            status: 12,
            stdout: "ptrace: Operation not permitted (os error 1)\n".to_string(),
            stderr_suffix: String::new(),
        },
    );
    ptrace.layer = Some("seccomp");
    out.push(ptrace);
    let mut ok = exec(
        "ok.exec-granted-program",
        cat(),
        &["cat"],
        r#"{"program":"cat","args":["a.txt"]}"#,
        Expect::Command {
            status: 0,
            stdout: "workspace file".to_string(),
            stderr_suffix: String::new(),
        },
    );
    ok.half = Half::Correct;
    out.push(ok);
}
