//! The ownership gate applied to one object's proposal, after its kind planned it.

use proxops_runtime::kind::{Observation, Proposal};

use super::{Item, LiveCluster, flags};
use crate::error::PlanError;
use crate::ownership::{self, LiveGuest, Scope};

/// Whether a manifest may manage `g`, its live guest: tagged, and not a copy of a proxops
/// guest (a mark naming another vmid), unless it is this VM's own clone of one of its
/// templates, half configured.
fn manageable(item: &Item<'_>, g: &LiveGuest) -> bool {
    let foreign_copy = match g.mark() {
        ownership::Mark::Other(of) => !of
            .iter()
            .all(|v| item.sources.iter().any(|(_, source, _)| source == v)),
        _ => false,
    };
    g.tagged() && !foreign_copy
}

/// PVE's pool listing: where the gate looks up the pool a guest create or clone names.
const POOLS: &str = "/pools";

/// The rule named where the gate holds a kind's writes back as an anomaly.
fn ownership_rule() -> String {
    format!(
        "; the writes proposed for it were not sent (sandbox rule `{}`)",
        crate::request::Rule::Ownership
    )
}

/// Whether the gate answers `item` with the take-over proposal: a manifest whose
/// `metadata.adopt` matches the live guest proxops does not own yet, or the unmarked named
/// object it claims (whose kind was then told to write the mark alone).
pub(super) fn takes_over(item: &Item<'_>) -> bool {
    if let (Some(claim), Some(_), Some(entry)) = (item.take_over, item.desired, item.live) {
        return flags::claim_matches_entry(claim, item, entry);
    }
    // The claim first: most objects have none, and reading the live entry costs.
    let (Some(claim), Some(_)) = (item.adopt, item.desired) else {
        return false;
    };
    let Some(g) = item.live.and_then(LiveGuest::from_entry) else {
        return false;
    };
    !manageable(item, &g) && ownership::claim_matches(claim, &g)
}

