//! Apply: plan, execute, observe the touched objects again and plan again, until nothing is
//! left to do or the pass limit is reached (this is how clone -> configure -> start completes).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use proxops_pve::Client;
use proxops_runtime::SecretSource;
use proxops_runtime::kind::{Anomaly, Operation};

use proxops_core::ObjectId;

use crate::error::{ActionError, PlanError, STALE_AGAIN};
use crate::execute::{Cancel, Event, Limits, Outcome, Reporter, Status, execute};
use crate::memory::StopMemory;
use crate::observe::{Cycle, ObserveError, plan_cluster};
use crate::plan::{ClusterPlan, ObjectPlan, ObjectRef};
use crate::registry::KindRegistry;
use crate::validate::Object;

/// What an apply did to one object, over all passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Did {
    pub created: bool,
    pub updated: bool,
    pub deleted: bool,
    pub started: bool,
    pub stopped: bool,
}

impl Did {
    fn note(&mut self, action: &proxops_runtime::kind::Action) {
        match &action.operation {
            Operation::Create => self.created = true,
            Operation::Delete => self.deleted = true,
            op if op.is_power() => {
                let to = action
                    .changes
                    .iter()
                    .find(|c| c.key == "status")
                    .and_then(|c| c.new.as_deref());
                if to == Some("running") {
                    self.started = true;
                } else {
                    self.stopped = true;
                }
            }
            // Any other change, kind-specific steps (`mark-template`) included.
            Operation::Update | Operation::Step(_) => self.updated = true,
        }
    }

    pub fn any(&self) -> bool {
        *self != Did::default()
    }
}

/// Counts of an apply by outcome; an object counts once, by what mattered most (a VM created,
/// configured and started in one apply is "created").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct OutcomeCounts {
    pub created: usize,
    pub updated: usize,
    pub deleted: usize,
    pub started: usize,
    pub stopped: usize,
    pub failed: usize,
    pub blocked: usize,
}

/// One object's result over the whole apply.
#[derive(Debug, Clone)]
pub struct ObjectOutcome {
    pub object: ObjectRef,
    /// How its last pass ended.
    pub status: Status,
    /// What it changed, over all passes (also when a later action failed).
    pub did: Did,
}

/// The result of an apply.
#[derive(Debug, Clone)]
pub struct ApplyReport {
    /// The first plan (what was intended).
    pub initial: ClusterPlan,
    /// The state after the last pass (drift, pending and anomalies left).
    pub last: ClusterPlan,
    /// Objects whose actions ran, and how they ended.
    pub outcomes: Vec<ObjectOutcome>,
    pub passes: u32,
    /// Nothing is left to do.
    pub converged: bool,
    /// Why a later pass was not run (a policy denied its plan, or the run was interrupted).
    pub stopped: Option<String>,
    /// Disruption budgets that halted (a member's health gate ran out, or its change
    /// failed): their remaining members were not disturbed. Not a failure of the apply (its
    /// leftover changes are anomalies, not changes), but not clean either.
    pub halted: Vec<crate::rollout::Halt>,
}

impl ApplyReport {
    pub fn failures(&self) -> impl Iterator<Item = &ObjectOutcome> {
        self.outcomes.iter().filter(|o| o.status != Status::Done)
    }

    pub fn counts(&self) -> OutcomeCounts {
        let mut c = OutcomeCounts::default();
        for o in &self.outcomes {
            match &o.status {
                Status::Failed(_) => c.failed += 1,
                Status::Blocked(_) => c.blocked += 1,
                Status::Done => {}
            }
            let d = o.did;
            if d.deleted {
                c.deleted += 1;
            } else if d.created {
                c.created += 1;
            } else if d.updated {
                c.updated += 1;
            } else if d.started {
                c.started += 1;
            } else if d.stopped {
                c.stopped += 1;
            }
        }
        c
    }

