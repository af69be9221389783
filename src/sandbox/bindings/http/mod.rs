//! `network:sites` → `wasi:http/outgoing-handler`, from `wasmtime-wasi-http`,
//! with gatehouse's own sender in its `send_request` hook.
//!
//! Every request is decided before a byte leaves: its scheme, host, port,
//! method and path are canonicalized and matched by the pure core
//! ([`crate::policy::http`]) against the turn's rules. A denied request
//! reaches the guest as `HttpRequestDenied`. An allowed one is resolved
//! once, each address vetted (loopback, private, link-local, metadata and
//! the other special ranges only when a rule names the host or the
//! address itself, not through a wildcard: [`may_connect`], which the
//! sockets layer asks too), and the connection made to the
//! address that was checked: there is no second lookup. TLS is rustls with
//! the host's roots. Redirects are never followed by the host. The turn's
//! requests and response bytes are capped, and every wait ends with the
//! run's deadline.
//!
//! A provider's credential (`provider:access`) is added by the host to
//! requests under the provider's base URL only, replacing a header of the
//! same name the guest set; the value is never in the guest, the audit or
//! any report. The response to such a request reaches the guest with every
//! occurrence of the value replaced ([`redact`]), so a server that echoes
//! the request does not hand it over; `TRACE` and `CONNECT` are never sent
//! at all. Every request gets one audit line, allowed or denied:
//! method, scheme, host, port and path, the query only as its sha256 and
//! length, never headers or bodies.

use std::borrow::Cow;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use serde::Serialize;
use wasmtime::component::Linker;
use wasmtime_wasi_http::{
    Error as HttpError, RequestOptions, WasiHttp, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks,
};

mod runtime;

pub use runtime::{CaFileError, HttpClient, HttpClientError, HttpRuntime, NetworkError};

use super::{Finished, Open, OpenError, Prepare, PrepareError, Unit};
use crate::policy::http::{
    decide_request, may_connect, wildcard_only, HttpRequest, HttpRule, Scheme, UrlPattern,
};
use crate::policy::snapshot::sha256_hex;
use crate::policy::DenyCode;
use crate::sandbox::alarm::{timeout, Alarm};
use crate::sandbox::limits::LimitHit;
use crate::sandbox::services::{AuditSink, ResponseEnd, RunDecision, RunRequest, RunVerdict};
use crate::sandbox::HostState;

/// A provider the turn may use: its name, where its credential goes, and
/// how (never the value: the host reads that at the edge).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderPart {
    /// The provider's name, the `provider:access` target.
    pub name: String,
    /// `scheme://host[:port][/path]` prefixes: a request is under one when
    /// scheme, host and port are the same and its path starts with the
    /// prefix's at a segment boundary.
    pub base_urls: Vec<String>,
    /// The request header the credential goes in (default `Authorization`).
    pub header: String,
    /// `Bearer {value}`.
    pub format: String,
}

/// What `network:sites` and `provider:access` allowed for HTTP: empty,
/// and nothing linked, without `network:sites`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HttpPart {
    /// The sites a request may go to, with their methods.
    pub rules: Vec<HttpRule>,
    /// The providers whose credential the host adds to requests under their base URLs.
    pub providers: Vec<ProviderPart>,
}

/// The HTTP unit.
pub struct Http;

/// The wasi:http state of one run.
pub struct HttpState {
    ctx: WasiHttpCtx,
    hooks: Hooks,
}

