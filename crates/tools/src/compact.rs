//! The compact form of a tool's spec, for small models: the first sentence
//! of its description and of each parameter's, and only the parameters it
//! requires. Keywords that constrain a value (`type`, `enum`, `items`,
//! `minimum`, …) are kept; what only explains it is shortened. A model
//! offered the compact form cannot pass the optional parameters (the
//! local dialect's grammar follows the schema it is given), which a small
//! model does not use anyway.
//!
//! A pure function of the spec: it knows no tool.

use keel_protocol::ToolSpec;
use serde_json::Value;

/// The first sentence of `text` (up to and with the first `. ` or
/// newline), or all of it.
pub fn first_sentence(text: &str) -> &str {
    let text = text.trim();
    let line = text.lines().next().unwrap_or_default();
    match line.find(". ") {
        Some(at) => &line[..=at],
        None => line,
    }
}

/// `spec` in its compact form (see the module docs).
pub fn compact_spec(spec: &ToolSpec) -> ToolSpec {
    ToolSpec {
        name: spec.name.clone(),
        description: first_sentence(&spec.description).to_owned(),
        parameters: compact_schema(&spec.parameters, true),
    }
}

/// `schema` with descriptions cut to a sentence and, at the top (`top`),
/// only the required properties.
fn compact_schema(schema: &Value, top: bool) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let required: Vec<&str> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = serde_json::Map::new();
    for (k, v) in map {
        let v = match (k.as_str(), v) {
            ("description", Value::String(d)) => Value::String(first_sentence(d).to_owned()),
            ("properties", Value::Object(props)) => Value::Object(
                props
                    .iter()
                    .filter(|(name, _)| !top || required.contains(&name.as_str()))
                    .map(|(name, p)| (name.clone(), compact_schema(p, false)))
                    .collect(),
            ),
            ("items", item) => compact_schema(item, false),
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_what_a_small_model_needs_and_nothing_else() {
        let spec = ToolSpec {
            name: "read".into(),
            description: "Read a file. Text comes back with line numbers.\nMore.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file. Relative or absolute."},
                    "offset": {"type": "integer", "minimum": 1},
                    "lines": {"type": "array", "items": {"type": "string", "description": "A. B."}},
                },
                "required": ["path", "lines"],
            }),
        };
        let c = compact_spec(&spec);
        assert_eq!(c.name, "read");
        assert_eq!(c.description, "Read a file.");
        assert_eq!(
            c.parameters,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file."},
                    "lines": {"type": "array", "items": {"type": "string", "description": "A."}},
                },
                "required": ["path", "lines"],
            })
        );
        assert_eq!(first_sentence("No full stop"), "No full stop");
        assert_eq!(first_sentence("v1.2 is out. Yes."), "v1.2 is out.");
    }
}
