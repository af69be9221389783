//! The one engine of the process, its compiled-component cache, and the
//! counters that prove what was (not) done.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use wasmtime::component::Component;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::limits::{Limits, EPOCH_TICK_MS};
use crate::policy::snapshot::sha256_hex;

/// What the engine path did; a denied turn must leave every counter at 0.
#[derive(Debug, Default)]
pub struct Counters {
    /// Components compiled from wasm (cache misses).
    pub compiled: AtomicU64,
    /// Components loaded (compiled or from the cache).
    pub loaded: AtomicU64,
    /// Stores created (instantiations attempted).
    pub stores: AtomicU64,
}

/// The wasmtime engine, configured once for containment and speed:
/// pooling allocator with copy-on-write memory images, epoch interruption
/// (a deadline per run), explicit bounds on instances, memories and tables.
///
/// Defaults: the limits of [`Limits::default`] bound the pool; compiled
/// components are cached under `cache_dir` keyed by the component's sha256
/// and the engine's compatibility hash.
pub struct Sandbox {
    engine: Engine,
    cache_dir: PathBuf,
    counters: Arc<Counters>,
    ticker: OnceLock<()>,
}

/// Why a component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read component `{path}`: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("`{path}` is not a valid component or module: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

impl Sandbox {
    /// Builds the engine. `max_memory` bounds every linear memory in the
    /// pool; a run's own cap ([`Limits::memory_bytes`]) may be lower.
    pub fn new(cache_dir: &Path, max_memory: usize) -> wasmtime::Result<Sandbox> {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(64)
            .total_core_instances(256)
            .total_memories(128)
            .total_tables(256)
            .max_memories_per_component(8)
            .max_tables_per_component(32)
            .max_core_instances_per_component(32)
            .max_memory_size(max_memory)
            .table_elements(Limits::default().table_elements.max(20_000))
            .linear_memory_keep_resident(1 << 20)
            .table_keep_resident(1 << 16)
            .pagemap_scan(wasmtime::Enabled::Auto);
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .memory_init_cow(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config)?;
        Ok(Sandbox {
            engine,
            cache_dir: cache_dir.to_path_buf(),
            counters: Arc::new(Counters::default()),
            ticker: OnceLock::new(),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Starts the epoch ticker (once): the clock of every deadline.
    pub(crate) fn start_ticker(&self) {
        self.ticker.get_or_init(|| {
            let engine = self.engine.clone();
            std::thread::spawn(move || loop {
                std::thread::sleep(std::time::Duration::from_millis(EPOCH_TICK_MS));
                engine.increment_epoch();
            });
        });
    }

    fn engine_hash(&self) -> String {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut h);
        format!("{:016x}", h.finish())
    }

    /// Loads a component (turning a preview-1 core module into one with the
    /// adapter first), from the cache when possible. Returns the component
    /// and whether it came from the cache.
    pub(crate) fn load(
        &self,
        path: &Path,
        bytes: &[u8],
        digest: &str,
    ) -> Result<(Component, bool), LoadError> {
        self.counters.loaded.fetch_add(1, Ordering::Relaxed);
        let entry = self
            .cache_dir
            .join(format!("{digest}-{}.cwasm", self.engine_hash()));
        if let Some(c) = self.cached(&entry) {
            return Ok((c, true));
        }
        let invalid = |e: &dyn std::fmt::Display| LoadError::Invalid {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        let component_bytes;
        let wasm: &[u8] = if wasmparser::Parser::is_core_wasm(bytes) {
            component_bytes = super::p1::componentize(bytes).map_err(|e| invalid(&e))?;
            &component_bytes
        } else {
            bytes
        };
        self.counters.compiled.fetch_add(1, Ordering::Relaxed);
        let component = Component::new(&self.engine, wasm).map_err(|e| invalid(&e))?;
        self.store_cache(&entry, &component);
        Ok((component, false))
    }

    /// A cache entry is used only if its sidecar digest matches its bytes:
    /// a corrupt or foreign file is ignored (and replaced), never loaded.
    fn cached(&self, entry: &Path) -> Option<Component> {
        let bytes = std::fs::read(entry).ok()?;
        let recorded = std::fs::read_to_string(entry.with_extension("sha256")).ok()?;
        if recorded.trim() != sha256_hex(&bytes) {
            return None;
        }
        // SAFETY: `deserialize` trusts its input to be wasmtime's own
        // compiled output. These bytes are: they were written by
        // `store_cache` below from `Component::serialize` of this engine
        // configuration (the entry name carries the engine's compatibility
        // hash), they lie in the state directory that no executor may write
        // (POLICY_MUTATION_DENIED), and their sha256 matches the sidecar
        // written with them. wasmtime additionally checks the header's
        // version and configuration and errors on a mismatch.
        unsafe { Component::deserialize(&self.engine, &bytes) }.ok()
    }

    fn store_cache(&self, entry: &Path, component: &Component) {
        // The cache is an optimisation: failing to write it is not an error.
        let Ok(bytes) = component.serialize() else {
            return;
        };
        if std::fs::create_dir_all(&self.cache_dir).is_err() {
            return;
        }
        let tmp = entry.with_extension("tmp");
        if std::fs::write(&tmp, &bytes).is_ok() && std::fs::rename(&tmp, entry).is_ok() {
            let _ = std::fs::write(entry.with_extension("sha256"), sha256_hex(&bytes));
        }
    }
}
