//! Storage: volume allocation and naming, the storage and content listings, volume deletion and download-url.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::config::StorageConfig;
use crate::hashes::Hasher;
use crate::sim::{Sim, TaskLog, finish_task, injected_failure};
use crate::state::{State, Volume, now, volume_key};

/// The storage named by a volid, if it exists on `node`.
pub(crate) fn storage_for<'a>(
    sim: &'a Sim,
    node: &str,
    storage: &str,
) -> Option<&'a StorageConfig> {
    sim.storage(storage).filter(|s| s.on_node(node))
}

/// Finds a volume by volid as seen from `node` (node-local or shared).
pub(crate) fn find_volume<'a>(
    sim: &Sim,
    st: &'a State,
    node: &str,
    volid: &str,
) -> Option<&'a Volume> {
    let (storage, _) = crate::formats::parse_volume_id(volid)?;
    let s = storage_for(sim, node, storage)?;
    st.volumes.get(&volume_key(s, node, volid))
}

/// Removes a volume; returns whether it existed.
pub(crate) fn free_volume(sim: &Sim, st: &mut State, node: &str, volid: &str) -> bool {
    let Some((storage, _)) = crate::formats::parse_volume_id(volid) else {
        return false;
    };
    let Some(s) = storage_for(sim, node, storage) else {
        return false;
    };
    st.volumes.remove(&volume_key(s, node, volid)).is_some()
}

/// The VMID a volume name belongs to (`vm-<id>-...`, `base-<id>-...`, `<id>/...`).
pub(crate) fn volume_owner(volid: &str) -> Option<u32> {
    let (_, name) = crate::formats::parse_volume_id(volid)?;
    let last = name.rsplit('/').next().unwrap_or(name);
    let rest = last
        .strip_prefix("vm-")
        .or_else(|| last.strip_prefix("base-"))?;
    rest.split('-').next()?.parse().ok()
}

fn dir_path(s: &StorageConfig) -> String {
    if s.name == "local" {
        "/var/lib/vz".to_string()
    } else {
        format!("/mnt/pve/{}", s.name)
    }
}

/// Lowest N such that no `vm-<id>-disk-N` or `base-<id>-disk-N` exists on the storage.
fn free_disk_index(st: &State, s: &StorageConfig, node: &str, vmid: u32) -> u32 {
    let prefix = if s.shared {
        "*".to_string()
    } else {
        node.to_string()
    };
    let mut used = std::collections::BTreeSet::new();
    for v in st.volumes.values() {
        if v.storage != s.name || v.node != prefix {
            continue;
        }
        let name = v.volid.rsplit('/').next().unwrap_or(&v.volid);
        let name = name.split_once(':').map(|(_, n)| n).unwrap_or(name);
        for kind in ["vm", "base"] {
            if let Some(rest) = name.strip_prefix(&format!("{kind}-{vmid}-disk-")) {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                if let Ok(n) = digits.parse::<u32>() {
                    used.insert(n);
                }
            }
        }
    }
    (0..).find(|n| !used.contains(n)).unwrap_or(0)
}

fn insert_volume(st: &mut State, s: &StorageConfig, node: &str, v: Volume) {
    st.volumes.insert(volume_key(s, node, &v.volid), v);
}

/// Allocates a new `vm-<id>-disk-N` image volume of `size` bytes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn alloc_disk(
    sim: &Sim,
    st: &mut State,
    node: &str,
    storage: &str,
    vmid: u32,
    size: u64,
    fmt: Option<&str>,
    parent: Option<String>,
) -> Result<String, String> {
    let s = storage_for(sim, node, storage)
        .ok_or_else(|| format!("storage '{storage}' does not exist"))?;
    let n = free_disk_index(st, s, node, vmid);
    let (volid, format) = if s.file_based() {
        let fmt = fmt.unwrap_or("raw");
        match &parent {
            Some(p) => {
                let base = p.split_once(':').map(|(_, n)| n).unwrap_or(p);
                (
                    format!("{storage}:{base}/{vmid}/vm-{vmid}-disk-{n}.{fmt}"),
                    fmt.to_string(),
                )
            }
            None => (
                format!("{storage}:{vmid}/vm-{vmid}-disk-{n}.{fmt}"),
                fmt.to_string(),
            ),
        }
    } else {
        (format!("{storage}:vm-{vmid}-disk-{n}"), "raw".to_string())
    };
    let shared_node = if s.shared { "*" } else { node };
    insert_volume(
        st,
        s,
        node,
        Volume {
            volid: volid.clone(),
            storage: storage.to_string(),
            node: shared_node.to_string(),
            size,
            format,
            content: "images".to_string(),
            vmid: Some(vmid),
            ctime: now(),
            parent,
            virtual_size: None,
        },
    );
    Ok(volid)
}

