//! The host's secrets and authority against the executors and whoever
//! starts the process (security round 3, items 1, 2 and 9): a provider's
//! credential is never read through `env:read` nor as a file, nor is a
//! fleet's database URL; a `--level` above the configuration's
//! `max_level` is refused.

use serde_json::{json, Value};

use crate::support::guests::{component, manifest, output, run_json, run_json_with_vars};
use crate::support::{s, Env};

const CANARY: &str = "gh-secret-canary-5b1d0c";

/// The configuration of the recipes: level Full, a provider whose value
/// is in `API_TOKEN`, another whose value is in a file beside the
/// configuration (`api.token`, not made yet).
fn provider_config(env: &Env) -> std::path::PathBuf {
    env.write(
        "config/gatehouse/gatehouse.toml",
        "level = \"Full\"\n[actors.main]\nskills = [\"*\"]\n\
         [providers.api]\nbase_url = \"https://api.example.com/v1\"\nvalue_env = \"API_TOKEN\"\n\
         [providers.files]\nbase_url = \"https://files.example.com/v1\"\nvalue_file = \"api.token\"\n",
    )
}

/// security round 3, item 1: the `env` executor granted only `env:read
/// API_TOKEN`, where `API_TOKEN` is a provider's `value_env`, is refused
/// at the gate with `SECRET_ENV_DENIED` at level Full: nothing runs and
/// the value is nowhere in the output. So is `env:read
/// GATEHOUSE_DATABASE_URL`. The positive control: `env:read OTHER_VAR`
/// on the same host prints its value.
#[test]
fn env_read_of_a_provider_s_value_env_or_a_gatehouse_variable_is_refused_before_anything_runs() {
    let env = Env::bare();
    provider_config(&env);
    let ws = env.mkdir("ws");
    let vars = [
        ("API_TOKEN", CANARY),
        (
            "GATEHOUSE_DATABASE_URL",
            "postgres://node:pw-canary@127.0.0.1:1/fleet",
        ),
        ("OTHER_VAR", "ordinary"),
    ];
    for name in ["API_TOKEN", "GATEHOUSE_DATABASE_URL"] {
        let m = manifest(
            &env,
            "env-secret",
            &component("env"),
            &[("env:read", Some(name))],
        );
        let input = json!({ "names": [name] }).to_string();
        // Without the database URL in the environment: the host under
        // test is not a fleet node, whatever the variable is called.
        let vars: Vec<(&str, &str)> = vars
            .iter()
            .copied()
            .filter(|(k, _)| *k != "GATEHOUSE_DATABASE_URL")
            .collect();
        let (run, v) = run_json_with_vars(&env, &m, &ws, "Full", &input, &[], &vars);
        run.expect(2);
        assert_eq!(v["code"], "SECRET_ENV_DENIED", "{v:#}");
        assert!(
            v["reason"].as_str().unwrap().contains(&format!("`{name}`")),
            "{v:#}"
        );
        assert_eq!(v["ran"], false, "nothing ran: {v:#}");
        assert!(!run.stdout.contains(CANARY) && !run.stderr.contains(CANARY));
    }
    // The host's own variable, set: still refused (the host is then a
    // fleet node and cannot open without its database, so the policy is
    // asked directly, as the gate asks it).
    let decided = env.run(&[
        "--json",
        "policy",
        "decide",
        &json!({"kind": "capability", "actor": "main", "capability": "env:read",
                "target": "GATEHOUSE_DATABASE_URL"})
        .to_string(),
        "--workspace",
        s(&ws),
    ]);
    decided.expect(2);
    assert_eq!(decided.json_lines()[0]["code"], "SECRET_ENV_DENIED");
    // The positive control.
    let m = manifest(
        &env,
        "env-other",
        &component("env"),
        &[("env:read", Some("OTHER_VAR"))],
    );
    let (run, v) = run_json_with_vars(
        &env,
        &m,
        &ws,
        "Full",
        r#"{"names":["OTHER_VAR","API_TOKEN"]}"#,
        &[],
        &vars[..1]
            .iter()
            .chain(&vars[2..])
            .copied()
            .collect::<Vec<_>>(),
    );
    run.expect(0);
    assert_eq!(
        output(&v)["values"],
        json!({"OTHER_VAR": "ordinary", "API_TOKEN": null}),
        "{v:#}"
    );
}

