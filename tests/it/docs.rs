//! Issue 28, point 5: the book (`docs/`) and the README against the binary.
//!
//! - Each generated reference page holds what the binary prints today:
//!   `docs/src/reference/capabilities.md` (`gatehouse policy registry` and
//!   `gatehouse policy table`), `docs/src/reference/deny-codes.md`
//!   (`gatehouse policy codes`) and `docs/src/reference/interfaces.md`
//!   (`gatehouse wit --table`, verbatim), and `docs/src/reference/cli.md`
//!   (every command's `--help`, verbatim; its hand-written examples use
//!   only commands and flags that exist).
//! - Nothing counts the capabilities or the levels by hand, and the help's
//!   lists of critical and always-class capabilities and of environment
//!   variables are the registry's and the source's.
//! - The README shows the demo's real output (`gatehouse demo`), up to the
//!   temporary directory, the login name and the Landlock ABI, which differ
//!   from one machine and one run to the next.
//! - Every test the book or the README names as `FILE::FUNCTION` (a module
//!   of `tests/it`, then a function of it) exists.
//! - The layout page (`docs/src/internals/layout.md`) names every folder
//!   and file directly under `src/`, and every path it names exists.
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
    assert_eq!(
        json_lines(&registry).len(),
        gatehouse::policy::REGISTRY.len(),
        "{registry}"
    );
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

/// The subcommands a `--help` lists under `Commands:`, in its order; `help`
/// is left out (it prints the others' help again).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        // A command's name is indented by two spaces; clap indents the
        // continuation of a long line further.
        .filter_map(|l| l.strip_prefix("  "))
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Every command of the binary, depth first in the order `--help` lists
/// them, with its `--help`: `gatehouse` itself first (path `[]`).
fn every_help() -> Vec<(Vec<String>, String)> {
    fn walk(env: &Env, path: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
        let mut args = path.clone();
        args.push("--help".into());
        let help = env.run(&args);
        help.expect(0);
        let children = subcommands(&help.stdout);
        out.push((path.clone(), help.stdout));
        for child in children {
            let mut next = path.clone();
            next.push(child);
            walk(env, next, out);
        }
    }
    let env = Env::new();
    let mut out = Vec::new();
    walk(&env, Vec::new(), &mut out);
    out
}

/// The reference part of `docs/src/reference/cli.md`: a heading and the
/// verbatim `--help` of every command.
fn cli_reference(helps: &[(Vec<String>, String)]) -> String {
    let mut out = String::new();
    for (path, help) in helps {
        let name = std::iter::once("gatehouse")
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        // Under the page's "Every command": `gatehouse` and its commands
        // are sections, a subcommand a subsection of its command.
        let level = if path.len() <= 1 { "###" } else { "####" };
        out.push_str(&format!("\n{level} `{name}`\n\n```text\n{help}```\n"));
    }
    out.push('\n');
    out
}

/// Issue 44, item 5: the command-line reference is every command's
/// `--help` as the binary prints it, so a flag or a text that changes
/// changes the page (bless to rewrite it).
#[test]
fn the_cli_reference_is_every_commands_help() {
    let helps = every_help();
    // The walk found the nested commands, not only the top level.
    for nested in [
        &["policy", "check"][..],
        &["history", "prune"],
        &["agent", "test"],
    ] {
        assert!(
            helps.iter().any(|(path, _)| path == nested),
            "the walk missed {nested:?}"
        );
    }
    check_generated(
        "docs/src/reference/cli.md",
        "gatehouse --help",
        &cli_reference(&helps),
        &same,
    );
}

