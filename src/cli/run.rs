//! `gatehouse run`: one turn, from request to result.

use std::path::Path;

use serde::Serialize;

use gatehouse::host::{
    Approver, CancelHandle, EngineKind, GuestResult, Host, Limits, NoOne, OnDegraded, RunIo,
    RunReport, StdinFrom, Step, TerminalApprover, TurnEnd, TurnOutcome, TurnRequest,
};
use gatehouse::manifest::{find_by_name, Manifest};
use gatehouse::policy::DenyCode;

use super::args::RunArgs;
use super::host::HostFlags;
use super::host::{gather_manifests, merge_manifests, parse_level};
use super::{err, out, out_json, CmdResult, Context, Exit, Failure};

fn find_manifest(ctx: &Context, executor: &str) -> Result<Manifest, Failure> {
    let path = Path::new(executor);
    if executor.ends_with(".wasm") {
        return bare_wasm(path);
    }
    if executor.contains('/') || executor.ends_with(".toml") {
        return Ok(Manifest::load(path)?);
    }
    let config = ctx.config()?;
    find_by_name(&config.executor_dirs, executor)?.ok_or_else(|| {
        Failure::invalid(format!(
            "no executor named `{executor}` in the executor directories ({}); give a manifest path instead",
            config.executor_dirs.iter().map(|d| format!("`{}`", d.display())).collect::<Vec<_>>().join(", ")
        ))
    })
}

/// A bare `.wasm` file as an executor: named after the file, with
/// `compute:pure` only. Anything else it imports is refused with
/// `IMPORT_NOT_GRANTED`, whose reason names the manifest field that would
/// grant it.
fn bare_wasm(path: &Path) -> Result<Manifest, Failure> {
    if !path.is_file() {
        return Err(Failure::invalid(format!(
            "`{}` is not a file",
            path.display()
        )));
    }
    let absolute = std::path::absolute(path).map_err(|e| Failure::io("resolve", path, &e))?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let mut name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        name = format!("wasm{name}").chars().take(64).collect();
    }
    let manifest_path = absolute.with_extension("wasm.toml");
    Ok(Manifest::bare(
        &manifest_path,
        name,
        "a bare module: compute:pure only",
        &absolute,
    )?)
}

/// The host of one `gatehouse run`: the configuration, the executor named
/// on the command line and those it may delegate to.
fn open_host(ctx: &Context, args: &RunArgs, manifest: &Manifest) -> Result<Host, Failure> {
    let config = ctx.config()?;
    let level = args.level.as_deref().map(parse_level).transpose()?;
    let on_degraded = match &args.on_degraded {
        Some(v) => Some(
            v.parse::<OnDegraded>()
                .map_err(|e| Failure::invalid(format!("`--on-degraded`: {e}")))?,
        ),
        None => None,
    };
    let workspace = ctx.workspace(args.workspace.as_deref())?;
    let with = gather_manifests(&[], &args.with)?;
    let manifests = merge_manifests(
        gatehouse::manifest::discover(&config.executor_dirs)?,
        std::iter::once(manifest.clone()).chain(with).collect(),
    )?;
    super::host::open(HostFlags {
        level,
        on_degraded,
        max_memory_bytes: Some(args.memory_mib.saturating_mul(1 << 20)),
        // One turn, then exit: the engine sized for one turn.
        engine: EngineKind::OneShot,
        granted_by: ctx.env.login.clone(),
        approval_queue: true,
        ..HostFlags::of(ctx, config, workspace, manifests)
    })
}

/// Who is asked: the person at the controlling terminal when there is
/// one (the prompt goes to `/dev/tty`, never through the turn's stdin),
/// else no one (the turn ends with `APPROVAL_REQUIRED`, exit 4).
pub(super) fn approver() -> std::sync::Arc<dyn Approver> {
    if gatehouse::terminal::Tty::interactive().is_some() {
        std::sync::Arc::new(TerminalApprover)
    } else {
        std::sync::Arc::new(NoOne)
    }
}

/// Set by SIGINT: the running turn's cancel handle.
static INTERRUPT: std::sync::OnceLock<CancelHandle> = std::sync::OnceLock::new();

extern "C" fn on_interrupt(_: libc::c_int) {
    match INTERRUPT.get() {
        // A second Ctrl-C while the turn winds down ends the process.
        Some(c) if c.is_cancelled() => {
            // SAFETY: `_exit` is async-signal-safe.
            unsafe { libc::_exit(130) }
        }
        // An atomic store: async-signal-safe.
        Some(c) => c.cancel(),
        None => {
            // SAFETY: `_exit` is async-signal-safe.
            unsafe { libc::_exit(130) }
        }
    }
}

/// Ctrl-C cancels the turn (it ends within one epoch tick with
/// `TURN_CANCELLED`, exit 130); a second one ends the process.
fn cancel_on_interrupt(cancel: &CancelHandle) {
    if INTERRUPT.set(cancel.clone()).is_err() {
        return;
    }
    let handler = on_interrupt as extern "C" fn(libc::c_int);
    // SAFETY: the handler only loads a `OnceLock` that was set before it
    // was installed and stores to an atomic, or calls `_exit`: all
    // async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
    }
}

