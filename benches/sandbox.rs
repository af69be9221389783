//! `cargo bench --bench sandbox`: one call of the `hello` executor with
//! input `{}`, side by side in one run (needs the guests: `./setup.sh`):
//!
//! - (a) naive wasmtime: the component compiled once; each call a new
//!   `Linker` with WASI added, a new `Store`, instantiate, call;
//! - (b) bare tuned wasmtime: the pooling allocator as gatehouse configures
//!   it, one cached `InstancePre`, a fresh store per call, no gate;
//! - (c) a gatehouse turn: `Host::run` on a host opened once (the default
//!   configuration, actor `main`), timed from the call to the returned
//!   outcome: the decisions, the plan, a fresh instance, the call and the
//!   audit record, nothing printed.
//!
//! Each over `CALLS` calls after `WARMUP`; then the throughput of (b) and
//! (c) with 2 threads; then (no target) a `read-file` turn allowed by a
//! remembered grant. The last line is one JSON object (read by programs).

mod common;

use std::path::Path;
use std::time::Instant;

use common::tuned_engine;
use gatehouse::config::{HostConfig, StatePaths};
use gatehouse::host::{EngineKind, Host, HostOptions, NoOne, TurnRequest};
use gatehouse::manifest::Manifest;
use gatehouse::policy::Identity;
use gatehouse::state::grants::{now_utc, NewGrant};
use wasmtime::component::{Component, InstancePre, Linker, ResourceTable, Val};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

const WARMUP: usize = 1_000;
const CALLS: usize = 10_000;
const THREAD_CALLS: usize = 5_000;

struct Bare {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for Bare {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

fn bare_state() -> Bare {
    Bare {
        wasi: WasiCtxBuilder::new().build(),
        table: ResourceTable::new(),
    }
}

/// WASI and a no-op `gatehouse:executor/log`: what `hello` imports.
fn bare_linker(engine: &Engine) -> wasmtime::Result<Linker<Bare>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    linker.instance("gatehouse:executor/types@0.1.0")?;
    linker
        .instance("gatehouse:executor/log@0.1.0")?
        .func_new("log", |_, _, _, _| Ok(()))?;
    Ok(linker)
}

/// One call of `run("{}")` on a fresh instance of `pre`.
fn bare_call(pre: &InstancePre<Bare>) -> wasmtime::Result<()> {
    let mut store = Store::new(pre.engine(), bare_state());
    let instance = pre.instantiate(&mut store)?;
    let run = instance
        .get_func(&mut store, "run")
        .ok_or_else(|| wasmtime::format_err!("no `run` export"))?;
    let mut results = [Val::Bool(false)];
    run.call(&mut store, &[Val::String("{}".into())], &mut results)?;
    match &results[0] {
        Val::Result(Ok(_)) => Ok(()),
        other => Err(wasmtime::format_err!("`run` returned {other:?}")),
    }
}

/// The input of every `read-file` turn: a file the bench writes.
const READ_INPUT: &str = r#"{"path":"a.txt"}"#;

/// Records the grant the `read-file` turns run under: `fs:read` on the
/// whole `workspace`, remembered for the bench's identity. Whether it was.
fn grant_workspace_read(state: &StatePaths, workspace: &str) -> bool {
    let Ok(stores) = gatehouse::state::Stores::new(state) else {
        return false;
    };
    stores
        .grants
        .record(
            &NewGrant {
                identity: Identity::new("cli", "bench"),
                capability: "fs:read".into(),
                target: format!("{workspace}/**"),
                expires_at: None,
                granted_by: Some("bench".into()),
            },
            now_utc(),
        )
        .is_ok()
}

/// p50 and p99 in µs of `CALLS` calls of `f` after `WARMUP`.
fn timed(mut f: impl FnMut() -> bool) -> Option<(f64, f64)> {
    for _ in 0..WARMUP {
        if !f() {
            return None;
        }
    }
    let mut us = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let start = Instant::now();
        if !f() {
            return None;
        }
        us.push(start.elapsed().as_secs_f64() * 1e6);
    }
    us.sort_by(f64::total_cmp);
    Some((us[CALLS / 2], us[CALLS * 99 / 100]))
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

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (Ok(hello), Ok(read_file)) = (
        Manifest::load(&root.join("guests/hello/executor.toml")),
        Manifest::load(&root.join("guests/read-file/executor.toml")),
    ) else {
        eprintln!("guests/hello or guests/read-file is missing");
        return;
    };
    if !hello.component.exists() {
        eprintln!("the guests are not built: run ./setup.sh first");
        return;
    }
    let Ok(bytes) = std::fs::read(&hello.component) else {
        return;
    };
    let tmp = std::env::temp_dir().join(format!("gatehouse-bench-sandbox-{}", std::process::id()));
    let ws = tmp.join("ws");
    if std::fs::create_dir_all(&ws).is_err() || std::fs::write(ws.join("a.txt"), "abc").is_err() {
        return;
    }
    let Ok(ws_canon) = ws.canonicalize() else {
        return;
    };
    let workspace = ws_canon.display().to_string();

