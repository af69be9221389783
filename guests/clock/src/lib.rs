//! `clock` (time:read): `{"wall_unix_ms": <wall clock, ms since the Unix
//! epoch>, "monotonic_ns": <monotonic time elapsed across a ~1 ms busy
//! loop>}`. With a real clock both are non-zero; with a frozen clock the
//! wall time is constant and `monotonic_ns` is 0 (the loop is also capped by
//! an iteration count, so it ends either way). Input is ignored.

wit_bindgen::generate!({ world: "executor", path: "../../wit" });

use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;

guest_common::impl_from_fail!();

/// Busy-loop bound: far more than 1 ms of work, so it only matters when the
/// clock does not move.
const MAX_ROUNDS: u32 = 200_000;

struct Clock;

impl Guest for Clock {
    fn run(_input: String) -> Result<String, Error> {
        let wall_unix_ms = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_millis() as u64,
            // A clock before 1970 is reported as 0 rather than failing.
            Err(_) => 0,
        };
        let start = Instant::now();
        let mut acc = 0u64;
        for round in 0..MAX_ROUNDS {
            for i in 0..64u64 {
                acc = black_box(acc.wrapping_mul(31).wrapping_add(i));
            }
            if round % 16 == 0 && start.elapsed() >= Duration::from_millis(1) {
                break;
            }
        }
        black_box(acc);
        let monotonic_ns = start.elapsed().as_nanos() as u64;
        Ok(guest_common::to_output(&json!({
            "wall_unix_ms": wall_unix_ms,
            "monotonic_ns": monotonic_ns,
        }))?)
    }
}

export!(Clock);
