//! A chaos soak of the cluster: 3 workers, 2 app-server front-ends and
//! 1 RPC front-end on one PostgreSQL and one Temporal dev server, on
//! loopback, running turns over many threads against the mock model (tool
//! calls, calls held for approval and decided by the client or by
//! `keel approvals approve` from another process, interrupts), first
//! calmly, then while workers and app-server front-ends are killed with
//! SIGKILL and PostgreSQL and Temporal crash and restart every few
//! seconds. Then a checker reads every thread back and every client's
//! transcript: no acknowledged prompt lost or stored twice, no tool run
//! twice, no decided call lost, no notification twice or out of order on
//! a connection, every turn ended. It prints the p50/p99 latencies
//! (prompt → first delta, decision → tool start) with and without chaos.
//!
//! `KEEL_SOAK_SECS` (default 40, the short form CI runs) sets how long
//! turns are started; `KEEL_SOAK_SEED` replays a run's random choices
//! (each run prints its seed). Built only with the `temporal` feature:
//! `KEEL_SOAK_SECS=600 cargo test -p keel-cli --features temporal --test
//! all soak -- --nocapture` is the long form docs/deploy.md reports.

#![cfg(feature = "temporal")]
// The soak reports its progress and its figures on stderr.
#![allow(clippy::print_stderr)]

mod checks;
mod client;
mod rpc_client;
mod run;

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

/// What the soak's tasks share: when to stop starting turns, whether the
/// chaos has begun, and the front-ends' process ids (for the chaos).
#[derive(Default)]
pub struct Shared {
    pub stop: AtomicBool,
    pub chaos: AtomicBool,
    pids: Mutex<Vec<(String, u32)>>,
}

impl Shared {
    /// Keeps `pid` as the front-end of client `name`.
    pub fn set_pid(&self, name: &str, pid: u32) {
        let mut pids = self.pids.lock().unwrap();
        pids.retain(|(n, _)| n != name);
        pids.push((name.to_owned(), pid));
    }

    /// The front-ends' process ids.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.pids.lock().unwrap().clone()
    }
}

/// A small seeded generator (xorshift), so a run's choices can be
/// replayed from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
