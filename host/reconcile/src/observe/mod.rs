//! Observe and plan one cluster: one GET /cluster/resources, the reads each kind asks for
//! (deduplicated, bounded concurrency), then the kinds' plans, in parallel.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use proxops_core::{Diagnostic, ObjectId};
use proxops_pve::{Client, Param};
use proxops_runtime::SecretSource;
use proxops_runtime::kind::{Call, Method, Observation, Proposal, Read, Resolved};

use crate::error::PlanError;
use crate::live::Entry;
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
    /// The object's entry in its kind's listings.
    live: Option<&'a Entry>,
    depends_on: Vec<ObjectId>,
    resolved: Vec<Resolved>,
    referrers: Vec<Resolved>,
    /// A live entry no manifest names that more than one kind claimed, or whose claim
    /// trapped: nothing is planned for it, the reason is reported instead.
    refusal: Option<PlanError>,
    /// The manifest's explicit take-over, if any.
    adopt: Option<&'a AdoptClaim>,
    /// The object's own vmid (guest id space).
    vmid: Option<u64>,
    /// Templates it references: their vmid and live guest (absent: created in this run).
    sources: Vec<(String, u64, Option<LiveGuest>)>,
}

/// Every `/cluster/resources` entry: guests, and the nodes and storages (the node list is
/// checked before any write, and comes from the same read).
pub async fn resources(client: &Client) -> Result<Vec<Entry>, ObserveError> {
    listing(client, CLUSTER_RESOURCES).await
}

/// The listing every cycle reads: guests, nodes, storages.
pub const CLUSTER_RESOURCES: &str = "/cluster/resources";

/// The entries of one listing (a GET answered with a list), each kept as the text PVE sent.
pub async fn listing(client: &Client, path: &str) -> Result<Vec<Entry>, ObserveError> {
    let data = client.get_text(path, &[]).await?;
    crate::live::entries(&data).map_err(|what| {
        ObserveError::Listing(format!(
            "GET {path} answered {what} instead of a list; nothing is planned from it"
        ))
    })
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
    let listings = read_listings(registry, client).await?;
    let live = &listings[CLUSTER_RESOURCES];
    tracing::debug!(
        "{cluster}: listed {} guests in {:?}",
        live.iter()
            .filter(|e| LiveGuest::from_entry(e).is_some())
            .count(),
        started.elapsed()
    );
    check_live_conflicts(objects, live)?;
    let nodes = cluster_nodes(live)?;

    let mut items = manifest_items(registry, objects, &listings, only);
    if only.is_none() {
        items.extend(prune_items(registry, cluster, objects, &listings));
    }

    let step = std::time::Instant::now();
    let wanted = wanted_reads(registry, &items);
    tracing::debug!(
        "{cluster}: the kinds named their reads for {} objects in {:?}",
        items.len(),
        step.elapsed()
    );
    let step = std::time::Instant::now();
    let reads = perform_reads(client, &wanted, read_concurrency).await;
    tracing::debug!(
        "{cluster}: read {} answers in {:?} ({read_concurrency} at a time)",
        reads.len(),
        step.elapsed()
    );
    let inputs = observations(wanted, &mut items, reads);
    let step = std::time::Instant::now();
    let planned = plan_items(registry, &items, &inputs, secrets);
    tracing::debug!(
        "{cluster}: planned {} objects in {:?}, {:?} since the list",
        planned.len(),
        step.elapsed(),
        started.elapsed()
    );

    // A kind stopped in this run (a trap, a deadline, its budget) fails all its objects, not
    // only those whose calls came after the failure: which of them were planned first is up to
    // the threads, and a kind that failed is not trusted with any write.
    let stopped: HashMap<usize, String> = (0..registry.len())
        .filter_map(|k| Some((k, registry.run(k).failure()?.to_string())))
        .collect();
    let mut plan = ClusterPlan {
        cluster: cluster.to_string(),
        objects: Vec::new(),
    };
    for ((item, (mut proposal, error)), (_, observed)) in
        items.into_iter().zip(planned).zip(&inputs)
    {
        let error = match (error, stopped.get(&item.kind)) {
            (None, Some(why)) => {
                proposal.actions.clear();
                Some(PlanError::Kind(format!(
                    "the {} kind was stopped in this run ({why}); none of its objects is changed",
                    registry.get(item.kind).info().kind
                )))
            }
            (error, _) => error,
        };
        let (proposal, error, taking_over) = match (error, item.refusal.clone()) {
            (_, Some(refusal)) => (proposal, Some(refusal), false),
            (Some(e), None) => (proposal, Some(e), false),
            (None, None) => {
                let (proposal, error) = gate(&item, proposal, observed.as_ref().ok(), &nodes);
                (proposal, error, gate::takes_over(&item))
            }
        };
        let running = item.live.and_then(|entry| entry.str("status")) == Some("running");
        plan.objects.push(ObjectPlan {
            object: item.object,
            kind_index: item.kind,
            desired: item.desired.map(str::to_string),
            running,
            proposal,
            depends_on: item.depends_on,
            error,
            taking_over,
        });
    }
    block_dependents(&mut plan);
    Ok(plan)
}

