//! Walking a tree-sitter-bash parse into simple commands.
//!
//! Owns the traversal: every simple command anywhere in the tree (lists,
//! pipelines, `!`, subshells, groups, loops, conditionals, function bodies,
//! substitutions, here-document bodies) becomes one [`RawCommand`] with its
//! env prefixes, words and the output redirections that apply to it; every
//! construct that hides what will run (substitutions, function definitions,
//! arithmetic on variables, assignments to `PATH`-like variables, parse
//! errors, dynamic redirect targets) becomes a [`Construct`]. It must not
//! judge programs; `judge` does that.

use tree_sitter::{Node, Parser};

use super::ShellWord;
use super::tables::{SENSITIVE_UNCLEAR, WriteTarget, dangerous_var, write_target};
use super::words::{text, word_value};
use crate::class_kind::Class;

/// One simple command as written.
#[derive(Debug, Clone)]
pub(crate) struct RawCommand {
    /// `NAME=value` prefixes: the variable name and the whole assignment word.
    pub env: Vec<(String, ShellWord)>,
    /// Program then arguments.
    pub argv: Vec<ShellWord>,
    /// The class the output redirections applying to it imply (read or write,
    /// send for git internals).
    pub redirect_class: Class,
    pub redirect_reasons: Vec<String>,
    /// Why its redirects are not fully understood (dynamic target, git internals).
    pub redirect_unclear: Vec<String>,
    /// The files its output redirections write (as written).
    pub redirect_writes: Vec<String>,
    /// Inside a command/process substitution (or other hidden context).
    pub nested: bool,
    pub text: String,
}

/// A construct that makes the whole command not fully understood.
#[derive(Debug, Clone)]
pub(crate) struct Construct {
    pub reason: String,
}

#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub commands: Vec<RawCommand>,
    pub constructs: Vec<Construct>,
}

#[derive(Debug, Clone, Default)]
struct Redirects {
    class: Class,
    reasons: Vec<String>,
    unclear: Vec<String>,
    writes: Vec<String>,
}

impl Redirects {
    fn none() -> Self {
        Self {
            class: Class::Read,
            reasons: Vec::new(),
            unclear: Vec::new(),
            writes: Vec::new(),
        }
    }
    fn merge(&self, other: &Redirects) -> Redirects {
        let mut reasons = self.reasons.clone();
        reasons.extend(other.reasons.iter().cloned());
        let mut unclear = self.unclear.clone();
        unclear.extend(other.unclear.iter().cloned());
        let mut writes = self.writes.clone();
        writes.extend(other.writes.iter().cloned());
        Redirects {
            class: self.class.max(other.class),
            reasons,
            unclear,
            writes,
        }
    }
}

/// Parses `src` and collects its commands and constructs.
pub(crate) fn parse(src: &str) -> Parsed {
    let mut out = Parsed::default();
    let mut parser = Parser::new();
    if parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .is_err()
    {
        out.constructs.push(Construct {
            reason: "the shell parser could not be loaded".to_owned(),
        });
        return out;
    }
    let Some(tree) = parser.parse(src, None) else {
        out.constructs.push(Construct {
            reason: "the command could not be parsed".to_owned(),
        });
        return out;
    };
    let mut walker = Walker { src, out };
    walker.walk(tree.root_node(), &Redirects::none(), false);
    walker.out
}

struct Walker<'s> {
    src: &'s str,
    out: Parsed,
}

