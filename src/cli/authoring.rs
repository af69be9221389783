//! The commands for people who write executors: `inspect`, `wit`, `new`,
//! `manifest schema`, and the component half of `manifest check`.

use std::path::Path;

use serde_json::json;

use gatehouse::authoring::coverage::{self, Coverage, ImportStatus};
use gatehouse::authoring::inspect::{self, Inspection, Needs, WasmKind};
use gatehouse::authoring::template::{self, Kind};
use gatehouse::authoring::{schema, wit, AuthoringError};
use gatehouse::manifest::Manifest;

use super::args::{Lang, NewArgs, WitArgs};
use super::{out, out_json, CmdResult, Context, Exit, Failure};

impl From<AuthoringError> for Failure {
    fn from(e: AuthoringError) -> Failure {
        Failure::of(&e, e.is_invalid_input())
    }
}

pub fn inspect(ctx: &Context, path: &Path) -> CmdResult {
    let i = inspect::inspect(path)?;
    if ctx.json {
        out_json(&i);
        return Ok(Exit::Ok);
    }
    out(format!(
        "{} `{}`{}",
        match i.kind {
            WasmKind::Component => "component",
            WasmKind::CoreModule => "core module",
        },
        i.path.display(),
        match (i.kind, i.command) {
            (WasmKind::CoreModule, _) => {
                " (wasi preview 1: run as a command through the preview 1 adapter)"
            }
            (WasmKind::Component, true) => ", a command (exports `wasi:cli/run`)",
            (WasmKind::Component, false) => "",
        }
    ));
    for f in &i.wasi_functions {
        out(format!("wasi     {f}"));
    }
    for imp in &i.imports {
        let needs = match imp.needs {
            Needs::Unsupported => {
                "not provided by gatehouse: refused with IMPORT_NOT_GRANTED".to_string()
            }
            _ => format!("needs {}", imp.needs.describe()),
        };
        out(format!(
            "import   {}  {needs}{}",
            imp.name,
            functions(&imp.functions)
        ));
    }
    for exp in &i.exports {
        out(format!(
            "export   {}{}",
            exp.name,
            functions(&exp.functions)
        ));
    }
    Ok(Exit::Ok)
}

fn functions(names: &[String]) -> String {
    if names.is_empty() {
        String::new()
    } else {
        format!(" ({})", names.join(", "))
    }
}

pub fn wit_cmd(ctx: &Context, args: WitArgs) -> CmdResult {
    if args.table {
        for line in wit::table_markdown().lines() {
            out(line);
        }
        return Ok(Exit::Ok);
    }
    match args.out {
        None => {
            // The package as it is: its text is printed exactly.
            raw(wit::package());
            Ok(Exit::Ok)
        }
        Some(dir) => {
            let files = wit::write(&dir)?;
            if ctx.json {
                out_json(&json!({"dir": dir, "files": files}));
            } else {
                for f in files {
                    out(format!("wrote {}", f.display()));
                }
            }
            Ok(Exit::Ok)
        }
    }
}

pub fn new(ctx: &Context, args: NewArgs) -> CmdResult {
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| Path::new(&args.name).to_path_buf());
    let kind = match (args.lang, args.command, args.http) {
        (Lang::Rust, true, _) => Kind::Command,
        (Lang::Rust, false, true) => Kind::Http,
        (Lang::Rust, false, false) => Kind::Executor,
        (Lang::Python, false, false) => Kind::Python,
        (Lang::Js, false, false) => Kind::Js,
        (lang, command, _) => {
            return Err(Failure::invalid(format!(
                "`{}` is a rust template: it cannot be combined with `--lang {}`",
                if command { "--command" } else { "--http" },
                if lang == Lang::Js { "js" } else { "python" }
            )))
        }
    };
    let files = template::create(&args.name, kind, &dir)?;
    if ctx.json {
        out_json(&json!({"name": args.name, "dir": dir, "files": files}));
    } else {
        out(format!(
            "created executor `{}` in `{}` ({} files); next, in that directory:",
            args.name,
            dir.display(),
            files.len()
        ));
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap_or_default();
        for line in readme.lines() {
            out(format!("  {line}"));
        }
    }
    Ok(Exit::Ok)
}

pub fn manifest_schema() -> CmdResult {
    let text = serde_json::to_string_pretty(&schema::manifest_schema())
        .map_err(|e| Failure::error(format!("cannot encode the schema: {e}")))?;
    raw(&format!("{text}\n"));
    Ok(Exit::Ok)
}

/// Writes `text` to stdout as it is (a closed pipe is not an error).
fn raw(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// The component's inspection and coverage, for `manifest check`.
pub fn component_check(m: &Manifest) -> Result<(Inspection, Coverage), Failure> {
    let i = inspect::inspect(&m.component)?;
    let c = coverage::check(m, &i);
    Ok((i, c))
}

/// The lines `manifest check` prints about the component.
pub fn coverage_lines(i: &Inspection, c: &Coverage) -> Vec<String> {
    let mut lines = vec![format!(
        "component `{}`: {} imports, {} of them need a capability",
        i.path.display(),
        c.imports.len(),
        c.imports
            .iter()
            .filter(|x| x.status != ImportStatus::Baseline)
            .count()
    )];
    for x in &c.imports {
        lines.push(match (x.status, x.covered_by) {
            (ImportStatus::Baseline, _) => format!("import   {}: baseline", x.import),
            (ImportStatus::Covered, Some(cap)) => {
                format!("import   {}: covered by `{cap}`", x.import)
            }
            _ => format!("import   {}: not covered", x.import),
        });
    }
    for x in c.uncovered() {
        if let Some(p) = &x.problem {
            lines.push(format!("error: {p}"));
        }
    }
    for e in &c.capabilities {
        lines.push(format!("capability {}", e.line()));
    }
    lines
}
