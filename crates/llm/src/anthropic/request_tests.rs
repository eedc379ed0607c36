//! Unit tests of the Messages request body.

use super::*;
use keel_protocol::{Message, StopReason, ToolResultMessage, ToolSpec, Usage, UserMessage};

fn user(content: Vec<ContentBlock>) -> Message {
    Message::User(UserMessage {
        content,
        timestamp: 0,
    })
}

fn user_text(text: &str) -> Message {
    user(vec![ContentBlock::text(text)])
}

fn assistant_from(content: Vec<ContentBlock>, api: &str, model: &str) -> Message {
    Message::Assistant(AssistantMessage {
        content,
        api: api.into(),
        provider: "anthropic".into(),
        model: model.into(),
        usage: Usage::default(),
        stop_reason: StopReason::ToolUse,
        error_message: None,
        error_kind: None,
        timestamp: 0,
        response_id: None,
    })
}

fn assistant(content: Vec<ContentBlock>) -> Message {
    assistant_from(content, API, "claude-test")
}

fn call(id: &str, args: Value) -> ContentBlock {
    ContentBlock::ToolCall {
        id: id.into(),
        name: "bash".into(),
        arguments: args,
    }
}

fn thinking(text: &str, signature: Option<&str>) -> ContentBlock {
    ContentBlock::Thinking {
        thinking: text.into(),
        thinking_signature: signature.map(str::to_owned),
    }
}

fn result(id: &str, content: Vec<ContentBlock>, is_error: bool) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: "bash".into(),
        content,
        details: None,
        is_error,
        timestamp: 0,
    })
}

fn image() -> ContentBlock {
    ContentBlock::Image {
        data: "AAAA".into(),
        mime_type: "image/png".into(),
    }
}

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        model: "claude-test".into(),
        system_prompt: "You are keel.".into(),
        messages,
        tools: Vec::new(),
        thinking_level: ThinkingLevel::Off,
        max_output_tokens: None,
        output_schema: None,
    }
}

const CACHE: fn() -> Value = || json!({"type": "ephemeral"});

#[test]
fn minimal_body_caches_system_and_last_user_turn() {
    let body = build_request_body(&request(vec![user_text("hi")]), "anthropic");
    assert_eq!(
        body,
        json!({
            "model": "claude-test",
            "max_tokens": DEFAULT_MAX_TOKENS,
            "stream": true,
            "system": [{"type": "text", "text": "You are keel.", "cache_control": CACHE()}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "hi", "cache_control": CACHE()}]}],
        })
    );
    let mut req = request(vec![user_text("hi")]);
    req.system_prompt = String::new();
    assert!(
        build_request_body(&req, "anthropic")
            .get("system")
            .is_none()
    );
}

#[test]
fn tools_results_merging_images_and_cache_breakpoints() {
    let mut req = request(vec![
        user(vec![
            ContentBlock::text("look"),
            ContentBlock::text(""),
            image(),
        ]),
        assistant(vec![
            ContentBlock::text("Running."),
            call("call_1|fc_1", json!({"command": "ls"})),
            call("toolu_2", json!("{\"path\":\"a\"}")),
            call("toolu_3", json!({})),
        ]),
        result("call_1|fc_1", vec![ContentBlock::text("a\nb")], false),
        result("toolu_2", vec![image()], false),
        result("toolu_3", vec![ContentBlock::text("boom")], true),
        user_text("and now?"),
    ]);
    req.tools = vec![ToolSpec {
        name: "bash".into(),
        description: "Run".into(),
        parameters: json!({"type": "object"}),
    }];
    let body = build_request_body(&req, "anthropic");
    assert_eq!(
        body["tools"],
        json!([{"name": "bash", "description": "Run", "input_schema": {"type": "object"}}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                    "cache_control": CACHE()},
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Running."},
                {"type": "tool_use", "id": "call_1_fc_1", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {"path": "a"}},
                {"type": "tool_use", "id": "toolu_3", "name": "bash", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1_fc_1",
                    "content": [{"type": "text", "text": "a\nb"}]},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": [
                    {"type": "text", "text": "(see attached image)"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                ]},
                {"type": "tool_result", "tool_use_id": "toolu_3",
                    "content": [{"type": "text", "text": "boom"}], "is_error": true},
                {"type": "text", "text": "and now?", "cache_control": CACHE()},
            ]},
        ])
    );
}

#[test]
fn only_the_last_two_user_messages_are_cached() {
    let body = build_request_body(
        &request(vec![
            user_text("one"),
            assistant(vec![ContentBlock::text("1")]),
            user_text("two"),
            assistant(vec![ContentBlock::text("2")]),
            user_text("three"),
        ]),
        "anthropic",
    );
    let cached: Vec<bool> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"][0].get("cache_control").is_some())
        .collect();
    assert_eq!(cached, [false, false, true, false, true]);
}

