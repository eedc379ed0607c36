//! The `edit` tool.
//!
//! Owns exact-text replacement in one file: every `oldText` must match
//! exactly once in the original content, edits must not overlap, and either
//! all edits apply (one write) or none do. CRLF files and a UTF-8 BOM are
//! handled transparently. The result carries a unified diff. It must not know
//! how the file system is reached.

use keel_protocol::{ContentBlock, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use similar::TextDiff;

use super::{check_cancel, parse_args};
use crate::error::{Error, Result};
use crate::path::{display_relative, resolve_path};
use crate::truncate::{Limits, truncate_head};
use crate::{Tool, ToolContext, ToolOutput};

/// At most this many match locations are listed for an ambiguous edit.
const MAX_LISTED_MATCHES: usize = 20;

/// Replaces exact text in a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditTool;

#[derive(Debug, Deserialize)]
struct Args {
    path: String,
    #[serde(default)]
    edits: Option<Vec<EditSpec>>,
    #[serde(default, rename = "oldText", alias = "old_text")]
    old_text: Option<String>,
    #[serde(default, rename = "newText", alias = "new_text")]
    new_text: Option<String>,
}

#[derive(Debug, Deserialize)]
struct EditSpec {
    #[serde(rename = "oldText", alias = "old_text")]
    old_text: String,
    #[serde(rename = "newText", alias = "new_text")]
    new_text: String,
}

/// One validated replacement: `range` of the original content becomes `new`.
struct Replacement<'a> {
    index: usize,
    start: usize,
    end: usize,
    new: &'a str,
}

#[async_trait::async_trait]
impl Tool for EditTool {
    fn name(&self) -> &str {
        "edit"
    }

    fn description(&self) -> &str {
        "Edit a file by replacing exact text. Pass `edits`, a list of {oldText, newText} \
         replacements. Each oldText must match the file's current content exactly (including \
         whitespace and indentation) and exactly once, so include enough surrounding lines to \
         make it unique; edits must not overlap. All edits are checked against the original \
         file and applied together: if any one fails, the file is left unchanged. Read the \
         file first so you copy the text exactly. Returns a unified diff of the change."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Path to the file to edit (relative or absolute)"
                },
                "edits": {
                    "type": "array",
                    "minItems": 1,
                    "description": "Replacements, each matched against the original file",
                    "items": {
                        "type": "object",
                        "properties": {
                            "oldText": {
                                "type": "string",
                                "description": "Exact text to find (must match exactly once)"
                            },
                            "newText": {
                                "type": "string",
                                "description": "Text to replace it with"
                            }
                        },
                        "required": ["oldText", "newText"]
                    }
                }
            },
            "required": ["path", "edits"]
        })
    }

    fn write_target(&self, cwd: &std::path::Path, args: &Value) -> Option<std::path::PathBuf> {
        super::path_write_target(cwd, args)
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput> {
        let args: Args = parse_args("edit", args)?;
        let (edits, single) = match (args.edits, args.old_text, args.new_text) {
            (Some(edits), None, None) => (edits, false),
            (None, Some(old_text), Some(new_text)) => (vec![EditSpec { old_text, new_text }], true),
            (Some(_), _, _) => {
                return Err(invalid(
                    "give either `edits` or `oldText`/`newText`, not both",
                ));
            }
            (None, Some(_), None) => return Err(invalid("missing field `newText`")),
            (None, None, Some(_)) => return Err(invalid("missing field `oldText`")),
            (None, None, None) => {
                return Err(invalid(
                    "missing field `edits` (a list of {oldText, newText} objects)",
                ));
            }
        };
        if edits.is_empty() {
            return Err(invalid("`edits` must contain at least one edit"));
        }
        if looks_like_uri(&args.path) {
            return Err(Error::Failed(format!(
                "Cannot edit {}: it is a URI, and host URIs are not editable. Give a file path.",
                args.path
            )));
        }
        let path = resolve_path(&ctx.cwd, &args.path)?;
        let display = display_relative(&ctx.cwd, &path);
        let meta = ctx.fs.metadata(&path).await?;
        if meta.is_dir {
            return Err(Error::IsADirectory { path });
        }
        let bytes = ctx.fs.read(super::judged_or(ctx, &path)).await?;
        let raw = String::from_utf8(bytes).map_err(|_| {
            Error::Failed(format!(
                "Cannot edit {display}: it is not valid UTF-8 text."
            ))
        })?;

        // Work on LF text without a BOM; restore both when writing.
        let (bom, body) = match raw.strip_prefix('\u{FEFF}') {
            Some(rest) => ("\u{FEFF}", rest),
            None => ("", raw.as_str()),
        };
        let crlf = body.contains("\r\n");
        let to_lf = |s: &str| {
            if crlf {
                s.replace("\r\n", "\n")
            } else {
                s.to_owned()
            }
        };
        let original = to_lf(body);
        let specs: Vec<(String, String)> = edits
            .iter()
            .map(|e| (to_lf(&e.old_text), to_lf(&e.new_text)))
            .collect();

        let updated = apply_edits(&original, &specs, single, &display)?;
        if updated == original {
            return Err(Error::Failed(format!(
                "No changes made to {display}: the replacement text is identical to the original."
            )));
        }
        check_cancel(ctx)?;
        let mut out = String::with_capacity(bom.len() + updated.len());
        out.push_str(bom);
        if crlf {
            out.push_str(&updated.replace('\n', "\r\n"));
        } else {
            out.push_str(&updated);
        }
        super::write_file(ctx, &path, out.as_bytes()).await?;

        let diff = TextDiff::from_lines(&original, &updated)
            .unified_diff()
            .context_radius(3)
            .header(&display, &display)
            .to_string();
        let first_changed_line = first_changed_line(&original, &updated);
        let shown = truncate_head(&diff, Limits::default());
        let noun = if specs.len() == 1 { "edit" } else { "edits" };
        let mut text = format!(
            "Applied {} {noun} to {display}.\n\n{}",
            specs.len(),
            shown.content
        );
        if shown.truncated {
            text.push_str(&format!(
                "\n[Diff truncated: showing {} of {} lines.]",
                shown.head_lines, shown.total_lines
            ));
        }
        Ok(ToolOutput::success(ToolResult {
            content: vec![ContentBlock::text(text)],
            details: Some(json!({
                "path": path,
                "diff": diff,
                "edits": specs.len(),
                "firstChangedLine": first_changed_line,
            })),
        }))
    }
}

