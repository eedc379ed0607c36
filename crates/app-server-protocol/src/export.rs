//! keel's own schema of the protocol, generated from the Rust types
//! (`schemars` derives on every type of [`crate::v2`]), for `keel
//! app-server generate-json-schema` and `generate-ts`.
//!
//! JSON Schema (draft-07, laid out like Codex's): `ClientRequest.json`
//! (a `oneOf` of `{id, method, params}` for every request keel answers,
//! [`crate::surface::REQUESTS`]), `ServerNotification.json` (every
//! notification keel sends), `ServerRequest.json` (the approval requests),
//! and `v2/<Type>.json`, one self-contained schema per params and result
//! type. TypeScript: one file, `keel_app_server_protocol.ts`, with a type
//! per definition and the three unions. Output is deterministic, so the
//! checked-in copy under `crates/app-server-protocol/schema/` can be
//! diffed against a fresh one. The files are returned as data (relative
//! path → text); whoever asked writes them (the CLI).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use schemars::generate::SchemaSettings;
use schemars::{Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::RequestId;
use crate::surface::REQUESTS;
use crate::v2::{ServerNotification, ServerRequest};

/// The settings every schema is generated with (draft-07, `definitions`).
pub fn settings() -> SchemaSettings {
    SchemaSettings::draft07()
}

/// Every file of the JSON Schema export: relative path → content.
pub fn json_files() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut put = |path: String, value: &Value| {
        let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
        text.push('\n');
        out.insert(path, text);
    };
    put("ClientRequest.json".into(), &client_requests());
    put(
        "ServerNotification.json".into(),
        &catalogue::<ServerNotification>("ServerNotification", false),
    );
    put(
        "ServerRequest.json".into(),
        &catalogue::<ServerRequest>("ServerRequest", true),
    );
    for r in REQUESTS {
        let (params, result) = (r.names)();
        let (p, res) = (r.roots)();
        put(format!("v2/{params}.json"), p.as_value());
        put(format!("v2/{result}.json"), res.as_value());
    }
    out
}

fn definitions(mut generator: SchemaGenerator) -> Value {
    Value::Object(generator.take_definitions(true).into_iter().collect())
}

/// `{id, method, params}` for every request keel answers.
fn client_requests() -> Value {
    let mut generator = settings().into_generator();
    let id = generator.subschema_for::<RequestId>();
    let variants: Vec<Value> = REQUESTS
        .iter()
        .map(|r| {
            let params = (r.params)(&mut generator);
            json!({
                "type": "object",
                "title": format!("{}Request", r.method.replace('/', "_")),
                "required": ["id", "method", "params"],
                "properties": {
                    "id": id.as_value(),
                    "method": {"type": "string", "enum": [r.method]},
                    "params": params.as_value(),
                },
            })
        })
        .collect();
    // Results are part of the schema too (`v2/<Result>.json`); register
    // them so the bundle's definitions cover them.
    for r in REQUESTS {
        (r.result)(&mut generator);
    }
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "ClientRequest",
        "oneOf": variants,
        "definitions": definitions(generator),
    })
}

/// A catalogue enum (`{method, params}` variants); server requests also
/// carry an integer `id`.
fn catalogue<T: schemars::JsonSchema>(title: &str, with_id: bool) -> Value {
    let mut generator = settings().into_generator();
    let schema: Schema = generator.subschema_for::<T>();
    let mut root = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": title,
    });
    // The enum itself is a definition; inline its variants at the root.
    let defs = generator.take_definitions(true);
    let name = schema
        .as_value()
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())
        .unwrap_or(title)
        .to_owned();
    let mut defs: Map<String, Value> = defs.into_iter().collect();
    let body = defs.remove(&name).unwrap_or(Value::Null);
    if let (Some(root), Value::Object(body)) = (root.as_object_mut(), body) {
        for (k, mut v) in body {
            if k == "oneOf"
                && with_id
                && let Some(variants) = v.as_array_mut()
            {
                for variant in variants {
                    if let Some(props) = variant["properties"].as_object_mut() {
                        props.insert("id".into(), json!({"type": "integer"}));
                    }
                    if let Some(req) = variant["required"].as_array_mut() {
                        req.insert(0, json!("id"));
                    }
                }
            }
            if k != "$schema" && k != "title" {
                root.insert(k, v);
            }
        }
        root.insert("definitions".into(), Value::Object(defs));
    }
    root
}

/// The TypeScript export: relative path → content.
pub fn ts_files() -> BTreeMap<String, String> {
    let mut defs: BTreeMap<String, Value> = BTreeMap::new();
    let mut unions: Vec<(String, Value)> = Vec::new();
    for (title, file) in [
        ("ClientRequest", "ClientRequest.json"),
        ("ServerNotification", "ServerNotification.json"),
        ("ServerRequest", "ServerRequest.json"),
    ] {
        let files = json_files();
        let Some(v) = files
            .get(file)
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
        else {
            continue;
        };
        if let Some(d) = v.get("definitions").and_then(Value::as_object) {
            for (k, s) in d {
                defs.entry(k.clone()).or_insert_with(|| s.clone());
            }
        }
        let mut body = v.clone();
        if let Some(o) = body.as_object_mut() {
            o.remove("definitions");
            o.remove("$schema");
            o.remove("title");
        }
        unions.push((title.to_owned(), body));
    }
    let mut text = String::from(
        "// keel's app-server protocol, generated from keel's Rust types by\n\
         // `keel app-server generate-ts`. Do not edit.\n\n",
    );
    for (name, schema) in defs.iter().chain(unions.iter().map(|(n, s)| (n, s))) {
        let _ = writeln!(text, "export type {name} = {};\n", ts(schema));
    }
    BTreeMap::from([("keel_app_server_protocol.ts".to_owned(), text)])
}

