//! Observe and plan one cluster: one GET /cluster/resources, the reads each kind asks for
//! (deduplicated, bounded concurrency), then the kinds' plans, in parallel.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use proxops_core::{Diagnostic, ObjectId};
use proxops_pve::{Client, Param};
use proxops_runtime::SecretSource;
use proxops_runtime::kind::{Call, Method, Observation, Proposal, Read, Resolved};
use serde_json::Value;

use crate::error::PlanError;
use crate::ownership::{AdoptClaim, LiveGuest};
use crate::plan::{ClusterPlan, ObjectPlan, ObjectRef, method_name};
use crate::workers::par_map;
use crate::{KindRegistry, Object};

mod dependents;
mod gate;
mod reads;

pub use dependents::UNAVAILABLE_ON;
use dependents::block_dependents;
use gate::gate;
use reads::{Answer, perform_reads, read_key};

/// Why a cluster could not be planned at all.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    #[error("reading the cluster: {0}")]
    Pve(#[from] proxops_pve::PveError),
    #[error("{} conflicts with live PVE objects", .0.len())]
    Conflicts(Vec<Diagnostic>),
    #[error("{0}")]
    Listing(String),
}

/// Does `path` match the template (`{x}` matches one non-empty segment)?
pub fn path_allowed(templates: &[String], path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    templates.iter().any(|t| {
        let parts: Vec<&str> = t.split('/').collect();
        parts.len() == segments.len()
            && parts
                .iter()
                .zip(&segments)
                .all(|(p, s)| (p.starts_with('{') && p.ends_with('}') && !s.is_empty()) || p == s)
    })
}

pub(crate) fn to_pve_method(m: Method) -> proxops_pve::Method {
    match m {
        Method::Get => proxops_pve::Method::Get,
        Method::Post => proxops_pve::Method::Post,
        Method::Put => proxops_pve::Method::Put,
        Method::Delete => proxops_pve::Method::Delete,
    }
}

pub(crate) fn to_pve_params(call: &Call) -> Vec<Param> {
    call.params
        .iter()
        .map(|p| Param {
            name: p.name.clone(),
            value: p.value.clone(),
            sensitive: p.sensitive,
        })
        .collect()
}

/// One thing to plan: a manifest's object, or a live object a kind claimed (prune).
pub(super) struct Item<'a> {
    object: ObjectRef,
    kind: usize,
    desired: Option<&'a str>,
    /// The `/cluster/resources` entry, and its JSON text (what kinds get, printed once).
    live: Option<(&'a Value, String)>,
    depends_on: Vec<ObjectId>,
    resolved: Vec<Resolved>,
    referrers: Vec<Resolved>,
    /// The manifest's explicit take-over, if any.
    adopt: Option<&'a AdoptClaim>,
    /// The object's own vmid (guest id space).
    vmid: Option<u64>,
    /// Templates it references: their vmid and live guest (absent: created in this run).
    sources: Vec<(String, u64, Option<LiveGuest>)>,
}

/// Every `/cluster/resources` entry: guests, and the nodes and storages (the node list is
/// checked before any write, and comes from the same read).
pub async fn resources(client: &Client) -> Result<Vec<Value>, ObserveError> {
    let data = client.get("/cluster/resources", &[]).await?;
    match data {
        Value::Array(entries) => Ok(entries),
        other => Err(ObserveError::Listing(format!(
            "GET /cluster/resources answered {} instead of a list; nothing is planned from it",
            match other {
                Value::Null => "null",
                Value::Object(_) => "an object",
                _ => "a scalar",
            }
        ))),
    }
}

/// Run guest calls (CPU work on scoped threads) from async code: through `block_in_place` on
/// a multi-threaded runtime, so the runtime's other tasks move to another worker; directly
/// on a current-thread runtime, where `block_in_place` would panic.
fn off_runtime<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// What a planning cycle of one cluster works with.
#[derive(Clone)]
pub struct Cycle<'a> {
    pub registry: &'a KindRegistry,
    pub client: &'a Client,
    pub cluster: &'a str,
    /// The cluster's validated objects.
    pub objects: &'a [Object],
    /// Reads in flight at once.
    pub read_concurrency: usize,
    /// The cluster's secrets, for kinds granted them.
    pub secrets: Option<Arc<dyn SecretSource>>,
}

