//! Model failures as turn errors: keel's error kinds (from `keel-llm`,
//! recorded on the failed assistant message) mapped onto `CodexErrorInfo`
//! the way the Codex server reports the same failures (HTTP 500 →
//! `internalServerError`, 429 after retries →
//! `responseTooManyFailedAttempts`, a cut stream → `other`).

use keel_app_server_protocol::v2::{CodexErrorInfo, TurnError};

/// The HTTP status at the start of a keel-llm message (`HTTP 500 …`).
fn http_status(message: &str) -> Option<u16> {
    let rest = message.strip_prefix("HTTP ")?;
    rest.get(..3)?.parse().ok()
}

/// The error info for a keel error kind and message. The HTTP status,
/// when the message starts with one, decides first.
pub fn error_info(kind: Option<&str>, message: &str) -> CodexErrorInfo {
    let status = http_status(message);
    match status {
        Some(429) => {
            return CodexErrorInfo::ResponseTooManyFailedAttempts {
                http_status_code: Some(429),
            };
        }
        Some(500) => return CodexErrorInfo::InternalServerError,
        Some(502..=504 | 529) => return CodexErrorInfo::ServerOverloaded,
        _ => {}
    }
    match kind.unwrap_or("other") {
        "unauthorized" => CodexErrorInfo::Unauthorized,
        "badRequest" => CodexErrorInfo::BadRequest,
        "contextWindowExceeded" => CodexErrorInfo::ContextWindowExceeded,
        "rateLimitExceeded" => CodexErrorInfo::ResponseTooManyFailedAttempts {
            http_status_code: status.or(Some(429)),
        },
        "serverOverloaded" => CodexErrorInfo::ServerOverloaded,
        "modelNotFound" => CodexErrorInfo::ModelNotFound,
        "connection" => CodexErrorInfo::HttpConnectionFailed {
            http_status_code: status,
        },
        "timeout" => CodexErrorInfo::ResponseStreamDisconnected {
            http_status_code: status,
        },
        _ => CodexErrorInfo::Other,
    }
}

/// A turn error from a failed assistant message.
pub fn turn_error(kind: Option<&str>, message: &str) -> TurnError {
    TurnError {
        message: message.to_owned(),
        codex_error_info: Some(error_info(kind, message)),
        additional_details: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_like_the_reference_transcripts() {
        assert_eq!(
            error_info(
                Some("serverOverloaded"),
                "HTTP 500 Internal Server Error from x"
            ),
            CodexErrorInfo::InternalServerError
        );
        assert_eq!(
            error_info(
                Some("serverOverloaded"),
                "HTTP 503 Service Unavailable from x"
            ),
            CodexErrorInfo::ServerOverloaded
        );
        assert_eq!(
            error_info(
                Some("rateLimitExceeded"),
                "HTTP 429 Too Many Requests from x"
            ),
            CodexErrorInfo::ResponseTooManyFailedAttempts {
                http_status_code: Some(429)
            }
        );
        assert_eq!(error_info(Some("streamCut"), "cut"), CodexErrorInfo::Other);
        assert_eq!(
            error_info(Some("other"), "HTTP 500 Internal Server Error from x"),
            CodexErrorInfo::InternalServerError
        );
    }
}
