//! Observe and plan one cluster: one GET /cluster/resources, the reads each kind asks for
//! (deduplicated, bounded concurrency), then the kinds' plans, in parallel.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use proxops_core::{Diagnostic, ObjectId};
use proxops_pve::Client;
use proxops_runtime::SecretSource;
use proxops_runtime::kind::{Call, Method, Observation, Proposal, Read, Resolved};

use crate::error::PlanError;
use crate::grant::Trust;
use crate::live::Entry;
use crate::ownership::{AdoptClaim, LiveGuest};
use crate::plan::{ClusterPlan, ObjectPlan, ObjectRef, method_name};
use crate::registry::KindRegistry;
use crate::request::{Refusal, Rule};
use crate::validate::Object;
use crate::workers::par_map;

mod dependents;
mod flags;
mod gate;
pub mod ha;
mod items;
mod reads;
pub(crate) mod scrub;

pub use dependents::UNAVAILABLE_ON;
use dependents::block_dependents;
pub use flags::TAKE_OVER_FLAG;
use flags::{flag_stored_tokens, observed_entry};
use gate::gate;
use items::{fail_listing_kinds, manifest_items, prune_items};
use reads::{Answer, perform_reads, read_key};
use scrub::{granted_secret_values, scrubbed, scrubbed_text};

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
    /// The node it lives on (or would be created on) is offline: nothing is read or sent for
    /// it, it is reported instead.
    offline: Option<String>,
    /// The manifest's explicit take-over, if any.
    adopt: Option<&'a AdoptClaim>,
    /// The manifest's explicit take-over of its unmarked named object, if any.
    take_over: Option<&'a crate::ownership::NamedClaim>,
    /// The object's own vmid (guest id space).
    vmid: Option<u64>,
    /// A guest-scoped object (identity space `guest:<sub>`, key a vmid): the guest it belongs
    /// to and the sub-path of that guest it writes (`firewall`).
    guest_scope: Option<(u64, String)>,
    /// Templates it references: their vmid and live guest (absent: created in this run).
    sources: Vec<(String, u64, Option<LiveGuest>)>,
}

/// What the gate judges writes against: the cluster's nodes, its live guests by vmid (from the
/// unfiltered `/cluster/resources` read) and the manifests' guests by vmid, both indexed on
/// first use (a converged plan has no write to judge).
pub(super) struct LiveCluster<'a> {
    pub nodes: HashSet<String>,
    /// Every listing read this cycle, by path (named objects are judged against them).
    listings: &'a HashMap<String, Vec<Entry>>,
    /// Nodes PVE lists as not online: no request is sent to them.
    pub offline: HashSet<String>,
    /// Nodes PVE's HA manager has in maintenance: nothing is created, started or migrated
    /// onto them.
    pub maintenance: HashSet<String>,
    /// The HA resources, by guest.
    pub ha: ha::HaResources,
    live: &'a [Entry],
    objects: &'a [Object],
    guests: std::sync::OnceLock<HashMap<u64, &'a Entry>>,
    named: std::sync::OnceLock<HashMap<u64, ObjectId>>,
}

impl<'a> LiveCluster<'a> {
    fn new(
        nodes: HashSet<String>,
        ha: ha::HaResources,
        listings: &'a HashMap<String, Vec<Entry>>,
        objects: &'a [Object],
    ) -> Self {
        let live = listings
            .get(CLUSTER_RESOURCES)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let offline = offline_nodes(live);
        let maintenance = live
            .iter()
            .filter(|e| e.str("type") == Some("node") && e.str("hastate") == Some("maintenance"))
            .filter_map(|e| e.str("node").map(str::to_string))
            .collect();
        LiveCluster {
            nodes,
            listings,
            offline,
            maintenance,
            ha,
            live,
            objects,
            guests: std::sync::OnceLock::new(),
            named: std::sync::OnceLock::new(),
        }
    }

    /// The live guest holding `vmid`, whatever kind or listing the proposal came from.
    pub fn guest(&self, vmid: u64) -> Option<LiveGuest> {
        let index = self.guests.get_or_init(|| {
            self.live
                .iter()
                .filter(|e| matches!(e.str("type"), Some("qemu" | "lxc")))
                .filter_map(|e| Some((e.get("vmid")?.as_u64()?, e)))
                .collect()
        });
        index.get(&vmid).and_then(|e| LiveGuest::from_entry(e))
    }

