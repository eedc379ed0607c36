//! The JSON Schema subset of workflow gates.
//!
//! Owns which keywords a gate schema may use (`type`, `enum`, `const`,
//! `properties`, `required`, `additionalProperties`, `items`, `minLength`,
//! `maxLength`, `minimum`, `maximum`, `title`, `description`, `oneOf`,
//! `anyOf`; anything else is refused when the gate is built), validation of
//! an answer against such a schema (each failure as `{path, keyword,
//! message, expected?}`, paths as JSON pointers under `/answer`), and the
//! canonical hash of a JSON value (SHA-256 of its serialisation with sorted
//! keys and no whitespace).

use serde::Serialize;
use serde_json::{Map, Value, json};

/// The keywords a gate schema may use.
pub(crate) const SUPPORTED: &[&str] = &[
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "title",
    "description",
    "oneOf",
    "anyOf",
];

const TYPES: &[&str] = &[
    "string", "number", "integer", "boolean", "object", "array", "null",
];

/// One way an answer fails its schema.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Violation {
    pub path: String,
    pub keyword: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<Value>,
}

/// Checks that `schema` only uses the supported subset, well-formed.
pub(crate) fn check(schema: &Value) -> Result<(), String> {
    check_at(schema, "#")
}

fn check_at(schema: &Value, at: &str) -> Result<(), String> {
    let obj = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(o) => o,
        _ => return Err(format!("{at}: a schema must be an object or a boolean")),
    };
    for (key, v) in obj {
        let here = format!("{at}/{key}");
        match key.as_str() {
            "type" => {
                let ok = match v {
                    Value::String(t) => TYPES.contains(&t.as_str()),
                    Value::Array(ts) => ts
                        .iter()
                        .all(|t| t.as_str().is_some_and(|t| TYPES.contains(&t))),
                    _ => false,
                };
                if !ok {
                    return Err(format!("{here}: unknown type {v}"));
                }
            }
            "enum" if !v.is_array() => return Err(format!("{here}: must be an array")),
            "properties" => {
                let Some(props) = v.as_object() else {
                    return Err(format!("{here}: must be an object"));
                };
                for (name, sub) in props {
                    check_at(sub, &format!("{here}/{name}"))?;
                }
            }
            "required" => {
                if !v.as_array().is_some_and(|a| a.iter().all(Value::is_string)) {
                    return Err(format!("{here}: must be an array of strings"));
                }
            }
            "additionalProperties" | "items" => check_at(v, &here)?,
            "oneOf" | "anyOf" => {
                let Some(list) = v.as_array().filter(|a| !a.is_empty()) else {
                    return Err(format!("{here}: must be a non-empty array of schemas"));
                };
                for (i, sub) in list.iter().enumerate() {
                    check_at(sub, &format!("{here}/{i}"))?;
                }
            }
            "minLength" | "maxLength" if v.as_u64().is_none() => {
                return Err(format!("{here}: must be a non-negative integer"));
            }
            "minimum" | "maximum" if !v.is_number() => {
                return Err(format!("{here}: must be a number"));
            }
            "title" | "description" if !v.is_string() => {
                return Err(format!("{here}: must be a string"));
            }
            "enum" | "const" | "minLength" | "maxLength" | "minimum" | "maximum" | "title"
            | "description" => {}
            other => return Err(format!("{here}: keyword `{other}` is not supported")),
        }
    }
    Ok(())
}

