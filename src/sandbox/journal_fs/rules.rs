//! The filesystem layer's rules: which host path a guest may read, write,
//! link or rename to (the granted globs, the protected paths, the nested
//! roots, the preopens a link may not leave), the backup of a file before
//! its first destructive change within the journal cap, and the journal
//! and audit records. Plain functions of the paths they are given: no
//! engine, no store, no descriptor (the proxy in the parent module finds
//! the host paths and asks here).

use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::sync::Arc;

use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::{FsError, FsResult};

use crate::policy::snapshot::{ProtectedKind, ProtectedPath, WorkspaceMode, WorkspaceRoot};
use crate::policy::{is_within, DenyCode, PathGlob};
use crate::sandbox::plan::Plan;
use crate::sandbox::services::{AuditSink, RunDecision, RunRequest, RunVerdict};
use crate::undo::fs::record_left;
use crate::undo::journal::{store_blob_file, StoredBlob};
use crate::undo::{Operation, TurnJournal};

/// What the layer enforces and where it journals, for one run.
pub struct FsLayer {
    journal: Option<TurnJournal>,
    write_globs: Vec<PathGlob>,
    read_globs: Vec<PathGlob>,
    protected: Vec<ProtectedPath>,
    /// The actor's roots strictly inside a read-write preopen.
    nested_roots: Vec<WorkspaceRoot>,
    /// Where refusals are recorded.
    audit: Arc<dyn AuditSink>,
    /// Paths whose bytes from before the turn are saved, or that hold the
    /// turn's own bytes: no further backup is needed.
    pub(super) owned: HashSet<String>,
    /// Every path a journaled operation named.
    touched: BTreeSet<String>,
    /// The refusals of this run: deny code and reason (the first
    /// [`MAX_RECORDED_REFUSALS`]).
    pub denials: Vec<(DenyCode, String)>,
    /// The preopened directories: no link made in one may lead out of it.
    preopens: Vec<String>,
    /// Refusals past [`MAX_RECORDED_REFUSALS`]: counted, not recorded one
    /// by one.
    unrecorded: u64,
    /// The most bytes the turn may back up (`[limits] journal_mib`).
    journal_cap: u64,
    /// The bytes backed up so far.
    journaled_bytes: u64,
}

/// A run's filesystem refusals recorded one by one in its audit; past it,
/// one line at the end says how many more there were (a guest refused in
/// a loop cannot grow the audit without bound).
pub const MAX_RECORDED_REFUSALS: usize = 1000;

impl FsLayer {
    /// The layer for `plan`, journaling into `journal` (none: enforce only).
    pub fn new(plan: &Plan, journal: Option<TurnJournal>, audit: Arc<dyn AuditSink>) -> FsLayer {
        if let Some(j) = &journal {
            // Undo acts only beneath the roots of the turn (issue 12, item 4).
            j.fs_scope(plan.fs_scope());
        }
        FsLayer {
            preopens: plan
                .preopens()
                .iter()
                .filter_map(|p| p.host.to_str().map(str::to_string))
                .collect(),
            journal,
            write_globs: plan.write_globs().to_vec(),
            read_globs: plan.read_globs().to_vec(),
            protected: plan.protected().to_vec(),
            nested_roots: plan.nested_roots().to_vec(),
            audit,
            owned: HashSet::new(),
            touched: BTreeSet::new(),
            denials: Vec::new(),
            unrecorded: 0,
            journal_cap: plan.limits().journal_bytes,
            journaled_bytes: 0,
        }
    }

    /// Records the state every touched path was left in
    /// (`<turn>/fs-left.jsonl`). Call once the guest is done.
    pub fn finish(&mut self) -> std::io::Result<()> {
        if self.unrecorded > 0 {
            self.audit.decision(RunDecision {
                request: RunRequest::Filesystem {
                    operation: "more-refusals".into(),
                    path: None,
                },
                decision: RunVerdict::Deny {
                    code: None,
                    reason: format!(
                        "{} more refusals of the filesystem layer were not recorded one by one (at most {MAX_RECORDED_REFUSALS} are)",
                        self.unrecorded
                    ),
                },
                command: None,
                response: None,
                provider: None,
            });
            self.unrecorded = 0;
        }
        let Some(j) = &self.journal else {
            return Ok(());
        };
        if !j.is_open() {
            // Nothing was journaled: the turn has no directory.
            return Ok(());
        }
        let r = record_left(j.dir(), &self.touched);
        self.touched.clear();
        r
    }