/// Allocates the `vm-<id>-cloudinit` volume; fails like LVM when it already exists.
pub(crate) fn alloc_cloudinit(
    sim: &Sim,
    st: &mut State,
    node: &str,
    storage: &str,
    vmid: u32,
) -> Result<String, String> {
    let s = storage_for(sim, node, storage)
        .ok_or_else(|| format!("storage '{storage}' does not exist"))?;
    let (volid, format) = if s.file_based() {
        (
            format!("{storage}:{vmid}/vm-{vmid}-cloudinit.qcow2"),
            "qcow2",
        )
    } else {
        (format!("{storage}:vm-{vmid}-cloudinit"), "raw")
    };
    if st.volumes.contains_key(&volume_key(s, node, &volid)) {
        return Err(if s.file_based() {
            format!(
                "disk image '{}/images/{vmid}/vm-{vmid}-cloudinit.qcow2' already exists",
                dir_path(s)
            )
        } else {
            format!("Logical Volume vm-{vmid}-cloudinit already exists")
        });
    }
    let shared_node = if s.shared { "*" } else { node };
    insert_volume(
        st,
        s,
        node,
        Volume {
            volid: volid.clone(),
            storage: storage.to_string(),
            node: shared_node.to_string(),
            size: 4 * 1024 * 1024,
            format: format.to_string(),
            content: "images".to_string(),
            vmid: Some(vmid),
            ctime: now(),
            parent: None,
            virtual_size: None,
        },
    );
    Ok(volid)
}

/// Renames an image volume (template conversion: `vm-<id>-disk-N` to `base-<id>-disk-N`).
pub(crate) fn rename_volume(sim: &Sim, st: &mut State, node: &str, volid: &str, new_volid: &str) {
    let Some((storage, _)) = crate::formats::parse_volume_id(volid) else {
        return;
    };
    let Some(s) = storage_for(sim, node, storage) else {
        return;
    };
    if let Some(mut v) = st.volumes.remove(&volume_key(s, node, volid)) {
        v.volid = new_volid.to_string();
        st.volumes.insert(volume_key(s, node, new_volid), v);
    }
}

/// PVE's `storage_info` entry of a storage on a node: type, content, flags and space.
fn storage_info(st: &State, s: &StorageConfig, node: &str) -> Map<String, Value> {
    let used: u64 = st
        .volumes
        .values()
        .filter(|v| v.storage == s.name && (v.node == node || v.node == "*"))
        .map(|v| v.size)
        .sum();
    let mut m = Map::new();
    m.insert("type".into(), json!(s.kind));
    m.insert("content".into(), json!(s.content.join(",")));
    m.insert("active".into(), json!(1));
    m.insert("enabled".into(), json!(1));
    m.insert("shared".into(), json!(if s.shared { 1 } else { 0 }));
    m.insert("total".into(), json!(s.total));
    m.insert("used".into(), json!(used));
    m.insert("avail".into(), json!(s.total.saturating_sub(used)));
    m
}

/// `GET /nodes/{node}/storage/{storage}/status`.
pub(crate) fn status(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let node = req.node();
    let name = req.get("storage").unwrap_or("");
    let Some(s) = storage_for(sim, node, name) else {
        return Err(ApiError::param("storage", "No such storage."));
    };
    let st = sim.read();
    Ok(Reply::data(Value::Object(storage_info(&st, s, node))))
}

pub(crate) fn list(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let node = req.node();
    let st = sim.read();
    let content_filter: Vec<&str> = req
        .get("content")
        .map(crate::formats::split_list)
        .unwrap_or_default();
    let mut out = Vec::new();
    for s in sim.storages.iter().filter(|s| s.on_node(node)) {
        if let Some(only) = req.get("storage")
            && only != s.name
        {
            continue;
        }
        if !content_filter.is_empty() && !content_filter.iter().any(|c| s.has_content(c)) {
            continue;
        }
        if req.get("enabled") == Some("0") {
            continue;
        }
        let mut m = storage_info(&st, s, node);
        m.insert("storage".into(), json!(s.name));
        let used = m["used"].as_u64().unwrap_or(0);
        m.insert(
            "used_fraction".into(),
            json!(used as f64 / s.total.max(1) as f64),
        );
        if req.flag("format") {
            let formats = if s.file_based() {
                json!({"default": "raw", "qcow2": 1, "raw": 1, "vmdk": 1})
            } else {
                json!({"default": "raw", "raw": 1})
            };
            m.insert("format".into(), formats);
            m.insert("select_existing".into(), json!(0));
        }
        out.push(Value::Object(m));
    }
    out.sort_by(|a, b| a["storage"].as_str().cmp(&b["storage"].as_str()));
    Ok(Reply::data(Value::Array(out)))
}