    /// Object `id` of listing `path` (its id in field `id_field`), as this cycle read it.
    pub fn named_object(
        &self,
        path: &str,
        id_field: &str,
        id: &str,
    ) -> crate::ownership::NamedLive {
        use crate::ownership::NamedLive;
        let Some(entries) = self.listings.get(path) else {
            return NamedLive::Unread;
        };
        match entries
            .iter()
            .find(|e| e.get(id_field).and_then(crate::live::Field::id).as_deref() == Some(id))
        {
            Some(e) => NamedLive::Present {
                comment: e.str("comment").unwrap_or_default().to_string(),
            },
            None => NamedLive::Absent,
        }
    }

    /// Field `field` of object `id` of listing `path` (its id in field `id_field`), as this
    /// cycle read it; `None` when the object or the field is not there.
    pub fn named_field(&self, path: &str, id_field: &str, id: &str, field: &str) -> Option<String> {
        self.listings
            .get(path)?
            .iter()
            .find(|e| e.get(id_field).and_then(crate::live::Field::id).as_deref() == Some(id))?
            .str(field)
            .map(str::to_string)
    }

    /// Whether one of `depends_on` is the manifest of named object `id` (its identity's
    /// resource id): an object it waits for, which creates it in this apply when it is absent.
    pub fn created_by(&self, depends_on: &[ObjectId], id: &str) -> bool {
        self.objects
            .iter()
            .any(|o| o.key.resource_id.as_deref() == Some(id) && depends_on.contains(&o.id))
    }

    /// The manifest object whose identity is guest `vmid` (any kind).
    pub fn named(&self, vmid: u64) -> Option<&ObjectId> {
        self.named
            .get_or_init(|| named_guests(self.objects))
            .get(&vmid)
    }
}

/// The manifest objects in PVE's guest id pool, by vmid (keys are canonical decimals:
/// validation refuses any other).
fn named_guests(objects: &[Object]) -> HashMap<u64, ObjectId> {
    objects
        .iter()
        .filter(|o| o.key.space == "guest-id")
        .filter_map(|o| {
            Some((
                crate::request::form::canonical_vmid(&o.key.key)?,
                o.id.clone(),
            ))
        })
        .collect()
}

/// The error of an object whose kind proposed a request the sandbox refused.
pub(crate) fn refused(kind: &str, refusal: &crate::request::Refusal) -> PlanError {
    PlanError::Refused(format!(
        "the {kind} kind's request was refused: {}; nothing was sent",
        refusal
    ))
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
    /// Reads in flight at once; `None`: `proxops_core::cluster::READS_PER_NODE` for each of
    /// the cluster's nodes (from the listing).
    pub read_concurrency: Option<usize>,
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
    let (mut listings, failed_listings) = read_listings(registry, client, objects).await?;
    let ha = match listings.get_mut(CLUSTER_RESOURCES) {
        Some(entries) => ha::merge(client, entries).await?,
        None => ha::HaResources::default(),
    };
    let listings = listings;
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
    let live_cluster = LiveCluster::new(nodes, ha, &listings, objects);

    let secret_values = granted_secret_values(registry, secrets);
    let mut items = manifest_items(registry, objects, &listings, only);
    if only.is_none() {
        items.extend(prune_items(
            registry,
            cluster,
            objects,
            &listings,
            &secret_values,
        ));
    }
    fail_listing_kinds(registry, &mut items, &failed_listings);
    for item in &mut items {
        let node = item
            .live
            .and_then(|e| e.str("node"))
            .or(item.object.node.as_deref());
        item.offline = node
            .filter(|n| live_cluster.offline.contains(*n))
            .map(str::to_string);
    }

    let step = std::time::Instant::now();
    let wanted = wanted_reads(registry, &items, &secret_values);
    let wanted = cap_reads_per_cycle(registry, &items, wanted);
    tracing::debug!(
        "{cluster}: the kinds named their reads for {} objects in {:?}",
        items.len(),
        step.elapsed()
    );
    let step = std::time::Instant::now();
    let online = live_cluster.nodes.len() - live_cluster.offline.len();
    let read_concurrency = read_concurrency
        .unwrap_or(proxops_core::cluster::READS_PER_NODE * online)
        .max(1);
    let mut reads = perform_reads(client, &wanted, read_concurrency).await;
    flag_stored_tokens(&mut reads, secrets.as_deref());
    tracing::debug!(
        "{cluster}: read {} answers in {:?} ({read_concurrency} at a time)",
        reads.len(),
        step.elapsed()
    );
    let inputs = observations(wanted, &mut items, reads);
    let step = std::time::Instant::now();
    let planned = plan_items(registry, &items, &inputs, secrets, &secret_values);
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
        rollout: Vec::new(),
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
                let kind = &registry.get(item.kind).info().kind;
                let (mut proposal, error) =
                    gate(&item, kind, proposal, observed.as_ref().ok(), &live_cluster);
                if error.is_none() {
                    hold_for_maintenance(&mut proposal, &live_cluster.maintenance);
                }
                (proposal, error, gate::takes_over(&item))
            }
        };
        let running = item.live.and_then(|entry| entry.str("status")) == Some("running");
        let relocated = relocated(&item);
        plan.objects.push(ObjectPlan {
            object: item.object,
            kind_index: item.kind,
            desired: item.desired.map(str::to_string),
            running,
            proposal,
            depends_on: item.depends_on,
            error,
            taking_over,
            sandboxed: matches!(registry.trust(item.kind), Trust::Granted(_)),
            relocated,
        });
    }
    block_dependents(&mut plan);
    Ok(plan)
}

