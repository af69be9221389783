//! Issue 28, point 5: the book (`docs/`) and the README against the binary.
//!
//! - Each generated reference page holds what the binary prints today:
//!   `docs/src/reference/capabilities.md` (`gatehouse policy registry` and
//!   `gatehouse policy table`), `docs/src/reference/deny-codes.md`
//!   (`gatehouse policy codes`) and `docs/src/reference/interfaces.md`
//!   (`gatehouse wit --table`, verbatim).
//! - The README shows the demo's real output (`gatehouse demo`), up to the
//!   temporary directory, the login name and the Landlock ABI, which differ
//!   from one machine and one run to the next.
//! - Every test the book or the README names as `FILE::FUNCTION` (a module
//!   of `tests/it`, then a function of it) exists.
//! - The README links only inside the repository, and no relative link of
//!   the docs is broken.
//!
//! A generated part sits between `<!-- generated: NAME -->` and
//! `<!-- end generated: NAME -->`; the prose around it is written by hand.
//! After a change to the binary's output, regenerate with
//!
//! ```sh
//! GATEHOUSE_BLESS=1 cargo test --test it docs::
//! ```
//!
//! which rewrites the generated parts (a mismatch without it fails and
//! prints the expected text).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::Env;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn page(rel: &str) -> PathBuf {
    Path::new(ROOT).join(rel)
}

fn blessing() -> bool {
    std::env::var("GATEHOUSE_BLESS").is_ok_and(|v| v == "1")
}

/// The text between the markers of `name` in `text`, and where it starts.
fn generated<'a>(text: &'a str, name: &str, file: &Path) -> (usize, &'a str) {
    let open = format!("<!-- generated: {name} -->\n");
    let close = format!("<!-- end generated: {name} -->");
    let start = text
        .find(&open)
        .unwrap_or_else(|| panic!("{} has no `{}` marker", file.display(), open.trim()))
        + open.len();
    let len = text[start..]
        .find(&close)
        .unwrap_or_else(|| panic!("{} has no `{close}` marker", file.display()));
    (start, &text[start..start + len])
}

/// Asserts that the generated part `name` of `rel` is `want` (compared
/// after `normalize`), or rewrites it with `want` under GATEHOUSE_BLESS=1.
#[track_caller]
fn check_generated(rel: &str, name: &str, want: &str, normalize: &dyn Fn(&str) -> String) {
    let file = page(rel);
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    let (start, have) = generated(&text, name, &file);
    if normalize(have) == normalize(want) {
        return;
    }
    if blessing() {
        let rewritten = format!("{}{}{}", &text[..start], want, &text[start + have.len()..]);
        std::fs::write(&file, rewritten).unwrap();
        eprintln!("rewrote `{name}` in {rel}");
        return;
    }
    panic!(
        "{rel}: the part generated from `{name}` is not what the binary prints today; \
         rerun with GATEHOUSE_BLESS=1 to rewrite it. Expected:\n{want}"
    );
}

fn same(text: &str) -> String {
    text.to_string()
}

/// One table cell: a `|` would end it.
fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => s.replace('|', "\\|"),
        Value::Bool(true) => "yes".into(),
        Value::Bool(false) => "no".into(),
        other => other.to_string(),
    }
}

