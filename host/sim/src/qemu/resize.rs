//! `PUT .../resize`: growing a disk.

use std::sync::Arc;

use serde_json::json;

use super::drives::{is_cdrom, parse_drive, print_drive};
use super::{check_digest, check_lock, check_skiplock, get_vm, no_such_vm_text};
use crate::api::{ApiResult, Reply, Req};
use crate::formats::{format_size, parse_size, parse_volume_id};
use crate::sim::Sim;
use crate::storage::{find_volume, storage_for};

pub(crate) fn resize(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let node = req.node().to_string();
    let vmid = req.vmid();
    check_skiplock(req)?;
    let skiplock = req.flag("skiplock");
    let disk = req.get("disk").unwrap_or("").to_string();
    let size = req.get("size").unwrap_or("").to_string();
    let digest = req.get("digest").map(str::to_string);
    let mut st = sim.write();
    get_vm(&st, &node, vmid)?;
    let sim2 = Arc::clone(sim);
    let upid = sim.guest_task(
        &mut st,
        req,
        "resize",
        sim.flock_exclusive(vmid),
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                return Err(m);
            }
            let Some(vm) = st.vms.get(&vmid) else {
                return Err(no_such_vm_text(&node, vmid));
            };
            // PVE's resize checks the digest only here, in the worker, under the config lock.
            check_digest(vm, digest.as_deref())?;
            check_lock(vm, skiplock)?;
            let Some(value) = vm.conf.get(&disk).cloned() else {
                return Err(format!("disk '{disk}' does not exist"));
            };
            let Some(mut map) = parse_drive(&disk, &value) else {
                return Err(format!("unable to parse drive options for '{disk}'"));
            };
            if is_cdrom(&map) {
                return Err("you can't resize a cdrom".to_string());
            }
            let file = map.get("file").cloned().unwrap_or_default();
            let old = find_volume(&sim2, st, &node, &file)
                .map(|v| v.size)
                .or_else(|| map.get("size").and_then(|s| parse_size(s)))
                .unwrap_or(0);
            let (relative, amount) = match size.strip_prefix('+') {
                Some(rest) => (true, rest),
                None => (false, size.as_str()),
            };
            let amount =
                parse_size(amount).ok_or_else(|| format!("unable to parse size '{size}'"))?;
            let new = if relative { old + amount } else { amount };
            if new < old {
                return Err("shrinking disks is not supported".to_string());
            }
            if new == old {
                log.line(format!("disk '{disk}' already has the requested size"));
                return Ok(());
            }
            if let Some((storage, _)) = parse_volume_id(&file)
                && let Some(s) = storage_for(&sim2, &node, storage)
            {
                let key = crate::state::volume_key(s, &node, &file);
                if let Some(v) = st.volumes.get_mut(&key) {
                    v.size = new;
                }
            }
            map.insert("size".into(), format_size(new));
            if let Some(vm) = st.vms.get_mut(&vmid) {
                vm.conf.insert(disk.clone(), print_drive(&map));
            }
            log.line(format!("resized '{disk}' from {old} to {new} bytes"));
            Ok(())
        }),
    );
    st.touch();
    Ok(Reply::data(json!(upid)))
}
