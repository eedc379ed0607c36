//! Always-allow rules: what they are, which are allowed, what they cover,
//! and which one a request may offer.
//!
//! Owns [`Rule`] and [`RuleScope`] (a command prefix parsed from the shell
//! AST, a host, a path glob inside the workspace, or the whole tool),
//! validation of a new rule (never for money, never a prefix that is an
//! interpreter, wrapper or anything else not fully understood), coverage of a
//! classified call by a workspace's rules (for a shell line: every command
//! must be read or matched by a rule; money and not-understood calls are never
//! covered), and the suggestion a prompt offers. Storage is the store's
//! business; it must not know about modes' effect on the decision, the
//! agent loop or the wire.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use globset::GlobBuilder;
use serde::{Deserialize, Serialize};

use crate::class::{Class, Classification, Target};
use crate::error::{Error, Result};
use crate::shell::{self, ShellWord};

/// What one rule covers within its tool (and operation).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RuleScope {
    /// `bash` only: commands whose words start with `prefix` (env prefixes,
    /// program, subcommand, fixed flags), each word known before running.
    Command { prefix: Vec<String> },
    /// Calls whose URL argument has this host.
    Host { host: String },
    /// Calls whose path argument, relative to the workspace root, matches
    /// this glob (`*` stays within one folder, `**` crosses folders).
    PathGlob { glob: String },
    /// Every call of the tool (for `bash`: every fully understood command).
    Tool,
}

impl RuleScope {
    pub fn kind(&self) -> &'static str {
        match self {
            RuleScope::Command { .. } => "command",
            RuleScope::Host { .. } => "host",
            RuleScope::PathGlob { .. } => "path_glob",
            RuleScope::Tool => "tool",
        }
    }

    /// The scope's value as stored (a JSON array for a command prefix).
    pub fn value(&self) -> String {
        match self {
            RuleScope::Command { prefix } => {
                serde_json::to_string(prefix).unwrap_or_else(|_| "[]".to_owned())
            }
            RuleScope::Host { host } => host.clone(),
            RuleScope::PathGlob { glob } => glob.clone(),
            RuleScope::Tool => String::new(),
        }
    }

    /// The inverse of [`kind`](Self::kind) + [`value`](Self::value).
    pub fn from_parts(kind: &str, value: &str) -> Result<Self> {
        Ok(match kind {
            "command" => RuleScope::Command {
                prefix: serde_json::from_str(value)?,
            },
            "host" => RuleScope::Host {
                host: value.to_owned(),
            },
            "path_glob" => RuleScope::PathGlob {
                glob: value.to_owned(),
            },
            "tool" => RuleScope::Tool,
            _ => {
                return Err(Error::Invalid {
                    what: "rule scope kind",
                    value: kind.to_owned(),
                });
            }
        })
    }

    /// A short description for lists and labels.
    pub fn describe(&self) -> String {
        match self {
            RuleScope::Command { prefix } => format!("`{} …`", prefix.join(" ")),
            RuleScope::Host { host } => format!("on {host}"),
            RuleScope::PathGlob { glob } => format!("on files matching `{glob}`"),
            RuleScope::Tool => "every call".to_owned(),
        }
    }
}

/// How long a rule lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Lifetime {
    #[default]
    Permanent,
    /// Only calls from this session.
    Session { session_id: String },
}

/// A rule to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewRule {
    pub workspace: String,
    pub tool: String,
    /// Restricts the rule to one operation of a host tool; `None` = any.
    pub operation: Option<String>,
    pub scope: RuleScope,
    #[serde(default)]
    pub lifetime: Lifetime,
    /// Shown in lists; a default is derived from the scope when `None`.
    pub label: Option<String>,
    /// The approval request it was created from, if any.
    pub created_from: Option<String>,
}

/// A stored rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub id: String,
    pub workspace: String,
    pub tool: String,
    pub operation: Option<String>,
    pub scope: RuleScope,
    pub lifetime: Lifetime,
    pub label: String,
    pub created_at: i64,
    pub created_from: Option<String>,
    pub last_matched_at: Option<i64>,
    pub match_count: i64,
}

