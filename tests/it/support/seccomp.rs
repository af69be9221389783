//! A seccomp filter installed in a child only: how the tests hide a
//! kernel facility (`openat2`, Landlock, `seccomp` itself) for real.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Installs, in the child only, a seccomp filter under which `syscall`
/// fails with `errno` and every other syscall is allowed.
pub(crate) fn seccomp_errno(cmd: &mut Command, syscall: i64, errno: i32) {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};
    let filter = SeccompFilter::new(
        [(syscall, vec![])].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        std::env::consts::ARCH.try_into().unwrap(),
    )
    .unwrap();
    // Compiled here, in the parent: the child only installs it.
    let program: BpfProgram = filter.try_into().unwrap();
    // SAFETY: the closure runs in the forked child before `exec`. It does
    // not allocate on success: `apply_filter` makes two system calls
    // (`prctl(PR_SET_NO_NEW_PRIVS)` and `seccomp`) on the program compiled
    // above in the parent, which the child's copy of memory still holds;
    // on failure it returns the raw OS error without allocating.
    unsafe {
        cmd.pre_exec(move || {
            seccompiler::apply_filter(&program).map_err(|e| match e {
                seccompiler::Error::Prctl(io) | seccompiler::Error::Seccomp(io) => io,
                _ => std::io::Error::from_raw_os_error(libc::EINVAL),
            })
        });
    }
}
