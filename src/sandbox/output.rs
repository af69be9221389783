//! Capped stdout/stderr pipes that remember whether the cap was hit.
//!
//! wasmtime-wasi's `MemoryOutputPipe` closes the stream when full, but a
//! guest that then panics looks like any other trap. This wrapper records
//! that the cap was reached so the run can be reported as `LIMIT_OUTPUT`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

/// An in-memory pipe of at most `cap` bytes.
#[derive(Clone)]
pub struct CappedPipe {
    inner: MemoryOutputPipe,
    cap: usize,
    hit: Arc<AtomicBool>,
}

impl CappedPipe {
    pub fn new(cap: usize) -> CappedPipe {
        CappedPipe {
            inner: MemoryOutputPipe::new(cap),
            cap,
            hit: Arc::new(AtomicBool::new(false)),
        }
    }

    /// What the guest wrote, up to the cap.
    pub fn contents(&self) -> Bytes {
        self.inner.contents()
    }

    /// Whether the guest tried to write past the cap.
    pub fn cap_hit(&self) -> bool {
        self.hit.load(Ordering::Relaxed)
    }

    fn remaining(&self) -> usize {
        self.cap.saturating_sub(self.inner.contents().len())
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
            let _ = self.inner.write(bytes.slice(..room));
            return Err(StreamError::Closed);
        }
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        match self.remaining() {
            0 => {
                self.hit.store(true, Ordering::Relaxed);
                Err(StreamError::Closed)
            }
            n => Ok(n),
        }
    }
}
