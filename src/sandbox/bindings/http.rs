//! `network:sites` → `wasi:http/outgoing-handler`, from `wasmtime-wasi-http`,
//! with gatehouse's own sender in its `send_request` hook.
//!
//! Every request is decided before a byte leaves: its scheme, host, port,
//! method and path are canonicalized and matched by the pure core
//! ([`crate::policy::http`]) against the turn's rules. A denied request
//! reaches the guest as `HttpRequestDenied`. An allowed one is resolved
//! once, each address vetted (loopback, private, link-local, metadata and
//! the other special ranges only when the rule names the host or the
//! address itself, not through a wildcard), and the connection made to the
//! address that was checked: there is no second lookup. TLS is rustls with
//! the host's roots. Redirects are never followed by the host. The turn's
//! requests and response bytes are capped, and every wait ends with the
//! run's deadline.
//!
//! A provider's credential (`provider:access`) is added by the host to
//! requests under the provider's base URL only, replacing a header of the
//! same name the guest set; the value is never in the guest, the audit or
//! any report. Every request gets one audit line, allowed or denied:
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

use super::{Prepare, PrepareError, Unit};
use crate::policy::http::{decide_request, HttpRequest, HttpRule, Scheme, SitePattern, UrlPattern};
use crate::policy::snapshot::sha256_hex;
use crate::policy::DenyCode;
use crate::sandbox::alarm::{timeout, Alarm};
use crate::sandbox::limits::LimitHit;
use crate::sandbox::services::{
    AuditSink, HttpClient, ProviderSecret, ResponseEnd, RunDecision, RunRequest, RunVerdict,
};
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

    /// The part's rules and providers, the host's TLS roots and pinned
    /// names, and the provider values the host read.
    ///
    /// # Security
    /// Lets the guest send HTTP requests that the part's rules allow, with
    /// the providers' credentials added under their base URLs.
    fn prepare(part: &HttpPart, cx: &mut Prepare<'_>) -> Result<HttpState, PrepareError> {
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
                value: cx
                    .services
                    .secrets
                    .iter()
                    .find(|s| s.name == p.name)
                    .map_or_else(
                        || Err(format!("provider `{}` has no value on this host", p.name)),
                        |s: &ProviderSecret| s.value().map(str::to_string).map_err(str::to_string),
                    ),
            })
            .collect();
        Ok(HttpState {
            ctx: WasiHttpCtx::new(),
            hooks: Hooks {
                rules: part.rules.clone().into(),
                providers: providers.into(),
                client: cx.services.http.clone(),
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

type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<wasmtime_wasi_http::WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

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
        let uri = request.uri().clone();
        let raw = |uri: String| RunRequest::HttpUnnamed {
            method: request.method().as_str().to_string(),
            uri,
        };
        let req = match HttpRequest::canonical(
            request.method().as_str(),
            uri.scheme_str().unwrap_or("https"),
            uri.authority().map_or("", |a| a.as_str()),
            uri.path_and_query().map_or("/", |p| p.as_str()),
        ) {
            Ok(req) => req,
            Err(e) => {
                // Not even a request the policy can name: the line holds
                // the URI without its query and without userinfo (which
                // may hold a password).
                let host = uri.authority().map_or("", |a| a.as_str());
                let shown = format!(
                    "{}://{}{}",
                    uri.scheme_str().unwrap_or("https"),
                    host.rsplit('@').next().unwrap_or(host),
                    uri.path()
                );
                let line = Line {
                    request: raw(shown),
                    provider: None,
                };
                line.denied(&*shared.audit, DenyCode::NetworkNotGranted, &e.to_string());
                return refuse(HttpError::HttpRequestDenied);
            }
        };
        let provider = self
            .providers
            .iter()
            .find(|p| p.bases.iter().any(|b| b.covers_request(&req)));
        let line = Line::of(&req, provider.map(|p| p.part.name.as_str()));
        let rule = match decide_request(&self.rules, &req) {
            Ok(i) => &self.rules[i],
            Err(reason) => {
                line.denied(&*shared.audit, DenyCode::NetworkNotGranted, &reason);
                return refuse(HttpError::HttpRequestDenied);
            }
        };
        let n = shared
            .requests
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if n >= shared.max_requests {
            let reason = format!("the turn may make {} HTTP requests", shared.max_requests);
            line.denied(&*shared.audit, DenyCode::LimitHttpRequests, &reason);
            shared.hit(DenyCode::LimitHttpRequests, reason);
            return refuse(HttpError::HttpRequestDenied);
        }
        if let Some(p) = provider {
            let value = match &p.value {
                Ok(v) => v,
                Err(reason) => {
                    line.denied(&*shared.audit, DenyCode::NetworkNotGranted, reason);
                    return refuse(HttpError::ConfigurationError);
                }
            };
            let Ok(name) = http::HeaderName::from_bytes(p.part.header.as_bytes()) else {
                line.denied(
                    &*shared.audit,
                    DenyCode::NetworkNotGranted,
                    "the provider's header name is not valid",
                );
                return refuse(HttpError::ConfigurationError);
            };
            let Ok(mut header) =
                http::HeaderValue::from_str(&p.part.format.replace("{value}", value))
            else {
                line.denied(
                    &*shared.audit,
                    DenyCode::NetworkNotGranted,
                    "the provider's value cannot be sent in a header",
                );
                return refuse(HttpError::ConfigurationError);
            };
            header.set_sensitive(true);
            let headers = request.headers_mut();
            headers.remove(&name);
            headers.insert(name, header);
        }
        // A wildcard rule covers names, never what they resolve to in the
        // special ranges; a rule on the name or the address itself does.
        let explicit = match &rule.site {
            SitePattern::Host(h) => !h.host().starts_with("*."),
            SitePattern::Url(u) => !u.host().host().starts_with("*."),
        };
        let client = self.client.clone();
        Box::new(async move {
            let sent = send(&client, request, &req, explicit, options, &shared).await;
            match sent {
                Ok((response, io)) => {
                    let status = response.status().as_u16();
                    let first_byte_ms = started.elapsed().as_secs_f64() * 1e3;
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
                        }
                        .boxed_unsync()
                    });
                    Ok((response, io))
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

/// Whether `ip` is in a range a wildcard rule may not reach.
pub fn special(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_unspecified()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || o[0] >= 240
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0])
        }
    }
}

