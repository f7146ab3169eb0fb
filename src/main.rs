//! The `vshortlink` binary: parses the command line, starts logging, calls the library.

// `deny`, not `forbid`: rustc counts `#[export_name]` as unsafe code, and `malloc_conf` below
// (jemalloc reads its options from that symbol) is the one item allowed it.
#![deny(unsafe_code)]

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// jemalloc, not glibc's malloc: glibc keeps what each thread's arena once held (sled's nodes
/// are built on whichever thread pages them in, visits on the writer's), so on 1 M links the
/// server held about 1 GB after spread redirects against about 450 MB with jemalloc, and
/// jemalloc's hot redirects and creates were a little faster (README, "Benchmarks").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options (the crate prefixes its symbols with `_rjem_`):
/// - one arena (`narenas:1`) instead of four per core: sled builds and frees its nodes on
///   whichever thread touches them, and with an arena per thread each one kept its own
///   half-empty pages. On the 1 M-link store under 20 s of Zipf then 20 s of uniform
///   redirects at `memory.budget = "256MB"`, the RSS peak fell from 345 to 294 MB and the
///   pages jemalloc held beyond what was allocated from 61 to 22 MB; the redirects were as
///   fast (64,172 against 63,122/s under Zipf, one run each: within the noise);
/// - a background thread returns freed pages to the system after 100 ms rather than on some
///   later allocation, so memory freed after a burst leaves the process. Against 1000 ms
///   (before), the RSS peak at 1 M links under the Zipf and uniform rows was 541 against
///   558 MB, the throughput the same (benches/RESULTS.md, "Footprint").
///
/// `_RJEM_MALLOC_CONF` in the environment overrides these.
#[allow(non_upper_case_globals, unsafe_code)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8] =
    b"narenas:1,background_thread:true,dirty_decay_ms:100,muzzy_decay_ms:0\0";

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
    /// Write every link (and with --visits every visit) as JSON lines; the server must be stopped.
    Export {
        /// Also write every visit, after the links.
        #[arg(long)]
        visits: bool,
        /// Also write every lead left through links' forms (personal data: names, phone
        /// numbers, emails as visitors typed them).
        #[arg(long)]
        leads: bool,
        /// Also write users, teams, memberships, identities and keys made at run time, with
        /// their password and key hashes (the file is then a secret).
        #[arg(long)]
        accounts: bool,
        /// Write here instead of stdout.
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Read links from FILE (stdin when absent); the server must be stopped.
    Import {
        file: Option<PathBuf>,
        /// vsl (our export), yourls-csv, shlink-csv or csv.
        #[arg(long, default_value = "vsl")]
        format: vshortlink::transfer::Format,
        /// Report what would happen; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// csv: the header of the long-URL column (guessed when absent).
        #[arg(long, value_name = "NAME")]
        url_column: Option<String>,
        /// csv: the header of the short-code column (guessed when absent).
        #[arg(long, value_name = "NAME")]
        code_column: Option<String>,
    },
    /// Write a running server's backup to FILE through its API (atomically: FILE is only ever
    /// whole), or with --verify check a backup file without a store.
    Backup {
        /// The server's base URL (http://host:port).
        #[arg(
            long,
            value_name = "URL",
            required_unless_present = "verify",
            requires = "key"
        )]
        server: Option<String>,
        /// An admin API key for --server.
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
        /// Where the backup goes; zstd-compressed when the name ends in `.zst`.
        #[arg(long, value_name = "FILE", required_unless_present = "verify")]
        output: Option<PathBuf>,
        /// Check FILE (plain or zstd) whole: every line a record, the end line's checksum.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["server", "output"])]
        verify: Option<PathBuf>,
        /// Leave the visits out (they are in by default).
        #[arg(long)]
        no_visits: bool,
        /// Leave the leads (personal data) out (they are in by default).
        #[arg(long)]
        no_leads: bool,
    },
    /// Restore a backup FILE into the stopped, empty store (--force: merge into one with
    /// links, as import does), after checking the whole file.
    Restore {
        file: PathBuf,
        /// Merge into a store that already has links.
        #[arg(long)]
        force: bool,
    },
    /// Verify the stopped store's invariants; exit 1 naming each fault.
    Check,
    /// Create a link (in the stopped store, or through --server).
    Create {
        url: String,
        #[arg(long)]
        code: Option<String>,
        #[arg(long)]
        length: Option<u8>,
        /// Seconds.
        #[arg(long)]
        ttl: Option<i64>,
        #[arg(long)]
        space: Option<String>,
        /// The host of a configured domain the link goes on (default: the default domain).
        #[arg(long)]
        domain: Option<String>,
        #[command(flatten)]
        remote: Remote,
    },
    /// People: `user add EMAIL --admin` makes a user (the first admin) in the stopped store and
    /// prints a one-time password.
    User {
        #[command(subcommand)]
        action: UserCommand,
    },
    /// A link's record and visit total, or the counts of all links.
    Stats {
        code: Option<String>,
        /// The host of the domain the code is on (default: the default domain).
        #[arg(long, requires = "code")]
        domain: Option<String>,
        #[command(flatten)]
        remote: Remote,
    },
}

