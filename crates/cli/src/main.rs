//! The `keel` binary: parses the command line, sets up logging and
//! configuration, and runs the chosen mode. Stdout belongs to the agent's
//! output (or a protocol); logs go to stderr or a file.

mod app_server;
mod approvals;
mod claude;
mod cluster;
mod config;
mod durable_waits;
mod exec;
mod exec_codex;
mod inspect;
mod logging;
mod mcp_cmd;
mod mcp_login;
mod model_source;
mod models;
mod render;
mod rpc;
mod sandbox_cmd;
mod sessions;
mod setup;
mod stdio;
mod term;
#[cfg_attr(
    not(feature = "temporal"),
    allow(dead_code, reason = "only a keel with Temporal runs turns on workers")
)]
mod turns;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

/// keel — a headless coding agent.
#[derive(Debug, Parser)]
#[command(name = "keel", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    /// Run as a protocol server on stdin/stdout instead of a subcommand.
    #[arg(long, value_enum)]
    mode: Option<Mode>,
    #[command(flatten)]
    rpc: rpc::RpcArgs,
    #[command(flatten)]
    model: config::ModelArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

/// Protocol modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// JSONL commands on stdin, responses and events on stdout (docs/rpc.md).
    Rpc,
}

/// Options shared by every mode.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// keel's home: config.toml, sessions/ (default ~/.keel).
    #[arg(long, env = "KEEL_HOME", global = true)]
    pub home: Option<PathBuf>,
    /// Write logs to this file instead of stderr (filter with RUST_LOG).
    #[arg(long, env = "KEEL_LOG_FILE", global = true)]
    pub log_file: Option<PathBuf>,
    /// The one database for everything durable, e.g. postgres://keel@db/keel
    /// (also KEEL_DATABASE_URL, [store] url; docs/deploy.md).
    #[arg(long, global = true, value_name = "URL")]
    pub database: Option<String>,
    /// The Temporal cluster that runs turns and approval waits, HOST:PORT
    /// (also KEEL_TEMPORAL_ADDRESS, [temporal] address; docs/deploy.md).
    #[arg(long, global = true, value_name = "HOST:PORT")]
    pub temporal: Option<String>,
}

// `defer`: a subcommand's arguments are built only when it is the one
// invoked. Building every subcommand's tree (and dropping it) was a third
// of the instructions of `keel --mode rpc`'s start. With it, a doc comment
// on a type a variant holds (its `Args` struct, its own `Subcommand` enum)
// would replace the variant's about when the deferred part is built: those
// types carry plain comments (test `tests::every_subcommand_keeps_its_about`).
#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Command {
    /// Run the agent once on a prompt in the current directory.
    #[command(disable_help_subcommand = true)]
    Exec(exec::ExecArgs),
    /// Serve the Codex-compatible app-server protocol (docs/app-server.md).
    AppServer(app_server::AppServerArgs),
    /// Inspect the configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// List and inspect saved sessions.
    Sessions {
        #[command(subcommand)]
        command: sessions::SessionsCommand,
    },
    /// Decide held tool calls; modes and always-allow rules (docs/approvals.md).
    Approvals(approvals::ApprovalsArgs),
    /// The configured MCP servers and their tools (docs/mcp.md).
    Mcp {
        #[command(subcommand)]
        command: mcp_cmd::McpCommand,
    },
    /// What the kernel can enforce for the sandbox (docs/sandbox.md).
    Sandbox {
        #[command(subcommand)]
        command: sandbox_cmd::SandboxCommand,
    },
    /// Run keel's durable workflows on a Temporal cluster (docs/deploy.md).
    Worker(cluster::WorkerArgs),
    /// The model catalogue; fetching the local model.
    Models {
        #[command(subcommand)]
        command: inspect::ModelsCommand,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the effective configuration (secrets masked).
    Show(config::ModelArgs),
}

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Built once, and kept for the whole process like a static: dropping
    // the tree costs as much as a third of building it, on the way to the
    // first response.
    let command: &'static mut clap::Command = Box::leak(Box::new(Cli::command()));
    let names: Vec<&str> = command.get_subcommands().map(|c| c.get_name()).collect();
    if claude::invoked(&argv, &names) {
        return claude_main(&argv);
    }
    let parsed = command
        .try_get_matches_from_mut(&argv)
        .and_then(|mut matches| Cli::from_arg_matches_mut(&mut matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => e.format(command).exit(),
    };
    let _log_guard = match logging::init(cli.global.log_file.as_deref()) {
        Ok(g) => g,
        Err(e) => {
            report_error(&e);
            return ExitCode::from(2);
        }
    };
    if matches!(
        (&cli.mode, &cli.command),
        (Some(Mode::Rpc), _) | (None, Some(Command::Exec(_) | Command::AppServer(_)))
    ) {
        // The system prompt's date: the time zone is read now, not on the
        // way of the first turn's request.
        keel_core::SystemClock::warm_up();
    }
    cluster::apply_database_flag(&cli.global);
    run_on(
        runtime_builder(cli.mode, cli.command.as_ref()),
        async move {
            let shares_sessions = matches!(
                (&cli.mode, &cli.command),
                (Some(Mode::Rpc), None)
                    | (
                        None,
                        Some(
                            Command::Exec(_)
                                | Command::AppServer(_)
                                | Command::Sessions { .. }
                                | Command::Approvals(_)
                                | Command::Worker(_)
                                // MCP sign-ins live where the front-ends read them.
                                | Command::Mcp { .. }
                        )
                    )
            );
            if shares_sessions {
                cluster::open_shared_sessions(&cli.global).await?;
            }
            let runs_turns = matches!(
                (&cli.mode, &cli.command),
                (Some(Mode::Rpc), None)
                    | (
                        None,
                        Some(Command::Exec(_) | Command::AppServer(_) | Command::Worker(_))
                    )
            );
            let durable = if runs_turns {
                durable_waits::install(&cli.global)?
            } else {
                durable_waits::Installed::default()
            };
            let outcome = match (cli.mode, cli.command) {
                (Some(_), Some(_)) => Err(anyhow::anyhow!(
                    "--mode cannot be combined with a subcommand"
                )),
                (Some(Mode::Rpc), None) => rpc::run(&cli.global, &cli.model, cli.rpc).await,
                (None, Some(Command::Exec(args))) => exec::run(&cli.global, args).await,
                (None, Some(Command::AppServer(args))) => app_server::run(&cli.global, args).await,
                (
                    None,
                    Some(Command::Config {
                        command: ConfigCommand::Show(args),
                    }),
                ) => inspect::show(&cli.global, &args).map(|()| ExitCode::SUCCESS),
                (None, Some(Command::Sessions { command })) => {
                    sessions::run(&cli.global, command).await
                }
                (None, Some(Command::Models { command })) => inspect::models(&cli.global, command),
                (None, Some(Command::Approvals(args))) => approvals::run(&cli.global, args).await,
                (None, Some(Command::Sandbox { command })) => {
                    sandbox_cmd::run(&cli.global, command)
                }
                (None, Some(Command::Mcp { command })) => mcp_cmd::run(&cli.global, command).await,
                (None, Some(Command::Worker(args))) => {
                    cluster::run_worker(&cli.global, &cli.model, args).await
                }
                (None, None) => {
                    let _ = Cli::command().print_help();
                    Err(anyhow::anyhow!(
                        "no command given: use a subcommand (for example `keel exec`) or --mode rpc"
                    ))
                }
            };
            durable.drain().await;
            outcome
        },
    )
}