/// The output of `gatehouse ARGS` in a sealed environment (exit 0).
fn binary(args: &[&str]) -> String {
    let env = Env::new();
    let run = env.run(args);
    run.expect(0);
    run.stdout
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `gatehouse policy registry` as a Markdown table, one row per capability.
fn registry_table(registry: &str) -> String {
    let mut out = String::from(
        "| capability | critical | approval | target | what it binds |\n\
         | --- | --- | --- | --- | --- |\n",
    );
    for c in json_lines(registry) {
        out.push_str(&format!(
            "| `{}` | {} | `{}` | `{}` | {} |\n",
            cell(&c["name"]),
            cell(&c["critical"]),
            cell(&c["default_approval"]),
            cell(&c["target_kind"]),
            cell(&c["bound_to"]),
        ));
    }
    out
}

/// `gatehouse policy table` as a Markdown table: a row per capability, a
/// column per level, in the order the binary prints them.
fn matrix_table(matrix: &str) -> String {
    let lines = json_lines(matrix);
    let mut levels: Vec<String> = Vec::new();
    let mut capabilities: Vec<String> = Vec::new();
    for l in &lines {
        let level = cell(&l["level"]);
        let capability = cell(&l["capability"]);
        if !levels.contains(&level) {
            levels.push(level);
        }
        if !capabilities.contains(&capability) {
            capabilities.push(capability);
        }
    }
    let mut out = format!("| capability | {} |\n", levels.join(" | "));
    out.push_str(&format!("| --- |{}\n", " --- |".repeat(levels.len())));
    for c in &capabilities {
        out.push_str(&format!("| `{c}` |"));
        for level in &levels {
            let outcome = lines
                .iter()
                .find(|l| cell(&l["capability"]) == *c && cell(&l["level"]) == *level)
                .map(|l| cell(&l["outcome"]))
                .unwrap_or_else(|| panic!("no outcome for {c} at {level}"));
            out.push_str(&format!(" {outcome} |"));
        }
        out.push('\n');
    }
    out
}

/// `gatehouse policy codes` as a Markdown table, one row per code.
fn codes_table(codes: &str) -> String {
    let mut out = String::from("| code | family | meaning |\n| --- | --- | --- |\n");
    for c in json_lines(codes) {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            cell(&c["code"]),
            cell(&c["family"]),
            cell(&c["meaning"]),
        ));
    }
    out
}

#[test]
fn the_capabilities_page_is_the_registry_and_the_matrix_the_binary_prints() {
    let registry = binary(&["policy", "registry"]);
    assert_eq!(json_lines(&registry).len(), 13, "{registry}");
    check_generated(
        "docs/src/reference/capabilities.md",
        "gatehouse policy registry",
        &registry_table(&registry),
        &same,
    );
    let matrix = binary(&["policy", "table"]);
    check_generated(
        "docs/src/reference/capabilities.md",
        "gatehouse policy table",
        &matrix_table(&matrix),
        &same,
    );
}

#[test]
fn the_deny_codes_page_is_every_code_the_binary_prints() {
    let codes = binary(&["policy", "codes"]);
    check_generated(
        "docs/src/reference/deny-codes.md",
        "gatehouse policy codes",
        &codes_table(&codes),
        &same,
    );
}

/// The interface table is quoted verbatim (moved here from the README's
/// check in `authoring`).
#[test]
fn the_interfaces_page_quotes_the_generated_interface_table() {
    let table = binary(&["wit", "--table"]);
    // One row per binding of the table, the header and the rest.
    assert_eq!(
        table.lines().count(),
        2 + gatehouse::sandbox::table::BINDINGS.len() + 1
    );
    check_generated(
        "docs/src/reference/interfaces.md",
        "gatehouse wit --table",
        &table,
        &same,
    );
}

/// The demo's output with what differs between machines and runs replaced:
/// its temporary directory, the login name and the Landlock ABI.
fn demo_normalized(text: &str) -> String {
    let mut out = text.to_string();
    if let Some(ws) = text
        .lines()
        .find_map(|l| l.strip_prefix("workspace "))
        .and_then(|w| w.trim().strip_suffix("/workspace"))
    {
        out = out.replace(ws, "$TMP");
    }
    if let Some(login) = text
        .lines()
        .find_map(|l| l.split("= cli/").nth(1))
        .and_then(|rest| rest.split(')').next())
    {
        out = out.replace(&format!("cli/{login}"), "cli/$LOGIN");
    }
    let mut normalized = String::new();
    for line in out.lines() {
        match line.find("landlock abi ") {
            Some(at) => {
                let rest = &line[at + "landlock abi ".len()..];
                let digits = rest.chars().take_while(char::is_ascii_digit).count();
                normalized.push_str(&line[..at]);
                normalized.push_str("landlock abi $N");
                normalized.push_str(&rest[digits..]);
            }
            None => normalized.push_str(line),
        }
        normalized.push('\n');
    }
    normalized
}

