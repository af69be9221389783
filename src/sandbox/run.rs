//! Running a [`Plan`]: load, check imports, link what was granted, run
//! under limits, and report.

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use wasmtime::component::Linker;
use wasmtime::{CallHook, Store, Trap};
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::WasiCtxBuilder;

use super::bindings::log::LogLine;
use super::bindings::{Core, GuestError, HostState, Prepare};
use super::engine::{LoadError, Pre, PreError, Prepared, Sandbox};
use super::imports::{self, RefusedImport};
use super::limits::{LimitHit, Limits};
use super::output::{CappedPipe, Forward};
use super::plan::{Plan, Runnable};
use super::services::RunServices;
use super::{command, table};
use crate::policy::DenyCode;

/// What the guest returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum GuestResult {
    /// `run` returned `ok(output)`, or a command exited 0 (output: stdout).
    Ok {
        /// What `run` returned, or a command's stdout.
        output: String,
    },
    /// `run` returned `err(..)`, or a command exited non-zero.
    Err {
        /// The guest's error as JSON (a command: its exit status or signal).
        error: serde_json::Value,
    },
}

/// The report of one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// What the guest returned.
    pub result: GuestResult,
    /// What the guest wrote to stdout, up to the output cap.
    pub stdout: String,
    /// What the guest wrote to stderr, up to the output cap.
    pub stderr: String,
    /// The guest's `log` lines.
    pub log: Vec<LogLine>,
    /// The interfaces and preopens the sandbox was built with.
    pub linked: Vec<Cow<'static, str>>,
    /// Every interface the component imports, by name; empty for a host command.
    pub imports: std::sync::Arc<[String]>,
    /// Whether the compiled component came from the cache.
    pub cache_hit: bool,
    /// Components this process compiled from wasm so far (0 on a cache hit
    /// in a fresh process).
    pub compiled: u64,
    /// The component's sha256, lowercase hex; empty for a host command.
    pub sha256: String,
    /// Wall-clock time of the run, in milliseconds.
    pub elapsed_ms: f64,
    /// Every host command the guest asked for (`code:exec`), refused or
    /// run, with what confined it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<super::bindings::exec::CommandRecord>,
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
    /// Where the guest's stdin comes from (default: the turn's input).
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
    /// Why it was stopped.
    pub error: RunError,
    /// What the guest wrote until then.
    pub report: RunReport,
}

/// Why a run did not produce a guest result.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Refused before guest code ran (`DIGEST_MISMATCH`, `IMPORT_NOT_GRANTED`, a refused
    /// command).
    #[error("{code}: {reason}")]
    Refused {
        /// The deny code.
        code: DenyCode,
        /// The refusal in words.
        reason: String,
    },
    /// A limit of the sandbox stopped the run.
    #[error("{}: {}", .0.code, .0.detail)]
    Limit(LimitHit),
    /// The component could not be read, compiled or checked.
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
    /// The guest trapped.
    #[error("the guest trapped")]
    Trap(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The host failed while running the guest.
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
    let (path, sha256) = match plan.runnable() {
        Runnable::Command { argv } => return command::run_command(plan, argv, input, io, services),
        Runnable::Component { path, sha256 } => (path, sha256.as_deref()),
    };
    let started = Instant::now();
    let (prepared, cache_hit, pre, mask) = load(sandbox, plan, path, sha256)?;
    let is_command = prepared.is_command;
    let limits = *plan.limits();
    let (stdout, stderr, cap) = pipes(io, is_command, &limits);
    let mut b = WasiCtxBuilder::new();
    b.stdout(stdout.clone()).stderr(stderr.clone());
    // Sockets stay off unless the network unit turns them on.
    b.allow_blocking_current_thread(true)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    if is_command {
        command_io(&mut b, plan, input, io);
    }
    // The run's deadline, for everything it does from here on.
    let deadline = Instant::now() + std::time::Duration::from_millis(limits.deadline_ms);
    // Each unit's state, built from its part of the same plan; only the
    // bindings of the granted units were linked (`mask`).
    let core = Core::new(&limits, deadline, services.cancel.clone());
    let mut cx = Prepare {
        plan,
        runtimes: &services.runtimes,
        services,
        wasi: &mut b,
        deadline,
    };
    let state = HostState::prepare(&mut cx, core).map_err(host)?;
    let mut linked = table::names(mask);
    state.describe(plan.parts(), &mut linked);
    let mut store = store(sandbox, state, &services.cancel, deadline);
    let outcome = call(pre, &mut store, input, &stdout, deadline);
    // What the units hand back: the journal's last word, the log lines,
    // the command records, a limit one of them saw passed.
    let finished = store.data_mut().finish().map_err(host)?;
    // A cap of the output or of a unit stops the run whatever the guest
    // made of the error it got.
    let over = over_cap(&stdout, &stderr, cap).or_else(|| finished.limit.map(RunError::Limit));
    let stdout = String::from_utf8_lossy(&stdout.contents()).into_owned();
    let settled = settle(outcome, over, &store, &limits, &services.cancel, &stdout);
    let report = RunReport {
        result: settled.result,
        stdout,
        stderr: String::from_utf8_lossy(&stderr.contents()).into_owned(),
        log: finished.log,
        linked,
        imports: prepared.imports.clone(),
        cache_hit,
        compiled: sandbox.counters().compiled.load(Ordering::Relaxed),
        sha256: prepared.digest.clone(),
        elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
        commands: finished.commands,
        exit_code: settled.exit_code,
        command: is_command,
        backtrace: settled.backtrace,
    };
    match settled.stopped {
        None => Ok(report),
        Some(error) => Err(RunError::Stopped(Box::new(Stopped { error, report }))),
    }
}