    // `cargo bench --bench sandbox -- --profile N [--two-threads]
    // [--one-shot] [--read-file]`: only N turns of (c) (on each of 2
    // threads; of `read-file` instead of `hello`), nothing
    // timed (for `perf record`); `--one-shot` builds the one-shot engine,
    // whose small pool fits in what valgrind can map (for
    // `valgrind --tool=callgrind`: the turn's own costs are the same).
    let mut args = std::env::args().skip_while(|a| a != "--profile").skip(1);
    if let Some(n) = args.next().and_then(|n| n.parse::<usize>().ok()) {
        let config = HostConfig::safe_default("bench");
        let state = StatePaths::under(&tmp.join("state"), None, None);
        // `--read-file`: the `read-file` turn (a remembered grant) instead.
        let read = std::env::args().any(|a| a == "--read-file");
        if read && !grant_workspace_read(&state, &workspace) {
            eprintln!("the `fs:read` grant could not be recorded");
            return;
        }
        let (executor, input) = if read {
            ("read-file", READ_INPUT)
        } else {
            ("hello", "{}")
        };
        let mut options = HostOptions::new(config, state, workspace, vec![hello, read_file]);
        if std::env::args().any(|a| a == "--one-shot") {
            options.engine = EngineKind::OneShot;
        }
        let Ok(host) = Host::open(options) else {
            return;
        };
        let threads = std::env::args().any(|a| a == "--two-threads");
        let one = || {
            (0..n).all(|_| {
                let outcome = host.run(TurnRequest::new(executor, "main", input), &NoOne);
                if !outcome.is_ok() {
                    eprintln!(
                        "{}",
                        serde_json::to_string(&outcome.end).unwrap_or_default()
                    );
                }
                outcome.is_ok()
            })
        };
        let ok = if threads {
            std::thread::scope(|s| {
                let a = s.spawn(one);
                let b = s.spawn(one);
                a.join().unwrap_or(false) && b.join().unwrap_or(false)
            })
        } else {
            one()
        };
        let _ = std::fs::remove_dir_all(&tmp);
        eprintln!("{n} turns: {}", if ok { "ok" } else { "a turn failed" });
        return;
    }

    // `--profile-bare N`: only N calls of (b), untimed (its CPU per call,
    // measured the same way as (c)'s, is the floor a turn is compared to).
    let mut args = std::env::args()
        .skip_while(|a| a != "--profile-bare")
        .skip(1);
    if let Some(n) = args.next().and_then(|n| n.parse::<usize>().ok()) {
        let Ok(engine) = tuned_engine() else { return };
        let Ok(pre) = Component::new(&engine, &bytes)
            .and_then(|c| bare_linker(&engine).and_then(|l| l.instantiate_pre(&c)))
        else {
            return;
        };
        let ok = (0..n).all(|_| bare_call(&pre).is_ok());
        let _ = std::fs::remove_dir_all(&tmp);
        eprintln!(
            "{n} bare calls: {}",
            if ok { "ok" } else { "a call failed" }
        );
        return;
    }

