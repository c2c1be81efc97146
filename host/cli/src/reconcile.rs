//! `proxops plan`, `apply` and `graph`.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proxops_core::{ClusterFile, Diagnostic};
use proxops_reconcile::execute::Limits;
use proxops_reconcile::{
    ApplyOptions, Catalog, ClusterPlan, Event, Object, ObserveError, Reporter,
};

use proxops_reconcile::policy::{PolicyReport, PolicySet};

use crate::context::Context;
use crate::secrets::LazySops;
use crate::{exit, render, validate};

/// What `plan` and `apply` share: the validated repository, split by cluster.
struct Prepared {
    clusters: BTreeMap<String, ClusterFile>,
    manifests: Vec<proxops_core::Manifest>,
    catalog: Catalog,
    diags: Vec<Diagnostic>,
    sops: BTreeMap<String, Arc<LazySops>>,
    policies: Arc<PolicySet>,
}

/// Load, validate and load the site policies. An invalid `proxops.yaml` or policy stops the
/// whole run before any cluster is touched: the diagnostics are returned.
fn prepare(ctx: &Context, repo: &Path) -> Result<Prepared, Vec<Diagnostic>> {
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
    })
}

/// `prepare`, printing why it failed.
fn prepare_or_report(ctx: &Context, repo: &Path) -> Option<Prepared> {
    match prepare(ctx, repo) {
        Ok(p) => Some(p),
        Err(diags) => {
            eprintln!("not run: the site policies cannot be loaded (no cluster was contacted):");
            for d in diags {
                eprintln!("  {d}");
            }
            None
        }
    }
}

fn print_policies(report: &PolicyReport) {
    let lines = report.lines();
    if !lines.is_empty() {
        println!("Policies:");
        for line in lines {
            println!("  {line}");
        }
    }
}

