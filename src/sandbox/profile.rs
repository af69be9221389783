//! The engine's settings, apart from the engine: which kind of host it
//! serves ([`EngineKind`]) and what the isolation report depends on
//! ([`EngineProfile`]). The engine (`super::engine`) is built from a
//! profile, and the isolation probe (`super::isolation`) reads one: both
//! name this room, neither names the other's.

use serde::Serialize;
use wasmtime::{Engine, PoolingAllocationConfig};

use super::limits::{
    Limits, PER_COMPONENT_CORE_INSTANCES, PER_COMPONENT_MEMORIES, PER_COMPONENT_TABLES,
};

/// The kind of host an engine serves: it decides how instances are
/// allocated, and nothing else (the guards, the traps, the deadlines and
/// the memory caps are the same for both).
///
/// [`HostOptions::new`](crate::host::HostOptions::new) picks
/// [`EngineKind::LongLived`]; `gatehouse run` picks [`EngineKind::OneShot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// Many turns in one process (a library embedding, the benches, a
    /// server): the pooling allocator with 128 linear-memory slots, each
    /// slot's first 1 MiB of memory and 64 KiB of table kept resident
    /// between instances and reset in place (`pagemap_scan` where the
    /// kernel has it, Linux ≥ 6.7), so that a warm turn costs no page
    /// faults, no `madvise` and no TLB shootdowns. The default.
    #[default]
    LongLived,
    /// One turn, then the process exits (`gatehouse run`): the pooling
    /// allocator sized for one turn and the nested turns it may delegate
    /// to (`MAX_DEPTH` + 1 instances), nothing kept resident, no
    /// `pagemap_scan` probe: less to reserve and set up at start, which is
    /// most of what a one-shot process spends in the engine.
    OneShot,
}

impl EngineKind {
    /// The kind's name in reports (`long_lived`, `one_shot`).
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::LongLived => "long_lived",
            EngineKind::OneShot => "one_shot",
        }
    }

    /// What the pool holds at once: component instances, core instances,
    /// linear memories, tables. A one-shot pool holds a turn and every
    /// nested turn it may delegate to, each with as many core instances,
    /// memories and tables as one component may have (the same
    /// per-component bounds as a long-lived pool: a component that runs
    /// in one runs in the other).
    pub(super) fn totals(self) -> (u32, u32, u32, u32) {
        match self {
            // Core instances never bind before component instances do:
            // each of the 64 may have its per-component maximum (an
            // interpreter has about 40: 256 in all let only six CPythons
            // run at once). The count costs nothing until used; memories
            // and tables are the slots the pool maps up front.
            EngineKind::LongLived => (64, 64 * PER_COMPONENT_CORE_INSTANCES, 128, 256),
            EngineKind::OneShot => {
                let n = super::delegate::MAX_DEPTH + 1;
                (
                    n,
                    n * PER_COMPONENT_CORE_INSTANCES,
                    n * PER_COMPONENT_MEMORIES,
                    n * PER_COMPONENT_TABLES,
                )
            }
        }
    }
}

/// The engine settings the isolation report depends on: what
/// [`super::Sandbox::with_profile`] builds, and, through [`EngineProfile::of`],
/// what a built engine reports it runs with (`Engine::get_*`).
///
/// Defaults ([`EngineProfile::new`]): signals-based traps on, a 4 GiB
/// reservation and a 32 MiB guard region before and after every linear
/// memory, epoch interruption on, the pooling allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EngineProfile {
    /// Whether out-of-bounds accesses trap through signal handlers (`[engine]
    /// signals_based_traps`).
    pub signals_based_traps: bool,
    /// Bytes reserved for each linear memory (default [`EngineProfile::RESERVATION`]).
    pub memory_reservation: u64,
    /// Bytes of the guard region after each linear memory (`[engine] guard_bytes`, default
    /// [`EngineProfile::GUARD_BYTES`]).
    pub memory_guard_size: u64,
    /// Whether a guard region also comes before each linear memory.
    pub guard_before_linear_memory: bool,
    /// Whether runs are interrupted by epoch (how deadlines and cancels stop a guest).
    pub epoch_interruption: bool,
    /// The pool's bound on every linear memory; `None`: no pooling
    /// allocator (memories allocated on demand).
    pub pool_max_memory_size: Option<usize>,
    /// The pool's number of linear-memory slots; `None` without the pooling allocator.
    pub pool_total_memories: Option<u32>,
    /// The pool's bound on table elements; `None` without the pooling allocator.
    pub pool_table_elements: Option<usize>,
    /// The kind of host the engine was built for.
    pub kind: EngineKind,
    /// How much of each memory slot stays resident between instances.
    pub pool_memory_keep_resident: Option<usize>,
    /// Whether slots are reset through `pagemap_scan` (asked for, and the
    /// kernel has it).
    pub pool_pagemap_scan: Option<bool>,
}

