//! The power endpoints (start, stop, shutdown, reboot, reset, suspend, resume) and the start checks.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::config::apply_pending;
use super::drives::{is_cloudinit_file, is_drive_key, parse_drive};
use super::{check_lock, check_skiplock, get_vm, no_such_vm_text};
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::formats::parse_volume_id;
use crate::schema::split_indexed;
use crate::sim::Sim;
use crate::state::{State, Vm, now};
use crate::storage::{find_volume, storage_for};

/// Start-time checks PVE makes inside the start worker (`vm_start_nolock`), in its order: template, running, lock,
/// the cloud-init drive's storage, every volume activated (disks and ISOs; a missing one fails as the storage
/// plugin does), then the PCI and USB mappings `config_to_command` resolves.
pub(crate) fn start_checks(
    sim: &Sim,
    st: &State,
    vm: &Vm,
    vmid: u32,
    skiplock: bool,
) -> Result<(), String> {
    if vm.is_template() {
        return Err("you can't start a vm if it's a template".to_string());
    }
    if vm.running {
        return Err(format!("VM {vmid} already running"));
    }
    if !skiplock
        && let Some(l) = vm.lock()
        && l != "suspended"
    {
        return Err(format!("VM is locked ({l})"));
    }
    let conf = vm.merged();
    let drives = drives_in_pve_order(&conf);
    for (_, map) in &drives {
        if let Some(file) = map.get("file")
            && is_cloudinit_file(file)
            && let Some((storage, _)) = parse_volume_id(file)
            && let Some(s) = storage_for(sim, &vm.node, storage)
            && !s.has_content("images")
        {
            return Err(format!(
                "storage '{storage}' does not support content-type 'images'"
            ));
        }
    }
    for (_, map) in &drives {
        let Some(file) = map.get("file") else {
            continue;
        };
        // PVE regenerates the cloud-init drive at start, allocating it when it is missing.
        if is_cloudinit_file(file) {
            continue;
        }
        let Some((storage, volname)) = parse_volume_id(file) else {
            continue;
        };
        let Some(s) = storage_for(sim, &vm.node, storage) else {
            return Err(format!("storage '{storage}' does not exist"));
        };
        if find_volume(sim, st, &vm.node, file).is_none() {
            return Err(match s.kind.as_str() {
                // LvmThinPlugin's activate_lv; the simulator's thin pools all live in VG `pve`.
                "lvmthin" => format!("no such logical volume pve/{volname}"),
                // Plugin::activate_volume (directory-like storages) and the best-effort text for the rest.
                _ => format!("volume '{file}' does not exist"),
            });
        }
    }
    for (key, value) in &conf {
        if split_indexed(key).is_none_or(|(f, _)| f != "hostpci") {
            continue;
        }
        if let Some(name) = hostpci_mapping(key, value)
            && st
                .mappings
                .pci
                .get(&name)
                .is_none_or(|m| m.on_node(&vm.node).is_empty())
        {
            return Err(format!("PCI device mapping not found for '{name}'"));
        }
    }
    // qemu-server `USB::parse_usb_device` (in `config_to_command`, after the PCI devices): a mapped device needs
    // exactly one entry for the node.
    for (key, value) in &conf {
        if split_indexed(key).is_none_or(|(f, _)| f != "usb") {
            continue;
        }
        let Some(name) = value.split(',').find_map(|p| p.strip_prefix("mapping=")) else {
            continue;
        };
        let entries = st
            .mappings
            .usb
            .get(name)
            .map(|m| m.on_node(&vm.node).len())
            .unwrap_or(0);
        if entries == 0 {
            return Err(format!("USB device mapping not found for '{name}'"));
        }
        if entries > 1 {
            return Err("More than one USB mapping per host not supported".to_string());
        }
    }
    Ok(())
}

/// The drives of a config in PVE's `foreach_volume` order (ide, sata, scsi, virtio, efidisk0, tpmstate0), parsed.
fn drives_in_pve_order(conf: &BTreeMap<String, String>) -> Vec<(String, BTreeMap<String, String>)> {
    let mut keys: Vec<(usize, u32, &String)> = conf
        .keys()
        .filter(|k| is_drive_key(k))
        .map(|k| {
            let rank = match split_indexed(k) {
                Some(("ide", n)) => (0, n),
                Some(("sata", n)) => (1, n),
                Some(("scsi", n)) => (2, n),
                Some(("virtio", n)) => (3, n),
                _ if k == "efidisk0" => (4, 0),
                _ => (5, 0),
            };
            (rank.0, rank.1, k)
        })
        .collect();
    keys.sort();
    keys.into_iter()
        .filter_map(|(_, _, k)| parse_drive(k, &conf[k]).map(|m| (k.clone(), m)))
        .collect()
}

/// The `mapping` of a `hostpciN` value, when it names one.
fn hostpci_mapping(key: &str, value: &str) -> Option<String> {
    crate::schema::parse_named("pve-qm-hostpci", value, key)?.remove("mapping")
}

