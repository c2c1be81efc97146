//! Cluster-wide read endpoints: /version, /cluster/resources, /cluster/nextid, /nodes and the read-only LXC list.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::api::{ApiError, ApiResult, Reply};
use crate::server::Req;
use crate::sim::Sim;
use crate::state::{Vm, now};

pub(crate) fn version() -> ApiResult {
    Ok(Reply::data(json!({
        "version": "9.2.0",
        "release": "9.2",
        "repoid": "5a1b2c3d4e5f6a7b",
    })))
}

/// Size of the VM's boot disk in bytes (the first disk in boot order, else the first disk key).
pub(crate) fn maxdisk(vm: &Vm) -> u64 {
    let mut keys: Vec<String> = Vec::new();
    if let Some(boot) = vm.conf.get("boot")
        && let Some(order) = boot.split(',').find_map(|p| p.strip_prefix("order="))
    {
        keys.extend(order.split(';').map(str::to_string));
    }
    for family in ["ide", "scsi", "virtio", "sata"] {
        for i in 0..31 {
            keys.push(format!("{family}{i}"));
        }
    }
    for key in keys {
        if let Some(v) = vm.conf.get(&key)
            && !v.contains("media=cdrom")
            && let Some(size) = v.split(',').find_map(|p| p.strip_prefix("size="))
        {
            return crate::formats::parse_size(size).unwrap_or(0);
        }
    }
    0
}

fn vm_resource(vmid: u32, vm: &Vm) -> Value {
    let mut m = Map::new();
    m.insert("id".into(), json!(format!("qemu/{vmid}")));
    m.insert("type".into(), json!("qemu"));
    m.insert("vmid".into(), json!(vmid));
    m.insert("node".into(), json!(vm.node));
    m.insert(
        "status".into(),
        json!(if vm.running { "running" } else { "stopped" }),
    );
    m.insert(
        "name".into(),
        json!(
            vm.conf
                .get("name")
                .cloned()
                .unwrap_or_else(|| format!("VM {vmid}"))
        ),
    );
    m.insert(
        "template".into(),
        json!(if vm.is_template() { 1 } else { 0 }),
    );
    m.insert("maxcpu".into(), json!(vm.cpus()));
    m.insert("maxmem".into(), json!(vm.memory_mib() * 1024 * 1024));
    m.insert("maxdisk".into(), json!(maxdisk(vm)));
    let uptime = if vm.running {
        now().saturating_sub(vm.started_at)
    } else {
        0
    };
    m.insert("uptime".into(), json!(uptime));
    for k in [
        "cpu",
        "mem",
        "disk",
        "netin",
        "netout",
        "diskread",
        "diskwrite",
    ] {
        m.insert(k.into(), json!(0));
    }
    if let Some(lock) = vm.lock() {
        m.insert("lock".into(), json!(lock));
    }
    if let Some(tags) = vm.conf.get("tags") {
        m.insert("tags".into(), json!(tags));
    }
    Value::Object(m)
}

pub(crate) fn resources(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let filter = req.get("type");
    let st = sim.read();
    let mut out = Vec::with_capacity(st.vms.len() + st.lxc.len() + 16);
    if filter.is_none() || filter == Some("vm") {
        for (vmid, vm) in &st.vms {
            out.push(vm_resource(*vmid, vm));
        }
        for (vmid, ct) in &st.lxc {
            out.push(json!({
                "id": format!("lxc/{vmid}"), "type": "lxc", "vmid": vmid, "node": ct.node,
                "status": if ct.running { "running" } else { "stopped" }, "name": ct.name,
                "template": 0, "maxcpu": 1, "maxmem": 536870912u64, "maxdisk": 8589934592u64,
                "cpu": 0, "mem": 0, "disk": 0, "uptime": 0, "netin": 0, "netout": 0,
                "diskread": 0, "diskwrite": 0,
            }));
        }
    }
    if filter.is_none() || filter == Some("node") {
        for node in &sim.nodes {
            out.push(json!({
                "id": format!("node/{node}"), "type": "node", "node": node, "status": "online",
                "level": "", "cpu": 0.01, "maxcpu": 64, "mem": 8589934592u64,
                "maxmem": 274877906944u64, "disk": 10737418240u64, "maxdisk": 107374182400u64,
                "uptime": now().saturating_sub(sim.boot_time), "cgroup-mode": 2,
            }));
        }
    }
    if filter.is_none() || filter == Some("storage") {
        for node in &sim.nodes {
            for s in sim.storages.iter().filter(|s| s.on_node(node)) {
                let used: u64 = st
                    .volumes
                    .values()
                    .filter(|v| v.storage == s.name && (v.node == *node || v.node == "*"))
                    .map(|v| v.size)
                    .sum();
                out.push(json!({
                    "id": format!("storage/{node}/{}", s.name), "type": "storage",
                    "storage": s.name, "node": node, "status": "available",
                    "plugintype": s.kind, "shared": if s.shared { 1 } else { 0 },
                    "content": s.content.join(","), "maxdisk": s.total, "disk": used,
                }));
            }
        }
    }
    Ok(Reply::data(Value::Array(out)))
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
    let out: Vec<Value> = sim
        .nodes
        .iter()
        .map(|n| {
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

pub(crate) fn lxc_list(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let out: Vec<Value> = st
        .lxc
        .iter()
        .filter(|(_, c)| c.node == req.node())
        .map(|(vmid, c)| {
            json!({
                "vmid": vmid, "name": c.name, "type": "lxc",
                "status": if c.running { "running" } else { "stopped" },
                "cpus": 1, "maxmem": 536870912u64, "maxdisk": 8589934592u64, "maxswap": 536870912u64,
                "cpu": 0, "mem": 0, "disk": 0, "swap": 0, "uptime": 0, "netin": 0, "netout": 0,
                "diskread": 0, "diskwrite": 0,
            })
        })
        .collect();
    Ok(Reply::data(Value::Array(out)))
}