    /// Each disruption budget's progress in this apply, from the first plan's rollout:
    /// members whose disturbing changes were planned and ended done, those left (failed,
    /// held back by a halt, interrupted), and whether the budget halted.
    pub fn rollout_progress(&self) -> Vec<RolloutProgress> {
        self.initial
            .rollout
            .iter()
            .map(|r| {
                let members: Vec<&String> = r.waves.iter().flatten().collect();
                let done = members
                    .iter()
                    .filter(|name| {
                        self.outcomes.iter().any(|o| {
                            o.object.file.is_some()
                                && o.object.id.name == ***name
                                && o.status == Status::Done
                                // A member held back by its budget's halt ends `Done`
                                // with nothing done.
                                && o.did.any()
                        })
                    })
                    .count();
                RolloutProgress {
                    budget: r.budget.clone(),
                    done,
                    left: members.len() + r.blocked.len() - done,
                    halted: self.halted.iter().any(|h| h.budget == r.budget),
                }
            })
            .collect()
    }

    /// The cluster matches the manifests: converged, and no anomaly, pending change or
    /// unplanned object is left.
    pub fn clean(&self) -> bool {
        let c = self.last.counts();
        self.converged
            && c.anomalies == 0
            && c.pending == 0
            && c.errors == 0
            && self.halted.is_empty()
    }
}

/// One disruption budget's progress in an apply ([`ApplyReport::rollout_progress`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutProgress {
    pub budget: String,
    /// Members whose disturbing changes ran and succeeded.
    pub done: usize,
    /// Members whose disturbing changes are still to do (failed, held back, blocked,
    /// interrupted).
    pub left: usize,
    pub halted: bool,
}

/// Checks a later pass's plan before it runs; `Some(reason)` stops the apply there.
pub type Gate = Arc<dyn Fn(&ClusterPlan) -> Option<String> + Send + Sync>;

/// Settings of an apply.
#[derive(Clone)]
pub struct ApplyOptions {
    /// Checked on every plan after the first (which the caller checked and showed).
    pub gate: Option<Gate>,
    pub limits: Limits,
    /// The cluster's secrets, for kinds granted them.
    pub secrets: Option<Arc<dyn SecretSource>>,
    /// Reads at once; `None`: `proxops_core::cluster::READS_PER_NODE` per node.
    pub read_concurrency: Option<usize>,
    pub max_passes: u32,
    /// Failed stop-required changes, remembered across runs.
    pub memory: Arc<StopMemory>,
    /// Set when the run is interrupted: no new action starts.
    pub cancel: Option<Cancel>,
    /// The cluster's disruption budgets (`None`: no budget; every guest as without them).
    pub rollout: Option<Arc<crate::rollout::Rollout>>,
}

