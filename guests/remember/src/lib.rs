//! `remember` (memory:read for get/list, memory:write for set/delete, in one
//! namespace such as `notes`): `{"op": "get"|"set"|"delete"|"list", "key",
//! "value", "prefix"}` through the gatehouse `memory` interface.
//!
//! - get → `{"key", "value": <string or null>}`
//! - set → `{"key", "value"}`
//! - delete → `{"key", "existed": <bool>}`
//! - list → `{"prefix", "keys": [...]}` (prefix defaults to "")
//!
//! Errors from the host (`denied`, `failed`, ...) come back unchanged.

wit_bindgen::generate!({ world: "memory-executor", path: "../../wit" });

use gatehouse::executor::memory;
use guest_common::Fail;
use serde::Deserialize;
use serde_json::json;

guest_common::impl_from_fail!();

#[derive(Deserialize)]
struct Request {
    op: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    prefix: Option<String>,
}

fn need<'a>(field: &'a Option<String>, op: &str, name: &str) -> Result<&'a str, Error> {
    field
        .as_deref()
        .ok_or_else(|| Fail::Invalid(format!("op `{op}` needs a string field `{name}`")).into())
}

struct Remember;

impl Guest for Remember {
    fn run(input: String) -> Result<String, Error> {
        let req: Request = guest_common::parse_input(&input)?;
        let Some(op) = req.op.as_deref() else {
            return Err(Fail::Invalid(
                "need a string field `op`: get, set, delete or list".to_string(),
            )
            .into());
        };
        let out = match op {
            "get" => {
                let key = need(&req.key, op, "key")?;
                let value = memory::get(key)?;
                json!({ "key": key, "value": value })
            }
            "set" => {
                let key = need(&req.key, op, "key")?;
                let value = need(&req.value, op, "value")?;
                memory::set(key, value)?;
                json!({ "key": key, "value": value })
            }
            "delete" => {
                let key = need(&req.key, op, "key")?;
                let existed = memory::delete(key)?;
                json!({ "key": key, "existed": existed })
            }
            "list" => {
                let prefix = req.prefix.as_deref().unwrap_or("");
                let keys = memory::list(prefix)?;
                json!({ "prefix": prefix, "keys": keys })
            }
            other => {
                return Err(Fail::Invalid(format!(
                    "unknown op `{other}`; one of get, set, delete, list"
                ))
                .into())
            }
        };
        Ok(guest_common::to_output(&out)?)
    }
}

export!(Remember);
