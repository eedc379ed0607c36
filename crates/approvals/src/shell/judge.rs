//! Judging one simple command: program name, wrappers, interpreters and
//! shell code hidden in strings.
//!
//! Owns the judging of [`Judge`] (its type and [`Verdict`] are in
//! `verdict`): it resolves the program name (quoting already removed; a path outside the
//! system folders is a look-alike), unwraps wrappers (`sudo`, `env`,
//! `xargs`, `timeout`, `nohup`, ...) and judges what they run, parses the code
//! given to `bash -c`, `eval`, `trap`, `watch`, ... as shell again, and hands
//! known programs to `programs` and `git`. Anything it cannot see through is
//! send at least and not understood. It must not walk syntax trees.

use super::launchers::{Interpreter, WRAPPERS, Wrapper, interpreter};
use super::programs::judge_known;
use super::tables::{SYSTEM_DIRS, any_dynamic, dangerous_var};
pub(crate) use super::verdict::{Judge, Verdict};
use super::{ShellWord, analyze_at_depth, git};
use crate::class_kind::Class;

/// How deep `bash -c "bash -c '...'"` and wrappers of wrappers are followed.
const MAX_DEPTH: usize = 6;

impl Judge {
    /// A simple command with its `NAME=value` prefixes.
    pub fn command(&self, env: &[(String, ShellWord)], argv: &[ShellWord]) -> Verdict {
        let mut v = self.program(argv);
        for (name, _) in env {
            if dangerous_var(name) {
                v = v.unclear(
                    Class::Send,
                    format!("sets `{name}` for the command, which changes what it runs"),
                );
            }
        }
        v
    }

    /// Program and arguments.
    pub fn program(&self, argv: &[ShellWord]) -> Verdict {
        let Some(first) = argv.first() else {
            return Verdict::read(":");
        };
        let args = &argv[1..];
        let Some(prog) = first.as_static() else {
            return dynamic_program(first, args);
        };
        let (name, trusted) = match prog.rsplit_once('/') {
            Some((dir, base)) => (base, SYSTEM_DIRS.contains(&dir)),
            None => (prog, true),
        };
        if name.is_empty() {
            return Verdict::new(Class::Send, format!("runs `{prog}`"));
        }
        if let Some(v) = self.code_builtin(name, args) {
            return v;
        }
        if name == "env" {
            return self.env(args);
        }
        if name == "xargs" {
            return self.xargs(args);
        }
        if name == "parallel" || name == "watch" {
            return self.joined_code(name, args);
        }
        if let Some(w) = WRAPPERS.iter().find(|w| w.names.contains(&name)) {
            return self.wrapper(name, w, args);
        }
        if let Some(i) = interpreter(name) {
            return self.interpreter(name, &i, args);
        }
        if !trusted {
            // A look-alike (`./ls`, `/tmp/cat`): only its destructive twin counts.
            return match judge_known(self, name, args) {
                Some(v) if v.class == Class::Money => v,
                _ => Verdict::new(
                    Class::Send,
                    format!("runs `{prog}`, a program outside the system folders"),
                ),
            };
        }
        if name == "git" {
            return git::judge(args);
        }
        if let Some(v) = judge_known(self, name, args) {
            return v;
        }
        Verdict::new(
            Class::Send,
            format!("`{name}` is not a known read-only program"),
        )
    }

    /// What `via` runs: `inner` is program and arguments. `more_args`: the
    /// wrapper appends arguments from its input (`xargs`).
    pub fn wrapped(&self, via: &str, inner: &[ShellWord], more_args: bool) -> Verdict {
        if inner.is_empty() {
            return Verdict::new(Class::Send, format!("`{via}` with nothing to run")).unclear(
                Class::Send,
                format!("`{via}` runs something the analyser cannot see"),
            );
        }
        if self.depth >= MAX_DEPTH {
            return too_deep(via);
        }
        let mut argv = inner.to_vec();
        if more_args {
            argv.push(ShellWord::Dynamic("<arguments from input>".to_owned()));
        }
        let inner_name = inner[0]
            .as_static()
            .unwrap_or("a program named at run time")
            .to_owned();
        let v = Judge {
            depth: self.depth + 1,
        }
        .program(&argv);
        v.unclear(
            Class::Send,
            format!("runs `{inner_name}` through `{via}`, which the analyser does not trust"),
        )
    }

    /// Shell code in a string (`bash -c`, `eval`, `trap`, `watch`, ...).
    pub fn code(&self, via: &str, code: Option<&ShellWord>) -> Verdict {
        let Some(code) = code.and_then(ShellWord::as_static) else {
            return Verdict::new(Class::Send, format!("`{via}` runs code built at run time"))
                .unclear(
                    Class::Send,
                    format!("`{via}` runs code the analyser cannot see"),
                );
        };
        if self.depth >= MAX_DEPTH {
            return too_deep(via);
        }
        let inner = analyze_at_depth(code, self.depth + 1);
        let mut v = Verdict {
            class: inner.class,
            understood: false,
            reasons: inner.worst_reasons(),
            unclear: Vec::new(),
            interpreter: false,
            writes: Vec::new(),
        };
        v = v.unclear(
            Class::Send,
            format!("runs shell code through `{via}`, which is never matched by rules"),
        );
        v.unclear.extend(inner.unclear_reasons());
        v
    }

