//! `gatehouse manifest schema`: the JSON Schema of `executor.toml`, for
//! editors. Its shape is generated from the types that parse the file
//! ([`crate::manifest::json_schema`]); the closed lists the validator
//! checks (capability names, reverse patterns) are added from the
//! registry and the catalogue.

use serde_json::{json, Value};

use crate::manifest::REVERSE_PATTERNS;
use crate::policy::REGISTRY;

/// The schema, as one JSON document.
pub fn manifest_schema() -> Value {
    let mut schema = crate::manifest::json_schema();
    schema["title"] = json!("gatehouse executor manifest (executor.toml)");
    schema["description"] = json!(
        "An executor: its name, its wasm component (or a host command), and the capabilities it needs. gatehouse manifest check validates a manifest and says whether its capabilities cover the component's imports."
    );
    let names: Vec<&str> = REGISTRY.iter().map(|s| s.name).collect();
    for defs in ["$defs", "definitions"] {
        if let Some(name) = schema
            .get_mut(defs)
            .and_then(|d| d.get_mut("RawCapability"))
            .and_then(|c| c.get_mut("properties"))
            .and_then(|p| p.get_mut("name"))
        {
            name["enum"] = json!(names);
            name["description"] =
                json!("a capability of the closed registry (gatehouse policy registry)");
        }
    }
    if let Some(p) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut("reverse_pattern"))
    {
        let mut allowed: Vec<Value> = REVERSE_PATTERNS.iter().map(|r| json!(r)).collect();
        allowed.push(Value::Null);
        p["enum"] = Value::Array(allowed);
    }
    schema
}
