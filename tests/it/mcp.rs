//! Issue 15: `gatehouse serve --mcp` spoken to with the official SDK's
//! client (`rmcp`), as an agent runtime would: over a child's stdio and
//! over streamable HTTP on 127.0.0.1. The tools with their schemas and
//! annotations, a call, a refusal, an elicitation answered "allow and
//! remember", the queue for a client without elicitation, and gatehouse's
//! own `history` and `undo` tools when the configuration offers them.
//! Issue 31: the guest's log lines as MCP log messages, at or above the
//! level the client set; approvals for a client on protocol 2026-07-28 as
//! input-required results, answered in the retry.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientConfig, ElicitRequestParams,
    ElicitResult, ErrorCode, ErrorData, ProtocolVersion,
};
use rmcp::service::{
    serve_client_with_lifecycle, ClientLifecycleMode, NotificationContext, RequestContext,
    RunningService, ServiceError,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};

use crate::support::serve::{args, executors, spin_args, wait_for_records, HttpServer};
use crate::support::{s, Env};

/// The person at the client: answers every elicitation with `answer`
/// (when the client declares elicitation at all) and keeps the questions.
#[derive(Clone)]
struct Person {
    elicitation: bool,
    /// Whether it declares the Tasks extension.
    tasks: bool,
    answer: Arc<Mutex<Value>>,
    asked: Arc<Mutex<Vec<Value>>>,
    /// The log messages the server sent, in order.
    logs: Arc<Mutex<Vec<Value>>>,
}

impl Person {
    fn new(elicitation: bool) -> Person {
        Person {
            elicitation,
            tasks: false,
            answer: Arc::new(Mutex::new(json!({"action": "decline"}))),
            asked: Arc::new(Mutex::new(Vec::new())),
            logs: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn logs(&self) -> Vec<Value> {
        self.logs.lock().unwrap().clone()
    }

    fn will_answer(&self, answer: Value) {
        *self.answer.lock().unwrap() = answer;
    }

    fn asked(&self) -> Vec<Value> {
        self.asked.lock().unwrap().clone()
    }
}

impl ClientHandler for Person {
    // rmcp marks logging deprecated (SEP-2577); it is what clients use today.
    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logs
            .lock()
            .unwrap()
            .push(serde_json::to_value(&params).unwrap());
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        assert!(self.elicitation, "asked a client without elicitation");
        self.asked
            .lock()
            .unwrap()
            .push(serde_json::to_value(&request).unwrap());
        let answer = self.answer.lock().unwrap().clone();
        Ok(serde_json::from_value(answer).unwrap())
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = if self.elicitation {
            json!({"elicitation": {"form": {}}})
        } else {
            json!({})
        };
        if self.tasks {
            capabilities["extensions"] = json!({rmcp::model::TASKS_EXTENSION_ID: {}});
        }
        serde_json::from_value(json!({
            "protocolVersion": "2025-06-18",
            "capabilities": capabilities,
            "clientInfo": {"name": "gatehouse-it", "version": "0"}
        }))
        .unwrap()
    }
}

type Session = RunningService<RoleClient, Person>;

/// `gatehouse serve --mcp ARGS` as a child, spoken to over its stdio.
async fn stdio(env: &Env, args: &[&str], person: &Person) -> Session {
    let mut cmd = env.command();
    cmd.args(["serve", "--mcp"]).args(args);
    let (transport, _) = TokioChildProcess::builder(tokio::process::Command::from(cmd))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    person.clone().serve(transport).await.unwrap()
}

/// A session with the HTTP server at `addr`, with `token` as its bearer
/// token and `headers` on every request.
async fn http(
    addr: &str,
    token: Option<&str>,
    headers: &[(&'static str, &str)],
    person: &Person,
) -> Result<Session, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"));
    if let Some(t) = token {
        config = config.auth_header(t);
    }
    let custom = headers
        .iter()
        .map(|(k, v)| {
            (
                http::HeaderName::from_static(k),
                http::HeaderValue::from_str(v).unwrap(),
            )
        })
        .collect();
    config = config.custom_headers(custom);
    let transport = StreamableHttpClientTransport::from_config(config);
    person
        .clone()
        .serve(transport)
        .await
        .map_err(|e| e.to_string())
}

async fn call(session: &Session, tool: &str, arguments: Value) -> CallToolResult {
    let params = serde_json::from_value::<CallToolRequestParams>(
        json!({"name": tool, "arguments": arguments}),
    )
    .unwrap();
    session.peer().call_tool(params).await.unwrap()
}

fn v(result: &CallToolResult) -> Value {
    serde_json::to_value(result).unwrap()
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap()
}

/// Lists the tools, calls hello, is refused write-file at ReadOnly.
async fn tools_call_and_refusal(session: &Session, ws: &std::path::Path) {
    let tools: Vec<Value> = session
        .peer()
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| serde_json::to_value(t).unwrap())
        .collect();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["greet", "hello", "write-file"]);
    assert_eq!(
        tools[0]["inputSchema"],
        json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}})
    );
    assert_eq!(
        tools[0]["annotations"],
        json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": true})
    );
    assert_eq!(
        tools[2]["annotations"],
        json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false})
    );

    let r = v(&call(session, "hello", json!({"text": "hi"})).await);
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(text(&r), "{\"echo\":{\"text\":\"hi\"}}");
    assert_eq!(r["structuredContent"], json!({"echo": {"text": "hi"}}));
    assert!(r["_meta"]["gatehouse/turn"].is_string(), "{r:#}");

    let r = v(&call(
        session,
        "write-file",
        json!({"path": "out/a.txt", "content": "x"}),
    )
    .await);
    assert_eq!(r["isError"], true, "{r:#}");
    assert_eq!(r["structuredContent"]["code"], "CAPABILITY_DENIED", "{r:#}");
    assert!(text(&r).starts_with("CAPABILITY_DENIED: "), "{r:#}");
    assert!(!ws.join("out/a.txt").exists());
}

/// An elicitation answered "allow and remember": the call runs and the
/// grant is in `gatehouse grants list`.
async fn allow_and_remember(env: &Env, session: &Session, person: &Person, ws: &std::path::Path) {
    person.will_answer(json!({"action": "accept",
                               "content": {"decision": "allow_and_remember"}}));
    let r = v(&call(
        session,
        "write-file",
        json!({"path": "out/r.txt", "content": "kept"}),
    )
    .await);
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(std::fs::read(ws.join("out/r.txt")).unwrap(), b"kept");
    let asked = person.asked();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    let message = asked[0]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("- `fs:write` on `{}/out/**` (critical): ", s(ws))),
        "{message}"
    );
    let grants = env.run(&["grants", "list"]).json_lines();
    assert_eq!(grants.len(), 1, "{grants:#?}");
    assert_eq!(grants[0]["capability"], "fs:write");
    assert_eq!(grants[0]["target"], format!("{}/out/**", s(ws)).as_str());
    // The grant answers the next call: no one is asked.
    let r = v(&call(
        session,
        "write-file",
        json!({"path": "out/s.txt", "content": "2"}),
    )
    .await);
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(person.asked().len(), 1);
}

