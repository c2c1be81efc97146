//! `POST /nodes/{node}/lxc`: creating a container from a `vztmpl` template (a `vzcreate` task).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::config::{cleanup_and_apply, stage};
use super::{
    alloc_mp, check_modify_perm, check_rootdir_storage, injected_text, is_mp_key, is_unused_key,
    mount_type, new_disk, parse_value,
};
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::formats::parse_volume_id;
use crate::schema::split_indexed;
use crate::sim::Sim;
use crate::state::{Vm, now};
use crate::storage::{find_volume, free_volume};

/// Create parameters that are not config keys (`extract_param` in PVE's create handler).
const CREATE_ONLY: &[&str] = &[
    "vmid",
    "node",
    "ostemplate",
    "storage",
    "start",
    "pool",
    "password",
    "ssh-public-keys",
    "unprivileged",
    "force",
    "restore",
    "unique",
    "ignore-unpack-errors",
    "bwlimit",
    "ha-managed",
];

/// The `ostype` PVE's setup code detects in a template, guessed from its file name (`debian-12-standard_...`).
fn detect_ostype(volid: &str) -> &'static str {
    let file = volid
        .rsplit('/')
        .next()
        .unwrap_or(volid)
        .to_ascii_lowercase();
    const KNOWN: &[&str] = &[
        "debian",
        "devuan",
        "ubuntu",
        "centos",
        "fedora",
        "opensuse",
        "archlinux",
        "alpine",
        "gentoo",
        "nixos",
    ];
    for os in KNOWN {
        if file.starts_with(os) {
            return os;
        }
    }
    for (prefix, os) in [
        ("rockylinux", "centos"),
        ("almalinux", "centos"),
        ("arch", "archlinux"),
    ] {
        if file.starts_with(prefix) {
            return os;
        }
    }
    "unmanaged"
}

