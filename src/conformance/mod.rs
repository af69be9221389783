//! `gatehouse conformance`: proof, on the operator's own host, that the
//! sandbox holds and that it is correct.
//!
//! A table of cases ([`cases`]), each one guest run with one manifest, one
//! set-up, one argv and one exact expected outcome, in two halves:
//!
//! - *holds*: attacks written to succeed if the sandbox is broken (the
//!   guest then prints `BROKEN <what it achieved>`); each must end in its
//!   one expected outcome: a deny code before guest code runs, a limit
//!   code, or the exact line the guest prints when it was stopped (a WASI
//!   errno by name, `held ENOTCAPABLE`).
//! - *correct*: programs that must succeed inside a granted root, so a
//!   tight sandbox is shown not to be a broken one.
//!
//! The runner ([`run`]) goes through the same path as `gatehouse run`: a
//! [`Host`](crate::host::Host) opened with the operator's `[engine]` and
//! `[isolation]` settings and a one-shot engine, in a temporary state and
//! configuration directory (never the operator's grants or history).
//! [`classify`] turns what a case did into its verdict; it is public so a
//! test can run the same guests through another host and judge them by
//! the same rules.

mod cases;
mod guests;
mod runner;
mod server;

use serde::Serialize;

use crate::policy::DenyCode;

pub use cases::cases;
pub use guests::{GuestSet, GuestsError};
pub use runner::{observe, run, set_up, Counts, Options, Record, Report, RunError};

/// Which half of the suite a case belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Half {
    /// The sandbox holds: an attack.
    Holds,
    /// The sandbox is correct: a program that must succeed.
    Correct,
}

impl Half {
    /// The half's name in the report (`holds`, `correct`).
    pub fn as_str(self) -> &'static str {
        match self {
            Half::Holds => "holds",
            Half::Correct => "correct",
        }
    }
}

/// The WASI world a case's guest is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum World {
    /// A preview 1 core module (the host componentizes it).
    P1,
    /// A preview 2 component.
    P2,
}

impl World {
    /// The world's name in the report and in case names (`p1`, `p2`).
    pub fn as_str(self) -> &'static str {
        match self {
            World::P1 => "p1",
            World::P2 => "p2",
        }
    }

    /// The Rust target the guest is built for.
    pub fn target(self) -> &'static str {
        match self {
            World::P1 => "wasm32-wasip1",
            World::P2 => "wasm32-wasip2",
        }
    }
}

/// One capability of a case's manifest: `name`, its target and mount.
#[derive(Debug, Clone, Serialize)]
pub struct Cap {
    /// The capability's registry name (`fs:read`, …).
    pub name: &'static str,
    /// Its target, before the case's placeholders are replaced; `None` for a capability
    /// that takes none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The guest's name for a path glob's directory (the manifest's `mount`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount: Option<&'static str>,
    /// `network:sites` only: the HTTP methods allowed (any when `None`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub methods: Option<&'static [&'static str]>,
}

/// Something a case does besides running its guest once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Special {
    /// The component file cut in half.
    Truncated,
    /// The manifest pins a digest the component does not have.
    DigestMismatch,
    /// `plant-secret` leaves a secret in 8 MiB of its memory, then
    /// `scan-residue` reads every byte of as much memory, in the same host.
    Residue,
    /// The workspace is the suite's temporary root, which holds the state
    /// directory (and its cache, audit log and grants).
    StateInWorkspace,
    /// The component file is a module precompiled by another engine
    /// (wasmtime's default configuration), not WebAssembly.
    Precompiled,
    /// The suite's two plain HTTP servers on 127.0.0.1 (`{http}`, the
    /// granted one, and `{http_other}`) watch the case: an attack is
    /// broken when either receives a request, whatever the guest saw; a
    /// program must reach the granted one exactly once and the other
    /// never.
    HttpServers,
}

/// The one outcome a case must end in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Expect {
    /// Refused before any guest code ran, with this code.
    Refused {
        /// The deny code.
        code: DenyCode,
    },
    /// Stopped by this limit once guest code ran.
    Limit {
        /// The limit's deny code.
        code: DenyCode,
    },
    /// Stopped by a trap of the guest (no limit code).
    Trap,
    /// Ran to its end: this exit status and exactly this stdout.
    Output {
        /// The guest's exit status.
        exit: i32,
        /// Its whole stdout.
        stdout: String,
    },
    /// Ran to its end: this exit status, stdout ending with `suffix` and
    /// no line starting with `FAIL`.
    OutputEnds {
        /// The guest's exit status.
        exit: i32,
        /// What its stdout must end with.
        suffix: String,
    },
    /// Refused as invalid input (an unreadable component): nothing ran.
    Invalid,
    /// A host command (`code:exec`, through `run-tool`) ran and answered
    /// with this status, exactly this stdout and stderr ending with
    /// `stderr_suffix` (the program's own name in its message depends on
    /// where the host keeps it).
    Command {
        /// The command's exit status.
        status: i32,
        /// Its whole stdout.
        stdout: String,
        /// What its stderr must end with.
        stderr_suffix: String,
    },
}