/// Without elicitation: APPROVAL_REQUIRED with a pending id; after
/// `approvals allow ID --yes` the same call runs once, another input not.
async fn queued_then_allowed(env: &Env, session: &Session, ws: &std::path::Path) {
    let one = json!({"path": "out/q.txt", "content": "one"});
    let r = v(&call(session, "write-file", one.clone()).await);
    assert_eq!(r["structuredContent"]["code"], "APPROVAL_REQUIRED", "{r:#}");
    let id = r["structuredContent"]["pending_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(r["_meta"]["gatehouse/pending_id"], id.as_str());
    assert!(!ws.join("out/q.txt").exists());
    let (run, _) = env.answer_on_terminal(&["approvals", "allow", &id]);
    assert_eq!(run.code, 0, "{run:#?}");
    let r = v(&call(
        session,
        "write-file",
        json!({"path": "out/q.txt", "content": "two"}),
    )
    .await);
    assert_eq!(r["structuredContent"]["code"], "APPROVAL_REQUIRED", "{r:#}");
    assert!(!ws.join("out/q.txt").exists());
    let r = v(&call(session, "write-file", one).await);
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(std::fs::read(ws.join("out/q.txt")).unwrap(), b"one");
}

fn setup(env: &Env) -> (std::path::PathBuf, Vec<std::path::PathBuf>) {
    // The client's "allow and remember" counts: the forms offer it.
    env.elicited_remember();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    (ws, executors(env))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_sdk_client_over_stdio() {
    let env = Env::new();
    let (ws, ex) = setup(&env);
    let person = Person::new(false);
    let session = stdio(&env, &args(&ws, &ex, "ReadOnly"), &person).await;
    let info = session.peer().peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "gatehouse");
    tools_call_and_refusal(&session, &ws).await;
    session.cancel().await.unwrap();

    let person = Person::new(true);
    let session = stdio(&env, &args(&ws, &ex, "Supervised"), &person).await;
    allow_and_remember(&env, &session, &person, &ws).await;
    session.cancel().await.unwrap();

    let env = Env::new();
    let (ws, ex) = setup(&env);
    let person = Person::new(false);
    let session = stdio(&env, &args(&ws, &ex, "Supervised"), &person).await;
    queued_then_allowed(&env, &session, &ws).await;
    session.cancel().await.unwrap();
}

/// A fresh state and workspace served over HTTP at `level`, and the
/// server's bearer token.
fn served_over_http(level: &str) -> (Env, std::path::PathBuf, HttpServer, String) {
    let env = Env::new();
    let (ws, ex) = setup(&env);
    let server = HttpServer::start(&env, &args(&ws, &ex, level));
    let token = std::fs::read_to_string(env.state_dir().join("serve.token"))
        .unwrap()
        .trim()
        .to_string();
    (env, ws, server, token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_sdk_client_over_streamable_http() {
    let (env, ws, server, token) = served_over_http("Supervised");
    // Without the token, with a wrong one, or from a foreign origin: no
    // session.
    let person = Person::new(true);
    let e = http(&server.addr, None, &[], &person).await.err().unwrap();
    assert!(
        e.ends_with("error: Auth required, when send initialize request"),
        "{e}"
    );
    let e = http(&server.addr, Some(&"0".repeat(64)), &[], &person)
        .await
        .err()
        .unwrap();
    assert!(
        e.ends_with("error: Auth required, when send initialize request"),
        "{e}"
    );
    let e = http(
        &server.addr,
        Some(&token),
        &[("origin", "http://evil.example")],
        &person,
    )
    .await
    .err()
    .unwrap();
    assert!(
        e.contains(
            "HTTP 403 Forbidden: forbidden: the request's origin is not this machine's loopback\n"
        ),
        "{e}"
    );

    // With the token (and a loopback origin): an elicitation over HTTP
    // answered "allow and remember".
    let origin = format!("http://{}", server.addr);
    let session = http(&server.addr, Some(&token), &[("origin", &origin)], &person)
        .await
        .unwrap();
    let r = v(&call(&session, "hello", json!({"text": "over http"})).await);
    assert_eq!(
        r["structuredContent"],
        json!({"echo": {"text": "over http"}})
    );
    allow_and_remember(&env, &session, &person, &ws).await;
    session.cancel().await.unwrap();
    drop(server);

    // A client without elicitation: the queue, over HTTP.
    let (env, ws, server, token) = served_over_http("Supervised");
    let person = Person::new(false);
    let session = http(&server.addr, Some(&token), &[], &person)
        .await
        .unwrap();
    queued_then_allowed(&env, &session, &ws).await;
    // ReadOnly refusals and the tool list are the same over HTTP.
    session.cancel().await.unwrap();
    drop(server);
    let (_env, ws, server, token) = served_over_http("ReadOnly");
    let session = http(&server.addr, Some(&token), &[], &person)
        .await
        .unwrap();
    tools_call_and_refusal(&session, &ws).await;
    session.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_history_and_undo_are_tools_only_when_configured_and_only_for_own_turns() {
    let env = Env::new();
    let (ws, ex) = setup(&env);
    let mut a = args(&ws, &ex, "Full");
    // Without `[serve] tools`: neither is offered.
    let person = Person::new(false);
    let session = stdio(&env, &a, &person).await;
    let names: Vec<String> = session
        .peer()
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["greet", "hello", "write-file"]);
    session.cancel().await.unwrap();

    // Two actors; the server serves `main`, `other` runs from the command
    // line.
    let config = env.write(
        "gatehouse.toml",
        "[actors.main]\nchannel = \"cli\"\nsender = \"tester\"\nskills = [\"*\"]\n\
         [actors.other]\nskills = [\"*\"]\n\
         [serve]\ntools = [\"history\", \"undo\"]\n",
    );
    a.extend(["--config", s(&config)]);
    let other = env.run(&[
        "run",
        s(&ex[2]),
        "--config",
        s(&config),
        "--actor",
        "other",
        "--workspace",
        s(&ws),
        "--level",
        "Full",
        "--json",
        "--input",
        r#"{"path": "out/other.txt", "content": "theirs"}"#,
    ]);
    other.expect(0);
    let other_turn = other.json_lines()[0]["turn"].as_str().unwrap().to_string();

    let session = stdio(&env, &a, &person).await;
    let tools = session.peer().list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "greet",
            "hello",
            "write-file",
            "gatehouse_history",
            "gatehouse_undo"
        ]
    );
    let undo_tool = serde_json::to_value(&tools[4]).unwrap();
    assert_eq!(undo_tool["inputSchema"]["required"], json!(["turn"]));
    assert_eq!(undo_tool["annotations"]["destructiveHint"], true);
    let history_tool = serde_json::to_value(&tools[3]).unwrap();
    assert_eq!(history_tool["annotations"]["readOnlyHint"], true);

    let r = v(&call(
        &session,
        "write-file",
        json!({"path": "out/mine.txt", "content": "mine"}),
    )
    .await);
    assert_eq!(r["isError"], false, "{r:#}");
    let mine = r["_meta"]["gatehouse/turn"].as_str().unwrap().to_string();
    let r = v(&call(&session, "hello", json!({})).await);
    let hello = r["_meta"]["gatehouse/turn"].as_str().unwrap().to_string();

    // History: main's own turns only, oldest first.
    let r = v(&call(&session, "gatehouse_history", json!({})).await);
    assert_eq!(r["isError"], false, "{r:#}");
    let turns: Vec<(&str, &str, &str)> = r["structuredContent"]["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["turn"].as_str().unwrap(),
                t["executor"].as_str().unwrap(),
                t["actor"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        turns,
        [
            (mine.as_str(), "write-file", "main"),
            (hello.as_str(), "hello", "main")
        ]
    );
    let r = v(&call(&session, "gatehouse_history", json!({"limit": 1})).await);
    assert_eq!(r["structuredContent"]["turns"][0]["turn"], hello.as_str());
    let r = v(&call(&session, "gatehouse_history", json!({"limit": "all"})).await);
    assert_eq!(r["isError"], true, "{r:#}");
    assert_eq!(
        text(&r),
        "`limit` must be an integer from 1 to 1000, not `\"all\"`"
    );

    // Undo: another actor's turn is answered as one that does not exist.
    let r = v(&call(&session, "gatehouse_undo", json!({"turn": other_turn})).await);
    assert_eq!(r["isError"], true, "{r:#}");
    assert_eq!(
        text(&r),
        format!("no turn `{other_turn}` of actor `main` in the history")
    );
    assert_eq!(std::fs::read(ws.join("out/other.txt")).unwrap(), b"theirs");
    let r = v(&call(&session, "gatehouse_undo", json!({"turn": "../../etc"})).await);
    assert_eq!(
        text(&r),
        "no turn `../../etc` of actor `main` in the history"
    );
    // A dry run changes nothing; the undo removes what the turn created.
    let r = v(&call(
        &session,
        "gatehouse_undo",
        json!({"turn": mine, "dry_run": true}),
    )
    .await);
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(
        r["structuredContent"]["steps"][0]["status"], "would_do",
        "{r:#}"
    );
    assert!(ws.join("out/mine.txt").exists());
    let r = v(&call(&session, "gatehouse_undo", json!({"turn": mine})).await);
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(
        r["structuredContent"]["steps"][0]["status"], "done",
        "{r:#}"
    );
    assert!(!ws.join("out/mine.txt").exists());
    let r = v(&call(&session, "gatehouse_undo", json!({"turn": mine})).await);
    assert_eq!(r["structuredContent"]["already_undone"], true, "{r:#}");
    let r = v(&call(&session, "gatehouse_undo", json!({})).await);
    assert_eq!(text(&r), "`turn` (a turn id) is required");
    session.cancel().await.unwrap();
    // The other actor's file is still there.
    assert_eq!(std::fs::read(ws.join("out/other.txt")).unwrap(), b"theirs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_a_client_that_goes_away_over_http_stops_its_spinning_guest() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let ex = [
        crate::support::guests::guest("spin"),
        crate::support::guests::guest("hello"),
    ];
    let server = HttpServer::start(&env, &spin_args(&ws, &ex, &["--no-auth"]));
    let person = Person::new(false);
    let session = http(&server.addr, None, &[], &person).await.unwrap();
    let peer = session.peer().clone();
    let spinning = tokio::spawn(async move {
        let params =
            serde_json::from_value::<CallToolRequestParams>(json!({"name": "spin"})).unwrap();
        peer.call_tool(params).await
    });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    // The client ends its session (DELETE) and goes away mid-call.
    session.cancel().await.unwrap();
    // Left to rmcp, the handler would be cancelled only after its 5 s drain
    // of in-flight requests; the end of the session stops the turn at once
    // (about 0.1 s here), so 4 s is a wide margin that still tells the two
    // apart.
    let log = tokio::task::block_in_place(|| wait_for_records(&env, 1, 40));
    assert!(log.contains("TURN_CANCELLED"), "{log}");
    spinning.abort();
    // The server goes on serving other sessions.
    let session = http(&server.addr, None, &[], &person).await.unwrap();
    let r = v(&call(&session, "hello", json!({})).await);
    assert_eq!(r["isError"], false, "{r:#}");
    session.cancel().await.unwrap();
}

/// The guest's log lines reach the client as `notifications/message`, at or
/// above the level it set: none before it sets one, none below it, and a
/// call's own `_meta` level (2026-07-28's way) wins for that call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // rmcp marks logging deprecated (SEP-2577)
async fn mcp_guest_log_lines_reach_the_client_at_or_above_its_level() {
    use rmcp::model::{LoggingLevel, SetLevelRequestParams};
    let env = Env::new();
    let (ws, ex) = setup(&env);
    let person = Person::new(false);
    let session = stdio(&env, &args(&ws, &ex, "ReadOnly"), &person).await;
    let info = session.peer().peer_info().unwrap();
    assert_eq!(
        serde_json::to_value(&info.capabilities).unwrap()["logging"],
        json!({})
    );
    // Before the client sets a level: nothing.
    let r = v(&call(&session, "hello", json!({"log": "unasked"})).await);
    assert_eq!(r["isError"], false, "{r:#}");
    // Below the level set (hello logs at info): nothing.
    session
        .peer()
        .set_level(SetLevelRequestParams::new(LoggingLevel::Warning))
        .await
        .unwrap();
    let r = v(&call(&session, "hello", json!({"log": "too low"})).await);
    assert_eq!(r["isError"], false, "{r:#}");
    // The call's own level wins for that call.
    let params = serde_json::from_value::<CallToolRequestParams>(json!({
        "name": "hello", "arguments": {"log": "per call"},
        "_meta": {"io.modelcontextprotocol/logLevel": "info"}}))
    .unwrap();
    let r = v(&session.peer().call_tool(params).await.unwrap());
    assert_eq!(r["isError"], false, "{r:#}");
    // At the level set: both of the guest's lines, in its order.
    session
        .peer()
        .set_level(SetLevelRequestParams::new(LoggingLevel::Info))
        .await
        .unwrap();
    let r = v(&call(&session, "hello", json!({"log": "asked"})).await);
    assert_eq!(r["isError"], false, "{r:#}");
    // The SDK's client hands each notification to its handler in a task
    // of its own, so they may reach `Person` out of the wire's order: wait
    // for the four, a little longer for any stray one, and compare sorted.
    let mut tries = 0;
    while person.logs().len() < 4 && tries < 200 {
        tries += 1;
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let line = |data: &str| json!({"level": "info", "logger": "hello", "data": data});
    let mut logs = person.logs();
    logs.sort_by_key(|l| l["data"].as_str().unwrap().to_string());
    // None of the first two calls' lines ("unasked", "too low", and their
    // "hello: 17 bytes of input").
    assert_eq!(
        logs,
        [
            line("asked"),
            line("hello: 15 bytes of input"),
            line("hello: 18 bytes of input"),
            line("per call"),
        ]
    );
    session.cancel().await.unwrap();
}

/// `gatehouse serve --mcp ARGS` as a child, spoken to on protocol
/// 2026-07-28: `server/discover`, then every request with its own
/// metadata, no `initialize`.
async fn stdio_2026(env: &Env, args: &[&str], person: &Person) -> Session {
    let mut cmd = env.command();
    cmd.args(["serve", "--mcp"]).args(args);
    let (transport, _) = TokioChildProcess::builder(tokio::process::Command::from(cmd))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    serve_client_with_lifecycle(person.clone(), transport, lifecycle)
        .await
        .unwrap()
}

/// One `tools/call` round, not driven further: `retry` is the request
/// state and the approval's answer to send with it.
async fn call_once(
    session: &Session,
    tool: &str,
    arguments: &Value,
    retry: Option<(&str, Option<Value>)>,
) -> Result<Value, ErrorData> {
    let mut p = json!({"name": tool, "arguments": arguments});
    if let Some((state, answer)) = retry {
        p["requestState"] = json!(state);
        if let Some(a) = answer {
            p["inputResponses"] = json!({"approval": a});
        }
    }
    let params = serde_json::from_value::<CallToolRequestParams>(p).unwrap();
    match session.peer().call_tool_once(params).await {
        Ok(CallToolResponse::Complete(r)) => Ok(v(&r)),
        Ok(CallToolResponse::InputRequired(r)) => Ok(serde_json::to_value(&r).unwrap()),
        Ok(other) => panic!("unexpected response: {other:?}"),
        Err(ServiceError::McpError(e)) => Err(e),
        Err(e) => panic!("{e}"),
    }
}

fn allow_once() -> Option<Value> {
    Some(json!({"action": "accept", "content": {"decision": "allow_once"}}))
}

/// The error a refused request state gets (nothing is consumed).
fn refused(r: Result<Value, ErrorData>, why: &str) {
    let e = r.expect_err("the request state was taken");
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
    assert_eq!(e.message, format!("the request state is refused: {why}"));
}

/// A client on 2026-07-28 is asked with an input-required result (the
/// elicitation form, a request state), never an elicitation request; its
/// retry with the answer resumes the turn. A forged state, the state
/// replayed for another call, or replayed after its use is refused and
/// consumes nothing; allow once, deny, and allow and remember (driven by
/// the SDK's own retry loop) each do what they say.
/// Issue 46, item 3: with `[approvals] elicitation = "off"` neither a
/// 2026-07-28 client (no input-required result) nor a task (no form to
/// answer) is asked: each call ends queued, `APPROVAL_REQUIRED` with its
/// pending id, and nothing is written until a person answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_with_elicitation_off_no_client_is_asked_and_the_calls_are_queued() {
    let env = Env::new();
    let (ws, ex) = setup(&env);
    env.write(
        "config/gatehouse/gatehouse.toml",
        "[actors.main]\nchannel = \"cli\"\nsender = \"tester\"\nskills = [\"*\"]\n\
         [approvals]\nelicitation = \"off\"\n",
    );
    // 2026-07-28: a result, not an input request.
    let person = Person::new(true);
    let session = stdio_2026(&env, &args(&ws, &ex, "Supervised"), &person).await;
    let one = json!({"path": "out/m.txt", "content": "one"});
    let r = call_once(&session, "write-file", &one, None).await.unwrap();
    assert_ne!(r["resultType"], "input_required", "{r:#}");
    assert_eq!(r["isError"], true, "{r:#}");
    assert_eq!(r["structuredContent"]["code"], "APPROVAL_REQUIRED", "{r:#}");
    let first = r["structuredContent"]["pending_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(person.asked().is_empty());
    session.cancel().await.unwrap();
    // A task: it stays working, naming the pending approval a person is
    // to answer, until one does; then the same call runs, once.
    let mut person = Person::new(true);
    person.tasks = true;
    let session = stdio(&env, &args(&ws, &ex, "Supervised"), &person).await;
    let params = serde_json::from_value::<CallToolRequestParams>(json!({
        "name": "write-file",
        "arguments": {"path": "out/t.txt", "content": "by a task"},
    }))
    .unwrap();
    let handle = match session.peer().call_tool_once(params).await.unwrap() {
        CallToolResponse::Task(t) => serde_json::to_value(&t).unwrap(),
        other => panic!("not a task: {other:?}"),
    };
    let id = handle["taskId"].as_str().unwrap().to_string();
    let mut waiting = Value::Null;
    for _ in 0..300 {
        let task = serde_json::to_value(
            session
                .peer()
                .get_task(rmcp::model::GetTaskParams::new(&id))
                .await
                .unwrap(),
        )
        .unwrap();
        if task["statusMessage"]
            .as_str()
            .is_some_and(|m| m.starts_with("waiting for a person to answer pending approval `p-"))
        {
            waiting = task;
            break;
        }
        assert_eq!(task["status"], "working", "{task:#}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(waiting["status"], "working", "{waiting:#}");
    let message = waiting["statusMessage"].as_str().unwrap();
    let pending = message.split('`').nth(1).unwrap().to_string();
    assert!(person.asked().is_empty());
    assert!(!ws.join("out/t.txt").exists());
    // Still working a while later: nothing answered it.
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let still = task_reaching(&session, &id, "working").await;
    assert_eq!(still["statusMessage"], message, "{still:#}");
    // The person answers, at a terminal.
    let allow = env.run_on_terminal(&["approvals", "allow", &pending], &[], "y\n");
    allow.expect(0);
    let done = task_reaching(&session, &id, "completed").await;
    assert_eq!(done["result"]["isError"], false, "{done:#}");
    assert_eq!(std::fs::read(ws.join("out/t.txt")).unwrap(), b"by a task");
    assert!(person.asked().is_empty());
    session.cancel().await.unwrap();
    assert!(!ws.join("out/m.txt").exists());
    let listed = env.run(&["approvals", "list"]).json_lines();
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0]["id"], first.as_str(), "{listed:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_approvals_on_2026_07_28_are_input_required_results_answered_in_the_retry() {
    let env = Env::new();
    let (ws, ex) = setup(&env);
    let person = Person::new(true);
    let session = stdio_2026(&env, &args(&ws, &ex, "Supervised"), &person).await;
    let info = session.peer().peer_info().unwrap();
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);

    let one = json!({"path": "out/m.txt", "content": "one"});
    let first = call_once(&session, "write-file", &one, None).await.unwrap();
    assert_eq!(first["resultType"], "input_required", "{first:#}");
    let requests = first["inputRequests"].as_object().unwrap();
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["approval"]);
    let form = &first["inputRequests"]["approval"];
    assert_eq!(form["method"], "elicitation/create");
    assert_eq!(form["params"]["mode"], "form");
    let message = form["params"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("executor `write-file` (actor `main`, turn `")
            && message.contains(&format!(
                "\n- `fs:write` on `{}/out/**` (critical): ",
                s(&ws)
            )),
        "{message}"
    );
    assert_eq!(
        form["params"]["requestedSchema"]["properties"]["decision"]["oneOf"],
        json!([{"const": "allow_once", "title": "Allow once"},
               {"const": "allow_and_remember", "title": "Allow and remember (writes a grant)"},
               {"const": "deny", "title": "Deny"}])
    );
    assert!(first["_meta"]["gatehouse/turn"].is_string(), "{first:#}");
    let state = first["requestState"].as_str().unwrap().to_string();
    assert!(
        state.starts_with("gh1.") && state.len() == 4 + 64,
        "{state}"
    );
    assert!(!ws.join("out/m.txt").exists());
    // No request reached the client.
    assert!(person.asked().is_empty());

    // Forged: refused.
    let forged = format!("gh1.{}", "0".repeat(64));
    refused(
        call_once(&session, "write-file", &one, Some((&forged, allow_once()))).await,
        "it is unknown, expired or already used",
    );
    // Replayed for another input, or another tool: refused.
    let other = json!({"path": "out/other.txt", "content": "one"});
    refused(
        call_once(&session, "write-file", &other, Some((&state, allow_once()))).await,
        "it was issued for another call",
    );
    refused(
        call_once(&session, "hello", &one, Some((&state, allow_once()))).await,
        "it was issued for another call",
    );
    assert!(!ws.join("out/m.txt").exists());
    assert!(!ws.join("out/other.txt").exists());
    // A retry without the answer: the same form under the same state.
    let again = call_once(&session, "write-file", &one, Some((&state, None)))
        .await
        .unwrap();
    assert_eq!(again["requestState"], state.as_str());
    assert_eq!(again["inputRequests"], first["inputRequests"]);
    // The parked turn's own retry still works: allow once.
    let r = call_once(&session, "write-file", &one, Some((&state, allow_once())))
        .await
        .unwrap();
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(
        r["_meta"]["gatehouse/turn"],
        first["_meta"]["gatehouse/turn"]
    );
    assert_eq!(std::fs::read(ws.join("out/m.txt")).unwrap(), b"one");
    // Replayed after its use: refused, and nothing runs again.
    std::fs::remove_file(ws.join("out/m.txt")).unwrap();
    refused(
        call_once(&session, "write-file", &one, Some((&state, allow_once()))).await,
        "it is unknown, expired or already used",
    );
    assert!(!ws.join("out/m.txt").exists());

    // Deny: refused.
    let two = json!({"path": "out/d.txt", "content": "two"});
    let asked = call_once(&session, "write-file", &two, None).await.unwrap();
    let denied = asked["requestState"].as_str().unwrap();
    assert_ne!(denied, state);
    let deny = json!({"action": "accept", "content": {"decision": "deny"}});
    let r = call_once(&session, "write-file", &two, Some((denied, Some(deny))))
        .await
        .unwrap();
    assert_eq!(r["structuredContent"]["code"], "APPROVAL_REFUSED", "{r:#}");
    // An error result is a complete result on 2026-07-28, as a success is.
    assert_eq!(r["resultType"], "complete", "{r:#}");
    assert!(!ws.join("out/d.txt").exists());

    // Allow and remember for an hour, through the SDK's own retry loop:
    // the grant is in the store, and answers the next call.
    person.will_answer(json!({"action": "accept",
                              "content": {"decision": "allow_and_remember", "expires_in": "1h"}}));
    let params = serde_json::from_value::<CallToolRequestParams>(
        json!({"name": "write-file", "arguments": {"path": "out/r.txt", "content": "kept"}}),
    )
    .unwrap();
    let r = v(&session.call_tool(params).await.unwrap());
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(std::fs::read(ws.join("out/r.txt")).unwrap(), b"kept");
    assert_eq!(person.asked().len(), 1);
    let grants = env.run(&["grants", "list"]).json_lines();
    assert_eq!(grants.len(), 1, "{grants:#?}");
    assert_eq!(grants[0]["capability"], "fs:write");
    assert!(grants[0]["expires_at"].is_string(), "{grants:#?}");
    let r = call_once(
        &session,
        "write-file",
        &json!({"path": "out/s.txt", "content": "2"}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(person.asked().len(), 1);
    session.cancel().await.unwrap();
}

/// On 2026-07-28: a turn whose state no retry answers goes to the queue
/// after the elicitation timeout (its state is then refused), and a client
/// that cannot answer a form gets the queue at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_an_unanswered_2026_07_28_approval_is_queued() {
    let env = Env::new();
    let (ws, ex) = setup(&env);
    let mut a = args(&ws, &ex, "Supervised");
    a.extend(["--elicitation-timeout", "1s"]);
    let person = Person::new(true);
    let session = stdio_2026(&env, &a, &person).await;
    let one = json!({"path": "out/u.txt", "content": "one"});
    let first = call_once(&session, "write-file", &one, None).await.unwrap();
    let state = first["requestState"].as_str().unwrap().to_string();
    let turn = first["_meta"]["gatehouse/turn"]
        .as_str()
        .unwrap()
        .to_string();
    // Past the timeout (1 s; the queueing itself is one database write).
    let mut queued = Vec::new();
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        queued = tokio::task::block_in_place(|| env.run(&["approvals", "list"]).json_lines());
        if !queued.is_empty() {
            break;
        }
    }
    assert_eq!(queued.len(), 1, "{queued:#?}");
    assert_eq!(queued[0]["turn"], turn.as_str());
    assert_eq!(queued[0]["status"], "pending");
    refused(
        call_once(&session, "write-file", &one, Some((&state, allow_once()))).await,
        "it is unknown, expired or already used",
    );
    assert!(!ws.join("out/u.txt").exists());
    session.cancel().await.unwrap();

    // The session ends with a turn parked: queued with it.
    let session = stdio_2026(&env, &args(&ws, &ex, "Supervised"), &person).await;
    let parked = call_once(&session, "write-file", &one, None).await.unwrap();
    let turn = parked["_meta"]["gatehouse/turn"].as_str().unwrap();
    session.cancel().await.unwrap();
    for _ in 0..100 {
        queued = tokio::task::block_in_place(|| env.run(&["approvals", "list"]).json_lines());
        if queued.len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Newest first.
    assert_eq!(queued.len(), 2, "{queued:#?}");
    assert_eq!(queued[0]["turn"], turn, "{queued:#?}");

    // A client without elicitation: the queue, no input-required result.
    let person = Person::new(false);
    let session = stdio_2026(&env, &a, &person).await;
    let r = call_once(&session, "write-file", &one, None).await.unwrap();
    assert_eq!(r["structuredContent"]["code"], "APPROVAL_REQUIRED", "{r:#}");
    assert!(r["structuredContent"]["pending_id"].is_string(), "{r:#}");
    session.cancel().await.unwrap();
}

/// The same over streamable HTTP: a 2026-07-28 client is asked with an
/// input-required result, a forged state is refused, and the SDK's own
/// retry loop answers "allow once".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_approvals_on_2026_07_28_over_streamable_http() {
    let (_env, ws, server, token) = served_over_http("Supervised");
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", server.addr))
            .auth_header(token);
    let transport = StreamableHttpClientTransport::from_config(config);
    let person = Person::new(true);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let session = serve_client_with_lifecycle(person.clone(), transport, lifecycle)
        .await
        .unwrap();
    assert_eq!(
        session.peer().peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    let one = json!({"path": "out/h.txt", "content": "over http"});
    let first = call_once(&session, "write-file", &one, None).await.unwrap();
    assert_eq!(first["resultType"], "input_required", "{first:#}");
    assert!(person.asked().is_empty());
    let forged = format!("gh1.{}", "f".repeat(64));
    refused(
        call_once(&session, "write-file", &one, Some((&forged, allow_once()))).await,
        "it is unknown, expired or already used",
    );
    assert!(!ws.join("out/h.txt").exists());
    person.will_answer(allow_once().unwrap());
    let params = serde_json::from_value::<CallToolRequestParams>(
        json!({"name": "write-file", "arguments": one}),
    )
    .unwrap();
    let r = v(&session.call_tool(params).await.unwrap());
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(std::fs::read(ws.join("out/h.txt")).unwrap(), b"over http");
    assert_eq!(person.asked().len(), 1);
    session.cancel().await.unwrap();
}

/// A guest's `human:ask` is not put to a 2026-07-28 client (a question in
/// the middle of a run cannot be an input-required result): the guest
/// gets `denied` with APPROVAL_REQUIRED, saying why, and no one is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_human_ask_is_denied_to_a_2026_07_28_client() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    let ask = crate::support::guests::guest("ask");
    let person = Person::new(true);
    let session = stdio_2026(
        &env,
        &["--workspace", s(&ws), "--executor", s(&ask)],
        &person,
    )
    .await;
    let r = v(&call(&session, "ask", json!({"question": "colour?"})).await);
    assert_eq!(r["isError"], true, "{r:#}");
    assert_eq!(
        r["structuredContent"]["denied"],
        json!({"code": "APPROVAL_REQUIRED",
               "reason": "there is no one to ask: an mcp client on 2026-07-28 cannot be asked in the middle of a run"}),
        "{r:#}"
    );
    assert!(person.asked().is_empty());
    session.cancel().await.unwrap();
}

/// Issue 30: the `python` and `js` executors are tools of `serve --mcp`
/// with their input schemas. An agent runs code with them, sixteen calls
/// at once, half of each, each its own interpreter instance from the pool
/// (read-only twins of the executors, `python-read` and `js-read`, so that
/// no write-root lock serializes them: with the pool's former 256 core
/// instances only six CPythons fitted, and the seventh failed), then
/// undoes what one call wrote with `gatehouse_undo`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_python_and_js_run_code_concurrently_and_their_writes_are_undone() {
    let env = Env::new();
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    crate::support::guests::seed_lang_cache(&env);
    let config = env.write(
        "gatehouse.toml",
        "[actors.main]\nchannel = \"cli\"\nsender = \"tester\"\nskills = [\"*\"]\n\
         [serve]\ntools = [\"history\", \"undo\"]\n",
    );
    let python = crate::support::guests::guest("python");
    // `LANG-read`: the executor without its `fs:write`.
    let read_only = |lang: &str| {
        env.write(
            &format!("manifests/{lang}-read.toml"),
            &crate::support::guests::lang_manifest_text(lang)
                .replace(
                    &format!("name = \"{lang}\""),
                    &format!("name = \"{lang}-read\""),
                )
                .replace(
                    "[[capabilities]]\nname = \"fs:write\"\ntarget = \"out/**\"\n",
                    "",
                ),
        )
    };
    let manifests = [python.clone(), read_only("python"), read_only("js")];
    let mut a = args(&ws, &manifests, "Full");
    a.extend(["--config", s(&config), "--concurrency", "16"]);
    let person = Person::new(false);
    let session = stdio(&env, &a, &person).await;
    let tools = session.peer().list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "js-read",
            "python",
            "python-read",
            "gatehouse_history",
            "gatehouse_undo"
        ]
    );
    let tool = serde_json::to_value(&tools[0]).unwrap();
    assert_eq!(tool["inputSchema"]["required"], json!(["code"]));
    assert_eq!(tool["inputSchema"]["properties"]["code"]["type"], "string");

    // Sixteen calls at once, each busy long enough to overlap the others.
    let calls: Vec<_> = (0..16)
        .map(|i| {
            let peer = session.peer().clone();
            let (tool, code) = if i % 2 == 0 {
                (
                    "python-read",
                    format!("n = 0\nfor k in range(500000): n += k\nprint({i}, n)"),
                )
            } else {
                (
                    "js-read",
                    format!(
                        "let n = 0\nfor (let k = 0; k < 500000; k++) n += k\nconsole.log({i}, n)"
                    ),
                )
            };
            tokio::spawn(async move {
                let params = serde_json::from_value::<CallToolRequestParams>(json!({
                    "name": tool,
                    "arguments": {"code": code},
                }))
                .unwrap();
                v(&peer.call_tool(params).await.unwrap())
            })
        })
        .collect();
    for (i, call) in calls.into_iter().enumerate() {
        let r = call.await.unwrap();
        assert_eq!(r["isError"], false, "call {i}: {r:#}");
        assert_eq!(
            r["structuredContent"],
            json!({"stdout": format!("{i} 124999750000\n"), "stderr": "", "exception": null}),
            "call {i}: {r:#}"
        );
    }

    let r = v(&call(
        &session,
        "python",
        json!({"code": "open('out/made.txt', 'w').write('by the agent')"}),
    )
    .await);
    assert_eq!(r["isError"], false, "{r:#}");
    assert_eq!(
        std::fs::read(ws.join("out/made.txt")).unwrap(),
        b"by the agent"
    );
    let turn = r["_meta"]["gatehouse/turn"].as_str().unwrap().to_string();
    let r = v(&call(&session, "gatehouse_undo", json!({"turn": turn})).await);
    assert_eq!(r["isError"], false, "{r:#}");
    assert!(!ws.join("out/made.txt").exists());

    // Code that never ends is stopped at the deadline, the code named once.
    let r = v(&call(&session, "python", json!({"code": "while True: pass"})).await);
    assert_eq!(r["isError"], true, "{r:#}");
    assert_eq!(
        text(&r),
        "LIMIT_DEADLINE: the run took longer than 5000 ms",
        "{r:#}"
    );
    assert_eq!(r["structuredContent"]["code"], "LIMIT_DEADLINE");
    session.cancel().await.unwrap();
}

