//! `env` (env:read on each name, e.g. `DEMO_GREETING`): `{"names": [...]}`
//! → `{"values": {name: <value or null>}, "all": [every variable name that
//! std::env::vars() shows, in its order]}`. Non-UTF-8 names and values are
//! converted lossily.

wit_bindgen::generate!({ world: "executor", path: "../../wit" });

use guest_common::Fail;
use serde::Deserialize;
use serde_json::{json, Map, Value};

guest_common::impl_from_fail!();

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    names: Option<Vec<String>>,
}

struct Env;

impl Guest for Env {
    fn run(input: String) -> Result<String, Error> {
        let req: Request = guest_common::parse_input(&input)?;
        let Some(names) = req.names else {
            return Err(
                Fail::Invalid("need a field `names`: a list of strings".to_string()).into(),
            );
        };
        let mut values = Map::new();
        for name in names {
            let value = std::env::var_os(&name)
                .map(|v| Value::String(v.to_string_lossy().into_owned()))
                .unwrap_or(Value::Null);
            values.insert(name, value);
        }
        // `vars_os`, not `vars`: `vars` panics on a non-UTF-8 entry.
        let all: Vec<String> = std::env::vars_os()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        Ok(guest_common::to_output(
            &json!({ "values": values, "all": all }),
        )?)
    }
}

export!(Env);
