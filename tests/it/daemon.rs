//! Issue 46: `gatehouse daemon` and `gatehouse connect`, with the daemon
//! under one account (the test's, root) and each agent under another
//! (setpriv): who an agent is comes from the socket, what it may do from
//! the configuration, and an approval from a person's account only.

use std::path::PathBuf;
use std::process::{Child, Stdio};

use serde_json::{json, Value};

use crate::support::guests::component;
use crate::support::serve::Client;
use crate::support::{s, Env};

/// The agent accounts: `agent` is nobody, `other` the uid below it; the
/// third is mapped to no actor.
const AGENT: u32 = 65534;
const OTHER: u32 = 65533;
const STRANGER: u32 = 65532;

/// A running `gatehouse daemon`; SIGTERM and a wait when dropped.
struct Daemon {
    child: Child,
    socket: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let pid = i32::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// The environment of a daemon: its tree readable by every account (as a
/// machine's `/run` and `/srv` would be), the executors `hello` and
/// `write-file`, and `config` after `executor_dirs`.
fn setup(config: &str) -> (Env, PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        gatehouse::host::current_uid(),
        0,
        "this test needs root to switch accounts"
    );
    let env = Env::new();
    std::fs::set_permissions(env.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for (name, wasm, caps) in [
        (
            "hello",
            "hello",
            "[[capabilities]]\nname = \"compute:pure\"\n",
        ),
        (
            "spin",
            "spin",
            "[[capabilities]]\nname = \"compute:pure\"\n",
        ),
        (
            "write-file",
            "write-file",
            "[[capabilities]]\nname = \"fs:write\"\ntarget = \"out/**\"\n",
        ),
    ] {
        env.write(
            &format!("execs/{name}.toml"),
            &format!(
                "name = \"{name}\"\ndescription = \"{name}\"\ncomponent = \"{}\"\n{caps}",
                s(&component(wasm))
            ),
        );
    }
    let a = env.mkdir("ws-a");
    let b = env.mkdir("ws-b");
    env.mkdir("ws-a/out");
    env.mkdir("ws-a/sub");
    env.mkdir("ws-b/out");
    let root = env.root();
    env.write(
        "config/gatehouse/gatehouse.toml",
        &format!(
            "executor_dirs = [\"{}\"]\n{}",
            s(&root.join("execs")),
            config.replace("$A", s(&a)).replace("$B", s(&b))
        ),
    );
    (env, a, b)
}

/// Two actors: `agent` (nobody; hello and write-file; `ws-a`) and `other`
/// (hello only; `ws-b`), then `extra`.
fn two_actors(extra: &str) -> String {
    format!(
        "level = \"Supervised\"\n\
         [actors.agent]\nchannel = \"cli\"\nsender = \"agent\"\nskills = [\"hello\", \"write-file\"]\n\
         uids = [{AGENT}]\nworkspaces = [{{ path = \"$A\", mode = \"read-write\" }}]\n\
         [actors.other]\nchannel = \"cli\"\nsender = \"other\"\nskills = [\"hello\"]\n\
         uids = [{OTHER}]\nworkspaces = [{{ path = \"$B\", mode = \"read-write\" }}]\n{extra}"
    )
}

/// Starts the daemon of `env` on `<root>/run/mcp.sock` and waits for it
/// to listen.
fn start(env: &Env) -> Daemon {
    start_with(env, &[])
}

/// [`start`] with `extra` arguments.
fn start_with(env: &Env, extra: &[&str]) -> Daemon {
    let socket = env.mkdir("run").join("mcp.sock");
    let mut child = env
        .command()
        .args(["daemon", "--socket", s(&socket)])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the daemon");
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
    assert!(
        line.contains("daemon serving mcp on"),
        "the daemon did not start: {line}"
    );
    // Keep draining its log.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    Daemon { child, socket }
}

/// `gatehouse ARGS` as the account `uid`, stdin closed.
fn as_account(env: &Env, uid: u32, args: &[&str]) -> (i32, String, String) {
    let out = env
        .as_account(uid, env!("CARGO_BIN_EXE_gatehouse"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An MCP session of the account `uid` through `gatehouse connect`.
fn agent(env: &Env, uid: u32, daemon: &Daemon, extra: &[&str]) -> Client {
    let mut cmd = env.as_account(uid, env!("CARGO_BIN_EXE_gatehouse"));
    cmd.args(["connect", "--socket", s(&daemon.socket)])
        .args(extra);
    Client::over(cmd, true)
}

fn tool_names(c: &mut Client) -> Vec<String> {
    c.tools()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn entry_status(env: &Env, id: &str) -> String {
    let list = env.run(&["approvals", "list", "--all"]);
    list.expect(0);
    list.json_lines()
        .into_iter()
        .find(|e| e["id"] == id)
        .map(|e| e["status"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

/// The agent holds the client: it answers every form "allow and
/// remember, forever". Under the daemon its client is never asked,
/// nothing is written, no grant is recorded; its own `approvals allow`
/// over the socket is refused (ANSWER_BY_ITS_ACTOR), as is another
/// agent's (ANSWER_NOT_A_PERSON); the person's answer lets the retry run.
#[test]
fn daemon_an_agent_cannot_approve_itself_and_a_person_over_the_socket_can() {
    let (env, ws, _) = setup(&two_actors(""));
    let daemon = start(&env);
    let mut c = agent(&env, AGENT, &daemon, &[]);
    assert_eq!(tool_names(&mut c), ["hello", "write-file"]);
    let mut asked = 0;
    let input = json!({"path": "out/a.txt", "content": "approved"});
    let r = c.call("write-file", input.clone(), &mut |_| {
        asked += 1;
        json!({"action": "accept", "content": {"decision": "allow_and_remember", "expires_in": "forever"}})
    });
    assert_eq!(asked, 0, "the agent's client was asked");
    assert_eq!(r["isError"], true, "{r:#}");
    assert_eq!(r["structuredContent"]["code"], "APPROVAL_REQUIRED", "{r:#}");
    let id = r["structuredContent"]["pending_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(id.starts_with("p-") && id.len() == 14, "{id}");
    assert!(!ws.join("out/a.txt").exists());
    assert!(env.run(&["grants", "list"]).json_lines().is_empty());

    let socket = s(&daemon.socket);
    // The agent answers its own request: refused by its account.
    let (code, _, err) = as_account(
        &env,
        AGENT,
        &[
            "approvals",
            "--socket",
            socket,
            "allow",
            &id,
            "--yes",
            "--remember",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("refused: ANSWER_BY_ITS_ACTOR: uid `{AGENT}` is an account of actor `agent`, whose turn waits for `{id}`")),
        "{err}"
    );
    // Another agent, and an account no actor has: not a person's.
    for uid in [OTHER, STRANGER] {
        let (code, _, err) = as_account(
            &env,
            uid,
            &["approvals", "--socket", socket, "allow", &id, "--yes"],
        );
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains(&format!(
                "refused: ANSWER_NOT_A_PERSON: uid `{uid}` is not one of `[approvals] people`"
            )),
            "{err}"
        );
        let (code, _, err) = as_account(&env, uid, &["approvals", "--socket", socket, "list"]);
        assert_eq!(code, 2, "{err}");
    }
    assert_eq!(entry_status(&env, &id), "pending");
    assert!(env.run(&["grants", "list"]).json_lines().is_empty());
    assert!(!ws.join("out/a.txt").exists());

    // The person (the daemon's own account: `people`'s default) lists and
    // answers over the socket, without a terminal.
    let list = env.run(&["approvals", "--socket", socket, "list"]);
    list.expect(0);
    let listed = list.json_lines();
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["actor"], "agent");
    let allow = env.run(&["approvals", "--socket", socket, "allow", &id, "--yes"]);
    allow.expect(0);
    let answered = &allow.json_lines()[0];
    assert_eq!(answered["status"], "allowed", "{answered:#}");
    assert_eq!(answered["answered_by"], "uid:0", "{answered:#}");
    // The retry of the same call runs, once.
    let r = c.call("write-file", input, &mut |_| panic!("asked"));
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(std::fs::read(ws.join("out/a.txt")).unwrap(), b"approved");
    assert!(env.run(&["grants", "list"]).json_lines().is_empty());
    assert_eq!(c.finish(), 0);
}

/// `connect` narrows and never widens: a level above the actor's, a
/// workspace outside its roots (or one that does not resolve) are exit 3
/// before any MCP traffic; a directory under its root is served there;
/// an account no actor lists is refused (exit 2, CALLER_NOT_MAPPED).
#[test]
fn daemon_connect_narrows_never_widens_and_an_unknown_account_is_refused() {
    let (env, a, b) = setup(&two_actors(""));
    let daemon = start(&env);
    let socket = s(&daemon.socket);
    let connect = |uid: u32, extra: &[&str]| {
        let mut args = vec!["connect", "--socket", socket];
        args.extend_from_slice(extra);
        as_account(&env, uid, &args)
    };
    let (code, out, err) = connect(AGENT, &["--level", "Full"]);
    assert_eq!(code, 3, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("refused: level `Full` is above actor `agent`'s `Supervised`: a client may lower its level, never raise it"),
        "{err}"
    );
    let (code, out, err) = connect(AGENT, &["--workspace", s(&b)]);
    assert_eq!(code, 3, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains(&format!(
            "refused: WORKSPACE_NOT_GRANTED: workspace `{}` is not one of actor `agent`'s workspace roots nor under one",
            s(&b)
        )),
        "{err}"
    );
    // Out of the root by `..`: resolved first, then refused.
    let escape = format!("{}/../ws-b", s(&a));
    let (code, _, err) = connect(AGENT, &["--workspace", &escape]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("WORKSPACE_NOT_GRANTED"), "{err}");
    let (code, _, err) = connect(AGENT, &["--level", "Root"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("unknown level `Root`"), "{err}");
    let (code, out, err) = connect(STRANGER, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains(&format!(
            "refused: CALLER_NOT_MAPPED: uid `{STRANGER}` is in no actor's `uids`"
        )),
        "{err}"
    );

    // Narrowed: a directory under the root, a lower level. The write
    // lands there, and at ReadOnly the same call is refused.
    let sub = a.join("sub");
    std::fs::create_dir_all(sub.join("out")).unwrap();
    let mut c = agent(
        &env,
        AGENT,
        &daemon,
        &["--workspace", s(&sub), "--level", "ReadOnly"],
    );
    let r = c.call(
        "write-file",
        json!({"path": "out/x.txt", "content": "x"}),
        &mut |_| panic!("asked"),
    );
    assert_eq!(r["isError"], true, "{r:#}");
    assert_eq!(r["structuredContent"]["code"], "CAPABILITY_DENIED", "{r:#}");
    assert!(!sub.join("out/x.txt").exists());
    assert_eq!(c.finish(), 0);
}

/// Two agents at once, as two actors: each sees its own tools, writes in
/// its own workspace, and reads its own history only.
#[test]
fn daemon_two_agents_at_once_see_only_their_own_tools_workspaces_and_history() {
    let config = two_actors("[serve]\ntools = [\"history\"]\n")
        .replace("[actors.agent]\n", "[actors.agent]\nlevel = \"Full\"\n");
    let (env, a, b) = setup(&config);
    let daemon = start(&env);
    let mut one = agent(&env, AGENT, &daemon, &[]);
    let mut two = agent(&env, OTHER, &daemon, &[]);
    assert_eq!(
        tool_names(&mut one),
        ["hello", "write-file", "gatehouse_history"]
    );
    assert_eq!(tool_names(&mut two), ["hello", "gatehouse_history"]);
    let r = one.call(
        "write-file",
        json!({"path": "out/one.txt", "content": "one"}),
        &mut |_| panic!("asked"),
    );
    assert_eq!(r["isError"], false, "{r:#}");
    let r = two.call("hello", json!({"from": "two"}), &mut |_| panic!("asked"));
    assert_eq!(r["isError"], false, "{r:#}");
    let r = two.call(
        "write-file",
        json!({"path": "out/two.txt", "content": "two"}),
        &mut |_| panic!("asked"),
    );
    assert_eq!(r["error"]["message"], "unknown tool `write-file`", "{r:#}");
    assert_eq!(std::fs::read(a.join("out/one.txt")).unwrap(), b"one");
    assert!(!b.join("out/one.txt").exists());
    assert!(!b.join("out/two.txt").exists());
    let history = |c: &mut Client| -> Vec<Value> {
        let r = c.call("gatehouse_history", json!({}), &mut |_| panic!("asked"));
        r["structuredContent"]["turns"].as_array().unwrap().clone()
    };
    let h1 = history(&mut one);
    let h2 = history(&mut two);
    assert_eq!(h1.len(), 1, "{h1:#?}");
    assert_eq!(h1[0]["executor"], "write-file", "{h1:#?}");
    assert_eq!(h2.len(), 1, "{h2:#?}");
    assert_eq!(h2[0]["executor"], "hello", "{h2:#?}");
    assert_eq!(one.finish(), 0);
    assert_eq!(two.finish(), 0);
}

/// The daemon refuses to start without a caller, and on a path that
/// holds something else than a socket, leaving it as it is; a second
/// daemon on a live socket is refused.
#[test]
fn daemon_refuses_a_configuration_without_callers_and_a_path_that_is_not_a_socket() {
    let (env, _, _) =
        setup("[actors.main]\nworkspaces = [{ path = \"$A\", mode = \"read-write\" }]\n");
    let run = env.run(&["daemon", "--socket", s(&env.path("run/x.sock"))]);
    run.expect_err(3, &["no actor has `uids`"]);
    let (env, _, _) = setup(&two_actors(""));
    let file = env.write("run/not-a-socket", "keep me");
    let run = env.run(&["daemon", "--socket", s(&file)]);
    run.expect_err(3, &[&format!("`{}` exists and is not a socket", s(&file))]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    let daemon = start(&env);
    let run = env.run(&["daemon", "--socket", s(&daemon.socket)]);
    run.expect_err(1, &["a daemon already listens on this socket"]);
    let run = env.run(&[
        "daemon",
        "--socket",
        s(&daemon.socket),
        "--concurrency",
        "0",
    ]);
    run.expect_err(3, &["`--concurrency` must be at least 1"]);
}

/// A configuration that maps one account to two actors is refused, by
/// the field.
#[test]
fn daemon_one_account_is_one_actor() {
    let env = Env::bare();
    env.write(
        "config/gatehouse/gatehouse.toml",
        "[actors.a]\nuids = [1001]\n[actors.b]\nuids = [1002, 1001]\n",
    );
    env.run(&["daemon", "--socket", "/nonexistent/x.sock"])
        .expect_err(
        3,
        &["field `actors.b.uids[1]`: uid `1001` is already actor `a`'s: one account is one actor"],
    );
}

/// The units under `contrib/systemd/` pass `systemd-analyze verify`
/// (where it is present), and the service runs the daemon on the socket
/// unit's path as an account of its own, the file system read-only.
#[test]
fn daemon_the_systemd_units_verify_and_agree() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/systemd");
    let service = std::fs::read_to_string(dir.join("gatehouse.service")).unwrap();
    let socket = std::fs::read_to_string(dir.join("gatehouse.socket")).unwrap();
    let value = |text: &str, key: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key}="))
            .to_string()
    };
    let path = value(&socket, "ListenStream");
    assert_eq!(
        value(&service, "ExecStart"),
        format!("/usr/local/bin/gatehouse daemon --socket {path}")
    );
    assert_eq!(value(&service, "User"), "gatehouse");
    assert_eq!(value(&service, "ProtectSystem"), "strict");
    assert_eq!(value(&service, "NoNewPrivileges"), "yes");
    assert_eq!(value(&service, "StateDirectoryMode"), "0700");
    let Ok(out) = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
    else {
        eprintln!("systemd-analyze is not installed: the units are not verified");
        return;
    };
    assert!(out.status.success());
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("gatehouse.service"),
        service.replace("/usr/local/bin/gatehouse", env!("CARGO_BIN_EXE_gatehouse")),
    )
    .unwrap();
    std::fs::write(tmp.path().join("gatehouse.socket"), &socket).unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(tmp.path().join("gatehouse.socket"))
        .arg(tmp.path().join("gatehouse.service"))
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Socket activation for real: a listening socket handed over as
/// descriptor 3 with `LISTEN_PID` and `LISTEN_FDS` (as systemd does, here
/// by a Python launcher that execs the daemon in its own process) is the
/// one served, and is left in place when the daemon stops.
#[test]
fn daemon_serves_the_socket_systemd_hands_it() {
    let (env, _, _) = setup(&two_actors(""));
    let socket = env.mkdir("run").join("activated.sock");
    let launcher = "import os, socket, sys\n\
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
        s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666); s.listen(16)\n\
        os.dup2(s.fileno(), 3); os.set_inheritable(3, True)\n\
        os.environ['LISTEN_PID'] = str(os.getpid()); os.environ['LISTEN_FDS'] = '1'\n\
        os.execv(sys.argv[2], [sys.argv[2], 'daemon', '--socket', sys.argv[1]])\n";
    let mut cmd = std::process::Command::new("python3");
    for (k, v) in env.command().get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    cmd.args(["-c", launcher, s(&socket), env!("CARGO_BIN_EXE_gatehouse")])
        .current_dir(env.root())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
    assert!(line.contains("daemon serving mcp on"), "{line}");
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let daemon = Daemon {
        child,
        socket: socket.clone(),
    };
    let mut c = agent(&env, AGENT, &daemon, &[]);
    let r = c.call("hello", json!({"x": 1}), &mut |_| panic!("asked"));
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(c.finish(), 0);
    drop(daemon);
    // The socket is systemd's: still there.
    assert!(socket.exists());
}

/// The official Python MCP SDK (`mcp`, from PyPI, installed by
/// `setup.sh --all`) drives `gatehouse connect` as its stdio server, as an
/// agent's account: it initializes, lists the actor's tools and calls
/// `hello`.
#[test]
fn daemon_the_python_sdk_drives_connect() {
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("guests/target/toolchains/mcp-client/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run ./setup.sh --all",
        python.display()
    );
    let (env, _, _) = setup(&two_actors(""));
    let daemon = start(&env);
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/python/mcp_connect.py");
    let out = std::process::Command::new(&python)
        .arg(&script)
        .args([
            env!("CARGO_BIN_EXE_gatehouse"),
            s(&daemon.socket),
            &AGENT.to_string(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(v["server"], "gatehouse");
    assert_eq!(v["tools"], json!(["hello", "write-file"]));
    assert_eq!(v["result"]["isError"], false, "{v:#}");
    assert_eq!(
        v["result"]["structuredContent"],
        json!({"echo": {"from": "python"}}),
        "{v:#}"
    );
}

/// Where the operator says the client's interface is the person's
/// (`[approvals] elicitation = "remember"`), the daemon asks the client,
/// and a remembered answer lasts at most `remember_max`, `forever`
/// included.
#[test]
fn daemon_an_elicited_remember_lasts_at_most_remember_max() {
    let (env, ws, _) = setup(&two_actors(
        "[approvals]\nelicitation = \"remember\"\nremember_max = \"1h\"\n",
    ));
    let daemon = start(&env);
    let mut c = agent(&env, AGENT, &daemon, &[]);
    let before = gatehouse::state::grants::now_utc();
    let mut asked = 0;
    let r = c.call(
        "write-file",
        json!({"path": "out/a.txt", "content": "remembered"}),
        &mut |_| {
            asked += 1;
            json!({"action": "accept", "content": {"decision": "allow_and_remember", "expires_in": "forever"}})
        },
    );
    assert_eq!(asked, 1);
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(std::fs::read(ws.join("out/a.txt")).unwrap(), b"remembered");
    let grants = env.run(&["grants", "list"]).json_lines();
    assert_eq!(grants.len(), 1, "{grants:#?}");
    assert_eq!(grants[0]["sender_id"], "agent");
    let lasts = gatehouse::policy::UtcTime::parse(grants[0]["expires_at"].as_str().unwrap())
        .unwrap()
        .0
        - before.0;
    assert!((3600..3660).contains(&lasts), "{lasts}");
    assert_eq!(c.finish(), 0);
}

/// SIGTERM drains the daemon as a client's disconnect does for `serve`:
/// a call still running is cancelled (its record says `TURN_CANCELLED`)
/// long before its deadline, the daemon exits 0, the socket is removed,
/// and the agent's `connect` ends.
#[test]
fn daemon_sigterm_cancels_running_calls_and_removes_the_socket() {
    let (env, _, _) = setup(&two_actors("").replace(
        "skills = [\"hello\", \"write-file\"]",
        "skills = [\"hello\", \"spin\"]",
    ));
    let mut daemon = start_with(&env, &["--deadline-ms", "600000"]);
    let mut c = agent(&env, AGENT, &daemon, &[]);
    // The actor's host is open (a first call), then `spin` is called.
    let r = c.call("hello", json!({}), &mut |_| panic!("asked"));
    assert_eq!(r["isError"], false, "{r:#}");
    let id = c.next;
    c.next += 1;
    c.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                  "params": {"name": "spin", "arguments": {}}}));
    // The guest is spinning when the daemon is told to stop.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let pid = i32::try_from(daemon.child.id()).unwrap();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = daemon.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(!daemon.socket.exists());
    // The call's answer: cancelled.
    let answer = c.recv();
    assert_eq!(answer["id"], id, "{answer:#}");
    assert_eq!(
        answer["result"]["structuredContent"]["code"], "TURN_CANCELLED",
        "{answer:#}"
    );
    let audit = std::fs::read_to_string(env.state_dir().join("audit.jsonl")).unwrap();
    let last: Value = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
    assert_eq!(last["executor"], "spin", "{audit}");
    assert_eq!(last["status"], "TURN_CANCELLED", "{last:#}");
    // The agent's side ends with the connection.
    assert_eq!(c.finish(), 0);
}

/// `daemon --listen`: streamable HTTP beside the socket, where each actor
/// is known by its own bearer token (HTTP has no peer credentials), made
/// at start in the daemon's state with mode 0600. A request without a
/// token, or with one no actor has, is refused (401); a foreign origin
/// too (403); an address that is not loopback is refused (exit 3).
#[test]
fn daemon_over_http_each_actor_is_its_own_token() {
    use crate::support::serve::HttpServer;
    use std::io::BufRead;
    use std::os::unix::fs::PermissionsExt;
    let (env, _, _) = setup(&two_actors(""));
    env.run(&[
        "daemon",
        "--socket",
        s(&env.path("run/x.sock")),
        "--listen",
        "0.0.0.0:0",
    ])
    .expect_err(3, &["refusing to listen on `0.0.0.0:0`"]);
    let socket = env.mkdir("run").join("mcp.sock");
    let mut child = env
        .command()
        .args(["daemon", "--socket", s(&socket), "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let addr = loop {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "no address");
        if let Some(rest) = line
            .trim()
            .strip_prefix("gatehouse: daemon serving mcp on http://")
        {
            break rest.strip_suffix("/mcp").unwrap().to_string();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let http = HttpServer { child, addr };
    let tokens = env.state_dir().join("daemon-tokens");
    let token = |actor: &str| {
        let path = tokens.join(format!("{actor}.token"));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
        std::fs::read_to_string(path).unwrap().trim().to_string()
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "it", "version": "0"}}});
    let tools_of = |token: &str| -> Vec<String> {
        let auth = format!("Bearer {token}");
        let r = http.post(&[("Authorization", &auth)], &init, Some(1));
        assert_eq!(r.status, 200, "{}", r.text);
        let session = r.head["mcp-session-id"].clone();
        let headers = [
            ("Authorization", auth.as_str()),
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", "2025-06-18"),
        ];
        http.post(
            &headers,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            None,
        );
        let r = http.post(
            &headers,
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            Some(2),
        );
        r.message.unwrap()["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(tools_of(&token("agent")), ["hello", "write-file"]);
    assert_eq!(tools_of(&token("other")), ["hello"]);
    assert_eq!(http.post(&[], &init, Some(1)).status, 401);
    let wrong = format!("Bearer {}", "0".repeat(64));
    assert_eq!(
        http.post(&[("Authorization", &wrong)], &init, Some(1))
            .status,
        401
    );
    let auth = format!("Bearer {}", token("agent"));
    let r = http.post(
        &[("Authorization", &auth), ("Origin", "http://evil.example")],
        &init,
        Some(1),
    );
    assert_eq!(r.status, 403);
    drop(http);
}

/// A client narrowing to ever new directories does not open ever new
/// hosts: an actor is served in at most 16 places at once, the 17th
/// refused by name, and the places already open still serve.
#[test]
fn daemon_an_actor_is_served_in_at_most_sixteen_places() {
    let (env, a, _) = setup(&two_actors(""));
    let daemon = start(&env);
    let connect = |dir: &std::path::Path| {
        as_account(
            &env,
            AGENT,
            &[
                "connect",
                "--socket",
                s(&daemon.socket),
                "--workspace",
                s(dir),
            ],
        )
    };
    for n in 0..16 {
        let dir = a.join(format!("d{n}"));
        std::fs::create_dir_all(&dir).unwrap();
        let (code, _, err) = connect(&dir);
        assert_eq!(code, 0, "{n}: {err}");
    }
    let dir = a.join("d16");
    std::fs::create_dir_all(&dir).unwrap();
    let (code, _, err) = connect(&dir);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("actor `agent` is already served in 16 workspaces and levels, the most this daemon keeps"),
        "{err}"
    );
    let (code, _, err) = connect(&a.join("d3"));
    assert_eq!(code, 0, "{err}");
}

/// The person's `deny` over the socket: the agent's retry is refused
/// with `APPROVAL_REFUSED`, once, and nothing is written.
#[test]
fn daemon_a_person_s_deny_over_the_socket_refuses_the_retry() {
    let (env, ws, _) = setup(&two_actors(""));
    let daemon = start(&env);
    let mut c = agent(&env, AGENT, &daemon, &[]);
    let input = json!({"path": "out/d.txt", "content": "denied"});
    let r = c.call("write-file", input.clone(), &mut |_| panic!("asked"));
    let id = r["structuredContent"]["pending_id"]
        .as_str()
        .unwrap()
        .to_string();
    // Without `--yes`, the entry is shown on the terminal as the local
    // queue shows it (the identity, the items), and a `n` leaves it be.
    let shown = env.run_on_terminal(
        &["approvals", "--socket", s(&daemon.socket), "allow", &id],
        &[],
        "n\n",
    );
    assert_eq!(shown.code, 1, "{shown:#?}");
    assert!(
        shown.stdout.contains(&format!(
            "pending approval `{id}`: actor `agent` (cli:agent) runs executor `write-file`"
        )) && shown.stdout.contains("`fs:write` on `")
            && shown.stdout.contains("allow once? [y/N]"),
        "{shown:#?}"
    );
    let deny = env.run(&[
        "approvals",
        "--socket",
        s(&daemon.socket),
        "deny",
        &id,
        "--yes",
    ]);
    deny.expect(0);
    assert_eq!(deny.json_lines()[0]["status"], "denied");
    let r = c.call("write-file", input, &mut |_| panic!("asked"));
    assert_eq!(r["structuredContent"]["code"], "APPROVAL_REFUSED", "{r:#}");
    assert!(!ws.join("out/d.txt").exists());
    // Unknown ids are named.
    let run = env.run(&[
        "approvals",
        "--socket",
        s(&daemon.socket),
        "allow",
        "p-000000000000",
        "--yes",
    ]);
    run.expect_err(3, &["p-000000000000"]);
    assert_eq!(c.finish(), 0);
}

/// An account of the waiting actor never answers, even when
/// `[approvals] people` lists it; another listed person does.
#[test]
fn daemon_the_waiting_actor_s_account_never_answers_even_if_listed() {
    let (env, ws, _) = setup(&two_actors(&format!(
        "[approvals]\npeople = [{AGENT}, {OTHER}]\n"
    )));
    let daemon = start(&env);
    let mut c = agent(&env, AGENT, &daemon, &[]);
    let input = json!({"path": "out/l.txt", "content": "listed"});
    let r = c.call("write-file", input.clone(), &mut |_| panic!("asked"));
    let id = r["structuredContent"]["pending_id"]
        .as_str()
        .unwrap()
        .to_string();
    let socket = s(&daemon.socket);
    let (code, _, err) = as_account(
        &env,
        AGENT,
        &["approvals", "--socket", socket, "allow", &id, "--yes"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("ANSWER_BY_ITS_ACTOR"), "{err}");
    // The daemon's own account is no longer a person here.
    let run = env.run(&["approvals", "--socket", socket, "allow", &id, "--yes"]);
    run.expect_err(2, &["ANSWER_NOT_A_PERSON: uid `0`"]);
    // Another listed account answers.
    let (code, out, err) = as_account(
        &env,
        OTHER,
        &["approvals", "--socket", socket, "allow", &id, "--yes"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"status\":\"allowed\""), "{out}");
    let r = c.call("write-file", input, &mut |_| panic!("asked"));
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(std::fs::read(ws.join("out/l.txt")).unwrap(), b"listed");
    assert_eq!(c.finish(), 0);
}
