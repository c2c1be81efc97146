//! LXC containers: create, config (GET/PUT with pending and hotplug), pending, power, destroy and the listings, with the
//! messages, defaults, locks and tasks of PVE's pve-container (`PVE/API2/LXC.pm`, `PVE/LXC/Config.pm`).

mod config;
mod create;
mod destroy;
mod power;
mod read;

pub(crate) use config::update_config;
pub(crate) use create::create;
pub(crate) use destroy::destroy;
pub(crate) use power::power;
pub(crate) use read::{
    get_config, index, list, pending, resource_entry, status_current, status_index,
};

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::api::ApiError;
use crate::formats::{format_size, parse_size};
use crate::grammar::default_key;
use crate::schema::{find_property, parameters, parse_property_string, split_indexed};
use crate::sim::Sim;
use crate::state::{State, Vm};

pub(crate) const CREATE_PATH: &str = "/nodes/{node}/lxc";
pub(crate) const CONFIG_PATH: &str = "/nodes/{node}/lxc/{vmid}/config";

/// Options a running container takes at once (`$LXC_FASTPLUG_OPTIONS` in `PVE/LXC/Config.pm`).
const FAST_PLUG: &[&str] = &[
    "description",
    "onboot",
    "startup",
    "protection",
    "hostname",
    "hookscript",
    "cores",
    "tags",
    "lock",
];

/// PVE's text for a container whose config file is not on this node.
fn no_such_ct_text(node: &str, vmid: u32) -> String {
    format!("Configuration file 'nodes/{node}/lxc/{vmid}.conf' does not exist")
}

fn get_ct<'a>(st: &'a State, node: &str, vmid: u32) -> Result<&'a Vm, ApiError> {
    st.lxc
        .get(&vmid)
        .filter(|ct| ct.node == node)
        .ok_or_else(|| ApiError::die(no_such_ct_text(node, vmid)))
}

/// `PVE::AbstractConfig::check_lock` for a container.
fn check_lock(ct: &Vm) -> Result<(), String> {
    match ct.lock() {
        Some(l) => Err(format!("CT is locked ({l})")),
        None => Ok(()),
    }
}

/// `check_protection`: `<what> - protection mode enabled`.
fn check_protection(ct: &Vm, what: &str) -> Result<(), String> {
    if ct.conf.get("protection").is_some_and(|p| p == "1") {
        return Err(format!("{what} - protection mode enabled"));
    }
    Ok(())
}

/// PVE's lock-timeout text for a container's config lock.
fn lock_timeout_text(vmid: u32) -> String {
    format!("can't lock file '/run/lock/lxc/pve-config-{vmid}.lock' - got timeout")
}

/// A failure injected into a container task, with the qemu lock path replaced by the container's.
fn injected_text(vmid: u32, injected: String) -> String {
    if injected == crate::sim::lock_timeout_message(vmid) {
        lock_timeout_text(vmid)
    } else {
        injected
    }
}

/// `raise_perm_exc`: 403 with PVE's `Permission check failed (...)`.
fn perm_error(what: &str) -> ApiError {
    ApiError::Status {
        code: 403,
        message: format!("Permission check failed ({what})\n"),
    }
}

/// `rootfs` and `mpN`.
fn is_mp_key(key: &str) -> bool {
    key == "rootfs" || split_indexed(key).is_some_and(|(f, _)| f == "mp")
}

fn is_net_key(key: &str) -> bool {
    split_indexed(key).is_some_and(|(f, _)| f == "net")
}

fn is_unused_key(key: &str) -> bool {
    split_indexed(key).is_some_and(|(f, _)| f == "unused")
}

/// The property-string format of a config key, from the create schema.
fn key_format(key: &str) -> Option<&'static Map<String, Value>> {
    find_property(parameters("POST", CREATE_PATH)?, key)?
        .get("format")?
        .as_object()
}

/// A parsed property-string value of a config key (`rootfs`, `mpN`, `netN`, `features`).
fn parse_value(key: &str, value: &str) -> Option<BTreeMap<String, String>> {
    parse_property_string(key_format(key)?, value, key).ok()
}

/// PVE's `print_property_string`: the default key's bare value, then the required keys sorted, then the rest
/// sorted; sizes printed as PVE prints them.
fn print_value(key: &str, map: &BTreeMap<String, String>) -> String {
    let Some(format) = key_format(key) else {
        return String::new();
    };
    let dk = default_key(format);
    let optional = |k: &str| {
        format
            .get(k)
            .and_then(|s| s.get("optional"))
            .and_then(Value::as_i64)
            == Some(1)
    };
    let text = |k: &str, v: &str| {
        let is_size = format
            .get(k)
            .and_then(|s| s.get("format"))
            .and_then(Value::as_str)
            == Some("disk-size");
        match parse_size(v) {
            Some(bytes) if is_size => format_size(bytes),
            _ => v.to_string(),
        }
    };
    let mut parts = Vec::new();
    if let Some(dk) = &dk
        && let Some(v) = map.get(dk)
    {
        parts.push(text(dk, v));
    }
    for required in [true, false] {
        for (k, v) in map {
            if Some(k) == dk.as_ref() || optional(k) == required {
                continue;
            }
            parts.push(format!("{k}={}", text(k, v)));
        }
    }
    parts.join(",")
}

