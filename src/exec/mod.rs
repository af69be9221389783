//! The OS sandbox for `code:exec`: one host command, run as a confined
//! child process.
//!
//! A command reaches this module only after the policy's tool layers
//! screened it (a `tool` request to [`crate::policy::decide()`], whose
//! command is [`quote_argv`] of the argv); this module does not
//! decide anything, it builds the confinement the decision describes and
//! says what it could apply. The child gets:
//!
//! - a cleared environment holding only the granted variables;
//! - a working directory inside one of its granted roots;
//! - Landlock rules: read beneath each read root; everything but execute,
//!   device nodes and device ioctls beneath each write root; read of the
//!   system's program directories ([`SYSTEM_READ_ROOTS`]); execute of
//!   exactly the program, the other granted programs
//!   ([`ExecSpec::also_executable`]) and their interpreters (the ELF
//!   interpreter, a script's `#!` interpreter), never of a file beneath a
//!   write root; and nothing else. Without a network grant, TCP bind and
//!   connect are refused too (Landlock ABI 4+); signals and abstract unix
//!   sockets are scoped to the sandbox (ABI 6+); connecting to a pathname
//!   unix socket is refused (ABI 9+);
//! - a seccomp filter refusing every `socket` without the network grant
//!   (with it, all but `AF_INET` and `AF_INET6`, and raw sockets; never
//!   `AF_UNIX`), a datagram `socketpair` (which could `sendto` any socket
//!   path), `sendto` with an address without the network grant, and
//!   always `ptrace`, `mount`, `bpf`, `kexec_load`, module loading,
//!   namespaces, keyrings, `io_uring`, `execveat`, `memfd_create`,
//!   `memfd_secret`, inotify and fanotify, leaving the process group,
//!   raising a limit and what else root could do to the host
//!   ([`DENIED_SYSCALLS`]), and every x32 syscall number on x86_64;
//! - `no_new_privs`, its own process group, `SIGKILL` when gatehouse dies,
//!   and no descriptor but stdin, stdout and stderr;
//! - rlimits on CPU time, address space, file size, processes and open
//!   files ([`ExecLimits`]);
//! - a wall-clock timeout (the whole process group is killed) and stdout
//!   and stderr capped at [`ExecLimits::output_bytes`] each.
//!
//! What could not be applied on this host is said in
//! [`ExecOutcome::confinement`]: a layer the kernel lacks is skipped and
//! reported, never silently, and `isolation.on_degraded` decides beforehand
//! (through the `code_exec` layer of the isolation report) whether such a
//! host may run commands at all.

mod confine;
pub mod facts;
pub mod pinned;

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Serialize;

pub use confine::{Confinement, ExecSupport, DENIED_SYSCALLS, SYSTEM_READ_ROOTS};

use crate::policy::command::PROGRAM_DIRS;
use crate::util::IoCause;
pub use pinned::{PinError, PinnedDir};

/// Resource limits of one command.
///
/// Defaults: 10 s of CPU, 1 GiB of address space, files of at most
/// 64 MiB, 64 processes of the user, 256 open files, a 30 s wall-clock
/// timeout and 1 MiB of each of stdout and stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExecLimits {
    /// `RLIMIT_CPU`, seconds.
    pub cpu_seconds: u64,
    /// `RLIMIT_AS`, bytes.
    pub address_space: u64,
    /// `RLIMIT_FSIZE`, bytes.
    pub file_size: u64,
    /// `RLIMIT_NPROC`: processes of the user (not enforced for root).
    pub processes: u64,
    /// `RLIMIT_NOFILE`.
    pub open_files: u64,
    /// Wall-clock time before the process group is killed, milliseconds.
    pub timeout_ms: u64,
    /// Bytes kept of each of stdout and stderr; the rest is read and
    /// dropped so the command never blocks on a full pipe.
    pub output_bytes: usize,
}

