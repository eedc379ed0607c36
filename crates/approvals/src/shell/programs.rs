//! What known programs do, judged from their arguments.
//!
//! Owns the argument checks of programs whose class depends on their flags (`find`,
//! `sed`, `awk`, `sort`, `tee`, `chmod`, `dd`, ...) over the tables of
//! `tables`. Wrappers, interpreters and `git` are in
//! `judge` and `git`; this module must not walk syntax trees.

use super::ShellWord;
use super::tables::{
    DESTRUCTIVE, DESTRUCTIVE_SUBCOMMANDS, READ_ONLY, SENSITIVE_UNCLEAR, WRITES_FILES, WriteTarget,
    any_dynamic, dangerous_var, has_flag, positionals, sensitive_target, write_target,
};
use super::verdict::{Judge, Verdict};
use crate::class_kind::Class;

/// Judges a program by name (already stripped of a trusted system path),
/// or `None` when it is not one of the programs this module knows.
pub(crate) fn judge_known(j: &Judge, name: &str, args: &[ShellWord]) -> Option<Verdict> {
    if DESTRUCTIVE.contains(&name) || name.starts_with("mkfs") {
        return Some(Verdict::new(
            Class::Money,
            format!("`{name}` deletes or destroys data"),
        ));
    }
    let positional = positionals(args);
    for (prog, sub) in DESTRUCTIVE_SUBCOMMANDS {
        let words: Vec<&str> = args.iter().filter_map(ShellWord::as_static).collect();
        let subs = if sub.first().is_some_and(|s| s.starts_with('-')) {
            words.clone()
        } else {
            positional.clone()
        };
        if *prog == name && subs.starts_with(sub) {
            return Some(Verdict::new(
                Class::Money,
                format!("`{name} {}` deletes things", sub.join(" ")),
            ));
        }
    }
    let v = match name {
        "find" => find(j, args),
        "fd" | "fdfind" => fd(j, args),
        "sed" | "gsed" => sed(args),
        "awk" | "gawk" | "mawk" | "nawk" => awk(args),
        "sort" => output_flag(name, args, Some('o'), &["output"]).worst(
            if has_flag(args, None, &["compress-program"]) {
                Verdict::new(
                    Class::Send,
                    "`sort --compress-program` runs a program".to_owned(),
                )
            } else {
                Verdict::read(name)
            },
        ),
        "tree" => output_flag(name, args, Some('o'), &[]),
        "uniq" => {
            let p = positional;
            match p.get(1) {
                Some(out) => file_write(name, out),
                None => Verdict::read(name),
            }
        }
        "xxd" => match positional.get(1) {
            Some(out) => file_write(name, out),
            None => Verdict::read(name),
        },
        "tee" => {
            let mut v = Verdict::read(name);
            for p in positional {
                v = v.worst(file_write(name, p));
            }
            v
        }
        "date" => {
            if has_flag(args, Some('s'), &["set"]) {
                Verdict::new(
                    Class::Send,
                    "`date --set` changes the system clock".to_owned(),
                )
            } else {
                Verdict::read(name)
            }
        }
        "hostname" if !positional.is_empty() => Verdict::new(
            Class::Send,
            "`hostname NAME` changes the host name".to_owned(),
        ),
        "hostname" => Verdict::read(name),
        "rg" => {
            if has_flag(args, None, &["pre", "hostname-bin"]) {
                Verdict::new(
                    Class::Send,
                    "`rg --pre` runs a program on every file".to_owned(),
                )
            } else {
                Verdict::read(name)
            }
        }
        "yq" if has_flag(args, Some('i'), &["inplace"]) => {
            files_changed(name, &positional, Class::Write)
        }
        "yq" => Verdict::read(name),
        "printf" | "read" | "mapfile" | "readarray" => assigns_names(name, args),
        "cd" | "pushd" if any_dynamic(args) => Verdict::read(name).unclear(
            Class::Send,
            format!("`{name}` goes to a folder named at run time"),
        ),
        "cd" | "pushd" => match positional.iter().find_map(|p| sensitive_target(p)) {
            Some(why) => Verdict::new(
                Class::Send,
                format!("`{name}` enters git's own files: {why}"),
            )
            .unclear(Class::Send, SENSITIVE_UNCLEAR.to_owned()),
            None => Verdict::read(name),
        },
        "dd" => {
            if args
                .iter()
                .filter_map(ShellWord::as_static)
                .any(|a| a.starts_with("of="))
            {
                Verdict::new(Class::Money, "`dd of=...` overwrites its target".to_owned())
            } else {
                Verdict::new(Class::Send, "`dd` reads raw devices or files".to_owned())
            }
        }
        "chmod" | "chown" | "chgrp" => {
            if has_flag(args, Some('R'), &["recursive"]) {
                Verdict::new(
                    Class::Money,
                    format!("`{name} -R` changes a whole tree at once"),
                )
            } else {
                files_changed(name, &positional, Class::Write)
            }
        }
        _ if WRITES_FILES.contains(&name) => files_changed(name, &positional, Class::Write),
        _ if READ_ONLY.contains(&name) => Verdict::read(name),
        _ => return None,
    };
    if any_dynamic(args) && !READ_ONLY.contains(&name) {
        return Some(v.unclear(
            Class::Send,
            format!("`{name}` gets arguments that are only known at run time"),
        ));
    }
    Some(v)
}

