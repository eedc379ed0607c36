//! The system prompt: who the agent is, the workspace, the date, the tools.
//!
//! The date and the workspace come last, starting with
//! `keel_llm::local::template::RUN_FACTS`: the local dialect moves them
//! after the tools so that what comes before is the same in every run.

use std::path::Path;

use keel_protocol::ToolSpec;

/// Builds the default system prompt.
pub fn system_prompt(
    cwd: &Path,
    today: &str,
    tools: &[ToolSpec],
    project_context: Option<&str>,
) -> String {
    let mut out = String::with_capacity(2048);
    out.push_str(
        "You are keel, an expert coding agent working in a software project on the user's \
         machine. You help by reading files, running commands, editing code and writing new \
         files, using the tools below.\n\n",
    );
    out.push_str("Available tools:\n");
    for tool in tools {
        let first_line = tool.description.lines().next().unwrap_or_default();
        out.push_str(&format!("- {}: {}\n", tool.name, first_line));
    }
    out.push_str(
        "\nGuidelines:\n\
         - Read a file before you edit it; use `edit` for precise changes. A new file needs no \
           reading: create it with `write`, which also serves for complete rewrites.\n\
         - Do not read a file again after you wrote it or ran it; the tool results already \
           tell you what happened.\n\
         - Prefer `grep`, `find` and `ls` to explore; use `bash` for builds, tests and git.\n\
         - Keep changes focused on the request; say plainly what you did and what is left.\n\
         - Show file paths clearly when you talk about files.\n",
    );
    if let Some(ctx) = project_context.filter(|c| !c.trim().is_empty()) {
        out.push_str("\n# Project instructions\n\n");
        out.push_str(ctx.trim());
        out.push('\n');
    }
    out.push_str(&format!(
        "\nCurrent date: {today}\nCurrent working directory: {}\n",
        cwd.display()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_workspace_date_and_tools() {
        let tools = vec![ToolSpec {
            name: "read".into(),
            description: "Read a file.\nMore.".into(),
            parameters: json!({}),
        }];
        let p = system_prompt(
            Path::new("/ws/proj"),
            "2026-11-30",
            &tools,
            Some("Use tabs."),
        );
        assert!(p.contains("- read: Read a file.\n"));
        assert!(p.contains("Current date: 2026-11-30"));
        assert!(p.contains("Current working directory: /ws/proj"));
        assert!(p.contains("# Project instructions\n\nUse tabs."));
        // The local dialect finds this run's facts (date, workspace) by
        // their start and keeps everything before them on disk.
        let (stable, facts) = keel_llm::local::template::split_run_facts(&p);
        assert!(!stable.contains("2026-11-30") && !stable.contains("/ws/proj"));
        assert_eq!(
            facts,
            Some("Current date: 2026-11-30\nCurrent working directory: /ws/proj\n")
        );
    }
}
