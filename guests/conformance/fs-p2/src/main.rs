//! `cf-fs-p2`: every `wasi:filesystem@0.2` function called once, directly
//! (not through std or wasi-libc), inside a new directory `fs-p2` in the
//! granted directory named by `argv[1]` (a preopen's name, such as `out`),
//! which it removes again. Prints `FAIL <function>: <error>` for each
//! failure and, when none failed, `ok fs-p2 N functions` (N distinct
//! functions of `wasi:filesystem/types` and `preopens`).
//! For `gatehouse conformance`'s correct half.
//!
//! `argv[1] = pollables` is an attack instead: it makes pollables without
//! end (`subscribe-duration`), each a host resource, then polls them all;
//! the host must stop it (a resource limit), never run out itself.
//! `huge-write` passes one list of 32 MiB to `blocking-write-and-flush` on
//! stdout (the host must refuse it, never copy past the guest's memory);
//! `invalid-utf8 NAME` passes a `string` that is not UTF-8 (a path for
//! `open-at` in the preopen NAME): the host must trap the guest, never
//! panic.

wit_bindgen::generate!({ path: "wit", world: "cf:fs/fs-all", generate_all });

use std::collections::BTreeSet;
use std::io::Write;

use wasi::clocks::wall_clock::Datetime;
use wasi::filesystem::preopens::get_directories;
use wasi::filesystem::types::{
    filesystem_error_code, Advice, Descriptor, DescriptorFlags, DescriptorType, ErrorCode,
    NewTimestamp, OpenFlags, PathFlags,
};
use wasi::io::streams::StreamError;

struct Run {
    called: BTreeSet<&'static str>,
    failed: usize,
}

impl Run {
    /// Records a call of `name` and whether it did what it must.
    fn check<T>(&mut self, name: &'static str, r: Result<T, String>) -> Option<T> {
        self.called.insert(name);
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.failed += 1;
                say(&format!("FAIL {name}: {e}"));
                None
            }
        }
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn code(e: ErrorCode) -> String {
    format!("{e:?}")
}

fn want(cond: bool, what: &str) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(format!("unexpected {what}"))
    }
}

fn pollables() {
    use wasi::clocks::monotonic_clock::subscribe_duration;
    let mut all = Vec::new();
    for _ in 0..10_000_000u32 {
        all.push(subscribe_duration(3_600_000_000_000));
    }
    let refs: Vec<&wasi::io::poll::Pollable> = all.iter().collect();
    let ready = wasi::io::poll::poll(&refs);
    say(&format!("BROKEN made {} pollables, {} ready", all.len(), ready.len()));
}

fn huge_write() {
    let stdout = wasi::cli::stdout::get_stdout();
    let big = vec![b'x'; 32 << 20];
    match stdout.blocking_write_and_flush(&big) {
        Ok(()) => say(&format!("BROKEN wrote {} bytes in one call", big.len())),
        Err(StreamError::Closed) => say("held stream closed"),
        Err(StreamError::LastOperationFailed(e)) => say(&format!("held {}", e.to_debug_string())),
    }
}

fn invalid_utf8(name: &str) {
    let Some((root, _)) = get_directories().into_iter().find(|(_, n)| n == name) else {
        say(&format!("FAIL get-directories: no preopen named `{name}`"));
        return;
    };
    let bytes: &[u8] = std::hint::black_box(b"bad-\xff\xfe-name");
    // SAFETY: deliberately not UTF-8: the attack is a `string` the
    // canonical ABI must refuse. The guest itself never reads it as a
    // `str` (only its bytes cross the boundary).
    let path = unsafe { std::str::from_utf8_unchecked(bytes) };
    match root.open_at(
        PathFlags::empty(),
        path,
        OpenFlags::CREATE,
        DescriptorFlags::READ | DescriptorFlags::WRITE,
    ) {
        Ok(_) => say("BROKEN opened a file whose name is not UTF-8"),
        Err(e) => say(&format!("held {}", code(e))),
    }
}

fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| ".".to_string());
    if name == "pollables" {
        return pollables();
    }
    if name == "huge-write" {
        return huge_write();
    }
    if name == "invalid-utf8" {
        return invalid_utf8(&std::env::args().nth(2).unwrap_or_default());
    }
    let mut run = Run {
        called: BTreeSet::new(),
        failed: 0,
    };
    let dirs = run.check("get-directories", Ok(get_directories())).unwrap_or_default();
    let Some((root, _)) = dirs.into_iter().find(|(_, n)| *n == name) else {
        say(&format!("FAIL get-directories: no preopen named `{name}`"));
        return;
    };
    if run.check("create-directory-at", root.create_directory_at("fs-p2").map_err(code)).is_none() {
        return;
    }
    let Some(d) = run.check(
        "open-at",
        root.open_at(
            PathFlags::empty(),
            "fs-p2",
            OpenFlags::DIRECTORY,
            DescriptorFlags::READ | DescriptorFlags::MUTATE_DIRECTORY,
        )
        .map_err(code),
    ) else {
        return;
    };
    steps(&mut run, &d);
    drop(d);
    run.check("remove-directory-at", root.remove_directory_at("fs-p2").map_err(code));
    if run.failed == 0 {
        say(&format!("ok fs-p2 {} functions", run.called.len()));
    }
}

