//! `cf-net`: the conformance suite's network attacks (`gatehouse
//! conformance`), a wasm32-wasip2 command (it imports `wasi:sockets`).
//! `argv[1]` names the attack, `argv[2]` its target (`HOST:PORT`).
//!
//! Each prints one line: `BROKEN <what it achieved>` when a connection was
//! made, a datagram was sent or a name resolved, or when the host's network
//! answered at all (a refused connection is an answer: the attempt left the
//! sandbox); `held <errno>` when the sandbox refused it.

use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs, UdpSocket};
use std::time::Duration;

fn errno_name(e: &std::io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(2) => "EACCES",
        Some(4) => "EADDRNOTAVAIL",
        Some(5) => "EAFNOSUPPORT",
        Some(14) => "ECONNREFUSED",
        Some(23) => "EHOSTUNREACH",
        Some(28) => "EINVAL",
        Some(40) => "ENETUNREACH",
        Some(44) => "ENOENT",
        Some(52) => "ENOSYS",
        Some(58) => "ENOTSUP",
        Some(63) => "EPERM",
        Some(73) => "ETIMEDOUT",
        Some(76) => "ENOTCAPABLE",
        Some(n) => return format!("errno {n}"),
        None => return format!("{:?}", e.kind()),
    };
    name.to_string()
}

/// Errors that mean the sandbox said no (not the network).
fn refused_by_sandbox(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(2 | 52 | 58 | 63 | 76))
        || e.kind() == std::io::ErrorKind::Unsupported
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn verdict(what: &str, r: std::io::Result<String>) {
    // `tcp-ok`: the correct half's control, where success is expected.
    let success = if OK.load(std::sync::atomic::Ordering::Relaxed) { "ok" } else { "BROKEN" };
    match r {
        Ok(done) => say(&format!("{success} {done}")),
        Err(e) if refused_by_sandbox(&e) => say(&format!("held {}", errno_name(&e))),
        Err(e) => say(&format!("BROKEN {what} reached the network: {}", errno_name(&e))),
    }
}

static OK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mut op = args.get(1).map(String::as_str).unwrap_or("");
    if let Some(base) = op.strip_suffix("-ok") {
        OK.store(true, std::sync::atomic::Ordering::Relaxed);
        op = base;
    }
    let target = args.get(2).cloned().unwrap_or_default();
    match op {
        "tcp" => verdict(&format!("a TCP connect to `{target}`"), (|| {
            let addr = target
                .parse()
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
            TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
            Ok(format!("connected to `{target}`"))
        })()),
        "udp" => verdict(&format!("a UDP datagram to `{target}`"), (|| {
            let sock = UdpSocket::bind("0.0.0.0:0")?;
            sock.send_to(b"conformance", target.as_str())?;
            Ok(format!("sent a datagram to `{target}`"))
        })()),
        // A resolver error carries no errno: its text is the outcome.
        "lookup" => match (target.as_str(), 80).to_socket_addrs() {
            Ok(addrs) => {
                let ips: Vec<String> = addrs.map(|a| a.ip().to_string()).collect();
                say(&format!("BROKEN resolved `{target}` to {}", ips.join(", ")));
            }
            Err(e) => say(&format!("held {e}")),
        },
        other => {
            say(&format!("FAIL unknown operation `{other}`"));
            std::process::exit(64);
        }
    }
}
