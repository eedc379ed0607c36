//! A harness that runs the real `keel` binary as a child process, with
//! timeouts on everything: run-to-completion ([`KeelCommand::run`]) or
//! interactive ([`KeelCommand::spawn`]: read stdout/stderr lines as they come,
//! write stdin, send signals).
//!
//! Every command gets its own `KEEL_HOME` (a temp dir unless given) and a
//! scrubbed environment (no `KEEL_*`, no provider keys from the developer's
//! shell), so tests never read the user's configuration.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// Default limit for a whole run.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// Environment variables removed from every child so the developer's own
/// configuration cannot leak into a test.
const SCRUBBED_ENV: &[&str] = &[
    "KEEL_HOME",
    "KEEL_MODEL",
    "KEEL_PROVIDER",
    "KEEL_BASE_URL",
    "KEEL_API_KEY_ENV",
    "KEEL_THINKING",
    "KEEL_LOG_FILE",
    "KEEL_APPROVALS_DATABASE_URL",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "RUST_LOG",
    "KEEL_EXEC_JSON_FORMAT",
];

/// How to start `keel`.
#[derive(Debug, Clone)]
pub struct KeelCommand {
    bin: PathBuf,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    stdin: Option<String>,
    timeout: Duration,
}

/// The result of a finished run.
#[derive(Debug, Clone)]
pub struct KeelOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl KeelOutput {
    /// The exit code (`None` when killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }
    /// stdout parsed as JSON lines (non-JSON lines are an error).
    pub fn json_lines(&self) -> anyhow::Result<Vec<serde_json::Value>> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).with_context(|| format!("not JSON: {l}")))
            .collect()
    }
}

impl KeelCommand {
    /// `bin` is usually `env!("CARGO_BIN_EXE_keel")`.
    pub fn new(bin: impl Into<PathBuf>) -> Self {
        Self {
            bin: bin.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            stdin: None,
            timeout: DEFAULT_RUN_TIMEOUT,
        }
    }
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }
    /// Sets `KEEL_HOME`.
    pub fn home(self, home: &Path) -> Self {
        self.env("KEEL_HOME", home.display().to_string())
    }
    pub fn cwd(mut self, dir: &Path) -> Self {
        self.cwd = Some(dir.to_path_buf());
        self
    }
    /// Text written to stdin (then closed). Without it stdin is null.
    pub fn stdin(mut self, text: impl Into<String>) -> Self {
        self.stdin = Some(text.into());
        self
    }
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn command(&self, piped_stdin: bool) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.args(&self.args);
        for key in SCRUBBED_ENV {
            cmd.env_remove(key);
        }
        cmd.envs(&self.env);
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        cmd.stdin(if piped_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.kill_on_drop(true);
        cmd
    }

    /// Runs to completion; fails (after killing the child) on timeout.
    pub async fn run(self) -> anyhow::Result<KeelOutput> {
        let mut cmd = self.command(self.stdin.is_some());
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", self.bin.display()))?;
        if let (Some(text), Some(mut stdin)) = (&self.stdin, child.stdin.take()) {
            stdin.write_all(text.as_bytes()).await?;
            drop(stdin);
        }
        match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Ok(out) => {
                let out = out?;
                Ok(KeelOutput {
                    status: out.status,
                    stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                    stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                })
            }
            Err(_) => bail!(
                "keel {:?} did not finish within {:?}",
                self.args,
                self.timeout
            ),
        }
    }

    /// Starts the child for interactive use.
    pub async fn spawn(self) -> anyhow::Result<KeelChild> {
        let mut cmd = self.command(true);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", self.bin.display()))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let stderr = child.stderr.take().context("no stderr")?;
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        let (err_tx, err_rx) = mpsc::unbounded_channel();
        tokio::spawn(pump_lines(stdout, out_tx));
        tokio::spawn(pump_lines(stderr, err_tx));
        let stdin = child.stdin.take();
        Ok(KeelChild {
            child,
            stdin,
            stdout: out_rx,
            stderr: err_rx,
            stdout_seen: Vec::new(),
            stderr_seen: Vec::new(),
            timeout: self.timeout,
        })
    }
}

async fn pump_lines<R: tokio::io::AsyncRead + Unpin>(reader: R, tx: mpsc::UnboundedSender<String>) {
    let mut lines = BufReader::new(reader).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if tx.send(line).is_err() {
            break;
        }
    }
}

