//! `grow` (attack, compute:pure): allocates 1 MiB chunks and writes to every
//! page of each, without end. For the memory limit: when linear memory can
//! grow no more, the allocation fails and the guest traps (abort).

wit_bindgen::generate!({ world: "executor", path: "../../wit" });

use core::hint::black_box;

const CHUNK: usize = 1 << 20;
const PAGE: usize = 4096;

struct Grow;

impl Guest for Grow {
    fn run(_input: String) -> Result<String, Error> {
        let mut chunks: Vec<Vec<u8>> = Vec::new();
        let mut n: u8 = 0;
        loop {
            let mut chunk = vec![0u8; CHUNK];
            n = n.wrapping_add(1);
            for i in (0..CHUNK).step_by(PAGE) {
                chunk[i] = n;
            }
            chunks.push(black_box(chunk));
            black_box(&chunks);
        }
    }
}

export!(Grow);
