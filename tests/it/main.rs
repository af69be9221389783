//! The integration tests: the `gatehouse` binary and library, end to end,
//! each test in a sealed temporary environment (`support::Env`). One
//! module per area; a test is named by the behaviour it checks, and the
//! issue or item it closes is in its doc comment.
//!
//! - `approvals`: the pending-approval queue and who may answer it.
//! - `authoring`: `inspect`, `manifest check`, `wit`, `new`, the schema.
//! - `cli`: the policy command line: registry, matrix, grants, tier 3,
//!   snapshots, exit codes.
//! - `conformance`: `gatehouse conformance` on this host, and its guests
//!   through a deliberately weak host built here (the cases turn `broken`).
//! - `decide`: every deny code `decide` produces, by name; the command
//!   screen, fuzzed against bash.
//! - `delegation`: `delegate:call`, to the caller's actor or another one.
//! - `docs`: the book's generated reference pages and the README's demo
//!   against the binary, and every test the docs name exists.
//! - `exec`: the OS sandbox of `code:exec`, with real commands.
//! - `fs_items`: the filesystem layer's rules, attacked (issue 12).
//! - `history`: the hash-chained audit (`gatehouse history verify`),
//!   tampered with, and pruned.
//! - `host`: the turn pipeline in the library: audit, deadlines, grants in
//!   a long-lived host.
//! - `isolation`: the degraded-mode report, degraded for real (seccomp,
//!   a weaker engine), and the fail-closed switch.
//! - `languages`: the `python` executor: code run under its grants.
//! - `mcp`: `gatehouse serve --mcp` spoken to with rmcp's own client.
//! - `p1`: preview-1 programs whose runtime owns all its memory (issue 30).
//! - `purity`: `src/policy/` names no I/O facility, and every module
//!   names only the layers below it.
//! - `sandbox`: executors as components: each claim tested by a guest
//!   that tries.
//! - `secrets`: the host's secrets and authority against executors and
//!   whoever starts the process (security round 3, items 1, 2 and 9).
//! - `serve`: `gatehouse serve --mcp` driven by a hand-written client.
//! - `state`: the state databases' schema versions (`gatehouse migrate`).
//! - `undo`, `undo_fs`: the journal and undo, of memory and of files.
//! - `wasi_cli`: ordinary WASI programs, as `wasmtime run` would run them.
//! - `support`: the helpers (not tests): the sealed environment, guests,
//!   commands, seccomp, a server.

// Tests fail by panicking: unwrap and expect are how they say what broke.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approvals;
mod authoring;
mod cli;
mod conformance;
mod daemon;
mod decide;
mod delegation;
mod docs;
mod exec;
mod fleet;
mod fs_items;
mod history;
mod host;
mod http;
mod isolation;
mod languages;
mod mcp;
mod p1;
mod purity;
mod sandbox;
mod secrets;
mod serve;
mod state;
mod support;
mod undo;
mod undo_fs;
mod values;
mod wasi_cli;
