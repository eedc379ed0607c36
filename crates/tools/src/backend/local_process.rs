//! The local process backend.
//!
//! Owns spawning `bash -c` on this machine: the child runs in its own process
//! group with stdin closed and stdout+stderr merged into one pipe; output is
//! streamed to a callback; on timeout or cancellation the whole group gets
//! SIGTERM, then SIGKILL after a short grace, and the child is always reaped.
//! The child's environment follows an [`EnvPolicy`] (secrets dropped). A
//! request with a confining [`SandboxSpec`](super::SandboxSpec) goes
//! through the runner's [`Confiner`]; with none configured it fails
//! instead of running unconfined. It must not know about tools or how
//! their output is formatted.

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::Child;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Confiner, ProcessExit, ProcessRequest, ProcessRunner};
use crate::child_env::EnvPolicy;
use crate::error::{Error, Result};

/// How long output is still collected after the shell exits while a
/// background process keeps the pipe open.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);
/// How long output is still collected after the group was killed.
const DRAIN_AFTER_KILL: Duration = Duration::from_millis(200);

/// [`ProcessRunner`] that spawns local processes.
#[derive(Debug, Clone)]
pub struct LocalProcessRunner {
    /// The shell binary (default `bash`, looked up on `PATH`).
    pub shell: PathBuf,
    /// Time between SIGTERM and SIGKILL when killing a process group.
    pub kill_grace: Duration,
    /// What the child's environment holds (secrets dropped by default).
    pub env: EnvPolicy,
    /// Confines requests that carry a sandbox spec (`None`: such a request
    /// fails).
    pub confiner: Option<Arc<dyn Confiner>>,
}

impl Default for LocalProcessRunner {
    fn default() -> Self {
        Self {
            shell: PathBuf::from("bash"),
            kill_grace: Duration::from_secs(1),
            env: EnvPolicy::configured(),
            confiner: None,
        }
    }
}

impl LocalProcessRunner {
    /// The default runner, confining through `confiner`.
    pub fn confined(confiner: Arc<dyn Confiner>) -> Self {
        Self {
            confiner: Some(confiner),
            ..Self::default()
        }
    }
}

/// Kills the process group with SIGKILL if the run is dropped midway.
struct GroupGuard {
    pgid: Pid,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
    }
}

enum Ending {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
}

