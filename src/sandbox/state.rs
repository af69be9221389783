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
    pub human: super::human::HumanState,
    /// Set when the plan grants memory:read or memory:write.
    pub memory: Option<MemoryBinding>,
    /// Set when the plan grants delegate:call.
    pub delegate: Option<DelegateBinding>,
    /// Set when the plan allows code:exec on some program.
    pub exec: Option<super::exec::ExecBinding>,
    /// Host calls left before `LIMIT_HOSTCALLS`.
    pub hostcalls_left: u64,
    pub hostcalls_exhausted: bool,
    /// When the run ends, whatever it is doing: wasm code is interrupted
    /// by the epoch check, waits in host calls end there (see
    /// `deadline_io`), commands and callees get only what is left.
    pub deadline: std::time::Instant,
    /// The turn's cancel switch, checked with the deadline.
    pub cancel: super::services::CancelHandle,
    /// The journaling filesystem layer: finer globs, protected paths,
    /// backups and the write-ahead journal of file operations.
    pub fs: super::journal_fs::FsLayer,
}

/// Each binding's view of the store: the binding sees its own state only.
impl HostState {
    pub(super) fn io_view(&mut self) -> super::deadline_io::DeadlineIo<'_> {
        super::deadline_io::DeadlineIo {
            table: &mut self.table,
            deadline: self.deadline,
            cancel: &self.cancel,
        }
    }

    pub(super) fn table_mut(&mut self) -> &mut wasmtime::component::ResourceTable {
        &mut self.table
    }

    pub(super) fn log_view(&mut self) -> super::log::LogView<'_> {
        super::log::LogView {
            state: &mut self.log,
        }
    }

    pub(super) fn memory_view(&mut self) -> super::memory::MemoryView<'_> {
        super::memory::MemoryView {
            binding: self.memory.as_ref(),
        }
    }

    pub(super) fn human_view(&mut self) -> super::human::HumanView<'_> {
        super::human::HumanView {
            state: &mut self.human,
            deadline: self.deadline,
        }
    }

    pub(super) fn delegate_view(&mut self) -> super::delegate::DelegateView<'_> {
        super::delegate::DelegateView {
            binding: self.delegate.as_ref(),
            deadline: self.deadline,
        }
    }

    pub(super) fn exec_view(&mut self) -> super::exec::ExecView<'_> {
        super::exec::ExecView {
            binding: self.exec.as_mut(),
            deadline: self.deadline,
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
