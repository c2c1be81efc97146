//! Guest migration: `GET /nodes/{node}/qemu/{vmid}/migrate` (the preconditions), `POST .../qemu/{vmid}/migrate`
//! (`qmigrate`, or `hamigrate` for an HA-managed VM) and `POST .../lxc/{vmid}/migrate` (`vzmigrate` /
//! `hamigrate`), with the refusals of qemu-server's `PVE/API2/Qemu.pm` (`migrate_vm`,
//! `migrate_vm_precondition`), `PVE/QemuMigrate.pm` (`prepare`, `scan_local_volumes`),
//! `PVE/QemuMigrate/Helpers.pm` (`check_local_resources`) and pve-container's `PVE/API2/LXC.pm` and
//! `PVE/LXC/Migrate.pm`. A migration moves the config to the target node and the volumes on local storages
//! with it; volumes on shared storages stay where they are, reachable from every node.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::{ApiError, ApiResult, Reply, Req, no_such_vm};
use crate::sim::{Sim, TaskLog};
use crate::state::{State, Vm, volume_key};

/// The storage types `QemuMigrate` can copy local volumes of.
const MIGRATABLE: &[&str] = &["dir", "btrfs", "zfspool", "lvmthin", "lvm"];

/// A parsed `targetstorage` (`PVE::JSONSchema::parse_idmap`): `1` keeps every storage, `STORAGE` maps every
/// one to it, `SRC:DST,...` maps some (with an optional default).
#[derive(Debug, Default, Clone)]
struct StorageMap {
    entries: BTreeMap<String, String>,
    default: Option<String>,
}

impl StorageMap {
    fn parse(text: Option<&str>) -> StorageMap {
        let mut map = StorageMap::default();
        for item in crate::formats::split_list(text.unwrap_or("")) {
            match item.split_once(':') {
                Some((src, dst)) => {
                    map.entries.insert(src.to_string(), dst.to_string());
                }
                None if item == "1" => {}
                None => map.default = Some(item.to_string()),
            }
        }
        map
    }

    fn target(&self, storage: &str) -> String {
        self.entries
            .get(storage)
            .or(self.default.as_ref())
            .cloned()
            .unwrap_or_else(|| storage.to_string())
    }
}

/// The local (non-shared) volumes of a guest: `(config key, volid)`.
fn local_volumes(sim: &Sim, guest: &Vm, is_vm: bool) -> Vec<(String, String)> {
    let all: Vec<(String, String)> = if is_vm {
        crate::qemu::volumes(&guest.conf)
            .into_iter()
            .map(|v| (v.key, v.volid))
            .collect()
    } else {
        crate::lxc::volumes(&guest.conf)
    };
    all.into_iter()
        .filter(|(_, volid)| {
            crate::formats::parse_volume_id(volid)
                .and_then(|(s, _)| sim.storage(s))
                .is_some_and(|s| !s.shared)
        })
        .collect()
}

/// The volume's name on another storage: kept between storages of one family (file or block), else renamed
/// to the other family's layout.
fn renamed(sim: &Sim, volid: &str, dst: &str, vmid: u32) -> String {
    let Some((src, name)) = crate::formats::parse_volume_id(volid) else {
        return volid.to_string();
    };
    let from_file = sim.storage(src).is_some_and(|s| s.file_based());
    let to_file = sim.storage(dst).is_some_and(|s| s.file_based());
    let base = name.rsplit('/').next().unwrap_or(name);
    let stem = base.rsplit_once('.').map_or(base, |(s, _)| s);
    match (from_file, to_file) {
        (true, false) => format!("{dst}:{stem}"),
        (false, true) => format!("{dst}:{vmid}/{base}.raw"),
        _ => format!("{dst}:{name}"),
    }
}

