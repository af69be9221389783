//! Running a [`Plan`]: load, check imports, link what was granted, run
//! under limits, and report.

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde::Serialize;
use wasmtime::component::Linker;
use wasmtime::{CallHook, Store, Trap};
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::WasiCtxBuilder;

use super::bindings::GuestError;
use super::delegate::DelegateBinding;
use super::engine::{LoadError, Pre, PreError, Sandbox};
use super::imports::{self, RefusedImport};
use super::limits::LimitHit;
use super::log::LogLine;
use super::memory::MemoryBinding;
use super::output::{CappedPipe, Forward};
use super::plan::Plan;
use super::services::RunServices;
use super::state::HostState;
use super::{clocks, env, fs, table};
use crate::memory::MemoryStore;
use crate::policy::DenyCode;

/// What the guest returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum GuestResult {
    /// `run` returned `ok(output)`, or a command exited 0 (output: stdout).
    Ok { output: String },
    /// `run` returned `err(..)`, or a command exited non-zero.
    Err { error: serde_json::Value },
}

/// The report of one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub result: GuestResult,
    pub stdout: String,
    pub stderr: String,
    pub log: Vec<LogLine>,
    /// The interfaces and preopens the sandbox was built with.
    pub linked: Vec<Cow<'static, str>>,
    pub imports: std::sync::Arc<[String]>,
    pub cache_hit: bool,
    /// Components this process compiled from wasm so far (0 on a cache hit
    /// in a fresh process).
    pub compiled: u64,
    pub sha256: String,
    pub elapsed_ms: f64,
    /// Every host command the guest asked for (`code:exec`), refused or
    /// run, with what confined it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<super::exec::CommandRecord>,
    /// The guest's exit status, as `wasmtime run` would exit with it:
    /// `proc_exit(N)` / `exit-with-code(N)` → N, `exit(ok)` or `run`
    /// returning ok → 0, a failure status or `run` returning an error → 1.
    /// `None` when the run was stopped (a limit, a trap, a cancel).
    pub exit_code: Option<i32>,
    /// Whether the executor was a command (`wasi:cli/command`, or a host
    /// command): its stdin, argv and stdout are its interface.
    pub command: bool,
    /// Where the guest was when it trapped, innermost frame first (empty
    /// unless it trapped).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub backtrace: Vec<TrapFrame>,
}

/// One frame of a trapped guest's stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrapFrame {
    /// The function's name from the module's `name` section, demangled;
    /// `None` when the module carries no names (a stripped build).
    pub function: Option<String>,
    /// Its index in the core module's function space.
    pub func_index: u32,
    /// The trapping or calling instruction's offset in the core module.
    pub module_offset: Option<usize>,
}

impl TrapFrame {
    /// `name` or `<wasm function N>`, and the offset when known.
    pub fn describe(&self) -> String {
        let name = self
            .function
            .clone()
            .unwrap_or_else(|| format!("<wasm function {}>", self.func_index));
        match self.module_offset {
            Some(o) => format!("{name} (at {o:#x})"),
            None => name,
        }
    }
}

/// The guest frames wasmtime captured with `e`, if any.
fn frames_of(e: &wasmtime::Error) -> Vec<TrapFrame> {
    let Some(bt) = e.downcast_ref::<wasmtime::WasmBacktrace>() else {
        return Vec::new();
    };
    bt.frames()
        .iter()
        .map(|f| TrapFrame {
            function: f
                .func_name()
                .map(|n| format!("{:#}", rustc_demangle::demangle(n))),
            func_index: f.func_index(),
            module_offset: f.module_offset(),
        })
        .collect()
}

/// A command's arguments and standard streams, as the caller wires them.
///
/// Defaults: no arguments beyond `argv[0]` (the executor's name), stdin
/// is the turn's input, and output is kept (capped) for the report.
#[derive(Debug, Clone, Default)]
pub struct RunIo {
    /// `argv[1..]` of a command (a component with `run` gets none).
    pub args: Vec<String>,
    pub stdin: StdinFrom,
    /// A command's stdout and stderr go to the process's own as they are
    /// written (nothing is kept for the report); a component with `run`
    /// keeps its output for the report whatever this says.
    pub forward_output: bool,
    /// The cap on each forwarded stream; `None`: uncapped (the kept
    /// streams are capped by the plan's limits).
    pub forward_cap: Option<usize>,
    /// The process's stdin, handed over by the caller for
    /// [`StdinFrom::Inherit`] (the sandbox reads no process state). With
    /// `Inherit` and none given, the command's stdin is empty.
    pub process_stdin: Option<HostStdin>,
}

