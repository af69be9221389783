//! The sandbox: a wasmtime engine, and a run built only from a [`Plan`].
//!
//! One module per capability binding, each turning one granted capability
//! into WASI context or linker entries: [`fs`] (fs:read / fs:write
//! preopens), [`journal_fs`] (`wasi:filesystem/types` through gatehouse's
//! layer: the globs finer than a preopen, protected paths, backups and the
//! write-ahead journal for undo), [`env`] (env:read), [`clocks`] (time:read, else frozen),
//! [`log`] (baseline), [`memory`] (memory:read/write), [`human`]
//! (human:ask), [`delegate`] (delegate:call), [`network`] (network:sites:
//! lookup of granted names, connect only to what they resolved to), [`exec`]
//! (code:exec: host commands in the OS sandbox of `crate::exec`),
//! [`wasi`] (the authority-free baseline and the environment). [`imports`] compares a component's imports with its plan
//! before any instance exists.

mod bindings;
pub mod clocks;
pub mod deadline_io;
pub mod delegate;
pub mod engine;
pub mod env;
pub mod exec;
pub mod fs;
pub mod human;
pub mod imports;
pub mod isolation;
pub mod journal_fs;
pub mod limits;
pub mod log;
pub mod memory;
pub mod network;
mod output;
pub mod p1;
pub mod plan;
pub mod run;
pub mod services;
mod state;
pub mod table;
pub mod wasi;

pub use crate::exec::pinned::{PinError, PinnedDir};
pub use engine::{Counters, EngineKind, EngineProfile, LoadError, Sandbox};
pub use isolation::{IsolationReport, OnDegraded};
pub use limits::{LimitHit, Limits, DEFAULT_JOURNAL_BYTES, DEFAULT_MEMORY_KEYS};
pub use plan::{Allowed, DirAccess, MemoryGrant, Plan, Preopen};
pub use run::{
    execute, GuestResult, HostStdin, RunError, RunIo, RunReport, StdinFrom, Stopped, TrapFrame,
};
pub use services::{
    Asker, AskerRef, AuditSink, CancelHandle, CommandScreen, NestedError, NestedTurn, RunServices,
};
