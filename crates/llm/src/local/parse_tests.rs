//! Tests of splitting the local model's output into text and calls.

use super::*;
use serde_json::json;

fn names() -> Vec<String> {
    vec!["write".into(), "bash".into()]
}

/// Feeds `chunks` one by one; returns the pieces with adjacent texts merged.
fn split(chunks: &[&str], lenient: bool) -> Vec<Piece> {
    let mut s = OutputSplitter::new(&names(), lenient);
    let mut out: Vec<Piece> = Vec::new();
    let mut add = |p: Piece| match (out.last_mut(), p) {
        (Some(Piece::Text(a)), Piece::Text(b)) => a.push_str(&b),
        (_, p) => out.push(p),
    };
    for c in chunks {
        s.push(c).into_iter().for_each(&mut add);
    }
    s.finish().into_iter().for_each(&mut add);
    out
}

/// Every split of `text` into two chunks, and one char at a time.
fn all_chunkings(text: &str) -> Vec<Vec<String>> {
    let mut out = vec![vec![text.to_owned()]];
    let chars: Vec<char> = text.chars().collect();
    for i in 1..chars.len() {
        out.push(vec![
            chars[..i].iter().collect(),
            chars[i..].iter().collect(),
        ]);
    }
    out.push(chars.iter().map(|c| c.to_string()).collect());
    out
}

fn bash(cmd: &str) -> Piece {
    Piece::Call(ParsedCall {
        name: "bash".into(),
        arguments: json!({ "command": cmd }),
    })
}

#[test]
fn tool_call_blocks_in_any_chunking() {
    let text = "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"pwd\"}}\n</tool_call>";
    for chunks in all_chunkings(text) {
        let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
        assert_eq!(
            split(&refs, false),
            vec![bash("ls"), bash("pwd")],
            "{chunks:?}"
        );
    }
}

#[test]
fn text_then_call_and_plain_text() {
    let text = "I will list files.\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>";
    for chunks in all_chunkings(text) {
        let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
        assert_eq!(
            split(&refs, false),
            vec![Piece::Text("I will list files.".into()), bash("ls")]
        );
    }
    assert_eq!(
        split(&["a < b and <tool", "s> are fine  \n"], false),
        vec![Piece::Text("a < b and <tools> are fine".into())]
    );
}

#[test]
fn text_streams_without_waiting_for_the_end() {
    let mut s = OutputSplitter::new(&names(), false);
    assert_eq!(s.push("Hello"), vec![Piece::Text("Hello".into())]);
    // A possible tag start and trailing whitespace wait.
    assert_eq!(s.push(" <tool_"), vec![]);
    assert_eq!(s.push("x"), vec![Piece::Text(" <tool_x".into())]);
}

#[test]
fn bad_or_unknown_calls_stay_text() {
    let unknown = "<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>";
    assert_eq!(split(&[unknown], false), vec![Piece::Text(unknown.into())]);
    let cut = "<tool_call>\n{\"name\": \"bash\", \"argu";
    assert_eq!(split(&[cut], false), vec![Piece::Text(cut.into())]);
}