/// Plan the cycle's objects against the live cluster. With `only`, plan just those objects
/// (later passes of an apply), and skip prune discovery.
pub async fn plan_cluster(
    cycle: &Cycle<'_>,
    only: Option<&HashSet<ObjectId>>,
) -> Result<ClusterPlan, ObserveError> {
    let &Cycle {
        registry,
        client,
        cluster,
        objects,
        read_concurrency,
        ref secrets,
    } = cycle;
    let started = std::time::Instant::now();
    let live = resources(client).await?;
    tracing::debug!(
        "{cluster}: listed {} guests in {:?}",
        live.iter()
            .filter(|e| LiveGuest::from_entry(e).is_some())
            .count(),
        started.elapsed()
    );
    check_live_conflicts(objects, &live)?;
    let nodes = cluster_nodes(&live)?;

    let mut items = manifest_items(objects, &live, only);
    if only.is_none() {
        items.extend(prune_items(registry, cluster, objects, &live));
    }

    let wanted = wanted_reads(registry, &items);
    let step = std::time::Instant::now();
    let reads = perform_reads(client, &wanted, read_concurrency).await;
    tracing::debug!(
        "{cluster}: read {} answers in {:?} ({read_concurrency} at a time)",
        reads.len(),
        step.elapsed()
    );
    let inputs = observations(wanted, &mut items, reads);
    let planned = plan_items(registry, &items, &inputs, secrets);
    tracing::debug!(
        "{cluster}: planned {} objects, {:?} since the list",
        planned.len(),
        started.elapsed()
    );

    let mut plan = ClusterPlan {
        cluster: cluster.to_string(),
        objects: Vec::new(),
    };
    for (item, (proposal, error)) in items.into_iter().zip(planned) {
        let (proposal, error) = match error {
            Some(e) => (proposal, Some(e)),
            None => gate(&item, proposal, &nodes),
        };
        let running = item
            .live
            .as_ref()
            .and_then(|(entry, _)| entry.get("status"))
            .and_then(Value::as_str)
            == Some("running");
        plan.objects.push(ObjectPlan {
            object: item.object,
            kind_index: item.kind,
            desired: item.desired.map(str::to_string),
            running,
            proposal,
            depends_on: item.depends_on,
            error,
        });
    }
    block_dependents(&mut plan);
    Ok(plan)
}

/// The cluster's nodes, from the same listing. Without them no write can be checked against
/// the node list: fail closed.
fn cluster_nodes(live: &[Value]) -> Result<HashSet<String>, ObserveError> {
    let nodes: HashSet<String> = live
        .iter()
        .filter(|e| e.get("type").and_then(Value::as_str) == Some("node"))
        .filter_map(|e| e.get("node").and_then(Value::as_str).map(str::to_string))
        .collect();
    if nodes.is_empty() {
        return Err(ObserveError::Listing(
            "GET /cluster/resources lists no nodes, so proxops cannot check where it would write; give the token Sys.Audit on /nodes (or /) and run again".into(),
        ));
    }
    Ok(nodes)
}

/// One item per manifest object (or per object in `only`), with its live entry, its
/// references resolved and the templates it clones from.
fn manifest_items<'a>(
    objects: &'a [Object],
    live: &'a [Value],
    only: Option<&HashSet<ObjectId>>,
) -> Vec<Item<'a>> {
    let by_id: HashMap<&str, &Value> = live
        .iter()
        .filter_map(|e| e.get("id").and_then(Value::as_str).map(|id| (id, e)))
        .collect();
    let by_name: HashMap<(&str, &str), &Object> = objects
        .iter()
        .map(|o| ((o.id.kind.as_str(), o.id.name.as_str()), o))
        .collect();
    let guest_vmid = |o: &Object| {
        (o.key.space == "guest-id")
            .then(|| o.key.key.parse::<u64>().ok())
            .flatten()
    };

    let refs = crate::validate::RefIndex::new(objects);
    let mut items: Vec<Item<'a>> = Vec::new();
    for o in objects {
        if only.is_some_and(|ids| !ids.contains(&o.id)) {
            continue;
        }
        let entry = o
            .key
            .resource_id
            .as_deref()
            .and_then(|id| by_id.get(id).copied());
        items.push(Item {
            object: ObjectRef {
                id: o.id.clone(),
                file: Some(o.file.clone()),
                node: o.key.node.clone(),
                resource: o.key.resource_id.clone(),
            },
            kind: o.kind,
            desired: Some(&o.desired),
            live: entry.map(|e| (e, e.to_string())),
            depends_on: o
                .references
                .iter()
                .map(|r| o.id.sibling(r.kind.as_str(), r.name.as_str()))
                .collect(),
            resolved: refs.resolve(o),
            referrers: refs.referrers(o),
            adopt: o.adopt.as_ref(),
            vmid: guest_vmid(o),
            sources: o
                .references
                .iter()
                .filter_map(|r| by_name.get(&(r.kind.as_str(), r.name.as_str())))
                .filter_map(|t| {
                    let vmid = guest_vmid(t)?;
                    let guest = t
                        .key
                        .resource_id
                        .as_deref()
                        .and_then(|id| by_id.get(id))
                        .and_then(|e| LiveGuest::from_entry(e));
                    Some((format!("{} {}", t.id.kind, t.id.name), vmid, guest))
                })
                .collect(),
        });
    }
    items
}

