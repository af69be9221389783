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
/// it. Exec, undo and the terminal do not reach the configuration: its
/// values are passed in by the host. The sandbox reaches it, and the
/// stores (`state::Stores`, and the memory store's trait), only where its
/// units open their runtimes, once, when the host opens (`Unit::open`);
/// a run's values (the engine settings, `on_degraded`, the limits) are
/// passed in by the host.
const LAYERS: [(&str, &[&str]); 17] = [
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
        &[
            "util",
            "policy",
            "config",
            "state::memory",
            "state::Stores",
            "exec",
            "undo",
        ],
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
        "daemon",
        &["util", "host", "config", "policy", "serve", "state"],
    ),
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
            "daemon",
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

/// Issue 44, item 4: functions a person can hold in mind. None longer than
/// this, counted from the `fn` line to its closing brace...
const FN_MOST_LINES: usize = 120;
/// ...and at most `FN_LONG_ALLOWED` longer than this.
const FN_LONG_LINES: usize = 80;
const FN_LONG_ALLOWED: usize = 10;

/// Files whose length is their content, not tangled logic: the p1
/// rewriter (one pass over the instruction set) and the tables of cases.
const FN_EXEMPT_FILES: [&str; 3] = ["sandbox/p1/shift.rs", "conformance/cases.rs", "tier3.rs"];

/// One function: `path::name` (the path from `src/`) and its length in lines.
#[derive(Debug)]
struct FnLength {
    key: String,
    lines: usize,
}

/// Is `b` a byte of an identifier?
fn ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The source with its comments, string and character literals blanked to
/// spaces (newlines kept, so line numbers hold): what is left is code whose
/// braces can be counted.
fn blank_literals(text: &str) -> Vec<u8> {
    let src = text.as_bytes();
    let mut out = src.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut out[from..to.min(src.len())] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    let mut i = 0;
    while i < src.len() {
        let rest = &src[i..];
        let after_ident = i > 0 && ident_byte(src[i - 1]);
        let end = if rest.starts_with(b"//") {
            i + rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len())
        } else if rest.starts_with(b"/*") {
            // Block comments nest.
            let (mut depth, mut j) = (0, i);
            while j < src.len() {
                if src[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if src[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            j
        } else if let Some(open) = raw_string_open(rest).filter(|_| !after_ident) {
            // r"..", r#".."#, br#".."#: no escapes, ends at `"` and the hashes.
            let hashes = rest[..open].iter().filter(|&&b| b == b'#').count();
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let body = &src[i + open..];
            i + open
                + body
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(body.len(), |p| p + close.len())
        } else if rest[0] == b'"' || (rest.starts_with(b"b\"") && !after_ident) {
            let mut j = i + if rest[0] == b'b' { 2 } else { 1 };
            while j < src.len() && src[j] != b'"' {
                j += if src[j] == b'\\' { 2 } else { 1 };
            }
            j + 1
        } else if rest[0] == b'\'' {
            char_literal_len(rest).map_or(i + 1, |n| i + n)
        } else {
            i += 1;
            continue;
        };
        blank(&mut out, i, end);
        i = end;
    }
    out
}

/// The length of the opening of a raw string (`r"`, `r##"`, `br#"`) at the
/// start of `rest`, if there is one.
fn raw_string_open(rest: &[u8]) -> Option<usize> {
    let after_b = rest.strip_prefix(b"b").unwrap_or(rest);
    let after_r = after_b.strip_prefix(b"r")?;
    let hashes = after_r.iter().take_while(|&&b| b == b'#').count();
    (after_r.get(hashes) == Some(&b'"')).then_some(rest.len() - after_r.len() + hashes + 1)
}

/// The length of the character literal at the start of `rest` (`'x'`,
/// `'\n'`, `'\u{1F600}'`, `'é'`), or None for a lifetime (`'a`).
fn char_literal_len(rest: &[u8]) -> Option<usize> {
    if rest.get(1) == Some(&b'\\') {
        // The escaped character may itself be a quote: the closing one is
        // after it.
        return rest
            .get(3..)?
            .iter()
            .position(|&b| b == b'\'')
            .map(|p| p + 4);
    }
    let width = match rest.get(1)? {
        b if *b < 0x80 => 1,
        b if *b >= 0xF0 => 4,
        b if *b >= 0xE0 => 3,
        _ => 2,
    };
    (rest.get(1 + width) == Some(&b'\'')).then_some(width + 2)
}

/// The index of the brace that closes the one at `open`.
fn closing_brace(code: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, &b) in code.iter().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    code.len().saturating_sub(1)
}

/// Every function with a body in one source (its code blanked by
/// `blank_literals`), outside items marked `#[cfg(test)]`: its name and
/// its length in lines.
fn function_lengths_in(code: &[u8]) -> Vec<(String, usize)> {
    let line_of = |at: usize| code[..at].iter().filter(|&&b| b == b'\n').count();
    let find = |needle: &[u8], from: usize| {
        code[from..]
            .windows(needle.len())
            .position(|w| w == needle)
            .map(|p| p + from)
    };
    // The bodies of the test-only items.
    let mut skipped = Vec::new();
    let mut from = 0;
    while let Some(at) = find(b"#[cfg(test)]", from) {
        from = at + 1;
        let next = code[at..].iter().position(|&b| b == b'{' || b == b';');
        if let Some(p) = next.map(|p| p + at).filter(|&p| code[p] == b'{') {
            skipped.push(at..=closing_brace(code, p));
        }
    }
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = find(b"fn", from) {
        from = at + 2;
        let keyword = (at == 0 || !ident_byte(code[at - 1]))
            && code.get(at + 2).is_some_and(|b| b.is_ascii_whitespace());
        if !keyword || skipped.iter().any(|r| r.contains(&at)) {
            continue;
        }
        let name_at = at
            + 2
            + code[at + 2..]
                .iter()
                .take_while(|b| b.is_ascii_whitespace())
                .count();
        let name: String = code[name_at..]
            .iter()
            .take_while(|&&b| ident_byte(b))
            .map(|&b| b as char)
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body is the first brace outside parentheses and brackets; a
        // `;` first means a declaration without one.
        let mut depth = 0i32;
        let mut body = None;
        for (i, &b) in code.iter().enumerate().skip(name_at) {
            match b {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b'{' if depth <= 0 => {
                    body = Some(i);
                    break;
                }
                b';' if depth <= 0 => break,
                _ => {}
            }
        }
        if let Some(open) = body {
            let lines = line_of(closing_brace(code, open)) - line_of(at) + 1;
            out.push((name, lines));
        }
    }
    out
}

/// Every counted function of `src/`, longest first.
fn function_lengths() -> Vec<FnLength> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    for file in rust_files(&src) {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if file.file_name().is_some_and(|n| n == "tests.rs")
            || FN_EXEMPT_FILES.contains(&rel.as_str())
        {
            continue;
        }
        let code = blank_literals(&std::fs::read_to_string(&file).unwrap());
        for (name, lines) in function_lengths_in(&code) {
            out.push(FnLength {
                key: format!("{rel}::{name}"),
                lines,
            });
        }
    }
    out.sort_by(|a, b| b.lines.cmp(&a.lines).then(a.key.cmp(&b.key)));
    out
}

