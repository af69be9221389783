//! Issue 27, point 7: delegation is decided as ALP says. A `delegate:call`
//! callee named `EXECUTOR` runs as the caller's own actor; one named
//! `ACTOR/EXECUTOR` is a delegation to ACTOR, which the policy's
//! `delegation` kind decides (`DELEGATION_NOT_ALLOWED`, `UNKNOWN_TARGET`),
//! and the callee then runs as ACTOR: its skills, workspaces and grants.

use std::path::Path;

use gatehouse::config::{ActorConfig, HostConfig};
use gatehouse::host::{Host, HostOptions, NoOne, TurnEnd, TurnOutcome, TurnRequest};
use gatehouse::manifest::Manifest;
use gatehouse::policy::{Identity, Level};
use gatehouse::state::grants::{now_utc, NewGrant};

use crate::support::guests::guest;
use crate::support::Env;

/// `caller`: the `call-other` guest, allowed `delegate:call` on each of
/// `targets`.
fn caller(env: &Env, targets: &[&str]) -> Manifest {
    let component = Manifest::load(&guest("call-other")).unwrap().component;
    let mut toml = format!(
        "name = \"caller\"\ncomponent = \"{}\"\n",
        component.display()
    );
    for t in targets {
        toml.push_str(&format!(
            "[[capabilities]]\nname = \"delegate:call\"\ntarget = \"{t}\"\n"
        ));
    }
    Manifest::load(&env.write("caller/executor.toml", &toml)).unwrap()
}

/// A host whose `main` delegates to `delegates_to`, beside an actor
/// `worker` (identity `cli`/`worker`) that may run `worker_skills`.
fn host(
    env: &Env,
    ws: &Path,
    manifests: Vec<Manifest>,
    level: Level,
    delegates_to: &[&str],
    worker_skills: &[&str],
) -> Host {
    let mut config = HostConfig::safe_default("tester");
    if let Some(main) = config.actors.get_mut("main") {
        main.delegates_to = delegates_to.iter().map(|s| s.to_string()).collect();
    }
    config.actors.insert(
        "worker".into(),
        ActorConfig {
            identity: Identity::new("cli", "worker"),
            skills: worker_skills.iter().map(|s| s.to_string()).collect(),
            subagents: vec![],
            mcp_servers: vec![],
            delegates_to: vec![],
            memory: vec![],
            tools: vec![],
            workspaces: None,
            uids: vec![],
            level: None,
        },
    );
    let mut options = HostOptions::new(
        config,
        env.state_paths(),
        ws.canonicalize().unwrap().display().to_string(),
        manifests,
    );
    options.level = Some(level);
    Host::open(options).unwrap()
}

/// Runs `caller` as `main`, calling `executor` with `input`.
fn call(h: &Host, executor: &str, input: serde_json::Value) -> TurnOutcome {
    let input = serde_json::json!({ "executor": executor, "input": input }).to_string();
    let mut request = TurnRequest::new("caller", "main", input);
    // The callee compiles inside the call, on the caller's clock.
    request.limits.deadline_ms = 60_000;
    h.run(request, &NoOne)
}

/// The guest's error value of a turn that ran and returned an error.
fn guest_error(outcome: &TurnOutcome) -> serde_json::Value {
    let TurnEnd::Ran { run } = &outcome.end else {
        panic!("{:?}", outcome.end)
    };
    let gatehouse::host::GuestResult::Err { error } = &run.result else {
        panic!("{:?}", run.result)
    };
    error.clone()
}

/// The guest's output of a turn that ran and returned ok.
fn guest_output(outcome: &TurnOutcome) -> serde_json::Value {
    let TurnEnd::Ran { run } = &outcome.end else {
        panic!("{:?}", outcome.end)
    };
    let gatehouse::host::GuestResult::Ok { output } = &run.result else {
        panic!("{:?}", run.result)
    };
    serde_json::from_str(output).unwrap()
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    match std::fs::read_to_string(path) {
        Ok(t) => t
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
        Err(_) => vec![],
    }
}

