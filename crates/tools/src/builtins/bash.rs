//! The `bash` tool.
//!
//! Owns running one shell command for the model through the context's
//! [`ProcessRunner`](crate::ProcessRunner): streaming the output so far as
//! partial results, keeping head and tail of long output (the full output is
//! saved to the scratch directory), and reporting exit codes, timeouts and
//! cancellation. It must not know how processes are spawned or killed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keel_protocol::{ContentBlock, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{opt_f64, parse_args};
use crate::backend::ProcessRequest;
use crate::error::{Error, Result};
use crate::truncate::{DEFAULT_MAX_BYTES, Limits, tail_bytes, truncate_head_tail};
use crate::{Tool, ToolContext, ToolOutput};

/// Timeout when none is given, in seconds.
const DEFAULT_TIMEOUT_SECS: f64 = 120.0;
/// Largest accepted timeout, in seconds.
const MAX_TIMEOUT_SECS: f64 = 3600.0;
/// Partial updates carry at most this much of the output's tail.
const UPDATE_TAIL_BYTES: usize = DEFAULT_MAX_BYTES;
/// Output kept in memory; beyond this the middle is dropped.
const MAX_CAPTURE_BYTES: usize = 32 * 1024 * 1024;

static OUTPUT_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Runs a shell command.
#[derive(Debug, Clone, Copy, Default)]
pub struct BashTool;

#[derive(Debug, Deserialize)]
struct Args {
    command: String,
    #[serde(default, deserialize_with = "opt_f64")]
    timeout: Option<f64>,
}

#[async_trait::async_trait]
impl Tool for BashTool {
    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        "Execute a bash command in the working directory and return its combined stdout and \
         stderr. Stdin is closed, so interactive programs will not work; pass flags that avoid \
         prompts and pagers. Long output keeps its first and last lines (up to 2000 lines or \
         50KB in total) and the full output is saved to a file whose path is given, which you \
         can read with the read tool. A non-zero exit code is reported as an error. The \
         command is killed, with all of its child processes, after `timeout` seconds (default \
         120, at most 3600)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "description": "Bash command to execute"
                },
                "timeout": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": MAX_TIMEOUT_SECS,
                    "description": "Timeout in seconds (default 120)"
                }
            },
            "required": ["command"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput> {
        let args: Args = parse_args("bash", args)?;
        if args.command.trim().is_empty() {
            return Err(Error::InvalidArguments(
                "bash: field `command`: must not be empty".to_owned(),
            ));
        }
        let timeout_secs = match args.timeout {
            None => DEFAULT_TIMEOUT_SECS,
            Some(t) if t.is_finite() && t > 0.0 => t.min(MAX_TIMEOUT_SECS),
            Some(t) => {
                return Err(Error::InvalidArguments(format!(
                    "bash: field `timeout`: must be a positive number of seconds, got {t}"
                )));
            }
        };
        let request = ProcessRequest {
            command: args.command,
            cwd: ctx.cwd.clone(),
            env: Vec::new(),
            timeout: Some(Duration::from_secs_f64(timeout_secs)),
            sandbox: ctx.sandbox.clone(),
        };

        let mut capture = Capture::default();
        let updates = ctx.updates.clone();
        let mut on_output = |chunk: &[u8]| {
            capture.push(chunk);
            updates(ToolResult::text(capture.tail_text(UPDATE_TAIL_BYTES)));
        };
        let exit = ctx
            .process
            .run(request, ctx.cancel.clone(), &mut on_output)
            .await?;
        if exit.cancelled || ctx.cancel.is_cancelled() {
            return Err(Error::Aborted);
        }

        let full = capture.full_text();
        let shown = truncate_head_tail(&full, Limits::default());
        let mut text = if full.is_empty() {
            "(no output)".to_owned()
        } else {
            shown.content.clone()
        };
        let mut details = json!({
            "exitCode": exit.exit_code,
            "timedOut": exit.timed_out,
            "truncated": shown.truncated,
        });
        if shown.truncated || shown.long_lines_cut > 0 || capture.dropped > 0 {
            let file = ctx.scratch_dir.join(output_file_name());
            let saved = match ctx.fs.write(&file, full.as_bytes()).await {
                Ok(()) => {
                    details["fullOutputPath"] = json!(file);
                    format!("Full output: {}", file.display())
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not save full bash output");
                    format!("The full output could not be saved: {e}")
                }
            };
            if shown.truncated {
                text.push_str(&format!(
                    "\n\n[Output truncated: showing the first {} and last {} of {} lines. {saved}]",
                    shown.head_lines, shown.tail_lines, shown.total_lines
                ));
            } else {
                text.push_str(&format!("\n\n[Some long lines were cut. {saved}]"));
            }
        }

        let mut is_error = false;
        if exit.timed_out {
            is_error = true;
            text.push_str(&format!(
                "\n\nCommand timed out after {timeout_secs} seconds"
            ));
        } else if let Some(code) = exit.exit_code {
            if code != 0 {
                is_error = true;
                text.push_str(&format!("\n\nCommand exited with code {code}"));
            }
        } else if let Some(signal) = exit.signal {
            is_error = true;
            details["signal"] = json!(signal);
            text.push_str(&format!("\n\nCommand was killed by signal {signal}"));
        }
        Ok(ToolOutput {
            result: ToolResult {
                content: vec![ContentBlock::text(text)],
                details: Some(details),
            },
            is_error,
        })
    }
}

