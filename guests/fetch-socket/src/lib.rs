//! `fetch-socket` (network:sites, raw sockets): `{"url": "http://localhost:8080/path"}` → one
//! plain HTTP/1.1 GET with `Connection: close` over a `std::net::TcpStream`
//! (on wasip2: name lookup through `wasi:sockets/ip-name-lookup`, the
//! connection through `wasi:sockets/tcp`) → `{"status": 200, "body": "..."}`.
//!
//! `{"addr": "127.0.0.2:8080"}` (with or without `url`) connects to that
//! socket address directly, with no name lookup; the request's path and
//! `Host` header then come from `url` if given, else `/` and `addr`.
//! Lookup and connection failures are `failed("connect `host:port`: ...")`.

wit_bindgen::generate!({ world: "executor", path: "../../wit" });

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use guest_common::Fail;
use serde::Deserialize;
use serde_json::json;

guest_common::impl_from_fail!();

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    addr: Option<String>,
}

/// The parts of an `http://` URL that a GET needs.
struct Url {
    /// The host as written, without brackets (`localhost`, `127.0.0.1`, `::1`).
    host: String,
    port: u16,
    /// The `Host` header: the authority as written.
    authority: String,
    /// Path and query, at least `/`.
    path: String,
}

fn parse_url(url: &str) -> Result<Url, Fail> {
    let bad = |why: &str| Fail::Invalid(format!("invalid url `{url}`: {why}"));
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| bad("only `http://` URLs are supported"))?;
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    // Drop a fragment; make sure the path starts with `/`.
    let path = path.split('#').next().unwrap_or("");
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    if authority.contains('@') {
        return Err(bad("user info is not supported"));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let end = v6.find(']').ok_or_else(|| bad("unclosed `[`"))?;
        let host = &v6[..end];
        let after = &v6[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(bad("garbage after `]`")),
        };
        (host, port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let port = match port {
        None => 80,
        Some(p) => p.parse::<u16>().map_err(|_| bad("bad port"))?,
    };
    Ok(Url {
        host: host.to_string(),
        port,
        authority: authority.to_string(),
        path,
    })
}

/// Decodes a `Transfer-Encoding: chunked` body; `None` if it is malformed.
fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size_line = std::str::from_utf8(&body[..line_end]).ok()?;
        let size_hex = size_line.split(';').next()?.trim();
        let size = usize::from_str_radix(size_hex, 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        if body.len() < size {
            return None;
        }
        out.extend_from_slice(&body[..size]);
        body = body.get(size..)?;
        body = body.strip_prefix(b"\r\n").unwrap_or(body);
    }
}

fn get(req: Request) -> Result<String, Fail> {
    let url = match &req.url {
        Some(u) => Some(parse_url(u)?),
        None => None,
    };
    let (mut stream, target, authority, path) = match (&req.addr, url) {
        (Some(addr), url) => {
            let sock: SocketAddr = addr.parse().map_err(|e| {
                Fail::Invalid(format!(
                    "invalid addr `{addr}`: {e} (want an IP:port literal)"
                ))
            })?;
            let stream = TcpStream::connect(sock)
                .map_err(|e| Fail::Failed(format!("connect `{addr}`: {e}")))?;
            let (authority, path) = match url {
                Some(u) => (u.authority, u.path),
                None => (addr.clone(), "/".to_string()),
            };
            (stream, addr.clone(), authority, path)
        }
        (None, Some(url)) => {
            let target = if url.host.contains(':') {
                format!("[{}]:{}", url.host, url.port)
            } else {
                format!("{}:{}", url.host, url.port)
            };
            let stream = TcpStream::connect((url.host.as_str(), url.port))
                .map_err(|e| Fail::Failed(format!("connect `{target}`: {e}")))?;
            (stream, target, url.authority, url.path)
        }
        (None, None) => {
            return Err(Fail::Invalid(
                "need a string field `url` (http://host:port/path) or `addr` (IP:port)".to_string(),
            ))
        }
    };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: gatehouse-fetch\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .and_then(|()| stream.flush())
        .map_err(|e| Fail::Failed(format!("send to `{target}`: {e}")))?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .map_err(|e| Fail::Failed(format!("read from `{target}`: {e}")))?;

    let bad = |why: &str| Fail::Failed(format!("bad HTTP response from `{target}`: {why}"));
    let head_end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let head = String::from_utf8_lossy(&response[..head_end]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/") {
        return Err(bad(&format!("status line `{status_line}`")));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(&format!("status line `{status_line}`")))?;
    let chunked = lines.any(|l| {
        l.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("transfer-encoding")
                && value.to_ascii_lowercase().contains("chunked")
        })
    });
    let raw_body = &response[head_end + 4..];
    let body = if chunked {
        dechunk(raw_body).ok_or_else(|| bad("malformed chunked body"))?
    } else {
        raw_body.to_vec()
    };
    let body = String::from_utf8_lossy(&body);
    guest_common::to_output(&json!({ "status": status, "body": body }))
}

struct Fetch;

impl Guest for Fetch {
    fn run(input: String) -> Result<String, Error> {
        let req: Request = guest_common::parse_input(&input)?;
        Ok(get(req)?)
    }
}

export!(Fetch);