pub(crate) fn create(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let node = req.node().to_string();
    let vmid = req.vmid();
    if req.flag("restore") {
        return Err(ApiError::die(
            "restore from a backup archive is not modelled by the simulator",
        ));
    }
    // PVE 9 creates unprivileged containers unless told otherwise (pve-container 103068a).
    let unprivileged = req.get("unprivileged") != Some("0");
    {
        let st = sim.read();
        if let Some((owner, is_vm)) = st.vmid_owner(vmid) {
            let what = if is_vm { "VM" } else { "CT" };
            return Err(ApiError::die(format!(
                "{what} {vmid} already exists on node '{owner}'"
            )));
        }
        crate::pools::check_exists(&st, req.get("pool"))?;
    }
    let pool = req.get("pool").map(str::to_string);
    let ostemplate = req.get("ostemplate").unwrap_or("").to_string();
    let storage = req.get("storage").unwrap_or("local").to_string();
    let mut params: BTreeMap<String, String> = req
        .params
        .iter()
        .filter(|(k, _)| !CREATE_ONLY.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    check_modify_perm(&req.user, None, &params, &[], unprivileged)?;
    // The template: a `vztmpl` volume (PVE::Storage::check_volume_access), present on the node.
    match parse_volume_id(&ostemplate) {
        None => {
            return Err(ApiError::die(
                "Only root can pass arbitrary filesystem paths.",
            ));
        }
        Some((sid, name)) => {
            if sim.storage(sid).is_none() {
                return Err(ApiError::die(format!("storage '{sid}' does not exist")));
            }
            let vtype = name.split_once('/').map(|(d, _)| d).unwrap_or("images");
            if vtype != "vztmpl" {
                return Err(ApiError::die(format!(
                    "unable to use volume {ostemplate} - content type needs to be 'vztmpl'"
                )));
            }
        }
    }
    // Mount points: plain sizes use the default storage; mount points need a rootfs.
    let mut mps: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in &params {
        if is_mp_key(k) {
            let plain_size = new_disk(&format!("{storage}:{v}")).is_some() && !v.contains(':');
            let value = if plain_size {
                format!("{storage}:{v}")
            } else {
                v.clone()
            };
            mps.insert(k.clone(), value);
        }
    }
    params.retain(|k, _| !is_mp_key(k) && !is_unused_key(k));
    if !mps.is_empty() && !mps.contains_key("rootfs") {
        return Err(ApiError::die(
            "mount points configured, but 'rootfs' not set - aborting",
        ));
    }
    if mps.is_empty() {
        check_rootdir_storage(sim, &node, &storage)?;
        mps.insert("rootfs".into(), format!("{storage}:4"));
    }
    for (k, v) in &mps {
        let Some(map) = parse_value(k, v) else {
            continue;
        };
        let volume = map.get("volume").cloned().unwrap_or_default();
        if mount_type(&volume) != "volume" {
            if req.user != "root@pam" {
                return Err(ApiError::die(
                    "Only root can pass arbitrary filesystem paths.",
                ));
            }
            continue;
        }
        if let Some((sid, _)) = parse_volume_id(&volume) {
            check_rootdir_storage(sim, &node, sid)?;
        }
    }
    let mut st = sim.write();
    // Checked again under the write lock: another create may have taken the id meanwhile.
    if let Some((owner, is_vm)) = st.vmid_owner(vmid) {
        let what = if is_vm { "VM" } else { "CT" };
        return Err(ApiError::die(format!(
            "unable to create CT {vmid} - {what} {vmid} already exists on node '{owner}'"
        )));
    }
    let mut placeholder = BTreeMap::new();
    placeholder.insert("lock".to_string(), "create".to_string());
    st.lxc.insert(vmid, Vm::stopped(&node, placeholder));
    let start = req.flag("start");
    let sim2 = Arc::clone(sim);
    let upid = sim.guest_task(
        &mut st,
        req,
        "vzcreate",
        sim.flock_short(vmid, false),
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                st.lxc.remove(&vmid);
                return Err(format!(
                    "unable to create CT {vmid} - {}",
                    injected_text(vmid, m)
                ));
            }
            let fail = |st: &mut crate::state::State, created: &[String], e: String| {
                for volid in created {
                    free_volume(&sim2, st, &node, volid);
                }
                st.lxc.remove(&vmid);
                Err(format!("unable to create CT {vmid} - {e}"))
            };
            if find_volume(&sim2, st, &node, &ostemplate).is_none() {
                return fail(st, &[], format!("volume '{ostemplate}' does not exist"));
            }
            let mut conf: BTreeMap<String, String> = BTreeMap::new();
            let mut created: Vec<String> = Vec::new();
            // PVE's foreach_volume order: rootfs, then mp0, mp1, ...
            let mut ordered: Vec<(&String, &String)> = mps.iter().collect();
            ordered.sort_by_key(|(k, _)| match split_indexed(k) {
                Some((_, n)) => n + 1,
                None => 0,
            });
            for (k, v) in ordered {
                let Some(map) = parse_value(k, v) else {
                    continue;
                };
                let volume = map.get("volume").cloned().unwrap_or_default();
                let value = match new_disk(&volume) {
                    Some((sid, size)) => {
                        let sid = sid.to_string();
                        match alloc_mp(&sim2, st, &node, vmid, k, map, (&sid, size)) {
                            Ok((value, volid)) => {
                                log.line(format!("allocated volume '{volid}' for {k}"));
                                created.push(volid);
                                value
                            }
                            Err(e) => return fail(st, &created, e),
                        }
                    }
                    None => super::print_value(k, &map),
                };
                conf.insert(k.clone(), value);
            }
            log.line(format!("extracting archive '{ostemplate}'"));
            let Some(ct) = st.lxc.get_mut(&vmid) else {
                return fail(st, &created, format!("CT {vmid} vanished during create"));
            };
            ct.conf = conf;
            if let Err(e) = stage(&sim2, st, vmid, &params, &[], &[], log) {
                return fail(st, &created, e);
            }
            cleanup_and_apply(&sim2, st, vmid);
            let Some(ct) = st.lxc.get_mut(&vmid) else {
                return fail(st, &created, format!("CT {vmid} vanished during create"));
            };
            ct.conf
                .entry("ostype".into())
                .or_insert_with(|| detect_ostype(&ostemplate).to_string());
            ct.conf
                .entry("arch".into())
                .or_insert_with(|| "amd64".into());
            ct.conf
                .entry("hostname".into())
                .or_insert_with(|| format!("CT{vmid}"));
            ct.conf
                .entry("memory".into())
                .or_insert_with(|| "512".into());
            ct.conf.entry("swap".into()).or_insert_with(|| "512".into());
            if unprivileged {
                ct.conf.insert("unprivileged".into(), "1".into());
            }
            if start {
                ct.running = true;
                ct.started_at = now();
                let pid = st.next_pid();
                if let Some(ct) = st.lxc.get_mut(&vmid) {
                    ct.pid = pid;
                }
            }
            if let Some(pool) = &pool {
                crate::pools::add_guest(st, vmid, pool);
            }
            Ok(())
        }),
    );
    st.touch();
    Ok(Reply::data(json!(upid)))
}
