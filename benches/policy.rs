//! `cargo bench --bench policy`: the gate's hot paths, side by side.
//!
//! Each row is timed in batches (so the clock's own cost is spread over many
//! calls) and reported as p50 / p99 per call. Ratios compare each way of
//! doing a thing with the naive way in the same run. Targets (issue 3):
//! `decide` ≤ 1 µs, warm `effective_outcome` ≤ 10 µs.

use std::hint::black_box;
use std::time::Instant;

use gatehouse::state::grants::{GrantStore, NewGrant};

/// The time of the benchmarked decisions (no grant here expires).
const NOW: UtcTime = UtcTime(1_800_000_000);
use gatehouse::policy::{
    decide, decide_json, Actor, Capability, Grant, Identity, Level, Request, RequestKind, Roots,
    Snapshot, UtcTime, WorkspaceMode, WorkspaceRoot,
};

const SAMPLES: usize = 200;

/// Per-call p50 and p99 in nanoseconds of `f`, run `batch` times per sample.
fn measure(batch: usize, mut f: impl FnMut()) -> (f64, f64) {
    for _ in 0..batch {
        f();
    }
    let mut per_call: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..batch {
                f();
            }
            start.elapsed().as_nanos() as f64 / batch as f64
        })
        .collect();
    per_call.sort_by(f64::total_cmp);
    (per_call[SAMPLES / 2], per_call[SAMPLES * 99 / 100])
}

fn row(name: &str, (p50, p99): (f64, f64), baseline: Option<f64>) {
    let ratio = baseline
        .map(|b| format!("{:.2}x", p50 / b))
        .unwrap_or_default();
    println!(
        "| {name:<52} | {:>10.0} | {:>10.0} | {ratio:>8} |",
        p50, p99
    );
}

fn snapshot(grants: Vec<Grant>) -> Snapshot {
    let mut actors = std::collections::BTreeMap::new();
    actors.insert(
        "main".to_string(),
        Actor {
            identity: Some(Identity::new("cli", "alice")),
            skills: vec!["hello".into()],
            tools: vec!["git".into(), "ls".into(), "grep".into()],
            workspaces: vec![WorkspaceRoot {
                path: "/w".into(),
                mode: WorkspaceMode::ReadWrite,
            }],
            ..Actor::default()
        },
    );
    Snapshot {
        level: Level::Supervised,
        actors,
        executors: Default::default(),
        grants,
        roots: Roots::default(),
    }
}

fn main() {
    let grants: Vec<Grant> = (0..10)
        .map(|i| Grant {
            id: i,
            channel: "cli".into(),
            sender_id: "alice".into(),
            capability: "fs:write".into(),
            target: format!("/w/dir{i}/**"),
            granted_at: UtcTime(0),
            expires_at: None,
            granted_by: None,
            revoked_at: None,
        })
        .collect();
    let snap = snapshot(grants);
    let cap_req = Request::new(
        "main",
        RequestKind::Capability {
            capability: Capability::FsWrite,
            target: Some("/w/dir9/notes/a.md".into()),
            canonical_target: None,
            executor: None,
        },
    );
    let tool_req = Request::new(
        "main",
        RequestKind::Tool {
            tool: "git".into(),
            command: Some("git status && ls -la | grep notes".into()),
        },
    );
    let cap_json = serde_json::to_value(&cap_req).unwrap_or_default();

    println!(
        "| {:<52} | {:>10} | {:>10} | {:>8} |",
        "operation", "p50 ns", "p99 ns", "ratio"
    );
    println!("|{:-<54}|{:-<12}|{:-<12}|{:-<10}|", "", "", "", "");
    let cap = measure(2000, || {
        black_box(decide(black_box(&snap), black_box(&cap_req), NOW));
    });
    row("decide: capability (10 grants in the snapshot)", cap, None);
    row(
        "decide_json: same, parsed from JSON first",
        measure(2000, || {
            black_box(decide_json(black_box(&snap), black_box(&cap_json), NOW));
        }),
        Some(cap.0),
    );
    row(
        "decide: tool (3 segments, screened)",
        measure(2000, || {
            black_box(decide(black_box(&snap), black_box(&tool_req), NOW));
        }),
        None,
    );

    let dir = std::env::temp_dir().join(format!("gatehouse-bench-{}", std::process::id()));
    let db = dir.join("grants.db");
    let now = UtcTime(1_800_000_000);
    let store = match GrantStore::open(&db) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot open the bench store: {e}");
            return;
        }
    };
    for i in 0..50 {
        let new = NewGrant {
            identity: Identity::new("cli", if i % 2 == 0 { "alice" } else { "bob" }),
            capability: "fs:write".into(),
            target: format!("/w/dir{i}/**"),
            expires_at: None,
            granted_by: None,
        };
        if let Err(e) = store.record(&new, now) {
            eprintln!("cannot record a bench grant: {e}");
            return;
        }
    }
    let alice = Identity::new("cli", "alice");
    let warm = measure(500, || {
        black_box(
            store
                .effective_outcome(
                    Level::Supervised,
                    Capability::FsWrite,
                    Some("/w/dir48/a"),
                    &alice,
                    now,
                )
                .ok(),
        );
    });
    let naive = measure(20, || {
        // The reference system's way: one connection per call.
        let s = GrantStore::open(&db).ok();
        black_box(s.and_then(|s| {
            s.effective_outcome(
                Level::Supervised,
                Capability::FsWrite,
                Some("/w/dir48/a"),
                &alice,
                now,
            )
            .ok()
        }));
    });
    row(
        "effective_outcome: open a connection per call (naive)",
        naive,
        None,
    );
    row(
        "effective_outcome: warm store (50 rows)",
        warm,
        Some(naive.0),
    );
    row(
        "effective_outcome: matrix decides alone (no query)",
        measure(2000, || {
            black_box(
                store
                    .effective_outcome(Level::Full, Capability::FsWrite, Some("/w/a"), &alice, now)
                    .ok(),
            );
        }),
        Some(naive.0),
    );
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
    println!("\ntargets: decide <= 1000 ns; warm effective_outcome <= 10000 ns");
}