    fn deny(&mut self, code: DenyCode, operation: &str, path: &str, reason: String) -> FsError {
        // The refusal stands even if the audit cannot keep it.
        if self.denials.len() < MAX_RECORDED_REFUSALS {
            // The path is the guest's: kept bounded, in the reason too
            // (which names it), so a long path is cut and hashed once.
            let shown = crate::policy::bounded(path);
            let reason = if shown.len() < path.len() {
                reason.replace(path, &shown)
            } else {
                reason
            };
            let reason = crate::policy::bounded(&reason).into_owned();
            self.audit.decision(RunDecision {
                request: RunRequest::Filesystem {
                    operation: operation.to_string(),
                    path: Some(shown.into_owned()),
                },
                decision: RunVerdict::Deny {
                    code: Some(code),
                    reason: reason.clone(),
                },
                command: None,
                response: None,
                provider: None,
            });
            self.denials.push((code, reason));
        } else {
            self.unrecorded += 1;
        }
        match code {
            DenyCode::TargetMismatch => ErrorCode::NotPermitted.into(),
            DenyCode::LimitJournal => ErrorCode::Quota.into(),
            _ => ErrorCode::Access.into(),
        }
    }

    /// Refuses a mutation of `path` outside the write globs or touching a
    /// protected path (the path itself, below it, or above it).
    pub(super) fn check_write(&mut self, operation: &str, path: &str) -> FsResult<()> {
        if let Some(p) = self
            .protected
            .iter()
            .find(|p| is_within(path, &p.path) || is_within(&p.path, path))
        {
            let code = p.kind.write_code();
            let reason = format!(
                "`{path}` is host configuration (`{}`); no executor may write it",
                p.path
            );
            return Err(self.deny(code, operation, path, reason));
        }
        // The workspace rule below the preopened directory: the most
        // specific root decides, and a path that holds a read-only root
        // (a rename of its parent would carry it away) is refused too.
        let most_specific = self
            .nested_roots
            .iter()
            .filter(|r| is_within(path, &r.path))
            .max_by_key(|r| r.path.len());
        let read_only = match most_specific {
            Some(r) if r.mode == WorkspaceMode::ReadOnly => Some(r.path.clone()),
            _ => self
                .nested_roots
                .iter()
                .find(|r| r.mode == WorkspaceMode::ReadOnly && is_within(&r.path, path))
                .map(|r| r.path.clone()),
        };
        if let Some(root) = read_only {
            let reason = format!("`{path}` is in or holds the read-only root `{root}`");
            return Err(self.deny(DenyCode::WorkspaceReadOnly, operation, path, reason));
        }
        if !self.write_globs.iter().any(|g| g.matches(path)) {
            let reason = format!("`{path}` matches none of the granted `fs:write` globs");
            return Err(self.deny(DenyCode::TargetMismatch, operation, path, reason));
        }
        Ok(())
    }

    /// Refuses a symbolic link at `link` to `target` unless the target,
    /// read from the link's directory, stays within a preopened directory
    /// that holds the link: never absolute, its `..` only leading, and
    /// none above that directory (issue 12, item 4; security round 3,
    /// item 7 for the leading `..`).
    pub(super) fn check_link_target(&mut self, link: &str, target: &str) -> FsResult<()> {
        if self.link_may_be_at(link, target) {
            return Ok(());
        }
        let reason =
            format!("a link to `{target}` at `{link}` leads out of its preopened directory");
        Err(self.deny(DenyCode::TargetMismatch, "symlink-at", link, reason))
    }

