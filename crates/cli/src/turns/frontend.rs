//! Front-ends whose sessions run their runs on workers: `keel --mode rpc`
//! (and any front-end that opens sessions through `crate::setup`) with a
//! Temporal cluster and the shared database.
//!
//! Owns [`OnWorkers`], the [`RunsElsewhere`] of such sessions: a run
//! starts the turn's workflow, the run's events come back from the
//! session's event log (every event once, in order; the records of a held
//! call become the session's own `approval_request`/`approval_resolved`
//! through the gate's front end, so a host decides it as it would decide
//! a call held here), and an abort goes into the log as an interrupt. A
//! session also watches its log for the turns another front-end started
//! (from the running one's start when it is opened mid-turn; which turn
//! runs and where it began are kept with the turn's workflow): their
//! events reach its host as they are stored, and their held calls can be
//! decided there too. The core session does the rest (see `keel_core`'s `elsewhere`). It must
//! not know the wire protocols.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use keel_core::{RemoteEvents, RemoteRun, RemoteTool, RunningThere, RunsElsewhere, Watched};
use keel_core::{SessionEvent, TryJoin};
use keel_session_store::{EventLog, StoredEvent};
use keel_temporal::{FrontEndScheme, FrontEndTool, TemporalClient, TemporalSettings, TurnInput};
use tokio::sync::mpsc;
use tokio_util::task::AbortOnDropHandle;

use super::following::{TurnEvents, interrupt, outcome_of, tell_worker, tell_worker_surely};
use super::{LogRecord, Logged};

/// Runs sessions' runs on the cluster's workers; see the module docs.
pub struct OnWorkers {
    client: TemporalClient,
    log: EventLog,
    /// The model id to ask the workers for (`None`: theirs).
    model: Option<String>,
    /// The turns this process started: their runs relay their events, so
    /// the watches leave them out.
    own: Arc<Mutex<OwnTurns>>,
}

impl OnWorkers {
    /// `None` when sessions are not in the shared database.
    pub async fn connect(
        settings: &TemporalSettings,
        model: Option<String>,
    ) -> anyhow::Result<Option<Self>> {
        let Some(log) = EventLog::shared() else {
            return Ok(None);
        };
        let client =
            TemporalClient::connect(settings, &crate::cluster::identity("front-end")).await?;
        Ok(Some(Self {
            client,
            log,
            model,
            own: Arc::default(),
        }))
    }
}

