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
//! - `fds`: prints `fds:` and every open descriptor above 2 (`fcntl`
//!   probe of 3..1024).
//! - `env`: prints every environment variable, one `NAME=value` a line.

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
        _ => {
            println!(
                "usage: gatehouse-exec-probe connect ADDR | ptrace | unshare | x32-socket | setsid | orphan | fds | env"
            );
            std::process::exit(2)
        }
    }
}