/// Loads the component (its pin checked before any compilation), checks
/// its imports against the plan, and links only what was granted: the
/// table's bindings the plan allows, linked once per (component, set of
/// bindings) and kept prepared. Returns the component, whether it was
/// cached, its pre-instance (or why its exports do not fit, which fails
/// the run as instantiation would) and the set of bindings linked.
fn load(
    sandbox: &Sandbox,
    plan: &Plan,
    path: &std::path::Path,
    sha256: Option<&str>,
) -> Result<(Arc<Prepared>, bool, wasmtime::Result<Pre>, u32), RunError> {
    let (prepared, cache_hit) = sandbox.prepare(path, sha256).map_err(|e| match e {
        LoadError::Pinned { .. } => RunError::Refused {
            code: DenyCode::DigestMismatch,
            reason: e.to_string(),
        },
        e => RunError::Load(e),
    })?;
    imports::check_known(&prepared.imports, &prepared.authorities, plan).map_err(
        |RefusedImport { reason, .. }| RunError::Refused {
            code: DenyCode::ImportNotGranted,
            reason,
        },
    )?;
    let mask = table::granted_mask(plan);
    let pre = match prepared.pre(mask, || {
        let mut linker: Linker<HostState> = Linker::new(sandbox.engine());
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
    Ok((prepared, cache_hit, pre, mask))
}

/// The run's stdout and stderr, and their cap: a command's streams go to
/// the process's own when the caller forwards them, capped as it says;
/// otherwise both are kept for the report, capped by the plan's limits.
fn pipes(io: &RunIo, is_command: bool, limits: &Limits) -> (CappedPipe, CappedPipe, usize) {
    if io.forward_output && is_command {
        let cap = io.forward_cap.unwrap_or(usize::MAX);
        (
            CappedPipe::forwarding(cap, Forward::Stdout),
            CappedPipe::forwarding(cap, Forward::Stderr),
            cap,
        )
    } else {
        let cap = limits.output_bytes;
        (CappedPipe::new(cap), CappedPipe::new(cap), cap)
    }
}

/// The output cap's limit, when a stream reached it.
fn over_cap(stdout: &CappedPipe, stderr: &CappedPipe, cap: usize) -> Option<RunError> {
    [(stdout, "stdout"), (stderr, "stderr")]
        .into_iter()
        .find(|(pipe, _)| pipe.cap_hit())
        .map(|(_, name)| {
            RunError::Limit(LimitHit::new(
                DenyCode::LimitOutput,
                format!("the guest wrote more than {cap} bytes to {name}"),
            ))
        })
}

/// A command's stdin and arguments (`argv[0]` the executor's name).
fn command_io(b: &mut WasiCtxBuilder, plan: &Plan, input: &str, io: &RunIo) {
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

/// The run's store, with its limits, deadline, cancel switch and host-call
/// fuel.
fn store(
    sandbox: &Sandbox,
    state: HostState,
    cancel: &super::services::CancelHandle,
    deadline: Instant,
) -> Store<HostState> {
    let mut store = Store::new(sandbox.engine(), state);
    store.limiter(|s| &mut s.limits);
    sandbox.start_ticker();
    // Checked every epoch tick while wasm runs: the cancel switch, then the
    // deadline. All the run's time counts, in wasm or in host calls.
    let cancel = cancel.clone();
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
    store
}

/// Instantiates and runs the guest: a command's `run`, or the executor's
/// `run(input)`.
fn call(
    pre: wasmtime::Result<Pre>,
    store: &mut Store<HostState>,
    input: &str,
    stdout: &CappedPipe,
    deadline: Instant,
) -> wasmtime::Result<GuestResult> {
    match pre? {
        Pre::Command(p) => {
            let cmd = when_the_pool_has_room(deadline, || p.instantiate(&mut *store))?;
            Ok(match cmd.wasi_cli_run().call_run(&mut *store)? {
                Ok(()) => GuestResult::Ok {
                    output: String::from_utf8_lossy(&stdout.contents()).into_owned(),
                },
                Err(()) => GuestResult::Err {
                    error: serde_json::json!({"failed": "the command exited with a failure status"}),
                },
            })
        }
        Pre::Executor(p) => {
            let exe = when_the_pool_has_room(deadline, || p.instantiate(&mut *store))?;
            Ok(match exe.call_run(&mut *store, input)? {
                Ok(output) => GuestResult::Ok { output },
                Err(e) => GuestResult::Err {
                    error: guest_error_json(&e),
                },
            })
        }
    }
}

/// The pool was full from the turn's first attempt to instantiate until
/// its deadline: reported as `LIMIT_DEADLINE`, with what it waited for.
#[derive(Debug, thiserror::Error)]
#[error("the turn waited {waited_ms} ms for room in the host's instance pool ({limit}) until its deadline")]
struct PoolFullUntilDeadline {
    waited_ms: u128,
    /// The pool's refusal (shown inside the message, so not its source).
    limit: crate::util::Lowered<wasmtime::Error>,
}

/// Instantiates with `instantiate`, and while the pooling allocator has no
/// room (every slot of a kind taken by turns running at the same moment:
/// a server running many interpreters at once) waits for a turn to give
/// its slots back and tries again, until `deadline`. A full pool is the
/// host's capacity, not the guest's fault: the turn waits its turn instead
/// of failing, and its deadline bounds the wait.
fn when_the_pool_has_room<T>(
    deadline: Instant,
    mut instantiate: impl FnMut() -> wasmtime::Result<T>,
) -> wasmtime::Result<T> {
    let started = Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match instantiate() {
            Err(e)
                if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
                    .is_some() =>
            {
                let now = Instant::now();
                if now >= deadline {
                    return Err(wasmtime::Error::new(PoolFullUntilDeadline {
                        waited_ms: now.duration_since(started).as_millis(),
                        limit: crate::util::Lowered(e),
                    }));
                }
                std::thread::sleep(pause.min(deadline - now));
                pause = (pause * 2).min(std::time::Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// How a run ended: its result, or why it was stopped.
struct Settled {
    result: GuestResult,
    stopped: Option<RunError>,
    exit_code: Option<i32>,
    backtrace: Vec<TrapFrame>,
}

/// Settles the guest's `outcome`: a cap hit (`over`) stops the run
/// whatever the guest returned; an exit is the guest's own status, not a
/// failure of the run; any other error is classified (a limit, a cancel, a
/// trap with its frames).
fn settle(
    outcome: wasmtime::Result<GuestResult>,
    over: Option<RunError>,
    store: &Store<HostState>,
    limits: &Limits,
    cancel: &super::services::CancelHandle,
    stdout: &str,
) -> Settled {
    let frames = match &outcome {
        Err(e) => frames_of(e),
        Ok(_) => Vec::new(),
    };
    let (result, stopped) = match (over, outcome) {
        (Some(limit), _) => (None, Some(limit)),
        (None, Ok(result)) => (Some(result), None),
        (None, Err(e)) => match classify(e, store, limits, cancel) {
            RunError::Exit(0) => (
                Some(GuestResult::Ok {
                    output: stdout.to_string(),
                }),
                None,
            ),
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
    Settled {
        result: result.unwrap_or_else(|| GuestResult::Err {
            error: serde_json::json!({
                "stopped": stopped.as_ref().map(|e| e.to_string()).unwrap_or_default()
            }),
        }),
        // Only a trap's: a limit's or a cancel's stack says nothing wrong.
        backtrace: if matches!(stopped, Some(RunError::Trap(_))) {
            frames
        } else {
            Vec::new()
        },
        stopped,
        exit_code,
    }
}

/// Turns a wasmtime error into its limit code when a limit caused it.
fn classify(
    e: wasmtime::Error,
    store: &Store<HostState>,
    limits: &Limits,
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
    if let Some(full) = e.downcast_ref::<PoolFullUntilDeadline>() {
        return RunError::Limit(LimitHit::new(DenyCode::LimitDeadline, full.to_string()));
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
