//! Static values of shell words.
//!
//! Owns turning one tree-sitter-bash word-like node (`word`, `string`,
//! `raw_string`, `ansi_c_string`, `concatenation`, ...) into the text the
//! program would receive, or "dynamic" when that text depends on anything
//! the analyser cannot see (expansions, substitutions, globs, brace
//! expansion). Quoting tricks (`'r''m'`, `\rm`, `$'\x72m'`) resolve to their
//! plain value here. It must not judge commands.

use tree_sitter::Node;

use super::ShellWord;

/// The word `node` as the program receives it.
pub(crate) fn word_value(node: Node<'_>, src: &str) -> ShellWord {
    let raw = text(node, src).to_owned();
    if node.kind() == "word" && matches!(raw.as_str(), "[" | "[[") {
        return ShellWord::Static(raw);
    }
    match static_value(node, src) {
        Some(v) if !brace_expansion(node, src) => ShellWord::Static(v),
        _ => ShellWord::Dynamic(raw),
    }
}

pub(crate) fn text<'a>(node: Node<'_>, src: &'a str) -> &'a str {
    node.utf8_text(src.as_bytes()).unwrap_or("")
}

fn static_value(node: Node<'_>, src: &str) -> Option<String> {
    match node.kind() {
        "word" | "command_name" if node.named_child_count() == 0 => unquoted_word(text(node, src)),
        "command_name" => {
            let mut out = String::new();
            let mut cursor = node.walk();
            for child in node.named_children(&mut cursor) {
                out.push_str(&static_value(child, src)?);
            }
            Some(out)
        }
        "number" => Some(text(node, src).to_owned()),
        "variable_assignment" => {
            let name = text(node.child_by_field_name("name")?, src);
            let value = match node.child_by_field_name("value") {
                Some(v) => static_value(v, src)?,
                None => String::new(),
            };
            let op = if text(node, src).contains("+=") {
                "+="
            } else {
                "="
            };
            Some(format!("{name}{op}{value}"))
        }
        "raw_string" => {
            let t = text(node, src);
            Some(t.strip_prefix('\'')?.strip_suffix('\'')?.to_owned())
        }
        "string" | "translated_string" => double_quoted(node, src),
        "ansi_c_string" => {
            let t = text(node, src);
            ansi_c(t.strip_prefix("$'")?.strip_suffix('\'')?)
        }
        "concatenation" => {
            let mut out = String::new();
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                out.push_str(&static_value(child, src)?);
            }
            Some(out)
        }
        _ => None,
    }
}

/// An unquoted word: backslash escapes removed; `None` when it holds an
/// unescaped glob character (the shell may replace it with file names).
fn unquoted_word(t: &str) -> Option<String> {
    let mut out = String::with_capacity(t.len());
    let mut chars = t.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(n) => out.push(n),
            },
            '*' | '?' | '[' => return None,
            '$' | '`' => return None,
            _ => out.push(c),
        }
    }
    Some(out)
}

fn double_quoted(node: Node<'_>, src: &str) -> Option<String> {
    let mut out = String::new();
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        match child.kind() {
            "\"" | "$\"" => {}
            "string_content" => {
                let t = text(child, src);
                let mut chars = t.chars().peekable();
                while let Some(c) = chars.next() {
                    if c == '\\' {
                        match chars.peek() {
                            Some(&n @ ('"' | '\\' | '$' | '`')) => {
                                out.push(n);
                                chars.next();
                            }
                            Some('\n') => {
                                chars.next();
                            }
                            _ => out.push('\\'),
                        }
                    } else if c == '$' || c == '`' {
                        return None;
                    } else {
                        out.push(c);
                    }
                }
            }
            _ => return None,
        }
    }
    Some(out)
}

