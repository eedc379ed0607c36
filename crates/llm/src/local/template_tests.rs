//! Tests of chat template rendering (the Qwen2.5-Coder template as shipped
//! in the GGUF that `keel models pull` assembles).

use super::*;
use keel_protocol::{Message, StopReason, ToolResultMessage, Usage, UserMessage};

const QWEN: &str = include_str!("../../tests/fixtures/qwen2.5-coder-chat-template.jinja");

fn qwen() -> ChatTemplate {
    ChatTemplate::new(QWEN, "<|endoftext|>", "<|im_end|>").unwrap()
}

fn user(text: &str) -> Message {
    Message::User(UserMessage {
        content: vec![ContentBlock::text(text)],
        timestamp: 0,
    })
}

fn assistant(content: Vec<ContentBlock>) -> Message {
    Message::Assistant(AssistantMessage {
        content,
        api: "local".into(),
        provider: "local".into(),
        model: "m".into(),
        usage: Usage::default(),
        stop_reason: StopReason::ToolUse,
        error_message: None,
        error_kind: None,
        timestamp: 0,
        response_id: None,
    })
}

fn call(id: &str, name: &str, args: Value) -> ContentBlock {
    ContentBlock::ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args,
    }
}

fn result(id: &str, text: &str) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: "bash".into(),
        content: vec![ContentBlock::text(text)],
        details: None,
        is_error: false,
        timestamp: 0,
    })
}

fn bash_tool() -> ToolSpec {
    ToolSpec {
        name: "bash".into(),
        description: "Run a command (e.g. <tags> & 'quotes'). Details follow.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"]
        }),
    }
}

