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
}

/// The ops every filesystem guest knows; `write` is added when allowed.
pub const FS_OPS: [&str; 10] = [
    "read", "create", "truncate", "rename", "delete", "mkdir", "rmdir", "append", "list",
    "symlink",
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
