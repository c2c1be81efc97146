//! Resource pools (`/pools`, and the older `/pools/{poolid}`): the `pool:` lines of `/etc/pve/user.cfg`, with
//! their guests and storages, and how they show in `/cluster/resources`.
//!
//! Sources: proxmox/pve-manager `PVE/API2/Pool.pm` (the endpoints, their checks and messages; PVE 8.1+ serves
//! `GET|POST|PUT|DELETE /pools` with `poolid` and keeps `/pools/{poolid}` as deprecated aliases),
//! proxmox/pve-access-control `src/PVE/AccessControl.pm` (`verify_poolname`, `lock_user_config`,
//! `add_vm_to_pool`, `remove_vm_access`, the `pool:` line parser that links nested pools),
//! `src/PVE/RPCEnvironment.pm` (`check_pool_exist`), pve-manager `PVE/API2/Cluster.pm` (`resources`: the `pool`
//! entries and the `pool` field of member guests) and `PVE/API2Tools.pm` (`extract_vm_stats`,
//! `extract_storage_stats`: the member entries of a pool).
//!
//! Not modelled: permissions. PVE filters every answer by `Pool.Audit`/`Pool.Allocate` on `/pool/<id>` and
//! checks the right to modify each guest and storage added or removed; the simulator's single token may do
//! everything, and pool ACLs (`delete_pool_acl`) do not exist.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::state::State;

/// One pool as `user.cfg` holds it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Pool {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Member guests by VMID (a guest is in one pool at most).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub vms: BTreeSet<u32>,
    /// Member storages by id.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub storage: BTreeSet<String>,
}

/// Perl's truth of a string: a comment `""` or `"0"` is not written (`create_pool`, the `pool:` line parser).
fn perl_true(s: &str) -> bool {
    !s.is_empty() && s != "0"
}

/// The pool guest `vmid` belongs to (`$usercfg->{vms}->{$vmid}`).
pub(crate) fn pool_of(st: &State, vmid: u32) -> Option<&str> {
    st.pools
        .iter()
        .find(|(_, p)| p.vms.contains(&vmid))
        .map(|(id, _)| id.as_str())
}

/// Each member guest's pool, for `/cluster/resources`.
pub(crate) fn guest_pools(st: &State) -> BTreeMap<u32, &str> {
    let mut out = BTreeMap::new();
    for (id, p) in &st.pools {
        for vmid in &p.vms {
            out.insert(*vmid, id.as_str());
        }
    }
    out
}

/// `RPCEnvironment::check_pool_exist`, as a guest create or clone with `pool` checks it first.
pub(crate) fn check_exists(st: &State, pool: Option<&str>) -> Result<(), ApiError> {
    match pool {
        Some(p) if !st.pools.contains_key(p) => Err(ApiError::Status {
            code: 403,
            message: format!("Permission check failed (pool '{p}' does not exist)\n"),
        }),
        _ => Ok(()),
    }
}

/// `AccessControl::add_vm_to_pool`, run by a guest create or clone once the guest exists: nothing when the pool
/// is gone by then.
pub(crate) fn add_guest(st: &mut State, vmid: u32, pool: &str) {
    if !st.pools.contains_key(pool) {
        return;
    }
    for p in st.pools.values_mut() {
        p.vms.remove(&vmid);
    }
    if let Some(p) = st.pools.get_mut(pool) {
        p.vms.insert(vmid);
    }
}

/// `AccessControl::remove_vm_access`, run when a guest is destroyed: it leaves its pool.
pub(crate) fn remove_guest(st: &mut State, vmid: u32) {
    for p in st.pools.values_mut() {
        p.vms.remove(&vmid);
    }
}

/// The pools nested directly in `pool` (`a/b` in `a`), as the `pool:` line parser links them.
fn children<'a>(st: &'a State, pool: &str) -> Vec<&'a str> {
    st.pools
        .keys()
        .filter(|id| {
            id.strip_prefix(pool)
                .and_then(|rest| rest.strip_prefix('/'))
                .is_some_and(|leaf| !leaf.contains('/'))
        })
        .map(String::as_str)
        .collect()
}

/// `extract_storage_stats` for a pool member: on the node answering (the first) unless the storage is limited to
/// other nodes, then on the first of those.
fn storage_member(sim: &Sim, st: &State, storage: &str) -> Option<Value> {
    let s = sim.storage(storage)?;
    let local = sim.nodes.first()?;
    let node = match &s.nodes {
        Some(nodes) if !nodes.contains(local) => {
            let mut sorted = nodes.clone();
            sorted.sort();
            sorted.into_iter().next()?
        }
        _ => local.clone(),
    };
    Some(crate::cluster::storage_entry(st, &node, s))
}

