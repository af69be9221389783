//! `config:read`: the host's `[values]` through `wasi:config/store`, a
//! capability whose unit keeps its runtime (the values) for the life of
//! the process. Each claim is tested by the guest that asks.

use crate::support::guests::{component, manifest, output, run_json};
use crate::support::{s, Env};

/// An environment whose configuration defines `values` (TOML lines).
fn env_with_values(values: &str) -> Env {
    let env = Env::new();
    env.write(
        "config/gatehouse/gatehouse.toml",
        &format!("[actors.main]\nchannel = \"cli\"\nsender = \"tester\"\nskills = [\"*\"]\n[values]\n{values}"),
    );
    env
}

#[test]
fn config_read_hands_the_granted_values_and_nothing_else() {
    let env = env_with_values("region = \"eu-west\"\ndb_host = \"10.0.0.5\"\n");
    let ws = env.mkdir("ws");
    let m = manifest(
        &env,
        "config-read",
        &component("config-read"),
        &[
            ("config:read", Some("region")),
            ("config:read", Some("missing")),
        ],
    );
    let (run, v) = run_json(
        &env,
        &m,
        &ws,
        "Full",
        r#"{"names":["region","db_host","missing"]}"#,
        &[],
    );
    run.expect(0);
    let out = output(&v);
    // A name granted but not defined reads as absent; one defined but
    // not granted reads as absent too, and `get-all` does not list it.
    assert_eq!(
        out["values"],
        serde_json::json!({"region": "eu-west", "db_host": null, "missing": null})
    );
    assert_eq!(out["all"], serde_json::json!({"region": "eu-west"}));
    let linked: Vec<&str> = v["run"]["linked"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    assert!(linked.contains(&"wasi:config"), "{linked:?}");
    assert!(linked.contains(&"config `region`"), "{linked:?}");
    assert!(!linked.iter().any(|l| l.contains("db_host")), "{linked:?}");
}

#[test]
fn without_config_read_the_store_is_not_linked() {
    let env = env_with_values("region = \"eu-west\"\n");
    let ws = env.mkdir("ws");
    let m = manifest(
        &env,
        "config-read-bare",
        &component("config-read"),
        &[("compute:pure", None)],
    );
    let (run, v) = run_json(&env, &m, &ws, "Full", r#"{"names":["region"]}"#, &[]);
    run.expect(2);
    assert_eq!(v["code"], "IMPORT_NOT_GRANTED", "{v:#}");
    assert_eq!(v["ran"], false, "{v:#}");
    assert_eq!(
        v["reason"],
        "`wasi:config/store@0.2.0-draft` needs `config:read`, which this turn was not granted (a manifest declares it as `[[capabilities]] name = \"config:read\"`)"
    );
}

#[test]
fn config_read_needs_an_approval_under_supervised() {
    let env = env_with_values("region = \"eu-west\"\n");
    let ws = env.mkdir("ws");
    let m = manifest(
        &env,
        "config-read",
        &component("config-read"),
        &[("config:read", Some("region"))],
    );
    let (run, v) = run_json(&env, &m, &ws, "Supervised", r#"{"names":["region"]}"#, &[]);
    run.expect(4);
    assert_eq!(v["code"], "APPROVAL_REQUIRED", "{v:#}");
    assert_eq!(v["pending"][0]["capability"], "config:read");
    assert_eq!(v["pending"][0]["target"], "region");
    // A remembered grant stands in for the approval.
    env.grant("config:read", "region");
    let (run, v) = run_json(&env, &m, &ws, "Supervised", r#"{"names":["region"]}"#, &[]);
    run.expect(0);
    assert_eq!(
        output(&v)["values"],
        serde_json::json!({"region": "eu-west"})
    );
}

#[test]
fn a_values_name_that_no_target_could_name_is_refused_by_name() {
    let env = env_with_values("\"two words\" = \"x\"\n");
    let ws = env.mkdir("ws");
    let m = manifest(
        &env,
        "hello",
        &component("hello"),
        &[("compute:pure", None)],
    );
    let run = env.run(&["run", s(&m), "--workspace", s(&ws), "--input", "{}"]);
    run.expect_err(3, &["values.two words", "whitespace"]);
    run.expect_lowercase_message();
}