fn file_write(name: &str, path: &str) -> Verdict {
    file_write_class(name, path).writing(path)
}

fn file_write_class(name: &str, path: &str) -> Verdict {
    match write_target(path) {
        WriteTarget::Sink => Verdict::read(name),
        WriteTarget::File => {
            Verdict::new(Class::Write, format!("`{name}` writes the file `{path}`"))
        }
        WriteTarget::Special {
            class,
            why,
            unclear,
        } => {
            let v = Verdict::new(class, format!("`{name}` writes `{path}`: {why}"));
            if unclear {
                v.unclear(Class::Send, SENSITIVE_UNCLEAR.to_owned())
            } else {
                v
            }
        }
    }
}

fn files_changed(name: &str, paths: &[&str], class: Class) -> Verdict {
    let mut v = Verdict::new(class, format!("`{name}` changes local files"));
    for p in paths {
        if !matches!(write_target(p), WriteTarget::File | WriteTarget::Sink) {
            v = v.worst(file_write_class(name, p));
        }
        v = v.writing(p);
    }
    v
}

/// `-o FILE`, `-oFILE`, `--output FILE`, `--output=FILE`.
fn output_flag(name: &str, args: &[ShellWord], short: Option<char>, long: &[&str]) -> Verdict {
    let words: Vec<&str> = args.iter().filter_map(ShellWord::as_static).collect();
    let mut v = Verdict::read(name);
    for (i, a) in words.iter().enumerate() {
        let target = if let Some(l) = a.strip_prefix("--") {
            let (flag, val) = l.split_once('=').map_or((l, None), |(f, v)| (f, Some(v)));
            if long.contains(&flag) {
                val.map(str::to_owned)
                    .or_else(|| words.get(i + 1).map(|s| (*s).to_owned()))
            } else {
                None
            }
        } else if let (Some(c), Some(rest)) = (short, a.strip_prefix('-')) {
            let prefix = format!("{c}");
            match rest.strip_prefix(&prefix) {
                Some("") => words.get(i + 1).map(|s| (*s).to_owned()),
                Some(attached) => Some(attached.to_owned()),
                None => None,
            }
        } else {
            None
        };
        if let Some(t) = target {
            v = v.worst(file_write(name, &t));
        }
    }
    v
}

fn assigns_names(name: &str, args: &[ShellWord]) -> Verdict {
    let words: Vec<&str> = args.iter().filter_map(ShellWord::as_static).collect();
    let targets: Vec<&str> = if name == "printf" {
        words
            .iter()
            .position(|w| *w == "-v")
            .and_then(|i| words.get(i + 1))
            .into_iter()
            .copied()
            .collect()
    } else {
        words
            .iter()
            .filter(|w| !w.starts_with('-'))
            .copied()
            .collect()
    };
    match targets.iter().find(|t| dangerous_var(t)) {
        Some(t) => Verdict::new(Class::Send, format!("`{name}` sets `{t}`")).unclear(
            Class::Send,
            format!("`{name}` sets `{t}`, which changes what later commands run"),
        ),
        None => Verdict::read(name),
    }
}

