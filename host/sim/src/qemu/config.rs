//! Config writes (async POST, sync PUT, unlink): pending values, hotplug, the digest and lock checks.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::create::{config_params, sshkeys_check};
use super::drives::{
    check_drive, create_disk, is_cdrom, is_cloudinit_file, is_drive_key, is_unused_key, parse_drive,
};
use super::{
    CONFIG_PATH, UPDATE_ONLY, check_boot, check_digest, check_hookscript, check_hostpci,
    check_lock, check_root_only, check_skiplock, check_usb, family, get_vm, is_fast_plug,
    no_such_vm_text, prepare_value,
};
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::schema::{find_property, parameters, parse_property_string, split_indexed};
use crate::sim::{Sim, TaskLog};
use crate::state::{State, Vm};
use crate::storage::{free_volume, volume_owner};

/// Registers a replaced or deleted drive's volume: cloud-init volumes are freed, owned disks become `unusedN`.
fn release_drive(sim: &Sim, st: &mut State, vmid: u32, key: &str, old: &str, force: bool) {
    let Some(map) = parse_drive(key, old) else {
        return;
    };
    let Some(file) = map.get("file").cloned() else {
        return;
    };
    let node = match st.vms.get(&vmid) {
        Some(vm) => vm.node.clone(),
        None => return,
    };
    if is_cloudinit_file(&file) {
        free_volume(sim, st, &node, &file);
        return;
    }
    if is_cdrom(&map) || volume_owner(&file) != Some(vmid) {
        return;
    }
    if force {
        free_volume(sim, st, &node, &file);
        return;
    }
    let Some(vm) = st.vms.get_mut(&vmid) else {
        return;
    };
    if vm.conf.values().any(|v| v == &file) {
        return;
    }
    let n = (0..=255)
        .find(|i| !vm.conf.contains_key(&format!("unused{i}")))
        .unwrap_or(255);
    vm.conf.insert(format!("unused{n}"), file);
}

fn drop_from_boot(vm: &mut Vm, key: &str) {
    let Some(boot) = vm.conf.get("boot").cloned() else {
        return;
    };
    let parts: Vec<String> = boot
        .split(',')
        .map(|p| match p.strip_prefix("order=") {
            Some(order) => {
                let kept: Vec<&str> = order.split(';').filter(|d| *d != key).collect();
                format!("order={}", kept.join(";"))
            }
            None => p.to_string(),
        })
        .collect();
    vm.conf.insert("boot".into(), parts.join(","));
}

fn apply_set(sim: &Sim, st: &mut State, vmid: u32, key: &str, value: &str) {
    let old = st.vms.get(&vmid).and_then(|vm| vm.conf.get(key).cloned());
    if let Some(old) = old
        && is_drive_key(key)
        && old != value
    {
        let old_file = parse_drive(key, &old).and_then(|m| m.get("file").cloned());
        let new_file = parse_drive(key, value).and_then(|m| m.get("file").cloned());
        if old_file != new_file {
            release_drive(sim, st, vmid, key, &old, false);
        }
    }
    if let Some(vm) = st.vms.get_mut(&vmid) {
        // An empty description is not written to the config (qemu-server `write_vm_config`).
        if key == "description" && value.is_empty() {
            vm.conf.remove(key);
        } else {
            vm.conf.insert(key.to_string(), value.to_string());
        }
        vm.pending.remove(key);
        vm.pending_delete.remove(key);
    }
}

fn apply_delete(sim: &Sim, st: &mut State, vmid: u32, key: &str, force: bool) {
    let old = st.vms.get(&vmid).and_then(|vm| vm.conf.get(key).cloned());
    if let Some(vm) = st.vms.get_mut(&vmid) {
        vm.conf.remove(key);
        vm.pending.remove(key);
        vm.pending_delete.remove(key);
        drop_from_boot(vm, key);
    }
    let Some(old) = old else {
        return;
    };
    if is_drive_key(key) {
        release_drive(sim, st, vmid, key, &old, force);
    } else if is_unused_key(key) {
        let node = st
            .vms
            .get(&vmid)
            .map(|vm| vm.node.clone())
            .unwrap_or_default();
        free_volume(sim, st, &node, &old);
    }
}

