//! `proxops`: plan and apply Proxmox VE clusters from a git repository of YAML manifests.

mod connect;
mod context;
mod inspect;
mod policy_cmd;
mod reconcile;
mod render;
mod secrets;
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
        proxops plan examples/homelab            show what apply would change\n  \
        proxops apply examples/homelab           converge (sim: endpoints use the embedded simulator)\n  \
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
    /// age identity file for the clusters' SOPS documents [default: as sops: $SOPS_AGE_KEY, $SOPS_AGE_KEY_FILE, ~/.config/sops/age/keys.txt].
    #[arg(long, global = true, value_name = "FILE")]
    age_identity: Option<PathBuf>,
    /// More output (-v: info, -vv: debug, with the time each stage took).
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
        /// Read cluster files, proxops.yaml (policies, token variables) and SOPS files from DIR (the protected branch's checkout); only manifests come from the repository.
        #[arg(long, value_name = "DIR")]
        trusted_config: Option<PathBuf>,
    },
    /// List the resource kinds this binary carries.
    Kinds {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show what apply would change, cluster by cluster, without changing anything.
    #[command(
        after_help = "Exit status: 0 success, 1 error; with --detailed-exitcode: 0 no changes, 1 error, 2 changes.\n\n\
        Example:\n  proxops plan examples/homelab --cluster lab"
    )]
    Plan {
        repo: PathBuf,
        /// Only this cluster.
        #[arg(long)]
        cluster: Option<String>,
        /// Print the plan as JSON (secret values redacted).
        #[arg(long)]
        json: bool,
        /// Exit with 2 when there are changes.
        #[arg(long)]
        detailed_exitcode: bool,
        /// Read cluster files, proxops.yaml (policies, token variables) and SOPS files from DIR (the protected branch's checkout); only manifests come from the repository.
        #[arg(long, value_name = "DIR")]
        trusted_config: Option<PathBuf>,
    },
    /// Converge the clusters to the manifests: plan, execute, observe again until converged.
    #[command(after_help = "Example:\n  proxops apply examples/homelab")]
    Apply {
        repo: PathBuf,
        /// Only this cluster.
        #[arg(long)]
        cluster: Option<String>,
        /// Read cluster files, proxops.yaml (policies, token variables) and SOPS files from DIR (the protected branch's checkout); only manifests come from the repository.
        #[arg(long, value_name = "DIR")]
        trusted_config: Option<PathBuf>,
    },
    /// Print the dependency graph of the manifests (clone sources, images, ISOs).
    Graph {
        repo: PathBuf,
        #[arg(long, value_enum, default_value = "dot")]
        format: reconcile::GraphFormat,
    },
    /// Site policies: test a policy on a manifest or a plan, or scaffold a new one.
    Policy {
        #[command(subcommand)]
        command: policy_cmd::PolicyCommand,
    },
    /// The PVE 9.2 simulator.
    Sim {
        #[command(subcommand)]
        command: SimCommand,
    },
    /// Print a kind's JSON Schema (for yaml-language-server and other editors).
    #[command(after_help = "Example, at the top of a manifest:\n  \
        # yaml-language-server: $schema=./vm.schema.json")]
    Schema {
        /// Kind name, e.g. VM or TemplateVM.
        kind: String,
    },
}

#[derive(Debug, Subcommand)]
enum SimCommand {
    /// Run a simulated PVE cluster; prints its base URL, API token and certificate fingerprint.
    #[command(
        after_help = "Example:\n  proxops sim serve --nodes pve01,pve02 --listen 127.0.0.1:8006 --state sim.json"
    )]
    Serve {
        /// Node names, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "pve01,pve02")]
        nodes: Vec<String>,
        #[arg(long, default_value = "127.0.0.1:8006")]
        listen: std::net::SocketAddr,
        /// Keep the simulated state in this file (atomic writes).
        #[arg(long, value_name = "FILE")]
        state: Option<PathBuf>,
        /// Fixed API token `USER@REALM!ID=SECRET` (default: generated).
        #[arg(long)]
        token: Option<String>,
        /// Serve plain HTTP instead of HTTPS.
        #[arg(long)]
        http: bool,
    },
}

/// mimalloc instead of the system allocator: a plan cycle allocates and frees millions of
/// small JSON values and strings across threads, where glibc's malloc spent a fifth of the
/// CPU time (proxops-bench, plan at scale) and left the heap fragmented.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

/// `-v` raises proxops's own logging (info, then debug: stage timings, retries); other
/// crates stay at warn. `PROXOPS_LOG` (an EnvFilter directive) replaces both.
fn init_tracing(verbose: u8) {
    const OURS: [&str; 7] = [
        "proxops",
        "proxops_core",
        "proxops_runtime",
        "proxops_pve",
        "proxops_reconcile",
        "proxops_secrets",
        "proxops_sim",
    ];
    let level = match verbose {
        0 => None,
        1 => Some("info"),
        _ => Some("debug"),
    };
    let mut directives = vec!["warn".to_string()];
    if let Some(level) = level {
        directives.extend(OURS.iter().map(|c| format!("{c}={level}")));
    }
    let filter = tracing_subscriber::EnvFilter::try_from_env("PROXOPS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(directives.join(",")));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .init();
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let Command::Sim {
        command:
            SimCommand::Serve {
                nodes,
                listen,
                state,
                token,
                http,
            },
    } = cli.command
    {
        let opts = proxops_sim::ServeOptions {
            nodes,
            listen,
            state_file: state,
            token,
            http,
        };
        runtime.block_on(proxops_sim::serve(opts))?;
        return Ok(exit::OK);
    }
    if let Command::Validate { repo, .. }
    | Command::Plan { repo, .. }
    | Command::Apply { repo, .. }
    | Command::Graph { repo, .. } = &cli.command
    {
        validate::ensure_repository(repo, "")?;
    }
    let mut trusted = None;
    if let Command::Validate { trusted_config, .. }
    | Command::Plan { trusted_config, .. }
    | Command::Apply { trusted_config, .. } = &cli.command
        && let Some(dir) = trusted_config
    {
        validate::ensure_repository(dir, "--trusted-config: ")?;
        trusted = Some(dir.clone());
    }
    let mut ctx = context::Context::new(
        cli.cache_dir.clone(),
        cli.no_cache,
        cli.age_identity.clone(),
    )?;
    ctx.trusted_config = trusted;
    match cli.command {
        Command::Validate { repo, json, .. } => validate::run(&ctx, &repo, json),
        Command::Kinds { json } => inspect::kinds(&ctx, json),
        Command::Schema { kind } => inspect::schema(&ctx, &kind),
        Command::Plan {
            repo,
            cluster,
            json,
            detailed_exitcode,
            ..
        } => runtime.block_on(reconcile::plan(
            &ctx,
            &repo,
            cluster.as_deref(),
            json,
            detailed_exitcode,
        )),
        Command::Apply { repo, cluster, .. } => {
            runtime.block_on(reconcile::apply(&ctx, &repo, cluster.as_deref()))
        }
        Command::Graph { repo, format } => reconcile::graph(&ctx, &repo, format),
        Command::Policy { command } => policy_cmd::run(&ctx.runtime, command),
        Command::Sim { .. } => unreachable!("handled above"),
    }
}