#[derive(Subcommand)]
enum UserCommand {
    /// Make a user with a one-time password (printed once).
    Add {
        email: String,
        /// An admin of the whole instance (else a member).
        #[arg(long)]
        admin: bool,
        #[arg(long)]
        name: Option<String>,
    },
}

/// Act through a running server's API instead of on the stopped store.
#[derive(clap::Args)]
struct Remote {
    /// The server's base URL (http://host:port).
    #[arg(long, requires = "key", value_name = "URL")]
    server: Option<String>,
    /// An API key for --server.
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
}

impl Remote {
    fn target(self) -> vshortlink::commands::Target {
        match (self.server, self.key) {
            (Some(url), Some(key)) => vshortlink::commands::Target::Server { url, key },
            _ => vshortlink::commands::Target::Offline,
        }
    }
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
    // A budget too small for what the configuration holds is a configuration error too.
    if let Err(e) = vshortlink::memory::Bounds::derive(&config) {
        eprintln!("vshortlink: {e}");
        return ExitCode::from(2);
    }
    if let Some(Command::Healthcheck) = cli.command {
        return match vshortlink::ops::healthcheck(&config) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("vshortlink: unhealthy: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match cli.command {
        Some(Command::Export {
            visits,
            leads,
            accounts,
            output,
        }) => {
            let parts = vshortlink::transfer::ExportParts {
                visits,
                leads,
                accounts,
            };
            return match vshortlink::transfer::run_export(&config, parts, output.as_deref()) {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            };
        }
        Some(Command::Import {
            file,
            format,
            dry_run,
            url_column,
            code_column,
        }) => {
            let options = vshortlink::transfer::ImportOptions {
                format,
                dry_run,
                url_column,
                code_column,
                replace_keys: false,
            };
            return match vshortlink::transfer::run_import(config, file.as_deref(), &options) {
                Ok(summary) if summary.refused > 0 => ExitCode::FAILURE,
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            };
        }
        Some(Command::Backup {
            server,
            key,
            output,
            verify,
            no_visits,
            no_leads,
        }) => {
            if let Some(file) = verify {
                return match vshortlink::transfer::run_verify(&file) {
                    Ok(v) => {
                        println!(
                            "ok: {} records ({} links, {} visits, {} leads), {}, checksum matches",
                            v.records,
                            v.links,
                            v.visits,
                            v.leads,
                            if v.compressed { "zstd" } else { "plain" }
                        );
                        ExitCode::SUCCESS
                    }
                    Err(e) => fail(e),
                };
            }
            let (Some(server), Some(key), Some(output)) = (server, key, output) else {
                return fail("backup needs --server, --key and --output (or --verify FILE)");
            };
            let args = vshortlink::transfer::BackupArgs {
                compress: output.extension().is_some_and(|e| e == "zst"),
                server,
                key,
                output,
                visits: !no_visits,
                leads: !no_leads,
                accounts: true,
            };
            return match vshortlink::transfer::run_backup(&args) {
                Ok(v) => {
                    eprintln!(
                        "wrote {}: {} records ({} links, {} visits, {} leads)",
                        args.output.display(),
                        v.records,
                        v.links,
                        v.visits,
                        v.leads
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            };
        }
        Some(Command::Restore { file, force }) => {
            return match vshortlink::transfer::run_restore(config, &file, force) {
                Ok(summary) if summary.refused > 0 => ExitCode::FAILURE,
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            };
        }
        Some(Command::Check) => {
            return match vshortlink::commands::check(&config, &mut std::io::stdout()) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::FAILURE,
                Err(e) => fail(e),
            };
        }
        Some(Command::Create {
            url,
            code,
            length,
            ttl,
            space,
            domain,
            remote,
        }) => {
            let args = vshortlink::commands::CreateArgs {
                url,
                code,
                length,
                ttl,
                space,
                domain,
            };
            return print(vshortlink::commands::create(
                &config,
                &remote.target(),
                args,
            ));
        }
        Some(Command::User {
            action: UserCommand::Add { email, admin, name },
        }) => {
            return print(vshortlink::commands::user_add(&config, &email, name, admin));
        }
        Some(Command::Stats {
            code,
            domain,
            remote,
        }) => {
            return print(vshortlink::commands::stats(
                &config,
                &remote.target(),
                code.as_deref(),
                domain.as_deref(),
            ));
        }
        _ => {}
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

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("vshortlink: {e}");
    ExitCode::FAILURE
}

fn print(result: Result<serde_json::Value, vshortlink::BoxError>) -> ExitCode {
    match result {
        Ok(value) => {
            println!("{value:#}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}