/// The always-allow a prompt may offer for a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlwaysOffer {
    pub label: String,
    pub tool: String,
    pub operation: Option<String>,
    pub scope: RuleScope,
}

/// The label a rule gets when none is given.
pub fn default_label(tool: &str, operation: Option<&str>, scope: &RuleScope) -> String {
    let tool_part = match operation {
        Some(op) => format!("{tool}: {op}"),
        None => tool.to_owned(),
    };
    match scope {
        RuleScope::Command { prefix } => format!("Always allow `{} …`", prefix.join(" ")),
        RuleScope::Host { host } => format!("Always allow {tool_part} on {host}"),
        RuleScope::PathGlob { glob } => format!("Always allow {tool_part} on `{glob}`"),
        RuleScope::Tool => format!("Always allow {tool_part}"),
    }
}

/// Checks a rule before it is stored. `class` is the class of the request
/// it comes from, when it comes from one.
pub fn validate(rule: &NewRule, class: Option<Class>) -> Result<()> {
    let refuse = |why: String| Err(Error::RuleRefused(why));
    if rule.workspace.trim().is_empty() || rule.tool.trim().is_empty() {
        return refuse("a rule needs a workspace and a tool".to_owned());
    }
    if class == Some(Class::Money) {
        return refuse("money and deletes always ask; no rule is made for them".to_owned());
    }
    match &rule.scope {
        RuleScope::Command { prefix } => {
            if rule.tool != "bash" {
                return refuse("a command prefix only scopes the `bash` tool".to_owned());
            }
            if prefix.is_empty() || prefix.iter().any(|w| w.is_empty()) {
                return refuse("a command prefix needs at least one non-empty word".to_owned());
            }
            let line = prefix
                .iter()
                .map(|w| quote(w))
                .collect::<Vec<_>>()
                .join(" ");
            let analysis = shell::analyze(&line);
            if analysis.commands.len() != 1 {
                return refuse(format!("`{line}` is not a single command"));
            }
            let cmd = &analysis.commands[0];
            if analysis.class == Class::Money {
                return refuse(format!(
                    "`{line}` deletes or destroys ({}); money and deletes always ask",
                    analysis.reason()
                ));
            }
            if !analysis.understood {
                return refuse(format!(
                    "`{line}` is not fully understood ({}), so a rule could allow anything",
                    analysis.reason()
                ));
            }
            let program_plain = cmd.program().is_some_and(|p| {
                p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./+:@%-".contains(c))
            });
            if !program_plain {
                return refuse(format!("`{line}` does not name a program plainly"));
            }
            if cmd
                .program()
                .is_some_and(|p| shell::runs_other_commands(p.rsplit('/').next().unwrap_or(p)))
            {
                return refuse(format!(
                    "`{line}` runs other commands; rules never cover wrappers"
                ));
            }
            if cmd.interpreter && prefix.len() <= cmd.program_index + 1 {
                return refuse(format!(
                    "`{line}` alone would allow any script; name the script too"
                ));
            }
        }
        RuleScope::Host { host } => {
            if rule.tool == "bash" {
                return refuse("a host scope does not apply to `bash`".to_owned());
            }
            let ok = !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
                && host == &host.to_ascii_lowercase();
            if !ok {
                return refuse(format!("{host:?} is not a lower-case host name"));
            }
        }
        RuleScope::PathGlob { glob } => {
            if rule.tool == "bash" {
                return refuse("a path glob does not apply to `bash`".to_owned());
            }
            if glob.is_empty()
                || glob.starts_with('/')
                || glob.starts_with('~')
                || glob.split('/').any(|c| c == "..")
            {
                return refuse(format!("{glob:?} must be a glob relative to the workspace"));
            }
            compile_glob(glob)?;
        }
        RuleScope::Tool => {}
    }
    Ok(())
}

fn compile_glob(glob: &str) -> Result<globset::GlobMatcher> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| Error::RuleRefused(format!("bad glob {glob:?}: {e}")))
}

