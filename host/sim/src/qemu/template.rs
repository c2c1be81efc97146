//! `POST .../template`: turning a stopped guest into a template.

use std::sync::Arc;

use serde_json::json;

use super::drives::{is_cdrom, is_drive_key, parse_drive, print_drive};
use super::{check_lock, get_vm};
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::storage::{rename_volume, volume_owner};

pub(crate) fn template(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let node = req.node().to_string();
    let vmid = req.vmid();
    let disk = req.get("disk").map(str::to_string);
    let mut st = sim.write();
    let vm = get_vm(&st, &node, vmid)?;
    check_lock(vm, false).map_err(ApiError::die)?;
    if vm.is_template() && disk.is_none() {
        return Err(ApiError::die("you can't convert a template to a template"));
    }
    if vm.running {
        return Err(ApiError::die(
            "you can't convert a VM to template if VM is running",
        ));
    }
    let sim2 = Arc::clone(sim);
    let upid = sim.guest_task(
        &mut st,
        req,
        "qmtemplate",
        sim.flock_exclusive(vmid),
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                return Err(m);
            }
            let Some(vm) = st.vms.get(&vmid) else {
                return Err(format!("VM {vmid} does not exist"));
            };
            let drives: Vec<(String, String)> = vm
                .conf
                .iter()
                .filter(|(k, _)| is_drive_key(k))
                .filter(|(k, _)| disk.as_ref().is_none_or(|d| d == *k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for (k, v) in drives {
                let Some(mut map) = parse_drive(&k, &v) else {
                    continue;
                };
                let Some(file) = map.get("file").cloned() else {
                    continue;
                };
                if is_cdrom(&map) || volume_owner(&file) != Some(vmid) {
                    continue;
                }
                let needle = format!("vm-{vmid}-disk-");
                if !file.contains(&needle) {
                    continue;
                }
                let new_file = file.replace(&needle, &format!("base-{vmid}-disk-"));
                rename_volume(&sim2, st, &node, &file, &new_file);
                map.insert("file".into(), new_file.clone());
                log.line(format!("{k}: converted '{file}' to '{new_file}'"));
                if let Some(vm) = st.vms.get_mut(&vmid) {
                    vm.conf.insert(k.clone(), print_drive(&map));
                }
            }
            if let Some(vm) = st.vms.get_mut(&vmid) {
                vm.conf.insert("template".into(), "1".into());
            }
            Ok(())
        }),
    );
    st.touch();
    Ok(Reply::data(json!(upid)))
}
