//! The server-request broker: which approval request went out under which
//! integer id, and to which connections.
//!
//! The approval itself is a row of the approvals engine (`keel.db`), stored
//! before the request goes out; the broker only maps the wire id to that
//! row and remembers the eligible responders: the connections the request
//! was sent to. A request goes to every connection subscribed to its
//! thread; a connection that subscribes later (`thread/resume`) gets it
//! again and becomes eligible. Losing a connection keeps the request
//! pending for the others. An entry is *live* while a turn of this process
//! waits on the row; after a restart the rows still pending are announced
//! again as entries nobody waits on, and an answer to one is recorded on
//! the row all the same. Whoever removes an entry ([`Broker::finish`])
//! announces `serverRequest/resolved`, so it goes out exactly once.
//!
//! A question (an MCP server's elicitation) is an entry with no row: it
//! lives only while the call that asked waits ([`Broker::ask`]), its answer
//! goes to that waiter, and it ends as cancelled when the last connection
//! it was sent to goes away.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use keel_app_server_protocol::RequestId;
use keel_app_server_protocol::v2::ServerRequest;

use crate::notify::Notifier;
use crate::outbound::{Connection, ConnectionId};

/// One request on the wire.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The approval row (`apr_…`).
    pub approval_id: String,
    pub thread_id: String,
    pub request: ServerRequest,
    /// Connections the request was sent to (they may answer it).
    pub eligible: HashSet<ConnectionId>,
    /// A turn of this process waits on the row.
    pub live: bool,
}

/// A client's reply to a question: its `result`, or its `error`.
pub type Reply = Result<serde_json::Value, keel_app_server_protocol::ErrorObject>;

#[derive(Default)]
struct State {
    entries: HashMap<i64, Entry>,
    by_approval: HashMap<String, i64>,
    /// Questions on the wire → who waits for the answer.
    questions: HashMap<i64, tokio::sync::oneshot::Sender<Reply>>,
}

impl State {
    fn remove(&mut self, id: i64) {
        if let Some(e) = self.entries.remove(&id) {
            self.by_approval.remove(&e.approval_id);
        }
        self.questions.remove(&id);
    }
}

/// The key a question's entry is kept under (it has no row).
fn question_key(id: i64) -> String {
    format!("question:{id}")
}

/// Approval requests on the wire.
pub struct Broker {
    next_id: AtomicI64,
    state: Mutex<State>,
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
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends the request of a stored row to every connection subscribed to
    /// its thread (a live wait) and returns its wire id. A row already on
    /// the wire keeps its id.
    pub async fn announce(
        &self,
        notifier: &dyn Notifier,
        approval_id: &str,
        request: ServerRequest,
    ) -> i64 {
        let thread_id = request.thread_id().to_owned();
        let targets = notifier.subscribers(&thread_id);
        let id = {
            let mut state = self.lock();
            let id = match state.by_approval.get(approval_id) {
                Some(id) => *id,
                None => {
                    let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                    state.by_approval.insert(approval_id.to_owned(), id);
                    id
                }
            };
            let entry = state.entries.entry(id).or_insert_with(|| Entry {
                approval_id: approval_id.to_owned(),
                thread_id: thread_id.clone(),
                request: request.clone(),
                eligible: HashSet::new(),
                live: true,
            });
            entry.live = true;
            // A connection that has the request already (a resume replayed
            // it before the turn went on) is not sent it twice.
            let fresh: Vec<_> = targets
                .iter()
                .filter(|c| entry.eligible.insert(c.id))
                .cloned()
                .collect();
            (id, fresh)
        };
        let (id, fresh) = id;
        for conn in &fresh {
            conn.request(id, &request).await;
        }
        id
    }

    /// Sends a request to one connection (a resume), which becomes
    /// eligible. `request` is only used when the row is not on the wire yet
    /// (after a restart); the entry is then not live.
    pub async fn send_to(
        &self,
        conn: &Arc<Connection>,
        approval_id: &str,
        request: impl FnOnce() -> ServerRequest,
    ) {
        let (id, request) = {
            let mut state = self.lock();
            let id = match state.by_approval.get(approval_id) {
                Some(id) => *id,
                None => {
                    let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                    let request = request();
                    state.by_approval.insert(approval_id.to_owned(), id);
                    state.entries.insert(
                        id,
                        Entry {
                            approval_id: approval_id.to_owned(),
                            thread_id: request.thread_id().to_owned(),
                            request,
                            eligible: HashSet::new(),
                            live: false,
                        },
                    );
                    id
                }
            };
            let Some(entry) = state.entries.get_mut(&id) else {
                return;
            };
            entry.eligible.insert(conn.id);
            (id, entry.request.clone())
        };
        conn.request(id, &request).await;
    }

