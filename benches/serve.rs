//! `cargo bench --bench serve`: `hello` tool calls through `gatehouse serve
//! --mcp` over stdio (needs the guests: `./setup.sh`), side by side with
//! the in-process host entry, in one run:
//!
//! - (a) in process: `Host::run` of `hello` with input `{"text":"hi"}` on a
//!   long-lived host, each call timed;
//! - (b) stdio, 1 in flight: a `tools/call` written to the server's stdin,
//!   timed until its response line is read;
//! - (c) stdio, 4 in flight: calls kept 4 deep, the throughput.
//!
//! The protocol's overhead per call is (b) − (a) at the median. Each over
//! `CALLS` calls after `WARMUP`. The last line is one JSON object.

// A bench fails by panicking, like a test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use gatehouse::config::{HostConfig, StatePaths};
use gatehouse::host::{Host, HostOptions, NoOne, TurnRequest};
use gatehouse::manifest::Manifest;
use serde_json::{json, Value};

const WARMUP: usize = 500;
const CALLS: usize = 5_000;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = root.join("guests/hello/executor.toml");
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();

    // (a) in process.
    let host = Host::open(HostOptions::new(
        HostConfig::safe_default("bench"),
        StatePaths::under(&state.join("a"), None, None),
        ws.display().to_string(),
        vec![Manifest::load(&manifest).unwrap()],
    ))
    .unwrap();
    let input = r#"{"text":"hi"}"#;
    let mut inproc = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let t = Instant::now();
        let o = host.run(TurnRequest::new("hello", "main", input), &NoOne);
        let us = t.elapsed().as_secs_f64() * 1e6;
        assert!(o.is_ok());
        if i >= WARMUP {
            inproc.push(us);
        }
    }
    inproc.sort_by(f64::total_cmp);

    // (b) and (c) over stdio.
    let mut child = Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["serve", "--mcp", "--workspace"])
        .arg(&ws)
        .arg("--executor")
        .arg(&manifest)
        .env("GATEHOUSE_STATE_DIR", state.join("b"))
        .env_remove("GATEHOUSE_CONFIG")
        .env("XDG_CONFIG_HOME", tmp.path().join("config"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut send = move |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let mut read = move || -> Value {
        line.clear();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "bench", "version": "0"}}}));
    read();
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let call = |id: usize| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "hello", "arguments": {"text": "hi"}}})
    };
    let mut one = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let t = Instant::now();
        send(call(i + 1));
        let r = read();
        let us = t.elapsed().as_secs_f64() * 1e6;
        assert_eq!(r["result"]["isError"], false, "{r}");
        if i >= WARMUP {
            one.push(us);
        }
    }
    one.sort_by(f64::total_cmp);
    let one_rate = CALLS as f64 / (one.iter().sum::<f64>() / 1e6);

    let base = WARMUP + CALLS + 1;
    let t = Instant::now();
    let mut sent = 0;
    let mut got = 0;
    while sent < 4.min(CALLS) {
        send(call(base + sent));
        sent += 1;
    }
    while got < CALLS {
        let r = read();
        assert_eq!(r["result"]["isError"], false, "{r}");
        got += 1;
        if sent < CALLS {
            send(call(base + sent));
            sent += 1;
        }
    }
    let four_rate = CALLS as f64 / t.elapsed().as_secs_f64();
    drop(send);
    let _ = child.wait();

    let (a50, b50) = (percentile(&inproc, 0.5), percentile(&one, 0.5));
    println!(
        "(a) in process       p50 {a50:8.1} µs  p99 {:8.1} µs  {:8.0} calls/s",
        percentile(&inproc, 0.99),
        CALLS as f64 / (inproc.iter().sum::<f64>() / 1e6)
    );
    println!(
        "(b) stdio, 1 in flight p50 {b50:8.1} µs  p99 {:8.1} µs  {one_rate:8.0} calls/s",
        percentile(&one, 0.99)
    );
    println!("(c) stdio, 4 in flight                               {four_rate:8.0} calls/s");
    println!(
        "protocol overhead per call (p50 b − a): {:.1} µs",
        b50 - a50
    );
    println!(
        "{}",
        json!({"inproc_p50_us": a50, "stdio1_p50_us": b50, "stdio1_calls_per_s": one_rate,
               "stdio4_calls_per_s": four_rate, "overhead_p50_us": b50 - a50})
    );
}