impl HttpState {
    /// The limit a request or a response passed, if any: the run stops
    /// with its code.
    pub fn limit_hit(&self) -> Option<LimitHit> {
        self.hooks
            .shared
            .hit
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// What the requests of a run share with their futures (which run on
/// wasmtime-wasi's runtime, outside the store).
struct Shared {
    requests: std::sync::atomic::AtomicU64,
    bytes: std::sync::atomic::AtomicU64,
    hit: Mutex<Option<LimitHit>>,
    max_requests: u64,
    max_bytes: u64,
    audit: Arc<dyn AuditSink>,
    deadline: Instant,
}

impl Shared {
    fn hit(&self, code: DenyCode, detail: String) {
        let mut hit = self
            .hit
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        hit.get_or_insert(LimitHit::new(code, detail));
    }

    fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// A provider with its value, as the host read it.
struct Provider {
    part: ProviderPart,
    /// The requests under its base URLs, parsed once for the run.
    bases: Vec<UrlPattern>,
    value: Result<String, String>,
}

struct Hooks {
    rules: Arc<[HttpRule]>,
    providers: Arc<[Provider]>,
    client: Arc<HttpClient>,
    shared: Arc<Shared>,
}

impl Unit for Http {
    type Part = HttpPart;
    type State = HttpState;
    type Runtime = HttpRuntime;

    fn open(cx: &Open<'_>) -> Result<HttpRuntime, OpenError> {
        Ok(HttpRuntime::open(
            &cx.config.network,
            &cx.config.providers,
            cx.watcher.clone(),
            cx.environment.clone(),
        )?)
    }

    /// The part's rules and providers, the host's TLS roots and pinned
    /// names, and the provider values the host read.
    ///
    /// # Security
    /// Lets the guest send HTTP requests that the part's rules allow, with
    /// the providers' credentials added under their base URLs.
    fn prepare(
        part: &HttpPart,
        runtime: &HttpRuntime,
        cx: &mut Prepare<'_>,
    ) -> Result<HttpState, PrepareError> {
        let limits = cx.plan.limits();
        let providers: Vec<Provider> = part
            .providers
            .iter()
            .map(|p| Provider {
                part: p.clone(),
                // The host checked them when it read its configuration.
                bases: p
                    .base_urls
                    .iter()
                    .filter_map(|b| UrlPattern::under(b).ok())
                    .collect(),
                // Read now, at the host's edge: only the HTTP sender
                // sees it.
                value: runtime.value_of(&p.name),
            })
            .collect();
        Ok(HttpState {
            ctx: WasiHttpCtx::new(),
            hooks: Hooks {
                rules: part.rules.clone().into(),
                providers: providers.into(),
                client: runtime.client.clone(),
                shared: Arc::new(Shared {
                    requests: Default::default(),
                    bytes: Default::default(),
                    hit: Mutex::new(None),
                    max_requests: limits.http_requests,
                    max_bytes: limits.http_response_bytes,
                    audit: cx.services.audit.clone(),
                    deadline: cx.deadline,
                }),
            },
        })
    }

    fn describe(part: &HttpPart, _: &HttpState, out: &mut Vec<Cow<'static, str>>) {
        for r in &part.rules {
            let methods = r
                .methods
                .as_ref()
                .map(|m| format!(" ({})", m.join(", ")))
                .unwrap_or_default();
            out.push(Cow::Owned(format!("http: `{}`{methods}", r.site)));
        }
        for p in &part.providers {
            out.push(Cow::Owned(format!(
                "provider `{}`: `{}` under {}",
                p.name,
                p.header,
                p.base_urls.join(", ")
            )));
        }
    }

    /// The limit a request or a response passed, if any.
    fn finish(state: &mut HttpState, out: &mut Finished) -> Result<(), PrepareError> {
        if out.limit.is_none() {
            out.limit = state.limit_hit();
        }
        Ok(())
    }
}

/// Links `wasi:http/types` and `wasi:http/outgoing-handler`.
///
/// # Security
/// Lets the guest send the requests the state's rules allow; the table
/// links it only with `network:sites` granted.
pub fn add_to_linker(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime_wasi_http::p2::bindings::{sync::http as sync_http, LinkOptions};
    let options = LinkOptions::default();
    sync_http::outgoing_handler::add_to_linker::<HostState, WasiHttp>(l, view)?;
    sync_http::types::add_to_linker::<HostState, WasiHttp>(l, &(&options).into(), view)?;
    Ok(())
}

fn view(s: &mut HostState) -> WasiHttpCtxView<'_> {
    WasiHttpCtxView {
        ctx: &mut s.http.ctx,
        table: &mut s.table,
        hooks: &mut s.http.hooks,
    }
}

/// What is left of a request's connection, driven while the body is read.
type IoFuture = Box<dyn Future<Output = Result<(), HttpError>> + Send>;

/// The response the guest gets, with the connection's io future.
type Answered = (http::Response<wasmtime_wasi_http::WasiBody>, IoFuture);

type SendFuture = Box<dyn Future<Output = Result<Answered, HttpError>> + Send>;

/// One request's audit line, without its outcome yet.
#[derive(Clone)]
struct Line {
    request: RunRequest,
    provider: Option<String>,
}

impl Line {
    fn of(req: &HttpRequest, provider: Option<&str>) -> Line {
        let query = req.query.as_deref();
        Line {
            request: RunRequest::Http {
                method: req.method.clone(),
                scheme: req.scheme.as_str(),
                host: req.host.clone(),
                port: req.port,
                path: req.path.clone(),
                query_sha256: query.map(|q| sha256_hex(q.as_bytes())),
                query_bytes: query.map(str::len),
            },
            provider: provider.map(str::to_string),
        }
    }

    fn denied(&self, audit: &dyn AuditSink, code: DenyCode, reason: &str) {
        audit.decision(RunDecision {
            request: self.request.clone(),
            decision: RunVerdict::Deny {
                code: Some(code),
                reason: reason.to_string(),
            },
            command: None,
            response: None,
            provider: self.provider.clone(),
        });
    }

    fn allowed(&self, audit: &dyn AuditSink, end: ResponseEnd) {
        audit.decision(RunDecision {
            request: self.request.clone(),
            decision: RunVerdict::Allow { reason: None },
            command: None,
            response: Some(end),
            provider: self.provider.clone(),
        });
    }
}

fn refuse(error: HttpError) -> SendFuture {
    Box::new(std::future::ready(Err(error)))
}

impl WasiHttpHooks for Hooks {
    fn send_request(
        &mut self,
        mut request: http::Request<wasmtime_wasi_http::WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> SendFuture {
        let started = Instant::now();
        let shared = self.shared.clone();
        let Some(req) = canonical_or_denied(&request, &*shared.audit) else {
            return refuse(HttpError::HttpRequestDenied);
        };
        let provider = self
            .providers
            .iter()
            .find(|p| p.bases.iter().any(|b| b.covers_request(&req)));
        let line = Line::of(&req, provider.map(|p| p.part.name.as_str()));
        match decide_request(&self.rules, &req) {
            Ok(_) => {}
            Err(reason) => {
                line.denied(&*shared.audit, DenyCode::NetworkNotGranted, &reason);
                return refuse(HttpError::HttpRequestDenied);
            }
        }
        let n = shared
            .requests
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if n >= shared.max_requests {
            let reason = format!("the turn may make {} HTTP requests", shared.max_requests);
            line.denied(&*shared.audit, DenyCode::LimitHttpRequests, &reason);
            shared.hit(DenyCode::LimitHttpRequests, reason);
            return refuse(HttpError::HttpRequestDenied);
        }
        // Set only on a request that carries a credential: every other
        // response goes to the guest as the server sent it, untouched.
        let mut redactor = None;
        if let Some(p) = provider {
            match add_credential(p, &mut request, &line, &shared) {
                Ok(r) => redactor = r,
                Err(e) => return refuse(e),
            }
        }
        // A wildcard rule covers names, never what they resolve to in the
        // special ranges; a rule on the name or the address itself does
        // (the sockets layer asks the same `may_connect`).
        let through_wildcard = wildcard_only(&self.rules, &req);
        let client = self.client.clone();
        Box::new(async move {
            let sent = send(&client, request, &req, through_wildcard, options, &shared).await;
            match sent {
                Ok((response, io)) => {
                    let answer = Answer {
                        line,
                        started,
                        redactor,
                        options,
                    };
                    answer.counted(response, io, &shared)
                }
                Err((code, reason, error)) => {
                    line.denied(&*shared.audit, code, &reason);
                    if shared.left().is_zero() {
                        shared.hit(
                            DenyCode::LimitDeadline,
                            "the run's deadline passed while a request waited".into(),
                        );
                    }
                    Err(error)
                }
            }
        })
    }
}

/// The request as the policy names it; None, with its denial written,
/// when it cannot be named.
fn canonical_or_denied(
    request: &http::Request<wasmtime_wasi_http::WasiBody>,
    audit: &dyn AuditSink,
) -> Option<HttpRequest> {
    let uri = request.uri();
    let e = match HttpRequest::canonical(
        request.method().as_str(),
        uri.scheme_str().unwrap_or("https"),
        uri.authority().map_or("", |a| a.as_str()),
        uri.path_and_query().map_or("/", |p| p.as_str()),
    ) {
        Ok(req) => return Some(req),
        Err(e) => e,
    };
    // Not even a request the policy can name: the line holds the URI
    // without its query and without userinfo (which may hold a password).
    let host = uri.authority().map_or("", |a| a.as_str());
    let shown = format!(
        "{}://{}{}",
        uri.scheme_str().unwrap_or("https"),
        host.rsplit('@').next().unwrap_or(host),
        uri.path()
    );
    let line = Line {
        request: RunRequest::HttpUnnamed {
            method: request.method().as_str().to_string(),
            uri: shown,
        },
        provider: None,
    };
    line.denied(audit, DenyCode::NetworkNotGranted, &e.to_string());
    None
}

/// Puts provider `p`'s credential in `request`'s header (replacing the
/// guest's) and asks for an uncompressed response: the redactor that
/// takes the value out of it. An error, with the denial written, when the
/// value is missing or cannot be sent.
fn add_credential(
    p: &Provider,
    request: &mut http::Request<wasmtime_wasi_http::WasiBody>,
    line: &Line,
    shared: &Shared,
) -> Result<Option<redact::Redactor>, HttpError> {
    let value = match &p.value {
        Ok(v) => v,
        Err(reason) => {
            line.denied(&*shared.audit, DenyCode::NetworkNotGranted, reason);
            return Err(HttpError::ConfigurationError);
        }
    };
    let Ok(name) = http::HeaderName::from_bytes(p.part.header.as_bytes()) else {
        line.denied(
            &*shared.audit,
            DenyCode::NetworkNotGranted,
            "the provider's header name is not valid",
        );
        return Err(HttpError::ConfigurationError);
    };
    let Ok(mut header) = http::HeaderValue::from_str(&p.part.format.replace("{value}", value))
    else {
        line.denied(
            &*shared.audit,
            DenyCode::NetworkNotGranted,
            "the provider's value cannot be sent in a header",
        );
        return Err(HttpError::ConfigurationError);
    };
    header.set_sensitive(true);
    let headers = request.headers_mut();
    headers.remove(&name);
    headers.insert(name, header);
    // The response is scanned for the value as sent: a compressed one
    // (which the guest could ask for) would hide it.
    headers.insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
    Ok(redact::Redactor::new(value.as_bytes()))
}

/// What an allowed request's response needs to be handed to the guest.
struct Answer {
    line: Line,
    started: Instant,
    redactor: Option<redact::Redactor>,
    options: Option<RequestOptions>,
}

impl Answer {
    /// The response for the guest: its headers redacted if the request
    /// carried a credential, its body [`Counted`].
    fn counted(
        self,
        mut response: http::Response<hyper::body::Incoming>,
        io: IoFuture,
        shared: &Arc<Shared>,
    ) -> Result<Answered, HttpError> {
        let Answer {
            line,
            started,
            mut redactor,
            options,
        } = self;
        let status = response.status().as_u16();
        let first_byte_ms = started.elapsed().as_secs_f64() * 1e3;
        if let Some(r) = redactor.as_mut() {
            if let Err(why) = r.response_head(response.headers_mut()) {
                line.allowed(
                    &*shared.audit,
                    ResponseEnd {
                        status,
                        bytes: 0,
                        first_byte_ms,
                        duration_ms: started.elapsed().as_secs_f64() * 1e3,
                        error: Some(why),
                        redacted: Some(r.count()),
                    },
                );
                return Err(HttpError::HttpProtocolError);
            }
        }
        let response = response.map(|body| {
            Counted {
                body,
                deadline: Alarm::new(shared.deadline, None),
                between: options
                    .and_then(|o| o.between_bytes_timeout)
                    .map(|d| (d, Alarm::after(d.min(shared.left())))),
                shared: shared.clone(),
                seen: 0,
                line: Some((line, status, started, first_byte_ms)),
                redactor,
                queued: Vec::new(),
                ended: false,
            }
            .boxed_unsync()
        });
        Ok((response, io))
    }
}

type SendError = (DenyCode, String, HttpError);

/// Resolves, vets, connects to the vetted address, and sends.
async fn send(
    client: &HttpClient,
    mut request: http::Request<wasmtime_wasi_http::WasiBody>,
    req: &HttpRequest,
    wildcard_only: bool,
    options: Option<RequestOptions>,
    shared: &Shared,
) -> Result<(http::Response<hyper::body::Incoming>, IoFuture), SendError> {
    let failed = |reason: String, e: HttpError| (DenyCode::NetworkNotGranted, reason, e);
    let within = |asked: Option<Duration>| {
        let left = shared.left();
        asked.map_or(left, |a| a.min(left))
    };
    let vetted = vetted_addresses(client, req, wildcard_only, within(None)).await?;
    // Each vetted address in turn (`localhost` may answer `::1` first
    // while a server listens on 127.0.0.1), within the connect timeout.
    let connect_by = Instant::now() + within(options.and_then(|o| o.connect_timeout));
    let stream = connect_any(&vetted, connect_by, &req.host).await?;
    let io: Box<dyn Io> = match req.scheme {
        Scheme::Http => Box::new(stream),
        Scheme::Https => Box::new(tls(client, req, stream, connect_by).await?),
    };
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .handshake(hyper_util::rt::TokioIo::new(io))
        .await
        .map_err(|e| failed(format!("http: {e}"), HttpError::HttpProtocolError))?;
    // The request line holds the path and query only (no proxy).
    let pq = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    *request.uri_mut() = match http::Uri::builder().path_and_query(pq).build() {
        Ok(u) => u,
        Err(_) => {
            return Err(failed(
                "the path cannot be sent".into(),
                HttpError::HttpRequestUriInvalid,
            ))
        }
    };
    let first = within(options.and_then(|o| o.first_byte_timeout));
    exchange(sender, conn, request, first).await
}

/// The addresses of `req`'s host that `may_connect` lets this request
/// reach (not the special ranges through a wildcard rule).
async fn vetted_addresses(
    client: &HttpClient,
    req: &HttpRequest,
    wildcard_only: bool,
    left: Duration,
) -> Result<Vec<SocketAddr>, SendError> {
    let failed = |reason: String, e: HttpError| (DenyCode::NetworkNotGranted, reason, e);
    let addrs = resolve(client, &req.host, req.port, left)
        .await
        .map_err(|r| {
            failed(
                r,
                HttpError::DnsError {
                    rcode: Some("name unresolvable".into()),
                    info_code: None,
                },
            )
        })?;
    let vetted: Vec<SocketAddr> = addrs
        .iter()
        .copied()
        .filter(|a| may_connect(wildcard_only, a.ip()))
        .collect();
    if !vetted.is_empty() {
        return Ok(vetted);
    }
    Err(failed(
        format!(
            "`{}` resolves only to addresses a wildcard grant does not reach ({})",
            req.host,
            addrs
                .iter()
                .map(|a| a.ip().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        HttpError::DestinationIpProhibited,
    ))
}

/// A connection to the first of `vetted` that accepts one by `connect_by`.
async fn connect_any(
    vetted: &[SocketAddr],
    connect_by: Instant,
    host: &str,
) -> Result<tokio::net::TcpStream, SendError> {
    let mut stream = None;
    let mut last = String::new();
    for addr in vetted {
        let left = connect_by.saturating_duration_since(Instant::now());
        match timeout(left, tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(s)) => {
                stream = Some(s);
                break;
            }
            Ok(Err(e)) => last = format!("{addr}: {}", crate::util::lower(&e.to_string())),
            Err(_) => last = format!("{addr}: the connect timed out"),
        }
    }
    stream.ok_or_else(|| {
        (
            DenyCode::NetworkNotGranted,
            format!("no address of `{}` accepted a connection ({last})", host),
            HttpError::ConnectionRefused,
        )
    })
}

/// `stream` under TLS to `req`'s host, the handshake done by `connect_by`.
async fn tls(
    client: &HttpClient,
    req: &HttpRequest,
    stream: tokio::net::TcpStream,
    connect_by: Instant,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, SendError> {
    let failed = |reason: String, e: HttpError| (DenyCode::NetworkNotGranted, reason, e);
    let name = match req.host.parse::<IpAddr>() {
        Ok(ip) => rustls::pki_types::ServerName::from(ip),
        Err(_) => rustls::pki_types::ServerName::try_from(req.host.clone()).map_err(|_| {
            failed(
                format!("`{}` is not a TLS name", req.host),
                HttpError::TlsProtocolError,
            )
        })?,
    };
    let connector = tokio_rustls::TlsConnector::from(client.tls.clone());
    let left = connect_by.saturating_duration_since(Instant::now());
    match timeout(left, connector.connect(name, stream)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(failed(
            format!("tls: {}", crate::util::lower(&e.to_string())),
            HttpError::TlsCertificateError,
        )),
        Err(_) => Err(failed(
            "the tls handshake timed out".into(),
            HttpError::ConnectionTimeout,
        )),
    }
}
/// Sends `request` on the new connection and awaits the response head
/// within `first`: the response, and what is left of the connection to
/// drive as the io future.
async fn exchange(
    mut sender: hyper::client::conn::http1::SendRequest<wasmtime_wasi_http::WasiBody>,
    conn: hyper::client::conn::http1::Connection<
        hyper_util::rt::TokioIo<Box<dyn Io>>,
        wasmtime_wasi_http::WasiBody,
    >,
    request: http::Request<wasmtime_wasi_http::WasiBody>,
    first: Duration,
) -> Result<(http::Response<hyper::body::Incoming>, IoFuture), SendError> {
    let failed = |reason: String, e: HttpError| (DenyCode::NetworkNotGranted, reason, e);
    // The response is awaited while the connection is driven in the same
    // task (as wasmtime-wasi-http's own sender does): no hop to another
    // task on the way. What is left of the connection is the io future.
    let mut conn = Some(conn);
    let mut send = std::pin::pin!(timeout(first, sender.send_request(request)));
    let answer = std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = send.as_mut().poll(cx) {
            return Poll::Ready(r);
        }
        let Some(c) = conn.as_mut() else {
            return Poll::Pending;
        };
        match Pin::new(c).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(done) => {
                conn = None;
                match done {
                    // The connection ended first: the response is ready or
                    // never will be.
                    Ok(()) => send.as_mut().poll(cx),
                    Err(e) => Poll::Ready(Ok(Err(e))),
                }
            }
        }
    })
    .await;
    let response = match answer {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Err(failed(format!("http: {e}"), HttpError::HttpProtocolError)),
        Err(_) => {
            return Err(failed(
                "no response before the timeout".into(),
                HttpError::ConnectionReadTimeout,
            ))
        }
    };
    let io: IoFuture = Box::new(async move {
        match conn {
            Some(c) => c.await.map_err(HttpError::from),
            None => Ok(()),
        }
    });
    Ok((response, io))
}

trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

/// The addresses of `host` on `port`: the host's pinned names first
/// (`[network] resolve`), else the system resolver, within `left`.
async fn resolve(
    client: &HttpClient,
    host: &str,
    port: u16,
    left: Duration,
) -> Result<Vec<SocketAddr>, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    if let Some(ips) = client.resolve.get(host) {
        return Ok(ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect());
    }
    let query = format!("{host}:{port}");
    match timeout(left, tokio::net::lookup_host(query)).await {
        Ok(Ok(addrs)) => {
            let mut out: Vec<SocketAddr> = Vec::new();
            for a in addrs {
                let a = SocketAddr::new(a.ip().to_canonical(), a.port());
                if !out.contains(&a) {
                    out.push(a);
                }
            }
            if out.is_empty() {
                Err(format!("`{host}` resolves to no address"))
            } else {
                Ok(out)
            }
        }
        Ok(Err(e)) => Err(format!(
            "`{host}` does not resolve: {}",
            crate::util::lower(&e.to_string())
        )),
        Err(_) => Err(format!("`{host}` did not resolve before the deadline")),
    }
}

/// A response body that counts its bytes against the turn's cap, ends at
/// the run's deadline, and writes the request's audit line when it ends.
struct Counted {
    body: hyper::body::Incoming,
    shared: Arc<Shared>,
    /// Fires at the run's deadline: a server that trickles cannot hold the
    /// body open past it.
    deadline: Alarm,
    /// The guest's `between-bytes-timeout`, if it set one, and its timer,
    /// restarted at each frame.
    between: Option<(Duration, Alarm)>,
    seen: u64,
    /// The line, the status, when the request started and when its
    /// headers came (taken when written).
    line: Option<(Line, u16, Instant, f64)>,
    /// On a request that carried a provider's credential: what takes the
    /// value out of the body and the trailers.
    redactor: Option<redact::Redactor>,
    /// Frames to hand out before the body is polled again, last first
    /// (the bytes the redactor held back, then the trailers that followed
    /// them).
    queued: Vec<http_body::Frame<Bytes>>,
    /// The body ended, and its line was written: only `queued` is left.
    ended: bool,
}

impl Counted {
    fn finish(&mut self, error: Option<&str>) {
        if let Some((line, status, started, first_byte_ms)) = self.line.take() {
            line.allowed(
                &*self.shared.audit,
                ResponseEnd {
                    status,
                    bytes: self.seen,
                    first_byte_ms,
                    duration_ms: started.elapsed().as_secs_f64() * 1e3,
                    error: error.map(str::to_string),
                    redacted: self.redactor.as_ref().map(redact::Redactor::count),
                },
            );
        }
    }
}

impl Counted {
    /// The body ends at the run's deadline, and the run with it.
    fn past_deadline(&mut self) -> HttpError {
        self.shared.hit(
            DenyCode::LimitDeadline,
            "the run's deadline passed while a response was read".into(),
        );
        self.finish(Some("the run's deadline passed"));
        HttpError::ConnectionReadTimeout
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.finish(Some("the body was not read to its end"));
    }
}

impl Counted {
    /// One frame from the server, counted against the turn's cap and
    /// passed through the redactor if there is one; None when the
    /// redactor held it back whole (a possible start of the value): the
    /// body is polled again.
    fn take_frame(
        &mut self,
        frame: http_body::Frame<Bytes>,
    ) -> Option<Result<http_body::Frame<Bytes>, HttpError>> {
        if let Some((gap, alarm)) = self.between.as_mut() {
            alarm.reset(Instant::now() + *gap);
        }
        let n = frame.data_ref().map_or(0, |d| d.len() as u64);
        self.seen += n;
        let total = self
            .shared
            .bytes
            .fetch_add(n, std::sync::atomic::Ordering::SeqCst)
            + n;
        if total > self.shared.max_bytes {
            let detail = format!(
                "the turn's HTTP responses passed {} bytes",
                self.shared.max_bytes
            );
            self.shared.hit(DenyCode::LimitHttpResponse, detail);
            self.finish(Some("the response passed the turn's cap"));
            return Some(Err(HttpError::HttpResponseBodySize(Some(
                self.shared.max_bytes,
            ))));
        }
        let Some(redactor) = self.redactor.as_mut() else {
            // Trailers end the body: the reader asks for nothing after them,
            // so the line is written now.
            if frame.is_trailers() {
                self.finish(None);
            }
            return Some(Ok(frame));
        };
        let frame = match frame.into_data() {
            Ok(data) => {
                let out = redactor.body(data);
                if out.is_empty() {
                    return None;
                }
                http_body::Frame::data(out)
            }
            Err(frame) => match frame.into_trailers() {
                Ok(mut trailers) => {
                    // The body is over: what was held back goes first, then the
                    // trailers, cleaned. The count is final, and the reader asks for
                    // nothing after the trailers: the line is written now.
                    let held = redactor.body_end();
                    redactor.headers(&mut trailers);
                    self.queued.push(http_body::Frame::trailers(trailers));
                    self.finish(None);
                    self.ended = true;
                    if held.is_empty() {
                        return None;
                    }
                    http_body::Frame::data(held)
                }
                // A frame that is neither (none exists in http-body 1): passed
                // on as it is.
                Err(frame) => frame,
            },
        };
        Some(Ok(frame))
    }

