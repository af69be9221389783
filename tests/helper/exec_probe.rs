//! `gatehouse-exec-probe`: a tiny native program the `code:exec` tests run
//! inside the OS sandbox to try what a hostile command would. Not part of
//! gatehouse itself; built with the package so the tests can find it
//! (`CARGO_BIN_EXE_gatehouse-exec-probe`).
//!
//! Each mode prints one line saying what happened and exits with a code
//! the tests assert:
//!
//! - `connect ADDR`: a TCP socket to ADDR. 0 `connected`; 10 `socket: …`
//!   (the socket itself refused: seccomp); 11 `connect: …` (Landlock, or
//!   nothing listening).
//! - `ptrace`: `PTRACE_TRACEME`. 0 `traced`; 12 `ptrace: …`.
//! - `unshare`: a new user namespace. 0 `unshared`; 13 `unshare: …`.
//! - `x32-socket`: `socket(AF_INET)` through the x32 syscall number
//!   (`0x40000000 | 41`, x86_64 only). 0 `x32 socket`; 14 `x32 socket: …`
//!   (`EPERM` from gatehouse's filter; `ENOSYS` from a kernel without x32
//!   and no filter).
//! - `setsid`: a new session (leaving the process group). 0 `setsid`;
//!   15 `setsid: …`.
//! - `orphan`: forks a child that sleeps 30 s, prints the child's pid and
//!   exits 0 at once (the child would outlive the command).
//! - `root-tricks`: as root, tries `sethostname` (to its current name),
//!   raising its hard `RLIMIT_CPU` and `iopl(3)`, and prints one line per
//!   try, `<name>: ok` or `<name>: <error>`; then reads its own
//!   `RLIMIT_CPU` (`getrlimit: <soft>`), which must still work.
//! - `sockets`: tries a netlink socket, a raw ICMP socket, a packet
//!   socket and a UDP socket, one line each: `<kind>: ok` or
//!   `<kind>: <error>`.
//! - `fd-exec`: opens `/bin/true` and executes the descriptor
//!   (`execveat`, as a program written into a `memfd` would be run).
//!   Becomes `true` (exit 0, no output) when allowed; else 17
//!   `execveat: …`.
//! - `memfd-run PROGRAM [ARG...]`: copies PROGRAM into a `memfd` and
//!   executes it by its path, `/proc/self/fd/N` (`execve`), with argv
//!   `PROGRAM ARG...`. Becomes PROGRAM when allowed; else 22
//!   `memfd_create: …` or `read PROGRAM: …`, 23 `write: …` or
//!   `execve: …`.
//! - `memfd-secret`: `memfd_secret(0)`. 0 `memfd_secret: ok`; 24
//!   `memfd_secret: …`.
//! - `watch DIR`: what could watch DIR, one line each: `inotify_init`,
//!   then `inotify_init1` and, if it worked, `inotify_add_watch` on DIR
//!   for new names and the first name it reports within 5 s
//!   (`event: NAME`, or `event: none`), then `fanotify_init` and, if it
//!   worked, `fanotify_mark` on DIR. Each line `<call>: ok` or
//!   `<call>: <error>`; exit 0.
//! - `fds`: prints `fds:` and every open descriptor above 2 (`fcntl`
//!   probe of 3..1024).
//! - `env`: prints every environment variable, one `NAME=value` a line.
//! - `unix ADDR stream|dgram`: a UNIX socket to ADDR, a path or `@name`
//!   (abstract), with `connect` (stream) or `sendto` (datagram, one
//!   message `probe`). 0 `connected` / `sent`; 18 `socket: …` (the socket
//!   itself refused: seccomp); 19 `connect: …` / `sendto: …` (Landlock's
//!   scope or pathname-socket right, or nothing listening).
//! - `pair stream|dgram [ADDR]`: `socketpair(AF_UNIX)` of that type, one
//!   message across it, then, with ADDR, a `sendto` ADDR on one end. 0
//!   `pair: ok` (and `sent`); 20 `socketpair: …`; 21 `sendto: …`.

use std::io::Error;
use std::net::TcpStream;