/// The decision lines of the nested turn `<turn>.<callee>`, from the
/// audit (a turn that wrote nothing) or the turn's own history.
fn nested_decisions(env: &Env, outcome: &TurnOutcome, callee: &str) -> Vec<serde_json::Value> {
    let nested = format!("{}.{callee}", outcome.turn);
    let mut all = lines(
        &env.state_dir()
            .join("history")
            .join(&outcome.turn)
            .join("decisions.jsonl"),
    );
    for line in lines(&env.state_dir().join("audit.jsonl")) {
        if line["turn"] == outcome.turn.as_str() {
            all.extend(line["decisions"].as_array().cloned().unwrap_or_default());
        }
    }
    all.into_iter()
        .filter(|d| d["turn"] == nested.as_str())
        .collect()
}

fn grant(
    book: &dyn gatehouse::state::grants::GrantBackend,
    sender: &str,
    capability: &str,
    target: &str,
) -> i64 {
    book.record(
        &NewGrant {
            identity: Identity::new("cli", sender),
            capability: capability.into(),
            target: target.into(),
            expires_at: None,
            granted_by: Some("test".into()),
        },
        now_utc(),
    )
    .unwrap()
    .id
}

/// `worker/write-file`, `worker` in `main`'s `delegates_to`: the policy's
/// `delegation` kind is asked (as `main`) and allows it, and the callee is
/// gated and run as `worker`: its decision lines name `worker`, and its
/// `fs:write` (Supervised: needs an approval) is covered by `worker`'s
/// grant, which `main` does not have.
///
/// Control: the plain `write-file` runs as `main`, its lines name `main`,
/// and `worker`'s grant does not cover it (`APPROVAL_REQUIRED`, nothing
/// written).
#[test]
fn a_delegation_to_an_actor_in_delegates_to_runs_the_callee_as_that_actor() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let h = host(
        &env,
        &ws,
        vec![
            caller(&env, &["worker/write-file", "write-file"]),
            Manifest::load(&guest("write-file")).unwrap(),
        ],
        Level::Supervised,
        &["worker"],
        &["write-file"],
    );
    let book = gatehouse::state::Stores::new(&env.state_paths())
        .unwrap()
        .grants;
    // The caller's own `delegate:call` on each callee, for `main`.
    grant(&*book, "tester", "delegate:call", "worker/write-file");
    grant(&*book, "tester", "delegate:call", "write-file");
    let out = format!("{}/out/**", ws.canonicalize().unwrap().display());
    let worker_grant = grant(&*book, "worker", "fs:write", &out);

    let outcome = call(
        &h,
        "worker/write-file",
        serde_json::json!({"path": "out/a.txt", "content": "as worker"}),
    );
    assert!(outcome.is_ok(), "{:?}", outcome.end);
    guest_output(&outcome);
    assert_eq!(std::fs::read(ws.join("out/a.txt")).unwrap(), b"as worker");
    let steps = nested_decisions(&env, &outcome, "worker/write-file");
    // First the delegation, asked as the caller; then the callee's gate,
    // as `worker`.
    assert_eq!(steps[0]["request"]["kind"], "delegation", "{steps:#?}");
    assert_eq!(steps[0]["request"]["target"], "worker", "{steps:#?}");
    assert_eq!(steps[0]["actor"], "main", "{steps:#?}");
    assert_eq!(steps[0]["decision"]["decision"], "allow", "{steps:#?}");
    assert!(steps.len() > 1, "{steps:#?}");
    for s in &steps[1..] {
        assert_eq!(s["actor"], "worker", "{steps:#?}");
        assert_eq!(s["request"]["actor"], "worker", "{steps:#?}");
        assert_eq!(s["identity"]["sender_id"], "worker", "{steps:#?}");
    }
    assert_eq!(steps[1]["request"]["kind"], "skill", "{steps:#?}");
    assert_eq!(steps[1]["request"]["skill"], "write-file", "{steps:#?}");
    assert!(
        steps
            .iter()
            .any(|s| s["request"]["capability"] == "fs:write"
                && s["decision"]["grant"] == worker_grant),
        "{steps:#?}"
    );

    // Control: the plain name runs as `main`, whom `worker`'s grant does
    // not cover.
    let outcome = call(
        &h,
        "write-file",
        serde_json::json!({"path": "out/b.txt", "content": "as main"}),
    );
    let error = guest_error(&outcome);
    assert_eq!(error["denied"]["code"], "APPROVAL_REQUIRED", "{error}");
    assert!(!ws.join("out/b.txt").exists());
    let steps = nested_decisions(&env, &outcome, "write-file");
    assert!(!steps.is_empty());
    assert!(steps.iter().all(|s| s["actor"] == "main"), "{steps:#?}");
    assert!(
        steps.iter().all(|s| s["request"]["kind"] != "delegation"),
        "{steps:#?}"
    );
}

