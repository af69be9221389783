//! `code:exec` → `gatehouse:executor/exec`: a host command, screened by
//! the policy's tool layers on every call, then run in the OS sandbox of
//! [`crate::exec`].
//!
//! Linked only when the plan allows `code:exec` on at least one program.
//! Each call is refused as a value (nothing is started) unless the
//! program's name is one the plan allows and the policy's `tool` request
//! for the exact argv is allowed. The command gets the plan's authority
//! and no more: its read and write roots are the plan's whole-directory
//! preopens, its environment the granted variables, internet sockets only
//! with `network:sites`.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use wasmtime::component::{HasData, Linker};

use super::fs::{DirAccess, FsPart};
use super::wit::gatehouse::executor::exec;
use super::wit::gatehouse::executor::types::{Denial, Error};
use super::{Finished, Open, OpenError, Prepare, PrepareError, Runtimes, Unit};
use crate::exec::{
    quote_argv, resolve_program, Confinement, ExecLimits, ExecOutcome, ExecSpec, ExecSupport,
};
use crate::exec::{PinError, PinnedDir};
use crate::policy::command::basename;
use crate::policy::snapshot::ProtectedKind;
use crate::policy::{is_within, DenyCode};
use crate::sandbox::plan::Plan;
use crate::sandbox::services::{
    AuditSink, CommandApproval, CommandApproved, CommandEnd, CommandScreen, RunDecision,
    RunRequest, RunServices, RunVerdict,
};
use crate::sandbox::HostState;

/// The command calls one turn may make (each is recorded in the run report
/// and the audit, refused or run): past it a call is refused with
/// `LIMIT_HOSTCALLS`, unrecorded, and starts nothing.
pub const MAX_COMMANDS: usize = 1000;

/// One call of `exec.run`, as the run report shows it.
#[derive(Debug, Clone, Serialize)]
pub struct CommandRecord {
    /// The program as the guest named it.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// `allow`, or the deny code that refused it.
    pub decision: String,
    /// Why it was allowed or refused.
    pub reason: String,
    /// Whether a process was started.
    pub spawned: bool,
    /// The exit status, when the process exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<i32>,
    /// The signal that ended the process, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Whether the timeout killed it.
    pub timed_out: bool,
    /// Whether stdout or stderr was cut at the cap.
    pub truncated: bool,
    /// Bytes the command wrote to stdout, kept or not.
    pub stdout_total: u64,
    /// Bytes the command wrote to stderr, kept or not.
    pub stderr_total: u64,
    /// What confined it (`None` when nothing was started).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confinement: Option<Confinement>,
}

impl CommandRecord {
    /// One line for people: `cat notes.txt -> status 1; landlock abi 7,
    /// seccomp on, read roots [..], write roots [..]`, or why nothing
    /// started.
    pub fn summary(&self) -> String {
        let end = match (self.spawned, self.status, self.signal) {
            (false, _, _) => format!("not started: {} {}", self.decision, self.reason),
            (true, _, _) if self.timed_out => "killed at its timeout".to_string(),
            (true, Some(code), _) => format!("status {code}"),
            (true, None, sig) => format!("signal {}", sig.unwrap_or(0)),
        };
        let confined = self
            .confinement
            .as_ref()
            .map(|k| {
                let mut s = format!(
                    "; landlock {}, seccomp {}, read roots [{}], write roots [{}]",
                    k.landlock_abi
                        .map(|a| format!("abi {a}"))
                        .unwrap_or_else(|| "off".into()),
                    if k.seccomp { "on" } else { "off" },
                    k.read_roots.join(", "),
                    k.write_roots.join(", "),
                );
                for skipped in &k.skipped {
                    s.push_str(&format!("; skipped {skipped}"));
                }
                s
            })
            .unwrap_or_default();
        format!(
            "{} {} -> {end}{confined}",
            self.program,
            self.args.join(" ")
        )
    }
}

