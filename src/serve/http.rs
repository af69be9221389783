//! `gatehouse serve --mcp --listen 127.0.0.1:PORT`: the same server over
//! MCP's streamable HTTP, for an agent runtime that connects rather than
//! spawns.
//!
//! Loopback only: any other address is refused before anything is bound.
//! Every request must carry `Authorization: Bearer <token>`, the token in
//! `<state>/serve.token` (mode 0600, created on first use; the state
//! directory is hidden from every executor), unless auth is switched off;
//! a request with an `Origin` that is not a loopback origin is refused
//! (a web page the person visits cannot drive the server), and rmcp
//! checks `Host` against loopback names (DNS rebinding).

use std::convert::Infallible;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::{runtime, ServeError, Server};
use crate::util::IoCause;

/// How the HTTP server listens.
///
/// Defaults: none; `token` `None` means no authentication (`--no-auth`).
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// A loopback address (`127.0.0.1:PORT`, `[::1]:PORT`).
    pub listen: SocketAddr,
    /// The bearer token every request must carry.
    pub token: Option<String>,
}

/// Why the HTTP server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeHttpError {
    /// The address is not a loopback address.
    #[error("refusing to listen on `{0}`: only a loopback address (127.0.0.1, ::1) may be served")]
    NotLoopback(SocketAddr),
    /// The address could not be listened on.
    #[error("cannot listen on `{addr}`: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: IoCause,
    },
    /// The bearer token file could not be read or created, or others may read it.
    #[error("token file `{path}`: {source}")]
    Token {
        /// The token file, `serve.token` in the state directory.
        path: PathBuf,
        /// What is wrong with it.
        source: TokenProblem,
    },
}

/// What is wrong with the bearer token file.
#[derive(Debug, thiserror::Error)]
pub enum TokenProblem {
    /// It (or its directory) could not be read, created or written.
    #[error(transparent)]
    Io(IoCause),
    /// Others may read it (its mode).
    #[error("mode {0:o} lets others read it: `chmod 600` it")]
    Readable(u32),
    /// It holds less than a token.
    #[error("it holds no token of at least 32 characters")]
    Short,
}

impl ServeHttpError {
    /// Whether the error is the caller's input (exit 3).
    pub fn is_invalid_input(&self) -> bool {
        matches!(self, ServeHttpError::NotLoopback(_))
    }
}

/// The bearer token of `state_dir`: `serve.token`, read, or created with
/// 32 random bytes (hex) and mode 0600 when missing. A token file others
/// may read is refused.
///
/// # Security
/// Whoever holds the token can run every tool of the server as its
/// actor: keep it to the agent runtime's user.
pub fn serve_token(state_dir: &Path) -> Result<String, ServeHttpError> {
    token_file(&state_dir.join("serve.token"))
}

/// The bearer token in `path`, read, or created with 32 random bytes
/// (hex) and mode 0600 (its directory too) when missing; a token file
/// others may read is refused.
pub(crate) fn token_file(path: &Path) -> Result<String, ServeHttpError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let path = path.to_path_buf();
    let state_dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let err = |source: TokenProblem| ServeHttpError::Token {
        path: path.clone(),
        source,
    };
    let io = |e: std::io::Error| err(TokenProblem::Io(IoCause(e)));
    match std::fs::metadata(&path) {
        Ok(meta) => {
            if meta.permissions().mode() & 0o077 != 0 {
                return Err(err(TokenProblem::Readable(
                    meta.permissions().mode() & 0o777,
                )));
            }
            let text = std::fs::read_to_string(&path).map_err(io)?;
            let token = text.trim().to_string();
            if token.len() < 32 {
                return Err(err(TokenProblem::Short));
            }
            Ok(token)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(&state_dir).map_err(io)?;
            let mut random = [0u8; 32];
            std::fs::File::open("/dev/urandom")
                .and_then(|mut f| f.read_exact(&mut random))
                .map_err(io)?;
            let token: String = random.iter().map(|b| format!("{b:02x}")).collect();
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .map_err(io)?;
            std::io::Write::write_all(&mut file, format!("{token}\n").as_bytes()).map_err(io)?;
            Ok(token)
        }
        Err(e) => Err(io(e)),
    }
}

/// Whether `origin` (an `Origin` header) is exactly the origin of this
/// machine's loopback: `http://` or `https://`, then a host, then an
/// optional `:PORT` (1 to 5 digits, at most 65535), and nothing else: no
/// userinfo (`http://localhost:1@evil.example` names `evil.example`), no
/// path, query or fragment. The host is `localhost`, an IPv4 address in
/// 127.0.0.0/8 written as four decimal numbers, or `[::1]`.
fn loopback_origin(origin: &str) -> bool {
    let Some(authority) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((host, port)) => (Some(host), port),
            None => return false,
        },
        None => match authority.find(':') {
            Some(at) => (None, &authority[at..]),
            None => (None, ""),
        },
    };
    let port_ok = port.is_empty()
        || port.strip_prefix(':').is_some_and(|digits| {
            (1..=5).contains(&digits.len())
                && digits.bytes().all(|b| b.is_ascii_digit())
                && digits.parse::<u16>().is_ok()
        });
    if !port_ok {
        return false;
    }
    match host {
        Some(v6) => v6
            .parse::<std::net::Ipv6Addr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => {
            let name = &authority[..authority.len() - port.len()];
            name.eq_ignore_ascii_case("localhost")
                || name
                    .parse::<std::net::Ipv4Addr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
    }
}

