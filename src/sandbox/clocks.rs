//! `time:read` → the real clocks; without it, a frozen clock.
//!
//! The frozen clock stands still at the Unix epoch and its monotonic clock
//! never advances, so a guest without `time:read` learns nothing about
//! when it runs (and cannot time the host).

use std::time::Duration;

use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtxBuilder};

use super::plan::Plan;

struct FrozenWall;

impl HostWallClock for FrozenWall {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

struct FrozenMonotonic;

impl HostMonotonicClock for FrozenMonotonic {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// Returns whether the real clocks were given.
pub fn apply(b: &mut WasiCtxBuilder, plan: &Plan) -> bool {
    if !plan.real_clocks() {
        b.wall_clock(FrozenWall).monotonic_clock(FrozenMonotonic);
    }
    plan.real_clocks()
}