fn invalid(message: &str) -> Error {
    Error::InvalidArguments(format!("edit: {message}"))
}

/// Validates every edit against `original` and applies them all.
fn apply_edits(
    original: &str,
    specs: &[(String, String)],
    single: bool,
    display: &str,
) -> Result<String> {
    let label = |i: usize| {
        if single {
            "oldText".to_owned()
        } else {
            format!("edits[{i}].oldText")
        }
    };
    let mut replacements = Vec::with_capacity(specs.len());
    for (index, (old, new)) in specs.iter().enumerate() {
        if old.is_empty() {
            return Err(Error::InvalidArguments(format!(
                "edit: {} must not be empty",
                label(index)
            )));
        }
        let matches = find_all(original, old);
        match matches.as_slice() {
            [] => {
                let hint = match whitespace_insensitive_match(original, old) {
                    Some(line) => format!(
                        "A block that differs only in whitespace or indentation starts at line \
                         {line}; copy the text exactly as it appears in the file."
                    ),
                    None => "Re-read the file and copy the text exactly, including whitespace \
                             and indentation."
                        .to_owned(),
                };
                return Err(Error::Failed(format!(
                    "{} was not found in {display}. {hint}",
                    label(index)
                )));
            }
            [start] => replacements.push(Replacement {
                index,
                start: *start,
                end: start + old.len(),
                new,
            }),
            many => {
                let lines: Vec<String> = many
                    .iter()
                    .take(MAX_LISTED_MATCHES)
                    .map(|&at| line_of(original, at).to_string())
                    .collect();
                let more = if many.len() > MAX_LISTED_MATCHES {
                    ", ..."
                } else {
                    ""
                };
                return Err(Error::Failed(format!(
                    "{} matches {} times in {display} (at lines {}{more}); it must match exactly \
                     once. Include more surrounding context to make it unique.",
                    label(index),
                    many.len(),
                    lines.join(", ")
                )));
            }
        }
    }
    replacements.sort_by_key(|r| r.start);
    for pair in replacements.windows(2) {
        if pair[0].end > pair[1].start {
            let (a, b) = (
                pair[0].index.min(pair[1].index),
                pair[0].index.max(pair[1].index),
            );
            return Err(Error::Failed(format!(
                "edits[{a}] and edits[{b}] overlap (around line {}) in {display}; merge them \
                 into one edit.",
                line_of(original, pair[1].start)
            )));
        }
    }
    let mut out = String::with_capacity(original.len());
    let mut cursor = 0;
    for r in &replacements {
        out.push_str(&original[cursor..r.start]);
        out.push_str(r.new);
        cursor = r.end;
    }
    out.push_str(&original[cursor..]);
    Ok(out)
}

