//! HTML escaping, a small code highlighter and diff colouring.
//!
//! The highlighter knows comments, strings, numbers and the keywords of a
//! few languages (Rust, Python, JavaScript/TypeScript, shell, Go, C-like,
//! JSON, TOML/YAML); anything else is escaped text. Output is HTML with
//! `<span class="k|s|c|n">` and nothing from the input left unescaped.

/// Escapes text for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const RUST: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "false",
    "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref",
    "return", "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe",
    "use", "where", "while", "Some", "None", "Ok", "Err",
];
const PYTHON: &[&str] = &[
    "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
    "else", "except", "False", "finally", "for", "from", "global", "if", "import", "in", "is",
    "lambda", "None", "nonlocal", "not", "or", "pass", "raise", "return", "self", "True", "try",
    "while", "with", "yield",
];
const JS: &[&str] = &[
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "default",
    "delete",
    "do",
    "else",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "from",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "interface",
    "let",
    "new",
    "null",
    "of",
    "return",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "type",
    "typeof",
    "undefined",
    "var",
    "void",
    "while",
    "yield",
];
const SHELL: &[&str] = &[
    "case", "cd", "do", "done", "echo", "elif", "else", "esac", "exit", "export", "fi", "for",
    "function", "if", "in", "local", "return", "set", "source", "then", "until", "while",
];
const GO: &[&str] = &[
    "break",
    "case",
    "chan",
    "const",
    "continue",
    "default",
    "defer",
    "else",
    "false",
    "for",
    "func",
    "go",
    "if",
    "import",
    "interface",
    "map",
    "nil",
    "package",
    "range",
    "return",
    "select",
    "struct",
    "switch",
    "true",
    "type",
    "var",
];
const C_LIKE: &[&str] = &[
    "auto",
    "bool",
    "break",
    "case",
    "char",
    "class",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "false",
    "float",
    "for",
    "if",
    "int",
    "long",
    "namespace",
    "new",
    "nullptr",
    "private",
    "protected",
    "public",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "template",
    "this",
    "true",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
];
const DATA: &[&str] = &["true", "false", "null"];

#[derive(Clone, Copy)]
struct Lang {
    keywords: &'static [&'static str],
    hash_comments: bool,
    slash_comments: bool,
}

fn lang(name: &str) -> Option<Lang> {
    let name = name.trim().to_ascii_lowercase();
    let l = |keywords, hash_comments, slash_comments| {
        Some(Lang {
            keywords,
            hash_comments,
            slash_comments,
        })
    };
    match name.as_str() {
        "rust" | "rs" => l(RUST, false, true),
        "python" | "py" => l(PYTHON, true, false),
        "js" | "javascript" | "ts" | "typescript" | "jsx" | "tsx" | "mjs" => l(JS, false, true),
        "sh" | "bash" | "shell" | "zsh" | "console" => l(SHELL, true, false),
        "go" | "golang" => l(GO, false, true),
        "c" | "h" | "cpp" | "c++" | "cc" | "java" | "kotlin" | "cs" | "csharp" | "swift" => {
            l(C_LIKE, false, true)
        }
        "json" | "jsonc" => l(DATA, false, true),
        "toml" | "yaml" | "yml" | "ini" => l(DATA, true, false),
        _ => None,
    }
}

/// The language of a file path, for highlighting its content.
pub fn lang_of_path(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    match ext.to_ascii_lowercase().as_str() {
        "rs" => "rust",
        "py" => "python",
        "js" | "mjs" | "cjs" | "jsx" => "js",
        "ts" | "tsx" => "ts",
        "sh" | "bash" => "sh",
        "go" => "go",
        "c" | "h" | "cc" | "cpp" | "hpp" | "java" | "kt" | "cs" | "swift" => "c",
        "json" => "json",
        "toml" => "toml",
        "yaml" | "yml" => "yaml",
        "diff" | "patch" => "diff",
        _ => "",
    }
}

fn span(out: &mut String, class: &str, text: &str) {
    out.push_str("<span class=\"");
    out.push_str(class);
    out.push_str("\">");
    out.push_str(&escape(text));
    out.push_str("</span>");
}

