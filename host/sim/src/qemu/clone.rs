//! `POST .../clone`: full and linked clones.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::drives::{
    is_cdrom, is_cloudinit_file, is_drive_key, is_unused_key, parse_drive, print_drive,
};
use super::{check_lock, get_vm, prepare_value};
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::formats::{parse_size, parse_volume_id};
use crate::schema::split_indexed;
use crate::sim::{Sim, TaskLog, injected_failure};
use crate::state::{State, Vm};
use crate::storage::{
    alloc_cloudinit, alloc_disk, find_volume, free_volume, storage_for, volume_owner,
};

/// The parameters of one clone request.
struct CloneParams {
    node: String,
    vmid: u32,
    newid: u32,
    target: String,
    storage: Option<String>,
    format: Option<String>,
    name: Option<String>,
    description: Option<String>,
}

impl CloneParams {
    fn of(req: &Req) -> CloneParams {
        let node = req.node().to_string();
        CloneParams {
            vmid: req.vmid(),
            newid: req.get("newid").and_then(|v| v.parse().ok()).unwrap_or(0),
            target: req.get("target").unwrap_or(&node).to_string(),
            storage: req.get("storage").map(str::to_string),
            format: req.get("format").map(str::to_string),
            name: req.get("name").map(str::to_string),
            description: req.get("description").map(str::to_string),
            node,
        }
    }
}

pub(crate) fn clone_vm(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let p = CloneParams::of(req);
    let mut st = sim.write();
    crate::pools::check_exists(&st, req.get("pool"))?;
    let pool = req.get("pool").map(str::to_string);
    let src = get_vm(&st, &p.node, p.vmid)?;
    let full = check_clone(sim, &st, src, req, &p)?;
    let src_conf = src.conf.clone();
    let src_running = src.running;
    let (vmid, newid) = (p.vmid, p.newid);
    st.vms.insert(newid, placeholder(&p.target));
    let sim2 = Arc::clone(sim);
    let upid = sim.start_task(
        &mut st,
        req.node(),
        "qmclone",
        &vmid.to_string(),
        &req.user,
        injected_failure(req, Some(newid)),
        // PVE's clone takes the source's lock shared unless the source runs, then the target's.
        &[
            sim.flock_short(vmid, !src_running),
            sim.flock_short(newid, false),
        ],
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                st.vms.remove(&newid);
                return Err(m);
            }
            let mut conf = cloned_config(st, &src_conf, &p);
            clone_drives(&sim2, st, log, &mut conf, &p, full)?;
            if let Some(vm) = st.vms.get_mut(&newid) {
                vm.conf = conf;
            }
            // `clone_vmfw_conf`: the clone gets a copy of the source's firewall file.
            crate::firewall::clone_guest(st, vmid, newid);
            if let Some(pool) = &pool {
                crate::pools::add_guest(st, newid, pool);
            }
            Ok(())
        }),
    );
    st.touch();
    Ok(Reply::data(json!(upid)))
}

/// PVE's checks before the clone task forks; returns whether the clone is full (else linked).
fn check_clone(
    sim: &Sim,
    st: &State,
    src: &Vm,
    req: &Req,
    p: &CloneParams,
) -> Result<bool, ApiError> {
    if let Some(snap) = req.get("snapname") {
        return Err(ApiError::die(format!("snapshot '{snap}' does not exist")));
    }
    check_lock(src, false).map_err(ApiError::die)?;
    let full = match req.get("full") {
        Some(f) => f == "1",
        None => !src.is_template(),
    };
    if !full && p.storage.is_some() {
        return Err(ApiError::die(
            "parameter 'storage' not allowed for linked clones",
        ));
    }
    if !full && p.format.is_some() {
        return Err(ApiError::die(
            "parameter 'format' not allowed for linked clones",
        ));
    }
    if !full && !src.is_template() {
        return Err(ApiError::die(
            "Linked clone feature is not supported for a VM that is not a template",
        ));
    }
    let target = &p.target;
    if !sim.has_node(target) {
        return Err(ApiError::die(format!("no such cluster node '{target}'")));
    }
    if *target != p.node {
        for (k, v) in &src.conf {
            if is_drive_key(k)
                && let Some(map) = parse_drive(k, v)
                && let Some((s, _)) = map.get("file").and_then(|f| parse_volume_id(f))
                && !is_cdrom(&map)
                && sim.storage(s).is_some_and(|s| !s.shared)
                && p.storage
                    .as_deref()
                    .is_none_or(|t| sim.storage(t).is_some_and(|t| !t.shared))
            {
                return Err(ApiError::die(format!(
                    "can't clone VM to node '{target}' (VM uses local storage)"
                )));
            }
        }
    }
    if let Some(s) = &p.storage {
        let Some(sc) = storage_for(sim, target, s) else {
            return Err(ApiError::die(format!("storage '{s}' does not exist")));
        };
        if !sc.has_content("images") {
            return Err(ApiError::param(
                "storage",
                format!("storage '{s}' does not support vm images"),
            ));
        }
    }
    let newid = p.newid;
    if st.vmid_owner(newid).is_some() {
        return Err(ApiError::die(format!(
            "unable to create VM {newid}: config file already exists"
        )));
    }
    // qemu-server `clone_vm`'s `$load_and_check`, run before forking: the TPM state of a running VM
    // cannot be copied (a linked clone of a template never runs into this).
    if full && src.running && src.conf.contains_key("tpmstate0") {
        return Err(ApiError::die("cannot clone TPM state while VM is running"));
    }
    Ok(full)
}