/// Decodes the body of `$'...'`; `None` for anything unusual.
fn ansi_c(body: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next()?;
        match e {
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'e' | 'E' => out.push('\x1b'),
            'f' => out.push('\x0c'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\x0b'),
            '\\' | '\'' | '"' | '?' => out.push(e),
            'x' | 'u' | 'U' => {
                let max = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut digits = String::new();
                while digits.len() < max {
                    match chars.peek() {
                        Some(d) if d.is_ascii_hexdigit() => {
                            digits.push(*d);
                            chars.next();
                        }
                        _ => break,
                    }
                }
                let n = u32::from_str_radix(&digits, 16).ok()?;
                out.push(char::from_u32(n)?);
            }
            '0'..='7' => {
                let mut digits = String::from(e);
                while digits.len() < 3 {
                    match chars.peek() {
                        Some(d @ '0'..='7') => {
                            digits.push(*d);
                            chars.next();
                        }
                        _ => break,
                    }
                }
                let n = u32::from_str_radix(&digits, 8).ok()?;
                out.push(char::from_u32(n)?);
            }
            _ => return None,
        }
    }
    Some(out)
}

/// Whether an unquoted part of the word may brace-expand (`{a,b}`, `{1..3}`).
fn brace_expansion(node: Node<'_>, src: &str) -> bool {
    if node.kind() == "brace_expression" {
        return true;
    }
    let unquoted_has_brace = match node.kind() {
        "word" => text(node, src).contains('{'),
        "concatenation" | "command_name" => {
            let mut cursor = node.walk();
            node.children(&mut cursor).any(|c| {
                c.kind() == "brace_expression" || (c.kind() == "word" && text(c, src).contains('{'))
            })
        }
        _ => false,
    };
    if !unquoted_has_brace {
        return false;
    }
    let t = text(node, src);
    let Some(open) = t.find('{') else {
        return false;
    };
    let rest = &t[open..];
    match rest.find('}') {
        Some(close) => {
            let inner = &rest[1..close];
            inner.contains(',') || inner.contains("..")
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_command_words(src: &str) -> Vec<ShellWord> {
        let mut p = tree_sitter::Parser::new();
        p.set_language(&tree_sitter_bash::LANGUAGE.into()).unwrap();
        let tree = p.parse(src, None).unwrap();
        let root = tree.root_node();
        let cmd = root.named_child(0).unwrap();
        assert_eq!(cmd.kind(), "command", "{}", root.to_sexp());
        let mut out = vec![word_value(cmd.child_by_field_name("name").unwrap(), src)];
        let mut cursor = cmd.walk();
        for a in cmd.children_by_field_name("argument", &mut cursor) {
            out.push(word_value(a, src));
        }
        out
    }

    fn statics(src: &str) -> Vec<Option<String>> {
        first_command_words(src)
            .into_iter()
            .map(|w| w.as_static().map(str::to_owned))
            .collect()
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_owned())
    }

    #[test]
    fn quoting_tricks_resolve() {
        assert_eq!(statics("'r''m' -rf /"), [s("rm"), s("-rf"), s("/")]);
        assert_eq!(statics(r"\rm -r\f x"), [s("rm"), s("-rf"), s("x")]);
        assert_eq!(statics(r#""r"m "-"rf"#), [s("rm"), s("-rf")]);
        assert_eq!(
            statics(r"$'\x72m' $'\162\155' $'a\nb'"),
            [s("rm"), s("rm"), s("a\nb")]
        );
        assert_eq!(
            statics(r#"echo "a\"b" 'c\d'"#),
            [s("echo"), s("a\"b"), s("c\\d")]
        );
        assert_eq!(statics("ls -5 ''"), [s("ls"), s("-5"), s("")]);
    }

    #[test]
    fn expansions_globs_and_braces_are_dynamic() {
        let v = statics(
            r#"ls $X "${Y}" "a$Z" *.rs a[0-9] x? {a,b} {1..3} $(id) `id` \*.rs "*.rs" {} ~/x"#,
        );
        assert_eq!(
            v,
            [
                s("ls"),
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                s("*.rs"),
                s("*.rs"),
                s("{}"),
                s("~/x"),
            ]
        );
        assert_eq!(statics(r#""$CMD" x"#)[0], None);
    }
}
