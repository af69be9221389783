//! The `code:exec` helpers: whether this host confines commands, and
//! `run-tool` asked to run a command with every approval given.

use std::path::{Path, PathBuf};

use gatehouse::exec::ExecSupport;
use serde_json::Value;

use super::guests::component;
use super::{s, Env, Run};

/// This host has Landlock and seccomp filters, as the tests below assume
/// (the isolation report says so otherwise, and `isolation` tests that).
pub(crate) fn confined_host() -> bool {
    let support = ExecSupport::probe();
    support.landlock.is_ok() && support.seccomp.is_ok()
}

/// A manifest of `run-tool` allowed `cat` and `touch`, reading and writing
/// the workspace.
pub(crate) fn tool_manifest(env: &Env) -> PathBuf {
    env.write(
        "manifests/tool.toml",
        &format!(
            "name = \"tool\"\ncomponent = \"{}\"\ntools = [\"cat\", \"touch\"]\n\
             [[capabilities]]\nname = \"code:exec\"\ntarget = \"cat\"\n\
             [[capabilities]]\nname = \"code:exec\"\ntarget = \"touch\"\n\
             [[capabilities]]\nname = \"fs:write\"\ntarget = \"**\"\n",
            s(&component("run-tool"))
        ),
    )
}

/// `gatehouse --json run` at level Full under a pseudo-terminal,
/// answering `o` (allow once) to every approval prompt.
pub(crate) fn run_approved(
    env: &Env,
    manifest: &Path,
    ws: &Path,
    config: &Path,
    input: &str,
    extra: &[&str],
) -> (Run, Value) {
    // One answer per prompt (the gate's, then one per command line the
    // guest runs: "once" covers one line); extra lines are never read.
    run_answering(env, manifest, ws, config, input, extra, &"o\n".repeat(32))
}

/// [`run_approved`] with the prompts answered by the lines of `answers`.
pub(crate) fn run_answering(
    env: &Env,
    manifest: &Path,
    ws: &Path,
    config: &Path,
    input: &str,
    extra: &[&str],
    answers: &str,
) -> (Run, Value) {
    let mut args = vec![
        "--json",
        "run",
        s(manifest),
        "--workspace",
        s(ws),
        "--config",
        s(config),
        "--level",
        "Full",
        "--input",
        input,
    ];
    args.extend_from_slice(extra);
    let run = env.run_on_terminal(&args, &[], answers);
    // On a terminal the last prompt and the JSON share a line.
    let v = run
        .stdout
        .lines()
        .rev()
        .find_map(|l| {
            let at = l.find("{\"")?;
            serde_json::from_str::<Value>(l[at..].trim()).ok()
        })
        .unwrap_or(Value::Null);
    (run, v)
}

/// `run-tool` (manifest `m`) asked to run `program args`, approved.
pub(crate) fn tool_call(
    env: &Env,
    m: &Path,
    ws: &Path,
    config: &Path,
    program: &str,
    args: &[&str],
) -> (Run, Value) {
    let input = serde_json::json!({"program": program, "args": args}).to_string();
    run_approved(env, m, ws, config, &input, &[])
}
