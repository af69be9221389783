//! `cf-version`: a command importing `wasi:random/random@0.9.0`, a version
//! no host provides. If it runs at all, the host linked an interface it
//! does not have: it prints `BROKEN ...`. For `gatehouse conformance`.

wit_bindgen::generate!({ path: "wit", world: "mismatched" });

fn main() {
    let n = wasi::random::random::get_random_u64();
    println!("BROKEN ran with wasi:random@0.9.0 linked: {n}");
}
