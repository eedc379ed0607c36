//! The tables the shell analyser judges by, and the checks that read only
//! a word: read-only programs, file-changing programs, destructive programs
//! and subcommands, system folders, the variables that change what later
//! commands run, the paths whose change lets a "read" command run programs
//! (git's own files), and what writing to a path means. A leaf: the
//! checks of `programs`, `judge` and `parse` build on it.

use super::ShellWord;
use crate::class_kind::Class;

/// Programs that only read, whatever their arguments (including dynamic ones).
pub(crate) const READ_ONLY: &[&str] = &[
    ":",
    "[",
    "[[",
    "ack",
    "ag",
    "arch",
    "b2sum",
    "base64",
    "basename",
    "bc",
    "break",
    "bzcat",
    "cal",
    "cat",
    "cd",
    "cksum",
    "clear",
    "cmp",
    "column",
    "comm",
    "compgen",
    "continue",
    "cut",
    "declare",
    "df",
    "diff",
    "dirname",
    "dirs",
    "du",
    "echo",
    "egrep",
    "eza",
    "exa",
    "exit",
    "expand",
    "export",
    "expr",
    "factor",
    "false",
    "fgrep",
    "file",
    "fold",
    "free",
    "getconf",
    "getopts",
    "grep",
    "groups",
    "head",
    "help",
    "hexdump",
    "id",
    "join",
    "jq",
    "last",
    "local",
    "locale",
    "ls",
    "lsblk",
    "lscpu",
    "lsof",
    "md5sum",
    "nl",
    "nproc",
    "numfmt",
    "od",
    "paste",
    "pgrep",
    "pidof",
    "popd",
    "printenv",
    "ps",
    "pushd",
    "pwd",
    "readlink",
    "readonly",
    "realpath",
    "return",
    "rev",
    "seq",
    "set",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "shift",
    "sleep",
    "stat",
    "strings",
    "sum",
    "tac",
    "tail",
    "test",
    "top",
    "tput",
    "tr",
    "true",
    "tty",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "uname",
    "unexpand",
    "unset",
    "uptime",
    "vmstat",
    "w",
    "wait",
    "wc",
    "whatis",
    "whereis",
    "which",
    "who",
    "whoami",
    "xzcat",
    "yes",
    "zcat",
    "zgrep",
];

/// Programs that change local files (and nothing else) when given plain paths.
pub(crate) const WRITES_FILES: &[&str] = &[
    "cp", "install", "ln", "mkdir", "mktemp", "mv", "patch", "touch",
];

/// Programs that delete or destroy, in any form.
pub(crate) const DESTRUCTIVE: &[&str] = &[
    "blkdiscard",
    "fdisk",
    "mke2fs",
    "mkswap",
    "parted",
    "rm",
    "rmdir",
    "sfdisk",
    "sgdisk",
    "shred",
    "truncate",
    "unlink",
    "wipefs",
];

/// Subcommands of common CLIs that delete things (program, leading
/// positional words).
pub(crate) const DESTRUCTIVE_SUBCOMMANDS: &[(&str, &[&str])] = &[
    ("aws", &["s3", "rb"]),
    ("aws", &["s3", "rm"]),
    ("crontab", &["-r"]),
    ("docker", &["container", "prune"]),
    ("docker", &["container", "rm"]),
    ("docker", &["image", "prune"]),
    ("docker", &["image", "rm"]),
    ("docker", &["network", "rm"]),
    ("docker", &["rm"]),
    ("docker", &["rmi"]),
    ("docker", &["system", "prune"]),
    ("docker", &["volume", "prune"]),
    ("docker", &["volume", "rm"]),
    ("gh", &["release", "delete"]),
    ("gh", &["repo", "delete"]),
    ("helm", &["delete"]),
    ("helm", &["uninstall"]),
    ("heroku", &["apps:destroy"]),
    ("kubectl", &["delete"]),
    ("npm", &["unpublish"]),
    ("podman", &["rm"]),
    ("podman", &["rmi"]),
    ("podman", &["system", "prune"]),
    ("podman", &["volume", "rm"]),
    ("terraform", &["destroy"]),
    ("tofu", &["destroy"]),
];

