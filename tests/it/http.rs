//! wasi:http under `network:sites` (issue 29): the `fetch` guest against
//! HTTPS servers these tests start on loopback, with a CA made at test
//! time and given through `[network] ca_file`. Loopback is granted
//! explicitly. Every denial is one audit line with its code, and a refused
//! request never reaches a server.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

use crate::support::guests::{component, guest, manifest, output, run_json};
use crate::support::{s, Env};

/// One request a test server received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body: String,
}

/// A server on 127.0.0.1 with TLS from the test CA.
struct Server {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// The test CA and a server certificate for `localhost`, `*.test` names
/// and 127.0.0.1.
struct Pki {
    ca_pem: String,
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
}

fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "gatehouse test ca");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec![
        "localhost".to_string(),
        "api.test".to_string(),
        "other.test".to_string(),
        "127.0.0.1".to_string(),
    ])
    .unwrap();
    let cert = params.signed_by(&key, &ca_cert, &ca_key).unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        cert_der: cert.der().to_vec(),
        key_der: key.serialize_der(),
    }
}

/// A body that sends one byte every 200 ms, forever.
struct Trickle(Pin<Box<tokio::time::Sleep>>);

impl http_body::Body for Trickle {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        match self.0.as_mut().poll(cx) {
            Poll::Ready(()) => {
                let next = tokio::time::Instant::now() + std::time::Duration::from_millis(200);
                self.0.as_mut().reset(next);
                Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from_static(b"x")))))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A body sent `size` bytes at a time, a millisecond apart, so that each
/// piece reaches the client as a frame of its own.
struct Pieces {
    data: Bytes,
    size: usize,
    pause: Pin<Box<tokio::time::Sleep>>,
    /// Sent after the last piece.
    trailers: Option<hyper::HeaderMap>,
}

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        if self.data.is_empty() {
            return Poll::Ready(
                self.trailers
                    .take()
                    .map(|t| Ok(http_body::Frame::trailers(t))),
            );
        }
        match self.pause.as_mut().poll(cx) {
            Poll::Ready(()) => {
                let next = tokio::time::Instant::now() + std::time::Duration::from_millis(1);
                self.pause.as_mut().reset(next);
                let n = self.size.min(self.data.len());
                let piece = self.data.split_to(n);
                Poll::Ready(Some(Ok(http_body::Frame::data(piece))))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// What `/v1/echo` answers: every request header as `name: value` lines
/// (sorted by name) in the body, the `authorization` and `x-mine` headers
/// again as `x-echo-auth` and `x-echo-mine`, and with `tail` in the query
/// the `authorization` value once more as the body's very last bytes.
/// `chunk=N` in the query sends the body N bytes at a time, and with it
/// `trailers` sends the `authorization` value in an `x-echo-auth` trailer;
/// `gzip` labels the body `Content-Encoding: gzip`.
fn echo(headers: &BTreeMap<String, String>, path: &str) -> hyper::Response<Body> {
    let mut text: String = headers.iter().map(|(k, v)| format!("{k}: {v}\n")).collect();
    let query = path.split_once('?').map_or("", |(_, q)| q);
    let auth = headers.get("authorization").cloned().unwrap_or_default();
    if query.split('&').any(|p| p == "tail") {
        text.push_str("the end: ");
        text.push_str(&auth);
    }
    let chunk = query
        .split('&')
        .find_map(|p| p.strip_prefix("chunk="))
        .map(|n| n.parse::<usize>().unwrap());
    let trailers = query.split('&').any(|p| p == "trailers").then(|| {
        let mut t = hyper::HeaderMap::new();
        t.insert(
            "x-echo-auth",
            hyper::header::HeaderValue::from_str(&auth).unwrap(),
        );
        t
    });
    let declared = trailers.is_some();
    let body: Body = match chunk {
        Some(size) => Pieces {
            data: Bytes::from(text),
            size,
            pause: Box::pin(tokio::time::sleep(std::time::Duration::ZERO)),
            trailers,
        }
        .boxed_unsync(),
        None => Full::new(Bytes::from(text)).boxed_unsync(),
    };
    let mut response = hyper::Response::new(body);
    if declared {
        // hyper sends only the trailers the response declares (and only
        // to a request with `TE: trailers`).
        response.headers_mut().insert(
            "trailer",
            hyper::header::HeaderValue::from_static("x-echo-auth"),
        );
    }
    if query.split('&').any(|p| p == "gzip") {
        // Claimed, not done: the host must not hand it on either way.
        response.headers_mut().insert(
            "content-encoding",
            hyper::header::HeaderValue::from_static("gzip"),
        );
    }
    for (from, to) in [("authorization", "x-echo-auth"), ("x-mine", "x-echo-mine")] {
        if let Some(v) = headers.get(from) {
            response
                .headers_mut()
                .insert(to, hyper::header::HeaderValue::from_str(v).unwrap());
        }
    }
    response
}

type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

/// Starts a server: `/big` answers 2 MiB, `/trickle` a byte every 200 ms,
/// `/redirect` a 302 to `redirect_to`, `/v1/echo` the request's headers
/// ([`echo`]), anything else `ok` (a POST: `got: BODY`). Every request is
/// recorded.
fn server(pki: &Pki, redirect_to: Option<String>) -> Server {
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let certs = vec![rustls::pki_types::CertificateDer::from(
        pki.cert_der.clone(),
    )];
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(pki.key_der.clone().into());
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let record = seen.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let record = record.clone();
                let redirect_to = redirect_to.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let record = record.clone();
                            let redirect_to = redirect_to.clone();
                            async move {
                                let method = req.method().to_string();
                                let path = req
                                    .uri()
                                    .path_and_query()
                                    .map_or("/".to_string(), |p| p.as_str().to_string());
                                let headers: BTreeMap<String, String> = req
                                    .headers()
                                    .iter()
                                    .map(|(k, v)| {
                                        (
                                            k.to_string(),
                                            String::from_utf8_lossy(v.as_bytes()).into_owned(),
                                        )
                                    })
                                    .collect();
                                let body = req
                                    .into_body()
                                    .collect()
                                    .await
                                    .map(|b| b.to_bytes())
                                    .unwrap_or_default();
                                let body = String::from_utf8_lossy(&body).into_owned();
                                record.lock().unwrap().push(Seen {
                                    method: method.clone(),
                                    path: path.clone(),
                                    headers: headers.clone(),
                                    body: body.clone(),
                                });
                                let full = |b: String| -> Body {
                                    Full::new(Bytes::from(b)).boxed_unsync()
                                };
                                let response: hyper::Response<Body> =
                                    if path.starts_with("/v1/echo") {
                                        echo(&headers, &path)
                                    } else if path.starts_with("/big") {
                                        hyper::Response::new(full("x".repeat(2 << 20)))
                                    } else if path.starts_with("/trickle") {
                                        hyper::Response::new(
                                            Trickle(Box::pin(tokio::time::sleep(
                                                std::time::Duration::ZERO,
                                            )))
                                            .boxed_unsync(),
                                        )
                                    } else if path.contains("/redirect") {
                                        hyper::Response::builder()
                                            .status(302)
                                            .header("location", redirect_to.unwrap_or_default())
                                            .body(full(String::new()))
                                            .unwrap()
                                    } else if method == "POST" {
                                        hyper::Response::new(full(format!("got: {body}")))
                                    } else {
                                        hyper::Response::new(full("ok".into()))
                                    };
                                Ok::<_, Infallible>(response)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
            }
        });
    });
    Server { port, seen }
}

