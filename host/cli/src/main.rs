//! `proxops`: plan and apply Proxmox VE clusters from a git repository of YAML manifests.

mod context;
mod inspect;
mod validate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit codes, documented in the README.
pub mod exit {
    /// Success; for `plan --detailed-exitcode`: no changes.
    pub const OK: u8 = 0;
    /// Invalid input, a failed action, or any error.
    pub const ERROR: u8 = 1;
    /// `plan --detailed-exitcode`: the plan has changes.
    pub const CHANGES: u8 = 2;
}

#[derive(Debug, Parser)]
#[command(
    name = "proxops",
    version,
    about = "Declarative, GitOps reconciler for Proxmox VE",
    long_about = "proxops reconciles Proxmox VE clusters from a git repository of YAML manifests.\n\
                  Each resource kind is a sandboxed WebAssembly component; site policies are too.",
    after_help = "Examples:\n  \
        proxops validate examples/homelab        check every manifest, report every problem\n  \
        proxops kinds                            list the resource kinds this binary carries\n  \
        proxops schema VM > vm.schema.json       JSON Schema for editors (yaml-language-server)\n  \
        proxops sim serve --nodes pve01,pve02    run a simulated PVE cluster to try things on"
)]
struct Cli {
    /// Folder for compiled WebAssembly components [default: $PROXOPS_CACHE_DIR, else the user cache folder].
    #[arg(long, global = true, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile components in memory only; read and write no cache.
    #[arg(long, global = true)]
    no_cache: bool,
    /// More output (-v: info, -vv: debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check every manifest of a repository without contacting PVE; report every problem.
    #[command(after_help = "Exit status: 0 when valid, 1 when any error was found.")]
    Validate {
        /// The repository (the folder with clusters/, vm/, templatevm/, ...).
        repo: PathBuf,
        /// Print diagnostics as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the resource kinds this binary carries.
    Kinds {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a kind's JSON Schema (for yaml-language-server and other editors).
    #[command(after_help = "Example, at the top of a manifest:\n  \
        # yaml-language-server: $schema=./vm.schema.json")]
    Schema {
        /// Kind name, e.g. VM or TemplateVM.
        kind: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit::ERROR)
        }
    }
}

fn init_tracing(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("PROXOPS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .init();
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    let ctx = context::Context::new(cli.cache_dir.clone(), cli.no_cache)?;
    match cli.command {
        Command::Validate { repo, json } => validate::run(&ctx, &repo, json),
        Command::Kinds { json } => inspect::kinds(&ctx, json),
        Command::Schema { kind } => inspect::schema(&ctx, &kind),
    }
}