/// `worker/hello` from a `main` whose `delegates_to` is empty:
/// `DELEGATION_NOT_ALLOWED`, and nothing of the callee runs (its gate is
/// never asked: the delegation is its only line).
///
/// Positive control: the same call, `worker` in `delegates_to`, runs
/// `hello` as `worker`.
#[test]
fn a_delegation_outside_delegates_to_is_refused_and_runs_nothing() {
    for (delegates_to, allowed) in [(&[][..], false), (&["worker"][..], true)] {
        let env = Env::new();
        let ws = env.mkdir("ws");
        let h = host(
            &env,
            &ws,
            vec![
                caller(&env, &["worker/hello"]),
                Manifest::load(&guest("hello")).unwrap(),
            ],
            Level::Full,
            delegates_to,
            &["hello"],
        );
        let outcome = call(&h, "worker/hello", serde_json::json!({"a": 1}));
        let steps = nested_decisions(&env, &outcome, "worker/hello");
        assert_eq!(steps[0]["request"]["kind"], "delegation", "{steps:#?}");
        if allowed {
            assert!(outcome.is_ok(), "{:?}", outcome.end);
            assert_eq!(
                guest_output(&outcome)["output"],
                serde_json::json!({"echo": {"a": 1}})
            );
            assert_eq!(steps[1]["request"]["kind"], "skill", "{steps:#?}");
            assert_eq!(steps[1]["actor"], "worker", "{steps:#?}");
        } else {
            let error = guest_error(&outcome);
            assert_eq!(error["denied"]["code"], "DELEGATION_NOT_ALLOWED", "{error}");
            assert_eq!(steps.len(), 1, "{steps:#?}");
            assert_eq!(
                steps[0]["decision"]["code"], "DELEGATION_NOT_ALLOWED",
                "{steps:#?}"
            );
        }
    }
}

/// `ghost/hello`, `ghost` no actor: `UNKNOWN_TARGET`, nothing runs.
///
/// Positive control: `worker/hello` on the same host runs.
#[test]
fn a_delegation_to_an_unknown_actor_is_unknown_target() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let h = host(
        &env,
        &ws,
        vec![
            caller(&env, &["ghost/hello", "worker/hello"]),
            Manifest::load(&guest("hello")).unwrap(),
        ],
        Level::Full,
        &["worker"],
        &["hello"],
    );
    let outcome = call(&h, "ghost/hello", serde_json::json!({}));
    let error = guest_error(&outcome);
    assert_eq!(error["denied"]["code"], "UNKNOWN_TARGET", "{error}");
    let steps = nested_decisions(&env, &outcome, "ghost/hello");
    assert_eq!(steps.len(), 1, "{steps:#?}");
    assert_eq!(steps[0]["decision"]["code"], "UNKNOWN_TARGET");

    let outcome = call(&h, "worker/hello", serde_json::json!({}));
    assert!(outcome.is_ok(), "{:?}", outcome.end);
    assert_eq!(
        guest_output(&outcome)["output"],
        serde_json::json!({"echo": {}})
    );
}

/// A plain `hello` still runs as the caller, even with an empty
/// `delegates_to`: no delegation is asked, and its lines name `main`.
///
/// Control: `worker/hello` on the same host is refused
/// (`DELEGATION_NOT_ALLOWED`), so the plain call did not pass by
/// skipping the rule.
#[test]
fn a_plain_callee_runs_as_the_caller() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let h = host(
        &env,
        &ws,
        vec![
            caller(&env, &["hello", "worker/hello"]),
            Manifest::load(&guest("hello")).unwrap(),
        ],
        Level::Full,
        &[],
        &["hello"],
    );
    let outcome = call(&h, "hello", serde_json::json!({}));
    assert!(outcome.is_ok(), "{:?}", outcome.end);
    let steps = nested_decisions(&env, &outcome, "hello");
    assert!(!steps.is_empty());
    assert_eq!(steps[0]["request"]["kind"], "skill", "{steps:#?}");
    assert!(steps.iter().all(|s| s["actor"] == "main"), "{steps:#?}");

    let outcome = call(&h, "worker/hello", serde_json::json!({}));
    assert_eq!(
        guest_error(&outcome)["denied"]["code"],
        "DELEGATION_NOT_ALLOWED"
    );
}

