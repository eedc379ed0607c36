//! The escape corpus: ways out of `workspace-write` without network, each
//! refused by the sandbox or harmless (and then the comment says why).
//! After every attempt nothing outside the writable roots has changed.

use std::io::Read;
use std::os::unix::net::UnixListener;

use keel_protocol::SandboxMode;

use super::{Lab, kernel_can_confine};

/// `(name, script)`: each must fail and change nothing outside.
const REFUSED: &[(&str, &str)] = &[
    ("a new file outside", "echo x > $OUT/new"),
    ("appending outside", "echo x >> $OUT/victim"),
    ("truncating outside", "truncate -s 0 $OUT/victim"),
    ("truncating by redirect", ": > $OUT/victim"),
    ("removing outside", "rm $OUT/victim"),
    (
        "renaming out of the workspace",
        "echo x > a && mv a $OUT/moved",
    ),
    ("renaming into the workspace", "mv $OUT/victim ./stolen"),
    (
        "a hard link in, then writing it",
        "ln $OUT/victim ./hl && echo x > hl",
    ),
    ("a hard link out", "echo x > a && ln a $OUT/hl"),
    (
        "a symlink out, then writing it",
        "ln -s $OUT/victim s && echo x > s",
    ),
    ("a symlinked folder out", "ln -s $OUT d && echo x > d/new"),
    ("dot-dot", "echo x > ../outside/new"),
    ("/proc/self/root", "echo x > /proc/self/root$OUT/new"),
    ("/proc/self/cwd", "echo x > /proc/self/cwd/../outside/new"),
    ("a folder outside", "mkdir $OUT/dir"),
    ("a fifo outside", "mkfifo $OUT/fifo"),
    ("a device node outside", "mknod $OUT/null c 1 3"),
    ("chmod outside", "chmod 777 $OUT/victim"),
    ("chown outside", "chown 1:1 $OUT/victim"),
    ("times outside", "touch -d 2000-01-01 $OUT/victim"),
    (
        "extended attributes outside",
        "python3 -c \"import os; os.setxattr('$OUT/victim', 'user.k', b'1')\"",
    ),
    ("writing .git/config", "echo x > .git/config"),
    (
        "a git hook",
        "echo x > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
    ),
    ("removing .git", "rm -rf .git"),
    ("renaming .git away", "mv .git .git-old"),
    ("writing .keel", "echo x > .keel/config.toml"),
    ("keel's home inside the temp dir", "echo x > $KHOME/keel.db"),
    ("remounting / writable", "mount -o remount,rw /"),
    ("unmounting the read-only .git", "umount -l .git"),
    (
        "a new mount namespace",
        "unshare -m sh -c 'mount -t tmpfs none $OUT && echo x > $OUT/new'",
    ),
    (
        "a new user namespace",
        "unshare -Ur sh -c 'echo x > $OUT/new'",
    ),
    ("chroot", "chroot / sh -c 'echo x > $OUT/new'"),
    ("sh -c", "sh -c 'echo x > $OUT/new'"),
    (
        "python3 -c",
        "python3 -c \"open('$OUT/new', 'w').write('x')\"",
    ),
    ("xargs", "echo $OUT/new | xargs touch"),
    ("bash -c through env", "env bash -c 'echo x > $OUT/new'"),
    (
        "LD_PRELOAD",
        "LD_PRELOAD=/nonexistent/preload.so sh -c 'echo x > $OUT/new'",
    ),
    ("writing /proc/sys", "echo 1 > /proc/sys/kernel/sysrq"),
    ("writing /sys", "echo 1 > /sys/kernel/profiling"),
    (
        "a background child after exit",
        "(sleep 0.2; echo x > $OUT/new) & wait $!",
    ),
];

#[tokio::test]
async fn the_escape_corpus_is_refused() {
    if !kernel_can_confine() {
        return;
    }
    let lab = Lab::new();
    let spec = lab.spec(SandboxMode::WorkspaceWrite);
    for (name, script) in REFUSED {
        let ran = lab.run(&spec, script).await;
        assert!(ran.failed(), "{name}: `{script}` succeeded: {}", ran.output);
        lab.assert_untouched(name);
    }
    assert!(REFUSED.len() >= 40);
}