impl Walker<'_> {
    fn construct(&mut self, reason: String) {
        self.out.constructs.push(Construct { reason });
    }

    fn snippet(&self, node: Node<'_>) -> String {
        let t = text(node, self.src);
        let one_line: String = t.split_whitespace().collect::<Vec<_>>().join(" ");
        if one_line.chars().count() > 60 {
            let cut: String = one_line.chars().take(57).collect();
            format!("{cut}...")
        } else {
            one_line
        }
    }

    fn walk_children(&mut self, node: Node<'_>, redirects: &Redirects, nested: bool) {
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
        for child in children {
            self.walk(child, redirects, nested);
        }
    }

    fn walk(&mut self, node: Node<'_>, redirects: &Redirects, nested: bool) {
        if node.is_error() || node.is_missing() {
            self.construct(format!(
                "part of the command could not be parsed (near `{}`)",
                self.snippet(node)
            ));
            self.walk_children(node, redirects, nested);
            return;
        }
        match node.kind() {
            "comment" => {}
            "command" => self.command(node, redirects, nested),
            "redirected_statement" => {
                let mut own = Redirects::none();
                let mut cursor = node.walk();
                let redirect_nodes: Vec<Node<'_>> = node
                    .children_by_field_name("redirect", &mut cursor)
                    .collect();
                for r in &redirect_nodes {
                    own = own.merge(&self.redirect(*r));
                }
                let inner = redirects.merge(&own);
                if let Some(body) = node.child_by_field_name("body") {
                    if !self.contains_command(body) && own.class > Class::Read {
                        // `> file` alone, or `export X=1 > file`: still a write.
                        self.pseudo_command(body, &inner, nested);
                    }
                    self.walk(body, &inner, nested);
                } else if own.class > Class::Read {
                    self.pseudo_command(node, &inner, nested);
                }
                for r in redirect_nodes {
                    self.walk_children(r, redirects, nested);
                }
            }
            "command_substitution" => {
                self.construct(format!("command substitution `{}`", self.snippet(node)));
                self.walk_children(node, &Redirects::none(), true);
            }
            "process_substitution" => {
                self.construct(format!("process substitution `{}`", self.snippet(node)));
                self.walk_children(node, &Redirects::none(), true);
            }
            "function_definition" => {
                self.construct(format!(
                    "defines a shell function (`{}`), which can change what later names run",
                    self.snippet(node)
                ));
                self.walk_children(node, redirects, true);
            }
            "arithmetic_expansion" | "c_style_for_statement" | "subscript" => {
                if self.has_var_ref(node) {
                    self.construct(format!(
                        "arithmetic on variables (`{}`) can run hidden commands",
                        self.snippet(node)
                    ));
                }
                self.walk_children(node, redirects, nested);
            }
            "compound_statement" if self.first_token(node) == Some("((") => {
                if self.has_var_ref(node) {
                    self.construct(format!(
                        "arithmetic on variables (`{}`) can run hidden commands",
                        self.snippet(node)
                    ));
                }
                self.walk_children(node, redirects, nested);
            }
            "test_command" => {
                if self.has_arith_test(node) && self.has_var_ref(node) {
                    self.construct(format!(
                        "arithmetic comparison of variables (`{}`) can run hidden commands",
                        self.snippet(node)
                    ));
                }
                self.keyword_command(node, "[[", redirects, nested);
                self.walk_children(node, redirects, nested);
            }
            "declaration_command" | "unset_command" => {
                let keyword = self.first_token(node).unwrap_or("declare").to_owned();
                self.keyword_command(node, &keyword, redirects, nested);
                self.walk_children(node, redirects, nested);
            }
            "variable_assignment" => {
                self.assignment(node);
                self.walk_children(node, redirects, nested);
            }
            _ => self.walk_children(node, redirects, nested),
        }
    }

    fn command(&mut self, node: Node<'_>, redirects: &Redirects, nested: bool) {
        let mut own = Redirects::none();
        let mut env = Vec::new();
        let mut argv = Vec::new();
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
        for (i, child) in children.iter().enumerate() {
            let field = node.field_name_for_child(i as u32);
            match (field, child.kind()) {
                (Some("name"), _) => argv.insert(0, word_value(*child, self.src)),
                (Some("argument"), _) => argv.push(word_value(*child, self.src)),
                (Some("redirect"), _) => own = own.merge(&self.redirect(*child)),
                (_, "variable_assignment") => {
                    let name = child
                        .child_by_field_name("name")
                        .map(|n| text(n, self.src).to_owned())
                        .unwrap_or_default();
                    env.push((name, word_value(*child, self.src)));
                }
                (_, k) if k.ends_with("redirect") => own = own.merge(&self.redirect(*child)),
                _ => {}
            }
        }
        if argv.is_empty() {
            // Assignments only (`FOO=1` parsed as a command without a name).
            for child in &children {
                if child.kind() == "variable_assignment" {
                    self.assignment(*child);
                }
            }
        } else {
            let all = redirects.merge(&own);
            self.out.commands.push(RawCommand {
                env,
                argv,
                redirect_class: all.class,
                redirect_reasons: all.reasons,
                redirect_unclear: all.unclear,
                redirect_writes: all.writes,
                nested,
                text: self.snippet(node),
            });
        }
        // Nested commands inside words, assignments and redirect targets.
        for child in children {
            if child.kind() == "variable_assignment" {
                // Values of env prefixes may hold substitutions too; the
                // names are judged with the command.
                self.walk_children(child, &Redirects::none(), nested);
            } else {
                self.walk(child, &Redirects::none(), nested);
            }
        }
    }

    /// Builtins that tree-sitter parses as their own node kinds (`export`,
    /// `declare`, `unset`, `[[ ]]`) still count as commands, so redirects
    /// attach to them and rules see them.
    fn keyword_command(
        &mut self,
        node: Node<'_>,
        keyword: &str,
        redirects: &Redirects,
        nested: bool,
    ) {
        let mut argv = vec![ShellWord::Static(keyword.to_owned())];
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            argv.push(word_value(child, self.src));
        }
        self.out.commands.push(RawCommand {
            env: Vec::new(),
            argv,
            redirect_class: redirects.class,
            redirect_reasons: redirects.reasons.clone(),
            redirect_unclear: redirects.unclear.clone(),
            redirect_writes: redirects.writes.clone(),
            nested,
            text: self.snippet(node),
        });
    }

    fn pseudo_command(&mut self, node: Node<'_>, redirects: &Redirects, nested: bool) {
        self.out.commands.push(RawCommand {
            env: Vec::new(),
            argv: vec![ShellWord::Static(":".to_owned())],
            redirect_class: redirects.class,
            redirect_reasons: redirects.reasons.clone(),
            redirect_unclear: redirects.unclear.clone(),
            redirect_writes: redirects.writes.clone(),
            nested,
            text: self.snippet(node),
        });
    }

    fn assignment(&mut self, node: Node<'_>) {
        let name = node
            .child_by_field_name("name")
            .map(|n| text(n, self.src).to_owned())
            .unwrap_or_default();
        if dangerous_var(&name) {
            self.construct(format!(
                "sets `{name}`, which changes which programs or code later commands run"
            ));
        }
    }

    /// What one redirect implies.
    fn redirect(&mut self, node: Node<'_>) -> Redirects {
        let mut r = Redirects::none();
        if node.kind() != "file_redirect" {
            // Here-documents and here-strings feed standard input.
            return r;
        }
        let mut op = String::new();
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            if !child.is_named() {
                op.push_str(child.kind());
            }
        }
        let Some(dest) = node.child_by_field_name("destination") else {
            return r; // `>&-`: close.
        };
        let is_output = op.contains('>');
        let dup = op.contains('&') && !op.starts_with('&');
        let value = word_value(dest, self.src);
        if !is_output {
            if let Some(path) = value.as_static()
                && (path.starts_with("/dev/tcp/") || path.starts_with("/dev/udp/"))
            {
                r.class = Class::Send;
                r.unclear.push(SENSITIVE_UNCLEAR.to_owned());
                r.reasons
                    .push(format!("reads from the network through `{path}`"));
            }
            return r;
        }
        if dup && (dest.kind() == "number" || value.as_static() == Some("-")) {
            return r; // `>&2`, `2>&1`
        }
        if let Some(path) = value.as_static() {
            r.writes.push(path.to_owned());
        }
        match value.as_static() {
            Some(path) => match write_target(path) {
                WriteTarget::Sink => {}
                WriteTarget::File => {
                    r.class = Class::Write;
                    r.reasons
                        .push(format!("writes output to the file `{path}`"));
                }
                WriteTarget::Special {
                    class,
                    why,
                    unclear,
                } => {
                    r.class = class;
                    if unclear {
                        r.unclear.push(SENSITIVE_UNCLEAR.to_owned());
                    }
                    r.reasons
                        .push(format!("redirects output into `{path}`: {why}"));
                }
            },
            None => {
                r.class = Class::Write;
                r.unclear.push(format!(
                    "the redirect target `{}` is only known at run time",
                    text(dest, self.src)
                ));
                r.reasons.push(format!(
                    "writes output to a file named at run time (`{}`)",
                    text(dest, self.src)
                ));
                self.construct(format!(
                    "the redirect target `{}` is only known at run time",
                    text(dest, self.src)
                ));
            }
        }
        r
    }

    fn first_token<'t>(&self, node: Node<'t>) -> Option<&'t str> {
        node.child(0).map(|c| c.kind())
    }

    fn contains_command(&self, node: Node<'_>) -> bool {
        if matches!(
            node.kind(),
            "command" | "declaration_command" | "unset_command" | "test_command"
        ) {
            return true;
        }
        let mut cursor = node.walk();
        node.children(&mut cursor).any(|c| self.contains_command(c))
    }

    fn has_var_ref(&self, node: Node<'_>) -> bool {
        if matches!(
            node.kind(),
            "variable_name" | "simple_expansion" | "expansion" | "command_substitution"
        ) {
            return true;
        }
        let mut cursor = node.walk();
        node.children(&mut cursor).any(|c| self.has_var_ref(c))
    }

    fn has_arith_test(&self, node: Node<'_>) -> bool {
        if node.kind() == "test_operator"
            && matches!(
                text(node, self.src),
                "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge"
            )
        {
            return true;
        }
        let mut cursor = node.walk();
        node.children(&mut cursor).any(|c| self.has_arith_test(c))
    }
}
