//! Ownership: proxops writes only to live objects it provably owns, and every mutating call a
//! kind proposes must be about the object it was planned for.
//!
//! A live guest is proxops's when PVE stores the `proxops` tag in its config (updates need
//! that much, so a half-configured clone of an owned template is still repaired). Deleting
//! needs more: PVE copies tags on clone and on restore to another vmid, so a human's GUI clone
//! of a proxops template carries `proxops` too. Every guest proxops creates or configures
//! therefore also carries the vmid-bound mark `proxops-<vmid>`, and a prune needs the mark to
//! name the guest's own vmid. Both are read from the guest's `/cluster/resources` entry.
//!
//! Taking over a guest proxops did not create is explicit: a manifest's `metadata.adopt`
//! names the vmid and PVE name the operator (or `proxops adopt`) saw; while both still match,
//! the only write allowed is the ownership mark itself. Named objects are taken over the same
//! way (`metadata.adopt: {id, comment}`, [`NamedClaim`]): the one write adds `proxops:<id>` to
//! the comment adopt saw.

use std::collections::HashSet;

use crate::live::{Entry, Field};
use crate::request::target::Target;
use crate::request::{self, Refusal, Rule};
use proxops_runtime::kind::{
    Action, Anomaly, Call, Change, Method, Observation, Operation, Param, Proposal,
};

/// The tag every proxops guest carries.
pub const OWNERSHIP_TAG: &str = "proxops";

/// The vmid-bound ownership mark of guest `vmid`.
pub fn mark_for(vmid: u64) -> String {
    format!("{OWNERSHIP_TAG}-{vmid}")
}

/// A live guest (VM, template or container) as `/cluster/resources` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveGuest {
    /// `qemu` or `lxc`.
    pub kind: String,
    pub vmid: u64,
    pub node: String,
    pub name: Option<String>,
    /// Lower-cased, in PVE's order.
    pub tags: Vec<String>,
    /// The tags as PVE stores them (case kept), for the adopt write.
    pub raw_tags: Vec<String>,
    pub template: bool,
    /// PVE's config lock (`create`, `clone`, `destroyed`, ...): a task holds the guest.
    pub lock: Option<String>,
}

/// What the ownership mark of a tagged guest says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// `proxops-<its own vmid>`.
    Own,
    /// Only marks of other vmids: a copy (clone or restore) of those guests.
    Other(Vec<u64>),
    /// No `proxops-<vmid>` tag at all (created before marks existed, or tagged by hand).
    Missing,
}

