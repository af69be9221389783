//! `panic` (attack, compute:pure): `run` panics in `deep_inside`, and with
//! `panic = "abort"` the guest traps (`unreachable`). Its function names
//! are kept (the workspace does not strip this crate), for the test that a
//! trap shows the guest's backtrace with them.

wit_bindgen::generate!({ world: "executor", path: "../../wit" });

struct Panic;

#[inline(never)]
fn deep_inside(input: &str) -> ! {
    panic!("panic guest: {} bytes of input", input.len())
}

impl Guest for Panic {
    fn run(input: String) -> Result<String, Error> {
        deep_inside(core::hint::black_box(&input))
    }
}

export!(Panic);
