//! `ask` (human:ask): `{"question": "..."}` → `{"answer": "..."}` through the
//! gatehouse `human` interface; the host's errors (e.g. `denied` when there
//! is no terminal) come back unchanged.

wit_bindgen::generate!({ world: "human-executor", path: "../../wit" });

use gatehouse::executor::human;
use guest_common::Fail;
use serde::Deserialize;
use serde_json::json;

guest_common::impl_from_fail!();

#[derive(Deserialize)]
struct Request {
    question: Option<String>,
}

struct Ask;

impl Guest for Ask {
    fn run(input: String) -> Result<String, Error> {
        let req: Request = guest_common::parse_input(&input)?;
        let Some(question) = req.question else {
            return Err(Fail::Invalid("need a string field `question`".to_string()).into());
        };
        let answer = human::ask(&question)?;
        Ok(guest_common::to_output(&json!({ "answer": answer }))?)
    }
}

export!(Ask);
