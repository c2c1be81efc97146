//! `proxops plan`, `apply` and `graph`.

use futures_util::StreamExt as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proxops_core::{ClusterFile, Diagnostic};
use proxops_reconcile::lock::Locks;
use proxops_reconcile::memory::StopMemory;
use proxops_reconcile::run::{self, Checked, ClusterRun, Outcome};
use proxops_reconcile::{ClusterInputs, ClusterPlan, ObserveError};

use proxops_reconcile::policy::PolicyReport;

use crate::context::Context;
use crate::output::{self, errln, out, outln};
use crate::progress::Progress;
use crate::signals::watch_signals;
use crate::sink::Sink;
use crate::{exit, markdown, render};

use crate::prepared::{Prepared, prepare_config, report_unprepared};

fn print_policies(sink: &Sink, report: &PolicyReport) {
    let lines = report.lines();
    if !lines.is_empty() {
        sink.outln("Policies:");
        for line in lines {
            sink.outln(format!("  {}", output::inline(&line)));
        }
    }
}

fn secrets_of(p: &Prepared, cluster: &str) -> Option<Arc<dyn proxops_runtime::SecretSource>> {
    p.sops
        .get(cluster)
        .map(|d| d.clone() as Arc<dyn proxops_runtime::SecretSource>)
}

/// Diagnostics that stop `cluster`: errors in its cluster file, its folders or its manifests,
/// and every error of the repository itself (`proxops.yaml`, a manifest outside the kind
/// folders).
fn cluster_errors<'d>(
    p: &'d Prepared,
    inputs: &'d ClusterInputs,
    cluster: &str,
) -> Vec<&'d Diagnostic> {
    let own = inputs.diags.iter().filter(|d| d.is_error());
    p.diags
        .iter()
        .filter(|d| d.is_error())
        .filter(|d| p.cluster_of(&d.file).is_none_or(|c| c == cluster))
        .chain(own)
        .collect()
}

