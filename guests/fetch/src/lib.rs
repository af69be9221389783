//! `fetch` (network:sites, through `wasi:http`): `{"url": "https://…",
//! "method": "GET", "headers": {"name": "value"}, "body": "…"}` (method,
//! headers and body optional) → one request through
//! `wasi:http/outgoing-handler` → `{"status": N, "headers": {…}, "body":
//! "…"}`, with `"trailers": {…}` when the response had any.
//!
//! The URL's path and query are sent exactly as written, with no
//! normalization, so that the host's rules are what a test exercises. A
//! denied or failed request returns `{"error": "<the wasi:http error
//! code's name>"}` (`{"error": "HttpRequestDenied"}`) as the output, not as
//! a failure: the guest saw the error and reports it.

wit_bindgen::generate!({ world: "executor", path: "../../wit" });

use std::collections::BTreeMap;

use guest_common::Fail;
use serde::Deserialize;
use serde_json::json;
use wasi::http::outgoing_handler;
use wasi::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};

guest_common::impl_from_fail!();

#[derive(Deserialize)]
struct Request {
    url: String,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    body: Option<String>,
    /// Send the same request this many times (default 1); the last
    /// response is returned, or the first error.
    #[serde(default)]
    repeat: Option<u32>,
    /// A secret, each byte XORed with 0x5a, in hex: after the requests the
    /// guest counts where the secret itself appears in its environment and
    /// its linear memory (it never holds the secret, only this form).
    #[serde(default)]
    scan_xor: Option<String>,
    /// `request-options.between-bytes-timeout`, in milliseconds.
    #[serde(default)]
    between_bytes_ms: Option<u64>,
}

const PAGE: usize = 65536;

/// Where `secret` (each byte XORed with 0x5a) appears: in the
/// environment's variables, and in the linear memory.
fn scan(xored: &[u8]) -> (usize, usize) {
    let hit = |hay: &[u8]| -> usize {
        if xored.is_empty() || hay.len() < xored.len() {
            return 0;
        }
        (0..=hay.len() - xored.len())
            .filter(|&i| hay[i..i + xored.len()].iter().zip(xored).all(|(m, x)| m ^ 0x5a == *x))
            .count()
    };
    let env: usize = std::env::vars()
        .map(|(k, v)| hit(k.as_bytes()) + hit(v.as_bytes()))
        .sum();
    let size = core::arch::wasm32::memory_size::<0>() * PAGE;
    let mut found = 0;
    let mut matched = 0;
    // Address 0 is skipped (a null pointer in Rust); every other byte of
    // the linear memory is read.
    for addr in 1..size {
        // SAFETY: every address below `memory_size` is in the linear
        // memory; a volatile read does not assume anything about what it
        // holds.
        let m = unsafe { core::ptr::read_volatile(addr as *const u8) };
        if m ^ 0x5a == xored[matched] {
            matched += 1;
            if matched == xored.len() {
                found += 1;
                matched = 0;
            }
        } else {
            matched = usize::from(m ^ 0x5a == xored[0]);
        }
    }
    (env, found)
}

fn unhex(s: &str) -> Result<Vec<u8>, Fail> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2).unwrap_or("zz"), 16))
        .collect::<Result<_, _>>()
        .map_err(|_| Fail::Invalid("`scan_xor` is not hex".into()))
}

/// `scheme://authority/path?query`, split as written.
fn split(url: &str) -> Result<(Scheme, &str, &str), Fail> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| Fail::Invalid(format!("invalid url `{url}`: no scheme")))?;
    let scheme = match scheme {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => Scheme::Other(other.to_string()),
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    Ok((scheme, authority, path))
}

/// The error code's variant name (`HttpRequestDenied`, `DnsError`).
fn name(e: &ErrorCode) -> String {
    let debug = format!("{e:?}");
    let bare = debug.rsplit_once("::").map_or(debug.as_str(), |(_, name)| name);
    bare.split(['(', ' ', '{'])
        .next()
        .unwrap_or_default()
        .to_string()
}

fn error(e: &ErrorCode) -> Result<(String, bool), Error> {
    Ok((guest_common::to_output(&json!({ "error": name(e) }))?, true))
}

struct Fetch;

