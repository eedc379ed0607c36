//! Tests of GBNF generation, checked with a small GBNF interpreter (the
//! subset the generator writes) so acceptance is tested without llama.cpp.

use std::collections::{BTreeSet, HashMap};

use super::*;
use serde_json::json;

// ---- a tiny GBNF interpreter ------------------------------------------

#[derive(Debug, Clone)]
enum Node {
    Lit(Vec<char>),
    Class {
        neg: bool,
        ranges: Vec<(char, char)>,
    },
    Ref(String),
    Alt(Vec<Vec<Node>>),
    Rep(Box<Node>, usize, Option<usize>),
}

struct Parser<'a> {
    s: Vec<char>,
    i: usize,
    _src: &'a str,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_whitespace() && self.s[self.i] != '\n' {
            self.i += 1;
        }
    }
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }
    fn esc(&mut self) -> char {
        let c = self.s[self.i];
        self.i += 1;
        match c {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'x' => {
                let h: String = self.s[self.i..self.i + 2].iter().collect();
                self.i += 2;
                char::from_u32(u32::from_str_radix(&h, 16).unwrap()).unwrap()
            }
            c => c,
        }
    }
    fn alts(&mut self) -> Vec<Vec<Node>> {
        let mut alts = vec![self.seq()];
        while self.peek() == Some('|') {
            self.i += 1;
            alts.push(self.seq());
        }
        alts
    }
    fn seq(&mut self) -> Vec<Node> {
        let mut out = Vec::new();
        loop {
            self.ws();
            let Some(c) = self.peek() else { return out };
            let node = match c {
                '"' => {
                    self.i += 1;
                    let mut lit = Vec::new();
                    while self.s[self.i] != '"' {
                        if self.s[self.i] == '\\' {
                            self.i += 1;
                            lit.push(self.esc());
                        } else {
                            lit.push(self.s[self.i]);
                            self.i += 1;
                        }
                    }
                    self.i += 1;
                    Node::Lit(lit)
                }
                '[' => {
                    self.i += 1;
                    let neg = self.peek() == Some('^');
                    if neg {
                        self.i += 1;
                    }
                    let mut ranges = Vec::new();
                    while self.s[self.i] != ']' {
                        let a = if self.s[self.i] == '\\' {
                            self.i += 1;
                            self.esc()
                        } else {
                            self.i += 1;
                            self.s[self.i - 1]
                        };
                        let b = if self.peek() == Some('-') && self.s[self.i + 1] != ']' {
                            self.i += 1;
                            if self.s[self.i] == '\\' {
                                self.i += 1;
                                self.esc()
                            } else {
                                self.i += 1;
                                self.s[self.i - 1]
                            }
                        } else {
                            a
                        };
                        ranges.push((a, b));
                    }
                    self.i += 1;
                    Node::Class { neg, ranges }
                }
                '(' => {
                    self.i += 1;
                    let alts = self.alts();
                    assert_eq!(self.peek(), Some(')'));
                    self.i += 1;
                    Node::Alt(alts)
                }
                c if c.is_ascii_alphanumeric() || c == '-' => {
                    let start = self.i;
                    while self
                        .peek()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
                    {
                        self.i += 1;
                    }
                    Node::Ref(self.s[start..self.i].iter().collect())
                }
                _ => return out,
            };
            let node = match self.peek() {
                Some('?') => {
                    self.i += 1;
                    Node::Rep(Box::new(node), 0, Some(1))
                }
                Some('*') => {
                    self.i += 1;
                    Node::Rep(Box::new(node), 0, None)
                }
                Some('+') => {
                    self.i += 1;
                    Node::Rep(Box::new(node), 1, None)
                }
                Some('{') => {
                    let end = self.s[self.i..].iter().position(|c| *c == '}').unwrap() + self.i;
                    let spec: String = self.s[self.i + 1..end].iter().collect();
                    self.i = end + 1;
                    let (lo, hi) = match spec.split_once(',') {
                        Some((a, "")) => (a.parse().unwrap(), None),
                        Some((a, b)) => (a.parse().unwrap(), Some(b.parse().unwrap())),
                        None => (spec.parse().unwrap(), Some(spec.parse().unwrap())),
                    };
                    Node::Rep(Box::new(node), lo, hi)
                }
                _ => node,
            };
            out.push(node);
        }
    }
}

fn parse_gbnf(src: &str) -> HashMap<String, Vec<Vec<Node>>> {
    let mut rules = HashMap::new();
    for line in src.lines().filter(|l| !l.trim().is_empty()) {
        let (name, body) = line.split_once("::=").unwrap();
        let mut p = Parser {
            s: body.chars().collect(),
            i: 0,
            _src: src,
        };
        let alts = p.alts();
        assert_eq!(p.i, p.s.len(), "unparsed rest in {line:?}");
        assert!(
            rules.insert(name.trim().to_owned(), alts).is_none(),
            "dup {name}"
        );
    }
    rules
}

struct Matcher<'a> {
    rules: &'a HashMap<String, Vec<Vec<Node>>>,
    input: Vec<char>,
}

