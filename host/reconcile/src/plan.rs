//! The plan of one cluster: per object, the kind's proposal, with everything the renderer,
//! policies and executor need. Secret values never leave this module unredacted: the
//! serialisable views replace them.

use proxops_core::ObjectId;
use proxops_runtime::kind::{Action, Anomaly, Drift, Method, Operation, Proposal};

use crate::error::PlanError;
use serde::{Deserialize, Serialize};

/// What an object's plan is about.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ObjectRef {
    /// Cluster, kind and name (serialised as three fields of the object).
    #[serde(flatten)]
    pub id: ObjectId,
    /// Manifest file; `None` for a prune candidate (no manifest).
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub node: Option<String>,
    /// Id of its entry in its kind's listings, e.g. `qemu/100`.
    #[serde(default)]
    pub resource: Option<String>,
    /// The listings (path, id field) its entry is looked up in: how a create whose answer
    /// was lost is checked.
    #[serde(skip)]
    pub listings: Vec<(String, String)>,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.id.kind, self.id.name)
    }
}

/// One object's plan.
#[derive(Debug, Clone)]
pub struct ObjectPlan {
    pub object: ObjectRef,
    pub kind_index: usize,
    /// Desired state (JSON); `None` for a prune candidate.
    pub desired: Option<String>,
    /// Whether the live object is running.
    pub running: bool,
    pub proposal: Proposal,
    /// Objects (of the same cluster) whose actions must finish first.
    pub depends_on: Vec<ObjectId>,
    /// Planning failed for this object (guest error, refused call, blocked dependency).
    pub error: Option<PlanError>,
    /// The plan is a take-over (`metadata.adopt`): its one action writes the ownership tags,
    /// and apply plans nothing else for the object in the same run.
    pub taking_over: bool,
    /// Its kind is a third-party kind: plans show every call its actions send.
    pub sandboxed: bool,
    /// PVE's HA manager runs the guest on another node than its manifest's.
    pub relocated: Option<Relocated>,
}

impl ObjectPlan {
    pub fn has_actions(&self) -> bool {
        !self.proposal.actions.is_empty()
    }
}

/// The plan of one cluster.
#[derive(Debug, Clone, Default)]
pub struct ClusterPlan {
    pub cluster: String,
    pub objects: Vec<ObjectPlan>,
    /// Each disruption budget's rollout in this plan (its members' disturbing actions, in
    /// waves); empty without budgets ([`crate::rollout::Rollout::waves`]).
    pub rollout: Vec<RolloutView>,
}

/// One disruption budget's rollout in a plan: the members whose changes disturb them, in the
/// order they take the budget's places, `places` at a time (a wave), each next member only
/// after a member before it passed the gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutView {
    pub budget: String,
    /// As declared: a count (`1`) or a percentage (`25%`).
    pub max_unavailable: String,
    /// Members disturbed at once (`max-unavailable` of the budget's members).
    pub places: usize,
    /// What a disturbed member must show before the next one goes, e.g. `running, guest
    /// agent answers; at most 10m`.
    pub gate: String,
    /// Manifest names, wave by wave, in order.
    #[serde(default)]
    pub waves: Vec<Vec<String>>,
    /// Members whose disturbing changes the budget blocks (`max-unavailable: 0`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<String>,
}

/// Counts for the summary line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Counts {
    pub create: usize,
    pub update: usize,
    pub delete: usize,
    pub power: usize,
    pub anomalies: usize,
    pub pending: usize,
    pub errors: usize,
}

