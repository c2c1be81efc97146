//! `DELETE /nodes/{node}/lxc/{vmid}`: destroying a container and its volumes (a `vzdestroy` task).

use std::sync::Arc;

use serde_json::json;

use super::{
    check_lock, check_protection, ct_volume_owner, get_ct, injected_text, is_mp_key, is_unused_key,
    mp_volume,
};
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::state::State;
use crate::storage::free_volume;

/// PVE's early checks (protection, lock, running), made before the worker forks and again under the lock.
fn early_checks(st: &State, node: &str, vmid: u32, force: bool) -> Result<(), String> {
    let ct = get_ct(st, node, vmid).map_err(|_| super::no_such_ct_text(node, vmid))?;
    check_protection(ct, &format!("can't remove CT {vmid}"))?;
    check_lock(ct)?;
    if ct.running && !force {
        return Err(format!(
            "unable to destroy CT {vmid} - container is running"
        ));
    }
    Ok(())
}

pub(crate) fn destroy(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let node = req.node().to_string();
    let vmid = req.vmid();
    let force = req.flag("force");
    let mut st = sim.write();
    get_ct(&st, &node, vmid)?;
    early_checks(&st, &node, vmid, force).map_err(ApiError::die)?;
    let unreferenced = req.flag("destroy-unreferenced-disks");
    let sim2 = Arc::clone(sim);
    let node2 = node.clone();
    let upid = sim.guest_task(
        &mut st,
        req,
        "vzdestroy",
        sim.flock_exclusive(vmid),
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                return Err(injected_text(vmid, m));
            }
            early_checks(st, &node2, vmid, force)?;
            let Some(ct) = st.lxc.get_mut(&vmid) else {
                return Err(super::no_such_ct_text(&node2, vmid));
            };
            if ct.running {
                log.line(format!("forced to stop CT {vmid} before destroying!"));
                ct.running = false;
            }
            ct.conf.insert("lock".into(), "destroyed".into());
            let owned: Vec<String> = ct
                .conf
                .iter()
                .filter_map(|(k, v)| {
                    if is_unused_key(k) {
                        Some(v.clone())
                    } else if is_mp_key(k) {
                        mp_volume(k, v)
                    } else {
                        None
                    }
                })
                .filter(|v| ct_volume_owner(v) == Some(vmid))
                .collect();
            for volid in &owned {
                if free_volume(&sim2, st, &node2, volid) {
                    log.line(format!("Removed volume '{volid}'"));
                }
            }
            if unreferenced {
                let stale: Vec<String> = st
                    .volumes
                    .iter()
                    .filter(|(_, v)| {
                        v.vmid == Some(vmid) && matches!(v.content.as_str(), "rootdir" | "images")
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in stale {
                    if let Some(v) = st.volumes.remove(&k) {
                        log.line(format!("Removed volume '{}'", v.volid));
                    }
                }
            }
            st.lxc.remove(&vmid);
            crate::pools::remove_guest(st, vmid);
            crate::firewall::remove_guest(st, vmid);
            Ok(())
        }),
    );
    st.touch();
    Ok(Reply::data(json!(upid)))
}
