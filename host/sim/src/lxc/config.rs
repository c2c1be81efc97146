//! `PUT /nodes/{node}/lxc/{vmid}/config` (synchronous, as in PVE) and the pending machinery shared with create:
//! `update_pct_config` stages changes, then a stopped container takes them all and a running one the hot-pluggable.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::{
    CONFIG_PATH, FAST_PLUG, alloc_mp, check_lock, check_modify_perm, check_protection, get_ct,
    is_mp_key, is_net_key, is_unused_key, lock_timeout_text, mount_type, mp_volume, new_disk,
    parse_value, prepare_net, print_value,
};
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::formats::{normalize_tags, parse_volume_id, split_list};
use crate::schema::{find_property, parameters};
use crate::sim::{Sim, TaskLog};
use crate::state::State;
use crate::storage::free_volume;

/// PVE's `assert_if_modified` text for a stale `digest`.
const MODIFIED: &str = "detected modified configuration - file changed by other user? Try again.";

/// Update parameters that are not config keys.
const UPDATE_ONLY: &[&str] = &["node", "vmid", "delete", "revert", "digest"];

/// True when `key` is a container config option (`PVE::LXC::Config->option_exists`).
fn option_exists(key: &str) -> bool {
    !UPDATE_ONLY.contains(&key)
        && parameters("PUT", CONFIG_PATH).is_some_and(|p| find_property(p, key).is_some())
}

/// Adds a volume as the first free `unusedN`, unless it is referenced already.
fn add_unused(st: &mut State, vmid: u32, volid: &str) {
    let Some(ct) = st.lxc.get_mut(&vmid) else {
        return;
    };
    let used = ct.conf.iter().any(|(k, v)| {
        (is_unused_key(k) && v == volid)
            || (is_mp_key(k) && mp_volume(k, v).as_deref() == Some(volid))
    });
    if used {
        return;
    }
    if let Some(n) = (0..=255).find(|i| !ct.conf.contains_key(&format!("unused{i}"))) {
        ct.conf.insert(format!("unused{n}"), volid.to_string());
    }
}

/// `update_pct_config` up to the apply: reverts, pending deletes and pending values, with PVE's refusals.
pub(super) fn stage(
    sim: &Sim,
    st: &mut State,
    vmid: u32,
    set: &BTreeMap<String, String>,
    delete: &[String],
    revert: &[String],
    log: &mut TaskLog,
) -> Result<(), String> {
    let Some(ct) = st.lxc.get_mut(&vmid) else {
        return Err(format!("CT {vmid} does not exist"));
    };
    for key in revert {
        ct.pending.remove(key);
        ct.pending_delete.remove(key);
    }
    for key in delete {
        if !ct.conf.contains_key(key) && !ct.pending.contains_key(key) {
            log.line(format!(
                "cannot delete '{key}' - not set in current configuration!"
            ));
            continue;
        }
        if matches!(key.as_str(), "memory" | "rootfs" | "ostype") {
            return Err(format!("unable to delete required option '{key}'"));
        }
        if is_unused_key(key) || (is_mp_key(key) && key != "rootfs") {
            check_protection(ct, &format!("can't remove CT {vmid} drive '{key}'"))?;
        }
        if key == "unprivileged" {
            return Err(format!("unable to delete read-only option: '{key}'"));
        }
        ct.pending.remove(key);
        ct.pending_delete.insert(key.clone(), false);
    }
    for (key, value) in set {
        let mut value = value.clone();
        if is_mp_key(key) {
            check_protection(ct, &format!("can't update CT {vmid} drive '{key}'"))?;
            let volume = parse_value(key, &value)
                .and_then(|m| m.get("volume").cloned())
                .unwrap_or_default();
            if mount_type(&volume) == "volume" {
                // `update_pct_config`'s content check parses the volume ID without `noerr`:
                // an update takes no bare size (`rootfs=4`, which only a create reads as a
                // size on the default storage).
                let Some((sid, _)) =
                    parse_volume_id(&volume).or_else(|| new_disk(&volume).map(|(s, _)| (s, "")))
                else {
                    return Err(format!("unable to parse volume ID '{volume}'"));
                };
                let Some(s) = sim.storage(sid) else {
                    return Err(format!("storage '{sid}' does not exist"));
                };
                if !s.has_content("rootdir") {
                    return Err(format!(
                        "storage '{sid}' does not allow content type 'rootdir' (Container)"
                    ));
                }
            }
        } else if key == "unprivileged" {
            return Err(format!("unable to modify read-only option: '{key}'"));
        } else if key == "tags" {
            value = normalize_tags(&value);
        }
        ct.pending.insert(key.clone(), value);
        ct.pending_delete.remove(key);
    }
    Ok(())
}