pub(crate) fn content(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let node = req.node();
    let name = req.get("storage").unwrap_or("");
    let s = storage_for(sim, node, name)
        .ok_or_else(|| ApiError::die(format!("storage '{name}' does not exist")))?;
    let st = sim.read();
    let prefix = if s.shared { "*" } else { node };
    let vmid_filter: Option<u32> = req.get("vmid").and_then(|v| v.parse().ok());
    let mut items: Vec<&Volume> = st
        .volumes
        .values()
        .filter(|v| v.storage == s.name && v.node == prefix)
        .filter(|v| req.get("content").is_none_or(|c| v.content == c))
        .filter(|v| vmid_filter.is_none_or(|id| v.vmid == Some(id)))
        .collect();
    items.sort_by_key(|v| v.volid.to_lowercase());
    let out: Vec<Value> = items
        .into_iter()
        .map(|v| {
            let mut m = Map::new();
            m.insert("volid".into(), json!(v.volid));
            m.insert("format".into(), json!(v.format));
            m.insert("size".into(), json!(v.size));
            m.insert("content".into(), json!(v.content));
            if s.file_based() || v.content != "images" {
                m.insert("ctime".into(), json!(v.ctime));
            }
            if let Some(id) = v.vmid {
                m.insert("vmid".into(), json!(id));
            }
            if let Some(p) = &v.parent {
                m.insert(
                    "parent".into(),
                    json!(p.split_once(':').map(|(_, n)| n).unwrap_or(p)),
                );
            }
            if v.content == "images" {
                m.insert("used".into(), json!(0));
            }
            Value::Object(m)
        })
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

pub(crate) fn delete_volume(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let node = req.node().to_string();
    let storage = req.get("storage").unwrap_or("").to_string();
    let volume = req.get("volume").unwrap_or("");
    let volid = match crate::formats::parse_volume_id(volume) {
        Some((s, _)) if s != storage => {
            return Err(ApiError::param(
                "volume",
                format!("storage ID mismatch ({s} != {storage})"),
            ));
        }
        Some(_) => volume.to_string(),
        None => format!("{storage}:{volume}"),
    };
    if storage_for(sim, &node, &storage).is_none() {
        return Err(ApiError::die(format!("storage '{storage}' does not exist")));
    }
    let mut st = sim.write();
    let owner = volume_owner(&volid);
    let id = match owner {
        Some(o) => format!("{o}@{storage}"),
        None => storage.clone(),
    };
    let injected = injected_failure(req, None);
    let sim2 = Arc::clone(sim);
    let node2 = node.clone();
    let upid = sim.start_task(
        &mut st,
        &node,
        "imgdel",
        &id,
        &req.user,
        injected,
        &[],
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                return Err(m);
            }
            if !free_volume(&sim2, st, &node2, &volid) {
                return Err(format!("volume '{volid}' does not exist"));
            }
            log.line(format!("Removed volume '{volid}'"));
            Ok(())
        }),
    );
    st.touch();
    Ok(Reply::data(json!(upid)))
}

