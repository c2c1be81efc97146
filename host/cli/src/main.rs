//! `proxops`: plan and apply Proxmox VE clusters from a git repository of YAML manifests.

mod adopt;
mod audit;
mod completions;
mod connect;
mod context;
mod graph;
mod inspect;
mod kind_cmd;
mod markdown;
mod metrics;
mod oci;
mod output;
mod policy_cmd;
mod policy_langs;
mod policy_suite;
mod prepared;
mod progress;
mod reconcile;
mod render;
mod scaffold;
mod secrets;
mod signals;
mod sink;
mod ui;
mod validate;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit codes, documented in the README.
pub mod exit {
    /// Success; for `plan`: converged, no anomaly, nothing pending.
    pub const OK: u8 = 0;
    /// Invalid input, a failed action, or any error.
    pub const ERROR: u8 = 1;
    /// `plan`: the plan has changes.
    pub const CHANGES: u8 = 2;
    /// Nothing left to apply, but anomalies or pending-until-reboot changes need a human.
    pub const ATTENTION: u8 = 3;
    /// Interrupted by SIGINT.
    pub const INTERRUPTED: u8 = 130;
    /// Interrupted by SIGTERM.
    pub const TERMINATED: u8 = 143;

    /// The exit code of a cluster run's outcome (the most serious one of several clusters).
    /// After an apply, `Changes` cannot happen (what is left to apply did not converge, and
    /// that is `Failed`).
    pub fn of(outcome: proxops_reconcile::run::Outcome) -> u8 {
        use proxops_reconcile::run::Outcome;
        match outcome {
            Outcome::Clean => OK,
            Outcome::Changes => CHANGES,
            Outcome::NeedsHuman => ATTENTION,
            Outcome::Failed => ERROR,
        }
    }
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
pub(crate) struct Cli {
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
    /// List the resource kinds: the bundled ones, and the third-party kinds a repository's proxops.yaml grants (with their source, sha256, contract version and grant).
    Kinds {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
        /// Also load the third-party kinds this repository's proxops.yaml lists.
        #[arg(long, value_name = "DIR")]
        repo: Option<PathBuf>,
    },
    /// Show what apply would change, cluster by cluster, without changing anything.
    #[command(
        after_help = "Exit status: 0 converged and clean, 1 error (invalid input, a cluster not planned, a\n\
        denying policy), 2 changes to apply (with or without anomalies), 3 nothing to apply but\n\
        anomalies or pending-until-reboot changes need a human. A CI step that only posts the plan\n\
        treats 0, 2 and 3 as success.\n\n\
        Example:\n  proxops plan examples/homelab --cluster lab"
    )]
    Plan {
        repo: PathBuf,
        /// Only this cluster.
        #[arg(long)]
        cluster: Option<String>,
        /// Print the plan as JSON (secret values redacted); the same as --format json.
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// text for a terminal, json for programs, markdown for a pull-request comment.
        #[arg(long, value_enum, default_value = "text")]
        format: reconcile::PlanFormat,
        /// With --format markdown: at most this many characters (0: no limit, else at least
        /// 1000); sections past it are left out with a closing note.
        #[arg(long, value_name = "N", default_value_t = markdown::DEFAULT_LIMIT, value_parser = markdown::parse_limit)]
        max_chars: usize,
        /// Accepted for Terraform habits: plan always exits with the codes above (2 changes, 3
        /// attention).
        #[arg(long)]
        detailed_exitcode: bool,
        #[command(flatten)]
        run: RunFlags,
        /// Read cluster files, proxops.yaml (policies, token variables) and SOPS files from DIR (the protected branch's checkout); only manifests come from the repository.
        #[arg(long, value_name = "DIR")]
        trusted_config: Option<PathBuf>,
    },
    /// Converge the clusters to the manifests: plan, execute, observe again until converged.
    #[command(
        after_help = "Exit status: 0 the cluster matches the manifests, 1 something failed or was not planned,\n\
        3 converged but anomalies or pending-until-reboot changes need a human,\n\
        130/143 interrupted by SIGINT/SIGTERM. On a signal, the actions in flight finish (a guest\n\
        stopped for a change is started again) and nothing new starts; allow a grace period of\n\
        at least the cluster's task-timeout-seconds times 3 (stop, write, start) before a SIGKILL.\n\
        A second signal exits at once.\n\n\
        Example:\n  proxops apply examples/homelab"
    )]
    Apply {
        repo: PathBuf,
        /// Only this cluster.
        #[arg(long)]
        cluster: Option<String>,
        #[command(flatten)]
        run: RunFlags,
        /// Read cluster files, proxops.yaml (policies, token variables) and SOPS files from DIR (the protected branch's checkout); only manifests come from the repository.
        #[arg(long, value_name = "DIR")]
        trusted_config: Option<PathBuf>,
    },
    /// Plan every interval and on SIGHUP, report drift as it appears; with --apply, converge.
    #[command(after_help = watch::HELP)]
    Watch {
        repo: PathBuf,
        /// Only this cluster (one watch per cluster scales out across schedulers).
        #[arg(long)]
        cluster: Option<String>,
        /// Time between cycles: 90s, 5m, 1h, 500ms.
        #[arg(long, default_value = "5m", value_parser = watch::parse_interval)]
        interval: std::time::Duration,
        /// Apply what each cycle plans (never while the repository fails validation).
        #[arg(long)]
        apply: bool,
        /// Serve Prometheus metrics on ADDR (GET /metrics, GET /healthz).
        #[arg(long, value_name = "ADDR")]
        metrics_listen: Option<std::net::SocketAddr>,
        /// Serve the read-only status page on ADDR, e.g. 127.0.0.1:8080: the fleet, each
        /// object's desired against live state, the last cycles, an apply in flight, the
        /// dependency graph (also /metrics and /healthz). It writes nothing.
        #[arg(long, value_name = "ADDR")]
        ui_listen: Option<std::net::SocketAddr>,
        /// Require `Authorization: Bearer <token>` on the status page, the token read from
        /// FILE (at least 16 characters). For a bind beyond loopback; in Kubernetes put the
        /// page behind the ingress's authentication instead or as well.
        #[arg(long, value_name = "FILE", requires = "ui_listen")]
        ui_token_file: Option<PathBuf>,
        /// Cycles of history the status page keeps per cluster.
        #[arg(long, value_name = "N", default_value_t = ui::HISTORY, value_parser = clap::value_parser!(u64).range(1..=1000), requires = "ui_listen")]
        ui_history: u64,
        /// After each cycle's plan, audit the running guests against the site policies (as
        /// `proxops audit`: the reads adopt makes, per guest) and export
        /// proxops_policy_violations{cluster,policy,mode}.
        #[arg(long)]
        audit: bool,
        /// Stop after N cycles, with the exit status of the last one (as plan, or apply with
        /// --apply).
        #[arg(long, value_name = "N")]
        cycles: Option<u64>,
        #[command(flatten)]
        run: RunFlags,
        /// Read cluster files, proxops.yaml (policies, token variables) and SOPS files from DIR (the protected branch's checkout); only manifests come from the repository.
        #[arg(long, value_name = "DIR")]
        trusted_config: Option<PathBuf>,
    },
    /// Print a completion script for a shell.
    #[command(after_help = "Example:\n  proxops completions bash > /etc/bash_completion.d/proxops")]
    Completions { shell: clap_complete::Shell },
    /// Print the man page (roff) of proxops or of one of its subcommands.
    #[command(
        after_help = "Example:\n  proxops man | man -l -\n  proxops man plan > proxops-plan.1"
    )]
    Man {
        /// A subcommand, e.g. plan.
        subcommand: Option<String>,
    },
    /// Write manifests for guests that already run (through the kinds' adopt), with a gap report per guest; only reads PVE.
    #[command(
        after_help = "Examples:\n  proxops adopt . --cluster lab --vmid 100 --vmid 101\n  proxops adopt . --cluster lab --all\n  proxops adopt . --cluster lab --object web --object deploy@pve\n  proxops adopt . --cluster lab --vmid 100 --kind Firewall\n\nEach guest's manifest carries metadata.adopt (the vmid and PVE name it took over): the next apply may add the ownership tags to that guest and nothing else. Named objects (pools, backup jobs, users, ...) come from the listings of the loaded kinds; proxops writes one only once it carries proxops's mark, which each manifest's gaps say how to add. Existing files are kept unless --force is given."
    )]
    Adopt {
        repo: PathBuf,
        /// The cluster (its cluster file's name) to adopt from.
        #[arg(long)]
        cluster: String,
        /// A guest to adopt, by vmid (repeatable).
        #[arg(long = "vmid", value_name = "N")]
        vmids: Vec<u64>,
        /// Adopt every guest and named object no manifest names, from the listings of the loaded
        /// kinds (those proxops already owns are listed, not adopted).
        #[arg(long, conflicts_with_all = ["vmids", "objects"])]
        all: bool,
        /// A named object to adopt (a pool, a backup job, a user, a group, a role), by its id in
        /// its kind's listing (repeatable).
        #[arg(long = "object", value_name = "ID")]
        objects: Vec<String>,
        /// Only these kinds write manifests (repeatable; default: every loaded kind). With a
        /// guest-scoped kind (`--kind Firewall`) the chosen guests get that kind's manifest.
        #[arg(long = "kind", value_name = "KIND")]
        kinds: Vec<String>,
        /// Import SSH keys that match no SOPS entry into the cluster's SOPS file as
        /// `cloud-init.ssh-keys.adopted-<fingerprint>` (needs the age identity that opens it).
        #[arg(long)]
        adopt_secrets: bool,
        /// Replace manifest files that already exist.
        #[arg(long)]
        force: bool,
    },
    /// Ask the site policies about the guests that run now, not about the manifests in git;
    /// read-only.
    #[command(after_help = audit::HELP)]
    Audit {
        repo: PathBuf,
        /// Only this cluster.
        #[arg(long)]
        cluster: Option<String>,
        /// Print the audit as JSON; the same as --format json.
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// text for a terminal, json for programs, markdown for an issue or a pull request.
        #[arg(long, value_enum, default_value = "text")]
        format: reconcile::PlanFormat,
    },
    /// Print the dependency graph of the manifests (clone sources, images, ISOs).
    Graph {
        repo: PathBuf,
        #[arg(long, value_enum, default_value = "dot")]
        format: graph::GraphFormat,
    },
    /// Third-party kinds: scaffold a new kind crate.
    Kind {
        #[command(subcommand)]
        command: kind_cmd::KindCommand,
    },
    /// Site policies: test a policy (one manifest or plan, or a suite), scaffold one (Rust, Python, TypeScript), push one to an OCI registry.
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
        /// Also look among the third-party kinds this repository's proxops.yaml lists.
        #[arg(long, value_name = "DIR")]
        repo: Option<PathBuf>,
    },
}