/// The ownership gate, for every kind and every write: a live guest proxops does not own gets
/// no actions (an anomaly instead, or the ownership tags alone for an explicit take-over); a
/// prune needs the vmid-bound mark; a clone source must be owned; and every mutating call
/// must be about this object on a node of the cluster, or the object fails with nothing sent.
pub(super) fn gate(
    item: &Item<'_>,
    kind: &str,
    proposal: Proposal,
    observed: Option<&Observation>,
    cluster: &LiveCluster<'_>,
) -> (Proposal, Option<PlanError>) {
    // A guest-scoped object's live entry is its guest's: it is judged as a write to that guest
    // (below), never as the guest itself.
    let guest = item
        .live
        .filter(|_| item.guest_scope.is_none())
        .and_then(LiveGuest::from_entry);
    let empty_proposal = || Proposal {
        actions: Vec::new(),
        drift: Vec::new(),
        pending: Vec::new(),
        anomalies: Vec::new(),
    };
    let only = |message: String| Proposal {
        actions: Vec::new(),
        drift: Vec::new(),
        pending: Vec::new(),
        anomalies: vec![proxops_runtime::kind::Anomaly {
            path: String::new(),
            message,
            locked: false,
        }],
    };
    let is_guest_entry = item.guest_scope.is_none()
        && item
            .live
            .is_some_and(|entry| matches!(entry.str("type"), Some("qemu" | "lxc")));
    if let Some((vmid, sub)) = &item.guest_scope
        && item.desired.is_some()
        && let Some(g) = cluster.guest(*vmid)
        && !(g.tagged() && g.mark() == ownership::Mark::Own)
    {
        // Owned through its guest: nothing is planned for the firewall of a guest proxops
        // does not own (the gate would refuse every write anyway).
        let mut message = format!(
            "the {sub} of {} is not planned: proxops does not own that guest (it needs the `{}` tag and the mark `{}`); take the guest over first (`metadata.adopt` on its manifest)",
            g.describe(),
            ownership::OWNERSHIP_TAG,
            ownership::mark_for(*vmid)
        );
        if !proposal.actions.is_empty() {
            message.push_str(&ownership_rule());
        }
        return (only(message), None);
    }
    if let (Some(claim), Some(_), Some(entry)) = (item.take_over, item.desired, item.live) {
        let comment = entry.str("comment").unwrap_or_default();
        if flags::claimable(item, entry)
            && !proxops_names::has_named_mark(comment, &claim.id)
            && !flags::claim_matches_entry(claim, item, entry)
        {
            // Taken over only while the object is as adopt saw it, as guests are.
            let shown = |c: Option<&str>| match c {
                None | Some("") => "no comment".to_string(),
                Some(c) => format!("the comment {c:?}"),
            };
            let mut message = format!(
                "metadata.adopt names {} with {}, but the live object has {}: it changed since it was adopted, so nothing is planned for it; check the object, then correct metadata.adopt",
                crate::request::shown(&claim.id),
                shown(claim.comment.as_deref()),
                shown(Some(comment))
            );
            if !proposal.actions.is_empty() {
                message.push_str(&ownership_rule());
            }
            return (
                Proposal {
                    actions: Vec::new(),
                    drift: Vec::new(),
                    pending: Vec::new(),
                    anomalies: vec![proxops_runtime::kind::Anomaly {
                        path: "metadata.adopt".into(),
                        message,
                        locked: false,
                    }],
                },
                None,
            );
        }
    }
    if is_guest_entry && guest.is_none() {
        // A guest entry without node or vmid: ownership cannot be proved, so nothing is sent.
        return (empty_proposal(), Some(PlanError::NoIdentity));
    }
    if let Some(g) = &guest {
        if item.desired.is_some() && !manageable(item, g) {
            return match item.adopt {
                Some(claim) if ownership::claim_matches(claim, g) => {
                    let digest = observed.and_then(|o| ownership::live_digest(o, g));
                    match (&g.lock, digest) {
                        (Some(lock), _) => (
                            only(format!(
                                "{} is locked ({lock}): a task holds it, so it is not taken over in this run; plan again when the lock clears",
                                g.describe()
                            )),
                            None,
                        ),
                        (None, Some(digest)) => {
                            let mut take_over = ownership::adopt_proposal(g, &digest);
                            // Changes already waiting for the guest's next boot, for the reviewer.
                            take_over.pending = proposal.pending;
                            (take_over, None)
                        }
                        (None, None) => (
                            empty_proposal(),
                            Some(PlanError::Refused(format!(
                                "{} was read without a config digest, so the take-over write could not be bound to the config adopt saw; nothing was sent",
                                g.describe()
                            ))),
                        ),
                    }
                }
                claim => {
                    let mut unowned = ownership::unowned(g, claim);
                    if !proposal.actions.is_empty() {
                        // The kind proposed writes to it: say which rule held them back.
                        for a in &mut unowned.anomalies {
                            a.message.push_str(&ownership_rule());
                        }
                    }
                    (unowned, None)
                }
            };
        }
        if item.desired.is_none() && !proposal.actions.is_empty() {
            // A prune candidate: nothing at all is sent unless proxops provably created it.
            let refusal = if g.tagged() {
                ownership::prune_refusal(g)
            } else {
                Some(format!(
                    "{} has no `{}` tag; proxops never touches a guest it does not own",
                    g.describe(),
                    ownership::OWNERSHIP_TAG
                ))
            };
            if let Some(why) = refusal {
                return (only(why + &ownership_rule()), None);
            }
        }
        let deletes = proposal
            .actions
            .iter()
            .any(|a| a.operation == proxops_runtime::kind::Operation::Delete);
        if deletes {
            let refusal = if g.tagged() {
                ownership::prune_refusal(g)
            } else {
                Some(format!(
                    "{} has no `{}` tag; proxops never deletes a guest it does not own",
                    g.describe(),
                    ownership::OWNERSHIP_TAG
                ))
            };
            if let Some(why) = refusal {
                return (only(why + &ownership_rule()), None);
            }
        }
    }
    let mut clone_sources = Vec::new();
    for (label, vmid, source) in &item.sources {
        match source {
            // Owned as a manifest's own guest would be: tagged, and not a copy of another
            // proxops guest (a mark naming another vmid).
            Some(s) if !s.tagged() || matches!(s.mark(), ownership::Mark::Other(_)) => {
                let clones_it = proposal
                    .actions
                    .iter()
                    .flat_map(|a| &a.calls)
                    .any(|c| c.path.ends_with(&format!("/{vmid}/clone")));
                if clones_it {
                    return (
                        only(format!(
                            "{label} is {}, which proxops does not own; not cloning from it (adopt the template first)",
                            s.describe()
                        )),
                        None,
                    );
                }
            }
            _ => clone_sources.push(*vmid),
        }
    }
    let manageable = |g: &LiveGuest| manageable(item, g);
    let named_elsewhere = |v: u64| {
        cluster
            .named(v)
            .filter(|id| **id != item.object.id)
            .map(|id| format!("{} {}", id.kind, id.name))
    };
    let guests = |v: u64| cluster.guest(v);
    let pool = |id: &str| {
        ownership::pool_owned(
            id,
            cluster.named_object(POOLS, "poolid", id),
            cluster.created_by(&item.depends_on, id),
        )
    };
    let scope = Scope {
        vmid: item.vmid,
        guest_scope: item.guest_scope.as_ref().map(|(v, s)| {
            let created_in_run = cluster.guest(*v).is_none()
                && cluster
                    .named(*v)
                    .is_some_and(|id| item.depends_on.contains(id));
            (*v, s.as_str(), created_in_run)
        }),
        clone_sources,
        nodes: &cluster.nodes,
        offline: &cluster.offline,
        ha_marked: &|v| cluster.ha.marked(v),
        listings: &item.object.listings,
        named: &|path, id| {
            let field = item
                .object
                .listings
                .iter()
                .find(|(p, _)| p == path)
                .map_or("", |(_, f)| f.as_str());
            cluster.named_object(path, field, id)
        },
        prune: item.desired.is_none(),
        resource: item.object.resource.as_deref(),
        guests: &guests,
        named_elsewhere: &named_elsewhere,
        manageable: &manageable,
        pool: &pool,
        take_over: item.take_over,
        named_type: &|path, id| {
            let field = item
                .object
                .listings
                .iter()
                .find(|(p, _)| p == path)
                .map_or("", |(_, f)| f.as_str());
            cluster.named_field(path, field, id, "type")
        },
    };
    match ownership::check_calls(&proposal.actions, &scope) {
        Ok(()) => (proposal, None),
        Err(refusal) => (
            Proposal {
                actions: Vec::new(),
                drift: proposal.drift,
                pending: proposal.pending,
                anomalies: proposal.anomalies,
            },
            Some(super::refused(kind, &refusal)),
        ),
    }
}
