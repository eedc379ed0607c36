//! Processes started by `command/exec`, outside any thread.
//!
//! Each runs in its own process group, owned by the connection that
//! started it; a connection that closes takes its processes with it.
//! Output is collected (capped) or streamed as `command/exec/outputDelta`;
//! stdin can be streamed with `command/exec/write`. A timeout or
//! `command/exec/terminate` sends SIGTERM to the group, then SIGKILL after
//! [`KILL_GRACE`]. With `tty: true` the process runs on a pseudo-terminal
//! ([`crate::pty`]) of `size` (default 24×80): its output (stdout and
//! stderr together) is reported as stdout, `command/exec/write` types into
//! the terminal and `command/exec/resize` changes its size.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use base64::Engine;
use keel_app_server_protocol::v2::{
    CommandExecOutputDeltaNotification, CommandExecOutputStream, CommandExecParams,
    CommandExecResponse, CommandExecTerminalSize, ServerNotification,
};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::outbound::{Connection, ConnectionId};
use crate::rpc_error::RpcError;

/// Time between SIGTERM and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// Default timeout of a command.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// Default cap on collected output per stream.
pub const DEFAULT_OUTPUT_CAP: usize = 1024 * 1024;
/// Pending stdin chunks per process.
pub const STDIN_CHANNEL_CAPACITY: usize = 64;
/// Read buffer for process output.
const READ_CHUNK: usize = 16 * 1024;

struct Entry {
    stdin: Option<mpsc::Sender<Vec<u8>>>,
    terminate: CancellationToken,
    pty: Option<crate::pty::Master>,
}

/// The running processes, keyed by owner and `processId`.
#[derive(Default)]
pub struct ProcessTable {
    entries: Mutex<HashMap<(ConnectionId, String), Entry>>,
}

impl ProcessTable {
    fn lock(&self) -> MutexGuard<'_, HashMap<(ConnectionId, String), Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes to (or closes) a process's stdin.
    pub async fn write(
        &self,
        owner: ConnectionId,
        process_id: &str,
        data: Vec<u8>,
        close: bool,
    ) -> Result<(), RpcError> {
        let tx = {
            let mut entries = self.lock();
            let entry = entries
                .get_mut(&(owner, process_id.to_owned()))
                .ok_or_else(|| RpcError::invalid(format!("no process {process_id:?}")))?;
            let tx = entry
                .stdin
                .clone()
                .ok_or_else(|| RpcError::invalid(format!("stdin of {process_id:?} is not open")))?;
            if close {
                entry.stdin = None;
            }
            tx
        };
        if !data.is_empty() {
            tx.send(data)
                .await
                .map_err(|_| RpcError::invalid(format!("stdin of {process_id:?} is closed")))?;
        }
        Ok(())
    }

    /// Changes the terminal size of a `tty` process.
    pub fn resize(
        &self,
        owner: ConnectionId,
        process_id: &str,
        size: CommandExecTerminalSize,
    ) -> Result<(), RpcError> {
        let entries = self.lock();
        let entry = entries
            .get(&(owner, process_id.to_owned()))
            .ok_or_else(|| RpcError::invalid(format!("no process {process_id:?}")))?;
        let pty = entry
            .pty
            .as_ref()
            .ok_or_else(|| RpcError::invalid(format!("process {process_id:?} has no tty")))?;
        pty.resize(size)?;
        Ok(())
    }

    pub fn terminate(&self, owner: ConnectionId, process_id: &str) -> Result<(), RpcError> {
        let entries = self.lock();
        let entry = entries
            .get(&(owner, process_id.to_owned()))
            .ok_or_else(|| RpcError::invalid(format!("no process {process_id:?}")))?;
        entry.terminate.cancel();
        Ok(())
    }

    pub async fn kill_owned_by(&self, owner: ConnectionId) {
        for ((o, _), e) in self.lock().iter() {
            if *o == owner {
                e.terminate.cancel();
            }
        }
    }

