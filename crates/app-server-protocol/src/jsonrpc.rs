//! JSON-RPC 2.0 envelopes as the Codex app-server uses them: no `"jsonrpc"`
//! member on output (accepted and ignored on input), ids that are strings or
//! integers and are echoed exactly, and notifications that carry
//! `emittedAtMs`.
//!
//! Shapes: request `{id, method, params?}`, notification `{method, params?}`,
//! response `{id, result}`, error `{id, error: {code, message, data?}}`.

use std::fmt;

use keel_jsonl::ObjectError;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A request id: a string or a 64-bit integer, echoed exactly.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum RequestId {
    Integer(i64),
    String(String),
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Integer(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// The `error` member of an error response. `data` is omitted (not `null`)
/// when absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// A response frame: `{id, result}`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ResponseFrame {
    pub id: RequestId,
    pub result: Value,
}

/// An error frame: `{id, error}`; `id` is `null` when the request's id
/// could not be read (an oversize frame).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ErrorFrame {
    pub id: Option<RequestId>,
    pub error: ErrorObject,
}

/// A server request frame: `{id, method, params}`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct RequestFrame {
    pub id: RequestId,
    pub method: String,
    pub params: Value,
}

/// A notification frame: `{method, params, emittedAtMs}`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotificationFrame {
    pub method: String,
    pub params: Value,
    pub emitted_at_ms: i64,
}

/// One inbound message, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// `{id, method, params?}`; `params` is `None` when the member is absent.
    Request {
        id: RequestId,
        method: String,
        params: Option<Value>,
    },
    /// `{method, params?}`.
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// `{id, result}`: the answer to a server request.
    Response { id: RequestId, result: Value },
    /// `{id, error}`: a server request was refused.
    Error { id: RequestId, error: ErrorObject },
}

/// Why an inbound frame is not a message. Only [`IncomingError::DuplicateKey`]
/// gets a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IncomingError {
    /// Not JSON, not an object, or an object of no known shape.
    Malformed(String),
    /// A JSON array: batches are not supported.
    Batch,
    /// The top-level object names `key` twice
    /// (`{"method":"model/list","method":"fs/writeFile"}`): nothing runs.
    /// `id` is the request's id when it was given once and is usable.
    DuplicateKey { key: String, id: Option<RequestId> },
}

impl fmt::Display for IncomingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IncomingError::Malformed(why) => write!(f, "malformed message: {why}"),
            IncomingError::Batch => f.write_str("batches are not supported"),
            IncomingError::DuplicateKey { key, .. } => write!(f, "duplicate key {key:?}"),
        }
    }
}

/// Reads one frame. A `"jsonrpc"` member is ignored; a key given twice is
/// refused (see [`keel_jsonl::parse_object`]).
pub fn parse_incoming(bytes: &[u8]) -> Result<Incoming, IncomingError> {
    let mut obj = match keel_jsonl::parse_object(bytes) {
        Ok(object) => object.members,
        Err(ObjectError::NotObject { found: "an array" }) => return Err(IncomingError::Batch),
        Err(ObjectError::DuplicateKey { key, raw_id }) => {
            let id = raw_id.and_then(|raw| serde_json::from_str::<RequestId>(raw.get()).ok());
            return Err(IncomingError::DuplicateKey { key, id });
        }
        Err(e @ (ObjectError::NotObject { .. } | ObjectError::Syntax(_))) => {
            return Err(IncomingError::Malformed(e.to_string()));
        }
    };
    let id = match obj.remove("id") {
        None => None,
        Some(v) => Some(
            serde_json::from_value::<RequestId>(v.clone())
                .map_err(|_| IncomingError::Malformed(format!("invalid id {v}")))?,
        ),
    };
    if let Some(method) = obj.remove("method") {
        let Value::String(method) = method else {
            return Err(IncomingError::Malformed("method is not a string".into()));
        };
        let params = obj.remove("params");
        return Ok(match id {
            Some(id) => Incoming::Request { id, method, params },
            None => Incoming::Notification { method, params },
        });
    }
    let Some(id) = id else {
        return Err(IncomingError::Malformed(
            "neither a method nor an id".into(),
        ));
    };
    if let Some(error) = obj.remove("error") {
        let error = serde_json::from_value(error)
            .map_err(|e| IncomingError::Malformed(format!("invalid error member: {e}")))?;
        return Ok(Incoming::Error { id, error });
    }
    match obj.remove("result") {
        Some(result) => Ok(Incoming::Response { id, result }),
        None => Err(IncomingError::Malformed(
            "an id without method, result or error".into(),
        )),
    }
}

/// An empty object, the result of methods that return `{}`.
pub fn empty_object() -> Value {
    Value::Object(Map::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classifies_and_ignores_jsonrpc_member() {
        let r = parse_incoming(br#"{"jsonrpc":"2.0","id":"a","method":"x/y","params":{}}"#);
        assert_eq!(
            r,
            Ok(Incoming::Request {
                id: RequestId::String("a".into()),
                method: "x/y".into(),
                params: Some(json!({}))
            })
        );
        assert!(matches!(
            parse_incoming(br#"{"method":"initialized"}"#),
            Ok(Incoming::Notification { params: None, .. })
        ));
        assert!(matches!(
            parse_incoming(br#"{"id":0,"result":{"decision":"accept"}}"#),
            Ok(Incoming::Response {
                id: RequestId::Integer(0),
                ..
            })
        ));
        assert!(matches!(
            parse_incoming(br#"{"id":0,"error":{"code":-1,"message":"no"}}"#),
            Ok(Incoming::Error { .. })
        ));
    }

    #[test]
    fn refuses_batches_and_garbage() {
        assert_eq!(parse_incoming(b"[1]"), Err(IncomingError::Batch));
        assert!(matches!(
            parse_incoming(b"not json"),
            Err(IncomingError::Malformed(_))
        ));
        assert!(matches!(
            parse_incoming(br#"{"id":1.5,"method":"a"}"#),
            Err(IncomingError::Malformed(_))
        ));
        assert!(matches!(
            parse_incoming(br#"{"id":1}"#),
            Err(IncomingError::Malformed(_))
        ));
    }

    #[test]
    fn a_key_given_twice_is_refused_with_the_id_to_answer() {
        assert_eq!(
            parse_incoming(
                br#"{"id":3,"method":"model/list","method":"fs/writeFile","params":{}}"#
            ),
            Err(IncomingError::DuplicateKey {
                key: "method".into(),
                id: Some(RequestId::Integer(3)),
            })
        );
        assert_eq!(
            parse_incoming(br#"{"method":"a","params":{},"params":{"x":1},"id":"r"}"#),
            Err(IncomingError::DuplicateKey {
                key: "params".into(),
                id: Some(RequestId::String("r".into())),
            })
        );
        // An id given twice leaves nothing to answer to.
        assert_eq!(
            parse_incoming(br#"{"id":1,"id":2,"method":"a"}"#),
            Err(IncomingError::DuplicateKey {
                key: "id".into(),
                id: None,
            })
        );
    }

    #[test]
    fn error_frame_has_null_id_and_no_data() {
        let f = ErrorFrame {
            id: None,
            error: ErrorObject {
                code: -32600,
                message: "too big".into(),
                data: None,
            },
        };
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            json!({"id": null, "error": {"code": -32600, "message": "too big"}})
        );
        let id: RequestId = serde_json::from_value(json!(9_007_199_254_740_993_i64)).unwrap();
        assert_eq!(id, RequestId::Integer(9_007_199_254_740_993));
    }
}
