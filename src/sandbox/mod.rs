//! The sandbox: a wasmtime engine, and a run built only from a [`Plan`].
//!
//! One unit per capability, in [`bindings`] (one file each, shaped like a
//! Spin factor): its part of the [`Plan`], how a run prepares its state
//! from that part, and how its interfaces are linked. [`table`] says which
//! binding serves which interface and needs which capability, which drives
//! both the import check ([`imports`], before any instance exists) and the
//! linker. [`journal_fs`] is the filesystem layer behind
//! `wasi:filesystem/types`: the globs finer than a preopen, protected
//! paths, backups and the write-ahead journal for undo. [`run`] builds and
//! runs one turn's store; a command executor runs in the OS sandbox of
//! `crate::exec` instead.

pub mod alarm;
pub mod bindings;
mod command;
pub mod deadline_io;
pub mod engine;
pub mod imports;
pub mod isolation;
pub mod journal_fs;
pub mod limits;
mod memo;
mod output;
pub mod p1;
pub mod plan;
pub mod profile;
pub mod run;
pub mod services;
mod state;
pub mod table;

pub use crate::exec::pinned::{PinError, PinnedDir};
pub use bindings::{
    clocks, config, delegate, env, exec, fs, http, human, log, memory, network, wasi,
};
pub use bindings::{Environment, HostState, Open, OpenError, Parts, Runtimes};
pub use engine::{Counters, LoadError, Sandbox};
pub use isolation::{IsolationReport, OnDegraded};
pub use limits::{
    LimitHit, Limits, DEFAULT_HTTP_REQUESTS, DEFAULT_HTTP_RESPONSE_BYTES, DEFAULT_JOURNAL_BYTES,
    DEFAULT_MEMORY_KEYS,
};
pub use plan::{Allowed, DirAccess, Plan, Preopen, Runnable};
pub use profile::{EngineKind, EngineProfile};
pub use run::{
    execute, GuestResult, HostStdin, RunError, RunIo, RunReport, StdinFrom, Stopped, TrapFrame,
};
pub use services::{
    Asker, AskerRef, AuditSink, CancelHandle, CommandScreen, NestedError, NestedTurn, RunServices,
};