/// Converge `objects` (one cluster). `first` is a plan already computed (and shown, and
/// checked by policies); it is executed as is. Each pass executes the plan, records how every
/// object ended (`ApplyState::record`), verifies the deletes, and plans the touched objects
/// again, until nothing is left, the pass limit, a signal or the gate stops it.
pub async fn apply(
    registry: &KindRegistry,
    client: &Client,
    objects: &[Object],
    first: ClusterPlan,
    options: ApplyOptions,
    reporter: Arc<dyn Reporter>,
) -> Result<ApplyReport, ObserveError> {
    let cycle = Cycle {
        registry,
        client,
        cluster: &first.cluster,
        objects,
        read_concurrency: options.read_concurrency,
        secrets: options.secrets.clone(),
    };
    let mut state = ApplyState::new(&first);
    let mut plan = first.clone();
    let interrupted = || options.cancel.as_ref().is_some_and(|c| *c.borrow());
    loop {
        let actions: usize = plan.objects.iter().map(|o| o.proposal.actions.len()).sum();
        if actions == 0 || state.passes >= options.max_passes {
            break;
        }
        if interrupted() {
            state.stopped = Some("interrupted; no further action was started".to_string());
            break;
        }
        if state.passes > 0
            && let Some(gate) = &options.gate
            && let Some(reason) = gate(&plan)
        {
            state.stopped = Some(format!("blocked by policy: {reason}"));
            break;
        }
        state.passes += 1;
        reporter.event(Event::Pass {
            pass: state.passes,
            actions,
        });
        let lanes = options
            .rollout
            .as_ref()
            .and_then(|r| crate::rollout::Lanes::of(r, &plan, state.halted.clone()));
        let results = execute(
            client,
            &plan,
            options.limits,
            options.secrets.clone(),
            reporter.clone(),
            options.cancel.clone(),
            lanes,
        )
        .await;
        let mut touched = HashSet::new();
        for outcome in results {
            touched.extend(state.record(outcome, &options.memory, reporter.as_ref()));
        }
        state.verify_deletes(client, reporter.as_ref()).await?;
        match state
            .replan(
                &cycle,
                touched,
                objects,
                &options.memory,
                options.rollout.as_deref(),
            )
            .await?
        {
            Some(again) => plan = again,
            None => {
                // Only prunes acted (and are gone): nothing is left to plan again.
                plan.objects.clear();
                break;
            }
        }
    }
    if state.stopped.is_none() && !interrupted() {
        let ran = run_finally(
            registry,
            client,
            &first.cluster,
            &state.outcomes,
            &options,
            &reporter,
        )
        .await;
        state.record_finally(ran);
    }
    state.forget_pruned();
    if !interrupted() {
        state
            .reread_failed(&cycle, objects, &options.memory, options.rollout.as_deref())
            .await;
    }
    let converged = state.failed.is_empty() && !plan.has_changes() && state.stopped.is_none();
    let halted = state.halted.lock().expect("halts lock").clone();
    Ok(ApplyReport {
        halted,
        initial: first,
        last: state.last,
        outcomes: state.outcomes,
        passes: state.passes,
        converged,
        stopped: state.stopped,
    })
}

/// What an apply knows between its passes: what is left to do (`last`), how each object ended,
/// and the rules' memory of this run (stale stops, restarts, deletes, take-overs).
struct ApplyState {
    /// The state after the last pass: the first plan, each re-planned object replaced.
    last: ClusterPlan,
    outcomes: Vec<ObjectOutcome>,
    /// Where each object's outcome is. A prune candidate and a manifest object may share an id
    /// (a template whose vmid changed): the live resource of the prune candidate tells them
    /// apart.
    outcome_index: HashMap<(ObjectId, Option<String>), usize>,
    failed: HashSet<ObjectId>,
    /// Objects whose stop/write/start found a stale digest once in this run.
    stale_stopped: HashSet<ObjectId>,
    /// Objects a failed start left stopped, planned once more in this run (their start).
    restarted: HashSet<ObjectId>,
    /// `(kind, resource)` of each object deleted in this run.
    deleted: HashSet<(String, Option<String>)>,
    /// Take-overs write the ownership tags and nothing else in this run.
    taken_over: HashSet<ObjectId>,
    passes: u32,
    /// Why a later pass was not run.
    stopped: Option<String>,
    /// Disruption budgets halted in this apply; their members' disturbing actions are held
    /// back in every later plan.
    halted: Arc<std::sync::Mutex<Vec<crate::rollout::Halt>>>,
}

impl ApplyState {
    fn new(first: &ClusterPlan) -> ApplyState {
        ApplyState {
            last: first.clone(),
            outcomes: Vec::new(),
            outcome_index: HashMap::new(),
            failed: HashSet::new(),
            stale_stopped: HashSet::new(),
            restarted: HashSet::new(),
            deleted: HashSet::new(),
            taken_over: first
                .objects
                .iter()
                .filter(|o| o.taking_over && o.has_actions())
                .map(|o| o.object.id.clone())
                .collect(),
            passes: 0,
            stopped: None,
            halted: Arc::default(),
        }
    }