fn fail(what: &str, code: i32) -> ! {
    let e = Error::last_os_error();
    println!("{what}: {e}");
    std::process::exit(code)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("connect") => {
            let Some(addr) = args.get(1) else {
                println!("usage: connect ADDR");
                std::process::exit(2)
            };
            // SAFETY: `socket(2)` with integer arguments; the descriptor is
            // closed below or on exit.
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
            if fd < 0 {
                fail("socket", 10);
            }
            // SAFETY: `fd` was just returned and is closed once.
            unsafe { libc::close(fd) };
            match TcpStream::connect(addr) {
                Ok(_) => println!("connected"),
                Err(e) => {
                    println!("connect: {e}");
                    std::process::exit(11)
                }
            }
        }
        Some("ptrace") => {
            // SAFETY: `PTRACE_TRACEME` takes no memory arguments.
            let r = unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) };
            if r < 0 {
                fail("ptrace", 12);
            }
            println!("traced");
        }
        Some("unshare") => {
            // SAFETY: `unshare(2)` with a flag only.
            if unsafe { libc::unshare(libc::CLONE_NEWUSER) } != 0 {
                fail("unshare", 13);
            }
            println!("unshared");
        }
        #[cfg(target_arch = "x86_64")]
        Some("x32-socket") => {
            // SAFETY: a raw syscall with integer arguments only.
            let fd = unsafe {
                libc::syscall(
                    0x4000_0000 | libc::SYS_socket,
                    libc::AF_INET,
                    libc::SOCK_STREAM,
                    0,
                )
            };
            if fd < 0 {
                fail("x32 socket", 14);
            }
            println!("x32 socket");
        }
        Some("setsid") => {
            // SAFETY: `setsid(2)` takes no arguments.
            if unsafe { libc::setsid() } < 0 {
                fail("setsid", 15);
            }
            println!("setsid");
        }
        Some("orphan") => {
            // SAFETY: `fork(2)`; the child only sleeps and exits, touching
            // no state shared with other threads (there are none).
            match unsafe { libc::fork() } {
                -1 => fail("fork", 16),
                0 => {
                    std::thread::sleep(std::time::Duration::from_secs(30));
                    std::process::exit(0)
                }
                child => println!("{child}"),
            }
        }
        Some("root-tricks") => {
            let mut name = [0u8; 256];
            // SAFETY: `gethostname` writes at most `name.len()` bytes into
            // `name`, which outlives the call.
            let got = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) };
            let len = name.iter().position(|b| *b == 0).unwrap_or(0);
            let report = |what: &str, r: i32| {
                if r == 0 {
                    println!("{what}: ok");
                } else {
                    println!("{what}: {}", Error::last_os_error());
                }
            };
            if got == 0 {
                // SAFETY: the first `len` bytes of `name` are initialized.
                report("sethostname", unsafe {
                    libc::sethostname(name.as_ptr().cast(), len)
                });
            }
            let raised = libc::rlimit {
                rlim_cur: libc::RLIM_INFINITY,
                rlim_max: libc::RLIM_INFINITY,
            };
            // SAFETY: `raised` is a valid `rlimit` the kernel only reads.
            report("setrlimit", unsafe {
                libc::setrlimit(libc::RLIMIT_CPU, &raised)
            });
            // SAFETY: as above, through `prlimit` on this process.
            report("prlimit", unsafe {
                libc::prlimit(0, libc::RLIMIT_CPU, &raised, std::ptr::null_mut())
            });
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `iopl(2)` with an integer level.
            report("iopl", unsafe { libc::iopl(3) });
            let mut now = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: `now` is a valid, writable `rlimit`.
            if unsafe { libc::getrlimit(libc::RLIMIT_CPU, &mut now) } == 0 {
                println!("getrlimit: {}", now.rlim_cur);
            } else {
                println!("getrlimit: {}", Error::last_os_error());
            }
        }
        Some("sockets") => {
            for (kind, domain, ty, proto) in [
                (
                    "netlink",
                    libc::AF_NETLINK,
                    libc::SOCK_RAW,
                    libc::NETLINK_ROUTE,
                ),
                ("raw", libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
                ("packet", libc::AF_PACKET, libc::SOCK_DGRAM, 0),
                (
                    "udp",
                    libc::AF_INET,
                    libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                    0,
                ),
            ] {
                // SAFETY: `socket(2)` with integer arguments; a descriptor
                // it returns is closed at once.
                let fd = unsafe { libc::socket(domain, ty, proto) };
                if fd < 0 {
                    println!("{kind}: {}", Error::last_os_error());
                } else {
                    // SAFETY: `fd` was just returned and is closed once.
                    unsafe { libc::close(fd) };
                    println!("{kind}: ok");
                }
            }
        }
        Some("fd-exec") => {
            // SAFETY: a NUL-terminated path and integer flags.
            let fd = unsafe { libc::open(c"/bin/true".as_ptr(), libc::O_RDONLY) };
            if fd < 0 {
                fail("open /bin/true", 17);
            }
            let argv = [c"true".as_ptr(), std::ptr::null()];
            let envp: [*const libc::c_char; 1] = [std::ptr::null()];
            // SAFETY: NUL-terminated argv and envp arrays of valid C
            // strings, an empty path with `AT_EMPTY_PATH`; on success this
            // does not return.
            unsafe {
                libc::syscall(
                    libc::SYS_execveat,
                    fd,
                    c"".as_ptr(),
                    argv.as_ptr(),
                    envp.as_ptr(),
                    libc::AT_EMPTY_PATH,
                )
            };
            fail("execveat", 17);
        }
        Some("memfd-run") => {
            let Some(program) = args.get(1) else {
                println!("usage: memfd-run PROGRAM [ARG...]");
                std::process::exit(2)
            };
            let bytes = match std::fs::read(program) {
                Ok(b) => b,
                Err(e) => {
                    println!("read {program}: {e}");
                    std::process::exit(22)
                }
            };
            // SAFETY: a NUL-terminated name and integer flags.
            let fd = unsafe { libc::memfd_create(c"probe".as_ptr(), 0) };
            if fd < 0 {
                fail("memfd_create", 22);
            }
            // SAFETY: `bytes` is a valid buffer of its length.
            let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
            if written != bytes.len() as isize {
                fail("write", 23);
            }
            let Ok(path) = std::ffi::CString::new(format!("/proc/self/fd/{fd}")) else {
                std::process::exit(2)
            };
            let Ok(argv) = args[1..]
                .iter()
                .map(|a| std::ffi::CString::new(a.as_str()))
                .collect::<Result<Vec<_>, _>>()
            else {
                std::process::exit(2)
            };
            let mut argv: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
            argv.push(std::ptr::null());
            let envp: [*const libc::c_char; 1] = [std::ptr::null()];
            // SAFETY: a NUL-terminated path, NULL-terminated argv and envp
            // arrays of valid C strings that outlive the call; on success
            // this does not return.
            unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
            fail("execve", 23);
        }
        Some("memfd-secret") => {
            // SAFETY: a raw syscall with an integer flag only.
            let fd = unsafe { libc::syscall(libc::SYS_memfd_secret, 0) };
            if fd < 0 {
                fail("memfd_secret", 24);
            }
            println!("memfd_secret: ok");
        }
        Some("watch") => {
            let Some(dir) = args.get(1) else {
                println!("usage: watch DIR");
                std::process::exit(2)
            };
            let Ok(dir) = std::ffi::CString::new(dir.as_str()) else {
                std::process::exit(2)
            };
            watch(&dir);
        }
        Some("fds") => {
            let mut line = String::from("fds:");
            for fd in 3..1024 {
                // SAFETY: `F_GETFD` on a descriptor number reads nothing.
                if unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0 {
                    line.push_str(&format!(" {fd}"));
                }
            }
            println!("{line}");
        }
        Some("env") => {
            for (k, v) in std::env::vars() {
                println!("{k}={v}");
            }
        }
        Some("unix") => {
            let (Some(addr), Some(ty)) = (args.get(1), args.get(2)) else {
                println!("usage: unix ADDR stream|dgram");
                std::process::exit(2)
            };
            let stream = ty == "stream";
            let ty = if stream {
                libc::SOCK_STREAM
            } else {
                libc::SOCK_DGRAM
            };
            // SAFETY: `socket(2)` with integer arguments.
            let fd = unsafe { libc::socket(libc::AF_UNIX, ty | libc::SOCK_CLOEXEC, 0) };
            if fd < 0 {
                fail("socket", 18);
            }
            let (sa, len) = unix_addr(addr);
            let sa_ptr = (&sa as *const libc::sockaddr_un).cast::<libc::sockaddr>();
            if stream {
                // SAFETY: `sa` is a valid `sockaddr_un` of `len` bytes.
                if unsafe { libc::connect(fd, sa_ptr, len) } != 0 {
                    fail("connect", 19);
                }
                println!("connected");
            } else {
                let msg = b"probe";
                // SAFETY: `msg` and `sa` are valid for their lengths.
                let n = unsafe { libc::sendto(fd, msg.as_ptr().cast(), msg.len(), 0, sa_ptr, len) };
                if n < 0 {
                    fail("sendto", 19);
                }
                println!("sent");
            }
        }
        Some("pair") => {
            let stream = args.get(1).map(String::as_str) != Some("dgram");
            let ty = if stream {
                libc::SOCK_STREAM
            } else {
                libc::SOCK_DGRAM
            };
            let mut fds = [0i32; 2];
            // SAFETY: `fds` is a valid array of two descriptors to fill.
            if unsafe {
                libc::socketpair(libc::AF_UNIX, ty | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr())
            } != 0
            {
                fail("socketpair", 20);
            }
            let mut buf = [0u8; 8];
            // SAFETY: valid buffers of the given lengths on the new pair.
            let ok = unsafe {
                libc::write(fds[0], b"ping".as_ptr().cast(), 4) == 4
                    && libc::read(fds[1], buf.as_mut_ptr().cast(), buf.len()) == 4
            };
            println!(
                "pair: {}",
                if ok && &buf[..4] == b"ping" {
                    "ok"
                } else {
                    "broken"
                }
            );
            if let Some(addr) = args.get(2) {
                let (sa, len) = unix_addr(addr);
                let sa_ptr = (&sa as *const libc::sockaddr_un).cast::<libc::sockaddr>();
                // SAFETY: `sa` is a valid `sockaddr_un` of `len` bytes.
                let n =
                    unsafe { libc::sendto(fds[0], b"probe".as_ptr().cast(), 5, 0, sa_ptr, len) };
                if n < 0 {
                    fail("sendto", 21);
                }
                println!("sent");
            }
        }
        _ => {
            println!(
                "usage: gatehouse-exec-probe connect ADDR | ptrace | unshare | x32-socket | setsid | orphan | root-tricks | sockets | fd-exec | memfd-run PROGRAM [ARG...] | memfd-secret | watch DIR | fds | env | unix ADDR stream|dgram | pair stream|dgram [ADDR]"
            );
            std::process::exit(2)
        }
    }
}

