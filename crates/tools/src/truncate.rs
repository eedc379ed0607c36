//! Output truncation shared by the tools.
//!
//! Owns the size limits a tool result may reach (pi's defaults: 2000 lines or
//! 50 KiB, whichever comes first, and ~2000 characters per line) and the
//! helpers that cut text to them: keep the head (for `read`), the tail (for
//! streamed updates) or head and tail (for `bash` output), each reporting what
//! was cut so the caller can say so in a note. It must not know about files,
//! processes or any particular tool.

use std::borrow::Cow;

/// Default maximum number of lines in a tool result.
pub const DEFAULT_MAX_LINES: usize = 2000;
/// Default maximum number of bytes in a tool result (50 KiB).
pub const DEFAULT_MAX_BYTES: usize = 50 * 1024;
/// Lines longer than this many characters are cut with a marker.
pub const MAX_LINE_CHARS: usize = 2000;

/// How much text a result may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_lines: usize,
    pub max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_lines: DEFAULT_MAX_LINES,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// Text cut to [`Limits`], with an account of what was cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncated {
    /// The kept text (lines joined with `\n`, without a trailing newline;
    /// for head+tail, the omission marker line sits between the two parts).
    pub content: String,
    /// Whether whole lines were dropped.
    pub truncated: bool,
    /// Lines in the input.
    pub total_lines: usize,
    /// Bytes in the input.
    pub total_bytes: usize,
    /// Lines kept from the start of the input.
    pub head_lines: usize,
    /// Lines kept from the end of the input.
    pub tail_lines: usize,
    /// Lines dropped.
    pub omitted_lines: usize,
    /// Kept lines that were individually cut for being too long.
    pub long_lines_cut: usize,
}

impl Truncated {
    /// Total lines kept.
    pub fn shown_lines(&self) -> usize {
        self.head_lines + self.tail_lines
    }
}

/// Splits text into lines the way editors count them: a trailing newline
/// does not start an extra empty line.
pub fn split_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n').collect()
}

/// Cuts a single line to `max_chars` characters, appending a marker that
/// says how many were cut.
pub fn truncate_line(line: &str, max_chars: usize) -> Cow<'_, str> {
    match line.char_indices().nth(max_chars) {
        None => Cow::Borrowed(line),
        Some((cut, _)) => {
            let rest = line[cut..].chars().count();
            Cow::Owned(format!(
                "{}… [line truncated, {rest} more chars]",
                &line[..cut]
            ))
        }
    }
}

