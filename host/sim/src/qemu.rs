//! QEMU guests: create, config (GET/POST/PUT, pending), clone, template, power, resize and destroy, with PVE's locks and tasks.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::api::{ApiError, ApiResult, Reply, no_such_vm};
use crate::formats::{
    format_size, normalize_tags, parse_size, parse_volume_id, print_property_string,
};
use crate::schema::{find_property, parameters, parse_property_string, returns, split_indexed};
use crate::server::Req;
use crate::sim::{Sim, TaskLog};
use crate::state::{State, Vm, now};
use crate::storage::{
    alloc_cloudinit, alloc_disk, find_volume, free_volume, injected_failure, rename_volume,
    storage_for, volume_owner,
};

const CONFIG_PATH: &str = "/nodes/{node}/qemu/{vmid}/config";

/// PVE's `assert_if_modified` / update_vm text for a stale `digest`.
const CHECKSUM_MISMATCH: &str = "checksum mismatch (file change by other user?)";

/// Keys PVE applies at once even on a running VM (QemuServer.pm fast-plug list plus cloud-init keys).
const FAST_PLUG: &[&str] = &[
    "description",
    "hookscript",
    "lock",
    "migrate_downtime",
    "migrate_speed",
    "name",
    "onboot",
    "protection",
    "shares",
    "startup",
    "tags",
    "vmstatestorage",
    "ciuser",
    "cipassword",
    "citype",
    "ciupgrade",
    "cicustom",
    "searchdomain",
    "nameserver",
    "sshkeys",
];

/// Create parameters that are not config keys.
const CREATE_ONLY: &[&str] = &[
    "vmid",
    "node",
    "start",
    "storage",
    "pool",
    "archive",
    "force",
    "unique",
    "live-restore",
    "bwlimit",
    "ha-managed",
    "import-working-storage",
];

/// Config-update parameters that are not config keys.
const UPDATE_ONLY: &[&str] = &[
    "vmid",
    "node",
    "delete",
    "revert",
    "force",
    "digest",
    "skiplock",
    "background_delay",
    "import-working-storage",
];

fn is_fast_plug(key: &str) -> bool {
    FAST_PLUG.contains(&key) || split_indexed(key).is_some_and(|(f, _)| f == "ipconfig")
}

/// Disk keys (`ideN`, `sataN`, `scsiN`, `virtioN`, `efidisk0`, `tpmstate0`).
pub(crate) fn is_drive_key(key: &str) -> bool {
    if key == "efidisk0" || key == "tpmstate0" {
        return true;
    }
    matches!(split_indexed(key), Some((f, n)) if matches!(f, "ide" | "sata" | "scsi" | "virtio")
        && crate::schema::index_max(f).is_some_and(|m| n <= m))
}

fn is_unused_key(key: &str) -> bool {
    matches!(split_indexed(key), Some(("unused", n)) if n <= 255)
}

fn drive_format(key: &str) -> Option<&'static Map<String, Value>> {
    let props = parameters("POST", CONFIG_PATH)?;
    find_property(props, key)?.get("format")?.as_object()
}

/// Parses a drive string with the bus's format.
pub(crate) fn parse_drive(key: &str, value: &str) -> Option<BTreeMap<String, String>> {
    parse_property_string(drive_format(key)?, value, key).ok()
}

fn print_drive(map: &BTreeMap<String, String>) -> String {
    print_property_string(Some("file"), map)
}

fn is_cdrom(map: &BTreeMap<String, String>) -> bool {
    map.get("media").is_some_and(|m| m == "cdrom")
}

fn is_cloudinit_file(file: &str) -> bool {
    file.contains("-cloudinit")
}

/// How a drive value asks for its volume.
enum DriveSpec {
    Alloc { storage: String, bytes: u64 },
    Import { storage: String, source: String },
    CloudInit { storage: String },
    Existing,
}

fn classify(map: &BTreeMap<String, String>) -> DriveSpec {
    let file = map.get("file").map(String::as_str).unwrap_or("");
    if let Some((storage, rest)) = file.split_once(':') {
        if rest == "cloudinit" && !storage.contains('/') {
            return DriveSpec::CloudInit {
                storage: storage.to_string(),
            };
        }
        let numeric = !rest.is_empty()
            && rest.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            && rest.matches('.').count() <= 1
            && !rest.starts_with('.')
            && !rest.ends_with('.');
        if numeric && !storage.contains('/') {
            if let Some(src) = map.get("import-from") {
                return DriveSpec::Import {
                    storage: storage.to_string(),
                    source: src.clone(),
                };
            }
            let gib: f64 = rest.parse().unwrap_or(0.0);
            return DriveSpec::Alloc {
                storage: storage.to_string(),
                bytes: (gib * 1024.0 * 1024.0 * 1024.0) as u64,
            };
        }
    }
    DriveSpec::Existing
}

