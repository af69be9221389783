//! `spin` (attack, compute:pure): never returns. For the deadline limit.

wit_bindgen::generate!({ world: "executor", path: "../../wit" });

struct Spin;

impl Guest for Spin {
    fn run(input: String) -> Result<String, Error> {
        // `black_box` keeps the optimizer from proving the loop useless.
        let mut n = input.len() as u64;
        loop {
            n = core::hint::black_box(n.wrapping_add(1));
        }
    }
}

export!(Spin);
