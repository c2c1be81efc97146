//! `DELETE /nodes/{node}/qemu/{vmid}`: destroying a guest and its volumes.

use std::sync::Arc;

use serde_json::json;

use super::drives::{is_drive_key, is_unused_key, parse_drive};
use super::{check_skiplock, get_vm};
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::state::State;
use crate::storage::{free_volume, volume_owner};

pub(crate) fn destroy(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let node = req.node().to_string();
    let vmid = req.vmid();
    check_skiplock(req)?;
    let skiplock = req.flag("skiplock");
    let mut st = sim.write();
    let vm = get_vm(&st, &node, vmid)?;
    if vm.conf.get("protection").is_some_and(|p| p == "1") {
        return Err(ApiError::die(format!(
            "can't remove VM {vmid} - protection mode enabled"
        )));
    }
    if vm.running {
        return Err(ApiError::die(format!(
            "VM {vmid} is running - destroy failed"
        )));
    }
    let prior_lock = vm.lock().map(str::to_string);
    let blocked = match &prior_lock {
        Some(l) if !skiplock => Some(format!("VM is locked ({l})")),
        _ => None,
    };
    if blocked.is_none()
        && let Some(vm) = st.vms.get_mut(&vmid)
    {
        vm.conf.insert("lock".into(), "destroyed".into());
    }
    let unreferenced = req.flag("destroy-unreferenced-disks");
    let sim2 = Arc::clone(sim);
    let upid = sim.guest_task(
        &mut st,
        req,
        "qmdestroy",
        sim.flock_exclusive(vmid),
        Box::new(move |st, log, injected| {
            if let Some(e) = blocked {
                return Err(e);
            }
            let restore_lock = |st: &mut State| {
                if let Some(vm) = st.vms.get_mut(&vmid) {
                    match &prior_lock {
                        Some(l) => vm.conf.insert("lock".into(), l.clone()),
                        None => vm.conf.remove("lock"),
                    };
                }
            };
            if let Some(m) = injected {
                restore_lock(st);
                return Err(m);
            }
            let Some(vm) = st.vms.get(&vmid) else {
                return Err(format!("VM {vmid} does not exist"));
            };
            let mut owned: Vec<String> = Vec::new();
            for (k, v) in &vm.conf {
                let file = if is_unused_key(k) {
                    Some(v.clone())
                } else if is_drive_key(k) {
                    parse_drive(k, v).and_then(|m| m.get("file").cloned())
                } else {
                    None
                };
                if let Some(f) = file
                    && volume_owner(&f) == Some(vmid)
                {
                    owned.push(f);
                }
            }
            for base in &owned {
                let used_by_clone = st
                    .volumes
                    .values()
                    .any(|v| v.parent.as_deref() == Some(base.as_str()));
                if used_by_clone {
                    restore_lock(st);
                    return Err(format!(
                        "base volume '{base}' is still in use by linked cloned"
                    ));
                }
            }
            for volid in &owned {
                if free_volume(&sim2, st, &node, volid) {
                    log.line(format!("Removed volume '{volid}'"));
                }
            }
            if unreferenced {
                let stale: Vec<String> = st
                    .volumes
                    .iter()
                    .filter(|(_, v)| v.vmid == Some(vmid) && v.content == "images")
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in stale {
                    st.volumes.remove(&k);
                }
            }
            st.vms.remove(&vmid);
            // `remove_vm_access`: the guest leaves its pool.
            crate::pools::remove_guest(st, vmid);
            crate::firewall::remove_guest(st, vmid);
            Ok(())
        }),
    );
    st.touch();
    Ok(Reply::data(json!(upid)))
}
