//! Framing, the handshake and its gates.

use serde_json::{Value, json};

use super::super::Env;

#[tokio::test]
async fn requests_before_initialize_and_a_second_initialize_are_refused() {
    let env = Env::new().await;
    let mut s = env.app_server(&[]).await;
    let e = s.err("thread/list", json!({})).await;
    assert_eq!(e, json!({"code": -32600, "message": "Not initialized"}));
    s.initialize(false).await;
    let e = s
        .err(
            "initialize",
            json!({"clientInfo": {"name": "again", "version": "1"}}),
        )
        .await;
    assert_eq!(e, json!({"code": -32600, "message": "Already initialized"}));
    s.close().await;
}

#[tokio::test]
async fn initialize_reports_real_values() {
    let env = Env::new().await;
    let mut s = env.app_server(&[]).await;
    let r = s.initialize(false).await;
    let result = &r["result"];
    assert!(
        result["userAgent"]
            .as_str()
            .unwrap()
            .starts_with("keel_tests/")
    );
    assert_eq!(
        result["codexHome"],
        std::path::absolute(env.home.path())
            .unwrap()
            .display()
            .to_string()
    );
    assert_eq!(result["platformFamily"], "unix");
    assert_eq!(result["platformOs"], std::env::consts::OS);
    s.close().await;
}

#[tokio::test]
async fn ids_are_echoed_and_jsonrpc_is_ignored() {
    let env = Env::new().await;
    let mut s = env.initialized(false).await;
    s.request_with_id(json!("str-id-1"), "thread/loaded/list", Some(json!({})))
        .await;
    let r = s.response(&json!("str-id-1")).await;
    assert_eq!(r["result"], json!({"data": [], "nextCursor": null}));
    s.send_raw_request(
        json!(9_007_199_254_740_993_i64),
        "skills/list",
        r#"{"jsonrpc":"2.0","id":9007199254740993,"method":"skills/list","params":{}}"#,
    )
    .await;
    let r = s.response(&json!(9_007_199_254_740_993_i64)).await;
    assert!(r["result"]["data"].is_array(), "{r}");
    s.close().await;
}

#[tokio::test]
async fn bad_params_and_unknown_methods_are_invalid_requests() {
    let env = Env::new().await;
    let mut s = env.initialized(false).await;
    let e = s.err("does/notExist", json!({})).await;
    assert_eq!(e["code"], -32600);
    assert!(
        e["message"].as_str().unwrap().starts_with(
            "Invalid request: unknown variant `does/notExist`, expected one of `initialize`"
        ),
        "{e}"
    );
    let e = s.err("thread/start", json!({"cwd": 123})).await;
    assert_eq!(
        e,
        json!({"code": -32600, "message": "Invalid request: invalid type: integer `123`, expected a string"})
    );
    let e = s.err("turn/start", json!({"threadId": "x"})).await;
    assert_eq!(e["message"], "Invalid request: missing field `input`");
    let e = s
        .err("thread/start", json!({"approvalPolicy": "on-failure"}))
        .await;
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("unknown variant `on-failure`"),
        "{e}"
    );
    s.request_with_id(json!(50), "thread/loaded/list", None)
        .await;
    let r = s.response(&json!(50)).await;
    assert_eq!(
        r["error"]["message"],
        "Invalid request: missing field `params`"
    );
    let e = s
        .err(
            "turn/start",
            json!({"threadId": "01a229b9-0000-7000-8000-000000000000", "input": []}),
        )
        .await;
    assert_eq!(
        e["message"],
        "thread not found: 01a229b9-0000-7000-8000-000000000000"
    );
    let e = s.err("thread/goal/get", json!({"threadId": "x"})).await;
    assert_eq!(e["code"], -32601);
    assert!(
        e["message"].as_str().unwrap().contains("thread/goal/get"),
        "{e}"
    );
    s.close().await;
}

#[tokio::test]
async fn experimental_methods_and_fields_need_the_capability() {
    let env = Env::new().await;
    let mut s = env.initialized(false).await;
    let e = s.err("thread/queue/list", json!({"threadId": "x"})).await;
    assert_eq!(
        e,
        json!({"code": -32600, "message": "thread/queue/list requires experimentalApi capability"})
    );
    let e = s
        .err(
            "thread/start",
            json!({"approvalPolicy": {"granular": {"mcp_elicitations": true, "rules": true, "sandbox_approval": true}}}),
        )
        .await;
    assert_eq!(
        e["message"],
        "askForApproval.granular requires experimentalApi capability"
    );
    s.close().await;

    let mut s = env.initialized(true).await;
    let e = s.err("thread/queue/list", json!({"threadId": "x"})).await;
    assert_eq!(e["code"], -32601, "experimental but not implemented: {e}");
    s.close().await;
}