    // (a) naive.
    let Ok(naive_engine) = Engine::new(Config::new().wasm_component_model(true)) else {
        return;
    };
    let Ok(naive_component) = Component::new(&naive_engine, &bytes) else {
        eprintln!("hello does not compile");
        return;
    };
    let naive = timed(|| {
        bare_linker(&naive_engine)
            .and_then(|l| l.instantiate_pre(&naive_component))
            .and_then(|pre| bare_call(&pre))
            .is_ok()
    });

    // (b) bare tuned.
    let Ok(engine) = tuned_engine() else { return };
    let Ok(pre) = Component::new(&engine, &bytes)
        .and_then(|c| bare_linker(&engine).and_then(|l| l.instantiate_pre(&c)))
    else {
        return;
    };
    let bare = timed(|| bare_call(&pre).is_ok());
    let bare_2 = two_threads(|| bare_call(&pre).is_ok());

    // (c) gatehouse.
    let config = HostConfig::safe_default("bench");
    let state = StatePaths::under(&tmp.join("state"), None, None);
    let Ok(host) = Host::open(HostOptions::new(
        config.clone(),
        state.clone(),
        workspace.clone(),
        vec![hello.clone(), read_file.clone()],
    )) else {
        return;
    };
    let turn = |executor: &str, input: &str| {
        host.run(TurnRequest::new(executor, "main", input), &NoOne)
            .is_ok()
    };
    let gatehouse = timed(|| turn("hello", "{}"));
    let gatehouse_2 = two_threads(|| turn("hello", "{}"));

    // A `read-file` turn allowed by a remembered grant (no target).
    let granted = grant_workspace_read(&state, &workspace);
    let read = match (
        granted,
        Host::open(HostOptions::new(config, state, workspace, vec![read_file])),
    ) {
        (true, Ok(h)) => timed(|| {
            h.run(TurnRequest::new("read-file", "main", READ_INPUT), &NoOne)
                .is_ok()
        }),
        _ => None,
    };
    let _ = std::fs::remove_dir_all(&tmp);

    let (Some(naive), Some(bare), Some(gatehouse), Some(bare_2), Some(gatehouse_2)) =
        (naive, bare, gatehouse, bare_2, gatehouse_2)
    else {
        eprintln!("a run failed");
        return;
    };
    println!("| one call of `hello` with `{{}}` ({CALLS} calls after {WARMUP}) | p50 µs | p99 µs | vs gatehouse (p50) |");
    println!("|---|---|---|---|");
    let row = |name: &str, (p50, p99): (f64, f64)| {
        println!(
            "| {name} | {p50:.1} | {p99:.1} | {:.2}x |",
            p50 / gatehouse.0
        )
    };
    row("(a) naive: new Linker + WASI + Store per call", naive);
    row(
        "(b) bare tuned wasmtime: pooling, cached InstancePre, no gate",
        bare,
    );
    row(
        "(c) gatehouse: Host::run (gate, plan, instance, call, audit)",
        gatehouse,
    );
    if let Some(read) = read {
        row(
            "gatehouse: a `read-file` turn allowed by a remembered grant",
            read,
        );
    }
    println!();
    println!("| 2 threads | turns/s |\n|---|---|");
    println!("| (b) bare tuned | {bare_2:.0} |");
    println!("| (c) gatehouse | {gatehouse_2:.0} |");
    println!(
        "\n(c)/(b) p50 {:.2}x (target ≤ 1.25x); (a)/(c) p50 {:.2}x (target ≥ 9x); 2-thread throughput (c)/(b) {:.2}x (target ≥ 0.75x)",
        gatehouse.0 / bare.0,
        naive.0 / gatehouse.0,
        gatehouse_2 / bare_2
    );
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    println!(
        "{}",
        serde_json::json!({
            "naive_p50_us": naive.0,
            "bare_p50_us": bare.0,
            "gatehouse_p50_us": gatehouse.0,
            "naive_p99_us": naive.1,
            "bare_p99_us": bare.1,
            "gatehouse_p99_us": gatehouse.1,
            "bare_turns_per_s_2_threads": bare_2,
            "gatehouse_turns_per_s_2_threads": gatehouse_2,
            "read_file_p50_us": read.map(|r| r.0),
            "kernel": kernel,
        })
    );
}