/// Live guests no manifest names: a kind may claim them for pruning.
fn prune_items<'a>(
    registry: &KindRegistry,
    cluster: &str,
    objects: &[Object],
    live: &'a [Value],
) -> Vec<Item<'a>> {
    let mut items = Vec::new();
    let matched: HashSet<&str> = objects
        .iter()
        .filter_map(|o| o.key.resource_id.as_deref())
        .collect();
    let unmatched: Vec<&Value> = live
        .iter()
        .filter(|e| {
            e.get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| !matched.contains(id))
        })
        .collect();
    let claims = off_runtime(|| {
        par_map(registry, &unmatched, |instances, entry| {
            let text = entry.to_string();
            let kind = (0..registry.len()).find(|&k| {
                instances
                    .get(k)
                    .and_then(|i| i.claims(&text))
                    .unwrap_or(false)
            });
            (kind, text)
        })
    });
    for (entry, (kind, text)) in unmatched.into_iter().zip(claims) {
        let Some(kind) = kind else { continue };
        let id = entry
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let name = entry
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| id.clone());
        items.push(Item {
            object: ObjectRef {
                id: ObjectId::new(cluster, registry.get(kind).info().kind.clone(), name),
                file: None,
                node: entry
                    .get("node")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                resource: Some(id),
            },
            kind,
            desired: None,
            live: Some((entry, text)),
            depends_on: Vec::new(),
            resolved: Vec::new(),
            referrers: Vec::new(),
            adopt: None,
            vmid: LiveGuest::from_entry(entry).map(|g| g.vmid),
            sources: Vec::new(),
        });
    }
    items
}