impl Default for ExecLimits {
    fn default() -> ExecLimits {
        ExecLimits {
            cpu_seconds: 10,
            address_space: 1 << 30,
            file_size: 64 << 20,
            processes: 64,
            open_files: 256,
            timeout_ms: 30_000,
            output_bytes: 1 << 20,
        }
    }
}

/// One command and the authority it runs with.
///
/// # Security
/// Every field that names a path or a variable hands the command that
/// authority: `read_roots` can be read, `write_roots` changed, `program`
/// and `also_executable` executed, `env` is visible, and `network` lets it
/// open TCP and UDP sockets to any host (the host-name filter of
/// `network:sites` covers wasm guests only). A program that can be
/// executed can also run whatever it can read through the dynamic loader
/// (`ld.so PROGRAM`), which Landlock cannot tell from its part as
/// interpreter.
#[derive(Debug, Clone)]
pub struct ExecSpec {
    /// An absolute path to the program (see [`resolve_program`]).
    pub program: PathBuf,
    /// The arguments after the program.
    pub args: Vec<String>,
    /// The working directory, opened; it must be inside a read or write
    /// root, or be `/` when there is no root at all.
    pub cwd: PinnedDir,
    /// The whole environment of the command.
    pub env: Vec<(String, String)>,
    /// Directories the command may read, opened when the turn's plan was
    /// made ([`PinnedDir`]): the rules go to these directories, and a
    /// command is refused when a path no longer leads to its directory.
    pub read_roots: Vec<PinnedDir>,
    /// Directories the command may read, write, create in and delete from
    /// (likewise opened).
    pub write_roots: Vec<PinnedDir>,
    /// Whether `AF_INET`/`AF_INET6` sockets are allowed (`network:sites`
    /// granted); raw, netlink and packet sockets never are.
    pub network: bool,
    /// The command's caps: wall-clock timeout, output and rlimits.
    pub limits: ExecLimits,
    /// Written to the command's stdin, which is then closed.
    pub stdin: Vec<u8>,
    /// Other programs the command may start (the other granted tools,
    /// resolved). With `program` and their interpreters, the only files it
    /// may execute; one beneath a write root is left out.
    pub also_executable: Vec<PathBuf>,
}

impl ExecSpec {
    /// `program` run in `cwd` with nothing else: no arguments, an empty
    /// environment, no root (the command reads only the system's program
    /// directories), no network, the default [`ExecLimits`], empty stdin,
    /// no other program it may start.
    ///
    /// # Security
    /// Hands the command `program` to execute; every other authority is a
    /// field set afterwards.
    pub fn new(program: PathBuf, cwd: PinnedDir) -> ExecSpec {
        ExecSpec {
            program,
            args: Vec::new(),
            cwd,
            env: Vec::new(),
            read_roots: Vec::new(),
            write_roots: Vec::new(),
            network: false,
            limits: ExecLimits::default(),
            stdin: Vec::new(),
            also_executable: Vec::new(),
        }
    }
}

/// How the command ended, and what it printed.
#[derive(Debug, Clone, Serialize)]
pub struct ExecOutcome {
    /// The exit code, when the command exited.
    pub status: Option<i32>,
    /// The signal that ended it, when one did (`9` after a timeout).
    pub signal: Option<i32>,
    /// Whether the wall-clock timeout killed it.
    pub timed_out: bool,
    /// What the command wrote to stdout, up to the cap (shown lossily as UTF-8).
    #[serde(serialize_with = "lossy")]
    pub stdout: Vec<u8>,
    /// What it wrote to stderr, up to the cap (shown lossily as UTF-8).
    #[serde(serialize_with = "lossy")]
    pub stderr: Vec<u8>,
    /// Bytes the command wrote to stdout, kept or not.
    pub stdout_total: u64,
    /// Bytes the command wrote to stderr, kept or not.
    pub stderr_total: u64,
    /// Whether stdout or stderr was cut at the cap.
    pub truncated: bool,
    /// How long the command ran, in milliseconds.
    pub elapsed_ms: u64,
    /// What confined the command.
    pub confinement: Confinement,
}

fn lossy<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(bytes))
}

