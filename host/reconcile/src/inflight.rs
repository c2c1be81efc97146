//! Work an earlier run left in flight: a run killed while a create, clone or download task ran
//! leaves that task running in PVE (and its guest locked). Before an apply acts on such a
//! node, the node's active tasks are read and the ones that concern the plan are waited for
//! (bounded); the caller then plans again. A task still running after the bound makes the
//! objects it may concern errors (reported, not acted on), so a second download never races
//! the first ("refusing to override existing file") and a create never races its own
//! placeholder.
//!
//! Which tasks concern the plan is derived from the plan itself, for every kind: each create
//! action's requests, judged as the sandbox judges them (`request::target`), name the node and
//! the task ids PVE gives such work (the new guest's vmid, a clone's source, the new file's
//! name), and a guest shown locked names its own. Task lists are read only on such a node: a
//! no-op plan makes no extra request.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use proxops_pve::{Client, Param, PveError};
use proxops_runtime::kind::{Call, Method, Operation};
use serde_json::Value;

use crate::plan::ClusterPlan;
use crate::request::form::pve_view;
use crate::request::target::Target;

/// What [`settle`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Settled {
    /// Tasks of an earlier run that were waited for until they ended (`type id on node: exit`).
    pub waited: Vec<String>,
    /// Objects (by index into the plan) a task still running after the bound may concern, with
    /// the message to report.
    pub running: Vec<(usize, String)>,
}

impl Settled {
    /// Something ended while waiting: the plan was made before, plan again.
    pub fn replan(&self) -> bool {
        !self.waited.is_empty()
    }
}

/// What one object's plan may race: the node and the task ids (a VMID, a file name).
fn interest(plan: &ClusterPlan) -> BTreeMap<String, Vec<(usize, BTreeSet<String>)>> {
    let mut nodes: BTreeMap<String, Vec<(usize, BTreeSet<String>)>> = BTreeMap::new();
    for (index, o) in plan.objects.iter().enumerate() {
        let mut per_node: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let locked = o.proposal.anomalies.iter().any(|a| a.locked);
        if locked && let Some(node) = &o.object.node {
            let id = o
                .object
                .resource
                .as_deref()
                .and_then(|r| r.rsplit('/').next())
                .unwrap_or_default()
                .to_string();
            per_node.entry(node.clone()).or_default().insert(id);
        }
        for action in o
            .proposal
            .actions
            .iter()
            .filter(|a| a.operation == Operation::Create)
        {
            for call in action.calls.iter().filter(|c| c.method != Method::Get) {
                if let Some((node, ids)) = task_ids(call) {
                    per_node.entry(node).or_default().extend(ids);
                }
            }
        }
        for (node, ids) in per_node {
            nodes.entry(node).or_default().push((index, ids));
        }
    }
    nodes
}

/// The node a create action's request acts on and the ids of the tasks PVE runs for such
/// work: a new guest's vmid (`qmcreate`, `vzcreate`), a clone's source and new vmid (`qmclone`
/// names the source), a new file's name (`download`; PVE's file names hold no character its
/// task ids escape). From the request as the sandbox reads it, whatever the kind; `None` for a
/// request that creates nothing (a config write or a start inside a create action reads no
/// task list).
fn task_ids(call: &Call) -> Option<(String, BTreeSet<String>)> {
    let target = Target::of(&pve_view(&call.path), &call.params).ok()?;
    let param = |name: &str| {
        call.params
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
            .map(|p| p.value.clone())
            .filter(|v| !v.is_empty())
    };
    let mut ids = BTreeSet::new();
    match &target {
        Target::NewGuest { vmid, .. } => {
            ids.insert(vmid.to_string());
        }
        Target::Guest { vmid, rest, .. } if rest.first().is_some_and(|r| r == "clone") => {
            ids.insert(vmid.to_string());
            ids.extend(param("newid"));
        }
        Target::NewFile { .. } => ids.extend(param("filename")),
        Target::Guest { .. }
        | Target::Volume { .. }
        | Target::Endpoint { .. }
        | Target::HaResource { .. }
        | Target::Named { .. } => return None,
    }
    Some((target.node()?.to_string(), ids))
}

/// A task of interest from a `source=active` listing: its UPID, type and id.
fn active_tasks(list: &Value) -> Vec<(String, String, String)> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter(|t| {
            // Active listings hold running tasks only; a status other than RUNNING (or none)
            // means it ended between the listing and now.
            t.get("status")
                .and_then(Value::as_str)
                .is_none_or(|s| s == "RUNNING")
        })
        .filter_map(|t| {
            let field = |k: &str| {
                t.get(k).map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
            };
            Some((
                field("upid")?,
                field("type")?,
                field("id").unwrap_or_default(),
            ))
        })
        .collect()
}