/// Moves a guest's config to `target` and its local volumes with it (mapped by `map`); the guest's run state is
/// left to the caller. Fails, changing nothing, when a target storage is not on the target node.
fn move_to(
    sim: &Sim,
    st: &mut State,
    vmid: u32,
    is_vm: bool,
    target: &str,
    map: &StorageMap,
    log: &mut TaskLog,
) -> Result<(), String> {
    let guest = if is_vm {
        st.vms.get(&vmid)
    } else {
        st.lxc.get(&vmid)
    };
    let Some(guest) = guest else {
        return Err(format!("guest {vmid} does not exist"));
    };
    let source = guest.node.clone();
    let mut moves = Vec::new();
    for (key, volid) in local_volumes(sim, guest, is_vm) {
        let Some((storage, _)) = crate::formats::parse_volume_id(&volid) else {
            continue;
        };
        let dst = map.target(storage);
        let Some(dst_cfg) = crate::storage::storage_for(sim, target, &dst) else {
            return Err(format!(
                "storage '{dst}' is not available on node '{target}'"
            ));
        };
        let new_volid = renamed(sim, &volid, &dst, vmid);
        moves.push((key, volid, new_volid, dst_cfg.clone()));
    }
    for (key, volid, new_volid, dst_cfg) in moves {
        log.line(format!("found local disk '{volid}' ({key})"));
        let Some(src_cfg) = crate::formats::parse_volume_id(&volid)
            .and_then(|(s, _)| sim.storage(s))
            .cloned()
        else {
            continue;
        };
        if let Some(mut vol) = st.volumes.remove(&volume_key(&src_cfg, &source, &volid)) {
            vol.volid = new_volid.clone();
            vol.storage = dst_cfg.name.clone();
            vol.node = if dst_cfg.shared {
                "*".into()
            } else {
                target.to_string()
            };
            st.volumes
                .insert(volume_key(&dst_cfg, target, &new_volid), vol);
        }
        if new_volid != volid {
            let guest = if is_vm {
                st.vms.get_mut(&vmid)
            } else {
                st.lxc.get_mut(&vmid)
            };
            if let Some(g) = guest {
                for v in g.conf.values_mut() {
                    if v == &volid || v.starts_with(&format!("{volid},")) {
                        *v = v.replacen(&volid, &new_volid, 1);
                    }
                }
            }
        }
    }
    let guest = if is_vm {
        st.vms.get_mut(&vmid)
    } else {
        st.lxc.get_mut(&vmid)
    };
    if let Some(g) = guest {
        g.node = target.to_string();
    }
    Ok(())
}

/// The HA LRM's migration of a service (`migrate`: online for a running VM; `relocate`: stop, move, start
/// again later). A running VM with local disks cannot move online (the LRM does not pass `with-local-disks`).
pub(crate) fn move_guest(
    sim: &Sim,
    st: &mut State,
    sid: &str,
    target: &str,
    relocate: bool,
) -> Result<(), String> {
    let (t, n) = sid.split_once(':').unwrap_or(("", ""));
    let vmid: u32 = n.parse().unwrap_or(0);
    let is_vm = t == "vm";
    let Some(guest) = crate::ha::guest_of(st, sid) else {
        return Err(format!("no guest for '{sid}'"));
    };
    if st.offline_nodes.contains(target) {
        return Err("Can't connect to destination address using public key".into());
    }
    let running = guest.running;
    if is_vm && running && !relocate {
        check_vm_task(sim, st, guest, target, true, false)?;
    }
    if relocate || !is_vm {
        if is_vm {
            crate::qemu::ha_stop(sim, st, vmid);
        } else {
            crate::lxc::ha_stop(sim, st, vmid);
        }
    }
    move_to(
        sim,
        st,
        vmid,
        is_vm,
        target,
        &StorageMap::default(),
        &mut TaskLog::default(),
    )
}