/// Clusters to work on: every cluster file, plus folders naming a cluster without one
/// (so their error is reported), filtered by `--cluster`.
fn selected(p: &Prepared) -> Vec<String> {
    let mut names: Vec<String> = p.clusters().keys().cloned().collect();
    for d in p.diags.iter().filter(|d| d.is_error()) {
        // An invalid cluster file is not in `clusters`: its errors name the cluster.
        if let Some(c) = p.cluster_of(&d.file)
            && !c.is_empty()
            && !names.iter().any(|n| n == c)
        {
            names.push(c.to_string());
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The clusters to work on, or why there are none: a repository without clusters or
/// manifests, or a `--cluster` it does not have, is an error, never a silent success.
pub(crate) fn clusters_to_run(
    repo: &Path,
    p: &Prepared,
    only: Option<&str>,
) -> Result<Vec<String>, String> {
    let names = selected(p);
    if names.is_empty() && !p.has_manifests() {
        return Err(format!(
            "{} holds no cluster files (clusters/*.yaml) and no manifests: nothing to do; is it a proxops repository?",
            repo.display()
        ));
    }
    match only {
        Some(o) if !names.iter().any(|n| n == o) => Err(format!(
            "there is no cluster `{o}` in {} (clusters: {})",
            repo.display(),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )),
        Some(o) => Ok(vec![o.to_string()]),
        None => Ok(names),
    }
}

/// What plan and apply need besides the repository.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Prune even when more than [`run::PRUNE_GUARD`] guests (or every guest of a cluster with no
    /// manifests) would go: at most this many.
    pub allow_prune: Option<usize>,
    /// Stop guests again for stop-required changes that failed in an earlier run.
    pub retry_stop_required: bool,
    /// `--reboot-pending`: reboot guests whose changes are pending until reboot.
    pub reboot_pending: bool,
    /// `--clusters-at-once`: overrides proxops.yaml's `clusters-at-once`.
    pub clusters_at_once: Option<usize>,
}

impl RunOptions {
    /// The hold-backs the operator loosened for this run.
    pub(crate) fn holds(&self) -> run::Holds {
        run::Holds {
            allow_prune: self.allow_prune,
            retry_stop_required: self.retry_stop_required,
        }
    }
}

/// Clusters `plan`, `apply` and `watch` work on at once unless `--clusters-at-once` or
/// proxops.yaml's `clusters-at-once` say otherwise.
pub const CLUSTERS_AT_ONCE: usize = 8;

/// How many clusters this run works on at once: the flag, else proxops.yaml, else
/// [`CLUSTERS_AT_ONCE`].
pub(crate) fn clusters_at_once(run: RunOptions, p: &Prepared) -> usize {
    run.clusters_at_once
        .or(p.clusters_at_once)
        .unwrap_or(CLUSTERS_AT_ONCE)
        .max(1)
}

/// One sink per cluster: live when clusters go one at a time (progress as it happens), else a
/// buffer printed when the cluster is done.
pub(crate) fn sink_for(at_once: usize, clusters: usize) -> Sink {
    if at_once <= 1 || clusters <= 1 {
        Sink::live()
    } else {
        Sink::buffer()
    }
}

/// The warnings among `diags`, to stderr (a cluster's go with its output, through its sink).
fn print_warnings<'d>(diags: impl IntoIterator<Item = &'d Diagnostic>, sink: Option<&Sink>) {
    for d in diags.into_iter().filter(|d| !d.is_error()) {
        let line = output::inline(&d.to_string()).into_owned();
        match sink {
            Some(sink) => sink.errln(line),
            None => errln!("{line}"),
        }
    }
}

/// One cluster's plan and what applying it needs.
pub(crate) struct Planned {
    pub(crate) plan: ClusterPlan,
    pub(crate) conn: crate::connect::Connection,
    /// The cluster's cycle, for the stages after the plan.
    pub(crate) run: ClusterRun,
}

impl Planned {
    /// Keep what planning learnt about failed stop-required changes (only under the apply
    /// lock, so two writers never race).
    pub(crate) fn save_memory(&self, sink: &Sink) {
        if let Err(e) = self.run.save_memory() {
            sink.errln(format!("warning: {e}"));
        }
    }
}

/// Where the failed stop-required changes of a cluster are remembered: beside the embedded
/// simulator's state for `sim:` (deleting `.proxops/` starts over), else in the cache folder,
/// keyed by endpoint and token (never in the repository, which may be read-only).
fn stop_memory(
    ctx: &Context,
    repo: &Path,
    cluster: &str,
    endpoint: &str,
    sink: &Sink,
) -> Arc<StopMemory> {
    use sha2::Digest as _;
    let path = if endpoint.starts_with("sim:") {
        Some(
            repo.join(".proxops")
                .join(format!("stop-failures-{cluster}.json")),
        )
    } else {
        ctx.state_dir.as_ref().map(|dir| {
            let key = hex::encode(sha2::Sha256::digest(format!("{endpoint}\0{cluster}")));
            dir.join("stop-failures").join(format!("{key}.json"))
        })
    };
    let memory = match path.map(StopMemory::open) {
        Some(Ok(m)) => m,
        Some(Err(e)) => {
            sink.errln(format!(
                "warning: {e}; failed stop-required changes are not remembered this run"
            ));
            StopMemory::in_memory()
        }
        None => StopMemory::in_memory(),
    };
    Arc::new(memory)
}

/// The advisory lock file of one cluster's apply: two applies against one cluster never run
/// at once (they would plan against the same state and overwrite each other). Keyed on the
/// endpoint and the token id; kept beside the simulator's state for `sim:`, else in the cache
/// folder (never in the repository, which may be read-only). `None` (with a warning) when
/// there is no cache folder.
pub(crate) fn lock_path(
    ctx: &Context,
    repo: &Path,
    cluster: &ClusterFile,
    sink: &Sink,
) -> Option<std::path::PathBuf> {
    use sha2::Digest as _;
    match &cluster.endpoint {
        proxops_core::Endpoint::Sim => Some(
            repo.join(".proxops")
                .join(format!("apply-{}.lock", cluster.name)),
        ),
        proxops_core::Endpoint::Https(url) | proxops_core::Endpoint::Http(url) => {
            let Some(dir) = &ctx.state_dir else {
                sink.errln(format!(
                    "warning: no cache folder (set --cache-dir or $PROXOPS_CACHE_DIR): cluster {} is applied without the lock against a concurrent apply",
                    cluster.name
                ));
                return None;
            };
            let token = cluster.token.as_ref().map(|t| t.id.as_str()).unwrap_or("");
            let key = hex::encode(sha2::Sha256::digest(format!("{url}\0{token}")));
            Some(dir.join("locks").join(format!("{key}.lock")))
        }
    }
}

/// A cluster that could not be planned (the reason is in its sink, and in `reasons`).
pub(crate) struct Unplanned {
    /// Its client, when it got as far as connecting (the requests it sent count in `watch`'s
    /// metrics).
    pub(crate) client: Option<proxops_pve::Client>,
    /// Why, line by line, as said in the sink (for `plan --json`).
    pub(crate) reasons: Vec<String>,
}

/// What every cluster of one command shares: the process, the repository, its prepared
/// configuration and the options of the run.
#[derive(Clone, Copy)]
pub(crate) struct Job<'a> {
    pub(crate) ctx: &'a Context,
    pub(crate) repo: &'a Path,
    pub(crate) p: &'a Prepared,
    pub(crate) run: RunOptions,
}

