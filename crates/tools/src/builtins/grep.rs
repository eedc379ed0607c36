//! The `grep` tool.
//!
//! Owns searching file contents for the model: a regex (or literal) over the
//! ignore-aware walk of the context's file system, optionally filtered by a
//! glob, with context lines and a match limit, printed as `path:line: text`
//! with paths relative to the working directory. Files are read through the
//! [`FileSystem`](crate::FileSystem) and searched in memory with
//! `grep-searcher`; binary files are skipped. It must not know how the file
//! system is reached.

use std::io;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use keel_protocol::{ContentBlock, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{check_cancel, opt_bool, opt_usize, parse_args, positive_limit};
use crate::backend::WalkOptions;
use crate::error::{Error, Result};
use crate::path::{display_relative, resolve_or_cwd};
use crate::truncate::{DEFAULT_MAX_BYTES, truncate_line};
use crate::{Tool, ToolContext, ToolOutput};

/// Matches returned when no limit is given.
const DEFAULT_LIMIT: usize = 100;
/// Matched lines are cut to this many characters.
const MAX_LINE_CHARS: usize = 500;
/// Files larger than this are skipped.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// At most this many context lines on each side.
const MAX_CONTEXT: usize = 50;

/// Searches file contents.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrepTool;

#[derive(Debug, Deserialize)]
struct Args {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    glob: Option<String>,
    #[serde(
        default,
        rename = "ignoreCase",
        alias = "ignore_case",
        deserialize_with = "opt_bool"
    )]
    ignore_case: Option<bool>,
    #[serde(default, deserialize_with = "opt_bool")]
    literal: Option<bool>,
    #[serde(default, deserialize_with = "opt_usize")]
    context: Option<usize>,
    #[serde(default, deserialize_with = "opt_usize")]
    limit: Option<usize>,
}

#[async_trait::async_trait]
impl Tool for GrepTool {
    fn name(&self) -> &str {
        "grep"
    }

    fn description(&self) -> &str {
        "Search file contents for a pattern (a regular expression by default; set literal to \
         search for the exact string). Searches the given path (a directory, recursively, or a \
         single file; default: the working directory), skipping files excluded by .gitignore \
         and .ignore, the .git directory and binary files. Use glob to filter files (e.g. \
         '*.rs' or 'src/**/*.ts'), ignoreCase for case-insensitive search and context for \
         lines around each match. Output lines are `path:line: text` (context lines \
         `path-line- text`), paths relative to the working directory. Returns at most limit \
         matches (default 100)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "description": "Regular expression (or literal string with literal=true)"
                },
                "path": {
                    "type": "string",
                    "description": "Directory or file to search (default: working directory)"
                },
                "glob": {
                    "type": "string",
                    "description": "Only search files matching this glob, e.g. '*.ts' or 'src/**/*.rs'"
                },
                "ignoreCase": {
                    "type": "boolean",
                    "description": "Case-insensitive search (default: false)"
                },
                "literal": {
                    "type": "boolean",
                    "description": "Treat pattern as a literal string, not a regex (default: false)"
                },
                "context": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Lines of context before and after each match (default: 0)"
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Maximum number of matches to return (default: 100)"
                }
            },
            "required": ["pattern"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput> {
        let args: Args = parse_args("grep", args)?;
        if args.pattern.is_empty() {
            return Err(Error::InvalidArguments(
                "grep: field `pattern`: must not be empty".to_owned(),
            ));
        }
        let limit = positive_limit("grep", args.limit, DEFAULT_LIMIT)?;
        let context = args.context.unwrap_or(0).min(MAX_CONTEXT);
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(args.ignore_case.unwrap_or(false))
            .fixed_strings(args.literal.unwrap_or(false))
            .line_terminator(Some(b'\n'))
            .build(&args.pattern)
            .map_err(|e| {
                Error::InvalidArguments(format!(
                    "grep: invalid regex {:?}: {e}. Set literal=true to search for the exact \
                     string.",
                    args.pattern
                ))
            })?;
        let root = resolve_or_cwd(&ctx.cwd, args.path.as_deref())?;
        let options = WalkOptions {
            include_hidden: true,
            glob: args.glob.filter(|g| !g.trim().is_empty()),
            ..Default::default()
        };
        let walk = tokio::select! {
            walk = ctx.fs.walk(&root, &options) => walk?,
            _ = ctx.cancel.cancelled() => return Err(Error::Aborted),
        };

        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .before_context(context)
            .after_context(context)
            .build();
        let mut out = Output {
            text: String::new(),
            matches: 0,
            limit,
            byte_limited: false,
        };
        let mut files_with_matches = 0usize;
        let mut skipped_large = 0usize;
        for entry in &walk.entries {
            check_cancel(ctx)?;
            if out.matches >= limit || out.byte_limited {
                break;
            }
            if entry.len > MAX_FILE_BYTES {
                skipped_large += 1;
                continue;
            }
            let bytes = match ctx.fs.read(&entry.path).await {
                Ok(b) => b,
                Err(e) => {
                    tracing::debug!(path = %entry.path.display(), error = %e, "grep: skipping file");
                    continue;
                }
            };
            let before = out.matches;
            search_file(
                &mut searcher,
                &matcher,
                &bytes,
                &display_relative(&ctx.cwd, &entry.path),
                &mut out,
            );
            if out.matches > before {
                files_with_matches += 1;
            }
        }

        if out.matches == 0 {
            return Ok(ToolOutput::success(ToolResult {
                content: vec![ContentBlock::text("No matches found")],
                details: Some(json!({"matches": 0})),
            }));
        }
        let limit_reached = out.matches >= limit;
        let mut text = std::mem::take(&mut out.text);
        let mut notes = Vec::new();
        if limit_reached {
            notes.push(format!(
                "{limit} matches limit reached. Use limit={} for more, or refine the pattern",
                limit * 2
            ));
        }
        if out.byte_limited {
            notes.push(format!(
                "Output truncated at {}KB; refine the pattern or use glob/path to narrow it",
                DEFAULT_MAX_BYTES / 1024
            ));
        }
        if skipped_large > 0 {
            notes.push(format!(
                "{skipped_large} files larger than {}MB were skipped",
                MAX_FILE_BYTES / (1024 * 1024)
            ));
        }
        if !notes.is_empty() {
            text.push_str(&format!("\n\n[{}]", notes.join(". ")));
        }
        Ok(ToolOutput::success(ToolResult {
            content: vec![ContentBlock::text(text)],
            details: Some(json!({
                "matches": out.matches,
                "files": files_with_matches,
                "limitReached": limit_reached,
                "truncated": out.byte_limited,
            })),
        }))
    }
}

