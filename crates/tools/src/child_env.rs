//! What a child process's environment holds, and which secrets keel hides.
//!
//! Owns [`EnvPolicy`] (after Codex's `shell_environment_policy`): a command
//! keel runs for the model inherits keel's environment *less* every variable
//! whose name looks like a credential (`*KEY*`, `*TOKEN*`, `*SECRET*`,
//! `*PASSWORD*`, `*CREDENTIAL*`, `*_AUTH*`, `*COOKIE*`, a URL
//! variable that embeds a password, and every variable keel itself reads
//! credentials from), with `exclude` and `include` name patterns on top, and
//! git told not to run programs from repository config for read-only
//! commands (`core.fsmonitor`, `diff.external`, pagers). It also owns
//! [`Scrubber`]: the values of the secrets keel knows, replaced by
//! `[redacted]` in anything a tool returns, before it is stored, shown or
//! sent. It must not know about approvals or the wire.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

/// Variables keel reads credentials or database passwords from.
pub const KEEL_SECRET_VARS: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "KEEL_API_KEY",
    "KEEL_APPROVALS_DATABASE_URL",
    "KEEL_DATABASE_URL",
    "KEEL_APP_SERVER_TOKEN",
    "KEEL_INBOX_TOKEN",
];

/// Names registered at run time ([`treat_as_secret`]), and a count of
/// registrations so caches know when to rebuild.
static EXTRA_SECRETS: std::sync::RwLock<Vec<String>> = std::sync::RwLock::new(Vec::new());
static EXTRA_GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Treats the variable `name` as a secret from now on (for example the
/// `api_key_env` a provider's config names): it is dropped from child
/// environments and its value is scrubbed from tool output.
pub fn treat_as_secret(name: &str) {
    let upper = name.to_ascii_uppercase();
    let mut extra = EXTRA_SECRETS.write().unwrap_or_else(|e| e.into_inner());
    if !extra.contains(&upper) {
        extra.push(upper);
        EXTRA_GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Changes whenever [`treat_as_secret`] adds a name.
pub fn secrets_generation() -> u64 {
    EXTRA_GENERATION.load(std::sync::atomic::Ordering::Relaxed)
}

/// Name fragments (upper case) that mark a variable as a secret.
const SECRET_FRAGMENTS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "_AUTH",
    "COOKIE",
    "PRIVATE",
];

/// The shortest value [`Scrubber`] hides (shorter ones match too much).
const MIN_SECRET_LEN: usize = 8;

/// Which of keel's variables a child process gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvPolicy {
    /// Pass every variable, secrets included (`inherit = "all"` with the
    /// default filter off). Off by default.
    pub keep_secrets: bool,
    /// More names (glob: `*` any run of characters, case-insensitive) to drop.
    pub exclude: Vec<String>,
    /// Names always passed even when they look like secrets (the explicit
    /// choice of whoever wrote the config).
    pub include: Vec<String>,
    /// Variables set for every child.
    pub set: BTreeMap<String, String>,
}

/// The policy this process configured ([`configure`]), else the default.
static CONFIGURED: std::sync::RwLock<Option<EnvPolicy>> = std::sync::RwLock::new(None);

/// Sets the policy of every command this process runs from now on (the
/// CLI reads it from `[shell_environment_policy]` in `config.toml`).
pub fn configure(policy: EnvPolicy) {
    *CONFIGURED.write().unwrap_or_else(|e| e.into_inner()) = Some(policy);
}

impl EnvPolicy {
    /// The configured policy ([`configure`]), else the default.
    pub fn configured() -> EnvPolicy {
        CONFIGURED
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_default()
    }

    /// Whether a variable named `name` with `value` is dropped.
    pub fn drops(&self, name: &str, value: &str) -> bool {
        if self.include.iter().any(|p| glob_match(p, name)) {
            return false;
        }
        if self.exclude.iter().any(|p| glob_match(p, name)) {
            return true;
        }
        !self.keep_secrets && looks_secret(name, value)
    }

    /// The environment of a child that starts in `cwd`: keel's own
    /// (`vars`) filtered, then the git guards (the fixed ones and every
    /// driver the repository at `cwd` names, see [`crate::git_drivers`]),
    /// then `set`, then the request's own variables (`extra`).
    pub fn child_env<I>(
        &self,
        vars: I,
        extra: &[(String, String)],
        cwd: &Path,
    ) -> Vec<(OsString, OsString)>
    where
        I: IntoIterator<Item = (OsString, OsString)>,
    {
        let mut out: BTreeMap<OsString, OsString> = vars
            .into_iter()
            .filter(|(k, v)| !self.drops(&k.to_string_lossy(), &v.to_string_lossy()))
            .collect();
        // Drop inherited git config injections: the guards below own them.
        out.retain(|k, _| {
            let k = k.to_string_lossy();
            !(k.starts_with("GIT_CONFIG_") || k == "GIT_EXTERNAL_DIFF")
        });
        let guards = GIT_GUARDS
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .chain(
                crate::git_drivers::driver_guards(cwd)
                    .into_iter()
                    .map(|k| (k, String::new())),
            );
        let mut count = 0;
        for (i, (k, v)) in guards.enumerate() {
            out.insert(format!("GIT_CONFIG_KEY_{i}").into(), k.into());
            out.insert(format!("GIT_CONFIG_VALUE_{i}").into(), v.into());
            count = i + 1;
        }
        out.insert("GIT_CONFIG_COUNT".into(), count.to_string().into());
        out.insert("GIT_PAGER".into(), "cat".into());
        for (k, v) in &self.set {
            out.insert(k.into(), v.into());
        }
        for (k, v) in extra {
            out.insert(k.into(), v.into());
        }
        out.into_iter().collect()
    }

    /// [`child_env`](Self::child_env) over this process's environment.
    pub fn child_env_now(
        &self,
        extra: &[(String, String)],
        cwd: &Path,
    ) -> Vec<(OsString, OsString)> {
        self.child_env(std::env::vars_os(), extra, cwd)
    }
}

/// Git settings every child gets at command-line priority, so repository
/// config cannot make a read-only git run a program.
const GIT_GUARDS: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("diff.external", ""),
    ("core.sshCommand", "ssh"),
    ("uploadpack.packObjectsHook", ""),
];