/// PVE's tag list: `;`, `,` and spaces all separate tags.
pub fn split_tags(text: &str) -> Vec<String> {
    text.split([';', ',', ' '])
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

impl LiveGuest {
    /// The guest of a `/cluster/resources` entry; `None` for nodes, storages and the like.
    pub fn from_entry(entry: &Entry) -> Option<LiveGuest> {
        let kind = entry.str("type")?;
        if kind != "qemu" && kind != "lxc" {
            return None;
        }
        let vmid = match entry.get("vmid")? {
            Field::Num(n) => n.as_u64()?,
            Field::Str(s) => s.parse().ok()?,
            _ => return None,
        };
        Some(LiveGuest {
            kind: kind.to_string(),
            vmid,
            node: entry.str("node")?.to_string(),
            name: entry.str("name").map(str::to_string),
            tags: entry.str("tags").map(split_tags).unwrap_or_default(),
            raw_tags: entry
                .str("tags")
                .map(|t| {
                    t.split([';', ',', ' '])
                        .filter(|t| !t.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            template: entry.get("template").is_some_and(Field::flag),
            lock: entry
                .str("lock")
                .filter(|l| !l.is_empty())
                .map(str::to_string),
        })
    }

    /// Carries the `proxops` tag: proxops may update it.
    pub fn tagged(&self) -> bool {
        self.tags.iter().any(|t| t == OWNERSHIP_TAG)
    }

    pub fn mark(&self) -> Mark {
        let marks: Vec<u64> = self
            .tags
            .iter()
            .filter_map(|t| t.strip_prefix("proxops-"))
            .filter_map(|n| n.parse().ok())
            .collect();
        if marks.contains(&self.vmid) {
            Mark::Own
        } else if marks.is_empty() {
            Mark::Missing
        } else {
            Mark::Other(marks)
        }
    }

    fn noun(&self) -> &'static str {
        match (self.kind.as_str(), self.template) {
            ("lxc", false) => "container",
            ("lxc", true) => "container template",
            (_, true) => "template",
            _ => "VM",
        }
    }

    /// `VM 6019 "payroll" on node pve01 (tags: prod)`, for messages.
    pub fn describe(&self) -> String {
        let name = self
            .name
            .as_deref()
            .map(|n| format!(" {n:?}"))
            .unwrap_or_default();
        let tags = if self.tags.is_empty() {
            "no tags".to_string()
        } else {
            format!("tags: {}", self.tags.join(";"))
        };
        format!(
            "{} {}{name} on node {} ({tags})",
            self.noun(),
            self.vmid,
            self.node
        )
    }
}

/// A manifest's explicit take-over of a guest proxops did not create (`metadata.adopt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdoptClaim {
    pub vmid: u64,
    pub name: String,
}

/// The proposal for a manifest whose live guest proxops does not own: nothing but an anomaly
/// that names the guest and the way to take it over.
pub fn unowned(guest: &LiveGuest, claim: Option<&AdoptClaim>) -> Proposal {
    let how = format!(
        "to take it over deliberately, add `metadata.adopt: {{vmid: {}, name: {}}}` to the manifest (the first apply then only adds the ownership tags), or give the manifest a free vmid",
        guest.vmid,
        guest.name.as_deref().unwrap_or("<its PVE name>")
    );
    let message = match claim {
        Some(c) => format!(
            "metadata.adopt names vmid {} {:?}, but the live guest is {}: it changed since it was adopted, so nothing is planned for it; check the guest, then correct metadata.adopt",
            c.vmid,
            c.name,
            guest.describe()
        ),
        // A create or clone in flight: its placeholder has no tags yet (the worker writes
        // the config last). Said as a lock, so that apply finds and waits for the task.
        None if guest.lock.is_some() => format!(
            "{} is locked ({}) and carries no `{OWNERSHIP_TAG}` tag yet: a create or clone is in flight (an earlier run's, or another client's); nothing is planned for it until its task ends. If no task runs for it any more, clear the lock with `qm unlock {}` on its node (`proxops sim unlock {}` for a sim: cluster)",
            guest.describe(),
            guest.lock.as_deref().unwrap_or_default(),
            guest.vmid,
            guest.vmid
        ),
        None => format!(
            "vmid {} is held by {}, which proxops does not own (no `{OWNERSHIP_TAG}` tag); nothing is planned for it: {how}",
            guest.vmid,
            guest.describe()
        ),
    };
    Proposal {
        actions: Vec::new(),
        drift: Vec::new(),
        pending: Vec::new(),
        anomalies: vec![Anomaly {
            path: if claim.is_some() {
                "metadata.adopt".into()
            } else {
                "spec.vmid".into()
            },
            message,
            locked: claim.is_none() && guest.lock.is_some(),
        }],
    }
}

/// Whether `claim` still describes `guest`.
pub fn claim_matches(claim: &AdoptClaim, guest: &LiveGuest) -> bool {
    claim.vmid == guest.vmid && guest.name.as_deref() == Some(claim.name.as_str())
}

/// The one write of a take-over: the ownership tags added to the guest's own tags. Nothing
/// else changes, nothing stops or restarts.
pub fn adopt_proposal(guest: &LiveGuest, digest: &str) -> Proposal {
    // The guest's own tags as PVE stores them (case kept), plus the two ownership tags.
    let mut tags = guest.raw_tags.clone();
    for t in [OWNERSHIP_TAG.to_string(), mark_for(guest.vmid)] {
        if !guest.tags.contains(&t) {
            tags.push(t);
        }
    }
    let old = guest.raw_tags.join(";");
    let new = tags.join(";");
    let path = format!("/nodes/{}/{}/{}/config", guest.node, guest.kind, guest.vmid);
    let method = if guest.kind == "lxc" {
        Method::Put
    } else {
        Method::Post
    };
    Proposal {
        actions: vec![Action {
            operation: Operation::Update,
            summary: format!(
                "adopt {}: add the ownership tags (nothing else changes, no restart)",
                guest.describe()
            ),
            calls: vec![Call {
                method,
                path,
                // Bound to the config the plan read: a guest renamed or retagged since
                // is not taken over (PVE answers "checksum mismatch"; the next plan shows why).
                params: vec![
                    Param {
                        name: "tags".into(),
                        value: new.clone(),
                        sensitive: false,
                    },
                    Param {
                        name: "digest".into(),
                        value: digest.to_string(),
                        sensitive: false,
                    },
                ],
            }],
            changes: vec![Change {
                key: "tags".into(),
                old: (!old.is_empty()).then_some(old),
                new: Some(new),
                sensitive: false,
            }],
            disturbs_availability: false,
            destructive: false,
            restore: None,
        }],
        drift: Vec::new(),
        pending: Vec::new(),
        anomalies: Vec::new(),
    }
}

/// The config digest of `guest` in the answers its kind asked for: `digest` of its `/config`
/// (an object), or the `digest` row of its `/pending` (a list of key/value rows).
pub fn live_digest(observed: &Observation, guest: &LiveGuest) -> Option<String> {
    let base = format!("/{}/{}/", guest.kind, guest.vmid);
    observed
        .reads
        .iter()
        .filter(|r| r.status == 200 && r.call.path.contains(&base))
        .find_map(|r| {
            let body: serde_json::Value = serde_json::from_str(&r.body).ok()?;
            let digest = match &body {
                serde_json::Value::Object(config) if r.call.path.ends_with("/config") => {
                    config.get("digest")
                }
                serde_json::Value::Array(rows) if r.call.path.ends_with("/pending") => rows
                    .iter()
                    .find(|row| row.get("key").and_then(|k| k.as_str()) == Some("digest"))
                    .and_then(|row| row.get("value")),
                _ => None,
            }?;
            digest.as_str().map(str::to_string)
        })
}

/// Why a prune candidate (a tagged guest no manifest names) may not be deleted, if it may not.
pub fn prune_refusal(guest: &LiveGuest) -> Option<String> {
    match guest.mark() {
        Mark::Own => None,
        Mark::Other(of) => {
            let of: Vec<String> = of.iter().map(u64::to_string).collect();
            Some(format!(
                "{} carries the `{OWNERSHIP_TAG}` tag but is a copy of proxops guest {} (its ownership mark names that vmid, not {}): a clone or restore made outside proxops; not deleting it. Delete it by hand, or give it a manifest",
                guest.describe(),
                of.join(", "),
                guest.vmid
            ))
        }
        Mark::Missing => Some(format!(
            "{} carries the `{OWNERSHIP_TAG}` tag but no ownership mark `{}`; proxops cannot prove it created this guest, so it does not delete it. Delete it by hand, or give it a manifest (an apply adds the mark)",
            guest.describe(),
            mark_for(guest.vmid)
        )),
    }
}

/// The prefix of a guest-scoped identity space: `guest:<sub>` with a vmid as key names an object
/// that belongs to that guest and lives under its `<sub>/` path (a VM's `firewall`).
pub const GUEST_SCOPE_PREFIX: &str = "guest:";

/// The guest and sub-path a guest-scoped identity (`guest:<sub>`, key a canonical vmid) names;
/// `None` for any other identity (a `guest:` space whose key is not a vmid or whose sub-path is
/// not one path segment is no guest scope, and so reaches no guest at all).
pub fn guest_scope(space: &str, key: &str) -> Option<(u64, String)> {
    let sub = space.strip_prefix(GUEST_SCOPE_PREFIX)?;
    let ok = !sub.is_empty()
        && sub
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let vmid = request::form::canonical_vmid(key)?;
    ok.then(|| (vmid, sub.to_string()))
}

/// What the mutating calls of one object may touch, and what the host knows of the cluster
/// to judge them by.
pub struct Scope<'a> {
    /// The object's own vmid, for objects in the guest id space.
    pub vmid: Option<u64>,
    /// For a guest-scoped object ([`guest_scope`]): the guest it belongs to, the sub-path of
    /// that guest it may write, and whether a manifest it depends on creates that guest in
    /// this apply (the guest is not live yet; its writes run after that manifest's).
    pub guest_scope: Option<(u64, &'a str, bool)>,
    /// Vmids it may clone from: its resolved, owned (or still to be created) templates.
    pub clone_sources: Vec<u64>,
    /// The cluster's nodes (the plan fails before this check when the listing has none).
    pub nodes: &'a HashSet<String>,
    /// Those PVE lists as not online: nothing is sent to them.
    pub offline: &'a HashSet<String>,
    /// Whether guest `vmid` has an HA resource (`None`: it has none), and if so whether its
    /// comment carries the guest's mark.
    pub ha_marked: &'a dyn Fn(u64) -> Option<bool>,
    /// The object's kind's listings (path, id field): where its named objects live.
    pub listings: &'a [(String, String)],
    /// What this cycle's read of listing `path` says about object `id`.
    pub named: &'a dyn Fn(&str, &str) -> NamedLive,
    /// The object plans without a manifest (a prune candidate).
    pub prune: bool,
    /// The id of the object's entry in its kind's listings (a file it declared, for a kind of
    /// storage files).
    pub resource: Option<&'a str>,
    /// Every live guest by vmid, from the unfiltered `/cluster/resources` read.
    pub guests: &'a dyn Fn(u64) -> Option<LiveGuest>,
    /// The manifest object that names guest `vmid` (any kind), as `Kind name`, when it is not
    /// this object.
    pub named_elsewhere: &'a dyn Fn(u64) -> Option<String>,
    /// Whether a live guest may be updated by this object's manifest (tagged, not a copy).
    pub manageable: &'a dyn Fn(&LiveGuest) -> bool,
    /// Whether a guest write may put a guest into pool `id` (PVE's `pool` on a guest create or
    /// clone): `Err` says why not. See [`pool_owned`].
    pub pool: &'a dyn Fn(&str) -> Result<(), String>,
    /// The manifest's take-over of its unmarked named object (`metadata.adopt: {id, comment}`).
    pub take_over: Option<&'a NamedClaim>,
    /// The live `type` of object `id` of listing `path` (PVE's HA rules), as this cycle read it.
    pub named_type: &'a dyn Fn(&str, &str) -> Option<String>,
}

/// Whether a guest create or clone may name pool `id` (`pool=<id>`, which adds the new guest
/// to that pool: a write to the pool): the pool is proxops's, `proxops:<id>` in its comment in
/// this cycle's `/pools` listing, or absent while an object this one depends on creates it,
/// with that mark, in this apply. `live` is what the listing says of the pool; an unread
/// listing (no loaded kind declares `/pools`) proves nothing.
pub fn pool_owned(id: &str, live: NamedLive, created_in_run: bool) -> Result<(), String> {
    let mark = proxops_names::named_mark(id);
    match live {
        NamedLive::Present { comment } if proxops_names::has_named_mark(&comment, id) => Ok(()),
        NamedLive::Present { .. } => Err(format!(
            "pool {} does not carry proxops's mark (`{mark}` in its comment), and adding a guest to it writes it",
            request::shown(id)
        )),
        NamedLive::Absent if created_in_run => Ok(()),
        NamedLive::Absent => Err(format!(
            "pool {} does not exist and no manifest this object depends on creates it",
            request::shown(id)
        )),
        NamedLive::Unread => Err(format!(
            "the listing /pools was not read in this cycle (no loaded kind declares it), so proxops cannot tell whose pool {} is",
            request::shown(id)
        )),
    }
}

/// Where a mutating path points, in PVE's view of it (the path is canonical: `request`).
fn path_target(call: &Call) -> Result<Target, Refusal> {
    Target::of(&request::form::pve_view(&call.path), &call.params)
}

fn param<'c>(call: &'c Call, name: &str) -> Option<&'c str> {
    call.params
        .iter()
        .find(|p| p.name == name)
        .map(|p| p.value.as_str())
}