    pub async fn kill_all(&self) {
        for e in self.lock().values() {
            e.terminate.cancel();
        }
    }
}

fn signal_group(pid: Option<u32>, signal: Signal) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = killpg(Pid::from_raw(pid), signal);
    }
}

/// A started `command/exec` process; [`Running::wait`] runs it to the end.
pub struct Running {
    table: Arc<ProcessTable>,
    key: (ConnectionId, String),
    child: tokio::process::Child,
    pid: Option<u32>,
    terminate: CancellationToken,
    timeout: Option<Duration>,
    stdin_task: Option<tokio::task::JoinHandle<()>>,
    stdout: tokio::task::JoinHandle<Vec<u8>>,
    stderr: tokio::task::JoinHandle<Vec<u8>>,
}

/// Validates `command/exec`, starts the process and registers it, so a
/// `command/exec/write` or `terminate` right after finds it.
pub fn start(
    table: Arc<ProcessTable>,
    conn: Arc<Connection>,
    default_cwd: PathBuf,
    params: CommandExecParams,
    (sandbox, policy): (&keel_sandbox::Sandbox, keel_protocol::SandboxPolicy),
) -> Result<Running, RpcError> {
    let Some(program) = params.command.first() else {
        return Err(RpcError::invalid("command/exec: command must not be empty"));
    };
    let cwd = match &params.cwd {
        Some(c) if PathBuf::from(c).is_absolute() => PathBuf::from(c),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "AbsolutePathBuf deserialized without a base path",
            ));
        }
        None => default_cwd,
    };
    let streaming = params.stream_stdout_stderr;
    if (streaming || params.stream_stdin) && params.process_id.is_none() {
        return Err(RpcError::invalid(
            "command/exec: processId is required with streamStdin or streamStdoutStderr",
        ));
    }
    let process_id = params
        .process_id
        .clone()
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let pty = if params.tty {
        Some(crate::pty::Pty::open(
            params.size.unwrap_or(crate::pty::DEFAULT_SIZE),
        )?)
    } else {
        None
    };
    let mut cmd = match &pty {
        Some(pty) => crate::pty::command(program, &params.command[1..], &pty.slave)?,
        None => {
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(&params.command[1..])
                .stdin(if params.stream_stdin {
                    Stdio::piped()
                } else {
                    Stdio::null()
                })
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0);
            cmd
        }
    };
    cmd.current_dir(&cwd).kill_on_drop(true);
    // The same environment policy as the agent's shell: keel's secrets stay
    // with keel; the request's own `env` still sets what it names.
    cmd.env_clear()
        .envs(keel_tools::EnvPolicy::configured().child_env_now(&[], &cwd));
    for (k, v) in params.env.iter().flatten() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    // The process confines itself between fork and exec (the terminal
    // wrapper too, and everything it starts).
    let spec = keel_tools::SandboxSpec::new(policy, cwd.clone());
    sandbox.prepare(&mut cmd, &spec).map_err(|e| {
        RpcError::internal(format!(
            "the command did not run: the sandbox cannot be set up: {e}"
        ))
    })?;
    let key = (conn.id, process_id.clone());
    if table.lock().contains_key(&key) {
        return Err(RpcError::invalid(format!(
            "processId {process_id:?} is already running"
        )));
    }
    let mut child = cmd.spawn()?;
    // The child holds the terminal now: our copies of the slave must go,
    // or reading the master never ends.
    drop(cmd);
    let master = pty.map(|p| p.master);
    let pid = child.id();
    let terminate = CancellationToken::new();
    let (stdin_tx, mut stdin_rx) = mpsc::channel::<Vec<u8>>(STDIN_CHANNEL_CAPACITY);
    let stdin: Option<Box<dyn tokio::io::AsyncWrite + Send + Unpin>> = match &master {
        Some(m) if params.stream_stdin => Some(Box::new(m.file()?)),
        Some(_) => None,
        None => child
            .stdin
            .take()
            .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncWrite + Send + Unpin>),
    };
    let stdin_task = stdin.map(|mut stdin| {
        tokio::spawn(async move {
            while let Some(chunk) = stdin_rx.recv().await {
                if stdin.write_all(&chunk).await.is_err() {
                    break;
                }
            }
        })
    });
    table.lock().insert(
        key.clone(),
        Entry {
            stdin: params.stream_stdin.then_some(stdin_tx),
            terminate: terminate.clone(),
            pty: master.clone(),
        },
    );
    let cap = if params.disable_output_cap {
        usize::MAX
    } else {
        params
            .output_bytes_cap
            .and_then(|c| usize::try_from(c).ok())
            .unwrap_or(DEFAULT_OUTPUT_CAP)
    };
    let reader = |stream: Option<Box<dyn tokio::io::AsyncRead + Send + Unpin>>,
                  which: CommandExecOutputStream| {
        let conn = conn.clone();
        let process_id = process_id.clone();
        tokio::spawn(async move {
            let mut out = Vec::new();
            let Some(mut stream) = stream else {
                return out;
            };
            let mut buf = vec![0u8; READ_CHUNK];
            let mut total = 0usize;
            loop {
                let n = match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let room = cap.saturating_sub(total);
                let take = n.min(room);
                total += n;
                if streaming {
                    if take > 0 {
                        conn.notify(&ServerNotification::CommandExecOutputDelta(
                            CommandExecOutputDeltaNotification {
                                process_id: process_id.clone(),
                                stream: which,
                                delta_base64: base64::engine::general_purpose::STANDARD
                                    .encode(&buf[..take]),
                                cap_reached: take < n,
                            },
                        ))
                        .await;
                    }
                } else {
                    out.extend_from_slice(&buf[..take]);
                }
            }
            out
        })
    };
    let stdout = reader(
        match &master {
            Some(m) => Some(Box::new(m.file()?) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            None => child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        },
        CommandExecOutputStream::Stdout,
    );
    let stderr = reader(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        CommandExecOutputStream::Stderr,
    );
    let timeout = if params.disable_timeout {
        None
    } else {
        Some(
            params
                .timeout_ms
                .and_then(|ms| u64::try_from(ms).ok())
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_TIMEOUT),
        )
    };
    Ok(Running {
        table,
        key,
        child,
        pid,
        terminate,
        timeout,
        stdin_task,
        stdout,
        stderr,
    })
}

