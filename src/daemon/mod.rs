//! `gatehouse daemon`: one long-lived host serving many agents over MCP
//! on a UNIX socket, each as the actor its OS account maps to.
//!
//! Who a caller is comes from the socket's peer credentials
//! (`SO_PEERCRED`), never from anything it says: `[actors.NAME] uids`
//! maps an account to an actor, and an account no actor lists is refused
//! at connect ([`DenyCode::CallerNotMapped`]). The actor's workspaces
//! (its `workspaces` roots, the first the default), its level (its own
//! `level`, else the file's, never above `max_level`) and its executors
//! (its `skills`) come from the configuration; a caller may narrow the
//! workspace and the level in its first line ([`wire::Narrow`]) and never
//! widen them. Each (actor, workspace, level) is one [`Server`], opened at
//! its first connection and shared by the later ones, with the
//! concurrency, cancellation and drain `serve` has.
//!
//! The approval queue is answered over the same socket
//! ([`wire::ApprovalOp`]), by a person's account only: one of
//! `[approvals] people` (default: the daemon's own account), never an
//! account of the actor whose turn waits ([`DenyCode::AnswerByItsActor`]).
//! An MCP client's answer to an approval form counts only where the
//! operator said so (`[approvals] elicitation`; `off` by default here).
//!
//! # Security
//! The daemon's account owns the state (grants, history, the queue):
//! run it as an account of its own (`gatehouse`), not as an agent's. The
//! socket is made connectable by every account (mode 0666): the uid map
//! is what admits a caller, and a socket unit may narrow the mode.

mod approvals;
mod client;
mod http;
pub mod wire;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use crate::config::{Elicitation, HostConfig};
use crate::host::{Host, Limits};
use crate::policy::{DenyCode, Level};
use crate::serve::{ServeError, ServeOptions, Server};
use crate::state::approvals::ApprovalBackend;
use crate::util::lock;

pub use client::{ask, connect, relay, ClientError, Connected};
use wire::{ApprovalOp, Hello, Narrow, Refusal, Reply};

/// The most places (workspace, level) one actor is served in at once: a
/// client narrowing to ever new directories does not open ever new hosts.
pub const MAX_PLACES_PER_ACTOR: usize = 16;

/// Where one actor's turns run: the key of a served [`Server`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Placement {
    /// The actor.
    pub actor: String,
    /// The canonical turn workspace.
    pub workspace: String,
    /// The level of its turns.
    pub level: Level,
}

/// Opens the host of a workspace at a level (the command line's way of
/// opening one, with its state, executors and flags).
pub type OpenHost = dyn Fn(&str, Level) -> Result<Host, String> + Send + Sync;

/// How the daemon serves.
///
/// Defaults ([`DaemonOptions::new`]): the limits of [`Limits::default`],
/// elicitation answered within 120 s where the configuration lets a
/// client answer, as many calls at once per actor as the machine has
/// cores.
#[derive(Debug)]
pub struct DaemonOptions {
    /// The socket's path.
    pub socket: PathBuf,
    /// A listening socket already bound at `socket` (systemd's socket
    /// activation): served instead of binding, and left in place at the
    /// end.
    pub inherited: Option<std::os::fd::OwnedFd>,
    /// The limits of every call.
    pub limits: Limits,
    /// How long a client has to answer an elicitation.
    pub elicitation_timeout: Duration,
    /// How many calls of one (actor, workspace, level) run at once.
    pub concurrency: usize,
    /// Also serve streamable HTTP on this loopback address, each actor
    /// with `uids` by its own bearer token, at its default workspace and
    /// level; `None`: the socket only.
    pub http: Option<DaemonHttp>,
}

/// `gatehouse daemon --listen`: streamable HTTP beside the socket.
///
/// # Security
/// HTTP has no peer credentials: whoever holds an actor's token is that
/// actor. The tokens are the daemon account's files (mode 0600), one per
/// actor, which the person hands to that actor's agent.
#[derive(Debug, Clone)]
pub struct DaemonHttp {
    /// A loopback address (`127.0.0.1:PORT`; port 0 picks one).
    pub listen: std::net::SocketAddr,
    /// Where the tokens are: `NAME.token` per actor, made at start.
    pub tokens: PathBuf,
}

