//! `turn/*`: start (or steer, when a turn is active — as the Codex server
//! does), steer, interrupt.
//!
//! `turn/start`'s overrides stick for later turns: `model`, `effort`,
//! `cwd` (tools and the system prompt use it from the next model call),
//! `approvalPolicy`, `sandboxPolicy` (enforced on the thread's next
//! commands). A `warning` goes out
//! before the response when the model is unknown to the catalogue (every
//! turn, as Codex does) or the requested effort was clamped.

use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use keel_app_server_protocol::v2::{
    ServerNotification, Turn, TurnInterruptParams, TurnItemsView, TurnStartParams,
    TurnStartResponse, TurnStatus, TurnSteerParams, TurnSteerResponse, UserInput,
    WarningNotification,
};
use keel_protocol::{ImageContent, Op, ThinkingLevel};
use tokio::sync::oneshot;

/// The longest `turn/start` waits for its turn to be durably started on
/// the cluster's workers (a little over how long a start is tried while
/// Temporal cannot be reached).
const DURABLE_START_WAIT: std::time::Duration = std::time::Duration::from_secs(70);

use crate::handlers::{After, Reply, RequestCtx, ok};
use crate::items::data_url;
use crate::notify::Notifier;
use crate::rpc_error::RpcError;
use crate::sessions::{choose_model, model_warning, provider_for};
use crate::thread_state::{ActiveTurn, LoadedThread};

fn thread(ctx: &RequestCtx, id: &str) -> Result<Arc<LoadedThread>, RpcError> {
    ctx.runtime
        .thread(id)
        .ok_or_else(|| RpcError::thread_not_found(id))
}

/// The image MIME type of a file, by its extension (`image/png` when unknown).
pub fn mime_of(path: &Path) -> &'static str {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        _ => "image/png",
    }
}

/// Protocol input as one keel message with images.
pub fn to_keel_input(input: &[UserInput]) -> Result<keel_protocol::UserInput, RpcError> {
    let mut text: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for part in input {
        match part {
            UserInput::Text { text: t, .. } => text.push(t.clone()),
            UserInput::Image { url, file_id, .. } => match url.as_deref().and_then(data_url) {
                Some((mime_type, data)) => images.push(ImageContent {
                    kind: "image".to_owned(),
                    data,
                    mime_type,
                }),
                None => text.push(format!(
                    "[image: {}]",
                    url.clone().or(file_id.clone()).unwrap_or_default()
                )),
            },
            UserInput::LocalImage { path, .. } => {
                let p = Path::new(path);
                if !p.is_absolute() {
                    return Err(RpcError::invalid_params(
                        "AbsolutePathBuf deserialized without a base path",
                    ));
                }
                let bytes = std::fs::read(p).map_err(RpcError::internal)?;
                images.push(ImageContent {
                    kind: "image".to_owned(),
                    data: base64::engine::general_purpose::STANDARD.encode(bytes),
                    mime_type: mime_of(p).to_owned(),
                });
            }
            UserInput::Skill { name, path } | UserInput::Mention { name, path } => {
                text.push(format!("@{name} ({path})"))
            }
            UserInput::Audio { .. } | UserInput::LocalAudio { .. } => {
                return Err(RpcError::invalid("audio input is not supported by keel"));
            }
        }
    }
    Ok(keel_protocol::UserInput {
        message: text.join("\n"),
        images,
    })
}

fn in_progress(id: &str) -> Turn {
    Turn {
        id: id.to_owned(),
        root_turn_id: Some(id.to_owned()),
        items: Vec::new(),
        items_view: TurnItemsView::NotLoaded,
        status: TurnStatus::InProgress,
        error: None,
        started_at: None,
        completed_at: None,
        duration_ms: None,
    }
}

fn effort(level: &str) -> Option<ThinkingLevel> {
    if level == "none" {
        return Some(ThinkingLevel::Off);
    }
    serde_json::from_value(serde_json::Value::String(level.to_owned())).ok()
}