/// The process's stdin as the caller hands it to a run.
///
/// # Security
/// The guest reads whatever the process's stdin holds.
#[derive(Clone)]
pub struct HostStdin(std::sync::Arc<std::io::Stdin>);

impl HostStdin {
    /// Hands `stdin` to a run.
    pub fn new(stdin: std::io::Stdin) -> HostStdin {
        HostStdin(std::sync::Arc::new(stdin))
    }

    /// Reads it to its end.
    pub fn read_all(&self) -> std::io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut self.0.lock(), &mut buf)?;
        Ok(buf)
    }
}

impl std::fmt::Debug for HostStdin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostStdin")
    }
}

impl wasmtime_wasi::cli::IsTerminal for HostStdin {
    fn is_terminal(&self) -> bool {
        std::io::IsTerminal::is_terminal(&*self.0)
    }
}

impl wasmtime_wasi::cli::StdinStream for HostStdin {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncRead + Send + Sync> {
        self.0.async_stream()
    }

    fn p2_stream(&self) -> Box<dyn wasmtime_wasi::p2::InputStream> {
        self.0.p2_stream()
    }
}

/// Where a command's stdin comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StdinFrom {
    /// The turn's input.
    #[default]
    Input,
    /// The process's own stdin, streamed.
    ///
    /// # Security
    /// The guest reads whatever the process's stdin holds; approvals never
    /// read it (the terminal approver asks on `/dev/tty`).
    Inherit,
}

/// A run that guest code started and that did not return: why, and what
/// it wrote until then.
#[derive(Debug)]
pub struct Stopped {
    pub error: RunError,
    pub report: RunReport,
}

