//! Sending an approved draft: a call held in an unattended run, run once
//! after a person said yes, outside any turn (the agent hears the outcome
//! on its session's next turn).
//!
//! Owns [`send_draft`], the one way both the RPC front-end and `keel
//! approvals send` run a draft: claim the row (so it runs at most once),
//! check that a file-writing call still lands on the file it was judged on,
//! run the tool, record the outcome. It must not know the wire.

use std::sync::Arc;

use keel_approvals::{ApprovalEngine, call_digest};
use keel_tools::{Tool, ToolContext};

/// The tool text of a draft whose file moved since it was judged.
const MOVED: &str = "Not sent: the file this call writes is no longer the one it was judged on \
                     (a symlink on its path changed).";

/// Claims the approved draft `id`, runs it with the matching tool of
/// `tools` in `ctx` (its `call_id` and `write_target` are set here), and
/// records what it produced. Returns the tool text and whether it failed.
pub async fn send_draft(
    engine: &ApprovalEngine,
    id: &str,
    tools: &[Arc<dyn Tool>],
    mut ctx: ToolContext,
) -> keel_approvals::Result<(String, bool)> {
    let row = engine.claim_draft(id).await?;
    let (text, is_error) = match tools.iter().find(|t| t.name() == row.tool) {
        None => (format!("Tool {} not found", row.tool), true),
        Some(tool) => {
            // The file it writes, resolved now: it must be the one the
            // draft was judged on.
            let write_target = tool.write_target(&ctx.cwd, &row.args);
            let judged = call_digest(&row.tool, &row.args, write_target.as_deref());
            if write_target.is_some() && judged != row.digest {
                (MOVED.to_owned(), true)
            } else {
                ctx.call_id = row.call_id.clone();
                // The person's yes covers what the draft was judged as.
                if let Some(spec) = ctx.sandbox.as_mut() {
                    let info = crate::deps::ToolCallInfo {
                        session_id: row.session_id.clone(),
                        call_id: row.call_id.clone(),
                        tool_name: row.tool.clone(),
                        args: row.args.clone(),
                        cwd: ctx.cwd.clone(),
                        write_target: write_target.clone(),
                        hints: None,
                    };
                    let places = keel_approvals::Places::new(&ctx.cwd)
                        .protecting(&engine.config().protected);
                    let c = keel_approvals::classify_judged(
                        &row.tool,
                        &row.args,
                        keel_approvals::ToolOrigin::Builtin,
                        &places,
                        write_target.as_deref(),
                    );
                    spec.grant = crate::sandboxed::grant_of(&c, &info);
                }
                ctx.write_target = write_target;
                match tool.execute(&ctx, row.args.clone()).await {
                    Ok(out) => (out.text(), out.is_error),
                    Err(e) => (e.to_string(), true),
                }
            }
        }
    };
    engine.finish(&row.id, Some(text.clone()), is_error).await?;
    Ok((text, is_error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_approvals::{CallContext, GateOutcome, ToolOrigin};
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    /// A `write` of `link/f.txt` drafted in an unattended run, approved.
    async fn approved_draft(ws: &std::path::Path, engine: &ApprovalEngine) -> String {
        let args = json!({"path": "link/f.txt", "content": "x"});
        let tools = keel_tools::builtin_tools();
        let write = tools.iter().find(|t| t.name() == "write").unwrap();
        let call = CallContext {
            workspace: ws.display().to_string(),
            cwd: ws.to_path_buf(),
            session_id: "s1".into(),
            call_id: "c1".into(),
            tool_name: "write".into(),
            write_target: write.write_target(ws, &args),
            args,
            origin: ToolOrigin::Builtin,
            unattended: true,
        };
        let GateOutcome::Drafted { request, .. } = engine
            .evaluate_in(&call, Some(keel_approvals::Mode::Everything))
            .await
            .unwrap()
        else {
            panic!("not drafted");
        };
        engine.send_draft(&request.id, "test").await.unwrap();
        request.id
    }

    async fn setup() -> (tempfile::TempDir, std::path::PathBuf, ApprovalEngine) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("inner")).unwrap();
        std::fs::create_dir(root.join("outside")).unwrap();
        std::os::unix::fs::symlink("inner", ws.join("link")).unwrap();
        let engine = ApprovalEngine::open_sqlite(root.join("a.db"))
            .await
            .unwrap();
        (dir, ws, engine)
    }

    #[tokio::test]
    async fn a_draft_writes_the_file_it_was_judged_on() {
        let (_dir, ws, engine) = setup().await;
        let id = approved_draft(&ws, &engine).await;
        let ctx = ToolContext::local(&ws, CancellationToken::new());
        let (text, failed) = send_draft(&engine, &id, &keel_tools::builtin_tools(), ctx)
            .await
            .unwrap();
        assert!(!failed, "{text}");
        assert_eq!(
            std::fs::read_to_string(ws.join("inner/f.txt")).unwrap(),
            "x"
        );
    }

    #[tokio::test]
    async fn a_draft_whose_symlink_moved_is_not_sent() {
        let (_dir, ws, engine) = setup().await;
        let id = approved_draft(&ws, &engine).await;
        std::fs::remove_file(ws.join("link")).unwrap();
        std::os::unix::fs::symlink("../outside", ws.join("link")).unwrap();
        let ctx = ToolContext::local(&ws, CancellationToken::new());
        let (text, failed) = send_draft(&engine, &id, &keel_tools::builtin_tools(), ctx)
            .await
            .unwrap();
        assert!(failed);
        assert_eq!(text, MOVED);
        assert!(!ws.join("../outside/f.txt").exists());
        assert!(!ws.join("inner/f.txt").exists());
    }
}
