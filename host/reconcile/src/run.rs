//! One cluster's cycle between its plan and its first write: the rules every caller (`plan`,
//! `apply`, `watch`, the library's own users) must apply, in one place. The hold-backs (failed
//! stop-required changes, the mass-prune guard) shape every plan, the first and the re-plans;
//! the policies judge the manifests and the first plan, and gate every later pass.

use std::sync::Arc;

use crate::apply::Gate;
use crate::memory::StopMemory;
use crate::plan::ClusterPlan;
use crate::policy::{PolicyReport, PolicySet};
use crate::validate::ClusterInputs;

/// What the operator allows beyond the default hold-backs of a plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holds {
    /// Prune even when more than [`PRUNE_GUARD`] guests (or every guest of a cluster with no
    /// manifests) would go: at most this many (`--allow-prune`).
    pub allow_prune: Option<usize>,
    /// Stop guests again for stop-required changes that failed in an earlier run
    /// (`--retry-stop-required`).
    pub retry_stop_required: bool,
}

/// The hold-backs of every plan of a cluster with `manifests` objects: stop-required changes
/// that failed before (unless retried), then the mass-prune guard.
pub fn hold_back(plan: &mut ClusterPlan, memory: &StopMemory, manifests: usize, holds: Holds) {
    memory.hold_back(plan, holds.retry_stop_required);
    guard_prune(plan, manifests, holds.allow_prune);
}

/// More deletes than this in one cluster need `--allow-prune`.
pub const PRUNE_GUARD: usize = 5;

/// The mass-prune guard: a cluster with no manifests, or a plan that deletes more than
/// [`PRUNE_GUARD`] guests, prunes nothing unless `--allow-prune` covers every delete. The held
/// back deletes become anomalies saying why.
pub fn guard_prune(plan: &mut ClusterPlan, manifests: usize, allow: Option<usize>) {
    use proxops_runtime::kind::Anomaly;
    let deletes: usize = plan
        .objects
        .iter()
        .flat_map(|o| &o.proposal.actions)
        .filter(|a| crate::request::target::removes_guest(a))
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
            .retain(|a| !crate::request::target::removes_guest(a));
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

/// What the policies say about a cluster's manifests and plan.
pub fn policy_report(
    policies: &PolicySet,
    cluster: &str,
    inputs: &ClusterInputs,
    plan: &ClusterPlan,
) -> PolicyReport {
    let mut report = policies.check_manifests(cluster, &inputs.manifests);
    report.extend(policies.check_plan(plan, &inputs.manifests));
    report
}

/// The policy check of every later pass of an apply (clone -> configure -> start plans
/// actions the first plan did not show): a blocking finding stops the apply. The manifests
/// were checked before the first pass and do not change, so only the new plan is checked.
pub fn policy_gate(policies: Arc<PolicySet>, inputs: Arc<ClusterInputs>) -> Gate {
    Arc::new(move |plan: &ClusterPlan| {
        let report = policies.check_plan(plan, &inputs.manifests);
        report.blocks().then(|| report.lines().join("; "))
    })
}