/// The power endpoints: `qmstart`, `qmstop`, `qmshutdown`, `qmreboot`, `qmreset`, `qmpause` (suspend) and
/// `qmresume`, each a task under the guest's config lock.
pub(crate) fn power(sim: &Arc<Sim>, req: &Req, kind: &'static str) -> ApiResult {
    let node = req.node().to_string();
    let vmid = req.vmid();
    check_skiplock(req)?;
    let skiplock = req.flag("skiplock");
    if kind == "qmpause" && req.flag("todisk") {
        return Err(ApiError::die(
            "suspend to disk (hibernation) is not modelled by the simulator",
        ));
    }
    let mut st = sim.write();
    let vm = get_vm(&st, &node, vmid)?;
    if matches!(kind, "qmstart" | "qmstop" | "qmshutdown") && crate::ha::vm_is_ha_managed(&st, vmid)
    {
        if kind == "qmstop" && req.flag("overrule-shutdown") {
            return Err(ApiError::param(
                "overrule-shutdown",
                "Not applicable for HA resources.",
            ));
        }
        return Ok(Reply::data(json!(ha_request(
            sim, &mut st, req, kind, "VM"
        ))));
    }
    // PVE checks these before forking the worker. A graceful shutdown or a reboot of a paused VM is
    // refused (qemu-server `vm_shutdown`, `vm_reboot`: `vm_is_paused`); `forceStop` stops it instead.
    let paused = vm.running && vm.paused;
    if paused && (kind == "qmreboot" || (kind == "qmshutdown" && !req.flag("forceStop"))) {
        return Err(ApiError::die("VM is paused - cannot shutdown"));
    }
    if matches!(kind, "qmreset" | "qmpause" | "qmresume" | "qmreboot") && !vm.running {
        return Err(ApiError::die(format!("VM {vmid} not running")));
    }
    let sim2 = Arc::clone(sim);
    let upid = sim.guest_task(
        &mut st,
        req,
        kind,
        sim.flock_exclusive(vmid),
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                return Err(m);
            }
            let pid = st.next_pid();
            let Some(vm) = st.vms.get(&vmid) else {
                return Err(no_such_vm_text(&node, vmid));
            };
            match kind {
                "qmstart" => {
                    start_checks(&sim2, st, vm, vmid, skiplock)?;
                    apply_pending(&sim2, st, vmid);
                    if let Some(vm) = st.vms.get_mut(&vmid) {
                        vm.running = true;
                        vm.paused = false;
                        vm.started_at = now();
                        vm.pid = pid;
                    }
                    log.line(format!("start VM {vmid}: UPID started"));
                }
                "qmreboot" => {
                    // `vm_reboot` reboots only a running VM and ends quietly otherwise.
                    if !vm.running {
                        return Ok(());
                    }
                    check_lock(vm, skiplock)?;
                    apply_pending(&sim2, st, vmid);
                    if let Some(vm) = st.vms.get_mut(&vmid) {
                        vm.paused = false;
                        vm.started_at = now();
                        vm.pid = pid;
                    }
                }
                "qmreset" | "qmpause" => {
                    if !vm.running {
                        return Err(format!("VM {vmid} not running"));
                    }
                    check_lock(vm, skiplock)?;
                    if let Some(vm) = st.vms.get_mut(&vmid) {
                        vm.paused = kind == "qmpause";
                    }
                }
                "qmresume" => {
                    if vm.is_template() {
                        return Err(format!("VM {vmid} is a template and cannot be resumed!"));
                    }
                    if !vm.running {
                        return Err(format!("VM {vmid} not running"));
                    }
                    if !vm.paused {
                        return Ok(());
                    }
                    check_lock(vm, skiplock)?;
                    if let Some(vm) = st.vms.get_mut(&vmid) {
                        vm.paused = false;
                    }
                }
                _ => {
                    check_lock(vm, skiplock)?;
                    if vm.running {
                        apply_pending(&sim2, st, vmid);
                        if let Some(vm) = st.vms.get_mut(&vmid) {
                            vm.running = false;
                            vm.paused = false;
                            vm.started_at = 0;
                            vm.pid = 0;
                        }
                    }
                }
            }
            Ok(())
        }),
    );
    st.touch();
    Ok(Reply::data(json!(upid)))
}

/// The task qemu-server and pve-container fork for a power request on an HA-managed guest instead of acting
/// (`vm_is_ha_managed` in `vm_start`/`vm_stop`/`vm_shutdown`): `hastart` runs `ha-manager set <sid> --state
/// started`, `hastop` `ha-manager crm-command stop <sid> <timeout>` (0 for a stop, the shutdown's timeout, 60 by
/// default, for a shutdown), and ends; the CRM carries the request out. The simulator sets the requested state
/// `stopped` for a stop at once, the effect the CRM's `stop` command has; the shutdown timeout is not modelled.
pub(crate) fn ha_request(
    sim: &Arc<Sim>,
    st: &mut State,
    req: &Req,
    kind: &str,
    what: &'static str,
) -> String {
    let vmid = req.vmid();
    let start = kind.ends_with("start");
    let sid = crate::ha::sid_for(st, vmid).unwrap_or_default();
    let upid = sim.start_task(
        st,
        req.node(),
        if start { "hastart" } else { "hastop" },
        &vmid.to_string(),
        &req.user,
        crate::sim::injected_failure(req, Some(vmid)),
        &[],
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                return Err(m);
            }
            let verb = if start { "start" } else { "stop" };
            log.line(format!("Requesting HA {verb} for {what} {vmid}"));
            let state = if start { "started" } else { "stopped" };
            if let Some(opts) = st.ha.resources.get_mut(&sid) {
                opts.insert("state".into(), state.into());
            }
            Ok(())
        }),
    );
    st.touch();
    upid
}