/// Why a command did not run (a command that ran and failed is an
/// [`ExecOutcome`] with its status).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The program is not an absolute path.
    #[error("program `{0}` is not an absolute path")]
    ProgramNotAbsolute(String),
    /// A bare program name is in none of the fixed program directories.
    #[error("program `{0}` is not found in `/usr/local/bin`, `/usr/bin` or `/bin`")]
    ProgramNotFound(String),
    #[error(
        "program `{0}` is not beneath a read root or a system program directory (nothing in a write root is executable)"
    )]
    /// The program is beneath neither a read root nor a system program directory.
    ProgramOutsideRoots(String),
    /// A file the program needs to run (its ELF or `#!` interpreter) is beneath a write
    /// root.
    #[error("`{program}` needs `{file}` to run, which is beneath write root `{root}` (nothing in a write root is executable)")]
    InterpreterInWriteRoot {
        /// The program.
        program: String,
        /// The file it needs.
        file: String,
        /// The write root the file is beneath.
        root: String,
    },
    /// The working directory is inside no granted root.
    #[error("working directory `{0}` is not inside a granted root")]
    CwdOutsideRoots(String),
    /// A granted root could not be pinned, or is no longer what it was.
    #[error("root {0}")]
    Root(#[from] PinError),
    /// The Landlock ruleset could not be built.
    #[error("the landlock ruleset cannot be built: {}", crate::util::lower(&.0.to_string()))]
    Landlock(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The seccomp filter could not be built.
    #[error("the seccomp filter cannot be built: {}", crate::util::lower(&.0.to_string()))]
    Seccomp(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The child could not be started.
    #[error("`{program}` cannot be started: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: IoCause,
    },
    /// Waiting for the child failed.
    #[error("waiting for `{program}` failed: {source}")]
    Wait {
        /// The program.
        program: String,
        /// Why.
        source: IoCause,
    },
}

/// The directories a bare program name is looked up in, in order. Fixed,
/// so that the host's `PATH` cannot change what a granted name runs; the
/// policy's tool layers accept a full path for a granted name only in
/// these ([`crate::policy::command::PROGRAM_DIRS`]).
pub const PROGRAM_PATH: [&str; 3] = PROGRAM_DIRS;

/// `program` itself when absolute, else the first executable file of
/// that name in [`PROGRAM_PATH`]. A name with a `/` that is not absolute
/// is refused: it would depend on the working directory.
pub fn resolve_program(program: &str) -> Result<PathBuf, ExecError> {
    if program.starts_with('/') {
        return Ok(PathBuf::from(program));
    }
    if program.contains('/') || program.is_empty() {
        return Err(ExecError::ProgramNotAbsolute(program.to_string()));
    }
    PROGRAM_PATH
        .iter()
        .map(|d| Path::new(d).join(program))
        .find(|p| is_executable(p))
        .ok_or_else(|| ExecError::ProgramNotFound(program.to_string()))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Runs `spec` confined as far as `support` allows.
///
/// Blocks until the command exits, is killed at its timeout, or fails to
/// start. A layer that `support` says this host lacks is skipped and
/// reported in the outcome; a layer that this host has but that fails to
/// apply in the child stops the command before `exec` (fail closed).
pub fn run(spec: &ExecSpec, support: &ExecSupport) -> Result<ExecOutcome, ExecError> {
    let program = spec.program.display().to_string();
    if !spec.program.is_absolute() {
        return Err(ExecError::ProgramNotAbsolute(program));
    }
    let executable = executable_files(spec, &program)?;
    let prepared = confine::prepare(
        &spec.read_roots,
        &spec.write_roots,
        &executable,
        spec,
        support,
    )?;
    let confinement = prepared.confinement.clone();

    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so the timeout kills what it started too.
        .process_group(0);
    // The child changes into the pinned directory itself (`fchdir`);
    // `spec` keeps the descriptor open until the child has started.
    let mut child_setup = prepared.into_child(spec.cwd.raw_fd());
    // SAFETY: the closure runs in the forked child before `exec`, where
    // only async-signal-safe work is sound. It allocates nothing: it makes
    // `fchdir`, `prctl` and `setrlimit` calls on values copied in, installs the
    // Landlock ruleset whose file descriptor and masks were prepared in the
    // parent (`landlock_restrict_self`), and the seccomp program compiled
    // in the parent (`prctl` + `seccomp`), in that order.
    unsafe {
        cmd.pre_exec(move || child_setup.apply());
    }
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| ExecError::Spawn {
        program: program.clone(),
        source: IoCause(e),
    })?;
    let pid = child.id() as i32;
    let outputs = feed_and_drain(&mut child, spec);
    let timed_out = wait_or_kill(pid, spec.limits.timeout_ms);
    let status = child.wait().map_err(|e| ExecError::Wait {
        program: program.clone(),
        source: IoCause(e),
    })?;
    let [(stdout, stdout_total), (stderr, stderr_total)] = collect_outputs(&outputs);
    let truncated = stdout_total > stdout.len() as u64 || stderr_total > stderr.len() as u64;
    Ok(ExecOutcome {
        status: status.code(),
        signal: status.signal(),
        timed_out,
        stdout,
        stderr,
        stdout_total,
        stderr_total,
        truncated,
        elapsed_ms: started.elapsed().as_millis() as u64,
        confinement,
    })
}

/// The files the command may execute: its program and the interpreters
/// it needs, then those of `spec.also_executable` that are allowed.
/// Refuses a moved root, a working directory or a program outside the
/// roots, and an interpreter in a write root.
fn executable_files(spec: &ExecSpec, program: &str) -> Result<Vec<PathBuf>, ExecError> {
    let program = program.to_string();
    // Each root (and the working directory) must still be what the plan
    // pinned: an earlier command may have renamed it away and put a link
    // to somewhere else in its place. The rules go to the pinned
    // descriptors either way; a moved root refuses the command, so that
    // what the record says (its roots by path) stays true.
    for root in spec.read_roots.iter().chain(&spec.write_roots) {
        root.check_unmoved()?;
    }
    spec.cwd.check_unmoved()?;
    let read_roots: Vec<PathBuf> = spec
        .read_roots
        .iter()
        .map(|r| r.path().to_path_buf())
        .collect();
    let write_roots: Vec<PathBuf> = spec
        .write_roots
        .iter()
        .map(|r| r.path().to_path_buf())
        .collect();
    let cwd = spec.cwd.path();
    // With no root at all, `/` is the working directory: Landlock lets the
    // command read nothing there but the system's programs.
    let no_roots = read_roots.is_empty() && write_roots.is_empty();
    let cwd_allowed = (no_roots && cwd == Path::new("/"))
        || read_roots
            .iter()
            .chain(&write_roots)
            .any(|r| cwd.starts_with(r));
    if !cwd_allowed {
        return Err(ExecError::CwdOutsideRoots(cwd.display().to_string()));
    }
    let real_program = std::fs::canonicalize(&spec.program).map_err(|e| ExecError::Spawn {
        program: program.clone(),
        source: IoCause(e),
    })?;
    let system = confine::system_roots();
    // A program in a write root could have been written by a command:
    // only read roots and the system's directories hold programs, as the
    // Landlock rules say too (no `Execute` beneath a write root).
    let in_write_root = write_roots.iter().any(|r| real_program.starts_with(r));
    let readable = |p: &Path| read_roots.iter().chain(&system).any(|r| p.starts_with(r));
    if in_write_root || !readable(&real_program) {
        return Err(ExecError::ProgramOutsideRoots(program));
    }
    // Execute goes to these files only, never where a write right is.
    let writable = |p: &Path| write_roots.iter().find(|r| p.starts_with(r));
    let mut executable = vec![real_program.clone()];
    interpreters(&real_program, &mut executable, 0);
    for file in &executable[1..] {
        if let Some(root) = writable(file) {
            return Err(ExecError::InterpreterInWriteRoot {
                program,
                file: file.display().to_string(),
                root: root.display().to_string(),
            });
        }
    }
    add_also_executable(spec, &mut executable, &readable, &write_roots);
    Ok(executable)
}

/// Appends to `executable` each of `spec.also_executable` (with its
/// interpreters) that is readable and in no write root; one that is not
/// is left out, not refused.
fn add_also_executable(
    spec: &ExecSpec,
    executable: &mut Vec<PathBuf>,
    readable: &dyn Fn(&Path) -> bool,
    write_roots: &[PathBuf],
) {
    let writable = |p: &Path| write_roots.iter().any(|r| p.starts_with(r));
    for other in &spec.also_executable {
        let Ok(real) = std::fs::canonicalize(other) else {
            continue;
        };
        let mut found = vec![real.clone()];
        interpreters(&real, &mut found, 0);
        if found.iter().all(|f| !writable(f) && readable(f)) {
            for f in found {
                if !executable.contains(&f) {
                    executable.push(f);
                }
            }
        }
    }
}

/// Writes the command's stdin and reads its stdout and stderr, each on
/// its own thread: the receiver gets `(0 for stdout or 1, kept bytes,
/// total bytes)` as each stream ends.
fn feed_and_drain(child: &mut Child, spec: &ExecSpec) -> mpsc::Receiver<(usize, Vec<u8>, u64)> {
    // stdin: written on its own thread so a command that does not read it
    // cannot block the host; closed when written.
    if let Some(mut stdin) = child.stdin.take() {
        let input = spec.stdin.clone();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
    }
    let (tx, rx) = mpsc::channel::<(usize, Vec<u8>, u64)>();
    let cap = spec.limits.output_bytes;
    for (i, stream) in [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .enumerate()
    {
        let Some(stream) = stream else { continue };
        let tx = tx.clone();
        std::thread::spawn(move || {
            let (kept, total) = drain_capped(stream, cap);
            let _ = tx.send((i, kept, total));
        });
    }
    drop(tx);
    rx
}

/// Waits for child `pid` for up to `timeout_ms`, then kills its group:
/// whether the timeout came first.
fn wait_or_kill(pid: i32, timeout_ms: u64) -> bool {
    // A waiter thread blocks until the child has exited but leaves it
    // unreaped (`WNOWAIT`): while the leader is a zombie its process group
    // id cannot be reused, so the group can be killed safely below, and
    // only then is the child reaped.
    let (exited_tx, exited_rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        wait_exited(pid);
        let _ = exited_tx.send(());
    });
    let timeout = Duration::from_millis(timeout_ms);
    let timed_out = matches!(
        exited_rx.recv_timeout(timeout),
        Err(mpsc::RecvTimeoutError::Timeout)
    );
    // Kills the command at its timeout, and otherwise whatever else the
    // group left running, so the pipes close.
    kill_group(pid);
    timed_out
}

/// Stdout's and stderr's kept bytes and totals, from `feed_and_drain`.
fn collect_outputs(rx: &mpsc::Receiver<(usize, Vec<u8>, u64)>) -> [(Vec<u8>, u64); 2] {
    // A process that left the group and kept a pipe open is not waited
    // for past a short grace.
    let mut outputs: [(Vec<u8>, u64); 2] = [(Vec::new(), 0), (Vec::new(), 0)];
    let grace = Instant::now() + Duration::from_millis(500);
    for _ in 0..2 {
        let left = grace.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, kept, total)) => outputs[i] = (kept, total),
            Err(_) => break,
        }
    }
    outputs
}

