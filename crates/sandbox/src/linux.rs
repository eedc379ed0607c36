//! The Linux walls: a Landlock ruleset for the file system, a seccomp
//! filter for the network, a private mount namespace in which every mount
//! outside the writable roots is read-only (so `chmod`, `chown`, times and
//! extended attributes, which Landlock does not cover, are refused there
//! too), what stays protected inside a writable root is a read-only
//! bind mount and what is hidden (keel's secrets) is covered by an empty
//! read-only tmpfs, and the few system calls the child makes between fork and
//! exec to put itself behind them.
//!
//! Everything that allocates or can fail in an interesting way happens in
//! the parent ([`prepare`]): the ruleset is created and filled there (its
//! descriptor closes on exec), the filter is compiled there, the mount
//! paths are turned into C strings there. The child ([`enter`]) only makes
//! raw system calls on what was prepared, which is safe after `fork` in a
//! threaded process. keel itself is never confined. It must not know
//! policies (that is [`crate::plan`]) or anything about tools.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use landlock::{
    ABI, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::error::{Error, Result};
use crate::plan::{Plan, WRITABLE_DEVICES};

/// `ioctl` requests refused to every confined process: pushing input into
/// a terminal (`TIOCSTI`) and the console's own requests (`TIOCLINUX`).
const REFUSED_IOCTLS: &[u64] = &[0x5412, 0x541C];
/// Socket types refused without network (only `SOCK_STREAM` unix sockets,
/// which cannot be connected anywhere, are left).
const REFUSED_SOCKET_TYPES: &[u64] = &[
    libc::SOCK_DGRAM as u64,
    libc::SOCK_RAW as u64,
    libc::SOCK_RDM as u64,
    libc::SOCK_SEQPACKET as u64,
    // SOCK_PACKET (obsolete, AF_INET only).
    10,
];

/// Mount trees left as they are: Landlock covers writes there, and
/// terminals and shared memory under `/dev` must keep working.
const KEPT_MOUNTS: &[&str] = &["/proc", "/sys", "/dev"];

/// A mount the child changes: the path and the flags it keeps.
type MountStep = (CString, libc::c_ulong);

/// What the child needs to confine itself.
pub(crate) struct Prepared {
    ruleset: OwnedFd,
    filter: BpfProgram,
    /// Whether the child makes its own mount namespace.
    mounts: bool,
    /// Mounts outside the writable roots, made read-only.
    read_only_mounts: Vec<MountStep>,
    /// Writable roots, bound onto themselves and kept writable.
    writable: Vec<MountStep>,
    /// Protected folders inside writable roots, made read-only.
    read_only: Vec<MountStep>,
    /// Folders covered by an empty read-only tmpfs.
    hidden: Vec<CString>,
    /// The command's folder, entered again once the mounts are made (the
    /// one entered before them lies on the old, now read-only, mount).
    cwd: CString,
    /// `uid_map`/`gid_map` lines for a user namespace, if one is needed.
    maps: (CString, CString),
}

/// Landlock's ABI version, when the kernel has it.
pub(crate) fn landlock_abi() -> Option<i32> {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION takes no attributes.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    (v > 0).then(|| i32::try_from(v).unwrap_or(i32::MAX))
}

/// Whether seccomp filters can be installed.
pub(crate) fn seccomp_available() -> bool {
    // SAFETY: reads this thread's seccomp mode.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP) };
    if mode < 0 {
        return false;
    }
    let action: u32 = libc::SECCOMP_RET_ERRNO;
    // SAFETY: the kernel reads one u32 from `action`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_ACTION_AVAIL,
            0u32,
            &action as *const u32,
        )
    };
    rc == 0
}

/// Whether a child can get its own mount namespace.
pub(crate) fn mount_namespace_available() -> bool {
    let maps = id_maps();
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c").arg(":");
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the closure only makes raw system calls on prepared data.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || new_mount_namespace(&maps));
    }
    cmd.status().map(|s| s.success()).unwrap_or(false)
}

fn id_maps() -> (CString, CString) {
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    (
        CString::new(format!("{uid} {uid} 1\n")).unwrap_or_default(),
        CString::new(format!("{gid} {gid} 1\n")).unwrap_or_default(),
    )
}