/// Applies every pending change (on start, stop and reboot).
pub(crate) fn apply_pending(sim: &Sim, st: &mut State, vmid: u32) {
    let Some(vm) = st.vms.get(&vmid) else {
        return;
    };
    let deletes: Vec<(String, bool)> = vm
        .pending_delete
        .iter()
        .map(|(k, f)| (k.clone(), *f))
        .collect();
    let sets: Vec<(String, String)> = vm
        .pending
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, force) in deletes {
        apply_delete(sim, st, vmid, &k, force);
    }
    for (k, v) in sets {
        apply_set(sim, st, vmid, &k, &v);
    }
}

/// The `hotplug` features in effect: the config's list, else PVE's default `network,disk,usb`.
fn hotplug_features(vm: &Vm) -> Vec<String> {
    vm.merged()
        .get("hotplug")
        .and_then(|h| crate::formats::hotplug_features(h))
        .unwrap_or_else(|| vec!["network".into(), "disk".into(), "usb".into()])
}

/// Whether a key set or deleted on a running VM is applied at once (other than the fast-plug keys).
/// A deleted drive is unplugged only on the `disk` feature and never on `ide`/`sata`, nor an
/// `efidisk0`/`tpmstate0` (qemu-server `vmconfig_hotplug_pending`); a drive set is [`drive_hotplugs`].
fn hotpluggable(vm: &Vm, key: &str) -> bool {
    let features = hotplug_features(vm);
    let has = |f: &str| features.iter().any(|x| x == f);
    if split_indexed(key).is_some_and(|(f, _)| f == "net") {
        return has("network");
    }
    if is_drive_key(key) {
        return has("disk") && !is_ide_sata(key) && key != "efidisk0" && key != "tpmstate0";
    }
    if split_indexed(key).is_some_and(|(f, _)| f == "usb") {
        return has("usb");
    }
    match key {
        "vcpus" => has("cpu"),
        // Deleting `balloon` turns ballooning back on unless it is off (`balloon: 0`), which
        // is not hot-pluggable (qemu-server `vmconfig_hotplug_pending`).
        "balloon" => vm.conf.get("balloon").is_none_or(|b| b != "0"),
        // Written to the guest's cgroup at once (`change_cpu_shares`, `change_cpu_quota`).
        "cpuunits" | "cpulimit" => true,
        "tablet" => has("usb"),
        // Deleting `hotplug` waits while the current list has `cpu` or `memory`.
        "hotplug" => !names_cpu_or_memory(vm.conf.get("hotplug")),
        _ => false,
    }
}

/// Whether a `hotplug` list names `cpu` or `memory` (qemu-server matches `/(cpu|memory)/`).
fn names_cpu_or_memory(list: Option<&String>) -> bool {
    list.is_some_and(|h| h.contains("cpu") || h.contains("memory"))
}

/// A value of `key` read with its format in the config schema; `None` when it does not parse.
pub(super) fn parse_with_format(key: &str, value: &str) -> Option<BTreeMap<String, String>> {
    let format = find_property(parameters("POST", CONFIG_PATH)?, key)?
        .get("format")?
        .as_object()?;
    parse_property_string(format, value, key).ok()
}

/// Whether a running VM takes `netN: new` at once, as qemu-server's `vmconfig_update_net` decides:
/// the same model, MAC, queues and MTU on a bridge change their bridge, tag, trunks, firewall,
/// rate and link state live, with or without the `network` feature; any other change (or a new
/// NIC) is a hot-plug, done only with `network`.
fn net_hotplugs(vm: &Vm, key: &str, new: &str) -> bool {
    let network = hotplug_features(vm).iter().any(|f| f == "network");
    let Some(old) = vm.conf.get(key).and_then(|o| parse_with_format(key, o)) else {
        return network;
    };
    let Some(new) = parse_with_format(key, new) else {
        return false;
    };
    let same = |k: &str| old.get(k) == new.get(k);
    let in_place = ["model", "macaddr", "queues", "mtu"].into_iter().all(same)
        && old.contains_key("bridge")
        && new.contains_key("bridge");
    in_place || network
}