    /// Sends a question to every connection subscribed to its thread and
    /// returns its wire id and where the first answer arrives (the sender
    /// is dropped when nobody is left to answer). `None`: no connection is
    /// subscribed, so nobody can be asked.
    pub async fn ask(
        &self,
        notifier: &dyn Notifier,
        request: ServerRequest,
    ) -> Option<(i64, tokio::sync::oneshot::Receiver<Reply>)> {
        let thread_id = request.thread_id().to_owned();
        let targets = notifier.subscribers(&thread_id);
        if targets.is_empty() {
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = tokio::sync::oneshot::channel();
        {
            let mut state = self.lock();
            let key = question_key(id);
            state.by_approval.insert(key.clone(), id);
            state.entries.insert(
                id,
                Entry {
                    approval_id: key,
                    thread_id,
                    request: request.clone(),
                    eligible: targets.iter().map(|c| c.id).collect(),
                    live: true,
                },
            );
            state.questions.insert(id, tx);
        }
        for conn in &targets {
            conn.request(id, &request).await;
        }
        Some((id, rx))
    }

    /// Where the answer to question `id` goes, if it is one and `from` was
    /// asked it (the first answer takes it; the entry stays until
    /// [`Self::end_question`]).
    pub fn take_question(
        &self,
        from: ConnectionId,
        id: &RequestId,
    ) -> Option<Option<tokio::sync::oneshot::Sender<Reply>>> {
        let RequestId::Integer(n) = id else {
            return None;
        };
        let mut state = self.lock();
        let entry = state.entries.get(n)?;
        if entry.approval_id != question_key(*n) {
            return None;
        }
        if !entry.eligible.contains(&from) {
            tracing::warn!(%id, connection = from, "an answer from a connection that was not asked: ignored");
            return Some(None);
        }
        Some(state.questions.remove(n))
    }

    /// Removes question `id`: its thread, for the caller to announce
    /// `serverRequest/resolved`, or `None` when it was already gone.
    pub fn end_question(&self, id: i64) -> Option<String> {
        let mut state = self.lock();
        let thread = state.entries.get(&id)?.thread_id.clone();
        state.remove(id);
        Some(thread)
    }

    /// The entry a client's answer is for, if `from` may answer it; logs
    /// and returns `None` otherwise.
    pub fn eligible(&self, from: ConnectionId, id: &RequestId) -> Option<Entry> {
        let RequestId::Integer(n) = id else {
            tracing::warn!(%id, "a response to a server request with a string id: ignored");
            return None;
        };
        let state = self.lock();
        match state.entries.get(n) {
            Some(e) if e.eligible.contains(&from) => Some(e.clone()),
            Some(_) => {
                tracing::warn!(%id, connection = from, "an answer from a connection that was not asked: ignored");
                None
            }
            None => {
                tracing::warn!(%id, "could not find callback for server request {id}");
                None
            }
        }
    }

    /// Removes the entry of a row: `(wire id, thread)` for the caller to
    /// announce `serverRequest/resolved`, or `None` if it was already gone.
    pub fn finish(&self, approval_id: &str) -> Option<(i64, String)> {
        let mut state = self.lock();
        let id = state.by_approval.remove(approval_id)?;
        state.entries.remove(&id).map(|e| (id, e.thread_id))
    }

    /// Removes the live entries of a thread (its turn ended); returns their
    /// wire ids for the caller to announce.
    pub fn withdraw_live(&self, thread_id: &str) -> Vec<i64> {
        let mut state = self.lock();
        let mut ids: Vec<(i64, String)> = state
            .entries
            .iter()
            .filter(|(_, e)| e.live && e.thread_id == thread_id)
            .map(|(id, e)| (*id, e.approval_id.clone()))
            .collect();
        ids.sort_by_key(|(id, _)| *id);
        for (id, _) in &ids {
            state.remove(*id);
        }
        ids.into_iter().map(|(id, _)| id).collect()
    }

    /// Forgets every entry of a thread (it was deleted).
    pub fn forget_thread(&self, thread_id: &str) {
        let mut state = self.lock();
        let gone: Vec<(i64, String)> = state
            .entries
            .iter()
            .filter(|(_, e)| e.thread_id == thread_id)
            .map(|(id, e)| (*id, e.approval_id.clone()))
            .collect();
        for (id, _) in gone {
            state.remove(id);
        }
    }

    /// How many requests are on the wire.
    pub fn pending_count(&self) -> usize {
        self.lock().entries.len()
    }

    /// A connection went away: it can no longer answer. A question it was
    /// the last to be asked ends unanswered (its waiter sees a cancel).
    pub fn connection_closed(&self, conn: ConnectionId) {
        let mut state = self.lock();
        let mut orphaned = Vec::new();
        for (id, e) in state.entries.iter_mut() {
            e.eligible.remove(&conn);
            if e.eligible.is_empty() {
                orphaned.push(*id);
            }
        }
        for id in orphaned {
            state.questions.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbound::{ClientCaps, SlowClientPolicy};
    use crate::runtime::{AppServerConfig, ModelSource, Runtime};
    use keel_app_server_protocol::v2::FileChangeRequestApprovalParams;
    use keel_core::ModelInfo;
    use keel_llm::Provider;
    use serde_json::Value;
    use std::time::Duration;

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

    /// A runtime with no models, its home in `dir`.
    fn runtime(dir: &std::path::Path) -> Arc<Runtime> {
        Runtime::new(
            AppServerConfig::new(dir.into(), dir.into()),
            Arc::new(NoModels),
            crate::approvals::frontend,
        )
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
    async fn requests_reach_subscribers_and_late_connections_become_eligible() {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime(dir.path());
        let (a, mut rx_a) = connect(&rt);
        let (b, mut rx_b) = connect(&rt);
        let id = rt.broker.announce(rt.as_ref(), "apr_1", request()).await;
        let sent = frame(&mut rx_a).await;
        assert_eq!(sent["method"], "item/fileChange/requestApproval");
        assert_eq!(sent["id"], id);
        assert_eq!(frame(&mut rx_b).await["id"], id);
        let wire = RequestId::Integer(id);

        // A connection that was not asked cannot answer; one that resumes
        // gets the same request (same id) and then can.
        let (late, mut rx_late) = Connection::new(99, SlowClientPolicy::Backpressure);
        let late = Arc::new(late);
        assert!(rt.broker.eligible(late.id, &wire).is_none());
        rt.broker.connection_closed(a.id);
        assert!(rt.broker.eligible(a.id, &wire).is_none());
        rt.broker.send_to(&late, "apr_1", request).await;
        assert_eq!(frame(&mut rx_late).await["id"], id);
        assert_eq!(
            rt.broker.eligible(late.id, &wire).unwrap().approval_id,
            "apr_1"
        );
        assert!(rt.broker.eligible(b.id, &wire).is_some());

        // Exactly one finisher announces it.
        assert_eq!(rt.broker.finish("apr_1"), Some((id, "t".to_owned())));
        assert_eq!(rt.broker.finish("apr_1"), None);
        assert!(rt.broker.eligible(b.id, &wire).is_none());
    }

    #[tokio::test]
    async fn rows_announced_after_a_restart_are_not_live() {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime(dir.path());
        let (a, mut rx) = connect(&rt);
        rt.broker.send_to(&a, "apr_old", request).await;
        let old = frame(&mut rx).await["id"].as_i64().unwrap();
        let live = rt.broker.announce(rt.as_ref(), "apr_new", request()).await;
        assert_ne!(old, live);
        assert_eq!(rt.broker.withdraw_live("t"), vec![live]);
        assert_eq!(rt.broker.pending_count(), 1);
        rt.broker.forget_thread("t");
        assert_eq!(rt.broker.pending_count(), 0);
    }

    fn question() -> ServerRequest {
        ServerRequest::McpServerElicitationRequest(
            keel_app_server_protocol::v2::McpServerElicitationRequestParams {
                server_name: "s".into(),
                thread_id: "t".into(),
                turn_id: None,
                message: "Go?".into(),
                mode: "form".into(),
                requested_schema: serde_json::json!({"type": "object", "properties": {}}),
            },
        )
    }

    /// The first answer to a question goes to its waiter, a second is
    /// taken as an answer to nothing; a question whose last asked
    /// connection goes away ends unanswered (its waiter hears nothing
    /// more), and one nobody is subscribed to is not put at all.
    #[tokio::test]
    async fn questions_are_answered_once_and_end_with_their_last_connection() {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime(dir.path());
        let (a, mut rx_a) = connect(&rt);
        let (b, mut rx_b) = connect(&rt);
        let (id, reply) = rt.broker.ask(rt.as_ref(), question()).await.unwrap();
        assert_eq!(
            frame(&mut rx_a).await["method"],
            "mcpServer/elicitation/request"
        );
        assert_eq!(frame(&mut rx_b).await["id"], id);
        let wire = RequestId::Integer(id);
        let first = rt.broker.take_question(a.id, &wire).unwrap().unwrap();
        first
            .send(Ok(serde_json::json!({"action": "decline"})))
            .unwrap();
        assert!(matches!(rt.broker.take_question(b.id, &wire), Some(None)));
        assert_eq!(reply.await.unwrap().unwrap()["action"], "decline");
        assert_eq!(rt.broker.end_question(id).as_deref(), Some("t"));
        assert_eq!(rt.broker.end_question(id), None);

        // Both asked connections close: the waiter's answer never comes.
        let (_, reply) = rt.broker.ask(rt.as_ref(), question()).await.unwrap();
        rt.broker.connection_closed(a.id);
        rt.broker.connection_closed(b.id);
        assert!(reply.await.is_err());

        // An approval's id is not a question's.
        let approval = rt.broker.announce(rt.as_ref(), "apr_1", request()).await;
        assert!(
            rt.broker
                .take_question(a.id, &RequestId::Integer(approval))
                .is_none()
        );

        rt.unsubscribe("t", a.id);
        rt.unsubscribe("t", b.id);
        assert!(rt.broker.ask(rt.as_ref(), question()).await.is_none());
    }
}