/// `GET /pools?poolid=` and `GET /pools/{poolid}`: the pool with its `members` (`type` filters them), guests
/// that no longer exist left out; VMIDs in Perl's string order.
fn pool_info(sim: &Sim, st: &State, poolid: &str, filter: Option<&str>) -> Result<Value, ApiError> {
    let Some(pool) = st.pools.get(poolid) else {
        return Err(ApiError::die(format!("pool '{poolid}' does not exist")));
    };
    let mut vmids: Vec<u32> = pool.vms.iter().copied().collect();
    vmids.sort_by_key(|v| v.to_string());
    let mut members = Vec::new();
    for vmid in vmids {
        let Some(entry) = crate::cluster::guest_stats(st, vmid) else {
            continue;
        };
        if filter.is_some_and(|t| entry["type"] != t) {
            continue;
        }
        members.push(entry);
    }
    if filter.is_none_or(|t| t == "storage") {
        for storage in &pool.storage {
            if let Some(entry) = storage_member(sim, st, storage) {
                members.push(entry);
            }
        }
    }
    let mut info = json!({"members": members, "poolid": poolid});
    if let Some(c) = &pool.comment {
        info["comment"] = json!(c);
    }
    Ok(info)
}

/// `GET /pools`: every pool (`poolid`, `comment`), or with `poolid` that one pool with its members.
pub(crate) fn list(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    if let Some(poolid) = req.get("poolid").filter(|p| !p.is_empty()) {
        let info = pool_info(sim, &st, poolid, req.get("type"))?;
        return Ok(Reply::data(json!([info])));
    }
    let out: Vec<Value> = st
        .pools
        .iter()
        .map(|(id, p)| {
            let mut e = json!({"poolid": id});
            if let Some(c) = &p.comment {
                e["comment"] = json!(c);
            }
            e
        })
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /pools/{poolid}` (deprecated in PVE 8.1+): `index`'s one entry.
pub(crate) fn read(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let poolid = req.get("poolid").unwrap_or("");
    pool_info(sim, &st, poolid, req.get("type")).map(Reply::data)
}

/// `POST /pools`: a new pool; a nested one (`parent/leaf`, three levels at most) needs its parent, and every
/// level's name starts with a letter.
pub(crate) fn create(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let poolid = req.get("poolid").unwrap_or("").to_string();
    let failed = |e: String| ApiError::die(format!("create pool failed: {e}"));
    let mut st = sim.write();
    if st.pools.contains_key(&poolid) {
        return Err(failed(format!("pool '{poolid}' already exists")));
    }
    let starts_with_letter = |s: &str| s.starts_with(|c: char| c.is_ascii_alphabetic());
    match poolid.rsplit_once('/') {
        Some((parent, leaf)) if !leaf.is_empty() => {
            if !st.pools.contains_key(parent) {
                return Err(failed(format!(
                    "parent '{parent}' of pool '{poolid}' does not exist"
                )));
            }
            if !starts_with_letter(leaf) {
                return Err(failed("pool name must start with a letter".into()));
            }
        }
        _ => {
            if !starts_with_letter(&poolid) {
                return Err(failed("pool name must start with a letter".into()));
            }
        }
    }
    let comment = req
        .get("comment")
        .filter(|c| perl_true(c))
        .map(str::to_string);
    st.pools.insert(
        poolid,
        Pool {
            comment,
            ..Pool::default()
        },
    );
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}

/// `PUT /pools` and `PUT /pools/{poolid}`: the comment, then the guests and storages listed added (a guest in
/// another pool only with `allow-move`) or, with `delete`, removed. The first refusal fails the whole update
/// (PVE dies under the lock, before it writes `user.cfg`).
pub(crate) fn update(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let poolid = req.get("poolid").unwrap_or("").to_string();
    let failed = |e: String| ApiError::die(format!("update pools failed: {e}"));
    let mut st = sim.write();
    let mut pools = st.pools.clone();
    let Some(mut pool) = pools.remove(&poolid) else {
        return Err(failed(format!("pool '{poolid}' does not exist")));
    };
    if let Some(c) = req.get("comment") {
        pool.comment = perl_true(c).then(|| c.to_string());
    }
    let delete = req.flag("delete");
    if let Some(vms) = req.get("vms") {
        for item in crate::formats::split_list(vms) {
            let vmid: u32 = item.parse().unwrap_or(0);
            if delete {
                if !pool.vms.remove(&vmid) {
                    return Err(failed(format!("VM {vmid} is not a pool member")));
                }
                continue;
            }
            if pool.vms.contains(&vmid) {
                return Err(failed(format!("VM {vmid} is already a pool member")));
            }
            if let Some((other, p)) = pools.iter_mut().find(|(_, p)| p.vms.contains(&vmid)) {
                if !req.flag("allow-move") {
                    return Err(failed(format!(
                        "VM {vmid} belongs already to pool '{other}' and 'allow-move' is not set"
                    )));
                }
                p.vms.remove(&vmid);
            }
            pool.vms.insert(vmid);
        }
    }
    if let Some(storages) = req.get("storage") {
        for storage in crate::formats::split_list(storages) {
            if delete {
                if !pool.storage.remove(storage) {
                    return Err(failed(format!("Storage '{storage}' is not a pool member")));
                }
            } else if !pool.storage.insert(storage.to_string()) {
                return Err(failed(format!(
                    "Storage '{storage}' is already a pool member"
                )));
            }
        }
    }
    pools.insert(poolid, pool);
    st.pools = pools;
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}

/// `DELETE /pools?poolid=` and `DELETE /pools/{poolid}`: only an empty pool goes (no nested pool, no guest that
/// still exists, no storage still configured).
pub(crate) fn delete(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let poolid = req.get("poolid").unwrap_or("").to_string();
    let failed = |e: String| ApiError::die(format!("delete pool failed: {e}"));
    let mut st = sim.write();
    let Some(pool) = st.pools.get(&poolid) else {
        return Err(failed(format!("pool '{poolid}' does not exist")));
    };
    if let Some(sub) = children(&st, &poolid).first() {
        return Err(failed(format!(
            "pool '{poolid}' is not empty (contains pool '{sub}')"
        )));
    }
    let mut vmids: Vec<u32> = pool.vms.iter().copied().collect();
    vmids.sort_by_key(|v| v.to_string());
    if let Some(vmid) = vmids.into_iter().find(|v| st.vmid_owner(*v).is_some()) {
        return Err(failed(format!(
            "pool '{poolid}' is not empty (contains VM {vmid})"
        )));
    }
    if let Some(s) = pool.storage.iter().find(|s| sim.storage(s).is_some()) {
        return Err(failed(format!(
            "pool '{poolid}' is not empty (contains storage '{s}')"
        )));
    }
    st.pools.remove(&poolid);
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}

/// A pool's entry in `/cluster/resources` (`id` is `/pool/<id>`, with the slash, as pve-manager writes it) and,
/// once a member guest runs, the sums of its running members: `uptime` the longest, `mem`, `maxmem`, `maxcpu`
/// added up, `cpu` their weighted mean. PVE counts the members with an uptime in their RRD data; the simulator
/// counts the running ones (its uptime is whole seconds, 0 in a guest's first second).
#[derive(Debug, Default)]
pub(crate) struct PoolResource {
    stats: Option<(u64, u64, u64, f64, u64)>,
}

impl PoolResource {
    /// Counts a member guest's entry (`status`, `uptime`, `mem`, `maxmem`, `cpu`, `maxcpu`) when it runs.
    pub(crate) fn add(
        &mut self,
        status: &str,
        (uptime, mem, maxmem): (u64, u64, u64),
        cpu: f64,
        maxcpu: u64,
    ) {
        if status != "running" {
            return;
        }
        let (up, m, mm, c, mc) = self.stats.get_or_insert((0, 0, 0, 0.0, 0));
        *up = (*up).max(uptime);
        *m += mem;
        *mm += maxmem;
        let total = *mc + maxcpu;
        if total > 0 {
            *c = (*c * *mc as f64 + cpu * maxcpu as f64) / total as f64;
        }
        *mc = total;
    }

    pub(crate) fn entry(&self, pool: &str) -> Value {
        let mut e = json!({"id": format!("/pool/{pool}"), "pool": pool, "type": "pool"});
        if let Some((uptime, mem, maxmem, cpu, maxcpu)) = self.stats {
            e["uptime"] = json!(uptime);
            e["mem"] = json!(mem);
            e["maxmem"] = json!(maxmem);
            e["cpu"] = json!(cpu);
            e["maxcpu"] = json!(maxcpu);
        }
        e
    }
}