type SendError = (DenyCode, String, HttpError);

/// Resolves, vets, connects to the vetted address, and sends.
async fn send(
    client: &HttpClient,
    mut request: http::Request<wasmtime_wasi_http::WasiBody>,
    req: &HttpRequest,
    explicit: bool,
    options: Option<RequestOptions>,
    shared: &Shared,
) -> Result<
    (
        http::Response<hyper::body::Incoming>,
        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ),
    SendError,
> {
    let failed = |reason: String, e: HttpError| (DenyCode::NetworkNotGranted, reason, e);
    let within = |asked: Option<Duration>| {
        let left = shared.left();
        asked.map_or(left, |a| a.min(left))
    };
    let addrs = resolve(client, &req.host, req.port, within(None))
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
        .filter(|a| explicit || !special(a.ip()))
        .collect();
    if vetted.is_empty() {
        return Err(failed(
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
        ));
    }
    // Each vetted address in turn (`localhost` may answer `::1` first
    // while a server listens on 127.0.0.1), within the connect timeout.
    let connect_by = Instant::now() + within(options.and_then(|o| o.connect_timeout));
    let mut stream = None;
    let mut last = String::new();
    for addr in &vetted {
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
    let Some(stream) = stream else {
        return Err((
            DenyCode::NetworkNotGranted,
            format!(
                "no address of `{}` accepted a connection ({last})",
                req.host
            ),
            HttpError::ConnectionRefused,
        ));
    };
    let io: Box<dyn Io> = match req.scheme {
        Scheme::Http => Box::new(stream),
        Scheme::Https => {
            let name = match req.host.parse::<IpAddr>() {
                Ok(ip) => rustls::pki_types::ServerName::from(ip),
                Err(_) => {
                    rustls::pki_types::ServerName::try_from(req.host.clone()).map_err(|_| {
                        failed(
                            format!("`{}` is not a TLS name", req.host),
                            HttpError::TlsProtocolError,
                        )
                    })?
                }
            };
            let connector = tokio_rustls::TlsConnector::from(client.tls.clone());
            let left = connect_by.saturating_duration_since(Instant::now());
            match timeout(left, connector.connect(name, stream)).await {
                Ok(Ok(s)) => Box::new(s),
                Ok(Err(e)) => {
                    return Err(failed(
                        format!("tls: {}", crate::util::lower(&e.to_string())),
                        HttpError::TlsCertificateError,
                    ))
                }
                Err(_) => {
                    return Err(failed(
                        "the tls handshake timed out".into(),
                        HttpError::ConnectionTimeout,
                    ))
                }
            }
        }
    };
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
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
    // The response is awaited while the connection is driven in the same
    // task (as wasmtime-wasi-http's own sender does): no hop to another
    // task on the way. What is left of the connection is the io future.
    let first = within(options.and_then(|o| o.first_byte_timeout));
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
    let io: Box<dyn Future<Output = Result<(), HttpError>> + Send> = Box::new(async move {
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

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, HttpError>>> {
        if Instant::now() >= self.shared.deadline {
            return Poll::Ready(Some(Err(self.past_deadline())));
        }
        match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
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
                    return Poll::Ready(Some(Err(HttpError::HttpResponseBodySize(Some(
                        self.shared.max_bytes,
                    )))));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                let e = HttpError::from(e);
                self.finish(Some(&e.to_string()));
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                self.finish(None);
                Poll::Ready(None)
            }
            Poll::Pending => {
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
    }
}
