//! `gatehouse manifest schema`: the JSON Schema of `executor.toml`, for
//! editors. Its shape is generated from the types that parse the file
//! ([`crate::manifest::json_schema`]); the closed lists the validator
//! checks (capability names, reverse patterns) are added from the
//! registry and the catalogue.

use serde_json::{json, Value};

use crate::manifest::REVERSE_PATTERNS;
use crate::policy::REGISTRY;

const DESCRIPTIONS: [(&str, &str); 10] = [
    ("name", "the executor's name: [a-z0-9][a-z0-9_-]{0,63}"),
    ("description", "what the executor does, for people"),
    ("component", "the wasm component (or preview 1 module), relative to this file; or `command`"),
    ("command", "a host command instead of a component: the program and its arguments; needs `code:exec` on the program and the program in `tools`"),
    ("sha256", "pins the component: 64 lowercase hex digits (DIGEST_MISMATCH otherwise)"),
    ("revertible", "whether the executor's effects can be undone; needs `reverse_pattern`"),
    ("reverse_pattern", "how undo reverses it, from the closed catalogue"),
    ("tools", "the programs `code:exec` may run; exactly when `code:exec` is declared"),
    ("input_schema", "the JSON Schema of the executor's input"),
    ("capabilities", "what the executor needs, each with its target (`gatehouse policy registry` lists them)"),
];

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
    // Words for editors; a field the types gain later appears without them.
    for (field, words) in DESCRIPTIONS {
        if let Some(p) = schema.get_mut("properties").and_then(|p| p.get_mut(field)) {
            p["description"] = json!(words);
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