/// PVE's `check_drive_param` and `check_storage_access`, run before the task forks.
fn check_drive(sim: &Sim, node: &str, key: &str, value: &str) -> Result<(), ApiError> {
    let Some(map) = parse_drive(key, value) else {
        return Err(ApiError::param(key, "unable to parse drive options"));
    };
    if key.starts_with("virtio") && is_cdrom(&map) {
        return Err(ApiError::param(key, "unable to parse drive options"));
    }
    let file = map.get("file").cloned().unwrap_or_default();
    match classify(&map) {
        DriveSpec::Alloc { storage, .. } => {
            if map.contains_key("import-from") {
                return Err(ApiError::param(
                    key,
                    "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>",
                ));
            }
            let s = storage_for(sim, node, &storage)
                .ok_or_else(|| ApiError::die(format!("storage '{storage}' does not exist")))?;
            if !s.has_content("images") {
                return Err(ApiError::param(
                    "storage",
                    format!("storage '{storage}' does not support vm images"),
                ));
            }
        }
        DriveSpec::Import { storage, source } => {
            let rest = file.split_once(':').map(|(_, r)| r).unwrap_or("");
            if rest.parse::<f64>().unwrap_or(1.0) != 0.0 {
                return Err(ApiError::param(
                    key,
                    "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>",
                ));
            }
            let s = storage_for(sim, node, &storage)
                .ok_or_else(|| ApiError::die(format!("storage '{storage}' does not exist")))?;
            if !s.has_content("images") {
                return Err(ApiError::param(
                    "storage",
                    format!("storage '{storage}' does not support vm images"),
                ));
            }
            if let Some((src_storage, volname)) = parse_volume_id(&source) {
                let ss = storage_for(sim, node, src_storage).ok_or_else(|| {
                    ApiError::die(format!("storage '{src_storage}' does not exist"))
                })?;
                if volname.starts_with("import/") && !ss.has_content("import") {
                    return Err(ApiError::die(format!(
                        "storage '{src_storage}' is not configured for content-type 'import'"
                    )));
                }
            }
        }
        DriveSpec::CloudInit { storage } => {
            storage_for(sim, node, &storage)
                .ok_or_else(|| ApiError::die(format!("storage '{storage}' does not exist")))?;
        }
        DriveSpec::Existing => {
            if let Some((storage, volname)) = parse_volume_id(&file) {
                storage_for(sim, node, storage)
                    .ok_or_else(|| ApiError::die(format!("storage '{storage}' does not exist")))?;
                if volname.starts_with("iso/") && !is_cdrom(&map) {
                    return Err(ApiError::param(
                        key,
                        "explicit 'media=cdrom' is required for iso images",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Allocates or imports the volume a drive value asks for and returns the value PVE writes to the config.
fn create_disk(
    sim: &Sim,
    st: &mut State,
    node: &str,
    vmid: u32,
    key: &str,
    value: &str,
    log: &mut TaskLog,
) -> Result<String, String> {
    let mut map = parse_drive(key, value)
        .ok_or_else(|| format!("unable to parse drive options for '{key}'"))?;
    match classify(&map) {
        DriveSpec::Alloc { storage, bytes } => {
            let fmt = map.get("format").cloned();
            let s = storage_for(sim, node, &storage)
                .ok_or_else(|| format!("storage '{storage}' does not exist"))?;
            let bytes = match key {
                "efidisk0" => {
                    if s.file_based() {
                        if map.get("efitype").is_some_and(|t| t == "4m") {
                            540672
                        } else {
                            131072
                        }
                    } else {
                        4 * 1024 * 1024
                    }
                }
                "tpmstate0" => 4 * 1024 * 1024,
                _ => bytes,
            };
            let volid = alloc_disk(sim, st, node, &storage, vmid, bytes, fmt.as_deref(), None)?;
            map.insert("file".into(), volid);
            map.remove("format");
            map.remove("import-from");
            map.insert("size".into(), format_size(bytes));
            // PVE >= 9.1 records which Microsoft certificates it enrolled (OVMF.pm).
            if key == "efidisk0"
                && map.get("pre-enrolled-keys").is_some_and(|v| v == "1")
                && map.get("efitype").is_some_and(|t| t == "4m")
                && !map.contains_key("ms-cert")
            {
                map.insert("ms-cert".into(), "2023k".into());
            }
            let printed = print_drive(&map);
            log.line(format!("{key}: successfully created disk '{printed}'"));
            Ok(printed)
        }
        DriveSpec::Import { storage, source } => {
            let size = match find_volume(sim, st, node, &source) {
                Some(v) => v.virtual_size.unwrap_or(v.size),
                None => return Err(format!("volume '{source}' does not exist")),
            };
            let volid = alloc_disk(
                sim,
                st,
                node,
                &storage,
                vmid,
                size,
                map.get("format").map(String::as_str),
                None,
            )?;
            log.line(format!("importing disk '{source}' to VM {vmid} ..."));
            map.insert("file".into(), volid);
            map.remove("format");
            map.remove("import-from");
            map.insert("size".into(), format_size(size));
            let printed = print_drive(&map);
            log.line(format!("{key}: successfully created disk '{printed}'"));
            Ok(printed)
        }
        DriveSpec::CloudInit { storage } => {
            let volid = alloc_cloudinit(sim, st, node, &storage, vmid)?;
            map.insert("file".into(), volid);
            map.insert("media".into(), "cdrom".into());
            map.remove("size");
            map.remove("format");
            let printed = print_drive(&map);
            log.line(format!("{key}: successfully created disk '{printed}'"));
            Ok(printed)
        }
        DriveSpec::Existing => {
            if !is_cdrom(&map) {
                let file = map.get("file").cloned().unwrap_or_default();
                if parse_volume_id(&file).is_some() {
                    match find_volume(sim, st, node, &file) {
                        Some(v) => {
                            map.insert("size".into(), format_size(v.size));
                        }
                        None => return Err(format!("volume '{file}' does not exist")),
                    }
                }
            }
            Ok(print_drive(&map))
        }
    }
}

fn hash_password(st: &mut State, value: &str) -> String {
    if ["$1$", "$5$", "$6$", "$2a$", "$2y$"]
        .iter()
        .any(|p| value.starts_with(p))
    {
        return value.to_string();
    }
    use sha2::Digest;
    let salt = st.random_uuid().replace('-', "");
    let salt = &salt[..16];
    let digest = sha2::Sha256::digest(format!("{salt}{value}").as_bytes());
    format!("${}${salt}${}", 5, hex::encode(digest))
}

/// Normalises a value the way PVE does on write (net MAC generation, tags, vmgenid, drive re-printing, cipassword hashing).
fn prepare_value(st: &mut State, key: &str, value: &str, ostype: Option<&str>) -> String {
    if split_indexed(key).is_some_and(|(f, _)| f == "net") {
        let Some(fmt) = find_property(parameters("POST", CONFIG_PATH).expect("schema"), key)
            .and_then(|s| s.get("format"))
            .and_then(Value::as_object)
        else {
            return value.to_string();
        };
        let Ok(mut map) = parse_property_string(fmt, value, key) else {
            return value.to_string();
        };
        let model = map.remove("model").unwrap_or_else(|| "virtio".into());
        let mac = match map.remove("macaddr") {
            Some(m) => m.to_uppercase(),
            None => st.random_mac(),
        };
        let rest = print_property_string(None, &map);
        return if rest.is_empty() {
            format!("{model}={mac}")
        } else {
            format!("{model}={mac},{rest}")
        };
    }
    if is_drive_key(key) {
        return match parse_drive(key, value) {
            Some(map) => print_drive(&map),
            None => value.to_string(),
        };
    }
    match key {
        "tags" => normalize_tags(value),
        "vmgenid" if value == "1" => st.random_uuid(),
        "cipassword" => {
            if ostype.is_some_and(|o| o.starts_with('w')) {
                value.to_string()
            } else {
                hash_password(st, value)
            }
        }
        _ => value.to_string(),
    }
}

/// Checks that every `boot: order=` device exists in `conf`.
fn check_boot(conf: &BTreeMap<String, String>) -> Result<(), ApiError> {
    let Some(boot) = conf.get("boot") else {
        return Ok(());
    };
    if let Some(order) = boot.split(',').find_map(|p| p.strip_prefix("order=")) {
        for dev in order.split(';').filter(|d| !d.is_empty()) {
            if !conf.contains_key(dev) {
                return Err(ApiError::param(
                    "boot",
                    format!("invalid bootorder: device '{dev}' does not exist'"),
                ));
            }
        }
    }
    Ok(())
}

/// PVE's `check_hostpci_perm`: only the literal `root@pam` may pass a raw host device (`host=`) or a `romfile`;
/// anyone else needs a `mapping` (an API token's auth id is `user@realm!id`, never `root@pam`).
fn check_hostpci(user: &str, key: &str, value: &str) -> Result<(), ApiError> {
    if split_indexed(key).is_none_or(|(f, _)| f != "hostpci") || user == "root@pam" {
        return Ok(());
    }
    let Some(device) = crate::formats::parse_named("pve-qm-hostpci", value, key) else {
        return Ok(());
    };
    if device.contains_key("host") {
        return Err(ApiError::die(format!(
            "only root can set '{key}' config for non-mapped devices"
        )));
    }
    if !device.contains_key("mapping") {
        return Err(ApiError::die("either 'host' or 'mapping' must be set."));
    }
    if device.contains_key("romfile") {
        return Err(ApiError::param(
            key,
            "only root@pam can set 'romfile' option",
        ));
    }
    Ok(())
}

/// PVE's default boot order: first disk, first cdrom (cloud-init included), first NIC.
fn default_boot(conf: &BTreeMap<String, String>) -> Option<String> {
    let mut order: Vec<String> = Vec::new();
    let mut buses = Vec::new();
    for (family, max) in [("ide", 3), ("scsi", 30), ("virtio", 15), ("sata", 5)] {
        for i in 0..=max {
            buses.push(format!("{family}{i}"));
        }
    }
    for want_cdrom in [false, true] {
        for k in &buses {
            if let Some(v) = conf.get(k) {
                let cd = v.contains("media=cdrom") || v == "none" || v.starts_with("cdrom");
                if cd == want_cdrom {
                    order.push(k.clone());
                    break;
                }
            }
        }
    }
    if let Some(net) = conf
        .keys()
        .find(|k| split_indexed(k).is_some_and(|(f, _)| f == "net"))
    {
        order.push(net.clone());
    }
    if order.is_empty() {
        None
    } else {
        Some(format!("order={}", order.join(";")))
    }
}

fn get_vm<'a>(st: &'a State, node: &str, vmid: u32) -> Result<&'a Vm, ApiError> {
    st.vms
        .get(&vmid)
        .filter(|vm| vm.node == node)
        .ok_or_else(|| no_such_vm(node, vmid))
}

fn check_skiplock(req: &Req) -> Result<(), ApiError> {
    if req.flag("skiplock") && req.user != "root@pam" {
        return Err(ApiError::param(
            "skiplock",
            "Only root may use this option.",
        ));
    }
    Ok(())
}

/// `die "checksum mismatch ..."` when a `digest` was sent and the config changed since.
fn check_digest(vm: &Vm, digest: Option<&str>) -> Result<(), String> {
    match digest {
        Some(d) if d != vm.digest() => Err(CHECKSUM_MISMATCH.to_string()),
        _ => Ok(()),
    }
}

/// PVE's text for a guest whose config file is gone.
fn no_such_vm_text(node: &str, vmid: u32) -> String {
    format!("Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist")
}

fn check_lock(vm: &Vm, skiplock: bool) -> Result<(), String> {
    match vm.lock() {
        Some(l) if !skiplock => Err(format!("VM is locked ({l})")),
        _ => Ok(()),
    }
}

/// Converts config values to the JSON types PVE's GET config returns (integers and booleans as numbers).
fn typed_config(conf: &BTreeMap<String, String>) -> Map<String, Value> {
    let props = returns("GET", CONFIG_PATH)
        .and_then(|r| r.get("properties"))
        .and_then(Value::as_object);
    let mut out = Map::new();
    for (k, v) in conf {
        let ty = props
            .and_then(|p| find_property(p, k))
            .and_then(|s| s.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("string");
        let value = match ty {
            "integer" | "boolean" => v
                .parse::<i64>()
                .map(Value::from)
                .unwrap_or_else(|_| json!(v)),
            _ => json!(v),
        };
        out.insert(k.clone(), value);
    }
    out
}

fn masked(conf: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut c = conf.clone();
    if c.contains_key("cipassword") {
        c.insert("cipassword".into(), "**********".into());
    }
    c
}

pub(crate) fn get_config(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let vm = get_vm(&st, req.node(), req.vmid())?;
    if let Some(snap) = req.get("snapshot") {
        return Err(ApiError::die(format!("snapshot '{snap}' does not exist")));
    }
    let conf = if req.flag("current") {
        vm.conf.clone()
    } else {
        vm.merged()
    };
    let mut out = typed_config(&masked(&conf));
    out.insert("digest".into(), json!(vm.digest()));
    Ok(Reply::data(Value::Object(out)))
}

/// One row of GET /pending, as PVE prints it (fields absent rather than null).
#[derive(serde::Serialize)]
struct PendingRow<'a> {
    key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pending: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delete: Option<u8>,
}

pub(crate) fn pending(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let vm = get_vm(&st, req.node(), req.vmid())?;
    let mut keys: std::collections::BTreeSet<&str> = vm.conf.keys().map(String::as_str).collect();
    keys.extend(vm.pending.keys().map(String::as_str));
    keys.extend(vm.pending_delete.keys().map(String::as_str));
    // PVE lists every top-level key of the loaded config, `digest` included
    // (GuestHelpers::config_with_pending_array; `qm pending` skips it when printing).
    keys.insert("digest");
    let digest = vm.digest();
    // The schema types `value` and `pending` as strings: values are printed as the config
    // file holds them; the password only masked.
    let rows: Vec<PendingRow<'_>> = keys
        .into_iter()
        .map(|k| {
            let value = if k == "digest" {
                Some(digest.as_str())
            } else {
                vm.conf.get(k).map(String::as_str)
            };
            let pending = vm.pending.get(k).map(String::as_str);
            let (value, pending) = if k == "cipassword" {
                (value.map(|_| "**********"), pending.map(|_| "********** "))
            } else {
                (value, pending)
            };
            PendingRow {
                key: k,
                value,
                pending,
                delete: vm
                    .pending_delete
                    .get(k)
                    .map(|force| if *force { 2 } else { 1 }),
            }
        })
        .collect();
    let raw = serde_json::to_string(&rows).map_err(|e| ApiError::die(e.to_string()))?;
    Ok(Reply {
        data: Value::Null,
        total: None,
        raw: Some(raw),
    })
}

fn status_fields(vmid: u32, vm: &Vm, with_ha: bool) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("vmid".into(), json!(vmid));
    m.insert(
        "status".into(),
        json!(if vm.running { "running" } else { "stopped" }),
    );
    m.insert(
        "name".into(),
        json!(
            vm.conf
                .get("name")
                .cloned()
                .unwrap_or_else(|| format!("VM {vmid}"))
        ),
    );
    m.insert("cpus".into(), json!(vm.cpus()));
    m.insert("maxmem".into(), json!(vm.memory_mib() * 1024 * 1024));
    m.insert("maxdisk".into(), json!(crate::cluster::maxdisk(vm)));
    for k in ["disk", "cpu", "netin", "netout", "diskread", "diskwrite"] {
        m.insert(k.into(), json!(0));
    }
    m.insert(
        "mem".into(),
        json!(if vm.running {
            vm.memory_mib() * 1024 * 1024 / 4
        } else {
            0
        }),
    );
    m.insert(
        "uptime".into(),
        json!(if vm.running {
            now().saturating_sub(vm.started_at)
        } else {
            0
        }),
    );
    if vm.is_template() {
        m.insert("template".into(), json!(1));
    }
    if let Some(l) = vm.lock() {
        m.insert("lock".into(), json!(l));
    }
    if let Some(t) = vm.conf.get("tags") {
        m.insert("tags".into(), json!(t));
    }
    if vm.running {
        m.insert("pid".into(), json!(vm.pid));
        let qmp = if vm.paused { "paused" } else { "running" };
        m.insert("qmpstatus".into(), json!(qmp));
        if with_ha {
            m.insert("running-machine".into(), json!("pc-i440fx-9.2+pve1"));
            m.insert("running-qemu".into(), json!("9.2.0"));
        }
    } else if with_ha {
        m.insert("qmpstatus".into(), json!("stopped"));
    }
    if with_ha {
        m.insert("ha".into(), json!({"managed": 0}));
        let agent = vm
            .conf
            .get("agent")
            .and_then(|a| a.split(',').next())
            .is_some_and(|a| a == "1" || a == "enabled=1");
        if agent {
            m.insert("agent".into(), json!(1));
        }
    }
    m
}

pub(crate) fn status_current(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let vmid = req.vmid();
    let vm = get_vm(&st, req.node(), vmid)?;
    Ok(Reply::data(Value::Object(status_fields(vmid, vm, true))))
}

pub(crate) fn list(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let out: Vec<Value> = st
        .vms
        .iter()
        .filter(|(_, vm)| vm.node == req.node())
        .map(|(vmid, vm)| Value::Object(status_fields(*vmid, vm, false)))
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

pub(crate) fn index(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    get_vm(&st, req.node(), req.vmid())?;
    Ok(crate::server::index("/nodes/{node}/qemu/{vmid}", "subdir"))
}

pub(crate) fn status_index(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    get_vm(&st, req.node(), req.vmid())?;
    Ok(crate::server::index(
        "/nodes/{node}/qemu/{vmid}/status",
        "subdir",
    ))
}

/// Config keys among the request parameters.
fn config_params(req: &Req, skip: &[&str]) -> BTreeMap<String, String> {
    req.params
        .iter()
        .filter(|(k, _)| !skip.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn sshkeys_check(params: &BTreeMap<String, String>) -> Result<(), ApiError> {
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
    for (k, v) in &raw {
        if is_drive_key(k) {
            check_drive(sim, &node, k, v)?;
        }
        check_hostpci(&req.user, k, v)?;
    }
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
    st.vms.insert(
        vmid,
        Vm {
            node: node.clone(),
            conf: placeholder,
            pending: BTreeMap::new(),
            pending_delete: BTreeMap::new(),
            running: false,
            started_at: 0,
            pid: 0,
            paused: false,
        },
    );
    let start = req.flag("start");
    let sim2 = Arc::clone(sim);
    let node2 = node.clone();
    let upid = sim.start_task(
        &mut st,
        req.node(),
        "qmcreate",
        &vmid.to_string(),
        &req.user,
        injected_failure(req, Some(vmid)),
        &[sim.flock_short(vmid, false)],
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                st.vms.remove(&vmid);
                return Err(m);
            }
            let mut created: Vec<String> = Vec::new();
            let mut final_conf = conf.clone();
            for (k, v) in &conf {
                if !is_drive_key(k) {
                    continue;
                }
                match create_disk(&sim2, st, &node2, vmid, k, v, log) {
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
            if start {
                let checked = match st.vms.get(&vmid) {
                    Some(vm) => start_checks(&sim2, st, vm, vmid, false),
                    None => Ok(()),
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
        vm.conf.insert(key.to_string(), value.to_string());
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
fn apply_pending(sim: &Sim, st: &mut State, vmid: u32) {
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

fn hotpluggable(vm: &Vm, key: &str) -> bool {
    let features = vm
        .merged()
        .get("hotplug")
        .and_then(|h| crate::formats::hotplug_features(h))
        .unwrap_or_else(|| vec!["network".into(), "disk".into(), "usb".into()]);
    let has = |f: &str| features.iter().any(|x| x == f);
    if split_indexed(key).is_some_and(|(f, _)| f == "net") {
        return has("network");
    }
    if is_drive_key(key) && key != "efidisk0" && key != "tpmstate0" {
        return has("disk");
    }
    if split_indexed(key).is_some_and(|(f, _)| f == "usb") {
        return has("usb");
    }
    match key {
        "vcpus" => has("cpu"),
        "balloon" => true,
        _ => false,
    }
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
                create_disk(sim, st, &node, vmid, key, value, log)?
            }
        } else {
            value.clone()
        };
        let Some(vm) = st.vms.get_mut(&vmid) else {
            break;
        };
        if running && !is_fast_plug(key) && !hotpluggable(vm, key) {
            vm.pending.insert(key.clone(), value);
            vm.pending_delete.remove(key);
        } else {
            apply_set(sim, st, vmid, key, &value);
        }
    }
    if let Some(vm) = st.vms.get_mut(&vmid) {
        let same: Vec<String> = vm
            .pending
            .iter()
            .filter(|(k, v)| vm.conf.get(*k) == Some(*v))
            .map(|(k, _)| k.clone())
            .collect();
        for k in same {
            vm.pending.remove(&k);
        }
        if vm
            .conf
            .get("boot")
            .is_some_and(|b| b.starts_with("order=") && b.len() > 6)
            || vm.conf.contains_key("boot")
        {
            vm.conf.remove("bootdisk");
        }
    }
    Ok(())
}

/// A config update that passed PVE's early checks (`$load_and_check_config->(0)`, before forking or locking).
struct Update {
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
    fn apply(&self, sim: &Sim, st: &mut State, log: &mut TaskLog) -> Result<(), String> {
        let Some(vm) = st.vms.get(&self.vmid) else {
            return Err(no_such_vm_text(&self.node, self.vmid));
        };
        check_digest(vm, self.digest.as_deref())?;
        check_lock(vm, self.skiplock)?;
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
    }
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
        check_hostpci(&req.user, k, v)?;
    }
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
    for (k, v) in &set {
        merged.insert(k.clone(), v.clone());
    }
    if set.contains_key("boot") {
        check_boot(&merged)?;
    }
    Ok(Update {
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
    let node = update.node.clone();
    let upid = sim.start_task(
        &mut st,
        &node,
        "qmconfig",
        &vmid.to_string(),
        &req.user,
        injected_failure(req, Some(vmid)),
        &[sim.flock_exclusive(vmid)],
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                return Err(m);
            }
            update.apply(&sim2, st, log)
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
    result.map_err(ApiError::die)?;
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

/// Start-time checks PVE makes inside the start worker (`vm_start_nolock`), in its order: template, running, lock,
/// the cloud-init drive's storage, every volume activated (disks and ISOs; a missing one fails as the storage
/// plugin does), then the PCI mappings `config_to_command` resolves.
fn start_checks(sim: &Sim, st: &State, vm: &Vm, vmid: u32, skiplock: bool) -> Result<(), String> {
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
            && !sim
                .pci_mappings
                .iter()
                .any(|m| m.id == name && m.on_node(&vm.node))
        {
            return Err(format!("PCI device mapping not found for '{name}'"));
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
    crate::formats::parse_named("pve-qm-hostpci", value, key)?.remove("mapping")
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
    // PVE checks these before forking the worker.
    if matches!(kind, "qmreset" | "qmpause" | "qmresume") && !vm.running {
        return Err(ApiError::die(format!("VM {vmid} not running")));
    }
    let sim2 = Arc::clone(sim);
    let upid = sim.start_task(
        &mut st,
        req.node(),
        kind,
        &vmid.to_string(),
        &req.user,
        injected_failure(req, Some(vmid)),
        &[sim.flock_exclusive(vmid)],
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
                    if !vm.running {
                        return Err(format!("VM {vmid} not running"));
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
    let upid = sim.start_task(
        &mut st,
        req.node(),
        "qmdestroy",
        &vmid.to_string(),
        &req.user,
        injected_failure(req, Some(vmid)),
        &[sim.flock_exclusive(vmid)],
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
            Ok(())
        }),
    );
    st.touch();
    Ok(Reply::data(json!(upid)))
}

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
    let upid = sim.start_task(
        &mut st,
        req.node(),
        "qmtemplate",
        &vmid.to_string(),
        &req.user,
        injected_failure(req, Some(vmid)),
        &[sim.flock_exclusive(vmid)],
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

pub(crate) fn clone_vm(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let node = req.node().to_string();
    let vmid = req.vmid();
    let newid: u32 = req.get("newid").and_then(|v| v.parse().ok()).unwrap_or(0);
    let target = req.get("target").unwrap_or(&node).to_string();
    let storage = req.get("storage").map(str::to_string);
    let format = req.get("format").map(str::to_string);
    let name = req.get("name").map(str::to_string);
    let description = req.get("description").map(str::to_string);
    let mut st = sim.write();
    let src = get_vm(&st, &node, vmid)?;
    if let Some(snap) = req.get("snapname") {
        return Err(ApiError::die(format!("snapshot '{snap}' does not exist")));
    }
    check_lock(src, false).map_err(ApiError::die)?;
    let full = match req.get("full") {
        Some(f) => f == "1",
        None => !src.is_template(),
    };
    if !full && storage.is_some() {
        return Err(ApiError::die(
            "parameter 'storage' not allowed for linked clones",
        ));
    }
    if !full && format.is_some() {
        return Err(ApiError::die(
            "parameter 'format' not allowed for linked clones",
        ));
    }
    if !full && !src.is_template() {
        return Err(ApiError::die(
            "Linked clone feature is not supported for a VM that is not a template",
        ));
    }
    if !sim.has_node(&target) {
        return Err(ApiError::die(format!("no such cluster node '{target}'")));
    }
    if target != node {
        for (k, v) in &src.conf {
            if is_drive_key(k)
                && let Some(map) = parse_drive(k, v)
                && let Some((s, _)) = map.get("file").and_then(|f| parse_volume_id(f))
                && !is_cdrom(&map)
                && sim.storage(s).is_some_and(|s| !s.shared)
                && storage
                    .as_deref()
                    .is_none_or(|t| sim.storage(t).is_some_and(|t| !t.shared))
            {
                return Err(ApiError::die(format!(
                    "can't clone VM to node '{target}' (VM uses local storage)"
                )));
            }
        }
    }
    if let Some(s) = &storage {
        let Some(sc) = storage_for(sim, &target, s) else {
            return Err(ApiError::die(format!("storage '{s}' does not exist")));
        };
        if !sc.has_content("images") {
            return Err(ApiError::param(
                "storage",
                format!("storage '{s}' does not support vm images"),
            ));
        }
    }
    if st.vmid_owner(newid).is_some() {
        return Err(ApiError::die(format!(
            "unable to create VM {newid}: config file already exists"
        )));
    }
    let src_conf = src.conf.clone();
    let src_running = src.running;
    let mut placeholder = BTreeMap::new();
    placeholder.insert(
        "description".to_string(),
        "qmclone temporary file".to_string(),
    );
    placeholder.insert("lock".to_string(), "clone".to_string());
    st.vms.insert(
        newid,
        Vm {
            node: target.clone(),
            conf: placeholder,
            pending: BTreeMap::new(),
            pending_delete: BTreeMap::new(),
            running: false,
            started_at: 0,
            pid: 0,
            paused: false,
        },
    );
    let sim2 = Arc::clone(sim);
    let upid = sim.start_task(
        &mut st,
        req.node(),
        "qmclone",
        &vmid.to_string(),
        &req.user,
        injected_failure(req, Some(newid)),
        // PVE's clone takes the source's lock shared unless the source runs, then the target's.
        &[
            sim.flock_short(vmid, !src_running),
            sim.flock_short(newid, false),
        ],
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                st.vms.remove(&newid);
                return Err(m);
            }
            let mut conf: BTreeMap<String, String> = BTreeMap::new();
            for (k, v) in &src_conf {
                if is_unused_key(k)
                    || matches!(
                        k.as_str(),
                        "lock"
                            | "template"
                            | "parent"
                            | "snaptime"
                            | "vmstate"
                            | "snapstate"
                            | "runningcpu"
                            | "runningmachine"
                            | "running-nets-host-mtu"
                    )
                {
                    continue;
                }
                conf.insert(k.clone(), v.clone());
            }
            let src_name = src_conf
                .get("name")
                .cloned()
                .unwrap_or_else(|| vmid.to_string());
            conf.insert(
                "name".into(),
                name.unwrap_or_else(|| format!("Copy-of-VM-{src_name}")),
            );
            if let Some(d) = description {
                conf.insert("description".into(), d);
            }
            let nets: Vec<String> = conf
                .keys()
                .filter(|k| split_indexed(k).is_some_and(|(f, _)| f == "net"))
                .cloned()
                .collect();
            for k in nets {
                let v = conf.get(&k).cloned().unwrap_or_default();
                let without_mac: Vec<String> = v
                    .split(',')
                    .enumerate()
                    .map(|(i, p)| {
                        if i == 0 {
                            p.split('=').next().unwrap_or(p).to_string()
                        } else {
                            p.to_string()
                        }
                    })
                    .filter(|p| !p.starts_with("macaddr="))
                    .collect();
                let fresh = prepare_value(st, &k, &without_mac.join(","), None);
                conf.insert(k, fresh);
            }
            let uuid = st.random_uuid();
            let smbios = match conf.get("smbios1") {
                Some(s) => {
                    let mut parts: Vec<String> = s
                        .split(',')
                        .filter(|p| !p.starts_with("uuid="))
                        .map(str::to_string)
                        .collect();
                    parts.push(format!("uuid={uuid}"));
                    parts.sort();
                    parts.join(",")
                }
                None => format!("uuid={uuid}"),
            };
            conf.insert("smbios1".into(), smbios);
            if conf.get("vmgenid").is_some_and(|v| v != "0") {
                let g = st.random_uuid();
                conf.insert("vmgenid".into(), g);
            }
            let drives: Vec<(String, String)> = conf
                .iter()
                .filter(|(k, _)| is_drive_key(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let mut created: Vec<String> = Vec::new();
            for (k, v) in drives {
                let Some(mut map) = parse_drive(&k, &v) else {
                    continue;
                };
                let Some(file) = map.get("file").cloned() else {
                    continue;
                };
                let result = if is_cloudinit_file(&file) {
                    let s = storage
                        .clone()
                        .or_else(|| parse_volume_id(&file).map(|(s, _)| s.to_string()))
                        .unwrap_or_default();
                    alloc_cloudinit(&sim2, st, &target, &s, newid)
                } else if is_cdrom(&map) || volume_owner(&file) != Some(vmid) {
                    continue;
                } else {
                    let size = find_volume(&sim2, st, &node, &file)
                        .map(|v| v.size)
                        .or_else(|| map.get("size").and_then(|s| parse_size(s)))
                        .unwrap_or(0);
                    let src_storage = parse_volume_id(&file)
                        .map(|(s, _)| s.to_string())
                        .unwrap_or_default();
                    let linked = !full && k != "tpmstate0";
                    let dest = if linked {
                        src_storage
                    } else {
                        storage.clone().unwrap_or(src_storage)
                    };
                    let fmt = format.clone().or_else(|| {
                        file.rsplit('.')
                            .next()
                            .filter(|e| ["raw", "qcow2", "vmdk"].contains(e))
                            .map(str::to_string)
                    });
                    let parent = if linked { Some(file.clone()) } else { None };
                    alloc_disk(
                        &sim2,
                        st,
                        &target,
                        &dest,
                        newid,
                        size,
                        fmt.as_deref(),
                        parent,
                    )
                };
                match result {
                    Ok(volid) => {
                        log.line(format!("{k}: cloned '{file}' to '{volid}'"));
                        created.push(volid.clone());
                        map.insert("file".into(), volid);
                        conf.insert(k, print_drive(&map));
                    }
                    Err(e) => {
                        for v in &created {
                            free_volume(&sim2, st, &target, v);
                        }
                        st.vms.remove(&newid);
                        return Err(format!("clone failed: {e}"));
                    }
                }
            }
            if let Some(vm) = st.vms.get_mut(&newid) {
                vm.conf = conf;
            }
            Ok(())
        }),
    );
    st.touch();
    Ok(Reply::data(json!(upid)))
}

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
    let upid = sim.start_task(
        &mut st,
        req.node(),
        "resize",
        &vmid.to_string(),
        &req.user,
        injected_failure(req, Some(vmid)),
        &[sim.flock_exclusive(vmid)],
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