/// Collected output across files.
struct Output {
    text: String,
    matches: usize,
    limit: usize,
    byte_limited: bool,
}

impl Output {
    /// Appends one line; returns false when the byte budget is spent.
    fn push_line(&mut self, line: String) -> bool {
        if self.text.len() + line.len() + 1 > DEFAULT_MAX_BYTES {
            self.byte_limited = true;
            return false;
        }
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(&line);
        true
    }
}

fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    bytes: &[u8],
    shown_path: &str,
    out: &mut Output,
) {
    let sink = FileSink {
        display: shown_path,
        out,
    };
    if let Err(e) = searcher.search_slice(matcher, bytes, sink) {
        tracing::debug!(path = shown_path, error = %e, "grep: search failed");
    }
}

struct FileSink<'a> {
    display: &'a str,
    out: &'a mut Output,
}

fn line_text(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end_matches(['\n', '\r']);
    truncate_line(text, MAX_LINE_CHARS).into_owned()
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(
        &mut self,
        _: &Searcher,
        mat: &SinkMatch<'_>,
    ) -> std::result::Result<bool, io::Error> {
        if self.out.matches >= self.out.limit {
            return Ok(false);
        }
        self.out.matches += 1;
        let number = mat.line_number().unwrap_or(0);
        let line = format!("{}:{number}: {}", self.display, line_text(mat.bytes()));
        Ok(self.out.push_line(line))
    }

    fn context(
        &mut self,
        _: &Searcher,
        ctx: &SinkContext<'_>,
    ) -> std::result::Result<bool, io::Error> {
        if self.out.matches >= self.out.limit && *ctx.kind() == SinkContextKind::Before {
            // Context of a match beyond the limit.
            return Ok(true);
        }
        let number = ctx.line_number().unwrap_or(0);
        let line = format!("{}-{number}- {}", self.display, line_text(ctx.bytes()));
        Ok(self.out.push_line(line))
    }

    fn context_break(&mut self, _: &Searcher) -> std::result::Result<bool, io::Error> {
        if self.out.matches >= self.out.limit {
            return Ok(true);
        }
        Ok(self.out.push_line("--".to_owned()))
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
        fs::create_dir_all(root.join("src")).unwrap();
        fs::create_dir_all(root.join("target")).unwrap();
        fs::write(root.join(".gitignore"), "target/\n").unwrap();
        fs::write(
            root.join("src/lib.rs"),
            "pub fn alpha() {}\n// TODO: beta\nfn gamma() {}\n",
        )
        .unwrap();
        fs::write(root.join("src/notes.md"), "alpha in docs\nAlpha upper\n").unwrap();
        fs::write(root.join("target/gen.rs"), "fn alpha_generated() {}\n").unwrap();
        fs::write(root.join("bin.dat"), b"alpha\0binary").unwrap();
        dir
    }

    #[tokio::test]
    async fn finds_matches_and_respects_gitignore() {
        let dir = setup();
        let out = run_ok(&GrepTool, &ctx(dir.path()), json!({"pattern": "alpha"})).await;
        assert!(!out.is_error);
        assert_eq!(
            out.text(),
            "src/lib.rs:1: pub fn alpha() {}\nsrc/notes.md:1: alpha in docs"
        );
        assert_eq!(out.result.details.unwrap()["files"], 2);
    }

    #[tokio::test]
    async fn glob_ignore_case_and_path() {
        let dir = setup();
        let c = ctx(dir.path());
        let out = run_ok(
            &GrepTool,
            &c,
            json!({"pattern": "alpha", "glob": "*.md", "ignoreCase": true}),
        )
        .await;
        assert_eq!(
            out.text(),
            "src/notes.md:1: alpha in docs\nsrc/notes.md:2: Alpha upper"
        );
        let out = run_ok(
            &GrepTool,
            &c,
            json!({"pattern": "fn", "path": "src/lib.rs"}),
        )
        .await;
        assert_eq!(
            out.text(),
            "src/lib.rs:1: pub fn alpha() {}\nsrc/lib.rs:3: fn gamma() {}"
        );
    }

    #[tokio::test]
    async fn literal_and_invalid_regex() {
        let dir = setup();
        let c = ctx(dir.path());
        let out = run_ok(
            &GrepTool,
            &c,
            json!({"pattern": "alpha()", "literal": true}),
        )
        .await;
        assert_eq!(out.text(), "src/lib.rs:1: pub fn alpha() {}");
        let err = run_err(&GrepTool, &c, json!({"pattern": "fn ("})).await;
        assert!(err.contains("invalid regex"), "{err}");
    }

    #[tokio::test]
    async fn context_lines() {
        let dir = setup();
        let out = run_ok(
            &GrepTool,
            &ctx(dir.path()),
            json!({"pattern": "TODO", "context": 1}),
        )
        .await;
        assert_eq!(
            out.text(),
            "src/lib.rs-1- pub fn alpha() {}\nsrc/lib.rs:2: // TODO: beta\nsrc/lib.rs-3- fn gamma() {}"
        );
    }

    #[tokio::test]
    async fn limit_adds_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let content: String = (1..=10).map(|i| format!("hit {i}\n")).collect();
        fs::write(dir.path().join("f.txt"), content).unwrap();
        let c = ctx(dir.path());
        let out = run_ok(&GrepTool, &c, json!({"pattern": "hit", "limit": 3})).await;
        assert_eq!(
            out.text(),
            "f.txt:1: hit 1\nf.txt:2: hit 2\nf.txt:3: hit 3\n\n[3 matches limit reached. Use limit=6 for more, or refine the pattern]"
        );
        assert_eq!(out.result.details.unwrap()["limitReached"], true);
        let err = run_err(&GrepTool, &c, json!({"pattern": "hit", "limit": 0})).await;
        assert!(err.contains("limit"), "{err}");
    }

    #[tokio::test]
    async fn no_matches_is_not_an_error() {
        let dir = setup();
        let out = run_ok(
            &GrepTool,
            &ctx(dir.path()),
            json!({"pattern": "zzz_nothing"}),
        )
        .await;
        assert!(!out.is_error);
        assert_eq!(out.text(), "No matches found");
    }

    #[tokio::test]
    async fn missing_path_is_not_found() {
        let dir = setup();
        let err = run_err(
            &GrepTool,
            &ctx(dir.path()),
            json!({"pattern": "x", "path": "nope"}),
        )
        .await;
        assert!(err.contains("not found") && err.contains("nope"), "{err}");
    }
}