/// Builds everything the child needs for `plan` on a kernel with Landlock
/// ABI `abi`; `mounts`: the child makes its own mount namespace.
pub(crate) fn prepare(plan: &Plan, abi: i32, mounts: bool, cwd: &Path) -> Result<Prepared> {
    let steps = |paths: &[std::path::PathBuf]| -> Result<Vec<MountStep>> {
        paths
            .iter()
            .map(|p| Ok((c_path(p)?, kept_mount_flags(p))))
            .collect()
    };
    let outside: Vec<std::path::PathBuf> = if mounts {
        mount_points()
            .into_iter()
            .filter(|m| !KEPT_MOUNTS.iter().any(|k| m.starts_with(k)))
            .filter(|m| !plan.writable.iter().any(|r| m.starts_with(r)))
            .collect()
    } else {
        Vec::new()
    };
    Ok(Prepared {
        ruleset: ruleset(plan, abi)?,
        filter: filter(plan.network)?,
        mounts,
        read_only_mounts: steps(&outside)?,
        writable: if mounts {
            steps(&plan.writable)?
        } else {
            Vec::new()
        },
        read_only: steps(&plan.read_only)?,
        hidden: if mounts {
            plan.hidden
                .iter()
                .map(|p| c_path(p))
                .collect::<Result<_>>()?
        } else {
            Vec::new()
        },
        cwd: c_path(cwd)?,
        maps: id_maps(),
    })
}

/// Every mount point of this process's namespace, parents first.
fn mount_points() -> Vec<std::path::PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut points: Vec<std::path::PathBuf> = Vec::new();
    for line in text.lines() {
        if let Some(field) = line.split(' ').nth(4) {
            let p = std::path::PathBuf::from(unescape(field));
            if !points.contains(&p) {
                points.push(p);
            }
        }
    }
    points.sort_by_key(|p| p.components().count());
    points
}

/// Undoes mountinfo's octal escapes (`\040` is a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Ok(v) = u8::from_str_radix(&field[i + 1..i + 4], 8)
        {
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn c_path(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| Error::Setup(format!("{} contains a NUL byte", p.display())))
}

fn ruleset(plan: &Plan, abi: i32) -> Result<OwnedFd> {
    let abi = ABI::from(abi);
    let write = AccessFs::from_write(abi);
    let file = AccessFs::from_file(abi);
    let landlock = |e: &dyn std::fmt::Display| Error::Setup(format!("Landlock: {e}"));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(write)
        .map_err(|e| landlock(&e))?;
    if abi >= ABI::V6 {
        ruleset = ruleset.scope(Scope::Signal).map_err(|e| landlock(&e))?;
        if !plan.network {
            ruleset = ruleset
                .scope(Scope::AbstractUnixSocket)
                .map_err(|e| landlock(&e))?;
        }
    }
    let mut created = ruleset.create().map_err(|e| landlock(&e))?;
    let devices = WRITABLE_DEVICES
        .iter()
        .map(Path::new)
        .filter(|p| p.exists());
    for path in plan.writable.iter().map(|p| p.as_path()).chain(devices) {
        let access = if path.is_dir() { write } else { write & file };
        let fd = PathFd::new(path).map_err(|e| {
            Error::Setup(format!(
                "cannot open {} for the sandbox: {e}",
                path.display()
            ))
        })?;
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| landlock(&e))?;
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| Error::Setup("Landlock gave no ruleset".into()))
}

fn filter(network: bool) -> Result<BpfProgram> {
    let seccomp = |e: &dyn std::fmt::Display| Error::Setup(format!("seccomp: {e}"));
    let cond = |arg: u8, len: SeccompCmpArgLen, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, len, op, value).map_err(|e| seccomp(&e))
    };
    let rule = |conds: Vec<SeccompCondition>| SeccompRule::new(conds).map_err(|e| seccomp(&e));
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let ioctls = REFUSED_IOCTLS
        .iter()
        .map(|r| {
            rule(vec![cond(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                *r,
            )?])
        })
        .collect::<Result<Vec<_>>>()?;
    rules.insert(libc::SYS_ioctl, ioctls);
    if !network {
        // Only unix stream sockets: every other family or type is refused.
        let mut socket = vec![rule(vec![cond(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )?])?];
        for t in REFUSED_SOCKET_TYPES {
            socket.push(rule(vec![cond(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(0xf),
                *t,
            )?])?);
        }
        rules.insert(libc::SYS_socket, socket.clone());
        rules.insert(libc::SYS_socketpair, socket);
        // A unix socket may not be connected anywhere, nor sent to a name.
        rules.insert(libc::SYS_connect, Vec::new());
        rules.insert(
            libc::SYS_sendto,
            vec![rule(vec![cond(
                4,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::Ne,
                0,
            )?])?],
        );
        // io_uring opens sockets and connects without these system calls.
        for nr in [
            libc::SYS_io_uring_setup,
            libc::SYS_io_uring_enter,
            libc::SYS_io_uring_register,
        ] {
            rules.insert(nr, Vec::new());
        }
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| seccomp(&e))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| seccomp(&e))?;
    BpfProgram::try_from(filter).map_err(|e| seccomp(&e))
}

