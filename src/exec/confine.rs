//! The confinement of one command: prepared in the parent, applied in the
//! forked child just before `exec`.
//!
//! Everything that allocates or opens files happens in [`prepare`], in the
//! parent: the Landlock ruleset is created and filled there (its file
//! descriptor is inherited by the child), and the seccomp programs are
//! compiled to BPF there. The child ([`ChildSetup::apply`]) only makes
//! system calls on values it was handed: `prctl`, `setrlimit`,
//! `landlock_restrict_self` and `seccomp`.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use serde::Serialize;

use super::PinnedDir;
use super::{ExecError, ExecLimits, ExecSpec};

/// Directories every command may read: the system's programs and shared
/// libraries (which the dynamic loader maps with read access alone).
/// Nothing in them is executable but the files a command's spec names.
/// Missing ones are skipped; symlinks (`/bin` → `/usr/bin`) are resolved.
pub const SYSTEM_READ_ROOTS: [&str; 7] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Single files a dynamically linked program reads at start or commonly
/// needs (read only). `/etc` as a whole is not readable.
const SYSTEM_READ_FILES: [&str; 4] = [
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/dev/urandom",
    "/dev/zero",
];

/// Single files a command may read and write.
const SYSTEM_RW_FILES: [&str; 1] = ["/dev/null"];

/// The Landlock ABI gatehouse's rules were written and tested against; a
/// newer kernel applies exactly these, an older one the part it knows
/// (best effort, reported in [`Confinement`]).
const LANDLOCK_TARGET: ABI = ABI::V6;

/// Syscalls a command may never make (`EPERM`), whatever it was granted:
/// debugging other processes, mounting, loading kernel code, new
/// namespaces, keyrings, `io_uring` (whose operations a seccomp filter
/// cannot see), the host's clock, swap and reboot, leaving the command's
/// process group, anonymous memory files and watching files.
pub const DENIED_SYSCALLS: [(&str, i64); 55] = [
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("fsopen", libc::SYS_fsopen),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("keyctl", libc::SYS_keyctl),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("reboot", libc::SYS_reboot),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("acct", libc::SYS_acct),
    // Leaving the process group would let a process outlive the timeout,
    // which kills the group.
    ("setsid", libc::SYS_setsid),
    ("setpgid", libc::SYS_setpgid),
    // What a command running as root could otherwise do to the host:
    // hardware ports, the host's names, the kernel log, the clock,
    // raising its own hard limits.
    ("iopl", libc::SYS_iopl),
    ("ioperm", libc::SYS_ioperm),
    ("sethostname", libc::SYS_sethostname),
    ("setdomainname", libc::SYS_setdomainname),
    ("syslog", libc::SYS_syslog),
    ("vhangup", libc::SYS_vhangup),
    ("quotactl", libc::SYS_quotactl),
    ("adjtimex", libc::SYS_adjtimex),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("lookup_dcookie", libc::SYS_lookup_dcookie),
    ("setrlimit", libc::SYS_setrlimit),
    // Executing a descriptor (a `memfd` a command filled with a program)
    // would sidestep "nothing written can be executed".
    ("execveat", libc::SYS_execveat),
    // Nor by its path: a `memfd` lies on the kernel's internal mount,
    // which Landlock does not check, so `execve("/proc/self/fd/N")` of a
    // program written into one would run it. A secret memory file is a
    // `memfd` too.
    ("memfd_create", libc::SYS_memfd_create),
    ("memfd_secret", libc::SYS_memfd_secret),
    // Watching files: a watch reaches directories outside every root (the
    // names of new files in `~/.ssh`), and a filter cannot read the path
    // of a watch, so no watch at all.
    ("inotify_init", libc::SYS_inotify_init),
    ("inotify_init1", libc::SYS_inotify_init1),
    ("fanotify_init", libc::SYS_fanotify_init),
];

/// `clone(2)` flags that make a new namespace; `clone` with any of them is
/// refused like `unshare`.
const NAMESPACE_FLAGS: [i32; 7] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// What this host can apply to a command, from the isolation probe's
/// kernel facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExecSupport {
    /// The Landlock ABI version, or the errno of `landlock_create_ruleset`.
    pub landlock: Result<u32, i32>,
    /// Whether seccomp filters with an errno action can be installed
    /// (`SECCOMP_GET_ACTION_AVAIL`), or the errno that said no.
    pub seccomp: Result<(), i32>,
}