/// Polls task `id` until its status is `status` (a safety net of 30 s, not
/// a measurement); returns the task.
async fn task_reaching(session: &Session, id: &str, status: &str) -> Value {
    for _ in 0..300 {
        let task = serde_json::to_value(
            session
                .peer()
                .get_task(rmcp::model::GetTaskParams::new(id))
                .await
                .unwrap(),
        )
        .unwrap();
        if task["status"] == status {
            return task;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("task `{id}` never reached `{status}`");
}

/// Calls `tool` with `arguments` through `session`, which answers with a
/// task handle: its id.
async fn task_of(session: &Session, tool: &str, arguments: Value) -> String {
    let params = serde_json::from_value::<CallToolRequestParams>(
        json!({"name": tool, "arguments": arguments}),
    )
    .unwrap();
    match session.peer().call_tool_once(params).await.unwrap() {
        CallToolResponse::Task(t) => t.task.task_id,
        other => panic!("not a task: {other:?}"),
    }
}

/// A task for `write-file` that waits for an approval, answered by
/// `tasks/update`, completes with the call's result; the answer is taken
/// once.
async fn task_answered_and_completed(session: &Session, ws: &std::path::Path, file: &str) {
    let info = session.peer().peer_info().unwrap();
    assert!(info.capabilities.supports_tasks());
    let params = serde_json::from_value::<CallToolRequestParams>(json!({
        "name": "write-file",
        "arguments": {"path": format!("out/{file}"), "content": "by a task"},
    }))
    .unwrap();
    let handle = match session.peer().call_tool_once(params).await.unwrap() {
        CallToolResponse::Task(t) => serde_json::to_value(&t).unwrap(),
        other => panic!("not a task: {other:?}"),
    };
    assert_eq!(handle["resultType"], "task");
    let id = handle["taskId"].as_str().unwrap().to_string();
    let waiting = task_reaching(session, &id, "input_required").await;
    let form = &waiting["inputRequests"]["approval"];
    assert_eq!(form["method"], "elicitation/create", "{waiting:#}");
    let consts: Vec<&str> = form["params"]["requestedSchema"]["properties"]["decision"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["const"].as_str().unwrap())
        .collect();
    assert_eq!(consts, ["allow_once", "allow_and_remember", "deny"]);
    assert!(!ws.join("out").join(file).exists());
    let mut responses = rmcp::model::InputResponses::new();
    responses.insert(
        "approval".to_string(),
        json!({"action": "accept", "content": {"decision": "allow_once"}}),
    );
    session
        .peer()
        .update_task(rmcp::model::UpdateTaskParams::new(&id, responses.clone()))
        .await
        .unwrap();
    let done = task_reaching(session, &id, "completed").await;
    assert_eq!(done["result"]["isError"], false, "{done:#}");
    assert_eq!(
        std::fs::read(ws.join("out").join(file)).unwrap(),
        b"by a task"
    );
    // Answered once: a second answer is refused.
    let again = session
        .peer()
        .update_task(rmcp::model::UpdateTaskParams::new(&id, responses))
        .await;
    assert!(again
        .unwrap_err()
        .to_string()
        .contains("is not waiting for input"));
}

/// A task for `spin` (which never ends on its own) cancelled mid-run: the
/// task is `cancelled` and the turn's audit line says `TURN_CANCELLED`.
async fn task_cancelled_mid_run(env: &Env, session: &Session) {
    let before = std::fs::read_to_string(env.state_dir().join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .count();
    let id = task_of(session, "spin", json!({})).await;
    task_reaching(session, &id, "working").await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    session
        .peer()
        .cancel_task(rmcp::model::CancelTaskParams::new(&id))
        .await
        .unwrap();
    let cancelled = task_reaching(session, &id, "cancelled").await;
    assert!(cancelled.get("result").is_none(), "{cancelled:#}");
    let audit = tokio::task::block_in_place(|| wait_for_records(env, before + 1, 50));
    let line: Value = serde_json::from_str(audit.lines().nth(before).unwrap()).unwrap();
    assert_eq!(line["executor"], "spin", "{line:#}");
    assert_eq!(line["status"], "TURN_CANCELLED", "{line:#}");
    let unknown = session
        .peer()
        .get_task(rmcp::model::GetTaskParams::new("task-nope"))
        .await;
    assert!(unknown
        .unwrap_err()
        .to_string()
        .contains("no task `task-nope`"));
}

/// Issue 31: a client that declares the Tasks extension gets a task for a
/// call, over stdio (2025-11-25's handshake and 2026-07-28) and over
/// streamable HTTP: one that needs an approval is `input_required` with
/// the approval form, answered by `tasks/update`, and completes with the
/// call's result; one cancelled mid-run ends its turn `TURN_CANCELLED`
/// (its audit line) and the task `cancelled`. A client without the
/// extension still gets a plain result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tasks_wait_for_an_approval_complete_and_cancel() {
    let mut person = Person::new(false);
    person.tasks = true;
    let spin = crate::support::guests::guest("spin");
    // stdio, 2025-11-25.
    let env = Env::new();
    let (ws, ex) = setup(&env);
    let mut a = args(&ws, &ex, "Supervised");
    a.extend(["--executor", s(&spin), "--deadline-ms", "600000"]);
    let session = stdio(&env, &a, &person).await;
    task_answered_and_completed(&session, &ws, "t1.txt").await;
    task_cancelled_mid_run(&env, &session).await;
    session.cancel().await.unwrap();
    // stdio, 2026-07-28.
    let session = stdio_2026(&env, &a, &person).await;
    task_answered_and_completed(&session, &ws, "t2.txt").await;
    task_cancelled_mid_run(&env, &session).await;
    session.cancel().await.unwrap();
    // Streamable HTTP.
    let mut h = a.clone();
    h.push("--no-auth");
    let server = HttpServer::start(&env, &h);
    let session = http(&server.addr, None, &[], &person).await.unwrap();
    task_answered_and_completed(&session, &ws, "t3.txt").await;
    task_cancelled_mid_run(&env, &session).await;
    session.cancel().await.unwrap();
    drop(server);

    // Without the extension: a plain result.
    let plain = Person::new(false);
    let session = stdio(&env, &args(&ws, &ex, "Supervised"), &plain).await;
    let r = v(&call(&session, "hello", json!({"text": "sync"})).await);
    assert_eq!(r["isError"], false, "{r:#}");
    session.cancel().await.unwrap();
}

/// Issue 32: in a fleet, a 2026-07-28 retry that reaches another node
/// than the one that parked the turn is answered there. Two servers on one
/// database (one layout, as behind a fleet's proxy): A parks the turn and
/// returns its request state; B refuses a forged state and the state
/// replayed for another call (consuming nothing), returns the same form
/// to a retry without an answer, then runs the call afresh with the
/// answer (a turn of its own). The state is then used up on both nodes,
/// and A's parked turn was dropped, not queued.
///
/// Positive control: nothing is written before B's answered retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_fleet_a_2026_07_28_retry_answered_on_another_node_runs_there_once() {
    let db = std::thread::spawn(crate::support::pg::Database::migrated)
        .join()
        .unwrap();
    let env = Env::on(&db);
    let (ws, ex) = setup(&env);
    let person = Person::new(true);
    let a = stdio_2026(&env, &args(&ws, &ex, "Supervised"), &person).await;
    let b = stdio_2026(&env, &args(&ws, &ex, "Supervised"), &person).await;
    let one = json!({"path": "out/f.txt", "content": "fleet"});
    let first = call_once(&a, "write-file", &one, None).await.unwrap();
    assert_eq!(first["resultType"], "input_required", "{first:#}");
    let state = first["requestState"].as_str().unwrap().to_string();
    let forged = format!("gh1.{}", "0".repeat(64));
    refused(
        call_once(&b, "write-file", &one, Some((&forged, allow_once()))).await,
        "it is unknown, expired or already used",
    );
    let other = json!({"path": "out/other.txt", "content": "fleet"});
    refused(
        call_once(&b, "write-file", &other, Some((&state, allow_once()))).await,
        "it was issued for another call",
    );
    let again = call_once(&b, "write-file", &one, Some((&state, None)))
        .await
        .unwrap();
    assert_eq!(again["requestState"], state.as_str());
    assert_eq!(again["inputRequests"], first["inputRequests"]);
    assert!(!ws.join("out/f.txt").exists());
    let r = call_once(&b, "write-file", &one, Some((&state, allow_once())))
        .await
        .unwrap();
    assert_eq!(r["isError"], false, "{r:#}");
    assert_ne!(
        r["_meta"]["gatehouse/turn"],
        first["_meta"]["gatehouse/turn"]
    );
    assert_eq!(std::fs::read(ws.join("out/f.txt")).unwrap(), b"fleet");
    std::fs::remove_file(ws.join("out/f.txt")).unwrap();
    for node in [&a, &b] {
        refused(
            call_once(node, "write-file", &one, Some((&state, allow_once()))).await,
            "it is unknown, expired or already used",
        );
    }
    assert!(!ws.join("out/f.txt").exists());
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
    let queued = env.run(&["approvals", "list"]);
    queued.expect(0);
    assert!(queued.json_lines().is_empty(), "{queued:#?}");
}

/// Issue 32: in a fleet, a task can be followed, answered and cancelled
/// through any node. Two servers on one database (one layout, as behind a
/// fleet's proxy), clients with the Tasks extension: a task created on A
/// that waits for an approval is `input_required` on B with the same
/// form; answered on B, it runs there once (B takes it for the fleet) and
/// is `completed` on both nodes with the same result; a second answer is
/// refused on both; A's parked turn was dropped, not queued. A task that
/// works on A, cancelled through B, ends `cancelled` on both (A's turn
/// stops: `spin` never ends by itself). A waiting task cancelled on A is
/// cancelled on B too, where an answer is then refused.
///
/// Positive control: nothing is written before B's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_fleet_a_task_is_followed_answered_and_cancelled_through_another_node() {
    let db = std::thread::spawn(crate::support::pg::Database::migrated)
        .join()
        .unwrap();
    let env = Env::on(&db);
    let (ws, ex) = setup(&env);
    let mut person = Person::new(false);
    person.tasks = true;
    let spin = crate::support::guests::guest("spin");
    let mut a_args = args(&ws, &ex, "Supervised");
    a_args.extend(["--executor", s(&spin), "--deadline-ms", "600000"]);
    let a = stdio_2026(&env, &a_args, &person).await;
    let b = stdio_2026(&env, &a_args, &person).await;

    let id = task_of(
        &a,
        "write-file",
        json!({"path": "out/fleet-task.txt", "content": "by a task"}),
    )
    .await;
    let on_a = task_reaching(&a, &id, "input_required").await;
    let on_b = task_reaching(&b, &id, "input_required").await;
    assert_eq!(on_b["inputRequests"], on_a["inputRequests"], "{on_b:#}");
    assert_eq!(
        on_b["inputRequests"]["approval"]["method"],
        "elicitation/create"
    );
    assert!(!ws.join("out/fleet-task.txt").exists());

    let mut responses = rmcp::model::InputResponses::new();
    responses.insert(
        "approval".to_string(),
        json!({"action": "accept", "content": {"decision": "allow_once"}}),
    );
    b.peer()
        .update_task(rmcp::model::UpdateTaskParams::new(&id, responses.clone()))
        .await
        .unwrap();
    let done_b = task_reaching(&b, &id, "completed").await;
    assert_eq!(done_b["result"]["isError"], false, "{done_b:#}");
    assert_eq!(
        std::fs::read(ws.join("out/fleet-task.txt")).unwrap(),
        b"by a task"
    );
    let done_a = task_reaching(&a, &id, "completed").await;
    assert_eq!(done_a["result"], done_b["result"], "{done_a:#}");
    for node in [&a, &b] {
        let again = node
            .peer()
            .update_task(rmcp::model::UpdateTaskParams::new(&id, responses.clone()))
            .await;
        assert!(again
            .unwrap_err()
            .to_string()
            .contains("is not waiting for input"));
    }

    // Cancelled through the other node.
    let spinning = task_of(&a, "spin", json!({})).await;
    task_reaching(&a, &spinning, "working").await;
    task_reaching(&b, &spinning, "working").await;
    b.peer()
        .cancel_task(rmcp::model::CancelTaskParams::new(&spinning))
        .await
        .unwrap();
    task_reaching(&a, &spinning, "cancelled").await;
    task_reaching(&b, &spinning, "cancelled").await;
    // A waiting task cancelled on its own node is cancelled for the fleet:
    // the other node can no longer answer it.
    let waiting = task_of(
        &a,
        "write-file",
        json!({"path": "out/never.txt", "content": "never"}),
    )
    .await;
    task_reaching(&b, &waiting, "input_required").await;
    a.peer()
        .cancel_task(rmcp::model::CancelTaskParams::new(&waiting))
        .await
        .unwrap();
    task_reaching(&a, &waiting, "cancelled").await;
    task_reaching(&b, &waiting, "cancelled").await;
    let late = b
        .peer()
        .update_task(rmcp::model::UpdateTaskParams::new(
            &waiting,
            responses.clone(),
        ))
        .await;
    assert!(late
        .unwrap_err()
        .to_string()
        .contains("is not waiting for input"));
    assert!(!ws.join("out/never.txt").exists());

    let unknown = b
        .peer()
        .get_task(rmcp::model::GetTaskParams::new("task-nope"))
        .await;
    assert!(unknown
        .unwrap_err()
        .to_string()
        .contains("no task `task-nope`"));

    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
    let queued = env.run(&["approvals", "list"]);
    queued.expect(0);
    assert!(queued.json_lines().is_empty(), "{queued:#?}");
}

