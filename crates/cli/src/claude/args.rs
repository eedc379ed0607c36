//! The command line Claude Code's SDKs pass when they spawn their CLI
//! (`--output-format stream-json --input-format stream-json --verbose …`),
//! read by hand: the SDKs write `--flag=value` for most values and
//! `--flag value` for a few, and a flag keel does not know must be a
//! warning, never a refusal (a newer SDK adds flags). It owns parsing
//! only; what each flag does is `super`'s.

use std::ffi::OsString;

/// The flags that take a value (`--flag=value` or `--flag value`).
const VALUE_FLAGS: &[&str] = &[
    "output-format",
    "input-format",
    "model",
    "fallback-model",
    "max-turns",
    "max-budget-usd",
    "task-budget",
    "permission-mode",
    "permission-prompt-tool",
    "permission-prompts",
    "resume",
    "session-id",
    "resume-session-at",
    "resume-drops-turn",
    "allowedTools",
    "allowed-tools",
    "disallowedTools",
    "disallowed-tools",
    "tools",
    "mcp-config",
    "setting-sources",
    "settings",
    "system-prompt",
    "append-system-prompt",
    "json-schema",
    "add-dir",
    "max-thinking-tokens",
    "thinking",
    "thinking-display",
    "effort",
    "agent",
    "betas",
    "debug-file",
    "channels",
    "plugin-dir",
    "plugin-dir-no-mcp",
    "project-config-root",
    "initialize-fields",
    "managed-settings",
];

/// Flags keel accepts and that change nothing here (said once, at debug
/// level): they tune Claude Code's own machinery.
const ACCEPTED_FLAGS: &[&str] = &[
    "verbose",
    "debug",
    "debug-file",
    "await-initialize",
    "setting-sources",
    "settings",
    "strict-mcp-config",
    "include-hook-events",
    "session-mirror",
    "managed-settings-in-initialize",
    "initialize-fields",
    "project-config-root",
    "thinking-display",
    "allow-dangerously-skip-permissions",
    "dangerously-skip-permissions",
];

/// What the SDK asked for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaudeArgs {
    pub output_format: Option<String>,
    pub input_format: Option<String>,
    /// `-p`/`--print` with a prompt (no stream-json input).
    pub prompt: Option<String>,
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    pub max_budget_usd: Option<f64>,
    pub permission_mode: Option<String>,
    /// `--permission-prompt-tool=stdio`: held calls are asked of the SDK.
    pub permission_prompt_tool: Option<String>,
    pub continue_: bool,
    pub resume: Option<String>,
    pub session_id: Option<String>,
    pub fork_session: bool,
    pub resume_session_at: Option<String>,
    pub no_session_persistence: bool,
    pub allowed_tools: Vec<String>,
    pub disallowed_tools: Vec<String>,
    /// `--tools`: the built-in tools the model sees (`default`: all).
    pub tools: Option<Vec<String>>,
    pub mcp_config: Vec<String>,
    pub system_prompt: Option<String>,
    pub append_system_prompt: Option<String>,
    pub json_schema: Option<String>,
    pub add_dir: Vec<String>,
    pub include_partial_messages: bool,
    /// `--replay-user-messages`: each user message is written back, with
    /// its `uuid`, when its run starts.
    pub replay_user_messages: bool,
    pub thinking: Option<String>,
    pub max_thinking_tokens: Option<u64>,
    pub effort: Option<String>,
    /// Flags given that keel does not act on: `(flag, known)`.
    pub ignored: Vec<(String, bool)>,
}

/// Whether `argv` (program first) is a Claude Code headless invocation:
/// no keel subcommand first, and an `--output-format`, `--input-format`
/// or `-p`/`--print` flag.
pub fn invoked(argv: &[OsString], subcommands: &[&str]) -> bool {
    let args: Vec<&str> = argv.iter().skip(1).filter_map(|a| a.to_str()).collect();
    if let Some(first) = args.first()
        && subcommands.contains(first)
    {
        return false;
    }
    if args
        .iter()
        .any(|a| *a == "--mode" || a.starts_with("--mode="))
    {
        return false;
    }
    args.iter().any(|a| {
        a.starts_with("--output-format")
            || a.starts_with("--input-format")
            || *a == "-p"
            || *a == "--print"
    })
}

fn list(value: &str) -> Vec<String> {
    // Tool lists are comma- or space-separated; a rule's parentheses keep
    // their spaces (`Bash(git log:*)`).
    let mut out = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in value.chars() {
        match c {
            '(' => {
                depth += 1;
                current.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' | ' ' if depth == 0 => {
                if !current.trim().is_empty() {
                    out.push(current.trim().to_owned());
                }
                current.clear();
            }
            _ => current.push(c),
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_owned());
    }
    out
}

