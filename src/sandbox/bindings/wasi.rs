//! Linking WASI, interface by interface (the rows of [`crate::sandbox::table`]): an
//! interface that is not linked is absent, not stubbed.

use wasmtime::component::Linker;
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
use wasmtime_wasi::p2::bindings as p2;
use wasmtime_wasi::random::WasiRandom;

use crate::sandbox::state::HostState;

/// `wasi:clocks`: real with `time:read`, else frozen (the context decides).
pub fn link_clocks(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    p2::clocks::wall_clock::add_to_linker::<HostState, WasiClocks>(l, HostState::clocks)?;
    p2::clocks::monotonic_clock::add_to_linker::<HostState, WasiClocks>(l, HostState::clocks)
}

/// `wasi:random` (no authority).
pub fn link_random(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    p2::random::random::add_to_linker::<HostState, WasiRandom>(l, |t| t.wasi.random())?;
    p2::random::insecure::add_to_linker::<HostState, WasiRandom>(l, |t| t.wasi.random())?;
    p2::random::insecure_seed::add_to_linker::<HostState, WasiRandom>(l, |t| t.wasi.random())
}

/// `wasi:cli` exit, stdio into capped pipes and the terminal queries.
pub fn link_stdio(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    p2::cli::exit::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    p2::cli::stdin::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    p2::cli::stdout::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    p2::cli::stderr::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    p2::cli::terminal_input::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    p2::cli::terminal_output::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    p2::cli::terminal_stdin::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    p2::cli::terminal_stdout::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    p2::cli::terminal_stderr::add_to_linker::<HostState, WasiCli>(l, HostState::cli)
}

/// `wasi:filesystem/preopens`: the preopened directories of the context
/// (only those the plan's fs grants made).
pub fn link_preopens(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    p2::filesystem::preopens::add_to_linker::<HostState, WasiFilesystem>(l, HostState::filesystem)
}

/// `wasi:cli/environment`: the granted variables only (none without
/// `env:read`), and for commands their arguments.
///
/// # Security
/// Hands the guest the variables the context was built with; build the
/// context from the plan's `env:read` names only.
pub fn link_environment(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    p2::cli::environment::add_to_linker::<HostState, WasiCli>(l, HostState::cli)
}
