//! `observe`, `check-references` and `plan`; `claims` is the SDK's, by the mark
//! ([`NAMED`]).
//!
//! The listing (`GET /pools`) gives each pool's `poolid` and `comment`; a pool's members need
//! one more read, `GET /pools?poolid=<id>` (PVE 8.1+; the older `/pools/{poolid}` is
//! deprecated), asked for only when the pool exists.
//!
//! * No live pool: one `create` action, `POST /pools` with `poolid` and the `comment` carrying
//!   the mark ([`Desired::pve_comment`]). PVE's create takes no members, and an update of a
//!   pool the cycle's listing does not show cannot pass the ownership gate, so the members are
//!   added by the apply's next pass, which re-plans the pool once it exists.
//! * A live pool whose comment carries `proxops:<id>`: members and comment compared. At most
//!   two calls in one `update` action, PVE's own form: `PUT /pools` with `poolid`, the members
//!   to drop in `vms` / `storage` and `delete=1`; then `PUT /pools` with `poolid`, the new
//!   `comment` and the members to add. Never `allow-move`: a guest in another pool is that
//!   pool's, and PVE's refusal ("belongs already to pool") says so.
//! * A live pool without the mark is not proxops's: an anomaly, never a write; unless the host
//!   flagged it for a take-over (its manifest's `metadata.adopt` matches it): then the one
//!   write `PUT /pools` with `poolid` and the live comment with the mark appended.
//! * No manifest, a claimed (marked) live pool: PVE deletes only an empty pool, so one
//!   `delete` action empties it (`PUT … delete=1`, when it has members) and deletes it
//!   (`DELETE /pools?poolid=<id>`).

use std::collections::BTreeSet;

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::kind::Resolved;
use proxops_kind_sdk::model::{
    Action, Call, Change, Drift, Method, Observation, Operation, Proposal,
};
use proxops_kind_sdk::named;
use serde_json::Value;

use crate::desired::{Desired, Guest, NAMED, POOLS};

/// The path of `spec.guests[i]`, which is also its reference's path.
pub fn guest_path(i: usize) -> String {
    format!("spec.guests[{i}]")
}

/// A pool as PVE lists it, with its members when they were read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LivePool {
    pub pool: String,
    pub comment: Option<String>,
    /// Member guests that exist (PVE leaves out the ones that do not).
    pub vms: BTreeSet<u64>,
    pub storages: BTreeSet<String>,
}

impl LivePool {
    /// The listing entry (`poolid`, `comment`); no members.
    pub fn from_entry(e: &Value) -> Option<Self> {
        Some(LivePool {
            pool: e.get("poolid")?.as_str()?.to_string(),
            comment: e
                .get("comment")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(str::to_string),
            vms: BTreeSet::new(),
            storages: BTreeSet::new(),
        })
    }

    /// Whether the pool's comment carries proxops's mark for its own id.
    pub fn is_marked(&self) -> bool {
        named::is_marked(self.comment.as_deref(), &self.pool)
    }