/// The locked config the clone holds while its task runs.
fn placeholder(target: &str) -> Vm {
    let mut placeholder = BTreeMap::new();
    placeholder.insert(
        "description".to_string(),
        "qmclone temporary file".to_string(),
    );
    placeholder.insert("lock".to_string(), "clone".to_string());
    Vm::stopped(target, placeholder)
}

/// The source's config as the clone gets it: state keys dropped, its own name and
/// description, and a fresh identity.
fn cloned_config(
    st: &mut State,
    src_conf: &BTreeMap<String, String>,
    p: &CloneParams,
) -> BTreeMap<String, String> {
    let mut conf: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in src_conf {
        if is_unused_key(k)
            || matches!(
                k.as_str(),
                "lock"
                    | "template"
                    | "parent"
                    | "snaptime"
                    | "vmstate"
                    | "snapstate"
                    | "runningcpu"
                    | "runningmachine"
                    | "running-nets-host-mtu"
            )
        {
            continue;
        }
        conf.insert(k.clone(), v.clone());
    }
    let src_name = src_conf
        .get("name")
        .cloned()
        .unwrap_or_else(|| p.vmid.to_string());
    conf.insert(
        "name".into(),
        p.name
            .clone()
            .unwrap_or_else(|| format!("Copy-of-VM-{src_name}")),
    );
    if let Some(d) = &p.description {
        conf.insert("description".into(), d.clone());
    }
    renew_identity(st, &mut conf);
    conf
}

/// New MAC addresses, a new SMBIOS UUID and a new VM generation ID.
fn renew_identity(st: &mut State, conf: &mut BTreeMap<String, String>) {
    let nets: Vec<String> = conf
        .keys()
        .filter(|k| split_indexed(k).is_some_and(|(f, _)| f == "net"))
        .cloned()
        .collect();
    for k in nets {
        let v = conf.get(&k).cloned().unwrap_or_default();
        let without_mac: Vec<String> = v
            .split(',')
            .enumerate()
            .map(|(i, p)| {
                if i == 0 {
                    p.split('=').next().unwrap_or(p).to_string()
                } else {
                    p.to_string()
                }
            })
            .filter(|p| !p.starts_with("macaddr="))
            .collect();
        let fresh = prepare_value(st, &k, &without_mac.join(","), None);
        conf.insert(k, fresh);
    }
    let uuid = st.random_uuid();
    let smbios = match conf.get("smbios1") {
        Some(s) => {
            let mut parts: Vec<String> = s
                .split(',')
                .filter(|p| !p.starts_with("uuid="))
                .map(str::to_string)
                .collect();
            parts.push(format!("uuid={uuid}"));
            parts.sort();
            parts.join(",")
        }
        None => format!("uuid={uuid}"),
    };
    conf.insert("smbios1".into(), smbios);
    if conf.get("vmgenid").is_some_and(|v| v != "0") {
        let g = st.random_uuid();
        conf.insert("vmgenid".into(), g);
    }
}

/// Copies (full) or links (linked, except the TPM state) each volume the source owns and
/// gives the clone a cloud-init drive of its own. On a failure, frees what it made and drops
/// the clone.
fn clone_drives(
    sim: &Sim,
    st: &mut State,
    log: &mut TaskLog,
    conf: &mut BTreeMap<String, String>,
    p: &CloneParams,
    full: bool,
) -> Result<(), String> {
    let drives: Vec<(String, String)> = conf
        .iter()
        .filter(|(k, _)| is_drive_key(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut created: Vec<String> = Vec::new();
    for (k, v) in drives {
        let Some(mut map) = parse_drive(&k, &v) else {
            continue;
        };
        let Some(file) = map.get("file").cloned() else {
            continue;
        };
        let result = if is_cloudinit_file(&file) {
            let s = p
                .storage
                .clone()
                .or_else(|| parse_volume_id(&file).map(|(s, _)| s.to_string()))
                .unwrap_or_default();
            alloc_cloudinit(sim, st, &p.target, &s, p.newid)
        } else if is_cdrom(&map) || volume_owner(&file) != Some(p.vmid) {
            continue;
        } else {
            let size = find_volume(sim, st, &p.node, &file)
                .map(|v| v.size)
                .or_else(|| map.get("size").and_then(|s| parse_size(s)))
                .unwrap_or(0);
            let src_storage = parse_volume_id(&file)
                .map(|(s, _)| s.to_string())
                .unwrap_or_default();
            let linked = !full && k != "tpmstate0";
            let dest = if linked {
                src_storage
            } else {
                p.storage.clone().unwrap_or(src_storage)
            };
            let fmt = p.format.clone().or_else(|| {
                file.rsplit('.')
                    .next()
                    .filter(|e| ["raw", "qcow2", "vmdk"].contains(e))
                    .map(str::to_string)
            });
            let parent = if linked { Some(file.clone()) } else { None };
            alloc_disk(
                sim,
                st,
                &p.target,
                &dest,
                p.newid,
                size,
                fmt.as_deref(),
                parent,
            )
        };
        match result {
            Ok(volid) => {
                log.line(format!("{k}: cloned '{file}' to '{volid}'"));
                created.push(volid.clone());
                map.insert("file".into(), volid);
                conf.insert(k, print_drive(&map));
            }
            Err(e) => {
                for v in &created {
                    free_volume(sim, st, &p.target, v);
                }
                st.vms.remove(&p.newid);
                return Err(format!("clone failed: {e}"));
            }
        }
    }
    Ok(())
}