/// Whether `path` matches `glob` (a bad glob matches nothing). Compiled
/// globs are kept: compiling one costs far more than matching, and a
/// workspace's rules are checked on every write.
fn glob_matches(glob: &str, path: &str) -> bool {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<globset::GlobMatcher>>>> = OnceLock::new();
    /// Enough for any workspace's rules; past it the cache starts over.
    const KEEP: usize = 256;
    let cache = CACHE.get_or_init(Mutex::default);
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    if !cache.contains_key(glob) {
        if cache.len() >= KEEP {
            cache.clear();
        }
        cache.insert(glob.to_owned(), compile_glob(glob).ok());
    }
    cache
        .get(glob)
        .and_then(Option::as_ref)
        .is_some_and(|m| m.is_match(path))
}

/// Quotes a word for the shell unless it is plain.
fn quote(w: &str) -> String {
    let plain = w
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_./=:@%+,-".contains(c));
    if plain && !w.starts_with('=') {
        w.to_owned()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// Rules that made a call run, and the class left after them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage {
    pub rule_ids: Vec<String>,
    /// For a shell line: the worst class among parts no rule covers
    /// (redirections to files stay write). Read otherwise.
    pub residual: Class,
}

/// Whether `rule` applies to calls of this tool/operation from this session.
fn applies(rule: &Rule, call: &Classification, session_id: &str) -> bool {
    rule.tool == call.tool
        && rule
            .operation
            .as_ref()
            .is_none_or(|op| Some(op) == call.operation.as_ref())
        && match &rule.lifetime {
            Lifetime::Permanent => true,
            Lifetime::Session { session_id: s } => s == session_id,
        }
}

/// Which of `rules` (already filtered to the call's workspace) cover `call`.
/// `None` when no rule applies. Money and not-understood calls are never
/// covered.
pub fn coverage(rules: &[Rule], call: &Classification, session_id: &str) -> Option<Coverage> {
    if call.class == Class::Money || !call.understood || call.class == Class::Read {
        return None;
    }
    let applicable: Vec<&Rule> = rules
        .iter()
        .filter(|r| applies(r, call, session_id))
        .collect();
    if applicable.is_empty() {
        return None;
    }
    match &call.target {
        Target::Shell { analysis } => {
            if !analysis.understood || analysis.class == Class::Money {
                return None;
            }
            let mut ids: Vec<String> = Vec::new();
            let mut residual = Class::Read;
            for cmd in &analysis.commands {
                if !cmd.understood || cmd.class == Class::Money {
                    return None;
                }
                if cmd.class == Class::Read {
                    residual = residual.max(cmd.redirect_class);
                    continue;
                }
                let hit = applicable.iter().find(|r| match &r.scope {
                    RuleScope::Command { prefix } => cmd.matches_prefix(prefix),
                    RuleScope::Tool => true,
                    _ => false,
                });
                match hit {
                    Some(r) => {
                        if !ids.contains(&r.id) {
                            ids.push(r.id.clone());
                        }
                        residual = residual.max(cmd.redirect_class);
                    }
                    None => residual = residual.max(cmd.total_class()),
                }
            }
            (!ids.is_empty()).then_some(Coverage {
                rule_ids: ids,
                residual,
            })
        }
        target => {
            let hit = applicable.iter().find(|r| match (&r.scope, target) {
                (RuleScope::Tool, _) => true,
                (RuleScope::Host { host }, Target::Host { host: h, .. }) => host == h,
                (
                    RuleScope::PathGlob { glob },
                    Target::Path {
                        relative: Some(rel),
                        ..
                    },
                ) => glob_matches(glob, rel),
                _ => false,
            })?;
            Some(Coverage {
                rule_ids: vec![hit.id.clone()],
                residual: Class::Read,
            })
        }
    }
}

/// Programs whose first argument is a subcommand worth keeping in a prefix.
const SUBCOMMAND_PROGRAMS: &[&str] = &[
    "apt",
    "apt-get",
    "brew",
    "bun",
    "bundle",
    "cargo",
    "cmake",
    "composer",
    "deno",
    "docker",
    "dotnet",
    "gh",
    "git",
    "go",
    "gradle",
    "./gradlew",
    "helm",
    "just",
    "kubectl",
    "make",
    "mix",
    "mvn",
    "npm",
    "nx",
    "pip",
    "pip3",
    "pnpm",
    "podman",
    "poetry",
    "rake",
    "rustup",
    "swift",
    "terraform",
    "turbo",
    "uv",
    "yarn",
    "zig",
];

/// How many plain words after an unknown program a rule names.
const MAX_SUBCOMMAND_WORDS: usize = 3;

/// The prefix a prompt offers for one command: env prefixes, program and
/// (for known CLIs) the subcommand, plus the script name for `npm run X`.
fn suggested_prefix(words: &[ShellWord], program_index: usize) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for w in words.get(..=program_index)? {
        out.push(w.as_static()?.to_owned());
    }
    let program = out.last()?.clone();
    let plain = |w: &ShellWord| {
        w.as_static()
            .filter(|s| {
                !s.is_empty()
                    && !s.starts_with('-')
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '.' | '-'))
            })
            .map(str::to_owned)
    };
    if SUBCOMMAND_PROGRAMS.contains(&program.as_str())
        && let Some(sub) = words.get(program_index + 1).and_then(plain)
    {
        let runs_script = matches!(program.as_str(), "npm" | "pnpm" | "yarn" | "bun")
            && matches!(sub.as_str(), "run" | "run-script" | "exec");
        out.push(sub);
        if runs_script && let Some(script) = words.get(program_index + 2).and_then(plain) {
            out.push(script);
        }
    } else {
        // Any other program: its leading plain words are what a person read
        // as the subcommand on the card (`acme test` never widens to
        // `acme`), up to the first option.
        out.extend(
            words
                .iter()
                .skip(program_index + 1)
                .map_while(plain)
                .take(MAX_SUBCOMMAND_WORDS),
        );
    }
    Some(out)
}