/// A delegated callee's own calls run as its actor too: `main` calls
/// `worker/relay`, and `relay` (run as `worker`) calls plain `hello`,
/// which is then gated as `worker`. With `worker` not allowed `hello`
/// (`main` may run any executor), the inner call is refused
/// `SKILL_NOT_GRANTED`.
///
/// Positive control: with `hello` among `worker`'s skills it runs, and
/// its lines name `worker`.
#[test]
fn a_delegated_callees_own_calls_run_as_its_actor() {
    let component = Manifest::load(&guest("call-other")).unwrap().component;
    for worker_skills in [&["relay"][..], &["relay", "hello"][..]] {
        let env = Env::new();
        let ws = env.mkdir("ws");
        let relay = format!(
            "name = \"relay\"\ncomponent = \"{}\"\n[[capabilities]]\nname = \"delegate:call\"\ntarget = \"hello\"\n",
            component.display()
        );
        let relay = Manifest::load(&env.write("relay.toml", &relay)).unwrap();
        let h = host(
            &env,
            &ws,
            vec![
                caller(&env, &["worker/relay"]),
                relay,
                Manifest::load(&guest("hello")).unwrap(),
            ],
            Level::Full,
            &["worker"],
            worker_skills,
        );
        let outcome = call(
            &h,
            "worker/relay",
            serde_json::json!({"executor": "hello", "input": "{}"}),
        );
        let steps = nested_decisions(&env, &outcome, "worker/relay.hello");
        assert!(!steps.is_empty());
        assert!(steps.iter().all(|s| s["actor"] == "worker"), "{steps:#?}");
        assert_eq!(steps[0]["request"]["kind"], "skill", "{steps:#?}");
        if worker_skills.contains(&"hello") {
            assert!(outcome.is_ok(), "{:?}", outcome.end);
            assert_eq!(
                guest_output(&outcome)["output"],
                serde_json::json!({"output": {"echo": {}}})
            );
        } else {
            assert_eq!(steps[0]["decision"]["code"], "SKILL_NOT_GRANTED");
            let error = guest_error(&outcome).to_string();
            assert!(error.contains("SKILL_NOT_GRANTED"), "{error}");
        }
    }
}

/// A delegated callee gets only what is left of its caller's deadline:
/// `worker/spin` (which loops forever) from a turn with a 1.5 s deadline
/// ends with `LIMIT_DEADLINE` within it, not after a deadline of its own
/// (the default is 5 s).
///
/// Control: the same call with a 4 s deadline also ends at
/// `LIMIT_DEADLINE`, and only after the shorter one would have passed,
/// so the bound measured is the caller's.
#[test]
fn a_delegated_callee_gets_what_is_left_of_its_callers_deadline() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let h = host(
        &env,
        &ws,
        vec![
            caller(&env, &["worker/spin"]),
            Manifest::load(&guest("spin")).unwrap(),
        ],
        Level::Full,
        &["worker"],
        &["spin"],
    );
    // Both components compiled and cached first, so the timings below are
    // the runs'.
    let mut warm = TurnRequest::new("spin", "worker", "");
    warm.limits.deadline_ms = 50;
    h.run(warm, &NoOne);
    let outcome = call(&h, "ghost/spin", serde_json::json!({}));
    assert_eq!(guest_error(&outcome)["denied"]["code"], "TARGET_MISMATCH");

    let timed = |deadline_ms: u64| {
        let input = serde_json::json!({"executor": "worker/spin", "input": ""}).to_string();
        let mut request = TurnRequest::new("caller", "main", input);
        request.limits.deadline_ms = deadline_ms;
        let started = std::time::Instant::now();
        let outcome = h.run(request, &NoOne);
        (outcome, started.elapsed())
    };
    let (outcome, took) = timed(1_500);
    let text = format!("{:?}", outcome.end);
    assert!(text.contains("LIMIT_DEADLINE"), "{text}");
    assert!(
        took < std::time::Duration::from_millis(4_000),
        "took {took:?}"
    );
    let (outcome, took) = timed(4_000);
    let text = format!("{:?}", outcome.end);
    assert!(text.contains("LIMIT_DEADLINE"), "{text}");
    assert!(
        took >= std::time::Duration::from_millis(3_500),
        "took {took:?}"
    );
}