fn level_name(level: ThinkingLevel) -> String {
    serde_json::to_value(level)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

async fn warn(ctx: &RequestCtx, thread: &LoadedThread, message: String) {
    ctx.runtime
        .notify_thread(
            &thread.id,
            &ServerNotification::Warning(WarningNotification {
                thread_id: Some(thread.id.clone()),
                message,
            }),
        )
        .await;
}

pub async fn start(ctx: &mut RequestCtx, p: TurnStartParams) -> Result<Reply, RpcError> {
    if matches!(
        p.approval_policy,
        Some(keel_app_server_protocol::v2::AskForApproval::Granular { .. })
    ) && !ctx.conn.caps().experimental
    {
        return Err(RpcError::requires_experimental("askForApproval.granular"));
    }
    let thread = thread(ctx, &p.thread_id)?;
    let input = to_keel_input(&p.input)?;
    ctx.runtime.subscribe(&thread.id, ctx.conn.id);
    // Overrides stick for later turns.
    let policy = match &p.permissions {
        Some(id) => Some(crate::approvals::mode_for_profile(id)?),
        None => p.approval_policy.clone(),
    };
    if let Some(policy) = policy {
        thread.state().approval_policy = policy;
    }
    if let Some(policy) = p.sandbox_policy.clone() {
        thread
            .handle
            .set_sandbox(crate::sandbox::from_wire(&policy));
        thread.state().sandbox = policy;
    }
    if let Some(cwd) = p.cwd.as_deref().filter(|c| !c.is_empty()) {
        let cwd = std::path::PathBuf::from(cwd);
        if !cwd.is_absolute() {
            return Err(RpcError::invalid_params(
                "AbsolutePathBuf deserialized without a base path",
            ));
        }
        let cwd = keel_tools::normalize_path(&cwd);
        thread.handle.set_cwd(cwd.clone());
        thread.state().cwd = cwd;
    }
    if let Some(model) = p.model.as_deref().filter(|m| !m.is_empty()) {
        let current = thread.state().model.clone();
        if current.id != model {
            let info = choose_model(&ctx.runtime, Some(model), Some(&current.provider));
            let provider = provider_for(&ctx.runtime, &info);
            thread
                .handle
                .set_model(info.clone(), provider)
                .await
                .map_err(RpcError::internal)?;
            thread.state().model = info;
        }
    }
    if let Some(level) = p.effort.as_deref().and_then(effort) {
        thread
            .handle
            .submit(Op::SetThinkingLevel { level })
            .await
            .map_err(RpcError::internal)?;
        let used = thread.handle.snapshot().thinking_level;
        if used != level {
            let model = thread.state().model.id.clone();
            warn(
                ctx,
                &thread,
                format!(
                    "{model} does not support reasoning effort {}; using {}",
                    level_name(level),
                    level_name(used)
                ),
            )
            .await;
        }
    }
    let model = thread.state().model.clone();
    if let Some(message) = model_warning(&ctx.runtime, &model) {
        warn(ctx, &thread, message).await;
    }
    let (ready_tx, ready_rx) = oneshot::channel();
    // The id the history will give this turn (read before the state lock:
    // the tree has its own).
    let next_id =
        crate::history::next_turn_id(&thread.id, &crate::history::steps(&thread.handle.tree()));
    let turn_id = {
        let mut s = thread.state();
        match &s.active {
            Some(active) => Err(active.id.clone()),
            None => {
                let id = next_id;
                s.active = Some(ActiveTurn::new(id.clone(), Some(ready_rx)));
                Ok(id)
            }
        }
    };
    match turn_id {
        Ok(id) => {
            let mut starts = thread.handle.run_starts();
            let before = *starts.borrow_and_update();
            if let Err(e) = thread.handle.submit(Op::Prompt(input.clone())).await {
                match e {
                    keel_core::Error::Busy => {
                        thread
                            .handle
                            .enqueue_or_start(input, keel_core::QueueKind::Steer)
                            .await
                            .map_err(RpcError::internal)?;
                    }
                    other => {
                        thread.state().active = None;
                        return Err(RpcError::internal(other));
                    }
                }
            }
            // On a cluster, the answer waits until the turn is durably
            // started on the workers (or has failed, which the turn's
            // notifications then say): acknowledged, it is never lost
            // with this process.
            if thread.handle.runs_elsewhere()
                && tokio::time::timeout(DURABLE_START_WAIT, starts.wait_for(|n| *n > before))
                    .await
                    .is_err()
            {
                tracing::warn!(thread = %thread.id, "the turn's start on the workers is not settled yet; answering anyway");
            }
            ctx.after.push(After::Signal(ready_tx));
            ok(&TurnStartResponse {
                turn: in_progress(&id),
            })
        }
        Err(active) => {
            // A turn is running: the input steers it, as in Codex.
            thread
                .handle
                .enqueue_or_start(input, keel_core::QueueKind::Steer)
                .await
                .map_err(RpcError::internal)?;
            ok(&TurnStartResponse {
                turn: in_progress(&active),
            })
        }
    }
}

pub async fn steer(ctx: &mut RequestCtx, p: TurnSteerParams) -> Result<Reply, RpcError> {
    let thread = thread(ctx, &p.thread_id)?;
    let input = to_keel_input(&p.input)?;
    let Some(active) = thread.active_turn_id() else {
        return Err(RpcError::invalid("no active turn to steer"));
    };
    if active != p.expected_turn_id {
        return Err(RpcError::invalid(format!(
            "expected active turn id `{}` but found `{active}`",
            p.expected_turn_id
        )));
    }
    thread
        .handle
        .enqueue_or_start(input, keel_core::QueueKind::Steer)
        .await
        .map_err(RpcError::internal)?;
    ok(&TurnSteerResponse { turn_id: active })
}

pub async fn interrupt(ctx: &mut RequestCtx, p: TurnInterruptParams) -> Result<Reply, RpcError> {
    let thread = thread(ctx, &p.thread_id)?;
    {
        let mut s = thread.state();
        let Some(active) = s.active.as_mut() else {
            return Err(RpcError::invalid("no active turn to interrupt"));
        };
        if active.id != p.turn_id {
            return Err(RpcError::invalid(format!(
                "expected active turn id {} but found {}",
                p.turn_id, active.id
            )));
        }
        active.interrupted = true;
        active
            .interrupt_requests
            .push((ctx.conn.id, ctx.id.clone()));
    }
    // Answered by the event pump when the turn has ended, before
    // `turn/completed` (see `ActiveTurn::interrupt_requests`).
    if let Err(e) = thread.handle.submit(Op::Abort).await {
        let unanswered = {
            let mut s = thread.state();
            s.active.as_mut().is_some_and(|t| {
                let before = t.interrupt_requests.len();
                t.interrupt_requests
                    .retain(|(conn, id)| (*conn, id) != (ctx.conn.id, &ctx.id));
                t.interrupt_requests.len() < before
            })
        };
        if unanswered {
            return Err(RpcError::internal(e));
        }
    }
    Ok(Reply::Later)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_becomes_one_message_with_images() {
        let input = vec![
            UserInput::Text {
                text: "look".into(),
                text_elements: vec![],
            },
            UserInput::Image {
                url: Some("data:image/png;base64,aGk=".into()),
                file_id: None,
                detail: None,
            },
        ];
        let k = to_keel_input(&input).unwrap();
        assert_eq!(k.message, "look");
        assert_eq!(k.images[0].mime_type, "image/png");
        let rel = vec![UserInput::LocalImage {
            path: "a.png".into(),
            detail: None,
        }];
        assert_eq!(to_keel_input(&rel).unwrap_err().code, -32600);
    }
}
