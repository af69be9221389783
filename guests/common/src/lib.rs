//! Code shared by the gatehouse guests.
//!
//! Guests report failures as the WIT `error` variant; this crate cannot name
//! the generated type (each guest generates its own bindings), so it uses
//! [`Fail`], which each guest converts with a one-line `From` impl.
//! Nothing here panics.

use std::fs::{self, OpenOptions};
use std::io::Write;

use serde::Deserialize;
use serde_json::{json, Value};

/// A failure, mirroring the WIT `error` cases a guest itself produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fail {
    /// `invalid-input`: bad JSON, a missing field, an unknown op.
    Invalid(String),
    /// `failed`: an I/O error, with the OS/WASI text and the path or host.
    Failed(String),
}

impl Fail {
    /// The message, whichever the case.
    pub fn message(&self) -> &str {
        match self {
            Fail::Invalid(m) | Fail::Failed(m) => m,
        }
    }
}

/// Parses `input` as JSON into `T`, or `Fail::Invalid` saying why.
pub fn parse_input<T: for<'de> Deserialize<'de>>(input: &str) -> Result<T, Fail> {
    serde_json::from_str(input).map_err(|e| Fail::Invalid(format!("invalid input JSON: {e}")))
}

/// Serializes an output value (cannot fail for a `Value`, but never panic).
pub fn to_output(value: &Value) -> Result<String, Fail> {
    serde_json::to_string(value).map_err(|e| Fail::Failed(format!("cannot serialize output: {e}")))
}

/// The request of `read-file`, `write-file` and `fs-cmd`.
#[derive(Debug, Deserialize)]
pub struct FsRequest {
    #[serde(default)]
    pub op: Option<String>,
    pub path: Option<String>,
    #[serde(default)]
    pub to: Option<String>,
    #[serde(default)]
    pub content: Option<String>,
    /// The new length of `resize`.
    #[serde(default)]
    pub size: Option<u64>,
}

/// The ops every filesystem guest knows; `write` is added when allowed.
pub const FS_OPS: [&str; 13] = [
    "read",
    "create",
    "truncate",
    "rename",
    "delete",
    "mkdir",
    "rmdir",
    "append",
    "list",
    "symlink",
    "link",
    "resize",
    "truncate-exclusive",
];

/// Runs one filesystem request given as JSON text and returns the output
/// JSON text. With `with_write`, the `write` op exists and is the default;
/// otherwise the default is `read`.
///
/// Paths are used exactly as given: relative ones resolve against the
/// preopened directories, absolute ones are passed to WASI as they are.
pub fn fs_request(input: &str, with_write: bool) -> Result<String, Fail> {
    let req: FsRequest = parse_input(input)?;
    let value = fs_op(&req, with_write)?;
    to_output(&value)
}

