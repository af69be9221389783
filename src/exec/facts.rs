//! What the kernel offers this process: `openat2` with `RESOLVE_BENEATH`,
//! Landlock's ABI, seccomp's errno action, and the credentials in
//! `/proc/self/status`. Probed once and kept; read by the isolation report
//! (`crate::sandbox::isolation`) and by the `code:exec` confinement.

use std::sync::OnceLock;

/// What `openat2(2)` with `RESOLVE_BENEATH` did on a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Openat2 {
    /// Opening `.` beneath the directory worked; `escape_refused` says
    /// whether `..` beneath it failed with `EXDEV`, as it must.
    Works {
        /// Whether `..` beneath it failed with `EXDEV`.
        escape_refused: bool,
    },
    /// The call failed with this errno (`ENOSYS`: no such syscall, or a
    /// seccomp filter hides it; `EPERM`: refused by a seccomp profile).
    Fails(i32),
    /// The probe directory itself could not be opened.
    NotTried(String),
}

/// The lines of `/proc/self/status` the probe reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcStatus {
    /// The effective user id (second field of `Uid:`).
    pub euid: Option<u32>,
    /// `CapEff:`, the effective capability set.
    pub cap_eff: Option<u64>,
    /// `NoNewPrivs:`.
    pub no_new_privs: Option<bool>,
    /// `Seccomp:`: 0 disabled, 1 strict, 2 filter.
    pub seccomp: Option<u8>,
}

impl ProcStatus {
    /// Parses the text of `/proc/self/status`; missing lines stay `None`.
    pub fn parse(text: &str) -> ProcStatus {
        let mut s = ProcStatus::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            match key {
                "Uid" => s.euid = value.split_whitespace().nth(1).and_then(|v| v.parse().ok()),
                "CapEff" => s.cap_eff = u64::from_str_radix(value, 16).ok(),
                "NoNewPrivs" => s.no_new_privs = value.parse::<u8>().ok().map(|v| v != 0),
                "Seccomp" => s.seccomp = value.parse().ok(),
                _ => {}
            }
        }
        s
    }
}

/// The kernel's answers, the host half of the probe's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// The directory `openat2` was tried on.
    pub openat2_dir: String,
    /// What `openat2` with `RESOLVE_BENEATH` did on that directory.
    pub openat2: Openat2,
    /// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`:
    /// the ABI version, or the errno.
    pub landlock: Result<u32, i32>,
    /// `seccomp(SECCOMP_GET_ACTION_AVAIL, 0, SECCOMP_RET_ERRNO)`: whether a
    /// filter returning an errno can be installed, or the errno.
    pub seccomp: Result<(), i32>,
    /// `/proc/self/status`, or why it could not be read.
    pub status: Result<ProcStatus, String>,
}

/// The facts of this process, probed on first use and kept (the
/// filesystem, the kernel and the process's credentials do not change
/// under a running host in ways this report follows).
pub fn host_facts() -> &'static HostFacts {
    static FACTS: OnceLock<HostFacts> = OnceLock::new();
    FACTS.get_or_init(HostFacts::probe)
}

impl HostFacts {
    /// Asks the kernel (see [`host_facts`] for the cached answer).
    pub fn probe() -> HostFacts {
        let dir = std::env::temp_dir();
        HostFacts {
            openat2_dir: dir.display().to_string(),
            openat2: sys::openat2_beneath(&dir),
            landlock: sys::landlock_abi(),
            seccomp: sys::seccomp_errno_available(),
            status: std::fs::read_to_string("/proc/self/status")
                .map(|t| ProcStatus::parse(&t))
                .map_err(|e| crate::util::lower(&e.to_string())),
        }
    }
}

#[cfg(target_os = "linux")]
mod sys {
    use std::os::fd::AsRawFd;
    use std::path::Path;

    use super::Openat2;

    /// `LANDLOCK_CREATE_RULESET_VERSION` of `<linux/landlock.h>`.
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

    /// `struct open_how` of `<linux/openat2.h>` (version 0, 24 bytes);
    /// libc's is non-exhaustive and cannot be built field by field.
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }

    fn errno() -> i32 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    /// `openat2(dirfd, path, {O_PATH|O_DIRECTORY|O_CLOEXEC, RESOLVE_BENEATH})`:
    /// the new descriptor (closed at once), or the errno.
    fn beneath(dirfd: i32, path: &std::ffi::CStr) -> Result<(), i32> {
        let how = OpenHow {
            flags: (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
            mode: 0,
            resolve: libc::RESOLVE_BENEATH,
        };
        // SAFETY: `path` is a valid NUL-terminated string and `how` a valid
        // `open_how` whose size is passed with it; both outlive the call.
        // `dirfd` is an open descriptor owned by the caller. The kernel
        // writes nothing into either.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dirfd,
                path.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if fd < 0 {
            return Err(errno());
        }
        // SAFETY: `fd` was just returned by the kernel and is owned by no one
        // else; it is closed exactly once, here.
        unsafe { libc::close(fd as i32) };
        Ok(())
    }

    pub fn openat2_beneath(dir: &Path) -> Openat2 {
        let d = match std::fs::File::open(dir) {
            Ok(d) => d,
            Err(e) => {
                return Openat2::NotTried(format!(
                    "cannot open `{}`: {}",
                    dir.display(),
                    crate::util::lower(&e.to_string())
                ))
            }
        };
        match beneath(d.as_raw_fd(), c".") {
            Err(e) => Openat2::Fails(e),
            Ok(()) => Openat2::Works {
                escape_refused: beneath(d.as_raw_fd(), c"..") == Err(libc::EXDEV),
            },
        }
    }

    pub fn landlock_abi() -> Result<u32, i32> {
        // SAFETY: with a null attribute pointer, size 0 and the VERSION flag
        // the kernel reads and writes no memory; it returns the ABI version
        // or -1 with errno.
        let v = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        if v < 0 {
            Err(errno())
        } else {
            Ok(u32::try_from(v).unwrap_or(u32::MAX))
        }
    }

    /// `SECCOMP_GET_ACTION_AVAIL` of `<linux/seccomp.h>`.
    const SECCOMP_GET_ACTION_AVAIL: libc::c_uint = 2;

    pub fn seccomp_errno_available() -> Result<(), i32> {
        let action: u32 = libc::SECCOMP_RET_ERRNO;
        // SAFETY: the kernel reads one `u32` through the pointer, which
        // points at `action`, alive across the call; it writes nothing.
        let r = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                SECCOMP_GET_ACTION_AVAIL,
                0u32,
                &action as *const u32,
            )
        };
        if r < 0 {
            Err(errno())
        } else {
            Ok(())
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use std::path::Path;

    use super::Openat2;

    pub fn openat2_beneath(_dir: &Path) -> Openat2 {
        Openat2::Fails(libc::ENOSYS)
    }

    pub fn landlock_abi() -> Result<u32, i32> {
        Err(libc::ENOSYS)
    }

    pub fn seccomp_errno_available() -> Result<(), i32> {
        Err(libc::ENOSYS)
    }
}
