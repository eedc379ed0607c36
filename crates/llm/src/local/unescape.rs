//! Small models quote what they wrote through a tool as the JSON they
//! wrote it in: "I wrote `fib.py` containing "a = 1\nprint(a)"", with a
//! literal backslash-n. [`Unescape`] turns the escapes of a JSON string
//! (`\n`, `\t`, `\"`, `\\`) in the model's text back into what they stand
//! for, as the text streams (an escape split over two pieces is held until
//! the next). Inside an inline code span (between single backticks) text
//! is left as it is: there a backslash-n may be meant. It does no I/O.
#![cfg_attr(not(feature = "local"), allow(dead_code))]

/// A streaming filter over the model's text pieces.
#[derive(Debug, Default)]
pub(crate) struct Unescape {
    /// Inside `` `code` ``.
    in_code: bool,
    /// The previous piece ended with a backslash outside code.
    pending: bool,
}

impl Unescape {
    /// The text to show for the next `piece`.
    pub fn push(&mut self, piece: &str) -> String {
        let mut out = String::with_capacity(piece.len());
        for c in piece.chars() {
            if self.pending {
                self.pending = false;
                match c {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    other => {
                        out.push('\\');
                        self.plain(other, &mut out);
                    }
                }
                continue;
            }
            self.plain(c, &mut out);
        }
        out
    }

    fn plain(&mut self, c: char, out: &mut String) {
        match c {
            '\\' if !self.in_code => self.pending = true,
            '`' => {
                self.in_code = !self.in_code;
                out.push(c);
            }
            _ => out.push(c),
        }
    }

    /// What is still held at the end of the text.
    pub fn finish(&mut self) -> String {
        if std::mem::take(&mut self.pending) {
            "\\".to_owned()
        } else {
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(pieces: &[&str]) -> String {
        let mut u = Unescape::default();
        let mut out: String = pieces.iter().map(|p| u.push(p)).collect();
        out.push_str(&u.finish());
        out
    }

    #[test]
    fn json_escapes_in_prose_become_what_they_stand_for() {
        assert_eq!(
            all(&["I wrote \"print('ok')\\n\" to main.py."]),
            "I wrote \"print('ok')\n\" to main.py."
        );
        // Split over pieces, as tokens come.
        assert_eq!(
            all(&["a = 1\\", "nprint(a)\\", "\\", "t"]),
            "a = 1\nprint(a)\\t"
        );
        assert_eq!(all(&["say \\\"hi\\\""]), "say \"hi\"");
        // Inside inline code, as written.
        assert_eq!(
            all(&["use `printf(\"\\n\")` here\\n"]),
            "use `printf(\"\\n\")` here\n"
        );
        // A lone backslash stays.
        assert_eq!(all(&["C:\\Users and \\"]), "C:\\Users and \\");
        assert_eq!(all(&["plain text"]), "plain text");
    }
}