/// security round 3, item 1: `manifest check` names the clash of a
/// manifest that asks `env:read` on a provider's `value_env` or a
/// `GATEHOUSE_*` variable (exit 2, `SECRET_ENV_DENIED` and the name); the
/// positive control, `env:read OTHER_VAR`, checks clean.
#[test]
fn manifest_check_names_an_env_read_of_a_host_secret() {
    let env = Env::bare();
    provider_config(&env);
    for name in ["API_TOKEN", "GATEHOUSE_STATE_DIR"] {
        let m = manifest(
            &env,
            "env-secret",
            &component("env"),
            &[("env:read", Some(name))],
        );
        let run = env.run(&["manifest", "check", s(&m)]);
        run.expect_err(
            2,
            &["SECRET_ENV_DENIED", &format!("`{name}`"), "`env-secret`"],
        );
    }
    let m = manifest(
        &env,
        "env-other",
        &component("env"),
        &[("env:read", Some("OTHER_VAR"))],
    );
    env.run(&["manifest", "check", s(&m)]).expect(0);
}

/// security round 3, item 2: a provider's `value_file` is host state: an
/// executor with `fs:read **` on a workspace that holds the configuration
/// directory reads neither it (`HOST_STATE_HIDDEN`) nor, before it
/// exists, may it plant one there (`POLICY_MUTATION_DENIED`, nothing on
/// disk). The positive control: the configuration itself (no password in
/// it) and an ordinary file beside it are read.
#[test]
fn a_provider_s_value_file_is_hidden_from_reads_and_writes_even_before_it_exists() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::bare();
    provider_config(&env);
    let ws = env.root();
    // A second configuration whose value file exists, mode 0600 as the
    // host requires.
    let token = env.write("config/gatehouse/api.token", &format!("{CANARY}\n"));
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    env.write("config/gatehouse/notes.txt", "beside the configuration\n");
    let reader = manifest(
        &env,
        "reader",
        &component("write-file"),
        &[("fs:read", Some("**"))],
    );
    let batch = |ops: Value| json!({"op": "batch", "ops": ops}).to_string();
    let (run, v) = run_json(
        &env,
        &reader,
        &ws,
        "Full",
        &batch(json!([
            {"op": "read", "path": "config/gatehouse/api.token"},
            {"op": "read", "path": "config/gatehouse/gatehouse.toml"},
            {"op": "read", "path": "config/gatehouse/notes.txt"},
        ])),
        &[],
    );
    run.expect(0);
    let results = output(&v)["results"].clone();
    assert!(results[0].get("ok").is_none(), "{v:#}");
    assert!(!run.stdout.contains(CANARY), "{v:#}");
    assert!(
        results[1]["ok"]["content"]
            .as_str()
            .unwrap()
            .contains("[providers.files]"),
        "{v:#}"
    );
    assert_eq!(results[2]["ok"]["content"], "beside the configuration\n");
    let turn = v["turn"].as_str().unwrap();
    let codes: Vec<Value> = env
        .run(&["history", "--turn", turn, "--decisions"])
        .json_lines()
        .into_iter()
        .filter(|d| d["request"]["kind"] == "filesystem")
        .map(|d| d["decision"]["code"].clone())
        .collect();
    assert_eq!(codes, vec![json!("HOST_STATE_HIDDEN")], "{v:#}");
    // Before it exists: no executor plants the credential the host would
    // send.
    std::fs::remove_file(&token).unwrap();
    let writer = manifest(
        &env,
        "writer",
        &component("write-file"),
        &[("fs:write", Some("**"))],
    );
    let (run, v) = run_json(
        &env,
        &writer,
        &ws,
        "Full",
        r#"{"path":"config/gatehouse/api.token","content":"planted"}"#,
        &[],
    );
    assert_ne!(run.code, 0, "{v:#}");
    assert!(!token.exists(), "a value file was planted: {v:#}");
}

