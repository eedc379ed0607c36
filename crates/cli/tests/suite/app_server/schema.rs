//! Schema conformance: every frame keel sends in the app-server tests is
//! validated against the official Codex JSON Schema (fixtures under
//! `tests/fixtures/codex-app-server-schema/`), stable profile for clients
//! without `experimentalApi`, experimental with it.
//!
//! Notifications are checked against their `params` type in
//! `ServerNotification.json` (`emittedAtMs` is required by keel and
//! declared only by Codex's TypeScript bindings), server requests against
//! `ServerRequest.json`, responses against the `*Response.json` of the
//! request's method, errors against the JSON-RPC error envelope.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::{Value, json};

/// The response types of the methods that take no params.
const NO_PARAMS_RESPONSES: &[(&str, &str)] =
    &[("config/mcpServer/reload", "McpServerRefreshResponse")];

/// Which schema profile a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    Stable,
    Experimental,
}

impl Profile {
    fn dir(self) -> &'static str {
        match self {
            Profile::Stable => "stable",
            Profile::Experimental => "experimental",
        }
    }
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex-app-server-schema")
}

fn load(profile: Profile, file: &str) -> Value {
    let path = fixtures().join(profile.dir()).join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read schema fixture {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The `params` `$ref` of each method of a catalogue (`oneOf` of
/// `{method: {enum: [name]}, params: {$ref}}`).
fn params_refs(catalogue: &Value) -> HashMap<String, Value> {
    catalogue["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["properties"]["method"]["enum"][0]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                v["properties"]["params"].clone(),
            )
        })
        .collect()
}

/// Validators of one profile, built lazily.
pub struct Schemas {
    profile: Profile,
    notifications: Value,
    requests: Value,
    client_requests: HashMap<String, Value>,
    cache: HashMap<String, jsonschema::Validator>,
}

impl Schemas {
    pub fn new(profile: Profile) -> Self {
        let client = load(profile, "ClientRequest.json");
        Self {
            profile,
            notifications: load(profile, "ServerNotification.json"),
            requests: load(profile, "ServerRequest.json"),
            client_requests: params_refs(&client),
            cache: HashMap::new(),
        }
    }

    fn validator_for_ref(
        &mut self,
        key: String,
        root: &str,
        reference: Value,
    ) -> &jsonschema::Validator {
        if !self.cache.contains_key(&key) {
            let defs = match root {
                "notification" => self.notifications["definitions"].clone(),
                _ => self.requests["definitions"].clone(),
            };
            let mut schema = reference;
            schema["$schema"] = json!("http://json-schema.org/draft-07/schema#");
            schema["definitions"] = defs;
            let v = jsonschema::validator_for(&schema)
                .unwrap_or_else(|e| panic!("bad schema for {key}: {e}"));
            self.cache.insert(key.clone(), v);
        }
        &self.cache[&key]
    }

    fn validator_for_file(&mut self, key: String, file: &str) -> &jsonschema::Validator {
        if !self.cache.contains_key(&key) {
            let schema = load(self.profile, file);
            let v = jsonschema::validator_for(&schema)
                .unwrap_or_else(|e| panic!("bad schema {file}: {e}"));
            self.cache.insert(key.clone(), v);
        }
        &self.cache[&key]
    }

    fn check(v: &jsonschema::Validator, instance: &Value, what: &str) -> Result<(), String> {
        let errors: Vec<String> = v
            .iter_errors(instance)
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!("{what}: {}", errors.join("; ")))
        }
    }

    /// Checks one frame keel sent. `request_method` names the method of
    /// the client request a response answers.
    pub fn validate(&mut self, frame: &Value, request_method: Option<&str>) -> Result<(), String> {
        let obj = frame.as_object().ok_or("frame is not an object")?;
        if obj.contains_key("jsonrpc") {
            return Err("keel must not send a \"jsonrpc\" member".into());
        }
        if let Some(method) = obj.get("method").and_then(Value::as_str) {
            let params = frame.get("params").cloned().unwrap_or(Value::Null);
            if obj.contains_key("id") {
                let refs = params_refs(&self.requests);
                let reference = refs
                    .get(method)
                    .cloned()
                    .ok_or_else(|| format!("unknown server request {method}"))?;
                let v = self.validator_for_ref(format!("req:{method}"), "request", reference);
                return Self::check(v, &params, method);
            }
            if !frame["emittedAtMs"].is_i64() {
                return Err(format!("notification {method} has no integer emittedAtMs"));
            }
            let refs = params_refs(&self.notifications);
            let reference = refs.get(method).cloned().ok_or_else(|| {
                format!(
                    "notification {method} is not in the {:?} schema",
                    self.profile
                )
            })?;
            let v = self.validator_for_ref(format!("note:{method}"), "notification", reference);
            return Self::check(v, &params, method);
        }
        if let Some(error) = obj.get("error") {
            if frame["id"].is_null() {
                // Only the oversize error has a null id: code and message, no data.
                let keys: Vec<&String> = error
                    .as_object()
                    .ok_or("error is not an object")?
                    .keys()
                    .collect();
                return if error["code"].is_i64() && error["message"].is_string() && keys.len() == 2
                {
                    Ok(())
                } else {
                    Err(format!("bad error object {error}"))
                };
            }
            let v = self.validator_for_file("error".into(), "JSONRPCError.json");
            return Self::check(v, frame, "error");
        }
        let result = obj
            .get("result")
            .ok_or("neither method, error nor result")?;
        let method = request_method.ok_or("a response to an unknown request")?;
        let reference = self
            .client_requests
            .get(method)
            .cloned()
            .ok_or_else(|| format!("unknown client method {method}"))?;
        let name = match reference["$ref"].as_str() {
            Some(r) => r
                .rsplit('/')
                .next()
                .map(|n| n.replace("Params", "Response"))
                .ok_or_else(|| format!("{method} has no params type"))?,
            // Methods without params name their response here.
            None => NO_PARAMS_RESPONSES
                .iter()
                .find(|(m, _)| *m == method)
                .map(|(_, r)| (*r).to_owned())
                .ok_or_else(|| format!("{method} has no params type"))?,
        };
        let file = if method == "initialize" {
            format!("v1/{name}.json")
        } else {
            format!("v2/{name}.json")
        };
        let v = self.validator_for_file(format!("resp:{method}"), &file);
        Self::check(v, result, &format!("result of {method}"))
    }
}