impl Running {
    /// Waits for the process (terminating it on timeout or request) and
    /// collects its output.
    pub async fn wait(self) -> Result<CommandExecResponse, RpcError> {
        let Running {
            table,
            key,
            mut child,
            pid,
            terminate,
            timeout,
            stdin_task,
            stdout,
            stderr,
        } = self;
        let stop = async {
            match timeout {
                Some(t) => {
                    tokio::select! {
                        _ = tokio::time::sleep(t) => {}
                        _ = terminate.cancelled() => {}
                    }
                }
                None => terminate.cancelled().await,
            }
        };
        let status = tokio::select! {
            status = child.wait() => status,
            _ = stop => {
                signal_group(pid, Signal::SIGTERM);
                match tokio::time::timeout(KILL_GRACE, child.wait()).await {
                    Ok(status) => status,
                    Err(_) => {
                        signal_group(pid, Signal::SIGKILL);
                        child.wait().await
                    }
                }
            }
        };
        table.lock().remove(&key);
        if let Some(t) = stdin_task {
            t.abort();
        }
        let status = status?;
        let stdout = stdout.await.unwrap_or_default();
        let stderr = stderr.await.unwrap_or_default();
        let exit_code = status.code().unwrap_or_else(|| {
            use std::os::unix::process::ExitStatusExt;
            128 + status.signal().unwrap_or(0)
        });
        Ok(CommandExecResponse {
            exit_code,
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        })
    }
}
