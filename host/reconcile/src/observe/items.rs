//! What a cycle plans: each manifest's object with its live entry, and each live entry no
//! manifest names that exactly one kind claims (a prune candidate); a kind whose listing
//! could not be read fails its own items.

use std::collections::{HashMap, HashSet};

use proxops_core::ObjectId;

use super::{Item, named_guests, off_runtime, scrubbed_text};
use crate::error::PlanError;
use crate::live::Entry;
use crate::ownership::LiveGuest;
use crate::plan::ObjectRef;
use crate::registry::KindRegistry;
use crate::validate::Object;
use crate::workers::par_map;

/// One item per manifest object (or per object in `only`), with its live entry (found in
/// its kind's listings by its resource id), its references resolved and the templates it
/// clones from.
pub(super) fn manifest_items<'a>(
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
            offline: None,
            adopt: o.adopt.as_ref(),
            take_over: o.take_over.as_ref(),
            vmid: guest_vmid(o),
            guest_scope: crate::ownership::guest_scope(&o.key.space, &o.key.key),
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
pub(super) fn prune_items<'a>(
    registry: &KindRegistry,
    cluster: &str,
    objects: &[Object],
    listings: &'a HashMap<String, Vec<Entry>>,
    secret_values: &[Vec<(String, String)>],
) -> Vec<Item<'a>> {
    let matched: HashSet<&str> = objects
        .iter()
        .filter_map(|o| o.key.resource_id.as_deref())
        .collect();
    // A guest any manifest names, by number, is no prune candidate of any kind (the index is
    // built only when some entry is left after the resource ids).
    let named = std::sync::OnceLock::new();
    let named_by_manifest = |e: &Entry| {
        matches!(e.str("type"), Some("qemu" | "lxc"))
            && e.get("vmid")
                .and_then(crate::live::Field::as_u64)
                .is_some_and(|v| named.get_or_init(|| named_guests(objects)).contains_key(&v))
    };
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
            .filter(|e| !named_by_manifest(e))
            .collect();
        let claims = off_runtime(|| {
            par_map(registry, &unmatched, |instances, entry| {
                // A kind is asked about the entries that carry its id field.
                kinds
                    .iter()
                    .filter(|(_, field)| entry_id(entry, field).is_some())
                    .map(|&(k, _)| {
                        let entry = scrubbed_text(entry.text(), &secret_values[k]);
                        let answer = instances
                            .get(k)
                            .and_then(|i| i.claims(path, &entry))
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
                offline: None,
                adopt: None,
                take_over: None,
                vmid: LiveGuest::from_entry(entry).map(|g| g.vmid),
                guest_scope: None,
                sources: Vec::new(),
            });
        }
    }
    items
}

/// The objects of every kind whose listing could not be read get that as their error: a
/// kind that cannot see its live objects plans nothing, and the other kinds go on.
pub(super) fn fail_listing_kinds(
    registry: &KindRegistry,
    items: &mut [Item<'_>],
    failed: &HashMap<String, String>,
) {
    if failed.is_empty() {
        return;
    }
    for item in items.iter_mut().filter(|i| i.refusal.is_none()) {
        let info = registry.get(item.kind).info();
        if let Some((path, why)) = info
            .listings
            .iter()
            .find_map(|l| failed.get_key_value(&l.path))
        {
            item.refusal = Some(PlanError::Kind(format!(
                "the {} kind's listing {path} could not be read ({why}), so none of its objects is planned",
                info.kind
            )));
        }
    }
}

/// A kind's listings as (path, id field).
pub(super) fn kind_listings(registry: &KindRegistry, kind: usize) -> Vec<(String, String)> {
    registry
        .get(kind)
        .info()
        .listings
        .iter()
        .map(|l| (l.path.clone(), l.id_field.clone()))
        .collect()
}

/// The id of a listing entry: the value of `field`, a string or a number.
pub(super) fn entry_id<'v>(entry: &'v Entry, field: &str) -> Option<std::borrow::Cow<'v, str>> {
    entry.get(field)?.id()
}
