//! `src/policy/` is pure: no filesystem, environment, process, network,
//! clock, database, wasm engine or async runtime, and no reach into the
//! modules that do I/O. Proved by reading its sources.

use std::path::{Path, PathBuf};

/// Names whose presence in the policy core would mean I/O or the clock.
const FORBIDDEN: [&str; 11] = [
    "std::fs",
    "std::env",
    "std::process",
    "std::net",
    "std::time",
    "SystemTime",
    "Instant",
    "rusqlite",
    "wasmtime",
    "tokio",
    "std::io",
];

fn policy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/policy")
}

/// Every `.rs` file under `dir`, recursively, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The file's lines with `//` comment lines (including `///` and `//!`)
/// removed, numbered from 1.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(i, l)| (i + 1, l.to_string()))
        .collect()
}

#[test]
fn policy_core_is_pure() {
    let files = rust_files(&policy_dir());
    // The core really is where we look.
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for expected in ["mod.rs", "decide.rs", "codes.rs", "command.rs", "matrix.rs"] {
        assert!(
            names.iter().any(|n| n == expected),
            "no src/policy/{expected}"
        );
    }
    let mut problems = Vec::new();
    for file in &files {
        for (n, line) in code_lines(file) {
            for word in FORBIDDEN {
                if line.contains(word) {
                    problems.push(format!(
                        "{}:{n}: names `{word}`: {}",
                        file.display(),
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the policy core is not pure:\n{}",
        problems.join("\n")
    );
}

#[test]
fn policy_core_uses_no_other_crate_module() {
    let mut problems = Vec::new();
    for file in rust_files(&policy_dir()) {
        for (n, line) in code_lines(&file) {
            let mut rest = line.as_str();
            while let Some(at) = rest.find("crate::") {
                let after = &rest[at + "crate::".len()..];
                if !after.starts_with("policy") {
                    problems.push(format!(
                        "{}:{n}: reaches outside the core: {}",
                        file.display(),
                        line.trim()
                    ));
                }
                rest = after;
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_checks_would_catch_a_violation() {
    // The filter keeps code and drops only comments.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x.rs");
    std::fs::write(
        &f,
        "//! uses std::fs in a comment\nfn f() { let _ = std::fs::read(\"x\"); }\n    // std::env\n",
    )
    .unwrap();
    let lines = code_lines(&f);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].0, 2);
    assert!(FORBIDDEN.iter().any(|w| lines[0].1.contains(w)));
}

/// The library's layers, lowest first, and what each may name. A module
/// may use only the modules listed for it: no import cycles, the sandbox
/// never reaches the gate or the host, the policy core nothing at all,
/// and `util` (the shared helpers) nothing either, so every layer may use
/// it. The sandbox, exec, undo and the terminal do not reach the
/// configuration: its values (the engine settings, `on_degraded`, the
/// limits) are passed in by the host.
const LAYERS: [(&str, &[&str]); 16] = [
    ("util", &[]),
    ("policy", &[]),
    ("config", &["util", "policy"]),
    ("manifest", &["util", "policy", "config"]),
    ("snapshot", &["util", "policy", "config", "manifest"]),
    ("tier3", &["util", "policy", "config"]),
    ("state", &["util", "policy", "config"]),
    ("exec", &["util", "policy"]),
    ("undo", &["util", "policy", "state"]),
    (
        "sandbox",
        &["util", "policy", "state::memory", "exec", "undo"],
    ),
    (
        "authoring",
        &["util", "policy", "config", "manifest", "sandbox"],
    ),
    ("terminal", &["util", "policy", "sandbox"]),
    (
        "host",
        &[
            "util", "policy", "config", "manifest", "snapshot", "exec", "undo", "sandbox",
            "terminal", "state",
        ],
    ),
    (
        "conformance",
        &["util", "host", "config", "manifest", "policy"],
    ),
    ("serve", &["util", "host", "config", "manifest", "policy"]),
    (
        "cli",
        &[
            "util",
            "host",
            "config",
            "manifest",
            "policy",
            "snapshot",
            "tier3",
            "undo",
            "authoring",
            "conformance",
            "serve",
            "terminal",
            "state",
        ],
    ),
];

/// The sandbox opens no terminal and reads no environment variable:
/// whoever answers a guest's question is the run's asker, and the granted
/// variables' values come in its services, both from the caller of the
/// turn (issue 28, point 4; security round 2, item 3); so does the
/// process's stdin for a command (`run` without `--input`).
#[test]
fn the_sandbox_opens_no_terminal_and_reads_no_environment() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sandbox");
    for f in rust_files(&src) {
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            assert!(
                !code.contains("/dev/tty"),
                "{}:{} opens the terminal",
                f.display(),
                n + 1
            );
            assert!(
                !code.contains("std::env::var"),
                "{}:{} reads the process environment",
                f.display(),
                n + 1
            );
            assert!(
                !code.contains("stdin()"),
                "{}:{} reads the process's stdin",
                f.display(),
                n + 1
            );
            // The memory database is the host's (`RunServices::memory`):
            // a run cannot open one by path.
            assert!(
                !code.contains("MemoryStore::open") && !code.contains("MemoryDb::new"),
                "{}:{} opens a memory database by path",
                f.display(),
                n + 1
            );
        }
    }
}

/// The `crate::name` (or `gatehouse::name` for the binary) modules a
/// source names outside comments.
/// The modules a file names after `prefix`, each with its first two
/// segments (`state::memory`; one segment when no second follows), so a
/// layer may be allowed one room of another (`sandbox` names only
/// `state::memory`, the memory store's trait).
fn named_modules(text: &str, prefix: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find(prefix) {
            rest = &rest[i + prefix.len()..];
            let first = ident(rest);
            if first.is_empty() {
                continue;
            }
            let second = rest[first.len()..]
                .strip_prefix("::")
                .map(ident)
                .filter(|s| !s.is_empty());
            let name = match second {
                Some(second) => format!("{first}::{second}"),
                None => first,
            };
            if !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

/// Whether `named` (one or two segments) is `module` itself or a layer,
/// or a layer's room, that `allowed` lists.
fn may_name(module: &str, allowed: &[&str], named: &str) -> bool {
    let first = named.split("::").next().unwrap_or(named);
    first == module || allowed.contains(&first) || allowed.contains(&named)
}

#[test]
fn each_module_names_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (module, allowed) in LAYERS {
        let (files, prefix) = if module == "cli" {
            (rust_files(&src.join("cli")), "gatehouse::")
        } else if src.join(module).is_dir() {
            (rust_files(&src.join(module)), "crate::")
        } else {
            (vec![src.join(format!("{module}.rs"))], "crate::")
        };
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            // Unit tests may reach further (they build fixtures).
            let text = text.split("#[cfg(test)]").next().unwrap_or("");
            if module == "cli" {
                // The policy's own answer comes from the host too.
                for f_name in ["decide(", "decide_json(", "effective_outcome("] {
                    // A call of the free function: not a method (`.decide(`)
                    // nor a longer name (`policy_decide(`).
                    let called = text
                        .lines()
                        .map(|l| l.split("//").next().unwrap_or(""))
                        .any(|l| {
                            l.match_indices(f_name).any(|(i, _)| {
                                !l[..i].ends_with(|c: char| {
                                    c.is_ascii_alphanumeric() || c == '_' || c == '.'
                                })
                            })
                        });
                    assert!(!called, "{} calls `{f_name}` itself", f.display());
                }
            }
            for named in named_modules(text, prefix) {
                assert!(
                    may_name(module, allowed, &named),
                    "{} names `{prefix}{named}`, which the `{module}` layer may not use",
                    f.display()
                );
            }
        }
    }
}

/// The rooms of `src/host/` (each file, and `needs/` as one room) that
/// `path`'s code names: `super::ROOM` from a file of the host (from a file
/// of `needs/`, `super::super::ROOM`), or `crate::host::ROOM`, alone or in
/// a `{…}` list.
fn host_rooms_named(path: &Path, rooms: &[String], nested: bool) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let up = if nested { "super::super::" } else { "super::" };
    let mut out = Vec::new();
    for prefix in [up, "crate::host::"] {
        let mut rest = code.as_str();
        while let Some(i) = rest.find(prefix) {
            // `super::super::` also contains `super::`: only a whole prefix.
            let before = &rest[..i];
            rest = &rest[i + prefix.len()..];
            if before.ends_with("::") || before.ends_with(|c: char| c.is_alphanumeric()) {
                continue;
            }
            let names: Vec<&str> = match rest.strip_prefix('{') {
                Some(list) => list
                    .split('}')
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .map(|n| n.trim().split("::").next().unwrap_or(""))
                    .collect(),
                None => vec![rest
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or("")],
            };
            for n in names {
                if rooms.iter().any(|r| r == n) && !out.iter().any(|o: &String| o == n) {
                    out.push(n.to_string());
                }
            }
        }
    }
    out
}

/// Issue 44, item 3: no two rooms of `src/host/` name each other (the
/// gate and the needs, the pipeline and delegation once did); `mod.rs`,
/// the host's root that every room may use, is left out.
#[test]
fn no_two_rooms_of_the_host_name_each_other() {
    let host = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/host");
    let mut rooms: Vec<(String, Vec<PathBuf>)> = Vec::new();
    for entry in std::fs::read_dir(&host).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            rooms.push((name, rust_files(&path)));
        } else if name != "mod" {
            rooms.push((name, vec![path]));
        }
    }
    let names: Vec<String> = rooms.iter().map(|(n, _)| n.clone()).collect();
    assert!(names.iter().any(|n| n == "needs") && names.iter().any(|n| n == "gate"));
    let mut edges = Vec::new();
    for (room, files) in &rooms {
        for f in files {
            let nested = f.parent() != Some(host.as_path());
            // A folder's own `mod.rs` is one level down, like its files,
            // but its `super::` is the host.
            let nested = nested && f.file_name().is_some_and(|n| n != "mod.rs");
            for named in host_rooms_named(f, &names, nested) {
                if &named != room {
                    edges.push((room.clone(), named));
                }
            }
        }
    }
    let circles: Vec<String> = edges
        .iter()
        .filter(|(a, b)| a < b && edges.contains(&(b.clone(), a.clone())))
        .map(|(a, b)| format!("{a} <-> {b}"))
        .collect();
    assert!(
        circles.is_empty(),
        "rooms of src/host/ that name each other: {circles:?}"
    );
    // The check sees the edges that are there.
    assert!(
        edges.contains(&("gate".to_string(), "needs".to_string())),
        "{edges:?}"
    );
}
