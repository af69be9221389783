//! `gatehouse serve --mcp`: executors as MCP tools, for agent runtimes.
//!
//! One long-lived [`Host`] serves every call; its workspace, actor,
//! level, grants and configuration come from the server's own command
//! line and configuration, never from a call: a call's arguments are the
//! executor's input and nothing else. The tools are the executors the
//! serving actor may run (the policy's `skill` answer at start), each with
//! its manifest's description, its input schema and annotations derived
//! from its capabilities ([`executor_tool`]).
//!
//! A call runs as one turn ([`Host::begin`] / [`Host::resume`]) on one of
//! the server's turn threads (`turns`), never on the protocol's worker
//! (the sandbox's deadline I/O must not run as async code); a thread that
//! just ended a turn takes the next without a wake-up, and the worker
//! looks for the answer briefly before it yields, so back-to-back calls
//! pay no sleep on either side. A turn that needs approval asks the person through MCP
//! elicitation, once with the whole pending set, when the client declared
//! it; a client on 2026-07-28 (no requests to the client) is asked with
//! an input-required result instead, and its retry resumes the turn
//! (`mrtr`). Otherwise, or when no one answers within the timeout, the
//! approval goes to the pending queue (`gatehouse approvals`) and the call
//! fails with `APPROVAL_REQUIRED` and the pending id. The guest's log
//! lines go to the client as log messages at the level it asked for
//! (`logging`). A refusal is a tool error
//! whose text starts with the deny code and whose structured content has
//! `code` and `reason`.
//!
//! The server offers nothing that changes grants, configuration or
//! approvals: those are the person's, on the command line.

mod call;
mod elicitation;
mod http;
mod logging;
mod mrtr;
mod progress;
mod results;
mod sessions;
mod tasks;
mod tools;
mod turns;

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, ExtensionCapabilities,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolsCapability, TASKS_EXTENSION_ID,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::ServerHandler;
use serde_json::{json, Value};

use crate::config::ServeTool;
use crate::host::{Host, Limits};
use crate::policy::{Outcome, Request, RequestKind};

pub use elicitation::elicitation;
pub(crate) use http::{
    same_token, serve_routed as serve_http_routed, service_of as http_service,
    token_file as http_token_file, Route as HttpRoute,
};
pub use http::{serve_http, serve_token, HttpOptions, ServeHttpError, TokenProblem};
pub use results::result_of;
pub use tools::{executor_tool, HISTORY_TOOL, UNDO_TOOL};

use results::{error_result, structured_result};
use sessions::SessionTurns;
use tools::{own_tool, Kind, Offered};

/// How a server serves.
///
/// Defaults ([`ServeOptions::new`]): the limits of [`Limits::default`]
/// for every call, elicitation answered within 120 s, results cut at
/// 64 KiB of text, as many calls at once as the machine has cores, "allow
/// and remember" offered.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The serving actor: every call runs as it.
    pub actor: String,
    /// The limits of every call.
    pub limits: Limits,
    /// How long the person has to answer an elicitation before the
    /// approval goes to the queue.
    pub elicitation_timeout: Duration,
    /// The largest text a result carries; longer output is cut and ends
    /// with a truncation marker.
    pub text_cap: usize,
    /// How many calls run at once.
    pub concurrency: usize,
    /// Whether an elicitation offers "allow and remember" (off for a
    /// server started from a verified snapshot: its policy, grants
    /// included, must stay the one verified).
    pub remember: bool,
    /// Whether the client's answers to approval forms count as the
    /// person's (`[approvals] elicitation`); default
    /// [`Elicitation::Once`].
    pub elicitation: crate::config::Elicitation,
}

impl ServeOptions {
    /// The options for `actor`, everything else at its default.
    pub fn new(actor: impl Into<String>) -> ServeOptions {
        ServeOptions {
            actor: actor.into(),
            limits: Limits::default(),
            elicitation_timeout: Duration::from_secs(120),
            text_cap: 64 << 10,
            concurrency: std::thread::available_parallelism()
                .map(usize::from)
                .unwrap_or(2),
            remember: true,
            elicitation: crate::config::Elicitation::Once,
        }
    }
}