#[async_trait::async_trait]
impl ProcessRunner for LocalProcessRunner {
    async fn run(
        &self,
        request: ProcessRequest,
        cancel: CancellationToken,
        on_output: &mut (dyn for<'b> FnMut(&'b [u8]) + Send),
    ) -> Result<ProcessExit> {
        if cancel.is_cancelled() {
            return Ok(ProcessExit {
                cancelled: true,
                ..Default::default()
            });
        }
        match tokio::fs::metadata(&request.cwd).await {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(Error::NotADirectory { path: request.cwd }),
            Err(e) => return Err(Error::io(&request.cwd, e)),
        }

        let (reader, writer) = std::io::pipe()?;
        let writer_err = writer.try_clone()?;
        let mut command = tokio::process::Command::new(&self.shell);
        command
            .arg("-c")
            .arg(&request.command)
            .current_dir(&request.cwd)
            .env_clear()
            .envs(self.env.child_env_now(&request.env, &request.cwd))
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(writer_err)
            .process_group(0)
            .kill_on_drop(true);
        if let Some(spec) = request.sandbox.as_ref().filter(|s| s.confines()) {
            match &self.confiner {
                Some(confiner) => confiner.confine(&mut command, spec)?,
                None => {
                    return Err(Error::Sandbox(
                        "no sandbox is configured for this process runner".into(),
                    ));
                }
            }
        }
        let spawned = command.spawn();
        // Close our copies of the pipe's write end so EOF arrives when the
        // children are done.
        drop(command);
        let mut child = spawned.map_err(|e| {
            Error::Failed(format!(
                "failed to start {}: {e}",
                self.shell.to_string_lossy()
            ))
        })?;
        let Some(pid) = child.id() else {
            return Err(Error::Failed(
                "the shell exited before it could be tracked".into(),
            ));
        };
        let pgid = Pid::from_raw(
            i32::try_from(pid)
                .map_err(|_| Error::Failed(format!("process id {pid} out of range")))?,
        );
        let mut guard = GroupGuard { pgid, armed: true };
        let mut output = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))?;

        let deadline = request.timeout.map(|t| Instant::now() + t);
        let mut buf = vec![0u8; 16 * 1024];
        let mut eof = false;
        let mut status: Option<ExitStatus> = None;
        let mut drain_until: Option<Instant> = None;

        let ending = loop {
            if let Some(status) = status
                && eof
            {
                break Ending::Exited(status);
            }
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break Ending::Cancelled,
                _ = sleep_until_opt(deadline) => break Ending::TimedOut,
                read = output.read(&mut buf), if !eof => match read {
                    Ok(0) => eof = true,
                    Ok(n) => on_output(&buf[..n]),
                    Err(e) => {
                        tracing::debug!(error = %e, "reading process output failed");
                        eof = true;
                    }
                },
                waited = child.wait(), if status.is_none() => {
                    let exited = waited.map_err(Error::Other)?;
                    status = Some(exited);
                    drain_until = Some(Instant::now() + DRAIN_AFTER_EXIT);
                }
                _ = sleep_until_opt(drain_until) => {
                    // A background process still holds the pipe: stop reading
                    // and leave it running, as a shell would.
                    if let Some(status) = status {
                        break Ending::Exited(status);
                    }
                }
            }
        };

        let exit = match ending {
            Ending::Exited(status) => {
                guard.armed = false;
                ProcessExit {
                    exit_code: status.code(),
                    signal: status.signal(),
                    ..Default::default()
                }
            }
            Ending::TimedOut | Ending::Cancelled => {
                let cancelled = matches!(ending, Ending::Cancelled);
                let status = match status {
                    Some(s) => Some(s),
                    None => kill_group(pgid, &mut child, self.kill_grace).await,
                };
                // A background child of an exited shell may still be alive.
                let _ = killpg(pgid, Signal::SIGKILL);
                guard.armed = false;
                if !cancelled && !eof {
                    drain(&mut output, &mut buf, on_output).await;
                }
                ProcessExit {
                    exit_code: None,
                    signal: status.and_then(|s| s.signal()),
                    timed_out: !cancelled,
                    cancelled,
                }
            }
        };
        Ok(exit)
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// SIGTERM to the group, wait for it to go (up to `grace`), then SIGKILL,
/// and reap the shell.
async fn kill_group(pgid: Pid, child: &mut Child, grace: Duration) -> Option<ExitStatus> {
    let _ = killpg(pgid, Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    let mut status = None;
    loop {
        if status.is_none()
            && let Ok(Some(s)) = child.try_wait()
        {
            status = Some(s);
        }
        // Signal 0 probes whether any member of the group is left.
        if status.is_some() && killpg(pgid, None).is_err() {
            break;
        }
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = killpg(pgid, Signal::SIGKILL);
    match status {
        Some(s) => Some(s),
        None => child.wait().await.ok(),
    }
}

/// Collects what is left in the pipe after a kill, briefly.
async fn drain(
    output: &mut pipe::Receiver,
    buf: &mut [u8],
    on_output: &mut (dyn for<'b> FnMut(&'b [u8]) + Send),
) {
    let deadline = Instant::now() + DRAIN_AFTER_KILL;
    loop {
        match tokio::time::timeout_at(deadline, output.read(buf)).await {
            Ok(Ok(n)) if n > 0 => on_output(&buf[..n]),
            _ => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn request(cwd: &Path, command: &str, timeout: Option<Duration>) -> ProcessRequest {
        ProcessRequest {
            command: command.to_owned(),
            cwd: cwd.to_path_buf(),
            env: vec![("KEEL_TEST_VAR".to_owned(), "hello".to_owned())],
            sandbox: None,
            timeout,
        }
    }

    async fn run_collect(req: ProcessRequest, cancel: CancellationToken) -> (ProcessExit, String) {
        let mut out = Vec::new();
        let mut cb = |chunk: &[u8]| out.extend_from_slice(chunk);
        let exit = tokio::time::timeout(
            Duration::from_secs(30),
            LocalProcessRunner::default().run(req, cancel, &mut cb),
        )
        .await
        .expect("run hung")
        .unwrap();
        (exit, String::from_utf8_lossy(&out).into_owned())
    }

    /// Whether `pid` is gone (or a zombie awaiting a reaper that is not us).
    fn process_gone(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        }
    }

    async fn wait_gone(pid: i32) -> bool {
        for _ in 0..250 {
            if process_gone(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    #[tokio::test]
    async fn merges_output_sets_cwd_env_and_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let (exit, out) = run_collect(
            request(
                dir.path(),
                "echo out; echo err >&2; pwd; echo $KEEL_TEST_VAR; read x || echo no-stdin; exit 3",
                None,
            ),
            CancellationToken::new(),
        )
        .await;
        assert_eq!(exit.exit_code, Some(3));
        assert!(!exit.timed_out && !exit.cancelled);
        let canonical = dir.path().canonicalize().unwrap();
        assert!(out.contains("out\n"), "{out}");
        assert!(out.contains("err\n"), "{out}");
        assert!(
            out.contains(&canonical.to_string_lossy().into_owned()),
            "{out}"
        );
        assert!(out.contains("hello\n"), "{out}");
        assert!(out.contains("no-stdin"), "{out}");
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        // The sleep is a child of a background subshell, in the same group.
        let cmd = format!(
            "(sleep 300 & echo $! > {p}; wait) & \
             while [ ! -s {p} ]; do sleep 0.05; done; echo started; sleep 300",
            p = pidfile.display()
        );
        let (exit, out) = run_collect(
            request(dir.path(), &cmd, Some(Duration::from_secs(1))),
            CancellationToken::new(),
        )
        .await;
        assert!(exit.timed_out);
        assert_eq!(exit.exit_code, None);
        assert!(out.contains("started"), "{out}");
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(wait_gone(pid).await, "background subshell {pid} survived");
    }

    #[tokio::test]
    async fn cancellation_kills_promptly() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let cmd = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        let pidfile2 = pidfile.clone();
        tokio::spawn(async move {
            // Cancel once the command has started.
            for _ in 0..500 {
                if std::fs::read_to_string(&pidfile2).is_ok_and(|s| s.ends_with('\n')) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            trigger.cancel();
        });
        let (exit, _) = run_collect(request(dir.path(), &cmd, None), cancel).await;
        assert!(exit.cancelled);
        assert!(!exit.timed_out);
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(wait_gone(pid).await, "sleep {pid} survived cancellation");
    }

    #[tokio::test]
    async fn term_ignoring_children_get_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let cmd = format!(
            "bash -c 'trap \"\" TERM; echo $$ > {}; while true; do sleep 1; done' ; echo unreachable",
            pidfile.display()
        );
        let runner = LocalProcessRunner {
            kill_grace: Duration::from_millis(200),
            ..Default::default()
        };
        let mut sink = |_: &[u8]| {};
        let exit = tokio::time::timeout(
            Duration::from_secs(30),
            runner.run(
                request(dir.path(), &cmd, Some(Duration::from_millis(500))),
                CancellationToken::new(),
                &mut sink,
            ),
        )
        .await
        .unwrap()
        .unwrap();
        assert!(exit.timed_out);
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(wait_gone(pid).await, "TERM-ignoring {pid} survived");
    }

    #[tokio::test]
    async fn background_process_holding_the_pipe_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let cmd = format!("sleep 300 & echo $! > {}; echo done", pidfile.display());
        let (exit, out) =
            run_collect(request(dir.path(), &cmd, None), CancellationToken::new()).await;
        assert_eq!(exit.exit_code, Some(0));
        assert!(out.contains("done"));
        // Clean up the deliberately left-behind sleeper.
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
    }

    #[tokio::test]
    async fn missing_cwd_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = |_: &[u8]| {};
        let err = LocalProcessRunner::default()
            .run(
                request(&dir.path().join("nope"), "true", None),
                CancellationToken::new(),
                &mut sink,
            )
            .await
            .unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{err}");
    }
}
