//! `scan-residue` (attack, compute:pure): grows its linear memory to at
//! least `MIB` MiB and counts every place the secret of `plant-secret`
//! appears in it, as a run that reuses a pooled slot would find it. Input:
//! `MIB:KEY` (the same key): this guest holds only `KEY`, and matches memory
//! bytes `m` where `m ^ 0x5a` is `KEY`'s byte, so it never finds its own
//! copy. `self:MIB:KEY` plants the secret in its own memory first: the
//! control that the scan sees what is there.

wit_bindgen::generate!({ world: "executor", path: "../../wit" });

struct Scan;

const PAGE: usize = 65536;

impl Guest for Scan {
    fn run(input: String) -> Result<String, Error> {
        let (control, rest) = match input.strip_prefix("self:") {
            Some(rest) => (true, rest),
            None => (false, input.as_str()),
        };
        let (mib, key) = rest.split_once(':').unwrap_or(("8", "gatehouse-secret"));
        let mib: usize = mib.parse().unwrap_or(8);
        let key: Vec<u8> = key.bytes().collect();
        if control {
            let mut own = vec![0u8; 1 << 20];
            for (i, b) in own.iter_mut().enumerate() {
                *b = key[i % key.len()] ^ 0x5a;
            }
            std::mem::forget(core::hint::black_box(own));
        }
        let want = (mib << 20).div_ceil(PAGE) + 16;
        let have = core::arch::wasm32::memory_size::<0>();
        if have < want {
            core::arch::wasm32::memory_grow::<0>(want - have);
        }
        let size = core::arch::wasm32::memory_size::<0>() * PAGE;
        let mut found = 0u64;
        let mut matched = 0usize;
        // Address 0 is skipped (a null pointer in Rust); everything else of
        // the linear memory is read, byte by byte.
        for addr in 1..size {
            // SAFETY: every address below `memory_size` is in this
            // instance's linear memory; a volatile read of a byte has no
            // other effect.
            let m = unsafe { core::ptr::read_volatile(addr as *const u8) };
            if m ^ 0x5a == key[matched] {
                matched += 1;
                if matched == key.len() {
                    found += 1;
                    matched = 0;
                }
            } else {
                matched = usize::from(m ^ 0x5a == key[0]);
            }
        }
        Ok(format!("{{\"scanned_bytes\":{size},\"found\":{found}}}"))
    }
}

export!(Scan);