/// Runs one parsed filesystem request.
pub fn fs_op(req: &FsRequest, with_write: bool) -> Result<Value, Fail> {
    let default_op = if with_write { "write" } else { "read" };
    let op = req.op.as_deref().unwrap_or(default_op);
    let known = FS_OPS.contains(&op) || (with_write && op == "write");
    if !known {
        let mut ops: Vec<&str> = FS_OPS.to_vec();
        if with_write {
            ops.push("write");
        }
        return Err(Fail::Invalid(format!(
            "unknown op `{op}`; one of {}",
            ops.join(", ")
        )));
    }
    let Some(path) = req.path.as_deref() else {
        return Err(Fail::Invalid(format!(
            "op `{op}` needs a string field `path`"
        )));
    };
    let io = |what: &str, e: std::io::Error| Fail::Failed(format!("{what} `{path}`: {e}"));
    match op {
        "read" => {
            let bytes = fs::read(path).map_err(|e| io("read", e))?;
            let content = String::from_utf8_lossy(&bytes).into_owned();
            Ok(json!({ "path": path, "bytes": bytes.len(), "content": content }))
        }
        "write" => {
            let content = req.content.as_deref().unwrap_or("");
            fs::write(path, content).map_err(|e| io("write", e))?;
            Ok(json!({ "path": path, "bytes": content.len() }))
        }
        "create" => {
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(|e| io("create", e))?;
            Ok(json!({ "op": op, "path": path }))
        }
        "truncate" => {
            OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(path)
                .map_err(|e| io("truncate", e))?;
            Ok(json!({ "op": op, "path": path }))
        }
        "append" => {
            let content = req.content.as_deref().unwrap_or("");
            let mut file = OpenOptions::new()
                .append(true)
                .create(true)
                .open(path)
                .map_err(|e| io("append to", e))?;
            file.write_all(content.as_bytes())
                .and_then(|()| file.flush())
                .map_err(|e| io("append to", e))?;
            Ok(json!({ "op": op, "path": path, "bytes": content.len() }))
        }
        "rename" => {
            let Some(to) = req.to.as_deref() else {
                return Err(Fail::Invalid(
                    "op `rename` needs a string field `to`".to_string(),
                ));
            };
            fs::rename(path, to)
                .map_err(|e| Fail::Failed(format!("rename `{path}` to `{to}`: {e}")))?;
            Ok(json!({ "op": op, "path": path, "to": to }))
        }
        "symlink" => {
            // `path` becomes a symbolic link to `to` (its text, as given).
            let Some(to) = req.to.as_deref() else {
                return Err(Fail::Invalid(
                    "op `symlink` needs a string field `to`".to_string(),
                ));
            };
            #[allow(deprecated)] // the one portable way to make a link on WASI
            fs::soft_link(to, path)
                .map_err(|e| Fail::Failed(format!("symlink `{path}` to `{to}`: {e}")))?;
            Ok(json!({ "op": op, "path": path, "to": to }))
        }
        "link" => {
            let Some(to) = req.to.as_deref() else {
                return Err(Fail::Invalid(
                    "op `link` needs a string field `to`".to_string(),
                ));
            };
            fs::hard_link(path, to)
                .map_err(|e| Fail::Failed(format!("link `{path}` to `{to}`: {e}")))?;
            Ok(json!({ "op": op, "path": path, "to": to }))
        }
        "resize" => {
            let Some(size) = req.size else {
                return Err(Fail::Invalid(
                    "op `resize` needs a number field `size`".to_string(),
                ));
            };
            let file = OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| io("resize", e))?;
            file.set_len(size).map_err(|e| io("resize", e))?;
            Ok(json!({ "op": op, "path": path, "size": size }))
        }
        "truncate-exclusive" => {
            raw::open_truncate_exclusive(path).map_err(|e| io("truncate-exclusive", e))?;
            Ok(json!({ "op": op, "path": path }))
        }
        "delete" => {
            fs::remove_file(path).map_err(|e| io("delete", e))?;
            Ok(json!({ "op": op, "path": path }))
        }
        "mkdir" => {
            fs::create_dir(path).map_err(|e| io("mkdir", e))?;
            Ok(json!({ "op": op, "path": path }))
        }
        "rmdir" => {
            fs::remove_dir(path).map_err(|e| io("rmdir", e))?;
            Ok(json!({ "op": op, "path": path }))
        }
        "list" => {
            let mut entries = Vec::new();
            for entry in fs::read_dir(path).map_err(|e| io("list", e))? {
                let entry = entry.map_err(|e| io("list", e))?;
                entries.push(entry.file_name().to_string_lossy().into_owned());
            }
            entries.sort();
            Ok(json!({ "op": op, "path": path, "entries": entries }))
        }
        // Every known op is matched above.
        other => Err(Fail::Invalid(format!("unknown op `{other}`"))),
    }
}

/// Implements `From<Fail>` for the guest's generated WIT `Error` type (which
/// must be in scope as `Error`, as `wit_bindgen::generate!` puts it), so `?`
/// turns a [`Fail`] into `invalid-input` or `failed`.
#[macro_export]
macro_rules! impl_from_fail {
    () => {
        impl ::core::convert::From<$crate::Fail> for Error {
            fn from(fail: $crate::Fail) -> Error {
                match fail {
                    $crate::Fail::Invalid(m) => Error::InvalidInput(m),
                    $crate::Fail::Failed(m) => Error::Failed(m),
                }
            }
        }
    };
}

