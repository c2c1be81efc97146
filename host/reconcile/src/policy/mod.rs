//! Site policies: the `.wasm` components listed in `proxops.yaml`, loaded once per run and
//! asked about every cluster's manifests and plan.
//!
//! Loading is all-or-nothing and happens before any cluster is touched: each file is read
//! inside the repository, its SHA-256 is compared with the pinned one *before* it is compiled,
//! and its settings are checked against the policy's JSON Schema and then by its own
//! `validate-settings`. Every problem is reported as a located [`Diagnostic`](proxops_core::Diagnostic) on
//! `proxops.yaml`.
//!
//! Evaluation uses a fresh instance per call (policies are third-party code). What a policy
//! sees: manifests as written (they hold SOPS references such as `ci-password-ref`, never
//! secret values) and the planned actions with every sensitive wire value replaced by
//! `(sensitive)`. A call that traps, runs out of time or memory, or uses up the policy's
//! budget for the run counts as a deny with the reason: in enforce mode it blocks the
//! cluster (fail closed).
//!
//! Fail fast: a run is one cycle of one cluster. A policy that failed in a run is not called
//! again in it (30 manifests and a looping policy cost one deadline, not 30), and the
//! cluster's report carries one failure finding per policy.
//!
//! One evaluation path: `proxops policy test` and plan/apply both go through
//! [`PolicySet::check_manifest_inputs`] and [`PolicySet::check_actions`] (plan/apply by way
//! of [`PolicySet::check_manifests`] and [`PolicySet::check_plan`]), and every guest call in
//! them through one private `PolicySet::call`.

mod check;
mod load;
mod plan_json;
mod report;
pub mod schema;
#[cfg(test)]
mod tests;

pub use check::{ManifestInput, PlannedAction};
pub use load::LoadedPolicy;
pub use plan_json::actions_from_plan_json;
pub use report::{Finding, FindingObject, PolicyReport, Severity, Stage};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proxops_runtime::policy::{ActionView, ManifestView, PolicyInstance, Verdict};
use proxops_runtime::{GuestError, GuestRun};

/// One guest call of a policy, in a fresh instance.
enum Check<'a> {
    Manifest(&'a ManifestView),
    Plan(&'a [ActionView]),
}

/// The policies of a process, and each policy's run per cluster.
#[derive(Debug, Clone, Default)]
pub struct PolicySet {
    policies: Vec<LoadedPolicy>,
    /// The time each policy's calls may take per cluster (`None`: unbounded).
    budget: Option<Duration>,
    /// (policy index, cluster) -> that run's state; shared by clones.
    runs: Arc<Mutex<RunsByCluster>>,
}

/// Each policy's run per cluster, by (policy index, cluster).
type RunsByCluster = HashMap<(usize, String), Arc<GuestRun>>;

impl PolicySet {
    /// No policies: every check allows.
    pub fn empty() -> PolicySet {
        PolicySet::default()
    }

    /// `policies`, each with `budget` per cluster.
    pub fn from_policies(policies: Vec<LoadedPolicy>, budget: Option<Duration>) -> PolicySet {
        PolicySet {
            policies,
            budget,
            runs: Arc::default(),
        }
    }

    /// The run of policy `index` in `cluster`, created on first use.
    pub fn run(&self, index: usize, cluster: &str) -> Arc<GuestRun> {
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        runs.entry((index, cluster.to_string()))
            .or_insert_with(|| GuestRun::new(self.budget))
            .clone()
    }

    /// The one place a policy is called, for plan/apply and `policy test` alike: a fresh
    /// instance in the policy's run for `cluster` (refused at once when the policy already
    /// failed there).
    fn call(&self, index: usize, cluster: &str, check: Check<'_>) -> Result<Verdict, GuestError> {
        let p = &self.policies[index];
        let mut instance: PolicyInstance = p.component.instance_in(&self.run(index, cluster))?;
        match check {
            Check::Manifest(view) => instance.check_manifest(view, &p.settings),
            Check::Plan(actions) => instance.check_plan(actions, &p.settings),
        }
    }

    pub fn policies(&self) -> &[LoadedPolicy] {
        &self.policies
    }

    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }
}