/// Flags shared by plan and apply.
#[derive(Debug, Clone, Copy, clap::Args)]
struct RunFlags {
    /// Allow a plan to delete up to N guests at once (more than 5, or every guest of a cluster
    /// with no manifests, are otherwise held back as anomalies).
    #[arg(long, value_name = "N")]
    allow_prune: Option<usize>,
    /// Stop guests again for stop-required changes that failed in an earlier run.
    #[arg(long)]
    retry_stop_required: bool,
    /// Reboot guests whose changes PVE keeps pending until a reboot (shut down, start), one
    /// budget place at a time and through each budget's health gate; guests in no budget
    /// are rebooted like any other restart. Without it, pending changes are only reported.
    #[arg(long)]
    reboot_pending: bool,
    /// Work on at most N clusters at once (1: one after the other, with progress shown as it
    /// happens; more: each cluster's output is printed when it is done, clusters in name
    /// order) [default: `clusters-at-once` in proxops.yaml, else 8].
    #[arg(long, value_name = "N", value_parser = parse_clusters_at_once)]
    clusters_at_once: Option<usize>,
}

impl From<RunFlags> for reconcile::RunOptions {
    fn from(f: RunFlags) -> Self {
        reconcile::RunOptions {
            allow_prune: f.allow_prune,
            retry_stop_required: f.retry_stop_required,
            reboot_pending: f.reboot_pending,
            clusters_at_once: f.clusters_at_once,
        }
    }
}

