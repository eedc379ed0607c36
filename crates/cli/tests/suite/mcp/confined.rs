//! `[mcp_servers.X] sandbox`: a stdio server's process behind the same
//! walls as a command (`tests/clients/writing_server.py` writes the file
//! its tool is given). keel's own config leaves servers unconfined unless
//! asked; a trusted workspace's servers write only in the workspace.

use serde_json::json;

use super::{call, result_for, write_config};
use crate::suite::Env;

fn server() -> String {
    super::clients_dir()
        .join("writing_server.py")
        .display()
        .to_string()
}

#[tokio::test]
async fn a_confined_server_writes_only_where_its_sandbox_lets_it() {
    if !crate::suite::sandbox::kernel_can_confine() {
        return;
    }
    let env = Env::new().await;
    // Outside every writable root: not the workspace, not keel's temp dir.
    let around = crate::suite::sandbox::Around::new();
    let (inside_file, outside_file) = (env.ws().join("in.txt"), around.outside.join("out.txt"));
    write_config(
        &env,
        &format!(
            "[mcp_servers.ro]\ncommand = \"python3\"\nargs = [{s:?}]\nsandbox = \"read-only\"\n\n\
             [mcp_servers.ww]\ncommand = \"python3\"\nargs = [{s:?}]\nsandbox = \"workspace-write\"\ncwd = {ws:?}\n\n\
             [mcp_servers.free]\ncommand = \"python3\"\nargs = [{s:?}]\n",
            s = server(),
            ws = env.ws().display().to_string(),
        ),
    );
    let path = |p: &std::path::Path| json!({"path": p.display().to_string()});
    env.mock.push_all([
        call("c1", "mcp__ro__touch", path(&inside_file)),
        call("c2", "mcp__ww__touch", path(&outside_file)),
        call("c3", "mcp__ww__touch", path(&inside_file)),
        call("c4", "mcp__free__touch", path(&outside_file)),
        keel_test_support::MockResponse::text("done"),
    ]);
    let run = env
        .exec()
        .env("TMPDIR", around.tmp.display().to_string())
        .arg("write around")
        .run()
        .await
        .unwrap();
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    assert!(
        result_for(&env, "c1").contains("refused"),
        "{}",
        result_for(&env, "c1")
    );
    assert!(
        result_for(&env, "c2").contains("refused"),
        "{}",
        result_for(&env, "c2")
    );
    assert!(
        result_for(&env, "c3").contains("wrote"),
        "{}",
        result_for(&env, "c3")
    );
    // Unconfined unless asked: keel's own config is the user's choice.
    assert!(
        result_for(&env, "c4").contains("wrote"),
        "{}",
        result_for(&env, "c4")
    );
    assert!(inside_file.exists() && outside_file.exists());
}

#[tokio::test]
async fn a_bad_sandbox_value_names_the_values() {
    let env = Env::new().await;
    write_config(
        &env,
        &format!(
            "[mcp_servers.odd]\ncommand = \"python3\"\nargs = [{:?}]\nsandbox = \"mostly\"\n",
            server()
        ),
    );
    let out = env.keel().args(["mcp", "list"]).run().await.unwrap();
    assert!(
        out.stdout
            .contains("use read-only, workspace-write or danger-full-access"),
        "{}{}",
        out.stdout,
        out.stderr
    );
}
