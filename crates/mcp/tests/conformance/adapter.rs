//! The client the official MCP conformance suite tests
//! (`@modelcontextprotocol/conformance client --command …`): keel's MCP
//! client crate, used as keel uses it. The suite starts a server for a
//! scenario and runs this with the server's URL as its last argument,
//! the scenario in `MCP_CONFORMANCE_SCENARIO` and its data (a
//! pre-registered client) in `MCP_CONFORMANCE_CONTEXT`.
//!
//! It connects as a session would (an `auth/` scenario first signs in as
//! `keel mcp login` does; the suite's authorization server approves at
//! once, so the browser's part is following its redirect), lists the
//! tools and calls each one with arguments its schema asks for, a person
//! attending each call who accepts a server's form as it is shown (its
//! defaults, which keel fills in). Exit 0 when all of that worked.

use std::process::ExitCode;
use std::time::Duration;

use keel_mcp::oauth::{FileCredentials, LoginRequest};
use keel_mcp::{Connection, McpServerConfig};
use serde_json::{Map, Value, json};

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("keel conformance client: {e}");
            }
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let url = std::env::args().next_back().ok_or("no server URL")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let home = std::env::temp_dir().join(format!("keel-conformance-{}", std::process::id()));
    let mut config = McpServerConfig {
        url: Some(url.clone()),
        enabled: true,
        ..McpServerConfig::default()
    };
    if scenario.starts_with("auth/") {
        let path = keel_mcp::oauth::credentials_path(&home, "conformance");
        sign_in(&url, FileCredentials::new(path.clone(), &url), &context).await?;
        config.credentials = Some(path);
    }
    let env = vec![("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())];
    let outcome = exercise(&config, env).await;
    let _ = std::fs::remove_dir_all(&home);
    outcome
}

/// `keel mcp login`'s flow, the browser's part done here.
async fn sign_in(url: &str, store: FileCredentials, context: &Value) -> Result<(), String> {
    let text = |k: &str| context.get(k).and_then(Value::as_str).map(str::to_owned);
    let request = LoginRequest {
        client_id: text("client_id"),
        client_secret: text("client_secret"),
        ..LoginRequest::default()
    };
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    keel_mcp::oauth::login(
        url,
        store,
        &request,
        |address, _redirect| {
            let address = address.to_owned();
            tokio::spawn(async move {
                match follow(&address).await {
                    Ok(back) => {
                        let _ = tx.send(back).await;
                    }
                    #[allow(clippy::print_stderr)]
                    Err(e) => eprintln!("keel conformance client: the sign-in page: {e}"),
                }
            });
        },
        rx,
    )
    .await
    .map_err(|e| e.to_string())
}

/// Where the authorization server sends the browser back to.
async fn follow(address: &str) -> Result<String, String> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())?;
    let answer = client
        .get(address)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    answer
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .map(str::to_owned)
        .ok_or_else(|| format!("no redirect ({})", answer.status()))
}

async fn exercise(config: &McpServerConfig, env: Vec<(String, String)>) -> Result<(), String> {
    let conn = Connection::start("conformance", config, env, None)
        .await
        .map_err(|e| e.to_string())?;
    let tools = conn.tools().await.map_err(|e| e.to_string());
    let mut failed = None;
    for tool in tools.iter().flatten() {
        let args = arguments(&tool.input_schema);
        if let Err(e) = conn
            .call(
                &tool.name,
                args,
                Duration::from_secs(20),
                keel_mcp::CallHooks {
                    progress: None,
                    attended: Some(keel_mcp::Attended {
                        call_id: tool.name.clone(),
                        asker: std::sync::Arc::new(AcceptsAsShown),
                        cancel: tokio_util::sync::CancellationToken::new(),
                    }),
                },
            )
            .await
        {
            failed = Some(format!("{}: {e}", tool.name));
        }
    }
    conn.stop().await;
    tools?;
    failed.map_or(Ok(()), Err)
}

/// A person who accepts a form as it is shown: they change no field.
struct AcceptsAsShown;

#[async_trait::async_trait]
impl keel_tools::Asker for AcceptsAsShown {
    async fn ask(&self, _call_id: &str, _question: keel_tools::Question) -> keel_tools::Answer {
        keel_tools::Answer::Accept(json!({}))
    }
}

/// Arguments for a tool: each required property a value of its type.
fn arguments(schema: &Value) -> Value {
    let mut args = Map::new();
    let props = schema.get("properties").and_then(Value::as_object);
    for (name, prop) in props.into_iter().flatten() {
        let value = match prop.get("type").and_then(Value::as_str) {
            Some("number" | "integer") => json!(1),
            Some("boolean") => json!(true),
            Some("array") => json!([]),
            Some("object") => json!({}),
            _ => json!("keel"),
        };
        args.insert(name.clone(), value);
    }
    Value::Object(args)
}