/// Directories whose programs are the system's own (a path there is as
/// good as the bare name; any other path may be a look-alike).
pub(crate) const SYSTEM_DIRS: &[&str] = &[
    "/bin",
    "/usr/bin",
    "/usr/local/bin",
    "/sbin",
    "/usr/sbin",
    "/usr/local/sbin",
];

/// Variables whose value changes which program or code later commands run.
pub(crate) fn dangerous_var(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "PATH",
        "IFS",
        "ENV",
        "BASH_ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "PAGER",
        "EDITOR",
        "VISUAL",
        "BROWSER",
        "NODE_OPTIONS",
        "PERL5OPT",
        "PERL5LIB",
        "RUBYOPT",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "LESSOPEN",
        "LESSCLOSE",
        "CDPATH",
        "GLOBIGNORE",
        "HOME",
        "SHELL",
        "TERMINFO",
        "ZDOTDIR",
        "MANPAGER",
        "SYSTEMD_PAGER",
    ];
    EXACT.contains(&name)
        || name.starts_with("LD_")
        || name.starts_with("DYLD_")
        || name.starts_with("GIT_")
        || name.starts_with("BASH_FUNC_")
        || name.ends_with("_PAGER")
}

pub(crate) const SENSITIVE_UNCLEAR: &str =
    "changes to git's own files and network redirects are never covered by rules";

/// Why changing `path` lets a read-only command run programs, if it does.
pub(crate) fn sensitive_target(path: &str) -> Option<&'static str> {
    let git_dir = path.split('/').any(|c| c == ".git");
    let git_config = path.rsplit('/').next() == Some(".gitconfig")
        || path.contains(".config/git/")
        || path.ends_with(".config/git");
    if git_dir || git_config {
        Some("git's own files (hooks and config) can make later git commands run programs")
    } else {
        None
    }
}

/// Short flag `c` in a getopt-style cluster (`-rf`), or a long flag
/// (`--force`, `--force=...`).
pub(crate) fn has_flag(args: &[ShellWord], short: Option<char>, long: &[&str]) -> bool {
    args.iter().filter_map(ShellWord::as_static).any(|a| {
        if let Some(l) = a.strip_prefix("--") {
            let name = l.split('=').next().unwrap_or(l);
            long.contains(&name)
        } else if let Some(s) = a.strip_prefix('-') {
            short.is_some_and(|c| {
                !s.is_empty() && s.chars().all(|x| x.is_ascii_alphanumeric()) && s.contains(c)
            })
        } else {
            false
        }
    })
}

pub(crate) fn any_dynamic(args: &[ShellWord]) -> bool {
    args.iter().any(|a| a.as_static().is_none())
}

pub(crate) fn positionals(args: &[ShellWord]) -> Vec<&str> {
    args.iter()
        .filter_map(ShellWord::as_static)
        .filter(|a| !a.starts_with('-') || *a == "-")
        .collect()
}

/// What writing to a path means.
pub(crate) enum WriteTarget {
    /// Output thrown away or shown (`/dev/null`, `/dev/stderr`, ...).
    Sink,
    /// An ordinary file: write.
    File,
    /// More than a file change: its class, why, and whether it is never
    /// covered by rules.
    Special {
        class: Class,
        why: &'static str,
        unclear: bool,
    },
}

/// Classifies a path that output goes to.
pub(crate) fn write_target(path: &str) -> WriteTarget {
    if is_sink(path) {
        WriteTarget::Sink
    } else if path.starts_with("/dev/tcp/") || path.starts_with("/dev/udp/") {
        WriteTarget::Special {
            class: Class::Send,
            why: "sends data over the network (bash's /dev/tcp)",
            unclear: true,
        }
    } else if path.starts_with("/dev/") {
        WriteTarget::Special {
            class: Class::Money,
            why: "writes to a device, which can destroy what it holds",
            unclear: false,
        }
    } else if let Some(why) = sensitive_target(path) {
        WriteTarget::Special {
            class: Class::Send,
            why,
            unclear: true,
        }
    } else {
        WriteTarget::File
    }
}

/// Places that swallow or show output without writing a file.
pub(crate) fn is_sink(path: &str) -> bool {
    matches!(
        path,
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty"
    ) || path
        .strip_prefix("/dev/fd/")
        .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
}
