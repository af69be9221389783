//! `cargo bench --bench languages`: a warm turn of the language executors
//! (issue 30) through the host, side by side in one run with the machine's
//! own interpreter started as a process (needs the guests: `./setup.sh --all`;
//! and `python3` and `node` on the PATH: without one the bench says so and
//! fails):
//!
//! - `print(1)` in the `python` executor (`Host::run`: the gate, the plan,
//!   an instance of the pre-initialized CPython from the pool, the audit)
//!   against `python3 -c 'print(1)'`;
//! - `console.log(1)` in the `js` executor against `node -e
//!   'console.log(1)'`.
//!
//! Before the warm rounds it reports each executor's first run in a fresh
//! state (the component compiled, then run) and its first run in a new
//! host over that state (the compiled component loaded from the cache).
//! The samples are taken in interleaved rounds. The last line is one JSON
//! object with `python_warm_p50_us`, `python_native_process_p50_us`,
//! `js_warm_p50_us`, `node_native_process_p50_us` and the first-run times
//! (read by programs). Target: each warm turn ≤ 0.5× its native process.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use gatehouse::config::{HostConfig, StatePaths};
use gatehouse::host::{Host, HostOptions, NoOne, TurnRequest};
use gatehouse::manifest::Manifest;
use gatehouse::policy::Level;

const WARMUP: usize = 20;
const ROUNDS: usize = 5;
const PER_ROUND: usize = 40;

fn p(sorted: &[f64], pct: usize) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[(sorted.len() * pct / 100).min(sorted.len() - 1)]
}

/// A host over `state` running the `python` and `js` executors at Full.
fn open(state: &Path, workspace: &str) -> Result<Host, String> {
    let guests = Path::new(env!("CARGO_MANIFEST_DIR")).join("guests");
    let manifests = ["python", "js"]
        .iter()
        .map(|n| Manifest::load(&guests.join(n).join("executor.toml")).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let config = HostConfig::safe_default("bench");
    let mut options = HostOptions::new(
        config,
        StatePaths::under(state, None, None),
        workspace.to_string(),
        manifests,
    );
    options.level = Some(Level::Full);
    Host::open(options).map_err(|e| e.to_string())
}

/// One turn of `executor` running `code`; whether it printed exactly "1\n".
fn turn(host: &Host, executor: &str, code: &str) -> bool {
    let input = serde_json::json!({ "code": code }).to_string();
    let outcome = host.run(TurnRequest::new(executor, "main", &input), &NoOne);
    outcome.is_ok()
        && serde_json::to_value(&outcome.end).is_ok_and(|v| {
            let output = v["run"]["result"]["output"].as_str().unwrap_or_default();
            serde_json::from_str::<serde_json::Value>(output)
                .is_ok_and(|o| o["stdout"] == "1\n" && o["exception"].is_null())
        })
}

/// One native process; whether it printed exactly "1\n".
fn native(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success() && o.stdout == b"1\n")
}

/// Milliseconds `f` took, and whether it succeeded.
fn timed(f: impl FnOnce() -> bool) -> (f64, bool) {
    let start = Instant::now();
    let ok = f();
    (start.elapsed().as_secs_f64() * 1e3, ok)
}

fn fail(message: &str) -> ! {
    eprintln!("languages bench: {message}");
    std::process::exit(1);
}

fn main() {
    for (program, flag) in [("python3", "--version"), ("node", "--version")] {
        if !Command::new(program)
            .arg(flag)
            .output()
            .is_ok_and(|o| o.status.success())
        {
            fail(&format!(
                "`{program}` is not installed: the bench compares against it"
            ));
        }
    }
    let lang = Path::new(env!("CARGO_MANIFEST_DIR")).join("guests/target/lang");
    if !lang.join("python.wasm").exists() || !lang.join("js.wasm").exists() {
        fail("the language executors are not built: run ./setup.sh --all first");
    }
    let tmp: PathBuf =
        std::env::temp_dir().join(format!("gatehouse-bench-lang-{}", std::process::id()));
    let ws = tmp.join("ws");
    if std::fs::create_dir_all(ws.join("out")).is_err() {
        fail("cannot make the workspace");
    }
    let Ok(workspace) = ws.canonicalize().map(|p| p.display().to_string()) else {
        fail("cannot resolve the workspace");
    };
    let state = tmp.join("state");
    let python = "print(1)";
    let js = "console.log(1)";

    // First runs: compiled in a fresh state, then loaded from its cache by
    // a new host.
    let host = open(&state, &workspace).unwrap_or_else(|e| fail(&e));
    let (python_first, ok1) = timed(|| turn(&host, "python", python));
    let (js_first, ok2) = timed(|| turn(&host, "js", js));
    drop(host);
    let host = open(&state, &workspace).unwrap_or_else(|e| fail(&e));
    let (python_cached, ok3) = timed(|| turn(&host, "python", python));
    let (js_cached, ok4) = timed(|| turn(&host, "js", js));
    if !(ok1 && ok2 && ok3 && ok4) {
        fail("a first run did not print 1");
    }

    for _ in 0..WARMUP {
        if !turn(&host, "python", python) || !turn(&host, "js", js) {
            fail("a warm-up turn did not print 1");
        }
    }
    let cases: [(&str, &dyn Fn() -> bool); 4] = [
        ("python", &|| turn(&host, "python", python)),
        ("python3", &|| native("python3", &["-c", "print(1)"])),
        ("js", &|| turn(&host, "js", js)),
        ("node", &|| native("node", &["-e", "console.log(1)"])),
    ];
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for _ in 0..ROUNDS {
        for (i, (name, f)) in cases.iter().enumerate() {
            for _ in 0..PER_ROUND {
                let start = Instant::now();
                if !f() {
                    fail(&format!("a sample of `{name}` did not print 1"));
                }
                samples[i].push(start.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    for s in &mut samples {
        s.sort_by(f64::total_cmp);
    }
    let n = ROUNDS * PER_ROUND;
    println!("| printing 1 ({n} samples each, {ROUNDS} interleaved rounds) | p50 µs | p99 µs |");
    println!("|---|---|---|");
    for (label, s) in [
        ("`python` executor, warm turn through the host", &samples[0]),
        ("`python3 -c 'print(1)'`, a process", &samples[1]),
        ("`js` executor, warm turn through the host", &samples[2]),
        ("`node -e 'console.log(1)'`, a process", &samples[3]),
    ] {
        println!("| {label} | {:.1} | {:.1} |", p(s, 50), p(s, 99));
    }
    let python_ratio = p(&samples[0], 50) / p(&samples[1], 50);
    let js_ratio = p(&samples[2], 50) / p(&samples[3], 50);
    println!(
        "\npython warm / python3 process p50 {python_ratio:.3}x; js warm / node process p50 {js_ratio:.3}x (target ≤ 0.5x)"
    );
    println!(
        "first run (compile + run): python {python_first:.0} ms, js {js_first:.0} ms; first run of a new host (from the cache): python {python_cached:.1} ms, js {js_cached:.1} ms"
    );
    println!(
        "{}",
        serde_json::json!({
            "python_warm_p50_us": p(&samples[0], 50),
            "python_native_process_p50_us": p(&samples[1], 50),
            "js_warm_p50_us": p(&samples[2], 50),
            "node_native_process_p50_us": p(&samples[3], 50),
            "python_warm_ratio_p50": python_ratio,
            "js_warm_ratio_p50": js_ratio,
            "python_first_run_ms": python_first,
            "js_first_run_ms": js_first,
            "python_cached_first_run_ms": python_cached,
            "js_cached_first_run_ms": js_cached,
        })
    );
}