/// An environment whose configuration trusts the test CA, with `extra`
/// TOML appended.
fn env_with(pki: &Pki, extra: &str) -> Env {
    let env = Env::new();
    let ca = env.write("config/gatehouse/test-ca.pem", &pki.ca_pem);
    env.write(
        "config/gatehouse/gatehouse.toml",
        &format!(
            "[actors.main]\nskills = [\"*\"]\n[network]\nca_file = \"{}\"\n{extra}",
            s(&ca)
        ),
    );
    env
}

/// A manifest for `fetch` with `network:sites` on each of `sites` (a
/// `(target, methods)` pair) and `provider:access` on each of `providers`.
fn fetch_manifest(
    env: &Env,
    sites: &[(&str, Option<&str>)],
    providers: &[&str],
) -> std::path::PathBuf {
    let mut text = format!(
        "name = \"fetch\"\ncomponent = \"{}\"\n",
        s(&component("fetch"))
    );
    for (target, methods) in sites {
        text.push_str(&format!(
            "[[capabilities]]\nname = \"network:sites\"\ntarget = \"{target}\"\n"
        ));
        if let Some(m) = methods {
            text.push_str(&format!("methods = {m}\n"));
        }
    }
    for p in providers {
        text.push_str(&format!(
            "[[capabilities]]\nname = \"provider:access\"\ntarget = \"{p}\"\n"
        ));
    }
    env.write("manifests/fetch.toml", &text)
}

fn fetch(env: &Env, m: &Path, input: Value) -> (crate::support::Run, Value) {
    let ws = env.mkdir("ws");
    run_json(env, m, &ws, "Full", &input.to_string(), &[])
}

