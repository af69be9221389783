//! `read-file` (fs:read): `{"op": "read", "path": "notes/a.txt"}` →
//! `{"path", "bytes", "content"}`. The other ops (create, truncate, rename,
//! delete, mkdir, rmdir, append, list) exist so that tests can show a
//! read-only grant refuses every write. Paths are used exactly as given.

wit_bindgen::generate!({ world: "executor", path: "../../wit" });

guest_common::impl_from_fail!();

struct ReadFile;

impl Guest for ReadFile {
    fn run(input: String) -> Result<String, Error> {
        Ok(guest_common::fs_request(&input, false)?)
    }
}

export!(ReadFile);
