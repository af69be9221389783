//! `cargo bench --bench serve`: `hello` tool calls through `gatehouse serve
//! --mcp` over stdio (needs the guests: `./setup.sh`), side by side with
//! the in-process host entry, in one run:
//!
//! - (a) in process: `Host::run` of `hello` with input `{"text":"hi"}` on a
//!   long-lived host, each call timed;
//! - (b) stdio, 1 in flight: a `tools/call` written to the server's stdin,
//!   timed until its response line is read;
//! - (c) stdio, 4 in flight: calls kept 4 deep, the throughput;
//! - (d) the machine's floor: the same `tools/call` line written to a
//!   child that answers each line at once with a line as long as (b)'s
//!   answer (this bench binary again, as a bare echo), timed the same way;
//! - (e) the protocol's own floor: the same `tools/call` lines, through
//!   the same client code, to a bare rmcp 3.11 server with one no-op tool
//!   answering (b)'s text, on the same transport and a runtime of one
//!   worker as ours (this bench binary again).
//!
//! - (f) through `gatehouse connect` and `gatehouse daemon`: the same
//!   calls written to `connect`'s stdin, relayed over the daemon's UNIX
//!   socket (the bench writes a configuration mapping its own uid to the
//!   actor), 1 in flight; target: (f) ≤ 1.35 × (b).
//!
//! The protocol's overhead per call is (b) − (a) at the median; (d) says
//! how much of it any process on this machine pays for a round trip over
//! two pipes (the wake-ups of two sleeping processes), which no server
//! can remove, and (e) what rmcp itself costs. The target: (b) ≤ 1.25 ×
//! ((e) + (a)). Each over `CALLS` calls after `WARMUP`. The last line is
//! one JSON object.

// A bench fails by panicking, like a test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use gatehouse::config::{HostConfig, StatePaths};
use gatehouse::host::{Host, HostOptions, NoOne, TurnRequest};
use gatehouse::manifest::Manifest;
use serde_json::{json, Value};

const WARMUP: usize = 500;
const CALLS: usize = 5_000;

/// A child spoken to a line at a time over its stdin and stdout.
struct Pipe {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The last line read, its newline included.
    line: String,
}

impl Pipe {
    fn spawn(command: &mut Command) -> Pipe {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Pipe {
            child,
            stdin,
            stdout,
            line: String::new(),
        }
    }

    fn send(&mut self, v: &Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn read_line(&mut self) {
        self.line.clear();
        self.stdout.read_line(&mut self.line).unwrap();
    }

    fn read(&mut self) -> Value {
        self.read_line();
        serde_json::from_str(&self.line).unwrap()
    }

    /// Closes the child's stdin (its end of the session) and waits for it.
    fn close(self) {
        let Pipe {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let _ = child.wait();
    }
}

/// `WARMUP` calls of `f`, then `CALLS` timed ones: their µs, sorted.
fn timed(mut f: impl FnMut(usize)) -> Vec<f64> {
    let mut times = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let t = Instant::now();
        f(i);
        if i >= WARMUP {
            times.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    times.sort_by(f64::total_cmp);
    times
}

/// The `tools/call` of `hello` with id `id`.
fn call(id: usize) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "hello", "arguments": {"text": "hi"}}})
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Set in the child of (d): answer each line with `ECHO_BYTES` bytes.
const ECHO_ENV: &str = "GATEHOUSE_BENCH_ECHO";

/// Set in the child of (e): serve one no-op tool with rmcp over stdio.
const NOOP_ENV: &str = "GATEHOUSE_BENCH_RMCP_NOOP";

/// (e)'s server: one tool, `hello`, answering what `hello` answers.
struct Noop;

impl rmcp::ServerHandler for Noop {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        let capabilities: rmcp::model::ServerCapabilities =
            serde_json::from_value(json!({"tools": {"listChanged": false}})).unwrap();
        rmcp::model::ServerConfig::new(capabilities)
    }

    async fn call_tool(
        &self,
        _request: rmcp::model::CallToolRequestParams,
        _context: rmcp::service::RequestContext<rmcp::service::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::model::ErrorData> {
        Ok(
            rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(
                r#"{"echo":{"text":"hi"}}"#,
            )])
            .into(),
        )
    }
}

/// (e)'s child: the bare server, on a runtime of one worker (as
/// `gatehouse serve` runs) and the same stdio transport.
fn noop_server() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use rmcp::ServiceExt;
        let running = Noop.serve(rmcp::transport::stdio_pipes()).await.unwrap();
        let _ = running.waiting().await;
    });
}

/// `initialize` and `notifications/initialized` on `pipe`.
fn handshake(pipe: &mut Pipe) {
    pipe.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "bench", "version": "0"}}}));
    pipe.read();
    pipe.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
}

/// (d)'s child: a line in, a line out, nothing else.
fn echo(bytes: usize) {
    let mut answer = vec![b'x'; bytes.max(2)];
    answer[0] = b'{';
    let last = answer.len() - 1;
    answer[last] = b'\n';
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    let mut line = String::new();
    while stdin.lock().read_line(&mut line).unwrap() > 0 {
        stdout.write_all(&answer).unwrap();
        stdout.flush().unwrap();
        line.clear();
    }
}

