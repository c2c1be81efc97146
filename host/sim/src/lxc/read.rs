//! The container read endpoints: config (typed, with digest), status, the node listing, the indexes and the
//! `/cluster/resources` entries.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{CONFIG_PATH, get_ct};
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::state::{Vm, now};

/// `GET .../config`: the config with pending changes merged in (the applied one with `current=1`) and its digest.
pub(crate) fn get_config(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    if req.get("snapshot").is_some() && req.flag("current") {
        let mut e = crate::schema::Errors::new();
        let msg = "cannot use 'snapshot' parameter with 'current'".to_string();
        e.insert("snapshot".into(), msg.clone());
        e.insert("current".into(), msg);
        return Err(ApiError::Param(e));
    }
    let st = sim.read();
    let ct = get_ct(&st, req.node(), req.vmid())?;
    if let Some(snap) = req.get("snapshot") {
        return Err(ApiError::die(format!("snapshot '{snap}' does not exist")));
    }
    let conf = if req.flag("current") {
        ct.conf.clone()
    } else {
        ct.merged()
    };
    let mut out = crate::qemu::typed_config(CONFIG_PATH, &conf);
    out.insert("digest".into(), json!(ct.digest()));
    Ok(Reply::data(Value::Object(out)))
}

fn mib(conf: &BTreeMap<String, String>, key: &str) -> u64 {
    conf.get(key).and_then(|v| v.parse().ok()).unwrap_or(512) * 1024 * 1024
}

/// The root disk's size in bytes (`rootfs: ...,size=8G`).
fn rootfs_size(ct: &Vm) -> u64 {
    ct.conf
        .get("rootfs")
        .and_then(|v| v.split(',').find_map(|p| p.strip_prefix("size=")))
        .and_then(crate::formats::parse_size)
        .unwrap_or(0)
}

/// CPUs a container may use: `cores`, else the node's 64.
fn cpus(ct: &Vm) -> u64 {
    ct.conf
        .get("cores")
        .and_then(|c| c.parse().ok())
        .unwrap_or(64)
}

fn name(vmid: u32, ct: &Vm) -> String {
    ct.conf
        .get("hostname")
        .cloned()
        .unwrap_or_else(|| format!("CT{vmid}"))
}

fn uptime(ct: &Vm) -> u64 {
    if ct.running {
        now().saturating_sub(ct.started_at)
    } else {
        0
    }
}

/// The fields of PVE's `vmstatus` for a container (the list and `status/current`).
fn status_fields(vmid: u32, ct: &Vm) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("vmid".into(), json!(vmid));
    m.insert("type".into(), json!("lxc"));
    m.insert("status".into(), json!(ct.status()));
    m.insert("name".into(), json!(name(vmid, ct)));
    m.insert("cpus".into(), json!(cpus(ct)));
    m.insert("maxmem".into(), json!(mib(&ct.conf, "memory")));
    m.insert("maxswap".into(), json!(mib(&ct.conf, "swap")));
    m.insert("maxdisk".into(), json!(rootfs_size(ct)));
    for k in [
        "cpu",
        "disk",
        "swap",
        "netin",
        "netout",
        "diskread",
        "diskwrite",
    ] {
        m.insert(k.into(), json!(0));
    }
    let mem = if ct.running {
        mib(&ct.conf, "memory") / 8
    } else {
        0
    };
    m.insert("mem".into(), json!(mem));
    m.insert("uptime".into(), json!(uptime(ct)));
    if ct.is_template() {
        m.insert("template".into(), json!(1));
    }
    if let Some(l) = ct.lock() {
        m.insert("lock".into(), json!(l));
    }
    if let Some(t) = ct.conf.get("tags") {
        m.insert("tags".into(), json!(t));
    }
    if ct.running {
        m.insert("pid".into(), json!(ct.pid));
    }
    m
}

pub(crate) fn status_current(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let vmid = req.vmid();
    let ct = get_ct(&st, req.node(), vmid)?;
    let mut m = status_fields(vmid, ct);
    m.insert("ha".into(), json!({"managed": 0}));
    Ok(Reply::data(Value::Object(m)))
}

/// `GET /nodes/{node}/lxc`: the node's containers.
pub(crate) fn list(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let out: Vec<Value> = st
        .lxc
        .iter()
        .filter(|(_, ct)| ct.node == req.node())
        .map(|(vmid, ct)| Value::Object(status_fields(*vmid, ct)))
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `GET .../pending`: the config keys with their current and pending values and pending deletes.
pub(crate) fn pending(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    crate::qemu::pending_rows(get_ct(&st, req.node(), req.vmid())?)
}

pub(crate) fn index(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    get_ct(&st, req.node(), req.vmid())?;
    Ok(crate::server::index("/nodes/{node}/lxc/{vmid}", "subdir"))
}

pub(crate) fn status_index(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    get_ct(&st, req.node(), req.vmid())?;
    Ok(crate::server::index(
        "/nodes/{node}/lxc/{vmid}/status",
        "subdir",
    ))
}

/// One `lxc` entry of `/cluster/resources`, with the keys PVE gives a container.
pub(crate) fn resource_entry(vmid: u32, ct: &Vm) -> Value {
    let mut m = Map::new();
    m.insert("id".into(), json!(format!("lxc/{vmid}")));
    m.insert("type".into(), json!("lxc"));
    m.insert("vmid".into(), json!(vmid));
    m.insert("node".into(), json!(ct.node));
    m.insert("status".into(), json!(ct.status()));
    m.insert("name".into(), json!(name(vmid, ct)));
    m.insert(
        "template".into(),
        json!(if ct.is_template() { 1 } else { 0 }),
    );
    m.insert("maxcpu".into(), json!(cpus(ct)));
    m.insert("maxmem".into(), json!(mib(&ct.conf, "memory")));
    m.insert("maxdisk".into(), json!(rootfs_size(ct)));
    m.insert("uptime".into(), json!(uptime(ct)));
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
    if let Some(l) = ct.lock() {
        m.insert("lock".into(), json!(l));
    }
    if let Some(t) = ct.conf.get("tags") {
        m.insert("tags".into(), json!(t));
    }
    Value::Object(m)
}
