//! What a `git` command does, from its subcommand and flags.
//!
//! Owns git's global options (`-C`, `--git-dir`; `-c` makes a command not
//! understood, since configuration can run programs) and the table of
//! subcommands: read-only ones (`status`, `log`, `diff`, `show`, listing
//! forms of `branch`/`tag`/`remote`/`stash`), local changes without hooks
//! (`add`, `reset`, `stash`, creating branches and tags: write), anything
//! that runs hooks or reaches a remote (`commit`, `checkout`, `push`,
//! `fetch`, ...: send), and destructive forms (`reset --hard`, `clean -f`,
//! `push --force`, `branch -D`, `checkout -- .`, `restore`, `rm`: money).
//! It must not know about other programs.

use super::ShellWord;
use super::tables::{any_dynamic, has_flag, sensitive_target};
use super::verdict::Verdict;
use crate::class_kind::Class;

/// Judges `git ARGS`.
pub(crate) fn judge(args: &[ShellWord]) -> Verdict {
    let v = judge_in(args);
    if v.class < Class::Write {
        return v;
    }
    // A changing git command acts on the repository it is pointed at.
    let words = statics(args);
    let mut v = v;
    for (i, w) in words.iter().enumerate() {
        let dir = match *w {
            "-C" | "--work-tree" => words.get(i + 1).copied(),
            _ => w.strip_prefix("--work-tree="),
        };
        if let Some(dir) = dir {
            v = v.writing(dir);
        }
        if !w.starts_with('-') && i > 0 && !matches!(words[i - 1], "-C" | "--work-tree") {
            break;
        }
    }
    v
}

fn judge_in(args: &[ShellWord]) -> Verdict {
    let mut i = 0;
    while i < args.len() {
        let Some(a) = args[i].as_static() else {
            return Verdict::new(
                Class::Send,
                "git gets arguments only known at run time".to_owned(),
            )
            .unclear(Class::Send, "cannot tell what git does".to_owned());
        };
        match a {
            "-C" | "--work-tree" | "--namespace" | "--super-prefix" => i += 2,
            "-c" | "--config-env" | "--exec-path" | "--git-dir" => {
                return config_override(a);
            }
            _ if a.starts_with("--config-env=")
                || a.starts_with("--exec-path=")
                || a.starts_with("--git-dir=") =>
            {
                return config_override(a);
            }
            _ if a.starts_with("--work-tree=") || a.starts_with("--namespace=") => i += 1,
            "--no-pager"
            | "-P"
            | "-p"
            | "--paginate"
            | "--bare"
            | "--no-replace-objects"
            | "--literal-pathspecs"
            | "--glob-pathspecs"
            | "--noglob-pathspecs"
            | "--icase-pathspecs"
            | "--no-optional-locks"
            | "--version"
            | "--help"
            | "--html-path"
            | "--man-path"
            | "--info-path"
            | "--no-advice" => i += 1,
            _ if a.starts_with('-') => {
                return Verdict::new(Class::Send, format!("unknown git option `{a}`"));
            }
            _ => break,
        }
    }
    let Some(sub) = args.get(i).and_then(ShellWord::as_static) else {
        return Verdict::read("git");
    };
    let rest = &args[i + 1..];
    let v = subcommand(sub, rest);
    if any_dynamic(rest) {
        return v.unclear(
            Class::Send,
            format!("`git {sub}` gets arguments only known at run time"),
        );
    }
    v
}

fn config_override(flag: &str) -> Verdict {
    Verdict::new(
        Class::Send,
        format!("`git {flag}` overrides git's configuration"),
    )
    .unclear(
        Class::Send,
        format!("`git {flag}` can make git run any program"),
    )
}

fn statics(args: &[ShellWord]) -> Vec<&str> {
    args.iter().filter_map(ShellWord::as_static).collect()
}

fn positionals<'a>(words: &[&'a str]) -> Vec<&'a str> {
    words
        .iter()
        .filter(|w| !w.starts_with('-'))
        .copied()
        .collect()
}

fn read(sub: &str) -> Verdict {
    Verdict::new(Class::Read, format!("`git {sub}` only reads"))
}

fn write(sub: &str) -> Verdict {
    Verdict::new(
        Class::Write,
        format!("`git {sub}` changes the local repository"),
    )
}

fn send(sub: &str, why: &str) -> Verdict {
    Verdict::new(Class::Send, format!("`git {sub}` {why}"))
}

fn money(what: &str, why: &str) -> Verdict {
    Verdict::new(Class::Money, format!("`git {what}` {why}"))
}

