//! `bash` and `abort_bash`: the host runs a shell command in the session's
//! workspace.
//!
//! A `bash` command runs in the background (later commands are answered
//! while it runs); its response carries `{output, exitCode, cancelled,
//! truncated, fullOutputPath?}` with stdout and stderr merged. Its output
//! enters the conversation as a user message ahead of the next prompt
//! (``Ran `cmd` `` and the fenced output), unless it was cancelled.
//! `abort_bash` is answered first, then every running command is cancelled.

use crate::command::WireId;

use keel_core::SessionHandle;
use keel_protocol::UserInput;
use keel_tools::ProcessRequest;
use keel_tools::truncate::{Limits, truncate_head_tail};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::command::BashArgs;
use crate::frames::Out;
use crate::server::{Answer, Server};
use crate::wire_errors::{self, WireError};

/// Most output bytes kept in memory for one command.
const MAX_CAPTURE_BYTES: usize = 16 * 1024 * 1024;

impl Server {
    pub(super) fn bash(&mut self, id: Option<&WireId>, args: BashArgs) -> Answer {
        if args.command.trim().is_empty() {
            return Answer::Failed(wire_errors::invalid_params(
                "bash",
                "field `command`: must not be empty",
            ));
        }
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run_and_answer(
            self.handle().clone(),
            self.out.clone(),
            id.map(WireId::to_owned),
            args.command,
            cancel.clone(),
        ));
        self.bash.push(cancel, task);
        Answer::Sent
    }

    pub(super) async fn abort_bash(&mut self, id: Option<&WireId>, name: &str) -> Answer {
        self.out.respond_ok(id, name, None).await;
        self.bash.cancel();
        Answer::Sent
    }
}

async fn run_and_answer(
    handle: SessionHandle,
    out: Out,
    id: Option<Box<WireId>>,
    command: String,
    cancel: CancellationToken,
) {
    match run(&handle, &command, cancel).await {
        Ok((data, output, cancelled)) => {
            if !cancelled {
                handle.add_context(UserInput::text(format!(
                    "Ran `{command}`\n```\n{}\n```",
                    output.trim_end()
                )));
            }
            out.respond_ok(id.as_deref(), "bash", Some(data)).await;
        }
        Err(e) => out.respond_err(id.as_deref(), "bash", &e).await,
    }
}

/// Runs the command; returns the response data, the output shown, and
/// whether it was cancelled.
async fn run(
    handle: &SessionHandle,
    command: &str,
    cancel: CancellationToken,
) -> Result<(Value, String, bool), WireError> {
    let (fs, process) = handle.backends();
    let cwd = handle.snapshot().cwd;
    let mut captured: Vec<u8> = Vec::new();
    let mut on_output = |chunk: &[u8]| {
        let room = MAX_CAPTURE_BYTES.saturating_sub(captured.len());
        captured.extend_from_slice(&chunk[..chunk.len().min(room)]);
    };
    let exit = process
        .run(
            ProcessRequest {
                command: command.to_owned(),
                cwd: cwd.clone(),
                env: Vec::new(),
                timeout: None,
                sandbox: handle.sandbox_spec(),
            },
            cancel,
            &mut on_output,
        )
        .await
        .map_err(|e| wire_errors::session_failure(&format!("cannot run the command: {e}")))?;
    let full = String::from_utf8_lossy(&captured).into_owned();
    let shown = truncate_head_tail(&full, Limits::default());
    let mut output = shown.content.clone();
    if exit.cancelled {
        output.push_str("\n[Command cancelled]\n");
    } else if !full.is_empty() && full.ends_with('\n') {
        output.push('\n');
    }
    let mut data = json!({
        "output": output,
        "cancelled": exit.cancelled,
        "truncated": shown.truncated,
        "workingDir": cwd.display().to_string(),
    });
    if let (false, Some(code)) = (exit.cancelled, exit.exit_code) {
        data["exitCode"] = json!(code);
    }
    if shown.truncated {
        let path = handle
            .scratch_dir()
            .join(format!("rpc-bash-{}.log", uuid::Uuid::now_v7().simple()));
        match fs.write(&path, full.as_bytes()).await {
            Ok(()) => data["fullOutputPath"] = json!(path.display().to_string()),
            Err(e) => tracing::warn!(error = %e, "could not save the full bash output"),
        }
    }
    Ok((data, output, exit.cancelled))
}