/// The `watch DIR` mode: inotify (the old call and the new one with a
/// watch on `dir` and the first name it reports), then fanotify with a
/// mark on `dir`, one line each.
fn watch(dir: &std::ffi::CStr) {
    let report = |what: &str, r: i64| {
        if r >= 0 {
            println!("{what}: ok");
        } else {
            println!("{what}: {}", Error::last_os_error());
        }
        r >= 0
    };
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `inotify_init(2)` takes no arguments.
    report("inotify_init", unsafe {
        libc::syscall(libc::SYS_inotify_init)
    });
    // SAFETY: `inotify_init1(2)` with a flag only.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    if report("inotify_init1", fd.into()) {
        // SAFETY: `dir` is a NUL-terminated path that outlives the call.
        let wd = unsafe { libc::inotify_add_watch(fd, dir.as_ptr(), libc::IN_CREATE) };
        if report("inotify_add_watch", wd.into()) {
            let mut poll = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let mut buf = [0u8; 4096];
            // SAFETY: one valid `pollfd`; then `buf` is a valid, writable
            // buffer of its length.
            let n = unsafe {
                if libc::poll(&mut poll, 1, 5000) == 1 {
                    libc::read(fd, buf.as_mut_ptr().cast(), buf.len())
                } else {
                    0
                }
            };
            // An `inotify_event`: wd, mask, cookie, len (4 bytes each),
            // then `len` bytes of NUL-padded name.
            let n = usize::try_from(n).unwrap_or(0);
            let header = std::mem::size_of::<libc::inotify_event>();
            let name = if n > header {
                let name = &buf[header..n];
                let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
                String::from_utf8_lossy(&name[..end]).into_owned()
            } else {
                "none".to_string()
            };
            println!("event: {name}");
        }
    }
    // SAFETY: `fanotify_init(2)` with integer flags (notification only,
    // reporting file handles, which an unprivileged user may ask for).
    let fd = unsafe {
        libc::fanotify_init(
            libc::FAN_CLASS_NOTIF | libc::FAN_CLOEXEC | libc::FAN_REPORT_FID,
            libc::O_RDONLY as u32,
        )
    };
    if report("fanotify_init", fd.into()) {
        // SAFETY: `dir` is a NUL-terminated path that outlives the call.
        let r = unsafe {
            libc::fanotify_mark(
                fd,
                libc::FAN_MARK_ADD,
                libc::FAN_CREATE | libc::FAN_ONDIR,
                libc::AT_FDCWD,
                dir.as_ptr(),
            )
        };
        report("fanotify_mark", r.into());
    }
}

/// A `sockaddr_un` for a path, or for `@name` (an abstract name), and its
/// length.
fn unix_addr(addr: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: `sockaddr_un` is plain data for which zero bytes are valid.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let (bytes, offset) = match addr.strip_prefix('@') {
        Some(name) => (name.as_bytes(), 1),
        None => (addr.as_bytes(), 0),
    };
    for (slot, b) in sa.sun_path[offset..].iter_mut().zip(bytes) {
        *slot = *b as libc::c_char;
    }
    let base = std::mem::size_of::<libc::sa_family_t>();
    let len = if offset == 1 {
        base + 1 + bytes.len()
    } else {
        base + bytes.len() + 1
    };
    (sa, len as libc::socklen_t)
}