/// `cleanup_pending` then `vmconfig_apply_pending` (stopped) or `vmconfig_hotplug_pending` (running); returns the
/// errors per option as PVE collects them.
pub(super) fn cleanup_and_apply(sim: &Sim, st: &mut State, vmid: u32) -> BTreeMap<String, String> {
    let mut errors = BTreeMap::new();
    let Some(ct) = st.lxc.get_mut(&vmid) else {
        return errors;
    };
    ct.drop_unchanged_pending();
    let gone: Vec<String> = ct
        .pending_delete
        .keys()
        .filter(|k| !ct.conf.contains_key(*k))
        .cloned()
        .collect();
    for k in gone {
        ct.pending_delete.remove(&k);
    }
    let running = ct.running;
    let node = ct.node.clone();
    let deletes: Vec<String> = ct.pending_delete.keys().cloned().collect();
    for key in deletes {
        let plugged = !running
            || FAST_PLUG.contains(&key.as_str())
            || is_unused_key(&key)
            || is_net_key(&key)
            || matches!(key.as_str(), "swap" | "cpulimit" | "cpuunits");
        if !plugged {
            continue;
        }
        let old = st.lxc.get_mut(&vmid).and_then(|ct| {
            ct.pending_delete.remove(&key);
            ct.conf.remove(&key)
        });
        let Some(old) = old else {
            continue;
        };
        if is_unused_key(&key) {
            free_volume(sim, st, &node, &old);
        } else if is_mp_key(&key)
            && let Some(volid) = mp_volume(&key, &old)
        {
            add_unused(st, vmid, &volid);
        }
    }
    let sets: Vec<(String, String)> = match st.lxc.get(&vmid) {
        Some(ct) => ct
            .pending
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        None => return errors,
    };
    for (key, value) in sets {
        let exists = st
            .lxc
            .get(&vmid)
            .is_some_and(|ct| ct.conf.contains_key(&key));
        let plugged = !running
            || FAST_PLUG.contains(&key.as_str())
            || is_net_key(&key)
            || matches!(key.as_str(), "memory" | "swap" | "cpulimit" | "cpuunits")
            || (is_mp_key(&key) && key != "rootfs" && !exists);
        if !plugged {
            continue;
        }
        let value = if is_net_key(&key) {
            prepare_net(st, &key, &value)
        } else if is_mp_key(&key) {
            let Some(map) = parse_value(&key, &value) else {
                continue;
            };
            let volume = map.get("volume").cloned().unwrap_or_default();
            match new_disk(&volume) {
                Some((sid, size)) => {
                    let sid = sid.to_string();
                    match alloc_mp(sim, st, &node, vmid, &key, map, (&sid, size)) {
                        Ok((v, _)) => v,
                        Err(e) => {
                            errors.insert(
                                key.clone(),
                                format!("unable to apply pending change {key} : {e}"),
                            );
                            continue;
                        }
                    }
                }
                None => print_value(&key, &map),
            }
        } else {
            value
        };
        let old = st.lxc.get_mut(&vmid).and_then(|ct| {
            ct.pending.remove(&key);
            ct.conf.insert(key.clone(), value.clone())
        });
        if is_mp_key(&key)
            && let Some(old) = old
            && let Some(volid) = mp_volume(&key, &old)
            && mp_volume(&key, &value).as_deref() != Some(volid.as_str())
        {
            add_unused(st, vmid, &volid);
        }
    }
    errors
}