fn ts_key(k: &str) -> String {
    if !k.is_empty()
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !k.starts_with(|c: char| c.is_ascii_digit())
    {
        k.to_owned()
    } else {
        Value::String(k.to_owned()).to_string()
    }
}

fn union(items: &[Value]) -> String {
    let parts: Vec<String> = items.iter().map(|s| format!("({})", ts(s))).collect();
    if parts.is_empty() {
        "never".into()
    } else {
        parts.join(" | ")
    }
}

/// A schema as a TypeScript type.
fn ts(schema: &Value) -> String {
    let Some(o) = schema.as_object() else {
        return match schema {
            Value::Bool(false) => "never".into(),
            _ => "unknown".into(),
        };
    };
    if let Some(r) = o.get("$ref").and_then(Value::as_str) {
        return r.rsplit('/').next().unwrap_or("unknown").to_owned();
    }
    if let Some(c) = o.get("const") {
        return c.to_string();
    }
    if let Some(e) = o.get("enum").and_then(Value::as_array) {
        return e
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(" | ");
    }
    let mut parts: Vec<String> = Vec::new();
    for key in ["oneOf", "anyOf"] {
        if let Some(items) = o.get(key).and_then(Value::as_array) {
            parts.push(union(items));
        }
    }
    if let Some(items) = o.get("allOf").and_then(Value::as_array) {
        parts.extend(items.iter().map(|s| format!("({})", ts(s))));
    }
    let types: Vec<&str> = match o.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() {
        let alts: Vec<String> = types.iter().map(|t| ts_type(t, o)).collect();
        parts.push(alts.join(" | "));
    } else if o.contains_key("properties") {
        parts.push(ts_type("object", o));
    }
    match parts.len() {
        0 => "unknown".into(),
        1 => parts.remove(0),
        _ => parts
            .into_iter()
            .map(|p| format!("({p})"))
            .collect::<Vec<_>>()
            .join(" & "),
    }
}

fn ts_type(t: &str, o: &Map<String, Value>) -> String {
    match t {
        "string" => "string".into(),
        "integer" | "number" => "number".into(),
        "boolean" => "boolean".into(),
        "null" => "null".into(),
        "array" => format!(
            "Array<{}>",
            o.get("items").map(ts).unwrap_or("unknown".into())
        ),
        "object" => {
            let required: Vec<&str> = o
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let props = o.get("properties").and_then(Value::as_object);
            match props {
                Some(props) if !props.is_empty() => {
                    let fields: Vec<String> = props
                        .iter()
                        .map(|(k, v)| {
                            let opt = if required.contains(&k.as_str()) {
                                ""
                            } else {
                                "?"
                            };
                            format!("{}{opt}: {}", ts_key(k), ts(v))
                        })
                        .collect();
                    format!("{{ {} }}", fields.join("; "))
                }
                _ => match o.get("additionalProperties") {
                    Some(Value::Object(v)) => {
                        format!("{{ [key: string]: {} }}", ts(&Value::Object(v.clone())))
                    }
                    _ => "{ [key: string]: unknown }".into(),
                },
            }
        }
        _ => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn write_all(dir: &Path, files: BTreeMap<String, String>) {
        for (rel, text) in files {
            let path = dir.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    /// The checked-in copy (`schema/`) is what the types generate; set
    /// `KEEL_BLESS=1` to rewrite it after changing a type.
    #[test]
    fn the_checked_in_schema_is_current() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema");
        let mut files: Vec<(String, String)> = json_files()
            .into_iter()
            .map(|(k, v)| (format!("json/{k}"), v))
            .collect();
        files.extend(ts_files().into_iter().map(|(k, v)| (format!("ts/{k}"), v)));
        if std::env::var_os("KEEL_BLESS").is_some() {
            let _ = std::fs::remove_dir_all(&root);
            write_all(&root.join("json"), json_files());
            write_all(&root.join("ts"), ts_files());
        }
        for (rel, text) in &files {
            let on_disk = std::fs::read_to_string(root.join(rel)).unwrap_or_default();
            assert!(
                on_disk == *text,
                "schema/{rel} is stale: run `KEEL_BLESS=1 cargo test -p keel-app-server-protocol`"
            );
        }
        let mut count = 0;
        for sub in ["json", "json/v2", "ts"] {
            count += std::fs::read_dir(root.join(sub))
                .unwrap()
                .flatten()
                .filter(|e| e.path().is_file())
                .count();
        }
        assert_eq!(count, files.len(), "schema/ holds files nothing generates");
    }

    #[test]
    fn catalogues_name_every_method() {
        let files = json_files();
        let client: Value = serde_json::from_str(&files["ClientRequest.json"]).unwrap();
        let methods: Vec<&str> = client["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["properties"]["method"]["enum"][0].as_str().unwrap())
            .collect();
        assert_eq!(methods, crate::surface::methods());
        let notes: Value = serde_json::from_str(&files["ServerNotification.json"]).unwrap();
        assert!(notes.to_string().contains("item/agentMessage/delta"));
        let requests: Value = serde_json::from_str(&files["ServerRequest.json"]).unwrap();
        assert!(
            requests
                .to_string()
                .contains("item/fileChange/requestApproval")
        );
        let ts = &ts_files()["keel_app_server_protocol.ts"];
        assert!(ts.contains("export type ThreadStartParams = "), "{ts}");
        assert!(ts.contains("export type ClientRequest = "));
    }
}