impl ExecSupport {
    /// This process's support, from the probe's cached facts.
    pub fn probe() -> ExecSupport {
        let facts = super::facts::host_facts();
        ExecSupport {
            landlock: facts.landlock,
            seccomp: facts.seccomp,
        }
    }

    /// Whether Landlock can refuse TCP `bind` and `connect` (ABI 4+).
    pub fn landlock_network(&self) -> bool {
        matches!(self.landlock, Ok(abi) if abi >= 4)
    }

    /// Whether Landlock scopes signals and abstract unix sockets (ABI 6+).
    pub fn landlock_scopes(&self) -> bool {
        matches!(self.landlock, Ok(abi) if abi >= 6)
    }

    /// Whether Landlock can refuse connecting to a pathname unix socket
    /// (ABI 9+). Below it, the seccomp filter alone holds (no `AF_UNIX`
    /// socket can be made).
    pub fn landlock_unix_sockets(&self) -> bool {
        matches!(self.landlock, Ok(abi) if abi >= 9)
    }
}

/// What confined one command: the answer to "what did the sandbox really
/// apply", attached to every outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Confinement {
    /// The Landlock ABI the ruleset was applied with, or `None` when this
    /// host has no Landlock (see `skipped`).
    pub landlock_abi: Option<u32>,
    /// Whether Landlock refuses TCP bind and connect (no `network:sites`,
    /// ABI 4+).
    pub landlock_network: bool,
    /// Whether signals and abstract unix sockets are scoped (ABI 6+).
    pub landlock_scoped: bool,
    /// Whether Landlock refuses connecting to pathname unix sockets
    /// (ABI 9+; seccomp refuses `AF_UNIX` sockets on every host).
    pub landlock_unix_sockets: bool,
    /// Whether the seccomp filter was installed.
    pub seccomp: bool,
    /// Whether the command may open internet sockets.
    pub network: bool,
    /// Always: set by the child before Landlock and seccomp are applied.
    pub no_new_privs: bool,
    /// The limits the command ran under.
    pub limits: ExecLimits,
    /// Canonical directories the command may read.
    pub read_roots: Vec<String>,
    /// Canonical directories the command may change.
    pub write_roots: Vec<String>,
    /// The only files the command may execute: its program, the other
    /// granted programs and their interpreters.
    pub executable: Vec<String>,
    /// Each layer this host could not apply, with why.
    pub skipped: Vec<String>,
}

/// The canonical, existing [`SYSTEM_READ_ROOTS`].
pub fn system_roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    for r in SYSTEM_READ_ROOTS {
        if let Ok(p) = std::fs::canonicalize(r) {
            if !roots.contains(&p) {
                roots.push(p);
            }
        }
    }
    roots
}

/// The parent's half: a ruleset with its rules, compiled filters, limits.
pub(super) struct Prepared {
    pub confinement: Confinement,
    ruleset: Option<RulesetCreated>,
    filters: Vec<BpfProgram>,
    rlimits: [(RlimitResource, u64); 6],
}

#[cfg(target_env = "gnu")]
type RlimitResource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type RlimitResource = libc::c_int;