/// Connect to cluster `name`, observe and plan its validated `inputs`, or say in `sink` why
/// it cannot be. Lines for the human go to `sink`: stdout, or stderr with `quiet` (stdout
/// carries JSON or Markdown, or `watch` reports on its own).
pub(crate) async fn plan_one(
    job: Job<'_>,
    kinds: &proxops_reconcile::KindRegistry,
    name: &str,
    inputs: Arc<ClusterInputs>,
    quiet: bool,
    sink: &Sink,
) -> Result<Planned, Unplanned> {
    let Job { ctx, repo, p, run } = job;
    let say = |line: String| sink.say(quiet, line);
    // Said, and kept for `plan --json`.
    let unplanned = |client: Option<proxops_pve::Client>, reasons: Vec<String>| {
        for line in &reasons {
            say(line.clone());
        }
        Unplanned { client, reasons }
    };
    let rollout = p.rollout(name, &inputs);
    let mut errors = cluster_errors(p, &inputs, name);
    if let Err(diags) = &rollout {
        errors.extend(diags);
    }
    if !errors.is_empty() {
        let mut lines = vec![format!(
            "Cluster {name}: not planned; fix these first (no PVE call was made):"
        )];
        lines.extend(
            errors
                .iter()
                .map(|d| format!("  {}", output::inline(&d.to_string()))),
        );
        return Err(unplanned(None, lines));
    }
    let Some(cluster) = p.clusters().get(name) else {
        return Err(unplanned(
            None,
            vec![format!(
                "Cluster {name}: no cluster file clusters/{name}.yaml"
            )],
        ));
    };
    let conn = match crate::connect::connect(
        repo,
        ctx.config_root(repo),
        cluster,
        p.sops.get(name).map(|d| d.as_ref()),
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            return Err(unplanned(
                None,
                vec![format!("Cluster {name}: cannot connect: {e:#}")],
            ));
        }
    };
    if !quiet {
        say(format!("Cluster {name} ({})", conn.label));
    }
    let memory = stop_memory(ctx, repo, name, &conn.label, sink);
    // Under the `Cluster …` heading line; without it (JSON, Markdown, watch), the line names
    // its cluster itself.
    let heading = if quiet {
        format!("Cluster {name}: ")
    } else {
        "  ".to_string()
    };
    let options = &cluster.options;
    let cluster_run = ClusterRun {
        kinds: kinds.clone(),
        client: conn.client.clone(),
        cluster: name.to_string(),
        inputs,
        settings: run::Settings {
            read_concurrency: options.read_concurrency,
            write_concurrency: options.write_concurrency,
            task_timeout: Duration::from_secs(options.task_timeout_seconds),
            max_passes: options.max_passes,
        },
        secrets: secrets_of(p, name),
        memory,
        policies: p.policies.clone(),
        holds: run.holds(),
        rollout: Arc::new(
            rollout
                .unwrap_or_default()
                .with_reboot_pending(run.reboot_pending),
        ),
    };
    match cluster_run.plan().await {
        Ok(plan) => Ok(Planned {
            plan,
            conn,
            run: cluster_run,
        }),
        Err(ObserveError::Conflicts(diags)) => {
            let mut lines = vec![format!(
                "{heading}not planned: manifests conflict with live PVE objects (no change was made):"
            )];
            lines.extend(
                diags
                    .iter()
                    .map(|d| format!("  {}", output::inline(&d.to_string()))),
            );
            Err(unplanned(Some(conn.client), lines))
        }
        Err(e) => Err(unplanned(
            Some(conn.client),
            vec![format!("{heading}cannot plan: {e}")],
        )),
    }
}

