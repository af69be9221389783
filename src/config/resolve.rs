//! Canonicalize, then compare: the path resolver that runs before `decide`.
//!
//! A path is resolved with `realpath`; if it does not exist yet (a file
//! about to be created), its parent is resolved and the name joined back.
//! Anything else is a failure the policy reports as
//! `PATH_RESOLUTION_FAILED`. Because symlinks are resolved here, a link
//! inside a workspace that points outside it resolves to the outside path
//! and is refused by the workspace rule.

use std::path::{Component, Path, PathBuf};

use crate::policy::{PathGlob, ResolvedPath};
use crate::util::lower;

/// Makes `path` absolute against `base` and expands a leading `~/` with
/// `home`, without touching the filesystem.
pub fn absolutize(path: &str, base: &Path, home: Option<&Path>) -> Result<PathBuf, String> {
    if path.is_empty() {
        return Err("the path is empty".into());
    }
    if path == "~" || path.starts_with("~/") {
        let Some(home) = home else {
            return Err(format!(
                "`{path}` starts with `~` but no home directory is known"
            ));
        };
        return Ok(home.join(path.trim_start_matches('~').trim_start_matches('/')));
    }
    let p = Path::new(path);
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    })
}

/// Canonicalizes `path` (absolute) or says why it cannot be.
pub fn resolve_path(path: &Path) -> ResolvedPath {
    let input = path.display().to_string();
    if let Ok(real) = path.canonicalize() {
        return to_resolved(&input, &real);
    }
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return ResolvedPath::Failed {
            input,
            reason: "it has no parent directory or no file name".into(),
        };
    };
    // `a/..` must not be joined back as a name.
    if matches!(
        path.components().next_back(),
        Some(Component::ParentDir | Component::CurDir)
    ) {
        return ResolvedPath::Failed {
            input,
            reason: "it ends in `.` or `..`".into(),
        };
    }
    match parent.canonicalize() {
        Ok(real_parent) => to_resolved(&input, &real_parent.join(name)),
        Err(e) => ResolvedPath::Failed {
            input,
            reason: format!(
                "neither it nor its parent resolves ({})",
                lower(&e.to_string())
            ),
        },
    }
}

/// A path glob target and where it really is (see [`resolve_glob`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobRoot {
    /// The directory a sandbox opens for the glob, as the resolver left
    /// it: the glob itself when it names an existing directory, else its
    /// longest literal directory.
    pub dir: ResolvedPath,
    /// The rest of the glob below `dir` (`**` when the glob is the
    /// directory itself).
    pub rest: String,
    /// The glob with `dir` canonical and its wildcards kept (the glob
    /// itself, canonical, when it names a directory): what grants are
    /// matched against. `None` when `dir` does not resolve.
    pub canonical: Option<String>,
}

/// Resolves the literal directory of the path glob `glob` (symlinks
/// followed) and joins the rest back: `WS/out/**` with `WS/out ->
/// private` is `WS/private/**`, and a grant on `WS/out/**` does not
/// cover it.
pub fn resolve_glob(glob: &PathGlob) -> GlobRoot {
    let whole_dir = glob.is_literal() && Path::new(glob.as_str()).is_dir();
    let (dir, rest) = if whole_dir {
        (glob.as_str().to_string(), "**".to_string())
    } else {
        let dir = glob.literal_dir();
        let skip = dir.split('/').filter(|s| !s.is_empty()).count();
        let rest: Vec<&str> = glob
            .as_str()
            .split('/')
            .filter(|s| !s.is_empty())
            .skip(skip)
            .collect();
        (dir, rest.join("/"))
    };
    let resolved = resolve_path(Path::new(&dir));
    let canonical = match &resolved {
        ResolvedPath::Resolved(d) if whole_dir => Some(d.clone()),
        ResolvedPath::Resolved(d) => Some(format!("{}/{rest}", d.trim_end_matches('/'))),
        ResolvedPath::Failed { .. } => None,
    };
    GlobRoot {
        dir: resolved,
        rest,
        canonical,
    }
}