impl Matcher<'_> {
    fn node(&self, n: &Node, at: usize) -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        match n {
            Node::Lit(l) => {
                if self.input[at..].starts_with(l) {
                    out.insert(at + l.len());
                }
            }
            Node::Class { neg, ranges } => {
                if let Some(c) = self.input.get(at) {
                    let hit = ranges.iter().any(|(a, b)| a <= c && c <= b);
                    if hit != *neg {
                        out.insert(at + 1);
                    }
                }
            }
            Node::Ref(name) => {
                let alts = self
                    .rules
                    .get(name)
                    .unwrap_or_else(|| panic!("no rule {name}"));
                out = self.alts(alts, at);
            }
            Node::Alt(alts) => out = self.alts(alts, at),
            Node::Rep(inner, lo, hi) => {
                let mut frontier: BTreeSet<usize> = [at].into();
                let mut count = 0;
                if *lo == 0 {
                    out.insert(at);
                }
                while !frontier.is_empty() && hi.is_none_or(|h| count < h) {
                    let mut next = BTreeSet::new();
                    for p in &frontier {
                        next.extend(self.node(inner, *p));
                    }
                    count += 1;
                    if count >= *lo {
                        out.extend(next.iter().copied());
                    }
                    frontier = next;
                }
            }
        }
        out
    }
    fn alts(&self, alts: &[Vec<Node>], at: usize) -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        for seq in alts {
            let mut pos: BTreeSet<usize> = [at].into();
            for n in seq {
                pos = pos.iter().flat_map(|p| self.node(n, *p)).collect();
            }
            out.extend(pos);
        }
        out
    }
}

fn accepts(grammar: &str, input: &str) -> bool {
    let rules = parse_gbnf(grammar);
    let m = Matcher {
        rules: &rules,
        input: input.chars().collect(),
    };
    m.node(&Node::Ref("root".into()), 0)
        .contains(&m.input.len())
}

// ---- the tests --------------------------------------------------------

fn tool(name: &str, parameters: Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("the {name} tool"),
        parameters,
    }
}

fn tools() -> Vec<ToolSpec> {
    vec![
        tool(
            "write",
            json!({
                "type": "object",
                // Keys in sorted order: serde_json may not keep any other.
                "properties": {
                    "content": {"type": "string"},
                    "mode": {"type": "string", "enum": ["create", "overwrite"]},
                    "path": {"type": "string", "description": "file"},
                },
                "required": ["path", "content"],
            }),
        ),
        tool(
            "bash",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "timeout": {"type": "integer", "minimum": 1},
                },
                "required": ["command"],
            }),
        ),
        tool(
            "ls",
            json!({
                "type": "object",
                "properties": {
                    "limit": {"type": ["integer", "null"]},
                    "path": {"type": "string"},
                },
            }),
        ),
        tool(
            "edit",
            json!({
                "type": "object",
                "properties": {
                    "dry": {"type": "boolean"},
                    "edits": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "properties": {
                                "newText": {"type": "string"},
                                "oldText": {"type": "string"},
                            },
                            "required": ["oldText", "newText"],
                        },
                    },
                    "meta": {},
                    "path": {"type": "string"},
                },
                "required": ["path", "edits"],
            }),
        ),
    ]
}

fn call(name: &str, args: &str) -> String {
    format!("<tool_call>\n{{\"name\": \"{name}\", \"arguments\": {args}}}\n</tool_call>")
}

#[test]
fn no_tools_or_off_means_no_grammar() {
    assert_eq!(tool_grammar(&[], GrammarMode::Auto, true), None);
    assert_eq!(tool_grammar(&tools(), GrammarMode::Off, true), None);
}

