//! Issue 15, part 1: the pending-approval queue. `gatehouse run` without a
//! terminal queues what needs approval (exit 4, `APPROVAL_REQUIRED`, the
//! pending id); `gatehouse approvals allow ID` lets the next turn that
//! matches it exactly run once; a swapped input matches nothing.

use serde_json::{json, Value};

use crate::support::guests::{component, guest, manifest, output, run_json};
use crate::support::{s, Env};

fn sha(text: &str) -> String {
    gatehouse::policy::snapshot::sha256_hex(text.as_bytes())
}

fn list(env: &Env, all: bool) -> Vec<Value> {
    let mut args = vec!["approvals", "list"];
    if all {
        args.push("--all");
    }
    let run = env.run(&args);
    run.expect(0);
    run.json_lines()
}

fn denials(env: &Env) -> Vec<Value> {
    std::fs::read_to_string(env.state_dir().join("denials.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const A: &str = r#"{"path":"out/a.txt","content":"approved"}"#;
const B: &str = r#"{"path":"out/a.txt","content":"swapped!"}"#;

/// A queued `write-file` turn under Supervised: its pending id.
fn queued(env: &Env, ws: &std::path::Path, input: &str) -> String {
    let (run, v) = run_json(env, &guest("write-file"), ws, "Supervised", input, &[]);
    run.expect(4);
    assert_eq!(v["code"], "APPROVAL_REQUIRED", "{v:#}");
    let id = v["pending_id"].as_str().unwrap().to_string();
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.ends_with(&format!(
            "; queued as pending approval `{id}`, which a person can answer with `gatehouse approvals`"
        )),
        "{v:#}"
    );
    // The agent is not told how to approve itself.
    assert!(!reason.contains("approvals allow"), "{reason}");
    id
}

#[test]
fn approvals_a_run_without_a_terminal_is_queued_and_an_allow_runs_it_once() {
    let env = Env::bare();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let id = queued(&env, &ws, A);
    assert!(!ws.join("out/a.txt").exists());

    // The entry, exactly: who, what, which input, under which policy.
    let entries = list(&env, false);
    assert_eq!(entries.len(), 1, "{entries:#?}");
    let e = &entries[0];
    let d = &denials(&env)[0];
    assert_eq!(d["code"], "APPROVAL_REQUIRED");
    assert_eq!(d["pending_id"], id.as_str());
    let out_glob = format!("{}/out/**", s(&ws));
    let component_sha =
        gatehouse::policy::snapshot::sha256_hex(&std::fs::read(component("write-file")).unwrap());
    let mut fixed = e.clone();
    for k in ["queued_at", "expires_at"] {
        fixed.as_object_mut().unwrap().remove(k);
    }
    fixed["items"][0]
        .as_object_mut()
        .unwrap()
        .remove("reason")
        .unwrap();
    assert_eq!(
        fixed,
        json!({
            "id": id,
            "turn": d["turn"],
            "actor": "main",
            "identity": {"channel": "cli", "sender_id": "tester"},
            "executor": "write-file",
            "executor_sha256": component_sha,
            "items": [{"capability": "fs:write", "target": out_glob,
                       "critical": true, "rememberable": true}],
            "input_sha256": sha(A),
            "args_sha256": sha("[]"),
            "definitionHash": d["definitionHash"],
            "policyHash": d["policyHash"],
            "status": "pending",
            "answered_at": null,
            "answered_by": null,
            "consumed_by": null,
            "queued_uid": gatehouse::host::current_uid(),
            "input_preview": A,
            "input_bytes": A.len(),
        })
    );
    // Expires 24 h after it was queued.
    let queued_at = gatehouse::policy::UtcTime::parse(e["queued_at"].as_str().unwrap()).unwrap();
    let expires_at = gatehouse::policy::UtcTime::parse(e["expires_at"].as_str().unwrap()).unwrap();
    assert_eq!(expires_at.0 - queued_at.0, 86_400);

    // Without a terminal nothing is allowed, `--yes` included: the
    // account that queued it is this one.
    for extra in [&[][..], &["--yes"][..]] {
        let mut args = vec!["approvals", "allow", id.as_str()];
        args.extend_from_slice(extra);
        env.run(&args).expect_err(
            3,
            &[&format!("there is no terminal to confirm `{id}` on: an answer comes from a person at a terminal, or with `--yes` from another OS account than the one that queued it")],
        );
    }
    assert_eq!(list(&env, false)[0]["status"], "pending");
    // On a terminal, "n" leaves it pending.
    let r = env.run_on_terminal(&["approvals", "allow", &id], &[], "n\n");
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(r.stdout.contains("allow once? [y/N]"), "{r:#?}");
    assert_eq!(list(&env, false)[0]["status"], "pending");
    // "y" allows it.
    let r = env.run_on_terminal(&["approvals", "allow", &id], &[], "y\n");
    assert_eq!(r.code, 0, "{r:#?}");
    let e = &list(&env, false)[0];
    assert_eq!(e["status"], "allowed");
    assert_eq!(e["answered_by"], "tester");

    // The input swapped after the approval: no match, queued anew, and
    // the approval is not consumed.
    let other = queued(&env, &ws, B);
    assert_ne!(other, id);
    assert!(!ws.join("out/a.txt").exists());
    let entries = list(&env, false);
    assert_eq!(entries.len(), 2);
    // Newest first.
    assert_eq!(entries[0]["id"], other.as_str());
    assert_eq!(entries[1]["id"], id.as_str());
    assert_eq!(entries[1]["status"], "allowed");

    // The approved input runs, once.
    let (run, v) = run_json(&env, &guest("write-file"), &ws, "Supervised", A, &[]);
    run.expect(0);
    assert_eq!(v["pending_id"], id.as_str(), "{v:#}");
    assert_eq!(std::fs::read(ws.join("out/a.txt")).unwrap(), b"approved");
    assert_eq!(output(&v)["path"], "out/a.txt");
    let turn = v["turn"].as_str().unwrap();
    let audit = env.run(&["history", "--turn", turn, "--decisions"]);
    let approvals: Vec<Value> = audit
        .json_lines()
        .into_iter()
        .filter_map(|l| l.get("approval").filter(|a| a.is_object()).cloned())
        .collect();
    assert_eq!(
        approvals,
        vec![
            json!({"capability": "fs:write", "target": format!("{}/out/**", s(&ws)),
                    "choice": "allow_once", "queued": id})
        ]
    );
    let all = list(&env, true);
    let consumed = all.iter().find(|e| e["id"] == id.as_str()).unwrap();
    assert_eq!(consumed["status"], "consumed");
    assert_eq!(consumed["consumed_by"], turn);
    // Consumed: the same turn again needs a new approval.
    let again = queued(&env, &ws, A);
    assert_ne!(again, id);
}

#[test]
fn approvals_deny_refuses_the_matching_turn_once() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let id = queued(&env, &ws, A);
    let (run, e) = env.answer_on_terminal(&["approvals", "deny", &id]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(e["status"], "denied");
    // Answered once: no second answer.
    env.run(&["approvals", "allow", &id, "--yes"])
        .expect_err(3, &["already answered (`denied`)"]);
    let (run, v) = run_json(&env, &guest("write-file"), &ws, "Supervised", A, &[]);
    run.expect(2);
    assert_eq!(v["code"], "APPROVAL_REFUSED", "{v:#}");
    assert_eq!(v["pending_id"], id.as_str(), "{v:#}");
    assert!(!ws.join("out/a.txt").exists());
    // The refusal was consumed: the next try is queued again.
    queued(&env, &ws, A);
    // An unknown id is invalid input.
    env.run(&["approvals", "deny", "p-000000000000"])
        .expect_err(3, &["no pending approval `p-000000000000`"]);
}

/// Issue 46, item 3: a grant remembered through an answer lasts at most
/// `[approvals] remember_max` (7 days by default), `forever` included;
/// `forever` is not a maximum the configuration may set.
#[test]
fn a_remembered_answer_lasts_at_most_remember_max() {
    use gatehouse::policy::UtcTime;
    for (config, expires_in, want) in [
        (None, "forever", 7 * 24 * 3600),
        (Some("[approvals]\nremember_max = \"1h\"\n"), "2h", 3600),
        (Some("[approvals]\nremember_max = \"1h\"\n"), "30m", 1800),
    ] {
        let env = Env::new();
        if let Some(extra) = config {
            env.write(
                "config/gatehouse/gatehouse.toml",
                &format!(
                    "[actors.main]\nchannel = \"cli\"\nsender = \"tester\"\nskills = [\"*\"]\n{extra}"
                ),
            );
        }
        let ws = env.mkdir("ws");
        env.mkdir("ws/out");
        let id = queued(&env, &ws, A);
        let before = gatehouse::state::grants::now_utc();
        let (run, e) = env.answer_on_terminal(&[
            "approvals",
            "allow",
            &id,
            "--remember",
            "--expires-in",
            expires_in,
        ]);
        assert_eq!(run.code, 0, "{run:#?}");
        assert_eq!(e["status"], "remembered");
        let grants = env.run(&["grants", "list"]).json_lines();
        assert_eq!(grants.len(), 1, "{grants:#?}");
        let got = UtcTime::parse(grants[0]["expires_at"].as_str().unwrap())
            .unwrap()
            .0
            - before.0;
        assert!((want..want + 60).contains(&got), "{expires_in}: {got}");
    }
    let env = Env::new();
    env.write(
        "config/gatehouse/gatehouse.toml",
        "[actors.main]\nskills = [\"*\"]\n[approvals]\nremember_max = \"forever\"\n",
    );
    let run = env.run(&["run", s(&guest("hello")), "--input", "{}"]);
    run.expect_err(
        3,
        &[
            "approvals.remember_max",
            "only `grants add` records a grant without expiry",
        ],
    );
    run.expect_lowercase_message();
}

#[test]
fn approvals_remember_records_grants_but_never_for_an_always_class_capability() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let id = queued(&env, &ws, A);
    let (run, e) = env.answer_on_terminal(&[
        "approvals",
        "allow",
        &id,
        "--remember",
        "--expires-in",
        "1h",
    ]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(e["status"], "remembered");
    let grants = env.run(&["grants", "list"]).json_lines();
    assert_eq!(grants.len(), 1, "{grants:#?}");
    assert_eq!(e["grants"], json!([grants[0]["id"]]));
    assert_eq!(grants[0]["capability"], "fs:write");
    assert_eq!(grants[0]["target"], format!("{}/out/**", s(&ws)));
    assert_eq!(grants[0]["channel"], "cli");
    assert_eq!(grants[0]["sender_id"], "tester");
    // The grant covers any input now.
    let (run, _) = run_json(&env, &guest("write-file"), &ws, "Supervised", B, &[]);
    run.expect(0);
    assert_eq!(std::fs::read(ws.join("out/a.txt")).unwrap(), b"swapped!");

    // code:exec is always-class: "remember" is refused, nothing written
    // (a command executor's, asked at the gate with its argv).
    let env = Env::new();
    let ws = env.mkdir("ws");
    let config = env.write(
        "gatehouse.toml",
        "[actors.main]\nskills = [\"*\"]\ntools = [\"cat\"]\n",
    );
    let m = env.write(
        "manifests/cat.toml",
        "name = \"cat\"\ncommand = [\"cat\", \"notes.txt\"]\ntools = [\"cat\"]\n\
         [[capabilities]]\nname = \"code:exec\"\ntarget = \"cat\"\n",
    );
    let (run, v) = run_json(&env, &m, &ws, "Full", "", &["--config", s(&config)]);
    run.expect(4);
    let id = v["pending_id"].as_str().unwrap();
    assert_eq!(v["pending"][0]["rememberable"], false);
    let (run, _) = env.answer_on_terminal(&["approvals", "allow", id, "--remember"]);
    assert_eq!(run.code, 3, "{run:#?}");
    assert!(
        run.stdout
            .contains("`code:exec` is an always-class capability"),
        "{run:#?}"
    );
    assert!(!env.grants_db().exists());
    assert_eq!(list(&env, false)[0]["status"], "pending");
    let (run, _) = env.answer_on_terminal(&["approvals", "allow", id]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(list(&env, false)[0]["status"], "allowed");
}

#[test]
fn approvals_the_queue_is_host_state_no_executor_reads_or_writes() {
    let env = Env::bare();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    queued(&env, &ws, A);
    assert!(env.state_dir().join("approvals.db").is_file());
    // A turn whose read and write root holds the state directory.
    let m = manifest(
        &env,
        "rw-all",
        &component("write-file"),
        &[("fs:write", Some("**")), ("fs:read", Some("**"))],
    );
    let ops = json!({"op": "batch", "ops": [
        {"op": "read", "path": "state/approvals.db"},
        {"path": "state/approvals.db", "content": "approved"},
        {"path": "state/approvals.db-wal", "content": "approved"},
        {"path": "state/approvals.db-journal", "content": "approved"},
        // The control: the rest of the root is written.
        {"path": "cwd/fine.txt", "content": "fine"},
    ]});
    let (run, v) = run_json(&env, &m, &env.root(), "Full", &ops.to_string(), &[]);
    run.expect(0);
    let results = output(&v)["results"].as_array().unwrap().clone();
    let oks: Vec<bool> = results.iter().map(|r| r.get("ok").is_some()).collect();
    assert_eq!(oks, vec![false, false, false, false, true], "{v:#}");
    let turn = v["turn"].as_str().unwrap();
    let codes: Vec<String> = env
        .run(&["history", "--turn", turn, "--decisions"])
        .json_lines()
        .into_iter()
        .filter(|d| d["request"]["kind"] == "filesystem")
        .map(|d| d["decision"]["code"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        codes,
        vec![
            "HOST_STATE_HIDDEN",
            "POLICY_MUTATION_DENIED",
            "POLICY_MUTATION_DENIED",
            "POLICY_MUTATION_DENIED"
        ]
    );
    assert_eq!(list(&env, false)[0]["status"], "pending");
    assert_eq!(
        std::fs::read(env.root().join("cwd/fine.txt")).unwrap(),
        b"fine"
    );
}

/// Issue 27, point 2: an answer without a terminal is taken only from
/// another OS account than the one that queued the entry. The entry is
/// queued by this process's account; `approvals allow ID --yes` run as
/// `nobody` (setpriv), with no terminal, answers it; the same command as
/// this account was refused (the test above).
///
/// Positive control: the answer is recorded (`allowed`, by nobody's
/// account), and the queued turn then runs.
#[test]
fn another_account_may_answer_with_yes_and_no_terminal() {
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        gatehouse::host::current_uid(),
        0,
        "this test needs root to switch accounts"
    );
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let id = queued(&env, &ws, A);
    // The person's account may use the state (here: everyone may).
    let open = |p: &std::path::Path| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap()
    };
    open(&env.root());
    for e in std::fs::read_dir(env.state_dir()).unwrap() {
        open(&e.unwrap().path());
    }
    open(&env.state_dir());
    let out = env.as_nobody(
        env!("CARGO_BIN_EXE_gatehouse"),
        &["approvals", "allow", &id, "--yes"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e = &list(&env, false)[0];
    assert_eq!(e["status"], "allowed", "{e:#}");
    let (run, _) = run_json(&env, &guest("write-file"), &ws, "Supervised", A, &[]);
    run.expect(0);
    assert!(ws.join("out/a.txt").exists());
}

/// security round 2, item 8: the pending queue cannot be flooded. Past
/// `MAX_PENDING_PER_ACTOR` unanswered entries of one actor, the oldest are
/// dropped, counted, and `approvals list` says so; it lists the newest
/// first, so the request that matters is on top.
///
/// Positive control: below the cap every entry stays (the first 32 are all
/// listed before the flood goes on).
#[test]
fn the_pending_queue_keeps_the_newest_entries_of_an_actor_and_counts_the_rest() {
    let cap = gatehouse::host::MAX_PENDING_PER_ACTOR;
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let mut ids = Vec::new();
    for n in 0..cap {
        ids.push(queued(
            &env,
            &ws,
            &format!(r#"{{"path":"out/{n}.txt","content":"x"}}"#),
        ));
    }
    assert_eq!(list(&env, false).len(), cap);
    for n in cap..cap + 5 {
        ids.push(queued(
            &env,
            &ws,
            &format!(r#"{{"path":"out/{n}.txt","content":"x"}}"#),
        ));
    }
    let run = env.run(&["approvals", "list"]);
    run.expect(0);
    let listed: Vec<String> = run
        .json_lines()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    let newest: Vec<String> = ids.iter().rev().take(cap).cloned().collect();
    assert_eq!(listed, newest);
    assert_eq!(
        run.stderr.trim_end(),
        format!(
            "{cap} entries listed, newest first; {cap} waiting for an answer; 5 older unanswered entries of actor `main` dropped (at most {cap} wait per actor)"
        )
    );
    // A dropped entry is gone: it cannot be answered.
    env.run(&["approvals", "deny", &ids[0]])
        .expect_err(3, &[&format!("no pending approval `{}`", ids[0])]);
}

/// Issue 27, point 3 and security round 2, item 7: an approval shows what
/// it allows — the input (its first KiB and its size), a command
/// executor's argv, and the sha256 of each file the argv names in the
/// workspace — in `approvals list --json` and at its confirmation; and it
/// is bound to those files' bytes: a script changed between the approval
/// and the retry no longer matches (the retry is queued anew, nothing
/// runs, the approval is not consumed).
///
/// Positive control: the same approval with the file unchanged runs the
/// command once.
#[test]
fn an_approval_shows_the_input_argv_and_files_and_is_bound_to_the_files() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let script = env.write("ws/notes.txt", "version one\n");
    let config = env.write(
        "gatehouse.toml",
        "[actors.main]\nskills = [\"*\"]\ntools = [\"cat\"]\n",
    );
    let m = env.write(
        "manifests/show.toml",
        "name = \"show\"\ncommand = [\"cat\", \"notes.txt\"]\ntools = [\"cat\"]\n\
         [[capabilities]]\nname = \"code:exec\"\ntarget = \"cat\"\n\
         [[capabilities]]\nname = \"fs:read\"\ntarget = \"**\"\n",
    );
    let long_input = format!("{}{}", "x".repeat(1500), "\u{202e}tail");
    let run = || {
        run_json(
            &env,
            &m,
            &ws,
            "Full",
            &long_input,
            &["--config", s(&config)],
        )
    };
    let queue_one = || {
        let (r, v) = run();
        r.expect(4);
        v["pending_id"].as_str().unwrap().to_string()
    };
    let digest = |text: &str| sha(text);

    let id = queue_one();
    let e = &list(&env, false)[0];
    assert_eq!(e["id"], id.as_str());
    assert_eq!(e["input_preview"], "x".repeat(1024));
    assert_eq!(e["input_bytes"], long_input.len());
    assert_eq!(e["argv"], json!(["cat", "notes.txt"]));
    assert_eq!(
        e["files"],
        json!([{"arg": "notes.txt", "path": s(&script), "sha256": digest("version one\n")}])
    );
    // The confirmation shows them too.
    let (answered, _) = env.answer_on_terminal(&["approvals", "allow", &id]);
    assert_eq!(answered.code, 0, "{answered:#?}");
    assert!(
        answered.stdout.contains(&format!(
            "  input (first 1024 of {} bytes): xxx",
            long_input.len()
        )),
        "{answered:#?}"
    );
    assert!(
        answered.stdout.contains("  runs: `cat` `notes.txt`"),
        "{answered:#?}"
    );
    assert!(
        answered.stdout.contains(&format!(
            "  file `{}` sha256 {}",
            s(&script),
            digest("version one\n")
        )),
        "{answered:#?}"
    );
    // The control: unchanged, the retry runs once.
    let (r, v) = run();
    r.expect(0);
    assert_eq!(v["run"]["result"]["output"], "version one\n", "{v:#}");

    // Approved, then the file changes: the retry matches nothing.
    let id = queue_one();
    env.answer_on_terminal(&["approvals", "allow", &id])
        .0
        .expect(0);
    std::fs::write(&script, "version two: something else\n").unwrap();
    let (r, v) = run();
    r.expect(4);
    assert_ne!(v["pending_id"], id.as_str(), "{v:#}");
    let by_id = |want: &str| {
        list(&env, false)
            .into_iter()
            .find(|e| e["id"] == want)
            .unwrap_or_else(|| panic!("no entry `{want}`"))
    };
    assert_eq!(by_id(&id)["status"], "allowed");
    let fresh = by_id(v["pending_id"].as_str().unwrap());
    assert_eq!(
        fresh["files"][0]["sha256"],
        digest("version two: something else\n")
    );
}

/// Issue 27, point 2, the recipe "Running the server under its own
/// account": the server and its state belong to one account; an agent
/// running as another (`nobody`, through setpriv) can neither read the
/// HTTP token nor open the grants or approvals databases, so it can
/// neither approve its own request nor grant itself anything.
///
/// Positive control: the server's account reads the token and records a
/// grant with the same commands.
#[test]
fn an_agent_under_another_account_cannot_read_the_token_or_touch_the_state() {
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        gatehouse::host::current_uid(),
        0,
        "this test needs root to switch accounts"
    );
    let env = Env::bare();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let id = queued(&env, &ws, A);
    let state = env.state_dir();
    // The token as `serve --listen` makes it, then the state made the
    // server account's own (0700), the rest of the tree open to all, as a
    // home directory of a person would be to an agent of another account.
    gatehouse::serve::serve_token(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(env.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = |program: &str, args: &[&str]| env.as_nobody(program, args);
    let token = state.join("serve.token");
    let cat = as_nobody("/usr/bin/cat", &[s(&token)]);
    assert!(!cat.status.success());
    assert!(String::from_utf8_lossy(&cat.stderr).contains("Permission denied"));
    let gatehouse = env!("CARGO_BIN_EXE_gatehouse");
    let target = format!("{}/out/**", s(&ws));
    let grant = as_nobody(
        gatehouse,
        &[
            "grants",
            "add",
            "--channel",
            "cli",
            "--sender",
            "tester",
            "fs:write",
            &target,
        ],
    );
    assert!(!grant.status.success(), "{grant:?}");
    let allow = as_nobody(gatehouse, &["approvals", "allow", &id, "--yes"]);
    assert!(!allow.status.success(), "{allow:?}");
    assert_eq!(list(&env, false)[0]["status"], "pending");
    assert!(env.run(&["grants", "list"]).json_lines().is_empty());
    // The control: the server's account can.
    assert!(std::fs::read_to_string(&token).unwrap().trim().len() > 16);
    env.run(&[
        "grants",
        "add",
        "--channel",
        "cli",
        "--sender",
        "tester",
        "fs:write",
        &target,
    ])
    .expect(0);
}

/// `run-tool` allowed `cat` (read the workspace), and its configuration.
fn cat_tool(env: &Env) -> (std::path::PathBuf, std::path::PathBuf) {
    let config = env.write(
        "gatehouse.toml",
        "[actors.main]\nskills = [\"*\"]\ntools = [\"cat\"]\n",
    );
    let m = env.write(
        "manifests/cat-tool.toml",
        &format!(
            "name = \"cat-tool\"\ncomponent = \"{}\"\ntools = [\"cat\"]\n\
             [[capabilities]]\nname = \"code:exec\"\ntarget = \"cat\"\n\
             [[capabilities]]\nname = \"fs:read\"\ntarget = \"**\"\n",
            s(&component("run-tool"))
        ),
    );
    (m, config)
}

/// Three command lines, the first twice: what a guest asks to run.
const CAT_CALLS: &str = r#"{"calls":[{"program":"cat","args":["notes.txt"]},{"program":"cat","args":["notes.txt"]},{"program":"cat","args":["other.txt"]}]}"#;

/// Issue 27, point 3, and issue 46, item 7: a component's `code:exec` is
/// approved one command line at a time, as its guest runs them (the gate
/// asks nothing of it). With no one at a terminal each line waits in the
/// queue, showing its argv, and the retry that takes the answer runs
/// exactly the lines approved; a different one is queued again.
///
/// Positive control: the approved line runs (its bytes are the file's).
#[test]
fn a_code_exec_allowed_once_runs_only_the_command_lines_a_person_approved() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.write("ws/notes.txt", "from the workspace\n");
    env.write("ws/other.txt", "never approved\n");
    let (m, config) = cat_tool(&env);
    let run = || run_json(&env, &m, &ws, "Full", CAT_CALLS, &["--config", s(&config)]);
    let allow = |id: &str| {
        let (answered, _) = env.answer_on_terminal(&["approvals", "allow", id]);
        assert_eq!(answered.code, 0, "{answered:#?}");
        answered
    };
    let queued_in = |reason: &Value| -> String {
        let reason = reason.as_str().unwrap_or_default();
        let at = reason
            .find("queued as pending approval `")
            .unwrap_or_else(|| panic!("{reason}"));
        reason[at + 28..].split('`').next().unwrap().to_string()
    };

    // The gate asks nothing: the run starts, and no command line was
    // shown to anyone: each is queued, and nothing starts. The same line
    // asked twice is one entry.
    let (r, v) = run();
    r.expect(0);
    let out = output(&v);
    for i in 0..3 {
        assert_eq!(
            out[i]["error"]["denied"]["code"], "APPROVAL_REQUIRED",
            "{out:#}"
        );
        assert_eq!(v["run"]["commands"][i]["spawned"], false, "{v:#}");
        assert_eq!(v["run"]["commands"][i]["decision"], "APPROVAL_REQUIRED");
    }
    let notes_entry = queued_in(&out[0]["error"]["denied"]["reason"]);
    assert_eq!(queued_in(&out[1]["error"]["denied"]["reason"]), notes_entry);
    let other_entry = queued_in(&out[2]["error"]["denied"]["reason"]);
    assert_ne!(other_entry, notes_entry);
    assert_eq!(
        out[0]["error"]["denied"]["reason"],
        format!("`code:exec` on `cat` is approved one command line at a time; `'cat' 'notes.txt'` is queued as pending approval `{notes_entry}`, which a person can answer with `gatehouse approvals`")
    );
    let entries = list(&env, false);
    let entry = |id: &str| {
        entries
            .iter()
            .find(|e| e["id"] == id)
            .unwrap_or_else(|| panic!("no entry `{id}` in {entries:#?}"))
            .clone()
    };
    assert_eq!(
        entry(&notes_entry)["commands"],
        json!([["cat", "notes.txt"]])
    );
    assert_eq!(
        entry(&other_entry)["commands"],
        json!([["cat", "other.txt"]])
    );

    // The person allows the line of notes.txt; the confirmation shows it.
    let answered = allow(&notes_entry);
    assert!(
        answered.stdout.contains("  guest runs: `cat` `notes.txt`"),
        "{answered:#?}"
    );

    // The retry runs that line (twice), and no other: other.txt is queued
    // again, with the line this turn ran.
    let (r, v) = run();
    r.expect(0);
    let out = output(&v);
    assert_eq!(out[0]["stdout"], "from the workspace\n", "{out:#}");
    assert_eq!(out[1]["stdout"], "from the workspace\n", "{out:#}");
    assert_eq!(
        out[2]["error"]["denied"]["code"], "APPROVAL_REQUIRED",
        "{out:#}"
    );
    assert_eq!(v["run"]["commands"][2]["spawned"], false, "{v:#}");
    let again = queued_in(&out[2]["error"]["denied"]["reason"]);
    let entries = list(&env, false);
    let e = entries.iter().find(|e| e["id"] == again.as_str()).unwrap();
    assert_eq!(
        e["commands"],
        json!([["cat", "notes.txt"], ["cat", "other.txt"]])
    );
    assert!(!r.stdout.contains("never approved"), "{r:#?}");

    // The answer was consumed: the next retry is asked again, and runs
    // nothing.
    let (r, v) = run();
    r.expect(0);
    let out = output(&v);
    assert_eq!(
        out[0]["error"]["denied"]["code"], "APPROVAL_REQUIRED",
        "{out:#}"
    );
    assert_eq!(v["run"]["commands"][0]["spawned"], false, "{v:#}");
}

/// Issue 27, point 3, at a terminal: each new command line of a
/// `code:exec` allowed once is shown and asked about; a line already
/// approved in the turn is not asked again; a refused one starts nothing
/// (`APPROVAL_REFUSED`).
///
/// Positive control: the line allowed at the prompt runs.
#[test]
fn at_a_terminal_each_new_command_line_is_asked_about() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.write("ws/notes.txt", "from the workspace\n");
    env.write("ws/other.txt", "never approved\n");
    let (m, config) = cat_tool(&env);
    let (run, v) = crate::support::exec::run_answering(
        &env,
        &m,
        &ws,
        &config,
        CAT_CALLS,
        &[],
        // notes.txt: allowed once; other.txt: denied (the gate asks
        // nothing of a component's `code:exec`).
        "o\nd\n",
    );
    assert_eq!(run.code, 0, "{run:#?}");
    let asked: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.contains("guest runs: "))
        .collect();
    assert_eq!(
        asked,
        [
            "  guest runs: `cat` `notes.txt`",
            "  guest runs: `cat` `other.txt`"
        ],
        "{run:#?}"
    );
    let out = output(&v);
    assert_eq!(out[0]["stdout"], "from the workspace\n", "{out:#}");
    assert_eq!(out[1]["stdout"], "from the workspace\n", "{out:#}");
    assert_eq!(
        out[2]["error"]["denied"]["code"], "APPROVAL_REFUSED",
        "{out:#}"
    );
    assert_eq!(
        out[2]["error"]["denied"]["reason"],
        "the command line `'cat' 'other.txt'` was refused by the person asked"
    );
    assert_eq!(v["run"]["commands"][2]["spawned"], false, "{v:#}");
    assert!(!run.stdout.contains("never approved"), "{run:#?}");
}

/// Issue 46, item 7: a person is asked once per decision, about what
/// will happen. `run-tool` running `cat notes.txt` at Supervised asks two
/// questions on the terminal: the gate's open items as one bundle (the
/// input and `fs:read` on the workspace; not `code:exec` on each program
/// the manifest declares), then the command line the guest runs. Each
/// ends with one answer line, the only place `allow once` is written.
/// Denying the bundle starts nothing; denying the line starts no command.
#[test]
fn run_tool_asks_two_questions_the_bundle_and_the_command_line() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.write("ws/notes.txt", "a note\n");
    let config = env.write(
        "gatehouse.toml",
        "[actors.main]\nskills = [\"*\"]\ntools = [\"cat\", \"ls\", \"wc\"]\n",
    );
    let tool = guest("run-tool");
    let input = r#"{"program":"cat","args":["notes.txt"]}"#;
    let args = [
        "--json",
        "run",
        s(&tool),
        "--workspace",
        s(&ws),
        "--config",
        s(&config),
        "--level",
        "Supervised",
        "--input",
        input,
    ];
    let json_of = |run: &crate::support::Run| -> Value {
        let line = run
            .stdout
            .lines()
            .rev()
            .find(|l| l.contains("{\""))
            .unwrap();
        serde_json::from_str(&line[line.find("{\"").unwrap()..]).unwrap()
    };
    let answer_lines = |run: &crate::support::Run| run.stdout.matches("[o] allow once").count();

    let run = env.run_on_terminal(&args, &[], "o\no\n");
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(answer_lines(&run), 2, "{}", run.stdout);
    assert_eq!(
        run.stdout.matches("allow once").count(),
        2,
        "{}",
        run.stdout
    );
    assert_eq!(run.stdout.matches("asks for approval").count(), 2);
    // The bundle: the input and the workspace's read, no program.
    let first = &run.stdout[..run.stdout.find("[o] allow once").unwrap()];
    assert!(first.contains(&format!("  input: {input}")), "{first}");
    assert!(
        first.contains(&format!("asks for `fs:read` on `{}/**`", s(&ws))),
        "{first}"
    );
    assert!(!first.contains("code:exec"), "{first}");
    // The command line, shown as it runs.
    let second = &run.stdout[first.len() + 1..];
    assert!(
        second.contains("  guest runs: `cat` `notes.txt`"),
        "{second}"
    );
    assert!(second.contains("[o] allow once  [d] deny"), "{second}");
    let v = json_of(&run);
    assert_eq!(v["run"]["commands"][0]["spawned"], true, "{v:#}");
    assert_eq!(
        crate::support::guests::output(&v)["stdout"],
        "a note\n",
        "{v:#}"
    );

    // The bundle denied: one question, nothing started.
    let run = env.run_on_terminal(&args, &[], "d\n");
    assert_eq!(run.code, 2, "{run:#?}");
    assert_eq!(answer_lines(&run), 1, "{}", run.stdout);
    let v = json_of(&run);
    assert_eq!(v["code"], "APPROVAL_REFUSED", "{v:#}");
    assert_eq!(v["ran"], false, "{v:#}");

    // The line denied: the guest ran, its command did not start.
    let run = env.run_on_terminal(&args, &[], "o\nd\n");
    assert_eq!(answer_lines(&run), 2, "{}", run.stdout);
    let v = json_of(&run);
    assert_eq!(v["run"]["commands"][0]["spawned"], false, "{v:#}");
    assert_eq!(
        v["run"]["commands"][0]["decision"], "APPROVAL_REFUSED",
        "{v:#}"
    );
}

/// A command line's answer is taken by that line only: with two lines
/// queued and only the second allowed, the retry's first line (still
/// unanswered) leaves the second's answer alone, and the second runs.
#[test]
fn a_command_line_s_answer_is_taken_by_that_line_only() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.write("ws/notes.txt", "notes\n");
    env.write("ws/other.txt", "other\n");
    let (m, config) = cat_tool(&env);
    let calls = r#"{"calls":[{"program":"cat","args":["notes.txt"]},{"program":"cat","args":["other.txt"]}]}"#;
    let run = || run_json(&env, &m, &ws, "Full", calls, &["--config", s(&config)]);
    let (r, v) = run();
    r.expect(0);
    let out = output(&v);
    let reason = out[1]["error"]["denied"]["reason"].as_str().unwrap();
    let at = reason.find("queued as pending approval `").unwrap();
    let other = reason[at + 28..].split('`').next().unwrap().to_string();
    let (answered, _) = env.answer_on_terminal(&["approvals", "allow", &other]);
    assert_eq!(answered.code, 0, "{answered:#?}");
    let (r, v) = run();
    r.expect(0);
    let out = output(&v);
    assert_eq!(
        out[0]["error"]["denied"]["code"], "APPROVAL_REQUIRED",
        "{out:#}"
    );
    assert_eq!(v["run"]["commands"][0]["spawned"], false, "{v:#}");
    assert_eq!(out[1]["stdout"], "other\n", "{out:#}");
}