impl Expect {
    fn describe(&self) -> String {
        match self {
            Expect::Refused { code } => format!("refused {code}"),
            Expect::Limit { code } => format!("stopped {code}"),
            Expect::Trap => "a trap".to_string(),
            Expect::Output { exit, stdout } => {
                format!("exit {exit}, stdout {:?}", stdout.trim_end())
            }
            Expect::OutputEnds { exit, suffix } => {
                format!(
                    "exit {exit}, stdout ending {:?} with no FAIL line",
                    suffix.trim_end()
                )
            }
            Expect::Invalid => "refused as invalid".to_string(),
            Expect::Command {
                status,
                stdout,
                stderr_suffix,
            } => format!(
                "a command with status {status}, stdout {stdout:?}, stderr ending {stderr_suffix:?}"
            ),
        }
    }
}

/// One case of the suite.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    /// Unique, stable: `<area>.<attack>.<world>`.
    pub name: String,
    /// Whether it is an attack that must be held or a program that must succeed.
    pub half: Half,
    /// Whether the guest is a preview 1 module or a preview 2 component.
    pub world: World,
    /// The guest file (`cf_attack.wasm`, `fetch.wasm`, ...).
    pub guest: &'static str,
    /// The capabilities its manifest declares.
    pub caps: Vec<Cap>,
    /// argv after argv[0]; `{outside}`, `{port}`, `{port6}`,
    /// `{neighbour}`, `{http}` and `{http_other}` (and, in `input`, cap targets and `tools`, `{probe}`:
    /// the native probe `gatehouse-exec-probe` copied into the workspace)
    /// are replaced when the case runs.
    pub args: Vec<String>,
    /// stdin (a command), or `run`'s argument (a component).
    pub input: String,
    /// What the case does besides running its guest once, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub special: Option<Special>,
    /// Limits besides the defaults: deadline ms, memory MiB, output KiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// The linear memory cap, in MiB (default: [`crate::sandbox::Limits`]'s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<usize>,
    /// The stdout and stderr cap, in KiB (default: [`crate::sandbox::Limits`]'s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_kib: Option<usize>,
    /// Programs the manifest and the actor list in `tools` (a `code:exec`
    /// case; its approval is given once, as a person at the terminal
    /// would).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Hostcall fuel, when not the default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostcalls: Option<u64>,
    /// The isolation layer this case exercises: when the report says it
    /// is unavailable, the case is skipped with its reason. `seccomp`
    /// names the `code_exec` layer's seccomp filter (skipped when the
    /// report's details say it cannot be installed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<&'static str>,
    /// The one outcome the case must end in.
    pub expect: Expect,
}

/// What one case did, as the runner (or any other host) saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "end", rename_all = "snake_case")]
pub enum Observed {
    /// Refused before guest code ran.
    Refused {
        /// The deny code.
        code: DenyCode,
        /// The refusal in words.
        reason: String,
    },
    /// Stopped after guest code ran: a limit (`code`), a trap, a cancel.
    Stopped {
        /// The limit's code; `None` for a trap.
        code: Option<DenyCode>,
        /// What stopped it, in words.
        message: String,
        /// What the guest wrote to stdout until it was stopped.
        stdout: String,
    },
    /// Ran to its end.
    Ran {
        /// The exit status.
        exit: i32,
        /// The guest's stdout.
        stdout: String,
        /// The guest's stderr.
        stderr: String,
    },
    /// Refused as invalid input: nothing ran, nothing was recorded.
    Invalid {
        /// Why, in words.
        message: String,
    },
    /// The host failed.
    Error {
        /// What failed, in words.
        message: String,
    },
}

impl Observed {
    /// One line: what happened.
    pub fn describe(&self) -> String {
        match self {
            Observed::Refused { code, reason } => format!("refused {code}: {reason}"),
            Observed::Stopped { code, message, .. } => match code {
                Some(c) => format!("stopped {c}"),
                None => format!("trapped: {}", trap_reason(message)),
            },
            Observed::Ran { exit, stdout, .. } => {
                // A long report: its last line says how it ended.
                let text = stdout.trim_end();
                let text = match text.lines().count() {
                    0..=3 => text,
                    _ => text.lines().last().unwrap_or_default(),
                };
                let shown: String = text.chars().take(300).collect();
                format!("exit {exit}, stdout {shown:?}")
            }
            Observed::Invalid { message } => format!("invalid: {message}"),
            Observed::Error { message } => format!("error: {message}"),
        }
    }

