//! Integration tests of issue 3: the policy core, the grant store and the
//! policy command line.
//!
//! - `cli`: the binary, end to end, in a sealed temporary environment.
//! - `conformance`: `gatehouse conformance` on this host, and its guests
//!   through a deliberately weak host built here (the cases turn `broken`).
//! - `decide`: every deny code `decide` produces, by name.
//! - `purity`: `src/policy/` names no I/O facility.
//! - `mcp`: `gatehouse serve --mcp` spoken to with rmcp's own client.
//! - `isolation`: the degraded-mode report, degraded for real (seccomp,
//!   a weaker engine), and the fail-closed switch.

// Tests fail by panicking: unwrap and expect are how they say what broke.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approvals;
mod authoring;
mod cli;
mod conformance;
mod decide;
mod delegation;
mod exec;
mod fs_items;
mod host;
mod isolation;
mod mcp;
mod purity;
mod sandbox;
mod serve;
mod support;
mod undo;
mod undo_fs;
mod wasi_cli;