impl DaemonOptions {
    /// The options for `socket`, everything else at its default.
    pub fn new(socket: impl Into<PathBuf>) -> DaemonOptions {
        let serve = ServeOptions::new("");
        DaemonOptions {
            socket: socket.into(),
            inherited: None,
            limits: serve.limits,
            elicitation_timeout: serve.elicitation_timeout,
            concurrency: serve.concurrency,
            http: None,
        }
    }
}

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Another daemon answers on the socket's path.
    #[error("`{0}`: a daemon already listens on this socket")]
    InUse(PathBuf),
    /// Something that is not a socket is at the path.
    #[error("`{0}` exists and is not a socket: it is left as it is")]
    NotASocket(PathBuf),
    /// No actor lists a uid: no one could connect.
    #[error("no actor has `uids`: `[actors.NAME] uids = [UID, ...]` says which accounts the daemon serves as which actor")]
    NoCallers,
    /// The socket could not be made.
    #[error("cannot listen on `{path}`: {source}")]
    Bind {
        /// The socket's path.
        path: PathBuf,
        /// Why.
        source: crate::util::IoCause,
    },
    /// The server could not start.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// The HTTP listener could not start.
    #[error(transparent)]
    Http(#[from] crate::serve::ServeHttpError),
    /// An actor served over HTTP could not be placed.
    #[error("actor `{actor}` cannot be served over http: {why}")]
    Actor {
        /// The actor.
        actor: String,
        /// Why.
        why: String,
    },
}

impl DaemonError {
    /// Whether the error is the caller's input (exit 3).
    pub fn is_invalid_input(&self) -> bool {
        match self {
            DaemonError::NotASocket(_) | DaemonError::NoCallers => true,
            DaemonError::Http(e) => e.is_invalid_input(),
            _ => false,
        }
    }
}

/// The daemon: the configuration, the way to open a host, the queue, and
/// the servers opened so far.
pub struct Daemon {
    config: HostConfig,
    options: DaemonOptions,
    open_host: Box<OpenHost>,
    queue: Arc<dyn ApprovalBackend>,
    own_uid: u32,
    hosts: Mutex<HashMap<(String, Level), Host>>,
    servers: Mutex<HashMap<Placement, Server>>,
    /// The inherited listening socket, until `run` takes it.
    inherited: Mutex<Option<std::os::fd::OwnedFd>>,
}

impl Daemon {
    /// A daemon of `config`, opening hosts with `open_host` and answering
    /// approvals on `queue` (the hosts' own).
    pub fn new(
        config: HostConfig,
        options: DaemonOptions,
        open_host: Box<OpenHost>,
        queue: Arc<dyn ApprovalBackend>,
    ) -> Result<Daemon, DaemonError> {
        if config.actors.values().all(|a| a.uids.is_empty()) {
            return Err(DaemonError::NoCallers);
        }
        let mut options = options;
        let inherited = Mutex::new(options.inherited.take());
        Ok(Daemon {
            inherited,
            config,
            options,
            open_host,
            queue,
            own_uid: crate::host::current_uid(),
            hosts: Mutex::default(),
            servers: Mutex::default(),
        })
    }

    /// Where a connection of `uid` asking `narrow` runs, or why not.
    pub fn place(&self, uid: u32, narrow: &Narrow) -> Result<Placement, Refusal> {
        let Some(actor) = self.config.actor_of_uid(uid) else {
            return Err(Refusal::new(
                Some(DenyCode::CallerNotMapped.as_str()),
                format!("uid `{uid}` is in no actor's `uids`: the daemon serves only the accounts its configuration maps to an actor"),
                false,
            ));
        };
        self.place_actor(actor, narrow)
    }