/// The flags a read-only remount of `path` must keep (a remount inside a
/// user namespace may not drop them).
fn kept_mount_flags(path: &Path) -> libc::c_ulong {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return 0;
    };
    // SAFETY: `st` is written by statvfs; `c` is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    let pairs = [
        (libc::ST_RDONLY, libc::MS_RDONLY),
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ];
    pairs
        .iter()
        .filter(|(st_flag, _)| st.f_flag & st_flag != 0)
        .fold(0, |acc, (_, ms)| acc | ms)
}

fn check(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Gives the calling (single-threaded, forked) process its own mount
/// namespace, in a new user namespace when it lacks the privilege.
fn new_mount_namespace(maps: &(CString, CString)) -> io::Result<()> {
    // SAFETY: raw system calls with valid arguments.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } == 0 {
        return Ok(());
    }
    check(unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) }.into())?;
    write_proc(c"/proc/self/setgroups", b"deny")?;
    write_proc(c"/proc/self/uid_map", maps.0.as_bytes())?;
    write_proc(c"/proc/self/gid_map", maps.1.as_bytes())
}

fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: raw open/write/close on a valid C string and buffer.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    let err = io::Error::last_os_error();
    unsafe { libc::close(fd) };
    if n < 0 { Err(err) } else { Ok(()) }
}

/// Runs in the child between fork and exec: puts the process behind the
/// prepared walls. Only raw system calls; nothing allocates.
pub(crate) fn enter(p: &Prepared) -> io::Result<()> {
    // SAFETY: every call below is a raw system call on prepared, valid data.
    unsafe {
        // No descriptor of keel's reaches the command (they close on exec).
        check(libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ))?;
        if p.mounts {
            new_mount_namespace(&p.maps)?;
            mount(None, c"/", libc::MS_REC | libc::MS_PRIVATE)?;
            for (path, kept) in &p.read_only_mounts {
                match remount(path, libc::MS_RDONLY | kept) {
                    // Not a mount this process can see (hidden beneath another).
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOENT)) => {}
                    other => other?,
                }
            }
            for (path, kept) in &p.writable {
                mount(Some(path), path, libc::MS_BIND | libc::MS_REC)?;
                remount(path, *kept)?;
            }
            for (path, kept) in &p.read_only {
                mount(Some(path), path, libc::MS_BIND | libc::MS_REC)?;
                remount(path, libc::MS_RDONLY | kept)?;
            }
            for path in &p.hidden {
                cover(path)?;
            }
            check(libc::chdir(p.cwd.as_ptr()).into())?;
        }
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).into())?;
        check(libc::syscall(
            libc::SYS_landlock_restrict_self,
            p.ruleset.as_raw_fd(),
            0u32,
        ))?;
    }
    seccompiler::apply_filter(&p.filter).map_err(|e| match e {
        seccompiler::Error::Seccomp(io) | seccompiler::Error::Prctl(io) => io,
        _ => io::Error::from_raw_os_error(libc::EINVAL),
    })
}

/// `mount(source, target, NULL, flags, NULL)`.
fn mount(
    source: Option<&CString>,
    target: &std::ffi::CStr,
    flags: libc::c_ulong,
) -> io::Result<()> {
    // SAFETY: valid C strings or null; no data argument.
    let rc = unsafe {
        libc::mount(
            source.map_or(std::ptr::null(), |s| s.as_ptr()),
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    check(rc.into())
}

/// Covers `target` with an empty, read-only tmpfs: what was beneath it
/// cannot be read, listed or written.
fn cover(target: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: valid C strings; the data argument is a C string too.
    let rc = unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            c"size=4k,mode=0500".as_ptr().cast(),
        )
    };
    check(rc.into())
}

/// Changes the per-mount flags of the mount at `target` to `flags`.
fn remount(target: &std::ffi::CStr, flags: libc::c_ulong) -> io::Result<()> {
    mount(None, target, libc::MS_BIND | libc::MS_REMOUNT | flags)
}

/// Arranges for the child of `command` to [`enter`] `prepared`.
pub(crate) fn install(command: &mut tokio::process::Command, prepared: Prepared) {
    // SAFETY: `enter` only makes raw system calls on data prepared before
    // the fork; it does not allocate or take locks.
    unsafe {
        command.pre_exec(move || enter(&prepared));
    }
}
