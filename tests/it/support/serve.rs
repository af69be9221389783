//! A `gatehouse serve --mcp` child and the clients the serve and MCP tests
//! speak to it with: a hand-written JSON-RPC client over stdio, a server
//! over streamable HTTP, and the arguments both are started with.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use serde_json::{json, Value};

use super::guests::{component, guest};
use super::{s, Env};

/// A client of one `gatehouse serve --mcp` child.
pub(crate) struct Client {
    pub(crate) child: Child,
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) rx: Receiver<Value>,
    pub(crate) next: u64,
    pub(crate) stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

/// How a test answers an elicitation: the `result` to send back (`null`:
/// no answer at all).
pub(crate) type Answer<'a> = &'a mut dyn FnMut(&Value) -> Value;

impl Client {
    /// Starts the server with `args` after `serve --mcp` and initializes a
    /// session; `elicitation`: whether the client declares it.
    pub(crate) fn start(env: &Env, args: &[&str], elicitation: bool) -> Client {
        let mut cmd = env.command();
        cmd.args(["serve", "--mcp"]).args(args);
        Client::over(cmd, elicitation)
    }

    /// Starts `cmd` (a stdio MCP server: `serve --mcp`, or `connect` to a
    /// daemon) and initializes a session; `elicitation`: whether the
    /// client declares it.
    pub(crate) fn over(mut cmd: std::process::Command, elicitation: bool) -> Client {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start the mcp server");
        let stdout = child.stdout.take().unwrap();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let keep = stderr.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut pipe, &mut text);
            keep.lock().unwrap().push_str(&text);
        });
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // Nothing but JSON-RPC on stdout.
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout line is not json ({e}): {line:?}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut c = Client {
            child,
            stdin,
            rx,
            next: 1,
            stderr,
        };
        let capabilities = if elicitation {
            json!({"elicitation": {}})
        } else {
            json!({})
        };
        let init = c.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": capabilities,
                   "clientInfo": {"name": "it", "version": "0"}}),
            &mut |_| panic!("asked before initialized"),
        );
        assert_eq!(init["serverInfo"]["name"], "gatehouse", "{init:#}");
        assert_eq!(init["capabilities"]["tools"], json!({"listChanged": false}));
        c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        c
    }

    pub(crate) fn send(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    pub(crate) fn recv(&mut self) -> Value {
        // A safety net against a hung server, not a measurement.
        match self.rx.recv_timeout(Duration::from_secs(120)) {
            Ok(v) => v,
            Err(RecvTimeoutError::Timeout) => panic!("no message from the server"),
            Err(RecvTimeoutError::Disconnected) => panic!("the server closed stdout"),
        }
    }

    /// Sends a request and returns its result, answering elicitations on
    /// the way with `answer`.
    pub(crate) fn request(&mut self, method: &str, params: Value, answer: Answer<'_>) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let msg = self.recv();
            if msg["method"] == "elicitation/create" {
                // `null`: the person never answers.
                let result = answer(&msg["params"]);
                if !result.is_null() {
                    self.send(json!({"jsonrpc": "2.0", "id": msg["id"], "result": result}));
                }
                continue;
            }
            if msg.get("method").is_some() {
                // A notification: not what these tests look at.
                continue;
            }
            if msg["id"] == id {
                if let Some(e) = msg.get("error") {
                    return json!({"error": e});
                }
                return msg["result"].clone();
            }
        }
    }

    pub(crate) fn call(&mut self, tool: &str, arguments: Value, answer: Answer<'_>) -> Value {
        self.request(
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
            answer,
        )
    }

    pub(crate) fn tools(&mut self) -> Value {
        self.request("tools/list", json!({}), &mut |_| panic!("elicited"))
    }

    /// Closes stdin and waits for the server to end.
    pub(crate) fn finish(mut self) -> i32 {
        drop(self.stdin.take());
        self.child.wait().unwrap().code().unwrap_or(-1)
    }

    /// Sends SIGTERM and waits for the server to end: its exit code and
    /// what it wrote on stderr.
    pub(crate) fn terminate(mut self) -> (i32, String) {
        let pid = i32::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let code = self.child.wait().unwrap().code().unwrap_or(-1);
        // The stderr thread ends with the process.
        let mut tries = 0;
        while std::sync::Arc::strong_count(&self.stderr) > 1 && tries < 1000 {
            tries += 1;
            std::thread::sleep(Duration::from_millis(10));
        }
        let text = self.stderr.lock().unwrap().clone();
        (code, text)
    }
}

/// The servers' executors: hello, write-file and `greet` (hello's code
/// with an input schema, reaching one site).
pub(crate) fn executors(env: &Env) -> Vec<PathBuf> {
    let greet = env.write(
        "manifests/greet.toml",
        &format!(
            "name = \"greet\"\ndescription = \"greets\"\ncomponent = \"{}\"\n\
             input_schema = {{ type = \"object\", required = [\"text\"], properties = {{ text = {{ type = \"string\" }} }} }}\n\
             [[capabilities]]\nname = \"network:sites\"\ntarget = \"example.com\"\n",
            s(&component("hello"))
        ),
    );
    vec![greet, guest("hello"), guest("write-file")]
}