/// Why a run did not produce a guest result.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{code}: {reason}")]
    Refused { code: DenyCode, reason: String },
    #[error("{}: {}", .0.code, .0.detail)]
    Limit(LimitHit),
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The guest called `exit` (a command's status, which issue 14 will
    /// report as the command's own).
    #[error("the guest exited with status {0}")]
    Exit(i32),
    /// Guest code started and was stopped (a limit, a trap, a cancel); the
    /// report holds what it wrote until then.
    #[error("{}", .0.error)]
    Stopped(Box<Stopped>),
    #[error("the guest trapped")]
    Trap(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("host error")]
    Host(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl RunError {
    /// The code of a refusal or a limit.
    pub fn code(&self) -> Option<DenyCode> {
        match self {
            RunError::Refused { code, .. } => Some(*code),
            RunError::Limit(hit) => Some(hit.code),
            RunError::Stopped(s) => s.error.code(),
            _ => None,
        }
    }
}

fn host(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> RunError {
    RunError::Host(e.into())
}

fn guest_error_json(e: &GuestError) -> serde_json::Value {
    match e {
        GuestError::Denied(d) => {
            serde_json::json!({"denied": {"code": d.code, "reason": d.reason}})
        }
        GuestError::InvalidInput(m) => serde_json::json!({"invalid_input": m}),
        GuestError::Failed(m) => serde_json::json!({"failed": m}),
    }
}

/// Runs the executor of `plan` on `input`, with the host's `services`.
pub fn execute(
    sandbox: &Sandbox,
    plan: &Plan,
    input: &str,
    io: &RunIo,
    services: &RunServices,
) -> Result<RunReport, RunError> {
    if !plan.command().is_empty() {
        return super::exec::run_command(plan, input, io, services);
    }
    let started = Instant::now();
    let path = plan.component();
    // Read, hashed and compiled once per host (the pin checked before any
    // compilation); afterwards only the file's identity is looked at.
    let (prepared, cache_hit) = sandbox.prepare(path, plan.sha256()).map_err(|e| match e {
        LoadError::Pinned { .. } => RunError::Refused {
            code: DenyCode::DigestMismatch,
            reason: e.to_string(),
        },
        e => RunError::Load(e),
    })?;
    let engine = sandbox.engine();
    let import_names = prepared.imports.clone();
    let is_command = prepared.is_command;
    imports::check_known(&import_names, &prepared.authorities, plan).map_err(
        |RefusedImport { reason, .. }| RunError::Refused {
            code: DenyCode::ImportNotGranted,
            reason,
        },
    )?;

    // Link only what was granted: the table's bindings the plan allows,
    // linked once per (component, set of bindings) and kept prepared.
    let mask = table::granted_mask(plan);
    let pre = match prepared.pre(mask, || {
        let mut linker: Linker<HostState> = Linker::new(engine);
        table::link(&mut linker, &table::granted(plan))?;
        Ok(linker)
    }) {
        Ok(pre) => Ok(pre),
        Err(PreError::Exports(e)) => Err(e),
        Err(PreError::Link(e)) => return Err(host(e)),
        Err(PreError::Imports(e)) => {
            return Err(RunError::Refused {
                code: DenyCode::ImportNotGranted,
                reason: format!(
                    "the component's imports do not match what gatehouse provides: {}",
                    crate::util::lower(&e.to_string())
                ),
            })
        }
    };
    let mut linked: Vec<Cow<'static, str>> = table::BINDINGS
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, b)| describe(b.name, plan))
        .collect();
    // Each linked binding's state, built from the same plan.
    let memory_binding = match plan.memory() {
        Some(grant) => Some(MemoryBinding {
            store: MemoryStore::open(&services.memory_db).map_err(host)?,
            grant: grant.clone(),
            journal: services.journal.clone(),
            max_keys: plan.limits().memory_keys,
        }),
        None => None,
    };
    let delegate_binding = services
        .nested
        .as_ref()
        .filter(|_| !plan.delegates().is_empty())
        .map(|nested| DelegateBinding {
            nested: nested.clone(),
            allowed: plan.delegates().to_vec(),
            depth: services.depth,
            journal: services.journal.clone(),
        });
    let exec_binding =
        (!plan.exec_tools().is_empty()).then(|| super::exec::ExecBinding::new(plan, services));

    let limits = *plan.limits();
    let (stdout, stderr) = if io.forward_output && is_command {
        let cap = io.forward_cap.unwrap_or(usize::MAX);
        (
            CappedPipe::forwarding(cap, Forward::Stdout),
            CappedPipe::forwarding(cap, Forward::Stderr),
        )
    } else {
        (
            CappedPipe::new(limits.output_bytes),
            CappedPipe::new(limits.output_bytes),
        )
    };
    let mut b = WasiCtxBuilder::new();
    b.stdout(stdout.clone()).stderr(stderr.clone());
    b.allow_blocking_current_thread(true);
    b.allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    if is_command {
        match io.stdin {
            StdinFrom::Input => {
                b.stdin(MemoryInputPipe::new(input.to_string()));
            }
            StdinFrom::Inherit => {
                if let Some(stdin) = &io.process_stdin {
                    b.stdin(stdin.clone());
                }
            }
        }
        b.arg(plan.executor());
        b.args(&io.args);
    }
    linked.extend(
        fs::apply(&mut b, plan)
            .map_err(host)?
            .into_iter()
            .map(Cow::Owned),
    );
    for name in env::apply(&mut b, plan, services) {
        linked.push(format!("env `{name}`").into());
    }
    linked.push(Cow::Borrowed(if clocks::apply(&mut b, plan) {
        "clocks: real"
    } else {
        "clocks: frozen"
    }));
    let network = super::network::Sites::new(plan);
    linked.extend(
        super::network::apply(&mut b, &network)
            .into_iter()
            .map(Cow::Owned),
    );

    // The run's deadline, for everything it does from here on.
    let deadline = Instant::now() + std::time::Duration::from_millis(limits.deadline_ms);
    let mut table = wasmtime::component::ResourceTable::new();
    table.set_max_capacity(limits.resources);
    let state = HostState {
        wasi: b.build(),
        table,
        network,
        limits: super::limits::GuardedLimits::new(&limits),
        log: Default::default(),
        human: super::human::HumanState {
            asked: 0,
            asker: services.asker.clone(),
        },
        memory: memory_binding,
        delegate: delegate_binding,
        exec: exec_binding,
        hostcalls_left: limits.hostcalls,
        hostcalls_exhausted: false,
        deadline,
        cancel: services.cancel.clone(),
        fs: super::journal_fs::FsLayer::new(plan, services.journal.clone(), services.audit.clone()),
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limits);
    sandbox.start_ticker();
    // Checked every epoch tick while wasm runs: the cancel switch, then the
    // deadline. All the run's time counts, in wasm or in host calls.
    let cancel = services.cancel.clone();
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if cancel.is_cancelled() || Instant::now() >= deadline {
            return Ok(wasmtime::UpdateDeadline::Interrupt);
        }
        Ok(wasmtime::UpdateDeadline::Continue(1))
    });
    store.call_hook(|mut ctx, hook| {
        if matches!(hook, CallHook::CallingHost) {
            let s = ctx.data_mut();
            if s.hostcalls_left == 0 {
                s.hostcalls_exhausted = true;
                return Err(wasmtime::format_err!("hostcall fuel exhausted"));
            }
            s.hostcalls_left -= 1;
        }
        Ok(())
    });

    let outcome: wasmtime::Result<GuestResult> = match pre {
        Err(e) => Err(e),
        Ok(Pre::Command(p)) => (|| {
            let cmd = p.instantiate(&mut store)?;
            let status = cmd.wasi_cli_run().call_run(&mut store)?;
            Ok(match status {
                Ok(()) => GuestResult::Ok {
                    output: String::from_utf8_lossy(&stdout.contents()).into_owned(),
                },
                Err(()) => GuestResult::Err {
                    error: serde_json::json!({"failed": "the command exited with a failure status"}),
                },
            })
        })(),
        Ok(Pre::Executor(p)) => (|| {
            let exe = p.instantiate(&mut store)?;
            Ok(match exe.call_run(&mut store, input)? {
                Ok(output) => GuestResult::Ok { output },
                Err(e) => GuestResult::Err {
                    error: guest_error_json(&e),
                },
            })
        })(),
    };
    // What the turn left each touched path as, for undo (a run killed
    // before this still has its write-ahead journal).
    store.data_mut().fs.finish().map_err(host)?;
    let stopped = if stdout.cap_hit() || stderr.cap_hit() {
        Some(RunError::Limit(LimitHit::new(
            DenyCode::LimitOutput,
            format!(
                "the guest wrote more than {} bytes to {}",
                if io.forward_output && is_command {
                    io.forward_cap.unwrap_or(usize::MAX)
                } else {
                    limits.output_bytes
                },
                if stdout.cap_hit() { "stdout" } else { "stderr" }
            ),
        )))
    } else {
        None
    };
    let output = || String::from_utf8_lossy(&stdout.contents()).into_owned();
    let frames = match &outcome {
        Err(e) => frames_of(e),
        Ok(_) => Vec::new(),
    };
    let (result, stopped) = match (stopped, outcome) {
        (Some(limit), _) => (None, Some(limit)),
        (None, Ok(result)) => (Some(result), None),
        (None, Err(e)) => match classify(e, &store, &limits, &services.cancel) {
            // An exit is the guest's own status, not a failure of the run.
            RunError::Exit(0) => (Some(GuestResult::Ok { output: output() }), None),
            RunError::Exit(n) => (
                Some(GuestResult::Err {
                    error: serde_json::json!({
                        "failed": format!("the guest exited with status {n}"),
                        "exit_code": n,
                    }),
                }),
                None,
            ),
            e => (None, Some(e)),
        },
    };
    let exit_code = match &result {
        Some(GuestResult::Ok { .. }) => Some(0),
        Some(GuestResult::Err { error }) => Some(
            error
                .get("exit_code")
                .and_then(serde_json::Value::as_i64)
                .and_then(|n| i32::try_from(n).ok())
                .unwrap_or(1),
        ),
        None => None,
    };
    let report = RunReport {
        result: result.unwrap_or_else(|| GuestResult::Err {
            error: serde_json::json!({
                "stopped": stopped.as_ref().map(|e| e.to_string()).unwrap_or_default()
            }),
        }),
        stdout: output(),
        stderr: String::from_utf8_lossy(&stderr.contents()).into_owned(),
        log: std::mem::take(&mut store.data_mut().log.lines),
        linked,
        imports: import_names,
        cache_hit,
        compiled: sandbox.counters().compiled.load(Ordering::Relaxed),
        sha256: prepared.digest.clone(),
        elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
        commands: store
            .data_mut()
            .exec
            .as_mut()
            .map(|b| std::mem::take(&mut b.records))
            .unwrap_or_default(),
        exit_code,
        command: is_command,
        // Only a trap's: a limit's or a cancel's stack says nothing wrong.
        backtrace: if matches!(stopped, Some(RunError::Trap(_))) {
            frames
        } else {
            Vec::new()
        },
    };
    match stopped {
        None => Ok(report),
        Some(error) => Err(RunError::Stopped(Box::new(Stopped { error, report }))),
    }
}

