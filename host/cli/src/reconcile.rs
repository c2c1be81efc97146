//! `proxops plan`, `apply` and `graph`.

use std::collections::BTreeMap;

use futures_util::StreamExt as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proxops_core::{ClusterFile, Diagnostic};
use proxops_reconcile::execute::Limits;
use proxops_reconcile::memory::StopMemory;
use proxops_reconcile::{ApplyOptions, Catalog, ClusterPlan, Object, ObserveError};

use proxops_reconcile::policy::{PolicyReport, PolicySet};

use crate::context::Context;
use crate::output::{self, errln, out, outln};
use crate::progress::Progress;
use crate::secrets::LazySops;
use crate::signals::watch_signals;
use crate::{exit, markdown, render, validate};

/// What `plan` and `apply` share: the validated repository, split by cluster.
pub(crate) struct Prepared {
    pub(crate) clusters: BTreeMap<String, ClusterFile>,
    manifests: Vec<proxops_core::Manifest>,
    pub(crate) catalog: Catalog,
    pub(crate) diags: Vec<Diagnostic>,
    sops: BTreeMap<String, Arc<LazySops>>,
    policies: Arc<PolicySet>,
    /// `guest-budget.kind`: the time each kind may take per cluster and run.
    pub(crate) kind_budget: Option<Duration>,
}

/// Load, validate and load the site policies. An invalid `proxops.yaml` or policy stops the
/// whole run before any cluster is touched: the diagnostics are returned.
pub(crate) fn prepare(ctx: &Context, repo: &Path) -> Result<Prepared, Vec<Diagnostic>> {
    let settings = proxops_core::settings::load(ctx.config_root(repo))?;
    let policies = PolicySet::load(&ctx.runtime, ctx.config_root(repo), &settings)?;
    let checked = validate::check(ctx, repo);
    Ok(Prepared {
        clusters: checked.repo.clusters,
        manifests: checked.repo.manifests,
        catalog: checked.catalog,
        diags: checked.diags,
        sops: checked.sops,
        policies: Arc::new(policies),
        kind_budget: settings.guest_budget.kind,
    })
}

/// `prepare`, printing why it failed.
pub(crate) fn prepare_or_report(ctx: &Context, repo: &Path) -> Option<Prepared> {
    match prepare(ctx, repo) {
        Ok(p) => Some(p),
        Err(diags) => {
            errln!("not run: the site policies cannot be loaded (no cluster was contacted):");
            for d in diags {
                errln!("  {}", output::inline(&d.to_string()));
            }
            None
        }
    }
}

fn print_policies(report: &PolicyReport) {
    let lines = report.lines();
    if !lines.is_empty() {
        outln!("Policies:");
        for line in lines {
            outln!("  {}", output::inline(&line));
        }
    }
}

/// What the policies say about a cluster's manifests and plan.
pub(crate) fn policy_report(p: &Prepared, cluster: &str, plan: &ClusterPlan) -> PolicyReport {
    let mut report = p.policies.check_manifests(cluster, &p.manifests);
    report.extend(p.policies.check_plan(plan, &p.manifests));
    report
}

/// The policy check of every later pass of an apply (clone -> configure -> start plans
/// actions the first plan did not show): a blocking finding stops the apply. The manifests
/// were checked before the first pass and do not change, so only the new plan is checked.
fn policy_gate(p: &Prepared) -> proxops_reconcile::apply::Gate {
    let policies = p.policies.clone();
    let manifests = p.manifests.clone();
    Arc::new(move |plan: &ClusterPlan| {
        let report = policies.check_plan(plan, &manifests);
        report.blocks().then(|| report.lines().join("; "))
    })
}

/// The planning cycle of cluster `name`: its objects, read concurrency and secrets.
fn cycle<'a>(
    kinds: &'a proxops_reconcile::KindRegistry,
    p: &Prepared,
    name: &'a str,
    client: &'a proxops_pve::Client,
    objects: &'a [Object],
) -> proxops_reconcile::Cycle<'a> {
    proxops_reconcile::Cycle {
        registry: kinds,
        client,
        cluster: name,
        objects,
        read_concurrency: p.clusters[name].options.read_concurrency,
        secrets: secrets_of(p, name),
    }
}

fn secrets_of(p: &Prepared, cluster: &str) -> Option<Arc<dyn proxops_runtime::SecretSource>> {
    p.sops
        .get(cluster)
        .map(|d| d.clone() as Arc<dyn proxops_runtime::SecretSource>)
}

