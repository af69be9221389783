//! `spin` (attack, compute:pure): never returns. For the deadline limit.
//!
//! Input `sleep:MS` first sleeps MS milliseconds (through
//! `wasi:clocks/monotonic-clock.subscribe-duration` and `wasi:io/poll`: a
//! wait inside a host call, where epoch interruption cannot reach), then
//! spins. Any other input spins at once.

wit_bindgen::generate!({ world: "executor", path: "../../wit" });

struct Spin;

impl Guest for Spin {
    fn run(input: String) -> Result<String, Error> {
        if let Some(ms) = input
            .strip_prefix("sleep:")
            .and_then(|ms| ms.parse::<u64>().ok())
        {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        // `black_box` keeps the optimizer from proving the loop useless.
        let mut n = input.len() as u64;
        loop {
            n = core::hint::black_box(n.wrapping_add(1));
        }
    }
}

export!(Spin);
