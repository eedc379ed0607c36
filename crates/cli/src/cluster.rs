//! Running keel beyond one machine: the shared database, Temporal, and
//! `keel worker`.
//!
//! Owns the `[store]` and `[temporal]` sections of `config.toml`, how the
//! command line (`--database`, `--temporal`), the environment
//! (`KEEL_DATABASE_URL`, `KEEL_TEMPORAL_ADDRESS`, `KEEL_TEMPORAL_NAMESPACE`,
//! `KEEL_TEMPORAL_TASK_QUEUE`) and those sections combine, the nudge that
//! follows a decision taken from the command line, and the `worker`
//! subcommand. The database choice itself is made where every store is
//! opened (`keel_approvals::StoreLocation`); this module only hands it the
//! command line. A keel built without the `temporal` feature reads all of
//! it and says how to get a build that uses it.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use keel_temporal::{
    ADDRESS_ENV, DEFAULT_NAMESPACE, DEFAULT_TASK_QUEUE, NAMESPACE_ENV, TASK_QUEUE_ENV,
    TemporalSettings,
};
use serde::Deserialize;

use crate::GlobalArgs;
use crate::config::{home_dir, load_file};

/// `[store]`: the one database for everything durable.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    /// `postgres://…` (or `sqlite`, `sqlite:PATH`): read by the stores
    /// themselves (`keel_approvals::StoreLocation`); parsed here so a
    /// misspelt key is an error at startup.
    #[allow(dead_code, reason = "read by keel_approvals::StoreLocation")]
    pub url: Option<String>,
}

/// `[temporal]`: where turns and approval waits run durably.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemporalSection {
    pub address: Option<String>,
    pub namespace: Option<String>,
    pub task_queue: Option<String>,
    /// `workers` (the default) or `here`: where front-ends run turns.
    pub turns: Option<String>,
}

/// The environment variable that says where front-ends run turns.
pub const TURNS_ENV: &str = "KEEL_TEMPORAL_TURNS";

