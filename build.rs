//! Embeds the conformance suite's guests (`gatehouse conformance`) in the
//! binary when they have been built (`setup.sh` builds them before `cargo
//! build` in the README's first command); without them the suite asks for
//! `--guests DIR`. Writes `$OUT_DIR/conformance_guests.rs`.

use std::path::{Path, PathBuf};

/// Every guest file the suite uses: (target, file, where it is built).
const GUESTS: &[(&str, &str, &str)] = &[
    (
        "wasm32-wasip2",
        "cf_attack.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip1",
        "cf_attack.wasm",
        "guests/target/wasm32-wasip1/release",
    ),
    (
        "wasm32-wasip2",
        "cf_net.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip2",
        "cf_fs_p2.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip2",
        "cf_version.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    ("wasm32-wasip1", "wasi_fs_all.wasm", "guests/c/target"),
    (
        "wasm32-wasip2",
        "fetch.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip2",
        "fetch_socket.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip2",
        "remember.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip2",
        "sneaky_memory.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip2",
        "ask.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip2",
        "run_tool.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip2",
        "call_other.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip2",
        "spin.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip2",
        "grow.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip2",
        "flood.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip2",
        "hello.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip2",
        "plant_secret.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip2",
        "scan_residue.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
    (
        "wasm32-wasip2",
        "env.wasm",
        "guests/target/wasm32-wasip2/release",
    ),
];

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let mut text = String::from("pub static EMBEDDED: &[(&str, &str, &[u8])] = &[\n");
    for &(target, file, dir) in GUESTS {
        let path = root.join(dir).join(file);
        if path.is_file() {
            println!("cargo:rerun-if-changed={}", path.display());
            text.push_str(&format!(
                "    ({target:?}, {file:?}, include_bytes!({:?})),\n",
                path.display().to_string()
            ));
        } else {
            // Not built yet: watch the nearest directory that exists, so
            // the guest is embedded once `setup.sh` builds it.
            let mut dir: &Path = &root.join(dir);
            while !dir.is_dir() {
                match dir.parent() {
                    Some(p) => dir = p,
                    None => break,
                }
            }
            println!("cargo:rerun-if-changed={}", dir.display());
        }
    }
    text.push_str("];\n");
    println!("cargo:rerun-if-changed=build.rs");
    if let Err(e) = std::fs::write(out.join("conformance_guests.rs"), text) {
        println!("cargo:warning=cannot write the embedded guests: {e}");
        std::process::exit(1);
    }
}
