//! The plain HTTP/1.1 servers the `http.` cases run against, on
//! 127.0.0.1: the suite has no TLS CA, so its grants name `http://`.
//!
//! Each server records the request line of every connection that sent
//! anything, and answers `200` with that line as the body: the control's
//! output then proves what the server received, and the runner judges an
//! attack broken when a server received anything at all (whatever the
//! guest was told).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Case, Half, Observed};

/// The most of a request's head a server reads: a request line and a
/// few headers, never a body.
const HEAD_CAP: usize = 16 << 10;

/// How long a server waits on a connection that sends no complete head
/// (a TLS client waiting for the server's hello, say) before it records
/// what it got.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// One server: its port, what it received, and its thread.
struct Server {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start() -> std::io::Result<Server> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (record, stopped) = (seen.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("conformance-http".to_string())
            .spawn(move || {
                // One connection at a time: the cases run one after another.
                for conn in listener.incoming() {
                    if stopped.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = conn {
                        answer(stream, &record);
                    }
                }
            })?;
        Ok(Server {
            port,
            seen,
            stop,
            thread: Some(thread),
        })
    }

    /// Every request line received so far, in order.
    fn seen(&self) -> Vec<String> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // The thread blocks in `accept`: a connection of our own wakes it
        // to see the flag (it sends nothing, so nothing is recorded).
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads a request's head, records its first line, answers `200` with
/// that line as the body, and closes.
fn answer(mut stream: TcpStream, record: &Mutex<Vec<String>>) {
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let _ = stream.set_write_timeout(Some(READ_TIMEOUT));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while head.len() < HEAD_CAP && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    if head.is_empty() {
        return;
    }
    let text = String::from_utf8_lossy(&head);
    let line = text.lines().next().unwrap_or_default().to_string();
    if let Ok(mut seen) = record.lock() {
        seen.push(line.clone());
    }
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{line}",
        line.len()
    );
    let _ = stream.write_all(response.as_bytes());
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Both);
}

/// The two servers: the granted one (`{http}`) and another (`{http_other}`).
pub(super) struct HttpServers {
    granted: Server,
    other: Server,
}

/// How many requests each server had received when a case started.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mark(usize, usize);

impl HttpServers {
    pub(super) fn start() -> std::io::Result<HttpServers> {
        Ok(HttpServers {
            granted: Server::start()?,
            other: Server::start()?,
        })
    }

    pub(super) fn port(&self) -> u16 {
        self.granted.port
    }

    pub(super) fn other_port(&self) -> u16 {
        self.other.port
    }

    pub(super) fn mark(&self) -> Mark {
        Mark(self.granted.seen().len(), self.other.seen().len())
    }

    /// What `case` did, given what the servers received since `mark`: an
    /// attack that reached either server is a `BROKEN` line (the request
    /// went out, whatever the guest was told); a program that did not
    /// reach the granted one exactly once, or reached the other, is an
    /// error the classifier reports as incorrect.
    pub(super) fn judge(&self, case: &Case, mark: Mark, observed: Observed) -> Observed {
        let since =
            |s: &Server, from: usize| -> Vec<String> { s.seen().into_iter().skip(from).collect() };
        let granted = since(&self.granted, mark.0);
        let other = since(&self.other, mark.1);
        match case.half {
            Half::Holds => {
                let reached = granted
                    .first()
                    .map(|l| (self.granted.port, l))
                    .or_else(|| other.first().map(|l| (self.other.port, l)));
                match reached {
                    Some((port, line)) => Observed::Ran {
                        exit: 0,
                        stdout: format!(
                            "BROKEN the server on `127.0.0.1:{port}` received `{line}` (the guest saw: {})\n",
                            observed.describe()
                        ),
                        stderr: String::new(),
                    },
                    None => observed,
                }
            }
            Half::Correct if granted.len() == 1 && other.is_empty() => observed,
            Half::Correct => Observed::Error {
                message: format!(
                    "the granted server received {granted:?} and the other {other:?}, not one request on the granted one (the guest saw: {})",
                    observed.describe()
                ),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::{cases, classify, Expect, Verdict};

    fn case(name: &str) -> Case {
        cases()
            .into_iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no case {name}"))
    }

    fn denied() -> Observed {
        Observed::Ran {
            exit: 0,
            stdout: r#"{"error":"HttpRequestDenied"}"#.to_string(),
            stderr: String::new(),
        }
    }

    /// A GET sent by hand to `port`; the whole response.
    fn get(port: u16, path: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn an_attack_that_reaches_a_server_is_broken_whatever_the_guest_saw() {
        let http = HttpServers::start().unwrap();
        let attack = case("http.other-port.p2");
        // Control: nothing received, the guest's answer is the verdict.
        let mark = http.mark();
        let judged = http.judge(&attack, mark, denied());
        assert_eq!(classify(&attack, &judged).0, Verdict::Held);
        // The same answer, but the other server got a request meanwhile.
        let mark = http.mark();
        let response = get(http.other_port(), "/ok/item");
        assert_eq!(
            response,
            "HTTP/1.1 200 OK\r\ncontent-length: 21\r\n\r\nGET /ok/item HTTP/1.1"
        );
        let judged = http.judge(&attack, mark, denied());
        let (verdict, why) = classify(&attack, &judged);
        assert_eq!(verdict, Verdict::Broken);
        assert_eq!(
            why,
            format!(
                "BROKEN the server on `127.0.0.1:{}` received `GET /ok/item HTTP/1.1` (the guest saw: exit 0, stdout \"{{\\\"error\\\":\\\"HttpRequestDenied\\\"}}\")",
                http.other_port()
            )
        );
        // The granted server counts too.
        let mark = http.mark();
        get(http.port(), "/secret");
        let (verdict, why) = classify(&attack, &http.judge(&attack, mark, denied()));
        assert_eq!(verdict, Verdict::Broken);
        assert!(why.contains("received `GET /secret HTTP/1.1`"), "{why}");
    }

    #[test]
    fn the_control_must_reach_the_granted_server_exactly_once() {
        let http = HttpServers::start().unwrap();
        let control = case("http.granted-get.p2");
        let Expect::Output { stdout, .. } = control.expect.clone() else {
            panic!("{:?}", control.expect)
        };
        let answered = Observed::Ran {
            exit: 0,
            stdout,
            stderr: String::new(),
        };
        // Its exact output without a request seen: incorrect.
        let mark = http.mark();
        let judged = http.judge(&control, mark, answered.clone());
        let (verdict, why) = classify(&control, &judged);
        assert_eq!(verdict, Verdict::Incorrect);
        assert!(
            why.contains("error: the granted server received [] and the other []"),
            "{why}"
        );
        // One request on the granted server: correct.
        let mark = http.mark();
        get(http.port(), "/ok/item");
        let judged = http.judge(&control, mark, answered.clone());
        assert_eq!(classify(&control, &judged).0, Verdict::Correct);
        // One on each: incorrect.
        let mark = http.mark();
        get(http.port(), "/ok/item");
        get(http.other_port(), "/ok/item");
        let judged = http.judge(&control, mark, answered);
        assert_eq!(classify(&control, &judged).0, Verdict::Incorrect);
    }
}
