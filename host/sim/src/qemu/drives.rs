//! Drive values: bus keys, parsing and printing, the pre-fork checks, and allocating or importing the volume a drive asks for.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::CONFIG_PATH;
use crate::api::ApiError;
use crate::formats::{format_size, parse_volume_id, print_property_string};
use crate::schema::{find_property, parameters, parse_property_string, split_indexed};
use crate::sim::{Sim, TaskLog};
use crate::state::State;
use crate::storage::{alloc_cloudinit, alloc_disk, find_volume, rename_volume, storage_for};

/// Disk keys (`ideN`, `sataN`, `scsiN`, `virtioN`, `efidisk0`, `tpmstate0`).
pub(crate) fn is_drive_key(key: &str) -> bool {
    if key == "efidisk0" || key == "tpmstate0" {
        return true;
    }
    matches!(split_indexed(key), Some((f, n)) if matches!(f, "ide" | "sata" | "scsi" | "virtio")
        && crate::schema::index_max(f).is_some_and(|m| n <= m))
}

pub(crate) fn is_unused_key(key: &str) -> bool {
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

pub(super) fn print_drive(map: &BTreeMap<String, String>) -> String {
    print_property_string(Some("file"), map)
}

pub(crate) fn is_cdrom(map: &BTreeMap<String, String>) -> bool {
    map.get("media").is_some_and(|m| m == "cdrom")
}

pub(crate) fn is_cloudinit_file(file: &str) -> bool {
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
pub(super) fn check_drive(sim: &Sim, node: &str, key: &str, value: &str) -> Result<(), ApiError> {
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

/// On a template a new volume becomes a base volume at once (qemu-server `create_disks` runs
/// `vdisk_create_base` when the config is a template): `vm-<id>-disk-N` is renamed `base-<id>-disk-N`.
fn as_base(sim: &Sim, st: &mut State, node: &str, vmid: u32, volid: String) -> String {
    let needle = format!("vm-{vmid}-disk-");
    if !volid.contains(&needle) {
        return volid;
    }
    let base = volid.replace(&needle, &format!("base-{vmid}-disk-"));
    rename_volume(sim, st, node, &volid, &base);
    base
}

/// Allocates or imports the volume a drive value asks for and returns the value PVE writes to the config;
/// on a `template`, the new volume is a base volume.
#[allow(clippy::too_many_arguments)]
pub(super) fn create_disk(
    sim: &Sim,
    st: &mut State,
    node: &str,
    vmid: u32,
    key: &str,
    value: &str,
    template: bool,
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
            let mut volid = alloc_disk(sim, st, node, &storage, vmid, bytes, fmt.as_deref(), None)?;
            if template {
                volid = as_base(sim, st, node, vmid, volid);
            }
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
            let volid = if template {
                as_base(sim, st, node, vmid, volid)
            } else {
                volid
            };
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
            // `create_disks` activates every existing volume and records its size, an ISO in a
            // CD-ROM drive too (`local:iso/x.iso,media=cdrom,size=600M`); only `none`, `cdrom`
            // (no volume) and the cloud-init drive carry none.
            let file = map.get("file").cloned().unwrap_or_default();
            if !is_cloudinit_file(&file) && parse_volume_id(&file).is_some() {
                match find_volume(sim, st, node, &file) {
                    Some(v) => {
                        map.insert("size".into(), format_size(v.size));
                    }
                    None => return Err(format!("volume '{file}' does not exist")),
                }
            }
            Ok(print_drive(&map))
        }
    }
}