/// Runs `statements` through a connection to `url`, each on its own, on a
/// thread of its own (the sync client starts a runtime, which it may not
/// inside the test's): each one's SQLSTATE (`None`: it succeeded) and the
/// rows it changed.
fn run_sql(url: &str, statements: &[&str]) -> Vec<(Option<postgres::error::SqlState>, u64)> {
    let url = url.to_string();
    let statements: Vec<String> = statements.iter().map(|s| s.to_string()).collect();
    std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        statements
            .iter()
            .map(|sql| match c.execute(sql.as_str(), &[]) {
                Ok(n) => (None, n),
                Err(e) => (e.code().cloned(), 0),
            })
            .collect()
    })
    .join()
    .unwrap()
}

/// `allow once`, as a task's input responses.
fn allow_once_responses() -> rmcp::model::InputResponses {
    let mut responses = rmcp::model::InputResponses::new();
    responses.insert(
        "approval".to_string(),
        json!({"action": "accept", "content": {"decision": "allow_once"}}),
    );
    responses
}

/// security round 3, item 5: the fleet's node role cannot rewrite what a
/// person's task approval runs. Two servers on one database, both logged
/// in as the node role: a `write-file` task of `out/benign.txt` parks on
/// A, and its form is read through B. The node role then tries the
/// recipe, rewriting the stored call to `out/evil.txt`, and the form, the
/// session, the owning node and the hash that binds call and form: each
/// is refused with SQLSTATE 42501. The person's "allow once" through B
/// writes `out/benign.txt`, and `out/evil.txt` never exists.
///
/// Positive control: the node role still changes what a node must (the
/// task's `updated_at`, its cancel mark), and the answer through B runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_fleet_the_node_role_cannot_rewrite_the_call_a_task_s_approval_runs() {
    use postgres::error::SqlState;
    let db = std::thread::spawn(crate::support::pg::Database::migrated)
        .join()
        .unwrap();
    let node_url = crate::support::pg::as_role(&db.url, "gatehouse_node");
    let env = Env {
        database_url: Some(node_url.clone()),
        ..Env::bare()
    };
    let (ws, ex) = setup(&env);
    let mut person = Person::new(false);
    person.tasks = true;
    let a = stdio_2026(&env, &args(&ws, &ex, "Supervised"), &person).await;
    let b = stdio_2026(&env, &args(&ws, &ex, "Supervised"), &person).await;
    let id = task_of(
        &a,
        "write-file",
        json!({"path": "out/benign.txt", "content": "by a task"}),
    )
    .await;
    task_reaching(&a, &id, "input_required").await;
    let shown = task_reaching(&b, &id, "input_required").await;
    let message = shown["inputRequests"]["approval"]["params"]["message"]
        .as_str()
        .unwrap();
    assert!(message.contains("out/benign.txt"), "{shown:#}");

    let changed = run_sql(
        &node_url,
        &[
            "UPDATE tasks SET call = jsonb_set(call, '{arguments,path}', '\"out/evil.txt\"')",
            "UPDATE tasks SET form = jsonb_set(form, '{message}', '\"out/evil.txt\"')",
            "UPDATE tasks SET session = 'another'",
            "UPDATE tasks SET node = 'another'",
            "UPDATE tasks SET asked_sha256 = repeat('0', 64)",
            "UPDATE tasks SET updated_at = updated_at, cancel_asked = false",
        ],
    );
    for (i, (code, _)) in changed[..5].iter().enumerate() {
        assert_eq!(
            code.as_ref(),
            Some(&SqlState::INSUFFICIENT_PRIVILEGE),
            "statement {i}: {changed:?}"
        );
    }
    assert_eq!(changed[5], (None, 1), "{changed:?}");

    b.peer()
        .update_task(rmcp::model::UpdateTaskParams::new(
            &id,
            allow_once_responses(),
        ))
        .await
        .unwrap();
    let done = task_reaching(&b, &id, "completed").await;
    assert_eq!(done["result"]["isError"], false, "{done:#}");
    assert_eq!(
        std::fs::read(ws.join("out/benign.txt")).unwrap(),
        b"by a task"
    );
    assert!(!ws.join("out/evil.txt").exists());
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

