//! The `read` tool.
//!
//! Owns reading one file for the model: numbered lines (`cat -n` style) from
//! an optional 1-based `offset` with an optional `limit`, cut to the output
//! budget with a note on how to continue; images returned as image blocks;
//! binary files refused. It must not know how the file system is reached.

use base64::Engine as _;
use keel_protocol::{ContentBlock, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{check_cancel, opt_usize, parse_args};
use crate::error::{Error, Result};
use crate::path::resolve_path;
use crate::truncate::{
    DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, MAX_LINE_CHARS, split_lines, truncate_line,
};
use crate::{Tool, ToolContext, ToolOutput};

/// Bytes inspected for a NUL when deciding a file is binary.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;
/// Images larger than this are refused.
const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;

/// Reads a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadTool;

#[derive(Debug, Deserialize)]
struct Args {
    path: String,
    #[serde(default, deserialize_with = "opt_usize")]
    offset: Option<usize>,
    #[serde(default, deserialize_with = "opt_usize")]
    limit: Option<usize>,
}

#[async_trait::async_trait]
impl Tool for ReadTool {
    fn name(&self) -> &str {
        "read"
    }

    fn description(&self) -> &str {
        "Read the contents of a file. Text files are returned with line numbers (cat -n \
         style: the number, a tab, then the line exactly as in the file). Output is limited to \
         2000 lines or 50KB, whichever comes first, and lines longer than 2000 characters are \
         cut; when a file is longer, a note at the end tells you which offset to use to read \
         the next part. Use offset (1-based line number) and limit (number of lines) to read \
         large files in chunks. Images (PNG, JPEG, GIF, WebP) are returned as images. Binary \
         files are refused. Relative paths resolve against the working directory."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Path to the file to read (relative or absolute)"
                },
                "offset": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Line number to start reading from (1-based)"
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Maximum number of lines to read"
                }
            },
            "required": ["path"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput> {
        let args: Args = parse_args("read", args)?;
        let path = resolve_path(&ctx.cwd, &args.path)?;
        if args.limit == Some(0) {
            return Err(Error::InvalidArguments(
                "read: field `limit`: must be at least 1".to_owned(),
            ));
        }
        let meta = ctx.fs.metadata(&path).await?;
        if meta.is_dir {
            return Err(Error::Failed(format!(
                "{} is a directory, not a file. Use ls to list it.",
                path.display()
            )));
        }
        check_cancel(ctx)?;
        let bytes = ctx.fs.read(&path).await?;
        check_cancel(ctx)?;

        if let Some(mime) = image_mime(&bytes) {
            if bytes.len() > MAX_IMAGE_BYTES {
                return Err(Error::Failed(format!(
                    "{} is an image of {} bytes, larger than the {} byte limit.",
                    path.display(),
                    bytes.len(),
                    MAX_IMAGE_BYTES
                )));
            }
            let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
            return Ok(ToolOutput::success(ToolResult {
                content: vec![
                    ContentBlock::text(format!("Read image file {} [{mime}]", path.display())),
                    ContentBlock::Image {
                        data,
                        mime_type: mime.to_owned(),
                    },
                ],
                details: Some(json!({
                    "path": path,
                    "mimeType": mime,
                    "bytes": bytes.len(),
                })),
            }));
        }

        if bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0) {
            return Err(Error::Failed(format!(
                "Cannot read {}: it looks like a binary file ({} bytes). Use bash (for example \
                 `file` or `xxd | head`) to inspect it.",
                path.display(),
                bytes.len()
            )));
        }

        let text = String::from_utf8_lossy(&bytes);
        Ok(render_text(
            &path.to_string_lossy(),
            &text,
            args.offset,
            args.limit,
        )?)
    }
}

/// Numbers and budgets the lines of a text file.
pub(crate) fn render_text(
    display: &str,
    text: &str,
    offset: Option<usize>,
    limit: Option<usize>,
) -> Result<ToolOutput> {
    let lines = split_lines(text);
    let total = lines.len();
    let offset = offset.unwrap_or(1).max(1);
    if total == 0 {
        if offset > 1 {
            return Err(Error::Failed(format!(
                "Offset {offset} is beyond the end of {display}: the file is empty."
            )));
        }
        return Ok(ToolOutput::success(ToolResult {
            content: vec![ContentBlock::text("(empty file)")],
            details: Some(json!({"path": display, "totalLines": 0})),
        }));
    }
    if offset > total {
        return Err(Error::Failed(format!(
            "Offset {offset} is beyond the end of {display}, which has {total} lines. Use an \
             offset between 1 and {total}."
        )));
    }
    let max_lines = limit.unwrap_or(DEFAULT_MAX_LINES).min(DEFAULT_MAX_LINES);
    let start = offset - 1;
    let mut out = String::new();
    let mut shown = 0usize;
    for (index, line) in lines.iter().enumerate().skip(start) {
        if shown >= max_lines {
            break;
        }
        let line = line.strip_suffix('\r').unwrap_or(line);
        let numbered = format!("{:>6}\t{}", index + 1, truncate_line(line, MAX_LINE_CHARS));
        let cost = numbered.len() + usize::from(shown > 0);
        if shown > 0 && out.len() + cost > DEFAULT_MAX_BYTES {
            break;
        }
        if shown > 0 {
            out.push('\n');
        }
        out.push_str(&numbered);
        shown += 1;
    }
    let end = start + shown;
    let truncated = end < total;
    if truncated {
        out.push_str(&format!(
            "\n\n[Showing lines {offset}-{end} of {total}. Use offset={} to continue.]",
            end + 1
        ));
    }
    Ok(ToolOutput::success(ToolResult {
        content: vec![ContentBlock::text(out)],
        details: Some(json!({
            "path": display,
            "totalLines": total,
            "startLine": offset,
            "endLine": end,
            "truncated": truncated,
        })),
    }))
}