/// `--clusters-at-once`: 1 to [`proxops_core::settings::MAX_CLUSTERS_AT_ONCE`].
fn parse_clusters_at_once(text: &str) -> Result<usize, String> {
    let max = proxops_core::settings::MAX_CLUSTERS_AT_ONCE;
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "`{text}`: expected a whole number from 1 (one cluster at a time) to {max}"
        )),
    }
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
        /// How long every task runs, in milliseconds (holding its guest's config lock), so that
        /// `lock: create|clone|destroyed` and running tasks can be seen.
        #[arg(long, value_name = "MS", default_value_t = 0)]
        task_duration: u64,
        /// Serve at most N API requests at once per node, as PVE's API worker pool does (its
        /// pveproxy and pvedaemon run 3 workers each); by default every request is served at once.
        #[arg(long, value_name = "N")]
        api_workers: Option<usize>,
        /// With --api-workers: the least time each request holds its worker, in milliseconds.
        #[arg(long, value_name = "MS", default_value_t = 0, requires = "api_workers")]
        api_handling: u64,
        /// With --api-workers: the time a request for another node's path holds a worker of the
        /// node the client talks to (the first) before it is forwarded, in milliseconds, as
        /// pveproxy routes it; by default proxying costs the entry node nothing.
        #[arg(long, value_name = "MS", requires = "api_workers")]
        api_proxy: Option<u64>,
        /// How long PVE's HA manager (its CRM) takes to carry out what `hastart`, `hastop` and
        /// `hamigrate` tasks request for an HA-managed guest, in milliseconds.
        #[arg(long, value_name = "MS", default_value_t = 300)]
        ha_crm_delay: u64,
        /// How long HA waits before it fences a node taken offline (`PUT /_sim/nodes/<node>`)
        /// and recovers its HA-managed guests elsewhere, in milliseconds.
        #[arg(long, value_name = "MS", default_value_t = 2000)]
        ha_fence_delay: u64,
        /// How long after a VM starts its QEMU guest agent answers `agent/ping` (a VM with
        /// `agent` on), in milliseconds: the guest's boot.
        #[arg(long, value_name = "MS", default_value_t = 0)]
        agent_boot: u64,
        /// Seeded fault injection, rates per request:
        /// `seed=N,http503=P,http596=P,reset=P,lost=P,task-fail=P,lock-timeout=P` (README, "Fault injection").
        #[arg(long, value_name = "SPEC", value_parser = parse_faults)]
        faults: Option<proxops_sim::FaultPlan>,
    },
    /// Clear a VM's stale config lock in a simulator's state, as `qm unlock <vmid>` does on PVE.
    #[command(
        after_help = "A lock (create, clone, destroyed, ...) outlives its task when the simulator \
        stops while the task runs (an interrupted apply against `sim:`). Run this while nothing uses the \
        state.\n\nExamples:\n  proxops sim unlock 101 examples/homelab\n  \
        proxops sim unlock 101 examples/homelab --cluster lab\n  proxops sim unlock 101 --state sim.json"
    )]
    Unlock {
        /// The VM id.
        vmid: u32,
        /// A repository whose `sim:` clusters keep their state in `.proxops/sim-<cluster>.json`.
        #[arg(default_value = ".", conflicts_with = "state")]
        repo: PathBuf,
        /// The cluster, when several `sim:` clusters of the repository know the VM.
        #[arg(long, conflicts_with = "state")]
        cluster: Option<String>,
        /// A state file of `proxops sim serve --state FILE` instead of a repository.
        #[arg(long, value_name = "FILE")]
        state: Option<PathBuf>,
    },
}

