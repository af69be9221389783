//! `hello`: returns `{"echo": <input as JSON, or the input string>}` and logs
//! one line; given a string field `log`, it logs that text too, as it is (a
//! guest's own words, for the tests of what reaches a terminal). Needs
//! nothing but compute:pure.

wit_bindgen::generate!({ world: "executor", path: "../../wit" });

use gatehouse::executor::log::{log, Level};
use serde_json::{json, Value};

guest_common::impl_from_fail!();

struct Hello;

impl Guest for Hello {
    fn run(input: String) -> Result<String, Error> {
        log(
            Level::Info,
            &format!("hello: {} bytes of input", input.len()),
        );
        let echo = serde_json::from_str::<Value>(&input).unwrap_or(Value::String(input));
        if let Some(text) = echo.get("log").and_then(Value::as_str) {
            log(Level::Info, text);
        }
        Ok(guest_common::to_output(&json!({ "echo": echo }))?)
    }
}

export!(Hello);
