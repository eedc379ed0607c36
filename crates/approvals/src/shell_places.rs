//! Where a shell line's writes land.
//!
//! Owns [`place`]: the shell analyser ([`crate::shell`]) knows what each
//! command writes but not where the workspace is; this step resolves every
//! written path (and every word that names keel's protected state) against
//! the folder the shell is in at that point (`cd`/`pushd` followed in
//! source order; unknown after `popd` or a `cd` named at run time) and the
//! real file system ([`Places::locate`]). A write outside the workspace is
//! send, held in every mode and never covered by rules; a word reaching
//! keel's protected state is money; a resolved path into `.git` is send and
//! never covered by rules. It must not know about modes, rules or storage.

use std::path::{Path, PathBuf};

use crate::class_kind::{Class, OUTSIDE_WHY, PROTECTED_WHY};
use crate::places::{Place, Places};
use crate::shell::{ShellAnalysis, ShellWord, sensitive_path};

/// Raises the classes of `analysis` for where its writes land; true when
/// any of them lands outside the workspace (or in protected state).
pub(crate) fn place(analysis: &mut ShellAnalysis, places: &Places) -> bool {
    let mut escapes = false;
    let mut outside = Vec::new();
    let mut here: Option<PathBuf> = Some(places.workspace.clone());
    for cmd in &mut analysis.commands {
        let mut findings: Vec<(Class, String)> = Vec::new();
        for word in cmd.argv().iter().skip(1).filter_map(ShellWord::as_static) {
            let candidate = word.split_once('=').map_or(word, |(_, v)| v);
            if let Some(path) = resolve(candidate, here.as_deref())
                && places.locate(&path).0 == Place::Protected
            {
                findings.push((
                    Class::Money,
                    format!("`{word}` reaches keel's own state: {PROTECTED_WHY}"),
                ));
            }
        }
        for w in &cmd.writes {
            if w == "-" || w.starts_with("/dev/") {
                continue;
            }
            let Some(path) = resolve(w, here.as_deref()) else {
                findings.push((
                    Class::Send,
                    format!(
                        "writes `{w}` after a change of folder keel cannot follow, {OUTSIDE_WHY}"
                    ),
                ));
                escapes = true;
                continue;
            };
            let (where_, real) = places.locate(&path);
            match where_ {
                Place::Protected => {
                    findings.push((Class::Money, format!("writes `{w}`: {PROTECTED_WHY}")));
                    escapes = true;
                }
                Place::Outside => {
                    findings.push((Class::Send, format!("writes `{w}`, {OUTSIDE_WHY}")));
                    escapes = true;
                    outside.push(real);
                }
                Place::Inside(_) => {
                    if let Some(why) = sensitive_path(&real.to_string_lossy())
                        && sensitive_path(w).is_none()
                    {
                        findings.push((
                            Class::Send,
                            format!("writes `{w}` (really `{}`): {why}", real.display()),
                        ));
                    }
                }
            }
        }
        if matches!(cmd.program(), Some("cd" | "pushd" | "popd")) {
            here = next_folder(cmd.program(), cmd.argv(), here.as_deref());
        }
        if findings.is_empty() {
            continue;
        }
        for (class, why) in findings {
            cmd.class = cmd.class.max(class);
            cmd.reasons.insert(0, why.clone());
            cmd.unclear.push(why);
        }
        cmd.understood = false;
        analysis.understood = false;
        analysis.class = analysis.class.max(cmd.total_class()).max(Class::Send);
    }
    analysis.outside = outside;
    escapes
}

/// `word` as an absolute path from `here` (`None` when the folder is
/// unknown and the word is relative).
fn resolve(word: &str, here: Option<&Path>) -> Option<PathBuf> {
    if word.is_empty() || word.contains('\0') {
        return None;
    }
    if word == "~" || word.starts_with("~/") {
        return keel_tools::resolve_path(Path::new("/"), word).ok();
    }
    // Not normalised: the kernel applies `..` after following the symlink
    // before it, and [`Places::locate`] resolves the same way.
    match (word.starts_with('/'), here) {
        (true, _) => Some(PathBuf::from(word)),
        (false, Some(h)) => Some(h.join(word)),
        (false, None) => None,
    }
}