/// What a run needs to start commands.
pub struct ExecState {
    /// The policy's answer for a command line, bound to the turn's actor.
    pub screen: Arc<dyn CommandScreen>,
    /// Where every call, refused or run, is recorded.
    pub audit: Arc<dyn AuditSink>,
    /// Program names the plan allows.
    pub tools: Vec<String>,
    /// The plan's pinned directories (see [`crate::sandbox::pinned`]).
    pub read_roots: Vec<PinnedDir>,
    /// The plan's pinned directories a command may write beneath.
    pub write_roots: Vec<PinnedDir>,
    /// The workspace when it is inside a root (opened beneath that root's
    /// descriptor), else the first root, else `/` (where Landlock lets a
    /// command read nothing). `Err` when it could not be opened: every
    /// command is refused with the reason.
    pub cwd: Result<PinnedDir, String>,
    /// The environment a command gets, the granted variables only.
    pub env: Vec<(String, String)>,
    /// Whether a command may open internet sockets (`network:sites` granted).
    pub network: bool,
    /// Each command's caps; the timeout is cut to what is left of the run.
    pub limits: ExecLimits,
    /// The run's own deadline: no command runs longer.
    pub timeout_ms: u64,
    /// What this host can apply: the Landlock ABI and seccomp.
    pub support: ExecSupport,
    /// Set when a write root holds host configuration (or lies within
    /// it), or holds a read-only workspace root: Landlock cannot carve a protected path out of a root, so every
    /// command of the run is refused with this code and reason.
    pub protected_overlap: Option<(DenyCode, String)>,
    /// Every call so far.
    pub records: Vec<CommandRecord>,
    /// Programs whose every command line needs a person's approval (see
    /// [`ExecPart::ask_each`]).
    pub ask_each: Vec<String>,
    /// The command lines a person approved for this turn so far.
    pub approved: Vec<Vec<String>>,
    /// The command lines refused or queued so far, with their answer: the
    /// same line asked again gets it again (no one is asked twice, no
    /// second entry is queued).
    pub unapproved: Vec<(Vec<String>, CommandApproved)>,
    /// Who is asked about a command line of `ask_each`.
    pub approval: Option<Arc<dyn CommandApproval>>,
}

impl ExecState {
    /// The binding of `plan`: whole-directory preopens become roots (a
    /// preopen whose glob is finer than its directory is not given to
    /// commands: Landlock confines directory trees, not globs), the granted
    /// variables that are set become the environment.
    ///
    /// # Security
    /// Hands every command of the run the plan's roots, variables and,
    /// with `network:sites`, TCP and UDP sockets to any address (the
    /// per-name filter of `network:sites` covers wasm guests only).
    pub fn new(plan: &Plan, runtimes: &Runtimes, services: &RunServices) -> ExecState {
        let parts = plan.parts();
        let limits = plan.limits();
        let mut state = ExecState {
            screen: services.screen.clone(),
            audit: services.audit.clone(),
            tools: parts.exec.tools.clone(),
            read_roots: Vec::new(),
            write_roots: Vec::new(),
            cwd: Err("no command was granted".into()),
            env: Vec::new(),
            network: !parts.network.hosts.is_empty(),
            timeout_ms: limits.deadline_ms,
            limits: ExecLimits {
                timeout_ms: limits.deadline_ms,
                output_bytes: limits.output_bytes,
                ..ExecLimits::default()
            },
            support: ExecSupport::probe(),
            protected_overlap: None,
            records: Vec::new(),
            ask_each: parts.exec.ask_each.clone(),
            approved: parts.exec.approved.clone(),
            unapproved: Vec::new(),
            approval: services.commands.clone(),
        };
        if state.tools.is_empty() && !plan.runnable().is_command() {
            // Nothing may run: no root is opened, every call is refused
            // by the screen.
            return state;
        }
        let fs = &parts.fs;
        let (read_roots, write_roots) = command_roots(fs);
        let cwd = command_cwd(plan.workspace(), &read_roots, &write_roots);
        let env = parts.env.values(&runtimes.env);
        let protected_overlap = protected_overlap(fs, &read_roots, &write_roots);
        state.read_roots = read_roots;
        state.write_roots = write_roots;
        state.cwd = cwd;
        state.env = env;
        state.protected_overlap = protected_overlap;
        state
    }
}