/// `proxops sim unlock`: finds the state file that holds the VM and clears its lock.
fn sim_unlock(
    vmid: u32,
    repo: &std::path::Path,
    cluster: Option<&str>,
    state: Option<PathBuf>,
) -> anyhow::Result<u8> {
    let file = match (state, cluster) {
        (Some(file), _) => file,
        (None, Some(cluster)) => repo.join(".proxops").join(format!("sim-{cluster}.json")),
        (None, None) => {
            let dir = repo.join(".proxops");
            let entries = std::fs::read_dir(&dir).map_err(|e| {
                anyhow::anyhow!(
                    "{}: {e} (no `sim:` state in this repository?)",
                    dir.display()
                )
            })?;
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("sim-") && n.ends_with(".json"))
                })
                .collect();
            files.sort();
            let mut holding = Vec::new();
            for f in files {
                if proxops_sim::state_has_vm(&f, vmid)? {
                    holding.push(f);
                }
            }
            match holding.len() {
                0 => anyhow::bail!(
                    "no `sim:` cluster state in {} holds VM {vmid}",
                    dir.display()
                ),
                1 => holding.remove(0),
                _ => anyhow::bail!(
                    "several `sim:` clusters hold VM {vmid} ({}); choose one with --cluster",
                    holding
                        .iter()
                        .map(|f| f.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
    };
    if !file.exists() {
        anyhow::bail!("{}: no such simulator state file", file.display());
    }
    match proxops_sim::unlock(&file, vmid)? {
        Some(lock) => output::outln!("VM {vmid}: removed lock '{lock}' ({})", file.display()),
        None => output::outln!("VM {vmid} is not locked ({})", file.display()),
    }
    Ok(exit::OK)
}

/// mimalloc instead of the system allocator: a plan cycle allocates and frees millions of
/// small JSON values and strings across threads, where glibc's malloc spent a fifth of the
/// CPU time (proxops-bench, plan at scale) and left the heap fragmented. Built without
/// transparent huge pages (the workspace's `no_thp`): where the kernel grants them on
/// request, mimalloc asked, and each first touch zeroed 2 MiB (clear_page was 6-14% of a
/// 10,000-VM plan's CPU); without them a plan's peak RSS is 15% lower.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Usage errors exit 1 like every other error (clap's own code is 2, which means
    // "changes to apply" for plan); help and version exit 0.
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::ERROR
            } else {
                exit::OK
            });
        }
    };
    output::install_panic_hook();
    output::init_tracing(cli.verbose);
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            output::errln!("error: {e:#}");
            ExitCode::from(exit::ERROR)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match &cli.command {
        Command::Completions { shell } => return Ok(completions::completions(*shell)),
        Command::Kind { command } => return kind_cmd::run(command),
        Command::Man { subcommand } => return completions::man(subcommand.as_deref()),
        _ => {}
    }
    if let Command::Sim { command } = cli.command {
        return match command {
            SimCommand::Serve {
                nodes,
                listen,
                state,
                token,
                http,
                task_duration,
                api_workers,
                api_handling,
                api_proxy,
                ha_crm_delay,
                ha_fence_delay,
                agent_boot,
                faults,
            } => {
                let opts = proxops_sim::ServeOptions {
                    nodes,
                    listen,
                    state_file: state,
                    token,
                    http,
                    task_duration: std::time::Duration::from_millis(task_duration),
                    api_workers,
                    api_handling: std::time::Duration::from_millis(api_handling),
                    api_proxy: api_proxy.map(std::time::Duration::from_millis),
                    ha_crm_delay: std::time::Duration::from_millis(ha_crm_delay),
                    ha_fence_delay: std::time::Duration::from_millis(ha_fence_delay),
                    agent_boot: std::time::Duration::from_millis(agent_boot),
                    faults: faults.unwrap_or_default(),
                };
                runtime.block_on(proxops_sim::serve(opts))?;
                Ok(exit::OK)
            }
            SimCommand::Unlock {
                vmid,
                repo,
                cluster,
                state,
            } => sim_unlock(vmid, &repo, cluster.as_deref(), state),
        };
    }
    if let Command::Validate { repo, .. }
    | Command::Plan { repo, .. }
    | Command::Apply { repo, .. }
    | Command::Watch { repo, .. }
    | Command::Adopt { repo, .. }
    | Command::Audit { repo, .. }
    | Command::Graph { repo, .. } = &cli.command
    {
        validate::ensure_repository(repo, "")?;
    }
    let mut trusted = None;
    if let Command::Validate { trusted_config, .. }
    | Command::Plan { trusted_config, .. }
    | Command::Apply { trusted_config, .. }
    | Command::Watch { trusted_config, .. } = &cli.command
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
    let kinds_from = match &cli.command {
        Command::Validate { repo, .. }
        | Command::Plan { repo, .. }
        | Command::Apply { repo, .. }
        | Command::Watch { repo, .. }
        | Command::Adopt { repo, .. }
        | Command::Audit { repo, .. }
        | Command::Graph { repo, .. } => Some(repo.clone()),
        Command::Kinds { repo, .. } | Command::Schema { repo, .. } => repo.clone(),
        _ => None,
    };
    // Components named `oci://…` in proxops.yaml are pulled (once, checked against their
    // pins) before anything loads them.
    if let Some(repo) = &kinds_from
        && let Err(errors) = runtime.block_on(oci::pull_pinned(
            ctx.config_root(repo),
            ctx.cache_dir().as_deref(),
        ))
    {
        output::errln!(
            "not run: components of proxops.yaml cannot be pulled from their registries (no cluster was contacted):"
        );
        for e in errors {
            output::errln!("  {}", output::inline(&e));
        }
        return Ok(exit::ERROR);
    }
    if let Some(repo) = kinds_from
        && let Err(diags) = ctx.load_repo_kinds(&repo)
    {
        output::errln!(
            "not run: the third-party kinds of proxops.yaml cannot be loaded (no cluster was contacted):"
        );
        for d in diags {
            output::errln!("  {}", output::inline(&d.to_string()));
        }
        return Ok(exit::ERROR);
    }
    match cli.command {
        Command::Validate { repo, json, .. } => validate::run(&ctx, &repo, json),
        Command::Kinds { json, .. } => inspect::kinds(&ctx, json),
        Command::Schema { kind, .. } => inspect::schema(&ctx, &kind),
        Command::Plan {
            repo,
            cluster,
            json,
            format,
            max_chars,
            run,
            ..
        } => runtime.block_on(reconcile::plan(
            &ctx,
            &repo,
            cluster.as_deref(),
            if json {
                reconcile::PlanFormat::Json
            } else {
                format
            },
            max_chars,
            run.into(),
        )),
        Command::Watch {
            repo,
            cluster,
            interval,
            apply,
            metrics_listen,
            ui_listen,
            ui_token_file,
            ui_history,
            audit,
            cycles,
            run,
            ..
        } => {
            let ui = match ui_listen {
                None => None,
                Some(listen) => Some(ui::Settings {
                    listen,
                    token: ui_token_file.as_deref().map(ui::read_token).transpose()?,
                    history: ui_history as usize,
                }),
            };
            runtime.block_on(watch::run(
                &ctx,
                &repo,
                watch::Options {
                    cluster,
                    interval,
                    apply,
                    metrics_listen,
                    audit,
                    cycles,
                    run: run.into(),
                    ui,
                },
            ))
        }
        Command::Apply {
            repo, cluster, run, ..
        } => runtime.block_on(reconcile::apply(
            &ctx,
            &repo,
            cluster.as_deref(),
            run.into(),
        )),
        Command::Graph { repo, format } => graph::graph(&ctx, &repo, format),
        Command::Adopt {
            repo,
            cluster,
            vmids,
            all,
            objects,
            kinds,
            adopt_secrets,
            force,
        } => runtime.block_on(adopt::adopt(
            &ctx,
            &repo,
            &adopt::AdoptOptions {
                cluster,
                vmids,
                all,
                objects,
                kinds,
                adopt_secrets,
                force,
            },
        )),
        Command::Audit {
            repo,
            cluster,
            json,
            format,
        } => runtime.block_on(audit::audit(
            &ctx,
            &repo,
            cluster.as_deref(),
            if json {
                reconcile::PlanFormat::Json
            } else {
                format
            },
        )),
        Command::Policy {
            command: policy_cmd::PolicyCommand::Push { wasm, reference },
        } => runtime.block_on(oci::push(&wasm, &reference)),
        Command::Policy { command } => policy_cmd::run(&ctx.runtime, command),
        Command::Sim { .. }
        | Command::Completions { .. }
        | Command::Man { .. }
        | Command::Kind { .. } => {
            unreachable!("handled above")
        }
    }
}

/// `--faults` of `proxops sim serve`.
fn parse_faults(text: &str) -> Result<proxops_sim::FaultPlan, String> {
    proxops_sim::FaultPlan::parse(text).map_err(|e| e.to_string())
}
