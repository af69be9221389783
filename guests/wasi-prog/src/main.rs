//! `wasi-prog`: an ordinary WASI program, as a user would write it, with no
//! gatehouse interface at all. Built for wasm32-wasip2 (a `wasi:cli/command`
//! component) and wasm32-wasip1 (a core module the host componentizes).
//! What it does is chosen by its arguments, so the tests can check argv,
//! exit statuses, stdio and the environment as `wasmtime run` gives them:
//!
//! - `args`: prints argv, one argument per line (argv[0] included);
//! - `exit N`: writes `out` to stdout and `err` to stderr, exits N;
//! - `trap`: writes `before trap` to stdout and stderr, then traps;
//! - `cat`: copies stdin to stdout as it arrives;
//! - `env`: prints every variable as one JSON-escaped line `K=V`;
//! - `read PATH`: prints the file's contents.

use std::io::{Read, Write};

// On preview 2 a status other than 0 or 1 needs `wasi:cli/exit`'s
// `exit-with-code` (std's `exit(N)` reports only failure); on preview 1 std
// calls `proc_exit(N)`, which carries N already.
#[cfg(target_env = "p2")]
mod bindings {
    wit_bindgen::generate!({ path: "wit", world: "prog", features: ["cli-exit-with-code"] });
}

fn exit_with(code: i32) -> ! {
    let _ = std::io::stdout().flush();
    #[cfg(target_env = "p2")]
    if code > 1 {
        bindings::wasi::cli::exit::exit_with_code(code as u8);
    }
    std::process::exit(code)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let op = args.get(1).map(String::as_str).unwrap_or("");
    let mut out = std::io::stdout().lock();
    match op {
        "args" => {
            for a in &args {
                let _ = writeln!(out, "{a}");
            }
        }
        "exit" => {
            let code = args.get(2).and_then(|c| c.parse().ok()).unwrap_or(0);
            let _ = writeln!(out, "out");
            let _ = out.flush();
            eprintln!("err");
            exit_with(code);
        }
        "trap" => {
            let _ = writeln!(out, "before trap");
            let _ = out.flush();
            eprintln!("before trap");
            std::process::abort();
        }
        "cat" => {
            // Chunk by chunk, as it arrives, like cat(1).
            let mut input = std::io::stdin().lock();
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n) = input.read(&mut buf) {
                if n == 0 || out.write_all(&buf[..n]).is_err() || out.flush().is_err() {
                    break;
                }
            }
        }
        "env" => {
            for (k, v) in std::env::vars() {
                let _ = writeln!(out, "{}={}", k.escape_debug(), v.escape_debug());
            }
        }
        "read" => match std::fs::read(args.get(2).map(String::as_str).unwrap_or("")) {
            Ok(bytes) => {
                let _ = out.write_all(&bytes);
            }
            Err(e) => {
                eprintln!("read: {e}");
                exit_with(2);
            }
        },
        other => {
            eprintln!("wasi-prog: unknown operation `{other}`");
            exit_with(64);
        }
    }
}
