//! The `ls` tool.
//!
//! Owns listing one directory for the model: entries sorted by name,
//! directories with a trailing `/`, dotfiles included, limited with a note.
//! It must not know how the file system is reached.

use keel_protocol::{ContentBlock, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{opt_usize, parse_args, positive_limit};
use crate::error::{Error, Result};
use crate::path::resolve_or_cwd;
use crate::truncate::{DEFAULT_MAX_BYTES, Limits, truncate_head};
use crate::{Tool, ToolContext, ToolOutput};

/// Entries returned when no limit is given.
const DEFAULT_LIMIT: usize = 500;

/// Lists a directory.
#[derive(Debug, Clone, Copy, Default)]
pub struct LsTool;

#[derive(Debug, Deserialize)]
struct Args {
    #[serde(default)]
    path: Option<String>,
    #[serde(default, deserialize_with = "opt_usize")]
    limit: Option<usize>,
}

#[async_trait::async_trait]
impl Tool for LsTool {
    fn name(&self) -> &str {
        "ls"
    }

    fn description(&self) -> &str {
        "List the contents of a directory (default: the working directory). Entries are \
         sorted alphabetically, directories have a trailing '/', and hidden (dot) files are \
         included. Not recursive: use find to search a tree. Returns at most limit entries \
         (default 500)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Directory to list (default: working directory)"
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Maximum number of entries to return (default: 500)"
                }
            }
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput> {
        let args: Args = parse_args("ls", args)?;
        let limit = positive_limit("ls", args.limit, DEFAULT_LIMIT)?;
        let dir = resolve_or_cwd(&ctx.cwd, args.path.as_deref())?;
        let meta = ctx.fs.metadata(&dir).await?;
        if !meta.is_dir {
            return Err(Error::NotADirectory { path: dir });
        }
        let mut entries = ctx.fs.read_dir(&dir).await?;
        if entries.is_empty() {
            return Ok(ToolOutput::success(ToolResult {
                content: vec![ContentBlock::text("(empty directory)")],
                details: Some(json!({"count": 0})),
            }));
        }
        entries.sort_by(|a, b| {
            a.name
                .to_lowercase()
                .cmp(&b.name.to_lowercase())
                .then_with(|| a.name.cmp(&b.name))
        });
        let total = entries.len();
        let names: Vec<String> = entries
            .iter()
            .take(limit)
            .map(|e| {
                if e.is_dir {
                    format!("{}/", e.name)
                } else {
                    e.name.clone()
                }
            })
            .collect();
        let shown = truncate_head(
            &names.join("\n"),
            Limits {
                max_lines: usize::MAX,
                max_bytes: DEFAULT_MAX_BYTES,
            },
        );
        let mut text = shown.content;
        let mut notes = Vec::new();
        if total > limit {
            notes.push(format!(
                "{limit} entries limit reached ({total} in total). Use limit={} for more",
                limit * 2
            ));
        }
        if shown.truncated {
            notes.push(format!(
                "Output truncated at {}KB: showing {} entries",
                DEFAULT_MAX_BYTES / 1024,
                shown.head_lines
            ));
        }
        if !notes.is_empty() {
            text.push_str(&format!("\n\n[{}]", notes.join(". ")));
        }
        Ok(ToolOutput::success(ToolResult {
            content: vec![ContentBlock::text(text)],
            details: Some(json!({
                "count": total,
                "limitReached": total > limit,
            })),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtins::test_support::{ctx, run_err, run_ok};
    use std::fs;

    fn setup() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir(root.join("src")).unwrap();
        fs::create_dir(root.join("Docs")).unwrap();
        fs::write(root.join("b.txt"), "").unwrap();
        fs::write(root.join("A.md"), "").unwrap();
        fs::write(root.join(".env"), "").unwrap();
        fs::write(root.join("src/lib.rs"), "").unwrap();
        dir
    }

    #[tokio::test]
    async fn lists_sorted_with_dirs_marked_and_dotfiles() {
        let dir = setup();
        let c = ctx(dir.path());
        let out = run_ok(&LsTool, &c, json!({})).await;
        assert_eq!(out.text(), ".env\nA.md\nb.txt\nDocs/\nsrc/");
        let out = run_ok(&LsTool, &c, json!({"path": "src"})).await;
        assert_eq!(out.text(), "lib.rs");
    }

    #[tokio::test]
    async fn limit_adds_a_note() {
        let dir = setup();
        let out = run_ok(&LsTool, &ctx(dir.path()), json!({"limit": 2})).await;
        assert_eq!(
            out.text(),
            ".env\nA.md\n\n[2 entries limit reached (5 in total). Use limit=4 for more]"
        );
    }

    #[tokio::test]
    async fn errors_and_empty() {
        let dir = setup();
        let c = ctx(dir.path());
        let err = run_err(&LsTool, &c, json!({"path": "b.txt"})).await;
        assert!(
            err.contains("Not a directory") && err.contains("b.txt"),
            "{err}"
        );
        let err = run_err(&LsTool, &c, json!({"path": "missing"})).await;
        assert!(
            err.contains("not found") && err.contains("missing"),
            "{err}"
        );
        fs::create_dir(dir.path().join("empty")).unwrap();
        let out = run_ok(&LsTool, &c, json!({"path": "empty"})).await;
        assert_eq!(out.text(), "(empty directory)");
    }
}
