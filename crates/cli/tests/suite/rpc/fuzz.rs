//! Fuzz-style robustness: thousands of malformed, truncated, oversize and
//! wrong-typed lines; each gets the answer the error model prescribes, in
//! order, and the process keeps serving.

use serde_json::{Value, json};

use super::Rpc;
use crate::suite::Env;

/// A small deterministic generator (no dependency, reproducible failures).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// What a line must get back: `None` for no response at all.
type Expect = Option<(String, Option<Value>)>;

const MAX: usize = 4096;

fn parse_error() -> Expect {
    Some(("parse".to_owned(), None))
}

/// Valid commands whose arguments have the wrong types.
fn wrong_typed(id: &str) -> Vec<(Value, &'static str)> {
    vec![
        (json!({"id": id, "type": "prompt", "message": 5}), "prompt"),
        (
            json!({"id": id, "type": "prompt", "message": "x", "images": "no"}),
            "prompt",
        ),
        (
            json!({"id": id, "type": "prompt", "message": "x", "streamingBehavior": "later"}),
            "prompt",
        ),
        (json!({"id": id, "type": "steer"}), "steer"),
        (
            json!({"id": id, "type": "follow_up", "message": ["a"]}),
            "follow_up",
        ),
        (
            json!({"id": id, "type": "set_steering_mode", "mode": true}),
            "set_steering_mode",
        ),
        (
            json!({"id": id, "type": "set_interrupt_mode", "mode": "never"}),
            "set_interrupt_mode",
        ),
        (
            json!({"id": id, "type": "set_thinking_level", "level": 3}),
            "set_thinking_level",
        ),
        (
            json!({"id": id, "type": "set_model", "provider": 1, "modelId": 2}),
            "set_model",
        ),
        (
            json!({"id": id, "type": "get_state", "include": "tools"}),
            "get_state",
        ),
        (
            json!({"id": id, "type": "set_todos", "phases": {}}),
            "set_todos",
        ),
        (
            json!({"id": id, "type": "set_host_tools", "tools": [{"name": 7}]}),
            "set_host_tools",
        ),
        (
            json!({"id": id, "type": "set_host_uri_schemes", "schemes": [1]}),
            "set_host_uri_schemes",
        ),
        (json!({"id": id, "type": "bash", "command": null}), "bash"),
        (
            json!({"id": id, "type": "switch_session"}),
            "switch_session",
        ),
        (
            json!({"id": id, "type": "switch_session", "sessionPath": "x", "afterLogSeq": -3}),
            "switch_session",
        ),
        (
            json!({"id": id, "type": "set_session_name", "name": {}}),
            "set_session_name",
        ),
        (
            json!({"id": id, "type": "new_session", "parentSession": 9}),
            "new_session",
        ),
    ]
}

fn generate(rng: &mut Lcg, n: usize) -> Vec<(Vec<u8>, Expect)> {
    let valid_texts = [
        r#"{"id":"a","type":"get_state","include":["tools"]}"#,
        r#"{"type":"prompt","message":"hello there","streamingBehavior":"steer"}"#,
        r#"{"id":"z","type":"set_todos","phases":[{"name":"P","tasks":[]}]}"#,
    ];
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let id = format!("f{i}");
        let (mut line, expect): (Vec<u8>, Expect) = match rng.below(9) {
            // Random bytes (no LF), often invalid UTF-8.
            0 => {
                let len = 1 + rng.below(60);
                let mut b: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                b.retain(|c| *c != b'\n' && *c != b'\r');
                b.insert(0, b'#');
                (b, parse_error())
            }
            // A valid command cut short.
            1 => {
                let t = valid_texts[rng.below(valid_texts.len())];
                let cut = 1 + rng.below(t.len() - 1);
                (t.as_bytes()[..cut].to_vec(), parse_error())
            }
            // Oversize.
            2 => {
                let len = MAX + 1 + rng.below(3 * MAX);
                let mut b = br#"{"id":"big","type":"prompt","message":""#.to_vec();
                b.extend(std::iter::repeat_n(b'x', len));
                b.extend(br#""}"#);
                (b, parse_error())
            }
            // Wrong-typed arguments: the id is echoed.
            3 => {
                let cases = wrong_typed(&id);
                let (v, cmd) = cases[rng.below(cases.len())].clone();
                (
                    v.to_string().into_bytes(),
                    Some((cmd.to_owned(), Some(json!(id)))),
                )
            }
            // JSON that is not a command object.
            4 => {
                let v = [
                    json!(1),
                    json!("prompt"),
                    json!([{"type": "prompt"}]),
                    json!(null),
                    json!({"type": 5}),
                    json!({"id": id}),
                    json!({"type": null, "id": id}),
                ];
                (
                    v[rng.below(v.len())].to_string().into_bytes(),
                    parse_error(),
                )
            }
            // Unknown commands: the id is echoed.
            5 => {
                let name = format!("no_such_command_{}", rng.below(1000));
                let v = json!({"id": id, "type": name});
                (v.to_string().into_bytes(), Some((name, Some(json!(id)))))
            }
            // Replies for requests that do not exist: ignored.
            6 => {
                let v = [
                    json!({"type": "host_tool_result", "id": "ghost", "result": {"content": []}}),
                    json!({"type": "host_tool_update", "id": "ghost", "partialResult": {"content": []}}),
                    json!({"type": "host_uri_result", "id": "ghost", "content": "x"}),
                    json!({"type": "extension_ui_response", "id": "ghost", "cancelled": true}),
                ];
                (v[rng.below(v.len())].to_string().into_bytes(), None)
            }
            // Malformed replies: an error without id.
            7 => {
                let v = json!({"type": "host_tool_result", "id": 5});
                (
                    v.to_string().into_bytes(),
                    Some(("host_tool_result".to_owned(), None)),
                )
            }
            // Harmless valid commands mixed in.
            _ => {
                let v = json!({"id": id, "type": "get_last_assistant_text"});
                (
                    v.to_string().into_bytes(),
                    Some(("get_last_assistant_text".to_owned(), Some(json!(id)))),
                )
            }
        };
        if rng.below(4) == 0 {
            line.push(b'\r');
        }
        line.push(b'\n');
        out.push((line, expect));
    }
    out
}

#[tokio::test]
async fn thousands_of_bad_lines_each_get_the_prescribed_answer() {
    let env = Env::new().await;
    let mut rpc = Rpc::start(
        env.rpc_cmd()
            .env("KEEL_RPC_MAX_FRAME_BYTES", MAX.to_string()),
    )
    .await;
    let mut rng = Lcg(0x5eed_cafe);
    let lines = generate(&mut rng, 3000);
    let mut bytes = Vec::new();
    for (line, _) in &lines {
        bytes.extend_from_slice(line);
    }
    rpc.child.send_raw(&bytes).await.unwrap();
    let expected: Vec<(String, Option<Value>)> = lines.into_iter().filter_map(|(_, e)| e).collect();
    for (i, (command, id)) in expected.iter().enumerate() {
        let r = rpc.next().await;
        assert_eq!(r["type"], "response", "answer {i}: {r}");
        assert_eq!(r["command"], command.as_str(), "answer {i}: {r}");
        assert_eq!(r.get("id"), id.as_ref(), "answer {i}: {r}");
        let ok = r["success"].as_bool().unwrap();
        assert_eq!(ok, command == "get_last_assistant_text", "answer {i}: {r}");
        if !ok {
            assert!(r["error"].is_string(), "answer {i}: {r}");
        }
    }
    // Still alive and serving.
    let s = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(s["messageCount"], 0);
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
    assert_eq!(env.mock.request_count(), 0);
}
