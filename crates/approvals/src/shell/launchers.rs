//! Programs that run other programs: wrappers and interpreters.
//!
//! Owns the tables `judge` uses to see through `sudo`, `timeout`, `nohup`,
//! `flock -c`, ... (which options take values, how many words come before
//! the wrapped command, which options carry shell code) and to recognise
//! interpreters (`bash`, `python`, `node`, `perl`, ...) with their
//! inline-code options. It must not judge anything itself.

pub(crate) struct Wrapper {
    pub names: &'static [&'static str],
    /// Options that take the next word as their value.
    pub value_opts: &'static [&'static str],
    /// Positional words before the wrapped command (`timeout 5 cmd`).
    pub positionals: usize,
    /// Options whose value is shell code (`flock -c 'cmd'`).
    pub code_opts: &'static [&'static str],
    /// Alone (nothing wrapped), it only reads (`time`, `exec`).
    pub alone_reads: bool,
}

pub(crate) const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        names: &["sudo", "doas", "pkexec"],
        value_opts: &[
            "-u",
            "-g",
            "-h",
            "-p",
            "-C",
            "-D",
            "-r",
            "-t",
            "-U",
            "-T",
            "--user",
            "--group",
            "--host",
            "--prompt",
            "--chdir",
            "--role",
            "--type",
            "--other-user",
        ],
        positionals: 0,
        code_opts: &[],
        alone_reads: false,
    },
    Wrapper {
        names: &[
            "nohup",
            "setsid",
            "unbuffer",
            "builtin",
            "coproc",
            "busybox",
            "eatmydata",
            "fakeroot",
            "unshare",
            "firejail",
            "valgrind",
        ],
        value_opts: &[],
        positionals: 0,
        code_opts: &[],
        alone_reads: false,
    },
    Wrapper {
        names: &["time"],
        value_opts: &["-f", "-o", "--format", "--output"],
        positionals: 0,
        code_opts: &[],
        alone_reads: true,
    },
    Wrapper {
        names: &["exec"],
        value_opts: &["-a"],
        positionals: 0,
        code_opts: &[],
        alone_reads: true,
    },
    Wrapper {
        names: &["command"],
        value_opts: &[],
        positionals: 0,
        code_opts: &[],
        alone_reads: true,
    },
    Wrapper {
        names: &["timeout", "gtimeout"],
        value_opts: &["-s", "-k", "--signal", "--kill-after"],
        positionals: 1,
        code_opts: &[],
        alone_reads: false,
    },
    Wrapper {
        names: &["nice", "renice"],
        value_opts: &["-n", "--adjustment"],
        positionals: 0,
        code_opts: &[],
        alone_reads: false,
    },
    Wrapper {
        names: &["ionice"],
        value_opts: &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
        positionals: 0,
        code_opts: &[],
        alone_reads: false,
    },
    Wrapper {
        names: &["stdbuf"],
        value_opts: &["-i", "-o", "-e"],
        positionals: 0,
        code_opts: &[],
        alone_reads: false,
    },
    Wrapper {
        names: &["chroot"],
        value_opts: &["--userspec", "--groups"],
        positionals: 1,
        code_opts: &[],
        alone_reads: false,
    },
    Wrapper {
        names: &["strace", "ltrace"],
        value_opts: &[
            "-e", "-o", "-p", "-s", "-u", "-E", "-P", "-I", "-b", "-a", "-X", "-O", "-S",
        ],
        positionals: 0,
        code_opts: &[],
        alone_reads: false,
    },
    Wrapper {
        names: &["taskset", "chrt"],
        value_opts: &[],
        positionals: 1,
        code_opts: &[],
        alone_reads: false,
    },
    Wrapper {
        names: &["flock"],
        value_opts: &["-w", "-E", "--timeout", "--conflict-exit-code"],
        positionals: 1,
        code_opts: &["-c", "--command"],
        alone_reads: false,
    },
    Wrapper {
        names: &["nsenter", "systemd-run", "caffeinate"],
        value_opts: &["-t", "--target", "-u", "--unit", "-p", "--property", "-w"],
        positionals: 0,
        code_opts: &[],
        alone_reads: false,
    },
    Wrapper {
        names: &["su", "runuser", "script", "sg"],
        value_opts: &["-s", "--shell", "-g", "--group", "-G", "-u", "--user"],
        positionals: 0,
        code_opts: &["-c", "--command", "--session-command"],
        alone_reads: false,
    },
];

/// Programs that run code given inline or from a script file.
pub(crate) struct Interpreter {
    /// Inline-code options (`-c`, `-e`, `--eval`, ...).
    pub inline: &'static [&'static str],
    /// Inline letter allowed inside a short-option cluster (`bash -lc`, `perl -ne`).
    pub cluster: &'static [char],
    /// Options that take a value (so the value is not the script).
    pub value_opts: &'static [&'static str],
    /// The inline code is shell code (parse it).
    pub shell: bool,
}

pub(crate) fn interpreter(name: &str) -> Option<Interpreter> {
    let shells = [
        "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh", "fish", "csh", "tcsh",
        "rbash",
    ];
    if shells.contains(&name) {
        return Some(Interpreter {
            inline: &["-c"],
            cluster: &['c'],
            value_opts: &["-o", "+o", "-O", "+O", "--rcfile", "--init-file"],
            shell: true,
        });
    }
    let is_python = name
        .strip_prefix("python")
        .or_else(|| name.strip_prefix("pypy"))
        .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'));
    if is_python {
        return Some(Interpreter {
            inline: &["-c"],
            cluster: &['c'],
            value_opts: &["-W", "-X", "--check-hash-based-pycs"],
            shell: false,
        });
    }
    let (inline, cluster, value_opts): (
        &'static [&'static str],
        &'static [char],
        &'static [&'static str],
    ) = match name {
        "node" | "nodejs" | "ts-node" | "tsx" | "bun" | "deno" => (
            &["-e", "--eval", "-p", "--print", "eval"],
            &[],
            &[
                "-r",
                "--require",
                "--import",
                "--loader",
                "--experimental-loader",
                "-C",
                "--conditions",
            ],
        ),
        "perl" => (&["-e", "-E"], &['e', 'E'], &["-I", "-M", "-m", "-x"]),
        "ruby" | "irb" => (&["-e"], &['e'], &["-I", "-r", "-C"]),
        "php" => (&["-r", "-R", "-B", "-E"], &[], &["-c", "-d", "-z"]),
        "lua" | "luajit" => (&["-e"], &[], &["-l"]),
        "Rscript" | "R" => (&["-e"], &[], &[]),
        "osascript" => (&["-e"], &[], &["-l"]),
        "pwsh" | "powershell" => (
            &["-c", "-Command", "-command", "-EncodedCommand", "-ec", "-e"],
            &[],
            &[],
        ),
        "tclsh" | "wish" | "expect" | "jshell" | "gdb" => {
            (&["-c", "-ex", "-eval-command"], &[], &[])
        }
        _ => return None,
    };
    Some(Interpreter {
        inline,
        cluster,
        value_opts,
        shell: false,
    })
}

/// Whether `name` runs other commands or code given to it (wrappers, `eval`,
/// `xargs`, ...): such a program is never a rule prefix.
pub(crate) fn runs_other_commands(name: &str) -> bool {
    WRAPPERS.iter().any(|w| w.names.contains(&name))
        || matches!(
            name,
            "env"
                | "xargs"
                | "parallel"
                | "watch"
                | "eval"
                | "trap"
                | "source"
                | "."
                | "alias"
                | "let"
                | "fc"
        )
}
