//! Tests of the `local` dialect against a real GGUF model (feature `local`).
//!
//! They need the small model (Qwen2.5-Coder 0.5B Instruct Q4_K_M, from
//! `keel models pull --small`): `KEEL_TEST_MODEL` names the file, else
//! `$KEEL_HOME/models/` and `~/.keel/models/` are tried. Without it each
//! test says so on stderr and passes without running (`.ci/run` provides
//! the model). They make no network calls.
#![cfg(feature = "local")]

// In a `cfg(test)` module: the workspace lints allow unwrap/expect there.
#[cfg(test)]
mod model {
    use std::path::PathBuf;
    use std::time::Duration;

    use futures::StreamExt;
    use keel_llm::local::{GrammarMode, LocalProvider, LocalSpec};
    use keel_llm::{ErrorKind, ModelEvent, ModelRequest, Provider, ProviderSpec, Result};
    use keel_protocol::{
        AssistantMessage, ContentBlock, Message, StopReason, ThinkingLevel, ToolResultMessage,
        ToolSpec, Usage, UserMessage,
    };
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use keel_test_support::small_local_model as small_model;

    fn spec(path: PathBuf) -> LocalSpec {
        LocalSpec {
            context_size: 4096,
            ..LocalSpec::new(path)
        }
    }

    fn user(text: &str) -> Message {
        Message::User(UserMessage {
            content: vec![ContentBlock::text(text)],
            timestamp: 0,
        })
    }

    fn request(messages: Vec<Message>, tools: Vec<ToolSpec>, max: u64) -> ModelRequest {
        ModelRequest {
            model: "qwen2.5-coder-0.5b-instruct".into(),
            system_prompt: "You are a helpful coding assistant.".into(),
            messages,
            tools,
            thinking_level: ThinkingLevel::Off,
            max_output_tokens: Some(max),
            output_schema: None,
        }
    }