impl EngineProfile {
    /// The default reservation of a linear memory: the whole 32-bit index
    /// space.
    pub const RESERVATION: u64 = 4 << 30;
    /// The default guard region.
    pub const GUARD_BYTES: u64 = 32 << 20;

    /// The default profile (a long-lived host), the pool bounding every
    /// memory at `max_memory`.
    pub fn new(max_memory: usize) -> EngineProfile {
        EngineProfile::for_kind(EngineKind::LongLived, max_memory)
    }

    /// The default profile of a `kind` of host, the pool bounding every
    /// memory at `max_memory`.
    pub fn for_kind(kind: EngineKind, max_memory: usize) -> EngineProfile {
        let long_lived = kind == EngineKind::LongLived;
        EngineProfile {
            signals_based_traps: true,
            memory_reservation: Self::RESERVATION,
            memory_guard_size: Self::GUARD_BYTES,
            guard_before_linear_memory: true,
            epoch_interruption: true,
            pool_max_memory_size: Some(max_memory),
            pool_total_memories: Some(kind.totals().2),
            pool_table_elements: Some(Limits::default().table_elements.max(20_000)),
            kind,
            pool_memory_keep_resident: Some(if long_lived { 1 << 20 } else { 0 }),
            pool_pagemap_scan: Some(
                long_lived && PoolingAllocationConfig::is_pagemap_scan_available(),
            ),
        }
    }

    /// One line: the kind, the allocator and how its slots are reused.
    pub fn summary(&self) -> String {
        match self.pool_max_memory_size {
            None => format!("{}: on-demand allocator", self.kind.as_str()),
            Some(_) => format!(
                "{}: pooling allocator, {} memory slots, {} KiB of each kept resident, pagemap_scan {}",
                self.kind.as_str(),
                self.pool_total_memories.unwrap_or(0),
                self.pool_memory_keep_resident.unwrap_or(0) >> 10,
                if self.pool_pagemap_scan == Some(true) { "on" } else { "off" }
            ),
        }
    }

    /// The engine a host's settings ask for (`[engine]` of
    /// `gatehouse.toml`, passed in as values: `None` keeps the default),
    /// its pool bounding every memory at `max_memory`.
    pub fn configured(
        signals_based_traps: Option<bool>,
        guard_bytes: Option<u64>,
        kind: EngineKind,
        max_memory: usize,
    ) -> EngineProfile {
        let mut p = EngineProfile::for_kind(kind, max_memory);
        if let Some(on) = signals_based_traps {
            p = p.signals_based_traps(on);
        }
        if let Some(bytes) = guard_bytes {
            p = p.guard_bytes(bytes);
        }
        p
    }

    /// Turns signals-based traps on or off.
    ///
    /// # Security
    /// Off, wasmtime installs no signal handlers: compiled code checks
    /// bounds itself and a fault it misses crashes the host. The isolation
    /// report then says `signals_based_traps` and `linear_memory_guards`
    /// are `partial`.
    pub fn signals_based_traps(mut self, on: bool) -> EngineProfile {
        self.signals_based_traps = on;
        self
    }

    /// Sets the guard region (before and after each memory; 0: none).
    ///
    /// # Security
    /// With 0, out-of-bounds accesses are stopped by compiled bounds checks
    /// alone; the report says `linear_memory_guards` is `partial`.
    pub fn guard_bytes(mut self, bytes: u64) -> EngineProfile {
        self.memory_guard_size = bytes;
        self.guard_before_linear_memory = bytes > 0;
        self
    }

    /// What a built engine runs with, read back from it (`kind`: what it
    /// was built for).
    pub fn of(engine: &Engine, kind: EngineKind) -> EngineProfile {
        let pool = engine.get_pooling_config();
        EngineProfile {
            signals_based_traps: engine.get_signals_based_traps(),
            memory_reservation: engine.get_memory_reservation(),
            memory_guard_size: engine.get_memory_guard_size(),
            guard_before_linear_memory: engine.get_guard_before_linear_memory(),
            epoch_interruption: engine.get_epoch_interruption(),
            pool_max_memory_size: pool.map(|p| p.get_max_memory_size()),
            pool_total_memories: pool.map(|p| p.get_total_memories()),
            pool_table_elements: pool.map(|p| p.get_table_elements()),
            kind,
            pool_memory_keep_resident: pool.map(|p| p.get_memory_keep_resident()),
            pool_pagemap_scan: pool.map(|p| {
                p.get_pagemap_scan() != wasmtime::Enabled::No
                    && PoolingAllocationConfig::is_pagemap_scan_available()
            }),
        }
    }
}