/// security round 3, item 2: a configuration whose `[state]
/// database_url` holds a password is host state (hidden from reads as
/// well as writes); one without a password stays policy (write-protected
/// only). Decided on the policy snapshot the host builds, without a
/// database to reach.
#[test]
fn a_configuration_holding_a_database_password_is_hidden_from_reads() {
    use gatehouse::config::{HostConfig, StatePaths};
    use gatehouse::policy::ProtectedKind;
    let env = Env::bare();
    let kind_of = |url: &str| {
        let path = env.write(
            "config/gatehouse/gatehouse.toml",
            &format!("[actors.main]\n[state]\ndatabase_url = \"{url}\"\n"),
        );
        let config = HostConfig::load(&path, None).unwrap();
        let state = StatePaths::under(&env.state_dir(), None, None);
        let protected = gatehouse::snapshot::protected_paths(&config, &state, &[]);
        let canonical = path.canonicalize().unwrap().display().to_string();
        protected
            .iter()
            .find(|p| p.path == canonical)
            .map(|p| p.kind)
            .unwrap()
    };
    assert_eq!(
        kind_of("postgres://node:s3cret@db.internal:5432/fleet"),
        ProtectedKind::State
    );
    assert_eq!(
        kind_of("postgres://node@db.internal:5432/fleet?password=s3cret"),
        ProtectedKind::State
    );
    // The positive control: no password, write-protected only.
    assert_eq!(
        kind_of("postgres://node@db.internal:5432/fleet"),
        ProtectedKind::Policy
    );
}

/// security round 3, item 9: with `max_level = "Supervised"`, `run
/// --level Full` and `serve --level Full` are refused with exit 3 and a
/// message naming both levels, before anything runs; `--level ReadOnly`
/// and `--level Supervised` work. The positive control: without
/// `max_level`, `--level Full` works as before.
#[test]
fn a_level_above_the_configuration_s_max_level_is_refused() {
    let env = Env::bare();
    let ws = env.mkdir("ws");
    let config = env.write(
        "config/gatehouse/gatehouse.toml",
        "level = \"Supervised\"\nmax_level = \"Supervised\"\n[actors.main]\nskills = [\"*\"]\n",
    );
    let hello = crate::support::guests::guest("hello");
    let (run, v) = run_json(&env, &hello, &ws, "Full", "{}", &[]);
    run.expect_err(
        3,
        &["level `Full` is above the configuration's `max_level` `Supervised`"],
    );
    assert!(v.is_null(), "nothing ran: {run:#?}");
    let serve = env.run(&["serve", "--mcp", "--level", "Full", "--executor", s(&hello)]);
    serve.expect_err(
        3,
        &["level `Full` is above the configuration's `max_level` `Supervised`"],
    );
    for level in ["ReadOnly", "Supervised"] {
        let (run, _) = run_json(&env, &hello, &ws, level, "{}", &[]);
        run.expect(0);
    }
    // A configuration whose own level is above its cap is invalid.
    std::fs::write(
        &config,
        "level = \"Full\"\nmax_level = \"ReadOnly\"\n[actors.main]\nskills = [\"*\"]\n",
    )
    .unwrap();
    let (run, _) = run_json(&env, &hello, &ws, "ReadOnly", "{}", &[]);
    run.expect_err(
        3,
        &["field `level`", "`Full` is above `max_level` `ReadOnly`"],
    );
    // The positive control: no cap.
    std::fs::write(
        &config,
        "level = \"Supervised\"\n[actors.main]\nskills = [\"*\"]\n",
    )
    .unwrap();
    let (run, _) = run_json(&env, &hello, &ws, "Full", "{}", &[]);
    run.expect(0);
}
