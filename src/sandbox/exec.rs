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

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use wasmtime::component::{HasData, Linker};

use super::bindings::gatehouse::executor::exec;
use super::bindings::gatehouse::executor::types::{Denial, Error};
use super::limits::LimitHit;
use super::plan::{DirAccess, Plan};
use super::run::{GuestResult, RunError, RunReport};
use super::services::{AuditSink, CommandScreen, RunServices};
use crate::exec::{
    quote_argv, resolve_program, Confinement, ExecLimits, ExecOutcome, ExecSpec, ExecSupport,
};
use crate::exec::{PinError, PinnedDir};
use crate::policy::command::basename;
use crate::policy::snapshot::ProtectedKind;
use crate::policy::{is_within, DenyCode};

/// The command calls one turn may make (each is recorded in the run report
/// and the audit, refused or run): past it a call is refused with
/// `LIMIT_HOSTCALLS`, unrecorded, and starts nothing.
pub const MAX_COMMANDS: usize = 1000;

/// One call of `exec.run`, as the run report shows it.
#[derive(Debug, Clone, Serialize)]
pub struct CommandRecord {
    pub program: String,
    pub args: Vec<String>,
    /// `allow`, or the deny code that refused it.
    pub decision: String,
    pub reason: String,
    /// Whether a process was started.
    pub spawned: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub truncated: bool,
    pub stdout_total: u64,
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
pub struct ExecBinding {
    /// The policy's answer for a command line, bound to the turn's actor.
    pub screen: Arc<dyn CommandScreen>,
    /// Where every call, refused or run, is recorded.
    pub audit: Arc<dyn AuditSink>,
    /// Program names the plan allows.
    pub tools: Vec<String>,
    /// The plan's pinned directories (see [`super::pinned`]).
    pub read_roots: Vec<PinnedDir>,
    pub write_roots: Vec<PinnedDir>,
    /// The workspace when it is inside a root (opened beneath that root's
    /// descriptor), else the first root, else `/` (where Landlock lets a
    /// command read nothing). `Err` when it could not be opened: every
    /// command is refused with the reason.
    pub cwd: Result<PinnedDir, String>,
    pub env: Vec<(String, String)>,
    pub network: bool,
    pub limits: ExecLimits,
    /// The run's own deadline: no command runs longer.
    pub timeout_ms: u64,
    pub support: ExecSupport,
    /// Set when a write root holds host configuration (or lies within
    /// it), or holds a read-only workspace root: Landlock cannot carve a protected path out of a root, so every
    /// command of the run is refused with this code and reason.
    pub protected_overlap: Option<(DenyCode, String)>,
    /// Every call so far.
    pub records: Vec<CommandRecord>,
}

impl ExecBinding {
    /// The binding of `plan`: whole-directory preopens become roots (a
    /// preopen whose glob is finer than its directory is not given to
    /// commands: Landlock confines directory trees, not globs), the granted
    /// variables that are set become the environment.
    ///
    /// # Security
    /// Hands every command of the run the plan's roots, variables and,
    /// with `network:sites`, TCP and UDP sockets to any address (the
    /// per-name filter of `network:sites` covers wasm guests only).
    pub fn new(plan: &Plan, services: &RunServices) -> ExecBinding {
        let whole = |host: &std::path::Path, access: DirAccess| {
            let want = format!("{}/**", host.display().to_string().trim_end_matches('/'));
            let globs = match access {
                DirAccess::ReadOnly => plan.read_globs(),
                DirAccess::ReadWrite => plan.write_globs(),
            };
            globs.iter().any(|g| g.as_str() == want)
        };
        let mut read_roots = Vec::new();
        let mut write_roots = Vec::new();
        for p in plan.preopens() {
            match p.access {
                DirAccess::ReadWrite if whole(&p.host, DirAccess::ReadWrite) => {
                    write_roots.push(p.dir.clone())
                }
                DirAccess::ReadWrite | DirAccess::ReadOnly
                    if whole(&p.host, DirAccess::ReadOnly) =>
                {
                    read_roots.push(p.dir.clone())
                }
                _ => {}
            }
        }
        let workspace = plan.workspace();
        let cwd = match read_roots
            .iter()
            .chain(&write_roots)
            .find(|r| workspace.starts_with(r.path()))
        {
            Some(root) if root.path() == workspace => Ok(root.clone()),
            Some(root) => root.open_below(workspace),
            None => match write_roots.first().or(read_roots.first()) {
                Some(root) => Ok(root.clone()),
                None => PinnedDir::open(Path::new("/")),
            },
        }
        .map_err(|e| format!("the working directory {e}"));
        let env = services
            .env
            .iter()
            .filter(|(n, _)| plan.env_names().contains(n))
            .cloned()
            .collect();
        let read_only_inside = write_roots.iter().find_map(|root| {
            let root_str = root.path().display().to_string();
            plan.read_only_roots()
                .find(|ro| is_within(ro, &root_str))
                .map(|ro| {
                    (DenyCode::WorkspaceReadOnly, format!("the write root `{root_str}` holds the read-only root `{ro}`, which a command's sandbox cannot exclude; no command may run with it"))
                })
        });
        let protected_overlap = write_roots.iter().find_map(|root| {
            let root_str = root.path().display().to_string();
            plan.protected()
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
                plan.protected()
                    .iter()
                    .find(|p| p.kind == ProtectedKind::State && (is_within(&p.path, &root_str) || is_within(&root_str, &p.path)))
                    .map(|p| {
                        (DenyCode::HostStateHidden, format!("the read root `{root_str}` holds the host's own state (`{}`), which a command's sandbox cannot hide; no command may run with it", p.path))
                    })
            })
        });
        let limits = plan.limits();
        ExecBinding {
            screen: services.screen.clone(),
            audit: services.audit.clone(),
            tools: plan.exec_tools().to_vec(),
            read_roots,
            write_roots,
            cwd,
            env,
            network: !plan.hosts().is_empty(),
            timeout_ms: limits.deadline_ms,
            limits: ExecLimits {
                timeout_ms: limits.deadline_ms,
                output_bytes: limits.output_bytes,
                ..ExecLimits::default()
            },
            support: ExecSupport::probe(),
            protected_overlap,
            records: Vec::new(),
        }
    }
}

