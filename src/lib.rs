//! gatehouse: run executors as WebAssembly components in a sandbox built
//! from a deny-by-default policy.
//!
//! - [`policy`] — the pure gate: registry, matrix, requests, `decide`.
//! - [`grants`] — the SQLite grant store and `effective_outcome`.
//! - [`manifest`] — `executor.toml` and its validator.
//! - [`config`] — `gatehouse.toml`, actors, path resolution.
//! - [`snapshot`] — `policy.json`: prepare and verify.
//! - [`tier3`] — the deny-path suite.
//! - [`authoring`] — for people who write executors: inspect, coverage,
//!   the WIT package, the crate template, the manifest schema.
//! - [`conformance`] — the sandbox suite: attacks that must hold, programs
//!   that must succeed.
//! - [`serve`] — executors as MCP tools (`gatehouse serve --mcp`).
//! - [`terminal`] — the controlling terminal: prompts, escaped guest text,
//!   answers read under a deadline.
//! - [`util`] — the leaf every layer may use: locks that survive a
//!   panicking holder, file digests, message helpers.

pub mod authoring;
pub mod config;
pub mod conformance;
pub mod exec;
pub mod grants;
pub mod host;
pub mod manifest;
pub mod memory;
pub mod policy;
pub mod sandbox;
pub mod serve;
pub mod snapshot;
pub mod terminal;
pub mod tier3;
pub mod undo;
pub mod util;