#[test]
fn signed_thinking_is_replayed_and_foreign_thinking_dropped() {
    let run = r#"[{"type":"thinking","thinking":"a","signature":"S1"},{"type":"redacted_thinking","data":"R"}]"#;
    let body = build_request_body(
        &request(vec![
            user_text("q"),
            assistant(vec![
                thinking("plan", Some("SIG")),
                ContentBlock::text("x"),
                thinking("a\n\n", Some(run)),
                thinking("unsigned", None),
                thinking("empty", Some("")),
            ]),
            assistant_from(
                vec![thinking("other", Some("SIG2")), ContentBlock::text("y")],
                API,
                "claude-other",
            ),
            assistant_from(
                vec![thinking("openai", Some("{}")), ContentBlock::text("z")],
                "openai-responses",
                "claude-test",
            ),
            // Nothing replayable: skipped, and the users around it merge.
            assistant(vec![thinking("unsigned", None)]),
            user_text("r"),
        ]),
        "anthropic",
    );
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan", "signature": "SIG"},
            {"type": "text", "text": "x"},
            {"type": "thinking", "thinking": "a", "signature": "S1"},
            {"type": "redacted_thinking", "data": "R"},
            {"type": "text", "text": "y"},
            {"type": "text", "text": "z"},
        ]}),
        "consecutive assistant messages merge; foreign thinking is dropped"
    );
    assert_eq!(body["messages"].as_array().unwrap().len(), 3);
    assert_eq!(body["messages"][2]["content"][0]["text"], "r");
}

#[test]
fn thinking_budgets_and_max_tokens() {
    let budgets: Vec<_> = ThinkingLevel::ALL
        .iter()
        .map(|l| thinking_budget(*l))
        .collect();
    assert_eq!(
        budgets,
        [
            None,
            Some(1024),
            Some(4096),
            Some(10_000),
            Some(20_000),
            Some(32_000)
        ]
    );
    assert_eq!(token_limits(None, None), (DEFAULT_MAX_TOKENS, None));
    assert_eq!(token_limits(Some(500), None), (500, None));
    assert_eq!(
        token_limits(None, Some(10_000)),
        (10_000 + DEFAULT_MAX_TOKENS, Some(10_000))
    );
    assert_eq!(
        token_limits(Some(64_000), Some(32_000)),
        (64_000, Some(32_000))
    );
    // The budget shrinks to leave room for the answer…
    assert_eq!(
        token_limits(Some(8_192), Some(10_000)),
        (8_192, Some(7_168))
    );
    // …and thinking is dropped when too little is left.
    assert_eq!(token_limits(Some(1_500), Some(1_024)), (1_500, None));

    let mut req = request(vec![user_text("q")]);
    req.thinking_level = ThinkingLevel::Medium;
    req.max_output_tokens = Some(64_000);
    let body = build_request_body(&req, "anthropic");
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 10_000})
    );
    assert_eq!(body["max_tokens"], 64_000);
}

#[test]
fn thinking_is_left_off_mid_tool_loop_without_a_thinking_block() {
    let loop_without_thinking = vec![
        user_text("q"),
        assistant(vec![call("t1", json!({}))]),
        result("t1", vec![ContentBlock::text("ok")], false),
    ];
    let mut req = request(loop_without_thinking);
    req.thinking_level = ThinkingLevel::High;
    assert!(
        build_request_body(&req, "anthropic")
            .get("thinking")
            .is_none()
    );

    let loop_with_thinking = vec![
        user_text("q"),
        assistant(vec![thinking("t", Some("SIG")), call("t1", json!({}))]),
        result("t1", vec![ContentBlock::text("ok")], false),
    ];
    let mut req = request(loop_with_thinking);
    req.thinking_level = ThinkingLevel::High;
    assert!(
        build_request_body(&req, "anthropic")
            .get("thinking")
            .is_some()
    );
}

#[test]
fn unanswered_calls_get_error_results() {
    let body = build_request_body(
        &request(vec![
            assistant(vec![call("c9", json!({}))]),
            user_text("stop"),
        ]),
        "anthropic",
    );
    assert_eq!(
        body["messages"][1]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "c9",
            "content": [{"type": "text", "text": "No result provided"}], "is_error": true})
    );
    assert_eq!(tool_id("a.b/c"), "a_b_c");
    assert_eq!(tool_id(""), "toolu_");
}

#[test]
fn empty_tool_results_have_no_content() {
    let body = build_request_body(
        &request(vec![
            assistant(vec![call("c1", json!({}))]),
            result("c1", Vec::new(), false),
        ]),
        "anthropic",
    );
    assert_eq!(
        body["messages"][1]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "c1", "cache_control": CACHE()})
    );
}

#[test]
fn an_output_schema_is_an_output_config_format() {
    let mut r = request(vec![user_text("hi")]);
    let schema = json!({"type": "object"});
    r.output_schema = Some(schema.clone());
    let body = build_request_body(&r, "anthropic");
    assert_eq!(
        body["output_config"],
        json!({"format": {"type": "json_schema", "schema": schema}})
    );
}
