//! Approvals in RPC mode, a keel extension of the protocol (`docs/rpc.md`,
//! "Approvals (keel extension)").
//!
//! Owns [`RpcApprovals`], the RPC front end of the approvals engine: it
//! writes `approval_request` once a held call is stored (about to be waited
//! on, or parked as a draft in an unattended run) and `approval_resolved`
//! when a wait ends; it tells the gate which tools are the host's (with the
//! class their definition declares), that a negotiated unattended run
//! drafts instead of waiting, and refuses first what an unattended
//! declaration does not allow. It also owns the approval commands
//! (`approval_response`, `get_pending_approvals`, `get_approval_mode`,
//! `set_approval_mode`, `list_approval_rules`, `add_approval_rule`,
//! `remove_approval_rule`) and sends approved drafts. It decides nothing
//! itself: the engine does, and its rows are the only record.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use keel_core::keel_approvals::{
    self as engine, AlwaysOffer, ApprovalEngine, ApprovalRecord, Class, Delivery, Lifetime, Mode,
    PendingRequest, Resolution, Rule, Status,
};
use keel_core::{ApprovalFrontend, EngineGate, LogFrontend, ToolCallInfo};
use serde::Serialize;
use serde_json::{Value, json};

use crate::command::HostToolDef;
use crate::frames::Out;
use crate::host_uris::HostUris;
use crate::unattended::Unattended;
use crate::wire_errors::{self, WireError};

/// Who RPC-mode decisions are recorded as.
pub(crate) const DECIDER: &str = "rpc";

/// The RPC front end of the approvals engine.
pub(crate) struct RpcApprovals {
    pub(crate) gate: Arc<EngineGate>,
    out: Out,
    unattended: Arc<Unattended>,
    host_uris: Arc<HostUris>,
    /// The host's tools and their declared classes.
    host_classes: Mutex<HashMap<String, Option<Class>>>,
}

impl RpcApprovals {
    /// Creates the front end and installs it on `gate`.
    pub fn install(
        gate: Arc<EngineGate>,
        out: Out,
        unattended: Arc<Unattended>,
        host_uris: Arc<HostUris>,
    ) -> Arc<Self> {
        let this = Arc::new(Self {
            gate,
            out,
            unattended,
            host_uris,
            host_classes: Mutex::default(),
        });
        this.gate.set_frontend(this.clone());
        this
    }

    /// Detaches from the gate (so nothing holds the output any more).
    pub fn uninstall(&self) {
        self.gate.set_frontend(Arc::new(LogFrontend));
    }

    fn classes(&self) -> MutexGuard<'_, HashMap<String, Option<Class>>> {
        self.host_classes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the host's tools' classes (`set_host_tools`).
    pub fn set_host_classes(&self, classes: HashMap<String, Option<Class>>) {
        *self.classes() = classes;
    }

    /// The engine, opened now if it is still opening (RPC mode opens the
    /// store beside its first answers, not before them).
    pub(crate) async fn engine(&self) -> Result<&ApprovalEngine, WireError> {
        self.gate
            .opened()
            .await
            .map_err(|reason| WireError::Text(format!("Approvals are unavailable: {reason}")))
    }
}

/// The classes `defs` declare (`approvalClass`, else MCP annotations).
pub(crate) fn declared_classes(
    defs: &[HostToolDef],
) -> Result<HashMap<String, Option<Class>>, WireError> {
    let mut out = HashMap::new();
    for def in defs {
        let class = match (&def.approval_class, &def.annotations) {
            (Some(c), _) => Some(c.parse::<Class>().map_err(|_| {
                wire_errors::host_tool_invalid(&format!(
                    "{}: approvalClass must be read, write, send or money, not {c:?}",
                    def.name.trim()
                ))
            })?),
            (None, Some(a)) => Some(Class::from_mcp_hints(
                a.read_only_hint,
                a.destructive_hint,
                a.open_world_hint,
            )),
            (None, None) => None,
        };
        out.insert(def.name.trim().to_owned(), class);
    }
    Ok(out)
}

/// `approval_request`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestFrame<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    #[serde(flatten)]
    request: RequestView<'a>,
}

/// `approval_resolved`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ResolvedFrame<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    request_id: &'a str,
    tool_call_id: &'a str,
    status: &'static str,
    note: Option<String>,
    by_message: bool,
    stop_turn: bool,
    decided_by: Option<String>,
    rule_id: Option<String>,
}

/// A request as hosts see it (frames and `get_pending_approvals`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RequestView<'a> {
    request_id: &'a str,
    session_id: &'a str,
    tool_call_id: &'a str,
    tool_name: &'a str,
    operation: Option<&'a str>,
    title: &'a str,
    class: Class,
    class_label: &'a str,
    reason: &'a str,
    understood: bool,
    arg_lines: &'a [String],
    address: Option<&'a str>,
    always: Option<&'a AlwaysOffer>,
    delivery: Delivery,
    status: Status,
    workspace: &'a str,
    created_at: String,
    expires_at: String,
}

fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