fn landlock_error(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> ExecError {
    ExecError::Landlock(e.into())
}

fn seccomp_error(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> ExecError {
    ExecError::Seccomp(e.into())
}

/// Builds the confinement of `spec` (whose roots the caller checked are
/// still where the plan pinned them)
/// in the parent.
pub(super) fn prepare(
    read_roots: &[PinnedDir],
    write_roots: &[PinnedDir],
    executable: &[PathBuf],
    spec: &ExecSpec,
    support: &ExecSupport,
) -> Result<Prepared, ExecError> {
    let mut skipped = Vec::new();
    let system = system_roots();

    let ruleset = match support.landlock {
        Ok(_) => Some(ruleset(
            read_roots,
            write_roots,
            executable,
            &system,
            spec.network,
        )?),
        Err(e) => {
            skipped.push(format!(
                "landlock: unavailable on this host (errno {e}): the command can read and write whatever the host user can"
            ));
            None
        }
    };
    let landlock_abi = support.landlock.ok();

    let filters = match support.seccomp {
        Ok(()) => filters(spec.network)?,
        Err(e) => {
            skipped.push(format!(
                "seccomp: filters cannot be installed on this host (errno {e}): network, ptrace, mount and namespace syscalls are not blocked"
            ));
            Vec::new()
        }
    };

    let l = spec.limits;
    let rlimits = [
        (libc::RLIMIT_CPU as RlimitResource, l.cpu_seconds),
        (libc::RLIMIT_AS as RlimitResource, l.address_space),
        (libc::RLIMIT_FSIZE as RlimitResource, l.file_size),
        (libc::RLIMIT_NPROC as RlimitResource, l.processes),
        (libc::RLIMIT_NOFILE as RlimitResource, l.open_files),
        (libc::RLIMIT_CORE as RlimitResource, 0),
    ];
    let show = |roots: &[PinnedDir]| {
        roots
            .iter()
            .map(|p| p.path().display().to_string())
            .collect()
    };
    Ok(Prepared {
        confinement: Confinement {
            landlock_abi,
            landlock_network: ruleset.is_some() && !spec.network && support.landlock_network(),
            landlock_scoped: ruleset.is_some() && support.landlock_scopes(),
            landlock_unix_sockets: ruleset.is_some() && support.landlock_unix_sockets(),
            seccomp: !filters.is_empty(),
            network: spec.network,
            no_new_privs: true,
            limits: l,
            read_roots: show(read_roots),
            write_roots: show(write_roots),
            executable: executable.iter().map(|p| p.display().to_string()).collect(),
            skipped,
        },
        ruleset,
        filters,
        rlimits,
    })
}

/// An empty ruleset that handles every access of [`LANDLOCK_TARGET`]: the
/// files', unix sockets by path, the scopes, and without `network` TCP.
fn handled_ruleset(network: bool) -> Result<RulesetCreated, ExecError> {
    let abi = LANDLOCK_TARGET;
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(landlock_error)?
        // No rule grants it: no pathname unix socket can be connected to,
        // whatever the roots (dropped below ABI 9, where seccomp holds).
        .handle_access(AccessFs::ResolveUnix)
        .map_err(landlock_error)?
        .scope(Scope::from_all(abi))
        .map_err(landlock_error)?;
    if !network {
        rs = rs
            .handle_access(AccessNet::from_all(abi))
            .map_err(landlock_error)?;
    }
    rs.create().map_err(landlock_error)
}

/// The Landlock ruleset: read beneath `read` and the system roots,
/// everything but execute beneath `write`, read and execute of the
/// `executable` files alone, a few single files, no connecting to a
/// pathname unix socket (ABI 9+) and (without network) no TCP bind or
/// connect.
fn ruleset(
    read: &[PinnedDir],
    write: &[PinnedDir],
    executable: &[PathBuf],
    system: &[PathBuf],
    network: bool,
) -> Result<RulesetCreated, ExecError> {
    let abi = LANDLOCK_TARGET;
    let mut created = handled_ruleset(network)?;
    // No directory carries `Execute`: Landlock adds rights down the tree,
    // so a directory's would reach every file written beneath it (a write
    // root under `/usr`, a file the wasm side wrote inside a read root).
    let read_access = AccessFs::from_read(abi) & !AccessFs::Execute;
    let file_read = AccessFs::ReadFile;
    let file_rw = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
    let mut rules: Vec<(PathBuf, landlock::BitFlags<AccessFs>)> = Vec::new();
    for p in system {
        rules.push((p.clone(), read_access));
    }
    // The roots by the descriptors the plan pinned: the directories the
    // decision named, wherever a command has moved their names since.
    for p in read {
        created = created
            .add_rule(PathBeneath::new(p.fd(), read_access))
            .map_err(landlock_error)?;
    }
    // Execute only these files (checked by the caller to lie beneath no
    // write root): the kernel refuses whatever else a command starts.
    for p in executable {
        rules.push((p.clone(), AccessFs::ReadFile | AccessFs::Execute));
    }
    // Nothing written can be executed: a write root gets every right but
    // `Execute`, so a program a command copies or writes there cannot run;
    // nor device nodes (a root command could make one for the host's disk
    // and read it) or device ioctls.
    let write_access = AccessFs::from_all(abi)
        & !(AccessFs::Execute | AccessFs::MakeChar | AccessFs::MakeBlock | AccessFs::IoctlDev);
    for p in write {
        created = created
            .add_rule(PathBeneath::new(p.fd(), write_access))
            .map_err(landlock_error)?;
    }
    for f in SYSTEM_READ_FILES {
        rules.push((PathBuf::from(f), file_read.into()));
    }
    for f in SYSTEM_RW_FILES {
        rules.push((PathBuf::from(f), file_rw));
    }
    for (path, access) in rules {
        // A system file this host lacks is skipped; an executable was
        // canonicalized by the caller, so it exists.
        let fd = match PathFd::new(&path) {
            Ok(fd) => fd,
            Err(_) if !executable.contains(&path) => continue,
            Err(e) => return Err(landlock_error(e)),
        };
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(landlock_error)?;
    }
    Ok(created)
}

/// The main filter's rules: the denied syscalls, namespaces through
/// `clone`, setting a limit, and the sockets.
fn syscall_rules(network: bool) -> Result<BTreeMap<i64, Vec<SeccompRule>>, ExecError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED_SYSCALLS
        .iter()
        .map(|(_, nr)| (*nr, Vec::new()))
        .collect();
    let mut clone_rules = Vec::new();
    for flag in NAMESPACE_FLAGS {
        let flag = flag as u64;
        let cond = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )
        .map_err(seccomp_error)?;
        clone_rules.push(SeccompRule::new(vec![cond]).map_err(seccomp_error)?);
    }
    rules.insert(libc::SYS_clone, clone_rules);
    // `prlimit64` that sets a limit (its third argument non-null); reading
    // one, as `getrlimit` does through it, stays allowed.
    let sets_limit = SeccompCondition::new(2, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0)
        .map_err(seccomp_error)?;
    rules.insert(
        libc::SYS_prlimit64,
        vec![SeccompRule::new(vec![sets_limit]).map_err(seccomp_error)?],
    );
    add_socket_rules(network, &mut rules)?;
    Ok(rules)
}