/// security round 3, item 5: a task answered on another node runs only
/// the call bound to the form its person was shown. Whoever can still
/// change a task's row (here the owner) rewrites the stored call of a
/// `write-file` task of `out/benign.txt` to `out/evil.txt`: B refuses the
/// answer before taking the task, since the hash the parking node
/// recorded no longer matches the call and the form, and nothing is
/// written. The same rewrite of the call (its arguments and the scope it
/// names) with the hash recomputed, a row forged whole: B's fresh
/// question is not the form the person was shown, so the answer is not
/// applied (the approval is queued) and nothing is written.
///
/// Positive control: node A, whose parked turn is its own, still runs
/// the first task as asked (`out/benign.txt`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_fleet_a_task_runs_on_another_node_only_the_call_bound_to_the_form_shown() {
    let db = std::thread::spawn(crate::support::pg::Database::migrated)
        .join()
        .unwrap();
    let env = Env::on(&db);
    let (ws, ex) = setup(&env);
    let mut person = Person::new(false);
    person.tasks = true;
    let a = stdio_2026(&env, &args(&ws, &ex, "Supervised"), &person).await;
    let b = stdio_2026(&env, &args(&ws, &ex, "Supervised"), &person).await;
    let hash = |id: &str| gatehouse::policy::snapshot::sha256_hex(id.as_bytes());

    let id = task_of(
        &a,
        "write-file",
        json!({"path": "out/benign.txt", "content": "by a task"}),
    )
    .await;
    task_reaching(&b, &id, "input_required").await;
    let rewrite = format!(
        "UPDATE tasks SET call = jsonb_set(call, '{{arguments,path}}', '\"out/evil.txt\"') \
         WHERE id_sha256 = '{}'",
        hash(&id)
    );
    assert_eq!(run_sql(&db.url, &[rewrite.as_str()]), [(None, 1)]);
    let refused = b
        .peer()
        .update_task(rmcp::model::UpdateTaskParams::new(
            &id,
            allow_once_responses(),
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains(&format!(
            "task `{id}`: the fleet's record of its call does not match the question asked"
        )),
        "{refused}"
    );
    task_reaching(&b, &id, "input_required").await;
    assert!(!ws.join("out/evil.txt").exists());
    assert!(!ws.join("out/benign.txt").exists());
    a.peer()
        .update_task(rmcp::model::UpdateTaskParams::new(
            &id,
            allow_once_responses(),
        ))
        .await
        .unwrap();
    let done = task_reaching(&a, &id, "completed").await;
    assert_eq!(done["result"]["isError"], false, "{done:#}");
    assert_eq!(
        std::fs::read(ws.join("out/benign.txt")).unwrap(),
        b"by a task"
    );
    assert!(!ws.join("out/evil.txt").exists());

    // Forged whole: the call says evil (its arguments and its scope), the
    // hash agrees, the form still says benign.
    let id = task_of(
        &a,
        "write-file",
        json!({"path": "out/benign2.txt", "content": "by a task"}),
    )
    .await;
    task_reaching(&b, &id, "input_required").await;
    let url = db.url.clone();
    let key = hash(&id);
    std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let row = c
            .query_one(
                "SELECT call::text, form::text FROM tasks WHERE id_sha256 = $1",
                &[&key],
            )
            .unwrap();
        let call: String = row.get(0);
        let form: Value = serde_json::from_str(row.get::<_, &str>(1)).unwrap();
        assert!(call.contains("benign2"), "{call}");
        let call: Value = serde_json::from_str(&call.replace("benign2", "evil2")).unwrap();
        let asked = gatehouse::state::tasks::asked_sha256(Some(&call), Some(&form));
        c.execute(
            "UPDATE tasks SET call = ($1::text)::jsonb, asked_sha256 = $2 WHERE id_sha256 = $3",
            &[&call.to_string(), &asked, &key],
        )
        .unwrap();
    })
    .join()
    .unwrap();
    b.peer()
        .update_task(rmcp::model::UpdateTaskParams::new(
            &id,
            allow_once_responses(),
        ))
        .await
        .unwrap();
    let done = task_reaching(&b, &id, "completed").await;
    assert_eq!(done["result"]["isError"], true, "{done:#}");
    assert_eq!(
        done["result"]["structuredContent"]["code"], "APPROVAL_REQUIRED",
        "{done:#}"
    );
    assert!(!ws.join("out/evil2.txt").exists());
    assert!(!ws.join("out/benign2.txt").exists());
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}
