//! The limits every run gets, and how hitting one is reported.
//!
//! Defaults (all changeable per run with [`Limits`] fields, from the CLI
//! with `--memory-mib`, `--deadline-ms`, `--output-kib`):
//!
//! | limit | default | code when hit |
//! |---|---|---|
//! | linear memory per instance | 64 MiB | `LIMIT_MEMORY` |
//! | table elements | 20 000 | `LIMIT_TABLE` |
//! | wall-clock deadline | 5 s (epoch ticks of 10 ms) | `LIMIT_DEADLINE` |
//! | stdout, stderr, each | 1 MiB | `LIMIT_OUTPUT` |
//! | host calls (hostcall fuel) | 1 000 000 | `LIMIT_HOSTCALLS` |
//! | resource-table entries | 4 096 | `LIMIT_RESOURCES` |
//! | bytes backed up for undo per turn | 256 MiB (`[limits] journal_mib`) | `LIMIT_JOURNAL` |
//! | instances / memories / tables per store | 32 / 8 / 32 | `LIMIT_MEMORY` / `LIMIT_TABLE` |

use serde::Serialize;

use crate::policy::DenyCode;

/// The limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Bytes of linear memory the guest may grow to (default 64 MiB); past it,
    /// `LIMIT_MEMORY`.
    pub memory_bytes: usize,
    /// Elements a table may grow to (default 20000); past it, `LIMIT_TABLE`.
    pub table_elements: usize,
    /// Wall-clock time of the run, in milliseconds (default 5000); past it,
    /// `LIMIT_DEADLINE`.
    pub deadline_ms: u64,
    /// Bytes kept of each of stdout and stderr (default 1 MiB); past it, `LIMIT_OUTPUT`.
    pub output_bytes: usize,
    /// Host calls the guest may make (default 1000000); past it, `LIMIT_HOSTCALLS`.
    pub hostcalls: u64,
    /// Host resources (handles) the guest may hold at once (default 4096); past it,
    /// `LIMIT_RESOURCES`.
    pub resources: usize,
    /// The bytes of files a turn may back up for undo (`[limits]
    /// journal_mib`); a change that would pass it is refused with
    /// `LIMIT_JOURNAL`.
    pub journal_bytes: u64,
    /// Keys one memory scope may hold (`[limits] memory_keys`); a new key
    /// past it is refused with `LIMIT_MEMORY_KEYS`.
    pub memory_keys: u64,
    /// HTTP requests one turn may send (`[limits] http_requests`); the
    /// one past it is refused with `LIMIT_HTTP_REQUESTS`.
    pub http_requests: u64,
    /// Response bytes one turn may receive over HTTP (`[limits]
    /// http_response_mib`); past it the body is cut and the run stopped
    /// with `LIMIT_HTTP_RESPONSE`.
    pub http_response_bytes: u64,
}

/// The default of `[limits] journal_mib`: 256 MiB.
pub const DEFAULT_JOURNAL_BYTES: u64 = 256 << 20;

/// The default of `[limits] memory_keys`.
pub const DEFAULT_MEMORY_KEYS: u64 = 10_000;

/// The default of `[limits] http_requests`.
pub const DEFAULT_HTTP_REQUESTS: u64 = 100;

/// The default of `[limits] http_response_mib`: 64 MiB.
pub const DEFAULT_HTTP_RESPONSE_BYTES: u64 = 64 << 20;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            memory_bytes: 64 << 20,
            table_elements: 20_000,
            deadline_ms: 5_000,
            output_bytes: 1 << 20,
            hostcalls: 1_000_000,
            resources: 4_096,
            journal_bytes: DEFAULT_JOURNAL_BYTES,
            memory_keys: DEFAULT_MEMORY_KEYS,
            http_requests: DEFAULT_HTTP_REQUESTS,
            http_response_bytes: DEFAULT_HTTP_RESPONSE_BYTES,
        }
    }
}

/// The epoch tick: the deadline's resolution.
pub const EPOCH_TICK_MS: u64 = 10;

impl Limits {
    /// The deadline in epoch ticks (at least one).
    pub fn deadline_ticks(&self) -> u64 {
        self.deadline_ms.div_ceil(EPOCH_TICK_MS).max(1)
    }
}

/// A limit that stopped a run, with what was exceeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitHit {
    /// The limit's deny code.
    pub code: DenyCode,
    /// What was exceeded, in words.
    pub detail: String,
}

impl LimitHit {
    /// A hit of `code`, with `detail`.
    pub fn new(code: DenyCode, detail: impl Into<String>) -> LimitHit {
        LimitHit {
            code,
            detail: detail.into(),
        }
    }
}

/// The store's resource limiter: wasmtime's [`wasmtime::StoreLimits`],
/// remembering which limit refused a growth, so that a trap is classified
/// from the limiter's own state rather than from an error message.
pub struct GuardedLimits {
    inner: wasmtime::StoreLimits,
    /// A memory growth was refused.
    pub memory_hit: bool,
    /// A table growth was refused.
    pub table_hit: bool,
}

impl GuardedLimits {
    /// The limiter of a run with `limits`: memory, table elements, and at
    /// most as many instances, memories and tables per store as the pools
    /// allow one component (64, 8, 32); a refused growth traps.
    pub fn new(limits: &Limits) -> GuardedLimits {
        GuardedLimits {
            inner: wasmtime::StoreLimitsBuilder::new()
                .memory_size(limits.memory_bytes)
                .table_elements(limits.table_elements)
                .instances(PER_COMPONENT_CORE_INSTANCES as usize)
                .memories(PER_COMPONENT_MEMORIES as usize)
                .tables(PER_COMPONENT_TABLES as usize)
                .trap_on_grow_failure(true)
                .build(),
            memory_hit: false,
            table_hit: false,
        }
    }
}

impl wasmtime::ResourceLimiter for GuardedLimits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let r = self.inner.memory_growing(current, desired, maximum);
        if !matches!(r, Ok(true)) {
            self.memory_hit = true;
        }
        r
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.memory_hit = true;
        self.inner.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let r = self.inner.table_growing(current, desired, maximum);
        if !matches!(r, Ok(true)) {
            self.table_hit = true;
        }
        r
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.table_hit = true;
        self.inner.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}

/// What one component instance may have, in every pool (and, through
/// `GuardedLimits`, in every store). 64 core instances: a componentize-py
/// component has 38.
pub(crate) const PER_COMPONENT_CORE_INSTANCES: u32 = 64;
pub(crate) const PER_COMPONENT_MEMORIES: u32 = 8;
pub(crate) const PER_COMPONENT_TABLES: u32 = 32;