/// What the policies say about a cluster's manifests and plan.
fn policy_report(p: &Prepared, cluster: &str, plan: &ClusterPlan) -> PolicyReport {
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
fn selected(p: &Prepared, only: Option<&str>) -> Vec<String> {
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
    names.retain(|n| only.is_none_or(|o| o == n));
    names
}

fn objects_of(catalog: &Catalog, cluster: &str) -> Vec<Object> {
    catalog
        .objects
        .iter()
        .filter(|o| o.cluster == cluster)
        .cloned()
        .collect()
}

/// A line for the human: stdout, or stderr when stdout carries JSON.
fn say(quiet: bool, line: String) {
    if quiet {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}

fn print_warnings(p: &Prepared) {
    for d in p.diags.iter().filter(|d| !d.is_error()) {
        eprintln!("{d}");
    }
}

/// Observe and plan one cluster; `None` (with the reason printed) when it cannot be.
async fn plan_one(
    ctx: &Context,
    repo: &Path,
    p: &Prepared,
    name: &str,
    quiet: bool,
) -> Option<(ClusterPlan, crate::connect::Connection, Vec<Object>)> {
    let errors = cluster_errors(p, name);
    if !errors.is_empty() {
        say(
            quiet,
            format!("Cluster {name}: not planned; fix these first (no PVE call was made):"),
        );
        for d in &errors {
            say(quiet, format!("  {d}"));
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
    match proxops_reconcile::plan_cluster(
        &ctx.kinds,
        &conn.client,
        name,
        &objects,
        cluster.options.read_concurrency,
        None,
        secrets_of(p, name),
    )
    .await
    {
        Ok(plan) => Some((plan, conn, objects)),
        Err(ObserveError::Conflicts(diags)) => {
            say(
                quiet,
                "  not planned: manifests conflict with live PVE objects (no change was made):"
                    .to_string(),
            );
            for d in &diags {
                say(quiet, format!("  {d}"));
            }
            None
        }
        Err(e) => {
            say(quiet, format!("  cannot plan: {e}"));
            None
        }
    }
}

pub async fn plan(
    ctx: &Context,
    repo: &Path,
    only: Option<&str>,
    json: bool,
    detailed: bool,
) -> anyhow::Result<u8> {
    let Some(p) = prepare_or_report(ctx, repo) else {
        return Ok(exit::ERROR);
    };
    print_warnings(&p);
    let mut failed = false;
    let mut changes = false;
    let mut views = Vec::new();
    for name in selected(&p, only) {
        let Some((plan, _conn, _)) = plan_one(ctx, repo, &p, &name, json).await else {
            failed = true;
            continue;
        };
        changes |= plan.has_changes();
        failed |= plan.counts().errors > 0;
        let policies = policy_report(&p, &name, &plan);
        // A plan that enforce-mode policies deny cannot be applied: plan says so with exit 1.
        failed |= policies.blocks();
        if json {
            let mut view = serde_json::to_value(plan.view())?;
            view["policies"] = policies.json();
            views.push(view);
        } else {
            print!("{}", render::plan(&plan));
            print_policies(&policies);
            println!("{}", render::plan_summary(&plan));
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&views)?);
    }
    Ok(if failed {
        exit::ERROR
    } else if detailed && changes {
        exit::CHANGES
    } else {
        exit::OK
    })
}

/// Progress: a bar on a terminal, plain lines otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(actions: usize) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(actions as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{bar:30}] {pos}/{len} {wide_msg}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Progress { bar }
    }
}

impl Reporter for Progress {
    fn event(&self, event: Event) {
        let line = match &event {
            Event::Pass { pass, actions } => format!("pass {pass}: {actions} actions"),
            Event::ActionStarted { object, summary } => {
                format!("… {} {}: {summary}", object.kind, object.name)
            }
            Event::ActionDone {
                object,
                summary,
                error: None,
            } => format!("✓ {} {}: {summary}", object.kind, object.name),
            Event::ActionDone {
                object,
                summary,
                error: Some(e),
            } => format!("✗ {} {}: {summary}: {e}", object.kind, object.name),
            Event::Blocked { object, by } => format!(
                "✗ {} {}: not attempted, {by} did not converge",
                object.kind, object.name
            ),
        };
        match &self.bar {
            Some(bar) => {
                if let Event::Pass { actions, .. } = event {
                    bar.set_length(actions as u64);
                    bar.set_position(0);
                }
                if matches!(event, Event::ActionDone { .. }) {
                    bar.inc(1);
                }
                if matches!(event, Event::ActionStarted { .. }) {
                    bar.set_message(line);
                } else {
                    bar.println(line);
                }
            }
            None => {
                if !matches!(event, Event::ActionStarted { .. }) {
                    println!("  {line}");
                }
            }
        }
    }
}

pub async fn apply(ctx: &Context, repo: &Path, only: Option<&str>) -> anyhow::Result<u8> {
    let Some(p) = prepare_or_report(ctx, repo) else {
        return Ok(exit::ERROR);
    };
    print_warnings(&p);
    let mut failed = false;
    for name in selected(&p, only) {
        let Some((plan, conn, objects)) = plan_one(ctx, repo, &p, &name, false).await else {
            failed = true;
            continue;
        };
        print!("{}", render::plan(&plan));
        let policies = policy_report(&p, &name, &plan);
        print_policies(&policies);
        println!("{}", render::plan_summary(&plan));
        if plan.counts().errors > 0 {
            failed = true;
        }
        if policies.blocks() {
            println!("Apply of cluster {name} blocked by policy; no change was made.");
            failed = true;
            continue;
        }
        if !plan.has_changes() {
            continue;
        }
        let options = &p.clusters[&name].options;
        let apply_options = ApplyOptions {
            limits: Limits {
                write_concurrency: options.write_concurrency,
                task_timeout: Duration::from_secs(options.task_timeout_seconds),
            },
            read_concurrency: options.read_concurrency,
            max_passes: options.max_passes,
            secrets: secrets_of(&p, &name),
            gate: Some(policy_gate(&p)),
        };
        let actions = plan.objects.iter().map(|o| o.proposal.actions.len()).sum();
        let progress = Arc::new(Progress::new(actions));
        let report = proxops_reconcile::apply(
            &ctx.kinds,
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
        match report {
            Ok(report) => {
                print!("{}", render::apply_summary(&report));
                failed |= !report.converged;
            }
            Err(e) => {
                println!("  apply stopped: {e}");
                failed = true;
            }
        }
        drop(conn);
    }
    Ok(if failed { exit::ERROR } else { exit::OK })
}

/// Output format of `proxops graph`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum GraphFormat {
    Dot,
    Mermaid,
}

pub fn graph(ctx: &Context, repo: &Path, format: GraphFormat) -> anyhow::Result<u8> {
    let Some(p) = prepare_or_report(ctx, repo) else {
        return Ok(exit::ERROR);
    };
    let errors: Vec<&Diagnostic> = p.diags.iter().filter(|d| d.is_error()).collect();
    if !errors.is_empty() {
        for d in errors {
            eprintln!("{d}");
        }
        return Ok(exit::ERROR);
    }
    let id = |cluster: &str, kind: &str, name: &str| format!("{cluster}/{kind}/{name}");
    let mut out = String::new();
    match format {
        GraphFormat::Dot => out.push_str("digraph proxops {\n  rankdir=LR;\n"),
        GraphFormat::Mermaid => out.push_str("flowchart LR\n"),
    }
    let mut index = BTreeMap::new();
    for (i, o) in p.catalog.objects.iter().enumerate() {
        let node = id(&o.cluster, &o.kind_name, &o.name);
        index.insert(node.clone(), i);
        match format {
            GraphFormat::Dot => out.push_str(&format!(
                "  \"{node}\" [label=\"{} {}\\n{}\"];\n",
                o.kind_name, o.name, o.cluster
            )),
            GraphFormat::Mermaid => out.push_str(&format!(
                "  n{i}[\"{} {} ({})\"]\n",
                o.kind_name, o.name, o.cluster
            )),
        }
    }
    for (i, o) in p.catalog.objects.iter().enumerate() {
        for r in &o.references {
            let target = id(&o.cluster, &r.kind, &r.name);
            match format {
                GraphFormat::Dot => out.push_str(&format!(
                    "  \"{target}\" -> \"{}\" [label=\"{}\"];\n",
                    id(&o.cluster, &o.kind_name, &o.name),
                    r.path
                )),
                GraphFormat::Mermaid => {
                    if let Some(t) = index.get(&target) {
                        out.push_str(&format!("  n{t} -->|{}| n{i}\n", r.path));
                    }
                }
            }
        }
    }
    if let GraphFormat::Dot = format {
        out.push_str("}\n");
    }
    print!("{out}");
    Ok(exit::OK)
}
