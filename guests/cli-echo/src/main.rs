//! `cli-echo`: a plain `wasi:cli/command`. Copies stdin to stdout unchanged,
//! then writes one line `args: <every argument, argv[0] included, joined by
//! spaces>` to stderr. Exits 1 (with a line on stderr) if a stream fails.

use std::io::{Read, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut input = Vec::new();
    let mut stderr = std::io::stderr().lock();
    if let Err(e) = std::io::stdin().read_to_end(&mut input) {
        let _ = writeln!(stderr, "cli-echo: read stdin: {e}");
        return ExitCode::FAILURE;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(&input).and_then(|()| stdout.flush()) {
        let _ = writeln!(stderr, "cli-echo: write stdout: {e}");
        return ExitCode::FAILURE;
    }
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if writeln!(stderr, "args: {}", args.join(" ")).is_err() {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