/// Diagnostics that stop `cluster`: errors in its cluster file or its manifests.
fn cluster_errors<'d>(p: &'d Prepared, cluster: &str) -> Vec<&'d Diagnostic> {
    p.diags
        .iter()
        .filter(|d| d.is_error())
        .filter(|d| {
            let mut parts = d.file.split('/');
            match (parts.next(), parts.next()) {
                (Some("clusters"), Some(file)) => {
                    file.strip_suffix(".yaml").or(file.strip_suffix(".yml")) == Some(cluster)
                }
                (Some(_), Some(c)) => c == cluster,
                _ => true,
            }
        })
        .collect()
}

/// Clusters to work on: every cluster file, plus folders naming a cluster without one
/// (so their error is reported), filtered by `--cluster`.
fn selected(p: &Prepared) -> Vec<String> {
    let mut names: Vec<String> = p.clusters.keys().cloned().collect();
    for d in p.diags.iter().filter(|d| d.is_error()) {
        // An invalid cluster file is not in `clusters`: its errors name the cluster.
        if let Some(c) = d.file.split('/').nth(1) {
            let c = c
                .trim_end_matches(".yaml")
                .trim_end_matches(".yml")
                .to_string();
            if !names.contains(&c) && !c.is_empty() {
                names.push(c);
            }
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
    if names.is_empty() && p.manifests.is_empty() {
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
    /// Prune even when more than [`PRUNE_GUARD`] guests (or every guest of a cluster with no
    /// manifests) would go: at most this many.
    pub allow_prune: Option<usize>,
    /// Stop guests again for stop-required changes that failed in an earlier run.
    pub retry_stop_required: bool,
}

/// More deletes than this in one cluster need `--allow-prune`.
pub const PRUNE_GUARD: usize = 5;

/// The mass-prune guard: a cluster with no manifests, or a plan that deletes more than
/// [`PRUNE_GUARD`] guests, prunes nothing unless `--allow-prune` covers every delete. The held
/// back deletes become anomalies saying why.
fn guard_prune(plan: &mut ClusterPlan, manifests: usize, allow: Option<usize>) {
    use proxops_runtime::kind::{Anomaly, Operation};
    let deletes: usize = plan
        .objects
        .iter()
        .flat_map(|o| &o.proposal.actions)
        .filter(|a| a.operation == Operation::Delete)
        .count();
    let guarded = deletes > PRUNE_GUARD || (manifests == 0 && deletes > 0);
    if !guarded || allow.is_some_and(|n| n >= deletes) {
        return;
    }
    let why = if manifests == 0 {
        format!(
            "cluster {} has no manifests, so every owned guest would be deleted ({deletes}); an empty or mis-checked-out repository must not empty a cluster",
            plan.cluster
        )
    } else {
        format!("this plan would delete {deletes} guests, more than {PRUNE_GUARD} at once")
    };
    for o in &mut plan.objects {
        let before = o.proposal.actions.len();
        o.proposal
            .actions
            .retain(|a| a.operation != Operation::Delete);
        if o.proposal.actions.len() != before {
            o.proposal.anomalies.push(Anomaly {
                path: String::new(),
                message: format!(
                    "not pruned: {why}; check the plan, then run with --allow-prune={deletes}"
                ),
                locked: false,
            });
        }
    }
}

fn objects_of(catalog: &Catalog, cluster: &str) -> Vec<Object> {
    catalog
        .objects
        .iter()
        .filter(|o| o.id.cluster == cluster)
        .cloned()
        .collect()
}

/// A line for the human: stdout, or stderr when stdout carries JSON.
fn say(quiet: bool, line: String) {
    if quiet {
        errln!("{line}");
    } else {
        outln!("{line}");
    }
}

fn print_warnings(p: &Prepared) {
    for d in p.diags.iter().filter(|d| !d.is_error()) {
        errln!("{}", output::inline(&d.to_string()));
    }
}

/// One cluster's plan and what applying it needs.
pub(crate) struct Planned {
    pub(crate) plan: ClusterPlan,
    conn: crate::connect::Connection,
    objects: Vec<Object>,
    memory: Arc<StopMemory>,
}

/// Where the failed stop-required changes of a cluster are remembered: beside the embedded
/// simulator's state for `sim:` (deleting `.proxops/` starts over), else in the cache folder,
/// keyed by endpoint and token (never in the repository, which may be read-only).
fn stop_memory(ctx: &Context, repo: &Path, cluster: &str, endpoint: &str) -> Arc<StopMemory> {
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
            errln!("warning: {e}; failed stop-required changes are not remembered this run");
            StopMemory::in_memory()
        }
        None => StopMemory::in_memory(),
    };
    Arc::new(memory)
}

/// The advisory lock of one cluster's apply: two applies against one cluster never run at
/// once (they would plan against the same state and overwrite each other). Keyed on the
/// endpoint and the token id; kept beside the simulator's state for `sim:`, else in the cache
/// folder (never in the repository, which may be read-only). The operating system releases
/// it when the process ends, however it ends.
pub(crate) fn apply_lock(
    ctx: &Context,
    repo: &Path,
    cluster: &ClusterFile,
) -> Result<Option<std::fs::File>, String> {
    use sha2::Digest as _;
    let path = match &cluster.endpoint {
        proxops_core::Endpoint::Sim => repo
            .join(".proxops")
            .join(format!("apply-{}.lock", cluster.name)),
        proxops_core::Endpoint::Https(url) | proxops_core::Endpoint::Http(url) => {
            let Some(dir) = &ctx.state_dir else {
                errln!(
                    "warning: no cache folder (set --cache-dir or $PROXOPS_CACHE_DIR): cluster {} is applied without the lock against a concurrent apply",
                    cluster.name
                );
                return Ok(None);
            };
            let token = cluster.token.as_ref().map(|t| t.id.as_str()).unwrap_or("");
            let key = hex::encode(sha2::Sha256::digest(format!("{url}\0{token}")));
            dir.join("locks").join(format!("{key}.lock"))
        }
    };
    let shown = path.display().to_string();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("opening the lock file {shown}: {e}"))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Err(format!(
            "another proxops apply holds the lock of cluster {} (lock file {shown}); not applying, no change was made. Run one apply per cluster at a time",
            cluster.name
        )),
        Err(std::fs::TryLockError::Error(e)) => Err(format!("locking {shown}: {e}")),
    }
}

