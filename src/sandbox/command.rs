//! A command executor: the plan's runnable is a host command
//! ([`Runnable::Command`](super::plan::Runnable)), run once in the OS
//! sandbox of `code:exec` with the turn's input on its stdin, instead of a
//! component.

use super::bindings::exec::ExecState;
use super::bindings::GuestError as Error;
use super::limits::{LimitHit, Limits};
use super::plan::Plan;
use super::run::{GuestResult, RunError, RunReport};
use super::services::RunServices;
use crate::exec::ExecOutcome;
use crate::policy::DenyCode;

/// Runs a command executor: the plan's command, screened like any
/// `code:exec` call, in the OS sandbox, with `input` on its stdin. Exit
/// status 0 is `ok` with stdout as the output; any other end is an error
/// result; a refusal, the timeout or the output cap end the run with their
/// codes, as they do for a component.
pub fn run_command(
    plan: &Plan,
    argv: &[String],
    input: &str,
    io: &crate::sandbox::run::RunIo,
    services: &RunServices,
) -> Result<RunReport, RunError> {
    let started = std::time::Instant::now();
    let Some((program, args)) = argv.split_first() else {
        return Err(RunError::Host("the plan has no command".into()));
    };
    let mut binding = ExecState::new(plan, &services.runtimes, services);
    let linked = linked(program, &binding);
    // The turn's arguments follow the manifest's; the screen sees the
    // whole argv, as for any command call.
    let argv: Vec<String> = args.iter().chain(&io.args).cloned().collect();
    let stdin = command_stdin(io, input)?;
    let result = binding.call(program.clone(), argv, stdin);
    let o = match result {
        Ok(o) => o,
        Err(Error::Denied(d)) => {
            return Err(RunError::Refused {
                code: DenyCode::from_name(&d.code).unwrap_or(DenyCode::UnknownRequest),
                reason: d.reason,
            })
        }
        Err(Error::InvalidInput(m) | Error::Failed(m)) => return Err(RunError::Host(m.into())),
    };
    if let Some(hit) = limit_hit(&o, plan.limits()) {
        return Err(RunError::Limit(hit));
    }
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let result = match (o.status, o.signal) {
        (Some(0), _) => GuestResult::Ok {
            output: stdout.clone(),
        },
        (Some(code), _) => GuestResult::Err {
            error: serde_json::json!({"failed": format!("`{program}` exited with status {code}"), "status": code}),
        },
        (None, signal) => GuestResult::Err {
            error: serde_json::json!({"failed": format!("`{program}` was killed by signal {}", signal.unwrap_or(0)), "signal": signal}),
        },
    };
    let report = RunReport {
        result,
        stdout,
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        log: Vec::new(),
        linked: linked.into_iter().map(std::borrow::Cow::Owned).collect(),
        imports: Vec::new().into(),
        cache_hit: false,
        compiled: 0,
        sha256: String::new(),
        elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
        commands: std::mem::take(&mut binding.records),
        exit_code: match (o.status, o.signal) {
            (Some(code), _) => Some(code),
            // Killed by a signal: as a shell reports it.
            (None, signal) => Some(128 + signal.unwrap_or(0)),
        },
        command: true,
        backtrace: Vec::new(),
    };
    if io.forward_output {
        use std::io::Write;
        let _ = std::io::stdout().lock().write_all(report.stdout.as_bytes());
        let _ = std::io::stderr().lock().write_all(report.stderr.as_bytes());
    }
    Ok(report)
}

/// The host's stdin could not be read for a command's turn.
#[derive(Debug, thiserror::Error)]
#[error("cannot read stdin: {0}")]
struct StdinUnread(#[source] crate::util::IoCause);

/// What the command run links, for the report: the program, its roots
/// and its variables.
fn linked(program: &str, binding: &ExecState) -> Vec<String> {
    let mut linked = vec![format!("code:exec `{program}` (command executor)")];
    linked.extend(
        binding
            .read_roots
            .iter()
            .map(|r| format!("root `{}` (read-only)", r.path().display())),
    );
    linked.extend(
        binding
            .write_roots
            .iter()
            .map(|r| format!("root `{}` (read-write)", r.path().display())),
    );
    linked.extend(binding.env.iter().map(|(k, _)| format!("env `{k}`")));
    linked
}

/// The command's stdin: the turn's input, or the process's own.
fn command_stdin(io: &crate::sandbox::run::RunIo, input: &str) -> Result<Vec<u8>, RunError> {
    Ok(match io.stdin {
        crate::sandbox::run::StdinFrom::Input => input.as_bytes().to_vec(),
        crate::sandbox::run::StdinFrom::Inherit => match &io.process_stdin {
            Some(stdin) => stdin
                .read_all()
                .map_err(|e| RunError::Host(Box::new(StdinUnread(e.into()))))?,
            None => Vec::new(),
        },
    })
}

/// The limit the command passed, if any: its deadline or its output cap.
fn limit_hit(o: &ExecOutcome, limits: &Limits) -> Option<LimitHit> {
    if o.timed_out {
        return Some(LimitHit::new(
            DenyCode::LimitDeadline,
            format!("the command ran longer than {} ms", limits.deadline_ms),
        ));
    }
    if o.truncated {
        return Some(LimitHit::new(
            DenyCode::LimitOutput,
            format!(
                "the command wrote more than {} bytes to {}",
                limits.output_bytes,
                if o.stdout_total > o.stdout.len() as u64 {
                    "stdout"
                } else {
                    "stderr"
                }
            ),
        ));
    }
    None
}