/// The MIME type of a supported image, by its magic bytes.
fn image_mime(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtins::test_support::{ctx, run_err, run_ok};
    use std::fs;

    fn numbered_file(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[tokio::test]
    async fn reads_with_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), "alpha\n\tbeta\r\ngamma").unwrap();
        let out = run_ok(&ReadTool, &ctx(dir.path()), json!({"path": "a.txt"})).await;
        assert!(!out.is_error);
        assert_eq!(out.text(), "     1\talpha\n     2\t\tbeta\n     3\tgamma");
        let details = out.result.details.unwrap();
        assert_eq!(details["totalLines"], 3);
        assert_eq!(details["truncated"], false);
    }

    #[tokio::test]
    async fn offset_and_limit_select_lines_with_continuation_note() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f"), numbered_file(10)).unwrap();
        let c = ctx(dir.path());
        let out = run_ok(&ReadTool, &c, json!({"path": "f", "offset": 3, "limit": 2})).await;
        assert_eq!(
            out.text(),
            "     3\tline 3\n     4\tline 4\n\n[Showing lines 3-4 of 10. Use offset=5 to continue.]"
        );
        let out = run_ok(&ReadTool, &c, json!({"path": "f", "offset": 9})).await;
        assert_eq!(out.text(), "     9\tline 9\n    10\tline 10");
    }

    #[tokio::test]
    async fn offset_beyond_eof_says_how_many_lines() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f"), numbered_file(12)).unwrap();
        let err = run_err(
            &ReadTool,
            &ctx(dir.path()),
            json!({"path": "f", "offset": 50}),
        )
        .await;
        assert!(
            err.contains("Offset 50") && err.contains("12 lines"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn long_files_are_cut_at_2000_lines() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("big"), numbered_file(5123)).unwrap();
        let out = run_ok(&ReadTool, &ctx(dir.path()), json!({"path": "big"})).await;
        let text = out.text();
        assert!(text.starts_with("     1\tline 1\n"));
        assert!(text.contains("  2000\tline 2000\n"));
        assert!(!text.contains("line 2001\n"));
        assert!(
            text.ends_with("[Showing lines 1-2000 of 5123. Use offset=2001 to continue.]"),
            "{}",
            &text[text.len() - 100..]
        );
    }

    #[tokio::test]
    async fn byte_budget_and_long_lines() {
        let dir = tempfile::tempdir().unwrap();
        // 100 lines of 3000 chars: each is cut to 2000 chars, ~25 fit in 50 KiB.
        let content: String = (0..100)
            .map(|_| format!("{}\n", "y".repeat(3000)))
            .collect();
        fs::write(dir.path().join("wide"), content).unwrap();
        let out = run_ok(&ReadTool, &ctx(dir.path()), json!({"path": "wide"})).await;
        let text = out.text();
        assert!(text.len() <= DEFAULT_MAX_BYTES + 200, "{}", text.len());
        assert!(text.contains("[line truncated, 1000 more chars]"));
        let end = out.result.details.unwrap()["endLine"].as_u64().unwrap();
        assert!(end > 1 && end < 100);
        assert!(text.contains(&format!("Use offset={} to continue.", end + 1)));
    }

    #[tokio::test]
    async fn binary_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("blob.bin"), b"abc\0def").unwrap();
        let err = run_err(&ReadTool, &ctx(dir.path()), json!({"path": "blob.bin"})).await;
        assert!(err.contains("binary") && err.contains("blob.bin"), "{err}");
    }

    #[tokio::test]
    async fn images_come_back_as_image_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR rest";
        fs::write(dir.path().join("pic.png"), png).unwrap();
        let out = run_ok(&ReadTool, &ctx(dir.path()), json!({"path": "pic.png"})).await;
        assert_eq!(out.result.content.len(), 2);
        assert!(
            matches!(&out.result.content[0], ContentBlock::Text { text } if text.contains("image/png"))
        );
        let ContentBlock::Image { data, mime_type } = &out.result.content[1] else {
            panic!("no image block");
        };
        assert_eq!(mime_type, "image/png");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap();
        assert_eq!(decoded, png);
    }

    #[tokio::test]
    async fn missing_file_and_directory_errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        let err = run_err(&ReadTool, &c, json!({"path": "nope.txt"})).await;
        assert!(
            err.contains("not found") && err.contains("nope.txt"),
            "{err}"
        );
        let err = run_err(&ReadTool, &c, json!({"path": "."})).await;
        assert!(err.contains("is a directory"), "{err}");
        let err = run_err(&ReadTool, &c, json!({"path": 3})).await;
        assert!(err.contains("field `path`"), "{err}");
    }

    #[tokio::test]
    async fn empty_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("e"), "").unwrap();
        let out = run_ok(&ReadTool, &ctx(dir.path()), json!({"path": "e"})).await;
        assert_eq!(out.text(), "(empty file)");
    }
}
