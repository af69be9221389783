//! `write-file` (fs:write): `{"path": "out/a.txt", "content": "..."}` (op
//! `write`, the default: create or truncate, then write) → `{"path",
//! "bytes"}`; also every op of `read-file`. Paths are used exactly as given.

wit_bindgen::generate!({ world: "executor", path: "../../wit" });

guest_common::impl_from_fail!();

struct WriteFile;

impl Guest for WriteFile {
    fn run(input: String) -> Result<String, Error> {
        Ok(guest_common::fs_request(&input, true)?)
    }
}

export!(WriteFile);
