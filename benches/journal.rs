//! `cargo bench --bench journal`: the cost of the journaling filesystem
//! layer. One turn of `write-file` overwrites 100 existing files of 64 KiB
//! (`{"op": "many", ...}`), side by side: without a journal (the layer
//! still enforces globs and protected paths, nothing is saved) and with it
//! (each file's bytes stored once as a blob, fsynced, and each operation
//! journaled, fsynced, before it is done; the end states hashed). Twice:
//! a guest that does not sync its writes, and one that `sync-data`s each
//! file. Needs the guests built (`./setup.sh`).

use std::path::Path;
use std::time::Instant;

use gatehouse::config::{HostConfig, StatePaths};
use gatehouse::host::{Host, HostOptions, NoOne, TurnEnd, TurnRequest};
use gatehouse::manifest::Manifest;
use gatehouse::policy::Level;
use gatehouse::sandbox::GuestResult;

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
    let host = |journaled: bool| {
        let mut options = HostOptions::new(
            config.clone(),
            state.clone(),
            workspace.clone(),
            manifests.clone(),
        );
        options.level = Some(Level::Full);
        options.journaled = journaled;
        Host::open(options)
    };
    let (Ok(bare_host), Ok(journal_host)) = (host(false), host(true)) else {
        eprintln!("cannot open the hosts");
        return;
    };
    let originals = vec![b'o'; SIZE];
    let reset = || {
        for i in 0..FILES {
            let _ = std::fs::write(ws_canon.join(format!("out/f{i}.txt")), &originals);
        }
    };
    let run = |journaled: bool, sync: bool| -> Option<f64> {
        reset();
        let input = serde_json::json!({
            "op": "many", "dir": "out", "count": FILES, "size": SIZE, "sync": sync,
        })
        .to_string();
        let host = if journaled { &journal_host } else { &bare_host };
        let start = Instant::now();
        let outcome = host.run(TurnRequest::new("write-file", "main", input), &NoOne);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        match outcome.end {
            TurnEnd::Ran { run } if matches!(run.result, GuestResult::Ok { .. }) => Some(ms),
            end => {
                eprintln!("the write-file run failed: {end:?}");
                None
            }
        }
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