/// The preopens a command may use as roots: those whose whole tree the
/// grant covers, read-write ones first as write roots.
fn command_roots(fs: &FsPart) -> (Vec<PinnedDir>, Vec<PinnedDir>) {
    let whole = |host: &std::path::Path, access: DirAccess| {
        let want = format!("{}/**", host.display().to_string().trim_end_matches('/'));
        let globs = match access {
            DirAccess::ReadOnly => &fs.read_globs,
            DirAccess::ReadWrite => &fs.write_globs,
        };
        globs.iter().any(|g| g.as_str() == want)
    };
    let mut read_roots = Vec::new();
    let mut write_roots = Vec::new();
    for p in &fs.preopens {
        match p.access {
            DirAccess::ReadWrite if whole(&p.host, DirAccess::ReadWrite) => {
                write_roots.push(p.dir.clone())
            }
            DirAccess::ReadWrite | DirAccess::ReadOnly if whole(&p.host, DirAccess::ReadOnly) => {
                read_roots.push(p.dir.clone())
            }
            _ => {}
        }
    }
    (read_roots, write_roots)
}

/// A command's working directory: the workspace when a root holds it,
/// else the first root, else `/`.
fn command_cwd(
    workspace: &Path,
    read_roots: &[PinnedDir],
    write_roots: &[PinnedDir],
) -> Result<PinnedDir, String> {
    match read_roots
        .iter()
        .chain(write_roots)
        .find(|r| workspace.starts_with(r.path()))
    {
        Some(root) if root.path() == workspace => Ok(root.clone()),
        Some(root) => root.open_below(workspace),
        None => match write_roots.first().or(read_roots.first()) {
            Some(root) => Ok(root.clone()),
            None => PinnedDir::open(Path::new("/")),
        },
    }
    .map_err(|e| format!("the working directory {e}"))
}

/// Why no command may run with these roots, if one of them holds what a
/// command's sandbox cannot exclude or hide: a read-only root or host
/// configuration inside a write root, or host state in a read root.
fn protected_overlap(
    fs: &FsPart,
    read_roots: &[PinnedDir],
    write_roots: &[PinnedDir],
) -> Option<(DenyCode, String)> {
    let read_only_inside = write_roots.iter().find_map(|root| {
        let root_str = root.path().display().to_string();
        fs.read_only_roots()
            .find(|ro| is_within(ro, &root_str))
            .map(|ro| {
                (DenyCode::WorkspaceReadOnly, format!("the write root `{root_str}` holds the read-only root `{ro}`, which a command's sandbox cannot exclude; no command may run with it"))
            })
    });
    write_roots.iter().find_map(|root| {
        let root_str = root.path().display().to_string();
        fs.protected
            .iter()
            .find(|p| is_within(&p.path, &root_str) || is_within(&root_str, &p.path))
            .map(|p| {
                (p.kind.write_code(), format!("the write root `{root_str}` holds host configuration (`{}`), which a command's sandbox cannot exclude; no command may run with it", p.path))
            })
    })
    .or(read_only_inside)
    .or_else(|| {
        // Nor can it hide host state from a read root that holds it.
        read_roots.iter().find_map(|root| {
            let root_str = root.path().display().to_string();
            fs.protected
                .iter()
                .find(|p| p.kind == ProtectedKind::State && (is_within(&p.path, &root_str) || is_within(&root_str, &p.path)))
                .map(|p| {
                    (DenyCode::HostStateHidden, format!("the read root `{root_str}` holds the host's own state (`{}`), which a command's sandbox cannot hide; no command may run with it", p.path))
                })
        })
    })
}

fn denial(code: DenyCode, reason: String) -> Error {
    Error::Denied(Denial {
        code: code.as_str().into(),
        reason,
    })
}

