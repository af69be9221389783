//! `flood` (attack, compute:pure): prints lines to stdout without end. For
//! the output cap. Written with `writeln!` rather than `println!` so that a
//! refused write ends the run with `failed` instead of a panic; if writes
//! never fail it runs until the deadline.

wit_bindgen::generate!({ world: "executor", path: "../../wit" });

use std::io::Write;

struct Flood;

impl Guest for Flood {
    fn run(_input: String) -> Result<String, Error> {
        let mut stdout = std::io::stdout().lock();
        let mut n: u64 = 0;
        loop {
            n = n.wrapping_add(1);
            if let Err(e) = writeln!(
                stdout,
                "flood line {n}: the quick brown fox jumps over the lazy dog"
            ) {
                return Err(Error::Failed(format!("stdout after {n} lines: {e}")));
            }
        }
    }
}

export!(Flood);