    fn code_builtin(&self, name: &str, args: &[ShellWord]) -> Option<Verdict> {
        let v = match name {
            "eval" => {
                let parts: Option<Vec<&str>> = args.iter().map(ShellWord::as_static).collect();
                let joined = parts.map(|p| ShellWord::Static(p.join(" ")));
                self.code("eval", joined.as_ref())
            }
            "trap" => match args.first().and_then(ShellWord::as_static) {
                None if args.is_empty() => Verdict::read("trap"),
                Some("-l" | "-p" | "-" | "") => Verdict::read("trap"),
                _ => self.code("trap", args.first()),
            },
            "source" | "." => {
                let script = args.first().and_then(ShellWord::as_static).unwrap_or("?");
                Verdict::new(
                    Class::Send,
                    format!("runs the shell script `{script}` in this shell"),
                )
                .unclear(
                    Class::Send,
                    format!("`{name}` runs a script the analyser cannot see"),
                )
            }
            "alias" => {
                if args
                    .iter()
                    .filter_map(ShellWord::as_static)
                    .any(|a| a.contains('='))
                    || any_dynamic(args)
                {
                    Verdict::new(Class::Send, "defines an alias".to_owned()).unclear(
                        Class::Send,
                        "an alias changes what later names run".to_owned(),
                    )
                } else {
                    Verdict::read("alias")
                }
            }
            "let" => Verdict::new(Class::Send, "`let` evaluates arithmetic".to_owned()).unclear(
                Class::Send,
                "arithmetic on variables can run hidden commands".to_owned(),
            ),
            "fc" => Verdict::new(Class::Send, "`fc` re-runs shell history".to_owned()).unclear(
                Class::Send,
                "`fc` runs commands the analyser cannot see".to_owned(),
            ),
            "command"
                if matches!(
                    args.first().and_then(ShellWord::as_static),
                    Some("-v" | "-V")
                ) =>
            {
                Verdict::read("command -v")
            }
            _ => return None,
        };
        Some(v)
    }

    fn wrapper(&self, name: &str, w: &Wrapper, args: &[ShellWord]) -> Verdict {
        let mut i = 0;
        let mut positionals = w.positionals;
        while i < args.len() {
            let Some(a) = args[i].as_static() else {
                return Verdict::new(
                    Class::Send,
                    format!("`{name}` gets arguments only known at run time"),
                )
                .unclear(Class::Send, format!("cannot tell what `{name}` runs"));
            };
            if a == "--" {
                i += 1;
                break;
            }
            if w.code_opts.contains(&a) {
                return self.code(name, args.get(i + 1));
            }
            if a.starts_with('-') && a.len() > 1 {
                i += if w.value_opts.contains(&a) { 2 } else { 1 };
                continue;
            }
            if positionals > 0 {
                positionals -= 1;
                i += 1;
                continue;
            }
            break;
        }
        let inner = args.get(i..).unwrap_or(&[]);
        if inner.is_empty() && w.alone_reads {
            return Verdict::read(name);
        }
        self.wrapped(name, inner, false)
    }

    fn env(&self, args: &[ShellWord]) -> Verdict {
        let mut i = 0;
        let mut unclear: Option<String> = None;
        while i < args.len() {
            let Some(a) = args[i].as_static() else {
                return Verdict::new(
                    Class::Send,
                    "`env` gets arguments only known at run time".to_owned(),
                )
                .unclear(Class::Send, "cannot tell what `env` runs".to_owned());
            };
            match a {
                "-u" | "--unset" | "-C" | "--chdir" => i += 2,
                "-S" | "--split-string" => return self.code("env -S", args.get(i + 1)),
                _ if a.starts_with("--split-string=") || a.starts_with("-S") => {
                    return Verdict::new(
                        Class::Send,
                        "`env -S` splits a string into a command".to_owned(),
                    )
                    .unclear(
                        Class::Send,
                        "`env -S` runs a command the analyser cannot see".to_owned(),
                    );
                }
                _ if a.starts_with('-') => i += 1,
                _ if a.contains('=') => {
                    let var = a.split('=').next().unwrap_or("");
                    if dangerous_var(var) {
                        unclear = Some(format!(
                            "`env` sets `{var}`, which changes what the command runs"
                        ));
                    }
                    i += 1;
                }
                _ => break,
            }
        }
        let inner = args.get(i..).unwrap_or(&[]);
        let v = if inner.is_empty() {
            Verdict::read("env")
        } else {
            self.wrapped("env", inner, false)
        };
        match unclear {
            Some(reason) => v.unclear(Class::Send, reason),
            None => v,
        }
    }

