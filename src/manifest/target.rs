//! Declared targets as a manifest writes them, and their resolution for a
//! turn.
//!
//! The policy only knows absolute globs. A manifest is written once and used
//! from many workspaces, so its path globs may also be home-relative
//! (`~/notes/**`) or workspace-relative (`out/**`); those are resolved per
//! turn, against the turn's canonical workspace and home directory.

use std::path::Path;

use crate::policy::{PathGlob, TargetError, TargetKind, TargetPattern};

/// Where a declared path glob is rooted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Base {
    /// Written as `/…`: already absolute.
    Absolute,
    /// Written as `~` or `~/…`.
    Home,
    /// Written as `…` or `./…`.
    Workspace,
}

/// A path glob split into its base and the part below it (no leading `/`;
/// empty for the base itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathTarget<'a> {
    pub base: Base,
    pub rest: &'a str,
}

/// Splits and validates a declared path glob. The error is the reason only;
/// the caller adds the file and field.
pub(crate) fn parse_path_target(value: &str) -> Result<PathTarget<'_>, String> {
    let bad = |why: &str| format!("malformed path glob `{value}`: {why}");
    let target = if let Some(rest) = value.strip_prefix('/') {
        PathTarget {
            base: Base::Absolute,
            rest,
        }
    } else if value == "~" {
        PathTarget {
            base: Base::Home,
            rest: "",
        }
    } else if let Some(rest) = value.strip_prefix("~/") {
        PathTarget {
            base: Base::Home,
            rest,
        }
    } else if value.starts_with('~') {
        // `~user` would need a user database lookup, and naming another
        // user's home is never what an executor should declare.
        return Err(bad("only `~/` is supported, not `~user`"));
    } else {
        let rest = value.strip_prefix("./").unwrap_or(value);
        if rest.is_empty() {
            return Err(bad("it names no path; use `**` for the whole workspace"));
        }
        PathTarget {
            base: Base::Workspace,
            rest,
        }
    };
    // Checked here, not only by `PathGlob::parse`, so the message is about
    // what was written rather than the rooted form below.
    if target.rest.split('/').any(|seg| seg == "..") {
        return Err(bad("`..` segments are not allowed"));
    }
    // Validate the glob syntax as if it were rooted: the base is a plain
    // directory, so any problem is in the written part.
    PathGlob::parse(&format!("/{}", target.rest)).map_err(|e| match e {
        TargetError::BadGlob { why, .. } => bad(why),
        other => other.to_string(),
    })?;
    Ok(target)
}

/// Validates a declared target of a non-path kind with the policy's parser.
pub(crate) fn check_other_target(kind: TargetKind, value: &str) -> Result<(), String> {
    TargetPattern::parse(kind, value)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Resolves a declared path glob against `workspace` or `home` into the
/// absolute glob the policy checks, re-validated.
pub(crate) fn resolve_path_target(
    value: &str,
    workspace: &Path,
    home: Option<&Path>,
) -> Result<String, String> {
    let target = parse_path_target(value)?;
    let base = match target.base {
        Base::Absolute => return Ok(value.to_string()),
        Base::Home => match home {
            Some(home) => base_str("home directory", home)?,
            None => {
                return Err(format!(
                    "cannot resolve `{value}`: no home directory is known"
                ))
            }
        },
        Base::Workspace => base_str("workspace", workspace)?,
    };
    let trimmed = base.trim_end_matches('/');
    let resolved = match (trimmed.is_empty(), target.rest.is_empty()) {
        (true, true) => "/".to_string(),
        (_, true) => trimmed.to_string(),
        (_, false) => format!("{trimmed}/{}", target.rest),
    };
    PathGlob::parse(&resolved)
        .map_err(|e| format!("cannot resolve `{value}` to a valid absolute glob: {e}"))?;
    Ok(resolved)
}

/// The base directory as a string usable as the literal prefix of a glob.
fn base_str<'a>(what: &str, dir: &'a Path) -> Result<&'a str, String> {
    let Some(s) = dir.to_str() else {
        return Err(format!("the {what} `{}` is not valid UTF-8", dir.display()));
    };
    if !s.starts_with('/') {
        return Err(format!("the {what} `{s}` is not an absolute path"));
    }
    // A `*` or `?` in the directory's own name would become a wildcard and
    // widen the grant to sibling directories; refuse instead of escaping
    // (the glob language has no escape).
    if s.contains(['*', '?']) {
        return Err(format!(
            "the {what} `{s}` contains `*` or `?`, so its paths cannot be written as a glob"
        ));
    }
    Ok(s)
}