/// Returns the last `max_bytes` bytes of `text` (or a little less, to stay on
/// a character boundary).
pub fn tail_bytes(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut start = text.len() - max_bytes;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Returns the first `max_bytes` bytes of `text` (or a little less, to stay
/// on a character boundary).
pub fn head_bytes(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Keeps the first lines of `text` within `limits`.
pub fn truncate_head(text: &str, limits: Limits) -> Truncated {
    let lines = split_lines(text);
    let (kept, cut) = take_lines(lines.iter().copied(), limits);
    let head_lines = kept.len();
    Truncated {
        content: kept.join("\n"),
        truncated: head_lines < lines.len(),
        total_lines: lines.len(),
        total_bytes: text.len(),
        head_lines,
        tail_lines: 0,
        omitted_lines: lines.len() - head_lines,
        long_lines_cut: cut,
    }
}

/// Keeps the last lines of `text` within `limits`.
pub fn truncate_tail(text: &str, limits: Limits) -> Truncated {
    let lines = split_lines(text);
    let (mut kept, cut) = take_lines(lines.iter().rev().copied(), limits);
    kept.reverse();
    let tail_lines = kept.len();
    Truncated {
        content: kept.join("\n"),
        truncated: tail_lines < lines.len(),
        total_lines: lines.len(),
        total_bytes: text.len(),
        head_lines: 0,
        tail_lines,
        omitted_lines: lines.len() - tail_lines,
        long_lines_cut: cut,
    }
}

/// Keeps the start and the end of `text`, each within half of `limits`,
/// with a marker line between them saying how many lines were omitted.
/// Text that fits `limits` whole is returned unchanged (apart from long
/// lines being cut).
pub fn truncate_head_tail(text: &str, limits: Limits) -> Truncated {
    let lines = split_lines(text);
    let (all, cut) = take_lines(lines.iter().copied(), limits);
    if all.len() == lines.len() {
        return Truncated {
            content: all.join("\n"),
            truncated: false,
            total_lines: lines.len(),
            total_bytes: text.len(),
            head_lines: lines.len(),
            tail_lines: 0,
            omitted_lines: 0,
            long_lines_cut: cut,
        };
    }
    let half = Limits {
        max_lines: (limits.max_lines / 2).max(1),
        max_bytes: (limits.max_bytes / 2).max(1),
    };
    let (head, head_cut) = take_lines(lines.iter().copied(), half);
    let remaining = &lines[head.len()..];
    let (mut tail, tail_cut) = take_lines(remaining.iter().rev().copied(), half);
    tail.reverse();
    let omitted = lines.len() - head.len() - tail.len();
    let mut parts: Vec<Cow<'_, str>> = head;
    let head_lines = parts.len();
    let tail_lines = tail.len();
    parts.push(Cow::Owned(format!("[... {omitted} lines omitted ...]")));
    parts.extend(tail);
    Truncated {
        content: parts.join("\n"),
        truncated: true,
        total_lines: lines.len(),
        total_bytes: text.len(),
        head_lines,
        tail_lines,
        omitted_lines: omitted,
        long_lines_cut: head_cut + tail_cut,
    }
}

/// Takes lines from `lines` (cutting long ones) while they fit `limits`.
/// Returns the kept lines in iteration order and how many were cut.
fn take_lines<'a>(
    lines: impl Iterator<Item = &'a str>,
    limits: Limits,
) -> (Vec<Cow<'a, str>>, usize) {
    let mut kept = Vec::new();
    let mut bytes = 0usize;
    let mut cut = 0usize;
    for line in lines {
        if kept.len() >= limits.max_lines {
            break;
        }
        let line = truncate_line(line, MAX_LINE_CHARS);
        let is_cut = matches!(line, Cow::Owned(_));
        let cost = line.len() + usize::from(!kept.is_empty());
        if bytes + cost > limits.max_bytes {
            if kept.is_empty() {
                // A single line bigger than the whole budget: keep its start.
                let mut text = head_bytes(&line, limits.max_bytes).to_owned();
                text.push_str("… [line truncated]");
                kept.push(Cow::Owned(text));
                cut += 1;
            }
            break;
        }
        bytes += cost;
        cut += usize::from(is_cut);
        kept.push(line);
    }
    (kept, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn split_lines_ignores_trailing_newline() {
        assert_eq!(split_lines(""), Vec::<&str>::new());
        assert_eq!(split_lines("a\nb\n"), vec!["a", "b"]);
        assert_eq!(split_lines("a\nb"), vec!["a", "b"]);
        assert_eq!(split_lines("\n"), vec![""]);
    }

    #[test]
    fn head_keeps_within_line_limit() {
        let t = truncate_head(
            &numbered(10),
            Limits {
                max_lines: 3,
                max_bytes: 1000,
            },
        );
        assert_eq!(t.content, "line 1\nline 2\nline 3");
        assert!(t.truncated);
        assert_eq!(t.total_lines, 10);
        assert_eq!(t.omitted_lines, 7);
    }

    #[test]
    fn head_keeps_within_byte_limit() {
        // "line 1\nline 2\nline 3" is exactly 20 bytes.
        let t = truncate_head(
            &numbered(10),
            Limits {
                max_lines: 100,
                max_bytes: 19,
            },
        );
        assert_eq!(t.content, "line 1\nline 2");
        assert_eq!(t.head_lines, 2);
        assert!(t.truncated);
    }

    #[test]
    fn fits_whole_is_not_truncated() {
        let t = truncate_head("a\nb\n", Limits::default());
        assert!(!t.truncated);
        assert_eq!(t.content, "a\nb");
        let t = truncate_head_tail("a\nb\n", Limits::default());
        assert!(!t.truncated);
        assert_eq!(t.content, "a\nb");
    }

    #[test]
    fn tail_keeps_last_lines() {
        let t = truncate_tail(
            &numbered(10),
            Limits {
                max_lines: 2,
                max_bytes: 1000,
            },
        );
        assert_eq!(t.content, "line 9\nline 10");
        assert_eq!(t.tail_lines, 2);
    }

    #[test]
    fn head_tail_keeps_both_ends_with_marker() {
        let t = truncate_head_tail(
            &numbered(100),
            Limits {
                max_lines: 10,
                max_bytes: 10_000,
            },
        );
        assert!(t.truncated);
        assert_eq!(t.head_lines, 5);
        assert_eq!(t.tail_lines, 5);
        assert_eq!(t.omitted_lines, 90);
        let lines: Vec<&str> = t.content.lines().collect();
        assert_eq!(lines[0], "line 1");
        assert_eq!(lines[4], "line 5");
        assert_eq!(lines[5], "[... 90 lines omitted ...]");
        assert_eq!(lines[6], "line 96");
        assert_eq!(lines[10], "line 100");
    }

    #[test]
    fn long_lines_are_cut_with_marker() {
        let long = "x".repeat(MAX_LINE_CHARS + 10);
        let cut = truncate_line(&long, MAX_LINE_CHARS);
        assert!(cut.starts_with(&"x".repeat(MAX_LINE_CHARS)));
        assert!(cut.ends_with("[line truncated, 10 more chars]"), "{cut}");
        let t = truncate_head(&format!("short\n{long}\n"), Limits::default());
        assert_eq!(t.long_lines_cut, 1);
        assert!(!t.truncated);
        // Multi-byte characters are cut on character boundaries.
        let s = "é".repeat(5);
        assert_eq!(
            truncate_line(&s, 2).chars().take(2).collect::<String>(),
            "éé"
        );
    }

    #[test]
    fn byte_slices_respect_char_boundaries() {
        let s = "aé"; // 'é' is two bytes
        assert_eq!(tail_bytes(s, 1), "");
        assert_eq!(tail_bytes(s, 2), "é");
        assert_eq!(head_bytes(s, 2), "a");
        assert_eq!(head_bytes(s, 10), s);
    }

    #[test]
    fn oversized_single_line_keeps_its_start() {
        let t = truncate_head(
            "abcdefghij",
            Limits {
                max_lines: 10,
                max_bytes: 4,
            },
        );
        assert!(t.content.starts_with("abcd"));
        assert_eq!(t.long_lines_cut, 1);
    }
}
