//! The one engine of the process, its compiled-component cache, and the
//! counters that prove what was (not) done.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use wasmtime::component::{types::ComponentItem, Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::isolation::{self, IsolationReport};
use super::limits::{
    Limits, EPOCH_TICK_MS, PER_COMPONENT_CORE_INSTANCES, PER_COMPONENT_MEMORIES,
    PER_COMPONENT_TABLES,
};
use super::memo::{self, FileIdentity};
use super::profile::{EngineKind, EngineProfile};
use crate::policy::snapshot::sha256_hex;
use crate::util::watch::{WatchKey, Watcher};

/// What the engine path did; a denied turn must leave every counter at 0.
#[derive(Debug, Default)]
pub struct Counters {
    /// Components compiled from wasm (cache misses).
    pub compiled: AtomicU64,
    /// Components loaded (compiled or from the cache).
    pub loaded: AtomicU64,
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
    /// Components prepared in this process, by path: re-read only when the
    /// file's identity changes.
    /// Keyed by the path's bytes: hashing a `Path` walks its components,
    /// a cost paid at every turn.
    prepared: std::sync::RwLock<HashMap<std::ffi::OsString, Arc<Prepared>>>,
    /// Tells when a prepared component's file may have changed, so that a
    /// turn need not `stat` it (a long-lived engine only; `None`: every
    /// turn looks at the file's identity).
    watcher: Option<Arc<Watcher>>,
    /// Whoever shared `watcher` ([`Sandbox::share_watcher`]) reads its
    /// queue at the start of every turn: the engine then only looks at
    /// what that read found.
    drained_by_caller: bool,
    counters: Arc<Counters>,
    ticker: OnceLock<()>,
    /// Read back from `engine` once it was built.
    profile: EngineProfile,
    isolation: Arc<IsolationReport>,
}