fn find(j: &Judge, args: &[ShellWord]) -> Verdict {
    let mut v = Verdict::read("find");
    let mut i = 0;
    while i < args.len() {
        match args[i].as_static() {
            Some("-delete") => {
                v = v.worst(Verdict::new(
                    Class::Money,
                    "`find -delete` deletes files".to_owned(),
                ));
            }
            Some(flag @ ("-exec" | "-execdir" | "-ok" | "-okdir")) => {
                let start = i + 1;
                let mut end = start;
                while end < args.len() && !matches!(args[end].as_static(), Some(";" | "+")) {
                    end += 1;
                }
                v = v.worst(j.wrapped(&format!("find {flag}"), &args[start..end], false));
                i = end;
            }
            Some("-fprint" | "-fprint0" | "-fprintf" | "-fls") => {
                if let Some(t) = args.get(i + 1).and_then(ShellWord::as_static) {
                    v = v.worst(file_write("find", t));
                }
            }
            _ => {}
        }
        i += 1;
    }
    v
}

fn fd(j: &Judge, args: &[ShellWord]) -> Verdict {
    for (i, a) in args.iter().enumerate() {
        if matches!(a.as_static(), Some("-x" | "--exec" | "-X" | "--exec-batch")) {
            return j.wrapped("fd --exec", &args[i + 1..], true);
        }
    }
    Verdict::read("fd")
}

fn awk(args: &[ShellWord]) -> Verdict {
    let words: Vec<&str> = args.iter().filter_map(ShellWord::as_static).collect();
    let mut i = 0;
    let mut program = None;
    while i < words.len() {
        match words[i] {
            "-f" | "--file" => {
                return Verdict::new(
                    Class::Send,
                    "`awk -f` runs a program from a file".to_owned(),
                )
                .unclear(
                    Class::Send,
                    "`awk -f` runs a program the analyser cannot see".to_owned(),
                );
            }
            "-v" | "-F" | "--assign" | "--field-separator" => i += 1,
            w if w.starts_with('-') && w.len() > 1 => {}
            w => {
                program = Some(w);
                break;
            }
        }
        i += 1;
    }
    let Some(program) = program else {
        return Verdict::read("awk");
    };
    const RISKY: &[&str] = &["system", "|", ">", "getline", "@load", "@include", "close"];
    match RISKY.iter().find(|r| program.contains(*r)) {
        Some(r) => Verdict::new(Class::Send, format!("the awk program uses `{r}`")).unclear(
            Class::Send,
            format!("the awk program uses `{r}`, which can run commands or write files"),
        ),
        None => Verdict::read("awk"),
    }
}

fn sed(args: &[ShellWord]) -> Verdict {
    let words: Vec<&str> = args.iter().filter_map(ShellWord::as_static).collect();
    let mut scripts = Vec::new();
    let mut files = Vec::new();
    let mut in_place = false;
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        if w == "-e" || w == "--expression" {
            if let Some(s) = words.get(i + 1) {
                scripts.push(*s);
            }
            i += 2;
            continue;
        }
        if let Some(s) = w.strip_prefix("--expression=") {
            scripts.push(s);
        } else if w == "-f" || w == "--file" || w.starts_with("--file=") {
            return Verdict::new(Class::Send, "`sed -f` runs a script from a file".to_owned())
                .unclear(
                    Class::Send,
                    "`sed -f` runs a script the analyser cannot see".to_owned(),
                );
        } else if w == "-l" || w == "--line-length" {
            i += 1;
        } else if w.starts_with("--in-place") {
            in_place = true;
        } else if let Some(short) = w
            .strip_prefix('-')
            .filter(|s| !s.starts_with('-') && !s.is_empty())
        {
            if short.contains('i') {
                in_place = true;
            }
            if short.ends_with('e') {
                if let Some(s) = words.get(i + 1) {
                    scripts.push(*s);
                }
                i += 2;
                continue;
            }
        } else if !w.starts_with("--") {
            files.push(w);
        }
        i += 1;
    }
    if scripts.is_empty() && !files.is_empty() {
        scripts.push(files.remove(0));
    }
    let mut v = Verdict::read("sed");
    for s in scripts {
        if let Err(why) = sed_script_safe(s) {
            v = v.worst(
                Verdict::new(Class::Send, format!("the sed script {why}"))
                    .unclear(Class::Send, format!("the sed script {why}")),
            );
        }
    }
    if in_place {
        v = v.worst(files_changed("sed -i", &files, Class::Write));
    }
    v
}