/// Why a server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The serving actor is not defined in the configuration.
    #[error("unknown actor `{0}`: the configuration does not define it")]
    UnknownActor(String),
    /// The async runtime could not be started.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The MCP session failed.
    #[error("the mcp session failed: {0}")]
    Session(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The HTTP server could not start.
    #[error(transparent)]
    Http(#[from] ServeHttpError),
}

impl ServeError {
    /// Whether the error is the caller's input (exit 3).
    pub fn is_invalid_input(&self) -> bool {
        match self {
            ServeError::UnknownActor(_) => true,
            ServeError::Http(e) => e.is_invalid_input(),
            ServeError::Runtime(_) | ServeError::Session(_) => false,
        }
    }
}

/// The MCP server: a host, the serving actor and the tools it offers.
/// Cheap to clone (one shared state); every HTTP session clones it.
#[derive(Clone)]
pub struct Server {
    inner: Arc<Shared>,
    /// The log level this session's client set (`logging/setLevel`): its
    /// own for each HTTP session ([`Server::for_session`]).
    log_level: Arc<logging::SessionLevel>,
}

struct Shared {
    host: Host,
    options: ServeOptions,
    tools: Vec<Offered>,
    slots: tokio::sync::Semaphore,
    /// The threads turns run on, started at the first turn (one per slot).
    turns: std::sync::OnceLock<Option<turns::TurnThreads>>,
    /// The running turns of each HTTP session (by `Mcp-Session-Id`), so a
    /// client that ends its session (`DELETE`) stops them at once.
    sessions: std::sync::Mutex<SessionTurns>,
    /// The turns of 2026-07-28 clients waiting for the retry that answers
    /// their approval, by request state.
    waiting: std::sync::Mutex<mrtr::WaitingTurns>,
    /// The calls running as tasks (the Tasks extension), by task id.
    tasks: std::sync::Mutex<tasks::Tasks>,
}

impl Server {
    /// A server of `host` for `options.actor`: the tools are the
    /// executors the policy lets the actor run now (decided once, at
    /// start; the definitions are the host's, frozen when it opened).
    ///
    /// # Security
    /// Every call runs as `options.actor` with the host's workspace,
    /// level and grants: give it the actor the agent runtime stands for.
    pub fn new(host: Host, options: ServeOptions) -> Result<Server, ServeError> {
        if !host.snapshot().actors.contains_key(&options.actor) {
            return Err(ServeError::UnknownActor(options.actor));
        }
        let mut tools = Vec::new();
        let own: Vec<(ServeTool, &str, Kind)> = host
            .serve_tools()
            .iter()
            .map(|t| match t {
                ServeTool::History => (*t, HISTORY_TOOL, Kind::History),
                ServeTool::Undo => (*t, UNDO_TOOL, Kind::Undo),
            })
            .collect();
        for m in host.manifests() {
            if own.iter().any(|(_, name, _)| *name == m.name) {
                tracing::warn!(
                    "executor `{}` is not offered: gatehouse's own tool has its name",
                    m.name
                );
                continue;
            }
            let decision = host.decide(&Request::new(
                &options.actor,
                RequestKind::Skill {
                    skill: m.name.clone(),
                },
            ));
            if decision.outcome() != Outcome::Allowed {
                continue;
            }
            let Some(tool) = executor_tool(m) else {
                tracing::warn!("executor `{}`: its tool definition is not valid", m.name);
                continue;
            };
            tools.push(Offered {
                name: m.name.clone(),
                kind: Kind::Executor {
                    command: !m.command.is_empty(),
                },
                tool,
            });
        }
        for (t, name, kind) in own {
            tools.push(Offered {
                name: name.to_string(),
                kind,
                tool: own_tool(t, &options.actor),
            });
        }
        let slots = tokio::sync::Semaphore::new(options.concurrency.max(1));
        Ok(Server {
            inner: Arc::new(Shared {
                host,
                options,
                tools,
                slots,
                turns: std::sync::OnceLock::new(),
                sessions: std::sync::Mutex::new(SessionTurns::default()),
                waiting: std::sync::Mutex::default(),
                tasks: std::sync::Mutex::default(),
            }),
            log_level: Arc::default(),
        })
    }

    /// The server for one more session: the same host, tools and turns,
    /// with its own log level (one client's `logging/setLevel` is not
    /// another's).
    pub(crate) fn for_session(&self) -> Server {
        Server {
            inner: self.inner.clone(),
            log_level: Arc::default(),
        }
    }

    /// The names of the tools offered, in order.
    pub fn tool_names(&self) -> Vec<String> {
        self.inner.tools.iter().map(|t| t.name.clone()).collect()
    }

    /// Serves one MCP session over this process's stdin and stdout until
    /// the client closes stdin or the process gets SIGTERM; nothing but
    /// JSON-RPC is written to stdout. Either way the session ends as a
    /// client's disconnect does: running turns are cancelled (each ends
    /// within one epoch tick, its journal finished and its audit written)
    /// and waited for before this returns.
    pub fn serve_stdio(self) -> Result<(), ServeError> {
        let rt = runtime()?;
        let self_deadline_ms = self.inner.options.limits.deadline_ms;
        let turns = self.inner.clone();
        let result = rt.block_on(async move {
            use rmcp::ServiceExt;
            use tokio::signal::unix::{signal, SignalKind};
            // Installed before the session starts: a SIGTERM from then on
            // is kept until the task below reads it.
            let term = signal(SignalKind::terminate()).ok();
            // Pipes (as an agent runtime spawns the server) are driven by
            // the reactor, not a blocking thread: one hand-off less per
            // message.
            let ending = self.clone();
            let running = self
                .serve(rmcp::transport::stdio_pipes())
                .await
                .map_err(|e| ServeError::Session(e.into()))?;
            let stop = running.cancellation_token();
            let term = tokio::spawn(async move {
                if let Some(mut s) = term {
                    s.recv().await;
                    tracing::info!("SIGTERM: ending the session");
                    stop.cancel();
                }
            });
            let quit = running
                .waiting()
                .await
                .map_err(|e| ServeError::Session(e.into()));
            term.abort();
            // Turns parked for a retry that can no longer come: queued.
            ending.queue_waiting().await;
            quit.map(|_| ())
        });
        // The turns still running were cancelled with the session: each
        // ends within its deadline. A thread blocked reading stdin (when
        // stdin is not a pipe and still open after a SIGTERM) is not
        // waited for.
        let deadline = Duration::from_millis(self_deadline_ms.saturating_add(1000));
        // Waited for while the runtime still runs: a turn may await on it.
        if let Some(Some(threads)) = turns.turns.get() {
            if !threads.wait_idle(deadline) {
                tracing::warn!("a turn still runs past its deadline: not waited for");
            }
        }
        rt.shutdown_timeout(deadline);
        result
    }

    /// Serves one MCP session over `transport` (a daemon's connection)
    /// until the client closes it or `stop` turns `true`; either way as a
    /// client's disconnect: running turns are cancelled, turns parked for
    /// a retry are queued.
    pub(crate) async fn session<R, W>(
        &self,
        transport: (R, W),
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), ServeError>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        use rmcp::ServiceExt;
        let session = self.for_session();
        let ending = session.clone();
        let running = session
            .serve(transport)
            .await
            .map_err(|e| ServeError::Session(e.into()))?;
        let ct = running.cancellation_token();
        let watcher = tokio::spawn(async move {
            while !*stop.borrow_and_update() {
                if stop.changed().await.is_err() {
                    return;
                }
            }
            ct.cancel();
        });
        let quit = running
            .waiting()
            .await
            .map_err(|e| ServeError::Session(e.into()));
        watcher.abort();
        ending.queue_waiting().await;
        quit.map(|_| ())
    }

    /// Waits up to `timeout` for the turns running on this server's
    /// threads to end; whether they did.
    pub(crate) fn wait_idle(&self, timeout: Duration) -> bool {
        match self.inner.turns.get() {
            Some(Some(threads)) => threads.wait_idle(timeout),
            _ => true,
        }
    }

    /// `gatehouse_history`: the serving actor's own turns.
    fn history(&self, arguments: &serde_json::Map<String, Value>) -> CallToolResult {
        let limit = match arguments.get("limit") {
            None => 20,
            Some(v) => match v.as_u64().filter(|n| (1..=1000).contains(n)) {
                Some(n) => n as usize,
                None => {
                    return error_result(
                        None,
                        &format!("`limit` must be an integer from 1 to 1000, not `{v}`"),
                        None,
                    )
                }
            },
        };
        let actor = &self.inner.options.actor;
        let host = self.inner.host.clone();
        match tokio::task::block_in_place(|| host.own_turns(actor, limit)) {
            Ok(turns) => structured_result(json!({ "actor": actor, "turns": turns }), false),
            Err(e) => error_result(None, &crate::util::chain(&e), None),
        }
    }

    /// `gatehouse_undo`: undoes one of the serving actor's own turns.
    async fn undo(
        &self,
        arguments: &serde_json::Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let Some(turn) = arguments.get("turn").and_then(Value::as_str) else {
            return error_result(None, "`turn` (a turn id) is required", None);
        };
        let dry_run = match arguments.get("dry_run") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(v) => {
                return error_result(
                    None,
                    &format!("`dry_run` must be a boolean, not `{v}`"),
                    None,
                )
            }
        };
        let actor = &self.inner.options.actor;
        let host = self.inner.host.clone();
        let ct = context.ct.clone();
        let cancel = crate::host::CancelHandle::also_when(move || ct.is_cancelled());
        let report = tokio::task::block_in_place(|| host.undo_own(actor, turn, dry_run, &cancel));
        match report {
            Ok(report) => {
                let failed = report
                    .steps
                    .iter()
                    .any(|s| s.status == crate::host::UndoStatus::Failed);
                structured_result(serde_json::to_value(&report).unwrap_or(Value::Null), failed)
            }
            Err(crate::host::HistoryError::NoSuchTurn(t)) => error_result(
                None,
                &format!("no turn `{t}` of actor `{actor}` in the history"),
                None,
            ),
            Err(e) => error_result(None, &crate::util::chain(&e), None),
        }
    }
}