#[async_trait::async_trait]
impl RunsElsewhere for OnWorkers {
    async fn run(&self, run: RemoteRun, events: &dyn RemoteEvents) -> Result<(), String> {
        // Where the turn's events will begin, asked again while the
        // database is away (a restart must not fail the prompt).
        let started = tokio::time::Instant::now();
        let mut pause = Duration::from_millis(200);
        let after = loop {
            match self.log.last_seq(&run.session_id).await {
                Ok(after) => break after,
                Err(e) if started.elapsed() < START_PATIENCE => {
                    tracing::warn!(error = %e, "cannot read the session's event log yet; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(e) => return Err(e.to_string()),
            }
        };
        let turn = TurnInput {
            session_id: run.session_id.clone(),
            cwd: run.cwd.display().to_string(),
            turn_id: format!("turn-{}", uuid::Uuid::now_v7()),
            prompt: run.prompt,
            base_leaf: run.base_leaf,
            log_from: after,
            // The session's model as the host set it, else the one this
            // front-end was started with.
            model: run.model.clone().or_else(|| self.model.clone()),
            thinking: Some(run.thinking.as_str().to_owned()),
            approval_mode: run.approval_mode.map(|m| m.to_string()),
            tools: run.tools.iter().map(front_end_tool).collect(),
            host_schemes: run
                .host_schemes
                .iter()
                .map(|(scheme, how)| FrontEndScheme {
                    scheme: scheme.clone(),
                    writable: how.writable,
                    immutable: how.immutable,
                })
                .collect(),
        };
        lock(&self.own).add(turn.turn_id.clone());
        start_surely(&self.client, &self.log, &turn).await?;
        events.started().await;
        tracing::info!(session = %turn.session_id, "the run goes to a worker");
        let mut turn_events = TurnEvents::follow(&self.client, &self.log, &turn);
        let mut interrupted = false;
        // The tool calls the worker asked this front-end to run.
        let mut running = FuturesUnordered::new();
        loop {
            tokio::select! {
                stored = turn_events.next() => match stored.map_err(|e| format!("{e:#}"))? {
                    Some(stored) => match Logged::read(&stored.event) {
                        Ok(Logged::Record(LogRecord::ToolCall { call_id, tool, args }))
                            if stored.turn == turn.turn_id =>
                        {
                            running.push(run_tool(&self.log, &turn, events, call_id, tool, args));
                        }
                        _ => relay(events, &stored).await,
                    },
                    None => return Ok(()),
                },
                Some(()) = running.next(), if !running.is_empty() => {}
                () = run.interrupt.cancelled(), if !interrupted => {
                    interrupted = true;
                    interrupt(&self.log, &turn).await;
                }
            }
        }
    }

    async fn running(&self, session_id: &str) -> Option<RunningThere> {
        match self.client.running_turn(session_id).await {
            Ok(running) => running.map(|r| RunningThere {
                base_leaf: r.base_leaf,
            }),
            Err(e) => {
                tracing::warn!(session = %session_id, error = %e, "cannot ask whether the session runs a turn");
                None
            }
        }
    }

    async fn run_at(&self, session_id: &str, log_seq: u64) -> Option<RunningThere> {
        // Turns of a session run one after another: the latest one began
        // before `log_seq`, so the event is its.
        match self.client.latest_turn(session_id).await {
            Ok(Some((turn, _))) if turn.log_from < log_seq => Some(RunningThere {
                base_leaf: turn.base_leaf,
            }),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(session = %session_id, error = %e, "cannot ask which turn stored an event");
                None
            }
        }
    }

    fn watch(&self, session_id: &str, seen: Option<u64>) -> Option<mpsc::Receiver<Watched>> {
        let (tx, rx) = mpsc::channel(WATCH_CAPACITY);
        let watch = Watch {
            client: self.client.clone(),
            log: self.log,
            own: self.own.clone(),
            session_id: session_id.to_owned(),
            seen,
            tx,
        };
        tokio::spawn(watch.run());
        Some(rx)
    }
}

/// How long starting a turn's workflow is tried again while Temporal
/// cannot be reached.
const START_PATIENCE: Duration = Duration::from_secs(60);

/// Starts `turn`'s workflow, trying again while Temporal cannot be reached
/// (a server restarting). A try whose answer was lost may have started it:
/// before each new try the session's running turn is looked at (ours:
/// started), and so is its event log (grown since the turn began: ours ran
/// and may have ended), so a turn is never started twice. A front-end that
/// gave up while its workflow ran would end the turn here as failed while
/// the worker stored it, and begin its next run after a stale leaf.
async fn start_surely(
    client: &TemporalClient,
    log: &EventLog,
    turn: &TurnInput,
) -> Result<(), String> {
    let started = tokio::time::Instant::now();
    let mut pause = Duration::from_millis(200);
    let mut tried = false;
    loop {
        if tried {
            match client.running_turn(&turn.session_id).await {
                Ok(Some(running)) if running.turn_id == turn.turn_id => return Ok(()),
                Ok(Some(_)) => {
                    return Err(keel_temporal::Error::Busy(turn.session_id.clone()).to_string());
                }
                Ok(None) => {
                    if log
                        .last_seq(&turn.session_id)
                        .await
                        .is_ok_and(|last| last > turn.log_from)
                    {
                        return Ok(());
                    }
                }
                Err(_) => {}
            }
        }
        match client.start_turn(turn).await {
            Ok(()) => return Ok(()),
            Err(keel_temporal::Error::Server(e)) if started.elapsed() < START_PATIENCE => {
                tracing::warn!(error = %e, session = %turn.session_id, "cannot start the turn on Temporal yet; trying again");
                tried = true;
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The ids of the last [`OWN_TURNS_KEPT`] turns this process started. A
/// watch is never that many turns behind, so older ones are let go (the
/// process does not grow with the turns it runs).
#[derive(Default)]
struct OwnTurns {
    ids: HashSet<String>,
    order: VecDeque<String>,
}

/// How many of its own turns a front-end remembers.
const OWN_TURNS_KEPT: usize = 1024;

impl OwnTurns {
    fn add(&mut self, id: String) {
        if self.ids.insert(id.clone()) {
            self.order.push_back(id);
        }
        while self.order.len() > OWN_TURNS_KEPT {
            if let Some(old) = self.order.pop_front() {
                self.ids.remove(&old);
            }
        }
    }

    fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a session hears of the turns other front-ends started.
const WATCH_CAPACITY: usize = 64;

/// Follows one session's log for the turns other front-ends started: from
/// where the running one began (a session opened mid-turn sees it from
/// its start), else from the log's end; for a host that has seen the log
/// up to `seen`, the events after that (the calls held before it that are
/// still held are offered again).
struct Watch {
    client: TemporalClient,
    log: EventLog,
    own: Arc<Mutex<OwnTurns>>,
    session_id: String,
    seen: Option<u64>,
    tx: mpsc::Sender<Watched>,
}

impl Watch {
    async fn run(self) {
        let Some(Start { from, seen, last }) = self.start().await else {
            return;
        };
        // What ended between the session's read and this start is in the
        // log before `last`, never passed on: the session is read again
        // now, or this front-end would start its next run after a stale
        // leaf (forking the session).
        if !self.send(Watched::Ended { end: None }).await {
            return;
        }
        let mut follower = self.log.follow(&self.session_id, from);
        // The calls held before the watch began are offered once what was
        // stored by then has been read, if they are still held: a host
        // that opens the session is asked what is still asked, not told
        // of every call decided before.
        let mut catching_up = (from < last).then(Vec::new);
        // The first place read, checked against what the host saw.
        let mut gap_after = (seen > 0).then_some(from);
        // A turn's last `agent_end` waits until its workflow has ended (a
        // try that died wrote one, and the next try goes on).
        let mut tries: TryJoin<String> = TryJoin::default();
        // Waits for that workflow's end; dropped (aborted) when a later
        // event settles the question first, or with the watch.
        let mut ended: Option<AbortOnDropHandle<()>> = None;
        loop {
            let stored = tokio::select! {
                stored = follower.recv() => stored,
                _ = async { if let Some(e) = ended.as_mut() { let _ = e.await; } }, if ended.is_some() => {
                    ended = None;
                    if !self.send(Watched::Ended { end: tries.take().map(Box::new) }).await {
                        return;
                    }
                    continue;
                }
            };
            let Some(stored) = stored else { return };
            if gap_after.take().is_some_and(|seen| stored.seq > seen + 1) {
                tracing::warn!(session = %self.session_id, seen, next = stored.seq, "events the host did not see are gone from the log (a later turn ended); the session holds what they produced");
            }
            let history = stored.seq <= last;
            if let Some(held) = catching_up.as_mut() {
                if history && let Some(watched) = for_host(&stored) {
                    still_held(held, &watched);
                }
                if stored.seq >= last {
                    for held in catching_up.take().into_iter().flatten() {
                        if !self.send(held).await {
                            return;
                        }
                    }
                }
            }
            // The host saw it.
            if stored.seq <= seen {
                continue;
            }
            if lock(&self.own).contains(&stored.turn) {
                continue;
            }
            let Some(watched) = for_host(&stored) else {
                continue;
            };
            let watched = match watched {
                // Read above.
                Watched::Held { .. } | Watched::Resolved { .. } if history => continue,
                w @ (Watched::Held { .. } | Watched::Resolved { .. }) => w,
                Watched::Ended { .. } => continue,
                Watched::Event(event) => {
                    let joined = tries.next(stored.turn, *event);
                    if let Some(end) = joined.ended {
                        // That was its run's end: no need to wait for it.
                        ended = None;
                        let end = Some(Box::new(end));
                        if !self.send(Watched::Ended { end }).await {
                            return;
                        }
                    }
                    // Wait for the workflow's end while an end is held.
                    if !tries.holds() {
                        ended = None;
                    } else if ended.is_none() {
                        let (client, session_id) = (self.client.clone(), self.session_id.clone());
                        ended = Some(AbortOnDropHandle::new(tokio::spawn(async move {
                            let _ = outcome_of(&client, &session_id).await;
                        })));
                    }
                    let Some(event) = joined.event else { continue };
                    Watched::Event(Box::new(event))
                }
            };
            if !self.send(watched).await {
                return;
            }
        }
    }

    /// Where to follow from; `None` when the log cannot be read.
    /// Where to begin, asked again while the database is away (a watch
    /// that gave up would leave this front-end's copy of the session stale
    /// for good); `None` once the session is closed here.
    async fn start(&self) -> Option<Start> {
        let mut pause = Duration::from_millis(100);
        let last = loop {
            match self.log.last_seq(&self.session_id).await {
                Ok(last) => break last,
                Err(e) => {
                    tracing::warn!(session = %self.session_id, error = %e, "cannot watch the session's turns yet; trying again");
                    tokio::select! {
                        () = self.tx.closed() => return None,
                        () = tokio::time::sleep(pause) => {}
                    }
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
        };
        if self.seen.is_some_and(|seen| seen > last) {
            tracing::warn!(session = %self.session_id, seen = ?self.seen, last, "the host says it saw more of the log than it holds; following from its end");
        }
        let running = match self.client.running_turn(&self.session_id).await {
            Ok(Some(running)) if !lock(&self.own).contains(&running.turn_id) => {
                Some(running.log_from)
            }
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(session = %self.session_id, error = %e, "cannot ask whether the session runs a turn; watching from now");
                None
            }
        };
        Some(Start::of(last, running, self.seen))
    }

    async fn send(&self, watched: Watched) -> bool {
        self.tx.send(watched).await.is_ok()
    }
}

/// Where a watch begins.
#[derive(Debug, PartialEq)]
struct Start {
    /// It follows the log after this place.
    from: u64,
    /// The host has seen the log up to here (0: nothing of it).
    seen: u64,
    /// The log's end when the watch began.
    last: u64,
}

impl Start {
    /// For a log that ends at `last`, a turn of another front-end running
    /// since `running` (where its events begin), and a host that has seen
    /// the log up to `seen`: the running turn from its start, else from
    /// the log's end; a host that reconnects also gets what it missed of
    /// a turn that ended meanwhile. A host that claims more than the log
    /// holds has seen it all.
    fn of(last: u64, running: Option<u64>, seen: Option<u64>) -> Self {
        let seen_up_to = seen.map_or(0, |s| s.min(last));
        let from = running.map_or(last, |r| r.min(last));
        let from = match seen {
            Some(_) => from.min(seen_up_to),
            None => from,
        };
        Self {
            from,
            seen: seen_up_to,
            last,
        }
    }
}

/// Keeps `held` to the calls held by the records read so far.
fn still_held(held: &mut Vec<Watched>, watched: &Watched) {
    match watched {
        Watched::Held { .. } => held.push(watched.clone()),
        Watched::Resolved { request, .. } => {
            held.retain(|h| !matches!(h, Watched::Held { request: r, .. } if r.id == request.id))
        }
        Watched::Event(_) | Watched::Ended { .. } => {}
    }
}

/// What a stored row is to a front-end's host: a call held there, the
/// end of its wait, or an event at its place in the log; `None` for the
/// records between a worker and the front-end that started the turn (its
/// tool calls and their beats and results, interrupts: only that
/// front-end acts on them) and for a row this keel cannot read.
fn for_host(stored: &StoredEvent) -> Option<Watched> {
    match Logged::read(&stored.event) {
        Ok(Logged::Record(LogRecord::ApprovalRequest { request, args })) => {
            Some(Watched::Held { request, args })
        }
        Ok(Logged::Record(LogRecord::ApprovalResolved {
            request,
            resolution,
        })) => Some(Watched::Resolved {
            request,
            resolution,
        }),
        Ok(Logged::Record(
            LogRecord::InterruptRequested
            | LogRecord::ToolCall { .. }
            | LogRecord::ToolRunning { .. }
            | LogRecord::ToolResult { .. },
        )) => None,
        Ok(Logged::Event(event)) => Some(Watched::Event(Box::new(SessionEvent {
            event: *event,
            log_seq: Some(stored.seq),
        }))),
        Err(e) => {
            tracing::warn!(seq = stored.seq, error = %e, "an event this keel cannot read");
            None
        }
    }
}

/// What a worker is told of a tool this front-end runs.
fn front_end_tool(tool: &RemoteTool) -> FrontEndTool {
    FrontEndTool {
        name: tool.spec.name.clone(),
        description: tool.spec.description.clone(),
        parameters: tool.spec.parameters.clone(),
        class: tool.hints.class.clone(),
        read_only: tool.hints.read_only,
        destructive: tool.hints.destructive,
        open_world: tool.hints.open_world,
        server: tool.hints.server.clone(),
    }
}

/// Runs the worker's call of one of this front-end's tools here and puts
/// the answer in the log, where the worker waits for it.
async fn run_tool(
    log: &EventLog,
    turn: &TurnInput,
    events: &dyn RemoteEvents,
    call_id: String,
    tool: String,
    args: serde_json::Value,
) {
    tracing::info!(tool = %tool, call = %call_id, "running a tool for the worker's turn");
    let run = events.run_tool(&call_id, &tool, args);
    tokio::pin!(run);
    // The worker takes silence for a front-end that went away.
    let mut beat = tokio::time::interval(super::proxy::RUNNING_BEAT);
    let out = loop {
        tokio::select! {
            out = &mut run => break out,
            _ = beat.tick() => {
                let running = LogRecord::ToolRunning { call_id: call_id.clone() };
                if let Err(e) = tell_worker(log, turn, &running).await {
                    tracing::debug!(error = %format!("{e:#}"), "cannot tell the worker the call still runs");
                }
            }
        }
    };
    let record = LogRecord::ToolResult {
        call_id: call_id.clone(),
        result: out.result,
        is_error: out.is_error,
    };
    if let Err(e) = tell_worker_surely(log, turn, &record).await {
        tracing::warn!(error = %format!("{e:#}"), "cannot give the worker the tool's result");
    }
}

/// One stored event, sent on as what it is (the run's loop answers the
/// worker's tool calls).
async fn relay(events: &dyn RemoteEvents, stored: &StoredEvent) {
    match for_host(stored) {
        Some(Watched::Held { request, args }) => events.approval_requested(&request, &args).await,
        Some(Watched::Resolved {
            request,
            resolution,
        }) => events.approval_resolved(&request, &resolution).await,
        Some(Watched::Event(event)) => events.event(event.event, stored.seq).await,
        Some(Watched::Ended { .. }) | None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_begins_where_the_host_needs_it_to() {
        let start = |from, seen, last| Start { from, seen, last };
        // Nothing runs, nothing seen: from the log's end.
        assert_eq!(Start::of(40, None, None), start(40, 0, 40));
        // Opened mid-turn: from the turn's start.
        assert_eq!(Start::of(40, Some(30), None), start(30, 0, 40));
        // A host that saw part of the running turn: from the turn's start
        // (its calls still held are read), showing what follows 35.
        assert_eq!(Start::of(40, Some(30), Some(35)), start(30, 35, 40));
        // A host that saw up to before the running turn, or up to a turn
        // that has ended since: from what it saw.
        assert_eq!(Start::of(40, Some(30), Some(20)), start(20, 20, 40));
        assert_eq!(Start::of(40, None, Some(25)), start(25, 25, 40));
        // A host that claims more than the log holds has seen it all.
        assert_eq!(Start::of(40, None, Some(99)), start(40, 40, 40));
        assert_eq!(Start::of(40, Some(30), Some(99)), start(30, 40, 40));
        // A running turn said to begin past the log's end (its first rows
        // not yet readable) is followed from the end.
        assert_eq!(Start::of(40, Some(45), None), start(40, 0, 40));
    }

    #[test]
    fn a_front_end_remembers_its_last_turns_only() {
        let mut own = OwnTurns::default();
        for i in 0..OWN_TURNS_KEPT + 10 {
            own.add(format!("turn-{i}"));
        }
        own.add("turn-20".to_owned());
        assert!(!own.contains("turn-0"));
        assert!(!own.contains("turn-9"));
        assert!(own.contains("turn-10"));
        assert!(own.contains(&format!("turn-{}", OWN_TURNS_KEPT + 9)));
        assert_eq!(own.ids.len(), OWN_TURNS_KEPT);
        assert_eq!(own.order.len(), OWN_TURNS_KEPT);
    }
}