/// Whether a running VM takes `agent: new` at once (`vmconfig_update_agent`): only when it has an
/// agent setting and nothing but `fstrim_cloned_disks` changes.
fn agent_hotplugs(vm: &Vm, new: &str) -> bool {
    let Some(old) = vm.conf.get("agent") else {
        return false;
    };
    let (Some(mut old), Some(mut new)) = (
        parse_with_format("agent", old),
        parse_with_format("agent", new),
    ) else {
        return false;
    };
    old.remove("fstrim_cloned_disks");
    new.remove("fstrim_cloned_disks");
    old == new
}

/// Whether a running VM takes `balloon: new` at once: only while ballooning stays on or off
/// (qemu-server `vmconfig_hotplug_pending`: "enable/disable ballooning device is not
/// hotpluggable"); absent counts as on.
fn balloon_hotplugs(vm: &Vm, new: &str) -> bool {
    let on = |v: Option<&str>| v.is_none_or(|b| b != "0");
    on(vm.conf.get("balloon").map(String::as_str)) == on(Some(new))
}

fn is_ide_sata(key: &str) -> bool {
    split_indexed(key).is_some_and(|(f, _)| f == "ide" || f == "sata")
}

/// Drive options a running VM cannot change: a change to any of them stays pending even when the
/// volume stays the same (qemu-server `PVE/QemuServer.pm`, `vmconfig_update_disk`, "skip non
/// hotpluggable value").
const COLD_DRIVE_OPTIONS: [&str; 9] = [
    "aio", "discard", "iothread", "queues", "product", "cache", "ssd", "vendor", "ro",
];

/// Whether PVE applies a drive value on a running VM at once, as `vmconfig_update_disk` decides: a CD-ROM
/// changes its medium; the same volume with other throttling limits is applied, with another
/// [`COLD_DRIVE_OPTIONS`] value it is not; another volume or a new drive is plugged only with the `disk`
/// feature and never on `ide`/`sata`; `efidisk0`, `tpmstate0` and a change of media type wait.
fn drive_hotplugs(vm: &Vm, key: &str, new: &str) -> bool {
    if key == "efidisk0" || key == "tpmstate0" {
        return false;
    }
    let disk = hotplug_features(vm).iter().any(|f| f == "disk");
    let plugs = disk && !is_ide_sata(key);
    let Some(old) = vm.conf.get(key).and_then(|o| parse_drive(key, o)) else {
        return plugs;
    };
    let Some(new) = parse_drive(key, new) else {
        return false;
    };
    let media = |m: &BTreeMap<String, String>| m.get("media").cloned();
    if media(&old).as_deref().unwrap_or("disk") != media(&new).as_deref().unwrap_or("disk") {
        return false;
    }
    if is_cdrom(&old) {
        return true;
    }
    if old.get("file") != new.get("file") {
        return plugs;
    }
    COLD_DRIVE_OPTIONS
        .iter()
        .all(|k| old.get(*k) == new.get(*k))
}