/// `classify_mountpoint`: a device (`/dev/...`), a bind mount (another absolute path) or a storage volume.
fn mount_type(volume: &str) -> &'static str {
    if volume.starts_with("/dev/") {
        "device"
    } else if volume.starts_with('/') {
        "bind"
    } else {
        "volume"
    }
}

/// `$NEW_DISK_RE`: `<storage>:<GiB>` asks for a new volume; returns the storage and the size in bytes.
fn new_disk(volume: &str) -> Option<(&str, u64)> {
    let (storage, size) = volume.split_once(':')?;
    if storage.is_empty() || storage.contains(char::is_whitespace) {
        return None;
    }
    let (int, frac) = match size.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (size, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || frac.is_some_and(|f| !digits(f)) {
        return None;
    }
    let gib: f64 = size.parse().ok()?;
    let kib = (gib * 1024.0) as u64 * 1024;
    Some((storage, kib * 1024))
}

/// `check_ct_modify_config_perm` for a user other than root@pam (every API token): only storage volumes may be
/// mounted, and only `nesting` of the feature flags may change, on unprivileged containers only.
fn check_modify_perm(
    user: &str,
    old: Option<&BTreeMap<String, String>>,
    set: &BTreeMap<String, String>,
    delete: &[String],
    unprivileged: bool,
) -> Result<(), ApiError> {
    if user == "root@pam" {
        return Ok(());
    }
    let features = |conf: Option<&BTreeMap<String, String>>| -> BTreeMap<String, String> {
        conf.and_then(|c| c.get("features"))
            .and_then(|f| parse_value("features", f))
            .unwrap_or_default()
    };
    let check_features = |new: &BTreeMap<String, String>, deleting: bool| {
        if !unprivileged {
            return Err(perm_error(
                "changing feature flags for privileged container is only allowed for root@pam",
            ));
        }
        let old_features = features(old);
        let other_changed = if deleting {
            old_features.keys().any(|k| k != "nesting")
        } else if !old_features.is_empty() {
            old_features
                .keys()
                .chain(new.keys())
                .any(|k| k != "nesting" && old_features.get(k) != new.get(k))
        } else {
            new.keys().any(|k| k != "nesting")
        };
        if other_changed {
            return Err(perm_error(
                "changing feature flags (except nesting) is only allowed for root@pam",
            ));
        }
        Ok(())
    };
    for (k, v) in set {
        if is_mp_key(k) {
            let kind = parse_value(k, v)
                .and_then(|m| m.get("volume").map(|vol| mount_type(vol)))
                .unwrap_or("volume");
            if kind != "volume" {
                return Err(perm_error(&format!(
                    "mount point type {kind} is only allowed for root@pam"
                )));
            }
        } else if split_indexed(k).is_some_and(|(f, _)| f == "dev") {
            return Err(perm_error(
                "configuring device passthrough is only allowed for root@pam",
            ));
        } else if k == "features" {
            check_features(&parse_value(k, v).unwrap_or_default(), false)?;
        } else if k == "hookscript" {
            return Err(perm_error(
                "changing the hookscript is only allowed for root@pam",
            ));
        }
    }
    for k in delete {
        if split_indexed(k).is_some_and(|(f, _)| f == "dev") {
            return Err(perm_error(
                "configuring device passthrough is only allowed for root@pam",
            ));
        } else if k == "features" {
            check_features(&BTreeMap::new(), true)?;
        } else if k == "hookscript" {
            return Err(perm_error(
                "changing the hookscript is only allowed for root@pam",
            ));
        }
    }
    Ok(())
}

/// The storage checks PVE makes for a volume mount point before it forks: the storage exists on the node and holds
/// container directories (`rootdir`).
fn check_rootdir_storage(sim: &Sim, node: &str, storage: &str) -> Result<(), ApiError> {
    let Some(s) = sim.storage(storage) else {
        return Err(ApiError::die(format!("storage '{storage}' does not exist")));
    };
    if !s.on_node(node) {
        return Err(ApiError::die(format!(
            "storage '{storage}' is not available on node '{node}'"
        )));
    }
    if !s.has_content("rootdir") {
        return Err(ApiError::param(
            "storage",
            format!("storage '{storage}' does not support container directories"),
        ));
    }
    Ok(())
}

/// Allocates a container volume (`vm-<id>-disk-N`, `subvol-<id>-disk-N` on ZFS) of `size` bytes for `key`'s value
/// `<storage>:<GiB>` (given as storage and bytes) and returns the value with the volume and its size, and the volume.
fn alloc_mp(
    sim: &Sim,
    st: &mut State,
    node: &str,
    vmid: u32,
    key: &str,
    mut map: BTreeMap<String, String>,
    (storage, size): (&str, u64),
) -> Result<(String, String), String> {
    let s = crate::storage::storage_for(sim, node, storage)
        .ok_or_else(|| format!("storage '{storage}' does not exist"))?
        .clone();
    if !s.has_content("rootdir") {
        return Err(format!(
            "content type 'rootdir' is not available or configured on storage '{storage}'"
        ));
    }
    let mut volid =
        crate::storage::alloc_disk(sim, st, node, storage, vmid, size, Some("raw"), None)?;
    let vkey = crate::state::volume_key(&s, node, &volid);
    if let Some(mut v) = st.volumes.remove(&vkey) {
        if s.kind == "zfspool" {
            volid = volid.replacen(&format!("vm-{vmid}-"), &format!("subvol-{vmid}-"), 1);
            v.volid = volid.clone();
            v.format = "subvol".into();
        }
        v.content = "rootdir".into();
        st.volumes
            .insert(crate::state::volume_key(&s, node, &volid), v);
    }
    map.insert("volume".into(), volid.clone());
    map.insert("size".into(), size.to_string());
    Ok((print_value(key, &map), volid))
}

/// The volume of a mount point value when it is a storage volume.
fn mp_volume(key: &str, value: &str) -> Option<String> {
    let vol = parse_value(key, value)?.remove("volume")?;
    (mount_type(&vol) == "volume").then_some(vol)
}

/// The VMID a container volume belongs to (`vm-<id>-disk-N`, `subvol-<id>-disk-N`, `base-<id>-...`).
fn ct_volume_owner(volid: &str) -> Option<u32> {
    if let Some(id) = crate::storage::volume_owner(volid) {
        return Some(id);
    }
    let (_, name) = crate::formats::parse_volume_id(volid)?;
    let last = name.rsplit('/').next().unwrap_or(name);
    last.strip_prefix("subvol-")?
        .split('-')
        .next()?
        .parse()
        .ok()
}

/// Normalises a `netN` value as PVE does when it applies it: `type=veth` and a generated `hwaddr` when absent.
fn prepare_net(st: &mut State, key: &str, value: &str) -> String {
    let Some(mut map) = parse_value(key, value) else {
        return value.to_string();
    };
    map.insert("type".into(), "veth".into());
    if !map.contains_key("hwaddr") {
        map.insert("hwaddr".into(), st.random_mac());
    }
    print_value(key, &map)
}

/// The volumes of a container config: `rootfs`, `mpN` and `unusedN` volume ids (bind mounts and device mounts,
/// which name a path, are left out).
pub(crate) fn volumes(conf: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (key, value) in conf {
        let volid = if is_unused_key(key) {
            Some(value.clone())
        } else if is_mp_key(key) {
            parse_value(key, value).and_then(|m| m.get("volume").cloned())
        } else {
            None
        };
        if let Some(v) = volid.filter(|v| !v.starts_with('/')) {
            out.push((key.clone(), v));
        }
    }
    out
}

/// The LRM's start of an HA-managed container: every volume reachable on its node, pending values applied.
pub(crate) fn ha_start(sim: &Sim, st: &mut State, vmid: u32) -> Result<(), String> {
    let Some(ct) = st.lxc.get(&vmid) else {
        return Err(format!("CT {vmid} does not exist"));
    };
    if ct.running {
        return Ok(());
    }
    if ct.is_template() {
        return Err("you can't start a CT if it's a template".to_string());
    }
    for (_, volid) in volumes(&ct.conf) {
        if crate::storage::find_volume(sim, st, &ct.node, &volid).is_none() {
            return Err(format!("volume '{volid}' does not exist"));
        }
    }
    config::apply_all_pending(sim, st, vmid);
    let pid = st.next_pid();
    if let Some(ct) = st.lxc.get_mut(&vmid) {
        ct.running = true;
        ct.started_at = crate::state::now();
        ct.pid = pid;
    }
    Ok(())
}

/// The LRM's stop of an HA-managed container.
pub(crate) fn ha_stop(sim: &Sim, st: &mut State, vmid: u32) {
    if let Some(ct) = st.lxc.get_mut(&vmid)
        && ct.running
    {
        ct.running = false;
        ct.started_at = 0;
        ct.pid = 0;
        config::apply_all_pending(sim, st, vmid);
    }
}
