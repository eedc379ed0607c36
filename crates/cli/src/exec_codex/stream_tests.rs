use keel_protocol::{AssistantMessage, ToolResult, Usage};
use serde_json::{Value, json};

use super::*;

fn answer(text: &str, stop_reason: StopReason, input: u64) -> Message {
    Message::Assistant(AssistantMessage {
        content: vec![
            ContentBlock::Thinking {
                thinking: "plan".into(),
                thinking_signature: None,
            },
            ContentBlock::text(text),
        ],
        api: "test".into(),
        provider: "p".into(),
        model: "m".into(),
        usage: Usage {
            input,
            output: 2,
            cache_read: 1,
            ..Usage::default()
        },
        stop_reason,
        error_message: (stop_reason == StopReason::Error).then(|| "it broke".to_owned()),
        error_kind: None,
        timestamp: 0,
        response_id: None,
    })
}

fn lines(stream: &mut CodexStream, events: &[AgentEvent]) -> Vec<Value> {
    events
        .iter()
        .flat_map(|e| stream.event(e))
        .map(|l| serde_json::to_value(l).unwrap())
        .collect()
}

fn start(id: &str, tool: &str, args: Value) -> AgentEvent {
    AgentEvent::ToolExecutionStart {
        tool_call_id: id.into(),
        tool_name: tool.into(),
        args,
    }
}

fn end(id: &str, tool: &str, result: ToolResult, is_error: bool) -> AgentEvent {
    AgentEvent::ToolExecutionEnd {
        tool_call_id: id.into(),
        tool_name: tool.into(),
        result,
        is_error,
    }
}

#[test]
fn a_run_is_a_turn_of_items_with_its_tokens_summed() {
    let mut stream = CodexStream::new("/w".into());
    let out = lines(
        &mut stream,
        &[
            AgentEvent::AgentStart,
            AgentEvent::TurnStart,
            AgentEvent::MessageEnd {
                message: answer("", StopReason::ToolUse, 10),
            },
            start("c1", "bash", json!({"command": "ls"})),
            AgentEvent::ToolExecutionUpdate {
                tool_call_id: "c1".into(),
                tool_name: "bash".into(),
                args: json!({"command": "ls"}),
                partial_result: ToolResult::text("a\n"),
            },
            end(
                "c1",
                "bash",
                ToolResult {
                    content: vec![ContentBlock::text("a")],
                    details: Some(json!({"exitCode": 0, "truncated": false})),
                },
                false,
            ),
            AgentEvent::MessageEnd {
                message: answer("Done.", StopReason::Stop, 20),
            },
            AgentEvent::AgentEnd { messages: vec![] },
        ],
    );
    let types: Vec<&str> = out.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "turn.started",
            "item.completed",
            "item.started",
            "item.updated",
            "item.completed",
            "item.completed",
            "item.completed",
            "turn.completed"
        ]
    );
    assert_eq!(
        out[1]["item"],
        json!({"id": "item_0", "type": "reasoning", "text": "plan"})
    );
    assert_eq!(out[2]["item"]["id"], "item_1");
    assert_eq!(out[3]["item"]["aggregated_output"], "a\n");
    assert_eq!(
        out[4]["item"],
        json!({"id": "item_1", "type": "command_execution", "command": "ls",
            "aggregated_output": "a\n", "exit_code": 0, "status": "completed"})
    );
    assert_eq!(
        out[6]["item"],
        json!({"id": "item_3", "type": "agent_message", "text": "Done."})
    );
    assert_eq!(
        out[7]["usage"],
        json!({"input_tokens": 30, "cached_input_tokens": 2, "cache_write_input_tokens": 0,
            "output_tokens": 4, "reasoning_output_tokens": 0})
    );
}

#[test]
fn a_file_change_shows_once_made_and_other_tools_are_keel_mcp_calls() {
    let dir = tempfile::tempdir().unwrap();
    let mut stream = CodexStream::new(dir.path().to_owned());
    let out = lines(
        &mut stream,
        &[
            start("w", "write", json!({"path": "a.txt", "content": "x"})),
            end("w", "write", ToolResult::text("wrote"), false),
            start("r", "read", json!({"path": "a.txt"})),
            end("r", "read", ToolResult::text("no such file"), true),
            start("m", "mcp__docs__search", json!({"q": "x"})),
            end("m", "mcp__docs__search", ToolResult::text("found"), false),
        ],
    );
    assert_eq!(out[0]["type"], "item.completed");
    assert_eq!(out[0]["item"]["type"], "file_change");
    assert_eq!(out[0]["item"]["changes"][0]["kind"], "add");
    assert_eq!(out[0]["item"]["status"], "completed");
    assert_eq!(out[1]["type"], "item.started");
    assert_eq!(out[1]["item"]["server"], KEEL_TOOLS_SERVER);
    assert_eq!(out[1]["item"]["tool"], "read");
    assert_eq!(out[2]["item"]["status"], "failed");
    assert_eq!(out[2]["item"]["error"]["message"], "no such file");
    assert_eq!(out[4]["item"]["server"], "docs");
    assert_eq!(out[4]["item"]["tool"], "search");
    assert_eq!(out[4]["item"]["result"]["content"][0]["text"], "found");
}

#[test]
fn a_failed_or_aborted_run_is_a_failed_turn() {
    let mut stream = CodexStream::new("/w".into());
    let failed = lines(
        &mut stream,
        &[
            AgentEvent::AgentStart,
            AgentEvent::AutoRetryStart {
                attempt: 1,
                max_attempts: 3,
                delay_ms: 10,
                error_message: "overloaded".into(),
                error_kind: None,
            },
            AgentEvent::AgentEnd {
                messages: vec![answer("", StopReason::Error, 0)],
            },
        ],
    );
    assert_eq!(failed[1]["type"], "error");
    assert!(
        failed[1]["message"]
            .as_str()
            .unwrap()
            .contains("Reconnecting... 1/3 (overloaded)")
    );
    assert_eq!(
        failed[2],
        json!({"type": "turn.failed", "error": {"message": "it broke"}})
    );
    let aborted = lines(
        &mut stream,
        &[AgentEvent::AgentEnd {
            messages: vec![answer("half", StopReason::Aborted, 0)],
        }],
    );
    assert_eq!(aborted[0]["type"], "turn.failed");
}