    /// Where actor `actor`'s turns run, narrowed by `narrow`, or why not.
    fn place_actor(&self, actor: &str, narrow: &Narrow) -> Result<Placement, Refusal> {
        let roots: Vec<PathBuf> = self.config.actors[actor]
            .workspaces
            .iter()
            .flatten()
            .filter_map(|(root, _)| std::fs::canonicalize(root).ok())
            .collect();
        let Some(first) = roots.first() else {
            return Err(Refusal::new(
                Some(DenyCode::WorkspaceNotGranted.as_str()),
                format!("actor `{actor}` has no workspace root that resolves: the daemon serves an actor only in its `workspaces`"),
                false,
            ));
        };
        let workspace = match &narrow.workspace {
            None => first.clone(),
            Some(dir) => {
                let path = Path::new(dir);
                let canonical = if path.is_absolute() {
                    std::fs::canonicalize(path).map_err(|e| {
                        Refusal::new(
                            Some(DenyCode::PathResolutionFailed.as_str()),
                            format!("workspace `{dir}` cannot be resolved: {e}"),
                            true,
                        )
                    })?
                } else {
                    return Err(Refusal::new(
                        None,
                        format!("workspace `{dir}` is not an absolute path"),
                        true,
                    ));
                };
                if !roots.iter().any(|r| canonical.starts_with(r)) {
                    return Err(Refusal::new(
                        Some(DenyCode::WorkspaceNotGranted.as_str()),
                        format!(
                            "workspace `{dir}` is not one of actor `{actor}`'s workspace roots nor under one"
                        ),
                        true,
                    ));
                }
                canonical
            }
        };
        let most = self.config.actor_level(actor);
        let level = match &narrow.level {
            None => most,
            Some(l) => {
                let asked: Level =
                    l.parse()
                        .map_err(|e: crate::policy::matrix::UnknownLevel| {
                            Refusal::new(None, e.to_string(), true)
                        })?;
                if asked > most {
                    return Err(Refusal::new(
                        None,
                        format!("level `{asked}` is above actor `{actor}`'s `{most}`: a client may lower its level, never raise it"),
                        true,
                    ));
                }
                asked
            }
        };
        Ok(Placement {
            actor: actor.to_string(),
            workspace: workspace.display().to_string(),
            level,
        })
    }

    /// The server of `placement`, opened at its first use.
    fn server(&self, placement: &Placement) -> Result<Server, String> {
        {
            let servers = lock(&self.servers);
            if let Some(s) = servers.get(placement) {
                return Ok(s.clone());
            }
            let places = servers
                .keys()
                .filter(|p| p.actor == placement.actor)
                .count();
            if places >= MAX_PLACES_PER_ACTOR {
                return Err(format!(
                    "actor `{}` is already served in {places} workspaces and levels, the most this daemon keeps: connect to one of those",
                    placement.actor
                ));
            }
        }
        let key = (placement.workspace.clone(), placement.level);
        let opened = lock(&self.hosts).get(&key).cloned();
        let host = match opened {
            Some(h) => h,
            None => {
                let h = (self.open_host)(&placement.workspace, placement.level)?;
                lock(&self.hosts).entry(key).or_insert(h).clone()
            }
        };
        let mut options = ServeOptions::new(&placement.actor);
        options.limits = self.options.limits;
        options.elicitation_timeout = self.options.elicitation_timeout;
        options.concurrency = self.options.concurrency.max(1);
        options.elicitation = self
            .config
            .approvals
            .elicitation
            .unwrap_or(Elicitation::Off);
        let server = Server::new(host, options).map_err(|e| e.to_string())?;
        Ok(lock(&self.servers)
            .entry(placement.clone())
            .or_insert(server)
            .clone())
    }

    /// Serves the socket until SIGTERM or SIGINT; then stops taking
    /// connections, ends every session (running turns are cancelled,
    /// each ends within its deadline) and removes the socket.
    pub fn run(self) -> Result<(), DaemonError> {
        let rt = crate::serve::runtime()?;
        let daemon = Arc::new(self);
        let socket = daemon.options.socket.clone();
        let inherited = lock(&daemon.inherited).take();
        let owned = inherited.is_none();
        let result = rt.block_on(daemon.clone().listen(inherited));
        let deadline =
            Duration::from_millis(daemon.options.limits.deadline_ms.saturating_add(1000));
        let servers: Vec<Server> = lock(&daemon.servers).values().cloned().collect();
        for s in servers {
            if !s.wait_idle(deadline) {
                tracing::warn!("a turn still runs past its deadline: not waited for");
            }
        }
        rt.shutdown_timeout(deadline);
        if result.is_ok() && owned {
            let _ = std::fs::remove_file(&socket);
        }
        result
    }