#[test]
fn renders_system_user_and_generation_prompt_without_tools() {
    let msgs = template_messages("You are keel.", &[user("hi")]);
    let out = qwen().render(&msgs, &[], true).unwrap();
    assert_eq!(
        out,
        "<|im_start|>system\nYou are keel.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn renders_tools_like_python_json_dumps() {
    let msgs = template_messages("You are keel.", &[user("list files")]);
    let out = qwen().render(&msgs, &[bash_tool()], true).unwrap();
    let expected_tool = r#"{"type": "function", "function": {"name": "bash", "description": "Run a command (e.g. <tags> & 'quotes').", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}"#;
    assert!(
        out.starts_with(
            "<|im_start|>system\nYou are keel.\n\n# Tools\n\nYou may call one or more functions"
        ),
        "{out}"
    );
    assert!(
        out.contains(&format!("<tools>\n{expected_tool}\n</tools>")),
        "{out}"
    );
    // The 1.5B file's upstream quirk: the example is printed with double braces.
    assert!(
        out.contains("<tool_call>\n{{\"name\": <function-name>"),
        "{out}"
    );
    assert!(out.ends_with("<|im_start|>user\nlist files<|im_end|>\n<|im_start|>assistant\n"));
}

#[test]
fn renders_tool_calls_and_grouped_tool_responses() {
    let history = vec![
        user("run two things"),
        assistant(vec![
            ContentBlock::text("Sure."),
            call("c1", "bash", json!({"command": "ls"})),
            call("c2", "bash", json!({"command": "pwd"})),
        ]),
        result("c1", "a.txt"),
        result("c2", "/ws"),
    ];
    let msgs = template_messages("S", &history);
    let out = qwen().render(&msgs, &[bash_tool()], true).unwrap();
    let tail = "<|im_start|>user\nrun two things<|im_end|>\n\
        <|im_start|>assistant\nSure.\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>\n\
        <tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"pwd\"}}\n</tool_call><|im_end|>\n\
        <|im_start|>user\n<tool_response>\na.txt\n</tool_response>\n<tool_response>\n/ws\n</tool_response><|im_end|>\n\
        <|im_start|>assistant\n";
    assert!(out.ends_with(tail), "{out}");
}

#[test]
fn a_call_the_model_made_re_renders_as_the_same_text() {
    // What the grammar makes the model write after the generation prompt.
    let generated = "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"echo 'hi' > \\\"a b\\\"\", \"n\": [1, 2.5, true, null]}}\n</tool_call>";
    let before = qwen()
        .render(&template_messages("S", &[user("go")]), &[bash_tool()], true)
        .unwrap();
    let args: Value =
        serde_json::from_str(r#"{"command": "echo 'hi' > \"a b\"", "n": [1, 2.5, true, null]}"#)
            .unwrap();
    let history = vec![
        user("go"),
        assistant(vec![call("c1", "bash", args)]),
        result("c1", "done"),
    ];
    let after = qwen()
        .render(&template_messages("S", &history), &[bash_tool()], true)
        .unwrap();
    let prefix = format!("{before}{generated}<|im_end|>\n");
    assert!(after.starts_with(&prefix), "{after}\n---\n{prefix}");
}

#[test]
fn images_and_missing_results_have_placeholders() {
    let history = vec![
        Message::User(UserMessage {
            content: vec![
                ContentBlock::text("look"),
                ContentBlock::Image {
                    data: "AAAA".into(),
                    mime_type: "image/png".into(),
                },
            ],
            timestamp: 0,
        }),
        assistant(vec![call("c1", "bash", json!({"command": "ls"}))]),
    ];
    let msgs = template_messages("", &history);
    assert_eq!(msgs[0]["content"], format!("look\n{IMAGE_PLACEHOLDER}"));
    assert_eq!(
        msgs[1]["tool_calls"][0]["function"]["arguments"]["command"],
        "ls"
    );
    assert_eq!(msgs[2]["role"], "tool");
    assert_eq!(msgs[2]["content"], crate::MISSING_RESULT_TEXT);
}

#[test]
fn python_helpers_and_raise_exception() {
    let t = ChatTemplate::new(
        "{% for m in messages %}{{ m.content.strip().upper() }}|{% endfor %}{{ bos_token }}{{ messages | tojson(indent=2) }}",
        "<s>",
        "</s>",
    )
    .unwrap();
    let out = t
        .render(&[json!({"content": "  hi  ", "role": "user"})], &[], false)
        .unwrap();
    assert_eq!(
        out,
        "HI|<s>[\n  {\n    \"content\": \"  hi  \",\n    \"role\": \"user\"\n  }\n]"
    );
    let t = ChatTemplate::new("{{ raise_exception('no system role') }}", "", "").unwrap();
    let err = t.render(&[], &[], true).unwrap_err();
    assert!(err.to_string().contains("no system role"), "{err}");
    let err = ChatTemplate::new("{% if %}", "", "").unwrap_err();
    assert!(err.to_string().starts_with("chat template:"), "{err}");
}

#[test]
fn python_json_matches_json_dumps() {
    let v = json!({"a": [1, {"b": "é\n\"x\""}], "c": {}, "d": [], "e": 1.5});
    assert_eq!(
        python_json(&v),
        r#"{"a": [1, {"b": "é\n\"x\""}], "c": {}, "d": [], "e": 1.5}"#
    );
}

#[test]
fn first_sentences() {
    assert_eq!(first_sentence("Read a file. More."), "Read a file.");
    assert_eq!(
        first_sentence("List (default: the cwd. really) entries. Rest"),
        "List (default: the cwd. really) entries."
    );
    assert_eq!(
        first_sentence("Use e.g.x or 1.5 here"),
        "Use e.g.x or 1.5 here"
    );
    assert_eq!(first_sentence("  One line.  "), "One line.");
    assert_eq!(first_sentence("Title\n\nBody. More"), "Title");
}

#[test]
fn the_runs_facts_follow_the_tools_so_what_precedes_them_is_the_same_everywhere() {
    let system = |cwd: &str| {
        format!("You are keel.\n\nCurrent date: 2026-12-03\nCurrent working directory: {cwd}\n")
    };
    assert_eq!(
        split_run_facts(&system("/a")),
        (
            "You are keel.\n",
            Some("Current date: 2026-12-03\nCurrent working directory: /a\n")
        )
    );
    assert_eq!(split_run_facts("Custom prompt"), ("Custom prompt", None));
    assert!(template_messages_split("Custom prompt", &[user("hi")]).is_none());
    let render = |cwd: &str| {
        let m = template_messages_split(&system(cwd), &[user("go")]).unwrap();
        qwen().render(&m, &[bash_tool()], true).unwrap()
    };
    let (a, b) = (render("/a"), render("/b"));
    let fixed = qwen()
        .render(
            &template_messages("You are keel.\n", &[]),
            &[bash_tool()],
            false,
        )
        .unwrap();
    // The system prompt and the tools come first, the same in both.
    assert!(
        a.starts_with(&fixed) && b.starts_with(&fixed),
        "{a}\n---\n{fixed}"
    );
    assert!(fixed.contains("<tools>") && !fixed.contains("Current date"));
    // Then the facts, as a system turn of their own, then the request.
    let rest = &a[fixed.len()..];
    assert!(
        rest.starts_with(
            "<|im_start|>system\nCurrent date: 2026-12-03\nCurrent working directory: /a"
        ),
        "{rest}"
    );
    assert!(rest.contains("<|im_start|>user\ngo<|im_end|>"), "{rest}");
}