fn table(fns: &[&FnLength]) -> String {
    fns.iter()
        .map(|f| format!("{:>5}  {}", f.lines, f.key))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn functions_are_short_enough_to_hold_in_mind() {
    let fns = function_lengths();
    let long: Vec<&FnLength> = fns.iter().filter(|f| f.lines > FN_LONG_LINES).collect();
    let mut problems = Vec::new();
    let too_long: Vec<&FnLength> = long
        .iter()
        .copied()
        .filter(|f| f.lines > FN_MOST_LINES)
        .collect();
    if !too_long.is_empty() {
        problems.push(format!(
            "functions over {FN_MOST_LINES} lines:\n{}",
            table(&too_long)
        ));
    }
    if long.len() > FN_LONG_ALLOWED {
        problems.push(format!(
            "{} functions over {FN_LONG_LINES} lines (at most {FN_LONG_ALLOWED}):\n{}",
            long.len(),
            table(&long)
        ));
    }
    println!("functions over {FN_LONG_LINES} lines:\n{}", table(&long));
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn the_function_scanner_skips_literals_comments_and_tests() {
    let source = r####"
fn one() {
    let s = "}}}{";
    let r = r#"}"# ;
    let c = '}';
    let open = '{';
    let e = '\'';
    let u = '\u{7D}';
    // }
    /* } /* } */ } */
    let l: &'static str = b"{";
}
fn two<'a>(x: &'a [u8; 2]) -> impl Fn() + 'a {
    move || {
        let _ = x;
    }
}
trait T {
    fn declared(&self);
}
#[cfg(test)]
mod tests {
    fn hidden() {
    }
}
fn three() { }
"####;
    let code = blank_literals(source);
    assert_eq!(code.len(), source.len());
    let found = function_lengths_in(&code);
    assert_eq!(
        found,
        vec![
            ("one".to_string(), 11),
            ("two".to_string(), 5),
            ("three".to_string(), 1)
        ]
    );
}

/// Issue 44: no file of `src/serve/` over 600 lines.
#[test]
fn no_file_of_serve_is_over_600_lines() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/serve");
    let long: Vec<String> = rust_files(&dir)
        .iter()
        .map(|f| (f, std::fs::read_to_string(f).unwrap().lines().count()))
        .filter(|(_, n)| *n > 600)
        .map(|(f, n)| format!("{}: {n} lines", f.display()))
        .collect();
    assert!(long.is_empty(), "{}", long.join("\n"));
}
