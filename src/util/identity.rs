//! What identifies a file's contents without reading them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long ago a file must have last changed for its identity to be
/// trusted to change with its contents: well past any file system's
/// timestamp granularity (Linux stamps files from a coarse clock).
pub(crate) const SETTLED: Duration = Duration::from_secs(2);

/// A file's device, inode, size, mtime and ctime. A file replaced (a
/// rename) has another inode; one rewritten in place, even with the same
/// size and its mtime set back, a new ctime, which only the kernel's
/// clock sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileIdentity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileIdentity {
    pub(crate) fn of(m: &std::fs::Metadata) -> FileIdentity {
        use std::os::unix::fs::MetadataExt;
        FileIdentity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// `DEV-INO`: a name for records of this file.
    pub(crate) fn file_name(&self) -> String {
        format!("{}-{}", self.dev, self.ino)
    }

    /// The identity as one line of a record.
    pub(crate) fn line(&self) -> String {
        format!(
            "{} {} {} {}.{:09} {}.{:09}",
            self.dev, self.ino, self.size, self.mtime.0, self.mtime.1, self.ctime.0, self.ctime.1
        )
    }

    /// Whether the file last changed at least [`SETTLED`] before `now`.
    pub(crate) fn settled(&self, now: SystemTime) -> bool {
        let Ok(now) = now.duration_since(UNIX_EPOCH) else {
            return false;
        };
        let limit = now.saturating_sub(SETTLED);
        let at = |(s, ns): (i64, i64)| {
            u64::try_from(s)
                .ok()
                .zip(u32::try_from(ns).ok())
                .map(|(s, ns)| Duration::new(s, ns))
        };
        [self.mtime, self.ctime]
            .into_iter()
            .all(|t| at(t).is_some_and(|t| t <= limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn identity(path: &Path) -> FileIdentity {
        FileIdentity::of(&std::fs::metadata(path).unwrap())
    }

    /// Sets `path`'s mtime `secs` seconds back (its ctime stays now).
    fn age_mtime(path: &Path, secs: u64) {
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(secs))
            .unwrap();
    }

    #[test]
    fn a_settled_file_is_judged_by_both_its_times() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, "x").unwrap();
        let id = identity(&f);
        let now = SystemTime::now();
        assert!(!id.settled(now), "a file written now is not settled");
        assert!(id.settled(now + SETTLED + Duration::from_millis(10)));
        // An mtime set back does not settle a file its ctime says is new.
        age_mtime(&f, 3600);
        assert!(!identity(&f).settled(SystemTime::now()));
    }
}
