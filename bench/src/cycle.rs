//! One plan cycle as `proxops plan` runs it: load the repository, validate (kinds'
//! validate, references, identities), observe and plan the cluster.

use std::path::Path;
use std::time::{Duration, Instant};

use proxops_core::Diagnostic;
use proxops_reconcile::{ClusterPlan, KindRegistry, Object};

use crate::fixture::CLUSTER;

/// Load and validate the repository at `root`: the objects of the bench cluster and every
/// diagnostic.
pub fn validated(registry: &KindRegistry, root: &Path) -> (Vec<Object>, Vec<Diagnostic>) {
    let folders = registry.folders();
    let folders: Vec<&str> = folders.iter().map(String::as_str).collect();
    let (repo, mut diags) = proxops_core::load(root, &folders);
    let (catalog, mut more) =
        proxops_reconcile::validate_repo(registry, &repo, &proxops_reconcile::Secrets::default());
    diags.append(&mut more);
    let objects = catalog
        .objects
        .into_iter()
        .filter(|o| o.id.cluster == CLUSTER)
        .collect();
    (objects, diags)
}

/// Plan every object of the bench cluster (no secrets).
pub async fn plan_all(
    registry: &KindRegistry,
    client: &proxops_pve::Client,
    objects: &[proxops_reconcile::Object],
    read_concurrency: usize,
) -> Result<proxops_reconcile::ClusterPlan, proxops_reconcile::ObserveError> {
    let cycle = proxops_reconcile::Cycle {
        registry,
        client,
        cluster: CLUSTER,
        objects,
        read_concurrency,
        secrets: None,
    };
    proxops_reconcile::plan_cluster(&cycle, None).await
}

/// The timings and outcome of one plan cycle.
#[derive(Debug, Clone)]
pub struct PlanRun {
    /// Load + validate.
    pub validate: Duration,
    /// Observe + plan (`plan_cluster`).
    pub plan: Duration,
    pub objects: usize,
    pub actions: usize,
    pub drift: usize,
    pub errors: usize,
}

impl PlanRun {
    pub fn total(&self) -> Duration {
        self.validate + self.plan
    }

    /// A converged cluster plans nothing: no action, no drift, no error.
    pub fn is_noop(&self) -> bool {
        self.actions == 0 && self.drift == 0 && self.errors == 0
    }
}

/// Run one full plan cycle of the repository at `root` against `client`.
pub async fn plan_cycle(
    registry: &KindRegistry,
    client: &proxops_pve::Client,
    root: &Path,
) -> (PlanRun, ClusterPlan) {
    let t0 = Instant::now();
    let (objects, diags) = validated(registry, root);
    let errors: Vec<&Diagnostic> = diags.iter().filter(|d| d.is_error()).collect();
    assert!(
        errors.is_empty(),
        "the bench repository is valid: {errors:?}"
    );
    let validate = t0.elapsed();
    let (run, plan) = plan_objects(registry, client, &objects).await;
    (PlanRun { validate, ..run }, plan)
}

/// Observe and plan the validated `objects` of the bench cluster (no load, no validate: the
/// run's `validate` is zero).
pub async fn plan_objects(
    registry: &KindRegistry,
    client: &proxops_pve::Client,
    objects: &[Object],
) -> (PlanRun, ClusterPlan) {
    let t1 = Instant::now();
    let plan = plan_all(registry, client, objects, 16)
        .await
        .expect("plan the bench cluster");
    let planned = t1.elapsed();
    let counts = plan.counts();
    let run = PlanRun {
        validate: Duration::ZERO,
        plan: planned,
        objects: plan.objects.len(),
        actions: plan.objects.iter().map(|o| o.proposal.actions.len()).sum(),
        drift: plan.objects.iter().map(|o| o.proposal.drift.len()).sum(),
        errors: counts.errors,
    };
    (run, plan)
}