    fn xargs(&self, args: &[ShellWord]) -> Verdict {
        const VALUE_OPTS: &[&str] = &[
            "-I",
            "-L",
            "-n",
            "-P",
            "-s",
            "-d",
            "-E",
            "-a",
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
            "--max-lines",
            "--replace",
            "--eof",
            "--max-chars",
            "--process-slot-var",
        ];
        let mut i = 0;
        while i < args.len() {
            match args[i].as_static() {
                None => {
                    return Verdict::new(
                        Class::Send,
                        "`xargs` gets arguments only known at run time".to_owned(),
                    )
                    .unclear(Class::Send, "cannot tell what `xargs` runs".to_owned());
                }
                Some("--") => {
                    i += 1;
                    break;
                }
                Some(a) if VALUE_OPTS.contains(&a) => i += 2,
                Some(a) if a.starts_with('-') && a.len() > 1 => i += 1,
                Some(_) => break,
            }
        }
        let inner = args.get(i..).unwrap_or(&[]);
        if inner.is_empty() {
            // `xargs` alone runs `echo`.
            return Verdict::read("xargs");
        }
        self.wrapped("xargs", inner, true)
    }

    /// `watch 'cmd args'` and `parallel`: the words are joined into shell code.
    fn joined_code(&self, name: &str, args: &[ShellWord]) -> Verdict {
        let mut i = 0;
        while i < args.len() {
            match args[i].as_static() {
                Some("-n" | "--interval" | "-j" | "--jobs" | "-S" | "--sshlogin") => i += 2,
                Some(a) if a.starts_with('-') && a.len() > 1 => i += 1,
                _ => break,
            }
        }
        let rest = args.get(i..).unwrap_or(&[]);
        let parts: Option<Vec<&str>> = rest.iter().map(ShellWord::as_static).collect();
        let joined = parts
            .filter(|p| !p.is_empty())
            .map(|p| ShellWord::Static(p.join(" ")));
        self.code(name, joined.as_ref())
    }

    fn interpreter(&self, name: &str, spec: &Interpreter, args: &[ShellWord]) -> Verdict {
        let mut i = 0;
        let mut script: Option<&ShellWord> = None;
        while i < args.len() {
            let Some(a) = args[i].as_static() else {
                script = Some(&args[i]);
                break;
            };
            let inline = spec.inline.contains(&a)
                || (a.starts_with('-')
                    && !a.starts_with("--")
                    && a.len() > 2
                    && a[1..].chars().all(|c| c.is_ascii_alphanumeric())
                    && spec.cluster.iter().any(|c| a[1..].contains(*c)));
            if inline {
                let code = args.get(i + 1);
                if spec.shell {
                    return self.code(&format!("{name} {a}"), code);
                }
                return Verdict::new(
                    Class::Send,
                    format!("runs inline code through `{name} {a}`"),
                )
                .unclear(
                    Class::Send,
                    format!("inline code given to `{name} {a}` is not analysed"),
                );
            }
            if a == "-m" && name.starts_with("py") {
                script = args.get(i + 1);
                break;
            }
            if a == "--" {
                script = args.get(i + 1);
                break;
            }
            if a.starts_with('-') && a.len() > 1 {
                i += if spec.value_opts.contains(&a) { 2 } else { 1 };
                continue;
            }
            script = Some(&args[i]);
            break;
        }
        match script.map(ShellWord::as_static) {
            None | Some(Some("-" | "/dev/stdin")) => Verdict::new(
                Class::Send,
                format!("`{name}` reads a program from its input"),
            )
            .unclear(
                Class::Send,
                format!("the program `{name}` reads from its input is not analysed"),
            ),
            Some(None) => Verdict::new(
                Class::Send,
                format!("`{name}` runs a script named at run time"),
            )
            .unclear(
                Class::Send,
                format!("cannot tell which script `{name}` runs"),
            ),
            Some(Some(s)) => Verdict {
                class: Class::Send,
                understood: true,
                reasons: vec![format!("runs `{s}` with the interpreter `{name}`")],
                unclear: Vec::new(),
                interpreter: true,
                writes: Vec::new(),
            },
        }
    }
}

fn dynamic_program(first: &ShellWord, args: &[ShellWord]) -> Verdict {
    let destructive_looking = args.iter().filter_map(ShellWord::as_static).any(|a| {
        matches!(
            a,
            "-rf"
                | "-fr"
                | "-Rf"
                | "-fR"
                | "-r"
                | "-R"
                | "-f"
                | "--recursive"
                | "--force"
                | "--hard"
                | "-delete"
                | "--delete"
                | "-D"
        ) || a.starts_with("of=")
    });
    let class = if destructive_looking {
        Class::Money
    } else {
        Class::Send
    };
    let v = Verdict::new(
        class,
        if destructive_looking {
            format!(
                "the program name `{}` is only known at run time and its arguments look destructive",
                first.text()
            )
        } else {
            format!(
                "the program name `{}` is only known at run time",
                first.text()
            )
        },
    );
    v.unclear(Class::Send, "cannot tell which program runs".to_owned())
}

fn too_deep(via: &str) -> Verdict {
    Verdict::new(Class::Send, format!("`{via}` nests commands too deeply"))
        .unclear(Class::Send, "too deeply nested to analyse".to_owned())
}