    async fn listen(
        self: Arc<Daemon>,
        inherited: Option<std::os::fd::OwnedFd>,
    ) -> Result<(), DaemonError> {
        use tokio::signal::unix::{signal, SignalKind};
        let listener = match inherited {
            Some(fd) => adopt(&self.options.socket, fd)?,
            None => bind(&self.options.socket)?,
        };
        let mut term = signal(SignalKind::terminate()).ok();
        let mut int = signal(SignalKind::interrupt()).ok();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let http = match self.options.http.clone() {
            Some(h) => Some(self.clone().http(h).await?),
            None => None,
        };
        // The one line a caller waits for: where to connect.
        eprintln!(
            "gatehouse: daemon serving mcp on {}",
            self.options.socket.display()
        );
        let http = http.map(|(addr, task)| {
            eprintln!("gatehouse: daemon serving mcp on http://{addr}/mcp");
            task
        });
        let mut sessions = tokio::task::JoinSet::new();
        loop {
            let signalled = async {
                match (&mut term, &mut int) {
                    (Some(t), Some(i)) => {
                        tokio::select! { _ = t.recv() => {}, _ = i.recv() => {} }
                    }
                    (Some(t), None) => {
                        t.recv().await;
                    }
                    (None, Some(i)) => {
                        i.recv().await;
                    }
                    (None, None) => std::future::pending::<()>().await,
                }
            };
            let stream = tokio::select! {
                _ = signalled => break,
                accepted = listener.accept() => match accepted {
                    Ok((s, _)) => s,
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        continue;
                    }
                },
            };
            let daemon = self.clone();
            let stopped = stopped.clone();
            sessions.spawn(async move { daemon.session(stream, stopped).await });
            // Reap the sessions that ended.
            while sessions.try_join_next().is_some() {}
        }
        tracing::info!("stopping: ending every session");
        if let Some(task) = http {
            task.abort();
        }
        let _ = stop.send(true);
        drop(listener);
        while sessions.join_next().await.is_some() {}
        Ok(())
    }

    /// One connection: its peer's uid, its first line, then an MCP session
    /// or one approval operation.
    async fn session(
        self: Arc<Daemon>,
        stream: UnixStream,
        stopped: tokio::sync::watch::Receiver<bool>,
    ) {
        let uid = match stream.peer_cred() {
            Ok(c) => c.uid(),
            Err(e) => {
                tracing::warn!("a connection's peer credentials cannot be read: {e}");
                return;
            }
        };
        let (read, mut write) = stream.into_split();
        let mut reader = BufReader::new(read);
        let first = match first_line(&mut reader).await {
            Ok(Some(l)) => l,
            Ok(None) => return,
            Err(message) => {
                let _ = write
                    .write_all(&Reply::refused(None, message, true).line())
                    .await;
                return;
            }
        };
        let (narrow, replay) = match parse_first(&first) {
            Ok(First::Connect(n)) => (n, None),
            Ok(First::Mcp) => (Narrow::default(), Some(first)),
            Ok(First::Approvals(op)) => {
                let daemon = self.clone();
                let reply = tokio::task::spawn_blocking(move || daemon.approval(uid, &op))
                    .await
                    .unwrap_or_else(|e| Reply::refused(None, e.to_string(), false));
                let _ = write.write_all(&reply.line()).await;
                return;
            }
            Err(refusal) => {
                let _ = write.write_all(&Reply::from(refusal).line()).await;
                return;
            }
        };
        let daemon = self.clone();
        let placed = tokio::task::spawn_blocking(move || {
            let placement = daemon.place(uid, &narrow)?;
            let server = daemon
                .server(&placement)
                .map_err(|m| Refusal::new(None, m, false))?;
            Ok::<_, Refusal>((placement, server))
        })
        .await
        .unwrap_or_else(|e| Err(Refusal::new(None, e.to_string(), false)));
        let (placement, server) = match placed {
            Ok(p) => p,
            Err(refusal) => {
                tracing::info!("uid {uid} refused: {}", refusal.message);
                let reply = Reply::from(refusal);
                if replay.is_some() {
                    // A bare MCP client: the refusal as its initialize's error.
                    let _ = write
                        .write_all(&jsonrpc_refusal(&first_id(replay.as_deref()), &reply))
                        .await;
                } else {
                    let _ = write.write_all(&reply.line()).await;
                }
                return;
            }
        };
        tracing::info!(
            "uid {uid} connected as actor `{}` in `{}` at {}",
            placement.actor,
            placement.workspace,
            placement.level
        );
        if replay.is_none() {
            let reply = Reply::served(
                &placement.actor,
                &placement.workspace,
                &placement.level.to_string(),
            );
            if write.write_all(&reply.line()).await.is_err() {
                return;
            }
        }
        let read = std::io::Cursor::new(replay.unwrap_or_default()).chain(reader);
        if let Err(e) = server.session((read, write), stopped).await {
            tracing::debug!("uid {uid}: the session ended: {e}");
        }
    }
}

/// What a first line asks.
enum First {
    Connect(Narrow),
    Approvals(ApprovalOp),
    /// JSON-RPC: a bare MCP client.
    Mcp,
}