/// The rules on `socket`, `socketpair` and `sendto`.
fn add_socket_rules(
    network: bool,
    rules: &mut BTreeMap<i64, Vec<SeccompRule>>,
) -> Result<(), ExecError> {
    // Sockets: without the network none at all; with it `AF_INET` and
    // `AF_INET6`, never a raw socket (netlink, packet and raw sockets
    // would let a root command reconfigure or sniff the host's network).
    // Never `AF_UNIX`, whatever the grant: a pathname socket (the
    // container runtime's, the user's D-Bus) is a way out of every root,
    // and a filter cannot read the path.
    // The type's low bits (`SOCK_NONBLOCK` and `SOCK_CLOEXEC` are flags).
    let type_is = |ty: i32| {
        SeccompCondition::new(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(0xf),
            ty as u64,
        )
        .map_err(seccomp_error)
    };
    let socket_rules = if network {
        let other_domain = [libc::AF_INET, libc::AF_INET6]
            .iter()
            .map(|d| SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, *d as u64))
            .collect::<Result<Vec<_>, _>>()
            .map_err(seccomp_error)?;
        vec![
            SeccompRule::new(other_domain).map_err(seccomp_error)?,
            SeccompRule::new(vec![type_is(libc::SOCK_RAW)?]).map_err(seccomp_error)?,
        ]
    } else {
        // An empty rule list matches every call.
        Vec::new()
    };
    rules.insert(libc::SYS_socket, socket_rules);
    // A connected `AF_UNIX` pair stays (programs talk to their own
    // children through one), but not a datagram pair: a datagram socket
    // can `sendto` any socket path, connected or not. Stream and
    // seqpacket sockets refuse or ignore an address.
    rules.insert(
        libc::SYS_socketpair,
        vec![SeccompRule::new(vec![type_is(libc::SOCK_DGRAM)?]).map_err(seccomp_error)?],
    );
    // Without the network no socket may be given an address to send to
    // (`sendto`'s fifth argument). With it, UDP needs one, and no socket
    // that could take a unix address exists. `sendmsg` carries its address
    // inside a structure a filter cannot read: the refusals above leave it
    // no socket to use one on.
    if !network {
        let addressed = SeccompCondition::new(4, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0)
            .map_err(seccomp_error)?;
        rules.insert(
            libc::SYS_sendto,
            vec![SeccompRule::new(vec![addressed]).map_err(seccomp_error)?],
        );
    }
    Ok(())
}