    /// Whether a link to `target` at `link` would stay within a preopened
    /// directory that holds it.
    fn link_may_be_at(&self, link: &str, target: &str) -> bool {
        let dir = parent_of(link);
        self.preopens
            .iter()
            .any(|root| link_stays_within(dir, target, root))
    }

    /// Refuses a rename (or a hard link, `operation`) of `from` to `to`
    /// that would carry a symbolic link to where its target leads out of
    /// the preopened directories (security round 3, item 7): `symlink-at`
    /// checks a target from where the link is made; a link moved, or a
    /// directory holding one, reads the same `..` from another place. A
    /// link is checked from its new directory; a directory's links are
    /// found by a walk of at most [`MAX_MOVED_ENTRIES`] entries, unless the
    /// move cannot lead any link that stays within its preopened
    /// directory out of it (see [`move_keeps_links_within`]).
    pub(super) fn check_moved_links(
        &mut self,
        operation: &str,
        from: &str,
        to: &str,
    ) -> FsResult<()> {
        let Ok(meta) = std::fs::symlink_metadata(from) else {
            // Nothing there: the call fails on its own.
            return Ok(());
        };
        if from == to || parent_of(from) == parent_of(to) {
            // The same directory: every `..` leads where it led.
            return Ok(());
        }
        if meta.file_type().is_symlink() {
            // Lossy: only `/` and `.` matter, and they are ASCII.
            let target = std::fs::read_link(from)?;
            let target = target.to_string_lossy();
            if self.link_may_be_at(to, &target) {
                return Ok(());
            }
            let reason = format!(
                "moving the link `{from}` (to `{target}`) to `{to}` would lead it out of its preopened directory"
            );
            return Err(self.deny(DenyCode::TargetMismatch, operation, from, reason));
        }
        if !meta.is_dir() || move_keeps_links_within(&self.preopens, from, to) {
            return Ok(());
        }
        let mut seen = 0usize;
        let mut dirs = vec![std::path::PathBuf::from(from)];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir)? {
                let entry = entry?;
                seen += 1;
                if seen > MAX_MOVED_ENTRIES {
                    let reason = format!(
                        "renaming the directory `{from}` to `{to}` would need more than {MAX_MOVED_ENTRIES} entries checked for links its move could lead out of their preopened directory"
                    );
                    return Err(self.deny(DenyCode::TargetMismatch, operation, from, reason));
                }
                let kind = entry.file_type()?;
                if kind.is_dir() {
                    dirs.push(entry.path());
                } else if kind.is_symlink() {
                    let path = entry.path();
                    let (Some(link), Some(below)) = (
                        path.to_str(),
                        path.strip_prefix(from).ok().and_then(Path::to_str),
                    ) else {
                        return Err(ErrorCode::IllegalByteSequence.into());
                    };
                    let moved = format!("{to}/{below}");
                    let target = std::fs::read_link(&path)?;
                    let target = target.to_string_lossy();
                    if !self.link_may_be_at(&moved, &target) {
                        let reason = format!(
                            "renaming the directory `{from}` to `{to}` would move the link `{link}` (to `{target}`) to `{moved}`, out of its preopened directory"
                        );
                        return Err(self.deny(DenyCode::TargetMismatch, operation, from, reason));
                    }
                }
            }
        }
        Ok(())
    }

    /// A directory carries everything below it: its rename is allowed only
    /// when one `<dir>/**` glob covers both ends (walking the tree on each
    /// rename to check every file would let a guest make the host do
    /// unbounded work). Otherwise `src/*` and `out/**` would let a guest
    /// move `src/sub` into `out/`, write below it and move it back.
    pub(super) fn check_dir_rename(&mut self, from: &str, to: &str) -> FsResult<()> {
        let covered = self.write_globs.iter().any(|g| {
            let Some(dir) = g.as_str().strip_suffix("/**") else {
                return false;
            };
            let dir = if dir.is_empty() { "/" } else { dir };
            g.literal_dir() == dir
                && from != dir
                && to != dir
                && is_within(from, dir)
                && is_within(to, dir)
        });
        if covered {
            return Ok(());
        }
        let reason = format!(
            "renaming the directory `{from}` to `{to}` would carry what is below it: a directory moves only within one `**` glob"
        );
        Err(self.deny(DenyCode::TargetMismatch, "rename-at", from, reason))
    }

    pub(super) fn check_read(&mut self, path: &str) -> FsResult<()> {
        if let Some(p) = self
            .protected
            .iter()
            .find(|p| p.kind == ProtectedKind::State && is_within(path, &p.path))
        {
            let reason = format!(
                "`{path}` is the host's own state (`{}`); no executor may read it",
                p.path
            );
            return Err(self.deny(DenyCode::HostStateHidden, "read", path, reason));
        }
        if self
            .read_globs
            .iter()
            .chain(&self.write_globs)
            .any(|g| g.matches(path))
        {
            return Ok(());
        }
        let reason = format!("`{path}` matches none of the granted `fs:read` or `fs:write` globs");
        Err(self.deny(DenyCode::TargetMismatch, "read", path, reason))
    }

    pub(super) fn record(&mut self, op: Operation) -> FsResult<()> {
        let Some(j) = &self.journal else {
            return Ok(());
        };
        for p in op_paths(&op) {
            self.touched.insert(p.to_string());
        }
        j.record(op).map(|_| ()).map_err(|_| ErrorCode::Io.into())
    }

    /// Saves the bytes of the regular file `path` once for this turn,
    /// streamed (never the whole file in memory). A file that would take
    /// the turn's backups past the journal cap is refused with
    /// `LIMIT_JOURNAL` before anything changed.
    pub(super) fn backup(&mut self, operation: &str, path: &str) -> FsResult<Option<String>> {
        let Some(j) = self.journal.clone() else {
            return Ok(None);
        };
        if self.owned.contains(path) {
            return Ok(None);
        }
        let left = self.journal_cap.saturating_sub(self.journaled_bytes);
        let len = std::fs::metadata(path)?.len();
        let too_large = |layer: &mut FsLayer, len: u64| {
            let reason = format!(
                "backing up `{path}` ({len} bytes) would pass the turn's journal cap of {} bytes ({} already backed up)",
                layer.journal_cap, layer.journaled_bytes
            );
            Err(layer.deny(DenyCode::LimitJournal, operation, path, reason))
        };
        if len > left {
            return too_large(self, len);
        }
        // The turn's directory holds the blob: it exists from here on.
        j.ensure().map_err(|_| FsError::from(ErrorCode::Io))?;
        match store_blob_file(j.dir(), Path::new(path), left)? {
            StoredBlob::Stored { sha256, bytes } => {
                self.journaled_bytes += bytes;
                self.owned.insert(path.to_string());
                Ok(Some(sha256))
            }
            // It grew between the two looks.
            StoredBlob::TooLarge => too_large(self, left.saturating_add(1)),
        }
    }

    /// After `from` moved to `to`: what was known of `from` (and below)
    /// now holds for `to`.
    pub(super) fn moved(&mut self, from: &str, to: &str) {
        let below = |k: &str, d: &str| k == d || is_within(k, d);
        self.owned.retain(|k| !below(k, to));
        let owned: Vec<String> = self
            .owned
            .iter()
            .filter(|k| below(k, from))
            .map(|k| format!("{to}{}", &k[from.len()..]))
            .collect();
        self.owned.retain(|k| !below(k, from));
        self.owned.extend(owned);
        if self.journal.is_some() {
            let touched: Vec<String> = self
                .touched
                .iter()
                .filter(|k| is_within(k, from) && k.as_str() != from)
                .map(|k| format!("{to}{}", &k[from.len()..]))
                .collect();
            self.touched.extend(touched);
        }
    }
}