/// Why a component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The component file could not be read.
    #[error("cannot read component `{path}`")]
    Read {
        /// The component file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: crate::util::IoCause,
    },
    /// The file's sha256 is not the one its manifest pins (nothing was
    /// compiled).
    #[error("component `{path}` has sha256 `{digest}`, but its manifest pins `{pinned}`")]
    Pinned {
        /// The component file.
        path: PathBuf,
        /// Its sha256.
        digest: String,
        /// The sha256 its manifest pins.
        pinned: String,
    },
    /// The file is neither a valid component nor a module wasmtime can compile.
    #[error("`{path}` is not a valid component or module")]
    Invalid {
        /// The component file.
        path: PathBuf,
        /// wasmtime's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

fn check_pin(path: &Path, digest: &str, pinned: Option<&str>) -> Result<(), LoadError> {
    match pinned {
        Some(pin) if pin != digest => Err(LoadError::Pinned {
            path: path.to_path_buf(),
            digest: digest.to_string(),
            pinned: pin.to_string(),
        }),
        _ => Ok(()),
    }
}

/// Whether the file at `path` is a core module (a preview-1 program), by
/// its first 8 bytes.
fn is_core_file(path: &Path) -> std::io::Result<bool> {
    let mut header = [0u8; 8];
    let mut file = std::fs::File::open(path)?;
    let mut n = 0;
    while n < header.len() {
        match file.read(&mut header[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(wasmparser::Parser::is_core_wasm(&header[..n]))
}

/// A component prepared once per host: its digest, its imports (with what
/// each needs, looked up in the table once), whether it is a command, and
/// one typed pre-instance per set of linked bindings.
pub(crate) struct Prepared {
    identity: FileIdentity,
    /// The file's watch, when it has one: its identity is looked at only
    /// when the watch says it may have changed.
    watch: Option<WatchKey>,
    pub digest: String,
    pub component: Component,
    pub imports: Arc<[String]>,
    /// What each of `imports` needs ([`super::table::authority`]), in the
    /// same order.
    pub authorities: Arc<[super::table::Authority]>,
    pub is_command: bool,
    /// By the bit set of the table's bindings linked
    /// ([`super::table::granted_mask`]).
    pres: std::sync::RwLock<HashMap<u32, Pre>>,
}

/// A component linked with one set of bindings, its exports type-checked
/// once: a command (`wasi:cli/run`) or an executor (`run`).
#[derive(Clone)]
pub(crate) enum Pre {
    Command(wasmtime_wasi::p2::bindings::sync::CommandPre<super::state::HostState>),
    Executor(super::bindings::ExecutorHostPre<super::state::HostState>),
}

/// Why a component could not be prepared for instantiation.
pub(crate) enum PreError {
    /// Building the linker failed: a host error.
    Link(wasmtime::Error),
    /// The component's imports do not match what the linker provides (an
    /// interface version no binding has, a function of another type):
    /// refused before any instance exists.
    Imports(wasmtime::Error),
    /// Its exports are not those of its kind (no `run` of the executor
    /// world's type): the run fails as it would at instantiation.
    Exports(wasmtime::Error),
}

impl Prepared {
    /// The pre-instance of this component linked with the bindings of
    /// `mask`, made by `link` the first time only.
    pub(crate) fn pre(
        &self,
        mask: u32,
        link: impl FnOnce() -> wasmtime::Result<Linker<super::state::HostState>>,
    ) -> Result<Pre, PreError> {
        let known = crate::util::read(&self.pres).get(&mask).cloned();
        if let Some(pre) = known {
            return Ok(pre);
        }
        let pre = link()
            .map_err(PreError::Link)?
            .instantiate_pre(&self.component)
            .map_err(PreError::Imports)?;
        let pre = if self.is_command {
            Pre::Command(
                wasmtime_wasi::p2::bindings::sync::CommandPre::new(pre)
                    .map_err(PreError::Exports)?,
            )
        } else {
            Pre::Executor(super::bindings::ExecutorHostPre::new(pre).map_err(PreError::Exports)?)
        };
        crate::util::write(&self.pres).insert(mask, pre.clone());
        Ok(pre)
    }
}

impl Sandbox {
    /// Builds the engine of the default [`EngineProfile`]. `max_memory`
    /// bounds every linear memory in the pool; a run's own cap
    /// ([`Limits::memory_bytes`]) may be lower.
    pub fn new(cache_dir: &Path, max_memory: usize) -> wasmtime::Result<Sandbox> {
        Sandbox::with_profile(cache_dir, &EngineProfile::new(max_memory))
    }

    /// Builds the engine `profile` describes, then reads its settings back
    /// for the isolation report ([`Sandbox::isolation`]).
    pub fn with_profile(cache_dir: &Path, profile: &EngineProfile) -> wasmtime::Result<Sandbox> {
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(profile.epoch_interruption)
            .memory_init_cow(true)
            .signals_based_traps(profile.signals_based_traps)
            .memory_reservation(profile.memory_reservation)
            .memory_guard_size(profile.memory_guard_size)
            .guard_before_linear_memory(profile.guard_before_linear_memory);
        if let Some(max_memory) = profile.pool_max_memory_size {
            let kind = profile.kind;
            let (components, cores, memories, tables) = kind.totals();
            let mut pool = PoolingAllocationConfig::default();
            pool.total_component_instances(components)
                .total_core_instances(cores)
                .total_memories(profile.pool_total_memories.unwrap_or(memories))
                .total_tables(tables)
                // No store is async: no fiber stacks (the default 1000
                // would cost 1000 `mprotect` calls at every engine start).
                .total_stacks(0)
                .max_memories_per_component(PER_COMPONENT_MEMORIES)
                .max_tables_per_component(PER_COMPONENT_TABLES)
                .max_core_instances_per_component(PER_COMPONENT_CORE_INSTANCES)
                .max_memory_size(max_memory)
                .table_elements(
                    profile
                        .pool_table_elements
                        .unwrap_or(Limits::default().table_elements),
                )
                .linear_memory_keep_resident(profile.pool_memory_keep_resident.unwrap_or(0))
                .table_keep_resident(if kind == EngineKind::LongLived {
                    1 << 16
                } else {
                    0
                })
                .pagemap_scan(if profile.pool_pagemap_scan == Some(true) {
                    wasmtime::Enabled::Auto
                } else {
                    wasmtime::Enabled::No
                });
            config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        let engine = Engine::new(&config)?;
        let profile = EngineProfile::of(&engine, profile.kind);
        Ok(Sandbox {
            isolation: Arc::new(isolation::probe(&profile)),
            profile,
            engine,
            cache_dir: cache_dir.to_path_buf(),
            prepared: std::sync::RwLock::new(HashMap::new()),
            watcher: if profile.kind == EngineKind::LongLived {
                Watcher::new().map(Arc::new)
            } else {
                None
            },
            drained_by_caller: false,
            counters: Arc::new(Counters::default()),
            ticker: OnceLock::new(),
        })
    }

    /// What the engine runs with, read back from it.
    pub fn profile(&self) -> &EngineProfile {
        &self.profile
    }

    /// The isolation report of this engine on this host.
    pub fn isolation(&self) -> &IsolationReport {
        &self.isolation
    }

    /// The same report, shared (each turn's outcome carries it).
    pub fn isolation_shared(&self) -> Arc<IsolationReport> {
        self.isolation.clone()
    }

    /// The wasmtime engine every run is built on.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// What the engine path did: components compiled and loaded.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Watches components with `watcher` instead of the engine's own, and
    /// leaves reading its queue to the caller: one `read(2)` per turn for
    /// the grants and the component together. Call it before the first
    /// [`execute`](super::execute); a one-shot engine (no watcher) keeps
    /// none.
    ///
    /// The caller must call [`Watcher::drain`] (or a `check` of its own)
    /// at the start of every turn and before every call that may prepare
    /// a component ([`Sandbox::drain_watch`]): a component file replaced
    /// before that read is seen, one replaced after it is seen at the next.
    pub(crate) fn share_watcher(&mut self, watcher: Arc<Watcher>) {
        if self.watcher.is_some() {
            self.watcher = Some(watcher);
            self.drained_by_caller = true;
        }
    }

    /// Reads the shared watcher's queue now (see
    /// [`Sandbox::share_watcher`]); nothing for an engine that reads its
    /// own.
    pub(crate) fn drain_watch(&self) {
        if let (true, Some(w)) = (self.drained_by_caller, &self.watcher) {
            w.drain();
        }
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

    /// The component at `path`, prepared: from memory when the file is the
    /// one prepared before (same device, inode, size, mtime and ctime: a
    /// file rewritten in place, even with its mtime set back, has a new
    /// ctime), else read, hashed, checked against `pinned` (before anything
    /// is compiled) and loaded. A long-lived engine looks at the file's
    /// identity only when its watch says the file may have changed (see
    /// [`crate::util::watch`]). Returns it and whether no compilation
    /// was needed.
    pub(crate) fn prepare(
        &self,
        path: &Path,
        pinned: Option<&str>,
    ) -> Result<(Arc<Prepared>, bool), LoadError> {
        let known = crate::util::read(&self.prepared)
            .get(path.as_os_str())
            .cloned();
        let Some(p) = known else {
            return self.load_path(path, pinned, None);
        };
        // With a watch, the check (and a reload) happens with the watcher
        // held: a turn that finds the file quiet cannot run ahead of a
        // reload another turn is making.
        let reloaded = match (p.watch, self.watcher.as_ref()) {
            (Some(key), Some(w)) if self.drained_by_caller => w
                .check_drained(key, || self.revalidate(path, pinned, &p))
                .transpose()?
                .flatten(),
            (Some(key), Some(w)) => w
                .check(key, || self.revalidate(path, pinned, &p))
                .transpose()?
                .flatten(),
            _ => self.revalidate(path, pinned, &p)?,
        };
        match reloaded {
            Some(fresh) => Ok(fresh),
            None => {
                check_pin(path, &p.digest, pinned)?;
                self.counters.loaded.fetch_add(1, Ordering::Relaxed);
                Ok((p, true))
            }
        }
    }

    /// `None` when the file at `path` is still the one `p` was prepared
    /// from; else the file prepared again.
    fn revalidate(
        &self,
        path: &Path,
        pinned: Option<&str>,
        p: &Prepared,
    ) -> Result<Option<(Arc<Prepared>, bool)>, LoadError> {
        let meta = std::fs::metadata(path).map_err(|e| LoadError::Read {
            path: path.to_path_buf(),
            source: e.into(),
        })?;
        if FileIdentity::of(&meta) == p.identity {
            return Ok(None);
        }
        self.load_path(path, pinned, p.watch).map(Some)
    }

    /// Reads, hashes, checks and loads the component at `path`, and keeps
    /// it prepared. `watch`: the file's watch if it has one already (else
    /// one is made first, so that a change after the read is seen).
    fn load_path(
        &self,
        path: &Path,
        pinned: Option<&str>,
        watch: Option<WatchKey>,
    ) -> Result<(Arc<Prepared>, bool), LoadError> {
        let read_err = |e: std::io::Error| LoadError::Read {
            path: path.to_path_buf(),
            source: e.into(),
        };
        let watch = watch.or_else(|| self.watcher.as_ref().and_then(|w| w.watch(&[path])));
        let identity = FileIdentity::of(&std::fs::metadata(path).map_err(read_err)?);
        // A file hashed before by any process, with the same identity
        // since: its entry is found without reading it (memo.rs).
        if let Some(digest) = memo::recorded_digest(&self.cache_dir, &identity) {
            check_pin(path, &digest, pinned)?;
            let entry = self.entry(&digest, is_core_file(path).map_err(read_err)?);
            if let Some(component) = self.cached(&entry) {
                self.counters.loaded.fetch_add(1, Ordering::Relaxed);
                return Ok((self.keep(path, identity, watch, digest, component), true));
            }
        }
        let mut file = std::fs::File::open(path).map_err(read_err)?;
        let opened = FileIdentity::of(&file.metadata().map_err(read_err)?);
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(read_err)?;
        let digest = sha256_hex(&bytes);
        check_pin(path, &digest, pinned)?;
        // Recorded only when nothing changed the file while it was read.
        if FileIdentity::of(&file.metadata().map_err(read_err)?) == opened {
            memo::record_digest(&self.cache_dir, &opened, &digest);
        }
        let (component, cache_hit) = self.load(path, &bytes, &digest)?;
        Ok((
            self.keep(path, identity, watch, digest, component),
            cache_hit,
        ))
    }

    /// Keeps `component`, loaded from the file at `path` of `identity`,
    /// prepared for the next turns.
    fn keep(
        &self,
        path: &Path,
        identity: FileIdentity,
        watch: Option<WatchKey>,
        digest: String,
        component: Component,
    ) -> Arc<Prepared> {
        let ty = component.component_type();
        let imports: Arc<[String]> = ty
            .imports(&self.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let authorities = imports
            .iter()
            .map(|i| super::table::authority(super::imports::interface_name(i)))
            .collect();
        let is_command = ty.exports(&self.engine).any(|(name, item)| {
            name.starts_with("wasi:cli/run@")
                && matches!(item.ty, ComponentItem::ComponentInstance(_))
        });
        let p = Arc::new(Prepared {
            identity,
            watch,
            digest,
            component,
            imports,
            authorities,
            is_command,
            pres: std::sync::RwLock::new(HashMap::new()),
        });
        crate::util::write(&self.prepared).insert(path.as_os_str().to_owned(), p.clone());
        p
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
        let is_core = wasmparser::Parser::is_core_wasm(bytes);
        let entry = self.entry(digest, is_core);
        if let Some(c) = self.cached(&entry) {
            return Ok((c, true));
        }
        let invalid = |source: Box<dyn std::error::Error + Send + Sync>| LoadError::Invalid {
            path: path.to_path_buf(),
            source,
        };
        let component_bytes;
        let wasm: &[u8] = if is_core {
            component_bytes = super::p1::componentize(bytes).map_err(|e| invalid(e.into()))?;
            &component_bytes
        } else {
            bytes
        };
        self.counters.compiled.fetch_add(1, Ordering::Relaxed);
        let component =
            Component::new(&self.engine, wasm).map_err(|e| invalid(e.into_boxed_dyn_error()))?;
        self.store_cache(&entry, &component);
        Ok((component, false))
    }

    /// The cache entry of the component of sha256 `digest` (a preview-1
    /// core module's when `is_core`).
    fn entry(&self, digest: &str, is_core: bool) -> PathBuf {
        // A preview-1 module's entry also names the adaptation, so that a
        // component adapted by an earlier gatehouse is not reused.
        let adaptation = if is_core { super::p1::ADAPTATION } else { "" };
        self.cache_dir
            .join(format!("{digest}-{}{adaptation}.cwasm", self.engine_hash()))
    }

    /// A cache entry is used only if its sidecar digest matches its bytes:
    /// a corrupt or foreign file is ignored (and replaced), never loaded.
    /// The bytes are hashed once while the entry keeps its identity
    /// (memo.rs), and the entry is mapped, not copied: a language
    /// executor's is tens of megabytes, of which a run touches a part.
    fn cached(&self, entry: &Path) -> Option<Component> {
        let identity = FileIdentity::of(&std::fs::metadata(entry).ok()?);
        if !memo::is_verified(entry, &identity) {
            let recorded = std::fs::read_to_string(entry.with_extension("sha256")).ok()?;
            let file = std::fs::File::open(entry).ok()?;
            let opened = FileIdentity::of(&file.metadata().ok()?);
            if opened != identity
                || recorded.trim() != crate::util::hash::sha256_reader(&file).ok()?
            {
                return None;
            }
            memo::record_verified(entry, &identity);
        }
        // SAFETY: `deserialize_file` trusts the file to be wasmtime's own
        // compiled output and to stay unchanged while it is mapped. This
        // one is: it was written by `store_cache` below from
        // `Component::serialize` of this engine configuration (the entry
        // name carries the engine's compatibility hash), whole, under a
        // name of its own that is then renamed into place (an entry is
        // replaced, never rewritten); it lies in the state directory that
        // no executor may write (POLICY_MUTATION_DENIED); and its sha256
        // matched the sidecar written with it, now or since it last
        // changed (its identity says so, memo.rs). wasmtime additionally
        // checks the header's version and configuration and errors on a
        // mismatch.
        let component = unsafe { Component::deserialize_file(&self.engine, entry) }.ok()?;
        // The file mapped is the one checked: the name still leads to it.
        let now = FileIdentity::of(&std::fs::metadata(entry).ok()?);
        (now == identity).then_some(component)
    }

    fn store_cache(&self, entry: &Path, component: &Component) {
        // The cache is an optimisation: failing to write it is not an error.
        let Ok(bytes) = component.serialize() else {
            return;
        };
        if std::fs::create_dir_all(&self.cache_dir).is_err() {
            return;
        }
        // Each whole under a name of this process's own: a mapped entry is
        // never written into (see `cached`).
        if memo::write_whole(entry, &bytes) {
            memo::write_whole(
                &entry.with_extension("sha256"),
                sha256_hex(&bytes).as_bytes(),
            );
        }
    }
}