/// The update itself (`$update_vm_api` after its early checks): writes pending, then applies what may be applied.
#[allow(clippy::too_many_arguments)]
fn apply_update(
    sim: &Sim,
    st: &mut State,
    vmid: u32,
    set: &BTreeMap<String, String>,
    delete: &[String],
    revert: &[String],
    force: bool,
    log: &mut TaskLog,
) -> Result<(), String> {
    let (node, running) = match st.vms.get(&vmid) {
        Some(vm) => (vm.node.clone(), vm.running),
        None => return Err(format!("VM {vmid} does not exist")),
    };
    for key in revert {
        if let Some(vm) = st.vms.get_mut(&vmid) {
            vm.pending.remove(key);
            vm.pending_delete.remove(key);
        }
    }
    for key in delete {
        let Some(vm) = st.vms.get_mut(&vmid) else {
            break;
        };
        if !vm.conf.contains_key(key) && !vm.pending.contains_key(key) {
            log.line(format!(
                "cannot delete '{key}' - not set in current configuration!"
            ));
            continue;
        }
        if running && !is_fast_plug(key) && !hotpluggable(vm, key) {
            vm.pending.remove(key);
            if vm.conf.contains_key(key) {
                vm.pending_delete.insert(key.clone(), force);
            }
        } else {
            apply_delete(sim, st, vmid, key, force);
        }
    }
    for (key, value) in set {
        let value = if is_drive_key(key) {
            let current = st
                .vms
                .get(&vmid)
                .and_then(|vm| vm.merged().get(key).cloned());
            if current.as_deref() == Some(value.as_str()) {
                value.clone()
            } else {
                let template = st
                    .vms
                    .get(&vmid)
                    .is_some_and(|vm| vm.conf.get("template").is_some_and(|t| t == "1"));
                create_disk(sim, st, &node, vmid, key, value, template, log)?
            }
        } else {
            value.clone()
        };
        let Some(vm) = st.vms.get_mut(&vmid) else {
            break;
        };
        let live = if is_drive_key(key) {
            drive_hotplugs(vm, key, &value)
        } else if key == "balloon" {
            balloon_hotplugs(vm, &value)
        } else if split_indexed(key).is_some_and(|(f, _)| f == "net") {
            net_hotplugs(vm, key, &value)
        } else if key == "agent" {
            agent_hotplugs(vm, &value)
        } else if key == "hotplug" {
            // A list naming `cpu` or `memory`, before or after, waits.
            !names_cpu_or_memory(vm.conf.get("hotplug")) && !names_cpu_or_memory(Some(&value))
        } else {
            is_fast_plug(key) || hotpluggable(vm, key)
        };
        if running && !live {
            vm.pending.insert(key.clone(), value);
            vm.pending_delete.remove(key);
        } else {
            apply_set(sim, st, vmid, key, &value);
        }
    }
    // A request that sets a boot `order=` removes the legacy `bootdisk` as a delete of its own
    // (pending on a running VM); any other write keeps it.
    let drops_bootdisk = set.get("boot").is_some_and(|b| sets_boot_order(b))
        && !set.contains_key("bootdisk")
        && st
            .vms
            .get(&vmid)
            .is_some_and(|vm| vm.conf.contains_key("bootdisk"));
    if drops_bootdisk {
        if running {
            if let Some(vm) = st.vms.get_mut(&vmid) {
                vm.pending_delete.insert("bootdisk".into(), false);
            }
        } else {
            apply_delete(sim, st, vmid, "bootdisk", false);
        }
    }
    if let Some(vm) = st.vms.get_mut(&vmid) {
        vm.drop_unchanged_pending();
    }
    Ok(())
}

/// Whether a `boot` value names a device order (qemu-server `update_vm_api`: `if
/// ($new_bootcfg->{order})`, where only then "remove legacy boot order settings if new one set").
fn sets_boot_order(boot: &str) -> bool {
    boot.split(',')
        .filter_map(|p| p.strip_prefix("order="))
        .any(|o| !o.is_empty() && o != "0")
}

/// The boot order with the CD/DVD drives `set` adds appended, when the guest has an explicit
/// `order=` (qemu-server `update_vm_api`: "append new CD drives to bootorder to mark them
/// bootable"; the default legacy order boots every CD-ROM anyway). Cloud-init drives are not CDs
/// here (`drive_is_cdrom($drive, 1)`). `None` when nothing changes.
fn boot_with_new_cdroms(vm: &Vm, set: &BTreeMap<String, String>) -> Option<String> {
    let boot = vm.conf.get("boot")?;
    let order = boot.split(',').find_map(|p| p.strip_prefix("order="))?;
    let mut devices: Vec<&str> = order.split(';').filter(|d| !d.is_empty()).collect();
    if devices.is_empty() {
        return None;
    }
    let before = devices.len();
    for (key, value) in set {
        let Some(map) = parse_drive(key, value).filter(is_cdrom) else {
            continue;
        };
        let file = map.get("file").map(String::as_str).unwrap_or_default();
        let cloudinit = file.ends_with(":cloudinit") || is_cloudinit_file(file);
        if !cloudinit && !devices.contains(&key.as_str()) {
            devices.push(key);
        }
    }
    (devices.len() > before).then(|| format!("order={}", devices.join(";")))
}

