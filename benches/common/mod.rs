//! What the benches share: the engine gatehouse configures, for the bare
//! side of a comparison.

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// The pooling allocator as gatehouse's engine sets it up.
pub fn tuned_engine() -> wasmtime::Result<Engine> {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(64)
        .total_core_instances(256)
        .total_memories(128)
        .total_tables(256)
        .max_memories_per_component(8)
        .max_tables_per_component(32)
        .max_core_instances_per_component(32)
        .max_memory_size(64 << 20)
        .linear_memory_keep_resident(1 << 20)
        .table_keep_resident(1 << 16)
        .pagemap_scan(wasmtime::Enabled::Auto);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .memory_init_cow(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config)
}
