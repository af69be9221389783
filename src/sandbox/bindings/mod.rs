//! The host side of each capability, one unit per file, shaped like a Spin
//! factor.
//!
//! A unit has three parts, each in its file:
//!
//! - its **part** of the [`Plan`](super::Plan) (`FsPart`, `MemoryPart`,
//!   …): what the gate allowed it, built by the host's need function for
//!   the capability (`crate::host::needs`), empty when nothing was;
//! - [`Unit::prepare`], which turns the part into the unit's state in the
//!   run's store (and gives the WASI context what the part allows: a
//!   preopen, a variable, a clock), and [`Unit::describe`] for the run
//!   report;
//! - `add_to_linker`, which the binding table ([`super::table`]) calls
//!   only when the plan grants the unit's capability.
//!
//! [`units!`] composes them: the plan's [`Parts`] and the store's
//! [`HostState`] hold one field per unit, so a run is built by iterating
//! over the units, and a new capability is one file here, one need
//! function in the host, one row below and one row in the table.

use std::borrow::Cow;

use serde::Serialize;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::plan::Plan;
use super::services::{CancelHandle, RunServices};

pub mod clocks;
pub mod delegate;
pub mod env;
pub mod exec;
pub mod fs;
pub mod human;
pub mod log;
pub mod memory;
pub mod network;
pub mod wasi;
mod wit;

pub use wit::ExecutorHostPre;
pub use wit::GuestError;

/// What a unit's `prepare` is given besides its own part.
pub struct Prepare<'a> {
    /// The whole plan, for a unit that reads another's part (a command's
    /// roots are the filesystem unit's preopens).
    pub plan: &'a Plan,
    pub services: &'a RunServices,
    /// The run's WASI context, before it is built.
    pub wasi: &'a mut WasiCtxBuilder,
    /// When the run ends.
    pub deadline: std::time::Instant,
}

/// One capability's host side in a run.
pub trait Unit {
    /// What the plan holds for it: what the gate allowed, empty when
    /// nothing was.
    type Part: Clone + Default + std::fmt::Debug + Serialize;
    /// Its state in the run's store.
    type State;

    /// Builds the run's state from `part`.
    ///
    /// # Security
    /// Whatever the state holds, a linked interface hands to the guest:
    /// build it from the part alone (and the services the host gave).
    fn prepare(part: &Self::Part, cx: &mut Prepare<'_>) -> Result<Self::State, String>;

    /// What the run report says the unit gave the guest.
    fn describe(part: &Self::Part, state: &Self::State, out: &mut Vec<Cow<'static, str>>);
}

/// Declares the units: the plan's [`Parts`], the store's [`HostState`],
/// and how a run prepares and describes them, one field per unit.
macro_rules! units {
    ($($(#[$doc:meta])* $field:ident: $unit:ty,)*) => {
        /// What a plan holds for each unit.
        #[derive(Debug, Clone, Default, Serialize)]
        pub struct Parts {
            $($(#[$doc])* pub $field: <$unit as Unit>::Part,)*
        }

        /// The store data of one run: the WASI context, the resource
        /// table, the run's limits and deadline, and each unit's state.
        pub struct HostState {
            pub wasi: WasiCtx,
            pub table: ResourceTable,
            pub limits: super::limits::GuardedLimits,
            /// Host calls left before `LIMIT_HOSTCALLS`.
            pub hostcalls_left: u64,
            pub hostcalls_exhausted: bool,
            /// When the run ends, whatever it is doing: wasm code is
            /// interrupted by the epoch check, waits in host calls end
            /// there (see `deadline_io`), commands and callees get only
            /// what is left.
            pub deadline: std::time::Instant,
            /// The turn's cancel switch, checked with the deadline.
            pub cancel: CancelHandle,
            $($(#[$doc])* pub $field: <$unit as Unit>::State,)*
        }

        /// Each unit's state, prepared from its part in order.
        pub(crate) struct States {
            $($field: <$unit as Unit>::State,)*
        }

        impl States {
            pub(crate) fn prepare(cx: &mut Prepare<'_>) -> Result<States, String> {
                let parts = cx.plan.parts();
                Ok(States {
                    $($field: <$unit as Unit>::prepare(&parts.$field, cx)?,)*
                })
            }

            pub(crate) fn describe(&self, parts: &Parts, out: &mut Vec<Cow<'static, str>>) {
                $(<$unit as Unit>::describe(&parts.$field, &self.$field, out);)*
            }

            /// The store data of a run with these states.
            pub(crate) fn into_host_state(self, core: Core) -> HostState {
                HostState {
                    wasi: core.wasi,
                    table: core.table,
                    limits: core.limits,
                    hostcalls_left: core.hostcalls_left,
                    hostcalls_exhausted: false,
                    deadline: core.deadline,
                    cancel: core.cancel,
                    $($field: self.$field,)*
                }
            }
        }
    };
}

/// What every run's store holds whatever was granted.
pub(crate) struct Core {
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub limits: super::limits::GuardedLimits,
    pub hostcalls_left: u64,
    pub deadline: std::time::Instant,
    pub cancel: CancelHandle,
}

units! {
    /// `fs:read` / `fs:write`: preopens, the journaling layer's globs.
    fs: fs::Fs,
    /// `env:read`: the granted variables.
    env: env::Env,
    /// `time:read`: real clocks, else frozen ones.
    clocks: clocks::Clocks,
    /// `network:sites`: the granted hosts.
    network: network::NetworkSites,
    /// Baseline: the guest's log lines.
    log: log::Log,
    /// `memory:read` / `memory:write`: one scope.
    memory: memory::Memory,
    /// `human:ask`: the asker.
    human: human::Human,
    /// `delegate:call`: the callees.
    delegate: delegate::Delegate,
    /// `code:exec`: the programs.
    exec: exec::Exec,
}

impl HostState {
    /// The view of `wasi:io` and the other interfaces that wait: the
    /// table, and the run's deadline and cancel switch.
    pub(super) fn io_view(&mut self) -> super::deadline_io::DeadlineIo<'_> {
        super::deadline_io::DeadlineIo {
            table: &mut self.table,
            deadline: self.deadline,
            cancel: &self.cancel,
        }
    }

    pub(super) fn table_mut(&mut self) -> &mut ResourceTable {
        &mut self.table
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