/// A protected guest keeps its drives: removing one (or an `unusedN` volume) fails as
/// qemu-server's `update_vm_api` does (`check_protection`).
fn check_protected_drives(vm: &Vm, delete: &[String]) -> Result<(), String> {
    if vm.conf.get("protection").is_none_or(|p| p != "1") {
        return Ok(());
    }
    for key in delete {
        if split_indexed(key).is_some_and(|(f, _)| f == "unused") {
            let file = vm.conf.get(key).cloned().unwrap_or_default();
            return Err(format!(
                "can't remove unused disk '{file}' - protection mode enabled"
            ));
        }
        if is_drive_key(key) {
            return Err(format!(
                "can't remove drive '{key}' - protection mode enabled"
            ));
        }
    }
    Ok(())
}

/// A config update that passed PVE's early checks (`$load_and_check_config->(0)`, before forking or locking).
struct Update {
    user: String,
    node: String,
    vmid: u32,
    digest: Option<String>,
    skiplock: bool,
    set: BTreeMap<String, String>,
    delete: Vec<String>,
    revert: Vec<String>,
    force: bool,
}

impl Update {
    /// The checks PVE repeats under the config lock, then the update itself.
    fn apply(&self, sim: &Sim, st: &mut State, log: &mut TaskLog) -> Result<(), ApiError> {
        let Some(vm) = st.vms.get(&self.vmid) else {
            return Err(ApiError::die(no_such_vm_text(&self.node, self.vmid)));
        };
        check_digest(vm, self.digest.as_deref()).map_err(ApiError::die)?;
        check_lock(vm, self.skiplock).map_err(ApiError::die)?;
        check_protected_drives(vm, &self.delete).map_err(ApiError::die)?;
        check_device_perms(&self.user, vm, &self.set, &self.delete)?;
        apply_update(
            sim,
            st,
            self.vmid,
            &self.set,
            &self.delete,
            &self.revert,
            self.force,
            log,
        )
        .map_err(ApiError::die)
    }
}