/// `check_local_resources`: the keys that tie a VM to its node, the mapped ones (`key -> mapping`), and per
/// node the mapped devices it lacks.
#[allow(clippy::type_complexity)]
fn local_resources(
    sim: &Sim,
    st: &State,
    conf: &BTreeMap<String, String>,
    running: bool,
) -> (
    Vec<String>,
    BTreeMap<String, String>,
    BTreeMap<String, Vec<String>>,
) {
    let mut local = Vec::new();
    let mut mapped = BTreeMap::new();
    let mut missing: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if conf.contains_key("ivshmem") {
        local.push("ivshmem".to_string());
    }
    for (k, v) in conf {
        let family = crate::schema::split_indexed(k).map(|(f, _)| f);
        if family == Some("hostpci") {
            let name = crate::schema::parse_named("pve-qm-hostpci", v, k)
                .and_then(|m| m.get("mapping").cloned());
            if let Some(name) = name {
                for node in &sim.nodes {
                    let has = st
                        .mappings
                        .pci
                        .get(&name)
                        .is_some_and(|m| !m.on_node(node).is_empty());
                    if !has {
                        missing.entry(node.clone()).or_default().push(k.clone());
                    }
                }
                mapped.insert(k.clone(), name);
                if !running {
                    continue;
                }
            }
        }
        if family == Some("usb") && v.split(',').any(|p| p.eq_ignore_ascii_case("host=spice")) {
            continue;
        }
        // A mapped USB device is mapped on the nodes that have an entry for it, and still local.
        if family == Some("usb")
            && let Some(name) = v.split(',').find_map(|p| p.strip_prefix("mapping="))
        {
            for node in &sim.nodes {
                let has = st
                    .mappings
                    .usb
                    .get(name)
                    .is_some_and(|m| !m.on_node(node).is_empty());
                if !has {
                    missing.entry(node.clone()).or_default().push(k.clone());
                }
            }
            mapped.insert(k.clone(), name.to_string());
        }
        if family == Some("serial") && v == "socket" {
            continue;
        }
        if matches!(
            family,
            Some("usb" | "hostpci" | "serial" | "parallel" | "virtiofs")
        ) {
            local.push(k.clone());
        }
    }
    (local, mapped, missing)
}

/// The checks `QemuMigrate::prepare` and `scan_local_volumes` make in the task: local devices, mapped devices
/// on the target, local CD-ROM images, attached local disks of a running VM without `with-local-disks`, storage
/// types that cannot be copied.
fn check_vm_task(
    sim: &Sim,
    st: &State,
    vm: &Vm,
    target: &str,
    running: bool,
    with_local_disks: bool,
) -> Result<Vec<String>, String> {
    let mut log = Vec::new();
    let (local, mapped, missing) = local_resources(sim, st, &vm.conf, running);
    let blocking: Vec<&str> = local
        .iter()
        .filter(|k| !mapped.contains_key(*k))
        .map(String::as_str)
        .collect();
    if !blocking.is_empty() {
        return Err(format!(
            "can't migrate VM which uses local devices: {}",
            blocking.join(", ")
        ));
    }
    if !mapped.is_empty() {
        if let Some(m) = missing.get(target).filter(|m| !m.is_empty()) {
            return Err(format!(
                "can't migrate to '{target}': missing mapped devices {}",
                m.join(", ")
            ));
        }
        if running {
            let names: Vec<String> = mapped.iter().map(|(k, n)| format!("{k}:{n}")).collect();
            return Err(format!(
                "can't live migrate running VM which uses following mapped devices: {}",
                names.join(", ")
            ));
        }
    }
    let mut errors = Vec::new();
    for v in crate::qemu::volumes(&vm.conf) {
        let Some(s) = crate::formats::parse_volume_id(&v.volid).and_then(|(s, _)| sim.storage(s))
        else {
            continue;
        };
        if s.shared {
            continue;
        }
        if v.cdrom && !v.cloudinit {
            errors.push((v.volid.clone(), "local cdrom image".to_string()));
            continue;
        }
        if running && !v.unused && !with_local_disks {
            errors.push((
                v.volid.clone(),
                "can't live migrate attached local disks without with-local-disks option"
                    .to_string(),
            ));
        }
        log.push(format!(
            "found local disk '{}' ({})",
            v.volid,
            if v.unused { "unused" } else { "attached" }
        ));
        if !MIGRATABLE.contains(&s.kind.as_str()) {
            return Err(format!(
                "can't migrate '{}' - storage type '{}' not supported",
                v.volid, s.kind
            ));
        }
    }
    if !errors.is_empty() {
        for (volid, e) in &errors {
            log.push(format!("can't migrate local disk '{volid}': {e}"));
        }
        return Err(format!("{}\ncan't migrate VM - check log", log.join("\n")));
    }
    Ok(log)
}

