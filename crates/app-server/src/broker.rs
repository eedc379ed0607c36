//! The server-request broker: requests keel sends to clients (approvals),
//! each waiting on a oneshot keyed by its integer id.
//!
//! A request goes to every connection subscribed to its thread; those are
//! its eligible responders, and the first valid answer from one of them
//! wins (a late or foreign answer is logged and ignored). Losing a
//! connection keeps the request pending; a connection that subscribes to
//! the thread later (resume) gets it again and becomes eligible. The wait
//! ends with an answer, a timeout, or a withdrawal (the turn ended); each
//! end is announced with `serverRequest/resolved`.
//!
//! Requests live in memory: a restart of keel forgets them (the durable
//! approval store of `keel-approvals` is meant to replace this map).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use keel_app_server_protocol::v2::{
    ServerNotification, ServerRequest, ServerRequestResolvedNotification,
};
use keel_app_server_protocol::{ErrorObject, RequestId};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::outbound::{Connection, ConnectionId};
use crate::runtime::Runtime;

/// How a request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum BrokerOutcome {
    /// A client answered with a result.
    Answered(Value),
    /// A client answered with an error.
    Refused(ErrorObject),
    /// Nobody answered in time.
    TimedOut,
    /// The request was withdrawn (its turn ended).
    Withdrawn,
}

struct Pending {
    thread_id: String,
    request: ServerRequest,
    eligible: HashSet<ConnectionId>,
    tx: oneshot::Sender<BrokerOutcome>,
}

/// Pending server requests.
pub struct Broker {
    next_id: AtomicI64,
    pending: Mutex<HashMap<i64, Pending>>,
}

impl Default for Broker {
    fn default() -> Self {
        Self::new()
    }
}