    fn stdout(&self) -> &str {
        match self {
            Observed::Stopped { stdout, .. } | Observed::Ran { stdout, .. } => stdout,
            _ => "",
        }
    }
}

/// The reason of a trap without its backtrace: the text after the last
/// frame (`N: 0xADDR - module!function: reason`).
fn trap_reason(message: &str) -> String {
    let last = message.lines().last().unwrap_or_default();
    if !message.contains("wasm backtrace") {
        return last.to_string();
    }
    last.split_once('!')
        .and_then(|(_, rest)| rest.split_once(": "))
        .map_or(last, |(_, reason)| reason)
        .to_string()
}

/// `run-tool`'s answer: the command's status, stdout and stderr.
fn command_answer(output: &str) -> Option<(i32, String, String)> {
    let v: serde_json::Value = serde_json::from_str(output).ok()?;
    let status = i32::try_from(v["status"].as_i64()?).ok()?;
    Some((
        status,
        v["stdout"].as_str()?.to_string(),
        v["stderr"].as_str()?.to_string(),
    ))
}

/// A case's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// An attack ended in its expected outcome.
    Held,
    /// An attack achieved something (or ran where it must be refused).
    Broken,
    /// A program of the correct half did exactly what it must.
    Correct,
    /// It did not.
    Incorrect,
    /// Not run: a layer it needs is missing here (the reason says which).
    Skipped,
    /// An attack ended in an outcome that is neither its expected one nor
    /// a breach, or the host could not run the case.
    Error,
}

impl Verdict {
    /// The verdict's name in the report (`held`, `broken`, `correct`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Held => "held",
            Verdict::Broken => "broken",
            Verdict::Correct => "correct",
            Verdict::Incorrect => "incorrect",
            Verdict::Skipped => "skipped",
            Verdict::Error => "error",
        }
    }

    /// Whether this verdict fails the suite.
    pub fn fails(self) -> bool {
        matches!(self, Verdict::Broken | Verdict::Incorrect | Verdict::Error)
    }
}

/// Whether `observed` is exactly `expect`.
pub fn matches(expect: &Expect, observed: &Observed) -> bool {
    match (expect, observed) {
        (Expect::Refused { code }, Observed::Refused { code: c, .. }) => code == c,
        (Expect::Limit { code }, Observed::Stopped { code: Some(c), .. }) => code == c,
        (Expect::Trap, Observed::Stopped { code: None, .. }) => true,
        (
            Expect::Output { exit, stdout },
            Observed::Ran {
                exit: e, stdout: s, ..
            },
        ) => exit == e && stdout == s,
        (
            Expect::OutputEnds { exit, suffix },
            Observed::Ran {
                exit: e, stdout: s, ..
            },
        ) => exit == e && s.ends_with(suffix.as_str()) && !s.lines().any(|l| l.starts_with("FAIL")),
        (Expect::Invalid, Observed::Invalid { .. }) => true,
        (
            Expect::Command {
                status,
                stdout,
                stderr_suffix,
            },
            Observed::Ran {
                exit: 0, stdout: s, ..
            },
        ) => command_answer(s).is_some_and(|(st, out, err)| {
            st == *status && out == *stdout && err.ends_with(stderr_suffix.as_str())
        }),
        _ => false,
    }
}

/// The verdict of `case` given what it did, and why.
///
/// An attack is `held` when it ended in its one expected outcome; `broken`
/// when its guest reports what it achieved (a `BROKEN` line) or when a
/// guest that must be refused before it starts ran instead; anything else
/// is an `error` (an unexpected outcome, shown). A program of the correct
/// half is `correct` or `incorrect`.
pub fn classify(case: &Case, observed: &Observed) -> (Verdict, String) {
    let seen = observed.describe();
    if matches(&case.expect, observed) {
        let v = match case.half {
            Half::Holds => Verdict::Held,
            Half::Correct => Verdict::Correct,
        };
        return (v, seen);
    }
    let why = format!("expected {}; observed {seen}", case.expect.describe());
    if case.half == Half::Correct {
        return (Verdict::Incorrect, why);
    }
    let claimed = observed.stdout().lines().find(|l| l.starts_with("BROKEN"));
    if let Some(line) = claimed {
        return (Verdict::Broken, line.to_string());
    }
    let ran_when_refused =
        matches!(case.expect, Expect::Refused { .. }) && matches!(observed, Observed::Ran { .. });
    if ran_when_refused {
        return (Verdict::Broken, format!("ran without its grant: {why}"));
    }
    (Verdict::Error, why)
}