impl Guest for Fetch {
    fn run(input: String) -> Result<String, Error> {
        let req: Request = serde_json::from_str(&input)
            .map_err(|e| Fail::Invalid(format!("invalid input: {e}")))?;
        let mut last = String::new();
        for _ in 0..req.repeat.unwrap_or(1).max(1) {
            let (out, failed) = once(&req)?;
            last = out;
            if failed {
                break;
            }
        }
        if let Some(x) = &req.scan_xor {
            let (env, memory) = scan(&unhex(x)?);
            let mut v: serde_json::Value = serde_json::from_str(&last).unwrap_or_default();
            v["scan"] = json!({"env": env, "memory": memory});
            last = guest_common::to_output(&v)?;
        }
        Ok(last)
    }
}

/// One request: its output, and whether it was an error.
fn once(req: &Request) -> Result<(String, bool), Error> {
    {
        let (scheme, authority, path) = split(&req.url)?;
        let headers = Fields::new();
        for (k, v) in &req.headers {
            headers
                .append(k, v.as_bytes())
                .map_err(|e| Fail::Invalid(format!("header `{k}`: {e:?}")))?;
        }
        let out = OutgoingRequest::new(headers);
        let method = match req.method.as_deref().unwrap_or("GET") {
            "GET" => Method::Get,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "HEAD" => Method::Head,
            "PATCH" => Method::Patch,
            "OPTIONS" => Method::Options,
            other => Method::Other(other.to_string()),
        };
        let bad = |what: &str| Fail::Invalid(format!("the request's {what} was refused by wasi:http"));
        out.set_method(&method).map_err(|()| bad("method"))?;
        out.set_scheme(Some(&scheme)).map_err(|()| bad("scheme"))?;
        out.set_authority(Some(authority))
            .map_err(|()| bad("authority"))?;
        out.set_path_with_query(Some(path))
            .map_err(|()| bad("path"))?;
        let body = out.body().map_err(|()| bad("body"))?;
        let options = req.between_bytes_ms.map(|ms| {
            let o = RequestOptions::new();
            // Refused only for a duration the host cannot keep.
            let _ = o.set_between_bytes_timeout(Some(ms * 1_000_000));
            o
        });
        let future = match outgoing_handler::handle(out, options) {
            Ok(f) => f,
            Err(e) => return error(&e),
        };
        // A body the host stops taking (a refused request) is not the
        // guest's failure: the response future says why.
        let mut unsent = None;
        if let Some(text) = &req.body {
            let stream = body.write().map_err(|()| bad("body stream"))?;
            for chunk in text.as_bytes().chunks(4096) {
                if let Err(e) = stream.blocking_write_and_flush(chunk) {
                    unsent = Some(format!("writing the body: {e:?}"));
                    break;
                }
            }
            drop(stream);
        }
        if unsent.is_none() {
            if let Err(e) = OutgoingBody::finish(body, None) {
                unsent = Some(format!("{e:?}"));
            }
        }
        future.subscribe().block();
        let response = match future.get() {
            Some(Ok(Ok(r))) => r,
            Some(Ok(Err(e))) => return error(&e),
            Some(Err(())) | None => {
                return Err(Fail::Failed(unsent.unwrap_or_else(|| "no response".into())).into())
            }
        };
        if let Some(why) = unsent {
            return Err(Fail::Failed(why).into());
        }
        let status = response.status();
        let mut got = BTreeMap::new();
        for (k, v) in response.headers().entries() {
            got.insert(k, String::from_utf8_lossy(&v).into_owned());
        }
        let incoming = response.consume().map_err(|()| bad("response body"))?;
        let stream = incoming.stream().map_err(|()| bad("response stream"))?;
        let mut bytes = Vec::new();
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => bytes.extend(chunk),
                Err(wasi::io::streams::StreamError::Closed) => break,
                Err(wasi::io::streams::StreamError::LastOperationFailed(e)) => {
                    return match wasi::http::types::http_error_code(&e) {
                        Some(code) => error(&code),
                        None => Err(Fail::Failed(e.to_debug_string()).into()),
                    };
                }
            }
        }
        // The trailers, if the server sent any: the stream goes first (it
        // is the body's child), then the body gives them.
        drop(stream);
        let future = IncomingBody::finish(incoming);
        future.subscribe().block();
        let mut trailers = BTreeMap::new();
        if let Some(Ok(Ok(Some(fields)))) = future.get() {
            for (k, v) in fields.entries() {
                trailers.insert(k, String::from_utf8_lossy(&v).into_owned());
            }
        }
        let mut out = json!({
            "status": status,
            "headers": got,
            "body": String::from_utf8_lossy(&bytes),
        });
        if !trailers.is_empty() {
            out["trailers"] = json!(trailers);
        }
        Ok((guest_common::to_output(&out)?, false))
    }
}

export!(Fetch);
