//! The `find` tool.
//!
//! Owns finding files and directories by glob for the model, over the same
//! ignore-aware walk as `grep` (see [`PathGlob`](crate::PathGlob) for the
//! matching rules), sorted and limited, with paths relative to the working
//! directory. It must not know how the file system is reached.

use keel_protocol::{ContentBlock, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{opt_usize, parse_args, positive_limit};
use crate::backend::WalkOptions;
use crate::error::{Error, Result};
use crate::path::{display_relative, resolve_or_cwd};
use crate::truncate::{DEFAULT_MAX_BYTES, Limits, truncate_head};
use crate::{Tool, ToolContext, ToolOutput};

/// Results returned when no limit is given.
const DEFAULT_LIMIT: usize = 1000;

/// Finds files by glob.
#[derive(Debug, Clone, Copy, Default)]
pub struct FindTool;

#[derive(Debug, Deserialize)]
struct Args {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default, deserialize_with = "opt_usize")]
    limit: Option<usize>,
}

#[async_trait::async_trait]
impl Tool for FindTool {
    fn name(&self) -> &str {
        "find"
    }

    fn description(&self) -> &str {
        "Find files and directories by glob pattern. A pattern without a slash matches names \
         at any depth (e.g. '*.rs' or 'Cargo.toml'); a pattern with a slash matches the path \
         relative to the search directory, where '*' stays within one directory and '**' \
         spans any number of them (e.g. 'src/**/*.test.ts'). Searches the given path (default: \
         the working directory), skipping files excluded by .gitignore and .ignore and the \
         .git directory. Returns sorted paths relative to the working directory, directories \
         with a trailing '/', at most limit results (default 1000)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "description": "Glob pattern, e.g. '*.ts', '**/*.json' or 'src/**/*.spec.ts'"
                },
                "path": {
                    "type": "string",
                    "description": "Directory to search in (default: working directory)"
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Maximum number of results (default: 1000)"
                }
            },
            "required": ["pattern"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput> {
        let args: Args = parse_args("find", args)?;
        let limit = positive_limit("find", args.limit, DEFAULT_LIMIT)?;
        let root = resolve_or_cwd(&ctx.cwd, args.path.as_deref())?;
        let meta = ctx.fs.metadata(&root).await?;
        if !meta.is_dir {
            return Err(Error::NotADirectory { path: root });
        }
        let options = WalkOptions {
            include_hidden: true,
            include_dirs: true,
            limit: Some(limit),
            glob: Some(args.pattern.clone()),
            ..Default::default()
        };
        let walk = tokio::select! {
            walk = ctx.fs.walk(&root, &options) => walk?,
            _ = ctx.cancel.cancelled() => return Err(Error::Aborted),
        };
        if walk.entries.is_empty() {
            return Ok(ToolOutput::success(ToolResult {
                content: vec![ContentBlock::text(format!(
                    "No files found matching pattern {:?}",
                    args.pattern
                ))],
                details: Some(json!({"count": 0})),
            }));
        }
        let mut paths: Vec<String> = walk
            .entries
            .iter()
            .map(|e| {
                let shown = display_relative(&ctx.cwd, &e.path);
                if e.is_dir { format!("{shown}/") } else { shown }
            })
            .collect();
        paths.sort();
        let listing = paths.join("\n");
        let shown = truncate_head(
            &listing,
            Limits {
                max_lines: usize::MAX,
                max_bytes: DEFAULT_MAX_BYTES,
            },
        );
        let mut text = shown.content;
        let mut notes = Vec::new();
        if walk.truncated {
            notes.push(format!(
                "{limit} results limit reached. Use limit={} for more, or refine the pattern",
                limit * 2
            ));
        }
        if shown.truncated {
            notes.push(format!(
                "Output truncated at {}KB: showing {} of {} paths",
                DEFAULT_MAX_BYTES / 1024,
                shown.head_lines,
                shown.total_lines
            ));
        }
        if !notes.is_empty() {
            text.push_str(&format!("\n\n[{}]", notes.join(". ")));
        }
        Ok(ToolOutput::success(ToolResult {
            content: vec![ContentBlock::text(text)],
            details: Some(json!({
                "count": paths.len(),
                "limitReached": walk.truncated,
                "truncated": shown.truncated,
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
        for f in [
            "src/main.rs",
            "src/util/mod.rs",
            "tests/it.rs",
            "README.md",
            "build/out.rs",
        ] {
            let p = root.join(f);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, "").unwrap();
        }
        fs::write(root.join(".gitignore"), "build/\n").unwrap();
        dir
    }

    #[tokio::test]
    async fn name_glob_matches_at_any_depth_sorted() {
        let dir = setup();
        let out = run_ok(&FindTool, &ctx(dir.path()), json!({"pattern": "*.rs"})).await;
        assert_eq!(out.text(), "src/main.rs\nsrc/util/mod.rs\ntests/it.rs");
    }

    #[tokio::test]
    async fn path_globs_and_subdirectories() {
        let dir = setup();
        let c = ctx(dir.path());
        let out = run_ok(&FindTool, &c, json!({"pattern": "src/*.rs"})).await;
        assert_eq!(out.text(), "src/main.rs");
        let out = run_ok(&FindTool, &c, json!({"pattern": "src/**/*.rs"})).await;
        assert_eq!(out.text(), "src/main.rs\nsrc/util/mod.rs");
        let out = run_ok(
            &FindTool,
            &c,
            json!({"pattern": "*.rs", "path": "src/util"}),
        )
        .await;
        assert_eq!(out.text(), "src/util/mod.rs");
        let out = run_ok(&FindTool, &c, json!({"pattern": "util"})).await;
        assert_eq!(out.text(), "src/util/");
        let out = run_ok(&FindTool, &c, json!({"pattern": ".git*"})).await;
        assert_eq!(out.text(), ".gitignore");
    }

    #[tokio::test]
    async fn limit_and_no_results() {
        let dir = setup();
        let c = ctx(dir.path());
        let out = run_ok(&FindTool, &c, json!({"pattern": "*.rs", "limit": 2})).await;
        assert_eq!(
            out.text(),
            "src/main.rs\nsrc/util/mod.rs\n\n[2 results limit reached. Use limit=4 for more, or refine the pattern]"
        );
        let out = run_ok(&FindTool, &c, json!({"pattern": "*.py"})).await;
        assert!(!out.is_error);
        assert!(out.text().starts_with("No files found"));
    }

    #[tokio::test]
    async fn errors() {
        let dir = setup();
        let c = ctx(dir.path());
        let err = run_err(&FindTool, &c, json!({"pattern": "*", "path": "README.md"})).await;
        assert!(err.contains("Not a directory"), "{err}");
        let err = run_err(&FindTool, &c, json!({"pattern": "a["})).await;
        assert!(err.contains("invalid glob"), "{err}");
        let err = run_err(&FindTool, &c, json!({"pattern": "*", "path": "missing"})).await;
        assert!(err.contains("not found"), "{err}");
    }
}
