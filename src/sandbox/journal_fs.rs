//! The journaling filesystem layer: gatehouse's own host of
//! `wasi:filesystem/types`, between the guest and wasmtime-wasi's.
//!
//! Every method delegates to wasmtime-wasi's implementation
//! ([`WasiFilesystemCtxView`]); before a mutation it
//! 1. finds the exact host path (the descriptor's own file descriptor,
//!    read back through `/proc/self/fd`, joined with the guest's path and
//!    resolved the way the open will resolve it),
//! 2. refuses it when no granted glob matches the path (`fs:write` on
//!    `notes/*.md` preopens `notes` but refuses `notes/a.txt`) or the path
//!    is protected (grants database, config, manifests, history, state),
//!    whatever the preopen allows; the guest gets `not-permitted`/`access`
//!    and the refusal goes to the turn's audit log with its deny code,
//! 3. stores a file's bytes once per turn before its first destructive
//!    change (`<turn>/blob/<sha256>.bin`) and journals the operation,
//!    fsynced, before doing it.
//!
//! Writes themselves go through `wasi:io` streams from
//! `write-via-stream`/`append-via-stream` (or `write`, `set-size`) on a
//! descriptor opened for writing: the backup is taken when it is opened.
//! At the end of the run [`FsLayer::finish`] records the state each
//! touched path was left in, so undo can tell what changed since.
//!
//! Content reads are refined too: a file opened for reading must match a
//! read or write glob. Names and metadata (`stat`, `read-directory`) of
//! the preopened tree stay visible.
//!
//! Limits: Linux only (`/proc/self/fd`; elsewhere every mutation fails
//! with `io`). A hard link made outside the sandbox to a file outside the
//! globs is not detected. Paths are resolved on the host just before
//! wasmtime-wasi resolves them again: another process racing to swap a
//! directory for a link between the two is not defended against (the guest
//! itself cannot: its calls are sequential).
//!
//! Two parts: the rules ([`FsLayer`], in `rules`: what is allowed,
//! backed up and journaled, plain functions of host paths) and, here, the
//! WASI proxy that finds each call's host path and asks them.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use wasmtime::component::{HasData, Linker, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as fs;
use wasmtime_wasi::p2::bindings::sync::io::streams;
use wasmtime_wasi::p2::{FsError, FsResult};

mod rules;

pub use rules::{FsLayer, MAX_RECORDED_REFUSALS};

use super::state::HostState;
use crate::undo::Operation;

/// The view the bindings call: wasmtime-wasi's, and the layer.
pub struct JournalingFs<'a> {
    /// wasmtime-wasi's filesystem view.
    pub inner: WasiFilesystemCtxView<'a>,
    /// The journaling layer: what the turn may touch, and its journal.
    pub layer: &'a mut FsLayer,
}

struct HasJournalingFs;

impl HasData for HasJournalingFs {
    type Data<'a> = JournalingFs<'a>;
}

fn view(s: &mut HostState) -> JournalingFs<'_> {
    JournalingFs {
        inner: WasiFilesystemCtxView {
            ctx: s.wasi.filesystem(),
            table: &mut s.table,
        },
        layer: &mut s.fs,
    }
}

/// Links `wasi:filesystem/types` through the layer (in place of
/// wasmtime-wasi's own).
///
/// # Security
/// This is where finer globs and protected paths are enforced: whatever
/// a preopen's permissions, a mutation passes only what
/// [`FsLayer::check_write`] allows.
pub fn add_to_linker(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    fs::add_to_linker::<HostState, HasJournalingFs>(l, view)
}

fn not_utf8() -> FsError {
    ErrorCode::IllegalByteSequence.into()
}

fn utf8(p: PathBuf) -> FsResult<String> {
    p.into_os_string().into_string().map_err(|_| not_utf8())
}

