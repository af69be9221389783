//! `wasi:io` (baseline): wasmtime-wasi's pollables and streams, with every
//! wait bounded by the run's deadline and its cancel switch.
//!
//! Epoch interruption stops a guest only while it runs wasm code; a guest
//! blocked in a host call (`poll`, `pollable.block`, a `blocking-*` stream
//! call: a socket that never answers, a `subscribe-duration` of an hour)
//! would hold the host past its deadline. Here every such wait races an
//! [`Alarm`] at the deadline that the cancel switch also ends (within one
//! [`TICK`](super::alarm::TICK)); when the alarm wins the call traps with
//! [`DeadlineReached`], which the run reports as `LIMIT_DEADLINE` (or
//! `TURN_CANCELLED`).
//! Everything else is wasmtime-wasi's own implementation, called as is.

use std::future::Future;
use std::time::Instant;

use async_streams::{HostInputStream as AsyncInput, HostOutputStream as AsyncOutput};
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::io::{poll as async_poll, streams as async_streams};
use wasmtime_wasi::p2::bindings::sync::io::poll::{self, Pollable};
use wasmtime_wasi::p2::bindings::sync::io::streams::{self, InputStream, OutputStream};
use wasmtime_wasi::p2::{StreamError, StreamResult};
use wasmtime_wasi::runtime::in_tokio;

use super::alarm::{race, Alarm};
use super::services::CancelHandle;

/// A wait in a host call ran into the run's deadline (or its cancel).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the run's deadline passed while the guest waited in a host call")]
pub struct DeadlineReached;

/// What the binding works on: the resource table, and when waits end.
pub struct DeadlineIo<'a> {
    /// The run's resource table.
    pub table: &'a mut ResourceTable,
    /// When the run's deadline passes: no wait lasts beyond it.
    pub deadline: Instant,
    /// The turn's cancel switch, looked at every [`TICK`](super::alarm::TICK).
    pub cancel: &'a CancelHandle,
}

/// Runs `fut` to completion unless the deadline passes or the turn is
/// cancelled first.
fn bounded<F: Future>(
    deadline: Instant,
    cancel: CancelHandle,
    fut: F,
) -> Result<F::Output, DeadlineReached> {
    // The future is polled first, so a wait that is over at the first
    // look (the bytes or the answer are there) sets no alarm.
    in_tokio(race(Alarm::new(deadline, Some(cancel)), fut)).map_err(|_| DeadlineReached)
}

impl DeadlineIo<'_> {
    fn wait<T>(
        &mut self,
        f: impl AsyncFnOnce(&mut ResourceTable) -> wasmtime::Result<T>,
    ) -> wasmtime::Result<T> {
        let (deadline, cancel) = (self.deadline, self.cancel.clone());
        bounded(deadline, cancel, f(self.table)).map_err(wasmtime::Error::new)?
    }

    fn wait_stream<T>(
        &mut self,
        f: impl AsyncFnOnce(&mut ResourceTable) -> StreamResult<T>,
    ) -> StreamResult<T> {
        let (deadline, cancel) = (self.deadline, self.cancel.clone());
        bounded(deadline, cancel, f(self.table))
            .map_err(|e| StreamError::Trap(wasmtime::Error::new(e)))?
    }
}

impl poll::Host for DeadlineIo<'_> {
    fn poll(&mut self, pollables: Vec<Resource<Pollable>>) -> wasmtime::Result<Vec<u32>> {
        self.wait(async |t| async_poll::Host::poll(t, pollables).await)
    }
}

impl poll::HostPollable for DeadlineIo<'_> {
    fn ready(&mut self, pollable: Resource<Pollable>) -> wasmtime::Result<bool> {
        self.wait(async |t| async_poll::HostPollable::ready(t, pollable).await)
    }

    fn block(&mut self, pollable: Resource<Pollable>) -> wasmtime::Result<()> {
        self.wait(async |t| async_poll::HostPollable::block(t, pollable).await)
    }

    fn drop(&mut self, pollable: Resource<Pollable>) -> wasmtime::Result<()> {
        async_poll::HostPollable::drop(self.table, pollable)
    }
}

impl streams::Host for DeadlineIo<'_> {
    fn convert_stream_error(&mut self, err: StreamError) -> wasmtime::Result<streams::StreamError> {
        streams::Host::convert_stream_error(self.table, err)
    }
}

