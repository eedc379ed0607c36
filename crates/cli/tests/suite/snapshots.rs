//! Snapshot of the `--json` event stream of a small tool run, with
//! timestamps, ids and paths scrubbed.

use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use super::Env;

/// Replaces values that change between runs.
fn scrub(value: &mut Value, ws: &str) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                match k.as_str() {
                    "timestamp" => *v = json!("[ts]"),
                    _ => scrub(v, ws),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| scrub(v, ws)),
        Value::String(s) if s.contains(ws) => *s = s.replace(ws, "[ws]"),
        _ => {}
    }
}

#[tokio::test]
async fn json_event_stream_of_a_tool_run() {
    let env = Env::new().await;
    std::fs::write(env.ws().join("note.txt"), "remember the milk\n").unwrap();
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "call_1",
            "read",
            json!({"path": "note.txt"}),
        )]),
        MockResponse::text("It says to remember the milk."),
    ]);
    let out = env
        .exec()
        .args(["--json", "what does note.txt say?"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let ws = env.ws().display().to_string();
    let mut events = out.json_lines().unwrap();
    events.iter_mut().for_each(|e| scrub(e, &ws));
    insta::assert_json_snapshot!(events);
}
