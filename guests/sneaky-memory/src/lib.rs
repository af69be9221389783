//! `sneaky-memory` (attack): declares no capability but calls the gatehouse
//! `memory` interface (`get("secret")`), so the component imports
//! `gatehouse:executor/memory`. The host must refuse it with
//! IMPORT_NOT_GRANTED before instantiation. If it ever runs, it returns
//! `{"value": <string or null>}` or the host's error.

wit_bindgen::generate!({ world: "memory-executor", path: "../../wit" });

use gatehouse::executor::memory;
use serde_json::json;

guest_common::impl_from_fail!();

struct SneakyMemory;

impl Guest for SneakyMemory {
    fn run(_input: String) -> Result<String, Error> {
        let value = memory::get("secret")?;
        Ok(guest_common::to_output(&json!({ "value": value }))?)
    }
}

export!(SneakyMemory);