/// The seccomp programs: one refusing [`DENIED_SYSCALLS`], namespace
/// `clone`s, setting a limit with `prlimit64`, every socket but (with
/// network) `AF_INET` and `AF_INET6` ones that are not raw, a datagram
/// `socketpair` and (without network) a `sendto` with an address, with
/// `EPERM`; one answering `clone3` with `ENOSYS`, so that the C library
/// falls back to `clone`, whose flags the first can inspect.
fn filters(network: bool) -> Result<Vec<BpfProgram>, ExecError> {
    let arch = std::env::consts::ARCH.try_into().map_err(seccomp_error)?;
    let rules = syscall_rules(network)?;
    let main: BpfProgram = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(seccomp_error)?
    .try_into()
    .map_err(seccomp_error)?;
    let clone3: BpfProgram = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(seccomp_error)?
    .try_into()
    .map_err(seccomp_error)?;
    let mut programs = vec![main, clone3];
    programs.extend(x32_filter());
    Ok(programs)
}

/// On x86_64, a syscall number with the x32 bit (`0x40000000`) reaches the
/// same kernel code under other numbers, which the filters above do not
/// list (a 32-bit `int 0x80` call is killed by their architecture check).
/// This program refuses every x32 call with `EPERM`.
#[cfg(target_arch = "x86_64")]
fn x32_filter() -> Option<BpfProgram> {
    use seccompiler::sock_filter;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    // BPF_LD | BPF_W | BPF_ABS, BPF_JMP | BPF_JGE | BPF_K, BPF_RET | BPF_K.
    const LD_ABS_W: u16 = 0x20;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    Some(vec![
        // `seccomp_data.nr` is at offset 0.
        op(LD_ABS_W, 0, 0, 0),
        op(JGE_K, 0, 1, X32_SYSCALL_BIT),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ])
}

#[cfg(not(target_arch = "x86_64"))]
fn x32_filter() -> Option<BpfProgram> {
    None
}

impl Prepared {
    /// The child's half.
    /// The child's half; it changes into `cwd` (a directory descriptor
    /// the caller keeps open until the child has started) first.
    pub(super) fn into_child(self, cwd: std::os::fd::RawFd) -> ChildSetup {
        ChildSetup {
            cwd,
            ruleset: self.ruleset,
            filters: self.filters,
            rlimits: self.rlimits,
        }
    }
}

/// What the forked child applies to itself before `exec`.
pub(super) struct ChildSetup {
    /// The pinned working directory (`fchdir`): the directory the turn
    /// was planned with, not what its path names now.
    cwd: std::os::fd::RawFd,
    ruleset: Option<RulesetCreated>,
    filters: Vec<BpfProgram>,
    rlimits: [(RlimitResource, u64); 6],
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

impl ChildSetup {
    /// Runs in the child between `fork` and `exec` (see the `SAFETY` note
    /// at the `pre_exec` call): system calls only, no allocation on the
    /// success path. Any failure stops the command before `exec`.
    pub(super) fn apply(&mut self) -> io::Result<()> {
        // SAFETY: `fchdir(2)` on a descriptor number the parent keeps open
        // across the fork (it is close-on-exec, so the command never gets
        // it); no memory is passed.
        if unsafe { libc::fchdir(self.cwd) } != 0 {
            return Err(last_error());
        }
        // SAFETY: `prctl` with integer arguments only; no memory is passed.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
            return Err(last_error());
        }
        // Descriptors gatehouse inherited or opened without `O_CLOEXEC`
        // must not reach the command: every one above stderr is marked
        // close-on-exec (std's own error pipe already is, and stays open
        // until `exec` to report a failure).
        // SAFETY: `close_range(2)` with integer arguments only.
        let marked = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        };
        if marked != 0 {
            // Linux before 5.11: one `fcntl` a descriptor, up to a bound
            // above any descriptor gatehouse holds.
            for fd in 3..4096 {
                // SAFETY: `fcntl(F_SETFD)` on a descriptor number; a
                // closed one fails with EBADF and nothing else happens.
                unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
            }
        }
        // SAFETY: as above.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(last_error());
        }
        for (resource, value) in self.rlimits {
            let limit = libc::rlimit {
                rlim_cur: value as libc::rlim_t,
                rlim_max: value as libc::rlim_t,
            };
            // SAFETY: `limit` is a valid `rlimit` that lives across the
            // call; the kernel only reads it.
            if unsafe { libc::setrlimit(resource, &limit) } != 0 {
                return Err(last_error());
            }
        }
        if let Some(ruleset) = self.ruleset.take() {
            match ruleset.restrict_self() {
                Ok(status) if status.ruleset != RulesetStatus::NotEnforced => {}
                Ok(_) => return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP)),
                Err(_) => return Err(last_error()),
            }
        }
        for filter in &self.filters {
            if seccompiler::apply_filter(filter).is_err() {
                return Err(last_error());
            }
        }
        Ok(())
    }
}