impl ClusterPlan {
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for o in &self.objects {
            // Objects, as apply's summary counts them: a DiskImage downloaded on two nodes
            // is one object to create, and an update in two actions one object to update.
            let (mut create, mut delete, mut power, mut update) = (false, false, false, false);
            for a in &o.proposal.actions {
                match &a.operation {
                    Operation::Create => create = true,
                    Operation::Delete => delete = true,
                    op if op.is_power() => power = true,
                    Operation::Update | Operation::Step(_) => update = true,
                }
            }
            c.create += usize::from(create);
            c.delete += usize::from(delete);
            c.power += usize::from(power);
            c.update += usize::from(update);
            c.anomalies += o.proposal.anomalies.len();
            c.pending += o.proposal.pending.len();
            c.errors += usize::from(o.error.is_some());
        }
        c
    }

    pub fn has_changes(&self) -> bool {
        self.objects.iter().any(ObjectPlan::has_actions)
    }
}

/// A value for display: a secret reference becomes `(secret <ref>)`, a secret (or anything
/// holding what looks like a reference) `(sensitive)`.
pub fn display_value(value: &str, sensitive: bool) -> String {
    if let Some(path) = proxops_core::secret_ref::parse(value) {
        format!("(secret {path})")
    } else if sensitive || proxops_core::secret_ref::mentions(value) {
        "(sensitive)".to_string()
    } else {
        value.to_string()
    }
}

fn shown(value: &Option<String>, sensitive: bool) -> Option<String> {
    value.as_deref().map(|v| display_value(v, sensitive))
}

/// The redacted view of one cluster's plan: the `--json` document (a list of these) is
/// written from this type and read back into it (`policy test --plan`), so the two cannot
/// drift apart. Fields a hand-written plan may leave out have defaults.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanView {
    pub cluster: String,
    #[serde(default)]
    pub counts: Counts,
    #[serde(default)]
    pub objects: Vec<ObjectView>,
    /// What the site policies said about this cluster's plan (`plan --json` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<serde_json::Value>,
    /// Why the cluster was not planned, line by line as `plan` prints them (`plan --json`
    /// only; absent for a planned cluster, whose own errors are in its objects).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// The disruption budgets' rollouts, wave by wave (absent without budgets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rollout: Vec<RolloutView>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ObjectView {
    #[serde(flatten)]
    pub object: ObjectRef,
    #[serde(default)]
    pub running: bool,
    #[serde(default)]
    pub actions: Vec<ActionView>,
    #[serde(default)]
    pub drift: Vec<DriftView>,
    #[serde(default)]
    pub pending: Vec<DriftView>,
    #[serde(default)]
    pub anomalies: Vec<AnomalyView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its kind is a third-party kind: plans show every call its actions send.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sandboxed: bool,
    /// PVE's HA manager moved the guest away from its home node (`spec.node`): it is planned
    /// where it is, and plan says so (the exit code does not change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relocated: Option<Relocated>,
}