/// Whether front-ends keep running turns in their own process although a
/// cluster is configured: `KEEL_TEMPORAL_TURNS`, else `[temporal] turns`;
/// `workers` (the default) or `here`.
pub fn turns_here(global: &GlobalArgs) -> anyhow::Result<bool> {
    let home = home_dir(global)?;
    let value = match std::env::var(TURNS_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
    {
        Some(v) => v,
        None => match load_file(&home.join("config.toml"))?.temporal.turns {
            Some(v) => v,
            None => return Ok(false),
        },
    };
    match value.trim() {
        "here" => Ok(true),
        "workers" => Ok(false),
        other => anyhow::bail!(
            "[temporal] turns (or {TURNS_ENV}) is {other:?}: say \"workers\" or \"here\""
        ),
    }
}

/// Hands the command line's `--database` to every store this process
/// opens. Called once, before anything is opened.
pub fn apply_database_flag(global: &GlobalArgs) {
    if let Some(url) = global.database.as_deref().filter(|u| !u.trim().is_empty()) {
        keel_core::keel_approvals::set_command_line_database(url);
    }
}

/// Keeps this home's sessions in the shared PostgreSQL database when one
/// is set (`--database`, `KEEL_DATABASE_URL`, `[store] url`), for the rest
/// of the process. Called before anything opens a session.
pub async fn open_shared_sessions(global: &GlobalArgs) -> anyhow::Result<()> {
    let home = home_dir(global)?;
    let Some((url, source)) = keel_core::keel_approvals::StoreLocation::shared_database(&home)?
    else {
        return Ok(());
    };
    let redacted = keel_core::keel_approvals::redact_dsn(&url);
    keel_session_store::use_database(&home, &url, &redacted)
        .await
        .with_context(|| format!("the database from {source}"))?;
    tracing::debug!(url = %redacted, "sessions are kept in the shared database");
    Ok(())
}

/// The Temporal cluster this process uses, if any: `--temporal`, else
/// `KEEL_TEMPORAL_ADDRESS`, else `[temporal] address`; the namespace and
/// task queue from their environment variables, else the section, else
/// the defaults.
pub fn temporal_settings(global: &GlobalArgs) -> anyhow::Result<Option<TemporalSettings>> {
    let home = home_dir(global)?;
    let section = load_file(&home.join("config.toml"))?.temporal;
    resolve(global.temporal.as_deref(), &Env::read(), &section)
}

/// The environment's Temporal settings.
#[derive(Debug, Default)]
struct Env {
    address: Option<String>,
    namespace: Option<String>,
    task_queue: Option<String>,
}

impl Env {
    fn read() -> Self {
        let var = |name| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        Self {
            address: var(ADDRESS_ENV),
            namespace: var(NAMESPACE_ENV),
            task_queue: var(TASK_QUEUE_ENV),
        }
    }
}

fn resolve(
    flag: Option<&str>,
    env: &Env,
    section: &TemporalSection,
) -> anyhow::Result<Option<TemporalSettings>> {
    let address = flag
        .filter(|a| !a.trim().is_empty())
        .map(str::to_owned)
        .or_else(|| env.address.clone())
        .or_else(|| section.address.clone());
    let Some(address) = address else {
        return Ok(None);
    };
    let mut settings = TemporalSettings::new(&address)?;
    settings.namespace = env
        .namespace
        .clone()
        .or_else(|| section.namespace.clone())
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
    settings.task_queue = env
        .task_queue
        .clone()
        .or_else(|| section.task_queue.clone())
        .unwrap_or_else(|| DEFAULT_TASK_QUEUE.to_owned());
    Ok(Some(settings))
}

/// This process as the cluster's history names it.
#[cfg(feature = "temporal")]
pub(crate) fn identity(role: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    format!("keel-{role}@{host}:{}", std::process::id())
}

/// The `sessions_store` line of `keel config show`: the files under the
/// home, or the shared database (its password hidden) and which setting
/// chose it.
pub fn sessions_line(home: &std::path::Path) -> String {
    match keel_core::keel_approvals::StoreLocation::shared_database(home) {
        Ok(Some((url, source))) => format!(
            "sessions_store = {:?}  # postgres, from {source}",
            keel_core::keel_approvals::redact_dsn(&url)
        ),
        Ok(None) => "sessions_store = \"files\"  # JSONL under sessions_dir".to_owned(),
        Err(e) => format!("# sessions store: {e}"),
    }
}

/// The `temporal` line of `keel config show`.
pub fn show_line(global: &GlobalArgs) -> String {
    match temporal_settings(global) {
        Ok(Some(s)) => format!(
            "temporal = {{ address = {:?}, namespace = {:?}, task_queue = {:?} }}{}",
            s.address,
            s.namespace,
            s.task_queue,
            if keel_temporal::BUILT {
                "  # held calls wait on it; with the shared database, `keel exec` turns run on workers"
            } else {
                "  # this build cannot use it"
            }
        ),
        Ok(None) => {
            "# temporal: not configured (turns and approval waits run in this process)".to_owned()
        }
        Err(e) => format!("# temporal: {e:#}"),
    }
}

/// Tells the wait on `request_id` to look at its row again, after a
/// decision taken here. Best-effort: the row already holds the decision,
/// and the workers' reconcile loop nudges it again if this one is lost.
#[allow(clippy::print_stderr)]
pub async fn nudge_after_decision(global: &GlobalArgs, request_id: &str) {
    let settings = match temporal_settings(global) {
        Ok(Some(settings)) => settings,
        Ok(None) => return,
        Err(e) => {
            eprintln!("keel: the decision is stored; Temporal is misconfigured: {e:#}");
            return;
        }
    };
    nudge(&settings, request_id).await;
}

#[cfg(feature = "temporal")]
async fn nudge(settings: &TemporalSettings, request_id: &str) {
    let nudged = async {
        keel_temporal::TemporalClient::connect(settings, &identity("cli"))
            .await?
            .nudge(request_id)
            .await
    };
    match nudged.await {
        Ok(()) => tracing::debug!(request = request_id, "nudged its wait"),
        // Not a Temporal wait (an in-process turn saw the row already).
        Err(keel_temporal::Error::NotFound(_)) => {}
        Err(e) => tracing::warn!(
            request = request_id,
            error = %e,
            "the decision is stored but its wait was not nudged; a worker's reconcile loop will"
        ),
    }
}

#[cfg(not(feature = "temporal"))]
#[allow(clippy::print_stderr)]
async fn nudge(_settings: &TemporalSettings, request_id: &str) {
    eprintln!(
        "keel: the decision on {request_id} is stored; {} (a worker's reconcile loop nudges its wait)",
        keel_temporal::NOT_BUILT
    );
}

// `keel worker`: runs keel's workflows until SIGTERM or SIGINT. (A plain
// comment: see `Command` in main.rs.)
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// How long a killed worker's workflows wait for it before any worker
    /// takes them (Temporal's sticky-queue timeout), e.g. 2s.
    #[arg(long, default_value = "2s", value_parser = parse_seconds)]
    pub sticky_timeout: std::time::Duration,
    /// On SIGTERM, how long running turns may take to end before the
    /// worker leaves them to another worker (which goes on from the
    /// session, as after a crash), e.g. 10s.
    #[arg(long, default_value = "10s", value_parser = parse_seconds)]
    pub drain_timeout: std::time::Duration,
    /// How long the events of a session's earlier turns stay in the
    /// database's event log after a later turn ended, for hosts that
    /// reconnect and ask for what they missed (`--after-log-seq`), e.g.
    /// 600s, 10m, 2h or 0s.
    #[arg(long, default_value = "10m", value_parser = parse_keep)]
    pub keep_events: std::time::Duration,
}