/// Appends what the kernel also executes to run `file`: the `#!`
/// interpreter of a script, the ELF interpreter (`PT_INTERP`) of a
/// dynamically linked program, and theirs in turn (canonical paths). A file
/// that cannot be read adds nothing: the kernel will refuse it.
fn interpreters(file: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 3 {
        return;
    }
    let Ok(mut f) = std::fs::File::open(file) else {
        return;
    };
    let mut head = vec![0u8; 256];
    let n = read_at(&mut f, 0, &mut head);
    head.truncate(n);
    let next = if let Some(line) = head.strip_prefix(b"#!") {
        let line = line.split(|b| *b == b'\n').next().unwrap_or_default();
        let text = String::from_utf8_lossy(line);
        text.split_whitespace().next().map(PathBuf::from)
    } else if head.starts_with(b"\x7fELF") {
        elf_interpreter(&mut f, &head)
    } else {
        None
    };
    let Some(next) = next.and_then(|p| std::fs::canonicalize(p).ok()) else {
        return;
    };
    if !out.contains(&next) {
        out.push(next.clone());
        interpreters(&next, out, depth + 1);
    }
}

/// Reads at `offset` into `buf` as far as the file goes; the byte count.
fn read_at(f: &mut std::fs::File, offset: u64, buf: &mut [u8]) -> usize {
    use std::io::{Seek, SeekFrom};
    if f.seek(SeekFrom::Start(offset)).is_err() {
        return 0;
    }
    let mut filled = 0;
    while filled < buf.len() {
        match f.read(&mut buf[filled..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => filled += k,
        }
    }
    filled
}

/// The `PT_INTERP` path of an ELF file whose first bytes are `head`
/// (32- or 64-bit, either byte order).
fn elf_interpreter(f: &mut std::fs::File, head: &[u8]) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let wide = *head.get(4)? == 2;
    let little = *head.get(5)? == 1;
    let num = |b: &[u8]| -> u64 {
        let mut v = 0u64;
        for (i, byte) in b.iter().enumerate() {
            let shift = if little { i } else { b.len() - 1 - i };
            v |= u64::from(*byte) << (8 * shift);
        }
        v
    };
    let field = |at: usize, len: usize| head.get(at..at + len).map(num);
    let (phoff, phentsize, phnum) = if wide {
        (field(0x20, 8)?, field(0x36, 2)?, field(0x38, 2)?)
    } else {
        (field(0x1c, 4)?, field(0x2a, 2)?, field(0x2c, 2)?)
    };
    for i in 0..phnum.min(256) {
        let mut ph = [0u8; 56];
        let len = (phentsize as usize).min(ph.len());
        if read_at(f, phoff + i * phentsize, &mut ph[..len]) < len {
            return None;
        }
        let p = |at: usize, n: usize| ph.get(at..at + n).map(num);
        // PT_INTERP
        if p(0, 4)? != 3 {
            continue;
        }
        let (offset, size) = if wide {
            (p(8, 8)?, p(32, 8)?)
        } else {
            (p(4, 4)?, p(16, 4)?)
        };
        let mut path = vec![0u8; size.min(4096) as usize];
        let n = read_at(f, offset, &mut path);
        path.truncate(n);
        let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
        return Some(PathBuf::from(std::ffi::OsStr::from_bytes(&path[..end])));
    }
    None
}

/// Reads `stream` to its end, keeping the first `cap` bytes.
fn drain_capped(mut stream: impl Read, cap: usize) -> (Vec<u8>, u64) {
    let mut kept = Vec::new();
    let mut total = 0u64;
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                total += n as u64;
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (kept, total)
}

fn kill_group(pid: i32) {
    // SAFETY: `kill(2)` with a negative pid signals the process group the
    // child leads (`process_group(0)`); it touches no memory of ours. The
    // group id is not reused while the child is unreaped, and the child is
    // reaped only after this call.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
}

/// Blocks until child `pid` has exited (or `waitid` fails), without
/// reaping it.
fn wait_exited(pid: i32) {
    loop {
        // SAFETY: `siginfo_t` is plain data for which all-zero bytes are a
        // valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid, writable `siginfo_t` that outlives the
        // call; `WNOWAIT` leaves the child to be reaped by `Child::wait`.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// Quotes `argv` for the tool layers' screening: each word in single
/// quotes, so that what the policy splits is exactly the argv that runs
/// (no word of it can be read as `;`, `|`, `$(…)` or a second command).
pub fn quote_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|w| format!("'{}'", w.replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ")
}