fn op_paths(op: &Operation) -> Vec<&str> {
    match op {
        Operation::FileCreate { path }
        | Operation::FileOverwrite { path, .. }
        | Operation::FileDelete { path, .. }
        | Operation::SymlinkDelete { path, .. }
        | Operation::DirCreate { path }
        | Operation::DirRemove { path }
        | Operation::LinkCreate { path } => vec![path],
        Operation::Rename { from, to, .. } => vec![from, to],
        Operation::MemorySet { .. } | Operation::MemoryDelete { .. } => vec![],
    }
}

/// The most entries a directory's rename walks for the links below it
/// (when its move could lead one out: see [`move_keeps_links_within`]);
/// a larger tree is refused, so a guest cannot make each rename cost the
/// host an unbounded walk.
const MAX_MOVED_ENTRIES: usize = 100_000;

/// The directory `path` (canonical) is in.
fn parent_of(path: &str) -> &str {
    Path::new(path)
        .parent()
        .and_then(Path::to_str)
        .unwrap_or("/")
}

/// Whether a link in `dir` (canonical) to the relative `target` stays
/// within `root` at every step: `..` never climbs above it, and comes only
/// before the first name. A `..` after a name is refused because the
/// kernel takes it from where that name leads, not lexically: with
/// `s -> .`, `s/..` is the parent of the link's directory.
fn link_stays_within(dir: &str, target: &str, root: &str) -> bool {
    if target.is_empty() || target.starts_with('/') || !is_within(dir, root) {
        return false;
    }
    let below = dir[root.len()..].split('/').filter(|s| !s.is_empty());
    let mut depth = below.count();
    let mut named = false;
    for seg in target.split('/') {
        match seg {
            "" | "." => {}
            ".." if named => return false,
            ".." => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            _ => {
                named = true;
                depth += 1;
            }
        }
    }
    true
}

