//! Many clusters in one run, as one `proxops plan` or `apply` over several clusters works:
//! every cluster's repository is loaded and validated first (CPU work, on this thread), then
//! the clusters are observed and planned (and applied) concurrently, at most `concurrency`
//! at a time.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proxops_reconcile::execute::{Limits, Silent};
use proxops_reconcile::{ApplyOptions, KindRegistry};

use crate::cycle::{self, PlanRun};
use crate::fixture::Endpoint;

/// Plan every `(repository, endpoint)` with at most `concurrency` clusters at a time (each in
/// a run of its own, as the CLI gives each cluster); the wall time and each cluster's run,
/// in the order given.
pub async fn plan_clusters(
    registry: &KindRegistry,
    clusters: &[(PathBuf, Endpoint)],
    concurrency: usize,
) -> (Duration, Vec<PlanRun>) {
    let gate = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let started = Instant::now();
    let mut validated = Vec::new();
    for (repo, _) in clusters {
        let t = Instant::now();
        let (objects, diags) = cycle::validated(registry, repo);
        assert!(
            diags.iter().all(|d| !d.is_error()),
            "the bench repositories are valid: {diags:?}"
        );
        validated.push((objects, t.elapsed()));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (index, ((_, endpoint), (objects, validate))) in
        clusters.iter().cloned().zip(validated).enumerate()
    {
        let kinds = registry.for_run(None);
        let gate = gate.clone();
        tasks.spawn(async move {
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
    for (repo, endpoint) in clusters {
        let (objects, diags) = cycle::validated(registry, repo);
        assert!(
            diags.iter().all(|d| !d.is_error()),
            "the bench repositories are valid: {diags:?}"
        );
        let kinds = registry.for_run(None);
        let gate = gate.clone();
        let (repo, endpoint) = (repo.clone(), endpoint.clone());
        tasks.spawn(async move {
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
                read_concurrency: 16,
                max_passes: 8,
                memory: Arc::new(proxops_reconcile::memory::StopMemory::in_memory()),
                cancel: None,
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