/// How the run report names a linked binding (with what the plan gave it).
fn describe(name: &'static str, plan: &Plan) -> Cow<'static, str> {
    Cow::Owned(match name {
        "gatehouse:executor/memory" => match plan.memory() {
            Some(grant) => format!(
                "{name} (scope `{}`{}{})",
                grant.scope,
                if grant.read { ", read" } else { "" },
                if grant.write { ", write" } else { "" }
            ),
            None => return Cow::Borrowed(name),
        },
        "gatehouse:executor/delegate" => format!("{name} ({})", plan.delegates().join(", ")),
        "gatehouse:executor/exec" => format!("{name} ({})", plan.exec_tools().join(", ")),
        _ => return Cow::Borrowed(name),
    })
}

/// Turns a wasmtime error into its limit code when a limit caused it.
fn classify(
    e: wasmtime::Error,
    store: &Store<HostState>,
    limits: &super::limits::Limits,
    cancel: &super::services::CancelHandle,
) -> RunError {
    if let Some(exit) = e.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return RunError::Exit(exit.0);
    }
    let state = store.data();
    if state.hostcalls_exhausted {
        return RunError::Limit(LimitHit::new(
            DenyCode::LimitHostcalls,
            format!("more than {} host calls", limits.hostcalls),
        ));
    }
    let waited_too_long = e.chain().any(|c| {
        c.downcast_ref::<super::deadline_io::DeadlineReached>()
            .is_some()
    });
    if waited_too_long || matches!(e.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
        if cancel.is_cancelled() {
            return RunError::Limit(LimitHit::new(
                DenyCode::TurnCancelled,
                "the turn was cancelled while the guest ran",
            ));
        }
        return RunError::Limit(LimitHit::new(
            DenyCode::LimitDeadline,
            format!("the run took longer than {} ms", limits.deadline_ms),
        ));
    }
    if state.limits.memory_hit {
        return RunError::Limit(LimitHit::new(
            DenyCode::LimitMemory,
            format!("linear memory would exceed {} bytes", limits.memory_bytes),
        ));
    }
    if state.limits.table_hit {
        return RunError::Limit(LimitHit::new(
            DenyCode::LimitTable,
            format!("a table would exceed {} elements", limits.table_elements),
        ));
    }
    let table_full = e.chain().any(|c| {
        matches!(
            c.downcast_ref::<wasmtime::component::ResourceTableError>(),
            Some(wasmtime::component::ResourceTableError::Full)
        )
    });
    if table_full {
        return RunError::Limit(LimitHit::new(
            DenyCode::LimitResources,
            format!("more than {} host resources", limits.resources),
        ));
    }
    // The message without wasmtime's multi-line backtrace context: the
    // frames go to the report, each on its own line.
    let message: Vec<String> = e
        .chain()
        .map(|c| c.to_string())
        .filter(|t| !t.starts_with("error while executing at wasm backtrace"))
        .collect();
    RunError::Trap(message.join(": ").into())
}