/// Whether moving the directory `from` to `to` (both canonical) keeps
/// every link below it that stays within a preopened directory within it:
/// each preopen that holds `from` holds `to`, and `to` is no shallower. A
/// link's `..` then climbs, from its new place, to a directory at least as
/// deep in the same preopen. (A link within a preopen below `from` climbs
/// no higher than that preopen, which moves with it.)
fn move_keeps_links_within(preopens: &[String], from: &str, to: &str) -> bool {
    let depth = |p: &str| p.split('/').filter(|s| !s.is_empty()).count();
    depth(to) >= depth(from)
        && preopens
            .iter()
            .filter(|root| is_within(from, root))
            .all(|root| is_within(to, root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_may_not_climb_above_its_preopen() {
        assert!(link_stays_within("/w/a", "b", "/w"));
        assert!(link_stays_within("/w/a", "../b", "/w"));
        assert!(link_stays_within("/w/a/b", "./../../c", "/w"));
        assert!(!link_stays_within("/w/a", "../../b", "/w"));
        assert!(!link_stays_within("/w", "..", "/w"));
        assert!(!link_stays_within("/w/a", "/etc/passwd", "/w"));
        assert!(!link_stays_within("/w/a", "", "/w"));
        assert!(!link_stays_within("/x/a", "b", "/w"));
        // security round 3, item 7: a `..` after a name is taken from
        // where that name leads (`s -> .` makes `s/..` the parent).
        assert!(!link_stays_within("/w", "s/..", "/w"));
        assert!(!link_stays_within("/w/a", "sub/../x", "/w"));
        assert!(link_stays_within("/w/a", "../../w/a/./x", "/"));
    }

    /// security round 3, item 7: a directory's move skips the walk for its
    /// links only when no link within a preopen can be led out of it.
    #[test]
    fn a_move_keeps_links_within_only_when_no_shallower_in_the_same_preopens() {
        let preopens = ["/w".to_string(), "/w/out".to_string()];
        assert!(move_keeps_links_within(&preopens, "/w/out/a", "/w/out/b"));
        assert!(move_keeps_links_within(&preopens, "/w/out/a", "/w/out/b/c"));
        assert!(!move_keeps_links_within(
            &preopens,
            "/w/out/a/b",
            "/w/out/l"
        ));
        // Out of the `/w/out` preopen, though no shallower.
        assert!(!move_keeps_links_within(&preopens, "/w/out/a", "/w/x/a"));
    }
}