/// The nodes PVE lists with a `status` other than `online` (`offline`, `unknown`): PVE cannot
/// reach them either, so proxops sends them nothing and reports what lives on them.
fn offline_nodes(live: &[Entry]) -> HashSet<String> {
    live.iter()
        .filter(|e| e.str("type") == Some("node"))
        .filter(|e| e.str("status").is_some_and(|s| s != "online"))
        .filter_map(|e| e.str("node").map(str::to_string))
        .collect()
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
/// each read once. `/cluster/resources` failing fails the cluster; another listing failing
/// fails the objects of the kinds that declared it (`fail_listing_kinds`), with its error.
///
/// A bundled kind's own listings are read only when the cycle has objects of that kind: a
/// repository that does not use a bundled kind pays no request for it (a third-party kind is
/// configured on purpose, and its listings are read every cycle, for its prunes).
async fn read_listings(
    registry: &KindRegistry,
    client: &Client,
    objects: &[Object],
) -> Result<(HashMap<String, Vec<Entry>>, HashMap<String, String>), ObserveError> {
    let mut paths = vec![CLUSTER_RESOURCES.to_string()];
    for (k, (kind, _)) in registry.iter().enumerate() {
        let in_use =
            !matches!(registry.trust(k), Trust::Bundled) || objects.iter().any(|o| o.kind == k);
        if !in_use {
            continue;
        }
        for l in &kind.info().listings {
            if !paths.contains(&l.path) {
                paths.push(l.path.clone());
            }
        }
    }
    let mut listings = HashMap::new();
    let mut failed = HashMap::new();
    for path in paths {
        match listing(client, &path).await {
            Ok(entries) => {
                listings.insert(path, entries);
            }
            Err(e) if path != CLUSTER_RESOURCES => {
                failed.insert(path, e.to_string());
            }
            Err(e) => return Err(e),
        }
    }
    Ok((listings, failed))
}

/// The reads each item's kind asks for (GETs inside its declared paths only), each with its
/// key (path and parameters), computed once: it de-duplicates the reads and hands each
/// answer to its readers.
fn wanted_reads(
    registry: &KindRegistry,
    items: &[Item<'_>],
    secret_values: &[Vec<(String, String)>],
) -> Vec<Result<Vec<(String, Call)>, PlanError>> {
    let wanted: Vec<Result<Vec<Call>, PlanError>> = off_runtime(|| {
        par_map(registry, items, |instances, item| {
            if let Some(refusal) = &item.refusal {
                return Err(refusal.clone());
            }
            if item.offline.is_some() {
                return Ok(Vec::new());
            }
            let live = item
                .live
                .map(|e| scrubbed_text(e.text(), &secret_values[item.kind]));
            let calls = instances
                .get(item.kind)
                .and_then(|i| {
                    i.observe(
                        item.desired,
                        live.as_deref(),
                        &item.resolved,
                        &item.referrers,
                    )
                })
                .map_err(|e| PlanError::Kind(e.to_string()))?;
            let info = registry.get(item.kind).info();
            let mut calls = calls;
            if let Trust::Granted(grant) = registry.trust(item.kind)
                && calls.len() as u64 > grant.limits.reads_per_object()
            {
                return Err(refused(
                    &info.kind,
                    &Refusal::new(
                        Rule::Reads,
                        format!(
                            "observe() asked for {} reads for one object, more than the {} its grant allows (`grant.limits.reads-per-object`)",
                            calls.len(),
                            grant.limits.reads_per_object()
                        ),
                    ),
                ));
            }
            for c in &mut calls {
                if c.method != Method::Get {
                    return Err(PlanError::ObservedWrite {
                        method: method_name(c.method),
                        path: c.path.clone(),
                    });
                }
                if let Err(r) = crate::request::form::canonicalize(c, &info.calls) {
                    return Err(match r.rule {
                        Rule::Declared => PlanError::ObservedOutside(c.path.clone()),
                        _ => refused(&info.kind, &r),
                    });
                }
                let trust = registry.trust(item.kind);
                crate::request::secret::check_refs(c, trust.secrets(), &info.kind)
                    .map_err(|r| refused(&info.kind, &r))?;
            }
            Ok(calls)
        })
    });

    wanted
        .into_iter()
        .map(|calls| calls.map(|cs| cs.into_iter().map(|c| (read_key(&c), c)).collect()))
        .collect()
}

/// The reads of each third-party kind, together, within its grant's `reads-per-cycle`
/// (distinct reads, after de-duplication): past it, every object of that kind is refused and
/// none of its reads is sent.
fn cap_reads_per_cycle(
    registry: &KindRegistry,
    items: &[Item<'_>],
    mut wanted: Vec<Result<Vec<(String, Call)>, PlanError>>,
) -> Vec<Result<Vec<(String, Call)>, PlanError>> {
    for kind in 0..registry.len() {
        let Trust::Granted(grant) = registry.trust(kind) else {
            continue;
        };
        let of_kind = || items.iter().zip(&wanted).filter(|(i, _)| i.kind == kind);
        let objects = of_kind().count();
        let reads: HashSet<&str> = of_kind()
            .filter_map(|(_, w)| w.as_ref().ok())
            .flatten()
            .map(|(key, _)| key.as_str())
            .collect();
        let cap = grant.limits.reads_per_cycle(objects);
        if reads.len() as u64 <= cap {
            continue;
        }
        let error = refused(
            &registry.get(kind).info().kind,
            &Refusal::new(
                Rule::Reads,
                format!(
                    "its {objects} objects asked for {} distinct reads in one cycle, more than the {cap} its grant allows (`grant.limits.reads-per-cycle`)",
                    reads.len()
                ),
            ),
        );
        for (item, w) in items.iter().zip(wanted.iter_mut()) {
            if item.kind == kind {
                *w = Err(error.clone());
            }
        }
    }
    wanted
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
            let live = item.live.map(|e| observed_entry(item, e));
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
    values: &[Vec<(String, String)>],
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
            if let Some(node) = &item.offline {
                return (offline_proposal(item, node), None);
            }
            let values = &values[item.kind];
            let scrubbed_copy;
            let observation = if values.is_empty() {
                observation
            } else {
                scrubbed_copy = scrubbed(observation, values);
                &scrubbed_copy
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
                Ok(Ok(mut proposal)) => {
                    let info = registry.get(item.kind).info();
                    let trust = registry.trust(item.kind);
                    match checked(trust, info, &mut proposal.actions) {
                        Ok(()) => (proposal, None),
                        Err(r) => (empty(), Some(refused(&info.kind, &r))),
                    }
                }
            }
        })
    })
}