#[test]
fn parse_call_variants() {
    let tools = ["bash"];
    assert_eq!(
        parse_call(
            r#"{"name": "bash", "arguments": {"command": "ls"}}"#,
            &tools
        ),
        Some(ParsedCall {
            name: "bash".into(),
            arguments: json!({"command": "ls"})
        })
    );
    assert_eq!(
        parse_call(
            r#"{"name": "bash", "parameters": {"command": "ls"}}"#,
            &tools
        )
        .unwrap()
        .arguments,
        json!({"command": "ls"})
    );
    assert_eq!(
        parse_call(
            r#"{"name": "bash", "arguments": "{\"command\": \"ls\"}"}"#,
            &tools
        )
        .unwrap()
        .arguments,
        json!({"command": "ls"})
    );
    assert_eq!(
        parse_call(r#"{"name": "bash"}"#, &tools).unwrap().arguments,
        json!({})
    );
    assert_eq!(
        parse_call(r#"{"name": "bash", "arguments": [1]}"#, &tools),
        None
    );
    assert_eq!(
        parse_call(r#"{"name": "nope", "arguments": {}}"#, &tools),
        None
    );
    assert_eq!(parse_call("not json", &tools), None);
}

#[test]
fn lenient_mode_accepts_fenced_and_bare_json() {
    let fenced = "```json\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n```";
    for chunks in all_chunkings(fenced) {
        let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
        assert_eq!(split(&refs, true), vec![bash("ls")]);
    }
    let bare = "{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n{\"name\": \"bash\", \"arguments\": {\"command\": \"pwd\"}}";
    assert_eq!(split(&[bare], true), vec![bash("ls"), bash("pwd")]);
    // Prose first: the text streams, the fenced call is found at the end.
    let prose =
        "Let me check.\n```json\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n```";
    assert_eq!(
        split(&[prose], true),
        vec![
            Piece::Text(
                "Let me check.\n```json\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n```"
                    .into()
            ),
            bash("ls"),
        ]
    );
    // JSON that is not a call of an offered tool stays text.
    let other = "```json\n{\"a\": 1}\n```";
    assert_eq!(split(&[other], true), vec![Piece::Text(other.into())]);
    // Tags still work in lenient mode, even after a held-back opening.
    let tagged =
        "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>";
    assert_eq!(split(&[tagged], true), vec![bash("ls")]);
}

#[test]
fn strict_mode_ignores_fenced_json() {
    let fenced = "```json\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n```";
    assert_eq!(split(&[fenced], false), vec![Piece::Text(fenced.into())]);
}

#[test]
fn repeated_calls_are_spotted() {
    use keel_protocol::{
        AssistantMessage, ContentBlock, Message, StopReason, ToolResultMessage, Usage, UserMessage,
    };
    let user = Message::User(UserMessage {
        content: vec![ContentBlock::text("go")],
        timestamp: 0,
    });
    let made = |id: &str, name: &str, arguments: Value| {
        Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::ToolCall {
                id: id.into(),
                name: name.into(),
                arguments,
            }],
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
    };
    let asked = |id: &str, cmd: &str| made(id, "bash", json!({ "command": cmd }));
    let result = |id: &str, text: &str| {
        Message::ToolResult(ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "bash".into(),
            content: vec![ContentBlock::text(text)],
            details: None,
            is_error: false,
            timestamp: 0,
        })
    };
    let call = |cmd: &str| ParsedCall {
        name: "bash".into(),
        arguments: json!({ "command": cmd }),
    };
    // The very last call again.
    let h = vec![user.clone(), asked("c1", "ls"), result("c1", "a")];
    assert!(is_repeat(&call("ls"), &h));
    assert!(!is_repeat(&call("pwd"), &h));
    // Once before, something else since: fine.
    let mut h = vec![
        user.clone(),
        asked("c1", "make"),
        result("c1", "error"),
        asked("c2", "edit"),
        result("c2", "ok"),
    ];
    assert!(!is_repeat(&call("make"), &h));
    // Twice before with the same result: a loop.
    h.extend([
        asked("c3", "make"),
        result("c3", "error"),
        asked("c4", "edit"),
        result("c4", "ok"),
    ]);
    assert!(is_repeat(&call("make"), &h));
    // Twice before with different results: still making progress.
    let h = vec![
        user.clone(),
        asked("c1", "make"),
        result("c1", "3 errors"),
        asked("c2", "edit"),
        result("c2", "ok"),
        asked("c3", "make"),
        result("c3", "1 error"),
        asked("c4", "edit"),
        result("c4", "ok"),
    ];
    assert!(!is_repeat(&call("make"), &h));
    // Run again with only looking in between: nothing it sees changed.
    let look = |id: &str| made(id, "read", json!({"path": "fib.py"}));
    let h = vec![
        user.clone(),
        asked("c1", "python3 fib.py"),
        result("c1", "55"),
        look("c2"),
        result("c2", "def fib(n): ..."),
    ];
    assert!(is_repeat(&call("python3 fib.py"), &h));
    // A new user message starts afresh.
    let h = vec![user.clone(), asked("c1", "ls"), result("c1", "a"), user];
    assert!(!is_repeat(&call("ls"), &h));
    assert!(!is_repeat(&call("ls"), &[]));
}