fn steps(run: &mut Run, d: &Descriptor) {
    let rw = DescriptorFlags::READ | DescriptorFlags::WRITE;
    let Some(f) = d
        .open_at(PathFlags::empty(), "a", OpenFlags::CREATE, rw)
        .map_err(code)
        .ok()
    else {
        say("FAIL open-at: cannot create `a`");
        run.failed += 1;
        return;
    };
    run.check("write", f.write(b"hello world", 0).map_err(code).and_then(|n| want(n == 11, "length")));
    run.check("read", f.read(5, 0).map_err(code).and_then(|(b, _)| want(b == b"hello", "bytes")));
    run.check("write-via-stream", (|| {
        let s = f.write_via_stream(11).map_err(code)?;
        s.blocking_write_and_flush(b"!").map_err(|e| format!("{e:?}"))
    })());
    run.check("append-via-stream", (|| {
        let s = f.append_via_stream().map_err(code)?;
        s.blocking_write_and_flush(b"?").map_err(|e| format!("{e:?}"))
    })());
    run.check("read-via-stream", (|| {
        let s = f.read_via_stream(0).map_err(code)?;
        let b = s.blocking_read(64).map_err(|e| format!("{e:?}"))?;
        want(b == b"hello world!?", "bytes")
    })());
    run.check("advise", f.advise(0, 0, Advice::Normal).map_err(code));
    run.check("sync-data", f.sync_data().map_err(code));
    run.check("sync", f.sync().map_err(code));
    run.check("get-flags", f.get_flags().map_err(code).and_then(|fl| want((fl & rw) == rw, "flags")));
    run.check("get-type", f.get_type().map_err(code).and_then(|t| want(t == DescriptorType::RegularFile, "type")));
    run.check("set-size", f.set_size(5).map_err(code));
    let when = Datetime { seconds: 1_000_000, nanoseconds: 0 };
    run.check("set-times", f.set_times(NewTimestamp::NoChange, NewTimestamp::Timestamp(when)).map_err(code));
    run.check("stat", f.stat().map_err(code).and_then(|s| {
        want(s.size == 5 && s.data_modification_timestamp.map(|t| t.seconds) == Some(1_000_000), "stat")
    }));
    run.check("stat-at", d.stat_at(PathFlags::empty(), "a").map_err(code).and_then(|s| want(s.size == 5, "size")));
    run.check("set-times-at", d.set_times_at(PathFlags::SYMLINK_FOLLOW, "a", NewTimestamp::Now, NewTimestamp::Now).map_err(code));
    run.check("link-at", d.link_at(PathFlags::empty(), "a", d, "b").map_err(code));
    let b = d.open_at(PathFlags::empty(), "b", OpenFlags::empty(), DescriptorFlags::READ).map_err(code);
    run.check("is-same-object", b.as_ref().map_err(Clone::clone).and_then(|b| want(f.is_same_object(b), "object")));
    let hash = f.metadata_hash().map_err(code);
    run.check("metadata-hash", hash.clone().map(|_| ()));
    run.check("metadata-hash-at", d.metadata_hash_at(PathFlags::empty(), "b").map_err(code).and_then(|h| {
        let same = hash.as_ref().is_ok_and(|x| (x.lower, x.upper) == (h.lower, h.upper));
        want(same, "hash")
    }));
    run.check("symlink-at", d.symlink_at("a", "s").map_err(code));
    run.check("readlink-at", d.readlink_at("s").map_err(code).and_then(|t| want(t == "a", "target")));
    run.check("rename-at", d.rename_at("b", d, "c").map_err(code));
    run.check("read-directory", (|| {
        let entries = d.read_directory().map_err(code)?;
        let mut names = Vec::new();
        while let Some(e) = entries.read_directory_entry().map_err(code)? {
            names.push(e.name);
        }
        names.sort();
        want(names == ["a", "c", "s"], "entries")
    })());
    run.called.insert("read-directory-entry");
    run.check("filesystem-error-code", (|| {
        // A write through a read-only descriptor's stream fails with an
        // `error` the filesystem can name.
        let ro = d.open_at(PathFlags::empty(), "a", OpenFlags::empty(), DescriptorFlags::READ).map_err(code)?;
        let s = ro.write_via_stream(0).map_err(code)?;
        match s.blocking_write_and_flush(b"x") {
            Err(StreamError::LastOperationFailed(e)) => {
                want(filesystem_error_code(&e).is_some(), "error code")
            }
            other => Err(format!("the write answered {other:?}")),
        }
    })());
    drop(b);
    drop(f);
    for name in ["s", "a", "c"] {
        run.check("unlink-file-at", d.unlink_file_at(name).map_err(code));
    }
}