/// A guest PVE's HA manager runs on another node than its identity's (its manifest's home
/// node): said in the plan, planned where it is.
fn relocated(item: &Item<'_>) -> Option<crate::plan::Relocated> {
    let entry = item.live?;
    entry.str("hastate").filter(|s| !s.is_empty())?;
    let (home, now) = (item.object.node.as_deref()?, entry.str("node")?);
    (home != now).then(|| crate::plan::Relocated {
        from: home.to_string(),
        to: now.to_string(),
    })
}

/// A proposal that would create, start or migrate a guest onto a node PVE's HA manager has in
/// maintenance keeps none of its actions; one anomaly says why (exit 3). Everything else of
/// a node in maintenance (a config write, a stop) is planned as usual.
fn hold_for_maintenance(proposal: &mut Proposal, maintenance: &HashSet<String>) {
    use crate::request::target::Target;
    if maintenance.is_empty() {
        return;
    }
    let param = |call: &Call, name: &str| {
        call.params
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.value.clone())
    };
    let onto = |call: &Call| -> Option<(&'static str, String)> {
        if call.method != Method::Post {
            return None;
        }
        let target = Target::of(&crate::request::form::pve_view(&call.path), &call.params).ok()?;
        match &target {
            Target::NewGuest { node, .. } => Some(("create a guest on", node.clone())),
            Target::Guest { node, rest, .. } if rest == &["status", "start"] => {
                Some(("start a guest on", node.clone()))
            }
            Target::Guest { rest, .. } if rest == &["migrate"] => {
                Some(("migrate a guest to", param(call, "target")?))
            }
            Target::HaResource { rest, .. }
                if rest
                    .first()
                    .is_some_and(|r| r == "migrate" || r == "relocate") =>
            {
                Some(("migrate a guest to", param(call, "node")?))
            }
            _ => None,
        }
    };
    let held = proposal
        .actions
        .iter()
        .flat_map(|a| &a.calls)
        .filter_map(onto)
        .find(|(_, node)| maintenance.contains(node));
    if let Some((what, node)) = held {
        proposal.actions.clear();
        proposal.anomalies.push(proxops_runtime::kind::Anomaly {
            path: String::new(),
            message: format!(
                "node {node} is in maintenance (PVE's HA manager): proxops does not {what} it; nothing of this object is changed until the maintenance ends"
            ),
            locked: false,
        });
    }
}

