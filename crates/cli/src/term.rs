//! Text that did not come from keel, made safe for a terminal.
//!
//! Owns [`safe`]: control characters (C0 except newline and tab, DEL, C1)
//! are dropped from provider errors, model text and tool output before they
//! reach a terminal, so an `ESC[2J` or an OSC sequence in an error body
//! cannot clear the screen, retitle the window or fake keel's own lines.

use std::borrow::Cow;

fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || ('\u{80}'..='\u{9f}').contains(&c)
}

/// `text` without terminal control characters.
pub fn safe(text: &str) -> Cow<'_, str> {
    if text.chars().any(is_unsafe) {
        Cow::Owned(text.chars().filter(|c| !is_unsafe(*c)).collect())
    } else {
        Cow::Borrowed(text)
    }
}

/// [`safe`] when `tty`, else `text` as it is.
pub fn safe_if(tty: bool, text: &str) -> Cow<'_, str> {
    if tty { safe(text) } else { Cow::Borrowed(text) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_bells_are_dropped() {
        assert_eq!(safe("a\x1b[2Jb\x07c\u{9b}d\r"), "a[2Jbcd");
        assert_eq!(safe("line\n\tindent"), "line\n\tindent");
        assert!(matches!(safe("plain ✓"), Cow::Borrowed(_)));
    }
}
