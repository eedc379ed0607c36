//! The `write` tool.
//!
//! Owns creating or overwriting one file with given content (parent
//! directories are created; the backend makes the replacement atomic). It
//! must not know how the file system is reached.

use keel_protocol::ToolResult;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{check_cancel, parse_args};
use crate::error::{Error, Result};
use crate::path::resolve_path;
use crate::{Tool, ToolContext, ToolOutput};

/// Writes a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteTool;

#[derive(Debug, Deserialize)]
struct Args {
    path: String,
    content: String,
}

#[async_trait::async_trait]
impl Tool for WriteTool {
    fn name(&self) -> &str {
        "write"
    }

    fn description(&self) -> &str {
        "Write content to a file. Creates the file if it does not exist and overwrites it if \
         it does; missing parent directories are created automatically. The whole file is \
         replaced with exactly the given content, so use this for new files or complete \
         rewrites, and prefer the edit tool for changing part of an existing file. Relative \
         paths resolve against the working directory."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Path to the file to write (relative or absolute)"
                },
                "content": {
                    "type": "string",
                    "description": "Content to write to the file"
                }
            },
            "required": ["path", "content"]
        })
    }

    fn write_target(&self, cwd: &std::path::Path, args: &Value) -> Option<std::path::PathBuf> {
        super::path_write_target(cwd, args)
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput> {
        let args: Args = parse_args("write", args)?;
        let path = resolve_path(&ctx.cwd, &args.path)?;
        let existing = ctx.fs.metadata(&path).await.ok();
        if existing.as_ref().is_some_and(|meta| meta.is_dir) {
            return Err(Error::IsADirectory { path });
        }
        check_cancel(ctx)?;
        let bytes = args.content.len();
        super::write_file(ctx, &path, args.content.as_bytes()).await?;
        Ok(ToolOutput::success(ToolResult {
            content: vec![keel_protocol::ContentBlock::text(format!(
                "Wrote {bytes} bytes to {}",
                args.path
            ))],
            // Whether the file is new, as it was before the write: a host
            // that looks at the disk later sees it there either way.
            details: Some(json!({"path": path, "bytes": bytes, "created": existing.is_none()})),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtins::test_support::{ctx, run_err, run_ok};
    use std::fs;

    #[tokio::test]
    async fn writes_and_creates_parent_directories() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        let out = run_ok(
            &WriteTool,
            &c,
            json!({"path": "a/b/c.txt", "content": "héllo\n"}),
        )
        .await;
        assert!(!out.is_error);
        assert_eq!(out.text(), "Wrote 7 bytes to a/b/c.txt");
        let details = out.result.details.unwrap();
        assert_eq!(details["bytes"], 7);
        assert_eq!(details["created"], true);
        assert_eq!(
            details["path"].as_str().unwrap(),
            dir.path().join("a/b/c.txt").to_str().unwrap()
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "héllo\n"
        );

        let again = run_ok(&WriteTool, &c, json!({"path": "a/b/c.txt", "content": ""})).await;
        assert_eq!(again.result.details.unwrap()["created"], false);
        assert_eq!(
            fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            ""
        );
    }

    #[tokio::test]
    async fn refuses_directories_and_bad_arguments() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("d")).unwrap();
        let c = ctx(dir.path());
        let err = run_err(&WriteTool, &c, json!({"path": "d", "content": "x"})).await;
        assert!(err.contains("is a directory"), "{err}");
        let err = run_err(&WriteTool, &c, json!({"path": "x"})).await;
        assert!(err.contains("missing field `content`"), "{err}");
        let err = run_err(&WriteTool, &c, json!({"path": "", "content": "x"})).await;
        assert!(err.contains("must not be empty"), "{err}");
    }
}