    /// Record how one object ended in a pass: its failed stop-required changes remembered (or
    /// forgotten once it succeeds), its deletes, what of its plan is done. Returns the object
    /// when it is to be planned again (it acted, or a failed start left it stopped).
    fn record(
        &mut self,
        outcome: Outcome,
        memory: &StopMemory,
        reporter: &dyn Reporter,
    ) -> Option<ObjectId> {
        let Outcome {
            object,
            mut status,
            done,
            mut failed_stops,
            stale_stop,
            left_stopped,
        } = outcome;
        let id = object.id.clone();
        // A guest stopped for a change whose write found the config changed meanwhile is
        // planned again once; stopping it a second time in this run for the same reason
        // would bounce it once per pass while someone else keeps writing its config.
        if let Some(action) = stale_stop
            && !self.stale_stopped.insert(id.clone())
        {
            reporter.event(Event::ActionDone {
                object: object.clone(),
                summary: action.summary.clone(),
                error: Some(STALE_AGAIN.to_string()),
            });
            status = Status::Failed(ActionError::StaleAgain {
                action: action.summary.clone(),
            });
            failed_stops.push(action);
        }
        for a in &failed_stops {
            let why = match &status {
                Status::Failed(e) => e.to_string(),
                _ => "failed".to_string(),
            };
            memory.record(&object, a, &why);
        }
        if failed_stops.is_empty() && status == Status::Done {
            memory.forget(&object);
        }
        if done.iter().any(|a| a.operation == Operation::Delete) {
            self.deleted
                .insert((object.id.kind.clone(), object.resource.clone()));
        }
        let mut touched = None;
        if status == Status::Done {
            touched = Some(id);
        } else {
            // What did happen (a DiskImage's download on another node) is not still to do.
            if !done.is_empty()
                && let Some(slot) = self.last.objects.iter_mut().find(|p| {
                    p.object.id == object.id
                        && p.object.file == object.file
                        && p.object.resource == object.resource
                })
            {
                slot.proposal.actions.retain(|a| !done.contains(a));
            }
            if left_stopped && self.restarted.insert(id.clone()) {
                // Its verifying pass proposes the start from what PVE now says.
                touched = Some(id);
            } else {
                self.failed.insert(id);
            }
        }
        let key = (
            object.id.clone(),
            object
                .file
                .is_none()
                .then(|| object.resource.clone())
                .flatten(),
        );
        let slot = match self.outcome_index.get(&key) {
            Some(&i) => i,
            None => {
                self.outcome_index.insert(key, self.outcomes.len());
                self.outcomes.push(ObjectOutcome {
                    object,
                    status: Status::Done,
                    did: Did::default(),
                });
                self.outcomes.len() - 1
            }
        };
        self.outcomes[slot].status = status;
        for a in &done {
            self.outcomes[slot].did.note(a);
        }
        touched
    }