/// `code` as highlighted HTML (without the surrounding `<pre><code>`).
pub fn highlight(code: &str, language: &str) -> String {
    if matches!(language.trim(), "diff" | "patch") {
        return diff(code);
    }
    let Some(lang) = lang(language) else {
        return escape(code);
    };
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len() * 2);
    let mut i = 0;
    let take_while = |mut j: usize, pred: &dyn Fn(char) -> bool| {
        while j < chars.len() && pred(chars[j]) {
            j += 1;
        }
        j
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let rest_of_line = || take_while(i, &|ch| ch != '\n');
        if (lang.hash_comments && c == '#')
            || (lang.slash_comments && c == '/' && next == Some('/'))
        {
            let end = rest_of_line();
            span(&mut out, "c", &chars[i..end].iter().collect::<String>());
            i = end;
        } else if lang.slash_comments && c == '/' && next == Some('*') {
            let mut end = i + 2;
            while end < chars.len() && !(chars[end] == '*' && chars.get(end + 1) == Some(&'/')) {
                end += 1;
            }
            end = (end + 2).min(chars.len());
            span(&mut out, "c", &chars[i..end].iter().collect::<String>());
            i = end;
        } else if c == '"' || c == '\'' || c == '`' {
            let mut end = i + 1;
            while end < chars.len() && chars[end] != c {
                if chars[end] == '\\' {
                    end += 1;
                }
                if c != '`' && chars.get(end) == Some(&'\n') {
                    break;
                }
                end += 1;
            }
            end = (end + 1).min(chars.len());
            span(&mut out, "s", &chars[i..end].iter().collect::<String>());
            i = end;
        } else if c.is_ascii_digit() {
            let end = take_while(i, &|ch| {
                ch.is_ascii_alphanumeric() || ch == '.' || ch == '_'
            });
            span(&mut out, "n", &chars[i..end].iter().collect::<String>());
            i = end;
        } else if c.is_alphabetic() || c == '_' {
            let end = take_while(i, &|ch| ch.is_alphanumeric() || ch == '_');
            let word: String = chars[i..end].iter().collect();
            if lang.keywords.contains(&word.as_str()) {
                span(&mut out, "k", &word);
            } else {
                out.push_str(&escape(&word));
            }
            i = end;
        } else {
            out.push_str(&escape(&c.to_string()));
            i += 1;
        }
    }
    out
}

/// A unified diff with added, removed, hunk and header lines coloured.
pub fn diff(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for line in text.split_inclusive('\n') {
        let class = if line.starts_with("+++") || line.starts_with("---") {
            "d-meta"
        } else if line.starts_with('+') {
            "d-add"
        } else if line.starts_with('-') {
            "d-del"
        } else if line.starts_with("@@") {
            "d-hunk"
        } else {
            ""
        };
        if class.is_empty() {
            out.push_str(&escape(line));
        } else {
            span(&mut out, class, line);
        }
    }
    out
}

/// Whether `text` reads like a unified diff.
pub fn looks_like_diff(text: &str) -> bool {
    text.lines().any(|l| l.starts_with("@@ "))
        && text
            .lines()
            .any(|l| l.starts_with('+') || l.starts_with('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_is_escaped() {
        let h = highlight("let x = \"<script>\"; // </pre>", "rust");
        assert!(!h.contains("<script>"));
        assert!(!h.contains("</pre>"));
        assert!(h.contains("<span class=\"k\">let</span>"));
        assert!(h.contains("<span class=\"s\">&quot;&lt;script&gt;&quot;</span>"));
        assert!(h.contains("<span class=\"c\">// &lt;/pre&gt;</span>"));
        assert_eq!(highlight("<b>", "unknown"), "&lt;b&gt;");
        assert!(
            diff("+<i>\n-x\n@@ -1 +1 @@\n").contains("<span class=\"d-add\">+&lt;i&gt;\n</span>")
        );
        assert!(looks_like_diff("@@ -1 +1 @@\n-a\n+b"));
        assert_eq!(lang_of_path("src/main.rs"), "rust");
    }
}