    fn write_tool() -> ToolSpec {
        ToolSpec {
            name: "write".into(),
            description: "Write a file.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "The file's content."},
                    "path": {"type": "string", "description": "The file to write."},
                },
                "required": ["content", "path"],
            }),
        }
    }

    async fn collect(provider: &LocalProvider, req: ModelRequest) -> Vec<Result<ModelEvent>> {
        let stream = provider
            .stream(req, CancellationToken::new())
            .await
            .expect("stream starts");
        tokio::time::timeout(Duration::from_secs(300), stream.collect::<Vec<_>>())
            .await
            .expect("the model answers in time")
    }

    fn usage(events: &[Result<ModelEvent>]) -> Usage {
        events
            .iter()
            .rev()
            .find_map(|e| match e {
                Ok(ModelEvent::Usage(u)) => Some(*u),
                _ => None,
            })
            .expect("usage")
    }

    fn finish(events: &[Result<ModelEvent>]) -> StopReason {
        match events.last() {
            Some(Ok(ModelEvent::Finish { stop_reason })) => *stop_reason,
            other => panic!("no finish: {other:?}"),
        }
    }

    #[tokio::test]
    async fn loads_the_small_model_and_generates_a_few_tokens() {
        let Some(path) = small_model() else { return };
        let provider = LocalProvider::new("local", spec(path)).unwrap();
        assert_eq!(provider.api(), "local");
        let events = collect(
            &provider,
            request(vec![user("Say hello in one short sentence.")], vec![], 8),
        )
        .await;
        assert!(
            matches!(events[0], Ok(ModelEvent::Start { .. })),
            "{events:?}"
        );
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                Ok(ModelEvent::TextDelta(t)) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert!(!text.trim().is_empty(), "{events:?}");
        let u = usage(&events);
        assert!(u.output >= 1 && u.output <= 8, "{u:?}");
        assert!(u.input > 10, "{u:?}");
        assert!(matches!(
            finish(&events),
            StopReason::Stop | StopReason::Length
        ));
    }

    #[tokio::test]
    async fn grammar_makes_a_valid_call_and_the_next_turn_reuses_the_cache() {
        let Some(path) = small_model() else { return };
        // Its own engine (another context size): requests of other tests in
        // between would replace what the cache holds.
        let provider = LocalProvider::new(
            "local",
            LocalSpec {
                grammar: GrammarMode::Required,
                context_size: 2048,
                ..spec(path)
            },
        )
        .unwrap();
        let ask = user("Create the file hello.txt containing the text: hi there");
        let events = collect(
            &provider,
            request(vec![ask.clone()], vec![write_tool()], 200),
        )
        .await;
        assert_eq!(finish(&events), StopReason::ToolUse, "{events:?}");
        let (id, name) = events
            .iter()
            .find_map(|e| match e {
                Ok(ModelEvent::ToolCallStart { id, name, .. }) => Some((id.clone(), name.clone())),
                _ => None,
            })
            .expect("a call");
        assert_eq!(name, "write");
        let args: serde_json::Value = events
            .iter()
            .find_map(|e| match e {
                Ok(ModelEvent::ToolCallDelta { delta, .. }) => serde_json::from_str(delta).ok(),
                _ => None,
            })
            .expect("arguments");
        assert!(
            args["path"].is_string() && args["content"].is_string(),
            "{args}"
        );
        let first = usage(&events);

        // The next turn: the history now holds the call and its result.
        let history = vec![
            ask,
            Message::Assistant(AssistantMessage {
                content: vec![ContentBlock::ToolCall {
                    id: id.clone(),
                    name,
                    arguments: args,
                }],
                api: "local".into(),
                provider: "local".into(),
                model: "m".into(),
                usage: first,
                stop_reason: StopReason::ToolUse,
                error_message: None,
                error_kind: None,
                timestamp: 0,
                response_id: None,
            }),
            Message::ToolResult(ToolResultMessage {
                tool_call_id: id,
                tool_name: "write".into(),
                content: vec![ContentBlock::text("Wrote hello.txt")],
                details: None,
                is_error: false,
                timestamp: 0,
            }),
        ];
        let events = collect(&provider, request(history, vec![write_tool()], 40)).await;
        let second = usage(&events);
        // Everything up to the end of the call was already decoded.
        assert!(
            second.cache_read + 2 >= first.input + first.output,
            "first {first:?}, second {second:?}"
        );
        // Only the new suffix is evaluated: the tool result, and when the
        // small model asks for the same call again, the note that makes it
        // answer instead (about 40 tokens). The rest came from the cache.
        assert!(second.input < second.cache_read / 2, "{second:?}");
    }

    #[tokio::test]
    async fn cancellation_ends_the_stream() {
        let Some(path) = small_model() else { return };
        let provider = LocalProvider::new("local", spec(path)).unwrap();
        let cancel = CancellationToken::new();
        let mut stream = provider
            .stream(
                request(
                    vec![user("Count from 1 to 500, one number per line.")],
                    vec![],
                    1000,
                ),
                cancel.clone(),
            )
            .await
            .unwrap();
        let mut deltas = 0;
        let mut last = None;
        while let Some(ev) = stream.next().await {
            if matches!(ev, Ok(ModelEvent::TextDelta(_))) {
                deltas += 1;
                if deltas == 3 {
                    cancel.cancel();
                }
            }
            last = Some(ev);
        }
        match last {
            Some(Err(e)) => assert_eq!(e.kind, ErrorKind::Cancelled),
            other => panic!("expected a cancellation, got {other:?}"),
        }
        // The engine is still usable afterwards.
        let events = collect(&provider, request(vec![user("Say OK.")], vec![], 4)).await;
        assert!(matches!(events.last(), Some(Ok(ModelEvent::Finish { .. }))));
    }

    #[tokio::test]
    async fn prompt_longer_than_the_context_is_a_clear_error() {
        let Some(path) = small_model() else { return };
        let provider = LocalProvider::new(
            "local",
            LocalSpec {
                context_size: 256,
                ..spec(path)
            },
        )
        .unwrap();
        let long = "word ".repeat(400);
        let err = provider
            .stream(
                request(vec![user(&long)], vec![], 8),
                CancellationToken::new(),
            )
            .await
            .err()
            .expect("too long");
        assert_eq!(err.kind, ErrorKind::ContextWindowExceeded, "{err}");
    }

    #[test]
    fn missing_and_foreign_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.gguf");
        let err = LocalProvider::new("local", LocalSpec::new(&missing)).unwrap_err();
        assert_eq!(err.kind, ErrorKind::ModelNotFound);
        assert!(err.message.contains("keel models pull"), "{err}");
        let text = dir.path().join("notes.gguf");
        std::fs::write(&text, "hello").unwrap();
        let err = LocalProvider::new("local", LocalSpec::new(&text)).unwrap_err();
        assert!(err.message.contains("not a GGUF"), "{err}");
        // Through the factory too.
        let err = keel_llm::build_provider(&ProviderSpec::local("local", LocalSpec::new(&missing)))
            .err()
            .unwrap();
        assert_eq!(err.kind, ErrorKind::ModelNotFound);
    }

    #[tokio::test]
    async fn a_gguf_without_a_chat_template_is_not_a_chat_model() {
        let Some(path) = small_model() else { return };
        // The same model with its `tokenizer.chat_template` key renamed.
        let mut bytes = std::fs::read(&path).unwrap();
        let key = b"tokenizer.chat_template";
        let at = bytes
            .windows(key.len())
            .position(|w| w == key)
            .expect("the model has a chat template");
        bytes[at + key.len() - 1] = b'X';
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("base.gguf");
        std::fs::write(&base, bytes).unwrap();
        let provider = LocalProvider::new("local", spec(base)).unwrap();
        let err = provider
            .stream(
                request(vec![user("hi")], vec![], 4),
                CancellationToken::new(),
            )
            .await
            .err()
            .expect("not a chat model");
        assert!(err.message.contains("not a chat model"), "{err}");
    }

    /// The error of the first request to a provider for `spec`.
    async fn first_error(spec: LocalSpec) -> keel_llm::Error {
        let provider = LocalProvider::new("local", spec).unwrap();
        provider
            .stream(
                request(vec![user("hi")], vec![], 4),
                CancellationToken::new(),
            )
            .await
            .err()
            .expect("an error")
    }

    #[tokio::test]
    async fn a_truncated_gguf_is_a_clear_error_not_a_crash() {
        let Some(path) = small_model() else { return };
        // The header and part of the tensors: what an interrupted copy leaves.
        let bytes = std::fs::read(&path).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cut = dir.path().join("cut.gguf");
        std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
        let err = first_error(spec(cut.clone())).await;
        assert!(err.message.contains("could not load"), "{err}");
        assert!(err.message.contains("keel models pull"), "{err}");
        assert!(err.message.contains(&*cut.to_string_lossy()), "{err}");
        // Only the header: the same.
        let stub = dir.path().join("stub.gguf");
        std::fs::write(&stub, &bytes[..64]).unwrap();
        let err = first_error(spec(stub)).await;
        assert!(err.message.contains("could not load"), "{err}");
    }

    #[tokio::test]
    async fn a_context_the_model_or_the_memory_cannot_hold_is_a_clear_error() {
        let Some(path) = small_model() else { return };
        // Far beyond what the model was trained for (and than RAM holds):
        // refused before llama.cpp allocates anything.
        let err = first_error(LocalSpec {
            context_size: 4_000_000,
            ..spec(path)
        })
        .await;
        assert!(
            err.message.contains("larger than this model supports")
                || err.message.contains("out of memory"),
            "{err}"
        );
        assert!(err.message.contains("context_size"), "{err}");
    }

    fn text_of(events: &[Result<ModelEvent>]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                Ok(ModelEvent::TextDelta(t)) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The `.state` files of a prompt cache and their sizes.
    fn state_files(root: &std::path::Path) -> Vec<(PathBuf, u64)> {
        let mut out = Vec::new();
        for dir in std::fs::read_dir(root).into_iter().flatten().flatten() {
            for f in std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let p = f.path();
                if p.extension().is_some_and(|x| x == "state") {
                    out.push((p.clone(), f.metadata().unwrap().len()));
                }
            }
        }
        out
    }

    /// One request on an engine of its own (as a new process has): the
    /// provider, and with it the engine and its KV cache, is dropped after.
    async fn fresh(spec: &LocalSpec, req: ModelRequest) -> Vec<Result<ModelEvent>> {
        let provider = LocalProvider::new("local", spec.clone()).unwrap();
        let events = collect(&provider, req).await;
        drop(provider);
        // The engine thread ends once its last handle is gone.
        tokio::time::sleep(Duration::from_millis(300)).await;
        events
    }

    #[tokio::test]
    async fn the_prompt_cache_on_disk_serves_the_next_engine_and_changes_nothing() {
        let Some(path) = small_model() else { return };
        let cache = tempfile::tempdir().unwrap();
        let spec = LocalSpec {
            // An engine no other test shares (another context size).
            context_size: 3072,
            // Text or a call: the answer's text is compared.
            grammar: GrammarMode::Auto,
            prompt_cache: Some(cache.path().to_path_buf()),
            ..spec(path)
        };
        let ask = || {
            request(
                vec![user("Say hello in one short sentence.")],
                vec![write_tool()],
                12,
            )
        };
        // Cold: the system prompt and tools are evaluated and saved.
        let cold = fresh(&spec, ask()).await;
        let cold_usage = usage(&cold);
        assert!(cold_usage.cache_write > 50, "{cold_usage:?}");
        assert_eq!(cold_usage.cache_read, 0, "{cold_usage:?}");
        let saved = state_files(cache.path());
        assert!(!saved.is_empty());
        // Warm: a new engine loads them; the answer is the same (greedy).
        let warm = fresh(&spec, ask()).await;
        let warm_usage = usage(&warm);
        assert!(
            warm_usage.cache_read >= cold_usage.cache_write,
            "cold {cold_usage:?}, warm {warm_usage:?}"
        );
        assert_eq!(warm_usage.cache_write, 0, "{warm_usage:?}");
        assert!(warm_usage.input < cold_usage.input, "{warm_usage:?}");
        assert_eq!(text_of(&warm), text_of(&cold));
        // Another tool set: its fixed part is not saved yet, so it is
        // evaluated (past what it shares with the saved one) and saved.
        let mut other_tool = write_tool();
        other_tool.name = "create".into();
        let other = fresh(
            &spec,
            request(
                vec![user("Say hello in one short sentence.")],
                vec![other_tool],
                12,
            ),
        )
        .await;
        assert!(usage(&other).cache_write > 0, "{:?}", usage(&other));
        // Every state file cut short: ignored, removed, and rebuilt; the
        // answer is still the same.
        for (file, size) in state_files(cache.path()) {
            let f = std::fs::File::options().write(true).open(&file).unwrap();
            f.set_len(size / 2).unwrap();
        }
        let rebuilt = fresh(&spec, ask()).await;
        let rebuilt_usage = usage(&rebuilt);
        assert!(rebuilt_usage.cache_write > 50, "{rebuilt_usage:?}");
        assert_eq!(rebuilt_usage.cache_read, 0, "{rebuilt_usage:?}");
        assert_eq!(text_of(&rebuilt), text_of(&cold));
        let again = state_files(cache.path());
        assert!(
            again
                .iter()
                .any(|(_, size)| saved.iter().any(|(_, s)| s == size)),
            "saved {saved:?}, now {again:?}"
        );
    }
}
