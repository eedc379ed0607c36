//! The flat frames keel writes (everything but event frames, which
//! [`crate::events`] builds) and the sink they go through.
//!
//! Owns the exact shape of `ready`, `response`, `host_tool_call`,
//! `host_tool_cancel`, `host_uri_request`, `host_uri_cancel`,
//! `extension_ui_request` and `workflow_gate` frames, and [`Out`], the
//! cloneable handle on the writer task. It does not decide when a frame is
//! sent.

use crate::command::WireId;
use keel_jsonl::FrameSender;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::wire_errors::WireError;

/// `{"type":"ready",…}`: the first frame, written once the session is open.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Ready {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub protocol_version: u32,
    pub supported_protocol_versions: Vec<u32>,
    pub max_frame_bytes: usize,
}

/// `{"id"?, "type":"response", "command", "success", "data"? | "error"?}`.
#[derive(Debug, Serialize)]
pub(crate) struct Response<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<&'a WireId>,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub command: &'a str,
    pub success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
}

/// `host_tool_call`: the host should run one of its tools.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HostToolCall<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: &'a str,
    pub tool_call_id: &'a str,
    pub tool_name: &'a str,
    pub arguments: &'a Value,
}

/// `host_tool_cancel` / `host_uri_cancel`: stop request `targetId`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Cancel<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: &'a str,
    pub target_id: &'a str,
}

/// `host_uri_request`: read or write a host-owned URL.
#[derive(Debug, Serialize)]
pub(crate) struct HostUriRequest<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: &'a str,
    pub operation: &'a str,
    pub url: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<&'a str>,
}

/// `extension_ui_request`: `id`, `method`, then the method's own fields.
#[derive(Debug, Serialize)]
pub(crate) struct UiRequest<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: &'a str,
    pub method: &'a str,
    #[serde(flatten)]
    pub fields: &'a Map<String, Value>,
}

/// The handle on the writer task. Sending never fails from the caller's
/// point of view: once the output is gone, frames are dropped (and logged).
/// A frame over [`keel_jsonl::MAX_OUT_FRAME_BYTES`] is never written: a
/// response is answered with an error naming the size instead, any other
/// frame is dropped and logged at error level.
#[derive(Clone, Debug)]
pub(crate) struct Out {
    sender: FrameSender,
}

impl Out {
    pub fn new(sender: FrameSender) -> Self {
        Self { sender }
    }

    pub async fn send<T: Serialize + ?Sized>(&self, frame: &T) {
        log_unsent(self.sender.send_json(frame).await);
    }

    pub async fn respond_ok(&self, id: Option<&WireId>, command: &str, data: Option<Value>) {
        let sent = self
            .sender
            .send_json(&Response {
                id,
                kind: "response",
                command,
                success: true,
                data,
                error: None,
            })
            .await;
        match sent {
            Err(keel_jsonl::Error::OversizeOut { len, max }) => {
                let error = crate::wire_errors::response_too_large(command, len, max);
                self.respond_err(id, command, &error).await;
            }
            other => log_unsent(other),
        }
    }

    pub async fn respond_err(&self, id: Option<&WireId>, command: &str, error: &WireError) {
        self.send(&Response {
            id,
            kind: "response",
            command,
            success: false,
            data: None,
            error: Some(error.to_value()),
        })
        .await;
    }
}

fn log_unsent(sent: keel_jsonl::Result<()>) {
    match sent {
        Ok(()) => {}
        Err(e @ keel_jsonl::Error::OversizeOut { .. }) => {
            tracing::error!(error = %e, "dropping a frame that is too large to write");
        }
        Err(e) => tracing::debug!(error = %e, "dropping a frame: the output is closed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A response over the outgoing cap becomes an error naming its size;
    /// the output keeps working.
    #[tokio::test]
    async fn an_oversize_response_is_answered_with_an_error() {
        let (w, r) = tokio::io::duplex(1 << 16);
        let (sender, task) = keel_jsonl::spawn_writer(w);
        let out = Out::new(sender);
        let reader = tokio::spawn(async move {
            let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(r));
            let mut seen = Vec::new();
            while let Ok(Some(line)) = lines.next_line().await {
                seen.push(line);
            }
            seen
        });
        let id = serde_json::value::RawValue::from_string("7".to_owned()).unwrap();
        let big = "a".repeat(keel_jsonl::MAX_OUT_FRAME_BYTES);
        out.respond_ok(Some(&*id), "get_messages", Some(json!({ "text": big })))
            .await;
        out.respond_ok(Some(&*id), "get_state", None).await;
        drop(out);
        task.await.unwrap().unwrap();
        let seen = reader.await.unwrap();
        assert_eq!(seen.len(), 2, "{seen:?}");
        let error: Value = serde_json::from_str(&seen[0]).unwrap();
        assert_eq!(error["id"], 7);
        assert_eq!(error["success"], false);
        assert!(
            error["error"]
                .as_str()
                .unwrap()
                .contains("over the limit of 67108864 bytes on one frame"),
            "{error}"
        );
        assert_eq!(
            serde_json::from_str::<Value>(&seen[1]).unwrap()["success"],
            true
        );
    }

    #[test]
    fn response_shapes() {
        let id = serde_json::value::RawValue::from_string("42".to_owned()).unwrap();
        let ok = Response {
            id: Some(&*id),
            kind: "response",
            command: "get_state",
            success: true,
            data: Some(Value::Null),
            error: None,
        };
        assert_eq!(
            serde_json::to_string(&ok).unwrap(),
            r#"{"id":42,"type":"response","command":"get_state","success":true,"data":null}"#
        );
        let err = Response {
            id: None,
            kind: "response",
            command: "x",
            success: false,
            data: None,
            error: Some(json!("Unknown command: x")),
        };
        assert_eq!(
            serde_json::to_string(&err).unwrap(),
            r#"{"type":"response","command":"x","success":false,"error":"Unknown command: x"}"#
        );
    }
}
