//! The control requests the SDK sends keel (`control_request`), one arm
//! each: what keel does for each of the SDK's `Query` methods, and the
//! error reply for those it has no meaning for (docs/clients.md lists
//! them). It must not know how runs are driven (the parent module) or
//! how calls are decided ([`super::gate`]).

use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use keel_protocol::Op;
use serde_json::{Value, json};

use super::gate::{PermissionMode, ToolRule, read_hooks};
use super::{Driver, mcp_state, open, sdk_mcp, warn, wire};

/// At most this much of a file is sent to `readFile()` unless it asks for less.
const READ_FILE_MAX_BYTES: usize = 10 * 1024 * 1024;

impl Driver {
    pub(super) async fn control(&mut self, v: &Value) {
        let Some(id) = v
            .get("request_id")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return self.bad_frame("a control_request without request_id").await;
        };
        let request = v.get("request").cloned().unwrap_or(Value::Null);
        if request.get("subtype").and_then(Value::as_str) == Some("mcp_set_servers") {
            return self.set_mcp_servers(id, request).await;
        }
        let reply = match request.get("subtype").and_then(Value::as_str) {
            Some(subtype) => self.control_request(subtype, &request).await,
            None => Err("a control request without subtype".to_owned()),
        };
        let frame = match reply {
            Ok(response) => wire::control_success(&id, response),
            Err(why) => wire::control_error(&id, &why),
        };
        self.peer.send(&frame).await;
    }

    async fn control_request(&mut self, subtype: &str, request: &Value) -> Result<Value, String> {
        match subtype {
            "initialize" => self.initialize(request).await,
            "interrupt" => {
                if request.get("cancel_queued") == Some(&Value::Bool(true)) {
                    self.queue.clear();
                }
                self.interrupt().await;
                Ok(json!({}))
            }
            "set_permission_mode" => {
                let text = request.get("mode").and_then(Value::as_str).unwrap_or("");
                let mode = PermissionMode::parse(text)
                    .ok_or_else(|| format!("unknown permission mode `{text}`"))?;
                self.policy.set_mode(mode);
                Ok(json!({"mode": mode.as_str()}))
            }
            "set_model" => {
                self.set_model(request.get("model").and_then(Value::as_str))
                    .await
            }
            "set_max_thinking_tokens" => {
                let tokens = request.get("max_thinking_tokens").and_then(Value::as_u64);
                let level = open::level_for_tokens(tokens.unwrap_or(0));
                self.ensure_open().await.map_err(|e| format!("{e:#}"))?;
                if let Some(o) = &self.opened {
                    o.session
                        .submit(Op::SetThinkingLevel { level })
                        .await
                        .map_err(|e| e.to_string())?;
                }
                Ok(json!({}))
            }
            "mcp_status" => Ok(json!({"mcpServers": self.mcp_servers()})),
            "end_session" => {
                self.input_open = false;
                self.queue.clear();
                self.interrupt().await;
                Ok(json!({}))
            }
            "get_context_usage" => self.context_usage().await,
            // File I/O (up to 10 MiB read, or every file restored) runs off
            // the loop that reads the SDK's frames.
            "read_file" => {
                let (cwd, request) = (self.cwd.clone(), request.clone());
                blocking(move || read_file(&cwd, &request)).await?
            }
            "rewind_files" => {
                let id = text(request, "user_message_id")?.to_owned();
                let dry_run = request.get("dry_run") == Some(&Value::Bool(true));
                let policy = self.policy.clone();
                blocking(move || policy.checkpoints.rewind(&id, dry_run)).await
            }
            "mcp_read_resource" => {
                let (server, uri) = (text(request, "serverName")?, text(request, "uri")?);
                let contents = self
                    .config_mcp(server)?
                    .read_resource(server, uri)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(json!({"contents": contents}))
            }
            "mcp_reconnect" => {
                let server = text(request, "serverName")?;
                let servers = self.config_mcp(server)?;
                servers.reconnect(server).await.map_err(|e| e.to_string())?;
                Ok(json!({}))
            }
            "mcp_toggle" => {
                let server = text(request, "serverName")?;
                let enabled = request
                    .get("enabled")
                    .and_then(Value::as_bool)
                    .ok_or("mcp_toggle without enabled")?;
                let servers = self.config_mcp(server)?;
                servers
                    .set_enabled(server, enabled)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(json!({}))
            }
            // keel has no rule that a file must be read before it is
            // edited: there is no read state to seed.
            "seed_read_state" => Ok(json!({})),
            // keel has no skills, plugins, output styles or agents.
            "reload_skills" => Ok(json!({"skills": []})),
            "reload_output_styles" => Ok(json!({"available_output_styles": ["default"]})),
            "reload_plugins" => Ok(json!({
                "commands": [],
                "agents": [],
                "plugins": [],
                "mcpServers": self.mcp_servers(),
                "error_count": 0,
            })),
            "background_tasks" => Ok(json!({"backgrounded": false})),
            "stop_task" => Err(format!(
                "no task {}: keel runs no background tasks in this mode",
                request.get("task_id").and_then(Value::as_str).unwrap_or("")
            )),
            "apply_flag_settings" => self.apply_flag_settings(request).await,
            "set_mcp_permission_mode_override" => self.mcp_mode_override(request),
            "update_settings" => self.update_settings(request).await,
            other => Err(format!(
                "keel does not support the control request `{other}`"
            )),
        }
    }

    /// `setMcpServers()`. Answered from a task of its own: connecting the
    /// SDK's servers takes answers this loop reads, and a stdio server may
    /// take its whole startup timeout.
    async fn set_mcp_servers(&mut self, id: String, request: Value) {
        if let Err(e) = self.ensure_open().await {
            let frame = wire::control_error(&id, &format!("{e:#}"));
            return self.peer.send(&frame).await;
        }
        let Some(o) = &mut self.opened else { return };
        let servers = match &o.mcp {
            Some(m) => m.clone(),
            None => {
                let none = std::collections::BTreeMap::new();
                let m = keel_mcp::McpServers::start_in(&none, &self.cwd).await;
                self.mcp_set.follow(&m, o.session.handle());
                o.mcp = Some(m.clone());
                m
            }
        };
        let (set, session, peer) = (self.mcp_set.clone(), o.session.handle(), self.peer.clone());
        let home = o.resolved.home.clone();
        tokio::spawn(async move {
            let frame = match set
                .set_servers(&request, &servers, &session, &peer, &home)
                .await
            {
                Ok(response) => wire::control_success(&id, response),
                Err(why) => wire::control_error(&id, &why),
            };
            peer.send(&frame).await;
        });
    }

    /// `setMcpPermissionModeOverride()`: `default` has every call of the
    /// server's tools judged as in Claude's default mode (keel's
    /// `everything`: each write, send or money call asks unless a rule
    /// allows it), whatever the session's mode; `null` clears it. keel has
    /// no auto-mode classifier: `auto` clears it too, with a warning.
    fn mcp_mode_override(&self, request: &Value) -> Result<Value, String> {
        let server = text(request, "serverName")?;
        let mut warnings = Vec::new();
        match request.get("mode") {
            Some(Value::String(m)) if m == "default" => self.policy.force_asking(server, true),
            Some(Value::String(m)) if m == "auto" => {
                self.policy.force_asking(server, false);
                warnings.push(format!(
                    "keel has no auto-mode classifier: the calls of {server} follow the session's permission mode"
                ));
            }
            None | Some(Value::Null) => self.policy.force_asking(server, false),
            Some(other) => return Err(format!("unknown MCP permission mode {other}")),
        }
        let known = self.config_mcp(server).is_ok() || self.mcp_set.is_sdk(server);
        if !known {
            warnings.push(format!(
                "no MCP server named {server} is connected; the override applies once one is"
            ));
        }
        Ok(match warnings.is_empty() {
            true => json!({}),
            false => json!({"warning": warnings.join("; ")}),
        })
    }

    /// `updateSettings()`: the keys Claude Code's writer allows.
    /// `localSettings.outputStyle` can only be `default`, keel's one output
    /// style; `userSettings.effortLevel` is kept as the default effort of
    /// the session's model in keel's home (`claude/settings.json`), used by
    /// the next session on that model that names none (`max` is for one
    /// session and not kept; the running session's level is not changed).
    async fn update_settings(&mut self, request: &Value) -> Result<Value, String> {
        let source = text(request, "source")?;
        let Some(settings) = request.get("settings").and_then(Value::as_object) else {
            return Err("update_settings without settings".to_owned());
        };
        let allowed = match source {
            "localSettings" => "outputStyle",
            "userSettings" => "effortLevel",
            other => return Err(format!("unknown settings source `{other}`")),
        };
        if let Some(key) = settings.keys().find(|k| *k != allowed) {
            return Err(format!(
                "`{key}` cannot be written to {source}: only {allowed} can"
            ));
        }
        let Some(value) = settings.get(allowed) else {
            return Ok(json!({}));
        };
        let Some(value) = value.as_str() else {
            return Err(format!("{allowed} must be a string"));
        };
        match allowed {
            "outputStyle" if value == "default" => Ok(json!({})),
            "outputStyle" => Err(format!(
                "keel has no output style `{value}`; its only one is `default`"
            )),
            _ => {
                self.ensure_open().await.map_err(|e| format!("{e:#}"))?;
                let Some(o) = &self.opened else {
                    return Err("no session".to_owned());
                };
                let model = o.session.snapshot().model.id;
                open::save_effort(&o.resolved.home, &model, value)?;
                Ok(json!({}))
            }
        }
    }

    async fn initialize(&mut self, request: &Value) -> Result<Value, String> {
        let hooks = request.get("hooks").cloned().unwrap_or(Value::Null);
        let has_hooks = hooks.as_object().is_some_and(|h| !h.is_empty());
        self.policy.set_hooks(read_hooks(&hooks));
        for event in self.policy.uncalled_hooks() {
            warn(&format!(
                "{event} hooks are registered, but keel calls only PreToolUse and PostToolUse hooks"
            ));
        }
        // What the SDK delivers here instead of on the command line is
        // taken before the session opens, and confirmed (`*_applied`); a
        // later one (`reinitialize()`) loads nothing, and reads applied
        // for what names the set taken at launch.
        let first = self.opened.is_none();
        if first {
            self.launched = Some(request.clone());
            self.host.take_initialize(request);
            let rules = self
                .host
                .disallowed_tools
                .iter()
                .map(|t| ToolRule::parse(t));
            self.policy.add_disallowed(rules);
        }
        self.ensure_open().await.map_err(|e| format!("{e:#}"))?;
        let sdk_servers: Vec<String> = request
            .get("sdkMcpServers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .filter(|s| !self.mcp_set.is_sdk(s))
            .collect();
        if !sdk_servers.is_empty() && self.sdk_mcp.is_none() {
            // Connected while the loop goes on reading the SDK's answers;
            // runs wait until it is done.
            let (tx, rx) = tokio::sync::oneshot::channel();
            let peer = self.peer.clone();
            tokio::spawn(async move {
                let mut out = Vec::new();
                for name in sdk_servers {
                    let tools = sdk_mcp::connect(peer.clone(), &name).await;
                    out.push((name, tools));
                }
                let _ = tx.send(out);
            });
            self.sdk_mcp = Some(rx);
        }
        let model = self
            .opened
            .as_ref()
            .map(|o| o.session.snapshot().model)
            .unwrap_or_default();
        let mut out = json!({
            "commands": [],
            "agents": [],
            "output_style": "default",
            "available_output_styles": ["default"],
            "models": [{
                "value": model.id,
                "displayName": model.name,
                "description": format!("{} (keel)", model.provider),
            }],
            "account": {},
            "pid": std::process::id(),
            "hook_on_failure_supported": true,
        });
        if let Value::Object(map) = &mut out {
            if has_hooks {
                map.insert("hooks_applied".into(), Value::Bool(true));
            }
            for (field, reply) in [
                ("mcpServers", "mcp_servers_applied"),
                ("disallowedTools", "disallowed_tools_applied"),
                ("additionalDirectories", "additional_directories_applied"),
            ] {
                let Some(asked) = request.get(field).filter(|v| !v.is_null()) else {
                    continue;
                };
                let launched = self.launched.as_ref().and_then(|l| l.get(field));
                map.insert(reply.into(), Value::Bool(launched == Some(asked)));
            }
        }
        Ok(out)
    }

    async fn set_model(&mut self, model: Option<&str>) -> Result<Value, String> {
        self.ensure_open().await.map_err(|e| format!("{e:#}"))?;
        let Some(o) = &mut self.opened else {
            return Err("no session".to_owned());
        };
        let resolved = match model {
            Some(m) if m != "default" => o.resolved.for_model(m),
            _ => open::resolve_model(&self.global, &self.args).map_err(|e| format!("{e:#}"))?,
        };
        let provider = crate::setup::build_provider(&resolved).map_err(|e| format!("{e:#}"))?;
        o.session
            .handle()
            .set_model(resolved.model_info(), provider)
            .await
            .map_err(|e| e.to_string())?;
        if let Some(w) = &resolved.warning {
            warn(w);
        }
        o.resolved = resolved;
        Ok(json!({}))
    }

    /// The MCP servers, as `mcp_status` lists them: keel's, then the SDK's.
    fn mcp_servers(&self) -> Vec<Value> {
        let mut servers: Vec<Value> = self
            .opened
            .as_ref()
            .and_then(|o| o.mcp.as_ref())
            .map(|m| {
                m.status()
                    .into_iter()
                    .map(
                        |s| json!({"name": s.name, "status": mcp_state(s.state), "error": s.error}),
                    )
                    .collect()
            })
            .unwrap_or_default();
        servers.extend(
            self.mcp_set
                .sdk_servers()
                .into_iter()
                .map(|(name, status)| json!({"name": name, "status": status})),
        );
        servers
    }

    /// The configured MCP servers, when `server` is one of them.
    fn config_mcp(&self, server: &str) -> Result<Arc<keel_mcp::McpServers>, String> {
        if self.mcp_set.is_sdk(server) {
            return Err(format!(
                "{server} is an MCP server of the SDK's process: the SDK reaches it itself"
            ));
        }
        self.opened
            .as_ref()
            .and_then(|o| o.mcp.clone())
            .filter(|m| m.has(server))
            .ok_or_else(|| format!("no MCP server named {server}"))
    }

    /// `getContextUsage()`: how full the model's window is, as keel counts
    /// it (the last call's reported tokens, estimates after it).
    async fn context_usage(&mut self) -> Result<Value, String> {
        self.ensure_open().await.map_err(|e| format!("{e:#}"))?;
        let Some(o) = &self.opened else {
            return Err("no session".to_owned());
        };
        let usage = o.session.handle().context_usage();
        let model = o.session.snapshot().model;
        let window = usage.context_window;
        let free = window.saturating_sub(usage.tokens);
        let mcp_tools: Vec<Value> = o
            .mcp
            .as_ref()
            .map(|m| {
                m.tool_list()
                    .into_iter()
                    .map(|(server, tool, _)| {
                        let tokens = (tool.name.len()
                            + tool.description.len()
                            + tool.input_schema.to_string().len())
                        .div_ceil(4);
                        json!({
                            "name": keel_mcp::tool_name(&server, &tool.name),
                            "serverName": server,
                            "tokens": tokens,
                            "isLoaded": true,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(json!({
            "categories": [
                {"id": "messages", "name": "Messages", "tokens": usage.tokens, "color": "purple", "kind": "used"},
                {"id": "free_space", "name": "Free space", "tokens": free, "color": "gray", "kind": "free"},
            ],
            "totalTokens": usage.tokens,
            "maxTokens": window,
            "rawMaxTokens": window,
            "percentage": usage.percent,
            "gridRows": [],
            "model": model.id,
            "memoryFiles": [],
            "mcpTools": mcp_tools,
            "agents": [],
        }))
    }

    /// `applyFlagSettings()`: the settings keel has a meaning for (`model`,
    /// `permissions.defaultMode`); each other one is a warning line.
    async fn apply_flag_settings(&mut self, request: &Value) -> Result<Value, String> {
        let Some(settings) = request.get("settings").and_then(Value::as_object) else {
            return Err("apply_flag_settings without settings".to_owned());
        };
        for (key, value) in settings {
            match (key.as_str(), value) {
                ("model", Value::String(m)) => {
                    self.set_model(Some(m)).await?;
                }
                ("model", Value::Null) => {
                    self.set_model(None).await?;
                }
                ("permissions", Value::Object(p)) if p.keys().all(|k| k == "defaultMode") => {
                    if let Some(text) = p.get("defaultMode").and_then(Value::as_str) {
                        let mode = PermissionMode::parse(text)
                            .ok_or_else(|| format!("unknown permission mode `{text}`"))?;
                        self.policy.set_mode(mode);
                    }
                }
                _ => warn(&format!(
                    "setting `{key}`: keel has no such setting; ignored"
                )),
            }
        }
        Ok(json!({}))
    }
}

/// Runs `work` on a blocking thread.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| format!("the work did not finish: {e}"))
}

/// A string field of a request.
fn text<'a>(request: &'a Value, field: &str) -> Result<&'a str, String> {
    request
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("the request has no `{field}`"))
}

/// `readFile()`: a file of the workspace (a path outside it, or through
/// a link out of it, is refused), as UTF-8 (`lossy` when it was not) or
/// base64, cut at `max_bytes`.
fn read_file(cwd: &Path, request: &Value) -> Result<Value, String> {
    let asked = text(request, "path")?;
    let root = cwd
        .canonicalize()
        .map_err(|e| format!("cannot resolve the workspace: {e}"))?;
    let path = root
        .join(asked)
        .canonicalize()
        .map_err(|e| format!("cannot read {asked}: {e}"))?;
    if !path.starts_with(&root) {
        return Err(format!("{asked} is outside the workspace"));
    }
    let max = request
        .get("max_bytes")
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(READ_FILE_MAX_BYTES)
        .min(READ_FILE_MAX_BYTES);
    let mut bytes = std::fs::read(&path).map_err(|e| format!("cannot read {asked}: {e}"))?;
    let truncated = bytes.len() > max;
    bytes.truncate(max);
    let abs = path.display().to_string();
    if request.get("encoding").and_then(Value::as_str) == Some("base64") {
        let contents = base64::engine::general_purpose::STANDARD.encode(&bytes);
        return Ok(
            json!({"contents": contents, "absPath": abs, "truncated": truncated, "encoding": "base64"}),
        );
    }
    let (contents, lossy) = match String::from_utf8(bytes) {
        Ok(s) => (s, false),
        Err(e) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), true),
    };
    Ok(json!({"contents": contents, "absPath": abs, "truncated": truncated, "lossy": lossy}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_file_stays_in_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hello").unwrap();
        let ok = read_file(dir.path(), &json!({"path": "a.txt", "max_bytes": 4})).unwrap();
        assert_eq!(ok["contents"], "hell");
        assert_eq!(ok["truncated"], true);
        let b64 = read_file(dir.path(), &json!({"path": "a.txt", "encoding": "base64"})).unwrap();
        assert_eq!(b64["contents"], "aGVsbG8=");
        let outside = read_file(dir.path(), &json!({"path": "../../../../etc/hostname"}));
        assert!(outside.is_err());
        std::os::unix::fs::symlink("/etc/hostname", dir.path().join("link")).unwrap();
        let linked = read_file(dir.path(), &json!({"path": "link"})).unwrap_err();
        assert!(linked.contains("outside the workspace"), "{linked}");
        assert!(read_file(dir.path(), &json!({})).is_err());
    }
}
