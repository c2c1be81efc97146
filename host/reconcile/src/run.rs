//! One cluster's cycle ([`ClusterRun`]): plan, settle, check, apply, outcome, with the rules
//! every caller (`plan`, `apply`, `watch`, the library's own users) must apply, in one place.
//! The hold-backs (failed stop-required changes, the mass-prune guard) shape every plan, the
//! first and the re-plans; the policies judge the manifests and the first plan, and gate every
//! later pass.

use std::sync::Arc;

use proxops_pve::Client;
use proxops_runtime::SecretSource;

use crate::apply::{ApplyOptions, ApplyReport, Gate};
use crate::execute::{Cancel, Limits, Reporter};
use crate::memory::StopMemory;
use crate::observe::{Cycle, ObserveError, plan_cluster};
use crate::plan::ClusterPlan;
use crate::policy::{PolicyReport, PolicySet};
use crate::registry::KindRegistry;
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

/// The settings of a cluster's run the engine reads (its cluster file's `options`).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Reads at once; `None`: `proxops_core::cluster::READS_PER_NODE` per node.
    pub read_concurrency: Option<usize>,
    pub write_concurrency: usize,
    /// How long a task may run, and how long work an earlier run left in flight is waited for.
    pub task_timeout: std::time::Duration,
    pub max_passes: u32,
}

/// One cluster's cycle, in typed stages, for every caller (`plan`, `apply` and `watch` in the
/// CLI only render its events and map its [`Outcome`] to an exit code):
/// [`plan`](ClusterRun::plan) (with the hold-backs), [`settle`](ClusterRun::settle) (work a
/// killed run left in flight), [`check`](ClusterRun::check) (the policies),
/// [`apply`](ClusterRun::apply) (passes, each re-plan gated by the policies), and
/// [`Outcome::of`] (one classifier).
#[derive(Clone)]
pub struct ClusterRun {
    /// This run's kinds (`KindRegistry::for_run`: one budget for the plan and every pass).
    pub kinds: KindRegistry,
    pub client: Client,
    pub cluster: String,
    pub inputs: Arc<ClusterInputs>,
    pub settings: Settings,
    /// The cluster's secrets, for the kinds granted them.
    pub secrets: Option<Arc<dyn SecretSource>>,
    /// Failed stop-required changes, remembered across runs.
    pub memory: Arc<StopMemory>,
    pub policies: Arc<PolicySet>,
    pub holds: Holds,
    /// The cluster's disruption budgets (`Rollout::default()`: none).
    pub rollout: Arc<crate::rollout::Rollout>,
}

/// A plan the policies have judged (the manifests and the plan).
#[derive(Debug)]
pub enum Checked {
    /// Nothing blocks it; `report` holds the warnings, if any.
    Passed {
        plan: ClusterPlan,
        report: PolicyReport,
    },
    /// An enforce-mode deny (or a failed policy): nothing of it may be applied.
    Blocked {
        plan: ClusterPlan,
        report: PolicyReport,
    },
}

impl Checked {
    pub fn plan(&self) -> &ClusterPlan {
        match self {
            Checked::Passed { plan, .. } | Checked::Blocked { plan, .. } => plan,
        }
    }

    pub fn report(&self) -> &PolicyReport {
        match self {
            Checked::Passed { report, .. } | Checked::Blocked { report, .. } => report,
        }
    }
}