    /// A delete carries no digest: verify it. One listing shows whether every guest deleted in
    /// this pass is gone; one still listed failed, whatever PVE answered.
    async fn verify_deletes(
        &mut self,
        client: &Client,
        reporter: &dyn Reporter,
    ) -> Result<(), ObserveError> {
        let gone_this_pass: Vec<(usize, String)> = self
            .outcomes
            .iter()
            .enumerate()
            .filter(|(_, o)| o.did.deleted && o.status == Status::Done)
            .filter(|(_, o)| {
                self.deleted
                    .contains(&(o.object.id.kind.clone(), o.object.resource.clone()))
            })
            .filter_map(|(i, o)| o.object.resource.clone().map(|r| (i, r)))
            .collect();
        if gone_this_pass.is_empty() {
            return Ok(());
        }
        // Each listing the deleted objects appear in, read once.
        let mut listed: HashMap<(String, String), HashSet<String>> = HashMap::new();
        for (i, _) in &gone_this_pass {
            for (path, field) in &self.outcomes[*i].object.listings {
                let key = (path.clone(), field.clone());
                if listed.contains_key(&key) {
                    continue;
                }
                let ids = crate::observe::listing(client, path)
                    .await?
                    .iter()
                    .filter_map(|e| Some(e.get(field)?.id()?.into_owned()))
                    .collect();
                listed.insert(key, ids);
            }
        }
        for (i, resource) in gone_this_pass {
            let still_listed = self.outcomes[i]
                .object
                .listings
                .iter()
                .any(|(p, f)| listed[&(p.clone(), f.clone())].contains(&resource));
            if still_listed {
                let o = &mut self.outcomes[i];
                let why = ActionError::DeleteNotVerified {
                    resource: resource.clone(),
                };
                reporter.event(Event::ActionDone {
                    object: o.object.clone(),
                    summary: "verify the delete".into(),
                    error: Some(why.to_string()),
                });
                o.status = Status::Failed(why);
                o.did.deleted = false;
                self.failed.insert(o.object.id.clone());
                self.deleted
                    .remove(&(o.object.id.kind.clone(), Some(resource)));
            }
        }
        Ok(())
    }

    /// Plan the objects a pass touched again (not the failed ones, not the pruned ones, which
    /// are gone), with the hold-backs of a later pass, and put them into `last`. `None` when
    /// only prunes acted: nothing is left to plan.
    async fn replan(
        &mut self,
        cycle: &Cycle<'_>,
        mut touched: HashSet<ObjectId>,
        objects: &[Object],
        memory: &StopMemory,
        rollout: Option<&crate::rollout::Rollout>,
    ) -> Result<Option<ClusterPlan>, ObserveError> {
        touched.retain(|n| !self.failed.contains(n));
        let manifest_touched: HashSet<ObjectId> = touched
            .iter()
            .filter(|id| objects.iter().any(|o| o.id == **id))
            .cloned()
            .collect();
        if manifest_touched.is_empty() {
            return Ok(None);
        }
        let mut plan = plan_cluster(cycle, Some(&manifest_touched)).await?;
        if let Some(r) = rollout {
            r.add_reboots(&mut plan, cycle.registry);
        }
        memory.hold_back(&mut plan, false);
        self.hold_back_budgets(&mut plan, rollout);
        leave_for_the_next_run(&mut plan, &self.taken_over);
        // Replace the re-planned objects in `last`.
        let fresh: HashMap<&ObjectId, &ObjectPlan> = plan
            .objects
            .iter()
            .filter(|p| p.object.file.is_some())
            .map(|p| (&p.object.id, p))
            .collect();
        for slot in &mut self.last.objects {
            if slot.object.file.is_none() {
                continue;
            }
            if let Some(p) = fresh.get(&slot.object.id) {
                *slot = (*p).clone();
            }
        }
        Ok(Some(plan))
    }

    /// A later plan keeps the budgets' hold-backs: none of a budget with no place, and none
    /// of a budget that halted in this apply.
    fn hold_back_budgets(&self, plan: &mut ClusterPlan, rollout: Option<&crate::rollout::Rollout>) {
        if let Some(r) = rollout {
            r.hold_back(plan, &self.halted.lock().expect("halts lock"));
        }
    }

    /// The kinds' `finally` steps, each an object of its own.
    fn record_finally(&mut self, ran: Vec<Outcome>) {
        for outcome in ran {
            if let Status::Failed(_) = &outcome.status {
                self.failed.insert(outcome.object.id.clone());
            }
            let mut did = Did::default();
            for a in &outcome.done {
                did.note(a);
            }
            self.outcomes.push(ObjectOutcome {
                object: outcome.object,
                status: outcome.status,
                did,
            });
        }
    }