/// The cluster's nodes, from the same listing. Without them no write can be checked against
/// the node list: fail closed.
fn cluster_nodes(live: &[Entry]) -> Result<HashSet<String>, ObserveError> {
    let nodes: HashSet<String> = live
        .iter()
        .filter(|e| e.str("type") == Some("node"))
        .filter_map(|e| e.str("node").map(str::to_string))
        .collect();
    if nodes.is_empty() {
        return Err(ObserveError::Listing(
            "GET /cluster/resources lists no nodes, so proxops cannot check where it would write; give the token Sys.Audit on /nodes (or /) and run again".into(),
        ));
    }
    Ok(nodes)
}

/// Every listing a kind declared (and `/cluster/resources`, which the node list comes from),
/// each read once.
async fn read_listings(
    registry: &KindRegistry,
    client: &Client,
) -> Result<HashMap<String, Vec<Entry>>, ObserveError> {
    let mut paths = vec![CLUSTER_RESOURCES.to_string()];
    for (kind, _) in registry.iter() {
        for l in &kind.info().listings {
            if !paths.contains(&l.path) {
                paths.push(l.path.clone());
            }
        }
    }
    let mut listings = HashMap::new();
    for path in paths {
        let entries = listing(client, &path).await?;
        listings.insert(path, entries);
    }
    Ok(listings)
}

/// A kind's listings as (path, id field).
fn kind_listings(registry: &KindRegistry, kind: usize) -> Vec<(String, String)> {
    registry
        .get(kind)
        .info()
        .listings
        .iter()
        .map(|l| (l.path.clone(), l.id_field.clone()))
        .collect()
}

/// The id of a listing entry: the value of `field`, a string or a number.
fn entry_id<'v>(entry: &'v Entry, field: &str) -> Option<std::borrow::Cow<'v, str>> {
    entry.get(field)?.id()
}