/// The reads each item's kind asks for (GETs inside its declared paths only), each with its
/// key (path and parameters), computed once: it de-duplicates the reads and hands each
/// answer to its readers.
fn wanted_reads(
    registry: &KindRegistry,
    items: &[Item<'_>],
) -> Vec<Result<Vec<(String, Call)>, PlanError>> {
    let wanted: Vec<Result<Vec<Call>, PlanError>> = off_runtime(|| {
        par_map(registry, items, |instances, item| {
            let live = item.live.as_ref().map(|(_, text)| text.as_str());
            let calls = instances
                .get(item.kind)
                .and_then(|i| i.observe(item.desired, live, &item.referrers))
                .map_err(|e| PlanError::Kind(e.to_string()))?;
            let allowed = &registry.get(item.kind).info().api_paths;
            for c in &calls {
                if c.method != Method::Get {
                    return Err(PlanError::ObservedWrite {
                        method: method_name(c.method),
                        path: c.path.clone(),
                    });
                }
                if !path_allowed(allowed, &c.path) {
                    return Err(PlanError::ObservedOutside(c.path.clone()));
                }
            }
            Ok(calls)
        })
    });

    wanted
        .into_iter()
        .map(|calls| calls.map(|cs| cs.into_iter().map(|c| (read_key(&c), c)).collect()))
        .collect()
}

/// Each item's observation: its live entry and the answers to its reads. An answer moves to
/// its last reader instead of being copied: at 10,000 VMs the answers are tens of MiB.
fn observations(
    wanted: Vec<Result<Vec<(String, Call)>, PlanError>>,
    items: &mut [Item<'_>],
    mut reads: HashMap<String, Answer>,
) -> Vec<(usize, Result<Observation, PlanError>)> {
    let mut take = |key: &str| -> (u16, String) {
        let Some(read) = reads.get_mut(key) else {
            return (0, "null".into());
        };
        read.readers -= 1;
        if read.readers == 0 {
            reads
                .remove(key)
                .map(|r| r.answer)
                .unwrap_or((0, "null".into()))
        } else {
            read.answer.clone()
        }
    };
    wanted
        .into_iter()
        .zip(items.iter_mut())
        .enumerate()
        .map(|(i, (calls, item))| {
            // The entry's text moves into the observation: nothing reads it after plan.
            let live = item.live.as_mut().map(|(_, text)| std::mem::take(text));
            let observation = calls.map(|calls| Observation {
                live,
                reads: calls
                    .into_iter()
                    .map(|(key, call)| {
                        let (status, body) = take(&key);
                        Read { call, status, body }
                    })
                    .collect(),
            });
            (i, observation)
        })
        .collect()
}

/// The kinds' plans, in parallel; a proposal with a call outside its kind's declared paths
/// is refused whole.
fn plan_items(
    registry: &KindRegistry,
    items: &[Item<'_>],
    inputs: &[(usize, Result<Observation, PlanError>)],
    secrets: &Option<Arc<dyn SecretSource>>,
) -> Vec<(Proposal, Option<PlanError>)> {
    off_runtime(|| {
        par_map(registry, inputs, |instances, (i, observation)| {
            let item = &items[*i];
            let empty = || Proposal {
                actions: Vec::new(),
                drift: Vec::new(),
                pending: Vec::new(),
                anomalies: Vec::new(),
            };
            let observation = match observation {
                Ok(o) => o,
                Err(e) => return (empty(), Some(e.clone())),
            };
            let result = instances.get(item.kind).and_then(|inst| {
                inst.set_secrets(secrets.clone());
                inst.plan(item.desired, &item.resolved, &item.referrers, observation)
            });
            match result {
                Err(e) => (empty(), Some(PlanError::Kind(e.to_string()))),
                Ok(Err(diags)) => {
                    let text: Vec<String> = diags
                        .iter()
                        .map(|d| {
                            if d.path.is_empty() {
                                d.message.clone()
                            } else {
                                format!("{}: {}", d.path, d.message)
                            }
                        })
                        .collect();
                    (empty(), Some(PlanError::Invalid(text)))
                }
                Ok(Ok(proposal)) => {
                    let allowed = &registry.get(item.kind).info().api_paths;
                    let refused: Vec<String> = proposal
                        .actions
                        .iter()
                        .flat_map(|a| &a.calls)
                        .filter(|c| !path_allowed(allowed, &c.path))
                        .map(|c| format!("{} {}", method_name(c.method), c.path))
                        .collect();
                    if refused.is_empty() {
                        (proposal, None)
                    } else {
                        (empty(), Some(PlanError::OutsideApiPaths(refused)))
                    }
                }
            }
        })
    })
}

/// A VM id that a manifest claims but PVE holds as a container is a conflict: qm and lxc
/// share one id pool.
fn check_live_conflicts(objects: &[Object], live: &[Value]) -> Result<(), ObserveError> {
    let mut by_vmid: BTreeMap<String, &Value> = BTreeMap::new();
    for e in live {
        if let Some(vmid) = e.get("vmid").and_then(Value::as_u64) {
            by_vmid.insert(vmid.to_string(), e);
        }
    }
    let mut conflicts = Vec::new();
    for o in objects.iter().filter(|o| o.key.space == "guest-id") {
        let Some(entry) = by_vmid.get(&o.key.key) else {
            continue;
        };
        let id = entry.get("id").and_then(Value::as_str).unwrap_or_default();
        if o.key.resource_id.as_deref() == Some(id) {
            continue;
        }
        let kind = entry.get("type").and_then(Value::as_str).unwrap_or("guest");
        let node = entry.get("node").and_then(Value::as_str).unwrap_or("?");
        let what = if kind == "lxc" {
            "an LXC container"
        } else {
            "another guest"
        };
        conflicts.push(Diagnostic::error(
            &o.file,
            "spec.vmid",
            format!("vmid {} is taken by {what} ({id}) on node {node}; VMs and containers share one id pool", o.key.key),
        ));
    }
    if conflicts.is_empty() {
        Ok(())
    } else {
        Err(ObserveError::Conflicts(conflicts))
    }
}

#[cfg(test)]
mod tests {
    use super::path_allowed;

    #[test]
    fn path_templates_match_one_segment_per_placeholder() {
        let t = vec![
            "/nodes/{node}/qemu".to_string(),
            "/nodes/{node}/qemu/{vmid}/config".to_string(),
        ];
        for (path, ok) in [
            ("/nodes/pve01/qemu", true),
            ("/nodes/pve01/qemu/100/config", true),
            ("/nodes/pve01/qemu/100", false),
            ("/nodes//qemu", false),
            ("/access/users", false),
            ("/nodes/pve01/qemu/100/config/extra", false),
        ] {
            assert_eq!(path_allowed(&t, path), ok, "{path}");
        }
    }
}