/// Issue 28, point 2: a delegated turn runs the same pipeline as a
/// top-level one, so a callee that traps reports what a top-level turn
/// of the same executor reports: the trap and its cause, not just "the
/// guest trapped".
///
/// Positive control: the top-level turn of `panic` ends `Stopped` with no
/// code and a message that names a cause after "the guest trapped: ".
#[test]
fn a_callee_that_traps_reports_the_trap_as_a_top_level_turn_does() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let h = host(
        &env,
        &ws,
        vec![
            caller(&env, &["panic"]),
            Manifest::load(&guest("panic")).unwrap(),
        ],
        Level::Full,
        &[],
        &[],
    );
    let mut direct = TurnRequest::new("panic", "main", "{}");
    direct.limits.deadline_ms = 60_000;
    let direct = h.run(direct, &NoOne);
    let TurnEnd::Stopped {
        code: None,
        message,
        ..
    } = &direct.end
    else {
        panic!("{:?}", direct.end)
    };
    let cause = message
        .strip_prefix("the guest trapped: ")
        .unwrap_or_else(|| panic!("{message}"));
    assert!(!cause.is_empty(), "{message}");

    let outcome = call(&h, "panic", serde_json::json!({}));
    assert_eq!(
        guest_error(&outcome)["failed"],
        format!("`panic`: {message}"),
        "{:?}",
        outcome.end
    );
}

/// Issue 28, point 2: a delegated turn meets the cancel check before it
/// starts, as a top-level turn does. The cancel switch is set just after
/// the top-level turn's own check (its first look at the switch): the
/// callee `write-file` must then not start, and the caller learns
/// `TURN_CANCELLED` "before it started" (or, if the caller's own clock
/// tick saw the switch first, the turn is stopped `TURN_CANCELLED`
/// before it called). Either way nothing is written.
///
/// Positive control: the same call with a switch never set writes the
/// file.
#[test]
fn a_callee_does_not_start_once_the_turn_is_cancelled() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let h = host(
        &env,
        &ws,
        vec![
            caller(&env, &["write-file"]),
            Manifest::load(&guest("write-file")).unwrap(),
        ],
        Level::Full,
        &[],
        &[],
    );
    let turn = |name: &str, cancel: gatehouse::host::CancelHandle| {
        let input = serde_json::json!({
            "executor": "write-file",
            "input": {"path": format!("out/{name}.txt"), "content": "x"},
        })
        .to_string();
        let mut request = TurnRequest::new("caller", "main", input);
        request.limits.deadline_ms = 60_000;
        request.cancel = cancel;
        h.run(request, &NoOne)
    };
    // Control (and both components compiled): never cancelled, it writes.
    let warm = turn("warm", gatehouse::host::CancelHandle::new());
    assert!(warm.is_ok(), "{:?}", warm.end);
    assert!(ws.join("out/warm.txt").exists());

    let looks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = looks.clone();
    let cancel = gatehouse::host::CancelHandle::also_when(move || {
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 1
    });
    let outcome = turn("a", cancel);
    assert!(!ws.join("out/a.txt").exists(), "{:?}", outcome.end);
    match &outcome.end {
        TurnEnd::Ran { .. } => {
            let error = guest_error(&outcome);
            assert_eq!(error["denied"]["code"], "TURN_CANCELLED", "{error}");
            assert_eq!(
                error["denied"]["reason"], "`write-file`: the turn was cancelled before it started",
                "{error}"
            );
        }
        TurnEnd::Stopped { .. } => assert_eq!(
            outcome.code(),
            Some(gatehouse::policy::DenyCode::TurnCancelled),
            "{:?}",
            outcome.end
        ),
        other => panic!("{other:?}"),
    }
}
