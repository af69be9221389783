//! `fs-cmd`: the command (`fn main`) twin of `write-file`, built for both
//! wasm32-wasip2 and wasm32-wasip1. Reads one JSON request from stdin (the
//! same ops as `write-file`), prints one JSON line to stdout, and exits 0 on
//! success or 1 on failure with `{"error": "..."}`.

use std::io::{Read, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut input = String::new();
    let result = match std::io::stdin().read_to_string(&mut input) {
        Ok(_) => guest_common::fs_request(&input, true),
        Err(e) => Err(guest_common::Fail::Failed(format!("read stdin: {e}"))),
    };
    let (line, code) = match result {
        Ok(out) => (out, ExitCode::SUCCESS),
        Err(fail) => {
            let kind = match fail {
                guest_common::Fail::Invalid(_) => "invalid-input",
                guest_common::Fail::Failed(_) => "failed",
            };
            let value = serde_json::json!({ "error": fail.message(), "kind": kind });
            (value.to_string(), ExitCode::FAILURE)
        }
    };
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    code
}
