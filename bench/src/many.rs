//! Many clusters in one run, as one `proxops plan` or `apply` over several clusters works:
//! the clusters are loaded and validated one after the other on a thread of their own
//! (`proxops_reconcile::validate_in_order`, the CLI's pipeline), and each is observed and
//! planned (and applied) as soon as its manifests are ready, at most `concurrency` at a time.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proxops_reconcile::execute::{Limits, Silent};
use proxops_reconcile::{ApplyOptions, ClusterInputs, KindRegistry, Object, Secrets};

use crate::cycle::{self, PlanRun};
use crate::fixture::{CLUSTER, Endpoint};

/// Each repository's cluster, validated in order on a thread of its own: one receiver per
/// repository, ready as soon as that cluster is.
fn validating(
    registry: &KindRegistry,
    clusters: &[(PathBuf, Endpoint)],
) -> Vec<tokio::sync::oneshot::Receiver<ClusterInputs>> {
    let folders = registry.folders();
    let folders: Vec<&str> = folders.iter().map(String::as_str).collect();
    let layouts = clusters
        .iter()
        .map(|(repo, _)| {
            let (layout, diags) = proxops_core::load_layout(repo, repo, &folders);
            assert!(
                diags.iter().all(|d| !d.is_error()),
                "the bench repositories are valid: {diags:?}"
            );
            (
                Arc::new(layout.expect("the bench repository opens")),
                CLUSTER.to_string(),
            )
        })
        .collect();
    proxops_reconcile::validate_in_order(registry.clone(), Secrets::default(), layouts, None)
}

/// A cluster's validated objects; panics on any error (the bench repositories are valid).
async fn objects_of(inputs: tokio::sync::oneshot::Receiver<ClusterInputs>) -> Vec<Object> {
    let inputs = inputs.await.expect("the cluster is validated");
    assert!(
        inputs.diags.iter().all(|d| !d.is_error()),
        "the bench repositories are valid: {:?}",
        inputs.diags
    );
    inputs.objects
}

/// Plan every `(repository, endpoint)` with at most `concurrency` clusters at a time (each in
/// a run of its own, as the CLI gives each cluster), each as soon as its manifests are
/// validated; the wall time and each cluster's run, in the order given (its `validate` is
/// the time from the start until its manifests were ready).
pub async fn plan_clusters(
    registry: &KindRegistry,
    clusters: &[(PathBuf, Endpoint)],
    concurrency: usize,
) -> (Duration, Vec<PlanRun>) {
    let gate = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (index, ((_, endpoint), inputs)) in clusters
        .iter()
        .cloned()
        .zip(validating(registry, clusters))
        .enumerate()
    {
        let kinds = registry.for_run(None);
        let gate = gate.clone();
        tasks.spawn(async move {
            let objects = objects_of(inputs).await;
            let validate = started.elapsed();
            let _permit = gate
                .acquire_owned()
                .await
                .expect("the gate is never closed");
            let client = endpoint.client();
            let (run, _) = cycle::plan_objects(&kinds, &client, &objects).await;
            (index, PlanRun { validate, ..run })
        });
    }
    let mut runs: Vec<Option<PlanRun>> = vec![None; clusters.len()];
    while let Some(done) = tasks.join_next().await {
        let (index, run) = done.expect("a cluster's plan task");
        runs[index] = Some(run);
    }
    let wall = started.elapsed();
    (
        wall,
        runs.into_iter()
            .map(|r| r.expect("every cluster planned"))
            .collect(),
    )
}

/// Apply every `(repository, endpoint)` with at most `concurrency` clusters at a time: plan,
/// then apply until converged, each cluster on its own. The wall time; panics when a cluster
/// does not converge (the figure would mean nothing).
pub async fn apply_clusters(
    registry: &KindRegistry,
    clusters: &[(PathBuf, Endpoint)],
    concurrency: usize,
    write_concurrency: usize,
) -> Duration {
    let gate = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for ((repo, endpoint), inputs) in clusters.iter().zip(validating(registry, clusters)) {
        let kinds = registry.for_run(None);
        let gate = gate.clone();
        let (repo, endpoint) = (repo.clone(), endpoint.clone());
        tasks.spawn(async move {
            let objects = objects_of(inputs).await;
            let _permit = gate
                .acquire_owned()
                .await
                .expect("the gate is never closed");
            let client = endpoint.client();
            let plan = cycle::plan_all(&kinds, &client, &objects, 16)
                .await
                .expect("plan");
            let options = ApplyOptions {
                gate: None,
                limits: Limits {
                    write_concurrency,
                    task_timeout: Duration::from_secs(120),
                },
                secrets: None,
                read_concurrency: Some(16),
                max_passes: 8,
                memory: Arc::new(proxops_reconcile::memory::StopMemory::in_memory()),
                cancel: None,
                rollout: None,
            };
            let report = proxops_reconcile::apply(
                &kinds,
                &client,
                &objects,
                plan,
                options,
                Arc::new(Silent),
            )
            .await
            .expect("apply");
            assert!(report.converged, "{} converges", repo.display());
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a cluster's apply task");
    }
    started.elapsed()
}