/// `PVE::QemuServer::check_storage_availability`: every volume's storage is also on the target node.
fn check_storage_availability(sim: &Sim, vm: &Vm, target: &str) -> Result<(), ApiError> {
    for v in crate::qemu::volumes(&vm.conf) {
        let Some((storage, _)) = crate::formats::parse_volume_id(&v.volid) else {
            continue;
        };
        let Some(s) = sim.storage(storage) else {
            return Err(ApiError::die(format!("storage '{storage}' does not exist")));
        };
        if !s.on_node(target) {
            return Err(ApiError::die(format!(
                "storage '{storage}' is not available on node '{target}'"
            )));
        }
    }
    Ok(())
}

/// The request checks both migrate endpoints make before forking: the target is another cluster node.
fn check_target(sim: &Sim, req: &Req) -> Result<String, ApiError> {
    let target = req.get("target").unwrap_or("").to_string();
    if target == req.node() {
        return Err(ApiError::param("target", "target is local node."));
    }
    if !sim.has_node(&target) {
        return Err(ApiError::die(format!("no such cluster node '{target}'")));
    }
    for key in ["force", "migration_type", "migration_network"] {
        if req.get(key).is_some_and(|v| v != "0") && req.user != "root@pam" {
            return Err(ApiError::param(key, "Only root may use this option."));
        }
    }
    Ok(target)
}

/// The `hamigrate` task of an HA-managed guest: it queues the CRM's migrate command and ends.
fn ha_migrate(sim: &Arc<Sim>, st: &mut State, req: &Req, sid: String, target: String) -> String {
    let what = if sid.starts_with("vm:") { "VM" } else { "CT" };
    let vmid = req.vmid();
    let upid = sim.start_task(
        st,
        req.node(),
        "hamigrate",
        &vmid.to_string(),
        &req.user,
        crate::sim::injected_failure(req, Some(vmid)),
        &[],
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                return Err(m);
            }
            log.line(format!(
                "Requesting HA migration for {what} {vmid} to node {target}"
            ));
            crate::ha::resources::queue(st, &sid, format!("migrate {target}"));
            Ok(())
        }),
    );
    st.touch();
    upid
}

/// `POST /nodes/{node}/qemu/{vmid}/migrate`.
pub(crate) fn qemu_migrate(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let target = check_target(sim, req)?;
    let node = req.node().to_string();
    let vmid = req.vmid();
    let mut st = sim.write();
    let vm = st
        .vms
        .get(&vmid)
        .filter(|vm| vm.node == node)
        .ok_or_else(|| no_such_vm(&node, vmid))?;
    if let Some(l) = vm.lock() {
        return Err(ApiError::die(format!("VM is locked ({l})")));
    }
    let running = vm.running;
    if running && !req.flag("online") {
        return Err(ApiError::die("can't migrate running VM without --online"));
    }
    let map = StorageMap::parse(req.get("targetstorage"));
    if req.get("targetstorage").is_some() {
        for dst in map.entries.values().chain(map.default.iter()) {
            if crate::storage::storage_for(sim, &target, dst).is_none() {
                return Err(ApiError::die(format!(
                    "storage '{dst}' is not available on node '{target}'"
                )));
            }
        }
    } else {
        check_storage_availability(sim, vm, &target)?;
    }
    if crate::ha::vm_is_ha_managed(&st, vmid) {
        let upid = ha_migrate(sim, &mut st, req, format!("vm:{vmid}"), target);
        return Ok(Reply::data(json!(upid)));
    }
    let with_local_disks = req.flag("with-local-disks");
    let sim2 = Arc::clone(sim);
    let upid = sim.guest_task(
        &mut st,
        req,
        "qmigrate",
        sim.flock_exclusive(vmid),
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                return Err(m);
            }
            log.line(format!(
                "starting migration of VM {vmid} to node '{target}' ({})",
                node_ip(&sim2, &target)
            ));
            let result = (|| {
                if st.offline_nodes.contains(&target) {
                    return Err("Can't connect to destination address using public key".into());
                }
                let Some(vm) = st.vms.get(&vmid) else {
                    return Err(format!(
                        "Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist"
                    ));
                };
                let running = vm.running;
                let lines = check_vm_task(&sim2, st, vm, &target, running, with_local_disks)?;
                let _ = lines;
                move_to(&sim2, st, vmid, true, &target, &map, log)
            })();
            match result {
                Ok(()) => {
                    log.line("migration finished successfully (duration 00:00:01)");
                    Ok(())
                }
                Err(e) => {
                    let (lines, reason) = match e.rsplit_once('\n') {
                        Some((lines, reason)) => (Some(lines.to_string()), reason.to_string()),
                        None => (None, e),
                    };
                    if let Some(lines) = lines {
                        for l in lines.lines() {
                            log.line(l);
                        }
                    }
                    log.line(format!(
                        "ERROR: migration aborted (duration 00:00:00): {reason}"
                    ));
                    Err("migration aborted".into())
                }
            }
        }),
    );
    st.touch();
    Ok(Reply::data(json!(upid)))
}