/// Every pending change, as a start applies them (`vm_start` → `vmconfig_apply_pending`).
pub(crate) fn apply_all_pending(sim: &Sim, st: &mut State, vmid: u32) {
    let running = st.lxc.get(&vmid).is_some_and(|ct| ct.running);
    if let Some(ct) = st.lxc.get_mut(&vmid) {
        ct.running = false;
    }
    cleanup_and_apply(sim, st, vmid);
    if let Some(ct) = st.lxc.get_mut(&vmid) {
        ct.running = running;
    }
}

/// `PUT /nodes/{node}/lxc/{vmid}/config`: PVE's `update_vm`, run in the request under the container's config lock.
pub(crate) async fn update_config(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let node = req.node().to_string();
    let vmid = req.vmid();
    let set: BTreeMap<String, String> = req
        .params
        .iter()
        .filter(|(k, _)| !UPDATE_ONLY.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let list = |key: &str| -> Vec<String> {
        req.get(key)
            .map(split_list)
            .unwrap_or_default()
            .into_iter()
            .map(str::to_string)
            .collect()
    };
    let delete = list("delete");
    let revert = list("revert");
    if set.is_empty() && req.get("delete").is_none() && req.get("revert").is_none() {
        return Err(ApiError::die("no options specified"));
    }
    let digest = req.get("digest").map(str::to_string);
    if req.faults.lock_timeout {
        return Err(ApiError::die(lock_timeout_text(vmid)));
    }
    let mut log = TaskLog::default();
    let flock = sim
        .flock(sim.flock_exclusive(vmid), &mut log)
        .await
        .map_err(|_| ApiError::die(lock_timeout_text(vmid)))?;
    let result = (|| {
        let mut st = sim.write();
        let ct = get_ct(&st, &node, vmid)?;
        check_lock(ct).map_err(ApiError::die)?;
        if let Some(d) = &digest
            && *d != ct.digest()
        {
            return Err(ApiError::die(MODIFIED));
        }
        let unprivileged = ct.conf.get("unprivileged").is_some_and(|u| u == "1");
        let current = ct.conf.clone();
        for key in &revert {
            if !option_exists(key) {
                return Err(ApiError::param("revert", format!("unknown option '{key}'")));
            }
            if set.contains_key(key) {
                return Err(ApiError::param(
                    "revert",
                    format!("you can't use '-{key}' and '-revert {key}' at the same time"),
                ));
            }
        }
        for key in &delete {
            if !option_exists(key) {
                return Err(ApiError::param("delete", format!("unknown option '{key}'")));
            }
            if set.contains_key(key) {
                return Err(ApiError::param(
                    "delete",
                    format!("you can't use '-{key}' and -delete {key}' at the same time"),
                ));
            }
            if revert.contains(key) {
                return Err(ApiError::param(
                    "delete",
                    format!("you can't use '-delete {key}' and '-revert {key}' at the same time"),
                ));
            }
        }
        check_modify_perm(&req.user, Some(&current), &set, &delete, unprivileged)?;
        // PVE changes the config in memory and writes it only when everything went well.
        let before = ct.clone();
        let volumes = st.volumes.clone();
        let staged = stage(sim, &mut st, vmid, &set, &delete, &revert, &mut log);
        let result = match staged {
            Err(e) => Err(ApiError::die(e)),
            Ok(()) => {
                let errors = cleanup_and_apply(sim, &mut st, vmid);
                if errors.is_empty() {
                    Ok(())
                } else {
                    Err(ApiError::Param(errors))
                }
            }
        };
        if result.is_err() {
            st.lxc.insert(vmid, before);
            st.volumes = volumes;
        }
        st.touch();
        result
    })();
    drop(flock);
    sim.persist();
    result?;
    Ok(Reply::data(Value::Null))
}
