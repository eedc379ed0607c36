//! Shell-command analysis for the `bash` tool.
//!
//! Owns [`analyze`]: parse a command line with tree-sitter-bash, find every
//! simple command in it (through `&&`, `||`, `;`, `|`, `!`, subshells,
//! groups, loops, conditionals, substitutions and here-documents), judge
//! each one (program and arguments, env prefixes, output redirections) and
//! take the worst class. Anything it cannot see through (substitutions,
//! `eval`, `bash -c`, wrappers, interpreters reading code inline or from
//! input, variables in the program position, parse errors, ...) is send at
//! least and marks the analysis not fully understood, so no always-allow
//! rule ever matches it. Per command it keeps the words (for prefix rules)
//! and a reason for each judgement. It must not know about rules, modes or
//! storage.
//!
//! Known gaps (each fails towards asking, except where noted):
//! - git's read-only subcommands honour repository configuration; keel's
//!   process backend turns off the settings that run programs from it
//!   (`core.fsmonitor`, `diff.external`, pagers), but textconv drivers and
//!   filters named in config still run. Writes into `.git/` (on the resolved
//!   path, see `crate::shell_places`), `~/.gitconfig`, `~/.config/git`,
//!   `cd .git`, `git config`, `git -c`, `--git-dir` and `GIT_*` variables
//!   are send and never covered by rules; a bare repository laid out
//!   elsewhere by write-class commands is not seen.
//! - This module records what each command writes ([`ShellCommand::writes`])
//!   but not where that is: the workspace check is `crate::shell_places`.
//! - `git checkout NAME` with a bare name is taken as a branch switch
//!   (send); a file of that name would lose its changes (money).
//! - Scripts (`./build.sh`, `python gen.py`) are understood as send: what
//!   they do is not analysed. A program name known only at run time is send
//!   (money when its arguments look destructive), so `money_only` runs it.
//! - Uncommon wrappers' value options may hide the wrapped program; the
//!   command is still not understood and at least send.

mod git;
mod judge;
mod launchers;
mod parse;
mod programs;
mod tables;
mod verdict;
mod words;

#[cfg(test)]
pub(crate) mod tests;

use serde::{Deserialize, Serialize};

use crate::class_kind::Class;
use judge::Judge;

pub(crate) use launchers::runs_other_commands;
pub(crate) use tables::sensitive_target as sensitive_path;

/// One word of a command as the program receives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "text", rename_all = "snake_case")]
pub enum ShellWord {
    /// Known before running: quotes and escapes removed.
    Static(String),
    /// Depends on the run (expansion, substitution, glob): the source text.
    Dynamic(String),
}

impl ShellWord {
    pub fn as_static(&self) -> Option<&str> {
        match self {
            ShellWord::Static(s) => Some(s),
            ShellWord::Dynamic(_) => None,
        }
    }

    /// The value, or the source text when dynamic.
    pub fn text(&self) -> &str {
        match self {
            ShellWord::Static(s) | ShellWord::Dynamic(s) => s,
        }
    }
}

/// One simple command and its judgement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShellCommand {
    /// `NAME=value` prefixes, then the program, then its arguments. Prefix
    /// rules match these words from the start, so a rule never matches
    /// through an env prefix it does not spell out.
    pub words: Vec<ShellWord>,
    /// Index of the program in `words` (the number of env prefixes).
    pub program_index: usize,
    /// The class of the program and its arguments.
    pub class: Class,
    /// The class its output redirections imply (read when there are none).
    pub redirect_class: Class,
    /// False when the analyser could not see what this command does.
    pub understood: bool,
    /// An interpreter running a script: understood, but never offered as a
    /// rule prefix.
    pub interpreter: bool,
    /// Inside a substitution, function body or other hidden context.
    pub nested: bool,
    /// Why, worst first.
    pub reasons: Vec<String>,
    /// Why it is not fully understood (empty when it is).
    pub unclear: Vec<String>,
    /// The files it writes (arguments and output redirections), as written:
    /// relative ones are relative to the folder the shell runs in. Whether
    /// they lie in the workspace is decided where the workspace is known
    /// ([`crate::class::classify`]).
    #[serde(default)]
    pub writes: Vec<String>,
    /// The source text (shortened).
    pub text: String,
}

impl ShellCommand {
    pub fn program(&self) -> Option<&str> {
        self.words
            .get(self.program_index)
            .and_then(ShellWord::as_static)
    }

    /// Program and arguments.
    pub fn argv(&self) -> &[ShellWord] {
        self.words.get(self.program_index..).unwrap_or(&[])
    }

    /// The env prefixes.
    pub fn env(&self) -> &[ShellWord] {
        self.words.get(..self.program_index).unwrap_or(&[])
    }