/// The device checks `update_vm_api` makes under the config lock, deleted keys first: a serial port other than a
/// `socket` (to, from or deleted), a USB or PCI host device (the old value as well as the new one) is root@pam's
/// alone (`check_usb_perm`, `check_hostpci_perm`). A value already pending unchanged is skipped, as PVE skips it.
fn check_device_perms(
    user: &str,
    vm: &Vm,
    set: &BTreeMap<String, String>,
    delete: &[String],
) -> Result<(), ApiError> {
    if user == "root@pam" {
        return Ok(());
    }
    for key in delete {
        let Some(old) = vm.conf.get(key).or_else(|| vm.pending.get(key)) else {
            continue;
        };
        match family(key) {
            Some("serial") if old != "socket" => {
                return Err(ApiError::die(format!(
                    "only root can delete '{key}' config for real devices"
                )));
            }
            Some("usb") => check_usb(user, key, old)?,
            Some("hostpci") => check_hostpci(user, key, old)?,
            _ => {}
        }
    }
    for (key, new) in set {
        if vm.pending.get(key) == Some(new) {
            continue;
        }
        let old = vm.conf.get(key);
        match family(key) {
            Some("serial") if old.is_some_and(|o| o != "socket") || new != "socket" => {
                return Err(ApiError::die(format!(
                    "only root can modify '{key}' config for real devices"
                )));
            }
            Some("usb") => {
                if let Some(old) = old {
                    check_usb(user, key, old)?;
                }
                check_usb(user, key, new)?;
            }
            Some("hostpci") => {
                if let Some(old) = old {
                    check_hostpci(user, key, old)?;
                }
                check_hostpci(user, key, new)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// PVE's `update_vm_api` up to the lock: parameter checks, then the config checked once (digest, lock, boot order).
fn check_update(sim: &Arc<Sim>, req: &Req) -> Result<Update, ApiError> {
    let node = req.node().to_string();
    let vmid = req.vmid();
    check_skiplock(req)?;
    let skiplock = req.flag("skiplock");
    let raw = config_params(req, UPDATE_ONLY);
    let delete: Vec<String> = req
        .get("delete")
        .map(crate::formats::split_list)
        .unwrap_or_default()
        .into_iter()
        .map(str::to_string)
        .collect();
    let revert: Vec<String> = req
        .get("revert")
        .map(crate::formats::split_list)
        .unwrap_or_default()
        .into_iter()
        .map(str::to_string)
        .collect();
    if raw.is_empty() && delete.is_empty() && revert.is_empty() {
        return Err(ApiError::die("no options specified"));
    }
    let props = parameters("POST", CONFIG_PATH).expect("schema");
    for d in &delete {
        if raw.contains_key(d) {
            return Err(ApiError::param(
                "delete",
                format!("you can't use '-{d}' and -delete {d}' at the same time"),
            ));
        }
        if UPDATE_ONLY.contains(&d.as_str()) || find_property(props, d).is_none() {
            return Err(ApiError::param("delete", format!("unknown option '{d}'")));
        }
    }
    for r in &revert {
        if raw.contains_key(r) {
            return Err(ApiError::param(
                "revert",
                format!("you can't use '-{r}' and '-revert {r}' at the same time"),
            ));
        }
    }
    sshkeys_check(&raw)?;
    for (k, v) in &raw {
        if is_drive_key(k) {
            check_drive(sim, &node, k, v)?;
        }
    }
    if let Some(script) = raw.get("hookscript") {
        check_hookscript(sim, &sim.read(), &node, script)?;
    }
    check_root_only(&req.user, delete.iter().map(String::as_str))?;
    check_root_only(&req.user, raw.keys().map(String::as_str))?;
    let digest = req.get("digest").map(str::to_string);
    let mut st = sim.write();
    let vm = get_vm(&st, &node, vmid)?;
    check_digest(vm, digest.as_deref()).map_err(ApiError::die)?;
    check_lock(vm, skiplock).map_err(ApiError::die)?;
    let mut merged = vm.merged();
    for d in &delete {
        merged.remove(d);
    }
    let ostype = raw
        .get("ostype")
        .cloned()
        .or_else(|| merged.get("ostype").cloned());
    let mut set = BTreeMap::new();
    for (k, v) in &raw {
        set.insert(k.clone(), prepare_value(&mut st, k, v, ostype.as_deref()));
    }
    if !set.contains_key("boot")
        && let Some(boot) = boot_with_new_cdroms(get_vm(&st, &node, vmid)?, &set)
    {
        set.insert("boot".into(), boot);
    }
    for (k, v) in &set {
        merged.insert(k.clone(), v.clone());
    }
    if set.contains_key("boot") {
        check_boot(&merged)?;
    }
    Ok(Update {
        user: req.user.clone(),
        node,
        vmid,
        digest,
        skiplock,
        set,
        delete,
        revert,
        force: req.flag("force"),
    })
}

/// `POST .../config`: the update runs in a `qmconfig` task under the guest's config lock, where a digest
/// that no longer matches fails the task.
pub(crate) fn update_config_async(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let update = check_update(sim, req)?;
    let mut st = sim.write();
    let sim2 = Arc::clone(sim);
    let vmid = update.vmid;
    let upid = sim.guest_task(
        &mut st,
        req,
        "qmconfig",
        sim.flock_exclusive(vmid),
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                return Err(m);
            }
            update.apply(&sim2, st, log).map_err(|e| e.task_text())
        }),
    );
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(json!(upid)))
}

/// `PUT .../config` (and `PUT .../unlink`): the update runs in the request, under the guest's config lock
/// (waited for as PVE does, then `can't lock file ... got timeout`); a digest that no longer matches is a 500.
pub(crate) async fn update_config_sync(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let update = check_update(sim, req)?;
    if req.faults.lock_timeout {
        return Err(ApiError::die(crate::sim::lock_timeout_message(update.vmid)));
    }
    let mut log = TaskLog::default();
    let flock = sim
        .flock(sim.flock_exclusive(update.vmid), &mut log)
        .await
        .map_err(ApiError::die)?;
    let result = {
        let mut st = sim.write();
        let result = update.apply(sim, &mut st, &mut log);
        st.touch();
        result
    };
    drop(flock);
    sim.persist();
    result?;
    Ok(Reply::data(Value::Null))
}

/// `PUT .../unlink`: PVE's `update_vm` with `delete=<idlist>` (and `force`).
pub(crate) async fn unlink(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let mut params = req.params.clone();
    if let Some(list) = params.remove("idlist") {
        params.insert("delete".to_string(), list);
    }
    let req = Req {
        user: req.user.clone(),
        params,
        faults: req.faults.clone(),
    };
    update_config_sync(sim, &req).await
}
