//! What the sandbox adds to one command: `bash -c true` through the
//! local process runner, unconfined and behind `workspace-write` (with a
//! `.git` kept read-only, so the mount namespace is made), network off.
//! Run with `cargo bench -p keel-sandbox --bench sandbox`.

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use keel_protocol::{SandboxMode, SandboxPolicy};
use keel_sandbox::Sandbox;
use keel_tools::{LocalProcessRunner, ProcessRequest, ProcessRunner, SandboxSpec};
use tokio_util::sync::CancellationToken;

fn bench(c: &mut Criterion) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    let ws = dir.path().to_path_buf();
    let _ = std::fs::create_dir_all(ws.join(".git"));
    let runner = LocalProcessRunner::confined(Arc::new(Sandbox::new(Vec::new())));
    let request = |sandbox: Option<SandboxSpec>| ProcessRequest {
        command: "true".to_owned(),
        cwd: ws.clone(),
        env: Vec::new(),
        timeout: None,
        sandbox,
    };
    let confined = Some(SandboxSpec::new(
        SandboxPolicy::of(SandboxMode::WorkspaceWrite),
        &ws,
    ));
    let mut group = c.benchmark_group("bash_true");
    for (name, spec) in [("unconfined", None), ("workspace_write", confined)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(async {
                    let mut sink = |_: &[u8]| {};
                    runner
                        .run(request(spec.clone()), CancellationToken::new(), &mut sink)
                        .await
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