pub(crate) fn view(r: &PendingRequest) -> RequestView<'_> {
    RequestView {
        request_id: &r.id,
        session_id: &r.session_id,
        tool_call_id: &r.call_id,
        tool_name: &r.tool,
        operation: r.operation.as_deref(),
        title: &r.title,
        class: r.class,
        class_label: &r.class_label,
        reason: &r.reason,
        understood: r.understood,
        arg_lines: &r.arg_lines,
        address: r.address.as_deref(),
        always: r.always.as_ref(),
        delivery: r.delivery,
        status: r.status,
        workspace: &r.workspace,
        created_at: iso(r.created_at),
        expires_at: iso(r.expires_at),
    }
}

/// A stored row after a decision, as hosts see it.
pub(crate) fn record_json(r: &ApprovalRecord) -> Value {
    json!({
        "requestId": r.id,
        "toolCallId": r.call_id,
        "toolName": r.tool,
        "status": r.status,
        "delivery": r.delivery,
        "decidedBy": r.decided_by,
        "approvedBy": r.approved_by,
        "note": r.note,
        "ruleId": r.rule_id,
        "decidedAt": r.decided_at.map(iso),
    })
}

pub(crate) fn rule_json(r: &Rule) -> Value {
    json!({
        "ruleId": r.id,
        "workspace": r.workspace,
        "tool": r.tool,
        "operation": r.operation,
        "scope": r.scope,
        "label": r.label,
        "lifetime": match &r.lifetime {
            Lifetime::Permanent => json!({"kind": "permanent"}),
            Lifetime::Session { session_id } => json!({"kind": "session", "sessionId": session_id}),
        },
        "createdAt": iso(r.created_at),
        "createdFrom": r.created_from,
        "lastMatchedAt": r.last_matched_at.map(iso),
        "matchCount": r.match_count,
    })
}

pub(crate) fn engine_error(e: engine::Error) -> WireError {
    WireError::Text(e.to_string())
}

#[async_trait::async_trait]
impl ApprovalFrontend for RpcApprovals {
    async fn requested(&self, request: &PendingRequest) {
        self.out
            .send(&RequestFrame {
                kind: "approval_request",
                id: &request.id,
                request: view(request),
            })
            .await;
    }

    async fn resolved(&self, request: &PendingRequest, resolution: &Resolution) {
        let row = match self.engine().await {
            Ok(engine) => engine.request(&request.id).await.ok(),
            Err(_) => None,
        };
        let (status, note, stop_turn) = match resolution {
            Resolution::Approved { .. } => ("approved", None, false),
            Resolution::Declined {
                note, stop_turn, ..
            } => ("declined", note.clone(), *stop_turn),
            Resolution::Expired { .. } => ("expired", None, false),
            Resolution::Cancelled { .. } => ("cancelled", None, true),
        };
        let by_message = matches!(
            resolution,
            Resolution::Declined {
                by_message: true,
                ..
            }
        );
        self.out
            .send(&ResolvedFrame {
                kind: "approval_resolved",
                id: &request.id,
                request_id: &request.id,
                tool_call_id: &request.call_id,
                status,
                note,
                by_message,
                stop_turn,
                decided_by: row.as_ref().and_then(|r| r.decided_by.clone()),
                rule_id: row.as_ref().and_then(|r| r.rule_id.clone()),
            })
            .await;
    }

    fn refuse(&self, call: &ToolCallInfo) -> Option<String> {
        let uris = self.host_uris.clone();
        let host_scheme =
            move |s: &str| keel_tools::host::HostUriResolver::scheme(uris.as_ref(), s).is_some();
        self.unattended
            .refuse_action(&call.tool_name, &call.args, &host_scheme)
    }

    fn unattended(&self) -> bool {
        self.unattended.active()
    }

    fn host_schemes(&self) -> Vec<(String, keel_tools::host::HostScheme)> {
        self.host_uris
            .lock()
            .schemes
            .iter()
            .map(|(name, scheme)| (name.clone(), *scheme))
            .collect()
    }

    fn host_class(&self, tool: &str) -> Option<Option<Class>> {
        if tool == crate::gates::tool::NAME {
            // `ask_host` only asks the host a question.
            return Some(Some(Class::Read));
        }
        self.classes().get(tool).copied()
    }
}

pub(crate) fn mode_json(mode: Mode, source: &str, workspace: &str) -> Value {
    json!({
        "mode": mode,
        "label": mode.label(),
        "source": source,
        "workspace": workspace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, class: Option<&str>, read_only: Option<bool>) -> HostToolDef {
        HostToolDef {
            name: name.into(),
            label: None,
            description: String::new(),
            parameters: None,
            approval_class: class.map(Into::into),
            annotations: read_only.map(|r| crate::command::ToolAnnotations {
                read_only_hint: Some(r),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn host_tools_declare_classes() {
        let classes = declared_classes(&[
            def("a", Some("money"), None),
            def("b", None, Some(true)),
            def("c", None, None),
        ])
        .unwrap();
        assert_eq!(classes["a"], Some(Class::Money));
        assert_eq!(classes["b"], Some(Class::Read));
        assert_eq!(classes["c"], None);
        let err = declared_classes(&[def("d", Some("cheap"), None)]).unwrap_err();
        assert!(err.to_value().as_str().unwrap().contains("approvalClass"));
    }
}