/// Output format of `proxops plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PlanFormat {
    Text,
    Json,
    Markdown,
}

/// Work an earlier run left in flight (a killed apply's create, clone or download task): wait
/// for it (bounded by the cluster's task timeout) and plan again, or hold back the objects it
/// may concern ([`ClusterRun::settle`]); what it waits for is said in `sink`.
pub(crate) async fn settle_inflight(planned: &mut Planned, sink: &Sink) -> Result<(), String> {
    let bound = planned.run.settings.task_timeout;
    let waiting = |task: &str| {
        sink.outln(format!(
            "  waiting for a task an earlier run left running: {} (up to {}s)",
            output::inline(task),
            bound.as_secs()
        ));
    };
    let waited = |task: &str| {
        sink.outln(format!(
            "  waited for a task already running: {}",
            output::inline(task)
        ))
    };
    planned
        .run
        .settle(&mut planned.plan, &waiting, &waited)
        .await
}

pub async fn plan(
    ctx: &Context,
    repo: &Path,
    only: Option<&str>,
    format: PlanFormat,
    max_chars: usize,
    run: RunOptions,
) -> anyhow::Result<u8> {
    let json = format == PlanFormat::Json;
    // Only the plan goes to stdout in JSON and Markdown; the reasons for the job log go to stderr.
    let quiet = format != PlanFormat::Text;
    let Some(p) = prepare_config(ctx, repo).map_err(report_unprepared).ok() else {
        return Ok(exit::ERROR);
    };
    print_warnings(&p.diags, None);
    let names = match clusters_to_run(repo, &p, only) {
        Ok(n) => n,
        Err(e) => {
            errln!("error: {e}");
            return Ok(exit::ERROR);
        }
    };
    // The most serious outcome of the clusters.
    let mut worst = Outcome::Clean;
    let mut views = Vec::new();
    let mut sections = Vec::new();
    // Clusters are independent: each is planned as soon as its manifests are validated (one
    // cluster after the other, on a thread of their own), several at once (their reads
    // overlap), and shown one after the other, in order.
    let at_once = clusters_at_once(run, &p);
    let p = &p;
    let validating = p.validating(ctx, repo, &names);
    let mut planned = futures_util::stream::iter(names.into_iter().zip(validating))
        .map(|(name, inputs)| async move {
            let inputs = inputs.await;
            // One run per cluster: a kind that fails here is not called again for it.
            let kinds = ctx.kinds.for_run(p.kind_budget);
            let sink = Sink::buffer();
            print_warnings(&inputs.diags, Some(&sink));
            let job = Job { ctx, repo, p, run };
            let planned = plan_one(job, &kinds, &name, inputs, quiet, &sink).await;
            (name, planned, sink)
        })
        .buffered(at_once);
    while let Some((name, planned, sink)) = planned.next().await {
        sink.flush();
        let planned = match planned {
            Ok(planned) => Ok(planned),
            Err(unplanned) if json => {
                worst = Outcome::Failed;
                // One error per problem listed under the heading (or the one line).
                let items = unplanned
                    .reasons
                    .iter()
                    .filter(|l| l.starts_with("  "))
                    .count();
                views.push(proxops_reconcile::plan::PlanView {
                    cluster: name,
                    rollout: Vec::new(),
                    counts: proxops_reconcile::plan::Counts {
                        errors: items.max(1),
                        ..Default::default()
                    },
                    objects: Vec::new(),
                    policies: None,
                    errors: unplanned
                        .reasons
                        .iter()
                        .map(|l| l.trim().to_string())
                        .collect(),
                });
                continue;
            }
            Err(unplanned) => Err(unplanned),
        };
        let Ok(Planned { plan, run, .. }) = planned else {
            worst = Outcome::Failed;
            sections.push(markdown::Cluster {
                name,
                view: None,
                summary: String::new(),
                findings: Vec::new(),
            });
            continue;
        };
        // A plan that enforce-mode policies deny cannot be applied: plan says so with exit 1.
        let checked = run.check(plan);
        let (plan, policies) = (checked.plan(), checked.report());
        worst = worst.max(Outcome::of(plan, policies, None));
        if json {
            let mut view = plan.view();
            view.policies = Some(policies.json());
            views.push(view);
        } else if format == PlanFormat::Markdown {
            sections.push(markdown::Cluster {
                name,
                summary: render::plan_summary(plan),
                view: Some(plan.view()),
                findings: policies.lines(),
            });
        } else {
            out!("{}", render::plan(plan));
            print_policies(&Sink::live(), policies);
            outln!("{}", render::plan_summary(plan));
        }
    }
    if json {
        output::json(&views)?;
    }
    if format == PlanFormat::Markdown {
        out!("{}", markdown::render(&sections, max_chars));
    }
    Ok(exit::of(worst))
}