pub(crate) fn args<'a>(ws: &'a Path, executors: &'a [PathBuf], level: &'a str) -> Vec<&'a str> {
    let mut a = vec!["--workspace", s(ws), "--level", level];
    for e in executors {
        a.push("--executor");
        a.push(s(e));
    }
    a
}

/// A `gatehouse serve --mcp --listen 127.0.0.1:0` child and its address.
pub(crate) struct HttpServer {
    pub(crate) child: Child,
    pub(crate) addr: String,
}

impl HttpServer {
    pub(crate) fn start(env: &Env, args: &[&str]) -> HttpServer {
        let mut child = env
            .command()
            .args(["serve", "--mcp", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let addr = loop {
            line.clear();
            assert!(stderr.read_line(&mut line).unwrap() > 0, "no address");
            if let Some(rest) = line
                .trim()
                .strip_prefix("gatehouse: serving mcp on http://")
            {
                break rest.strip_suffix("/mcp").unwrap().to_string();
            }
        };
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        HttpServer { child, addr }
    }

    /// POSTs `body` to /mcp with `headers`: the status, the response
    /// headers (lowercase names) and the JSON-RPC message answering
    /// `want_id` (from a JSON body or the SSE stream), if any.
    pub(crate) fn post(
        &self,
        headers: &[(&str, &str)],
        body: &Value,
        want_id: Option<u64>,
    ) -> HttpReply {
        use std::io::Read;
        let mut stream = std::net::TcpStream::connect(&self.addr).unwrap();
        let body = body.to_string();
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        stream.write_all(req.as_bytes()).unwrap();
        let mut r = BufReader::new(stream);
        let mut status_line = String::new();
        r.read_line(&mut status_line).unwrap();
        let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
        let mut head = std::collections::BTreeMap::new();
        loop {
            let mut l = String::new();
            r.read_line(&mut l).unwrap();
            let l = l.trim_end();
            if l.is_empty() {
                break;
            }
            let (k, v) = l.split_once(':').unwrap();
            head.insert(k.to_lowercase(), v.trim().to_string());
        }
        let chunked = head
            .get("transfer-encoding")
            .is_some_and(|v| v == "chunked");
        let mut text = String::new();
        let mut message = None;
        let mut content_left: Option<usize> =
            head.get("content-length").map(|v| v.parse().unwrap());
        loop {
            // One piece of the body: a chunk, or all of a sized body.
            let piece = if chunked {
                let mut size = String::new();
                if r.read_line(&mut size).unwrap() == 0 {
                    break;
                }
                let n = usize::from_str_radix(size.trim(), 16).unwrap();
                if n == 0 {
                    break;
                }
                let mut buf = vec![0; n + 2];
                r.read_exact(&mut buf).unwrap();
                buf.truncate(n);
                buf
            } else {
                let n = content_left.take().unwrap_or(0);
                if n == 0 {
                    break;
                }
                let mut buf = vec![0; n];
                r.read_exact(&mut buf).unwrap();
                buf
            };
            text.push_str(&String::from_utf8(piece).unwrap());
            if head
                .get("content-type")
                .is_some_and(|c| c.starts_with("application/json"))
            {
                continue;
            }
            for l in text.lines() {
                if let Some(data) = l.strip_prefix("data:") {
                    if let Ok(v) = serde_json::from_str::<Value>(data.trim()) {
                        if want_id.is_some_and(|id| v["id"] == id) {
                            message = Some(v);
                        }
                    }
                }
            }
            if message.is_some() {
                break;
            }
        }
        if message.is_none()
            && head
                .get("content-type")
                .is_some_and(|c| c.starts_with("application/json"))
        {
            message = serde_json::from_str(&text).ok();
        }
        HttpReply {
            status,
            head,
            text,
            message,
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub(crate) struct HttpReply {
    pub(crate) status: u16,
    pub(crate) head: std::collections::BTreeMap<String, String>,
    pub(crate) text: String,
    pub(crate) message: Option<Value>,
}

/// The arguments of a server of `spin` and `hello` in `ws` whose calls
/// may run ten minutes, then `extra`.
pub(crate) fn spin_args<'a>(
    ws: &'a Path,
    executors: &'a [PathBuf; 2],
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut a = vec![
        "--workspace",
        s(ws),
        "--executor",
        s(&executors[0]),
        "--executor",
        s(&executors[1]),
        "--deadline-ms",
        "600000",
    ];
    a.extend_from_slice(extra);
    a
}

/// The audit and denial lines written so far, once there are at least
/// `lines`; waits `tenths` × 100 ms at most (a safety net, not a
/// measurement).
pub(crate) fn wait_for_records(env: &Env, lines: usize, tenths: u32) -> String {
    for _ in 0..tenths {
        let text = std::fs::read_to_string(env.state_dir().join("audit.jsonl")).unwrap_or_default()
            + &std::fs::read_to_string(env.state_dir().join("denials.jsonl")).unwrap_or_default();
        if text.lines().count() >= lines {
            return text;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("fewer than {lines} records were written: the spinning turn was not stopped");
}