/// Compares without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn refusal(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(format!("{text}\n"))).boxed());
    *r.status_mut() = status;
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Bearer"),
        );
    }
    r
}

/// The gate in front of rmcp, first: a request whose `Origin` is not
/// this machine's loopback is refused.
fn foreign_origin(headers: &hyper::HeaderMap) -> Option<Response<Body>> {
    let origin = headers.get(hyper::header::ORIGIN)?;
    (!origin.to_str().is_ok_and(loopback_origin)).then(|| {
        refusal(
            StatusCode::FORBIDDEN,
            "forbidden: the request's origin is not this machine's loopback",
        )
    })
}

/// The gate in front of rmcp: the request's `Origin` first, then its
/// bearer token, which picks where it goes (`route`); the refusal, if
/// any (`unauthorized` is a 401's text).
fn gate<T>(
    headers: &hyper::HeaderMap,
    route: impl FnOnce(Option<&str>) -> Option<T>,
    unauthorized: &str,
) -> Result<T, Box<Response<Body>>> {
    if let Some(refused) = foreign_origin(headers) {
        return Err(Box::new(refused));
    }
    route(bearer(headers)).ok_or_else(|| Box::new(refusal(StatusCode::UNAUTHORIZED, unauthorized)))
}

/// The bearer token a request carries, if any.
fn bearer(headers: &hyper::HeaderMap) -> Option<&str> {
    headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// One MCP server as a streamable HTTP service: a session of its own
/// ([`Server::for_session`]) per client.
pub(crate) type Service = StreamableHttpService<Server, LocalSessionManager>;

/// The streamable HTTP service of `server`.
pub(crate) fn service_of(server: &Server) -> Arc<Service> {
    let server = server.clone();
    Arc::new(StreamableHttpService::new(
        move || Ok(server.for_session()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    ))
}

/// Which server a request is for, from its bearer token: the service and
/// its server, or `None` (refused with 401 and `unauthorized`).
pub(crate) type Route = Arc<dyn Fn(Option<&str>) -> Option<(Arc<Service>, Server)> + Send + Sync>;

/// Serves streamable HTTP at `/mcp` on `listener` until the task is
/// dropped: a request with a foreign `Origin` is refused (403), one whose
/// bearer token routes nowhere too (401, `unauthorized` its text), and
/// the rest go to the server their token picks.
pub(crate) async fn serve_routed(
    listener: tokio::net::TcpListener,
    route: Route,
    unauthorized: &'static str,
) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                continue;
            }
        };
        let route = route.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request: Request<Incoming>| {
                let route = route.clone();
                async move {
                    let (service, server) =
                        match gate(request.headers(), |given| route(given), unauthorized) {
                            Ok(routed) => routed,
                            Err(refused) => return Ok::<_, Infallible>(*refused),
                        };
                    if request.uri().path() != "/mcp" {
                        return Ok(refusal(
                            StatusCode::NOT_FOUND,
                            "not found: the endpoint is /mcp",
                        ));
                    }
                    // The client ends its session: its running turns
                    // stop now, not after rmcp's drain of in-flight
                    // handlers.
                    if request.method() == hyper::Method::DELETE {
                        if let Some(id) = request
                            .headers()
                            .get("mcp-session-id")
                            .and_then(|v| v.to_str().ok())
                        {
                            server.end_session(id);
                        }
                    }
                    Ok(service.handle(request).await)
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, handler)
                .await
            {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
}

/// Whether `given` is `token` (in constant time).
pub(crate) fn same_token(given: Option<&str>, token: &str) -> bool {
    same(given.unwrap_or_default().as_bytes(), token.as_bytes())
}

/// Serves `server` over streamable HTTP on `options.listen` until the
/// process ends. Logs the address it listens on to stderr.
///
/// # Security
/// Anyone who can reach the address and holds the token runs tools as
/// the server's actor: the address must be loopback, and the token file
/// is the user's own.
pub fn serve_http(server: Server, options: HttpOptions) -> Result<(), ServeError> {
    if !options.listen.ip().is_loopback() {
        return Err(ServeHttpError::NotLoopback(options.listen).into());
    }
    let rt = runtime()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(|e| ServeHttpError::Bind {
                addr: options.listen,
                source: IoCause(e),
            })?;
        let addr = listener.local_addr().unwrap_or(options.listen);
        // The one line a caller waits for: where to connect.
        eprintln!("gatehouse: serving mcp on http://{addr}/mcp");
        let service = service_of(&server);
        let token: Option<Arc<str>> = options.token.map(Arc::from);
        let route: Route = Arc::new(move |given| match &token {
            Some(t) if !same_token(given, t) => None,
            _ => Some((service.clone(), server.clone())),
        });
        serve_routed(
            listener,
            route,
            "unauthorized: give the token of `<state>/serve.token` as `Authorization: Bearer`",
        )
        .await;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_origins_pass() {
        for o in [
            "http://127.0.0.1:8080",
            "http://localhost",
            "https://localhost:3000",
            "http://[::1]:9",
        ] {
            assert!(loopback_origin(o), "{o}");
        }
        for o in [
            "http://evil.example",
            "http://127.0.0.1.evil.example",
            "null",
            "http://localhost.evil:80",
            "file://",
            "http://localhost:1@evil.example",
        ] {
            assert!(!loopback_origin(o), "{o}");
        }
    }

    /// security round 2, item 9: an `Origin` that a URL parser reads as
    /// another host (userinfo before `@`), or that is more than an origin
    /// (a path, a query, a fragment, a bad port, a host that only starts
    /// like a loopback one), is refused by the gate with 403, though the
    /// request carries the right token.
    ///
    /// Positive control: the same request with a loopback origin
    /// (including `http://localhost:1`, the attack's prefix, and
    /// 127.0.0.0/8 and `[::1]` with ports) passes the gate, and one with the
    /// attack origin but no token is still refused for its origin first.
    /// The gate as `serve --listen` has it: one token.
    fn check(headers: &hyper::HeaderMap, token: Option<&str>) -> Option<Response<Body>> {
        gate(
            headers,
            |given| match token {
                Some(t) if !same_token(given, t) => None,
                _ => Some(()),
            },
            "unauthorized: give the token of `<state>/serve.token` as `Authorization: Bearer`",
        )
        .err()
        .map(|r| *r)
    }

    #[test]
    fn an_origin_with_userinfo_or_more_than_a_loopback_origin_is_refused() {
        const TOKEN: &str = "0123456789abcdef0123456789abcdef";
        let request = |origin: &str, token: Option<&str>| {
            let mut headers = hyper::HeaderMap::new();
            headers.insert(
                hyper::header::ORIGIN,
                hyper::header::HeaderValue::from_str(origin).unwrap(),
            );
            if let Some(token) = token {
                headers.insert(
                    hyper::header::AUTHORIZATION,
                    hyper::header::HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
                );
            }
            headers
        };
        let refused = |origin: &str, token: Option<&str>| -> (StatusCode, String) {
            let r = check(&request(origin, token), Some(TOKEN))
                .unwrap_or_else(|| panic!("`{origin}` passed the gate"));
            let status = r.status();
            let body = body_text(r);
            (status, body)
        };
        for passes in [
            "http://localhost:1",
            "http://localhost",
            "https://LOCALHOST:65535",
            "http://127.0.0.1",
            "http://127.9.8.7:8080",
            "http://[::1]",
            "https://[::1]:443",
        ] {
            assert!(
                check(&request(passes, Some(TOKEN)), Some(TOKEN)).is_none(),
                "{passes}"
            );
        }
        let forbidden = (
            StatusCode::FORBIDDEN,
            "forbidden: the request's origin is not this machine's loopback\n".to_string(),
        );
        for attack in [
            "http://localhost:1@evil.example",
            "http://localhost@evil.example",
            "http://user:pass@localhost",
            "http://@localhost",
            "http://127.0.0.1:80@evil.example:80",
            "http://[::1]@evil.example",
            "http://localhost/",
            "http://localhost:1/@evil.example",
            "http://localhost?x",
            "http://localhost#x",
            "http://localhost:",
            "http://localhost:65536",
            "http://localhost:+80",
            "http://localhost:80:80",
            "http://localhost.",
            "http://localhost\\@evil.example",
            "http://127.1",
            "http://127.0.0.01",
            "http://0x7f.0.0.1",
            "http://128.0.0.1",
            "http://[::1",
            "http://[::2]",
            "http://[::ffff:127.0.0.1]",
            "http://[::1]x",
            "http://",
            "HTTP://localhost",
            "ws://localhost",
            "null",
        ] {
            assert_eq!(refused(attack, Some(TOKEN)), forbidden, "{attack}");
        }
        assert_eq!(refused("http://localhost:1@evil.example", None), forbidden);
        // The token is still checked behind a loopback origin.
        assert_eq!(
            refused("http://localhost:1", None).0,
            StatusCode::UNAUTHORIZED
        );
    }

    /// The text of a refusal's body (a `Full`, ready at once).
    fn body_text(r: Response<Body>) -> String {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let bytes = rt.block_on(r.into_body().collect()).unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[test]
    fn the_token_file_is_created_private_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let t = serve_token(dir.path()).unwrap();
        assert_eq!(t.len(), 64);
        let mode = std::fs::metadata(dir.path().join("serve.token"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(serve_token(dir.path()).unwrap(), t);
        std::fs::set_permissions(
            dir.path().join("serve.token"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        assert!(serve_token(dir.path()).is_err());
    }
}