impl Broker {
    pub fn new() -> Self {
        Self {
            next_id: AtomicI64::new(0),
            pending: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<i64, Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `request` to the thread's subscribers and waits for the first
    /// valid answer, at most `timeout`.
    pub async fn request(
        &self,
        runtime: &Runtime,
        request: ServerRequest,
        timeout: Duration,
    ) -> BrokerOutcome {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let thread_id = request.thread_id().to_owned();
        let targets = runtime.subscribers(&thread_id);
        let (tx, rx) = oneshot::channel();
        self.lock().insert(
            id,
            Pending {
                thread_id: thread_id.clone(),
                request: request.clone(),
                eligible: targets.iter().map(|c| c.id).collect(),
                tx,
            },
        );
        for conn in &targets {
            conn.request(id, &request).await;
        }
        let outcome = match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => BrokerOutcome::Withdrawn,
            Err(_) => {
                self.lock().remove(&id);
                BrokerOutcome::TimedOut
            }
        };
        runtime
            .notify_thread(
                &thread_id,
                &ServerNotification::ServerRequestResolved(ServerRequestResolvedNotification {
                    thread_id: thread_id.clone(),
                    request_id: RequestId::Integer(id),
                }),
            )
            .await;
        outcome
    }

    /// A client's answer. Returns `false` (and logs) when nothing waits for
    /// it from this connection.
    pub fn resolve(&self, from: ConnectionId, id: &RequestId, outcome: BrokerOutcome) -> bool {
        let RequestId::Integer(n) = id else {
            tracing::warn!(%id, "a response to a server request with a string id: ignored");
            return false;
        };
        let mut pending = self.lock();
        match pending.get(n) {
            Some(p) if p.eligible.contains(&from) => {}
            Some(_) => {
                tracing::warn!(%id, connection = from, "an answer from a connection that was not asked: ignored");
                return false;
            }
            None => {
                tracing::warn!(%id, "could not find callback for server request {id}");
                return false;
            }
        }
        if let Some(p) = pending.remove(n) {
            let _ = p.tx.send(outcome);
        }
        true
    }

    /// How many requests are pending.
    pub fn pending_count(&self) -> usize {
        self.lock().len()
    }

    /// A connection went away: it can no longer answer.
    pub fn connection_closed(&self, conn: ConnectionId) {
        for p in self.lock().values_mut() {
            p.eligible.remove(&conn);
        }
    }

    /// Sends the thread's pending requests to a connection that just
    /// subscribed to it, which becomes eligible to answer them.
    pub async fn replay(&self, thread_id: &str, conn: &Arc<Connection>) {
        let requests: Vec<(i64, ServerRequest)> = {
            let mut pending = self.lock();
            let mut out: Vec<(i64, ServerRequest)> = pending
                .iter_mut()
                .filter(|(_, p)| p.thread_id == thread_id && !p.eligible.contains(&conn.id))
                .map(|(id, p)| {
                    p.eligible.insert(conn.id);
                    (*id, p.request.clone())
                })
                .collect();
            out.sort_by_key(|(id, _)| *id);
            out
        };
        for (id, request) in requests {
            conn.request(id, &request).await;
        }
    }

    /// Withdraws every pending request of a thread (its turn ended);
    /// returns their ids so the caller can announce them resolved.
    pub fn withdraw_thread(&self, thread_id: &str) -> Vec<i64> {
        let mut pending = self.lock();
        let ids: Vec<i64> = pending
            .iter()
            .filter(|(_, p)| p.thread_id == thread_id)
            .map(|(id, _)| *id)
            .collect();
        for id in &ids {
            if let Some(p) = pending.remove(id) {
                let _ = p.tx.send(BrokerOutcome::Withdrawn);
            }
        }
        ids
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::outbound::{ClientCaps, SlowClientPolicy};
    use crate::runtime::{AppServerConfig, ModelSource};
    use keel_app_server_protocol::v2::FileChangeRequestApprovalParams;
    use keel_core::ModelInfo;
    use keel_llm::Provider;
    use serde_json::json;

    struct NoModels;
    impl ModelSource for NoModels {
        fn models(&self) -> Vec<ModelInfo> {
            Vec::new()
        }
        fn provider(&self, _: &ModelInfo) -> Result<Arc<dyn Provider>, String> {
            Err("none".into())
        }
        fn base_url(&self, _: &ModelInfo) -> Option<String> {
            None
        }
        fn has_api_key(&self) -> bool {
            false
        }
    }

    fn connect(rt: &Runtime) -> (Arc<Connection>, tokio::sync::mpsc::Receiver<Vec<u8>>) {
        let (c, rx) = Connection::new(rt.next_connection_id(), SlowClientPolicy::Backpressure);
        c.set_caps(ClientCaps {
            initialized: true,
            ..ClientCaps::default()
        });
        let c = Arc::new(c);
        rt.add_connection(c.clone());
        rt.subscribe("t", c.id);
        (c, rx)
    }

    fn request() -> ServerRequest {
        ServerRequest::FileChangeRequestApproval(FileChangeRequestApprovalParams {
            thread_id: "t".into(),
            turn_id: "u".into(),
            item_id: "i".into(),
            started_at_ms: 0,
            reason: None,
            grant_root: None,
        })
    }

    async fn frame(rx: &mut tokio::sync::mpsc::Receiver<Vec<u8>>) -> Value {
        let bytes = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn first_eligible_answer_wins_and_late_subscribers_get_a_replay() {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new(
            AppServerConfig::new(dir.path().into(), dir.path().into()),
            Arc::new(NoModels),
        );
        let (a, mut rx_a) = connect(&rt);
        let (b, mut rx_b) = connect(&rt);
        let waiter = {
            let rt = rt.clone();
            tokio::spawn(async move {
                rt.broker
                    .request(&rt, request(), Duration::from_secs(10))
                    .await
            })
        };
        let sent = frame(&mut rx_a).await;
        assert_eq!(sent["method"], "item/fileChange/requestApproval");
        assert_eq!(frame(&mut rx_b).await["id"], sent["id"]);
        let id = RequestId::Integer(sent["id"].as_i64().unwrap());

        // A connection that was not asked cannot answer; a late subscriber
        // gets the request again and then can.
        let (late, mut rx_late) = Connection::new(99, SlowClientPolicy::Backpressure);
        late.set_caps(ClientCaps {
            initialized: true,
            ..ClientCaps::default()
        });
        let late = Arc::new(late);
        assert!(
            !rt.broker
                .resolve(late.id, &id, BrokerOutcome::Answered(json!({})))
        );
        rt.broker.connection_closed(a.id);
        rt.broker.replay("t", &late).await;
        assert_eq!(frame(&mut rx_late).await["id"], sent["id"]);
        assert!(
            !rt.broker
                .resolve(a.id, &id, BrokerOutcome::Answered(json!({})))
        );
        assert!(rt.broker.resolve(
            late.id,
            &id,
            BrokerOutcome::Answered(json!({"decision": "accept"}))
        ));
        assert!(
            !rt.broker
                .resolve(b.id, &id, BrokerOutcome::Answered(json!({})))
        );
        let outcome = waiter.await.unwrap();
        assert_eq!(
            outcome,
            BrokerOutcome::Answered(json!({"decision": "accept"}))
        );
        let resolved = frame(&mut rx_b).await;
        assert_eq!(resolved["method"], "serverRequest/resolved");
        assert_eq!(resolved["params"]["requestId"], sent["id"]);
    }

    #[tokio::test]
    async fn requests_time_out_and_are_withdrawn() {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new(
            AppServerConfig::new(dir.path().into(), dir.path().into()),
            Arc::new(NoModels),
        );
        let (_a, _rx) = connect(&rt);
        let outcome = rt
            .broker
            .request(&rt, request(), Duration::from_millis(20))
            .await;
        assert_eq!(outcome, BrokerOutcome::TimedOut);
        let waiter = {
            let rt = rt.clone();
            tokio::spawn(async move {
                rt.broker
                    .request(&rt, request(), Duration::from_secs(10))
                    .await
            })
        };
        crate::tests_support::eventually(|| rt.broker.pending_count() == 1).await;
        assert_eq!(rt.broker.withdraw_thread("t").len(), 1);
        assert_eq!(waiter.await.unwrap(), BrokerOutcome::Withdrawn);
    }
}