/// What an object on an offline node gets instead of a plan: one anomaly, no action (exit 3).
fn offline_proposal(item: &Item<'_>, node: &str) -> Proposal {
    let what = match item.live {
        Some(_) => "it lives",
        None => "it would be created",
    };
    Proposal {
        actions: Vec::new(),
        drift: Vec::new(),
        pending: Vec::new(),
        anomalies: vec![proxops_runtime::kind::Anomaly {
            path: String::new(),
            message: format!(
                "node {node}, where {what}, is offline (PVE lists it so): nothing is read from or sent to it in this run; the other nodes converge"
            ),
            locked: false,
        }],
    }
}

/// Every call of `actions` (their restore steps included) checked and put in the form the
/// host sends ([`crate::grant::check_call`]); for a third-party kind, each action's flags then
/// say what its calls do, whatever the kind labelled it: a call that removes a guest makes it
/// a delete (so the ownership rules, the mass-prune guard and the destructive marker see it),
/// one that removes a volume makes it destructive, and a stop or a restart makes it disturb
/// the guest's availability.
pub(crate) fn checked(
    trust: &Trust,
    info: &proxops_runtime::kind::KindInfo,
    actions: &mut [proxops_runtime::kind::Action],
) -> Result<(), Refusal> {
    for action in actions.iter_mut() {
        let mut effect = crate::request::target::Effect::default();
        let mut deletes_guest = false;
        let restore = action.restore.iter_mut().flat_map(|r| r.calls.iter_mut());
        for call in action.calls.iter_mut().chain(restore) {
            let Some(target) = crate::grant::check_call(trust, info, call)? else {
                continue;
            };
            let e = crate::request::target::effect(call.method, &target, &call.params);
            effect.destroys |= e.destroys;
            effect.disturbs |= e.disturbs;
            deletes_guest |=
                e.destroys && matches!(target, crate::request::target::Target::Guest { .. });
        }
        if matches!(trust, Trust::Granted(_)) {
            action.destructive |= effect.destroys;
            action.disturbs_availability |= effect.disturbs;
            if deletes_guest {
                action.operation = proxops_runtime::kind::Operation::Delete;
            }
        }
    }
    Ok(())
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