impl ClusterRun {
    fn cycle(&self) -> Cycle<'_> {
        Cycle {
            registry: &self.kinds,
            client: &self.client,
            cluster: &self.cluster,
            objects: &self.inputs.objects,
            read_concurrency: self.settings.read_concurrency,
            secrets: self.secrets.clone(),
        }
    }

    /// Observe and plan the cluster, with the hold-backs of every plan.
    pub async fn plan(&self) -> Result<ClusterPlan, ObserveError> {
        let mut plan = plan_cluster(&self.cycle(), None).await?;
        self.rollout.add_reboots(&mut plan, &self.kinds);
        hold_back(
            &mut plan,
            &self.memory,
            self.inputs.objects.len(),
            self.holds,
        );
        self.rollout.hold_back(&mut plan, &[]);
        plan.rollout = self.rollout.waves(&plan);
        Ok(plan)
    }

    /// Work an earlier run left in flight (a killed apply's create, clone or download task):
    /// wait for it (bounded by the task timeout) and plan again, or hold back the objects it
    /// may concern ([`crate::inflight`]). `waiting` hears of each task before the wait,
    /// `waited` of each that ended (`type id on node: exit`), before the plan is made again.
    pub async fn settle(
        &self,
        plan: &mut ClusterPlan,
        waiting: &(dyn Fn(&str) + Sync),
        waited: &dyn Fn(&str),
    ) -> Result<(), String> {
        let settled =
            crate::inflight::settle(&self.client, plan, self.settings.task_timeout, waiting)
                .await
                .map_err(|e| e.to_string())?;
        for task in &settled.waited {
            waited(task);
        }
        let held: Vec<(crate::plan::ObjectRef, String)> = settled
            .running
            .iter()
            .map(|(i, why)| (plan.objects[*i].object.clone(), why.clone()))
            .collect();
        if settled.replan() {
            *plan = self.plan().await.map_err(|e| e.to_string())?;
        }
        for (object, why) in held {
            if let Some(o) = plan
                .objects
                .iter_mut()
                .find(|o| o.object.id == object.id && o.object.file == object.file)
            {
                o.error = Some(crate::error::PlanError::InFlight(why));
            }
        }
        Ok(())
    }

    /// The policies' judgement of the manifests and `plan`.
    pub fn check(&self, plan: ClusterPlan) -> Checked {
        let report = policy_report(&self.policies, &self.cluster, &self.inputs, &plan);
        if report.blocks() {
            Checked::Blocked { plan, report }
        } else {
            Checked::Passed { plan, report }
        }
    }

    /// Apply a checked plan: passes of the executor, each later pass re-planned and gated by
    /// the policies; `reporter` hears every event, `cancel` stops new actions.
    pub async fn apply(
        &self,
        plan: ClusterPlan,
        reporter: Arc<dyn Reporter>,
        cancel: Option<Cancel>,
    ) -> Result<ApplyReport, ObserveError> {
        let options = ApplyOptions {
            limits: Limits {
                write_concurrency: self.settings.write_concurrency,
                task_timeout: self.settings.task_timeout,
            },
            read_concurrency: self.settings.read_concurrency,
            max_passes: self.settings.max_passes,
            secrets: self.secrets.clone(),
            gate: Some(policy_gate(self.policies.clone(), self.inputs.clone())),
            memory: self.memory.clone(),
            cancel,
            rollout: (!self.rollout.is_empty()).then(|| self.rollout.clone()),
        };
        crate::apply(
            &self.kinds,
            &self.client,
            &self.inputs.objects,
            plan,
            options,
            reporter,
        )
        .await
    }

    /// Keep what this run learnt about failed stop-required changes; only under the apply
    /// lock, so two writers never race.
    pub fn save_memory(&self) -> Result<(), String> {
        self.memory.save().map_err(|e| e.to_string())
    }
}

/// How one cluster's run ended, from the least to the most serious.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// The cluster matches its manifests.
    Clean,
    /// Nothing to apply, but something needs a human: an anomaly, a pending change, or an
    /// apply that converged with either left.
    NeedsHuman,
    /// A plan with changes (not applied).
    Changes,
    /// An object could not be planned, the policies block, or an apply did not converge.
    Failed,
}

impl Outcome {
    /// The one classifier: `plan` is the plan shown (the first plan of an apply, or the last
    /// one of a `watch` cycle that applied), `report` the policies' report on it, `applied`
    /// the apply's report when it ran.
    pub fn of(plan: &ClusterPlan, report: &PolicyReport, applied: Option<&ApplyReport>) -> Outcome {
        let counts = plan.counts();
        let failed = counts.errors > 0 || report.blocks() || applied.is_some_and(|a| !a.converged);
        if failed {
            Outcome::Failed
        } else if applied.is_none() && plan.has_changes() {
            Outcome::Changes
        } else if applied.map_or(counts.anomalies + counts.pending > 0, |a| !a.clean()) {
            Outcome::NeedsHuman
        } else {
            Outcome::Clean
        }
    }
}
