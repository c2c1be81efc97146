//! One plan cycle as `proxops plan` runs it: load the repository, validate (kinds'
//! validate, references, identities), observe and plan the cluster.

use std::path::Path;
use std::time::{Duration, Instant};

use proxops_core::Diagnostic;
use proxops_reconcile::{ClusterPlan, KindRegistry, Memo, Object};

use crate::fixture::CLUSTER;

/// Load and validate the repository at `root`: the objects of the bench cluster and every
/// diagnostic.
pub fn validated(registry: &KindRegistry, root: &Path) -> (Vec<Object>, Vec<Diagnostic>) {
    validated_with(registry, root, None)
}

/// [`validated`] as `proxops plan` does it: the layout, then the bench cluster's manifests,
/// with the repository's memo of earlier runs when one is given (saved afterwards).
pub fn validated_with(
    registry: &KindRegistry,
    root: &Path,
    memo: Option<&Memo>,
) -> (Vec<Object>, Vec<Diagnostic>) {
    let folders = registry.folders();
    let folders: Vec<&str> = folders.iter().map(String::as_str).collect();
    let (layout, mut diags) = proxops_core::load_layout(root, root, &folders);
    let layout = layout.expect("the bench repository has a layout");
    let inputs = proxops_reconcile::validate_cluster(
        registry,
        &layout,
        CLUSTER,
        &proxops_reconcile::Secrets::default(),
        memo,
    );
    if let Some(memo) = memo {
        memo.save();
    }
    diags.extend(inputs.diags);
    (inputs.objects, diags)
}

/// Plan every object of the bench cluster (no secrets), `read_concurrency` reads at once (0:
/// the engine's default, `READS_PER_NODE` per node).
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
        read_concurrency: Some(read_concurrency).filter(|n| *n > 0),
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

/// Run one full plan cycle of the repository at `root` against `client`; with `memo_in`, as
/// `proxops plan` runs it: with the repository's memo of earlier runs kept in that cache
/// folder (opening, reading and saving it are part of the cycle).
pub async fn plan_cycle(
    registry: &KindRegistry,
    client: &proxops_pve::Client,
    root: &Path,
    memo_in: Option<&Path>,
) -> (PlanRun, ClusterPlan) {
    plan_cycle_at(registry, client, root, memo_in, 16).await
}

/// [`plan_cycle`] with `read_concurrency` reads at a time (a cluster's `read-concurrency`).
pub async fn plan_cycle_at(
    registry: &KindRegistry,
    client: &proxops_pve::Client,
    root: &Path,
    memo_in: Option<&Path>,
    read_concurrency: usize,
) -> (PlanRun, ClusterPlan) {
    let t0 = Instant::now();
    let memo = memo_in.map(|dir| Memo::open(dir, root, root));
    let (objects, diags) = validated_with(registry, root, memo.as_ref());
    let errors: Vec<&Diagnostic> = diags.iter().filter(|d| d.is_error()).collect();
    assert!(
        errors.is_empty(),
        "the bench repository is valid: {errors:?}"
    );
    let validate = t0.elapsed();
    let (run, plan) = plan_objects_at(registry, client, &objects, read_concurrency).await;
    (PlanRun { validate, ..run }, plan)
}

/// Observe and plan the validated `objects` of the bench cluster (no load, no validate: the
/// run's `validate` is zero).
pub async fn plan_objects(
    registry: &KindRegistry,
    client: &proxops_pve::Client,
    objects: &[Object],
) -> (PlanRun, ClusterPlan) {
    plan_objects_at(registry, client, objects, 16).await
}

async fn plan_objects_at(
    registry: &KindRegistry,
    client: &proxops_pve::Client,
    objects: &[Object],
    read_concurrency: usize,
) -> (PlanRun, ClusterPlan) {
    let t1 = Instant::now();
    let plan = plan_all(registry, client, objects, read_concurrency)
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