pub fn run(ctx: &Context, args: RunArgs) -> CmdResult {
    let manifest = find_manifest(ctx, &args.executor)?;
    let limits = Limits {
        memory_bytes: args.memory_mib.saturating_mul(1 << 20),
        deadline_ms: args.deadline_ms,
        output_bytes: args.output_kib.unwrap_or(1024).saturating_mul(1 << 10),
        hostcalls: args.hostcalls,
        ..Limits::default()
    };
    let host = open_host(ctx, &args, &manifest)?;
    if let Some(file) = &args.snapshot {
        // The policy the person verified is the one the turn runs under.
        gatehouse::snapshot::verify(file, host.snapshot())?;
        host.freeze_allow_set();
    }
    let mut request = TurnRequest::new(
        &manifest.name,
        &args.actor,
        args.input.as_deref().unwrap_or("{}"),
    );
    request.limits = limits;
    request.io = RunIo {
        args: args.args.clone(),
        stdin: if args.input.is_some() {
            StdinFrom::Input
        } else {
            StdinFrom::Inherit
        },
        forward_output: !ctx.json,
        forward_cap: args.output_kib.map(|k| k.saturating_mul(1 << 10)),
        // Read at the edge: the sandbox gets the handle, never the process.
        process_stdin: args
            .input
            .is_none()
            .then(|| gatehouse::host::HostStdin::new(std::io::stdin())),
    };
    // A guest's questions (`human:ask`) go to the person at the terminal,
    // when someone is there.
    request.asker = gatehouse::terminal::asker();
    cancel_on_interrupt(&request.cancel);
    // The same person is asked, while the guest runs, about each command
    // line of a `code:exec` allowed once.
    let approver = approver();
    request.approver = Some(gatehouse::host::ApproverRef(approver.clone()));
    let outcome = host.run(request, approver.as_ref());
    report(ctx, &outcome, args.verbose)
}

/// The process status of a turn: gatehouse's own codes before guest code
/// started, the guest's (as `wasmtime run` exits) once it did.
fn exit_of(outcome: &TurnOutcome) -> (Exit, bool) {
    match &outcome.end {
        TurnEnd::Refused {
            code: DenyCode::ApprovalRequired,
            ..
        } => (Exit::Approval, false),
        TurnEnd::Refused {
            code: DenyCode::TurnCancelled,
            ..
        } => (Exit::Guest(130), false),
        TurnEnd::Refused { .. } => (Exit::Denied, false),
        TurnEnd::Invalid { .. } => (Exit::Invalid, false),
        TurnEnd::Failed { .. } => (Exit::Error, false),
        TurnEnd::Stopped {
            code: Some(DenyCode::TurnCancelled),
            run,
            ..
        } => (Exit::Guest(130), run.is_some()),
        TurnEnd::Stopped { run: Some(_), .. } => (Exit::Guest(134), true),
        TurnEnd::Stopped { run: None, .. } => (Exit::Error, false),
        TurnEnd::Ran { run } => (Exit::Guest(run.exit_code.unwrap_or(1)), true),
    }
}

/// The `run --json` line: the outcome, with what the process made of it
/// (whether the guest ran, the exit code). Its fields are stable (issue
/// 28): added to, never renamed.
#[derive(Serialize)]
struct RunLine<'a> {
    turn: &'a str,
    executor: &'a str,
    actor: &'a str,
    level: &'a str,
    decisions: &'a [Step],
    limits: &'a Limits,
    ran: bool,
    exit_code: i32,
    guest_exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    isolation: Option<&'a gatehouse::host::IsolationReport>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    approvals: &'a [gatehouse::host::Answer],
    /// The pending approval the turn left, or was answered by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pending_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<DenyCode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pending: &'a [gatehouse::host::Pending],
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<RunLineError<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run: Option<&'a RunReport>,
}

/// A turn that ended with no guest result: its code, if any, and why.
#[derive(Serialize)]
struct RunLineError<'a> {
    code: Option<DenyCode>,
    message: &'a str,
}