#[tokio::test]
async fn malformed_lines_batches_and_stray_responses_get_no_reply() {
    let env = Env::new().await;
    let mut s = env.initialized(false).await;
    s.send_raw("this is not json").await;
    s.send_raw(r#"[{"id": 90, "method": "thread/loaded/list", "params": {}}]"#)
        .await;
    s.send_raw(r#"{"id": 91, "result": {"decision": "accept"}}"#)
        .await;
    s.send_raw(r#"{"method": "does/notExistNote", "params": {}}"#)
        .await;
    // The next frame is the answer to the next request: nothing came before it.
    let id = s.request("thread/loaded/list", json!({})).await;
    let first = s.next().await;
    assert_eq!(first["id"], id, "unexpected frame {first}");
    let out = s.close().await;
    assert!(
        out.stderr.contains("Failed to deserialize JSONRPCMessage"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("could not find callback"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn an_oversize_frame_gets_one_error_with_a_null_id() {
    let env = Env::new().await;
    let mut s = env.app_server(&["--max-frame-bytes", "2048"]).await;
    s.initialize(false).await;
    let big = format!(
        r#"{{"id": 5, "method": "thread/start", "params": {{"baseInstructions": "{}"}}}}"#,
        "x".repeat(4096)
    );
    s.send_raw(&big).await;
    let e = s.next().await;
    assert_eq!(e["id"], Value::Null);
    assert_eq!(e["error"]["code"], -32600);
    assert!(e["error"].get("data").is_none());
    // The server keeps serving.
    let r = s.ok("thread/loaded/list", json!({})).await;
    assert_eq!(r["data"], json!([]));
    s.close().await;
}

#[tokio::test]
async fn opted_out_notifications_are_not_sent() {
    let env = Env::new().await;
    env.mock
        .push(keel_test_support::MockResponse::text("Hello there, friend"));
    let mut s = env.app_server(&[]).await;
    s.initialize_with(json!({
        "experimentalApi": true,
        "optOutNotificationMethods": ["item/agentMessage/delta", "thread/started"]
    }))
    .await;
    let thread = s.start_thread(env.ws(), "never").await;
    let turn = s.start_turn(&thread, "hi").await;
    let done = s.finish_turn(&turn, "accept").await;
    assert_eq!(done["status"], "completed");
    let methods = s.methods();
    assert!(
        !methods.iter().any(|m| m == "item/agentMessage/delta"),
        "{methods:?}"
    );
    assert!(
        !methods.iter().any(|m| m == "thread/started"),
        "{methods:?}"
    );
    assert!(methods.iter().any(|m| m == "item/completed"));
    s.close().await;
}

#[tokio::test]
async fn a_request_with_an_unusable_id_is_answered_not_dropped() {
    let env = Env::new().await;
    let mut s = env.initialized(false).await;
    for id in [
        "1.5",
        "true",
        "{\"a\":1}",
        "null",
        "99999999999999999999",
        "[1]",
    ] {
        s.send_raw(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"thread/loaded/list","params":{{}}}}"#
        ))
        .await;
        let r = s
            .wait_for("an error for an unusable id", |f| {
                f.get("error").is_some() && f["id"].is_null()
            })
            .await;
        assert_eq!(r["error"]["code"], -32600, "{id}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("is not a string or an integer"),
            "{id}: {r}"
        );
    }
    // Still serving.
    let r = s.ok("thread/loaded/list", json!({})).await;
    assert_eq!(r["data"], json!([]));
    s.close().await;
}

#[tokio::test]
async fn a_request_naming_a_key_twice_is_refused_and_nothing_runs() {
    let env = Env::new().await;
    let mut s = env.initialized(false).await;
    let target = env.ws().join("pwned.txt");
    // Read leniently, the last `method` would win and write the file.
    s.send_raw(&format!(
        r#"{{"id":41,"method":"model/list","method":"fs/writeFile","params":{{"path":{path},"dataBase64":"eA=="}}}}"#,
        path = Value::String(target.display().to_string()),
    ))
    .await;
    let r = s.wait_for("the refusal of id 41", |f| f["id"] == 41).await;
    assert_eq!(
        r,
        json!({"id": 41, "error": {"code": -32600, "message": "Invalid request: duplicate key \"method\"; a member may be given once"}})
    );
    // Any top-level key, wherever the id stands; params may repeat what the
    // envelope has.
    s.send_raw(r#"{"method":"thread/loaded/list","params":{},"params":{"x":1},"id":"p"}"#)
        .await;
    let r = s.wait_for("the refusal of id p", |f| f["id"] == "p").await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("duplicate key \"params\""),
        "{r}"
    );
    assert!(!target.exists(), "a refused request ran");
    let r = s.ok("thread/loaded/list", json!({})).await;
    assert_eq!(r["data"], json!([]));
    s.close().await;
}

/// The transport flags as they pick the runtime: a `--listen` that is no
/// transport fails before anything is served; `--stdio` wins over
/// `--listen`, and `stdio` without the scheme is stdio too.
#[tokio::test]
async fn the_transport_flags_pick_stdio_or_refuse_a_bad_listen() {
    let env = Env::new().await;
    let out = env
        .app_server_cmd()
        .args(["--listen", "tcp://127.0.0.1:1"])
        .timeout(super::WAIT)
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("invalid --listen value \"tcp://127.0.0.1:1\""),
        "{}",
        out.stderr
    );
    for flags in [
        &["--stdio", "--listen", "tcp://nowhere"][..],
        &["--listen", "stdio"],
    ] {
        let mut s = env.app_server(flags).await;
        s.initialize(false).await;
        let list = s.ok("thread/loaded/list", json!({})).await;
        assert_eq!(list["data"], json!([]), "{flags:?}");
        let out = s.close().await;
        assert_eq!(out.code(), Some(0), "{flags:?}: {}", out.stderr);
    }
}
