//! `time:read` → the real clocks; without it, a frozen clock.
//!
//! The frozen clock stands still at the Unix epoch and its monotonic clock
//! never advances, so a guest without `time:read` learns nothing about
//! when it runs (and cannot time the host).

use std::time::Duration;

use std::borrow::Cow;

use serde::Serialize;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock};

use super::{Open, OpenError, Prepare, PrepareError, Unit};
use crate::policy::Capability;

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

/// Whether `time:read` was granted: real clocks, else frozen ones.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ClocksPart {
    /// Whether the guest sees the real clocks.
    pub real: bool,
}

/// The clocks unit.
pub struct Clocks;

impl Unit for Clocks {
    type Part = ClocksPart;
    type State = ();
    type Runtime = ();
    const FILLED_BY: &'static [Capability] = &[Capability::TimeRead];

    fn open(_: &Open<'_>) -> Result<(), OpenError> {
        Ok(())
    }

    fn allow(part: &mut ClocksPart, _: Capability, _: Option<&str>) {
        part.real = true;
    }

    /// Gives the context frozen clocks unless the part says real.
    ///
    /// # Security
    /// Real clocks let a guest learn the time and time the host.
    fn prepare(part: &ClocksPart, _: &(), cx: &mut Prepare<'_>) -> Result<(), PrepareError> {
        if !part.real {
            cx.wasi
                .wall_clock(FrozenWall)
                .monotonic_clock(FrozenMonotonic);
        }
        Ok(())
    }

    fn describe(part: &ClocksPart, _: &(), out: &mut Vec<Cow<'static, str>>) {
        out.push(Cow::Borrowed(if part.real {
            "clocks: real"
        } else {
            "clocks: frozen"
        }));
    }
}
