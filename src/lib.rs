#![warn(missing_docs)]
//! gatehouse: run executors as WebAssembly components in a sandbox built
//! from a deny-by-default policy.
//!
//! Every top-level module:
//!
//! - [`policy`] — the pure gate: registry, matrix, requests, `decide`.
//! - [`manifest`] — `executor.toml` and its validator.
//! - [`config`] — `gatehouse.toml`, actors, path resolution, file watches.
//! - [`snapshot`] — `policy.json`: prepare and verify.
//! - [`host`] — the host: one turn pipeline for every caller (gate,
//!   approvals, the run, the audit and denial logs, the pending queue).
//! - [`sandbox`] — the wasmtime engine and a run built only from a `Plan`:
//!   one binding per capability, limits, the journaling filesystem layer,
//!   the isolation report.
//! - [`exec`] — the OS sandbox of `code:exec`: a host command as a
//!   confined child (Landlock, seccomp, rlimits, timeout, capped output).
//! - [`state`] — what a host keeps beyond one turn, each kind one trait
//!   with its SQLite and PostgreSQL implementations: grants, approvals,
//!   memory, the hash-chained audit, a fleet's tasks and history index.
//! - [`undo`] — turn history, the write-ahead journal, undo and pruning.
//! - [`terminal`] — the controlling terminal: prompts, escaped guest text,
//!   answers read under a deadline.
//! - [`util`] — the leaf every layer may use: locks that survive a
//!   panicking holder, file digests, message helpers.
//! - [`tier3`] — the deny-path suite.
//! - [`conformance`] — the sandbox suite: attacks that must hold, programs
//!   that must succeed.
//! - [`authoring`] — for people who write executors: inspect, coverage,
//!   the WIT package, the crate template, the manifest schema.
//! - [`serve`] — executors as MCP tools (`gatehouse serve --mcp`).
//! - [`daemon`] — one host serving many agents on a UNIX socket, each as
//!   the actor its account maps to, and the approval queue answered there
//!   by a person's account (`gatehouse daemon`, `connect`).
//!
//! The binary (`src/main.rs`, `src/cli/`) is a thin command line over
//! these; the book under `docs/` describes them for users.

pub mod authoring;
pub mod config;
pub mod conformance;
pub mod daemon;
pub mod exec;
pub mod host;
pub mod manifest;
pub mod policy;
pub mod sandbox;
pub mod serve;
pub mod snapshot;
pub mod state;
pub mod terminal;
pub mod tier3;
pub mod undo;
pub mod util;