/// `POST /nodes/{node}/lxc/{vmid}/migrate`: a running container moves in restart mode only.
pub(crate) fn lxc_migrate(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let target = check_target(sim, req)?;
    let node = req.node().to_string();
    let vmid = req.vmid();
    let mut st = sim.write();
    let ct = st
        .lxc
        .get(&vmid)
        .filter(|ct| ct.node == node)
        .ok_or_else(|| {
            ApiError::die(format!(
                "Configuration file 'nodes/{node}/lxc/{vmid}.conf' does not exist"
            ))
        })?;
    if ct.running && !req.flag("online") && !req.flag("restart") {
        return Err(ApiError::die(
            "can't migrate running container without --online or --restart",
        ));
    }
    let map = StorageMap::parse(req.get("target-storage"));
    if crate::ha::vm_is_ha_managed(&st, vmid) {
        let upid = ha_migrate(sim, &mut st, req, format!("ct:{vmid}"), target);
        return Ok(Reply::data(json!(upid)));
    }
    let online = req.flag("online");
    let restart = req.flag("restart");
    let sim2 = Arc::clone(sim);
    let upid = sim.guest_task(
        &mut st,
        req,
        "vzmigrate",
        sim.flock_exclusive(vmid),
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                return Err(m);
            }
            log.line(format!(
                "starting migration of CT {vmid} to node '{target}' ({})",
                node_ip(&sim2, &target)
            ));
            let result = (|| {
                let Some(ct) = st.lxc.get(&vmid) else {
                    return Err(format!(
                        "Configuration file 'nodes/{node}/lxc/{vmid}.conf' does not exist"
                    ));
                };
                let running = ct.running;
                if running && online {
                    return Err("lxc live migration is currently not implemented".to_string());
                }
                if running && !restart {
                    return Err("running container can only be migrated in restart mode".into());
                }
                if st.offline_nodes.contains(&target) {
                    return Err("Can't connect to destination address using public key".into());
                }
                if running {
                    log.line(format!("shutdown CT {vmid}"));
                    crate::lxc::ha_stop(&sim2, st, vmid);
                }
                move_to(&sim2, st, vmid, false, &target, &map, log)?;
                if running {
                    log.line("start container on target node");
                    crate::lxc::ha_start(&sim2, st, vmid)?;
                }
                Ok(())
            })();
            match result {
                Ok(()) => {
                    log.line("migration finished successfully (duration 00:00:01)");
                    Ok(())
                }
                Err(reason) => {
                    log.line(format!(
                        "ERROR: migration aborted (duration 00:00:00): {reason}"
                    ));
                    Err("migration aborted".into())
                }
            }
        }),
    );
    st.touch();
    Ok(Reply::data(json!(upid)))
}

/// The address `/cluster/status` gives a node (192.0.2.0/24, the documentation range).
fn node_ip(sim: &Sim, node: &str) -> String {
    let i = sim.nodes.iter().position(|n| n == node).unwrap_or(0);
    format!("192.0.2.{}", (i % 254) + 1)
}