#[test]
fn accepts_schema_valid_calls() {
    let g = tool_grammar(&tools(), GrammarMode::Auto, true).unwrap();
    for ok in [
        call("write", r#"{"content": "print(\"hi\")\n", "path": "a.py"}"#),
        call(
            "write",
            r#"{"content": "", "mode": "overwrite", "path": "a.py"}"#,
        ),
        call("bash", r#"{"command": "python3 fib.py", "timeout": 30}"#),
        call("bash", r#"{"command": "echo \u00e9 é"}"#),
        call("ls", "{}"),
        call("ls", r#"{"limit": null}"#),
        call("ls", r#"{"limit": 5, "path": "."}"#),
        call("ls", r#"{"path": "."}"#),
        call(
            "edit",
            r#"{"dry": true, "edits": [{"newText": "y", "oldText": "x"}], "path": "a"}"#,
        ),
        call(
            "edit",
            r#"{"edits": [{"newText": "y", "oldText": "x"}, {"newText": "z", "oldText": ""}], "meta": {"k": [1, -2.5e3, "v", false]}, "path": "a"}"#,
        ),
    ] {
        assert!(accepts(&g, &ok), "should accept: {ok}\n{g}");
    }
}

#[test]
fn rejects_invalid_calls() {
    let g = tool_grammar(&tools(), GrammarMode::Auto, true).unwrap();
    for bad in [
        call("rm", r#"{"path": "a"}"#),                       // unknown tool
        call("write", r#"{"path": "a.py"}"#),                 // missing required
        call("write", r#"{"path": "a.py", "content": "x"}"#), // order
        call("write", r#"{"content": "b", "mode": "zap", "path": "a"}"#), // enum
        call("bash", r#"{"command": "ls", "timeout": "5"}"#), // type
        call("bash", r#"{"command": "ls", "extra": 1}"#),     // unknown property
        call("bash", r#"{"command":"ls"}"#),                  // layout
        call("ls", r#"{"limit": 1.5}"#),                      // integer
        call("edit", r#"{"edits": [], "path": "a"}"#),        // minItems
        call("ls", r#"{"path": ".", "limit": 5}"#),           // order
        call("bash", "{\"command\": \"a\nb\"}"),              // raw newline
        "```json\n{\"name\": \"ls\"}\n```".to_owned(),        // fenced JSON
        "{\"name\": \"ls\", \"arguments\": {}}".to_owned(),   // bare JSON
        "<b>bold</b>".to_owned(),                             // text opening like a tag
        String::new(),
        // One call per answer.
        format!(
            "{}\n{}",
            call("ls", "{}"),
            call("bash", r#"{"command": "pwd"}"#)
        ),
    ] {
        assert!(!accepts(&g, &bad), "should reject: {bad}");
    }
}

#[test]
fn auto_allows_text_required_does_not() {
    let auto = tool_grammar(&tools(), GrammarMode::Auto, true).unwrap();
    let required = tool_grammar(&tools(), GrammarMode::Required, false).unwrap();
    let text = "It printed 0 1 1 2 3 5 8 13 21 34.\nDone — `fib.py` works.";
    assert!(accepts(&auto, text));
    assert!(accepts(&auto, "Ends with inline `code`"));
    assert!(accepts(&auto, "Two `` ticks ``"));
    assert!(!accepts(&auto, "Here:\n```python\nprint(1)\n```"));
    assert!(!accepts(&auto, "`code` first"));
    assert!(!accepts(&required, text));
    assert!(accepts(&required, &call("ls", "{}")));
    let first = tool_grammar(&tools(), GrammarMode::CallFirst, true).unwrap();
    let then = tool_grammar(&tools(), GrammarMode::CallFirst, false).unwrap();
    assert!(!accepts(&first, text) && accepts(&first, &call("ls", "{}")));
    assert!(accepts(&then, text) && accepts(&then, &call("ls", "{}")));
}

#[test]
fn odd_names_and_keys_are_escaped() {
    let g = tool_grammar(
        &[tool(
            "my.tool-1",
            json!({
                "type": "object",
                "properties": {"root": {"type": "boolean"}, "we\"ird key": {"const": "a\"b"}},
                "required": ["we\"ird key", "root"],
            }),
        )],
        GrammarMode::Required,
        true,
    )
    .unwrap();
    assert!(accepts(
        &g,
        &call("my.tool-1", r#"{"root": true, "we\"ird key": "a\"b"}"#)
    ));
    assert!(!accepts(
        &g,
        &call("my.tool-1", r#"{"root": true, "we\"ird key": "ab"}"#)
    ));
}

#[test]
fn any_of_and_deep_nesting_fall_back_sensibly() {
    let mut deep = json!({"type": "string"});
    for _ in 0..(MAX_DEPTH + 3) {
        deep = json!({"type": "object", "properties": {"x": deep}, "required": ["x"]});
    }
    let g = tool_grammar(
        &[
            tool(
                "pick",
                json!({
                    "type": "object",
                    "properties": {"v": {"anyOf": [{"type": "integer"}, {"type": "string"}]}},
                    "required": ["v"],
                }),
            ),
            tool("deep", deep),
        ],
        GrammarMode::Required,
        true,
    )
    .unwrap();
    assert!(accepts(&g, &call("pick", r#"{"v": 3}"#)));
    assert!(accepts(&g, &call("pick", r#"{"v": "3"}"#)));
    assert!(!accepts(&g, &call("pick", r#"{"v": true}"#)));
    let mut nested = "{\"any\": [1, 2]}".to_owned();
    for _ in 0..(MAX_DEPTH + 3) {
        nested = format!("{{\"x\": {nested}}}");
    }
    assert!(accepts(&g, &call("deep", &nested)));
}

#[test]
fn grammar_modes_parse_from_config_names() {
    assert_eq!("auto".parse::<GrammarMode>().unwrap(), GrammarMode::Auto);
    assert_eq!(
        "Required".parse::<GrammarMode>().unwrap(),
        GrammarMode::Required
    );
    assert_eq!("off".parse::<GrammarMode>().unwrap(), GrammarMode::Off);
    assert_eq!(
        "call-first".parse::<GrammarMode>().unwrap(),
        GrammarMode::CallFirst
    );
    assert!("maybe".parse::<GrammarMode>().is_err());
}

#[test]
fn text_only_grammar() {
    let g = text_grammar();
    assert!(accepts(&g, "It printed 0 1 1 2."));
    assert!(!accepts(&g, &call("ls", "{}")));
}
