//! The cluster's storage configuration as PVE serves it back: `GET /storage` and `GET /storage/{storage}`.
//!
//! pve-storage `src/PVE/API2/Storage/Config.pm` (`index`, `read`, `$api_storage_config`) answers each
//! `storage.cfg` section with its id, type, encoded `content` and `nodes` lists, the file's `digest` and the
//! plugin's own keys; `PVE/Storage/Plugin.pm` `parse_config` sets `shared` on the shared plugin types.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::config::StorageConfig;
use crate::sim::Sim;

/// The plugin keys the simulator knows for a storage, in `storage.cfg` order: a path for file based
/// storages (PVE's default mount point below `/mnt/pve` for network ones), the volume group and thin pool
/// of LVM (every pool is taken to live in VG `pve`, as the start checks do), the dataset of a ZFS pool.
fn plugin_keys(s: &StorageConfig) -> Vec<(&'static str, String)> {
    match s.kind.as_str() {
        "dir" if s.name == "local" => vec![("path", "/var/lib/vz".to_string())],
        "dir" | "nfs" | "cifs" | "cephfs" | "glusterfs" | "btrfs" => {
            vec![("path", format!("/mnt/pve/{}", s.name))]
        }
        "lvmthin" => vec![
            ("thinpool", "data".to_string()),
            ("vgname", "pve".to_string()),
        ],
        "lvm" => vec![("vgname", "pve".to_string())],
        "zfspool" => vec![("pool", "rpool/data".to_string())],
        _ => Vec::new(),
    }
}

/// `storage.cfg` as the simulator would write it (PVE's SectionConfig layout: `type: id`, then one
/// tab-indented `key value` line per property, a blank line between sections); its SHA-1 is the digest.
fn storage_cfg_text(storages: &[StorageConfig]) -> String {
    let mut text = String::new();
    for s in storages {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!("{}: {}\n", s.kind, s.name));
        for (k, v) in plugin_keys(s) {
            text.push_str(&format!("\t{k} {v}\n"));
        }
        text.push_str(&format!("\tcontent {}\n", s.content.join(",")));
        if let Some(nodes) = &s.nodes {
            text.push_str(&format!("\tnodes {}\n", nodes.join(",")));
        }
        if s.shared {
            text.push_str("\tshared 1\n");
        }
    }
    text
}

/// One section as `$api_storage_config` returns it.
fn entry(s: &StorageConfig, digest: &str) -> Value {
    let mut m = Map::new();
    m.insert("storage".into(), json!(s.name));
    m.insert("type".into(), json!(s.kind));
    m.insert("content".into(), json!(s.content.join(",")));
    m.insert("digest".into(), json!(digest));
    for (k, v) in plugin_keys(s) {
        m.insert(k.into(), json!(v));
    }
    if let Some(nodes) = &s.nodes {
        m.insert("nodes".into(), json!(nodes.join(",")));
    }
    if s.shared {
        m.insert("shared".into(), json!(1));
    }
    Value::Object(m)
}

fn digest(sim: &Sim) -> String {
    crate::hashes::sha1_hex(storage_cfg_text(&sim.storages).as_bytes())
}

/// `GET /storage`: every storage (`type` filters by plugin type), sorted by id (PVE lists them in Perl hash
/// order, which has none).
pub(crate) fn index(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let digest = digest(sim);
    let mut storages: Vec<&StorageConfig> = sim
        .storages
        .iter()
        .filter(|s| req.get("type").is_none_or(|t| t == s.kind))
        .collect();
    storages.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Reply::data(Value::Array(
        storages.into_iter().map(|s| entry(s, &digest)).collect(),
    )))
}

/// `GET /storage/{storage}`: one section, or `PVE::Storage::storage_config`'s 500 for an unknown id.
pub(crate) fn read(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let name = req.get("storage").unwrap_or("");
    let s = sim
        .storage(name)
        .ok_or_else(|| ApiError::die(format!("storage '{name}' does not exist")))?;
    Ok(Reply::data(entry(s, &digest(sim))))
}