/// One item per manifest object (or per object in `only`), with its live entry (found in
/// its kind's listings by its resource id), its references resolved and the templates it
/// clones from.
fn manifest_items<'a>(
    registry: &KindRegistry,
    objects: &'a [Object],
    listings: &'a HashMap<String, Vec<Entry>>,
    only: Option<&HashSet<ObjectId>>,
) -> Vec<Item<'a>> {
    // Per (listing, id field): entries by id.
    let mut by_id: HashMap<(&str, &str), HashMap<String, &Entry>> = HashMap::new();
    for (kind, _) in registry.iter() {
        for l in &kind.info().listings {
            let key = (l.path.as_str(), l.id_field.as_str());
            if by_id.contains_key(&key) {
                continue;
            }
            let Some((path, entries)) = listings.get_key_value(&l.path) else {
                continue;
            };
            let index = entries
                .iter()
                .filter_map(|e| entry_id(e, &l.id_field).map(|id| (id.into_owned(), e)))
                .collect();
            by_id.insert((path.as_str(), l.id_field.as_str()), index);
        }
    }
    let find = |kind: usize, id: &str| -> Option<&'a Entry> {
        registry.get(kind).info().listings.iter().find_map(|l| {
            by_id
                .get(&(l.path.as_str(), l.id_field.as_str()))
                .and_then(|m| m.get(id).copied())
        })
    };
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
        let entry = o.key.resource_id.as_deref().and_then(|id| find(o.kind, id));
        items.push(Item {
            object: ObjectRef {
                id: o.id.clone(),
                file: Some(o.file.clone()),
                node: o.key.node.clone(),
                resource: o.key.resource_id.clone(),
                listings: kind_listings(registry, o.kind),
            },
            kind: o.kind,
            desired: Some(&o.desired),
            live: entry,
            depends_on: o
                .references
                .iter()
                .map(|r| o.id.sibling(r.kind.as_str(), r.name.as_str()))
                .collect(),
            resolved: refs.resolve(o),
            referrers: refs.referrers(o),
            refusal: None,
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
                        .and_then(|id| find(t.kind, id))
                        .and_then(LiveGuest::from_entry);
                    Some((format!("{} {}", t.id.kind, t.id.name), vmid, guest))
                })
                .collect(),
        });
    }
    items
}