impl ExecState {
    /// The policy's answer for `program args`, before anything starts.
    fn screen(&self, program: &str, args: &[String]) -> Result<(), (DenyCode, String)> {
        let name = basename(program);
        if !self.tools.iter().any(|t| t == name || t == program) {
            return Err((
                DenyCode::ToolNotGranted,
                format!(
                    "`code:exec` is granted for {}, not `{name}`",
                    self.tools
                        .iter()
                        .map(|t| format!("`{t}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        let mut argv = vec![program.to_string()];
        argv.extend(args.iter().cloned());
        // A tool granted by full path is screened as that path (the
        // policy grants such a tool only by its path, never its name).
        let tool = if self.tools.iter().any(|t| t == program) && program.contains('/') {
            program
        } else {
            name
        };
        self.screen.screen(tool, &quote_argv(&argv))
    }
}

impl ExecState {
    /// Screens `program args`, then runs it confined; every call, refused
    /// or not, is recorded. A refusal starts nothing.
    pub fn call(
        &mut self,
        program: String,
        args: Vec<String>,
        stdin: Vec<u8>,
    ) -> Result<ExecOutcome, Error> {
        // The argv is the guest's: the record keeps each word bounded.
        let bounded = |w: &String| crate::policy::bounded(w).into_owned();
        let mut record = CommandRecord {
            program: bounded(&program),
            args: args.iter().map(bounded).collect(),
            decision: "allow".into(),
            reason: String::new(),
            spawned: false,
            status: None,
            signal: None,
            timed_out: false,
            truncated: false,
            stdout_total: 0,
            stderr_total: 0,
            confinement: None,
        };
        let spec = match self.spec(&program, args, stdin) {
            Ok(spec) => spec,
            Err((e, code)) => {
                if let Some(code) = code {
                    record.decision = code.as_str().into();
                }
                record.reason = crate::policy::bounded(match &e {
                    Error::Denied(d) => &d.reason,
                    Error::InvalidInput(m) | Error::Failed(m) => m,
                })
                .into_owned();
                self.keep(record);
                return Err(e);
            }
        };
        match crate::exec::run(&spec, &self.support) {
            Ok(o) => {
                record.spawned = true;
                record.status = o.status;
                record.signal = o.signal;
                record.timed_out = o.timed_out;
                record.truncated = o.truncated;
                record.stdout_total = o.stdout_total;
                record.stderr_total = o.stderr_total;
                record.confinement = Some(o.confinement.clone());
                self.keep(record);
                Ok(o)
            }
            // A root renamed away and replaced since the plan was made
            // (by an earlier command, say): refused, nothing started.
            Err(e @ crate::exec::ExecError::Root(PinError::Moved(_))) => {
                let code = DenyCode::PathResolutionFailed;
                record.decision = code.as_str().into();
                record.reason = e.to_string();
                self.keep(record);
                Err(denial(code, e.to_string()))
            }
            Err(e) => {
                record.reason = e.to_string();
                self.keep(record);
                Err(Error::Failed(e.to_string()))
            }
        }
    }

    /// Logs the call and keeps it for the run report.
    fn keep(&mut self, record: CommandRecord) {
        self.log(&record);
        self.records.push(record);
    }

    /// Appends the call to the turn's audit log: the `tool` request with
    /// its exact argv, the answer, and whether a process started.
    fn log(&self, record: &CommandRecord) {
        let mut argv = vec![record.program.clone()];
        argv.extend(record.args.iter().cloned());
        let decision = if record.decision == "allow" {
            RunVerdict::Allow {
                reason: Some(record.reason.clone()),
            }
        } else {
            RunVerdict::Deny {
                code: DenyCode::from_name(&record.decision),
                reason: record.reason.clone(),
            }
        };
        // The command's outcome stands even if the audit cannot keep it.
        self.audit.decision(RunDecision {
            request: RunRequest::Tool {
                tool: basename(&record.program).to_string(),
                command: quote_argv(&argv),
            },
            decision,
            command: Some(CommandEnd {
                spawned: record.spawned,
                status: record.status,
                signal: record.signal,
                timed_out: record.timed_out,
            }),
            response: None,
            provider: None,
        });
    }

    /// The spec of an allowed command, or the error value (with the deny
    /// code when the policy refused).
    fn spec(
        &mut self,
        program: &str,
        args: Vec<String>,
        stdin: Vec<u8>,
    ) -> Result<ExecSpec, (Error, Option<DenyCode>)> {
        if let Err((code, reason)) = self.screen(program, &args) {
            return Err((denial(code, reason), Some(code)));
        }
        if let Some((code, reason)) = &self.protected_overlap {
            return Err((denial(*code, reason.clone()), Some(*code)));
        }
        let cwd = match &self.cwd {
            Ok(dir) => dir.clone(),
            Err(reason) => {
                let code = DenyCode::PathResolutionFailed;
                return Err((denial(code, reason.clone()), Some(code)));
            }
        };
        let path = self.program_path(program)?;
        self.approve(program, &args)?;
        Ok(ExecSpec {
            program: path,
            args,
            cwd,
            env: self.env.clone(),
            read_roots: self.read_roots.clone(),
            write_roots: self.write_roots.clone(),
            network: self.network,
            limits: self.limits,
            stdin,
            // The other granted tools: the only programs it may start.
            also_executable: self
                .tools
                .iter()
                .filter_map(|t| resolve_program(t).ok())
                .collect(),
        })
    }
}

impl ExecState {
    /// A person's approval of `program args`, when its program's
    /// `code:exec` was allowed once: asked for each command line not yet
    /// approved in this turn (after every other check passed, so no one
    /// is asked about a command that would be refused anyway).
    fn approve(&mut self, program: &str, args: &[String]) -> Result<(), (Error, Option<DenyCode>)> {
        let name = basename(program);
        let Some(tool) = self
            .ask_each
            .iter()
            .find(|t| *t == program || *t == name)
            .cloned()
        else {
            return Ok(());
        };
        let mut argv = vec![program.to_string()];
        argv.extend(args.iter().cloned());
        if self.approved.contains(&argv) {
            return Ok(());
        }
        let line = quote_argv(&argv);
        let answer = match self.unapproved.iter().find(|(a, _)| *a == argv) {
            Some((_, answer)) => answer.clone(),
            None => {
                let answer = match &self.approval {
                    Some(approval) => approval.approve(&tool, &argv, &self.approved),
                    None => CommandApproved::NoOne,
                };
                if answer != CommandApproved::Once {
                    self.unapproved.push((argv.clone(), answer.clone()));
                }
                answer
            }
        };
        let (code, reason) = match answer {
            CommandApproved::Once => {
                self.approved.push(argv);
                return Ok(());
            }
            CommandApproved::Refused => (
                DenyCode::ApprovalRefused,
                format!("the command line `{line}` was refused by the person asked"),
            ),
            CommandApproved::Queued(entry) => (
                DenyCode::ApprovalRequired,
                format!("`code:exec` on `{tool}` is approved one command line at a time; `{line}` is queued as pending approval `{entry}`, which a person can answer with `gatehouse approvals`"),
            ),
            CommandApproved::NoOne => (
                DenyCode::ApprovalRequired,
                format!("`code:exec` on `{tool}` is approved one command line at a time, and no one can be asked about `{line}`"),
            ),
        };
        Err((denial(code, reason), Some(code)))
    }

    /// The file that runs for `program`: the granted tool, resolved by
    /// name in the fixed program path (or the granted absolute path). A
    /// path the guest gives must be that same file: a program of the same
    /// name elsewhere (one a command copied into the workspace, say) is
    /// not the granted tool.
    fn program_path(&self, program: &str) -> Result<PathBuf, (Error, Option<DenyCode>)> {
        let name = basename(program);
        let granted = self
            .tools
            .iter()
            .find(|t| *t == program)
            .or_else(|| self.tools.iter().find(|t| *t == name))
            .map(String::as_str)
            .unwrap_or(name);
        let want =
            resolve_program(granted).map_err(|e| (Error::InvalidInput(e.to_string()), None))?;
        if program.contains('/') {
            let same = match (std::fs::canonicalize(program), std::fs::canonicalize(&want)) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
            if !same {
                let reason = format!(
                    "`{program}` is not the granted tool `{granted}` (`{}`)",
                    want.display()
                );
                return Err((
                    denial(DenyCode::ToolNotGranted, reason),
                    Some(DenyCode::ToolNotGranted),
                ));
            }
        }
        Ok(want)
    }
}

/// What the binding works on: the run's commands, when granted, and the
/// run's deadline (a command's time is the run's time: its timeout is what
/// is left of the run).
pub struct ExecView<'a> {
    /// The run's command state.
    pub state: &'a mut ExecState,
    /// When the run's deadline passes.
    pub deadline: std::time::Instant,
}

impl exec::Host for ExecView<'_> {
    fn run(
        &mut self,
        program: String,
        args: Vec<String>,
        stdin: Vec<u8>,
    ) -> Result<exec::Outcome, Error> {
        let b = &mut *self.state;
        if b.records.len() >= MAX_COMMANDS {
            // Every call is recorded, so past the records a turn may keep
            // no call runs.
            return Err(denial(
                DenyCode::LimitHostcalls,
                format!("a turn may make at most {MAX_COMMANDS} command calls"),
            ));
        }
        let left = self
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(denial(
                DenyCode::LimitDeadline,
                "the run's deadline has passed; no command starts".into(),
            ));
        }
        b.limits.timeout_ms = u64::try_from(left.as_millis())
            .unwrap_or(u64::MAX)
            .clamp(1, b.timeout_ms);
        let o = b.call(program, args, stdin)?;
        Ok(exec::Outcome {
            status: o.status,
            signal: o.signal,
            timed_out: o.timed_out,
            stdout: o.stdout,
            stderr: o.stderr,
            truncated: o.truncated,
        })
    }
}

struct HasExec;

impl HasData for HasExec {
    type Data<'a> = ExecView<'a>;
}

/// The programs `code:exec` was allowed on that the manifest's `tools`
/// lists too; empty, and nothing linked, without the grant.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ExecPart {
    /// The programs a command may run.
    pub tools: Vec<String>,
    /// Of `tools`, those whose `code:exec` a person allowed once (no grant
    /// covers it): "once" covers one command line, the one shown, so each
    /// command line of theirs is asked about before it runs (see
    /// [`crate::sandbox::services::CommandApproval`]).
    pub ask_each: Vec<String>,
    /// The command lines (argv) a person already approved for this turn:
    /// those of the queued answer the turn took.
    pub approved: Vec<Vec<String>>,
}

/// The command unit.
pub struct Exec;

impl Unit for Exec {
    type Part = ExecPart;
    type State = ExecState;
    type Runtime = ();

    fn open(_: &Open<'_>) -> Result<(), OpenError> {
        Ok(())
    }

    /// The screen and the plan's roots, variables and sockets for every
    /// command of the run (see [`ExecState::new`]).
    ///
    /// # Security
    /// Hands each command of the run the plan's whole-directory roots.
    fn prepare(_: &ExecPart, _: &(), cx: &mut Prepare<'_>) -> Result<ExecState, PrepareError> {
        Ok(ExecState::new(cx.plan, cx.runtimes, cx.services))
    }

    fn describe(part: &ExecPart, _: &ExecState, out: &mut Vec<Cow<'static, str>>) {
        if !part.tools.is_empty() {
            let tools: Vec<String> = part.tools.iter().map(|t| format!("`{t}`")).collect();
            out.push(Cow::Owned(format!("code:exec {}", tools.join(", "))));
        }
    }

    /// The command lines the run ran.
    fn finish(state: &mut ExecState, out: &mut Finished) -> Result<(), PrepareError> {
        out.commands = std::mem::take(&mut state.records);
        Ok(())
    }
}

/// Links `gatehouse:executor/exec`.
///
/// # Security
/// Lets the guest run the state's programs, each call screened by the
/// policy and confined by [`crate::exec`]; the table links it only with
/// `code:exec` granted.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    exec::add_to_linker::<HostState, HasExec>(linker, |s| ExecView {
        state: &mut s.exec,
        deadline: s.deadline,
    })
}
