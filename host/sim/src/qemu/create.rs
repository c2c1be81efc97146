//! `POST /nodes/{node}/qemu`: creating a guest.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::drives::{check_drive, create_disk, is_drive_key, parse_drive};
use super::power::start_checks;
use super::{
    CREATE_ONLY, check_boot, check_create_devices, check_root_only, default_boot, prepare_value,
};
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::state::{Vm, now};
use crate::storage::{free_volume, volume_owner};

/// Config keys among the request parameters.
pub(super) fn config_params(req: &Req, skip: &[&str]) -> BTreeMap<String, String> {
    req.params
        .iter()
        .filter(|(k, _)| !skip.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

pub(super) fn sshkeys_check(params: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if let Some(keys) = params.get("sshkeys") {
        let decoded = percent_encoding::percent_decode_str(keys).decode_utf8();
        if decoded.is_err() {
            return Err(ApiError::param(
                "sshkeys",
                format!("invalid format - invalid urlencoded string: {keys}\n"),
            ));
        }
    }
    Ok(())
}

pub(crate) fn create(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let node = req.node().to_string();
    let vmid = req.vmid();
    if req.get("archive").is_some() {
        return Err(ApiError::die(
            "restore from a backup archive is not modelled by the simulator",
        ));
    }
    let raw = config_params(req, CREATE_ONLY);
    sshkeys_check(&raw)?;
    crate::pools::check_exists(&sim.read(), req.get("pool"))?;
    let pool = req.get("pool").map(str::to_string);
    for (k, v) in &raw {
        if is_drive_key(k) {
            check_drive(sim, &node, k, v)?;
        }
    }
    check_root_only(&req.user, raw.keys().map(String::as_str))?;
    check_create_devices(&req.user, &raw)?;
    check_boot(&raw)?;
    let mut st = sim.write();
    if let Some((owner, is_vm)) = st.vmid_owner(vmid) {
        let what = if is_vm { "VM" } else { "CT" };
        return Err(ApiError::die(format!(
            "unable to create VM {vmid} - {what} {vmid} already exists on node '{owner}'"
        )));
    }
    let ostype = raw.get("ostype").cloned();
    let mut conf: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in &raw {
        conf.insert(k.clone(), prepare_value(&mut st, k, v, ostype.as_deref()));
    }
    let mut placeholder = BTreeMap::new();
    placeholder.insert("lock".to_string(), "create".to_string());
    st.vms.insert(vmid, Vm::stopped(&node, placeholder));
    let start = req.flag("start");
    // PVE's create runs `vm_start` itself for `start=1`, so a fault rule on the start endpoint
    // applies to that start too: it fails the start (a warning in the create's task), never the
    // create.
    let start_fault = if start {
        let drawn = sim
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .draw("POST", "/nodes/{node}/qemu/{vmid}/status/start");
        drawn.fail_task.or_else(|| {
            drawn
                .lock_timeout
                .then(|| crate::sim::lock_timeout_message(vmid))
        })
    } else {
        None
    };
    let sim2 = Arc::clone(sim);
    let node2 = node.clone();
    let upid = sim.guest_task(
        &mut st,
        req,
        "qmcreate",
        sim.flock_short(vmid, false),
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                st.vms.remove(&vmid);
                return Err(m);
            }
            let mut created: Vec<String> = Vec::new();
            let mut final_conf = conf.clone();
            let template = conf
                .get("template")
                .is_some_and(|t| crate::grammar::parse_boolean(t) == Some("1"));
            for (k, v) in &conf {
                if !is_drive_key(k) {
                    continue;
                }
                match create_disk(&sim2, st, &node2, vmid, k, v, template, log) {
                    Ok(value) => {
                        if let Some(map) = parse_drive(k, &value)
                            && let Some(file) = map.get("file")
                            && volume_owner(file) == Some(vmid)
                        {
                            created.push(file.clone());
                        }
                        final_conf.insert(k.clone(), value);
                    }
                    Err(e) => {
                        for volid in &created {
                            free_volume(&sim2, st, &node2, volid);
                        }
                        st.vms.remove(&vmid);
                        return Err(format!("unable to create VM {vmid} - {e}"));
                    }
                }
            }
            if !final_conf.contains_key("boot")
                && let Some(b) = default_boot(&final_conf)
            {
                final_conf.insert("boot".into(), b);
            }
            if !final_conf.contains_key("smbios1") {
                let uuid = st.random_uuid();
                final_conf.insert("smbios1".into(), format!("uuid={uuid}"));
            }
            if !final_conf.contains_key("vmgenid") {
                let uuid = st.random_uuid();
                final_conf.insert("vmgenid".into(), uuid);
            } else if final_conf.get("vmgenid").is_some_and(|v| v == "0") {
                final_conf.remove("vmgenid");
            }
            final_conf.insert(
                "meta".into(),
                format!("creation-qemu=9.2.0,ctime={}", now()),
            );
            let pid = st.next_pid();
            let Some(vm) = st.vms.get_mut(&vmid) else {
                return Err(format!("VM {vmid} vanished during create"));
            };
            vm.conf = final_conf;
            // `add_vm_to_pool` once the guest exists, before it starts.
            if let Some(pool) = &pool {
                crate::pools::add_guest(st, vmid, pool);
            }
            if start {
                let checked = match (st.vms.get(&vmid), start_fault) {
                    (_, Some(injected)) => Err(injected),
                    (Some(vm), None) => start_checks(&sim2, st, vm, vmid, false),
                    (None, None) => Ok(()),
                };
                match checked {
                    Ok(()) => {
                        if let Some(vm) = st.vms.get_mut(&vmid) {
                            vm.running = true;
                            vm.started_at = now();
                            vm.pid = pid;
                        }
                    }
                    Err(e) => log.warn(e),
                }
            }
            Ok(())
        }),
    );
    st.touch();
    Ok(Reply::data(json!(upid)))
}