impl streams::HostOutputStream for DeadlineIo<'_> {
    fn drop(&mut self, stream: Resource<OutputStream>) -> wasmtime::Result<()> {
        // Dropping flushes what the stream still holds: bounded too.
        self.wait(async |t| AsyncOutput::drop(t, stream).await)
    }

    fn check_write(&mut self, stream: Resource<OutputStream>) -> StreamResult<u64> {
        AsyncOutput::check_write(self.table, stream)
    }

    fn write(&mut self, stream: Resource<OutputStream>, bytes: Vec<u8>) -> StreamResult<()> {
        AsyncOutput::write(self.table, stream, bytes)
    }

    fn blocking_write_and_flush(
        &mut self,
        stream: Resource<OutputStream>,
        bytes: Vec<u8>,
    ) -> StreamResult<()> {
        self.wait_stream(async |t| AsyncOutput::blocking_write_and_flush(t, stream, bytes).await)
    }

    fn blocking_write_zeroes_and_flush(
        &mut self,
        stream: Resource<OutputStream>,
        len: u64,
    ) -> StreamResult<()> {
        self.wait_stream(async |t| {
            AsyncOutput::blocking_write_zeroes_and_flush(t, stream, len).await
        })
    }

    fn subscribe(
        &mut self,
        stream: Resource<OutputStream>,
    ) -> wasmtime::Result<Resource<Pollable>> {
        AsyncOutput::subscribe(self.table, stream)
    }

    fn write_zeroes(&mut self, stream: Resource<OutputStream>, len: u64) -> StreamResult<()> {
        AsyncOutput::write_zeroes(self.table, stream, len)
    }

    fn flush(&mut self, stream: Resource<OutputStream>) -> StreamResult<()> {
        AsyncOutput::flush(self.table, stream)
    }

    fn blocking_flush(&mut self, stream: Resource<OutputStream>) -> StreamResult<()> {
        self.wait_stream(async |t| AsyncOutput::blocking_flush(t, stream).await)
    }

    fn splice(
        &mut self,
        dst: Resource<OutputStream>,
        src: Resource<InputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        AsyncOutput::splice(self.table, dst, src, len)
    }

    fn blocking_splice(
        &mut self,
        dst: Resource<OutputStream>,
        src: Resource<InputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        self.wait_stream(async |t| AsyncOutput::blocking_splice(t, dst, src, len).await)
    }
}

impl streams::HostInputStream for DeadlineIo<'_> {
    fn drop(&mut self, stream: Resource<InputStream>) -> wasmtime::Result<()> {
        self.wait(async |t| AsyncInput::drop(t, stream).await)
    }

    fn read(&mut self, stream: Resource<InputStream>, len: u64) -> StreamResult<Vec<u8>> {
        AsyncInput::read(self.table, stream, len)
    }

    fn blocking_read(&mut self, stream: Resource<InputStream>, len: u64) -> StreamResult<Vec<u8>> {
        self.wait_stream(async |t| AsyncInput::blocking_read(t, stream, len).await)
    }

    fn skip(&mut self, stream: Resource<InputStream>, len: u64) -> StreamResult<u64> {
        AsyncInput::skip(self.table, stream, len)
    }

    fn blocking_skip(&mut self, stream: Resource<InputStream>, len: u64) -> StreamResult<u64> {
        self.wait_stream(async |t| AsyncInput::blocking_skip(t, stream, len).await)
    }

    fn subscribe(&mut self, stream: Resource<InputStream>) -> wasmtime::Result<Resource<Pollable>> {
        AsyncInput::subscribe(self.table, stream)
    }
}

struct HasDeadlineIo;

impl HasData for HasDeadlineIo {
    type Data<'a> = DeadlineIo<'a>;
}

struct HasTable;

impl HasData for HasTable {
    type Data<'a> = &'a mut ResourceTable;
}

/// Links `wasi:io/{error,poll,streams}`: no authority of its own (a
/// pollable or stream comes only from another granted interface).
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    getter: fn(&mut T) -> DeadlineIo<'_>,
    table: fn(&mut T) -> &mut ResourceTable,
) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::bindings::sync::io::error::add_to_linker::<T, HasTable>(linker, table)?;
    poll::add_to_linker::<T, HasDeadlineIo>(linker, getter)?;
    streams::add_to_linker::<T, HasDeadlineIo>(linker, getter)
}
