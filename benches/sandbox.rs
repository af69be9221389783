//! `cargo bench --bench sandbox`: one turn of the `hello` executor through
//! the host, side by side: a host whose compiled-component cache is empty
//! (the component is compiled every turn, the naive way, and what a second
//! `gatehouse run` would cost without the cache) against one long-lived
//! host whose cache is warm. Needs the guests built (`./setup.sh`).

use std::path::Path;
use std::time::Instant;

use gatehouse::config::{HostConfig, StatePaths};
use gatehouse::host::{Host, HostOptions, NoOne, TurnRequest};
use gatehouse::manifest::Manifest;

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
    let config = HostConfig::safe_default("bench");
    let open = |state_dir: &Path| {
        Host::open(HostOptions::new(
            config.clone(),
            StatePaths::under(state_dir, None, None),
            workspace.clone(),
            vec![manifest.clone()],
        ))
    };
    let turn = |host: &Host| -> Option<f64> {
        let start = Instant::now();
        let outcome = host.run(TurnRequest::new("hello", "main", "{}"), &NoOne);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        if !outcome.is_ok() {
            eprintln!("the hello turn failed: {:?}", outcome.end);
            return None;
        }
        Some(ms)
    };
    // Cold: a new host with an empty cache per turn (engine, probe,
    // compilation, every time).
    let mut cold = Vec::new();
    for i in 0..10 {
        let Ok(host) = open(&tmp.join(format!("cold-{i}"))) else {
            return;
        };
        let Some(ms) = turn(&host) else { return };
        cold.push(ms);
    }
    // Warm: one host, one turn to fill its caches, then the measured ones.
    let Ok(host) = open(&tmp.join("warm")) else {
        return;
    };
    let _ = turn(&host);
    let mut warm = Vec::new();
    for _ in 0..50 {
        let Some(ms) = turn(&host) else { return };
        warm.push(ms);
    }
    let (c50, c99) = (percentile(cold.clone(), 50), percentile(cold, 99));
    let (w50, w99) = (percentile(warm.clone(), 50), percentile(warm, 99));
    println!("| one turn of `hello` through the host (gate, audit, load, link, instantiate, run) | p50 ms | p99 ms | ratio |");
    println!("|---|---|---|---|");
    println!(
        "| naive: a new host, compiling the component every turn | {c50:.2} | {c99:.2} | 1.00x |"
    );
    println!(
        "| gatehouse: a long-lived host, compiled-component cache hit | {w50:.2} | {w99:.2} | {:.3}x |",
        w50 / c50
    );
    println!(
        "\nthe cache makes a repeated turn {:.0}x faster at p50",
        c50 / w50
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