/// `GET /nodes/{node}/qemu/{vmid}/migrate`: running, the nodes the VM may go to and why others are not allowed
/// (storages restricted to other nodes, missing mapped devices, HA resources in negative affinity), the local
/// disks and the local resources.
pub(crate) fn qemu_precondition(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let node = req.node().to_string();
    let vmid = req.vmid();
    let st = sim.read();
    let vm = st
        .vms
        .get(&vmid)
        .filter(|vm| vm.node == node)
        .ok_or_else(|| no_such_vm(&node, vmid))?;
    if let Some(l) = vm.lock() {
        return Err(ApiError::die(format!("VM is locked ({l})")));
    }
    let running = vm.running;
    let (local, mapped, missing) = local_resources(sim, &st, &vm.conf, running);
    let volumes = crate::qemu::volumes(&vm.conf);
    let mut blocking: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut out = json!({});
    if crate::ha::vm_is_ha_managed(&st, vmid) {
        let sid = format!("vm:{vmid}");
        let (together, by_node) = crate::ha::resources::motion_info(&sim.nodes, &st, &sid);
        blocking = by_node;
        out["dependent-ha-resources"] = json!(together);
    }
    let mut allowed = Vec::new();
    let mut not_allowed = serde_json::Map::new();
    for n in sim.nodes.iter().filter(|n| **n != node) {
        let mut why = serde_json::Map::new();
        let mut unavailable: Vec<String> = volumes
            .iter()
            .filter_map(|v| crate::formats::parse_volume_id(&v.volid).map(|(s, _)| s))
            .filter_map(|s| sim.storage(s))
            .filter(|s| s.nodes.is_some() && !s.on_node(n))
            .map(|s| s.name.clone())
            .collect();
        unavailable.sort();
        unavailable.dedup();
        if !unavailable.is_empty() {
            why.insert("unavailable_storages".into(), json!(unavailable));
        }
        if let Some(m) = missing.get(n).filter(|m| !m.is_empty()) {
            why.insert("unavailable-resources".into(), json!(m));
        }
        if let Some(b) = blocking.get(n) {
            why.insert(
                "blocking-ha-resources".into(),
                json!(
                    b.iter()
                        .map(|s| json!({"sid": s, "cause": "resource-affinity"}))
                        .collect::<Vec<_>>()
                ),
            );
        }
        if why.is_empty() {
            allowed.push(n.clone());
        } else {
            not_allowed.insert(n.clone(), Value::Object(why));
        }
    }
    let mut disks = Vec::new();
    for v in &volumes {
        let Some(s) = crate::formats::parse_volume_id(&v.volid).and_then(|(s, _)| sim.storage(s))
        else {
            continue;
        };
        if s.shared {
            continue;
        }
        // PVE reports `size` only when the drive carries one; the simulator falls back to the volume's size
        // so that every entry has the field the schema requires.
        let size = v
            .size
            .or_else(|| crate::storage::find_volume(sim, &st, &node, &v.volid).map(|vol| vol.size));
        let mut d = json!({
            "volid": v.volid, "cdrom": u8::from(v.cdrom), "is_unused": u8::from(v.unused),
            "is_attached": u8::from(!v.unused), "is_cloudinit": u8::from(v.cloudinit),
            "is_tpmstate": u8::from(v.key == "tpmstate0"), "is_vmstate": 0, "replicate": 1,
            "shared": 0, "size": size.unwrap_or(0),
        });
        if !v.unused {
            d["drivename"] = json!(v.key);
        }
        disks.push(d);
    }
    out["running"] = json!(u8::from(running));
    out["allowed_nodes"] = json!(allowed);
    out["not_allowed_nodes"] = Value::Object(not_allowed);
    out["local_disks"] = json!(disks);
    out["local_resources"] = json!(local);
    out["mapped-resources"] = json!(mapped.keys().collect::<Vec<_>>());
    out["mapped-resource-info"] = json!(
        mapped
            .iter()
            .map(|(k, n)| (k.clone(), json!({"name": n})))
            .collect::<serde_json::Map<String, Value>>()
    );
    out["has-dbus-vmstate"] = json!(1);
    Ok(Reply::data(out))
}
