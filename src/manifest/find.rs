//! Finding an executor's manifest by name in the executor directories.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{syntax_error, Manifest, ManifestError};

/// Finds executor manifests by name: each dir's `*/executor.toml` (one level
/// deep) and `*.toml`/`executor.toml` directly in it; returns the manifest
/// whose `name` equals `name`.
///
/// - A directory that does not exist is skipped (a configured default may not
///   have been created yet); any other read error is returned.
/// - A `*.toml` file other than `executor.toml` without a top-level string
///   `name` is not a manifest and is skipped (an executor directory may hold
///   other configuration).
/// - The manifest whose name matches is fully validated and its errors
///   returned: a broken manifest is reported, not treated as absent.
/// - A manifest that cannot say its name (not TOML, or an `executor.toml`
///   without a string `name`) may well be the one that was meant: if no
///   manifest matches, the first such file's error is returned instead of
///   `None`.
/// - Two manifests with the same name are an error
///   ([`ManifestError::DuplicateName`]), whatever directories they are in.
pub fn find_by_name(dirs: &[PathBuf], name: &str) -> Result<Option<Manifest>, ManifestError> {
    let (mut found, nameless) = scan(dirs, Some(name))?;
    match (found.pop(), nameless) {
        (Some(manifest), _) => Ok(Some(manifest)),
        (None, Some(err)) => Err(err),
        (None, None) => Ok(None),
    }
}

/// Every manifest in `dirs`, found as [`find_by_name`] finds them, each
/// fully validated, in directory order then path order.
///
/// Unlike [`find_by_name`], any manifest that fails to parse or validate is
/// an error: a listing that silently left one out would be a wrong listing.
/// Two manifests with the same name are [`ManifestError::DuplicateName`].
pub fn discover(dirs: &[PathBuf]) -> Result<Vec<Manifest>, ManifestError> {
    scan(dirs, None).map(|(found, _)| found)
}

/// The manifests of `dirs` (those named `wanted`, or all), and, when looking
/// for one name, the first error of a manifest that could not say its name.
fn scan(
    dirs: &[PathBuf],
    wanted: Option<&str>,
) -> Result<(Vec<Manifest>, Option<ManifestError>), ManifestError> {
    let mut found: Vec<(PathBuf, Manifest)> = Vec::new();
    let mut nameless: Option<ManifestError> = None;
    for dir in dirs {
        for candidate in candidates(dir)? {
            let text = match fs::read_to_string(&candidate) {
                Ok(text) => text,
                // Removed between listing and reading: it is not there.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(ManifestError::Io {
                        path: candidate,
                        source,
                    })
                }
            };
            let always_manifest = candidate.file_name().is_some_and(|n| n == "executor.toml");
            let declared = match toml::from_str::<toml::Table>(&text) {
                Ok(table) => table
                    .get("name")
                    .and_then(toml::Value::as_str)
                    .map(str::to_string),
                Err(e) => {
                    let err = syntax_error(&candidate, &text, &e);
                    if wanted.is_none() {
                        return Err(err);
                    }
                    nameless.get_or_insert(err);
                    continue;
                }
            };
            let manifest = match (declared, wanted) {
                (None, _) if !always_manifest => continue,
                (None, None) => Manifest::parse(&candidate, &text)?,
                (None, Some(_)) => {
                    // Parsing reports why it has no usable name.
                    if let Err(err) = Manifest::parse(&candidate, &text) {
                        nameless.get_or_insert(err);
                    }
                    continue;
                }
                (Some(declared), Some(wanted)) if declared != wanted => continue,
                (Some(_), _) => Manifest::parse(&candidate, &text)?,
            };
            // The same file reached twice (a directory listed twice, or via
            // a symlink) is not a duplicate.
            let identity = fs::canonicalize(&candidate).unwrap_or_else(|_| candidate.clone());
            match found.iter().find(|(_, m)| m.name == manifest.name) {
                None => found.push((identity, manifest)),
                Some((first, _)) if *first == identity => {}
                Some((_, first)) => {
                    return Err(ManifestError::DuplicateName {
                        name: manifest.name,
                        first: first.path.clone(),
                        second: candidate,
                    })
                }
            }
        }
    }
    Ok((found.into_iter().map(|(_, m)| m).collect(), nameless))
}

/// The manifest files of one directory, sorted so the search (and which
/// error is reported first) does not depend on directory listing order.
fn candidates(dir: &Path) -> Result<Vec<PathBuf>, ManifestError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(ManifestError::Io {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ManifestError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        // `is_dir`/`is_file` follow symlinks: a linked executor directory
        // counts like a real one.
        if path.is_dir() {
            let manifest = path.join("executor.toml");
            if manifest.is_file() {
                out.push(manifest);
            }
        } else if path.extension().is_some_and(|ext| ext == "toml") && path.is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}