/// `cd`'s folder: bash's `cd` is logical (`..` taken off the text).
fn resolve_logical(word: &str, here: Option<&Path>) -> Option<PathBuf> {
    resolve(word, here).map(|p| keel_tools::normalize_path(&p))
}

/// The folder after `cd`/`pushd`/`popd`, when it can be known before running.
fn next_folder(program: Option<&str>, argv: &[ShellWord], here: Option<&Path>) -> Option<PathBuf> {
    if program == Some("popd") {
        return None;
    }
    let args: Vec<&ShellWord> = argv
        .iter()
        .skip(1)
        .filter(|w| {
            w.as_static()
                .is_none_or(|s| !s.starts_with('-') || s == "-")
        })
        .collect();
    match args.first() {
        None => resolve_logical("~", None),
        Some(ShellWord::Static(s)) if s != "-" => resolve_logical(s, here),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::analyze;

    fn placed(cmd: &str, places: &Places) -> (ShellAnalysis, bool) {
        let mut a = analyze(cmd);
        let e = place(&mut a, places);
        (a, e)
    }

    #[test]
    fn writes_outside_the_workspace_escape() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        let home = dir.path().join("keelhome");
        std::fs::create_dir_all(dir.path().join("elsewhere/sub")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere/sub"), ws.join("link")).unwrap();
        let places = Places::new(&ws).protecting(std::slice::from_ref(&home));
        let outside = [
            "echo hi >> ~/.bashrc",
            "echo hi | tee ../outside/a.txt",
            "cp a.txt ../outside/",
            "touch /tmp/x",
            "mkdir -p ../outside/d",
            "mv x ../outside/",
            "ln -s a.txt ../l",
            "sort -o ../o.txt a.txt",
            "uniq a.txt ../o.txt",
            "xxd a.txt ../o.txt",
            "find . -fprint ../o.txt",
            "git diff --output=../o.txt",
            "cd .. && touch x",
            "cd sub && cd ../.. && echo x > y",
            "popd; touch x",
            "git -C .. add x",
            "git --work-tree=/tmp add x",
            "tee -a ~/.profile < a.txt",
            "install -D a.txt ../x/y",
            "cp a.txt ~",
            "sed -i s/a/b/ ../other.txt",
            "echo x > link/../escaped",
        ];
        for cmd in outside {
            let (a, e) = placed(cmd, &places);
            assert!(e, "{cmd}: {}", a.reason());
            assert!(a.class >= Class::Send, "{cmd}: {:?}", a.class);
            assert!(!a.understood, "{cmd}");
        }
        for cmd in [
            "echo hi > a.txt",
            "cd sub && touch x",
            "cp a.txt sub/b.txt",
            "sort -o sub/o.txt a.txt",
            "echo x > /dev/null",
        ] {
            let (a, e) = placed(cmd, &places);
            assert!(!e, "{cmd}: {}", a.reason());
            assert!(a.class <= Class::Write, "{cmd}: {}", a.reason());
        }
        let db = home.join("keel.db");
        for cmd in [
            format!("mv evil.db {}", db.display()),
            format!("cp evil.db {}/", home.display()),
            format!("cat {}", home.join("config.toml").display()),
            format!("cd {} && mv x keel.db", home.display()),
        ] {
            let (a, _) = placed(&cmd, &places);
            assert_eq!(a.class, Class::Money, "{cmd}: {}", a.reason());
            assert!(!a.understood, "{cmd}");
        }
    }

    #[test]
    fn a_symlink_into_git_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().to_path_buf();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::os::unix::fs::symlink(".git", ws.join("gitlink")).unwrap();
        let places = Places::new(&ws);
        let (a, e) = placed("echo '[core]' >> gitlink/config", &places);
        assert!(!e);
        assert_eq!(a.class, Class::Send, "{}", a.reason());
        assert!(!a.understood);
    }
}
