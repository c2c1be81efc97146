//! Cluster-wide read endpoints: /version, /cluster/resources, /cluster/nextid, /cluster/status and /nodes.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::state::{Vm, now};

pub(crate) fn version() -> ApiResult {
    Ok(Reply::data(json!({
        "version": "9.2.0",
        "release": "9.2",
        "repoid": "5a1b2c3d4e5f6a7b",
    })))
}

fn disk_size(value: &str) -> Option<u64> {
    if value.contains("media=cdrom") {
        return None;
    }
    let size = value.split(',').find_map(|p| p.strip_prefix("size="))?;
    crate::formats::parse_size(size)
}

/// Size of the VM's boot disk in bytes (the first disk in boot order, else the first disk key).
pub(crate) fn maxdisk(vm: &Vm) -> u64 {
    if let Some(boot) = vm.conf.get("boot")
        && let Some(order) = boot.split(',').find_map(|p| p.strip_prefix("order="))
    {
        for dev in order.split(';') {
            if let Some(size) = vm.conf.get(dev).and_then(|v| disk_size(v)) {
                return size;
            }
        }
    }
    for family in ["ide", "scsi", "virtio", "sata"] {
        for (k, v) in vm.conf.range(family.to_string()..) {
            if !k.starts_with(family) {
                break;
            }
            if crate::schema::split_indexed(k).is_some_and(|(f, _)| f == family)
                && let Some(size) = disk_size(v)
            {
                return size;
            }
        }
    }
    0
}

/// One `qemu` entry of /cluster/resources, serialised directly (10,000 of them must stay fast).
#[derive(Serialize)]
struct VmResource<'a> {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    vmid: u32,
    node: &'a str,
    status: &'static str,
    name: std::borrow::Cow<'a, str>,
    template: u8,
    maxcpu: u64,
    maxmem: u64,
    maxdisk: u64,
    uptime: u64,
    cpu: u8,
    mem: u8,
    disk: u8,
    netin: u8,
    netout: u8,
    diskread: u8,
    diskwrite: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    lock: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tags: Option<&'a str>,
    /// The HA state, on HA-managed guests only.
    #[serde(skip_serializing_if = "Option::is_none")]
    hastate: Option<String>,
    /// The pool, on pool members only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pool: Option<&'a str>,
}

fn vm_resource(vmid: u32, vm: &Vm, now: u64) -> VmResource<'_> {
    VmResource {
        id: format!("qemu/{vmid}"),
        kind: "qemu",
        vmid,
        node: &vm.node,
        status: if vm.running { "running" } else { "stopped" },
        name: match vm.conf.get("name") {
            Some(n) => std::borrow::Cow::Borrowed(n.as_str()),
            None => std::borrow::Cow::Owned(format!("VM {vmid}")),
        },
        template: if vm.is_template() { 1 } else { 0 },
        maxcpu: vm.cpus(),
        maxmem: vm.memory_mib() * 1024 * 1024,
        maxdisk: maxdisk(vm),
        uptime: if vm.running {
            now.saturating_sub(vm.started_at)
        } else {
            0
        },
        cpu: 0,
        mem: 0,
        disk: 0,
        netin: 0,
        netout: 0,
        diskread: 0,
        diskwrite: 0,
        lock: vm.lock(),
        tags: vm.conf.get("tags").map(String::as_str),
        hastate: None,
        pool: None,
    }
}

/// A guest's `extract_vm_stats` entry (a pool's member listing): the `/cluster/resources` entry without the
/// config properties (`lock`, `tags`), HA state and pool; `None` for a VMID no guest has.
pub(crate) fn guest_stats(st: &crate::state::State, vmid: u32) -> Option<Value> {
    let (mut entry, node) = if let Some(vm) = st.vms.get(&vmid) {
        let mut e = vm_resource(vmid, vm, now());
        (e.lock, e.tags) = (None, None);
        (serde_json::to_value(&e).ok()?, vm.node.as_str())
    } else {
        let ct = st.lxc.get(&vmid)?;
        let mut e = crate::lxc::resource_entry(vmid, ct);
        if let Some(m) = e.as_object_mut() {
            m.remove("lock");
            m.remove("tags");
        }
        (e, ct.node.as_str())
    };
    if st.offline_nodes.contains(node) {
        entry["status"] = json!("unknown");
        entry["uptime"] = json!(0);
    }
    Some(entry)
}