impl ClaudeArgs {
    /// Reads `argv` (program first). Fails only on a value that cannot be
    /// read (`--max-turns=many`).
    pub fn parse(argv: &[OsString]) -> anyhow::Result<Self> {
        let args: Vec<String> = argv
            .iter()
            .skip(1)
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let mut out = ClaudeArgs::default();
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            i += 1;
            let (name, inline) = match arg.strip_prefix("--") {
                Some(rest) => match rest.split_once('=') {
                    Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
                    None => (rest.to_owned(), None),
                },
                None => match arg.as_str() {
                    "-p" => ("print".to_owned(), None),
                    "-c" => ("continue".to_owned(), None),
                    "-r" => ("resume".to_owned(), None),
                    "-d" => ("debug".to_owned(), None),
                    _ => {
                        // A positional argument: the prompt of `-p`.
                        out.prompt = Some(arg.clone());
                        continue;
                    }
                },
            };
            let takes_value = VALUE_FLAGS.contains(&name.as_str());
            let value = match inline {
                Some(v) => Some(v),
                None if takes_value && i < args.len() => {
                    i += 1;
                    Some(args[i - 1].clone())
                }
                None => None,
            };
            out.set(&name, value)?;
        }
        Ok(out)
    }

    fn set(&mut self, name: &str, value: Option<String>) -> anyhow::Result<()> {
        let text = || value.clone().unwrap_or_default();
        match name {
            "output-format" => self.output_format = value,
            "input-format" => self.input_format = value,
            "print" => {}
            "model" => self.model = value,
            "max-turns" => self.max_turns = Some(number(name, &text())?),
            "max-budget-usd" => self.max_budget_usd = Some(number(name, &text())?),
            "permission-mode" => self.permission_mode = value,
            "permission-prompt-tool" => self.permission_prompt_tool = value,
            "continue" => self.continue_ = true,
            "resume" => self.resume = value,
            "session-id" => self.session_id = value,
            "fork-session" => self.fork_session = true,
            "resume-session-at" => self.resume_session_at = value,
            "no-session-persistence" => self.no_session_persistence = true,
            "allowedTools" | "allowed-tools" => self.allowed_tools.extend(list(&text())),
            "disallowedTools" | "disallowed-tools" => self.disallowed_tools.extend(list(&text())),
            "tools" => {
                self.tools = match value.as_deref() {
                    None | Some("default") => None,
                    Some(t) => Some(list(t)),
                }
            }
            "mcp-config" => self.mcp_config.push(text()),
            "system-prompt" => self.system_prompt = value,
            "append-system-prompt" => self.append_system_prompt = value,
            "json-schema" => self.json_schema = value,
            "add-dir" => self.add_dir.push(text()),
            "include-partial-messages" => self.include_partial_messages = true,
            "replay-user-messages" => self.replay_user_messages = true,
            "thinking" => self.thinking = value,
            "max-thinking-tokens" => self.max_thinking_tokens = Some(number(name, &text())?),
            "effort" => self.effort = value,
            other => {
                let known = ACCEPTED_FLAGS.contains(&other) || VALUE_FLAGS.contains(&other);
                self.ignored.push((other.to_owned(), known));
            }
        }
        Ok(())
    }
}

fn number<T: std::str::FromStr>(flag: &str, text: &str) -> anyhow::Result<T> {
    text.trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("--{flag}: `{text}` is not a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<OsString> {
        std::iter::once("keel")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn the_sdks_command_line_is_read() {
        let a = ClaudeArgs::parse(&argv(&[
            "--output-format",
            "stream-json",
            "--verbose",
            "--input-format",
            "stream-json",
            "--max-turns=3",
            "--model=claude-sonnet-4-5",
            "--permission-prompt-tool=stdio",
            "--allowedTools=Read,Bash(git log:*)",
            "--disallowedTools=WebFetch",
            "--mcp-config",
            "{\"mcpServers\":{}}",
            "--permission-mode=plan",
            "--include-partial-messages",
            "--resume=abc",
            "--setting-sources=",
            "--thinking=adaptive",
            "--brand-new-flag",
        ]))
        .unwrap();
        assert_eq!(a.output_format.as_deref(), Some("stream-json"));
        assert_eq!(a.input_format.as_deref(), Some("stream-json"));
        assert_eq!(a.max_turns, Some(3));
        assert_eq!(a.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(a.permission_prompt_tool.as_deref(), Some("stdio"));
        assert_eq!(a.allowed_tools, ["Read", "Bash(git log:*)"]);
        assert_eq!(a.disallowed_tools, ["WebFetch"]);
        assert_eq!(a.mcp_config, ["{\"mcpServers\":{}}"]);
        assert_eq!(a.permission_mode.as_deref(), Some("plan"));
        assert!(a.include_partial_messages);
        assert_eq!(a.resume.as_deref(), Some("abc"));
        assert_eq!(a.thinking.as_deref(), Some("adaptive"));
        assert!(a.ignored.contains(&("verbose".to_owned(), true)));
        assert!(a.ignored.contains(&("brand-new-flag".to_owned(), false)));
    }

    #[test]
    fn print_mode_takes_a_positional_prompt_and_a_bad_number_is_an_error() {
        let a = ClaudeArgs::parse(&argv(&["-p", "say hi", "--output-format=stream-json"])).unwrap();
        assert_eq!(a.prompt.as_deref(), Some("say hi"));
        let err = ClaudeArgs::parse(&argv(&["--max-turns=many"])).unwrap_err();
        assert!(err.to_string().contains("--max-turns"), "{err}");
    }

    #[test]
    fn only_a_headless_command_line_without_a_subcommand_is_claudes() {
        let subs = ["exec", "app-server"];
        assert!(invoked(&argv(&["--output-format", "stream-json"]), &subs));
        assert!(invoked(&argv(&["-p", "hi"]), &subs));
        assert!(!invoked(&argv(&["exec", "--output-format=x"]), &subs));
        assert!(!invoked(&argv(&["--mode", "rpc"]), &subs));
        assert!(!invoked(&argv(&["sessions", "list"]), &subs));
    }

    #[test]
    fn tool_lists_keep_a_rules_spaces() {
        assert_eq!(
            list("Read, Bash(git log:*) Edit"),
            ["Read", "Bash(git log:*)", "Edit"]
        );
    }
}
