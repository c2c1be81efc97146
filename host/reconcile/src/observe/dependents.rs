//! Fail closed on dependencies: an object whose dependency could not be planned, or cannot
//! serve the object's node, is blocked before any call.

use std::collections::{HashMap, HashSet};

use proxops_core::ObjectId;

use crate::error::{Blocker, PlanError};
use crate::plan::ClusterPlan;

/// The anomaly path by which a kind says an object cannot serve its referrers on a node
/// (a file not placed there, a storage that cannot hold it there, a failed storage read):
/// `unavailable-on:<node>`. A convention of contract 0.1.0 (see ARCHITECTURE.md).
pub const UNAVAILABLE_ON: &str = "unavailable-on:";

/// Block, before any call, every object whose dependency could not be planned (or is itself
/// blocked), or cannot serve the object's node: a VM is never created or started on a node
/// where its ISO or disk image is not.
pub(super) fn block_dependents(plan: &mut ClusterPlan) {
    loop {
        // Object -> (the nodes it cannot serve, None for all; why).
        let mut unavailable: HashMap<&ObjectId, (Option<HashSet<&str>>, Blocker)> = HashMap::new();
        for o in plan.objects.iter().filter(|o| o.object.file.is_some()) {
            let id = &o.object.id;
            if o.error.is_some() {
                unavailable.insert(id, (None, Blocker::NotPlanned(id.clone())));
                continue;
            }
            for a in &o.proposal.anomalies {
                if let Some(node) = a.path.strip_prefix(UNAVAILABLE_ON) {
                    let why = Blocker::NotOnNode {
                        id: id.clone(),
                        node: node.to_string(),
                        why: a.message.clone(),
                    };
                    let entry = unavailable
                        .entry(id)
                        .or_insert_with(|| (Some(HashSet::new()), why.clone()));
                    if let Some(nodes) = &mut entry.0 {
                        nodes.insert(node);
                    }
                    entry.1 = why;
                }
            }
        }
        let mut blocked = Vec::new();
        for (i, o) in plan.objects.iter().enumerate() {
            if o.error.is_some() || !o.has_actions() {
                continue;
            }
            let node = o.object.node.as_deref();
            let why = o.depends_on.iter().find_map(|d| {
                let (nodes, why) = unavailable.get(d)?;
                match nodes {
                    None => Some(why.clone()),
                    Some(nodes) => node.filter(|n| nodes.contains(n)).map(|_| why.clone()),
                }
            });
            if let Some(why) = why {
                blocked.push((i, why));
            }
        }
        if blocked.is_empty() {
            return;
        }
        for (i, why) in blocked {
            let o = &mut plan.objects[i];
            o.proposal.actions.clear();
            o.error = Some(PlanError::Blocked(why));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{UNAVAILABLE_ON, block_dependents};
    use crate::error::PlanError;
    use crate::plan::{ClusterPlan, ObjectPlan, ObjectRef};
    use proxops_core::ObjectId;
    use proxops_runtime::kind::{Action, Anomaly, Operation, Proposal};

    fn object(kind: &str, name: &str, node: &str, deps: &[&str]) -> ObjectPlan {
        ObjectPlan {
            object: ObjectRef {
                id: ObjectId::new("lab", kind, name),
                file: Some(format!("{}/lab/{name}.yaml", kind.to_lowercase())),
                node: Some(node.into()),
                resource: None,
                listings: Vec::new(),
            },
            kind_index: 0,
            desired: None,
            running: false,
            proposal: Proposal {
                actions: vec![Action {
                    operation: Operation::Create,
                    summary: format!("create {name}"),
                    calls: Vec::new(),
                    changes: Vec::new(),
                    disturbs_availability: false,
                    destructive: false,
                    restore: None,
                }],
                drift: Vec::new(),
                pending: Vec::new(),
                anomalies: Vec::new(),
            },
            depends_on: deps
                .iter()
                .map(|d| {
                    let (kind, name) = d.split_once('/').expect("Kind/name");
                    ObjectId::new("lab", kind, name)
                })
                .collect(),
            error: None,
            taking_over: false,
            sandboxed: false,
            relocated: None,
        }
    }

    #[test]
    fn dependents_are_blocked_on_the_nodes_their_dependency_cannot_serve() {
        let mut iso = object("ISO", "installer", "", &[]);
        iso.object.node = None;
        iso.proposal.anomalies.push(Anomaly {
            path: format!("{UNAVAILABLE_ON}pve02"),
            message: "not placed there".into(),
            locked: false,
        });
        let mut broken = object("DiskImage", "noble", "", &[]);
        broken.error = Some(PlanError::Kind("storage read failed".into()));
        broken.proposal.actions.clear();
        let mut plan = ClusterPlan {
            cluster: "lab".into(),
            rollout: Vec::new(),
            objects: vec![
                iso,
                broken,
                object("VM", "a", "pve01", &["ISO/installer"]),
                object("VM", "b", "pve02", &["ISO/installer"]),
                object("TemplateVM", "t", "pve01", &["DiskImage/noble"]),
                object("VM", "c", "pve01", &["TemplateVM/t"]),
                object("VM", "d", "pve02", &[]),
            ],
        };
        block_dependents(&mut plan);
        let blocked: Vec<(&str, bool)> = plan
            .objects
            .iter()
            .map(|o| {
                (
                    o.object.id.name.as_str(),
                    o.error.is_some() && !o.has_actions(),
                )
            })
            .collect();
        assert_eq!(
            blocked,
            [
                ("installer", false),
                ("noble", true),
                ("a", false),
                ("b", true),
                ("t", true),
                ("c", true),
                ("d", false),
            ]
        );
        let why = plan.objects[3].error.as_ref().unwrap().to_string();
        assert!(why.contains("not available on node pve02"), "{why}");
    }
}