/// The audit's lines of HTTP requests, of every turn so far, in order
/// (each turn's record in `<state>/audit.jsonl` holds its decisions).
fn http_lines(env: &Env) -> Vec<Value> {
    let text = std::fs::read_to_string(env.state_dir().join("audit.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .flat_map(|turn| turn["decisions"].as_array().cloned().unwrap_or_default())
        .filter(|v| v["request"]["kind"] == "http")
        .collect()
}

#[test]
fn an_allowed_get_and_post_reach_the_server_with_one_audit_line_each() {
    let pki = pki();
    let srv = server(&pki, None);
    let env = env_with(&pki, "");
    let m = fetch_manifest(&env, &[(&format!("localhost:{}", srv.port), None)], &[]);
    let url = format!("https://localhost:{}/v1/items?page=2", srv.port);
    let (run, v) = fetch(&env, &m, json!({"url": url}));
    run.expect(0);
    let out = output(&v);
    assert_eq!(out["status"], 200, "{v:#}");
    assert_eq!(out["body"], "ok");
    let (run, v) = fetch(
        &env,
        &m,
        json!({"url": url, "method": "POST", "body": "hello"}),
    );
    run.expect(0);
    assert_eq!(output(&v)["body"], "got: hello");
    let seen = srv.seen();
    assert_eq!(seen.len(), 2, "{seen:#?}");
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("GET", "/v1/items?page=2")
    );
    assert_eq!(
        (seen[1].method.as_str(), seen[1].body.as_str()),
        ("POST", "hello")
    );
    let lines = http_lines(&env);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let get = &lines[0];
    assert_eq!(get["decision"]["decision"], "allow");
    assert_eq!(get["request"]["method"], "GET");
    assert_eq!(get["request"]["scheme"], "https");
    assert_eq!(get["request"]["host"], "localhost");
    assert_eq!(get["request"]["port"], srv.port);
    assert_eq!(get["request"]["path"], "/v1/items");
    assert_eq!(get["status"], 200);
    assert_eq!(get["bytes"], 2);
    // The query only as its digest and length.
    assert_eq!(get["request"]["query_bytes"], 6);
    assert!(!get.to_string().contains("page=2"), "{get}");
    assert_eq!(lines[1]["request"]["method"], "POST");
}

/// Runs `fetch` on `url` (with `extra` input fields) and asserts the
/// guest got `HttpRequestDenied`, one `NETWORK_NOT_GRANTED` line was
/// added, and the server saw nothing.
fn assert_denied(env: &Env, m: &Path, srv: &Server, input: Value) {
    let before = http_lines(env).len();
    let (run, v) = fetch(env, m, input.clone());
    run.expect(0);
    assert_eq!(
        output(&v),
        json!({"error": "HttpRequestDenied"}),
        "{input}: {v:#}"
    );
    let lines = http_lines(env);
    assert_eq!(lines.len(), before + 1, "{input}: {lines:#?}");
    let line = &lines[before];
    assert_eq!(line["decision"]["code"], "NETWORK_NOT_GRANTED", "{line:#}");
    assert!(srv.seen().is_empty(), "{input}: {:#?}", srv.seen());
}

#[test]
fn requests_outside_the_grant_are_denied_by_host_port_scheme_method_and_path() {
    let pki = pki();
    let srv = server(&pki, None);
    let other = server(&pki, None);
    let p = srv.port;
    let env = env_with(&pki, "");
    let m = fetch_manifest(
        &env,
        &[(&format!("https://localhost:{p}/v1/**"), Some("[\"GET\"]"))],
        &[],
    );
    // Positive control: the grant works for what it names.
    let (run, v) = fetch(
        &env,
        &m,
        json!({"url": format!("https://localhost:{p}/v1/x")}),
    );
    run.expect(0);
    assert_eq!(output(&v)["status"], 200, "{v:#}");
    srv.seen.lock().unwrap().clear();
    for url in [
        // host
        format!("https://other.test:{p}/v1/x"),
        // port
        format!("https://localhost:{}/v1/x", other.port),
        // scheme
        format!("http://localhost:{p}/v1/x"),
        // path
        format!("https://localhost:{p}/v2/x"),
        format!("https://localhost:{p}/v1evil"),
        // loopback written otherwise, when only the name is granted
        format!("https://2130706433:{p}/v1/x"),
        format!("https://0177.0.0.1:{p}/v1/x"),
        format!("https://[::ffff:127.0.0.1]:{p}/v1/x"),
        format!("https://127.0.0.1:{p}/v1/x"),
    ] {
        assert_denied(&env, &m, &srv, json!({"url": url}));
    }
    // method
    assert_denied(
        &env,
        &m,
        &srv,
        json!({"url": format!("https://localhost:{p}/v1/x"), "method": "POST", "body": "never sent"}),
    );
    assert!(other.seen().is_empty());
}

#[test]
fn dot_segments_and_userinfo_are_refused_before_matching() {
    let pki = pki();
    let srv = server(&pki, None);
    let p = srv.port;
    let env = env_with(&pki, "");
    let m = fetch_manifest(
        &env,
        &[(&format!("https://localhost:{p}/v1/**"), None)],
        &[],
    );
    for url in [
        format!("https://localhost:{p}/v1/../v2/x"),
        format!("https://localhost:{p}/v1/%2e%2e/v2/x"),
        format!("https://localhost:{p}/v1/%2E%2E/v2/x"),
        format!("https://localhost@other.test:{p}/v1/x"),
    ] {
        assert_denied(&env, &m, &srv, json!({"url": url}));
    }
    // The line never holds userinfo (it may hold a password).
    let last = http_lines(&env).pop().unwrap();
    assert!(!last.to_string().contains("localhost@"), "{last:#}");
    assert!(srv.seen().is_empty(), "{:#?}", srv.seen());
}

/// A plain HTTP server on 127.0.0.1 answering every connection `200 ok`:
/// its port, and how many connections it accepted.
fn plain_server() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let count: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
    let seen = count.clone();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut c in server.incoming().flatten() {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            let _ =
                c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    (port, count)
}

/// A wildcard grant (`*.test:PORT`) does not reach a name under it that
/// resolves to loopback, through `wasi:http` (`DestinationIpProhibited`)
/// nor, security round 3, item 4, through `wasi:sockets`: the stock
/// `fetch-socket` guest is answered no address for the name, cannot
/// connect to the loopback address it would have got, and the service
/// sees no connection. Both interfaces ask the one rule
/// (`policy::http::may_connect`).
///
/// Positive control: the name granted itself (`api.test:PORT`) reaches
/// what it resolves to, 127.0.0.1, through either interface.
#[test]
fn a_wildcard_grant_does_not_reach_a_name_that_resolves_to_loopback() {
    let pki = pki();
    let srv = server(&pki, None);
    let p = srv.port;
    let env = env_with(&pki, "[network.resolve]\n\"api.test\" = [\"127.0.0.1\"]\n");
    let wild = fetch_manifest(&env, &[(&format!("*.test:{p}"), None)], &[]);
    let (run, v) = fetch(
        &env,
        &wild,
        json!({"url": format!("https://api.test:{p}/")}),
    );
    run.expect(0);
    assert_eq!(
        output(&v),
        json!({"error": "DestinationIpProhibited"}),
        "{v:#}"
    );
    let lines = http_lines(&env);
    assert_eq!(
        lines.last().unwrap()["decision"]["code"],
        "NETWORK_NOT_GRANTED"
    );
    assert!(srv.seen().is_empty());
    // Control: the name granted itself reaches what it resolves to.
    let named = fetch_manifest(&env, &[(&format!("api.test:{p}"), None)], &[]);
    let (run, v) = fetch(
        &env,
        &named,
        json!({"url": format!("https://api.test:{p}/")}),
    );
    run.expect(0);
    assert_eq!(output(&v)["status"], 200, "{v:#}");
    assert_eq!(srv.seen().len(), 1);
    // The same through sockets: a plain service on loopback only.
    let (plain, connections) = plain_server();
    let socket = component("fetch-socket");
    let wild = manifest(
        &env,
        "fetch-socket-wild",
        &socket,
        &[("network:sites", Some(&format!("*.test:{plain}")))],
    );
    let ws = env.mkdir("ws");
    for input in [
        json!({"url": format!("http://api.test:{plain}/")}),
        // The address the name would have given, written by the guest.
        json!({"addr": format!("127.0.0.1:{plain}")}),
    ] {
        let (run, v) = run_json(&env, &wild, &ws, "Full", &input.to_string(), &[]);
        run.expect(1);
        let failed = v["run"]["result"]["error"]["failed"].as_str().unwrap();
        let (target, why) = match input.get("url") {
            Some(_) => (
                format!("api.test:{plain}"),
                "failed to lookup address information",
            ),
            None => (format!("127.0.0.1:{plain}"), "Permission denied"),
        };
        assert!(
            failed.starts_with(&format!("connect `{target}`: ")),
            "{failed}"
        );
        assert!(failed.contains(why), "{failed}");
    }
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 0);
    // Control: the name itself granted connects to loopback.
    let named = manifest(
        &env,
        "fetch-socket-named",
        &socket,
        &[("network:sites", Some(&format!("api.test:{plain}")))],
    );
    let input = json!({"url": format!("http://api.test:{plain}/")}).to_string();
    let (run, v) = run_json(&env, &named, &ws, "Full", &input, &[]);
    run.expect(0);
    assert_eq!(output(&v), json!({"status": 200, "body": "ok"}), "{v:#}");
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn a_redirect_is_not_followed_and_its_second_hop_is_decided_afresh() {
    let pki = pki();
    let elsewhere = server(&pki, None);
    let srv = server(&pki, Some(format!("https://localhost:{}/", elsewhere.port)));
    let env = env_with(&pki, "");
    let m = fetch_manifest(&env, &[(&format!("localhost:{}", srv.port), None)], &[]);
    let (run, v) = fetch(
        &env,
        &m,
        json!({"url": format!("https://localhost:{}/redirect", srv.port)}),
    );
    run.expect(0);
    let out = output(&v);
    assert_eq!(out["status"], 302, "{v:#}");
    let location = out["headers"]["location"].as_str().unwrap().to_string();
    assert_denied(&env, &m, &elsewhere, json!({"url": location}));
}

#[test]
fn the_turn_s_response_bytes_and_request_count_are_capped() {
    let pki = pki();
    let srv = server(&pki, None);
    let p = srv.port;
    let env = env_with(&pki, "[limits]\nhttp_response_mib = 1\nhttp_requests = 2\n");
    let m = fetch_manifest(&env, &[(&format!("localhost:{p}"), None)], &[]);
    let (run, v) = fetch(
        &env,
        &m,
        json!({"url": format!("https://localhost:{p}/big")}),
    );
    assert_eq!(v["error"]["code"], "LIMIT_HTTP_RESPONSE", "{run:#?}");
    // Two requests pass, the third is refused and stops the turn.
    let (run, v) = fetch(
        &env,
        &m,
        json!({"url": format!("https://localhost:{p}/"), "repeat": 2}),
    );
    run.expect(0);
    assert_eq!(output(&v)["status"], 200);
    let before = srv.seen().len();
    let (run, v) = fetch(
        &env,
        &m,
        json!({"url": format!("https://localhost:{p}/"), "repeat": 3}),
    );
    assert_eq!(v["error"]["code"], "LIMIT_HTTP_REQUESTS", "{run:#?}");
    assert_eq!(srv.seen().len(), before + 2);
    let last = http_lines(&env).pop().unwrap();
    assert_eq!(last["decision"]["code"], "LIMIT_HTTP_REQUESTS");
}

#[test]
fn a_trickling_server_cannot_hold_the_turn_past_its_deadline() {
    let pki = pki();
    let srv = server(&pki, None);
    let p = srv.port;
    let env = env_with(&pki, "");
    let m = fetch_manifest(&env, &[(&format!("localhost:{p}"), None)], &[]);
    let ws = env.mkdir("ws");
    let started = std::time::Instant::now();
    let input = json!({"url": format!("https://localhost:{p}/trickle")}).to_string();
    let (run, v) = run_json(&env, &m, &ws, "Full", &input, &["--deadline-ms", "1500"]);
    let took = started.elapsed();
    assert_eq!(v["error"]["code"], "LIMIT_DEADLINE", "{run:#?}");
    // The trickle never ends: only the deadline stopped it (the margin is
    // the process's start and compilation, not the deadline's resolution).
    assert!(took < std::time::Duration::from_secs(30), "{took:?}");
    assert_eq!(srv.seen().len(), 1);
}

const CANARY: &str = "canary-7f3a9c1e5b-secret";

fn xor_hex(secret: &str) -> String {
    secret
        .bytes()
        .map(|b| format!("{:02x}", b ^ 0x5a))
        .collect()
}

#[test]
fn a_provider_s_credential_reaches_only_requests_under_its_base_url() {
    let pki = pki();
    let other = server(&pki, None);
    let api = server(
        &pki,
        Some(format!("https://localhost:{}/stolen", other.port)),
    );
    let env = env_with(
        &pki,
        &format!(
            "[providers.api]\nbase_url = \"https://localhost:{}/v1\"\nvalue_env = \"GATEHOUSE_TEST_API_TOKEN\"\n",
            api.port
        ),
    );
    let m = fetch_manifest(
        &env,
        &[
            (&format!("localhost:{}", api.port), None),
            (&format!("localhost:{}", other.port), None),
        ],
        &["api"],
    );
    let ws = env.mkdir("ws");
    let run = |input: Value| {
        let out = env
            .command()
            .env("GATEHOUSE_TEST_API_TOKEN", CANARY)
            .args([
                "--json",
                "run",
                s(&m),
                "--workspace",
                s(&ws),
                "--level",
                "Full",
                "--input",
            ])
            .arg(input.to_string())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(!stdout.contains(CANARY), "{stdout}");
        assert!(!String::from_utf8_lossy(&out.stderr).contains(CANARY));
        let v: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        v
    };
    let base = format!("https://localhost:{}", api.port);
    // Under the base URL: the host adds it, replacing the guest's own.
    let v = run(json!({
        "url": format!("{base}/v1/repos"),
        "headers": {"authorization": "Bearer guest-made"},
        "scan_xor": xor_hex(CANARY),
    }));
    assert_eq!(output(&v)["status"], 200, "{v:#}");
    // The guest never held it: not in its environment, not in its memory.
    assert_eq!(output(&v)["scan"], json!({"env": 0, "memory": 0}));
    let seen = api.seen();
    assert_eq!(seen[0].headers["authorization"], format!("Bearer {CANARY}"));
    // Not under it: a sibling path, another path, another server (even
    // with the guest's own header), a redirect's second hop.
    run(json!({"url": format!("{base}/v1evil")}));
    run(json!({"url": format!("{base}/v2/x")}));
    run(
        json!({"url": format!("https://localhost:{}/", other.port), "headers": {"authorization": "Bearer guest-made"}}),
    );
    let v = run(json!({"url": format!("{base}/v1/redirect")}));
    let location = output(&v)["headers"]["location"]
        .as_str()
        .unwrap()
        .to_string();
    run(json!({"url": location}));
    let seen = api.seen();
    assert_eq!(seen.len(), 4, "{seen:#?}");
    for s in &seen[1..3] {
        assert!(!s.headers.values().any(|v| v.contains(CANARY)), "{s:#?}");
    }
    for s in other.seen() {
        assert!(!s.headers.values().any(|v| v.contains(CANARY)), "{s:#?}");
        assert!(!s.body.contains(CANARY));
    }
    assert_eq!(other.seen().len(), 2);
    // The audit names the provider; nothing in the state holds the value.
    let lines = http_lines(&env);
    assert_eq!(lines[0]["provider"], "api", "{:#}", lines[0]);
    for (file, bytes) in crate::support::guests::tree(&env.state_dir()) {
        assert!(
            !bytes.windows(CANARY.len()).any(|w| w == CANARY.as_bytes()),
            "{file} holds the credential"
        );
    }
}

#[test]
fn the_memory_scan_sees_what_the_guest_holds() {
    // Control of the scan above: with the secret in its own input (a
    // header it sends), the guest finds it in its memory.
    let pki = pki();
    let srv = server(&pki, None);
    let env = env_with(&pki, "");
    let m = fetch_manifest(&env, &[(&format!("localhost:{}", srv.port), None)], &[]);
    let (run, v) = fetch(
        &env,
        &m,
        json!({
            "url": format!("https://localhost:{}/", srv.port),
            "headers": {"x-mine": CANARY},
            "scan_xor": xor_hex(CANARY),
        }),
    );
    run.expect(0);
    assert!(output(&v)["scan"]["memory"].as_u64().unwrap() > 0, "{v:#}");
}

#[test]
fn a_provider_without_a_covering_site_is_refused_at_the_gate() {
    let pki = pki();
    let env = env_with(
        &pki,
        "[providers.api]\nbase_url = \"https://api.example.com/v1\"\nvalue_env = \"GATEHOUSE_TEST_API_TOKEN\"\n",
    );
    let m = fetch_manifest(&env, &[("localhost:1", None)], &["api"]);
    let (run, v) = fetch(&env, &m, json!({"url": "https://localhost:1/"}));
    run.expect(2);
    assert_eq!(v["code"], "TARGET_MISMATCH", "{v:#}");
    let m = fetch_manifest(&env, &[("api.example.com", None)], &["nope"]);
    let (run, v) = fetch(&env, &m, json!({"url": "https://api.example.com/"}));
    run.expect(2);
    assert_eq!(v["code"], "UNKNOWN_TARGET", "{v:#}");
}

#[test]
fn a_provider_s_value_file_must_be_its_owner_s_alone() {
    use std::os::unix::fs::PermissionsExt;
    let pki = pki();
    let srv = server(&pki, None);
    let p = srv.port;
    let env = Env::new();
    let token = env.write("config/gatehouse/token", &format!("{CANARY}\n"));
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let ca = env.write("config/gatehouse/test-ca.pem", &pki.ca_pem);
    env.write(
        "config/gatehouse/gatehouse.toml",
        &format!(
            "[actors.main]\nskills = [\"*\"]\n[network]\nca_file = \"{}\"\n[providers.api]\nbase_url = \"https://localhost:{p}/v1\"\nvalue_file = \"{}\"\n",
            s(&ca),
            s(&token)
        ),
    );
    let m = fetch_manifest(&env, &[(&format!("localhost:{p}"), None)], &["api"]);
    let url = format!("https://localhost:{p}/v1/x");
    // Readable by others: refused, nothing sent, the line says why.
    let (run, v) = fetch(&env, &m, json!({"url": url}));
    run.expect(0);
    assert_eq!(output(&v), json!({"error": "ConfigurationError"}), "{v:#}");
    assert!(srv.seen().is_empty());
    let line = http_lines(&env).pop().unwrap();
    assert_eq!(line["decision"]["code"], "NETWORK_NOT_GRANTED");
    let reason = line["decision"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("mode 644") && reason.contains("0600"),
        "{reason}"
    );
    // Control: mode 0600, the value (without its newline) is sent.
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (run, v) = fetch(&env, &m, json!({"url": url}));
    run.expect(0);
    assert_eq!(output(&v)["status"], 200, "{v:#}");
    assert_eq!(
        srv.seen()[0].headers["authorization"],
        format!("Bearer {CANARY}")
    );
}

#[test]
fn an_unreadable_ca_file_is_named_and_nothing_runs() {
    let env = Env::new();
    env.write(
        "config/gatehouse/gatehouse.toml",
        "[actors.main]\nskills = [\"*\"]\n[network]\nca_file = \"/nonexistent/ca.pem\"\n",
    );
    let m = fetch_manifest(&env, &[("localhost:1", None)], &[]);
    let (run, _) = fetch(&env, &m, json!({"url": "https://localhost:1/"}));
    run.expect_err(
        1,
        &["`[network] ca_file` `/nonexistent/ca.pem`: no such file or directory"],
    );
}

#[test]
fn the_guest_s_between_bytes_timeout_ends_a_trickle_before_the_deadline() {
    let pki = pki();
    let srv = server(&pki, None);
    let p = srv.port;
    let env = env_with(&pki, "");
    let m = fetch_manifest(&env, &[(&format!("localhost:{p}"), None)], &[]);
    let (run, v) = fetch(
        &env,
        &m,
        json!({"url": format!("https://localhost:{p}/trickle"), "between_bytes_ms": 50}),
    );
    // The guest's own timeout ends the read with an error the guest sees
    // (wasmtime-wasi-http gives a body's error no error code, so `fetch`
    // fails with its text), well before the deadline: not a limit.
    run.expect(1);
    assert_eq!(
        v["run"]["result"]["error"]["failed"], "connection read timeout",
        "{v:#}"
    );
    assert!(v["error"].is_null(), "{v:#}");
    let line = http_lines(&env).pop().unwrap();
    assert_eq!(line["decision"]["decision"], "allow");
    assert_eq!(line["error"], "no byte within the between-bytes timeout");
}

/// A long-lived host reads a provider's value file at each turn as it is
/// then (it keeps what it read only while the file is unchanged): a value
/// replaced by a rename, or rewritten in place, is the one the next
/// request carries; a file made readable by others is refused at once.
///
/// Positive control: the first turn carries the first value.
#[test]
fn a_long_lived_host_sends_a_provider_s_value_as_its_file_is_now() {
    use gatehouse::config::HostConfig;
    use gatehouse::host::{Host, HostOptions, NoOne, TurnRequest};
    use gatehouse::manifest::Manifest;
    use std::os::unix::fs::PermissionsExt;
    let pki = pki();
    let srv = server(&pki, None);
    let p = srv.port;
    let env = Env::new();
    let secret = |name: &str, value: &str| {
        let path = env.write(name, value);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path
    };
    let token = secret("secrets/token", "first-value\n");
    let ca = env.write("config/test-ca.pem", &pki.ca_pem);
    let config_path = env.write(
        "config/gatehouse.toml",
        &format!(
            "[actors.main]\nskills = [\"*\"]\n[network]\nca_file = \"{}\"\n[providers.api]\nbase_url = \"https://localhost:{p}/v1\"\nvalue_file = \"{}\"\n",
            s(&ca),
            s(&token)
        ),
    );
    let config = HostConfig::load(&config_path, None).unwrap();
    let m = fetch_manifest(&env, &[(&format!("localhost:{p}"), None)], &["api"]);
    let ws = env.mkdir("ws");
    let mut options = HostOptions::new(
        config,
        env.state_paths(),
        ws.canonicalize().unwrap().display().to_string(),
        vec![Manifest::load(&m).unwrap()],
    );
    options.level = Some(gatehouse::policy::Level::Full);
    let host = Host::open(options).unwrap();
    let input = json!({"url": format!("https://localhost:{p}/v1/x")}).to_string();
    let sent = |n: usize| {
        let outcome = host.run(TurnRequest::new("fetch", "main", &input), &NoOne);
        assert!(outcome.is_ok(), "{:?}", outcome.end);
        srv.seen()[n].headers.get("authorization").cloned()
    };
    assert_eq!(sent(0).as_deref(), Some("Bearer first-value"));
    // Replaced by a rename (a new inode).
    let next = secret("secrets/token.new", "second-value\n");
    std::fs::rename(&next, &token).unwrap();
    assert_eq!(sent(1).as_deref(), Some("Bearer second-value"));
    // Rewritten in place, another length.
    std::fs::write(&token, "third-value-longer\n").unwrap();
    assert_eq!(sent(2).as_deref(), Some("Bearer third-value-longer"));
    // Made readable by others: refused before anything is sent.
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let outcome = host.run(TurnRequest::new("fetch", "main", &input), &NoOne);
    assert!(outcome.is_ok(), "{:?}", outcome.end);
    assert_eq!(srv.seen().len(), 3);
}

/// What the host puts where a provider's value was in a response.
const MARKER: &str = "[gatehouse:redacted]";

/// An environment with provider `api` on `https://localhost:PORT/v1` (its
/// value read from `GATEHOUSE_TEST_API_TOKEN`), and a `fetch` manifest
/// granted `https://localhost:PORT/v1/**` with no `methods`: the guide's
/// own example. With `provider` false, the same without `provider:access`.
fn provider_setup(pki: &Pki, port: u16, provider: bool) -> (Env, std::path::PathBuf) {
    let env = env_with(
        pki,
        &format!(
            "[providers.api]\nbase_url = \"https://localhost:{port}/v1\"\nvalue_env = \"GATEHOUSE_TEST_API_TOKEN\"\n"
        ),
    );
    let providers: &[&str] = if provider { &["api"] } else { &[] };
    let m = fetch_manifest(
        &env,
        &[(&format!("https://localhost:{port}/v1/**"), None)],
        providers,
    );
    (env, m)
}

/// Runs `fetch` with the provider's value `CANARY` in the host's
/// environment; asserts the value is nowhere in what the run printed, and
/// returns its last line.
fn fetch_with_token(env: &Env, m: &Path, input: Value) -> Value {
    let ws = env.mkdir("ws");
    let out = env
        .command()
        .env("GATEHOUSE_TEST_API_TOKEN", CANARY)
        .args([
            "--json",
            "run",
            s(m),
            "--workspace",
            s(&ws),
            "--level",
            "Full",
            "--input",
        ])
        .arg(input.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!stdout.contains(CANARY), "{stdout}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains(CANARY));
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

/// security round 3, item 3: `TRACE` and `CONNECT` are never sent, even
/// under a grant with no `methods` and a provider whose credential the
/// host would add: refused with `NETWORK_NOT_GRANTED` before a byte
/// leaves (a server that honours `TRACE` would echo the credential).
///
/// Positive control: a `GET` on the same URL is sent, with the credential.
#[test]
fn trace_and_connect_are_never_sent_whatever_the_grant() {
    let pki = pki();
    let srv = server(&pki, None);
    let p = srv.port;
    let (env, m) = provider_setup(&pki, p, true);
    let url = format!("https://localhost:{p}/v1/x");
    for method in ["TRACE", "trace", "CONNECT"] {
        let before = http_lines(&env).len();
        let v = fetch_with_token(&env, &m, json!({"url": url, "method": method}));
        assert_eq!(
            output(&v),
            json!({"error": "HttpRequestDenied"}),
            "{method}: {v:#}"
        );
        let lines = http_lines(&env);
        assert_eq!(lines.len(), before + 1, "{method}: {lines:#?}");
        let line = &lines[before];
        assert_eq!(line["decision"]["code"], "NETWORK_NOT_GRANTED", "{line:#}");
        assert!(
            line["decision"]["reason"]
                .as_str()
                .unwrap()
                .contains("is never sent"),
            "{line:#}"
        );
        assert!(srv.seen().is_empty(), "{method}: {:#?}", srv.seen());
    }
    // Control: the grant sends a GET, with the credential.
    let v = fetch_with_token(&env, &m, json!({"url": url}));
    assert_eq!(output(&v)["status"], 200, "{v:#}");
    let seen = srv.seen();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0].method, "GET");
    assert_eq!(seen[0].headers["authorization"], format!("Bearer {CANARY}"));
}

/// security round 3, item 3: a server that reflects the request's headers
/// into the body and into a response header hands the guest the marker,
/// never the provider's value: not in its output, not in its linear
/// memory; the audit line counts each replacement.
///
/// Positive control: the server did get the value (the reflection would
/// have carried it), and a header of the guest's own that is reflected
/// comes back unchanged beside the marker.
#[test]
fn a_reflected_credential_reaches_the_guest_only_as_the_marker() {
    let pki = pki();
    let srv = server(&pki, None);
    let p = srv.port;
    let (env, m) = provider_setup(&pki, p, true);
    let v = fetch_with_token(
        &env,
        &m,
        json!({
            "url": format!("https://localhost:{p}/v1/echo"),
            "headers": {"x-mine": "not-a-secret-42"},
            "scan_xor": xor_hex(CANARY),
        }),
    );
    let out = output(&v);
    assert_eq!(out["status"], 200, "{v:#}");
    // The server saw the credential: what it echoed held it.
    assert_eq!(
        srv.seen()[0].headers["authorization"],
        format!("Bearer {CANARY}")
    );
    let body = out["body"].as_str().unwrap();
    assert!(!body.contains(CANARY), "{body}");
    assert!(
        body.contains(&format!("authorization: Bearer {MARKER}\n")),
        "{body}"
    );
    assert!(body.contains("x-mine: not-a-secret-42\n"), "{body}");
    assert_eq!(out["headers"]["x-echo-auth"], format!("Bearer {MARKER}"));
    assert_eq!(out["headers"]["x-echo-mine"], "not-a-secret-42");
    // The body's length changed: no `content-length` tells the old one.
    assert!(out["headers"].get("content-length").is_none(), "{out:#}");
    assert_eq!(out["scan"], json!({"env": 0, "memory": 0}), "{out:#}");
    // One in the body, one in `x-echo-auth`.
    let line = http_lines(&env).pop().unwrap();
    assert_eq!(line["provider"], "api", "{line:#}");
    assert_eq!(line["redacted"], 2, "{line:#}");
    // A body that comes encoded cannot be searched: the guest gets none.
    let v = fetch_with_token(
        &env,
        &m,
        json!({"url": format!("https://localhost:{p}/v1/echo?gzip")}),
    );
    assert_eq!(output(&v), json!({"error": "HttpProtocolError"}), "{v:#}");
    let line = http_lines(&env).pop().unwrap();
    assert!(
        line["error"]
            .as_str()
            .unwrap()
            .contains("`content-encoding: gzip`"),
        "{line:#}"
    );
}

/// security round 3, item 3: the body matcher holds a value split across
/// frames: a server that streams the reflection 1 byte and 3 bytes at a
/// time, with the value straddling frame boundaries and once more as the
/// stream's very last bytes, then in a trailer, gives the guest the
/// marker each time.
///
/// Positive control: the bytes around each value come back intact, the
/// body otherwise as the server sent it.
#[test]
fn a_credential_streamed_in_tiny_pieces_is_still_replaced() {
    let pki = pki();
    let srv = server(&pki, None);
    let p = srv.port;
    let (env, m) = provider_setup(&pki, p, true);
    for size in [1, 3] {
        let v = fetch_with_token(
            &env,
            &m,
            json!({
                "url": format!("https://localhost:{p}/v1/echo?chunk={size}&tail&trailers"),
                "headers": {"x-mine": "not-a-secret-42", "te": "trailers"},
            }),
        );
        let out = output(&v);
        assert_eq!(out["status"], 200, "{size}: {v:#}");
        let body = out["body"].as_str().unwrap();
        assert!(!body.contains(CANARY), "{size}: {body}");
        assert!(
            body.contains(&format!("authorization: Bearer {MARKER}\n")),
            "{size}: {body}"
        );
        assert!(
            body.ends_with(&format!("\nthe end: Bearer {MARKER}")),
            "{size}: {body}"
        );
        assert!(body.contains("x-mine: not-a-secret-42\n"), "{size}: {body}");
        assert!(
            body.starts_with("accept-encoding: identity\n"),
            "{size}: {body}"
        );
        // After the body, the trailers: cleaned too.
        assert_eq!(
            out["trailers"],
            json!({"x-echo-auth": format!("Bearer {MARKER}")}),
            "{size}: {out:#}"
        );
        // Body twice, `x-echo-auth` in the head and in the trailers.
        let line = http_lines(&env).pop().unwrap();
        assert_eq!(line["redacted"], 4, "{size}: {line:#}");
        assert!(line["error"].is_null(), "{size}: {line:#}");
    }
}

/// security round 3, item 3 (control): without a provider, nothing is
/// replaced: a reflected header of the guest's comes back unchanged, and
/// the audit line has no `redacted` count (the host did not scan).
#[test]
fn without_a_provider_a_reflected_header_comes_back_unchanged() {
    let pki = pki();
    let srv = server(&pki, None);
    let p = srv.port;
    let (env, m) = provider_setup(&pki, p, false);
    let v = fetch_with_token(
        &env,
        &m,
        json!({
            "url": format!("https://localhost:{p}/v1/echo?chunk=3&trailers"),
            "headers": {
                "x-mine": "not-a-secret-42",
                "authorization": "Bearer guest-made",
                "te": "trailers",
            },
        }),
    );
    let out = output(&v);
    assert_eq!(out["status"], 200, "{v:#}");
    let body = out["body"].as_str().unwrap();
    assert!(
        body.contains("authorization: Bearer guest-made\n"),
        "{body}"
    );
    assert!(body.contains("x-mine: not-a-secret-42\n"), "{body}");
    assert!(!body.contains(MARKER), "{body}");
    assert_eq!(out["headers"]["x-echo-auth"], "Bearer guest-made");
    assert_eq!(out["headers"]["x-echo-mine"], "not-a-secret-42");
    assert_eq!(out["trailers"], json!({"x-echo-auth": "Bearer guest-made"}));
    // The trailers ended the body: the line says it was read to its end.
    let line = http_lines(&env).pop().unwrap();
    assert!(line["error"].is_null(), "{line:#}");
    assert!(line.get("provider").is_none(), "{line:#}");
    assert!(line.get("redacted").is_none(), "{line:#}");
}

/// Issue 46, item 4: `[approvals] notify` announces a queued approval to
/// a local HTTPS receiver (trusted through `[network] ca_file`): one
/// `POST` of JSON with the pending id, the actor, the executor, the items
/// and the input's preview, and the header made of its value. A one-shot
/// `run` still sends it before it exits.
#[test]
fn a_queued_approval_is_announced_to_the_notify_url() {
    let pki = pki();
    let srv = server(&pki, None);
    let p = srv.port;
    let env = env_with(
        &pki,
        &format!(
            "[approvals]\nnotify = {{ url = \"https://localhost:{p}/hook\", header = \"X-Token\", format = \"token {{value}}\", value_env = \"HOOK_TOKEN\" }}\n"
        ),
    );
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let (run, v) = crate::support::guests::run_json_with_vars(
        &env,
        &guest("write-file"),
        &ws,
        "Supervised",
        r#"{"path":"out/a.txt","content":"hi"}"#,
        &[],
        &[("HOOK_TOKEN", "s3cret")],
    );
    run.expect(4);
    let id = v["pending_id"].as_str().unwrap().to_string();
    let seen = srv.seen();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].path, "/hook");
    assert_eq!(seen[0].headers["x-token"], "token s3cret");
    assert_eq!(seen[0].headers["content-type"], "application/json");
    let notice: serde_json::Value = serde_json::from_str(&seen[0].body).unwrap();
    assert_eq!(notice["pending_id"], id.as_str());
    assert_eq!(notice["actor"], "main");
    assert_eq!(notice["executor"], "write-file");
    assert_eq!(notice["items"][0]["capability"], "fs:write", "{notice:#}");
    assert_eq!(
        notice["items"][0]["target"],
        format!("{}/out/**", s(&ws)),
        "{notice:#}"
    );
    assert!(
        notice["input_preview"]
            .as_str()
            .unwrap()
            .contains("out/a.txt"),
        "{notice:#}"
    );
    // The token is the host's: not readable by an executor.
    let run = env.run(&[
        "policy",
        "decide",
        r#"{"kind":"capability","actor":"main","capability":"env:read","target":"HOOK_TOKEN"}"#,
        "--workspace",
        s(&ws),
    ]);
    run.expect(2);
    assert!(run.stdout.contains("SECRET_ENV_DENIED"), "{}", run.stdout);
}