fn denial(code: DenyCode, reason: String) -> Error {
    Error::Denied(Denial {
        code: code.as_str().into(),
        reason,
    })
}

impl ExecBinding {
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

impl ExecBinding {
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
            serde_json::json!({"decision": "allow", "reason": record.reason})
        } else {
            serde_json::json!({"decision": "deny", "code": record.decision, "reason": record.reason})
        };
        let line = serde_json::json!({
            "request": {"kind": "tool", "tool": basename(&record.program), "command": quote_argv(&argv)},
            "decision": decision,
            "spawned": record.spawned,
            "status": record.status,
            "signal": record.signal,
            "timed_out": record.timed_out,
        });
        // The command's outcome stands even if the audit cannot keep it.
        self.audit.decision(line);
    }

    /// The spec of an allowed command, or the error value (with the deny
    /// code when the policy refused).
    fn spec(
        &self,
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

impl ExecBinding {
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
    pub binding: Option<&'a mut ExecBinding>,
    pub deadline: std::time::Instant,
}

impl exec::Host for ExecView<'_> {
    fn run(
        &mut self,
        program: String,
        args: Vec<String>,
        stdin: Vec<u8>,
    ) -> Result<exec::Outcome, Error> {
        let Some(b) = self.binding.as_deref_mut() else {
            return Err(denial(
                DenyCode::ImportNotGranted,
                "`code:exec` was not granted".into(),
            ));
        };
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

/// Runs a command executor: the plan's command, screened like any
/// `code:exec` call, in the OS sandbox, with `input` on its stdin. Exit
/// status 0 is `ok` with stdout as the output; any other end is an error
/// result; a refusal, the timeout or the output cap end the run with their
/// codes, as they do for a component.
pub fn run_command(
    plan: &Plan,
    input: &str,
    io: &super::run::RunIo,
    services: &RunServices,
) -> Result<RunReport, RunError> {
    let started = std::time::Instant::now();
    let Some((program, args)) = plan.command().split_first() else {
        return Err(RunError::Host("the plan has no command".into()));
    };
    let mut binding = ExecBinding::new(plan, services);
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
    // The turn's arguments follow the manifest's; the screen sees the
    // whole argv, as for any command call.
    let argv: Vec<String> = args.iter().chain(&io.args).cloned().collect();
    let stdin = match io.stdin {
        super::run::StdinFrom::Input => input.as_bytes().to_vec(),
        super::run::StdinFrom::Inherit => match &io.process_stdin {
            Some(stdin) => stdin.read_all().map_err(|e| {
                RunError::Host(
                    format!("cannot read stdin: {}", crate::util::lower(&e.to_string())).into(),
                )
            })?,
            None => Vec::new(),
        },
    };
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
    let limits = plan.limits();
    if o.timed_out {
        return Err(RunError::Limit(LimitHit::new(
            DenyCode::LimitDeadline,
            format!("the command ran longer than {} ms", limits.deadline_ms),
        )));
    }
    if o.truncated {
        return Err(RunError::Limit(LimitHit::new(
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
        )));
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

struct HasExec;

impl HasData for HasExec {
    type Data<'a> = ExecView<'a>;
}

/// Links `gatehouse:executor/exec`.
///
/// # Security
/// Lets the guest run the binding's programs, each call screened by the
/// policy and confined by [`crate::exec`]; link only with a binding built
/// from the plan.
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    getter: fn(&mut T) -> ExecView<'_>,
) -> wasmtime::Result<()> {
    exec::add_to_linker::<T, HasExec>(linker, getter)
}