/// The always-allow a prompt for `call` may offer: `None` for read, money,
/// anything not fully understood, or when one rule cannot name everything it
/// would allow.
pub fn suggest(call: &Classification) -> Option<AlwaysOffer> {
    if call.class == Class::Money || call.class == Class::Read || !call.understood {
        return None;
    }
    let offer = |scope: RuleScope| {
        Some(AlwaysOffer {
            label: default_label(&call.tool, call.operation.as_deref(), &scope),
            tool: call.tool.clone(),
            operation: call.operation.clone(),
            scope,
        })
    };
    match &call.target {
        Target::Shell { analysis } => {
            let mut prefix: Option<Vec<String>> = None;
            for cmd in analysis.commands.iter().filter(|c| c.class > Class::Read) {
                if cmd.interpreter || !cmd.understood || cmd.nested {
                    return None;
                }
                let p = suggested_prefix(&cmd.words, cmd.program_index)?;
                match &prefix {
                    None => prefix = Some(p),
                    Some(existing) if *existing == p => {}
                    Some(_) => return None,
                }
            }
            let prefix = prefix?;
            let scope = RuleScope::Command { prefix };
            let candidate = NewRule {
                workspace: "-".to_owned(),
                tool: call.tool.clone(),
                operation: None,
                scope: scope.clone(),
                lifetime: Lifetime::Permanent,
                label: None,
                created_from: None,
            };
            validate(&candidate, Some(call.class)).ok()?;
            offer(scope)
        }
        Target::Path {
            relative: Some(rel),
            ..
        } => {
            let glob = match rel.rsplit_once('/') {
                Some((dir, _)) => format!("{dir}/**"),
                None => rel.clone(),
            };
            offer(RuleScope::PathGlob { glob })
        }
        Target::Path { relative: None, .. } => None,
        Target::Host { host, .. } => offer(RuleScope::Host { host: host.clone() }),
        Target::None => offer(RuleScope::Tool),
    }
}

#[cfg(test)]
mod tests;
