//! `cf-attack`: the conformance suite's guest (`gatehouse conformance`),
//! an ordinary WASI command built for wasm32-wasip2 and wasm32-wasip1.
//! `argv[1]` names one attack or one check; the rest are its operands.
//!
//! Each attack is written to *succeed* if the sandbox is broken: it prints
//! exactly one line, `BROKEN <what it achieved>`, or `held <what stopped
//! it>` (the WASI errno by name, such as `held ENOTCAPABLE`). Each check
//! of the correct half prints `ok <what>` or `FAIL <step>: <error>` lines.
//! Attacks that are meant to be stopped by a limit (spin, grow, flood,
//! recursion) print `BROKEN` only if they ever finish.

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[cfg(target_env = "p2")]
mod bindings {
    wit_bindgen::generate!({ path: "wit", world: "attack", features: ["cli-exit-with-code"], generate_all });
}

// wasi-libc, linked into every Rust wasm32-wasi* program.
mod c {
    use std::ffi::c_char;
    pub const O_CREAT: i32 = 1 << 12;
    pub const O_DIRECTORY: i32 = 2 << 12;
    pub const O_NOFOLLOW: i32 = 0x0100_0000;
    pub const O_RDONLY: i32 = 0x0400_0000;
    pub const O_WRONLY: i32 = 0x1000_0000;
    extern "C" {
        pub fn open(path: *const c_char, flags: i32, ...) -> i32;
        pub fn openat(fd: i32, path: *const c_char, flags: i32, ...) -> i32;
        pub fn close(fd: i32) -> i32;
        pub fn symlink(target: *const c_char, link: *const c_char) -> i32;
        pub fn getentropy(buf: *mut u8, len: usize) -> i32;
        pub fn posix_fadvise(fd: i32, offset: i64, len: i64, advice: i32) -> i32;
    }
}

/// The name of a WASI errno (wasi-libc numbers them as preview 1 does).
fn errno_name(n: i32) -> String {
    const NAMES: [&str; 77] = [
        "SUCCESS", "E2BIG", "EACCES", "EADDRINUSE", "EADDRNOTAVAIL", "EAFNOSUPPORT", "EAGAIN",
        "EALREADY", "EBADF", "EBADMSG", "EBUSY", "ECANCELED", "ECHILD", "ECONNABORTED",
        "ECONNREFUSED", "ECONNRESET", "EDEADLK", "EDESTADDRREQ", "EDOM", "EDQUOT", "EEXIST",
        "EFAULT", "EFBIG", "EHOSTUNREACH", "EIDRM", "EILSEQ", "EINPROGRESS", "EINTR", "EINVAL",
        "EIO", "EISCONN", "EISDIR", "ELOOP", "EMFILE", "EMLINK", "EMSGSIZE", "EMULTIHOP",
        "ENAMETOOLONG", "ENETDOWN", "ENETRESET", "ENETUNREACH", "ENFILE", "ENOBUFS", "ENODEV",
        "ENOENT", "ENOEXEC", "ENOLCK", "ENOLINK", "ENOMEM", "ENOMSG", "ENOPROTOOPT", "ENOSPC",
        "ENOSYS", "ENOTCONN", "ENOTDIR", "ENOTEMPTY", "ENOTRECOVERABLE", "ENOTSOCK", "ENOTSUP",
        "ENOTTY", "ENXIO", "EOVERFLOW", "EOWNERDEAD", "EPERM", "EPIPE", "EPROTO",
        "EPROTONOSUPPORT", "EPROTOTYPE", "ERANGE", "EROFS", "ESPIPE", "ESRCH", "ESTALE",
        "ETIMEDOUT", "ETXTBSY", "EXDEV", "ENOTCAPABLE",
    ];
    usize::try_from(n)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map(|s| s.to_string())
        .unwrap_or_else(|| format!("errno {n}"))
}