/// PVE's filename normalisation for uploads: path stripped, characters outside `[a-zA-Z0-9_.-]` become `_`.
fn normalize_filename(name: &str) -> String {
    let base = name.rsplit('/').next().unwrap_or(name);
    base.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

pub(crate) fn download_url(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let node = req.node().to_string();
    let storage = req.get("storage").unwrap_or("").to_string();
    let content = req.get("content").unwrap_or("").to_string();
    let url = req.get("url").unwrap_or("").to_string();
    let s = storage_for(sim, &node, &storage)
        .ok_or_else(|| ApiError::die(format!("storage '{storage}' does not exist")))?
        .clone();
    if !s.file_based() {
        return Err(ApiError::die(format!(
            "can't upload to storage type '{}', not a file based storage!",
            s.kind
        )));
    }
    if !s.has_content(&content) {
        return Err(ApiError::die(format!(
            "storage '{storage}' is not configured for content-type '{content}'"
        )));
    }
    let filename = normalize_filename(req.get("filename").unwrap_or(""));
    let lower = filename.to_lowercase();
    match content.as_str() {
        "iso" => {
            if !(lower.ends_with(".iso") || lower.ends_with(".img")) {
                return Err(ApiError::param("filename", "wrong file extension"));
            }
        }
        "vztmpl" => {
            let ok = [".tar", ".tar.gz", ".tar.xz", ".tar.zst", ".tar.bz2"]
                .iter()
                .any(|e| lower.ends_with(e));
            if !ok {
                return Err(ApiError::param("filename", "wrong file extension"));
            }
        }
        _ => {
            let ext_ok = [".ova", ".qcow2", ".raw", ".vmdk"]
                .iter()
                .any(|e| filename.ends_with(e));
            let chars_ok = filename
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-.+=_".contains(c));
            if !ext_ok || !chars_ok {
                return Err(ApiError::param(
                    "filename",
                    "invalid filename or wrong extension",
                ));
            }
        }
    }
    if req.get("compression").is_some() && content != "iso" {
        return Err(ApiError::die(format!(
            "decompression not supported for {content}"
        )));
    }
    let (subdir, format) = match content.as_str() {
        "iso" => ("iso", "iso".to_string()),
        "vztmpl" => ("vztmpl", crate::formats::vztmpl_format(&filename)),
        _ => (
            "import",
            filename.rsplit('.').next().unwrap_or("raw").to_string(),
        ),
    };
    let volid = format!("{storage}:{subdir}/{filename}");
    let path = format!(
        "{}/{}/{filename}",
        dir_path(&s),
        match content.as_str() {
            "iso" => "template/iso",
            "vztmpl" => "template/cache",
            _ => "import",
        }
    );
    let mut st = sim.write();
    if st.volumes.contains_key(&volume_key(&s, &node, &volid)) {
        return Err(ApiError::die(format!(
            "refusing to override existing file '{path}'"
        )));
    }
    let upid = sim.register_task(&mut st, &node, "download", &filename, &req.user);
    let checksum = req.get("checksum").map(|c| {
        (
            req.get("checksum-algorithm").unwrap_or("").to_string(),
            c.to_lowercase(),
        )
    });
    let verify = req.get("verify-certificates") != Some("0");
    let injected = injected_failure(req, None);
    let sim2 = Arc::clone(sim);
    let task_upid = upid.clone();
    tokio::spawn(async move {
        let mut log = TaskLog::default();
        if !sim2.task_duration.is_zero() {
            tokio::time::sleep(sim2.task_duration).await;
        }
        let result = match injected {
            Some(m) => Err(m),
            None => fetch(&url, &path, checksum, verify, &mut log).await,
        };
        {
            let mut st = sim2.write();
            let result = result.and_then(|(size, virtual_size)| {
                let key = volume_key(&s, &node, &volid);
                if st.volumes.contains_key(&key) {
                    return Err(format!("refusing to override existing file '{path}'"));
                }
                st.volumes.insert(
                    key,
                    Volume {
                        volid: volid.clone(),
                        storage: s.name.clone(),
                        node: if s.shared {
                            "*".to_string()
                        } else {
                            node.clone()
                        },
                        size,
                        format: format.clone(),
                        content: content.clone(),
                        vmid: None,
                        ctime: now(),
                        parent: None,
                        virtual_size,
                    },
                );
                log.line(format!("download of '{url}' to '{path}' finished"));
                Ok(())
            });
            finish_task(&mut st, &task_upid, log, result);
            st.touch();
        }
        sim2.persist();
    });
    st.touch();
    Ok(Reply::data(json!(upid)))
}

/// Fetches `url`, hashing as it goes; returns (size, virtual size for qcow2 images).
async fn fetch(
    url: &str,
    path: &str,
    checksum: Option<(String, String)>,
    verify: bool,
    log: &mut TaskLog,
) -> Result<(u64, Option<u64>), String> {
    crate::ensure_crypto_provider();
    log.line(format!("downloading {url} to {path}"));
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(!verify)
        .connect_timeout(std::time::Duration::from_secs(10))
        .read_timeout(std::time::Duration::from_secs(60))
        .build()
        .map_err(|e| format!("download failed: {e}"))?;
    let mut resp = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("download failed: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("download failed: {}", resp.status()));
    }
    let mut hasher = checksum.as_ref().and_then(|(alg, _)| Hasher::new(alg));
    let mut size: u64 = 0;
    let mut head: Vec<u8> = Vec::new();
    loop {
        let chunk = resp
            .chunk()
            .await
            .map_err(|e| format!("download failed: {e}"))?;
        let Some(chunk) = chunk else {
            break;
        };
        size += chunk.len() as u64;
        if head.len() < 64 {
            let take = (64 - head.len()).min(chunk.len());
            head.extend_from_slice(&chunk[..take]);
        }
        if let Some(h) = hasher.as_mut() {
            h.update(&chunk);
        }
    }
    log.line(format!("download finished: {size} bytes"));
    if let (Some((alg, expected)), Some(h)) = (checksum, hasher) {
        log.line(format!("calculating checksum ({alg})..."));
        let got = h.finish_hex();
        if got != expected {
            log.line(format!("removing temporary file '{path}.tmp'"));
            return Err(format!(
                "checksum mismatch: got '{got}' != expect '{expected}'"
            ));
        }
        log.line("checksum verified");
    }
    let virtual_size = if head.len() >= 32 && head[0..4] == [0x51, 0x46, 0x49, 0xfb] {
        let mut b = [0u8; 8];
        b.copy_from_slice(&head[24..32]);
        Some(u64::from_be_bytes(b))
    } else {
        None
    };
    Ok((size, virtual_size))
}