/// A receiver that takes the connection and never answers: the call is
/// queued and answered at once (the notice is still on its first attempt
/// when the result comes back), and the next one is too.
#[test]
fn a_receiver_that_never_answers_does_not_hold_up_the_queue() {
    use crate::support::serve::{args, executors, Client};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(Mutex::new(Vec::new()));
    let keep = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            // Held open, never read from, never answered.
            keep.lock().unwrap().push(stream.unwrap());
        }
    });
    let env = Env::new();
    env.write(
        "config/gatehouse/gatehouse.toml",
        &format!(
            "[actors.main]\nchannel = \"cli\"\nsender = \"tester\"\nskills = [\"*\"]\n\
             [approvals]\nelicitation = \"off\"\nnotify = {{ url = \"http://127.0.0.1:{port}/hook\" }}\n"
        ),
    );
    let ws = env.mkdir("ws");
    env.mkdir("ws/out");
    let ex = executors(&env);
    let mut c = Client::start(&env, &args(&ws, &ex, "Supervised"), false);
    for n in 0..2 {
        let r = c.call(
            "write-file",
            json!({"path": format!("out/{n}.txt"), "content": "x"}),
            &mut |_| panic!("asked"),
        );
        assert_eq!(r["structuredContent"]["code"], "APPROVAL_REQUIRED", "{r:#}");
    }
    // Both queued while the first notice still waits on its first
    // attempt (a second attempt comes 11 s after the first).
    assert_eq!(
        env.run(&["approvals", "list"]).json_lines().len(),
        2,
        "both entries are queued"
    );
    // The receiver did get the first notice's connection, and holds it.
    let mut waited = 0;
    while accepted.lock().unwrap().is_empty() && waited < 500 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        waited += 1;
    }
    assert_eq!(accepted.lock().unwrap().len(), 1);
    assert_eq!(c.finish(), 0);
}
