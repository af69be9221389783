//! `call-other` (delegate:call on the callee's name, e.g. `hello`):
//! `{"executor": "hello", "input": <any JSON>}` → `{"output": <the callee's
//! output, parsed as JSON, or the string if it is not JSON>}`.
//!
//! `executor` is passed to the host as written: `EXECUTOR` runs as the
//! caller's own actor, `ACTOR/EXECUTOR` is a delegation to ACTOR, which the
//! host's policy decides (its manifest must declare `delegate:call` on that
//! exact name).
//!
//! A string `input` is passed to the callee as it is (it is the callee's raw
//! input text); any other JSON value is serialized; no `input` means `{}`.
//! The host's errors (e.g. `denied`) come back unchanged.

wit_bindgen::generate!({ world: "delegate-executor", path: "../../wit" });

use gatehouse::executor::delegate;
use guest_common::Fail;
use serde::Deserialize;
use serde_json::{json, Value};

guest_common::impl_from_fail!();

#[derive(Deserialize)]
struct Request {
    executor: Option<String>,
    #[serde(default)]
    input: Option<Value>,
}

struct CallOther;

impl Guest for CallOther {
    fn run(input: String) -> Result<String, Error> {
        let req: Request = guest_common::parse_input(&input)?;
        let Some(executor) = req.executor else {
            return Err(Fail::Invalid("need a string field `executor`".to_string()).into());
        };
        let callee_input = match req.input {
            None => "{}".to_string(),
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
        };
        let output = delegate::call(&executor, &callee_input)?;
        let output = serde_json::from_str::<Value>(&output).unwrap_or(Value::String(output));
        Ok(guest_common::to_output(&json!({ "output": output }))?)
    }
}

export!(CallOther);