/// Runs `work` on the runtime `builder` makes. Once it has ended nothing
/// waits for a blocking read of stdin that may never return (protocol
/// modes on SIGTERM). An error is one line on stderr and exit code 2.
fn run_on(
    mut builder: tokio::runtime::Builder,
    work: impl std::future::Future<Output = anyhow::Result<ExitCode>>,
) -> ExitCode {
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(&anyhow::anyhow!("cannot start the async runtime: {e}"));
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(work);
    runtime.shutdown_background();
    match result {
        Ok(code) => code,
        Err(e) => {
            report_error(&e);
            ExitCode::from(2)
        }
    }
}

/// Claude Code's headless mode (the Claude Agent SDKs spawn it): one
/// session on the main thread, as RPC mode.
fn claude_main(argv: &[std::ffi::OsString]) -> ExitCode {
    let global = GlobalArgs {
        home: std::env::var_os("KEEL_HOME").map(PathBuf::from),
        log_file: std::env::var_os("KEEL_LOG_FILE").map(PathBuf::from),
        database: None,
        temporal: None,
    };
    let _log_guard = match logging::init(global.log_file.as_deref()) {
        Ok(g) => g,
        Err(e) => {
            report_error(&e);
            return ExitCode::from(2);
        }
    };
    let args = match claude::ClaudeArgs::parse(argv) {
        Ok(a) => a,
        Err(e) => {
            report_error(&e);
            return ExitCode::from(2);
        }
    };
    keel_core::SystemClock::warm_up();
    cluster::apply_database_flag(&global);
    run_on(tokio::runtime::Builder::new_current_thread(), async move {
        cluster::open_shared_sessions(&global).await?;
        claude::run(&global, args).await
    })
}

/// The async runtime a mode runs on.
///
/// RPC mode, `exec` and the app server on stdio serve one client: every
/// task (the command worker, the runs, the event pumps, the frame writer)
/// runs on the main thread, so a prompt reaches the model and a delta
/// reaches stdout without waking another thread, and the process keeps
/// fewer threads (stacks, malloc arenas). Blocking work (stdin, stdout,
/// files, SQLite) still goes to tokio's blocking threads, and the app
/// server's threads still run their turns at once, interleaved. The
/// network listeners (many clients) and the other subcommands keep two
/// workers.
fn runtime_builder(mode: Option<Mode>, command: Option<&Command>) -> tokio::runtime::Builder {
    match (mode, command) {
        (Some(Mode::Rpc), _) | (None, Some(Command::Exec(_))) => {
            tokio::runtime::Builder::new_current_thread()
        }
        (None, Some(Command::AppServer(args))) if args.serves_stdio() => {
            tokio::runtime::Builder::new_current_thread()
        }
        (None, _) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(2);
            builder
        }
    }
}

/// One line on stderr: `keel: <reason>`.
#[allow(clippy::print_stderr)]
pub(crate) fn report_error(e: &anyhow::Error) {
    let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
    let text = chain.join(": ");
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    eprintln!("keel: {}", term::safe_if(tty, &text));
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn every_subcommand_keeps_its_about() {
        // Before `build`, a deferred subcommand has only what its variant
        // set; building runs the deferred part, which must not replace it.
        let mut command = super::Cli::command();
        let before: Vec<_> = command
            .get_subcommands()
            .map(|c| (c.get_name().to_owned(), abouts(c)))
            .collect();
        command.build();
        for (name, about) in before {
            let built = command.find_subcommand(&name).unwrap();
            assert!(about.0.is_some(), "`keel {name}` has no about");
            assert_eq!(
                abouts(built),
                about,
                "`keel {name}`'s about was replaced by a doc comment of a type it holds"
            );
        }
    }

    fn abouts(command: &clap::Command) -> (Option<String>, Option<String>) {
        (
            command.get_about().map(|a| a.to_string()),
            command.get_long_about().map(|a| a.to_string()),
        )
    }

    #[test]
    fn the_command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