#[test]
fn the_readme_shows_the_demo_as_it_runs() {
    // The demo runs guests (built once by `setup.sh`).
    crate::support::guests::guest("run-tool");
    // As a person named alice runs it (the login is normalized anyway, so
    // a blessed README reads as a person's run, not the tests').
    let env = Env::new();
    let out = env
        .command()
        .args(["demo"])
        .env("USER", "alice")
        .env("LOGNAME", "alice")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let demo = String::from_utf8(out.stdout).unwrap();
    check_generated(
        "README.md",
        "gatehouse demo",
        &format!("```text\n{demo}```\n"),
        &demo_normalized,
    );
}

/// Every `.md` file under `dir`.
fn markdown(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            markdown(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// The `a::b` spans of `text` (in backticks, two snake-case segments).
fn two_segment_paths(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for (i, span) in text.split('`').enumerate() {
        if i % 2 == 0 {
            continue;
        }
        let Some((module, function)) = span.split_once("::") else {
            continue;
        };
        let snake = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        };
        if snake(module) && snake(function) {
            found.push((module.to_string(), function.to_string()));
        }
    }
    found
}

/// A guarantee's proof is a test that exists: every `FILE::FUNCTION` the
/// book and the README name, where FILE is a module of `tests/it`, is a
/// function of `tests/it/FILE.rs`.
#[test]
fn every_test_the_docs_name_exists() {
    let mut files = vec![page("README.md"), page("BENCHMARKS.md")];
    markdown(&page("docs/src"), &mut files);
    let mut named = 0;
    let mut missing = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (module, function) in two_segment_paths(&text) {
            let source = page(&format!("tests/it/{module}.rs"));
            let Ok(code) = std::fs::read_to_string(&source) else {
                continue;
            };
            named += 1;
            if !code.contains(&format!("fn {function}(")) {
                missing.push(format!("{}: {module}::{function}", file.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "tests named but not found:\n{missing:#?}"
    );
    // The security chapter names its proofs; a check that finds none
    // checks nothing.
    assert!(named > 40, "only {named} tests named in the docs");
}

/// Issue 28, point 5: the README stays a first screen and a map, at most
/// 150 lines (the rest is the book's).
#[test]
fn the_readme_is_at_most_150_lines() {
    let text = std::fs::read_to_string(page("README.md")).unwrap();
    let lines = text.lines().count();
    assert!(lines <= 150, "README.md has {lines} lines");
}

/// The README links only inside the repository (issue 28: no links that
/// point outside it), and every relative link of the README, the book,
/// BENCHMARKS.md and CHANGELOG.md reaches a file that exists.
#[test]
fn the_docs_link_only_to_files_of_the_repository() {
    let mut files = vec![
        page("README.md"),
        page("BENCHMARKS.md"),
        page("CHANGELOG.md"),
    ];
    markdown(&page("docs/src"), &mut files);
    let mut bad = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (at, _) in text.match_indices("](") {
            let rest = &text[at + 2..];
            let Some(end) = rest.find(')') else { continue };
            let link = &rest[..end];
            if link.contains("://") {
                if file.ends_with("README.md") {
                    bad.push(format!("{}: {link} points outside", file.display()));
                }
                continue;
            }
            let path = link.split('#').next().unwrap_or_default();
            if path.is_empty() {
                continue;
            }
            let target = file.parent().unwrap().join(path);
            if !target.exists() {
                bad.push(format!("{}: {link} reaches nothing", file.display()));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}
