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

/// Checks a `mount`: the absolute, normalized name of a directory in the
/// guest (`/`, `/data`, `/data/in`): no empty, `.` or `..` segment, no
/// trailing `/`, nothing a guest path could not spell.
pub(crate) fn check_mount(mount: &str) -> Result<(), String> {
    let bad = |why: &str| format!("invalid mount `{}`: {why}", crate::util::printable(mount));
    if !mount.starts_with('/') {
        return Err(bad("it must be an absolute guest path such as `/data`"));
    }
    if mount == "/" {
        return Ok(());
    }
    if mount.ends_with('/') {
        return Err(bad("it must not end with `/`"));
    }
    if mount.chars().any(|c| c.is_control() || c == '\\') {
        return Err(bad("it holds a control character or `\\`"));
    }
    for seg in mount[1..].split('/') {
        match seg {
            "" => return Err(bad("it holds an empty segment (`//`)")),
            "." | ".." => return Err(bad("`.` and `..` segments are not allowed")),
            _ => {}
        }
    }
    Ok(())
}

/// The directory a declared path glob preopens, as written: its base and
/// the glob's longest literal directory below it.
fn written_dir(value: &str) -> Option<(Base, String)> {
    let target = parse_path_target(value).ok()?;
    let glob = PathGlob::parse(&format!("/{}", target.rest)).ok()?;
    Some((target.base, glob.literal_dir()))
}

/// Capabilities that preopen one directory share one preopen, so they
/// must agree on its `mount`; two directories may not share a `mount`
/// (nested mounts, `/` and `/data`, are fine: the guest's longest prefix
/// wins). On error: the index of the capability at fault and why.
pub(crate) fn check_mounts_agree(
    capabilities: &[super::ManifestCapability],
) -> Result<(), (usize, String)> {
    let mut seen: Vec<((Base, String), Option<&str>, &str)> = Vec::new();
    for (i, cap) in capabilities.iter().enumerate() {
        let Some(target) = cap.target.as_deref() else {
            continue;
        };
        if cap.capability.target_kind() != TargetKind::PathGlob {
            continue;
        }
        let Some(dir) = written_dir(target) else {
            continue;
        };
        let mount = cap.mount.as_deref();
        for (other_dir, other_mount, other_target) in &seen {
            if *other_dir == dir && *other_mount != mount {
                return Err((
                    i,
                    format!(
                        "`{target}` and `{other_target}` preopen the same directory, so they must agree on `mount` ({} and {})",
                        show_mount(mount),
                        show_mount(*other_mount)
                    ),
                ));
            }
            if *other_dir != dir && mount.is_some() && *other_mount == mount {
                return Err((
                    i,
                    format!(
                        "`{target}` and `{other_target}` preopen two directories, which may not share the mount {}",
                        show_mount(mount)
                    ),
                ));
            }
        }
        seen.push((dir, mount, target));
    }
    Ok(())
}

/// A preopen's name as the guest resolves it: wasi-libc matches a path
/// against preopen names with their leading `/` stripped, so `/out`, `out`
/// and `./out` are one name, and `/` and `.` are the workspace's `.`.
pub fn guest_name(name: &str) -> String {
    let trimmed = name.trim_start_matches('/').trim_end_matches('/');
    let trimmed = trimmed.strip_prefix("./").unwrap_or(trimmed);
    if trimmed.is_empty() || trimmed == "." {
        ".".to_string()
    } else {
        trimmed.to_string()
    }
}

/// Two directories may not have one name in the guest, as the guest
/// resolves names ([`guest_name`]): a `mount` of `/out` and the
/// workspace's own `out` would be one preopen to wasi-libc, and a write
/// meant for one would land in the other (security round 2, item 5).
/// On error: the index of the capability at fault and why.
pub(crate) fn check_guest_names_distinct(
    capabilities: &[super::ManifestCapability],
) -> Result<(), (usize, String)> {
    let mut seen: Vec<((Base, String), String, &str)> = Vec::new();
    for (i, cap) in capabilities.iter().enumerate() {
        let Some(target) = cap.target.as_deref() else {
            continue;
        };
        if cap.capability.target_kind() != TargetKind::PathGlob {
            continue;
        }
        let Some(dir) = written_dir(target) else {
            continue;
        };
        // Without a mount, a directory has a guest name only in the
        // workspace (elsewhere the gate asks for a mount).
        let name = match (&cap.mount, dir.0) {
            (Some(m), _) => guest_name(m),
            (None, Base::Workspace) => guest_name(&dir.1),
            (None, _) => continue,
        };
        if let Some((_, _, other)) = seen.iter().find(|(d, n, _)| *n == name && *d != dir) {
            return Err((
                i,
                format!(
                    "`{target}` and `{other}` preopen two directories that the guest would see under one name, `{name}` (wasi-libc strips a mount's leading `/`)"
                ),
            ));
        }
        seen.push((dir, name, target));
    }
    Ok(())
}

fn show_mount(mount: Option<&str>) -> String {
    match mount {
        Some(m) => format!("`{m}`"),
        None => "none".to_string(),
    }
}

/// Whether the directory a resolved (absolute) glob preopens lies in the
/// workspace; the error says to give the capability a `mount`.
pub(crate) fn check_inside_workspace(resolved: &str, workspace: &Path) -> Result<(), String> {
    let Ok(glob) = PathGlob::parse(resolved) else {
        return Ok(());
    };
    // A literal target may itself be the directory (`~`, `/srv/docs`).
    let dir = if glob.is_literal() {
        glob.as_str().to_string()
    } else {
        glob.literal_dir()
    };
    let ws = workspace.to_str().unwrap_or_default().trim_end_matches('/');
    let inside = ws.is_empty()
        || dir == ws
        || dir
            .strip_prefix(ws)
            .is_some_and(|rest| rest.starts_with('/'));
    if inside {
        Ok(())
    } else {
        Err(format!(
            "`{dir}` lies outside the workspace `{ws}`: name it in the guest with `mount` (for example `mount = \"/data\"`)"
        ))
    }
}
