//! Disruption budgets as a stage of a cluster's apply. [`Rollout::resolve`] decides, per
//! cluster and from the validated objects, which guests each budget of `proxops.yaml` holds
//! (a guest in two budgets, or a listed member no manifest declares, is a validation error).
//! [`Rollout::hold_back`] shapes every plan: a budget with no place (`max-unavailable: 0`)
//! blocks its members' disturbing actions, and so does a budget that halted earlier in the
//! apply. During a pass the executor asks [`Lanes`] for a place before a member's first
//! disturbing action: members take places in their budget's order, at most
//! `max-unavailable` at a time, and give them back once the guest passes its health gate
//! ([`crate::settle::healthy`]). A gate that runs out halts the budget: no later member is
//! disturbed in this run; the unhealthy guest is left as it is. Guests in no budget never
//! meet any of this.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use proxops_core::budget::{Budget, Health, MaxUnavailable, Order, Selector, glob_matches};
use proxops_core::{Diagnostic, ObjectId};
use proxops_runtime::kind::{Action, Anomaly, Method};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use crate::plan::ClusterPlan;
use crate::validate::Object;

/// One budget as it applies to one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub name: String,
    pub max_unavailable: MaxUnavailable,
    /// How many members may be disturbed at once (`max-unavailable` of its members).
    pub places: usize,
    pub health: Health,
    /// Its members, in the order they are disturbed.
    pub members: Vec<ObjectId>,
}

/// A cluster's disruption budgets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rollout {
    pub budgets: Vec<Resolved>,
    member_of: HashMap<ObjectId, usize>,
}

/// A budget that stopped in this run: the guest whose gate ran out, and which check.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Halt {
    pub budget: String,
    /// The guest's manifest name.
    pub guest: String,
    /// `running`, `guest agent`, `uptime`, or `change failed`.
    pub check: String,
    /// What the failed check last saw.
    pub detail: String,
}

impl std::fmt::Display for Halt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "budget {} halted at {}: {} check failed ({}); its remaining members were not disturbed",
            self.budget, self.guest, self.check, self.detail
        )
    }
}

/// Whether an action disturbs its guest's availability: the kind says so, or it stops,
/// shuts down, reboots, suspends or resets the guest.
pub fn disturbs(action: &Action) -> bool {
    action.disturbs_availability
        || action.calls.iter().any(|c| {
            c.method == Method::Post
                && ["stop", "shutdown", "reboot", "suspend", "reset"]
                    .iter()
                    .any(|op| c.path.ends_with(&format!("/status/{op}")))
        })
}

