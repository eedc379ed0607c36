//! A pseudo-terminal for `command/exec` with `tty: true`, with safe calls
//! only (`rustix`): open the master, unlock it, open the slave, set and
//! change the window size.
//!
//! The child gets the slave as stdin, stdout and stderr. It becomes the
//! leader of a new session with the terminal as its controlling terminal
//! through util-linux's `setsid --ctty` when that program is there (so
//! job control and `SIGWINCH` on resize work); otherwise it only runs in
//! its own process group with the terminal as its standard streams.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use keel_app_server_protocol::v2::CommandExecTerminalSize;
use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};

/// The size a terminal gets when the request names none.
pub const DEFAULT_SIZE: CommandExecTerminalSize = CommandExecTerminalSize { rows: 24, cols: 80 };

/// Where util-linux's `setsid` is looked for.
const SETSID: &str = "/usr/bin/setsid";

/// The master side of a pty, shared by the reader, the writer and resizes.
#[derive(Debug, Clone)]
pub struct Master(Arc<OwnedFd>);

/// A new pty: its master and the slave the child gets.
pub struct Pty {
    pub master: Master,
    pub slave: File,
}

fn winsize(size: CommandExecTerminalSize) -> Winsize {
    Winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

impl Pty {
    /// Opens a pty of `size` character cells.
    pub fn open(size: CommandExecTerminalSize) -> std::io::Result<Pty> {
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
        grantpt(&master)?;
        unlockpt(&master)?;
        let name = ptsname(&master, Vec::new())?;
        let path = std::ffi::OsStr::from_bytes(name.as_bytes()).to_owned();
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
            .open(Path::new(&path))?;
        tcsetwinsize(&master, winsize(size))?;
        Ok(Pty {
            master: Master(Arc::new(master)),
            slave,
        })
    }
}

impl Master {
    /// Changes the terminal's size (the foreground process gets `SIGWINCH`).
    pub fn resize(&self, size: CommandExecTerminalSize) -> std::io::Result<()> {
        Ok(tcsetwinsize(&*self.0, winsize(size))?)
    }

    /// A handle for async reads or writes of the master.
    pub fn file(&self) -> std::io::Result<tokio::fs::File> {
        Ok(tokio::fs::File::from_std(File::from(self.0.try_clone()?)))
    }
}

/// The command that runs `program args…` on the terminal `slave`.
pub fn command(
    program: &str,
    args: &[String],
    slave: &File,
) -> std::io::Result<tokio::process::Command> {
    let ctty = Path::new(SETSID).is_file();
    let mut cmd = if ctty {
        let mut c = tokio::process::Command::new(SETSID);
        c.arg("--ctty").arg("--").arg(program).args(args);
        c
    } else {
        let mut c = tokio::process::Command::new(program);
        c.args(args).process_group(0);
        c
    };
    cmd.stdin(slave.try_clone()?)
        .stdout(slave.try_clone()?)
        .stderr(slave.try_clone()?)
        .env(
            "TERM",
            std::env::var("TERM").unwrap_or_else(|_| "xterm-256color".to_owned()),
        );
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn a_child_sees_a_terminal_of_the_given_size() {
        let pty = Pty::open(CommandExecTerminalSize {
            rows: 30,
            cols: 100,
        })
        .unwrap();
        let mut cmd = command(
            "sh",
            &["-c".into(), "stty size; test -t 0 && echo tty".into()],
            &pty.slave,
        )
        .unwrap();
        let mut child = cmd.spawn().unwrap();
        drop(cmd);
        drop(pty.slave);
        let mut out = Vec::new();
        let mut reader = pty.master.file().unwrap();
        let mut buf = [0u8; 1024];
        loop {
            match tokio::time::timeout(std::time::Duration::from_secs(10), reader.read(&mut buf))
                .await
                .unwrap()
            {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        child.wait().await.unwrap();
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("30 100"), "{text}");
        assert!(text.contains("tty"), "{text}");
        pty.master
            .resize(CommandExecTerminalSize { rows: 10, cols: 20 })
            .unwrap();
    }
}
