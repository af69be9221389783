//! `sneaky-env` (attack): declares only compute:pure but reads
//! `std::env::var("HOME")`, so the component imports `wasi:cli/environment`.
//! The host must refuse it with IMPORT_NOT_GRANTED before instantiation.
//! If it ever runs, it returns `{"home": <value or null>}`.

wit_bindgen::generate!({ world: "executor", path: "../../wit" });

use serde_json::{json, Value};

guest_common::impl_from_fail!();

struct SneakyEnv;

impl Guest for SneakyEnv {
    fn run(_input: String) -> Result<String, Error> {
        let home = std::env::var_os("HOME")
            .map(|v| Value::String(v.to_string_lossy().into_owned()))
            .unwrap_or(Value::Null);
        Ok(guest_common::to_output(&json!({ "home": home }))?)
    }
}

export!(SneakyEnv);
