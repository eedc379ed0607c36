//! The soak itself: the cluster, the clients, the chaos, the checks.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use keel_test_support::{KeelChild, MockModelServer};
use serde_json::json;

use super::checks::{figures, violations};
use super::client::{Machine, Sent, Transcript, app_server_client};
use super::rpc_client::rpc_client;
use super::{Rng, Shared};
use crate::suite::cluster::durable::Cluster;

const WORKERS: usize = 3;
/// Threads each app-server client keeps busy.
const THREADS_PER_CLIENT: usize = 2;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// A worker of machine `m`, once it polls.
async fn worker(m: &Machine) -> KeelChild {
    loop {
        let (cmd, log) = m.keel_logged();
        let spawned = cmd
            .env("KEEL_BASE_URL", &m.base_url)
            .env("KEEL_MODEL", "mock-model")
            .arg("worker")
            .spawn()
            .await;
        if let Ok(w) = spawned {
            // It logs to its file: polling once the file says so.
            let polling = keel_test_support::wait_until(Duration::from_secs(60), || {
                std::fs::read_to_string(&log).is_ok_and(|t| t.contains("the worker is polling"))
            })
            .await;
            if polling.is_ok() {
                return w;
            }
            let _ = w.signal("KILL").await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cluster_keeps_every_promise_under_chaos() {
    let Some(mut c) = Cluster::start(Duration::from_secs(600)).await else {
        return;
    };
    let secs = env_u64("KEEL_SOAK_SECS").unwrap_or(40);
    let seed = env_u64("KEEL_SOAK_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    eprintln!("[soak] {secs} s of turns, seed {seed}");
    let mut rng = Rng::new(seed);
    let mock = Arc::new(MockModelServer::start().await);
    let ws = tempfile::tempdir().unwrap();
    let rpc_ws = tempfile::tempdir().unwrap();
    let homes: Vec<tempfile::TempDir> = (0..WORKERS + 3)
        .map(|_| tempfile::tempdir().unwrap())
        .collect();
    let (url, temporal) = (c.url.clone(), c.temporal.address());
    let logs = tempfile::tempdir().unwrap();
    let machine = |i: usize, ws: &std::path::Path| Machine {
        name: format!("m{i}"),
        logs: logs.path().to_owned(),
        bin: env!("CARGO_BIN_EXE_keel").to_owned(),
        home: homes[i].path().to_owned(),
        ws: ws.to_owned(),
        url: url.clone(),
        temporal: temporal.clone(),
        base_url: mock.base_url(),
    };
    let worker_machines: Vec<Machine> = (0..WORKERS).map(|i| machine(i, ws.path())).collect();
    let mut workers = Vec::new();
    for m in &worker_machines {
        workers.push(worker(m).await);
    }
    let shared = Arc::new(Shared::default());
    let mut clients = Vec::new();
    for (n, name) in ["a", "b"].iter().enumerate() {
        clients.push(tokio::spawn(app_server_client(
            (*name).to_owned(),
            machine(WORKERS + n, ws.path()),
            mock.clone(),
            shared.clone(),
            THREADS_PER_CLIENT,
            rng.next(),
        )));
    }
    clients.push(tokio::spawn(rpc_client(
        machine(WORKERS + 2, rpc_ws.path()),
        mock.clone(),
        shared.clone(),
        rng.next(),
    )));

    // Calm first, then chaos until the end.
    let started = Instant::now();
    let calm = Duration::from_secs(secs / 4);
    let end = Duration::from_secs(secs);
    tokio::time::sleep(calm).await;
    shared.chaos.store(true, Ordering::SeqCst);
    let mut faults: HashMap<&str, usize> = HashMap::new();
    while started.elapsed() < end {
        tokio::time::sleep(Duration::from_millis(2_000 + rng.below(3_000))).await;
        match rng.below(4) {
            0 => {
                let i = rng.below(WORKERS as u64) as usize;
                let _ = workers[i].signal("KILL").await;
                tokio::time::sleep(Duration::from_millis(500)).await;
                workers[i] = worker(&worker_machines[i]).await;
                *faults.entry("worker killed").or_default() += 1;
            }
            1 => {
                let pids = shared.pids();
                if !pids.is_empty() {
                    let (_, pid) = &pids[rng.below(pids.len() as u64) as usize];
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(*pid as i32),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                    *faults.entry("app-server front-end killed").or_default() += 1;
                }
            }
            2 => {
                c.pg.crash_and_restart().await;
                *faults
                    .entry("PostgreSQL crashed and restarted")
                    .or_default() += 1;
            }
            _ => {
                c.temporal.kill();
                tokio::time::sleep(Duration::from_millis(500 + rng.below(1_500))).await;
                c.temporal.restart().unwrap();
                *faults.entry("Temporal killed and restarted").or_default() += 1;
            }
        }
    }
    shared.stop.store(true, Ordering::SeqCst);
    let mut sent: Vec<Sent> = Vec::new();
    let mut transcripts: Vec<Transcript> = Vec::new();
    for client in clients {
        let (s, t) = tokio::time::timeout(Duration::from_secs(400), client)
            .await
            .expect("a client never finished its last turn")
            .unwrap();
        sent.extend(s);
        transcripts.extend(t);
    }

    // Read every thread back through a fresh front-end.
    let reader = machine(WORKERS, ws.path());
    let mut threads = HashMap::new();
    let ids: std::collections::BTreeSet<String> = sent
        .iter()
        .map(|s| s.thread.clone())
        .filter(|t| !t.is_empty())
        .collect();
    let mut s = crate::suite::app_server::AppServer::start(reader.keel().args([
        "app-server",
        "--base-url",
        &reader.base_url,
        "--model",
        "mock-model",
    ]))
    .await;
    s.initialize(false).await;
    for id in ids {
        let read = s
            .ok("thread/read", json!({"threadId": id, "includeTurns": true}))
            .await;
        threads.insert(id, read);
    }
    s.close().await;

    let bad = violations(&sent, &threads, &transcripts, &[ws.path(), rpc_ws.path()]);
    let acked = sent.iter().filter(|s| s.acked).count();
    let completed = sent
        .iter()
        .filter(|s| s.ended.as_deref() == Some("completed"))
        .count();
    let held = sent.iter().filter(|s| s.held && s.decided).count();
    eprintln!(
        "[soak] seed {seed}: {} prompts ({acked} acknowledged, {completed} completed, {held} decided after a hold) over {} connections; faults: {faults:?}\n{}",
        sent.len(),
        transcripts.len(),
        figures(&sent)
    );
    if !bad.is_empty() {
        // Kept for a look: m0–m2 the workers, m3/m4 the app-server
        // clients' front-ends, m5 the RPC one.
        let kept = logs.keep();
        keep_record(&kept, &sent, &transcripts, &threads);
        eprintln!(
            "[soak] the processes' logs, each connection's frames, the prompts sent and the threads read back are in {}",
            kept.display()
        );
    }
    assert!(
        bad.is_empty(),
        "seed {seed}: {} violations:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(
        completed >= 6,
        "too few turns completed to judge: {completed}"
    );
    for w in workers {
        let _ = w.signal("KILL").await;
    }
}

/// Writes what the clients saw beside the processes' logs, for a look at
/// a violation: one file of frames per connection, the prompts sent, and
/// each thread as read back.
fn keep_record(
    dir: &std::path::Path,
    sent: &[Sent],
    transcripts: &[Transcript],
    threads: &HashMap<String, serde_json::Value>,
) {
    for (i, frames) in transcripts.iter().enumerate() {
        let lines: Vec<String> = frames.iter().map(|f| f.to_string()).collect();
        let _ = std::fs::write(dir.join(format!("connection-{i}.jsonl")), lines.join("\n"));
    }
    let sent: Vec<String> = sent.iter().map(|s| format!("{s:?}")).collect();
    let _ = std::fs::write(dir.join("sent.txt"), sent.join("\n"));
    let _ = std::fs::write(
        dir.join("threads.json"),
        serde_json::to_string_pretty(threads).unwrap_or_default(),
    );
}
