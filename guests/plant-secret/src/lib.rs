//! `plant-secret` (attack, compute:pure): fills `MIB` MiB of its linear
//! memory with a secret and returns, leaving it there for whatever instance
//! reuses the slot. Input: `MIB:KEY`, where the secret is `KEY`'s bytes
//! XOR 0x5a, repeated (so the secret itself is in no input or data
//! segment: only this run makes it).

wit_bindgen::generate!({ world: "executor", path: "../../wit" });

struct Plant;

impl Guest for Plant {
    fn run(input: String) -> Result<String, Error> {
        let (mib, key) = input.split_once(':').unwrap_or(("8", "gatehouse-secret"));
        let mib: usize = mib.parse().unwrap_or(8);
        let secret: Vec<u8> = key.bytes().map(|b| b ^ 0x5a).collect();
        let mut buf = vec![0u8; mib << 20];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = secret[i % secret.len()];
        }
        // Kept alive to the end and never freed before the instance ends.
        let buf = core::hint::black_box(buf);
        std::mem::forget(buf);
        Ok(format!("{{\"planted_mib\":{mib}}}"))
    }
}

export!(Plant);
