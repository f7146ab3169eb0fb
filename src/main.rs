//! The `vshortlink` binary: parses the command line, starts logging, calls the library.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// A URL shortener in one binary with its storage embedded.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// A TOML file overlaid on the embedded defaults.
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (the default).
    Serve,
    /// Print the embedded default configuration.
    DefaultConfig,
    /// Exit 0 if the server configured here answers /healthz (for Docker's HEALTHCHECK).
    Healthcheck,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    if let Some(Command::DefaultConfig) = cli.command {
        print!("{}", vshortlink::config::DEFAULT_TOML);
        return ExitCode::SUCCESS;
    }
    let config = match vshortlink::config::Config::load(cli.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("vshortlink: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(Command::Healthcheck) = cli.command {
        return match vshortlink::ops::healthcheck(&config) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("vshortlink: unhealthy: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("vshortlink: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(vshortlink::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "vshortlink stopped with an error");
            eprintln!("vshortlink: {e}");
            ExitCode::FAILURE
        }
    }
}