/// Finds the tasks an earlier run left running that the plan could race, waits for them (at
/// most `bound` in all) and says what it waited for and what is still running. `waiting` is
/// told each task (`type id on node`) before the wait starts, so the operator sees why the run
/// pauses.
pub async fn settle(
    client: &Client,
    plan: &ClusterPlan,
    bound: Duration,
    waiting: &(dyn Fn(&str) + Sync),
) -> Result<Settled, PveError> {
    let mut settled = Settled::default();
    let deadline = tokio::time::Instant::now() + bound;
    for (node, objects) in interest(plan) {
        let ids: BTreeSet<&String> = objects.iter().flat_map(|(_, ids)| ids).collect();
        let path = format!("/nodes/{node}/tasks");
        let list = client.get(&path, &[Param::new("source", "active")]).await?;
        let relevant: Vec<(String, String, String)> = active_tasks(&list)
            .into_iter()
            .filter(|(_, _, id)| ids.contains(id))
            .collect();
        for (upid, kind, id) in relevant {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            waiting(&format!("{kind} {id} on {node}"));
            match client.wait_task(&upid, left).await {
                Ok(done) => settled
                    .waited
                    .push(format!("{kind} {id} on {node}: {}", done.exitstatus)),
                Err(PveError::TaskFailed { exitstatus, .. }) => settled
                    .waited
                    .push(format!("{kind} {id} on {node}: {exitstatus}")),
                Err(PveError::TaskTimeout { .. }) => {
                    // Which object a task concerns is not always in its id (a clone's names
                    // its source): every object of interest on the node is held back.
                    for (index, _) in &objects {
                        settled.running.push((
                            *index,
                            format!(
                                "task {upid} ({kind} {id}) is still running on {node} after {}s (an earlier run's, or another client's); nothing was sent for this object, run again when it has ended",
                                bound.as_secs()
                            ),
                        ));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(settled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{ObjectPlan, ObjectRef};
    use proxops_runtime::kind::{Action, Anomaly, Call, Param as KindParam, Proposal};

    fn object(name: &str, node: &str, vmid: u32, proposal: Proposal) -> ObjectPlan {
        ObjectPlan {
            object: ObjectRef {
                id: proxops_core::ObjectId::new("lab", "VM", name),
                file: Some(format!("vm/lab/{name}.yaml")),
                node: Some(node.into()),
                resource: Some(format!("qemu/{vmid}")),
                listings: Vec::new(),
            },
            kind_index: 0,
            desired: None,
            running: false,
            proposal,
            depends_on: Vec::new(),
            error: None,
            taking_over: false,
            sandboxed: false,
            relocated: None,
        }
    }

    fn create(path: &str, params: &[(&str, &str)]) -> Action {
        Action {
            operation: Operation::Create,
            summary: String::new(),
            calls: vec![Call {
                method: Method::Post,
                path: path.into(),
                params: params
                    .iter()
                    .map(|(k, v)| KindParam {
                        name: k.to_string(),
                        value: v.to_string(),
                        sensitive: false,
                    })
                    .collect(),
            }],
            changes: Vec::new(),
            disturbs_availability: false,
            destructive: false,
            restore: None,
        }
    }

    fn proposal(actions: Vec<Action>, anomalies: Vec<&str>) -> Proposal {
        Proposal {
            actions,
            anomalies: anomalies
                .into_iter()
                .map(|m| Anomaly {
                    path: String::new(),
                    message: m.into(),
                    // As the kinds say it: the lock is a field, the text is for people.
                    locked: m.contains(" is locked ("),
                })
                .collect(),
            drift: Vec::new(),
            pending: Vec::new(),
        }
    }

    #[test]
    fn the_tasks_of_interest_come_from_the_plans_create_requests_and_locks() {
        let plan = ClusterPlan {
            cluster: "lab".into(),
            rollout: Vec::new(),
            objects: vec![
                object("idle", "pve03", 100, proposal(vec![], vec![])),
                object(
                    "new",
                    "pve01",
                    101,
                    proposal(
                        vec![create("/nodes/pve01/qemu", &[("vmid", "101")])],
                        vec![],
                    ),
                ),
                object(
                    "copy",
                    "pve01",
                    102,
                    proposal(
                        vec![create("/nodes/pve01/qemu/9000/clone", &[("newid", "102")])],
                        vec![],
                    ),
                ),
                object(
                    "held",
                    "pve02",
                    103,
                    proposal(
                        vec![],
                        vec!["VM 103 on pve02 is locked (create); not changing it"],
                    ),
                ),
                object(
                    "image",
                    "pve02",
                    0,
                    proposal(
                        vec![create(
                            "/nodes/pve02/storage/local/download-url",
                            &[("filename", "debian.qcow2")],
                        )],
                        vec![],
                    ),
                ),
                // A container's create (another kind's request form) names its vmid too.
                object(
                    "ct",
                    "pve03",
                    104,
                    proposal(vec![create("/nodes/pve03/lxc", &[("vmid", "104")])], vec![]),
                ),
            ],
        };
        // node -> (object index, task ids), flattened for the comparison.
        let shown: Vec<String> = interest(&plan)
            .into_iter()
            .flat_map(|(node, objects)| {
                objects.into_iter().map(move |(i, ids)| {
                    let ids: Vec<String> = ids.into_iter().collect();
                    format!("{node} #{i} {}", ids.join(","))
                })
            })
            .collect();
        assert_eq!(
            shown,
            [
                "pve01 #1 101",
                // PVE's qmclone task is named by its source.
                "pve01 #2 102,9000",
                "pve02 #3 103",
                "pve02 #4 debian.qcow2",
                "pve03 #5 104"
            ]
        );
    }

    #[test]
    fn only_running_tasks_of_an_active_listing_count() {
        let list = serde_json::json!([
            {"upid": "UPID:pve01:1:2:3:qmcreate:101:root@pam:", "type": "qmcreate", "id": "101", "status": "RUNNING"},
            {"upid": "UPID:pve01:1:2:4:download:a.iso:root@pam:", "type": "download", "id": "a.iso"},
            {"upid": "UPID:pve01:1:2:5:qmstart:102:root@pam:", "type": "qmstart", "id": 102, "status": "OK"},
            {"type": "qmclone", "id": "9000"}
        ]);
        let tasks = active_tasks(&list);
        assert_eq!(
            tasks.iter().map(|t| t.1.as_str()).collect::<Vec<_>>(),
            vec!["qmcreate", "download"]
        );
        assert!(active_tasks(&serde_json::json!({"not": "a list"})).is_empty());
    }
}