/// Turns the `{"raw": PATH}` form of a `workspace` request's path into
/// what the resolver makes of it (`{"resolved": …}` or `{"failed": …}`), so
/// that `decide` only ever sees resolved paths. A relative `PATH` is taken
/// against `base`, `~/` against `home`. A request without a raw path is
/// left as it is; a `resolved` path is passed on untouched (the core
/// refuses one that is not absolute and normalized).
pub fn resolve_raw_path(request: &mut serde_json::Value, base: &Path, home: Option<&Path>) {
    let Some(path) = request.get_mut("path") else {
        return;
    };
    let Some(raw) = path
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.get("raw"))
        .and_then(|r| r.as_str())
    else {
        return;
    };
    let resolved = match absolutize(raw, base, home) {
        Ok(abs) => resolve_path(&abs),
        Err(reason) => ResolvedPath::Failed {
            input: raw.to_string(),
            reason,
        },
    };
    if let Ok(v) = serde_json::to_value(resolved) {
        *path = v;
    }
}

/// Canonicalizes the longest existing ancestor of `path` and joins the
/// rest: for paths that must be protected even before they exist (a guest
/// must not be able to create the state directory it will later be trusted
/// from).
pub fn resolve_ancestor(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

fn to_resolved(input: &str, real: &Path) -> ResolvedPath {
    match real.to_str() {
        Some(s) => ResolvedPath::Resolved(s.to_string()),
        None => ResolvedPath::Failed {
            input: input.to_string(),
            reason: "the resolved path is not valid utf-8".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_existing_new_and_missing_paths() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        assert_eq!(
            resolve_path(dir.path()),
            ResolvedPath::Resolved(real.display().to_string())
        );
        assert_eq!(
            resolve_path(&dir.path().join("new.txt")),
            ResolvedPath::Resolved(real.join("new.txt").display().to_string())
        );
        assert!(matches!(
            resolve_path(&dir.path().join("no/such/file")),
            ResolvedPath::Failed { .. }
        ));
        assert!(matches!(
            resolve_path(&dir.path().join("new/..")),
            ResolvedPath::Failed { .. }
        ));
    }

    #[test]
    fn symlinks_resolve_to_their_target() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let got = resolve_path(&dir.path().join("link").join("x"));
        let want = outside.path().canonicalize().unwrap().join("x");
        assert_eq!(got, ResolvedPath::Resolved(want.display().to_string()));
    }

    #[test]
    fn globs_resolve_their_literal_directory_and_keep_their_wildcards() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        let r = real.display().to_string();
        std::fs::create_dir(real.join("private")).unwrap();
        std::os::unix::fs::symlink("private", real.join("out")).unwrap();
        let g = |s: &str| resolve_glob(&PathGlob::parse(s).unwrap());
        let out = g(&format!("{r}/out/**"));
        assert_eq!(out.dir, ResolvedPath::Resolved(format!("{r}/private")));
        assert_eq!(out.rest, "**");
        assert_eq!(out.canonical, Some(format!("{r}/private/**")));
        assert_eq!(
            g(&format!("{r}/out/*.md")).canonical,
            Some(format!("{r}/private/*.md"))
        );
        let whole = g(&format!("{r}/out"));
        assert_eq!(whole.rest, "**");
        assert_eq!(whole.canonical, Some(format!("{r}/private")));
        assert_eq!(
            g(&format!("{r}/out/a.txt")).canonical,
            Some(format!("{r}/private/a.txt"))
        );
        assert_eq!(g(&format!("{r}/none/x/**")).canonical, None);
    }

    #[test]
    fn absolutize_expands_home_and_base() {
        let home = Path::new("/home/a");
        assert_eq!(
            absolutize("~/n", Path::new("/b"), Some(home)).unwrap(),
            PathBuf::from("/home/a/n")
        );
        assert_eq!(
            absolutize("x/y", Path::new("/b"), None).unwrap(),
            PathBuf::from("/b/x/y")
        );
        assert_eq!(
            absolutize("/z", Path::new("/b"), None).unwrap(),
            PathBuf::from("/z")
        );
        assert!(absolutize("~/n", Path::new("/b"), None).is_err());
    }
}