    /// Read the members from `GET /pools?poolid=<id>`'s answer (an array of one pool).
    pub fn read_members(&mut self, body: &str) -> Result<(), String> {
        let v: Value = serde_json::from_str(body)
            .map_err(|e| format!("the members of pool {} do not read: {e}", self.pool))?;
        let info = match &v {
            Value::Array(a) => a.iter().find(|p| p["poolid"] == self.pool.as_str()),
            Value::Object(_) => Some(&v),
            _ => None,
        }
        .ok_or_else(|| format!("PVE's answer names no pool {}", self.pool))?;
        for m in info["members"].as_array().into_iter().flatten() {
            match m["type"].as_str() {
                Some("qemu" | "lxc" | "openvz") => {
                    if let Some(vmid) = m["vmid"].as_u64() {
                        self.vms.insert(vmid);
                    }
                }
                Some("storage") => {
                    if let Some(s) = m["storage"].as_str() {
                        self.storages.insert(s.to_string());
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The members read of pool `id`.
pub fn members_read(id: &str) -> Call {
    Call::new(Method::Get, POOLS).param("poolid", id)
}

/// `observe`: the members read, only for a pool that exists.
pub fn observe(live: Option<&Value>) -> Vec<Call> {
    live.and_then(LivePool::from_entry)
        .map(|l| vec![members_read(&l.pool)])
        .unwrap_or_default()
}

/// The vmids of `d`'s guests, the named ones from their resolved desired states; errors name
/// the guest's path.
pub fn vmids(d: &Desired, resolved: &[Resolved]) -> Result<BTreeSet<u64>, Vec<Diag>> {
    let mut out = BTreeSet::new();
    let mut errors = Vec::new();
    for (i, g) in d.guests.iter().enumerate() {
        let path = guest_path(i);
        let vmid = match (g, g.kind()) {
            (Guest::Vmid(n), _) => *n,
            (_, Some((kind, name))) => {
                let Some(r) = resolved.iter().find(|r| r.reference.path == path) else {
                    errors.push(Diag::error(
                        &path,
                        format!("no {kind} named `{name}` in this cluster"),
                    ));
                    continue;
                };
                let t: Value = serde_json::from_str(&r.desired).unwrap_or(Value::Null);
                let Some(vmid) = t.get("vmid").and_then(Value::as_u64) else {
                    errors.push(Diag::error(
                        &path,
                        format!("the desired state of {kind} `{name}` has no vmid"),
                    ));
                    continue;
                };
                vmid
            }
            (_, None) => continue,
        };
        if !out.insert(vmid) {
            errors.push(Diag::error(
                &path,
                format!(
                    "`{}` is vmid {vmid}, which another entry of spec.guests already names",
                    g.display()
                ),
            ));
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// The `spec.pool` a resolved guest's desired state declares (VM, TemplateVM), if any.
fn declared_pool(desired: &str) -> Option<String> {
    let t: Value = serde_json::from_str(desired).ok()?;
    t.get("pool")?.as_str().map(str::to_string)
}

/// The folder of a guest kind's manifests, for messages that name its file.
fn folder(kind: &str) -> &'static str {
    if kind == "TemplateVM" {
        "templatevm"
    } else {
        "vm"
    }
}

/// `check-references`: the vmids resolve ([`vmids`]), and each named guest's own `spec.pool`
/// agrees with this pool. A guest that declares another pool is a conflict (a guest is in one
/// pool); one that declares this pool already joins it through that field, and listing it here
/// as well would make each manifest wait for the other (a reference cycle): it belongs in one
/// place.
pub fn check_references(d: &Desired, resolved: &[Resolved]) -> Vec<Diag> {
    let mut out = vmids(d, resolved).err().unwrap_or_default();
    for r in resolved {
        let Some(pool) = declared_pool(&r.desired) else {
            continue;
        };
        let (kind, name) = (&r.reference.kind, &r.reference.name);
        let file = format!("{}/<cluster>/{name}.yaml", folder(kind));
        let message = if pool == d.pool {
            format!(
                "{kind} `{name}` already joins pool {} through its own spec.pool ({file}); declare the membership once: drop this entry (listing it here too makes each manifest wait for the other)",
                d.pool
            )
        } else {
            format!(
                "{kind} `{name}` declares spec.pool: {pool} ({file}), but this pool {} lists it; a guest is in one pool: drop this entry, or change that manifest's spec.pool",
                d.pool
            )
        };
        out.push(Diag::error(&r.reference.path, message));
    }
    out
}

/// The vmids of the guests whose own manifest declares `spec.pool: <this pool>` (the host
/// hands them over as referrers): they joined the pool when they were created, so the pool
/// never removes them.
pub fn declared_members(d: &Desired, referrers: &[Resolved]) -> BTreeSet<u64> {
    referrers
        .iter()
        .filter(|r| r.reference.path == "spec.pool")
        .filter_map(|r| {
            let t: Value = serde_json::from_str(&r.desired).ok()?;
            (t.get("pool")?.as_str()? == d.pool).then_some(())?;
            t.get("vmid")?.as_u64()
        })
        .collect()
}

fn list<T: ToString>(s: &BTreeSet<T>) -> String {
    s.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

fn shown<T: ToString>(s: &BTreeSet<T>) -> Option<String> {
    (!s.is_empty()).then(|| list(s))
}

/// The proposal for one pool.
pub fn plan(
    d: Option<&Desired>,
    resolved: &[Resolved],
    referrers: &[Resolved],
    observed: &Observation,
) -> Result<Proposal, Vec<Diag>> {
    let bad = |m: String| vec![Diag::error("", m)];
    let mut live = NAMED.live(observed, LivePool::from_entry).map_err(bad)?;
    if let Some(l) = live.as_mut()
        && l.is_marked()
    {
        let read = observed
            .reads
            .iter()
            .find(|r| r.call.path == POOLS)
            .ok_or_else(|| bad(format!("the members of pool {} were not read", l.pool)))?;
        if read.status != 200 {
            return Err(bad(format!(
                "reading the members of pool {} failed (HTTP {}): {}",
                l.pool, read.status, read.body
            )));
        }
        l.read_members(&read.body).map_err(bad)?;
    }
    let mut out = Proposal::default();
    let Some(d) = d else {
        if let Some(l) = live {
            prune(&l, &mut out);
        }
        return Ok(out);
    };
    let mut vms = vmids(d, resolved)?;
    let Some(l) = live else {
        create(d, &vms, &mut out);
        return Ok(out);
    };
    if !l.is_marked() {
        if named::take_over_requested(observed) {
            NAMED.take_over(&mut out, &d.pool, l.comment.as_deref(), |comment| {
                Call::new(Method::Put, POOLS)
                    .param("poolid", &d.pool)
                    .param("comment", comment)
            });
            return Ok(out);
        }
        let how = if l.comment == d.comment {
            ""
        } else {
            "; its comment differs from this manifest's"
        };
        let command = format!("pvesh set {POOLS} --poolid {}", d.pool);
        out.anomalies.push(NAMED.unowned(
            &d.pool,
            l.comment.as_deref(),
            how,
            &command,
            &d.pve_comment(),
        ));
        return Ok(out);
    }
    // Guests whose manifest declares this pool stay members; the pool does not add them (their
    // create did, and a guest not in it is its VM's anomaly).
    vms.extend(declared_members(d, referrers).intersection(&l.vms).copied());
    update(d, &l, &vms, &mut out);
    Ok(out)
}

fn create(d: &Desired, vms: &BTreeSet<u64>, out: &mut Proposal) {
    let comment = d.pve_comment();
    out.drift
        .push(Drift::new("spec", None, Some(format!("pool {}", d.pool))));
    if let Some(v) = shown(vms) {
        out.drift.push(Drift::new("spec.guests", None, Some(v)));
    }
    if let Some(s) = shown(&d.storages) {
        out.drift.push(Drift::new("spec.storages", None, Some(s)));
    }
    let then = if vms.is_empty() && d.storages.is_empty() {
        String::new()
    } else {
        "; its members are added once it exists".into()
    };
    out.actions.push(Action {
        operation: Operation::Create,
        summary: format!("create pool {}{then}", d.pool),
        calls: vec![
            Call::new(Method::Post, POOLS)
                .param("poolid", &d.pool)
                .param("comment", &comment),
        ],
        changes: vec![
            Change::new("poolid", None, Some(d.pool.clone())),
            Change::new("comment", None, Some(comment)),
        ],
        disturbs_availability: false,
        destructive: false,
        restore: None,
    });
}

fn update(d: &Desired, l: &LivePool, vms: &BTreeSet<u64>, out: &mut Proposal) {
    let comment = d.pve_comment();
    let add_vms: BTreeSet<u64> = vms.difference(&l.vms).copied().collect();
    let drop_vms: BTreeSet<u64> = l.vms.difference(vms).copied().collect();
    let add_st: BTreeSet<String> = d.storages.difference(&l.storages).cloned().collect();
    let drop_st: BTreeSet<String> = l.storages.difference(&d.storages).cloned().collect();
    let comment_differs = l.comment.as_deref() != Some(comment.as_str());
    let mut calls = Vec::new();
    let mut changes = Vec::new();
    let mut what = Vec::new();
    if comment_differs {
        out.drift.push(Drift::new(
            "spec.comment",
            l.comment.clone(),
            Some(comment.clone()),
        ));
        changes.push(Change::new(
            "comment",
            l.comment.clone(),
            Some(comment.clone()),
        ));
        what.push("comment".to_string());
    }
    if !add_vms.is_empty() || !drop_vms.is_empty() {
        out.drift
            .push(Drift::new("spec.guests", shown(&l.vms), shown(vms)));
    }
    if !add_st.is_empty() || !drop_st.is_empty() {
        out.drift.push(Drift::new(
            "spec.storages",
            shown(&l.storages),
            shown(&d.storages),
        ));
    }
    if !drop_vms.is_empty() || !drop_st.is_empty() {
        let mut call = Call::new(Method::Put, POOLS).param("poolid", &d.pool);
        if let Some(v) = shown(&drop_vms) {
            changes.push(Change::new("vms", Some(v.clone()), None));
            what.push(format!("remove guests {v}"));
            call = call.param("vms", v);
        }
        if let Some(s) = shown(&drop_st) {
            changes.push(Change::new("storage", Some(s.clone()), None));
            what.push(format!("remove storages {s}"));
            call = call.param("storage", s);
        }
        calls.push(call.param("delete", "1"));
    }
    if comment_differs || !add_vms.is_empty() || !add_st.is_empty() {
        let mut call = Call::new(Method::Put, POOLS).param("poolid", &d.pool);
        if comment_differs {
            call = call.param("comment", &comment);
        }
        if let Some(v) = shown(&add_vms) {
            changes.push(Change::new("vms", None, Some(v.clone())));
            what.push(format!("add guests {v}"));
            call = call.param("vms", v);
        }
        if let Some(s) = shown(&add_st) {
            changes.push(Change::new("storage", None, Some(s.clone())));
            what.push(format!("add storages {s}"));
            call = call.param("storage", s);
        }
        calls.push(call);
    }
    if calls.is_empty() {
        return;
    }
    out.actions.push(Action {
        operation: Operation::Update,
        summary: format!("update pool {} ({})", d.pool, what.join("; ")),
        calls,
        changes,
        disturbs_availability: false,
        destructive: false,
        restore: None,
    });
}

fn prune(l: &LivePool, out: &mut Proposal) {
    if !l.is_marked() {
        out.anomalies.push(NAMED.prune_unowned(&l.pool));
        return;
    }
    let mut calls = Vec::new();
    if !l.vms.is_empty() || !l.storages.is_empty() {
        let mut call = Call::new(Method::Put, POOLS).param("poolid", &l.pool);
        if let Some(v) = shown(&l.vms) {
            call = call.param("vms", v);
        }
        if let Some(s) = shown(&l.storages) {
            call = call.param("storage", s);
        }
        calls.push(call.param("delete", "1"));
    }
    calls.push(Call::new(Method::Delete, POOLS).param("poolid", &l.pool));
    let members: Vec<String> = l
        .vms
        .iter()
        .map(|v| format!("guest {v}"))
        .chain(l.storages.iter().map(|s| format!("storage {s}")))
        .collect();
    let summary = if members.is_empty() {
        format!("delete pool {} (no manifest names it)", l.pool)
    } else {
        format!(
            "delete pool {} (no manifest names it; its members {} leave it, and are not touched otherwise)",
            l.pool,
            members.join(", ")
        )
    };
    let changes = vec![Change::new("poolid", Some(l.pool.clone()), None)];
    NAMED.prune(out, &l.pool, summary, calls, changes);
}