/// Observe and plan one cluster; `None` (with the reason printed) when it cannot be.
/// Connect to cluster `name` and plan it (lines for the human are printed when it is done).
pub(crate) async fn plan_one(
    ctx: &Context,
    kinds: &proxops_reconcile::KindRegistry,
    repo: &Path,
    p: &Prepared,
    name: &str,
    quiet: bool,
    run: RunOptions,
) -> Option<Planned> {
    let mut said = Vec::new();
    let planned = plan_one_into(ctx, kinds, repo, p, name, quiet, run, &mut said).await;
    for line in said {
        say(quiet, line);
    }
    planned
}

/// `plan_one`, with the lines for the human collected in `said` instead of printed, so that
/// clusters can be planned at once and shown one after the other.
#[allow(clippy::too_many_arguments)]
async fn plan_one_into(
    ctx: &Context,
    kinds: &proxops_reconcile::KindRegistry,
    repo: &Path,
    p: &Prepared,
    name: &str,
    quiet: bool,
    run: RunOptions,
    said: &mut Vec<String>,
) -> Option<Planned> {
    let mut say = |_quiet: bool, line: String| said.push(line);
    let errors = cluster_errors(p, name);
    if !errors.is_empty() {
        say(
            quiet,
            format!("Cluster {name}: not planned; fix these first (no PVE call was made):"),
        );
        for d in &errors {
            say(quiet, format!("  {}", output::inline(&d.to_string())));
        }
        return None;
    }
    let Some(cluster) = p.clusters.get(name) else {
        say(
            quiet,
            format!("Cluster {name}: no cluster file clusters/{name}.yaml"),
        );
        return None;
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
            say(quiet, format!("Cluster {name}: cannot connect: {e:#}"));
            return None;
        }
    };
    if !quiet {
        say(quiet, format!("Cluster {name} ({})", conn.label));
    }
    let objects = objects_of(&p.catalog, name);
    let memory = stop_memory(ctx, repo, name, &conn.label);
    match proxops_reconcile::plan_cluster(&cycle(kinds, p, name, &conn.client, &objects), None)
        .await
    {
        Ok(mut plan) => {
            memory.hold_back(&mut plan, run.retry_stop_required);
            guard_prune(&mut plan, objects.len(), run.allow_prune);
            Some(Planned {
                plan,
                conn,
                objects,
                memory,
            })
        }
        Err(ObserveError::Conflicts(diags)) => {
            say(
                quiet,
                "  not planned: manifests conflict with live PVE objects (no change was made):"
                    .to_string(),
            );
            for d in &diags {
                say(quiet, format!("  {}", output::inline(&d.to_string())));
            }
            None
        }
        Err(e) => {
            say(quiet, format!("  cannot plan: {e}"));
            None
        }
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
/// may concern ([`proxops_reconcile::inflight`]).
pub(crate) async fn settle_inflight(
    kinds: &proxops_reconcile::KindRegistry,
    p: &Prepared,
    name: &str,
    planned: &mut Planned,
    run: RunOptions,
) -> Result<(), String> {
    let Planned {
        plan,
        conn,
        objects,
        memory,
    } = planned;
    let options = &p.clusters[name].options;
    let bound = Duration::from_secs(options.task_timeout_seconds);
    let waiting = |task: &str| {
        outln!(
            "  waiting for a task an earlier run left running: {} (up to {}s)",
            output::inline(task),
            bound.as_secs()
        );
    };
    let settled = proxops_reconcile::inflight::settle(&conn.client, plan, bound, &waiting)
        .await
        .map_err(|e| e.to_string())?;
    for waited in &settled.waited {
        outln!(
            "  waited for a task already running: {}",
            output::inline(waited)
        );
    }
    let held: Vec<(proxops_reconcile::ObjectRef, String)> = settled
        .running
        .iter()
        .map(|(i, why)| (plan.objects[*i].object.clone(), why.clone()))
        .collect();
    if settled.replan() {
        let mut again =
            proxops_reconcile::plan_cluster(&cycle(kinds, p, name, &conn.client, objects), None)
                .await
                .map_err(|e| e.to_string())?;
        memory.hold_back(&mut again, run.retry_stop_required);
        guard_prune(&mut again, objects.len(), run.allow_prune);
        *plan = again;
    }
    for (object, why) in held {
        if let Some(o) = plan
            .objects
            .iter_mut()
            .find(|o| o.object.id == object.id && o.object.file == object.file)
        {
            o.error = Some(proxops_reconcile::PlanError::InFlight(why));
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
/// Clusters `plan` plans at once.
const CLUSTERS_AT_ONCE: usize = 8;

pub async fn plan(
    ctx: &Context,
    repo: &Path,
    only: Option<&str>,
    format: PlanFormat,
    max_chars: usize,
    detailed: bool,
    run: RunOptions,
) -> anyhow::Result<u8> {
    let json = format == PlanFormat::Json;
    // Only the plan goes to stdout in JSON and Markdown; the reasons for the job log go to stderr.
    let quiet = format != PlanFormat::Text;
    let Some(p) = prepare_or_report(ctx, repo) else {
        return Ok(exit::ERROR);
    };
    print_warnings(&p);
    let names = match clusters_to_run(repo, &p, only) {
        Ok(n) => n,
        Err(e) => {
            errln!("error: {e}");
            return Ok(exit::ERROR);
        }
    };
    let mut failed = false;
    let mut changes = false;
    let mut attention = false;
    let mut views = Vec::new();
    let mut sections = Vec::new();
    // Clusters are independent: they are planned at once (their reads overlap), and shown
    // one after the other, in order.
    let p = &p;
    let mut planned = futures_util::stream::iter(names)
        .map(|name| async move {
            // One run per cluster: a kind that fails here is not called again for it.
            let kinds = ctx.kinds.for_run(p.kind_budget);
            let mut said = Vec::new();
            let planned = plan_one_into(ctx, &kinds, repo, p, &name, quiet, run, &mut said).await;
            (name, planned, said)
        })
        .buffered(CLUSTERS_AT_ONCE);
    while let Some((name, planned, said)) = planned.next().await {
        for line in said {
            say(quiet, line);
        }
        let Some(Planned { plan, .. }) = planned else {
            failed = true;
            sections.push(markdown::Cluster {
                name,
                view: None,
                summary: String::new(),
                findings: Vec::new(),
            });
            continue;
        };
        let counts = plan.counts();
        changes |= plan.has_changes();
        attention |= counts.anomalies + counts.pending > 0;
        failed |= counts.errors > 0;
        let policies = policy_report(p, &name, &plan);
        // A plan that enforce-mode policies deny cannot be applied: plan says so with exit 1.
        failed |= policies.blocks();
        if json {
            let mut view = plan.view();
            view.policies = Some(policies.json());
            views.push(view);
        } else if format == PlanFormat::Markdown {
            sections.push(markdown::Cluster {
                name,
                summary: render::plan_summary(&plan),
                view: Some(plan.view()),
                findings: policies.lines(),
            });
        } else {
            out!("{}", render::plan(&plan));
            print_policies(&policies);
            outln!("{}", render::plan_summary(&plan));
        }
    }
    if json {
        output::json(&views)?;
    }
    if format == PlanFormat::Markdown {
        out!("{}", markdown::render(&sections, max_chars));
    }
    Ok(if failed {
        exit::ERROR
    } else if !detailed {
        exit::OK
    } else if changes {
        exit::CHANGES
    } else if attention {
        exit::ATTENTION
    } else {
        exit::OK
    })
}

pub async fn apply(
    ctx: &Context,
    repo: &Path,
    only: Option<&str>,
    run: RunOptions,
) -> anyhow::Result<u8> {
    let Some(p) = prepare_or_report(ctx, repo) else {
        return Ok(exit::ERROR);
    };
    print_warnings(&p);
    let names = match clusters_to_run(repo, &p, only) {
        Ok(n) => n,
        Err(e) => {
            errln!("error: {e}");
            return Ok(exit::ERROR);
        }
    };
    let (cancel, signal) = watch_signals();
    let mut failed = false;
    let mut attention = false;
    for name in names {
        if *cancel.borrow() {
            outln!("Cluster {name}: not started (interrupted).");
            continue;
        }
        // One apply per cluster at a time: held until this cluster is done.
        let _lock = match p.clusters.get(&name).map(|c| apply_lock(ctx, repo, c)) {
            Some(Err(e)) => {
                outln!("Cluster {name}: {}", output::inline(&e));
                failed = true;
                continue;
            }
            Some(Ok(lock)) => lock,
            None => None,
        };
        // One run per cluster (plan and every apply pass): see `KindRegistry::for_run`.
        let kinds = ctx.kinds.for_run(p.kind_budget);
        let Some(mut planned) = plan_one(ctx, &kinds, repo, &p, &name, false, run).await else {
            failed = true;
            continue;
        };
        if let Err(e) = settle_inflight(&kinds, &p, &name, &mut planned, run).await {
            outln!("  cannot plan: {}", output::inline(&e));
            failed = true;
            continue;
        }
        let plan = &planned.plan;
        out!("{}", render::plan(plan));
        let policies = policy_report(&p, &name, plan);
        print_policies(&policies);
        outln!("{}", render::plan_summary(plan));
        let counts = plan.counts();
        if counts.errors > 0 {
            failed = true;
        }
        if policies.blocks() {
            outln!("Apply of cluster {name} blocked by policy; no change was made.");
            failed = true;
            continue;
        }
        if !plan.has_changes() {
            attention |= counts.anomalies + counts.pending > 0;
            continue;
        }
        let report = execute(&p, &name, &kinds, planned, cancel.clone()).await;
        match report {
            Ok(report) => {
                out!("{}", render::apply_summary(&report));
                failed |= !report.converged;
                attention |= !report.clean();
            }
            Err(e) => {
                outln!("  apply stopped: {e}");
                failed = true;
            }
        }
    }
    let signal = signal.load(std::sync::atomic::Ordering::SeqCst);
    Ok(if signal != 0 {
        signal
    } else if failed {
        exit::ERROR
    } else if attention {
        exit::ATTENTION
    } else {
        exit::OK
    })
}

/// Apply a cluster's plan (the apply lock held by the caller) with a progress bar or lines,
/// remembering failed stop-required changes; shared by `apply` and `watch --apply`.
pub(crate) async fn execute(
    p: &Prepared,
    name: &str,
    kinds: &proxops_reconcile::KindRegistry,
    planned: Planned,
    cancel: tokio::sync::watch::Receiver<bool>,
) -> Result<proxops_reconcile::ApplyReport, ObserveError> {
    let Planned {
        plan,
        conn,
        objects,
        memory,
    } = planned;
    let options = &p.clusters[name].options;
    let apply_options = ApplyOptions {
        limits: Limits {
            write_concurrency: options.write_concurrency,
            task_timeout: Duration::from_secs(options.task_timeout_seconds),
        },
        read_concurrency: options.read_concurrency,
        max_passes: options.max_passes,
        secrets: secrets_of(p, name),
        gate: Some(policy_gate(p)),
        memory: memory.clone(),
        cancel: Some(cancel),
    };
    let actions = plan.objects.iter().map(|o| o.proposal.actions.len()).sum();
    let progress = Arc::new(Progress::new(actions));
    let report = proxops_reconcile::apply(
        kinds,
        &conn.client,
        &objects,
        plan,
        apply_options,
        progress.clone(),
    )
    .await;
    if let Some(bar) = &progress.bar {
        bar.finish_and_clear();
    }
    if let Err(e) = memory.save() {
        errln!("warning: {e}");
    }
    drop(conn);
    report
}