fn ename(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => errno_name(n),
        None => format!("{:?}", e.kind()),
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn exit_with(code: i32) -> ! {
    let _ = std::io::stdout().flush();
    #[cfg(target_env = "p2")]
    if code > 1 {
        bindings::wasi::cli::exit::exit_with_code(code as u8);
    }
    std::process::exit(code)
}

/// An attack's verdict: `Ok(what)` it achieved, or the error that held.
static OK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn verdict(r: Result<String, std::io::Error>) {
    // `OP-ok`: the correct half's control, where success is expected.
    let success = if OK.load(std::sync::atomic::Ordering::Relaxed) { "ok" } else { "BROKEN" };
    match r {
        Ok(what) => say(&format!("{success} {what}")),
        Err(e) => say(&format!("held {}", ename(&e))),
    }
}

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap_or_default()
}

/// A C call's result as an `io::Result`.
fn check(rc: i32) -> Result<i32, std::io::Error> {
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let first: String = text.chars().take(40).collect();
    format!("{} bytes: {:?}", bytes.len(), first)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let mut op = arg(1);
    if let Some(base) = op.strip_suffix("-ok") {
        OK.store(true, std::sync::atomic::Ordering::Relaxed);
        op = base;
    }
    match op {
        // --- filesystem escapes (a read grant) ---
        "read" => verdict(fs::read(arg(2)).map(|b| format!("read `{}`: {}", arg(2), preview(&b)))),
        "list" => verdict(fs::read_dir(arg(2)).map(|d| {
            let names: Vec<String> = d
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .take(5)
                .collect();
            format!("listed `{}`: {}", arg(2), names.join(", "))
        })),
        // `/` names a preopen only if the host gave one: it must not be
        // the host's root.
        "list-root" => match fs::read_dir("/") {
            Ok(d) => {
                let names: Vec<String> = d
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                if names.iter().any(|n| ["etc", "usr", "proc", "bin"].contains(&n.as_str())) {
                    say(&format!("BROKEN listed the host's `/`: {}", names.join(", ")));
                } else {
                    say("held `/` shows only the granted directory");
                }
            }
            Err(e) => say(&format!("held {}", ename(&e))),
        },
        "stat" => verdict(fs::metadata(arg(2)).map(|m| format!("stat `{}`: {} bytes", arg(2), m.len()))),
        "open-nofollow" => verdict((|| {
            let p = cstr(arg(2));
            // SAFETY: a valid C string; the flags are wasi-libc's.
            let fd = check(unsafe { c::open(p.as_ptr(), c::O_RDONLY | c::O_NOFOLLOW) })?;
            // SAFETY: `fd` was just opened here.
            unsafe { c::close(fd) };
            Ok(format!("opened `{}` with O_NOFOLLOW", arg(2)))
        })()),
        "create-nofollow" => verdict((|| {
            let p = cstr(arg(2));
            // SAFETY: a valid C string; the flags are wasi-libc's.
            let fd = check(unsafe { c::open(p.as_ptr(), c::O_WRONLY | c::O_CREAT | c::O_NOFOLLOW, 0o644) })?;
            // SAFETY: `fd` was just opened here.
            unsafe { c::close(fd) };
            Ok(format!("created `{}` with O_NOFOLLOW", arg(2)))
        })()),
        // `openat(DIR's descriptor, PATH)`: `..` from a child descriptor.
        "openat" => verdict((|| {
            let dir = File::open(arg(2))?;
            let p = cstr(arg(3));
            // SAFETY: a valid C string and a descriptor this program holds.
            let fd = check(unsafe { c::openat(dir.as_raw_fd(), p.as_ptr(), c::O_RDONLY) })?;
            let mut f = File::from(unsafe_owned(fd));
            let mut buf = Vec::new();
            f.read_to_end(&mut buf)?;
            Ok(format!("openat `{}` from `{}`: {}", arg(3), arg(2), preview(&buf)))
        })()),
        "openat-dir" => verdict((|| {
            let dir = File::open(arg(2))?;
            let p = cstr(arg(3));
            // SAFETY: a valid C string and a descriptor this program holds.
            let fd = check(unsafe { c::openat(dir.as_raw_fd(), p.as_ptr(), c::O_RDONLY | c::O_DIRECTORY) })?;
            // SAFETY: `fd` was just opened here.
            unsafe { c::close(fd) };
            Ok(format!("opened directory `{}` from `{}`", arg(3), arg(2)))
        })()),
        // --- writes ---
        "write" => verdict(fs::write(arg(2), b"pwned").map(|()| format!("wrote `{}`", arg(2)))),
        "truncate" => verdict(
            OpenOptions::new().write(true).truncate(true).open(arg(2)).map(|_| format!("truncated `{}`", arg(2))),
        ),
        "append" => verdict((|| {
            let mut f = OpenOptions::new().append(true).open(arg(2))?;
            f.write_all(b"pwned")?;
            Ok(format!("appended to `{}`", arg(2)))
        })()),
        "create" => verdict(
            OpenOptions::new().write(true).create_new(true).open(arg(2)).map(|_| format!("created `{}`", arg(2))),
        ),
        "mkdir" => verdict(fs::create_dir(arg(2)).map(|()| format!("made directory `{}`", arg(2)))),
        "unlink" => verdict(fs::remove_file(arg(2)).map(|()| format!("removed `{}`", arg(2)))),
        "rmdir" => verdict(fs::remove_dir(arg(2)).map(|()| format!("removed directory `{}`", arg(2)))),
        "rename" => verdict(fs::rename(arg(2), arg(3)).map(|()| format!("renamed `{}` to `{}`", arg(2), arg(3)))),
        "link" => verdict(fs::hard_link(arg(2), arg(3)).map(|()| format!("linked `{}` as `{}`", arg(2), arg(3)))),
        "symlink" => verdict((|| {
            let (t, l) = (cstr(arg(2)), cstr(arg(3)));
            // SAFETY: valid C strings.
            check(unsafe { c::symlink(t.as_ptr(), l.as_ptr()) })?;
            Ok(format!("made symlink `{}` -> `{}`", arg(3), arg(2)))
        })()),
        "set-times" => verdict((|| {
            let f = File::open(arg(2))?;
            f.set_modified(UNIX_EPOCH + Duration::from_secs(1))?;
            Ok(format!("set the times of `{}`", arg(2)))
        })()),
        "set-size" => verdict((|| {
            let f = File::open(arg(2))?;
            f.set_len(0)?;
            Ok(format!("set the size of `{}` to 0", arg(2)))
        })()),
        "create-bytes" => verdict((|| {
            // A name that is not UTF-8 in directory DIR: `bad` then byte 0xff.
            let mut name = format!("{}/bad", arg(2)).into_bytes();
            name.push(0xff);
            let p = CString::new(name).unwrap_or_default();
            // SAFETY: a valid C string; the flags are wasi-libc's.
            let fd = check(unsafe { c::open(p.as_ptr(), c::O_WRONLY | c::O_CREAT, 0o644) })?;
            // SAFETY: `fd` was just opened here.
            unsafe { c::close(fd) };
            Ok(format!("created a file named `{}/bad\\xff`", arg(2)))
        })()),
        // --- leakage ---
        "env" => {
            let vars: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
            if vars.is_empty() {
                say("held no environment variables");
            } else {
                say(&format!("BROKEN {} environment variables: {}", vars.len(), vars.join(", ")));
            }
        }
        "argv" => {
            let rest = args.get(1..).unwrap_or_default().join(" ");
            if arg(0).contains('/') || arg(0).contains("gatehouse") {
                say(&format!("BROKEN argv[0] is the host's: {}", arg(0)));
            } else {
                say(&format!("held argv {rest}"));
            }
        }
        "cwd" => match std::env::current_dir() {
            Ok(d) if d.as_os_str() == "/" => say("held cwd /"),
            Ok(d) => say(&format!("BROKEN cwd {}", d.display())),
            Err(e) => say(&format!("held {}", ename(&e))),
        },
        "clock" => {
            let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
            if wall.as_secs() < 86_400 {
                say("held wall clock frozen");
            } else {
                say(&format!("BROKEN the real wall clock: {} s since 1970", wall.as_secs()));
            }
        }
        // --- exhaustion ---
        "spin" => {
            let mut n = args.len() as u64;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        "sleep" => {
            std::thread::sleep(Duration::from_secs(3600));
            say("BROKEN slept an hour");
        }
        "grow" => {
            let mut pages = 0usize;
            loop {
                if core::arch::wasm32::memory_grow(0, 16) == usize::MAX {
                    say(&format!("held memory.grow refused after {pages} pages"));
                    break;
                }
                pages += 16;
                if pages >= 65_536 - 16 {
                    say("BROKEN grew linear memory to 4 GiB");
                    break;
                }
            }
        }
        "recurse" => {
            fn deep(n: u64) -> u64 {
                let a = std::hint::black_box([n; 64]);
                if n == u64::MAX {
                    return a[0];
                }
                deep(n + 1).wrapping_add(a[1])
            }
            say(&format!("BROKEN recursed forever: {}", deep(0)));
        }
        "flood" => {
            let line = [b'x'; 4096];
            let mut out = std::io::stdout().lock();
            loop {
                if out.write_all(&line).is_err() {
                    break;
                }
            }
            drop(out);
            say("held stdout closed");
        }
        // One write of 32 MiB: on preview 1 a single `fd_write` (std hands
        // a buffer this large to the host whole).
        "huge-write" => {
            let big = vec![b'x'; 32 << 20];
            let r = std::io::stdout().lock().write(&big);
            match r {
                Ok(n) if n == big.len() => say(&format!("BROKEN wrote {n} bytes in one call")),
                Ok(n) => say(&format!("held wrote {n} of {} bytes", big.len())),
                Err(e) => say(&format!("held {}", ename(&e))),
            }
        }
        "fds" => {
            let mut held = Vec::new();
            for _ in 0..1_000_000 {
                match File::open(arg(2)) {
                    Ok(f) => held.push(f),
                    Err(e) => {
                        say(&format!("held {} after {} descriptors", ename(&e), held.len()));
                        return;
                    }
                }
            }
            say("BROKEN opened a million descriptors");
        }
        "random-huge" => random_huge(),
        // --- the correct half ---
        "args" => say(&format!("ok args {}", args.get(2..).unwrap_or_default().join(" "))),
        "stdio" => {
            let mut input = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut input);
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(&input);
            let _ = out.flush();
            eprintln!("stderr line");
        }
        "exit" => {
            let code = arg(2).parse().unwrap_or(0);
            say(&format!("exit {code}"));
            exit_with(code);
        }
        "clock-real" => {
            let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
            let t0 = std::time::Instant::now();
            std::thread::sleep(Duration::from_millis(2));
            let moved = t0.elapsed() >= Duration::from_millis(1);
            if wall.as_secs() > 1_600_000_000 && moved {
                say("ok wall and monotonic clocks are real");
            } else {
                say(&format!("FAIL wall {} s, monotonic moved {moved}", wall.as_secs()));
            }
        }
        "random" => {
            let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
            // SAFETY: both buffers are 32 bytes long.
            let rc = unsafe { c::getentropy(a.as_mut_ptr(), 32) + c::getentropy(b.as_mut_ptr(), 32) };
            if rc == 0 && a != b && a != [0; 32] {
                say("ok random: two draws differ");
            } else {
                say(&format!("FAIL random: rc {rc}, draws equal {}", a == b));
            }
        }
        "fs-all" => fs_all(arg(2)),
        other => {
            say(&format!("FAIL unknown operation `{other}`"));
            exit_with(64);
        }
    }
}