/// A running `keel` child.
pub struct KeelChild {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: mpsc::UnboundedReceiver<String>,
    stderr: mpsc::UnboundedReceiver<String>,
    /// Every stdout line read so far.
    pub stdout_seen: Vec<String>,
    /// Every stderr line read so far.
    pub stderr_seen: Vec<String>,
    timeout: Duration,
}

impl KeelChild {
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Writes one line (a newline is added) to stdin.
    pub async fn send_line(&mut self, line: &str) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("stdin is closed")?;
        stdin.write_all(line.as_bytes()).await?;
        stdin.write_all(b"\n").await?;
        stdin.flush().await?;
        Ok(())
    }

    /// Writes raw bytes to stdin.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("stdin is closed")?;
        stdin.write_all(bytes).await?;
        stdin.flush().await?;
        Ok(())
    }

    /// Closes stdin.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next stdout line, `None` when none came within `timeout`; an
    /// error once stdout has closed (the process ended). Lines read this
    /// way are not kept in [`Self::stdout_seen`] (a long-running client
    /// keeps its own).
    pub async fn next_stdout(&mut self, timeout: Duration) -> anyhow::Result<Option<String>> {
        match tokio::time::timeout(timeout, self.stdout.recv()).await {
            Ok(Some(line)) => Ok(Some(line)),
            Ok(None) => bail!("stdout closed"),
            Err(_) => Ok(None),
        }
    }

    /// Reads stdout lines until one satisfies `pred`; returns it.
    pub async fn wait_for_stdout(
        &mut self,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> anyhow::Result<String> {
        wait_line(
            &mut self.stdout,
            &mut self.stdout_seen,
            timeout,
            pred,
            "stdout",
        )
        .await
    }

    /// Reads stderr lines until one satisfies `pred`; returns it.
    pub async fn wait_for_stderr(
        &mut self,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> anyhow::Result<String> {
        wait_line(
            &mut self.stderr,
            &mut self.stderr_seen,
            timeout,
            pred,
            "stderr",
        )
        .await
    }

    /// Sends a signal (e.g. `"INT"`, `"TERM"`, `"KILL"`) with `kill(1)`.
    pub async fn signal(&self, name: &str) -> anyhow::Result<()> {
        let pid = self.child.id().context("child already exited")?;
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(pid.to_string())
            .status()
            .await?;
        if !status.success() {
            bail!("kill -{name} {pid} failed");
        }
        Ok(())
    }

    /// Waits for exit, draining the rest of stdout and stderr.
    pub async fn wait(mut self) -> anyhow::Result<KeelOutput> {
        self.stdin = None;
        let status = match tokio::time::timeout(self.timeout, self.child.wait()).await {
            Ok(s) => s?,
            Err(_) => {
                let _ = self.child.kill().await;
                while let Ok(Some(line)) =
                    tokio::time::timeout(Duration::from_secs(2), self.stderr.recv()).await
                {
                    self.stderr_seen.push(line);
                }
                let tail = self.stderr_seen.len().saturating_sub(40);
                bail!(
                    "keel did not exit within {:?}; its stderr ended with:\n{}",
                    self.timeout,
                    join_lines(&self.stderr_seen[tail..])
                );
            }
        };
        while let Ok(Some(line)) =
            tokio::time::timeout(Duration::from_secs(5), self.stdout.recv()).await
        {
            self.stdout_seen.push(line);
        }
        while let Ok(Some(line)) =
            tokio::time::timeout(Duration::from_secs(5), self.stderr.recv()).await
        {
            self.stderr_seen.push(line);
        }
        Ok(KeelOutput {
            status,
            stdout: join_lines(&self.stdout_seen),
            stderr: join_lines(&self.stderr_seen),
        })
    }
}

fn join_lines(lines: &[String]) -> String {
    let mut s = lines.join("\n");
    if !s.is_empty() {
        s.push('\n');
    }
    s
}

async fn wait_line(
    rx: &mut mpsc::UnboundedReceiver<String>,
    seen: &mut Vec<String>,
    timeout: Duration,
    pred: impl Fn(&str) -> bool,
    what: &str,
) -> anyhow::Result<String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(line)) => {
                seen.push(line.clone());
                if pred(&line) {
                    return Ok(line);
                }
            }
            Ok(None) => bail!(
                "{what} closed before the expected line; saw:\n{}",
                seen.join("\n")
            ),
            Err(_) => bail!(
                "no matching {what} line within {timeout:?}; saw:\n{}",
                seen.join("\n")
            ),
        }
    }
}