    /// A pruned object is gone: nothing of it is left to show.
    fn forget_pruned(&mut self) {
        let deleted = &self.deleted;
        self.last.objects.retain(|o| {
            o.object.file.is_some()
                || !deleted.contains(&(o.object.id.kind.clone(), o.object.resource.clone()))
        });
    }

    /// What is still to do for an object that failed is what PVE now says, not what was
    /// planned: part of a failed action may have landed (a create whose template mark failed,
    /// the write of a stop/write/start whose start failed). One read of the failed manifest
    /// objects; should it fail, their planned actions are shown as they were.
    async fn reread_failed(
        &mut self,
        cycle: &Cycle<'_>,
        objects: &[Object],
        memory: &StopMemory,
        rollout: Option<&crate::rollout::Rollout>,
    ) {
        let failed_manifest: HashSet<ObjectId> = self
            .failed
            .iter()
            .filter(|id| objects.iter().any(|o| o.id == **id))
            .cloned()
            .collect();
        if failed_manifest.is_empty() {
            return;
        }
        match plan_cluster(cycle, Some(&failed_manifest)).await {
            Ok(mut again) => {
                if let Some(r) = rollout {
                    r.add_reboots(&mut again, cycle.registry);
                }
                memory.hold_back(&mut again, false);
                self.hold_back_budgets(&mut again, rollout);
                leave_for_the_next_run(&mut again, &self.taken_over);
                for fresh in again
                    .objects
                    .into_iter()
                    .filter(|p| p.object.file.is_some())
                {
                    if let Some(slot) = self
                        .last
                        .objects
                        .iter_mut()
                        .find(|s| s.object.file.is_some() && s.object.id == fresh.object.id)
                    {
                        *slot = fresh;
                    }
                }
            }
            Err(e) => tracing::debug!("re-reading the objects that failed: {e}"),
        }
    }
}

/// A guest taken over in this run (`metadata.adopt`) got its ownership tags and nothing else:
/// "no stop, no restart" is what its plan promised; a named object, its mark and nothing else. Whatever its next plan holds is shown as
/// an anomaly and left for the next run, so that a plan shows it before anything is done.
fn leave_for_the_next_run(plan: &mut ClusterPlan, taken_over: &HashSet<ObjectId>) {
    for o in plan
        .objects
        .iter_mut()
        .filter(|o| o.has_actions() && taken_over.contains(&o.object.id))
    {
        let left: Vec<String> = std::mem::take(&mut o.proposal.actions)
            .into_iter()
            .map(|a| a.summary)
            .collect();
        o.proposal.anomalies.push(Anomaly {
            path: "metadata.adopt".into(),
            message: format!(
                "taken over in this run (only the ownership mark was written); left for the next run, so that a plan shows it first: {}",
                left.join("; ")
            ),
            locked: false,
        });
    }
}

/// One kind's changed objects in this apply: their names (what `finally` is told) and the
/// vmids of the guests among them (what its calls may name).
struct Changed {
    kind: usize,
    names: Vec<String>,
    vmids: HashSet<u64>,
}

