//! `cargo bench --bench state`: one warm `hello` turn with its audit on,
//! side by side in one run (needs the guests: `./setup.sh`):
//!
//! - (a) the embedded state: SQLite files in a state directory;
//! - (b) a fleet's state: the PostgreSQL database at
//!   `GATEHOUSE_DATABASE_URL` (an owner's URL: the bench migrates it; it
//!   fails without one — `scripts/postgres.sh start DIR` prints one);
//! - (c) one bare `INSERT …; COMMIT` round trip of a row the size of the
//!   turn's audit record, to the same PostgreSQL, on the connection the
//!   host's turns use (the process's pool for that URL). On these 2-core
//!   VMs a round trip costs 17 µs when the server's backend process runs
//!   on the client's core and 80 µs or more when it must be woken on the
//!   other one: measured on two connections, (b) and (c) compared where
//!   the scheduler happened to put two backends, not two costs.
//!
//! Then the throughput of (a) and (b) with 2 threads. Each timing is the
//! p50 (and p99) over `CALLS` after `WARMUP`, in rounds that alternate
//! (a), (b) and (c) so that the machine's noise falls on all three. The
//! last line is one JSON object (read by programs): `sqlite_turn_p50_us`,
//! `postgres_turn_p50_us`, `postgres_commit_p50_us`,
//! `sqlite_turns_per_s_2_threads`, `postgres_turns_per_s_2_threads`, and
//! whether (b) ≤ (a) + 1.3 × (c).

use std::path::Path;
use std::time::Instant;

use gatehouse::config::{HostConfig, StatePaths};
use gatehouse::host::{Host, HostOptions, NoOne, TurnRequest};
use gatehouse::manifest::Manifest;

const WARMUP: usize = 200;
const CALLS: usize = 2_000;
const ROUNDS: usize = 4;
const THREAD_CALLS: usize = 1_000;

fn p(sorted: &[f64], q: usize) -> f64 {
    sorted[(sorted.len() * q / 100).min(sorted.len() - 1)]
}

/// Calls per second of `f` run `THREAD_CALLS` times on each of 2 threads.
fn two_threads(f: impl Fn() -> bool + Sync) -> Option<f64> {
    let start = Instant::now();
    let ok = std::thread::scope(|s| {
        let a = s.spawn(|| (0..THREAD_CALLS).all(|_| f()));
        let b = s.spawn(|| (0..THREAD_CALLS).all(|_| f()));
        a.join().unwrap_or(false) && b.join().unwrap_or(false)
    });
    ok.then(|| (2 * THREAD_CALLS) as f64 / start.elapsed().as_secs_f64())
}

fn fail(what: &str) -> ! {
    eprintln!("state bench: {what}");
    std::process::exit(1)
}