/// Every way `value` fails `schema` (empty: valid).
pub(crate) fn validate(schema: &Value, value: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    validate_at(schema, value, "/answer", &mut out);
    out
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(v: &Value, t: &str) -> bool {
    match t {
        "integer" => {
            v.as_i64().is_some()
                || v.as_u64().is_some()
                || v.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "number" => v.is_number(),
        other => type_name(v) == other,
    }
}

fn push(
    out: &mut Vec<Violation>,
    path: &str,
    keyword: &'static str,
    message: String,
    expected: Option<Value>,
) {
    out.push(Violation {
        path: path.to_owned(),
        keyword,
        message,
        expected,
    });
}

fn validate_at(schema: &Value, value: &Value, path: &str, out: &mut Vec<Violation>) {
    let obj: &Map<String, Value> = match schema {
        Value::Bool(true) => return,
        Value::Bool(false) => {
            push(
                out,
                path,
                "false",
                "no value is allowed here".to_owned(),
                None,
            );
            return;
        }
        Value::Object(o) => o,
        _ => return,
    };
    if let Some(t) = obj.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !types.iter().any(|t| has_type(value, t)) {
            push(
                out,
                path,
                "type",
                format!("must be {}", types.join(" or ")),
                Some(t.clone()),
            );
            return;
        }
    }
    if let Some(Value::Array(allowed)) = obj.get("enum")
        && !allowed.contains(value)
    {
        push(
            out,
            path,
            "enum",
            "must be equal to one of the allowed values".to_owned(),
            Some(Value::Array(allowed.clone())),
        );
    }
    if let Some(c) = obj.get("const")
        && c != value
    {
        push(
            out,
            path,
            "const",
            "must be equal to constant".to_owned(),
            Some(c.clone()),
        );
    }
    if let Value::String(s) = value {
        let n = s.chars().count() as u64;
        if let Some(min) = obj.get("minLength").and_then(Value::as_u64)
            && n < min
        {
            push(
                out,
                path,
                "minLength",
                format!("must NOT have fewer than {min} characters"),
                Some(json!(min)),
            );
        }
        if let Some(max) = obj.get("maxLength").and_then(Value::as_u64)
            && n > max
        {
            push(
                out,
                path,
                "maxLength",
                format!("must NOT have more than {max} characters"),
                Some(json!(max)),
            );
        }
    }
    if let Some(x) = value.as_f64() {
        if let Some(min) = obj.get("minimum").and_then(Value::as_f64)
            && x < min
        {
            push(
                out,
                path,
                "minimum",
                format!("must be >= {min}"),
                Some(json!(min)),
            );
        }
        if let Some(max) = obj.get("maximum").and_then(Value::as_f64)
            && x > max
        {
            push(
                out,
                path,
                "maximum",
                format!("must be <= {max}"),
                Some(json!(max)),
            );
        }
    }
    if let Value::Object(fields) = value {
        if let Some(Value::Array(required)) = obj.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !fields.contains_key(name) {
                    push(
                        out,
                        path,
                        "required",
                        format!("must have required property '{name}'"),
                        Some(json!(name)),
                    );
                }
            }
        }
        let props = obj.get("properties").and_then(Value::as_object);
        for (name, v) in fields {
            let here = format!("{path}/{}", pointer_escape(name));
            match props.and_then(|p| p.get(name)) {
                Some(sub) => validate_at(sub, v, &here, out),
                None => match obj.get("additionalProperties") {
                    Some(Value::Bool(false)) => push(
                        out,
                        &here,
                        "additionalProperties",
                        "must NOT have additional properties".to_owned(),
                        None,
                    ),
                    Some(sub) => validate_at(sub, v, &here, out),
                    None => {}
                },
            }
        }
    }
    if let (Value::Array(items), Some(sub)) = (value, obj.get("items")) {
        for (i, v) in items.iter().enumerate() {
            validate_at(sub, v, &format!("{path}/{i}"), out);
        }
    }
    if let Some(Value::Array(options)) = obj.get("oneOf") {
        let matching = options
            .iter()
            .filter(|s| validate(s, value).is_empty())
            .count();
        if matching != 1 {
            push(
                out,
                path,
                "oneOf",
                format!("must match exactly one schema in oneOf (matched {matching})"),
                None,
            );
        }
    }
    if let Some(Value::Array(options)) = obj.get("anyOf")
        && !options.iter().any(|s| validate(s, value).is_empty())
    {
        push(
            out,
            path,
            "anyOf",
            "must match a schema in anyOf".to_owned(),
            None,
        );
    }
}

fn pointer_escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// The canonical serialisation: sorted keys, no whitespace.
pub(crate) fn canonical(v: &Value) -> String {
    // serde_json's map keeps keys sorted (the workspace does not enable
    // `preserve_order`), so compact serialisation is canonical.
    v.to_string()
}

/// SHA-256 of the canonical serialisation, lowercase hex.
pub(crate) fn hash(v: &Value) -> String {
    sha256_hex(canonical(v).as_bytes())
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subset_is_enforced() {
        let ok = json!({"type": "object", "properties": {
            "decision": {"type": "string", "enum": ["approve", "reject"]},
            "note": {"type": "string", "maxLength": 10}},
            "required": ["decision"], "additionalProperties": false});
        check(&ok).unwrap();
        let err = check(&json!({"type": "string", "pattern": "^a"})).unwrap_err();
        assert!(err.contains("`pattern`"), "{err}");
        assert!(check(&json!({"properties": {"x": {"format": "email"}}})).is_err());
        assert!(check(&json!({"type": "strin"})).is_err());
        assert!(check(&json!({"oneOf": []})).is_err());
    }

    #[test]
    fn answers_are_validated_with_paths() {
        let schema = json!({"type": "object", "properties": {
            "decision": {"type": "string", "enum": ["approve", "reject"]},
            "n": {"type": "integer", "minimum": 1}},
            "required": ["decision"], "additionalProperties": false});
        assert!(validate(&schema, &json!({"decision": "approve", "n": 2})).is_empty());
        let v = validate(&schema, &json!({"decision": "maybe", "n": 0, "x": 1}));
        let got: Vec<(&str, &str)> = v.iter().map(|e| (e.path.as_str(), e.keyword)).collect();
        assert_eq!(
            got,
            [
                ("/answer/decision", "enum"),
                ("/answer/n", "minimum"),
                ("/answer/x", "additionalProperties")
            ]
        );
        let v = validate(&json!({"type": "boolean"}), &json!("yes"));
        assert_eq!(v[0].message, "must be boolean");
        assert_eq!(validate(&schema, &json!({}))[0].keyword, "required");
        let one = json!({"oneOf": [{"type": "string"}, {"type": "number"}]});
        assert!(validate(&one, &json!(1)).is_empty());
        assert_eq!(validate(&one, &json!(true))[0].keyword, "oneOf");
    }

    #[test]
    fn hashes_are_canonical() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": [true, null]}"#).unwrap();
        assert_eq!(canonical(&a), r#"{"a":[true,null],"b":1}"#);
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hash(&a).len(), 64);
    }
}