/// Check every mutating call of `actions` against `scope`, by what each request touches
/// (never by the action's label or the kind's identity): its node exists; a guest it reaches
/// (by path, by a create's `vmid`, by a volume's owner) is the object's own, or for
/// `POST …/{vmid}/clone` an allowed clone source; that guest, when it is live, is manageable,
/// named by no other manifest, and carries its own mark when the call destroys it or the
/// object is a prune; a new guest's vmid is free; a file that belongs to no guest is touched
/// only by the object that declared it, and deleted only by its prune.
pub fn check_calls(actions: &[Action], scope: &Scope<'_>) -> Result<(), Refusal> {
    let mut created: HashSet<(String, String)> = HashSet::new();
    for call in every_call(actions) {
        if call.method == Method::Get {
            continue;
        }
        if let Some(result) = check_acl(call, &request::describe_call(call), scope, &created) {
            result?;
            continue;
        }
        let target = path_target(call)?.named_in(
            call.method,
            &request::form::pve_view(&call.path),
            &call.params,
            scope.listings,
        )?;
        let shown = request::describe_call(call);
        if !matches!(target, Target::Named { .. })
            && let Some(pool) = param(call, "pool")
        {
            (scope.pool)(pool).map_err(|why| {
                Refusal::new(
                    Rule::Ownership,
                    format!(
                        "{shown} puts the guest into a pool proxops cannot prove it owns: {why}"
                    ),
                )
            })?;
        }
        if let Target::Named {
            listing,
            id,
            create,
        } = &target
        {
            check_named(call, &shown, (listing, id, *create), scope, &created)?;
            if *create {
                created.insert((listing.clone(), id.clone()));
            }
            continue;
        }
        if let Some(node) = target.node()
            && !scope.nodes.is_empty()
            && !scope.nodes.contains(node)
        {
            let mut known: Vec<&str> = scope.nodes.iter().map(String::as_str).collect();
            known.sort_unstable();
            return Err(Refusal::new(
                Rule::Target,
                format!(
                    "{shown}: node {} is not a node of this cluster (its nodes: {})",
                    request::shown(node),
                    known.join(", ")
                ),
            ));
        }
        if let Some(node) = target.node()
            && scope.offline.contains(node)
        {
            return Err(Refusal::new(
                Rule::Target,
                format!(
                    "{shown}: node {} is offline; nothing is sent to it",
                    request::shown(node)
                ),
            ));
        }
        // Where a migration sends the guest: a node of the cluster that is online.
        let destination = match &target {
            Target::Guest { rest, .. } if rest.first().is_some_and(|r| r == "migrate") => {
                Some("target")
            }
            Target::HaResource { rest, .. }
                if rest
                    .first()
                    .is_some_and(|r| r == "migrate" || r == "relocate") =>
            {
                Some("node")
            }
            _ => None,
        };
        if let Some(name) = destination {
            let to = param(call, name).unwrap_or_default();
            if !scope.nodes.contains(to) || scope.offline.contains(to) {
                return Err(Refusal::new(
                    Rule::Target,
                    format!(
                        "{shown} moves the guest to {}, which is not an online node of this cluster",
                        request::shown(to)
                    ),
                ));
            }
        }
        if let Target::HaResource { vmid, create, rest } = &target {
            match ((scope.ha_marked)(*vmid), create) {
                (Some(_), true) => {
                    return Err(Refusal::new(
                        Rule::Ownership,
                        format!("{shown}: guest {vmid} already has an HA resource"),
                    ));
                }
                (Some(false), false) if rest.is_empty() => {
                    return Err(Refusal::new(
                        Rule::Ownership,
                        format!(
                            "{shown}: the HA resource of guest {vmid} does not carry proxops's mark (`proxops-{vmid}` in its comment); proxops changes or removes only HA resources it created"
                        ),
                    ));
                }
                _ => {}
            }
        }
        if let (
            Some(owner),
            Target::Guest {
                vmid, rest, kind, ..
            },
        ) = (scope.guest_scope, &target)
        {
            check_guest_scoped(&shown, (*vmid, rest, *kind), owner, scope)?;
            continue;
        }
        let own = |v: u64| scope.vmid == Some(v);
        let about = scope
            .vmid
            .map(|v| format!(" (vmid {v})"))
            .unwrap_or_default();
        match &target {
            Target::Guest { rest, vmid, .. }
                if !own(*vmid)
                    && rest.len() == 1
                    && rest[0] == "clone"
                    && call.method == Method::Post =>
            {
                let new = param(call, "newid").and_then(request::form::canonical_vmid);
                if !scope.clone_sources.contains(vmid) || !new.is_some_and(own) {
                    return Err(Refusal::new(
                        Rule::Target,
                        format!(
                            "{shown} clones another guest than this object's template into another vmid than its own{about}"
                        ),
                    ));
                }
                if let Some(g) = new.and_then(|n| (scope.guests)(n)) {
                    return Err(Refusal::new(
                        Rule::Ownership,
                        format!(
                            "{shown} would clone onto vmid {}, which {} already holds",
                            g.vmid,
                            g.describe()
                        ),
                    ));
                }
                continue;
            }
            Target::Volume {
                owner: None,
                volume,
                ..
            } => {
                let declared = scope.resource == Some(volume.as_str());
                let allowed = declared && (call.method != Method::Delete || scope.prune);
                if !allowed {
                    return Err(Refusal::new(
                        Rule::Volume,
                        format!(
                            "{shown} touches the file {}, which this object does not declare{}; a file that belongs to no guest is changed only by the object that declared it, and deleted only by its prune",
                            request::shown(volume),
                            if declared { " as a prune" } else { "" }
                        ),
                    ));
                }
                continue;
            }
            _ => {}
        }
        let Some(vmid) = target.guest() else {
            // A new file, or an endpoint whose capability `grant::check_call` checked.
            continue;
        };
        if !own(vmid) {
            let (rule, what) = match &target {
                Target::Volume { volume, .. } => (
                    Rule::Volume,
                    format!("the volume {} of guest {vmid}", request::shown(volume)),
                ),
                _ => (Rule::Target, format!("guest {vmid}")),
            };
            return Err(Refusal::new(
                rule,
                format!("{shown} reaches {what}, which is not this object{about}"),
            ));
        }
        if let Some(other) = (scope.named_elsewhere)(vmid) {
            return Err(Refusal::new(
                Rule::Ownership,
                format!("{shown} reaches guest {vmid}, which the manifest of {other} names"),
            ));
        }
        let Some(g) = (scope.guests)(vmid) else {
            continue;
        };
        if matches!(target, Target::NewGuest { .. }) {
            return Err(Refusal::new(
                Rule::Ownership,
                format!(
                    "{shown} creates guest {vmid}, which {} already holds",
                    g.describe()
                ),
            ));
        }
        let destroys = request::target::effect(call.method, &target, &call.params).destroys;
        if !scope.prune && !(scope.manageable)(&g) {
            return Err(Refusal::new(
                Rule::Ownership,
                format!(
                    "{shown} writes to {}, which proxops does not own (no `{OWNERSHIP_TAG}` tag, or a copy of another proxops guest)",
                    g.describe()
                ),
            ));
        }
        if destroys || scope.prune {
            let refusal = if g.tagged() {
                prune_refusal(&g)
            } else {
                Some(format!(
                    "{} has no `{OWNERSHIP_TAG}` tag; proxops never deletes or prunes a guest it does not own",
                    g.describe()
                ))
            };
            if let Some(why) = refusal {
                return Err(Refusal::new(Rule::Ownership, format!("{shown}: {why}")));
            }
        }
    }
    Ok(())
}