/// A duration of up to a week, 0 allowed (`--keep-events`).
fn parse_keep(text: &str) -> Result<std::time::Duration, String> {
    parse_duration(
        text,
        |s| s <= 7.0 * 86400.0,
        "up to a week (e.g. 10m, 600s, 0s)",
    )
}

/// A duration above 0 and up to an hour (the worker's timeouts).
fn parse_seconds(text: &str) -> Result<std::time::Duration, String> {
    parse_duration(
        text,
        |s| s > 0.0 && s <= 3600.0,
        "above 0 and up to an hour (e.g. 2s)",
    )
}

/// A duration of seconds, minutes or hours (`600s`, `10m`, `2h`; a bare
/// number is seconds) that is not negative and whose seconds `fits`;
/// `bounds` says what fits, for the error.
fn parse_duration(
    text: &str,
    fits: impl Fn(f64) -> bool,
    bounds: &str,
) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().last() {
        Some((i, 'h')) => (&text[..i], 3600.0),
        Some((i, 'm')) => (&text[..i], 60.0),
        Some((i, 's')) => (&text[..i], 1.0),
        _ => (text, 1.0),
    };
    number
        .parse::<f64>()
        .ok()
        .map(|n| n * unit)
        .filter(|s| s.is_finite() && *s >= 0.0 && fits(*s))
        .map(std::time::Duration::from_secs_f64)
        .ok_or_else(|| format!("{text:?} is not a duration {bounds}"))
}

pub async fn run_worker(
    global: &GlobalArgs,
    model: &crate::config::ModelArgs,
    args: WorkerArgs,
) -> anyhow::Result<ExitCode> {
    let settings = temporal_settings(global)?.with_context(|| {
        format!("keel worker needs a Temporal cluster: --temporal HOST:PORT, {ADDRESS_ENV} or [temporal] address in config.toml")
    })?;
    worker(global, model, settings, args).await
}

