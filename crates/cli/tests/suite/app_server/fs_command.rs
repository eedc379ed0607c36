//! `fs/*` edge cases and `command/exec` (collected, streamed, terminated
//! while other requests are served).

use base64::Engine;
use serde_json::json;

use super::super::Env;

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[tokio::test]
async fn fs_methods_take_absolute_paths_and_report_io_errors() {
    let env = Env::new().await;
    let mut s = env.initialized(false).await;
    let ws = env.ws().display().to_string();
    let file = format!("{ws}/dir/a.txt");
    s.ok("fs/createDirectory", json!({"path": format!("{ws}/dir")}))
        .await;
    s.ok(
        "fs/writeFile",
        json!({"path": file, "dataBase64": b64("probe\n")}),
    )
    .await;
    let r = s.ok("fs/readFile", json!({"path": file})).await;
    assert_eq!(r["dataBase64"], b64("probe\n"));
    let e = s.err("fs/readFile", json!({"path": "dir/a.txt"})).await;
    assert_eq!(
        e,
        json!({"code": -32600, "message": "Invalid request: AbsolutePathBuf deserialized without a base path"})
    );
    let e = s
        .err("fs/readFile", json!({"path": format!("{ws}/nope")}))
        .await;
    assert_eq!(e["code"], -32603);
    assert_eq!(e["message"], "No such file or directory (os error 2)");
    std::os::unix::fs::symlink(env.ws().join("dir/a.txt"), env.ws().join("link")).unwrap();
    let m = s
        .ok("fs/getMetadata", json!({"path": format!("{ws}/link")}))
        .await;
    assert_eq!(m["isSymlink"], true);
    assert_eq!(m["isFile"], true);
    let m = s
        .ok("fs/getMetadata", json!({"path": format!("{ws}/dir")}))
        .await;
    assert_eq!(
        (m["isDirectory"].clone(), m["isSymlink"].clone()),
        (json!(true), json!(false))
    );
    s.ok(
        "fs/copy",
        json!({"sourcePath": format!("{ws}/dir"), "destinationPath": format!("{ws}/copy"), "recursive": true}),
    )
    .await;
    let d = s
        .ok("fs/readDirectory", json!({"path": format!("{ws}/copy")}))
        .await;
    assert_eq!(
        d["entries"],
        json!([{"fileName": "a.txt", "isDirectory": false, "isFile": true}])
    );
    s.ok(
        "fs/remove",
        json!({"path": format!("{ws}/copy"), "recursive": true}),
    )
    .await;
    assert!(!env.ws().join("copy").exists());
    s.close().await;
}

#[tokio::test]
async fn command_exec_collects_output() {
    let env = Env::new().await;
    let mut s = env.initialized(false).await;
    let r = s
        .ok(
            "command/exec",
            json!({"command": ["bash", "-c", "echo hi; echo err >&2; exit 3"],
                   "cwd": env.ws().display().to_string()}),
        )
        .await;
    assert_eq!(
        r,
        json!({"exitCode": 3, "stdout": "hi\n", "stderr": "err\n"})
    );
    let e = s
        .err(
            "command/exec",
            json!({"command": ["true"], "cwd": "relative"}),
        )
        .await;
    assert_eq!(e["code"], -32600);
    s.close().await;
}

#[tokio::test]
async fn streamed_command_is_terminated_while_other_requests_are_served() {
    let env = Env::new().await;
    let mut s = env.initialized(false).await;
    let exec = s
        .request(
            "command/exec",
            json!({"command": ["bash", "-c", "read line; echo got $line; sleep 30"],
                   "processId": "p1", "streamStdin": true, "streamStdoutStderr": true}),
        )
        .await;
    // Other requests are answered while the command runs.
    s.ok("thread/loaded/list", json!({})).await;
    s.ok(
        "command/exec/write",
        json!({"processId": "p1", "deltaBase64": b64("ping\n")}),
    )
    .await;
    let delta = s.notification("command/exec/outputDelta").await;
    assert_eq!(delta["params"]["processId"], "p1");
    assert_eq!(delta["params"]["stream"], "stdout");
    assert_eq!(delta["params"]["deltaBase64"], b64("got ping\n"));
    s.ok("command/exec/terminate", json!({"processId": "p1"}))
        .await;
    let r = s.response(&exec).await;
    assert_eq!(r["result"]["stdout"], "", "streamed output is not repeated");
    assert_ne!(r["result"]["exitCode"], 0);
    s.close().await;
}