/// A guest HA put on another node than its manifest's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relocated {
    /// The manifest's node (the home node).
    pub from: String,
    /// Where PVE's HA manager runs it now.
    pub to: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ActionView {
    pub operation: String,
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub destructive: bool,
    /// The action stops its object to apply (`disturbs-availability`; named `requires_stop`
    /// since the first plan format, and kept: `--json` fields are only ever added).
    #[serde(default)]
    pub requires_stop: bool,
    #[serde(default)]
    pub changes: Vec<ChangeView>,
    #[serde(default)]
    pub calls: Vec<CallView>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChangeView {
    pub key: String,
    #[serde(default)]
    pub old: Option<String>,
    #[serde(default)]
    pub new: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CallView {
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub params: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DriftView {
    pub path: String,
    #[serde(default)]
    pub live: Option<String>,
    #[serde(default)]
    pub desired: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AnomalyView {
    pub path: String,
    pub message: String,
}

/// `create`, `update`, `delete`, or the name of a kind-specific step (`power`, …).
pub fn operation_name(op: &Operation) -> &str {
    match op {
        Operation::Create => "create",
        Operation::Update => "update",
        Operation::Delete => "delete",
        Operation::Step(name) => name,
    }
}

pub fn method_name(m: Method) -> &'static str {
    match m {
        Method::Get => "GET",
        Method::Post => "POST",
        Method::Put => "PUT",
        Method::Delete => "DELETE",
    }
}

fn drift_view(d: &Drift) -> DriftView {
    DriftView {
        path: d.path.clone(),
        live: shown(&d.live, d.sensitive),
        desired: shown(&d.desired, d.sensitive),
    }
}

pub fn action_view(a: &Action) -> ActionView {
    ActionView {
        operation: operation_name(&a.operation).to_string(),
        summary: a.summary.clone(),
        destructive: a.destructive,
        requires_stop: a.disturbs_availability,
        changes: a
            .changes
            .iter()
            .map(|c| ChangeView {
                key: c.key.clone(),
                old: shown(&c.old, c.sensitive),
                new: shown(&c.new, c.sensitive),
            })
            .collect(),
        calls: a
            .calls
            .iter()
            .map(|c| CallView {
                method: method_name(c.method).to_string(),
                path: c.path.clone(),
                params: c
                    .params
                    .iter()
                    .map(|p| (p.name.clone(), display_value(&p.value, p.sensitive)))
                    .collect(),
            })
            .collect(),
    }
}

fn anomaly_view(a: &Anomaly) -> AnomalyView {
    AnomalyView {
        path: a.path.clone(),
        message: a.message.clone(),
    }
}

impl ClusterPlan {
    pub fn view(&self) -> PlanView {
        PlanView {
            cluster: self.cluster.clone(),
            counts: self.counts(),
            objects: self
                .objects
                .iter()
                .map(|o| ObjectView {
                    object: o.object.clone(),
                    running: o.running,
                    actions: o.proposal.actions.iter().map(action_view).collect(),
                    drift: o.proposal.drift.iter().map(drift_view).collect(),
                    pending: o.proposal.pending.iter().map(drift_view).collect(),
                    anomalies: o.proposal.anomalies.iter().map(anomaly_view).collect(),
                    error: o.error.as_ref().map(ToString::to_string),
                    sandboxed: o.sandboxed,
                    relocated: o.relocated.clone(),
                })
                .collect(),
            policies: None,
            errors: Vec::new(),
            rollout: self.rollout.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxops_runtime::kind::{Action, Proposal};

    fn object(name: &str, operations: &[Operation]) -> ObjectPlan {
        ObjectPlan {
            object: ObjectRef {
                id: ObjectId::new("lab", "DiskImage", name),
                file: Some(format!("diskimage/lab/{name}.yaml")),
                node: None,
                resource: None,
                listings: Vec::new(),
            },
            kind_index: 0,
            desired: None,
            running: false,
            proposal: Proposal {
                actions: operations
                    .iter()
                    .map(|op| Action {
                        operation: op.clone(),
                        summary: String::new(),
                        calls: Vec::new(),
                        changes: Vec::new(),
                        disturbs_availability: false,
                        destructive: false,
                        restore: None,
                    })
                    .collect(),
                drift: Vec::new(),
                pending: Vec::new(),
                anomalies: Vec::new(),
            },
            depends_on: Vec::new(),
            error: None,
            taking_over: false,
            sandboxed: false,
            relocated: None,
        }
    }

    /// The summary counts objects, as apply's does: one DiskImage downloaded on two nodes is
    /// one to create.
    #[test]
    fn counts_are_per_object() {
        let power = Operation::Step(proxops_runtime::kind::POWER.into());
        let plan = ClusterPlan {
            cluster: "lab".into(),
            rollout: Vec::new(),
            objects: vec![
                object("noble", &[Operation::Create, Operation::Create]),
                object(
                    "web",
                    &[Operation::Update, Operation::Update, power.clone()],
                ),
                object("old", &[Operation::Delete]),
                object("same", &[]),
            ],
        };
        let c = plan.counts();
        assert_eq!(
            (c.create, c.update, c.delete, c.power),
            (1, 1, 1, 1),
            "{c:?}"
        );
    }
}