    /// The server's body ended: what the redactor held back, if anything.
    fn end(&mut self) -> Option<Result<http_body::Frame<Bytes>, HttpError>> {
        // Whatever the redactor still holds is not the value (a whole one
        // would have been replaced): it is the body's last bytes. The
        // count is final here.
        let held = self
            .redactor
            .as_mut()
            .map(redact::Redactor::body_end)
            .unwrap_or_default();
        self.finish(None);
        self.ended = true;
        if held.is_empty() {
            return None;
        }
        Some(Ok(http_body::Frame::data(held)))
    }

    /// No frame yet: the run's deadline or the guest's between-bytes
    /// timeout may end the wait.
    fn pending(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, HttpError>>> {
        if Pin::new(&mut self.deadline).poll(cx).is_ready() {
            return Poll::Ready(Some(Err(self.past_deadline())));
        }
        let idle = self
            .between
            .as_mut()
            .is_some_and(|(_, alarm)| Pin::new(alarm).poll(cx).is_ready());
        if idle {
            // The guest's own timeout: its error, not a limit.
            self.finish(Some("no byte within the between-bytes timeout"));
            return Poll::Ready(Some(Err(HttpError::ConnectionReadTimeout)));
        }
        Poll::Pending
    }
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, HttpError>>> {
        let this = &mut *self;
        // A loop only for the redactor: a frame it holds back whole (a
        // possible start of the value) is no frame for the guest, and the
        // body is polled again at once.
        loop {
            if let Some(frame) = this.queued.pop() {
                return Poll::Ready(Some(Ok(frame)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            if Instant::now() >= this.shared.deadline {
                return Poll::Ready(Some(Err(this.past_deadline())));
            }
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match this.take_frame(frame) {
                    Some(out) => return Poll::Ready(Some(out)),
                    None => continue,
                },
                Poll::Ready(Some(Err(e))) => {
                    let e = HttpError::from(e);
                    this.finish(Some(&e.to_string()));
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(None) => return Poll::Ready(this.end()),
                Poll::Pending => return this.pending(cx),
            }
        }
    }
}

/// Takes a provider's value out of the response to a request that carried
/// it, before the guest reads a byte: a server that echoes the request (a
/// debug endpoint, an error page) would otherwise hand the guest the
/// credential the host added.
///
/// Every occurrence of the value itself, not only the header line it was
/// sent in, is replaced by [`redact::MARKER`]. A header whose name holds it
/// (names arrive lowercased, so compared ignoring ASCII case) is dropped.
/// The body is matched as a stream: bytes that could begin the value are
/// held back until the next frame says whether they do, so a value split
/// across frames (or the body's end) is still found. Only the value as
/// sent is found: a server that transforms it (base64, a hash, a slice, a
/// compression it applies unasked) is not matched.
pub mod redact {
    use bytes::Bytes;
    use http::{HeaderMap, HeaderValue};

    /// What replaces the value, in the body and in header values.
    pub const MARKER: &[u8] = b"[gatehouse:redacted]";

    /// The matcher of one response.
    pub struct Redactor {
        value: Box<[u8]>,
        /// A tail of the body so far that is a proper prefix of the value.
        held: Vec<u8>,
        count: u64,
    }

    /// The first position of `needle` (not empty) in `hay`.
    fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
        let (&first, rest) = needle.split_first()?;
        let mut from = 0;
        while hay.len() - from >= needle.len() {
            let at = from
                + hay[from..=hay.len() - needle.len()]
                    .iter()
                    .position(|&b| b == first)?;
            if hay[at + 1..at + needle.len()] == *rest {
                return Some(at);
            }
            from = at + 1;
        }
        None
    }

    /// `hay` with every occurrence of `needle` replaced by [`MARKER`], and
    /// how many there were; `None` (and no copy) when there is none.
    fn replace(hay: &[u8], needle: &[u8]) -> Option<(Vec<u8>, u64)> {
        let mut at = find(hay, needle)?;
        let mut out = Vec::with_capacity(hay.len());
        let mut from = 0;
        let mut n = 0;
        loop {
            out.extend_from_slice(&hay[from..from + at]);
            out.extend_from_slice(MARKER);
            n += 1;
            from += at + needle.len();
            match find(&hay[from..], needle) {
                Some(next) => at = next,
                None => break,
            }
        }
        out.extend_from_slice(&hay[from..]);
        Some((out, n))
    }

    /// How many times `needle` (not empty: zero otherwise) is in `hay`,
    /// ignoring ASCII case.
    fn count_ignoring_case(hay: &[u8], needle: &[u8]) -> u64 {
        if needle.is_empty() {
            return 0;
        }
        let mut n = 0;
        let mut i = 0;
        while i + needle.len() <= hay.len() {
            if hay[i..i + needle.len()].eq_ignore_ascii_case(needle) {
                n += 1;
                i += needle.len();
            } else {
                i += 1;
            }
        }
        n
    }

    impl Redactor {
        /// The matcher of `value`; `None` for an empty value (which is
        /// nothing to hide, and would match everywhere).
        pub fn new(value: &[u8]) -> Option<Redactor> {
            (!value.is_empty()).then(|| Redactor {
                value: value.into(),
                held: Vec::new(),
                count: 0,
            })
        }

        /// How many occurrences were replaced so far.
        pub fn count(&self) -> u64 {
            self.count
        }

        /// Cleans a header or trailer map in place.
        pub fn headers(&mut self, map: &mut HeaderMap) {
            let named: Vec<http::HeaderName> = map
                .keys()
                .filter(|k| count_ignoring_case(k.as_str().as_bytes(), &self.value) > 0)
                .cloned()
                .collect();
            for name in named {
                let lines = map.get_all(&name).iter().count() as u64;
                self.count += lines * count_ignoring_case(name.as_str().as_bytes(), &self.value);
                map.remove(&name);
            }
            for v in map.values_mut() {
                if let Some((clean, n)) = replace(v.as_bytes(), &self.value) {
                    // The marker is visible ASCII, and what it replaced
                    // was a run of a valid value's bytes: still valid.
                    // Should it not be, the value goes whole.
                    *v = HeaderValue::from_bytes(&clean)
                        .unwrap_or_else(|_| HeaderValue::from_static("[gatehouse:redacted]"));
                    self.count += n;
                }
            }
        }

        /// The response's head, before the guest sees it: its headers
        /// cleaned, and `Content-Length` removed (the body's length changes
        /// with each replacement). An encoded body (`Content-Encoding`, or a
        /// transfer coding other than `chunked`) cannot be searched for the
        /// value, and is refused with the reason.
        pub fn response_head(&mut self, map: &mut HeaderMap) -> Result<(), String> {
            self.headers(map);
            map.remove(http::header::CONTENT_LENGTH);
            for (name, allowed) in [
                (http::header::CONTENT_ENCODING, "identity"),
                (http::header::TRANSFER_ENCODING, "chunked"),
            ] {
                for v in map.get_all(&name) {
                    let encoded = v
                        .as_bytes()
                        .split(|&b| b == b',')
                        .map(<[u8]>::trim_ascii)
                        .any(|c| !c.is_empty() && !c.eq_ignore_ascii_case(allowed.as_bytes()));
                    if encoded {
                        return Err(format!(
                            "the response to a request that carried a provider's credential has `{}: {}`: the host cannot look for the credential in an encoded body, and does not hand it to the guest",
                            name,
                            String::from_utf8_lossy(v.as_bytes())
                        ));
                    }
                }
            }
            Ok(())
        }

        /// The next piece of the body, cleaned: what can go to the guest
        /// now (empty when all of it may still begin the value).
        pub fn body(&mut self, data: Bytes) -> Bytes {
            let joined = if self.held.is_empty() {
                data
            } else {
                let mut v = std::mem::take(&mut self.held);
                v.extend_from_slice(&data);
                Bytes::from(v)
            };
            let n = self.value.len();
            // Allocated only at the first occurrence: a body without the
            // value goes on as the same buffer.
            let mut out: Option<Vec<u8>> = None;
            let mut from = 0;
            while let Some(at) = find(&joined[from..], &self.value) {
                let o = out.get_or_insert_with(|| Vec::with_capacity(joined.len()));
                o.extend_from_slice(&joined[from..from + at]);
                o.extend_from_slice(MARKER);
                self.count += 1;
                from += at + n;
            }
            // The longest tail that is a proper prefix of the value waits
            // for the next frame.
            let tail = &joined[from..];
            let keep = (1..n.min(tail.len() + 1))
                .rev()
                .find(|&k| tail.ends_with(&self.value[..k]))
                .unwrap_or(0);
            let end = joined.len() - keep;
            self.held.extend_from_slice(&joined[end..]);
            match out {
                None => joined.slice(..end),
                Some(mut o) => {
                    o.extend_from_slice(&joined[from..end]);
                    Bytes::from(o)
                }
            }
        }

        /// The body ended: what was held back, which is not the value (a
        /// whole one would have been replaced).
        pub fn body_end(&mut self) -> Bytes {
            Bytes::from(std::mem::take(&mut self.held))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        const SECRET: &[u8] = b"s3cr3t-s3cr3t-x";

        /// Feeds `body` in chunks of `size` and returns what the guest
        /// gets and the count.
        fn stream(body: &[u8], size: usize) -> (Vec<u8>, u64) {
            let mut r = Redactor::new(SECRET).unwrap();
            let mut out = Vec::new();
            for c in body.chunks(size) {
                out.extend_from_slice(&r.body(Bytes::copy_from_slice(c)));
            }
            out.extend_from_slice(&r.body_end());
            (out, r.count())
        }

        fn marked(parts: &[&[u8]]) -> Vec<u8> {
            parts.join(MARKER)
        }

        #[test]
        fn every_occurrence_goes_in_any_chunking() {
            let cases: Vec<(Vec<u8>, Vec<u8>, u64)> = vec![
                (b"no value here".to_vec(), b"no value here".to_vec(), 0),
                (
                    [b"a: ", SECRET, b"\n"].concat(),
                    marked(&[b"a: ", b"\n"]),
                    1,
                ),
                // At the very end, and at the very start.
                ([b"x", SECRET].concat(), marked(&[b"x", b""]), 1),
                ([SECRET, b"x"].concat(), marked(&[b"", b"x"]), 1),
                (SECRET.to_vec(), MARKER.to_vec(), 1),
                // Back to back, and overlapping a false start.
                ([SECRET, SECRET].concat(), marked(&[b"", b"", b""]), 2),
                (
                    [b"s3cr3t-", SECRET, b"s3cr3t"].concat(),
                    marked(&[b"s3cr3t-", b"s3cr3t"]),
                    1,
                ),
                // A prefix at the end that is not the value comes back.
                (
                    b"tail s3cr3t-s3cr3t".to_vec(),
                    b"tail s3cr3t-s3cr3t".to_vec(),
                    0,
                ),
            ];
            for (body, want, count) in &cases {
                for size in [1, 2, 3, 5, 7, 64] {
                    let (got, n) = stream(body, size);
                    assert_eq!(
                        String::from_utf8_lossy(&got),
                        String::from_utf8_lossy(want),
                        "chunks of {size}"
                    );
                    assert_eq!(n, *count, "chunks of {size}");
                }
            }
        }

        #[test]
        fn a_body_without_the_value_is_passed_as_the_same_buffer() {
            let mut r = Redactor::new(SECRET).unwrap();
            let data = Bytes::from_static(b"plain text");
            let out = r.body(data.clone());
            assert_eq!(out.as_ptr(), data.as_ptr());
            assert_eq!(out, data);
        }

        #[test]
        fn header_values_and_names_lose_the_value() {
            let mut r = Redactor::new(b"AbC-123").unwrap();
            let mut map = HeaderMap::new();
            map.insert(
                "x-echo",
                HeaderValue::from_static("Bearer AbC-123, AbC-123"),
            );
            map.append("x-abc-123-seen", HeaderValue::from_static("1"));
            map.append("x-abc-123-seen", HeaderValue::from_static("2"));
            map.insert("content-length", HeaderValue::from_static("10"));
            map.insert("x-other", HeaderValue::from_static("abc-123"));
            r.response_head(&mut map).unwrap();
            assert_eq!(
                map["x-echo"],
                "Bearer [gatehouse:redacted], [gatehouse:redacted]"
            );
            assert!(!map.contains_key("x-abc-123-seen"));
            assert!(!map.contains_key("content-length"));
            // Values are matched exactly: another case is another string.
            assert_eq!(map["x-other"], "abc-123");
            assert_eq!(r.count(), 4);
            assert!(Redactor::new(b"").is_none());
        }

        #[test]
        fn an_encoded_body_is_refused() {
            for (name, value, ok) in [
                ("content-encoding", "gzip", false),
                ("content-encoding", "identity", true),
                ("transfer-encoding", "chunked", true),
                ("transfer-encoding", "gzip, chunked", false),
            ] {
                let mut r = Redactor::new(SECRET).unwrap();
                let mut map = HeaderMap::new();
                map.insert(name, HeaderValue::from_static(value));
                assert_eq!(r.response_head(&mut map).is_ok(), ok, "{name}: {value}");
            }
        }
    }
}