/// Start offsets of every (possibly overlapping) occurrence of `needle`.
fn find_all(haystack: &str, needle: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(pos) = haystack[from..].find(needle) {
        let at = from + pos;
        found.push(at);
        let step = haystack[at..].chars().next().map_or(1, char::len_utf8);
        from = at + step;
        if from > haystack.len() {
            break;
        }
    }
    found
}

/// 1-based line number of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].bytes().filter(|&b| b == b'\n').count() + 1
}

/// Line (1-based) where `needle` matches if leading/trailing whitespace of
/// every line is ignored.
fn whitespace_insensitive_match(haystack: &str, needle: &str) -> Option<usize> {
    let wanted: Vec<&str> = needle
        .trim_matches('\n')
        .split('\n')
        .map(str::trim)
        .collect();
    if wanted.iter().all(|l| l.is_empty()) {
        return None;
    }
    let lines: Vec<&str> = haystack.split('\n').map(str::trim).collect();
    lines
        .windows(wanted.len())
        .position(|window| window == wanted.as_slice())
        .map(|i| i + 1)
}

/// 1-based first line that differs between `old` and `new`.
fn first_changed_line(old: &str, new: &str) -> usize {
    let common = old
        .bytes()
        .zip(new.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    let mut at = common.min(old.len());
    while !old.is_char_boundary(at) {
        at -= 1;
    }
    line_of(old, at)
}

/// Whether `path` looks like `scheme://…`.
fn looks_like_uri(path: &str) -> bool {
    let Some((scheme, _)) = path.trim().split_once("://") else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtins::test_support::{ctx, run_err, run_ok};
    use std::fs;

    const SRC: &str = "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n\nfn other() {\n    let x = 1;\n}\n";

    fn setup() -> (tempfile::TempDir, crate::ToolContext) {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("main.rs"), SRC).unwrap();
        let c = ctx(dir.path());
        (dir, c)
    }

    fn content(dir: &tempfile::TempDir) -> String {
        fs::read_to_string(dir.path().join("main.rs")).unwrap()
    }

    #[tokio::test]
    async fn applies_multiple_edits_with_diff() {
        let (dir, c) = setup();
        let out = run_ok(
            &EditTool,
            &c,
            json!({"path": "main.rs", "edits": [
                {"oldText": "fn main() {", "newText": "fn main() -> () {"},
                {"oldText": "fn other() {\n    let x = 1;", "newText": "fn other() {\n    let y = 2;"}
            ]}),
        )
        .await;
        assert!(!out.is_error);
        let new = content(&dir);
        assert!(new.starts_with("fn main() -> () {\n"));
        assert!(new.contains("let y = 2;"));
        let text = out.text();
        assert!(text.starts_with("Applied 2 edits to main.rs."), "{text}");
        assert!(text.contains("-fn main() {\n+fn main() -> () {"), "{text}");
        let details = out.result.details.unwrap();
        assert!(
            details["diff"]
                .as_str()
                .unwrap()
                .contains("+    let y = 2;")
        );
        assert_eq!(details["firstChangedLine"], 1);
    }

    #[tokio::test]
    async fn single_edit_form_is_accepted() {
        let (dir, c) = setup();
        run_ok(
            &EditTool,
            &c,
            json!({"path": "main.rs", "oldText": "println!(\"{x}\");", "newText": "dbg!(x);"}),
        )
        .await;
        assert!(content(&dir).contains("    dbg!(x);\n"));
    }

    #[tokio::test]
    async fn zero_matches_names_the_edit_and_leaves_file_untouched() {
        let (dir, c) = setup();
        let err = run_err(
            &EditTool,
            &c,
            json!({"path": "main.rs", "edits": [
                {"oldText": "fn main() {", "newText": "fn start() {"},
                {"oldText": "does not exist", "newText": "x"}
            ]}),
        )
        .await;
        assert!(
            err.contains("edits[1].oldText was not found in main.rs"),
            "{err}"
        );
        assert!(err.contains("Re-read the file"), "{err}");
        assert_eq!(content(&dir), SRC, "file must be untouched");
    }

    #[tokio::test]
    async fn whitespace_mismatch_gets_a_hint() {
        let (dir, c) = setup();
        let err = run_err(
            &EditTool,
            &c,
            json!({"path": "main.rs", "oldText": "println!(\"{x}\");\n}\n\nfn other() {\nlet x = 1;", "newText": "x"}),
        )
        .await;
        assert!(
            err.contains("whitespace") && err.contains("line 3"),
            "{err}"
        );
        assert_eq!(content(&dir), SRC);
    }

    #[tokio::test]
    async fn multiple_matches_list_line_numbers() {
        let (dir, c) = setup();
        let err = run_err(
            &EditTool,
            &c,
            json!({"path": "main.rs", "edits": [{"oldText": "let x = 1;", "newText": "let x = 2;"}]}),
        )
        .await;
        assert!(err.contains("edits[0].oldText matches 2 times"), "{err}");
        assert!(err.contains("lines 2, 7"), "{err}");
        assert_eq!(content(&dir), SRC);
    }

    #[tokio::test]
    async fn overlapping_edits_are_refused() {
        let (dir, c) = setup();
        let err = run_err(
            &EditTool,
            &c,
            json!({"path": "main.rs", "edits": [
                {"oldText": "fn main() {\n    let x", "newText": "a"},
                {"oldText": "main() {", "newText": "b"}
            ]}),
        )
        .await;
        assert!(err.contains("edits[0] and edits[1] overlap"), "{err}");
        assert_eq!(content(&dir), SRC);
    }

    #[tokio::test]
    async fn crlf_and_bom_are_preserved() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("w.txt"), "\u{FEFF}one\r\ntwo\r\nthree\r\n").unwrap();
        run_ok(
            &EditTool,
            &ctx(dir.path()),
            json!({"path": "w.txt", "oldText": "one\ntwo", "newText": "1\n2"}),
        )
        .await;
        assert_eq!(
            fs::read_to_string(dir.path().join("w.txt")).unwrap(),
            "\u{FEFF}1\r\n2\r\nthree\r\n"
        );
    }

    #[tokio::test]
    async fn bad_arguments_and_paths() {
        let (dir, c) = setup();
        let err = run_err(&EditTool, &c, json!({"path": "main.rs"})).await;
        assert!(err.contains("missing field `edits`"), "{err}");
        let err = run_err(&EditTool, &c, json!({"path": "main.rs", "edits": []})).await;
        assert!(err.contains("at least one"), "{err}");
        let err = run_err(
            &EditTool,
            &c,
            json!({"path": "main.rs", "edits": [{"oldText": "x"}]}),
        )
        .await;
        assert!(err.contains("edits[0]") && err.contains("newText"), "{err}");
        let err = run_err(
            &EditTool,
            &c,
            json!({"path": "main.rs", "oldText": "", "newText": "x"}),
        )
        .await;
        assert!(err.contains("must not be empty"), "{err}");
        let err = run_err(
            &EditTool,
            &c,
            json!({"path": "file:///etc/hosts", "oldText": "a", "newText": "b"}),
        )
        .await;
        assert!(err.contains("URI"), "{err}");
        let err = run_err(
            &EditTool,
            &c,
            json!({"path": "gone.rs", "oldText": "a", "newText": "b"}),
        )
        .await;
        assert!(
            err.contains("not found") && err.contains("gone.rs"),
            "{err}"
        );
        let err = run_err(
            &EditTool,
            &c,
            json!({"path": "main.rs", "oldText": "fn main", "newText": "fn main"}),
        )
        .await;
        assert!(err.contains("No changes"), "{err}");
        assert_eq!(content(&dir), SRC);
    }

    #[test]
    fn helpers() {
        assert_eq!(find_all("aaa", "aa"), vec![0, 1]);
        assert_eq!(find_all("héhé", "é"), vec![1, 4]);
        assert!(looks_like_uri("https://x/y"));
        assert!(looks_like_uri("vscode-remote://host/x"));
        assert!(!looks_like_uri("src/main.rs"));
        assert!(!looks_like_uri("a b://c"));
        assert_eq!(first_changed_line("a\nb\nc", "a\nB\nc"), 2);
    }
}
