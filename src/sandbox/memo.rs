//! What the compiled-component cache remembers of the files it hashed, so
//! that a new process does not read and hash them again.
//!
//! A one-shot `gatehouse run` of a language executor used to read and hash
//! its 24 MB component to find the cache entry, then read and hash the
//! entry's 36 MB, then copy it into executable memory: ≈ 0.2 s, most of
//! the run (BENCHMARKS.md). Now the cache records, beside a digest, the
//! identity the file had when it was hashed: device, inode, size, mtime and
//! ctime. While the file keeps that identity its digest is known without
//! reading it. A file rewritten in place, even with its mtime set back,
//! has a new ctime, which only the kernel's clock sets; whoever can set
//! that clock or write the state directory could as well write a compiled
//! entry of their own, so a record widens no one's reach.
//!
//! Linux stamps files from a coarse clock, so a file changed within the
//! same tick as it was hashed could keep its identity. As git does with
//! its index, an identity is recorded only for a file whose mtime and
//! ctime are [`SETTLED`] in the past; a younger file is simply hashed
//! again next time.
//!
//! Every record is an optimisation: one that cannot be read, written or
//! parsed is as if it were not there.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub(crate) use crate::util::identity::FileIdentity;

/// The record of a component file's digest: one per file, named by its
/// device and inode in the cache directory.
fn digest_record(cache_dir: &Path, id: &FileIdentity) -> PathBuf {
    cache_dir.join(format!("{}.digest", id.file_name()))
}

/// The record that a cache entry's bytes matched its `.sha256` sidecar.
fn verified_record(entry: &Path) -> PathBuf {
    entry.with_extension("verified")
}

/// The sha256 recorded for the file of identity `id` in `cache_dir`, if
/// the record is of that identity.
pub(crate) fn recorded_digest(cache_dir: &Path, id: &FileIdentity) -> Option<String> {
    let text = std::fs::read_to_string(digest_record(cache_dir, id)).ok()?;
    let (line, digest) = text.trim_end().split_once('\n')?;
    // Its own check: the sandbox layer may not name the manifest's.
    let valid = digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit());
    (line == id.line() && valid).then(|| digest.to_string())
}

/// Records that the file of identity `id` has sha256 `digest` (when it is
/// settled).
pub(crate) fn record_digest(cache_dir: &Path, id: &FileIdentity, digest: &str) {
    if id.settled(SystemTime::now()) && std::fs::create_dir_all(cache_dir).is_ok() {
        write_whole(
            &digest_record(cache_dir, id),
            format!("{}\n{digest}\n", id.line()).as_bytes(),
        );
    }
}

/// Whether the cache `entry` of identity `id` was found to match its
/// sidecar digest since it last changed.
pub(crate) fn is_verified(entry: &Path, id: &FileIdentity) -> bool {
    std::fs::read_to_string(verified_record(entry)).is_ok_and(|t| t.trim_end() == id.line())
}

/// Records that the cache `entry` of identity `id` matched its sidecar
/// digest (when it is settled).
pub(crate) fn record_verified(entry: &Path, id: &FileIdentity) {
    if id.settled(SystemTime::now()) {
        write_whole(
            &verified_record(entry),
            format!("{}\n", id.line()).as_bytes(),
        );
    }
}

/// Writes `bytes` to `path` whole or not at all: into a file of this
/// process's own (its name carries the pid and a counter, so two
/// processes never write the same one), renamed over `path`. Whether it
/// was written.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> bool {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let tmp = path.with_extension(format!(
        "tmp-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, path).is_ok() {
        return true;
    }
    let _ = std::fs::remove_file(&tmp);
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn identity(path: &Path) -> FileIdentity {
        FileIdentity::of(&std::fs::metadata(path).unwrap())
    }

    #[test]
    fn a_digest_is_recorded_only_for_a_settled_file_and_read_only_for_its_identity() {
        let dir = tempfile::tempdir().unwrap();
        let (cache, f) = (dir.path().join("cache"), dir.path().join("f"));
        std::fs::create_dir(&cache).unwrap();
        std::fs::write(&f, "abc").unwrap();
        let id = identity(&f);
        let digest = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        // Too young: nothing is written.
        record_digest(&cache, &id, digest);
        assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 0);
        assert_eq!(recorded_digest(&cache, &id), None);
        // A settled identity (its record written as `record_digest` does).
        write_whole(
            &digest_record(&cache, &id),
            format!("{}\n{digest}\n", id.line()).as_bytes(),
        );
        assert_eq!(recorded_digest(&cache, &id).as_deref(), Some(digest));
        // The same file rewritten with the same size: a new ctime, so the
        // record is not its own.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&f, "abd").unwrap();
        let changed = identity(&f);
        assert_ne!(changed, id);
        assert_eq!(recorded_digest(&cache, &changed), None);
        // A record that is not a digest is ignored.
        write_whole(
            &digest_record(&cache, &id),
            format!("{}\nnot-a-digest\n", id.line()).as_bytes(),
        );
        assert_eq!(recorded_digest(&cache, &id), None);
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [format!("{}.digest", id.file_name())]);
    }

    #[test]
    fn an_entry_is_verified_only_for_the_identity_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let entry = dir.path().join("d-e.cwasm");
        std::fs::write(&entry, "code").unwrap();
        let id = identity(&entry);
        assert!(!is_verified(&entry, &id));
        record_verified(&entry, &id);
        assert!(!is_verified(&entry, &id), "a young entry is not recorded");
        write_whole(
            &verified_record(&entry),
            format!("{}\n", id.line()).as_bytes(),
        );
        assert!(is_verified(&entry, &id));
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&entry, "evil").unwrap();
        assert!(!is_verified(&entry, &identity(&entry)));
    }
}
