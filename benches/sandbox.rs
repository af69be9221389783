//! `cargo bench --bench sandbox`: one turn of the `hello` executor, side by
//! side: compiling the component every run (the naive way, and what a
//! second `gatehouse run` would cost without the cache) against loading it
//! from gatehouse's compiled-component cache. Needs the guests built
//! (`./setup.sh`).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use gatehouse::config::{HostConfig, StatePaths};
use gatehouse::manifest::Manifest;
use gatehouse::sandbox::{execute, Limits, Sandbox, TurnContext};
use gatehouse::snapshot::{self, Sources};
use gatehouse::turn::{gate, Gate, TurnInput};

fn percentile(mut v: Vec<f64>, p: usize) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) * p / 100]
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Ok(manifest) = Manifest::load(&root.join("guests/hello/executor.toml")) else {
        eprintln!("guests/hello/executor.toml is missing");
        return;
    };
    if !manifest.component.exists() {
        eprintln!("the guests are not built: run ./setup.sh first");
        return;
    }
    let tmp = std::env::temp_dir().join(format!("gatehouse-bench-sandbox-{}", std::process::id()));
    let ws = tmp.join("ws");
    if std::fs::create_dir_all(&ws).is_err() {
        return;
    }
    let Ok(ws_canon) = ws.canonicalize() else {
        return;
    };
    let workspace = ws_canon.display().to_string();
    let state = StatePaths::under(&tmp.join("state"), None, None);
    let config = HostConfig::safe_default("bench");
    let manifests = vec![manifest];
    let Ok(snap) = snapshot::build(Sources {
        config: &config,
        state: &state,
        manifests: &manifests,
        turn_workspace: &workspace,
        home: None,
        level: None,
        grants: vec![],
    }) else {
        return;
    };
    let Gate::Ready { plan, .. } = gate(TurnInput {
        snapshot: &snap,
        actor: "main",
        manifest: &manifests[0],
        turn_id: "bench".into(),
        limits: Limits::default(),
        approved_once: &[],
        // The bench times a turn, not the switch: the gate is given the
        // report of the default engine and `warn`.
        isolation: &gatehouse::sandbox::isolation::probe(&gatehouse::sandbox::EngineProfile::new(
            Limits::default().memory_bytes,
        )),
        on_degraded: gatehouse::sandbox::OnDegraded::Warn,
    }) else {
        eprintln!("the gate did not allow hello");
        return;
    };
    let context = TurnContext::new(
        "bench",
        "main",
        snap.clone(),
        manifests.clone(),
        state.state_dir.join("memory.db"),
    );

    let time_runs = |n: usize, fresh_cache_each_run: bool| -> Vec<f64> {
        let mut out = Vec::new();
        let warm = Sandbox::new(&state.cache_dir, Limits::default().memory_bytes).map(Arc::new);
        for i in 0..n {
            let sandbox = if fresh_cache_each_run {
                Sandbox::new(
                    &tmp.join(format!("cold-{i}")),
                    Limits::default().memory_bytes,
                )
                .map(Arc::new)
            } else {
                match &warm {
                    Ok(s) => Ok(s.clone()),
                    Err(_) => {
                        Sandbox::new(&state.cache_dir, Limits::default().memory_bytes).map(Arc::new)
                    }
                }
            };
            let Ok(sandbox) = sandbox else { return out };
            let start = Instant::now();
            if execute(&sandbox, &plan, "{}", &context).is_err() {
                eprintln!("the hello run failed");
                return out;
            }
            out.push(start.elapsed().as_secs_f64() * 1e3);
        }
        out
    };
    let cold = time_runs(10, true);
    // One run to fill the cache, then the measured ones.
    let _ = time_runs(1, false);
    let warm = time_runs(50, false);
    if cold.is_empty() || warm.is_empty() {
        return;
    }
    let (c50, c99) = (percentile(cold.clone(), 50), percentile(cold, 99));
    let (w50, w99) = (percentile(warm.clone(), 50), percentile(warm, 99));
    println!("| one turn of `hello` (read, sha256, load, link, instantiate, run) | p50 ms | p99 ms | ratio |");
    println!("|---|---|---|---|");
    println!("| naive: compile the component every run | {c50:.2} | {c99:.2} | 1.00x |");
    println!(
        "| gatehouse: compiled-component cache hit | {w50:.2} | {w99:.2} | {:.3}x |",
        w50 / c50
    );
    println!(
        "\nthe cache makes a repeated run {:.0}x faster at p50",
        c50 / w50
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
