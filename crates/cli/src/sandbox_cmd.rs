//! `keel sandbox check`: what this machine can enforce, and the policy
//! `config.toml` gives sessions.
//!
//! Owns printing the kernel probe (Landlock ABI, seccomp, mount namespaces)
//! one line each, then the configured policy. Exits 1 when commands could
//! not be confined here (so scripts can check before relying on it). It
//! must not know how the walls are built.

use std::process::ExitCode;

use clap::Subcommand;

use crate::GlobalArgs;
use crate::config::Settings;

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Print what this machine's kernel supports and the configured policy.
    Check,
}

#[allow(clippy::print_stdout)]
pub fn run(global: &GlobalArgs, command: SandboxCommand) -> anyhow::Result<ExitCode> {
    match command {
        SandboxCommand::Check => {
            let mut ok = true;
            for (line, supported) in keel_sandbox::report() {
                println!("{} {line}", if supported { "ok  " } else { "MISS" });
                ok &= supported;
            }
            let settings = Settings::load(global)?;
            let s = settings.file.sandbox.settings(None)?;
            println!(
                "policy: {} (network {}){}",
                s.policy.mode,
                if s.policy.network_access { "on" } else { "off" },
                if s.policy.writable_roots.is_empty() {
                    String::new()
                } else {
                    let roots: Vec<String> = s
                        .policy
                        .writable_roots
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect();
                    format!(", also writable: {}", roots.join(", "))
                }
            );
            match keel_sandbox::probe().missing() {
                None => println!("commands are confined here"),
                Some(missing) if s.allow_unconfined => {
                    println!("commands run UNCONFINED here (allow_unconfined): missing {missing}")
                }
                Some(missing) => println!(
                    "commands that need walls are refused here: missing {missing} \
                     (set [sandbox] allow_unconfined = true to run them unconfined)"
                ),
            }
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}