/// Live entries no manifest names, offered to every kind that declared their listing: an
/// entry exactly one kind claims is a prune candidate of that kind; one that two kinds claim,
/// or whose claim trapped, is reported and left alone.
fn prune_items<'a>(
    registry: &KindRegistry,
    cluster: &str,
    objects: &[Object],
    listings: &'a HashMap<String, Vec<Entry>>,
) -> Vec<Item<'a>> {
    let matched: HashSet<&str> = objects
        .iter()
        .filter_map(|o| o.key.resource_id.as_deref())
        .collect();
    // Listing -> the kinds that declared it, each with its id field. Kinds are grouped by
    // the listing alone: one live entry has exactly one claimant, whatever field each kind
    // reads its id from.
    let mut claimants: Vec<(&str, Vec<(usize, &str)>)> = Vec::new();
    for k in 0..registry.len() {
        for l in &registry.get(k).info().listings {
            let declared = (k, l.id_field.as_str());
            match claimants.iter_mut().find(|(path, _)| *path == l.path) {
                Some((_, kinds)) => kinds.push(declared),
                None => claimants.push((l.path.as_str(), vec![declared])),
            }
        }
    }
    let mut items = Vec::new();
    for (path, kinds) in claimants {
        let Some(entries) = listings.get(path) else {
            continue;
        };
        // An entry a manifest names, by the id any of its kinds reads, is not a prune candidate.
        let unmatched: Vec<&'a Entry> = entries
            .iter()
            .filter(|e| {
                let ids: Vec<_> = kinds
                    .iter()
                    .filter_map(|(_, field)| entry_id(e, field))
                    .collect();
                !ids.is_empty() && !ids.iter().any(|id| matched.contains(id.as_ref()))
            })
            .collect();
        let claims = off_runtime(|| {
            par_map(registry, &unmatched, |instances, entry| {
                // A kind is asked about the entries that carry its id field.
                kinds
                    .iter()
                    .filter(|(_, field)| entry_id(entry, field).is_some())
                    .map(|&(k, _)| {
                        let answer = instances
                            .get(k)
                            .and_then(|i| i.claims(path, entry.text()))
                            .map_err(|e| e.to_string());
                        (k, answer)
                    })
                    .collect::<Vec<(usize, Result<bool, String>)>>()
            })
        });
        for (entry, answers) in unmatched.into_iter().zip(claims) {
            let claimed: Vec<usize> = answers
                .iter()
                .filter(|(_, a)| matches!(a, Ok(true)))
                .map(|(k, _)| *k)
                .collect();
            let trapped: Vec<(usize, String)> = answers
                .iter()
                .filter_map(|(k, a)| {
                    a.as_ref()
                        .err()
                        .map(|e| (*k, format!("{}: {e}", registry.get(*k).info().kind)))
                })
                .collect();
            // The entry is shown as the kind it concerns: its claimant, else the kind that
            // trapped deciding it.
            let Some(kind) = claimed
                .first()
                .copied()
                .or(trapped.first().map(|(k, _)| *k))
            else {
                continue;
            };
            let field = kinds
                .iter()
                .find(|(k, _)| *k == kind)
                .map_or("id", |(_, f)| *f);
            let Some(id) = entry_id(entry, field).map(std::borrow::Cow::into_owned) else {
                continue;
            };
            let refusal = if !trapped.is_empty() {
                let said: Vec<&str> = trapped.iter().map(|(_, e)| e.as_str()).collect();
                Some(PlanError::Kind(format!(
                    "deciding whether {path} entry `{id}` may be pruned failed, so it is left alone: {}",
                    said.join("; ")
                )))
            } else if claimed.len() > 1 {
                let names: Vec<&str> = claimed
                    .iter()
                    .map(|k| registry.get(*k).info().kind.as_str())
                    .collect();
                Some(PlanError::Kind(format!(
                    "{path} entry `{id}` is claimed by {} kinds ({}); exactly one kind may own a live object, so nothing is pruned",
                    names.len(),
                    names.join(", ")
                )))
            } else {
                None
            };
            let name = entry
                .str("name")
                .map(str::to_string)
                .unwrap_or_else(|| id.clone());
            items.push(Item {
                object: ObjectRef {
                    id: ObjectId::new(cluster, registry.get(kind).info().kind.clone(), name),
                    file: None,
                    node: entry.str("node").map(str::to_string),
                    resource: Some(id),
                    listings: kind_listings(registry, kind),
                },
                kind,
                desired: None,
                live: Some(entry),
                depends_on: Vec::new(),
                resolved: Vec::new(),
                referrers: Vec::new(),
                refusal,
                adopt: None,
                vmid: LiveGuest::from_entry(entry).map(|g| g.vmid),
                sources: Vec::new(),
            });
        }
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
            if let Some(refusal) = &item.refusal {
                return Err(refusal.clone());
            }
            let live = item.live.map(Entry::text);
            let calls = instances
                .get(item.kind)
                .and_then(|i| i.observe(item.desired, live, &item.resolved, &item.referrers))
                .map_err(|e| PlanError::Kind(e.to_string()))?;
            let declared = &registry.get(item.kind).info().calls;
            for c in &calls {
                if c.method != Method::Get {
                    return Err(PlanError::ObservedWrite {
                        method: method_name(c.method),
                        path: c.path.clone(),
                    });
                }
                if !crate::grant::call_allowed(declared, c.method, &c.path) {
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
            let live = item.live.map(|e| e.text().to_string());
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
                    let info = registry.get(item.kind).info();
                    let trust = registry.trust(item.kind);
                    let refused: Vec<String> = proposal
                        .actions
                        .iter()
                        .flat_map(|a| {
                            a.calls
                                .iter()
                                .chain(a.restore.iter().flat_map(|r| &r.calls))
                        })
                        .filter_map(|c| crate::grant::check_call(trust, info, c).err())
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
fn check_live_conflicts(objects: &[Object], live: &[Entry]) -> Result<(), ObserveError> {
    let mut by_vmid: BTreeMap<String, &Entry> = BTreeMap::new();
    for e in live {
        if let Some(vmid) = e.get("vmid").and_then(crate::live::Field::as_u64) {
            by_vmid.insert(vmid.to_string(), e);
        }
    }
    let mut conflicts = Vec::new();
    for o in objects.iter().filter(|o| o.key.space == "guest-id") {
        let Some(entry) = by_vmid.get(&o.key.key) else {
            continue;
        };
        let id = entry.str("id").unwrap_or_default();
        if o.key.resource_id.as_deref() == Some(id) {
            continue;
        }
        let kind = entry.str("type").unwrap_or("guest");
        let node = entry.str("node").unwrap_or("?");
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