/// Whether the call's client speaks 2026-07-28 or later (no requests to
/// the client).
fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str())
}

/// A multi-thread runtime of one worker: turns run on the turn threads.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, ServeError> {
    tokio::runtime::Builder::new_multi_thread()
        // One worker: the protocol's I/O, rmcp's loop and the handlers
        // stay on one thread (no wake-up across cores per message: 49 µs of
        // protocol per call against 56 µs with two workers, `cargo bench
        // --bench serve`). Calls still run in parallel, each turn on a turn
        // thread of its own (`turns`).
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let mut tools = ToolsCapability::default();
        tools.list_changed = Some(false);
        let extensions =
            ExtensionCapabilities::from([(TASKS_EXTENSION_ID.to_string(), JsonObject::new())]);
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools_with(tools)
            .enable_extensions_with(extensions)
            .build();
        capabilities.logging = Some(JsonObject::new());
        let mut info = ServerConfig::new(capabilities);
        info.server_info.name = "gatehouse".into();
        info.server_info.version = env!("CARGO_PKG_VERSION").into();
        info.server_info.title = None;
        info.server_info.description = None;
        info.server_info.website_url = None;
        info.server_info.icons = None;
        info.instructions = Some(format!(
            "Each tool runs a gatehouse executor as actor `{}` in a sandbox built from its policy; \
             a tool error starting with a deny code (CAPABILITY_DENIED, APPROVAL_REQUIRED, ...) is \
             the policy's answer, not a fault.",
            self.inner.options.actor
        ));
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.inner.tools.iter().map(|t| t.tool.clone()).collect(),
        ))
    }

    #[allow(deprecated)] // rmcp marks logging deprecated (SEP-2577); clients still use it
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.log_level.set(request.level);
        Ok(())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner
            .tools
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.tool.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(offered) = self.inner.tools.iter().find(|t| t.name == request.name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{}`", request.name),
                None,
            ));
        };
        let arguments = request.arguments.unwrap_or_default();
        let retry = request
            .request_state
            .as_deref()
            .map(|state| (state, request.input_responses.as_ref()));
        self.call(offered, arguments, retry, &context).await
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        self.task(&request.task_id, &context)
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.answer_task(&request.task_id, &request.input_responses, &context)
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.cancel_task_of(&request.task_id, &context)
    }
}
