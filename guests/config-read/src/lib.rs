//! `config-read` (config:read on each name, e.g. `region`): `{"names":
//! [...]}` → `{"values": {name: <value or null>}, "all": {name: value}}`,
//! `all` being what `wasi:config/store.get-all` lists. An error of the
//! store comes back as `failed`.

wit_bindgen::generate!({
    world: "config-executor",
    path: "../../wit",
    // wasi:config is generated here too: no crate of the guest binds it.
    generate_all,
});

use guest_common::Fail;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use wasi::config::store;

guest_common::impl_from_fail!();

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    names: Option<Vec<String>>,
}

fn store_error(e: store::Error) -> Error {
    let message = match e {
        store::Error::Upstream(m) | store::Error::Io(m) => m,
    };
    Fail::Failed(format!("wasi:config/store: {message}")).into()
}

struct ConfigRead;

impl Guest for ConfigRead {
    fn run(input: String) -> Result<String, Error> {
        let req: Request = guest_common::parse_input(&input)?;
        let Some(names) = req.names else {
            return Err(
                Fail::Invalid("need a field `names`: a list of strings".to_string()).into(),
            );
        };
        let mut values = Map::new();
        for name in names {
            let value = store::get(&name).map_err(store_error)?;
            values.insert(name, value.map_or(Value::Null, Value::String));
        }
        let all: Map<String, Value> = store::get_all()
            .map_err(store_error)?
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        Ok(guest_common::to_output(
            &json!({ "values": values, "all": all }),
        )?)
    }
}

export!(ConfigRead);
