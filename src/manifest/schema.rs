//! `input_schema`: the executor's input as a JSON Schema, checked for the
//! shape a tool's `inputSchema` must have (MCP): an object schema at the
//! top, and every keyword the checks below know with a value of its kind.
//! Keywords it does not know are kept, as JSON Schema allows.

use serde_json::{Map, Value};

/// The JSON Schema type names.
const TYPES: [&str; 7] = [
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// Checks `schema` (the whole `input_schema`); the error names the field
/// (`input_schema.properties.path.type`) and what is wrong.
pub(super) fn check(schema: &Value) -> Result<(), (String, String)> {
    let field = "input_schema";
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            return Err((
                format!("{field}.type"),
                format!("the input is a JSON object: `type` must be `object`, not `{other}`"),
            ))
        }
        None => {
            return Err((
                format!("{field}.type"),
                "required: the input is a JSON object (`type = \"object\"`)".into(),
            ))
        }
    }
    node(schema, field)
}

fn node(schema: &Value, field: &str) -> Result<(), (String, String)> {
    let Some(obj) = schema.as_object() else {
        // `true` and `false` are schemas too.
        return if schema.is_boolean() {
            Ok(())
        } else {
            Err((field.into(), format!("a schema is a table, not `{schema}`")))
        };
    };
    for (keyword, check) in KEYWORDS {
        if let Some(value) = obj.get(keyword) {
            check(obj, keyword, value, field)?;
        }
    }
    Ok(())
}

/// The check of one keyword of a schema: the schema's table, the keyword,
/// its value, and where the schema is.
type KeywordCheck = fn(&Map<String, Value>, &str, &Value, &str) -> Result<(), (String, String)>;

/// The keywords a schema's table is checked for, in order.
const KEYWORDS: [(&str, KeywordCheck); 9] = [
    ("type", check_type),
    ("properties", check_properties),
    ("required", check_required),
    ("items", check_subschema),
    ("additionalProperties", check_subschema),
    ("enum", check_enum),
    ("anyOf", check_subschemas),
    ("oneOf", check_subschemas),
    ("allOf", check_subschemas),
];

/// `type`: one of [`TYPES`], or a non-empty array of them.
fn check_type(
    _: &Map<String, Value>,
    _: &str,
    t: &Value,
    field: &str,
) -> Result<(), (String, String)> {
    let names: Vec<&Value> = match t {
        Value::Array(a) if !a.is_empty() => a.iter().collect(),
        other => vec![other],
    };
    for n in names {
        if !n.as_str().is_some_and(|s| TYPES.contains(&s)) {
            return Err((
                format!("{field}.type"),
                format!("unknown type `{n}`: one of {}", TYPES.join(", ")),
            ));
        }
    }
    Ok(())
}

/// `properties`: a table of schemas.
fn check_properties(
    _: &Map<String, Value>,
    _: &str,
    p: &Value,
    field: &str,
) -> Result<(), (String, String)> {
    let Some(props) = p.as_object() else {
        return Err((
            format!("{field}.properties"),
            "a table of schemas, one per property".into(),
        ));
    };
    for (k, v) in props {
        node(v, &format!("{field}.properties.{k}"))?;
    }
    Ok(())
}

/// `required`: property names, each among `properties` when it is there.
fn check_required(
    obj: &Map<String, Value>,
    _: &str,
    r: &Value,
    field: &str,
) -> Result<(), (String, String)> {
    let names = r.as_array().filter(|a| a.iter().all(Value::is_string));
    let Some(names) = names else {
        return Err((
            format!("{field}.required"),
            "an array of property names".into(),
        ));
    };
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        if let Some(missing) = names
            .iter()
            .filter_map(Value::as_str)
            .find(|n| !props.contains_key(*n))
        {
            return Err((
                format!("{field}.required"),
                format!("`{missing}` is required but not among `properties`"),
            ));
        }
    }
    Ok(())
}

/// `items`, `additionalProperties`: a schema.
fn check_subschema(
    _: &Map<String, Value>,
    keyword: &str,
    s: &Value,
    field: &str,
) -> Result<(), (String, String)> {
    node(s, &format!("{field}.{keyword}"))
}

/// `enum`: a non-empty array.
fn check_enum(
    _: &Map<String, Value>,
    _: &str,
    e: &Value,
    field: &str,
) -> Result<(), (String, String)> {
    if e.as_array().is_none_or(|a| a.is_empty()) {
        return Err((
            format!("{field}.enum"),
            "a non-empty array of values".into(),
        ));
    }
    Ok(())
}

/// `anyOf`, `oneOf`, `allOf`: a non-empty array of schemas.
fn check_subschemas(
    _: &Map<String, Value>,
    k: &str,
    list: &Value,
    field: &str,
) -> Result<(), (String, String)> {
    let Some(list) = list.as_array().filter(|a| !a.is_empty()) else {
        return Err((
            format!("{field}.{k}"),
            "a non-empty array of schemas".into(),
        ));
    };
    for (i, s) in list.iter().enumerate() {
        node(s, &format!("{field}.{k}[{i}]"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;
    use serde_json::json;

    #[test]
    fn an_object_schema_passes_and_mistakes_name_their_field() {
        assert_eq!(
            check(&json!({"type": "object", "required": ["path"],
                          "properties": {"path": {"type": "string"},
                                         "n": {"type": ["integer", "null"]},
                                         "tags": {"type": "array", "items": {"type": "string"}}}})),
            Ok(())
        );
        let err = |v| check(&v).unwrap_err();
        assert_eq!(err(json!({})).0, "input_schema.type");
        assert_eq!(err(json!({"type": "string"})).0, "input_schema.type");
        assert_eq!(
            err(json!({"type": "object", "properties": {"a": {"type": "text"}}})),
            (
                "input_schema.properties.a.type".to_string(),
                "unknown type `\"text\"`: one of object, array, string, number, integer, boolean, null".to_string()
            )
        );
        assert_eq!(
            err(json!({"type": "object", "required": ["b"], "properties": {"a": {}}})),
            (
                "input_schema.required".to_string(),
                "`b` is required but not among `properties`".to_string()
            )
        );
        assert_eq!(
            err(json!({"type": "object", "properties": {"a": {"items": 3}}})).0,
            "input_schema.properties.a.items"
        );
        assert_eq!(
            err(json!({"type": "object", "enum": []})).0,
            "input_schema.enum"
        );
    }
}