/// Resolves `rel` against the host directory `base` the way the open
/// will: every directory component followed, the last one followed too
/// with `follow` (a dangling link names the file a create would make).
fn resolve(base: &Path, rel: &str, follow: bool) -> FsResult<String> {
    if rel.starts_with('/') {
        return Err(ErrorCode::NotPermitted.into());
    }
    let mut p = base.join(rel);
    if follow {
        for _ in 0..40 {
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.file_type().is_symlink() => {
                    let target = std::fs::read_link(&p)?;
                    p = match p.parent() {
                        Some(parent) => parent.join(target),
                        None => target,
                    };
                }
                _ => break,
            }
        }
    }
    let real = match (p.parent(), p.file_name()) {
        (Some(parent), Some(name)) => parent.canonicalize()?.join(name),
        _ => p.canonicalize()?,
    };
    utf8(real)
}

impl JournalingFs<'_> {
    /// The exact host path of a descriptor.
    fn host_path(&mut self, fd: &Resource<Descriptor>) -> FsResult<PathBuf> {
        let raw = match self.inner.table.get(fd)? {
            Descriptor::File(f) => f.file.as_raw_fd(),
            Descriptor::Dir(d) => d.dir.as_raw_fd(),
        };
        let p = std::fs::read_link(format!("/proc/self/fd/{raw}"))?;
        if p.to_string_lossy().ends_with(" (deleted)") {
            return Err(ErrorCode::NoEntry.into());
        }
        Ok(p)
    }

    fn at(&mut self, fd: &Resource<Descriptor>, path: &str, follow: bool) -> FsResult<String> {
        let base = self.host_path(fd)?;
        resolve(&base, path, follow)
    }

    fn check_descriptor(&mut self, operation: &str, fd: &Resource<Descriptor>) -> FsResult<()> {
        let p = utf8(self.host_path(fd)?)?;
        self.layer.check_write(operation, &p)
    }
}

impl fs::Host for JournalingFs<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<fs::ErrorCode> {
        fs::Host::convert_error_code(&mut self.inner, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<streams::Error>,
    ) -> wasmtime::Result<Option<fs::ErrorCode>> {
        fs::Host::filesystem_error_code(&mut self.inner, err)
    }
}

impl fs::HostDirectoryEntryStream for JournalingFs<'_> {
    fn read_directory_entry(
        &mut self,
        stream: Resource<fs::DirectoryEntryStream>,
    ) -> FsResult<Option<fs::DirectoryEntry>> {
        fs::HostDirectoryEntryStream::read_directory_entry(&mut self.inner, stream)
    }

    fn drop(&mut self, stream: Resource<fs::DirectoryEntryStream>) -> wasmtime::Result<()> {
        fs::HostDirectoryEntryStream::drop(&mut self.inner, stream)
    }
}

