//! The read endpoints: config (typed, masked), pending, status, and the guest listings.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{CONFIG_PATH, get_vm};
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::schema::{find_property, returns};
use crate::sim::Sim;
use crate::state::{Vm, now};

/// Converts config values to the JSON types PVE's GET config (`config_path`) returns: integers and booleans as
/// numbers.
pub(crate) fn typed_config(
    config_path: &str,
    conf: &BTreeMap<String, String>,
) -> Map<String, Value> {
    let props = returns("GET", config_path)
        .and_then(|r| r.get("properties"))
        .and_then(Value::as_object);
    let mut out = Map::new();
    for (k, v) in conf {
        let ty = props
            .and_then(|p| find_property(p, k))
            .and_then(|s| s.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("string");
        let value = match ty {
            "integer" | "boolean" => v
                .parse::<i64>()
                .map(Value::from)
                .unwrap_or_else(|_| json!(v)),
            _ => json!(v),
        };
        out.insert(k.clone(), value);
    }
    out
}

fn masked(conf: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut c = conf.clone();
    if c.contains_key("cipassword") {
        c.insert("cipassword".into(), "**********".into());
    }
    c
}

pub(crate) fn get_config(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let vm = get_vm(&st, req.node(), req.vmid())?;
    if let Some(snap) = req.get("snapshot") {
        return Err(ApiError::die(format!("snapshot '{snap}' does not exist")));
    }
    let conf = if req.flag("current") {
        vm.conf.clone()
    } else {
        vm.merged()
    };
    let mut out = typed_config(CONFIG_PATH, &masked(&conf));
    out.insert("digest".into(), json!(vm.digest()));
    Ok(Reply::data(Value::Object(out)))
}

/// One row of GET /pending, as PVE prints it (fields absent rather than null).
#[derive(serde::Serialize)]
struct PendingRow<'a> {
    key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pending: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delete: Option<u8>,
}

pub(crate) fn pending(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    pending_rows(get_vm(&st, req.node(), req.vmid())?)
}

/// GET `.../pending` of a guest (a VM or a container): every key with its value, pending value and delete flag.
pub(crate) fn pending_rows(vm: &Vm) -> ApiResult {
    let mut keys: std::collections::BTreeSet<&str> = vm.conf.keys().map(String::as_str).collect();
    keys.extend(vm.pending.keys().map(String::as_str));
    keys.extend(vm.pending_delete.keys().map(String::as_str));
    // PVE lists every top-level key of the loaded config, `digest` included
    // (GuestHelpers::config_with_pending_array; `qm pending` skips it when printing).
    keys.insert("digest");
    let digest = vm.digest();
    // The schema types `value` and `pending` as strings: values are printed as the config
    // file holds them; the password only masked.
    let rows: Vec<PendingRow<'_>> = keys
        .into_iter()
        .map(|k| {
            let value = if k == "digest" {
                Some(digest.as_str())
            } else {
                vm.conf.get(k).map(String::as_str)
            };
            let pending = vm.pending.get(k).map(String::as_str);
            let (value, pending) = if k == "cipassword" {
                (value.map(|_| "**********"), pending.map(|_| "********** "))
            } else {
                (value, pending)
            };
            PendingRow {
                key: k,
                value,
                pending,
                delete: vm
                    .pending_delete
                    .get(k)
                    .map(|force| if *force { 2 } else { 1 }),
            }
        })
        .collect();
    let raw = serde_json::to_string(&rows).map_err(|e| ApiError::die(e.to_string()))?;
    Ok(Reply {
        data: Value::Null,
        total: None,
        raw: Some(raw),
    })
}

