//! The suite's guests: embedded in the binary at build time (when they
//! were built, see `build.rs`), or read from a directory (`--guests DIR`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/conformance_guests.rs"));
}

/// Why the guests cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum GuestsError {
    #[error("`{0}` is not a directory")]
    NotADirectory(PathBuf),
    #[error("no conformance guests in `{0}`: run `bash setup.sh` in the source tree, then pass `--guests guests/target` (or rebuild gatehouse after it, which embeds them)")]
    NoneInDir(PathBuf),
    #[error("this gatehouse was built without its conformance guests: run `bash setup.sh` in the source tree and rebuild, or pass `--guests DIR` (the source tree's `guests/target`)")]
    NotEmbedded,
}

/// The guest files by target and file name.
#[derive(Debug, Clone, Default)]
pub struct GuestSet {
    files: BTreeMap<(String, String), Vec<u8>>,
    /// Where they came from, for the report.
    pub source: String,
}

impl GuestSet {
    /// The guests embedded in this binary.
    pub fn embedded() -> Result<GuestSet, GuestsError> {
        let files: BTreeMap<(String, String), Vec<u8>> = embedded::EMBEDDED
            .iter()
            .map(|(t, f, b)| ((t.to_string(), f.to_string()), b.to_vec()))
            .collect();
        if !files.contains_key(&("wasm32-wasip2".to_string(), "cf_attack.wasm".to_string())) {
            return Err(GuestsError::NotEmbedded);
        }
        Ok(GuestSet {
            files,
            source: "embedded".to_string(),
        })
    }

    /// The guests found under `dir`: `<dir>/<target>/release/<file>`,
    /// `<dir>/<target>/<file>`, or (the C guest) `<dir>/../c/target/<file>`.
    pub fn from_dir(dir: &Path) -> Result<GuestSet, GuestsError> {
        if !dir.is_dir() {
            return Err(GuestsError::NotADirectory(dir.to_path_buf()));
        }
        let mut files = BTreeMap::new();
        let cases = super::cases();
        let needed = cases
            .iter()
            .map(|c| (c.world.target(), c.guest))
            .chain(std::iter::once((
                "wasm32-wasip2",
                super::cases::SCAN_RESIDUE,
            )));
        for (target, guest) in needed {
            let key = (target.to_string(), guest.to_string());
            if files.contains_key(&key) {
                continue;
            }
            let candidates = [
                dir.join(target).join("release").join(guest),
                dir.join(target).join(guest),
                dir.join("../c/target").join(guest),
            ];
            if let Some(bytes) = candidates.iter().find_map(|p| std::fs::read(p).ok()) {
                files.insert(key, bytes);
            }
        }
        if files.is_empty() {
            return Err(GuestsError::NoneInDir(dir.to_path_buf()));
        }
        Ok(GuestSet {
            files,
            source: dir.display().to_string(),
        })
    }

    /// The bytes of `file` built for `target`.
    pub fn get(&self, target: &str, file: &str) -> Option<&[u8]> {
        self.files
            .get(&(target.to_string(), file.to_string()))
            .map(Vec::as_slice)
    }
}