fn parse_first(line: &[u8]) -> Result<First, Refusal> {
    let value: serde_json::Value = serde_json::from_slice(line)
        .map_err(|e| Refusal::new(None, format!("the first line is not json: {e}"), true))?;
    if value.get("jsonrpc").is_some() {
        return Ok(First::Mcp);
    }
    let hello: Hello = serde_json::from_value(value).map_err(|e| {
        Refusal::new(
            None,
            format!("the first line is not a gatehouse hello: {e}"),
            true,
        )
    })?;
    if hello.gatehouse != wire::VERSION {
        return Err(Refusal::new(
            None,
            format!(
                "protocol version `{}` is not this daemon's ({})",
                hello.gatehouse,
                wire::VERSION
            ),
            true,
        ));
    }
    match (hello.connect, hello.approvals) {
        (Some(n), None) => Ok(First::Connect(n)),
        (None, Some(op)) => Ok(First::Approvals(op)),
        _ => Err(Refusal::new(
            None,
            "a hello has exactly one of `connect` and `approvals`",
            true,
        )),
    }
}

/// The first line, newline included; `None` at a clean end; an error for
/// a line longer than [`wire::MAX_HELLO`].
async fn first_line<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
) -> Result<Option<Vec<u8>>, String> {
    let mut line = Vec::new();
    let mut limited = (&mut *reader).take(wire::MAX_HELLO as u64 + 1);
    let n = limited
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| format!("cannot read the first line: {e}"))?;
    if n == 0 {
        return Ok(None);
    }
    if line.len() > wire::MAX_HELLO {
        return Err(format!(
            "the first line is longer than {} bytes",
            wire::MAX_HELLO
        ));
    }
    Ok(Some(line))
}

/// The `id` of a JSON-RPC line, `null` when it has none.
fn first_id(line: Option<&[u8]>) -> serde_json::Value {
    line.and_then(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .and_then(|v| v.get("id").cloned())
        .unwrap_or(serde_json::Value::Null)
}

/// A JSON-RPC error answering a bare MCP client's first request.
fn jsonrpc_refusal(id: &serde_json::Value, reply: &Reply) -> Vec<u8> {
    let message = match &reply.code {
        Some(code) => format!("{code}: {}", reply.message.as_deref().unwrap_or_default()),
        None => reply.message.clone().unwrap_or_default(),
    };
    let mut v = serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": -32001, "message": message, "data": { "code": reply.code } },
    }))
    .unwrap_or_default();
    v.push(b'\n');
    v
}

/// The listening socket at `path`: a stale one (no daemon answers) is
/// replaced; a live one, or anything that is not a socket, is refused.
fn bind(path: &Path) -> Result<tokio::net::UnixListener, DaemonError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(DaemonError::NotASocket(path.to_path_buf()));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(DaemonError::InUse(path.to_path_buf()));
        }
        let _ = std::fs::remove_file(path);
    }
    let bind_err = |e: std::io::Error| DaemonError::Bind {
        path: path.to_path_buf(),
        source: e.into(),
    };
    let listener = tokio::net::UnixListener::bind(path).map_err(bind_err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(bind_err)?;
    Ok(listener)
}

/// The listening socket systemd passed (`fd`), bound at `path`.
fn adopt(path: &Path, fd: std::os::fd::OwnedFd) -> Result<tokio::net::UnixListener, DaemonError> {
    let bind_err = |e: std::io::Error| DaemonError::Bind {
        path: path.to_path_buf(),
        source: e.into(),
    };
    let listener = std::os::unix::net::UnixListener::from(fd);
    listener.set_nonblocking(true).map_err(bind_err)?;
    tokio::net::UnixListener::from_std(listener).map_err(bind_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_line_is_a_hello_or_json_rpc_and_nothing_else() {
        assert!(matches!(
            parse_first(br#"{"gatehouse":1,"connect":{}}"#),
            Ok(First::Connect(n)) if n == Narrow::default()
        ));
        assert!(matches!(
            parse_first(br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#),
            Ok(First::Mcp)
        ));
        let refused = |line: &[u8]| match parse_first(line) {
            Err(r) => r.message,
            Ok(_) => panic!("accepted"),
        };
        assert_eq!(
            refused(br#"{"gatehouse":2,"connect":{}}"#),
            "protocol version `2` is not this daemon's (1)"
        );
        assert_eq!(
            refused(br#"{"gatehouse":1}"#),
            "a hello has exactly one of `connect` and `approvals`"
        );
        assert!(refused(b"hello").starts_with("the first line is not json"));
    }
}