/// A storage's entry on one node (`extract_storage_stats`), as `/cluster/resources` and a pool's members list it.
pub(crate) fn storage_entry(
    st: &crate::state::State,
    node: &str,
    s: &crate::config::StorageConfig,
) -> Value {
    let used: u64 = st
        .volumes
        .values()
        .filter(|v| v.storage == s.name && (v.node == *node || v.node == "*"))
        .map(|v| v.size)
        .sum();
    let status = if st.offline_nodes.contains(node) {
        "unknown"
    } else {
        "available"
    };
    json!({
        "id": format!("storage/{node}/{}", s.name), "type": "storage",
        "storage": s.name, "node": node, "status": status,
        "plugintype": s.kind, "shared": if s.shared { 1 } else { 0 },
        "content": s.content.join(","), "maxdisk": s.total, "disk": used,
    })
}

pub(crate) fn resources(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let filter = req.get("type");
    let st = sim.read();
    let mut out = Vec::with_capacity(st.lxc.len() + 16);
    let mut raw = String::with_capacity(st.vms.len() * 300 + 2);
    raw.push('[');
    // Pool entries and the member guests' `pool` only when there are pools: a cluster without any answers as
    // before, byte for byte.
    let guest_pools = crate::pools::guest_pools(&st);
    let mut pool_stats: std::collections::BTreeMap<&str, crate::pools::PoolResource> = st
        .pools
        .keys()
        .map(|p| (p.as_str(), crate::pools::PoolResource::default()))
        .collect();
    if filter.is_none() || filter == Some("vm") {
        let now = now();
        let ha = st.ha.active();
        for (vmid, vm) in &st.vms {
            if raw.len() > 1 {
                raw.push(',');
            }
            let mut entry = vm_resource(*vmid, vm, now);
            if ha {
                entry.hastate = crate::ha::hastate(&st, &format!("vm:{vmid}"));
            }
            // pmxcfs has no fresh RRD data of a guest on an offline node: `status` is `unknown`.
            if st.offline_nodes.contains(&vm.node) {
                entry.status = "unknown";
                entry.uptime = 0;
            }
            if let Some(pool) = guest_pools.get(vmid) {
                entry.pool = Some(pool);
                if let Some(p) = pool_stats.get_mut(pool) {
                    p.add(
                        entry.status,
                        (entry.uptime, u64::from(entry.mem), entry.maxmem),
                        f64::from(entry.cpu),
                        entry.maxcpu,
                    );
                }
            }
            let entry = serde_json::to_string(&entry).map_err(|e| ApiError::die(e.to_string()))?;
            raw.push_str(&entry);
        }
        for (vmid, ct) in &st.lxc {
            let mut entry = crate::lxc::resource_entry(*vmid, ct);
            if ha && let Some(h) = crate::ha::hastate(&st, &format!("ct:{vmid}")) {
                entry["hastate"] = json!(h);
            }
            if st.offline_nodes.contains(&ct.node) {
                entry["status"] = json!("unknown");
                entry["uptime"] = json!(0);
            }
            if let Some(pool) = guest_pools.get(vmid) {
                entry["pool"] = json!(pool);
                if let Some(p) = pool_stats.get_mut(pool) {
                    let n = |k: &str| entry[k].as_u64().unwrap_or(0);
                    let cpu = entry["cpu"].as_f64().unwrap_or(0.0);
                    let status = entry["status"].as_str().unwrap_or("");
                    p.add(
                        status,
                        (n("uptime"), n("mem"), n("maxmem")),
                        cpu,
                        n("maxcpu"),
                    );
                }
            }
            out.push(entry);
        }
    }
    if filter.is_none() || filter == Some("node") {
        for node in &sim.nodes {
            let mut entry = if st.offline_nodes.contains(node) {
                // pve-manager `extract_node_stats`: an offline member keeps its static maxima only.
                json!({
                    "id": format!("node/{node}"), "type": "node", "node": node, "status": "offline",
                    "level": "", "maxcpu": 64, "maxmem": 274877906944u64,
                    "maxdisk": 107374182400u64, "cgroup-mode": 2,
                })
            } else {
                json!({
                    "id": format!("node/{node}"), "type": "node", "node": node, "status": "online",
                    "level": "", "cpu": 0.01, "maxcpu": 64, "mem": 8589934592u64,
                    "maxmem": 274877906944u64, "disk": 10737418240u64, "maxdisk": 107374182400u64,
                    "uptime": now().saturating_sub(sim.boot_time), "cgroup-mode": 2,
                })
            };
            if st.ha.active() {
                entry["hastate"] = json!(crate::ha::node_state(&st, node));
            }
            out.push(entry);
        }
    }
    if filter.is_none() || filter == Some("storage") {
        for node in &sim.nodes {
            for s in sim.storages.iter().filter(|s| s.on_node(node)) {
                out.push(storage_entry(&st, node, s));
            }
        }
    }
    for v in out {
        if raw.len() > 1 {
            raw.push(',');
        }
        raw.push_str(&v.to_string());
    }
    raw.push(']');
    // pve-manager lists the pools first (`type` cannot ask for them: its enum has no `pool`).
    if filter.is_none() && !pool_stats.is_empty() {
        let mut head = String::new();
        for (pool, stats) in &pool_stats {
            head.push_str(&stats.entry(pool).to_string());
            head.push(',');
        }
        if raw.len() == 2 {
            head.pop();
        }
        raw.insert_str(1, &head);
    }
    Ok(Reply {
        data: Value::Null,
        total: None,
        raw: Some(raw),
    })
}