/// Accepts sed scripts made only of addresses and commands that print,
/// delete, substitute (without the `e` and `w` flags), transliterate,
/// branch, or add text; rejects `e`, `w`, `W` and anything unusual.
pub(crate) fn sed_script_safe(script: &str) -> Result<(), &'static str> {
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    let skip_delimited = |i: &mut usize, delim: char| -> Result<(), &'static str> {
        while *i < chars.len() {
            match chars[*i] {
                '\\' => *i += 2,
                c if c == delim => {
                    *i += 1;
                    return Ok(());
                }
                _ => *i += 1,
            }
        }
        Err("has an unterminated expression")
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\n' | ';' | '{' | '}' | '!' | ',' | '$' | '~' | '+' | '0'..='9' => i += 1,
            '/' => {
                i += 1;
                skip_delimited(&mut i, '/')?;
                while i < chars.len() && matches!(chars[i], 'I' | 'M') {
                    i += 1;
                }
            }
            '\\' => {
                let d = *chars.get(i + 1).ok_or("ends with a backslash")?;
                i += 2;
                skip_delimited(&mut i, d)?;
            }
            's' | 'y' => {
                let d = *chars.get(i + 1).ok_or("has an incomplete s/y command")?;
                if d == '\\' || d == '\n' {
                    return Err("uses an unusual delimiter");
                }
                i += 2;
                skip_delimited(&mut i, d)?;
                skip_delimited(&mut i, d)?;
                if c == 's' {
                    while i < chars.len() && chars[i].is_ascii_alphanumeric() {
                        match chars[i] {
                            'e' => return Err("runs its result as a command (`s///e`)"),
                            'w' => return Err("writes a file (`s///w`)"),
                            'g' | 'p' | 'i' | 'I' | 'm' | 'M' | '0'..='9' => i += 1,
                            _ => return Err("uses an unknown s/// flag"),
                        }
                    }
                }
            }
            'a' | 'i' | 'c' | 'b' | 't' | 'T' | ':' | 'r' | 'R' => {
                // Text, labels and files read: up to the end of the line.
                while i < chars.len() && chars[i] != '\n' {
                    if matches!(c, 'b' | 't' | 'T' | ':') && chars[i] == ';' {
                        break;
                    }
                    i += 1;
                }
            }
            'p' | 'P' | 'd' | 'D' | 'q' | 'Q' | '=' | 'n' | 'N' | 'g' | 'G' | 'h' | 'H' | 'x'
            | 'l' | 'z' | 'F' => i += 1,
            'e' => return Err("runs a command (`e`)"),
            'w' | 'W' => return Err("writes a file (`w`)"),
            _ => return Err("uses a command the analyser does not know"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sed_scripts() {
        for ok in [
            "1,80p",
            "s/a/b/g",
            "/foo/d",
            "$p",
            "10q",
            "s|a/b|c|2",
            "/x/,/y/{p}",
            "y/abc/xyz/",
            "1~2p",
            "s/e/w/g;p",
        ] {
            assert!(sed_script_safe(ok).is_ok(), "{ok}");
        }
        for bad in [
            "s/a/b/e",
            "s/a/b/w out",
            "w out",
            "1e id",
            "e",
            "s/a/b",
            "W f",
            "k",
        ] {
            assert!(sed_script_safe(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn dangerous_vars_and_sensitive_paths() {
        for v in [
            "PATH",
            "LD_PRELOAD",
            "GIT_SSH_COMMAND",
            "BASH_ENV",
            "GIT_PAGER",
            "IFS",
        ] {
            assert!(dangerous_var(v), "{v}");
        }
        for v in ["FOO", "RUST_LOG", "CARGO_TARGET_DIR", "LANG"] {
            assert!(!dangerous_var(v), "{v}");
        }
        assert!(sensitive_target(".git/hooks/pre-commit").is_some());
        assert!(sensitive_target("/repo/.git/config").is_some());
        assert!(sensitive_target("~/.gitconfig").is_some());
        assert!(sensitive_target("src/.gitignore").is_none());
        assert!(sensitive_target("notes.git").is_none());
    }
}
