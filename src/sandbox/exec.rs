//! `code:exec` → `gatehouse:executor/exec`: a host command, screened by
//! the policy's tool layers on every call, then run in the OS sandbox of
//! [`crate::exec`].
//!
//! Linked only when the plan allows `code:exec` on at least one program.
//! Each call is refused as a value (nothing is started) unless the
//! program's name is one the plan allows and the policy's `tool` request
//! for the exact argv is allowed. The command gets the plan's authority
//! and no more: its read and write roots are the plan's whole-directory
//! preopens, its environment the granted variables, sockets only with
//! `network:sites`.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use super::bindings::gatehouse::executor::exec;
use super::bindings::gatehouse::executor::types::{Denial, Error};
use super::plan::{DirAccess, Plan};
use super::state::HostState;
use crate::exec::{quote_argv, resolve_program, Confinement, ExecLimits, ExecSpec, ExecSupport};
use crate::policy::command::basename;
use crate::policy::{decide, Decision, DenyCode, Request, RequestKind, Snapshot};

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

/// What a run needs to start commands.
pub struct ExecBinding {
    pub snapshot: Arc<Snapshot>,
    pub actor: String,
    /// Program names the plan allows.
    pub tools: Vec<String>,
    pub read_roots: Vec<PathBuf>,
    pub write_roots: Vec<PathBuf>,
    pub cwd: Option<PathBuf>,
    pub env: Vec<(String, String)>,
    pub network: bool,
    pub limits: ExecLimits,
    pub support: ExecSupport,
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
    /// with `network:sites`, unfiltered sockets.
    pub fn new(plan: &Plan, snapshot: Arc<Snapshot>, actor: &str) -> ExecBinding {
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
                    write_roots.push(p.host.clone())
                }
                DirAccess::ReadWrite | DirAccess::ReadOnly
                    if whole(&p.host, DirAccess::ReadOnly) =>
                {
                    read_roots.push(p.host.clone())
                }
                _ => {}
            }
        }
        let workspace = plan.workspace();
        let cwd = read_roots
            .iter()
            .chain(&write_roots)
            .find(|r| workspace.starts_with(r))
            .map(|_| workspace.to_path_buf())
            .or_else(|| write_roots.first().cloned())
            .or_else(|| read_roots.first().cloned());
        let env = plan
            .env_names()
            .iter()
            .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
            .collect();
        let limits = plan.limits();
        ExecBinding {
            snapshot,
            actor: actor.to_string(),
            tools: plan.exec_tools().to_vec(),
            read_roots,
            write_roots,
            cwd,
            env,
            network: !plan.hosts().is_empty(),
            limits: ExecLimits {
                timeout_ms: limits.deadline_ms,
                output_bytes: limits.output_bytes,
                ..ExecLimits::default()
            },
            support: ExecSupport::probe(),
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
        let request = Request::new(
            &self.actor,
            RequestKind::Tool {
                tool: name.to_string(),
                command: Some(quote_argv(&argv)),
            },
        );
        match decide(&self.snapshot, &request) {
            Decision::Allow { .. } => Ok(()),
            Decision::Deny { code, reason } => Err((code, reason)),
            Decision::ApprovalRequired { reason, .. } => Err((DenyCode::ApprovalRequired, reason)),
        }
    }
}

impl exec::Host for HostState {
    fn run(
        &mut self,
        program: String,
        args: Vec<String>,
        stdin: Vec<u8>,
    ) -> Result<exec::Outcome, Error> {
        let Some(b) = self.exec.as_mut() else {
            return Err(denial(
                DenyCode::ImportNotGranted,
                "`code:exec` was not granted".into(),
            ));
        };
        let mut record = CommandRecord {
            program: program.clone(),
            args: args.clone(),
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
        if let Err((code, reason)) = b.screen(&program, &args) {
            record.decision = code.as_str().into();
            record.reason = reason.clone();
            b.records.push(record);
            return Err(denial(code, reason));
        }
        let resolved = resolve_program(&program);
        let Some(cwd) = b.cwd.clone() else {
            let reason = "a command needs a directory to run in: grant `fs:read` or `fs:write` on a whole directory (`dir/**`)".to_string();
            record.reason = reason.clone();
            b.records.push(record);
            return Err(Error::Failed(reason));
        };
        let spec = match resolved {
            Ok(path) => ExecSpec {
                program: path,
                args,
                cwd,
                env: b.env.clone(),
                read_roots: b.read_roots.clone(),
                write_roots: b.write_roots.clone(),
                network: b.network,
                limits: b.limits,
                stdin,
            },
            Err(e) => {
                record.reason = e.to_string();
                b.records.push(record);
                return Err(Error::InvalidInput(e.to_string()));
            }
        };
        let started = std::time::Instant::now();
        let result = crate::exec::run(&spec, &b.support);
        // The command's time is not the guest's: it has its own timeout.
        self.delegated += started.elapsed();
        let b = self
            .exec
            .as_mut()
            .ok_or_else(|| Error::Failed("lost the exec binding".into()))?;
        match result {
            Ok(o) => {
                record.spawned = true;
                record.status = o.status;
                record.signal = o.signal;
                record.timed_out = o.timed_out;
                record.truncated = o.truncated;
                record.stdout_total = o.stdout_total;
                record.stderr_total = o.stderr_total;
                record.confinement = Some(o.confinement.clone());
                b.records.push(record);
                Ok(exec::Outcome {
                    status: o.status,
                    signal: o.signal,
                    timed_out: o.timed_out,
                    stdout: o.stdout,
                    stderr: o.stderr,
                    truncated: o.truncated,
                })
            }
            Err(e) => {
                record.reason = e.to_string();
                b.records.push(record);
                Err(Error::Failed(e.to_string()))
            }
        }
    }
}

pub fn add_to_linker(linker: &mut wasmtime::component::Linker<HostState>) -> wasmtime::Result<()> {
    exec::add_to_linker::<HostState, wasmtime::component::HasSelf<HostState>>(linker, |s| s)
}
