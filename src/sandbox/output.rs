//! Capped stdout/stderr pipes that remember whether the cap was hit.
//!
//! wasmtime-wasi's `MemoryOutputPipe` closes the stream when full, but a
//! guest that then panics looks like any other trap, and a guest that
//! ignores write errors (StarlingMonkey's `console.log`) goes on printing
//! into the closed stream until its deadline. So a write past the cap
//! stops the guest at once (a trap), and this wrapper records that the cap
//! was reached so the run is reported as `LIMIT_OUTPUT`.
//!
//! A pipe either keeps what the guest writes (the run report carries it)
//! or forwards it, as it is written, to the process's own stdout or stderr
//! (`gatehouse run` of a command, which stands in for `wasmtime run`).

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

/// Where a forwarding pipe writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forward {
    Stdout,
    Stderr,
}

/// A pipe of at most `cap` bytes: kept in memory, or forwarded.
#[derive(Clone)]
pub struct CappedPipe {
    inner: MemoryOutputPipe,
    forward: Option<Forward>,
    cap: usize,
    written: Arc<AtomicUsize>,
    hit: Arc<AtomicBool>,
}

impl CappedPipe {
    /// Keeps up to `cap` bytes in memory.
    pub fn new(cap: usize) -> CappedPipe {
        CappedPipe::with(cap, None)
    }

    /// Forwards up to `cap` bytes to the process's `to`, keeping none.
    pub fn forwarding(cap: usize, to: Forward) -> CappedPipe {
        CappedPipe::with(cap, Some(to))
    }

    fn with(cap: usize, forward: Option<Forward>) -> CappedPipe {
        CappedPipe {
            // A forwarding pipe keeps nothing.
            inner: MemoryOutputPipe::new(if forward.is_some() { 0 } else { cap }),
            forward,
            cap,
            written: Arc::new(AtomicUsize::new(0)),
            hit: Arc::new(AtomicBool::new(false)),
        }
    }

    /// What the guest wrote, up to the cap (empty when forwarded).
    pub fn contents(&self) -> Bytes {
        self.inner.contents()
    }

    /// Whether the guest tried to write past the cap.
    pub fn cap_hit(&self) -> bool {
        self.hit.load(Ordering::Relaxed)
    }

    fn remaining(&self) -> usize {
        self.cap
            .saturating_sub(self.written.load(Ordering::Relaxed))
    }

    fn put(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.written.fetch_add(bytes.len(), Ordering::Relaxed);
        match self.forward {
            None => self.inner.write(bytes),
            Some(to) => {
                let done = match to {
                    Forward::Stdout => {
                        let mut out = std::io::stdout().lock();
                        out.write_all(&bytes).and_then(|()| out.flush())
                    }
                    Forward::Stderr => std::io::stderr().lock().write_all(&bytes),
                };
                // A closed pipe (`| head`) closes the guest's stream, as
                // it would for a native program.
                done.map_err(|_| StreamError::Closed)
            }
        }
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.inner.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedPipe {
    async fn ready(&mut self) {}
}

impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let room = self.remaining();
        if bytes.len() > room {
            self.hit.store(true, Ordering::Relaxed);
            // Keep what fits: the output is cut at the cap, not dropped.
            let _ = self.put(bytes.slice(..room));
            return Err(over_the_cap(self.cap));
        }
        self.put(bytes)
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        match self.remaining() {
            0 => {
                self.hit.store(true, Ordering::Relaxed);
                Err(over_the_cap(self.cap))
            }
            // wasmtime-wasi's pipes offer at most this much at a time.
            n => Ok(n.min(1 << 20)),
        }
    }
}

/// The error that stops a guest writing past the cap: a trap, so that a
/// guest cannot go on (the run is reported as `LIMIT_OUTPUT`).
fn over_the_cap(cap: usize) -> StreamError {
    StreamError::Trap(wasmtime::format_err!(
        "the guest wrote more than {cap} bytes to one stream"
    ))
}