fn main() {
    let Ok(url) = std::env::var("GATEHOUSE_DATABASE_URL") else {
        fail(
            "GATEHOUSE_DATABASE_URL is not set: it needs an owner's postgresql url \
             (scripts/postgres.sh start DIR prints one)",
        )
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Ok(hello) = Manifest::load(&root.join("guests/hello/executor.toml")) else {
        fail("guests/hello is missing")
    };
    if !hello.component.exists() {
        fail("the guests are not built: run ./setup.sh first")
    }
    let tmp = std::env::temp_dir().join(format!("gatehouse-bench-state-{}", std::process::id()));
    let ws = tmp.join("ws");
    if std::fs::create_dir_all(&ws).is_err() {
        fail("cannot create the workspace")
    }
    let Ok(workspace) = ws.canonicalize().map(|w| w.display().to_string()) else {
        fail("cannot resolve the workspace")
    };
    let open = |dir: &str, database_url: Option<String>| {
        let mut state = StatePaths::under(&tmp.join(dir), None, None);
        state.database_url = database_url;
        Host::open(HostOptions::new(
            HostConfig::safe_default("bench"),
            state,
            workspace.clone(),
            vec![hello.clone()],
        ))
    };
    let pg = match gatehouse::state::pg::Pg::new(&url) {
        Ok(pg) => pg,
        Err(e) => fail(&gatehouse::util::chain(&e)),
    };
    if let Err(e) = pg.migrate() {
        fail(&gatehouse::util::chain(&e))
    }
    let (sqlite, postgres) = match (open("sqlite", None), open("postgres", Some(url.clone()))) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => fail(&gatehouse::util::chain(&e)),
    };
    let turn = |host: &Host| {
        host.run(TurnRequest::new("hello", "main", "{}"), &NoOne)
            .is_ok()
    };
    if !turn(&sqlite) || !turn(&postgres) {
        fail("a `hello` turn failed")
    }
    // (c)'s row: the size of the turn's audit record.
    let record = std::fs::read_to_string(tmp.join("sqlite/audit.jsonl"))
        .ok()
        .and_then(|t| t.lines().last().map(str::len))
        .unwrap_or(1024);
    let body = "x".repeat(record);
    let shared = match gatehouse::state::pg::Pg::shared(&url) {
        Ok(p) => p,
        Err(e) => fail(&gatehouse::util::chain(&e)),
    };
    if let Err(e) = shared.with("cannot create the bench table", |c| {
        c.batch_execute(
            "CREATE TABLE IF NOT EXISTS bench_commit (id bigserial PRIMARY KEY, body text NOT NULL)",
        )
    }) {
        fail(&gatehouse::util::chain(&e))
    }
    let commit = || {
        shared
            .with_prepared(
                "cannot insert the bench row",
                "INSERT INTO bench_commit (body) VALUES ($1)",
                |c, insert| c.execute(insert, &[&body]),
            )
            .is_ok()
    };
    let mut times: [Vec<f64>; 3] = Default::default();
    for _ in 0..WARMUP {
        if !(turn(&sqlite) && turn(&postgres) && commit()) {
            fail("a warm-up call failed")
        }
    }
    for _ in 0..ROUNDS {
        for (i, t) in times.iter_mut().enumerate() {
            for _ in 0..CALLS / ROUNDS {
                let start = Instant::now();
                let ok = match i {
                    0 => turn(&sqlite),
                    1 => turn(&postgres),
                    _ => commit(),
                };
                if !ok {
                    fail("a timed call failed")
                }
                t.push(start.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    for t in &mut times {
        t.sort_by(f64::total_cmp);
    }
    let [a, b, c] = &times;
    let sqlite_2 = two_threads(|| turn(&sqlite)).unwrap_or(0.0);
    let postgres_2 = two_threads(|| turn(&postgres)).unwrap_or(0.0);
    let _ = shared.with("cannot drop the bench table", |c| {
        c.batch_execute("DROP TABLE IF EXISTS bench_commit")
    });
    let _ = std::fs::remove_dir_all(&tmp);

    println!("one warm `hello` turn, audit on ({CALLS} each after {WARMUP}, {ROUNDS} alternating rounds; audit record {record} bytes)");
    println!("{:<44} {:>10} {:>10}", "", "p50 µs", "p99 µs");
    for (name, t) in [
        ("(a) sqlite turn", a),
        ("(b) postgresql turn", b),
        ("(c) bare INSERT + COMMIT (postgresql)", c),
    ] {
        println!("{name:<44} {:>10.1} {:>10.1}", p(t, 50), p(t, 99));
    }
    println!("2 threads: sqlite {sqlite_2:.0} turns/s, postgresql {postgres_2:.0} turns/s");
    let (a50, b50, c50) = (p(a, 50), p(b, 50), p(c, 50));
    let bound = a50 + 1.3 * c50;
    println!(
        "target (b) <= (a) + 1.3 x (c): {b50:.1} <= {bound:.1} µs: {}",
        if b50 <= bound { "met" } else { "NOT met" }
    );
    println!(
        "{}",
        serde_json::json!({
            "sqlite_turn_p50_us": (a50 * 10.0).round() / 10.0,
            "postgres_turn_p50_us": (b50 * 10.0).round() / 10.0,
            "postgres_commit_p50_us": (c50 * 10.0).round() / 10.0,
            "sqlite_turns_per_s_2_threads": sqlite_2.round(),
            "postgres_turns_per_s_2_threads": postgres_2.round(),
            "target_met": b50 <= bound,
        })
    );
}