/// The `finally` step of every kind whose objects this apply changed: asked once per kind
/// with the changed objects' names, checked like any proposal (declared calls, grant, the
/// ownership gate: only the changed guests may be named, restore calls included), held to
/// the policy gate as a later pass is, and run as one more object, `Kind/(finally)`. A step
/// refused or failed is a failed object (the apply exits 1).
async fn run_finally(
    registry: &KindRegistry,
    client: &Client,
    cluster: &str,
    outcomes: &[ObjectOutcome],
    options: &ApplyOptions,
    reporter: &Arc<dyn Reporter>,
) -> Vec<Outcome> {
    let mut changed: Vec<Changed> = Vec::new();
    for o in outcomes.iter().filter(|o| o.status == Status::Done) {
        let d = o.did;
        if !(d.created || d.updated || d.deleted || d.started || d.stopped) {
            continue;
        }
        let Some(kind) =
            (0..registry.len()).find(|&k| registry.get(k).info().kind == o.object.id.kind)
        else {
            continue;
        };
        let entry = match changed.iter().position(|c| c.kind == kind) {
            Some(i) => &mut changed[i],
            None => {
                changed.push(Changed {
                    kind,
                    names: Vec::new(),
                    vmids: HashSet::new(),
                });
                changed.last_mut().expect("just pushed")
            }
        };
        entry.names.push(o.object.id.name.clone());
        // A guest's listing id is `qemu/<vmid>` or `lxc/<vmid>`.
        if let Some(vmid) = o
            .object
            .resource
            .as_deref()
            .and_then(|r| r.split_once('/'))
            .and_then(|(_, v)| v.parse().ok())
        {
            entry.vmids.insert(vmid);
        }
    }
    if changed.is_empty() {
        return Vec::new();
    }
    let answers = crate::workers::par_map(registry, &changed, |instances, c| {
        instances
            .get(c.kind)
            .and_then(|i| i.finally(&c.names))
            .map_err(|e| PlanError::Kind(e.to_string()))
    });
    let mut plan = ClusterPlan {
        cluster: cluster.to_string(),
        rollout: Vec::new(),
        objects: Vec::new(),
    };
    let mut refused_steps = Vec::new();
    for (c, answer) in changed.iter().zip(answers) {
        let kind = &c.kind;
        let info = registry.get(*kind).info();
        let (actions, error) = match answer {
            Ok(mut actions) => {
                let checked = crate::observe::checked(registry.trust(*kind), info, &mut actions)
                    .and_then(|()| crate::ownership::check_finally_calls(&actions, &c.vmids));
                match checked {
                    Ok(()) => (actions, None),
                    Err(r) => (Vec::new(), Some(crate::observe::refused(&info.kind, &r))),
                }
            }
            Err(e) => (Vec::new(), Some(e)),
        };
        if actions.is_empty() && error.is_none() {
            continue;
        }
        if let Some(e) = &error {
            refused_steps.push((finally_ref(cluster, &info.kind), e.to_string()));
            continue;
        }
        plan.objects.push(ObjectPlan {
            object: finally_ref(cluster, &info.kind),
            kind_index: *kind,
            desired: None,
            running: false,
            proposal: proxops_runtime::kind::Proposal {
                actions,
                drift: Vec::new(),
                pending: Vec::new(),
                anomalies: Vec::new(),
            },
            depends_on: Vec::new(),
            error: None,
            taking_over: false,
            sandboxed: matches!(registry.trust(*kind), crate::grant::Trust::Granted(_)),
            relocated: None,
        });
    }
    if !plan.objects.is_empty()
        && let Some(gate) = &options.gate
        && let Some(reason) = gate(&plan)
    {
        for o in std::mem::take(&mut plan.objects) {
            refused_steps.push((o.object, format!("blocked by policy: {reason}")));
        }
    }
    let mut ran = Vec::new();
    for (object, reason) in refused_steps {
        reporter.event(Event::ActionDone {
            object: object.clone(),
            summary: "finally".into(),
            error: Some(reason.clone()),
        });
        ran.push(Outcome {
            object,
            status: Status::Failed(ActionError::Refused {
                action: "finally".into(),
                reason,
            }),
            done: Vec::new(),
            failed_stops: Vec::new(),
            stale_stop: None,
            left_stopped: false,
        });
    }
    if !plan.objects.is_empty() {
        ran.extend(
            execute(
                client,
                &plan,
                options.limits,
                options.secrets.clone(),
                reporter.clone(),
                options.cancel.clone(),
                None,
            )
            .await,
        );
    }
    ran
}

fn finally_ref(cluster: &str, kind: &str) -> ObjectRef {
    ObjectRef {
        id: ObjectId::new(cluster, kind, "(finally)"),
        file: None,
        node: None,
        resource: None,
        listings: Vec::new(),
    }
}