pub async fn apply(
    ctx: &Context,
    repo: &Path,
    only: Option<&str>,
    run: RunOptions,
) -> anyhow::Result<u8> {
    let Some(p) = prepare_config(ctx, repo).map_err(report_unprepared).ok() else {
        return Ok(exit::ERROR);
    };
    print_warnings(&p.diags, None);
    let names = match clusters_to_run(repo, &p, only) {
        Ok(n) => n,
        Err(e) => {
            errln!("error: {e}");
            return Ok(exit::ERROR);
        }
    };
    let (cancel, signal) = watch_signals();
    let mut worst = Outcome::Clean;
    // Clusters are independent: each starts as soon as its manifests are validated (one
    // cluster after the other, on a thread of their own), up to `at_once` are applied at the
    // same time, each under its own lock, and each one's output is shown in one piece, in
    // name order.
    let at_once = clusters_at_once(run, &p);
    let clusters = names.len();
    let locks = Locks::default();
    let (p, locks, cancel) = (&p, &locks, &cancel);
    let validating = p.validating(ctx, repo, &names);
    let mut applied = futures_util::stream::iter(names.into_iter().zip(validating))
        .map(|(name, inputs)| async move {
            let sink = sink_for(at_once, clusters);
            let inputs = inputs.await;
            print_warnings(&inputs.diags, Some(&sink));
            let job = Job { ctx, repo, p, run };
            let ended = apply_cluster(job, &name, inputs, locks, cancel, &sink).await;
            (sink, ended)
        })
        .buffered(at_once);
    while let Some((sink, ended)) = applied.next().await {
        sink.flush();
        worst = worst.max(ended);
    }
    let signal = signal.load(std::sync::atomic::Ordering::SeqCst);
    Ok(if signal != 0 { signal } else { exit::of(worst) })
}