impl<'a> RunLine<'a> {
    fn of(outcome: &'a TurnOutcome, ran: bool, exit: Exit) -> RunLine<'a> {
        let mut line = RunLine {
            turn: &outcome.turn,
            executor: &outcome.executor,
            actor: &outcome.actor,
            level: outcome.level,
            decisions: &outcome.decisions,
            limits: &outcome.limits,
            ran,
            exit_code: exit.code(),
            guest_exit_code: None,
            isolation: outcome.isolation.as_deref(),
            approvals: &outcome.approvals,
            pending_id: outcome.pending_id.as_deref(),
            code: None,
            reason: None,
            pending: &[],
            error: None,
            run: None,
        };
        match &outcome.end {
            TurnEnd::Refused { code, reason } => {
                line.code = Some(*code);
                line.reason = Some(reason);
                line.pending = &outcome.pending;
            }
            TurnEnd::Invalid { message } | TurnEnd::Failed { message } => {
                line.error = Some(RunLineError {
                    code: None,
                    message,
                });
            }
            TurnEnd::Stopped { code, message, run } => {
                line.error = Some(RunLineError {
                    code: *code,
                    message,
                });
                line.run = run.as_deref();
            }
            TurnEnd::Ran { run } => {
                line.guest_exit_code = run.exit_code;
                line.run = Some(run);
            }
        }
        line
    }
}

/// Prints a turn's outcome and picks the exit code.
pub(super) fn report(ctx: &Context, outcome: &TurnOutcome, verbose: bool) -> CmdResult {
    let (exit, ran) = exit_of(outcome);
    if ctx.json {
        if let TurnEnd::Stopped { message, .. } = &outcome.end {
            err(format!("gatehouse: {message}"));
        }
        // Through a value: its keys are sorted, as the line always had
        // them.
        out_json(&serde_json::to_value(RunLine::of(outcome, ran, exit)).unwrap_or_default());
        return Ok(exit);
    }
    let command = match &outcome.end {
        TurnEnd::Ran { run } | TurnEnd::Stopped { run: Some(run), .. } => run.command,
        _ => true,
    };
    // A component with `run` prints its report on stdout; a command's
    // output went through, and gatehouse's own lines go to stderr.
    let say: fn(String) = if command { err } else { |l| out(l) };
    if verbose || !command {
        print_steps(&outcome.decisions, say);
    }
    match &outcome.end {
        TurnEnd::Refused { code, reason } => {
            if verbose {
                if let Some(i) = &outcome.isolation {
                    err(super::isolation::line(i));
                }
            }
            // Exactly one line, the only one without --verbose.
            err(format!("gatehouse: {code}: {reason}"));
            Ok(exit)
        }
        TurnEnd::Invalid { message } => Err(Failure::invalid(message.clone())),
        TurnEnd::Failed { message } => Err(Failure::error(message.clone())),
        TurnEnd::Stopped { message, run, .. } => {
            if verbose || !command {
                say(format!("turn     {}", outcome.turn));
                if let Some(i) = &outcome.isolation {
                    say(super::isolation::line(i));
                }
            }
            if let (false, Some(run)) = (command, run) {
                print_output(run, say);
            }
            if let Some(run) = run {
                print_backtrace(run);
            }
            Err(Failure {
                exit,
                message: message.clone(),
            })
        }
        TurnEnd::Ran { run: report } => {
            if !verbose && command {
                for l in &report.log {
                    err(format!("log      [{}] {}", l.level, l.message));
                }
                return Ok(exit);
            }
            print_ran(outcome, report, command, exit, say);
            Ok(exit)
        }
    }
}

/// A turn that ran, in full: its limits, what it linked, its log, its
/// commands and its result.
fn print_ran(
    outcome: &TurnOutcome,
    report: &RunReport,
    command: bool,
    exit: Exit,
    say: fn(String),
) {
    let limits = outcome.limits;
    say(format!("turn     {}", outcome.turn));
    if let Some(i) = &outcome.isolation {
        say(super::isolation::line(i));
    }
    say(format!(
        "limits   memory {} MiB, deadline {} ms, output {} KiB per stream, {} hostcalls, {} resources",
        limits.memory_bytes >> 20,
        limits.deadline_ms,
        limits.output_bytes >> 10,
        limits.hostcalls,
        limits.resources
    ));
    say(format!("linked   {}", report.linked.join(", ")));
    say(format!(
        "cache    {}",
        if report.cache_hit {
            "hit (no compilation)"
        } else {
            "miss (compiled)"
        }
    ));
    for l in &report.log {
        say(format!("log      [{}] {}", l.level, l.message));
    }
    for c in &report.commands {
        say(format!("command  {}", c.summary()));
    }
    if command {
        say(format!("exit     {}", exit.code()));
    } else {
        match &report.result {
            GuestResult::Ok { output } => say(format!("output   {output}")),
            GuestResult::Err { error } => say(format!("error    {error}")),
        }
        if !report.stderr.is_empty() {
            say(format!("stderr   {}", report.stderr.trim_end()));
        }
    }
}

/// What a stopped component wrote before it was stopped.
fn print_output(run: &RunReport, say: fn(String)) {
    if !run.stdout.is_empty() {
        say(format!("stdout   {}", run.stdout.trim_end()));
    }
    if !run.stderr.is_empty() {
        say(format!("stderr   {}", run.stderr.trim_end()));
    }
}

/// A trapped guest's frames, innermost first, on stderr.
fn print_backtrace(run: &RunReport) {
    if run.backtrace.is_empty() {
        return;
    }
    err("backtrace (innermost first):");
    for (i, f) in run.backtrace.iter().enumerate() {
        err(format!("  {i:>2}: {}", f.describe()));
    }
}

fn print_steps(steps: &[Step], say: fn(String)) {
    for s in steps {
        let answer = match &s.decision {
            gatehouse::policy::Decision::Deny { code, .. } => format!("denied {code}"),
            d => d.outcome().to_string(),
        };
        let approval = s.approval.map(|a| format!(" ({a})")).unwrap_or_default();
        say(format!(
            "decision {:<11} {answer}{approval}: {}",
            s.request.kind.name(),
            s.decision.reason()
        ));
    }
}
