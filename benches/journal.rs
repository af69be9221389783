//! `cargo bench --bench journal`: the cost of the journaling filesystem
//! layer. One turn of `write-file` overwrites 100 existing files of 64 KiB
//! (`{"op": "many", ...}`), side by side: without a journal (the layer
//! still enforces globs and protected paths, nothing is saved) and with it
//! (each file's bytes stored once as a blob, fsynced, and each operation
//! journaled, fsynced, before it is done; the end states hashed). Twice:
//! a guest that does not sync its writes, and one that `sync-data`s each
//! file. Needs the guests built (`./setup.sh`).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use gatehouse::config::{HostConfig, StatePaths};
use gatehouse::manifest::Manifest;
use gatehouse::policy::Level;
use gatehouse::sandbox::{execute, GuestResult, Limits, Sandbox, TurnContext};
use gatehouse::snapshot::{self, Sources};
use gatehouse::turn::{gate, Gate, TurnInput};
use gatehouse::undo::{TurnJournal, TurnRecord};

const FILES: usize = 100;
const SIZE: usize = 64 * 1024;
const RUNS: usize = 15;

fn percentile(mut v: Vec<f64>, p: usize) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) * p / 100]
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Ok(manifest) = Manifest::load(&root.join("guests/write-file/executor.toml")) else {
        eprintln!("guests/write-file/executor.toml is missing");
        return;
    };
    if !manifest.component.exists() {
        eprintln!("the guests are not built: run ./setup.sh first");
        return;
    }
    // Under the crate's target directory: a real disk, as a workspace is
    // (a tmpfs would make every fsync free).
    let tmp = root
        .join("target")
        .join(format!("gatehouse-bench-journal-{}", std::process::id()));
    let ws = tmp.join("ws");
    if std::fs::create_dir_all(ws.join("out")).is_err() {
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
        level: Some(Level::Full),
        grants: vec![],
    }) else {
        return;
    };
    let limits = Limits {
        deadline_ms: 120_000,
        ..Limits::default()
    };
    let Gate::Ready { plan, .. } = gate(TurnInput {
        snapshot: &snap,
        actor: "main",
        manifest: &manifests[0],
        turn_id: "bench".into(),
        limits,
        approved_once: &[],
        // The bench times the journal, not the switch.
        isolation: &gatehouse::sandbox::isolation::probe(&gatehouse::sandbox::EngineProfile::new(
            Limits::default().memory_bytes,
        )),
        on_degraded: gatehouse::sandbox::OnDegraded::Warn,
    }) else {
        eprintln!("the gate did not allow write-file");
        return;
    };
    let Ok(sandbox) = Sandbox::new(&state.cache_dir, Limits::default().memory_bytes) else {
        return;
    };
    let sandbox = Arc::new(sandbox);
    let originals = vec![b'o'; SIZE];
    let reset = || {
        for i in 0..FILES {
            let _ = std::fs::write(ws_canon.join(format!("out/f{i}.txt")), &originals);
        }
    };
    let mut turn = 0usize;
    let mut run = |journaled: bool, sync: bool| -> Option<f64> {
        reset();
        turn += 1;
        let id = format!("bench-{turn}");
        let journal = if journaled {
            let record = TurnRecord {
                turn: id.clone(),
                executor: "write-file".into(),
                actor: "main".into(),
                level: "Full".into(),
                started_at: gatehouse::grants::now_utc(),
                finished_at: None,
                status: "running".into(),
                undo: "none".into(),
            };
            Some(TurnJournal::create(&state.history_dir, &record, &[]).ok()?)
        } else {
            None
        };
        let context = TurnContext::new(
            id,
            "main",
            snap.clone(),
            manifests.clone(),
            state.state_dir.join("memory.db"),
        )
        .journaled(journal);
        let input = serde_json::json!({
            "op": "many", "dir": "out", "count": FILES, "size": SIZE, "sync": sync,
        })
        .to_string();
        let start = Instant::now();
        let report = execute(&sandbox, &plan, &input, &context).ok()?;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        if !matches!(report.result, GuestResult::Ok { .. }) {
            eprintln!("the write-file run failed: {:?}", report.result);
            return None;
        }
        Some(ms)
    };
    // Warm the compiled-component cache.
    let _ = run(false, false);
    println!(
        "| a turn overwriting {FILES} files of {} KiB | p50 ms | p99 ms | ratio (p50) |",
        SIZE / 1024
    );
    println!("|---|---|---|---|");
    for sync in [false, true] {
        let mut bare = Vec::new();
        let mut journaled = Vec::new();
        for _ in 0..RUNS {
            let (Some(b), Some(j)) = (run(false, sync), run(true, sync)) else {
                eprintln!("a run failed");
                let _ = std::fs::remove_dir_all(&tmp);
                return;
            };
            bare.push(b);
            journaled.push(j);
        }
        let guest = if sync {
            "guest syncs each file"
        } else {
            "guest does not sync"
        };
        let (b50, b99) = (percentile(bare.clone(), 50), percentile(bare, 99));
        let (j50, j99) = (percentile(journaled.clone(), 50), percentile(journaled, 99));
        println!("| {guest}: no journal | {b50:.2} | {b99:.2} | 1.00x |");
        println!(
            "| {guest}: journaled (blobs + write-ahead journal, fsynced) | {j50:.2} | {j99:.2} | {:.2}x |",
            j50 / b50
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
