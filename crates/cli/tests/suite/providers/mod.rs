//! Every wire dialect runs the same agent tests against the mock model
//! server: a text answer, several tool calls in one answer, abort
//! mid-stream, retry after a 429 with `retry-after`, retry after a cut
//! stream, and a 401 that ends the turn with `unauthorized`.
//!
//! [`Dialect`] knows how each dialect answers on the mock; [`dialect_tests`]
//! instantiates the cases of [`cases`] once per dialect, so they run in
//! parallel and filter by name (`providers::anthropic_messages::retry`). The other
//! modules test configuration, the catalogue and model switching.

mod app_server;
mod cases;
mod catalog;

use keel_test_support::{KeelCommand, MockResponse, MockToolCall, anthropic, responses};
use serde_json::{Value, json};

use super::Env;
use super::rpc::Rpc;

/// The environment variable holding the mock provider's key.
pub const KEY_ENV: &str = "MOCK_PROVIDER_KEY";
/// The key itself (never printed or stored).
pub const KEY: &str = "mock-secret-key-0123456789";

/// One wire dialect as the mock speaks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Completions,
    Responses,
    Anthropic,
}

impl Dialect {
    /// The name in `config.toml`.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Completions => "openai-completions",
            Dialect::Responses => "openai-responses",
            Dialect::Anthropic => "anthropic-messages",
        }
    }

    /// The path keel must post to.
    pub fn path(self) -> &'static str {
        match self {
            Dialect::Completions => "/v1/chat/completions",
            Dialect::Responses => "/v1/responses",
            Dialect::Anthropic => "/v1/messages",
        }
    }

    pub fn text(self, text: &str) -> MockResponse {
        match self {
            Dialect::Completions => MockResponse::text(text),
            Dialect::Responses => responses::text(text),
            Dialect::Anthropic => anthropic::text(text),
        }
    }

    pub fn tool_calls(self, calls: Vec<MockToolCall>) -> MockResponse {
        match self {
            Dialect::Completions => MockResponse::tool_calls(calls),
            Dialect::Responses => responses::tool_calls(calls),
            Dialect::Anthropic => anthropic::tool_calls(calls),
        }
    }

    /// How many events of [`Dialect::text`] come before the first text
    /// delta.
    pub fn events_before_text(self) -> usize {
        match self {
            Dialect::Completions => 1,
            Dialect::Responses | Dialect::Anthropic => 3,
        }
    }

    /// An HTTP error as this dialect's servers send it.
    pub fn error(self, status: u16, kind: &str, message: &str) -> MockResponse {
        let body = match self {
            Dialect::Completions | Dialect::Responses => {
                responses::error_body(message, kind, Some(kind))
            }
            Dialect::Anthropic => anthropic::error_body(kind, message),
        };
        MockResponse::error(status, body)
    }

    pub fn unauthorized(self) -> MockResponse {
        match self {
            Dialect::Anthropic => self.error(401, "authentication_error", "invalid x-api-key"),
            _ => self.error(401, "invalid_request_error", "Incorrect API key provided"),
        }
    }

    pub fn rate_limited(self) -> MockResponse {
        match self {
            Dialect::Anthropic => {
                self.error(429, "rate_limit_error", "Number of requests exceeded")
            }
            _ => self.error(
                429,
                "rate_limit_exceeded",
                "Rate limit reached for requests",
            ),
        }
    }

    /// The key as the server received it.
    pub fn sent_key(self, req: &keel_test_support::CapturedRequest) -> Option<String> {
        match self {
            Dialect::Anthropic => req.header("x-api-key").map(str::to_owned),
            _ => req
                .header("authorization")
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_owned),
        }
    }
}

/// `config.toml` for a provider `mock` of this dialect on the mock server,
/// with a catalogue entry for `mock-model` (so costs are computed) and
/// short retry delays.
pub fn config_toml(env: &Env, dialect: Dialect) -> String {
    format!(
        r#"[model]
provider = "mock"
id = "mock-model"

[providers.mock]
dialect = "{dialect}"
base_url = "{base}"
api_key_env = "{KEY_ENV}"

[[models]]
provider = "mock"
id = "mock-model"
name = "Mock Model"
context_window = 50000
max_output_tokens = 2000
cost = {{ input = 3.0, output = 15.0, cache_read = 0.3, cache_write = 3.75 }}

[retry]
base_delay_ms = 50
max_delay_ms = 5000
"#,
        dialect = dialect.name(),
        base = env.mock.base_url(),
    )
}

impl Env {
    /// A home configured for `dialect` (see [`config_toml`]).
    pub async fn for_dialect(dialect: Dialect) -> Env {
        let env = Env::new().await;
        std::fs::write(
            env.home.path().join("config.toml"),
            config_toml(&env, dialect),
        )
        .unwrap();
        env
    }

    /// `keel` with the provider key set.
    pub fn keyed(&self) -> KeelCommand {
        self.keel().env(KEY_ENV, KEY)
    }

    /// `keel exec` on the configured provider.
    pub fn exec_configured(&self) -> KeelCommand {
        self.keyed().arg("exec")
    }

    /// RPC mode on the configured provider, after the ready frame.
    pub async fn rpc_configured(&self, extra: &[&str]) -> Rpc {
        Rpc::start(
            self.keyed()
                .args(["--mode", "rpc"])
                .args(extra.iter().copied()),
        )
        .await
    }
}

/// Instantiates every case of [`cases`] for one dialect.
macro_rules! dialect_tests {
    ($module:ident, $dialect:expr) => {
        mod $module {
            use super::Dialect;

            #[tokio::test]
            async fn text_answer() {
                super::cases::text_answer($dialect).await;
            }
            #[tokio::test]
            async fn several_tool_calls_in_one_answer() {
                super::cases::several_tool_calls($dialect).await;
            }
            #[tokio::test]
            async fn abort_mid_stream() {
                super::cases::abort_mid_stream($dialect).await;
            }
            #[tokio::test]
            async fn retry_after_429_honours_retry_after() {
                super::cases::retry_after_429($dialect).await;
            }
            #[tokio::test]
            async fn retry_after_a_cut_stream() {
                super::cases::retry_after_cut_stream($dialect).await;
            }
            #[tokio::test]
            async fn unauthorized_ends_the_turn() {
                super::cases::unauthorized($dialect).await;
            }
        }
    };
}

dialect_tests!(openai_completions, Dialect::Completions);
dialect_tests!(openai_responses, Dialect::Responses);
dialect_tests!(anthropic_messages, Dialect::Anthropic);

/// The inner events of `rpc` seen so far, as owned values.
pub fn events(rpc: &Rpc) -> Vec<Value> {
    rpc.events().into_iter().cloned().collect()
}

/// `{"type":"prompt",…}`.
pub fn prompt(text: &str) -> Value {
    json!({"type": "prompt", "message": text})
}
