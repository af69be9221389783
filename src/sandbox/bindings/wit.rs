//! Host-side bindings of `wit/` (`gatehouse:executor@0.1.0`).
//!
//! One bindgen for the whole package so that the shared `types` are one
//! type; each capability's `impl Host` and `add_to_linker` live in its own
//! module (`log.rs`, `memory.rs`, …) and are linked only when granted.

wasmtime::component::bindgen!({
    path: "wit",
    inline: "
        package gatehouse:host;
        world executor-host {
            include gatehouse:executor/executor@0.1.0;
            import gatehouse:executor/memory@0.1.0;
            import gatehouse:executor/human@0.1.0;
            import gatehouse:executor/delegate@0.1.0;
            import gatehouse:executor/exec@0.1.0;
            import wasi:config/store@0.2.0-draft;
        }
    ",
    world: "gatehouse:host/executor-host",
});

pub use self::gatehouse::executor::types::Error as GuestError;