#[cfg(feature = "temporal")]
async fn worker(
    global: &GlobalArgs,
    model: &crate::config::ModelArgs,
    settings: TemporalSettings,
    args: WorkerArgs,
) -> anyhow::Result<ExitCode> {
    use std::sync::Arc;

    use keel_core::keel_approvals::{ApprovalEngine, SystemClock};
    use tokio_util::sync::CancellationToken;

    let home = home_dir(global)?;
    let engine = ApprovalEngine::open_home(&home, Arc::new(SystemClock)).await?;
    let shutdown = CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        if let Err(e) = crate::app_server::stop_signal().await {
            tracing::warn!(error = %e, "SIGTERM cannot stop the worker gracefully");
            return;
        }
        on_signal.cancel();
    });
    let mut config = keel_temporal::WorkerConfig::new(settings, identity("worker"));
    config.sticky_timeout = args.sticky_timeout;
    // Turns need the sessions in the shared database; without it the
    // worker runs approval waits only. Draining, turns get
    // `--drain-timeout` to end; the rest are left to other workers.
    let leave = CancellationToken::new();
    let mine =
        crate::turns::worker::WorkerTurns::new(global, model, leave.clone(), args.keep_events)
            .map(Arc::new);
    let turns = mine
        .clone()
        .map(|t| t as Arc<dyn keel_temporal::TurnRunner>);
    if turns.is_none() {
        tracing::info!("no shared database: this worker runs approval waits, not turns");
    }
    let draining = shutdown.clone();
    let grace = args.drain_timeout;
    tokio::spawn(async move {
        draining.cancelled().await;
        tokio::time::sleep(grace).await;
        tracing::info!("leaving the turns still running to other workers");
        leave.cancel();
    });
    let ran = keel_temporal::run_worker(config, engine, turns, shutdown).await;
    if let Some(turns) = mine {
        turns.stop().await;
    }
    ran?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "temporal"))]
async fn worker(
    _global: &GlobalArgs,
    _model: &crate::config::ModelArgs,
    _settings: TemporalSettings,
    _args: WorkerArgs,
) -> anyhow::Result<ExitCode> {
    anyhow::bail!("{}", keel_temporal::NOT_BUILT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_then_the_environment_then_the_file() {
        let section = TemporalSection {
            address: Some("file:7233".to_owned()),
            namespace: Some("team".to_owned()),
            task_queue: None,
            turns: None,
        };
        let env = Env {
            address: Some("env:7233".to_owned()),
            namespace: None,
            task_queue: Some("keel-ci".to_owned()),
        };
        let s = resolve(Some("flag:7233"), &env, &section).unwrap().unwrap();
        assert_eq!(
            (
                s.address.as_str(),
                s.namespace.as_str(),
                s.task_queue.as_str()
            ),
            ("flag:7233", "team", "keel-ci")
        );
        let s = resolve(None, &env, &section).unwrap().unwrap();
        assert_eq!(s.address, "env:7233");
        let s = resolve(Some(" "), &Env::default(), &section)
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.address.as_str(), s.task_queue.as_str()),
            ("file:7233", "keel")
        );
        assert!(
            resolve(None, &Env::default(), &TemporalSection::default())
                .unwrap()
                .is_none()
        );
        let err = resolve(Some("nohost"), &Env::default(), &section).unwrap_err();
        assert!(err.to_string().contains("HOST:PORT"), "{err}");
    }

    #[test]
    fn kept_events_are_seconds_minutes_or_hours() {
        let secs = |t: &str| parse_keep(t).map(|d| d.as_secs());
        assert_eq!(secs("10m"), Ok(600));
        assert_eq!(secs("600s"), Ok(600));
        assert_eq!(secs("2h"), Ok(7200));
        assert_eq!(secs("0s"), Ok(0));
        assert_eq!(secs("90"), Ok(90));
        assert!(parse_keep("8d").is_err());
        assert!(parse_keep("-1s").is_err());
        assert!(parse_keep("200h").is_err());
    }

    #[test]
    fn sticky_timeouts_are_seconds() {
        assert_eq!(
            parse_seconds("2s").unwrap(),
            std::time::Duration::from_secs(2)
        );
        assert_eq!(
            parse_seconds("0.5").unwrap(),
            std::time::Duration::from_millis(500)
        );
        assert!(parse_seconds("0").is_err());
        assert!(parse_seconds("soon").is_err());
    }
}
