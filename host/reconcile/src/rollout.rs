//! Disruption budgets as a stage of a cluster's apply. [`Rollout::resolve`] decides, per
//! cluster and from the validated objects, which guests each budget of `proxops.yaml` holds,
//! by its selector and by the manifests naming it (`metadata.budget`); a guest in two budgets,
//! a listed member no manifest declares, or a named budget the cluster lacks is a validation
//! error. [`Rollout::add_reboots`] adds the restarts of `--reboot-pending`, and
//! [`Rollout::waves`] the plan's view of each budget's schedule.
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
use proxops_runtime::kind::{
    Action, Anomaly, Call, Change, Drift, Method, Operation, Param, Restore,
};
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
    /// `reboot-pending: true`: its members with changes pending until reboot are rebooted.
    pub reboot_pending: bool,
}

/// A cluster's disruption budgets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rollout {
    pub budgets: Vec<Resolved>,
    member_of: HashMap<ObjectId, usize>,
    /// `--reboot-pending`: every guest with changes pending until reboot is rebooted (a
    /// member within its budget, a guest in no budget as any other restart).
    pub reboot_all: bool,
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
        // A manifest naming a budget no entry of this cluster has.
        for o in &guests {
            let Some(named) = &o.budget else { continue };
            if budgets
                .iter()
                .any(|b| b.name == *named && b.applies_to(cluster))
            {
                continue;
            }
            let why = match budgets.iter().find(|b| b.name == *named) {
                Some(b) => format!(
                    "budget `{named}` of {settings_file} does not apply to cluster {cluster} (its clusters: {})",
                    b.clusters.join(", ")
                ),
                None => {
                    let known: Vec<&str> = budgets.iter().map(|b| b.name.as_str()).collect();
                    format!(
                        "no budget `{named}` in {settings_file} (budgets: {})",
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    )
                }
            };
            diags.push(Diagnostic::error(&o.file, "metadata.budget", why));
        }
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
                Selector::Named => Vec::new(),
            };
            // Manifests that name this budget join it (after its selected members, in name
            // order) unless it selected them already.
            for o in guests.iter().copied() {
                if o.budget.as_deref() == Some(budget.name.as_str())
                    && !members.iter().any(|m| m.id == o.id)
                {
                    members.push(o);
                }
            }
            if budget.order == Order::Name {
                members.sort_by(|a, b| a.id.name.cmp(&b.id.name));
            }
            let index = rollout.budgets.len();
            let mut kept = Vec::new();
            for o in members {
                match rollout.member_of.get(&o.id) {
                    Some(&other) => diags.push(Diagnostic::error(
                        &o.file,
                        if o.budget.is_some() {
                            "metadata.budget"
                        } else {
                            "metadata.name"
                        },
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
                reboot_pending: budget.reboot_pending,
            });
        }
        (rollout, diags)
    }

    /// `--reboot-pending` for this run.
    pub fn with_reboot_pending(mut self, all: bool) -> Rollout {
        self.reboot_all = all;
        self
    }

    /// No budget has a member and nothing is to be rebooted: the apply is as without budgets.
    pub fn is_empty(&self) -> bool {
        self.member_of.is_empty() && !self.reboot_all
    }

    /// Whether `object`'s pending changes are applied by a reboot in this run.
    fn reboots(&self, object: &ObjectId) -> bool {
        self.reboot_all || self.budget_of(object).is_some_and(|b| b.reboot_pending)
    }

    /// Rolling reboots for pending changes: each guest that runs, is to run, has changes
    /// PVE keeps pending until its next boot, and nothing else to do in this plan gets one
    /// action, a restart (shut down, start; started again should the shutdown fail), when
    /// `--reboot-pending` is given or its budget says `reboot-pending: true`. The action
    /// disturbs the guest, so a member waits for its budget's place and gate like any other
    /// restart; [`Rollout::hold_back`] then holds it back in a budget with no place or one
    /// that halted. Its calls are checked against the kind's declared calls: a kind that does
    /// not declare its guests' shutdown and start gets an anomaly instead.
    pub fn add_reboots(&self, plan: &mut ClusterPlan, registry: &crate::KindRegistry) {
        if !self.reboot_all && !self.budgets.iter().any(|b| b.reboot_pending) {
            return;
        }
        for o in plan.objects.iter_mut() {
            if o.object.file.is_none()
                || o.error.is_some()
                || o.taking_over
                || !o.running
                || o.proposal.pending.is_empty()
                || !o.proposal.actions.is_empty()
                || !wants_running(o.desired.as_deref())
                || !self.reboots(&o.object.id)
            {
                continue;
            }
            let node = match &o.relocated {
                Some(r) => Some(r.to.clone()),
                None => o.object.node.clone(),
            };
            let Some(action) = reboot_action(
                o.object.resource.as_deref(),
                node.as_deref(),
                &o.proposal.pending,
            ) else {
                continue;
            };
            let info = registry.get(o.kind_index).info();
            let mut calls = action.calls.clone();
            let refused = calls
                .iter_mut()
                .find_map(|c| crate::request::form::canonicalize(c, &info.calls).err());
            match refused {
                Some(r) => o.proposal.anomalies.push(Anomaly {
                    path: String::new(),
                    message: format!(
                        "its pending changes are not applied by a reboot: kind {} does not declare the calls ({})",
                        info.kind, r
                    ),
                    locked: false,
                }),
                None => o.proposal.actions.push(Action { calls, ..action }),
            }
        }
    }

    /// The budget `object` is in.
    pub fn budget_of(&self, object: &ObjectId) -> Option<&Resolved> {
        self.member_of.get(object).map(|&i| &self.budgets[i])
    }

    /// Each budget's rollout in `plan` (after [`Rollout::hold_back`]): the members with
    /// disturbing actions, in the order they take its places, `places` to a wave, and the
    /// members a budget with no place blocks. Budgets with neither are left out.
    pub fn waves(&self, plan: &ClusterPlan) -> Vec<crate::plan::RolloutView> {
        let acting = acting(plan);
        self.budgets
            .iter()
            .filter_map(|b| {
                let ordered = pass_order(b, &acting);
                let blocked: Vec<String> = if b.places == 0 {
                    let marker = format!("blocked by its disruption budget {} ", b.name);
                    b.members
                        .iter()
                        .filter(|m| {
                            plan.objects.iter().any(|o| {
                                o.object.id == **m
                                    && o.proposal
                                        .anomalies
                                        .iter()
                                        .any(|a| a.message.starts_with(&marker))
                            })
                        })
                        .map(|m| m.name.clone())
                        .collect()
                } else {
                    Vec::new()
                };
                if ordered.is_empty() && blocked.is_empty() {
                    return None;
                }
                Some(crate::plan::RolloutView {
                    budget: b.name.clone(),
                    max_unavailable: b.max_unavailable.to_string(),
                    places: b.places,
                    gate: describe_gate(&b.health),
                    waves: ordered
                        .chunks(b.places.max(1))
                        .map(|w| w.iter().map(|id| id.name.clone()).collect())
                        .collect(),
                    blocked,
                })
            })
            .collect()
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

/// The manifest objects of `plan` with a disturbing action to run.
fn acting(plan: &ClusterPlan) -> HashMap<&ObjectId, &crate::plan::ObjectPlan> {
    plan.objects
        .iter()
        .filter(|o| o.object.file.is_some() && o.error.is_none())
        .filter(|o| o.proposal.actions.iter().any(disturbs))
        .map(|o| (&o.object.id, o))
        .collect()
}

/// The members of `budget` with disturbing actions in a pass, in the order they take its
/// places: the budget's order, a member's in-budget dependencies moved before it.
fn pass_order(
    budget: &Resolved,
    acting: &HashMap<&ObjectId, &crate::plan::ObjectPlan>,
) -> Vec<ObjectId> {
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
    let in_pass: Vec<&ObjectId> = budget
        .members
        .iter()
        .filter(|m| acting.contains_key(m))
        .collect();
    let members: HashSet<&ObjectId> = in_pass.iter().copied().collect();
    let mut ordered = Vec::new();
    let mut seen = HashSet::new();
    for id in &in_pass {
        visit(id, acting, &members, &mut seen, &mut ordered);
    }
    ordered
}

/// A gate for plans: `running, guest agent answers, up 30s; at most 10m`.
fn describe_gate(health: &Health) -> String {
    let mut what = String::from("running");
    if health.agent {
        what.push_str(", guest agent answers");
    }
    if !health.uptime.is_zero() {
        what.push_str(&format!(", up {}", seconds(health.uptime)));
    }
    if let Some(t) = health.tcp {
        match t.address {
            Some(a) => what.push_str(&format!(", TCP {}", std::net::SocketAddr::new(a, t.port))),
            None => what.push_str(&format!(", TCP port {} of its address", t.port)),
        }
    }
    format!("{what}; at most {}", seconds(health.timeout))
}

/// `30s`, `1.5s`, `10m`.
fn seconds(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    if d.subsec_nanos() == 0 && d.as_secs().is_multiple_of(60) && d.as_secs() > 0 {
        format!("{}m", d.as_secs() / 60)
    } else {
        format!("{s}s")
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
        let acting = acting(plan);
        let mut lanes = Vec::new();
        let mut seats = HashMap::new();
        for budget in &rollout.budgets {
            if budget.places == 0 {
                continue;
            }
            let ordered = pass_order(budget, &acting);
            if ordered.is_empty() {
                continue;
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

/// The restart that applies `pending` to guest `resource` (`qemu/100`, `lxc/200`) on `node`.
fn reboot_action(resource: Option<&str>, node: Option<&str>, pending: &[Drift]) -> Option<Action> {
    let (kind, vmid) = resource?.split_once('/')?;
    let noun = match kind {
        "qemu" => "VM",
        "lxc" => "container",
        _ => return None,
    };
    let vmid: u64 = vmid.parse().ok()?;
    let node = node?;
    let base = format!("/nodes/{node}/{kind}/{vmid}/status");
    let param = |name: &str, value: &str| Param {
        name: name.to_string(),
        value: value.to_string(),
        sensitive: false,
    };
    let start = Call {
        method: Method::Post,
        path: format!("{base}/start"),
        params: Vec::new(),
    };
    let shutdown = Call {
        method: Method::Post,
        path: format!("{base}/shutdown"),
        params: vec![param("forceStop", "1"), param("timeout", "180")],
    };
    let keys: Vec<&str> = pending.iter().map(|d| d.path.as_str()).collect();
    Some(Action {
        operation: Operation::Update,
        summary: format!(
            "reboot {noun} {vmid} on {node} to apply its pending changes (shut down, start): {}",
            keys.join(", ")
        ),
        calls: vec![shutdown, start.clone()],
        changes: pending
            .iter()
            .map(|d| Change {
                key: d.path.clone(),
                old: d.live.clone(),
                new: d.desired.clone(),
                sensitive: d.sensitive,
            })
            .collect(),
        disturbs_availability: true,
        destructive: false,
        restore: Some(Restore {
            after: 0,
            calls: vec![start],
        }),
    })
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
        tcp: health.tcp.map(|t| (t.port, t.address)),
    })
}