impl fs::HostDescriptor for JournalingFs<'_> {
    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: fs::Filesize,
    ) -> FsResult<Resource<streams::InputStream>> {
        fs::HostDescriptor::read_via_stream(&mut self.inner, fd, offset)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: fs::Filesize,
    ) -> FsResult<Resource<streams::OutputStream>> {
        fs::HostDescriptor::write_via_stream(&mut self.inner, fd, offset)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<streams::OutputStream>> {
        fs::HostDescriptor::append_via_stream(&mut self.inner, fd)
    }

    fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        offset: fs::Filesize,
        len: fs::Filesize,
        advice: fs::Advice,
    ) -> FsResult<()> {
        fs::HostDescriptor::advise(&mut self.inner, fd, offset, len, advice)
    }

    fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        fs::HostDescriptor::sync_data(&mut self.inner, fd)
    }

    fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::DescriptorFlags> {
        fs::HostDescriptor::get_flags(&mut self.inner, fd)
    }

    fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::DescriptorType> {
        fs::HostDescriptor::get_type(&mut self.inner, fd)
    }

    /// Only on a descriptor opened for writing, whose bytes were saved
    /// when it was opened.
    fn set_size(&mut self, fd: Resource<Descriptor>, size: fs::Filesize) -> FsResult<()> {
        fs::HostDescriptor::set_size(&mut self.inner, fd, size)
    }

    fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atim: fs::NewTimestamp,
        mtim: fs::NewTimestamp,
    ) -> FsResult<()> {
        self.check_descriptor("set-times", &fd)?;
        fs::HostDescriptor::set_times(&mut self.inner, fd, atim, mtim)
    }

    fn read(
        &mut self,
        fd: Resource<Descriptor>,
        len: fs::Filesize,
        offset: fs::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        fs::HostDescriptor::read(&mut self.inner, fd, len, offset)
    }

    fn write(
        &mut self,
        fd: Resource<Descriptor>,
        buf: Vec<u8>,
        offset: fs::Filesize,
    ) -> FsResult<fs::Filesize> {
        fs::HostDescriptor::write(&mut self.inner, fd, buf, offset)
    }

    fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<fs::DirectoryEntryStream>> {
        fs::HostDescriptor::read_directory(&mut self.inner, fd)
    }

    fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        fs::HostDescriptor::sync(&mut self.inner, fd)
    }

    fn create_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let host = self.at(&fd, &path, false)?;
        self.layer.check_write("create-directory-at", &host)?;
        if !Path::new(&host).exists() {
            self.layer.record(Operation::DirCreate { path: host })?;
        }
        fs::HostDescriptor::create_directory_at(&mut self.inner, fd, path)
    }

    fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::DescriptorStat> {
        fs::HostDescriptor::stat(&mut self.inner, fd)
    }

    fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
    ) -> FsResult<fs::DescriptorStat> {
        fs::HostDescriptor::stat_at(&mut self.inner, fd, path_flags, path)
    }

    fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
        atim: fs::NewTimestamp,
        mtim: fs::NewTimestamp,
    ) -> FsResult<()> {
        let follow = path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let host = self.at(&fd, &path, follow)?;
        self.layer.check_write("set-times-at", &host)?;
        fs::HostDescriptor::set_times_at(&mut self.inner, fd, path_flags, path, atim, mtim)
    }

    fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path_flags: fs::PathFlags,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let follow = old_path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let old = self.at(&fd, &old_path, follow)?;
        let new = self.at(&new_descriptor, &new_path, false)?;
        // A hard link writes the same bytes as its source: both must be
        // writable, and the source is saved before it can change.
        self.layer.check_write("link-at", &old)?;
        self.layer.check_write("link-at", &new)?;
        // A hard link to a symbolic link is that link in another place.
        if std::fs::symlink_metadata(&old).is_ok_and(|m| m.file_type().is_symlink()) {
            self.layer.check_moved_links("link-at", &old, &new)?;
        }
        if std::fs::metadata(&old).is_ok_and(|m| m.is_file()) {
            if let Some(blob) = self.layer.backup("link-at", &old)? {
                self.layer.record(Operation::FileOverwrite {
                    path: old.clone(),
                    blob,
                })?;
            }
        }
        self.layer
            .record(Operation::LinkCreate { path: new.clone() })?;
        self.layer.owned.insert(new);
        fs::HostDescriptor::link_at(
            &mut self.inner,
            fd,
            old_path_flags,
            old_path,
            new_descriptor,
            new_path,
        )
    }

    fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
        oflags: fs::OpenFlags,
        flags: fs::DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        let writes = flags.contains(fs::DescriptorFlags::WRITE)
            || oflags.intersects(fs::OpenFlags::CREATE | fs::OpenFlags::TRUNCATE);
        if !writes {
            let opened =
                fs::HostDescriptor::open_at(&mut self.inner, fd, path_flags, path, oflags, flags)?;
            if matches!(self.inner.table.get(&opened)?, Descriptor::File(_)) {
                let host = self.host_path(&opened).and_then(utf8);
                if let Err(e) = host.and_then(|h| self.layer.check_read(&h)) {
                    fs::HostDescriptor::drop(&mut self.inner, opened).map_err(FsError::trap)?;
                    return Err(e);
                }
            }
            return Ok(opened);
        }
        let follow = path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        let host = self.at(&fd, &path, follow)?;
        self.layer.check_write("open-at", &host)?;
        match std::fs::symlink_metadata(&host) {
            // EXCLUSIVE counts only with CREATE (then an existing file
            // fails the open); alone it is ignored, and TRUNCATE still
            // truncates: the bytes are saved.
            Ok(m)
                if m.is_file()
                    && !oflags.contains(fs::OpenFlags::CREATE | fs::OpenFlags::EXCLUSIVE) =>
            {
                if let Some(blob) = self.layer.backup("open-at", &host)? {
                    self.layer.record(Operation::FileOverwrite {
                        path: host.clone(),
                        blob,
                    })?;
                }
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && oflags.contains(fs::OpenFlags::CREATE) =>
            {
                self.layer
                    .record(Operation::FileCreate { path: host.clone() })?;
                self.layer.owned.insert(host);
            }
            _ => {}
        }
        fs::HostDescriptor::open_at(&mut self.inner, fd, path_flags, path, oflags, flags)
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        fs::HostDescriptor::drop(&mut self.inner, fd)
    }

    fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        fs::HostDescriptor::readlink_at(&mut self.inner, fd, path)
    }

    fn remove_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let host = self.at(&fd, &path, false)?;
        self.layer.check_write("remove-directory-at", &host)?;
        if std::fs::symlink_metadata(&host).is_ok_and(|m| m.is_dir()) {
            self.layer.record(Operation::DirRemove { path: host })?;
        }
        fs::HostDescriptor::remove_directory_at(&mut self.inner, fd, path)
    }

    fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let from = self.at(&fd, &old_path, false)?;
        let to = self.at(&new_fd, &new_path, false)?;
        self.layer.check_write("rename-at", &from)?;
        self.layer.check_write("rename-at", &to)?;
        if std::fs::symlink_metadata(&from).is_ok_and(|m| m.is_dir()) {
            self.layer.check_dir_rename(&from, &to)?;
        }
        self.layer.check_moved_links("rename-at", &from, &to)?;
        if std::fs::symlink_metadata(&from).is_ok() && from != to {
            let (replaced_blob, replaced_dir) = match std::fs::symlink_metadata(&to) {
                Ok(m) if m.is_file() => (self.layer.backup("rename-at", &to)?, false),
                Ok(m) if m.is_dir() => (None, true),
                Ok(m) if m.file_type().is_symlink() => {
                    // Journal the link's removal first: it is restored
                    // after the move back.
                    let target = std::fs::read_link(&to)?;
                    let target = utf8(target)?;
                    self.layer.record(Operation::SymlinkDelete {
                        path: to.clone(),
                        target,
                    })?;
                    (None, false)
                }
                _ => (None, false),
            };
            self.layer.record(Operation::Rename {
                from: from.clone(),
                to: to.clone(),
                replaced_blob,
                replaced_dir,
            })?;
        }
        fs::HostDescriptor::rename_at(&mut self.inner, fd, old_path, new_fd, new_path)?;
        self.layer.moved(&from, &to);
        Ok(())
    }

    fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        let host = self.at(&fd, &dest_path, false)?;
        self.layer.check_write("symlink-at", &host)?;
        self.layer.check_link_target(&host, &src_path)?;
        if std::fs::symlink_metadata(&host).is_err() {
            self.layer
                .record(Operation::LinkCreate { path: host.clone() })?;
            self.layer.owned.insert(host);
        }
        fs::HostDescriptor::symlink_at(&mut self.inner, fd, src_path, dest_path)
    }

    fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let host = self.at(&fd, &path, false)?;
        self.layer.check_write("unlink-file-at", &host)?;
        match std::fs::symlink_metadata(&host) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = utf8(std::fs::read_link(&host)?)?;
                self.layer.record(Operation::SymlinkDelete {
                    path: host.clone(),
                    target,
                })?;
            }
            Ok(m) if m.is_file() => {
                let blob = self.layer.backup("unlink-file-at", &host)?;
                self.layer.record(Operation::FileDelete {
                    path: host.clone(),
                    blob,
                })?;
            }
            _ => {}
        }
        fs::HostDescriptor::unlink_file_at(&mut self.inner, fd, path)?;
        self.layer.owned.remove(&host);
        Ok(())
    }

    fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        fs::HostDescriptor::is_same_object(&mut self.inner, a, b)
    }

    fn metadata_hash(&mut self, fd: Resource<Descriptor>) -> FsResult<fs::MetadataHashValue> {
        fs::HostDescriptor::metadata_hash(&mut self.inner, fd)
    }

    fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: fs::PathFlags,
        path: String,
    ) -> FsResult<fs::MetadataHashValue> {
        fs::HostDescriptor::metadata_hash_at(&mut self.inner, fd, path_flags, path)
    }
}