fn unb64(v: &serde_json::Value) -> String {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(v.as_str().unwrap())
        .unwrap();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[tokio::test]
async fn a_tty_command_sees_its_terminal_and_resizes() {
    let env = Env::new().await;
    let mut s = env.initialized(false).await;
    let exec = s
        .request(
            "command/exec",
            json!({"command": ["bash", "-c", "stty size; read line; stty size; echo got $line"],
                   "tty": true, "size": {"rows": 24, "cols": 80},
                   "processId": "t1", "streamStdin": true, "streamStdoutStderr": true}),
        )
        .await;
    let mut seen = String::new();
    while !seen.contains("24 80") {
        let d = s.notification("command/exec/outputDelta").await;
        seen.push_str(&unb64(&d["params"]["deltaBase64"]));
    }
    s.ok(
        "command/exec/resize",
        json!({"processId": "t1", "size": {"rows": 40, "cols": 120}}),
    )
    .await;
    s.ok(
        "command/exec/write",
        json!({"processId": "t1", "deltaBase64": b64("hello\n")}),
    )
    .await;
    let r = s.response(&exec).await;
    assert_eq!(r["result"]["exitCode"], 0, "{r}");
    for d in s.seen("command/exec/outputDelta") {
        seen.push_str(&unb64(&d["params"]["deltaBase64"]));
    }
    assert!(seen.contains("40 120"), "{seen:?}");
    assert!(seen.contains("got hello"), "{seen:?}");
    // A process without a terminal cannot be resized.
    let e = s
        .err(
            "command/exec/resize",
            json!({"processId": "t1", "size": {"rows": 1, "cols": 1}}),
        )
        .await;
    assert_eq!(e["code"], -32600);
    s.close().await;
}

#[tokio::test]
async fn fs_watch_reports_changes_until_unwatched() {
    let env = Env::new().await;
    let dir = std::fs::canonicalize(env.ws()).unwrap();
    let mut s = env.initialized(false).await;
    let e = s
        .err("fs/watch", json!({"watchId": "w", "path": "relative"}))
        .await;
    assert_eq!(e["code"], -32600);
    let e = s
        .err(
            "fs/watch",
            json!({"watchId": "w", "path": dir.join("missing").display().to_string()}),
        )
        .await;
    assert_eq!(e["code"], -32603);
    let r = s
        .ok(
            "fs/watch",
            json!({"watchId": "w1", "path": dir.display().to_string()}),
        )
        .await;
    assert_eq!(r["path"], dir.display().to_string());
    std::fs::write(dir.join("new.txt"), "hi").unwrap();
    let changed = s.notification("fs/changed").await;
    assert_eq!(changed["params"]["watchId"], "w1");
    let paths = changed["params"]["changedPaths"].as_array().unwrap();
    assert!(
        paths.contains(&json!(dir.join("new.txt").display().to_string())),
        "{changed}"
    );
    assert_eq!(
        s.ok("fs/unwatch", json!({"watchId": "w1"})).await,
        json!({})
    );
    let e = s.err("fs/unwatch", json!({"watchId": "w1"})).await;
    assert_eq!(e["code"], -32600);
    s.close().await;
}

#[tokio::test]
async fn fs_refuses_devices_and_fifos_and_keeps_serving() {
    let env = Env::new().await;
    let mut s = env.initialized(false).await;
    let fifo = env.ws().join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let fifo = fifo.display().to_string();
    let e = s.err("fs/readFile", json!({"path": "/dev/zero"})).await;
    assert_eq!(e["code"], -32603);
    assert!(
        e["message"].as_str().unwrap().contains("character device"),
        "{e}"
    );
    let e = s.err("fs/readFile", json!({"path": fifo})).await;
    assert!(e["message"].as_str().unwrap().contains("FIFO"), "{e}");
    let e = s
        .err(
            "fs/writeFile",
            json!({"path": fifo, "dataBase64": b64("x")}),
        )
        .await;
    assert!(e["message"].as_str().unwrap().contains("FIFO"), "{e}");
    let to = format!("{}/copy", env.ws().display());
    let e = s
        .err(
            "fs/copy",
            json!({"sourcePath": fifo, "destinationPath": to}),
        )
        .await;
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("not a regular file"),
        "{e}"
    );
    let m = s
        .ok(
            "fs/getMetadata",
            json!({"path": env.ws().display().to_string()}),
        )
        .await;
    assert_eq!(m["isDirectory"], true);
}

/// A response larger than the limit on one outgoing frame (64 MiB) is
/// answered with an error naming its size, and the server goes on.
#[tokio::test]
async fn a_response_over_the_frame_limit_is_an_error_and_serving_goes_on() {
    let env = Env::new().await;
    let mut s = env.initialized(false).await;
    let big = env.ws().join("big.bin");
    // 60 MiB (sparse): under the 128 MiB read cap, 80 MiB as base64.
    std::fs::File::create(&big)
        .unwrap()
        .set_len(60 * 1024 * 1024)
        .unwrap();
    let e = s
        .err("fs/readFile", json!({"path": big.display().to_string()}))
        .await;
    assert_eq!(e["code"], -32603, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("over the limit of 67108864 bytes on one frame"),
        "{e}"
    );
    let small = env.ws().join("small.txt");
    std::fs::write(&small, "ok").unwrap();
    let r = s
        .ok("fs/readFile", json!({"path": small.display().to_string()}))
        .await;
    assert_eq!(r["dataBase64"], b64("ok"));
    s.close().await;
}