fn subcommand(sub: &str, args: &[ShellWord]) -> Verdict {
    let words = statics(args);
    let pos = positionals(&words);
    let flag = |short: Option<char>, long: &[&str]| has_flag(args, short, long);
    let first = pos.first().copied();
    match sub {
        "status" | "log" | "diff" | "show" | "rev-parse" | "ls-files" | "ls-tree" | "blame"
        | "annotate" | "describe" | "shortlog" | "rev-list" | "merge-base" | "cat-file"
        | "show-ref" | "for-each-ref" | "name-rev" | "count-objects" | "check-ignore"
        | "check-attr" | "var" | "version" | "help" | "whatchanged" | "range-diff" | "cherry"
        | "diff-tree" | "diff-files" | "diff-index" | "verify-commit" | "verify-tag" | "fsck"
        | "show-branch" | "check-ref-format" | "grep" => {
            if flag(None, &["output"]) {
                let target = words
                    .iter()
                    .enumerate()
                    .find_map(|(i, w)| {
                        w.strip_prefix("--output=").or_else(|| {
                            (*w == "--output")
                                .then(|| words.get(i + 1).copied())
                                .flatten()
                        })
                    })
                    .unwrap_or("a file");
                if let Some(why) = sensitive_target(target) {
                    return send(sub, &format!("--output writes `{target}`: {why}")).unclear(
                        Class::Send,
                        "changes to git's own files are never covered by rules".to_owned(),
                    );
                }
                return Verdict::new(
                    Class::Write,
                    format!("`git {sub} --output` writes `{target}`"),
                )
                .writing(target);
            }
            if sub == "grep"
                && words
                    .iter()
                    .any(|w| w.starts_with("-O") || w.starts_with("--open-files-in-pager"))
            {
                return send(sub, "opens results with a program (`-O`)").unclear(
                    Class::Send,
                    "`git grep -O` runs a program the analyser cannot see".to_owned(),
                );
            }
            read(sub)
        }
        "branch" => {
            let force = flag(Some('f'), &["force"]);
            if flag(Some('D'), &[]) || (flag(Some('d'), &["delete"]) && force) {
                money("branch -D", "deletes a branch that may hold unmerged work")
            } else if flag(Some('M'), &[]) || flag(Some('C'), &[]) || (force && !pos.is_empty()) {
                money("branch --force", "overwrites an existing branch")
            } else if flag(Some('d'), &["delete"])
                || flag(Some('m'), &["move"])
                || flag(Some('c'), &["copy"])
                || flag(
                    Some('u'),
                    &["set-upstream-to", "unset-upstream", "edit-description"],
                )
                || (!pos.is_empty()
                    && !flag(
                        Some('l'),
                        &[
                            "list",
                            "contains",
                            "no-contains",
                            "merged",
                            "no-merged",
                            "points-at",
                            "sort",
                            "format",
                        ],
                    ))
            {
                write("branch")
            } else {
                read("branch")
            }
        }
        "tag" => {
            if flag(Some('d'), &["delete"]) {
                money("tag -d", "deletes a tag")
            } else if pos.is_empty()
                || flag(
                    Some('l'),
                    &[
                        "list",
                        "contains",
                        "no-contains",
                        "merged",
                        "no-merged",
                        "points-at",
                        "sort",
                        "format",
                        "verify",
                    ],
                )
                || flag(Some('v'), &[])
            {
                read("tag")
            } else {
                write("tag")
            }
        }
        "remote" => match first {
            None | Some("get-url") => read("remote"),
            Some("show") if pos.len() == 1 => read("remote show"),
            Some("show" | "update" | "prune") => send("remote", "contacts a remote"),
            Some(_) => write("remote"),
        },
        "stash" => match first {
            Some("list" | "show") => read("stash list"),
            Some("drop" | "clear") => money("stash drop", "deletes stashed work"),
            _ => write("stash"),
        },
        "config" => {
            let reading = flag(
                Some('l'),
                &[
                    "get",
                    "get-all",
                    "get-regexp",
                    "get-urlmatch",
                    "list",
                    "show-origin",
                    "show-scope",
                    "get-color",
                    "get-colorbool",
                ],
            ) || matches!(first, Some("get" | "list"))
                || (pos.len() == 1
                    && !flag(
                        None,
                        &[
                            "unset",
                            "unset-all",
                            "add",
                            "replace-all",
                            "edit",
                            "rename-section",
                            "remove-section",
                        ],
                    ));
            if reading {
                read("config")
            } else {
                send(
                    "config",
                    "changes configuration, which can make git run programs",
                )
            }
        }
        "worktree" => match first {
            Some("list") => read("worktree list"),
            Some("remove") => money("worktree remove", "deletes a working tree"),
            Some("prune" | "move" | "lock" | "unlock" | "repair") => write("worktree"),
            _ => send("worktree", "checks out files and runs hooks"),
        },
        "notes" => match first {
            None | Some("list" | "show") => read("notes"),
            Some("remove" | "prune") => money("notes remove", "deletes notes"),
            _ => write("notes"),
        },
        "submodule" => match first {
            None | Some("status" | "summary") => read("submodule status"),
            _ => send(
                "submodule",
                "fetches, checks out or runs commands in other repositories",
            ),
        },
        "reflog" => match first {
            None | Some("show" | "exists") => read("reflog"),
            Some("expire" | "delete" | "drop") => money("reflog expire", "drops history"),
            _ => read("reflog"),
        },
        "add" | "mv" | "init" | "update-index" | "apply" | "read-tree" | "commit-tree"
        | "hash-object" | "symbolic-ref" | "mktree" | "mktag" | "unpack-objects" => write(sub),
        "update-ref" => {
            if flag(Some('d'), &["delete"]) {
                money("update-ref -d", "deletes a ref")
            } else {
                write(sub)
            }
        }
        "rm" => {
            if flag(None, &["cached"]) {
                write("rm --cached")
            } else {
                money("rm", "deletes files from the working tree")
            }
        }
        "restore" => {
            let staged = flag(Some('S'), &["staged"]);
            let worktree = flag(Some('W'), &["worktree"]);
            if staged && !worktree {
                write("restore --staged")
            } else {
                money("restore", "discards uncommitted changes")
            }
        }
        "reset" => {
            if flag(None, &["hard", "merge"]) {
                money("reset --hard", "discards uncommitted changes")
            } else {
                write("reset")
            }
        }
        "clean" => {
            if flag(Some('n'), &["dry-run"]) && !flag(Some('f'), &["force"]) {
                read("clean -n")
            } else {
                money("clean", "deletes untracked files")
            }
        }
        "checkout" => checkout(&words, args),
        "switch" => {
            if flag(Some('f'), &["force", "discard-changes"]) {
                money("switch --discard-changes", "discards uncommitted changes")
            } else {
                send("switch", "checks out files and runs hooks")
            }
        }
        "push" => {
            let forced = flag(
                Some('f'),
                &[
                    "force",
                    "force-with-lease",
                    "force-if-includes",
                    "delete",
                    "mirror",
                    "prune",
                ],
            ) || flag(Some('d'), &[])
                || pos
                    .iter()
                    .skip(1)
                    .any(|r| r.starts_with('+') || r.starts_with(':'));
            if forced {
                money("push --force", "can overwrite or delete work on the remote")
            } else {
                send("push", "sends commits to a remote")
            }
        }
        "prune" | "filter-branch" | "filter-repo" => money(sub, "deletes history"),
        "gc" if flag(None, &["prune"]) => money("gc --prune", "deletes unreachable objects"),
        "fetch" | "pull" | "clone" | "ls-remote" | "send-email" | "request-pull" | "archive" => {
            send(sub, "reaches a remote or writes outside the repository")
        }
        "commit" | "merge" | "rebase" | "cherry-pick" | "revert" | "am" | "bisect" | "gc"
        | "sparse-checkout" | "maintenance" | "repack" => {
            send(sub, "runs hooks or rewrites history")
        }
        _ => send(
            sub,
            "is not a known git subcommand (it may be an alias or an external program)",
        ),
    }
}

fn checkout(words: &[&str], args: &[ShellWord]) -> Verdict {
    if has_flag(args, Some('f'), &["force"]) {
        return money("checkout --force", "discards uncommitted changes");
    }
    if words.contains(&"--") {
        return money(
            "checkout -- PATH",
            "discards uncommitted changes to those paths",
        );
    }
    let creates = has_flag(args, Some('b'), &["orphan"]) || has_flag(args, Some('B'), &[]);
    let pos = positionals(words);
    let path_like = pos
        .iter()
        .any(|p| *p == "." || p.contains('.') || p.contains('*') || p.starts_with('/'));
    if !creates && (path_like || pos.len() > 1) {
        return money(
            "checkout PATH",
            "discards uncommitted changes to those paths",
        );
    }
    send("checkout", "checks out files and runs hooks")
}