fn output_file_name() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "bash-{nanos}-{}.log",
        OUTPUT_COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Output collected so far: everything up to [`MAX_CAPTURE_BYTES`], then the
/// head plus a rolling tail.
#[derive(Default)]
struct Capture {
    head: Vec<u8>,
    tail: Vec<u8>,
    dropped: usize,
}

impl Capture {
    fn push(&mut self, chunk: &[u8]) {
        let head_room = (MAX_CAPTURE_BYTES / 2).saturating_sub(self.head.len());
        let (to_head, rest) = chunk.split_at(head_room.min(chunk.len()));
        self.head.extend_from_slice(to_head);
        self.tail.extend_from_slice(rest);
        if self.tail.len() > MAX_CAPTURE_BYTES {
            let excess = self.tail.len() - MAX_CAPTURE_BYTES / 2;
            self.tail.drain(..excess);
            self.dropped += excess;
        }
    }

    fn full_text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if self.dropped > 0 {
            text.push_str(&format!(
                "\n[... {} bytes of output dropped ...]\n",
                self.dropped
            ));
        }
        text.push_str(&String::from_utf8_lossy(&self.tail));
        text
    }

    fn tail_text(&self, max_bytes: usize) -> String {
        let (head, tail) = (&self.head, &self.tail);
        let bytes: Vec<u8> = if tail.len() >= max_bytes {
            tail[tail.len() - max_bytes..].to_vec()
        } else {
            let from_head = (max_bytes - tail.len()).min(head.len());
            let mut v = head[head.len() - from_head..].to_vec();
            v.extend_from_slice(tail);
            v
        };
        let text = String::from_utf8_lossy(&bytes);
        tail_bytes(&text, max_bytes).to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtins::test_support::{ctx, run, run_err, run_ok};
    use std::sync::{Arc, Mutex};
    use tokio_util::sync::CancellationToken;

    #[tokio::test]
    async fn runs_in_cwd_and_reports_success() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("marker"), "").unwrap();
        let out = run_ok(
            &BashTool,
            &ctx(dir.path()),
            json!({"command": "ls; echo oops >&2"}),
        )
        .await;
        assert!(!out.is_error);
        assert_eq!(out.text(), "marker\noops");
        let details = out.result.details.unwrap();
        assert_eq!(details["exitCode"], 0);
        assert_eq!(details["timedOut"], false);
    }

    #[tokio::test]
    async fn non_zero_exit_is_an_error_result() {
        let dir = tempfile::tempdir().unwrap();
        let out = run_ok(
            &BashTool,
            &ctx(dir.path()),
            json!({"command": "echo hi; exit 7"}),
        )
        .await;
        assert!(out.is_error);
        assert_eq!(out.text(), "hi\n\nCommand exited with code 7");
        assert_eq!(out.result.details.unwrap()["exitCode"], 7);
        let out = run_ok(&BashTool, &ctx(dir.path()), json!({"command": "exit 1"})).await;
        assert!(out.text().starts_with("(no output)"));
        assert!(out.text().ends_with("Command exited with code 1"));
    }

    #[tokio::test]
    async fn streams_partial_updates_while_running() {
        let dir = tempfile::tempdir().unwrap();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = seen.clone();
        let go = dir.path().join("go");
        // The command only finishes once an update has been seen, so this
        // passes only if output streams before the process exits.
        let c = ctx(dir.path()).with_updates(Arc::new(move |r: ToolResult| {
            let text = match &r.content[0] {
                ContentBlock::Text { text } => text.clone(),
                _ => String::new(),
            };
            if text.contains("ready") {
                let _ = std::fs::write(&go, "");
            }
            sink.lock().unwrap().push(text);
        }));
        let out = run_ok(
            &BashTool,
            &c,
            json!({"command": "echo ready; while [ ! -f go ]; do sleep 0.02; done; echo done",
                   "timeout": 20}),
        )
        .await;
        assert!(!out.is_error, "{}", out.text());
        assert_eq!(out.text(), "ready\ndone");
        let seen = seen.lock().unwrap();
        // Updates accumulate: each extends the previous, the last has everything.
        for pair in seen.windows(2) {
            assert!(pair[1].starts_with(&pair[0]), "{seen:?}");
        }
        assert_eq!(seen.last().unwrap(), "ready\ndone\n");
    }

    #[tokio::test]
    async fn timeout_is_reported_and_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let cmd = format!(
            "(sleep 300 & echo $! > {p}; wait) & while [ ! -s {p} ]; do sleep 0.05; done; echo started; sleep 300",
            p = pidfile.display()
        );
        let out = run_ok(
            &BashTool,
            &ctx(dir.path()),
            json!({"command": cmd, "timeout": 1}),
        )
        .await;
        assert!(out.is_error);
        let text = out.text();
        assert!(text.starts_with("started"), "{text}");
        assert!(
            text.ends_with("Command timed out after 1 seconds"),
            "{text}"
        );
        assert_eq!(out.result.details.unwrap()["timedOut"], true);
        let pid = std::fs::read_to_string(&pidfile).unwrap();
        let stat = format!("/proc/{}/stat", pid.trim());
        let mut gone = false;
        for _ in 0..250 {
            match std::fs::read_to_string(&stat) {
                Err(_) => gone = true,
                Ok(s) => {
                    gone = s
                        .rsplit(')')
                        .next()
                        .is_some_and(|r| r.trim_start().starts_with('Z'))
                }
            }
            if gone {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(gone, "sleep {} outlived the timeout", pid.trim());
    }

    #[tokio::test]
    async fn cancellation_returns_aborted() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = CancellationToken::new();
        let started = Arc::new(tokio::sync::Notify::new());
        let notify = started.clone();
        let c = crate::ToolContext::local(dir.path(), cancel.clone())
            .with_scratch_dir(dir.path().join(".scratch"))
            .with_updates(Arc::new(move |_| notify.notify_one()));
        let trigger = tokio::spawn(async move {
            started.notified().await;
            cancel.cancel();
        });
        let result = run(&BashTool, &c, json!({"command": "echo go; sleep 300"})).await;
        assert!(matches!(result, Err(Error::Aborted)), "{result:?}");
        trigger.await.unwrap();
    }

    #[tokio::test]
    async fn long_output_keeps_head_and_tail_and_saves_full_output() {
        let dir = tempfile::tempdir().unwrap();
        let out = run_ok(
            &BashTool,
            &ctx(dir.path()),
            json!({"command": "seq 1 5000"}),
        )
        .await;
        assert!(!out.is_error);
        let text = out.text();
        assert!(text.starts_with("1\n2\n3\n"), "{}", &text[..20]);
        assert!(text.contains("\n1000\n[... 3000 lines omitted ...]\n4001\n"));
        assert!(text.contains("\n5000\n\n[Output truncated: showing the first 1000 and last 1000 of 5000 lines. Full output: "));
        let details = out.result.details.unwrap();
        assert_eq!(details["truncated"], true);
        let path = details["fullOutputPath"].as_str().unwrap();
        assert!(path.starts_with(dir.path().join(".scratch").to_str().unwrap()));
        assert!(text.contains(path));
        let saved = std::fs::read_to_string(path).unwrap();
        let expected: String = (1..=5000).map(|i| format!("{i}\n")).collect();
        assert_eq!(saved, expected);
    }

    #[tokio::test]
    async fn bad_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        let err = run_err(&BashTool, &c, json!({})).await;
        assert!(err.contains("missing field `command`"), "{err}");
        let err = run_err(&BashTool, &c, json!({"command": "true", "timeout": -3})).await;
        assert!(err.contains("field `timeout`"), "{err}");
        let err = run_err(&BashTool, &c, json!({"command": "true", "timeout": "soon"})).await;
        assert!(err.contains("field `timeout`"), "{err}");
        let err = run_err(&BashTool, &c, json!({"command": "  "})).await;
        assert!(err.contains("must not be empty"), "{err}");
    }

    #[test]
    fn capture_keeps_head_and_tail_when_huge() {
        let mut c = Capture::default();
        let chunk = vec![b'a'; MAX_CAPTURE_BYTES / 4];
        for _ in 0..8 {
            c.push(&chunk);
        }
        assert_eq!(c.head.len(), MAX_CAPTURE_BYTES / 2);
        assert!(c.tail.len() <= MAX_CAPTURE_BYTES);
        assert_eq!(
            c.head.len() + c.tail.len() + c.dropped,
            2 * MAX_CAPTURE_BYTES
        );
        assert!(c.full_text().contains("bytes of output dropped"));
        assert_eq!(c.tail_text(10).len(), 10);
    }
}