/// The hand-written examples of the command-line page use commands and
/// flags that exist: each line `gatehouse A B … --flag …` of its `sh`
/// blocks names a command path the binary has, and every `--flag` of the
/// line is in that command's `--help`.
#[test]
fn the_cli_pages_examples_use_commands_and_flags_that_exist() {
    let helps = every_help();
    let text = std::fs::read_to_string(page("docs/src/reference/cli.md")).unwrap();
    // Only the hand-written part: the generated one is the helps.
    let hand = text.split("<!-- generated:").next().unwrap_or_default();
    let mut bad = Vec::new();
    let mut checked = 0;
    for line in hand.replace("\\\n", " ").lines() {
        let Some(rest) = line.strip_prefix("gatehouse ") else {
            continue;
        };
        // An example's comment is not part of its command line.
        let command = rest.split(" #").next().unwrap_or_default();
        let mut path: Vec<String> = Vec::new();
        for word in command.split_whitespace() {
            let mut longer = path.clone();
            longer.push(word.to_string());
            if helps.iter().any(|(p, _)| *p == longer) {
                path = longer;
            } else {
                break;
            }
        }
        let Some((_, help)) = helps.iter().find(|(p, _)| *p == path) else {
            bad.push(format!("{line}: no such command"));
            continue;
        };
        if path.is_empty() {
            bad.push(format!("{line}: names no command"));
        }
        checked += 1;
        for word in command.split_whitespace() {
            let flag = word
                .trim_start_matches('[')
                .trim_end_matches(']')
                .split('=')
                .next()
                .unwrap_or_default();
            if !flag.starts_with("--") {
                continue;
            }
            let listed = help
                .lines()
                .any(|l| l.trim_start().split([' ', ',']).any(|w| w == flag));
            if !listed {
                bad.push(format!(
                    "{line}: `gatehouse {}` has no {flag}",
                    path.join(" ")
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
    assert!(checked > 20, "only {checked} examples checked");
}

/// Every `.EXT` file under `dir`, except build output.
fn files_ending(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if !p.ends_with("target") && !p.ends_with("node_modules") {
                files_ending(&p, ext, out);
            }
        } else if p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
}

/// A count written as a word or as digits, as prose writes it.
fn count(word: &str) -> Option<usize> {
    const WORDS: [&str; 21] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ];
    let word = word.to_ascii_lowercase();
    word.parse()
        .ok()
        .or_else(|| WORDS.iter().position(|w| *w == word))
}

/// Issue 44, item 5: a count of the capabilities or of the levels written
/// by hand drifts (the help and the book said 12 capabilities when the
/// registry had 13). Wherever the README, the book or the source (its
/// help texts and doc comments) says "N capabilities" or "N levels", N is
/// what the binary prints; the CHANGELOG is history and keeps its counts.
#[test]
fn every_count_of_capabilities_or_levels_is_the_registrys() {
    let registry = json_lines(&binary(&["policy", "registry"]));
    let mut levels: Vec<String> = Vec::new();
    for cell in json_lines(&binary(&["policy", "table"])) {
        let level = cell["level"].to_string();
        if !levels.contains(&level) {
            levels.push(level);
        }
    }
    let mut files = vec![page("README.md")];
    markdown(&page("docs/src"), &mut files);
    files_ending(&page("src"), "rs", &mut files);
    files_ending(&page("wit"), "wit", &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let words: Vec<&str> = text
            .split(|c: char| c.is_whitespace() || "`*_(),.;:".contains(c))
            .filter(|w| !w.is_empty())
            .collect();
        for pair in words.windows(2) {
            let want = match pair[1] {
                "capabilities" => registry.len(),
                "levels" => levels.len(),
                _ => continue,
            };
            if let Some(n) = count(pair[0]) {
                if n != want {
                    wrong.push(format!("{}: {} {}", file.display(), pair[0], pair[1]));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} capabilities and {} levels, but:\n{wrong:#?}",
        registry.len(),
        levels.len()
    );
}

/// The help's lists of capabilities are the registry's: the critical ones
/// that `--on-degraded refuse-critical` refuses, and the always-class ones
/// that no grant may remember.
#[test]
fn the_help_lists_the_critical_and_always_class_capabilities_of_the_registry() {
    let registry = json_lines(&binary(&["policy", "registry"]));
    let names = |keep: &dyn Fn(&Value) -> bool| -> Vec<String> {
        registry
            .iter()
            .filter(|c| keep(c))
            .map(|c| cell(&c["name"]))
            .collect()
    };
    let critical = names(&|c| c["critical"] == Value::Bool(true));
    let always = names(&|c| c["default_approval"] == "always");
    let (last, rest) = critical.split_last().unwrap();
    let critical = format!("needing {} or {last})", rest.join(", "));
    let always = always.join(", ");
    for (args, phrase) in [
        (&["run", "--help"][..], critical),
        (
            &["grants", "add", "--help"],
            format!("always-class ones ({always})"),
        ),
        (
            &["approvals", "allow", "--help"],
            format!("always-class capability: {always})"),
        ),
    ] {
        let help = binary(args);
        assert!(
            help.contains(&phrase),
            "`gatehouse {}` does not say {phrase:?}:\n{help}",
            args.join(" ")
        );
    }
}

/// The environment variables the binary reads are those `gatehouse
/// --help` explains: every `"GATEHOUSE_…"` name in the source, but the
/// tier-3 suite's (a secret a case asks for, not one gatehouse reads).
#[test]
fn the_help_names_every_environment_variable_the_binary_reads() {
    let help = binary(&["--help"]);
    let mut files = Vec::new();
    files_ending(&page("src"), "rs", &mut files);
    let mut missing = Vec::new();
    let mut found = 0;
    for file in files.iter().filter(|f| !f.ends_with("tier3.rs")) {
        let text = std::fs::read_to_string(file).unwrap();
        for (at, _) in text.match_indices("\"GATEHOUSE_") {
            let name: String = text[at + 1..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                .collect();
            // The prefix itself (the names no executor may read) is no
            // variable.
            if name.ends_with('_') {
                continue;
            }
            found += 1;
            if !help
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{name} ")))
            {
                missing.push(format!("{}: {name}", file.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not in `gatehouse --help`: {missing:#?}"
    );
    assert!(found >= 5, "only {found} variables found");
}

/// The entries of the layout page's tree: the first word of each line that
/// starts in the first column, with the text of its line and of the
/// indented lines that continue it.
fn layout_entries(text: &str) -> Vec<(String, String)> {
    let block = text
        .split("```")
        .nth(1)
        .unwrap_or_else(|| panic!("the layout page has no tree"));
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in block.lines() {
        if line.trim().is_empty() {
            continue;
        }
        match entries.last_mut() {
            Some((_, words)) if line.starts_with(' ') => {
                words.push(' ');
                words.push_str(line);
            }
            _ => {
                let (head, words) = line.split_once(' ').unwrap_or((line, ""));
                entries.push((head.to_string(), words.to_string()));
            }
        }
    }
    entries
}

/// Issue 44, item 5: the layout page cannot drift from the tree. Every
/// folder and file directly under `src/` is an entry of the page; every
/// entry exists; every `src/…` path the page names exists; and a file
/// (`gate.rs`) or folder (`needs/`) that an entry of a `src/` folder names
/// is in that folder. A module moved, added or removed fails this test
/// until the page says so.
#[test]
fn the_layout_page_names_every_part_of_src() {
    let rel = "docs/src/internals/layout.md";
    let text = std::fs::read_to_string(page(rel)).unwrap();
    let entries = layout_entries(&text);
    let mut wrong = Vec::new();
    for e in std::fs::read_dir(page("src")).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        let slash = if e.path().is_dir() { "/" } else { "" };
        let head = format!("src/{name}{slash}");
        if !entries.iter().any(|(h, _)| *h == head) {
            wrong.push(format!("{head} is not on the page"));
        }
    }
    for (head, _) in &entries {
        if !page(head).exists() {
            wrong.push(format!("the entry {head} does not exist"));
        }
    }
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| c.is_whitespace() || "`(),;:".contains(c))
            .map(|w| w.trim_end_matches(['.', '…']).to_string())
            .filter(|w| !w.is_empty())
            .collect()
    };
    for word in words(&text) {
        if word.starts_with("src/") && !page(&word).exists() {
            wrong.push(format!("{word} does not exist"));
        }
    }
    let mut inner = 0;
    for (head, text) in entries
        .iter()
        .filter(|(h, _)| h.starts_with("src/") && h.ends_with('/'))
    {
        for word in words(text) {
            let name = word.trim_end_matches('/');
            let plain = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c));
            if plain && (word.ends_with(".rs") || word.ends_with('/')) {
                inner += 1;
                if !page(head).join(&word).exists() {
                    wrong.push(format!("{head}: {word} is not in it"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{rel} and the tree differ:\n{wrong:#?}");
    assert!(inner > 30, "only {inner} files named inside the folders");
}

/// The recipe for adding a capability (issue 44, items 1 and 5) names
/// only files that exist, and every file of `src/`, `wit/` and
/// `tests/it/` that names its worked example (`config:read`); none of
/// them is in `src/host/`, which iterates over the units and names none.
#[test]
fn the_capability_recipe_names_files_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(page("docs/src/internals/adding-a-capability.md")).unwrap();
    let table = text
        .split("<!-- recipe -->")
        .nth(1)
        .and_then(|t| t.split("<!-- /recipe -->").next())
        .expect("the page has its recipe between <!-- recipe --> markers");
    let files: Vec<&str> = table
        .lines()
        .filter_map(|l| l.split('`').nth(1).filter(|_| l.starts_with("| ")))
        .filter(|f| f.contains('/'))
        .collect();
    assert!(files.len() >= 10, "{files:?}");
    for f in &files {
        assert!(
            root.join(f).is_file(),
            "the recipe names `{f}`, which does not exist"
        );
    }
    for layer in ["src/policy/", "src/sandbox/", "wit/", "tests/it/"] {
        assert!(
            files.iter().any(|f| f.starts_with(layer)),
            "the recipe names no file of `{layer}`"
        );
    }
    // Every file that names the example, by its registry variant, its
    // name, its interface or its unit's types.
    let marks = [
        "ConfigRead",
        "config:read",
        "wasi:config",
        "ConfigPart",
        "bindings::config",
    ];
    let mut naming = Vec::new();
    for dir in ["src", "wit", "tests/it"] {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                if rel == "tests/it/docs.rs" {
                    continue; // this test names the marks
                }
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                if marks.iter().any(|m| text.contains(m)) {
                    naming.push(rel);
                }
            }
        }
    }
    naming.sort();
    assert!(naming.len() >= 8, "{naming:?}");
    for f in &naming {
        assert!(
            files.contains(&f.as_str()),
            "`{f}` names `config:read` but the recipe does not list it"
        );
        assert!(
            !f.starts_with("src/host/"),
            "`{f}` names `config:read`: the host should name no unit"
        );
    }
}
