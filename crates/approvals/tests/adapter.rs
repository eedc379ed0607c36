//! The integration point: an adapter from stand-ins of the agent core's
//! gate types (`ToolCallInfo`, `GateDecision`, `ApprovalGate`, copied from
//! `crates/core/src/deps.rs`) onto the engine, as documented in lib.rs.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use keel_approvals::{ApprovalEngine, CallContext, Class, Decision, GateOutcome, Mode, ToolOrigin};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

// ----- stand-ins for keel-core's types -----

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallInfo {
    pub session_id: String,
    pub call_id: String,
    pub tool_name: String,
    pub args: Value,
    pub cwd: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub enum GateDecision {
    Allow,
    Deny { message: String },
}

#[async_trait::async_trait]
pub trait ApprovalGate: Send + Sync {
    async fn check(&self, call: &ToolCallInfo) -> GateDecision;
}

// ----- the adapter (what the wiring step writes) -----

struct EngineGate {
    engine: ApprovalEngine,
    workspace: String,
    unattended: bool,
    host_classes: HashMap<String, Option<Class>>,
    cancel: CancellationToken,
}

#[async_trait::async_trait]
impl ApprovalGate for EngineGate {
    async fn check(&self, call: &ToolCallInfo) -> GateDecision {
        let ctx = CallContext {
            workspace: self.workspace.clone(),
            cwd: call.cwd.clone(),
            session_id: call.session_id.clone(),
            call_id: call.call_id.clone(),
            tool_name: call.tool_name.clone(),
            args: call.args.clone(),
            origin: match self.host_classes.get(&call.tool_name) {
                Some(class) => ToolOrigin::Host { class: *class },
                None => ToolOrigin::Builtin,
            },
            unattended: self.unattended,
            write_target: None,
        };
        match self.engine.gate(&ctx, &self.cancel).await {
            GateOutcome::Allow { .. } => GateDecision::Allow,
            GateOutcome::Drafted { message, .. } | GateOutcome::Deny { message, .. } => {
                GateDecision::Deny { message }
            }
            GateOutcome::Held { request } => GateDecision::Deny {
                message: format!("unexpected: {} still held", request.id),
            },
        }
    }
}

// ----- using it -----

fn info(call_id: &str, tool: &str, args: Value) -> ToolCallInfo {
    ToolCallInfo {
        session_id: "s1".to_owned(),
        call_id: call_id.to_owned(),
        tool_name: tool.to_owned(),
        args,
        cwd: PathBuf::from("/ws"),
    }
}

async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(20), f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out"),
    }
}

#[tokio::test]
async fn the_adapter_allows_holds_and_relays_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let engine = ApprovalEngine::open_sqlite(dir.path().join("keel.db"))
        .await
        .unwrap();
    let gate = std::sync::Arc::new(EngineGate {
        engine: engine.clone(),
        workspace: "/ws".to_owned(),
        unattended: false,
        host_classes: HashMap::from([("lookup".to_owned(), Some(Class::Read))]),
        cancel: CancellationToken::new(),
    });

    assert_eq!(
        gate.check(&info("c1", "read", json!({"path": "a"}))).await,
        GateDecision::Allow
    );
    assert_eq!(
        gate.check(&info("c2", "lookup", json!({}))).await,
        GateDecision::Allow
    );

    // A send waits for a person; the decision comes from "the CLI".
    let g = gate.clone();
    let held = tokio::spawn(async move {
        g.check(&info("c3", "bash", json!({"command": "cargo publish"})))
            .await
    });
    let cli = ApprovalEngine::open_sqlite(dir.path().join("keel.db"))
        .await
        .unwrap();
    let request = within(async {
        loop {
            if let Some(p) = cli.pending(Some("/ws")).await.unwrap().pop() {
                return p;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(request.call_id, "c3");
    cli.decide(
        &request.id,
        Decision::Decline {
            note: Some("publish from CI instead".to_owned()),
            stop_turn: false,
        },
        "cli",
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        within(held).await.unwrap(),
        GateDecision::Deny {
            message:
                "The user declined this; nothing happened. Their note: publish from CI instead"
                    .to_owned()
        }
    );

    // Under "money_only", sends run; money still asks (and unattended, drafts).
    engine
        .set_mode("/ws", Mode::MoneyOnly, "test")
        .await
        .unwrap();
    assert_eq!(
        gate.check(&info("c4", "bash", json!({"command": "cargo publish"})))
            .await,
        GateDecision::Allow
    );
    let unattended = EngineGate {
        engine: engine.clone(),
        workspace: "/ws".to_owned(),
        unattended: true,
        host_classes: HashMap::new(),
        cancel: CancellationToken::new(),
    };
    match unattended
        .check(&info("c5", "bash", json!({"command": "rm -rf target"})))
        .await
    {
        GateDecision::Deny { message } => {
            assert!(message.starts_with("Held for approval as draft"))
        }
        other => panic!("{other:?}"),
    }
}