/// An owned descriptor from a C call.
fn unsafe_owned(fd: i32) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: `fd` was returned by a successful open and is owned here.
    unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }
}

#[cfg(target_env = "p2")]
fn random_huge() {
    // 2^63 bytes: the host must refuse (a limit), never try.
    let bytes = bindings::wasi::random::random::get_random_bytes(1 << 63);
    say(&format!("BROKEN got {} random bytes", bytes.len()));
}

#[cfg(not(target_env = "p2"))]
fn random_huge() {
    #[link(wasm_import_module = "wasi_snapshot_preview1")]
    extern "C" {
        fn random_get(buf: *mut u8, len: usize) -> u16;
    }
    let mut small = [0u8; 16];
    // 2^31 bytes from a 16-byte buffer: past the end of linear memory.
    // SAFETY: the host checks the range against linear memory; the guest
    // never reads what lies past `small`.
    let rc = unsafe { random_get(small.as_mut_ptr(), 1 << 31) };
    if rc == 0 {
        say("BROKEN random_get wrote 2 GiB");
    } else {
        say(&format!("held {}", errno_name(i32::from(rc))));
    }
}

/// Every filesystem call std and wasi-libc make, once each, inside a new
/// directory in `dir` (a granted read-write directory); removes it.
fn fs_all(parent: &str) {
    let dir = &format!("{parent}/fs-all");
    if let Err(e) = fs::create_dir(dir) {
        say(&format!("FAIL mkdir `{dir}`: {}", ename(&e)));
        return;
    }
    let mut ok = 0;
    let mut failed = 0;
    let mut step = |name: &str, r: Result<(), std::io::Error>| match r {
        Ok(()) => ok += 1,
        Err(e) => {
            failed += 1;
            say(&format!("FAIL {name}: {}", ename(&e)));
        }
    };
    let p = |n: &str| format!("{dir}/{n}");
    step("create+write", fs::write(p("a"), b"hello world"));
    step("read", fs::read(p("a")).and_then(|b| expect(b == b"hello world")));
    step("open+seek+read", (|| {
        let mut f = File::open(p("a"))?;
        f.seek(SeekFrom::Start(6))?;
        let mut s = String::new();
        f.read_to_string(&mut s)?;
        expect(s == "world")
    })());
    step("append", (|| {
        let mut f = OpenOptions::new().append(true).open(p("a"))?;
        f.write_all(b"!")?;
        f.sync_all()?;
        f.sync_data()
    })());
    step("metadata", fs::metadata(p("a")).and_then(|m| expect(m.len() == 12 && m.is_file())));
    step("set-len", (|| {
        let f = OpenOptions::new().write(true).open(p("a"))?;
        f.set_len(5)?;
        expect(f.metadata()?.len() == 5)
    })());
    step("set-times", (|| {
        let f = OpenOptions::new().write(true).open(p("a"))?;
        f.set_modified(UNIX_EPOCH + Duration::from_secs(1_000_000))?;
        let m = fs::metadata(p("a"))?.modified()?;
        expect(m == UNIX_EPOCH + Duration::from_secs(1_000_000))
    })());
    step("fadvise", (|| {
        let f = File::open(p("a"))?;
        // SAFETY: a descriptor this program holds; POSIX_FADV_NORMAL (0).
        let rc = unsafe { c::posix_fadvise(f.as_raw_fd(), 0, 0, 0) };
        expect(rc == 0)
    })());
    step("mkdir", fs::create_dir(p("d")));
    step("rename", fs::rename(p("a"), p("d/b")));
    step("hard-link", fs::hard_link(p("d/b"), p("c")));
    step("symlink", (|| {
        let (t, l) = (cstr("d/b"), cstr(&p("s")));
        // SAFETY: valid C strings.
        check(unsafe { c::symlink(t.as_ptr(), l.as_ptr()) }).map(|_| ())
    })());
    step("read-link", fs::read_link(p("s")).and_then(|t| expect(t.as_os_str() == "d/b")));
    step("symlink-metadata", fs::symlink_metadata(p("s")).and_then(|m| expect(m.file_type().is_symlink())));
    step("read-through-symlink", fs::read(p("s")).and_then(|b| expect(b == b"hello")));
    step("read-dir", fs::read_dir(dir).and_then(|d| {
        let mut names: Vec<String> = d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        expect(names == ["c", "d", "s"])
    }));
    step("unlink-symlink", fs::remove_file(p("s")));
    step("unlink", fs::remove_file(p("c")));
    step("unlink-2", fs::remove_file(p("d/b")));
    step("rmdir", fs::remove_dir(p("d")));
    step("empty", fs::read_dir(dir).and_then(|d| expect(d.count() == 0)));
    step("rmdir-work", fs::remove_dir(dir));
    if failed == 0 {
        say(&format!("ok fs-all {ok} steps"));
    }
}

fn expect(cond: bool) -> Result<(), std::io::Error> {
    if cond {
        Ok(())
    } else {
        Err(std::io::Error::other("unexpected result"))
    }
}