pub(crate) fn nextid(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    if let Some(v) = req.get("vmid") {
        let vmid: u32 = v.parse().unwrap_or(0);
        if st.vmid_owner(vmid).is_some() {
            return Err(ApiError::param("vmid", format!("VM {vmid} already exists")));
        }
        return Ok(Reply::data(json!(vmid.to_string())));
    }
    for id in 100u32..1_000_000 {
        if st.vmid_owner(id).is_none() {
            return Ok(Reply::data(json!(id.to_string())));
        }
    }
    Err(ApiError::die(
        "unable to get any free VMID in range [100, 1000000)",
    ))
}

pub(crate) fn nodes(sim: &Arc<Sim>) -> ApiResult {
    let fp = sim.fingerprint.clone().unwrap_or_default();
    let offline = sim.read().offline_nodes.clone();
    let out: Vec<Value> = sim
        .nodes
        .iter()
        .map(|n| {
            if offline.contains(n) {
                return json!({
                    "node": n, "status": "offline", "id": format!("node/{n}"), "type": "node",
                    "level": "", "ssl_fingerprint": fp,
                });
            }
            json!({
                "node": n, "status": "online", "cpu": 0.01, "maxcpu": 64,
                "mem": 8589934592u64, "maxmem": 274877906944u64,
                "uptime": now().saturating_sub(sim.boot_time), "level": "",
                "ssl_fingerprint": fp, "id": format!("node/{n}"), "type": "node",
                "disk": 10737418240u64, "maxdisk": 107374182400u64,
            })
        })
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /cluster/status`: with more than one node, the cluster's entry (quorate: every node is
/// online) and one per node with its corosync id; a single node is not a cluster, and PVE
/// lists the node alone, with node id 0 (pve-manager's `get_status`). The simulator answers
/// as its first node (`local`); node addresses come from the documentation range
/// 192.0.2.0/24, as the simulator has no network of its own.
pub(crate) fn status(sim: &Arc<Sim>) -> ApiResult {
    let mut out = Vec::new();
    let offline = sim.read().offline_nodes.clone();
    let clustered = sim.nodes.len() > 1;
    if clustered {
        out.push(json!({
            "type": "cluster", "id": "cluster", "name": CLUSTER_NAME,
            "nodes": sim.nodes.len(), "quorate": 1, "version": sim.nodes.len(),
        }));
    }
    for (i, n) in sim.nodes.iter().enumerate() {
        out.push(json!({
            "type": "node", "id": format!("node/{n}"), "name": n,
            "nodeid": if clustered { i + 1 } else { 0 },
            "ip": format!("192.0.2.{}", (i % 254) + 1), "online": u8::from(!offline.contains(n)),
            "local": u8::from(i == 0),
            "level": "",
        }));
    }
    Ok(Reply::data(Value::Array(out)))
}

/// The name `GET /cluster/status` gives the simulated cluster.
const CLUSTER_NAME: &str = "sim";