#[tokio::test]
async fn network_escapes_are_refused() {
    if !kernel_can_confine() {
        return;
    }
    let lab = Lab::new();
    let spec = lab.spec(SandboxMode::WorkspaceWrite);
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let port = tcp.local_addr().unwrap().port().to_string();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let uport = udp.local_addr().unwrap().port().to_string();
    let sock_path = lab.outside.join("service.sock");
    let unix = UnixListener::bind(&sock_path).unwrap();
    unix.set_nonblocking(true).unwrap();
    let abstract_name = format!("keel-sandbox-test-{}", std::process::id());
    let abstract_listener = {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&abstract_name).unwrap();
        let l = UnixListener::bind_addr(&addr).unwrap();
        l.set_nonblocking(true).unwrap();
        l
    };
    let env = [
        ("PORT", port),
        ("UPORT", uport),
        ("SOCK", sock_path.display().to_string()),
        ("ABSTRACT", abstract_name),
    ];
    let cases: &[(&str, &str)] = &[
        ("bash /dev/tcp", "echo x > /dev/tcp/127.0.0.1/$PORT"),
        (
            "python TCP",
            "python3 -c \"import socket,os; socket.create_connection(('127.0.0.1', int(os.environ['PORT'])), 5)\"",
        ),
        (
            "python UDP",
            "python3 -c \"import socket,os; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', int(os.environ['UPORT'])))\"",
        ),
        (
            "IPv6",
            "python3 -c \"import socket; socket.socket(socket.AF_INET6)\"",
        ),
        (
            "a raw packet socket",
            "python3 -c \"import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\"",
        ),
        (
            "netlink",
            "python3 -c \"import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)\"",
        ),
        (
            "a unix socket to an outside service",
            "python3 -c \"import socket,os; socket.socket(socket.AF_UNIX).connect(os.environ['SOCK'])\"",
        ),
        (
            "a unix datagram to an outside service",
            "python3 -c \"import socket,os; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'x', os.environ['SOCK'])\"",
        ),
        (
            "an abstract unix socket",
            "python3 -c \"import socket,os; socket.socket(socket.AF_UNIX).connect('\\0' + os.environ['ABSTRACT'])\"",
        ),
        (
            "a fresh network namespace",
            "unshare -rn python3 -c \"import socket; socket.socket()\"",
        ),
        (
            "io_uring (it opens sockets without socket())",
            "python3 -c \"import ctypes,sys; l=ctypes.CDLL(None, use_errno=True); p=ctypes.create_string_buffer(120); r=l.syscall(425, 4, p); sys.exit(0 if r >= 0 else 1)\"",
        ),
        (
            "curl",
            "curl -sS --max-time 5 http://127.0.0.1:$PORT/ || exit 1",
        ),
    ];
    for (name, script) in cases {
        let ran = lab.run_with(&spec, script, &env).await;
        assert!(ran.failed(), "{name}: `{script}` succeeded: {}", ran.output);
    }
    // Nothing reached any listener.
    assert!(tcp.accept().is_err(), "a TCP connection got through");
    assert!(
        udp.recv(&mut [0u8; 8]).is_err(),
        "a UDP datagram got through"
    );
    assert!(unix.accept().is_err(), "a unix connection got through");
    assert!(
        abstract_listener.accept().is_err(),
        "an abstract connection got through"
    );
    drop(abstract_listener);
    // The same TCP connect works once the network is on.
    let mut on = spec.clone();
    on.grant.network = true;
    let ran = lab
        .run_with(&on, "echo hello > /dev/tcp/127.0.0.1/$PORT", &env)
        .await;
    assert!(!ran.failed(), "{}", ran.output);
    tcp.set_nonblocking(false).unwrap();
    let (mut conn, _) = tcp.accept().unwrap();
    let mut got = String::new();
    conn.read_to_string(&mut got).unwrap();
    assert_eq!(got, "hello\n");
}

#[tokio::test]
async fn keel_itself_is_out_of_reach() {
    if !kernel_can_confine() {
        return;
    }
    let lab = Lab::new();
    let spec = lab.spec(SandboxMode::WorkspaceWrite);
    let me = std::process::id().to_string();
    // A descriptor of keel's without close-on-exec.
    let file = std::fs::File::create(lab.outside.join("open-in-keel")).unwrap();
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    fcntl(&file, FcntlArg::F_SETFD(FdFlag::empty())).unwrap();
    let env = [("KEEL_PID", me), ("FD", fd.to_string())];
    let cases: &[(&str, &str)] = &[
        ("a descriptor inherited from keel", "echo x >&$FD"),
        (
            "ptrace of keel",
            "python3 -c \"import ctypes,os,sys; l=ctypes.CDLL(None, use_errno=True); sys.exit(0 if l.ptrace(16, int(os.environ['KEEL_PID']), 0, 0) == 0 else 1)\"",
        ),
        ("a signal to keel", "kill -0 $KEEL_PID"),
        ("keel's memory", "echo x > /proc/$KEEL_PID/mem"),
        (
            "pushing keystrokes into a terminal (TIOCSTI)",
            "python3 -c \"import fcntl; fcntl.ioctl(1, 0x5412, b'x')\"",
        ),
    ];
    for (name, script) in cases {
        let ran = lab.run_with(&spec, script, &env).await;
        assert!(ran.failed(), "{name}: `{script}` succeeded: {}", ran.output);
    }
    assert_eq!(
        std::fs::read_to_string(lab.outside.join("open-in-keel")).unwrap(),
        "",
        "the inherited descriptor was written"
    );
    drop(file);
}

/// Harmless, and why: reading is allowed everywhere (the sandbox confines
/// what a command changes and reaches, not what it reads); `/dev/shm` is
/// shared memory every confined command may use; `/dev/null` and the
/// output pipe are the command's own.
#[tokio::test]
async fn what_stays_allowed_is_harmless() {
    if !kernel_can_confine() {
        return;
    }
    let lab = Lab::new();
    let spec = lab.spec(SandboxMode::WorkspaceWrite);
    let ran = lab
        .run(
            &spec,
            "cat $OUT/victim && echo > /dev/null && echo out > /dev/stdout && ls /proc/self/fd",
        )
        .await;
    assert!(!ran.failed(), "{}", ran.output);
    assert!(ran.output.starts_with("original"), "{}", ran.output);
    // Only stdin, stdout, stderr and the folder `ls` itself opened.
    let fds: Vec<&str> = ran
        .output
        .lines()
        .skip(1)
        .skip_while(|l| *l != "0")
        .collect();
    assert_eq!(fds, vec!["0", "1", "2", "3"], "{}", ran.output);
    lab.assert_untouched("reading");
}