/// Every call of `actions`, those of their restore steps included: a restore is sent when a
/// later call fails, so it is held to the same rules as the calls it follows.
fn every_call(actions: &[Action]) -> impl Iterator<Item = &Call> {
    actions.iter().flat_map(|a| {
        a.calls
            .iter()
            .chain(a.restore.iter().flat_map(|r| &r.calls))
    })
}

/// The check of a kind's `finally` actions: a write naming a guest (by path, a create's vmid
/// or a volume's owner) must name one of `changed`, the guests of that kind this apply
/// created, updated, started, stopped or deleted (owned, or created in this run); a `finally`
/// step creates no guest and deletes no file.
pub fn check_finally_calls(actions: &[Action], changed: &HashSet<u64>) -> Result<(), Refusal> {
    for call in every_call(actions) {
        if call.method == Method::Get {
            continue;
        }
        let target = path_target(call)?;
        let refused = match &target {
            Target::NewGuest { .. } => Some(Rule::Target),
            Target::Volume { owner: None, .. } => Some(Rule::Volume),
            t => match t.guest() {
                Some(v) if !changed.contains(&v) => Some(match t {
                    Target::Volume { .. } => Rule::Volume,
                    _ => Rule::Target,
                }),
                _ => None,
            },
        };
        if let Some(rule) = refused {
            return Err(Refusal::new(
                rule,
                format!(
                    "the kind's finally step proposed {}, which is not about one of the guests this apply changed",
                    request::describe_call(call)
                ),
            ));
        }
    }
    Ok(())
}

mod named;
mod scoped;

use named::*;
pub use named::{NamedClaim, NamedLive, ROLE_PREFIX, id_marked};
use scoped::*;

#[cfg(test)]
mod tests;