fn status_fields(vmid: u32, vm: &Vm, with_ha: bool) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("vmid".into(), json!(vmid));
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
    m.insert("cpus".into(), json!(vm.cpus()));
    m.insert("maxmem".into(), json!(vm.memory_mib() * 1024 * 1024));
    m.insert("maxdisk".into(), json!(crate::cluster::maxdisk(vm)));
    for k in ["disk", "cpu", "netin", "netout", "diskread", "diskwrite"] {
        m.insert(k.into(), json!(0));
    }
    m.insert(
        "mem".into(),
        json!(if vm.running {
            vm.memory_mib() * 1024 * 1024 / 4
        } else {
            0
        }),
    );
    m.insert(
        "uptime".into(),
        json!(if vm.running {
            now().saturating_sub(vm.started_at)
        } else {
            0
        }),
    );
    if vm.is_template() {
        m.insert("template".into(), json!(1));
    }
    if let Some(l) = vm.lock() {
        m.insert("lock".into(), json!(l));
    }
    if let Some(t) = vm.conf.get("tags") {
        m.insert("tags".into(), json!(t));
    }
    if vm.running {
        m.insert("pid".into(), json!(vm.pid));
        let qmp = if vm.paused { "paused" } else { "running" };
        m.insert("qmpstatus".into(), json!(qmp));
        if with_ha {
            m.insert("running-machine".into(), json!("pc-i440fx-9.2+pve1"));
            m.insert("running-qemu".into(), json!("9.2.0"));
        }
    } else if with_ha {
        m.insert("qmpstatus".into(), json!("stopped"));
    }
    if with_ha {
        m.insert("ha".into(), json!({"managed": 0}));
        let agent = vm
            .conf
            .get("agent")
            .and_then(|a| a.split(',').next())
            .is_some_and(|a| a == "1" || a == "enabled=1");
        if agent {
            m.insert("agent".into(), json!(1));
        }
    }
    m
}

pub(crate) fn status_current(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let vmid = req.vmid();
    let vm = get_vm(&st, req.node(), vmid)?;
    Ok(Reply::data(Value::Object(status_fields(vmid, vm, true))))
}

/// `POST …/agent/ping` (qemu-server `PVE::API2::Qemu::Agent`, `PVE::QemuServer::Agent`
/// `assert_agent_available`): the VM must run and have `agent` enabled in its config, and its
/// agent answers once the guest booted (`SimConfig::agent_boot` after the start; the guest
/// OS starting it is not modelled otherwise). The answer is the agent's, wrapped as PVE does:
/// `{"result": {}}`.
pub(crate) fn agent_ping(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let vmid = req.vmid();
    let vm = get_vm(&st, req.node(), vmid)?;
    if !vm.running {
        return Err(ApiError::die(format!("VM {vmid} is not running")));
    }
    if !agent_enabled(vm.conf.get("agent").map(String::as_str)) {
        return Err(ApiError::die("No QEMU guest agent configured"));
    }
    let up = crate::state::now().saturating_sub(vm.started_at);
    if up < sim.agent_boot.as_secs_f64().ceil() as u64 {
        return Err(ApiError::die("QEMU guest agent is not running"));
    }
    Ok(Reply::data(json!({"result": {}})))
}

/// A VM config's `agent` property (`1`, `enabled=1,fstrim_cloned_disks=1`, `0`) says the
/// agent is on.
fn agent_enabled(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        v.split(',').any(|part| match part.split_once('=') {
            Some(("enabled", flag)) => flag == "1",
            Some(_) => false,
            None => part == "1",
        })
    })
}

pub(crate) fn list(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let out: Vec<Value> = st
        .vms
        .iter()
        .filter(|(_, vm)| vm.node == req.node())
        .map(|(vmid, vm)| Value::Object(status_fields(*vmid, vm, false)))
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `GET .../snapshot`: the simulator keeps no snapshots (taking one is not served), so the
/// list is PVE's entry for the current state alone: `current`, the config digest, whether the
/// guest runs, and PVE's description of it.
pub(crate) fn snapshot_list(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let vm = get_vm(&st, req.node(), req.vmid())?;
    Ok(Reply::data(json!([{
        "name": "current",
        "description": "You are here!",
        "digest": vm.digest(),
        "running": u8::from(vm.running),
    }])))
}

pub(crate) fn index(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    get_vm(&st, req.node(), req.vmid())?;
    Ok(crate::server::index("/nodes/{node}/qemu/{vmid}", "subdir"))
}

pub(crate) fn status_index(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    get_vm(&st, req.node(), req.vmid())?;
    Ok(crate::server::index(
        "/nodes/{node}/qemu/{vmid}/status",
        "subdir",
    ))
}