/// Apply one cluster under its lock: plan, wait for work an earlier run left in flight, show
/// the plan and the policies, execute; everything it says goes to `sink`. An interrupted
/// cluster that never started is `Clean` (the signal decides the exit code).
async fn apply_cluster(
    job: Job<'_>,
    name: &str,
    inputs: Arc<ClusterInputs>,
    locks: &Locks,
    cancel: &tokio::sync::watch::Receiver<bool>,
    sink: &Sink,
) -> Outcome {
    let Job { ctx, repo, p, .. } = job;
    if *cancel.borrow() {
        sink.outln(format!("Cluster {name}: not started (interrupted)."));
        return Outcome::Clean;
    }
    // One apply per cluster at a time: held until this cluster is done.
    let _lock = match p.clusters().get(name) {
        Some(c) => match locks.take(lock_path(ctx, repo, c, sink), &c.name).await {
            Ok(lock) => Some(lock),
            Err(e) => {
                sink.outln(format!("Cluster {name}: {}", output::inline(&e)));
                return Outcome::Failed;
            }
        },
        None => None,
    };
    // Waiting for this process's other cluster on the same lock may have taken a while.
    if *cancel.borrow() {
        sink.outln(format!("Cluster {name}: not started (interrupted)."));
        return Outcome::Clean;
    }
    // One run per cluster (plan and every apply pass): see `KindRegistry::for_run`.
    let kinds = ctx.kinds.for_run(p.kind_budget);
    let Ok(mut planned) = plan_one(job, &kinds, name, inputs, false, sink).await else {
        return Outcome::Failed;
    };
    if let Err(e) = settle_inflight(&mut planned, sink).await {
        sink.outln(format!("  cannot plan: {}", output::inline(&e)));
        return Outcome::Failed;
    }
    planned.save_memory(sink);
    let Planned {
        plan,
        conn,
        run: cluster_run,
    } = planned;
    sink.out(render::plan(&plan));
    let checked = cluster_run.check(plan);
    print_policies(sink, checked.report());
    sink.outln(render::plan_summary(checked.plan()));
    let (plan, report) = match checked {
        Checked::Blocked { .. } => {
            sink.outln(format!(
                "Apply of cluster {name} blocked by policy; no change was made."
            ));
            return Outcome::Failed;
        }
        Checked::Passed { plan, report } => (plan, report),
    };
    if !plan.has_changes() {
        return Outcome::of(&plan, &report, None);
    }
    match execute(&cluster_run, conn, plan, cancel.clone(), sink, None).await {
        Ok(applied) => {
            sink.out(render::apply_summary(&applied));
            Outcome::of(&applied.initial, &report, Some(&applied))
        }
        Err(e) => {
            sink.outln(format!("  apply stopped: {e}"));
            Outcome::Failed
        }
    }
}

/// Apply a cluster's checked plan (the apply lock held by the caller) with a progress bar or
/// lines (and to the status page's live view, `live`), remembering failed stop-required
/// changes; shared by `apply` and `watch --apply`.
pub(crate) async fn execute(
    cluster_run: &ClusterRun,
    conn: crate::connect::Connection,
    plan: ClusterPlan,
    cancel: tokio::sync::watch::Receiver<bool>,
    sink: &Sink,
    live: Option<crate::ui::Live>,
) -> Result<proxops_reconcile::ApplyReport, ObserveError> {
    let actions = plan.objects.iter().map(|o| o.proposal.actions.len()).sum();
    let progress = Arc::new(Progress::new(actions, sink.clone(), live));
    let report = cluster_run
        .apply(plan, progress.clone(), Some(cancel))
        .await;
    if let Some(bar) = &progress.bar {
        bar.finish_and_clear();
    }
    if let Err(e) = cluster_run.save_memory() {
        sink.errln(format!("warning: {e}"));
    }
    drop(conn);
    report
}