/// WASI preview 1 called directly, for open flags the standard library
/// never combines (`O_TRUNC | O_EXCL` without `O_CREAT`). On wasm32-wasip2
/// the preview 1 adapter that `wasm-component-ld` links turns the call
/// into `wasi:filesystem` `open-at` with the same flags.
mod raw {
    #[cfg(target_os = "wasi")]
    mod p1 {
        #[repr(C)]
        pub struct Prestat {
            pub tag: u8,
            pub len: u32,
        }

        #[link(wasm_import_module = "wasi_snapshot_preview1")]
        extern "C" {
            pub fn fd_prestat_get(fd: u32, out: *mut Prestat) -> u16;
            pub fn fd_prestat_dir_name(fd: u32, path: *mut u8, len: u32) -> u16;
            pub fn path_open(
                fd: u32,
                dirflags: u32,
                path: *const u8,
                path_len: u32,
                oflags: u16,
                rights_base: u64,
                rights_inheriting: u64,
                fdflags: u16,
                out: *mut u32,
            ) -> u16;
            pub fn fd_close(fd: u32) -> u16;
        }
    }

    /// The preopen whose name is the longest prefix of `path`, and the
    /// rest of the path below it.
    #[cfg(target_os = "wasi")]
    fn preopen_of(path: &str) -> Option<(u32, String)> {
        let mut best: Option<(u32, String, usize)> = None;
        for fd in 3u32..64 {
            let mut stat = p1::Prestat { tag: 0, len: 0 };
            // SAFETY: `stat` is a valid, writable `Prestat` (tag u8, then
            // a u32), the layout preview 1 writes.
            if unsafe { p1::fd_prestat_get(fd, &mut stat) } != 0 {
                break;
            }
            let mut name = vec![0u8; stat.len as usize];
            // SAFETY: `name` has exactly `stat.len` writable bytes.
            if unsafe { p1::fd_prestat_dir_name(fd, name.as_mut_ptr(), stat.len) } != 0 {
                continue;
            }
            let Ok(name) = String::from_utf8(name) else {
                continue;
            };
            let name = name.trim_end_matches('/').to_string();
            let rest = if name == "." {
                Some(path.to_string())
            } else {
                path.strip_prefix(&name)
                    .and_then(|r| r.strip_prefix('/'))
                    .map(str::to_string)
            };
            if let Some(rest) = rest {
                if best.as_ref().is_none_or(|b| name.len() > b.2) {
                    best = Some((fd, rest, name.len()));
                }
            }
        }
        best.map(|(fd, rest, _)| (fd, rest))
    }

    /// Opens `path` for writing with `TRUNC | EXCL` and no `CREAT`.
    #[cfg(target_os = "wasi")]
    pub fn open_truncate_exclusive(path: &str) -> std::io::Result<()> {
        const OFLAGS_EXCL: u16 = 1 << 2;
        const OFLAGS_TRUNC: u16 = 1 << 3;
        const RIGHT_FD_WRITE: u64 = 1 << 6;
        const LOOKUP_SYMLINK_FOLLOW: u32 = 1;
        let Some((dir, rest)) = preopen_of(path) else {
            return Err(std::io::Error::from(std::io::ErrorKind::NotFound));
        };
        let mut fd = 0u32;
        // SAFETY: `rest` outlives the call and its pointer and length
        // describe it; `fd` is a valid, writable u32.
        let errno = unsafe {
            p1::path_open(
                dir,
                LOOKUP_SYMLINK_FOLLOW,
                rest.as_ptr(),
                rest.len() as u32,
                OFLAGS_EXCL | OFLAGS_TRUNC,
                RIGHT_FD_WRITE,
                0,
                0,
                &mut fd,
            )
        };
        if errno != 0 {
            return Err(std::io::Error::from_raw_os_error(i32::from(errno)));
        }
        // SAFETY: `fd` was just opened by `path_open` and is closed once.
        unsafe { p1::fd_close(fd) };
        Ok(())
    }

    #[cfg(not(target_os = "wasi"))]
    pub fn open_truncate_exclusive(_path: &str) -> std::io::Result<()> {
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }
}