fn main() {
    if let Some(bytes) = std::env::var_os(ECHO_ENV) {
        return echo(bytes.to_str().unwrap().parse().unwrap());
    }
    if std::env::var_os(NOOP_ENV).is_some() {
        return noop_server();
    }
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
    let inproc = timed(|_| {
        let o = host.run(TurnRequest::new("hello", "main", input), &NoOne);
        assert!(o.is_ok());
    });

    // (b) and (c) over stdio.
    let mut server = Pipe::spawn(
        Command::new(env!("CARGO_BIN_EXE_gatehouse"))
            .args(["serve", "--mcp", "--workspace"])
            .arg(&ws)
            .arg("--executor")
            .arg(&manifest)
            .env("GATEHOUSE_STATE_DIR", state.join("b"))
            .env_remove("GATEHOUSE_CONFIG")
            .env("XDG_CONFIG_HOME", tmp.path().join("config")),
    );
    handshake(&mut server);
    let mut answer_bytes = 0;
    let one = timed(|i| {
        server.send(&call(i + 1));
        let r = server.read();
        assert_eq!(r["result"]["isError"], false, "{r}");
        answer_bytes = server.line.len();
    });
    let one_rate = CALLS as f64 / (one.iter().sum::<f64>() / 1e6);

    let base = WARMUP + CALLS + 1;
    let t = Instant::now();
    let mut sent = 0;
    let mut got = 0;
    while sent < 4.min(CALLS) {
        server.send(&call(base + sent));
        sent += 1;
    }
    while got < CALLS {
        let r = server.read();
        assert_eq!(r["result"]["isError"], false, "{r}");
        got += 1;
        if sent < CALLS {
            server.send(&call(base + sent));
            sent += 1;
        }
    }
    let four_rate = CALLS as f64 / t.elapsed().as_secs_f64();
    server.close();

    // (d) the floor: the same lines to a bare echo.
    let mut echo = Pipe::spawn(
        Command::new(std::env::current_exe().unwrap()).env(ECHO_ENV, answer_bytes.to_string()),
    );
    let floor = timed(|i| {
        echo.send(&call(i + 1));
        echo.read_line();
        assert_eq!(echo.line.len(), answer_bytes);
    });
    echo.close();

    // (e) rmcp's floor: the same calls to a bare rmcp server.
    let mut noop = Pipe::spawn(Command::new(std::env::current_exe().unwrap()).env(NOOP_ENV, "1"));
    handshake(&mut noop);
    let rmcp_floor = timed(|i| {
        noop.send(&call(i + 1));
        let r = noop.read();
        assert_eq!(r["result"]["isError"], false, "{r}");
    });
    noop.close();

    // (f) through connect and the daemon.
    let execs = tmp.path().join("execs");
    std::fs::create_dir_all(&execs).unwrap();
    std::fs::write(
        execs.join("hello.toml"),
        format!(
            "name = \"hello\"\ndescription = \"hello\"\ncomponent = \"{}\"\n[[capabilities]]\nname = \"compute:pure\"\n",
            root.join("guests/target/wasm32-wasip2/release/hello.wasm").display()
        ),
    )
    .unwrap();
    let config = tmp.path().join("daemon.toml");
    std::fs::write(
        &config,
        format!(
            "executor_dirs = [\"{}\"]\n[actors.main]\nskills = [\"hello\"]\nuids = [{}]\nworkspaces = [{{ path = \"{}\", mode = \"read-write\" }}]\n",
            execs.display(),
            gatehouse::host::current_uid(),
            ws.display()
        ),
    )
    .unwrap();
    let socket = tmp.path().join("d.sock");
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["daemon", "--socket"])
        .arg(&socket)
        .env("GATEHOUSE_CONFIG", &config)
        .env("GATEHOUSE_STATE_DIR", state.join("f"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut started = String::new();
    BufReader::new(daemon.stderr.take().unwrap())
        .read_line(&mut started)
        .unwrap();
    assert!(started.contains("daemon serving mcp"), "{started}");
    let mut connect = Pipe::spawn(
        Command::new(env!("CARGO_BIN_EXE_gatehouse"))
            .args(["connect", "--socket"])
            .arg(&socket),
    );
    handshake(&mut connect);
    let through = timed(|i| {
        connect.send(&call(i + 1));
        let r = connect.read();
        assert_eq!(r["result"]["isError"], false, "{r}");
    });
    connect.close();
    let _ = daemon.kill();
    let _ = daemon.wait();

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
    let d50 = percentile(&floor, 0.5);
    println!(
        "(d) bare pipe echo   p50 {d50:8.1} µs  p99 {:8.1} µs  (the machine's round trip, {answer_bytes} B back)",
        percentile(&floor, 0.99)
    );
    let e50 = percentile(&rmcp_floor, 0.5);
    println!(
        "(e) bare rmcp, no-op tool p50 {e50:8.1} µs  p99 {:8.1} µs  (rmcp 3.11, one worker, stdio)",
        percentile(&rmcp_floor, 0.99)
    );
    println!(
        "protocol overhead per call (p50 b − a): {:.1} µs, of which the pipe round trip (d): {d50:.1} µs",
        b50 - a50
    );
    let f50 = percentile(&through, 0.5);
    println!(
        "(f) connect + daemon p50 {f50:8.1} µs  p99 {:8.1} µs  (f)/(b) {:.2}x (target ≤ 1.35x)",
        percentile(&through, 0.99),
        f50 / b50
    );
    let ratio = b50 / (e50 + a50);
    println!("(b) / ((e) + (a)) p50: {ratio:.2}x (target ≤ 1.25x)");
    println!(
        "{}",
        json!({"inproc_p50_us": a50, "stdio1_p50_us": b50, "stdio1_calls_per_s": one_rate,
               "stdio4_calls_per_s": four_rate, "overhead_p50_us": b50 - a50,
               "pipe_floor_p50_us": d50, "rmcp_noop_p50_us": e50,
               "ratio_to_rmcp_floor": ratio, "connect1_p50_us": f50,
               "connect_to_stdio_ratio": f50 / b50})
    );
}