    /// Program class and redirect class together.
    pub fn total_class(&self) -> Class {
        self.class.max(self.redirect_class)
    }

    /// Whether the command's words start with `prefix`, word for word, each
    /// one known before running.
    pub fn matches_prefix(&self, prefix: &[String]) -> bool {
        !prefix.is_empty()
            && self.words.len() >= prefix.len()
            && self
                .words
                .iter()
                .zip(prefix)
                .all(|(w, p)| w.as_static() == Some(p.as_str()))
    }
}

/// The analysis of one command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShellAnalysis {
    pub source: String,
    /// The worst class of any command, redirect or construct.
    pub class: Class,
    /// False when anything in the line was not fully understood.
    pub understood: bool,
    /// Every simple command, in source order (nested ones included).
    pub commands: Vec<ShellCommand>,
    /// Constructs that make the line not fully understood.
    pub constructs: Vec<String>,
    /// The files it writes outside the workspace, resolved (what a yes to
    /// the line lets it write through the sandbox).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside: Vec<std::path::PathBuf>,
}

impl ShellAnalysis {
    /// One line saying why the line has its class.
    pub fn reason(&self) -> String {
        let mut parts = Vec::new();
        if let Some(worst) = self
            .commands
            .iter()
            .filter(|c| c.total_class() == self.class)
            .max_by_key(|c| c.class)
            && let Some(r) = worst.reasons.first()
        {
            parts.push(r.clone());
        }
        if !self.understood {
            if let Some(u) = self
                .unclear_reasons()
                .into_iter()
                .find(|r| !parts.contains(r))
            {
                parts.push(format!("not fully understood: {u}"));
            } else {
                parts.push("not fully understood".to_owned());
            }
        }
        if parts.is_empty() {
            "an empty command".to_owned()
        } else {
            parts.join("; ")
        }
    }

    /// Why the line is not fully understood: constructs first, then commands.
    pub fn unclear_reasons(&self) -> Vec<String> {
        let mut out = self.constructs.clone();
        for c in &self.commands {
            for r in &c.unclear {
                if !out.contains(r) {
                    out.push(r.clone());
                }
            }
        }
        out
    }

    /// Every reason, worst command first.
    pub(crate) fn worst_reasons(&self) -> Vec<String> {
        let mut commands: Vec<&ShellCommand> = self.commands.iter().collect();
        commands.sort_by_key(|c| std::cmp::Reverse(c.total_class()));
        let mut out: Vec<String> = commands
            .iter()
            .flat_map(|c| c.reasons.iter().cloned())
            .collect();
        out.extend(self.constructs.iter().cloned());
        out
    }
}

/// Analyses a command line as bash would run it.
pub fn analyze(command: &str) -> ShellAnalysis {
    analyze_at_depth(command, 0)
}

pub(crate) fn analyze_at_depth(src: &str, depth: usize) -> ShellAnalysis {
    let parsed = parse::parse(src);
    let judge = Judge { depth };
    let mut class = Class::Read;
    let mut understood = parsed.constructs.is_empty();
    let mut commands = Vec::with_capacity(parsed.commands.len());
    for raw in parsed.commands {
        let verdict = judge.command(&raw.env, &raw.argv);
        let mut reasons = verdict.reasons;
        if raw.redirect_class > verdict.class {
            let mut first = raw.redirect_reasons;
            first.append(&mut reasons);
            reasons = first;
        } else {
            reasons.extend(raw.redirect_reasons);
        }
        let cmd_understood = verdict.understood && raw.redirect_unclear.is_empty();
        let mut unclear = verdict.unclear;
        unclear.extend(raw.redirect_unclear);
        understood &= cmd_understood;
        let mut writes = verdict.writes;
        writes.extend(raw.redirect_writes);
        let mut words: Vec<ShellWord> = raw.env.into_iter().map(|(_, w)| w).collect();
        let program_index = words.len();
        words.extend(raw.argv);
        let cmd = ShellCommand {
            words,
            program_index,
            class: verdict.class,
            redirect_class: raw.redirect_class,
            understood: cmd_understood,
            interpreter: verdict.interpreter,
            nested: raw.nested,
            reasons,
            unclear,
            writes,
            text: raw.text,
        };
        class = class.max(cmd.total_class());
        commands.push(cmd);
    }
    let constructs: Vec<String> = parsed.constructs.into_iter().map(|c| c.reason).collect();
    if !understood {
        class = class.max(Class::Send);
    }
    ShellAnalysis {
        source: src.to_owned(),
        class,
        understood,
        commands,
        constructs,
        outside: Vec::new(),
    }
}
