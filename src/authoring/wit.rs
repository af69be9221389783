//! `gatehouse wit`: the `gatehouse:executor@0.1.0` package guests are
//! written against, with the WASI packages it is used with, in the layout
//! `wit-bindgen`, `wasm-tools component`, `componentize-py` and `jco`
//! read: `executor.wit` (and `config.wit`, a world of the same package)
//! at the top and one file per package in `deps/`.
//! The files are the repository's `wit/`, embedded at build time.

use std::path::{Path, PathBuf};

use super::AuthoringError;
use crate::sandbox::table::{Authority, BINDINGS};

/// The package's files: a path relative to the WIT directory, and its text.
pub const FILES: [(&str, &str); 9] = [
    ("executor.wit", include_str!("../../wit/executor.wit")),
    ("config.wit", include_str!("../../wit/config.wit")),
    ("deps/cli.wit", include_str!("../../wit/deps/cli.wit")),
    ("deps/clocks.wit", include_str!("../../wit/deps/clocks.wit")),
    ("deps/config.wit", include_str!("../../wit/deps/config.wit")),
    (
        "deps/filesystem.wit",
        include_str!("../../wit/deps/filesystem.wit"),
    ),
    ("deps/io.wit", include_str!("../../wit/deps/io.wit")),
    ("deps/random.wit", include_str!("../../wit/deps/random.wit")),
    (
        "deps/sockets.wit",
        include_str!("../../wit/deps/sockets.wit"),
    ),
];

/// The text of `executor.wit`, the `gatehouse:executor` package itself.
pub fn package() -> &'static str {
    FILES[0].1
}

/// Writes every file beneath `dir` (created if needed; files already
/// there are replaced, each through a temporary file renamed into place)
/// and returns their paths. A file, or a directory on the way below
/// `dir`, that is a symbolic link is refused before anything is written.
pub fn write(dir: &Path) -> Result<Vec<PathBuf>, AuthoringError> {
    super::write::write_files(dir, FILES)
}

/// The interfaces a guest may import, one row per binding of the table:
/// what it does and which capability links it, as a Markdown table
/// (`gatehouse wit --table`, quoted by `docs/src/reference/interfaces.md`).
pub fn table_markdown() -> String {
    let mut out = String::from(
        "| interfaces | what a guest can do with them | linked |\n| --- | --- | --- |\n",
    );
    for b in BINDINGS {
        let interfaces = b
            .interfaces
            .iter()
            .map(|i| format!("`{i}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let linked = match b.authority {
            Authority::Baseline if b.filled_by.is_empty() => "always (baseline)".to_string(),
            Authority::Baseline => format!(
                "always (baseline); its contents come from {}",
                or_list(b.filled_by.iter().map(|c| c.as_str()))
            ),
            Authority::Needs(caps) => format!("with {}", or_list(caps.iter().map(|c| c.as_str()))),
            Authority::Unsupported => "never".to_string(),
        };
        out.push_str(&format!("| {interfaces} | {} | {linked} |\n", b.about));
    }
    out.push_str(
        "| any other interface (`wasi:http/*`, ...) | not provided | never: `IMPORT_NOT_GRANTED` |\n",
    );
    out
}

fn or_list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(" or ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_package_is_the_version_coverage_checks() {
        let line = format!(
            "package gatehouse:executor@{};",
            super::super::coverage::PACKAGE_VERSION
        );
        assert!(package().lines().any(|l| l == line));
    }
}
