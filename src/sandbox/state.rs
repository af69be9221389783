//! The per-run store data: WASI context, resource table, limits, and the
//! state of each gatehouse host interface that was linked.

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::delegate::DelegateBinding;
use super::log::LogState;
use super::memory::MemoryBinding;

pub struct HostState {
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    /// network:sites: the granted patterns and the addresses resolved so
    /// far (empty, and nothing linked, without the grant).
    pub network: super::network::Sites,
    pub limits: super::limits::GuardedLimits,
    pub log: LogState,
    /// Set when the plan grants memory:read or memory:write.
    pub memory: Option<MemoryBinding>,
    /// Set when the plan grants delegate:call.
    pub delegate: Option<DelegateBinding>,
    /// Set when the plan allows code:exec on some program.
    pub exec: Option<super::exec::ExecBinding>,
    /// Host calls left before `LIMIT_HOSTCALLS`.
    pub hostcalls_left: u64,
    pub hostcalls_exhausted: bool,
    /// Wall-clock time spent in delegated calls, which the run's own
    /// deadline does not count.
    pub delegated: std::time::Duration,
    /// The journaling filesystem layer: finer globs, protected paths,
    /// backups and the write-ahead journal of file operations.
    pub fs: super::journal_fs::FsLayer,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
