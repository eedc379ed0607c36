//! Helpers: a lab of folders (a workspace with `.git` and `.keel`, a temp
//! dir with keel's home in it, a folder outside), and a command run in it
//! behind the sandbox.

mod escapes;
mod policies;

use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_protocol::{SandboxGrant, SandboxMode, SandboxPolicy};
use keel_sandbox::Sandbox;
use keel_tools::SandboxSpec;

/// Every wait in these tests ends.
const TIMEOUT: Duration = Duration::from_secs(30);

pub struct Lab {
    _dir: tempfile::TempDir,
    pub ws: PathBuf,
    pub outside: PathBuf,
    pub tmp: PathBuf,
    pub home: PathBuf,
}

pub struct Ran {
    pub code: Option<i32>,
    pub output: String,
}

impl Ran {
    pub fn failed(&self) -> bool {
        self.code != Some(0)
    }
}

/// Fails under `CI` when the kernel cannot confine; elsewhere says so.
#[allow(clippy::print_stderr)]
pub fn kernel_can_confine() -> bool {
    match keel_sandbox::probe().missing() {
        None => true,
        Some(missing) if std::env::var_os("CI").is_some() => {
            panic!("CI must be able to run the sandbox tests, but this kernel lacks {missing}")
        }
        Some(missing) => {
            eprintln!("skipping: this kernel lacks {missing}");
            false
        }
    }
}

impl Lab {
    pub fn new() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        let outside = root.join("outside");
        let tmp = root.join("tmp");
        let home = tmp.join("keel-home");
        for d in [&ws.join(".git/hooks"), &ws.join(".keel"), &outside, &home] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(ws.join(".keel/config.toml"), "").unwrap();
        std::fs::write(home.join("keel.db"), "db").unwrap();
        std::fs::write(outside.join("victim"), "original").unwrap();
        Lab {
            _dir: dir,
            ws,
            outside,
            tmp,
            home,
        }
    }

    pub fn sandbox(&self) -> Sandbox {
        Sandbox::new(vec![self.home.clone()]).with_temp_dir(&self.tmp)
    }

    pub fn spec(&self, mode: SandboxMode) -> SandboxSpec {
        SandboxSpec::new(SandboxPolicy::of(mode), &self.ws)
    }

    pub fn granted(&self, mode: SandboxMode, grant: SandboxGrant) -> SandboxSpec {
        SandboxSpec {
            grant,
            ..self.spec(mode)
        }
    }

    /// Runs `script` with bash in the workspace under `spec`, with `$OUT`,
    /// `$WS`, `$TMPD` and `$KHOME` naming the lab's folders.
    pub async fn run(&self, spec: &SandboxSpec, script: &str) -> Ran {
        self.run_with(spec, script, &[]).await
    }

    pub async fn run_with(&self, spec: &SandboxSpec, script: &str, env: &[(&str, String)]) -> Ran {
        let mut cmd = tokio::process::Command::new("bash");
        cmd.arg("-c")
            .arg(script)
            .current_dir(&self.ws)
            .env("OUT", &self.outside)
            .env("WS", &self.ws)
            .env("TMPD", &self.tmp)
            .env("KHOME", &self.home)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.sandbox().prepare(&mut cmd, spec).unwrap();
        let out = tokio::time::timeout(TIMEOUT, cmd.output())
            .await
            .expect("the command did not finish")
            .unwrap();
        let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
        output.push_str(&String::from_utf8_lossy(&out.stderr));
        Ran {
            code: out.status.code(),
            output,
        }
    }

    /// Nothing outside the writable roots changed: the victim file, the
    /// outside folder's entries, `.git`, `.keel`, keel's home.
    pub fn assert_untouched(&self, case: &str) {
        let victim = self.outside.join("victim");
        assert_eq!(
            std::fs::read_to_string(&victim).ok().as_deref(),
            Some("original"),
            "{case}: the outside file changed"
        );
        let meta = std::fs::metadata(&victim).unwrap();
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        assert_eq!(
            meta.permissions().mode() & 0o777,
            0o644,
            "{case}: chmod got through"
        );
        assert_eq!(meta.nlink(), 1, "{case}: a hard link got through");
        assert!(meta.mtime() > 1_000_000_000, "{case}: times changed");
        assert_eq!(
            names(&self.outside),
            vec!["victim".to_owned()],
            "{case}: something was created outside"
        );
        assert_eq!(
            names(&self.ws.join(".git")),
            vec!["config", "hooks"],
            "{case}: .git changed"
        );
        assert_eq!(
            std::fs::read_to_string(self.ws.join(".git/config")).unwrap(),
            "[core]\n",
            "{case}: .git/config changed"
        );
        assert!(
            names(&self.ws.join(".git/hooks")).is_empty(),
            "{case}: a hook was added"
        );
        assert_eq!(
            std::fs::read_to_string(self.ws.join(".keel/config.toml")).unwrap(),
            "",
            "{case}: .keel changed"
        );
        assert_eq!(
            std::fs::read_to_string(self.home.join("keel.db")).unwrap(),
            "db",
            "{case}: keel's home changed"
        );
    }
}

pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