/// Whether a variable looks like it holds a credential.
pub fn looks_secret(name: &str, value: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if KEEL_SECRET_VARS.contains(&upper.as_str())
        || EXTRA_SECRETS
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&upper)
    {
        return true;
    }
    if SECRET_FRAGMENTS.iter().any(|f| upper.contains(f)) {
        // Keyboard and locale settings are not secrets.
        return !matches!(upper.as_str(), "XKB_DEFAULT_KEYMAP" | "KEYTIMEOUT");
    }
    url_with_password(value)
}

fn url_with_password(value: &str) -> bool {
    let Some((_, rest)) = value.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

/// `*` matches any run of characters; case-insensitive.
fn glob_match(pattern: &str, name: &str) -> bool {
    let p = pattern.to_ascii_uppercase();
    let n = name.to_ascii_uppercase();
    let parts: Vec<&str> = p.split('*').collect();
    if parts.len() == 1 {
        return p == n;
    }
    let mut rest = n.as_str();
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else {
                return false;
            };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}

/// Hides the values of known secrets in text.
#[derive(Debug, Clone, Default)]
pub struct Scrubber {
    secrets: Vec<String>,
}

/// What a hidden secret is replaced with.
pub const REDACTED: &str = "[redacted]";

impl Scrubber {
    /// The secrets of this process's environment (every variable
    /// [`looks_secret`] names, at least [`MIN_SECRET_LEN`] long).
    pub fn from_env() -> Self {
        Self::from_vars(std::env::vars_os().map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        }))
    }

    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut secrets: Vec<String> = vars
            .into_iter()
            .filter(|(k, v)| v.len() >= MIN_SECRET_LEN && looks_secret(k, v))
            .map(|(_, v)| v)
            .collect();
        // Longest first, so a secret containing another is hidden whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self { secrets }
    }

    /// Adds one more value to hide.
    pub fn hide(&mut self, secret: &str) {
        if secret.len() >= MIN_SECRET_LEN && !self.secrets.iter().any(|s| s == secret) {
            self.secrets.push(secret.to_owned());
            self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every known secret replaced; `None` when nothing matched.
    pub fn scrub(&self, text: &str) -> Option<String> {
        if !self.secrets.iter().any(|s| text.contains(s.as_str())) {
            return None;
        }
        let mut out = text.to_owned();
        for s in &self.secrets {
            out = out.replace(s.as_str(), REDACTED);
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn get<'a>(out: &'a [(OsString, OsString)], k: &str) -> Option<&'a OsString> {
        out.iter().find(|(n, _)| n == k).map(|(_, v)| v)
    }

    #[test]
    fn secrets_are_dropped_and_the_rest_inherited() {
        let vars = env(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("OPENAI_API_KEY", "sk-abc123456789"),
            ("GITHUB_TOKEN", "ghp_x"),
            ("MY_SECRET", "s"),
            ("DATABASE_URL", "postgres://u:pw@h/db"),
            ("PLAIN_URL", "https://example.org/"),
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "core.fsmonitor"),
            ("GIT_CONFIG_VALUE_0", "sh evil.sh"),
        ]);
        let out = EnvPolicy::default().child_env(
            vars.clone(),
            &[("X".into(), "1".into())],
            Path::new("/"),
        );
        assert_eq!(get(&out, "PATH").unwrap(), "/usr/bin");
        assert_eq!(get(&out, "PLAIN_URL").unwrap(), "https://example.org/");
        assert_eq!(get(&out, "X").unwrap(), "1");
        for k in [
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "MY_SECRET",
            "DATABASE_URL",
        ] {
            assert!(get(&out, k).is_none(), "{k} passed");
        }
        assert_eq!(get(&out, "GIT_CONFIG_KEY_0").unwrap(), "core.fsmonitor");
        assert_eq!(get(&out, "GIT_CONFIG_VALUE_0").unwrap(), "false");
        let policy = EnvPolicy {
            include: vec!["github_*".into()],
            exclude: vec!["HOME".into()],
            ..EnvPolicy::default()
        };
        let out = policy.child_env(vars, &[], Path::new("/"));
        assert_eq!(get(&out, "GITHUB_TOKEN").unwrap(), "ghp_x");
        assert!(get(&out, "HOME").is_none());
    }

    #[test]
    fn scrubber_hides_known_values() {
        let s = Scrubber::from_vars([
            ("OPENAI_API_KEY".to_owned(), "sk-abcdef123456".to_owned()),
            ("SHORT_TOKEN".to_owned(), "abc".to_owned()),
            ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
        ]);
        assert_eq!(
            s.scrub("key=sk-abcdef123456\n").as_deref(),
            Some("key=[redacted]\n")
        );
        assert_eq!(s.scrub("abc /usr/bin:/bin"), None);
        assert!(glob_match("*_KEY", "my_key"));
        assert!(!looks_secret("KEEL_TEST_CUSTOM_CRED_VAR", "v"));
        treat_as_secret("keel_test_custom_cred_var");
        assert!(looks_secret("KEEL_TEST_CUSTOM_CRED_VAR", "v"));
        assert!(!glob_match("A*B", "AC"));
    }
}