/// The tags of a desired state (`tags`, as the kind normalised them).
fn tags_of(desired: &str) -> Vec<String> {
    serde_json::from_str::<serde_json::Value>(desired)
        .ok()
        .and_then(|d| {
            d.get("tags")?.as_array().map(|t| {
                t.iter()
                    .filter_map(|x| x.as_str().map(str::to_lowercase))
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// Whether a desired state wants the guest running (a kind that says nothing: running).
fn wants_running(desired: Option<&str>) -> bool {
    desired
        .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .and_then(|d| d.get("state")?.as_str().map(str::to_string))
        .is_none_or(|s| s != "stopped")
}

fn is_guest(o: &Object) -> bool {
    o.key.space == "guest-id"
}

impl Rollout {
    /// The budgets of `settings` that apply to `cluster`, their members found among its
    /// validated `objects`. Problems are returned as diagnostics: a guest in two budgets (on
    /// its manifest), a `members` name no guest manifest of the cluster declares (on
    /// `settings_file`).
    pub fn resolve(
        budgets: &[Budget],
        cluster: &str,
        objects: &[Object],
        settings_file: &str,
    ) -> (Rollout, Vec<Diagnostic>) {
        let mut diags = Vec::new();
        let mut rollout = Rollout::default();
        let mut guests: Vec<&Object> = objects.iter().filter(|o| is_guest(o)).collect();
        guests.sort_by(|a, b| a.id.name.cmp(&b.id.name));
        for budget in budgets.iter().filter(|b| b.applies_to(cluster)) {
            let mut members: Vec<&Object> = match &budget.select {
                Selector::Tags(tags) => guests
                    .iter()
                    .copied()
                    .filter(|o| tags_of(&o.desired).iter().any(|t| tags.contains(t)))
                    .collect(),
                Selector::Names(globs) => guests
                    .iter()
                    .copied()
                    .filter(|o| globs.iter().any(|g| glob_matches(g, &o.id.name)))
                    .collect(),
                Selector::Members(names) => {
                    let mut found = Vec::new();
                    for (i, name) in names.iter().enumerate() {
                        match guests.iter().find(|o| o.id.name == *name) {
                            Some(o) => found.push(*o),
                            None => diags.push(Diagnostic::error(
                                settings_file,
                                format!("{}.select.members[{i}]", budget.path()),
                                format!("no guest manifest of cluster {cluster} is named `{name}`"),
                            )),
                        }
                    }
                    found
                }
            };
            if budget.order == Order::Name {
                members.sort_by(|a, b| a.id.name.cmp(&b.id.name));
            }
            let index = rollout.budgets.len();
            let mut kept = Vec::new();
            for o in members {
                match rollout.member_of.get(&o.id) {
                    Some(&other) => diags.push(Diagnostic::error(
                        &o.file,
                        "metadata.name",
                        format!(
                            "guest {} is in two disruption budgets, {} and {} ({}); a guest may be in one",
                            o.id.name, rollout.budgets[other].name, budget.name, settings_file
                        ),
                    )),
                    None => {
                        rollout.member_of.insert(o.id.clone(), index);
                        kept.push(o.id.clone());
                    }
                }
            }
            rollout.budgets.push(Resolved {
                name: budget.name.clone(),
                max_unavailable: budget.max_unavailable,
                places: budget.max_unavailable.of(kept.len()),
                health: budget.health,
                members: kept,
            });
        }
        (rollout, diags)
    }

    pub fn is_empty(&self) -> bool {
        self.member_of.is_empty()
    }

    /// The budget `object` is in.
    pub fn budget_of(&self, object: &ObjectId) -> Option<&Resolved> {
        self.member_of.get(object).map(|&i| &self.budgets[i])
    }

    /// Hold back the disturbing actions of every member of a budget with no place
    /// (`max-unavailable: 0`) or one in `halted`: each held object gets an anomaly saying
    /// which budget blocks it.
    pub fn hold_back(&self, plan: &mut ClusterPlan, halted: &[Halt]) {
        if self.is_empty() {
            return;
        }
        for o in plan.objects.iter_mut().filter(|o| o.object.file.is_some()) {
            let Some(budget) = self.budget_of(&o.object.id) else {
                continue;
            };
            let why = if budget.places == 0 {
                format!(
                    "blocked by its disruption budget {} (max-unavailable: {}): this change disturbs the guest",
                    budget.name, budget.max_unavailable
                )
            } else if let Some(h) = halted.iter().find(|h| h.budget == budget.name) {
                format!(
                    "held back: its disruption budget {} halted in this run at {} ({} check failed); the next run resumes",
                    budget.name, h.guest, h.check
                )
            } else {
                continue;
            };
            let held: Vec<String> = o
                .proposal
                .actions
                .iter()
                .filter(|a| disturbs(a))
                .map(|a| a.summary.clone())
                .collect();
            if held.is_empty() {
                continue;
            }
            o.proposal.actions.retain(|a| !disturbs(a));
            o.proposal.anomalies.push(Anomaly {
                path: String::new(),
                message: format!("{why}: {}", held.join("; ")),
                locked: false,
            });
        }
    }
}

/// One budget's queue in one pass of the executor.
struct Lane {
    budget: Resolved,
    places: Arc<Semaphore>,
    /// Per position: taken its turn (started, or passed it by).
    turns: Mutex<Vec<bool>>,
    /// How many leading positions have had their turn.
    front: watch::Sender<usize>,
}

impl Lane {
    fn pass_turn(&self, position: usize) {
        let mut turns = self.turns.lock().expect("lane lock");
        turns[position] = true;
        let front = turns.iter().take_while(|t| **t).count();
        self.front.send_replace(front);
    }
}

/// The budgets' queues of one pass: which acting objects are members, in which position.
pub struct Lanes {
    lanes: Vec<Lane>,
    seats: HashMap<ObjectId, (usize, usize)>,
    /// Halts of this apply, shared by its passes.
    halted: Arc<Mutex<Vec<Halt>>>,
}

/// A member's seat in its lane; passes its turn when dropped, so a member that never
/// reaches a disturbing action (blocked, failed earlier, interrupted) never holds up the
/// members after it.
pub struct Seat {
    lanes: Arc<Lanes>,
    lane: usize,
    position: usize,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.lanes.lanes[self.lane].pass_turn(self.position);
    }
}

/// A member's place: held from its first disturbing action through its health gate.
pub struct Place {
    _permit: OwnedSemaphorePermit,
}

impl Lanes {
    /// The lanes of a pass over `plan`: each budget's members that have disturbing actions
    /// to run, in budget order, a member's in-budget dependencies moved before it.
    pub(crate) fn of(
        rollout: &Rollout,
        plan: &ClusterPlan,
        halted: Arc<Mutex<Vec<Halt>>>,
    ) -> Option<Arc<Lanes>> {
        if rollout.is_empty() {
            return None;
        }
        let acting: HashMap<&ObjectId, &crate::plan::ObjectPlan> = plan
            .objects
            .iter()
            .filter(|o| o.object.file.is_some() && o.error.is_none())
            .filter(|o| o.proposal.actions.iter().any(disturbs))
            .map(|o| (&o.object.id, o))
            .collect();
        let mut lanes = Vec::new();
        let mut seats = HashMap::new();
        for budget in &rollout.budgets {
            let in_pass: Vec<&ObjectId> = budget
                .members
                .iter()
                .filter(|m| acting.contains_key(m))
                .collect();
            if in_pass.is_empty() || budget.places == 0 {
                continue;
            }
            let mut ordered: Vec<ObjectId> = Vec::new();
            let mut seen = HashSet::new();
            fn visit(
                id: &ObjectId,
                acting: &HashMap<&ObjectId, &crate::plan::ObjectPlan>,
                members: &HashSet<&ObjectId>,
                seen: &mut HashSet<ObjectId>,
                ordered: &mut Vec<ObjectId>,
            ) {
                if !seen.insert(id.clone()) {
                    return;
                }
                if let Some(o) = acting.get(id) {
                    for d in &o.depends_on {
                        if members.contains(d) {
                            visit(d, acting, members, seen, ordered);
                        }
                    }
                }
                ordered.push(id.clone());
            }
            let members: HashSet<&ObjectId> = in_pass.iter().copied().collect();
            for id in &in_pass {
                visit(id, &acting, &members, &mut seen, &mut ordered);
            }
            let lane = lanes.len();
            for (position, id) in ordered.iter().enumerate() {
                seats.insert(id.clone(), (lane, position));
            }
            lanes.push(Lane {
                budget: budget.clone(),
                places: Arc::new(Semaphore::new(budget.places)),
                turns: Mutex::new(vec![false; ordered.len()]),
                front: watch::channel(0).0,
            });
        }
        (!lanes.is_empty()).then(|| {
            Arc::new(Lanes {
                lanes,
                seats,
                halted,
            })
        })
    }

    /// The seat of `object`, when it is a member with disturbing actions in this pass.
    pub(crate) fn seat(self: &Arc<Self>, object: &ObjectId) -> Option<Seat> {
        let &(lane, position) = self.seats.get(object)?;
        Some(Seat {
            lanes: self.clone(),
            lane,
            position,
        })
    }

    fn halt_of(&self, budget: &str) -> Option<Halt> {
        self.halted
            .lock()
            .expect("halts lock")
            .iter()
            .find(|h| h.budget == budget)
            .cloned()
    }
}

impl Seat {
    pub(crate) fn budget(&self) -> &Resolved {
        &self.lanes.lanes[self.lane].budget
    }

    /// Wait for this member's turn, then for a place. `Err` with the halt when the budget
    /// halted meanwhile: the member is not to be disturbed.
    pub(crate) async fn take(&self) -> Result<Place, Halt> {
        let lane = &self.lanes.lanes[self.lane];
        let mut front = lane.front.subscribe();
        // The sender lives in `lane`, which outlives this wait.
        let _ = front.wait_for(|f| *f >= self.position).await;
        let permit = lane
            .places
            .clone()
            .acquire_owned()
            .await
            .expect("places open");
        if let Some(h) = self.lanes.halt_of(&lane.budget.name) {
            return Err(h);
        }
        lane.pass_turn(self.position);
        Ok(Place { _permit: permit })
    }

    /// Halt this member's budget for the rest of the apply.
    pub(crate) fn halt(&self, halt: Halt) {
        let mut halted = self.lanes.halted.lock().expect("halts lock");
        if !halted.iter().any(|h| h.budget == halt.budget) {
            halted.push(halt);
        }
    }
}

/// The health gate of a member disturbed in this pass, when its desired state is running:
/// the guest (`qemu/100`), the node its calls went to.
pub(crate) fn gate_for(
    resource: Option<&str>,
    node: &str,
    desired: Option<&str>,
    health: &Health,
) -> Option<crate::settle::Healthy> {
    if !wants_running(desired) {
        return None;
    }
    let (kind, vmid) = resource?.split_once('/')?;
    Some(crate::settle::Healthy {
        kind: kind.to_string(),
        vmid: vmid.parse().ok()?,
        node: node.to_string(),
        agent: health.agent,
        uptime: health.uptime,
    })
}
