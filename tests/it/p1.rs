//! Issue 30: preview-1 programs whose runtime owns its memory the way
//! AssemblyScript's does run under `gatehouse run` as under `wasmtime run`:
//! they read their arguments and environment, and a write to a descriptor
//! that does not exist is an `EBADF` they see, not the end of the run.
//!
//! The programs are in `tests/p1/`: `*.wat` is the source of each
//! `*.wasm` beside it (assembled with the `wat` crate, 1.258:
//! `wat::parse_file`); `as-args.wasm` is `as-args.ts` built by
//! AssemblyScript 0.28.20 with `@assemblyscript/wasi-shim` 0.1.0 (see
//! `tests/p1/README.md`). None needs a compiler at test time.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::support::guests::manifest;
use crate::support::{s, Env};

fn program(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/p1")
        .join(file)
}

/// `gatehouse run MANIFEST --workspace WS --level Full -- ARGS…` with
/// `vars` set in gatehouse's environment: (exit status, stdout bytes,
/// stderr).
fn run(env: &Env, manifest: &Path, args: &[&str], vars: &[(&str, &str)]) -> (i32, Vec<u8>, String) {
    let ws = env.mkdir("ws");
    let mut cmd = env.command();
    cmd.args([
        "run",
        s(manifest),
        "--workspace",
        s(&ws),
        "--level",
        "Full",
        "--",
    ])
    .args(args)
    .envs(vars.iter().copied())
    .stdin(Stdio::null());
    let out = cmd.output().unwrap();
    (
        out.status.code().expect("exit status"),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Arguments with quotes, as a shell hands them over and as
/// AssemblyScript's `process.argv` reads them.
const QUOTED: [&str; 3] = ["say \"hi\"", "\"", "it's a \"quoted\" 'word'"];

#[test]
fn a_p1_program_reads_quoted_arguments_with_args_get() {
    let env = Env::new();
    let m = manifest(
        &env,
        "p1-args",
        &program("args.wasm"),
        &[("compute:pure", None)],
    );
    let (code, stdout, stderr) = run(&env, &m, &QUOTED, &[]);
    assert_eq!(
        (code, String::from_utf8_lossy(&stdout).as_ref()),
        (0, "say \"hi\"\n\"\nit's a \"quoted\" 'word'\n"),
        "{stderr}"
    );
    assert_eq!(stderr, "");
}

#[test]
fn an_assemblyscript_program_reads_three_quoted_arguments() {
    let env = Env::new();
    let m = manifest(
        &env,
        "as-args",
        &program("as-args.wasm"),
        &[("compute:pure", None)],
    );
    let (code, stdout, stderr) = run(&env, &m, &QUOTED, &[]);
    assert_eq!(
        (code, String::from_utf8_lossy(&stdout).as_ref()),
        (0, "say \"hi\"\n\"\nit's a \"quoted\" 'word'\n"),
        "{stderr}"
    );
}

#[test]
fn a_p1_program_reads_three_granted_variables_one_with_a_newline() {
    let env = Env::new();
    let m = manifest(
        &env,
        "p1-environ",
        &program("environ.wasm"),
        &[
            ("env:read", Some("GH_PLAIN")),
            ("env:read", Some("GH_LINES")),
            ("env:read", Some("GH_QUOTED")),
        ],
    );
    let vars = [
        ("GH_PLAIN", "plain"),
        ("GH_LINES", "line1\nline2\n"),
        ("GH_QUOTED", "say \"hi\" = 'bye'"),
        ("GH_SECRET", "not granted"),
    ];
    let (code, stdout, stderr) = run(
        &env,
        &m,
        &["GH_LINES", "GH_SECRET", "GH_QUOTED", "GH_PLAIN"],
        &vars,
    );
    assert_eq!(
        (code, String::from_utf8_lossy(&stdout).as_ref()),
        (
            0,
            "GH_LINES=line1\nline2\n\nGH_QUOTED=say \"hi\" = 'bye'\nGH_PLAIN=plain\n"
        ),
        "{stderr}"
    );
}

#[test]
fn an_assemblyscript_program_reads_three_granted_variables() {
    let env = Env::new();
    let m = manifest(
        &env,
        "as-args",
        &program("as-args.wasm"),
        &[
            ("env:read", Some("GH_PLAIN")),
            ("env:read", Some("GH_LINES")),
            ("env:read", Some("GH_QUOTED")),
        ],
    );
    let vars = [
        ("GH_PLAIN", "plain"),
        ("GH_LINES", "line1\nline2"),
        ("GH_QUOTED", "say \"hi\" = 'bye'"),
        ("GH_SECRET", "not granted"),
    ];
    let (code, stdout, stderr) = run(
        &env,
        &m,
        &["env", "GH_LINES", "GH_SECRET", "GH_QUOTED", "GH_PLAIN"],
        &vars,
    );
    assert_eq!(
        (code, String::from_utf8_lossy(&stdout).as_ref()),
        (
            0,
            "GH_LINES=line1\nline2\nGH_SECRET=<unset>\nGH_QUOTED=say \"hi\" = 'bye'\nGH_PLAIN=plain\n"
        ),
        "{stderr}"
    );
}

/// security round 3, item 8: `fd_write` to a descriptor number the
/// program never had is `EBADF` (errno 8) for every value, negative ones
/// (as a signed i32) and `u32::MAX` included, whether the write carries
/// bytes, one empty iovec or none at all (the adapter answered an empty
/// write with success before looking at the descriptor; `wasmtime run`
/// says `EBADF`, and a public WASI test suite checks `fd_write(-31337)`
/// with no iovec); so is an `fd_read` with no iovec. The control: the
/// same empty calls on stdout and stderr, which the program has, succeed
/// (`00`).
#[test]
fn fd_write_to_any_descriptor_the_program_never_had_returns_ebadf() {
    let env = Env::new();
    let m = manifest(
        &env,
        "p1-badfd",
        &program("badfd.wasm"),
        &[("compute:pure", None)],
    );
    let (code, stdout, stderr) = run(&env, &m, &[], &[]);
    let never_had = (3..=16).chain([99, 1000, 65535, 65536, i32::MAX, i32::MIN, -31337, -2, -1]);
    let mut expected: String = never_had
        .map(|fd| format!("fd_write({fd}) = 08 08 08 08\n"))
        .collect();
    expected.push_str("fd_write(1) = -- 00 00 00\nfd_write(2) = -- 00 00 00\n");
    // Nothing reached stdout or stderr but the program's own lines.
    assert_eq!(
        (code, String::from_utf8_lossy(&stdout).as_ref()),
        (0, expected.as_str()),
        "{stderr}"
    );
    assert_eq!(stderr, "");
}
