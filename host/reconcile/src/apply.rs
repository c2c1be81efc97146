//! Apply: plan, execute, observe the touched objects again and plan again, until nothing is
//! left to do or the pass limit is reached (this is how clone -> configure -> start completes).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use proxops_pve::Client;
use proxops_runtime::SecretSource;

use crate::execute::{Event, Limits, Reporter, Status, execute};
use crate::observe::{ObserveError, plan_cluster};
use crate::plan::{ClusterPlan, ObjectPlan, ObjectRef};
use crate::{KindRegistry, Object};

/// The result of an apply.
#[derive(Debug, Clone)]
pub struct ApplyReport {
    /// The first plan (what was intended).
    pub initial: ClusterPlan,
    /// The state after the last pass (drift, pending and anomalies left).
    pub last: ClusterPlan,
    /// Objects whose actions ran, and how they ended.
    pub outcomes: Vec<(ObjectRef, Status)>,
    pub passes: u32,
    /// Nothing is left to do.
    pub converged: bool,
    /// Why a later pass was not run (a policy denied its plan).
    pub stopped: Option<String>,
}

impl ApplyReport {
    pub fn failures(&self) -> impl Iterator<Item = &(ObjectRef, Status)> {
        self.outcomes.iter().filter(|(_, s)| *s != Status::Done)
    }
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
    pub read_concurrency: usize,
    pub max_passes: u32,
}

/// Converge `objects` (one cluster). `first` is a plan already computed (and shown, and
/// checked by policies); it is executed as is.
pub async fn apply(
    registry: &KindRegistry,
    client: &Client,
    objects: &[Object],
    first: ClusterPlan,
    options: ApplyOptions,
    reporter: Arc<dyn Reporter>,
) -> Result<ApplyReport, ObserveError> {
    let cluster = first.cluster.clone();
    let mut last = first.clone();
    let mut outcomes: Vec<(ObjectRef, Status)> = Vec::new();
    let mut outcome_index: HashMap<(String, String), usize> = HashMap::new();
    let mut failed: HashSet<String> = HashSet::new();
    let mut passes = 0;
    let mut stopped = None;
    let mut plan = first.clone();
    loop {
        let actions: usize = plan.objects.iter().map(|o| o.proposal.actions.len()).sum();
        if actions == 0 || passes >= options.max_passes {
            break;
        }
        if passes > 0
            && let Some(gate) = &options.gate
            && let Some(reason) = gate(&plan)
        {
            stopped = Some(reason);
            break;
        }
        passes += 1;
        reporter.event(Event::Pass {
            pass: passes,
            actions,
        });
        let results = execute(client, &plan, options.limits, reporter.clone()).await;
        let mut touched = HashSet::new();
        for (object, status) in results {
            // Kind and name: a DiskImage and a VM may share a name.
            let id = format!("{}/{}", object.kind, object.name);
            if status == Status::Done {
                touched.insert(id);
            } else {
                failed.insert(id);
            }
            let key = (object.kind.clone(), object.name.clone());
            match outcome_index.get(&key) {
                Some(&i) => outcomes[i].1 = status,
                None => {
                    outcome_index.insert(key, outcomes.len());
                    outcomes.push((object, status));
                }
            }
        }
        touched.retain(|n| !failed.contains(n));
        if touched.is_empty() {
            break;
        }
        plan = plan_cluster(
            registry,
            client,
            &cluster,
            objects,
            options.read_concurrency,
            Some(&touched),
            options.secrets.clone(),
        )
        .await?;
        // Replace the re-planned objects in `last`; pruned objects acted on and gone no
        // longer appear in a fresh plan.
        let fresh: HashMap<(&str, &str), &ObjectPlan> = plan
            .objects
            .iter()
            .map(|p| ((p.object.kind.as_str(), p.object.name.as_str()), p))
            .collect();
        for slot in &mut last.objects {
            if let Some(p) = fresh.get(&(slot.object.kind.as_str(), slot.object.name.as_str())) {
                *slot = (*p).clone();
            }
        }
        last.objects.retain(|o| {
            o.object.file.is_some()
                || !touched.contains(&o.object.name)
                || fresh.contains_key(&(o.object.kind.as_str(), o.object.name.as_str()))
        });
    }
    // An object that failed keeps its planned actions in `last` (they did not happen).
    let converged = failed.is_empty() && !plan.has_changes() && stopped.is_none();
    if converged {
        for o in &mut last.objects {
            if o.object.file.is_none() {
                o.proposal.actions.clear();
            }
        }
    }
    Ok(ApplyReport {
        initial: first,
        last,
        outcomes,
        passes,
        converged,
        stopped,
    })
}
