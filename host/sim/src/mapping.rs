//! Resource mappings: `/cluster/mapping/pci[/{id}]` and `/cluster/mapping/usb[/{id}]`, the cluster-wide names
//! (`/etc/pve/mapping/{pci,usb}.cfg`) that `hostpciN: mapping=<id>` and `usbN: mapping=<id>` refer to.
//!
//! Sources: proxmox/pve-manager `PVE/API2/Cluster/Mapping/{PCI,USB}.pm` (the endpoints, their checks and
//! messages), proxmox/pve-guest-common `src/PVE/Mapping/{PCI,USB}.pm` (the section config: options, the `map`
//! entry formats, `get_node_mapping`), proxmox/pve-common `src/PVE/SectionConfig.pm` (`check_config`,
//! `delete_from_config`, the file format the digest covers).
//!
//! Not modelled: the hardware behind an entry. PVE's `check-node` runs `assert_valid` against the node's sysfs
//! (vendor/device ids, IOMMU group, mdev support); the simulator has no devices, so every entry on the node is
//! taken as valid and only a node without an entry gets the warning.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;

/// One mapping as its section in `mapping/{pci,usb}.cfg` holds it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Mapping {
    /// The options other than `map` as written: `description`, and for PCI `mdev` and `live-migration-capable`
    /// (booleans as `0`/`1`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub opts: BTreeMap<String, String>,
    /// One property string per node and device: `node=pve01,path=0000:01:00.0,id=10de:2204`.
    #[serde(default)]
    pub map: Vec<String>,
}

impl Mapping {
    /// `get_node_mapping`: the entries for `node`.
    pub(crate) fn on_node(&self, node: &str) -> Vec<&str> {
        self.map
            .iter()
            .filter(|m| m.split(',').any(|p| p.strip_prefix("node=") == Some(node)))
            .map(String::as_str)
            .collect()
    }

    /// A mapping as the cluster YAML or [`crate::SimConfig`] declares it: an empty description is none.
    pub(crate) fn seeded(description: &str, map: &[String]) -> Mapping {
        let mut opts = BTreeMap::new();
        if !description.is_empty() {
            opts.insert("description".to_string(), description.to_string());
        }
        Mapping {
            opts,
            map: map.to_vec(),
        }
    }
}

/// The two mapping configs.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Mappings {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pci: BTreeMap<String, Mapping>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub usb: BTreeMap<String, Mapping>,
}

impl Mappings {
    pub(crate) fn is_empty(&self) -> bool {
        self.pci.is_empty() && self.usb.is_empty()
    }

    fn of(&self, kind: Kind) -> &BTreeMap<String, Mapping> {
        match kind {
            Kind::Pci => &self.pci,
            Kind::Usb => &self.usb,
        }
    }

    fn of_mut(&mut self, kind: Kind) -> &mut BTreeMap<String, Mapping> {
        match kind {
            Kind::Pci => &mut self.pci,
            Kind::Usb => &mut self.usb,
        }
    }
}

/// Which mapping config an endpoint serves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    Pci,
    Usb,
}

impl Kind {
    /// The section type, as the config, the messages and the entries' `type` spell it.
    fn name(self) -> &'static str {
        match self {
            Kind::Pci => "pci",
            Kind::Usb => "usb",
        }
    }

    /// The plugin's `options` besides `map` (required in both), all optional.
    fn options(self) -> &'static [&'static str] {
        match self {
            Kind::Pci => &["description", "mdev", "live-migration-capable"],
            Kind::Usb => &["description"],
        }
    }

    /// The key the index's per-node diagnostics go under: PCI's `checks`, USB's `errors` (USB.pm's index).
    fn checks_key(self) -> &'static str {
        match self {
            Kind::Pci => "checks",
            Kind::Usb => "errors",
        }
    }
}

/// The config file's text as SectionConfig writes it (`<id>` header, tab-indented `key value` lines, one
/// `map` line per entry, a blank line after each section); its SHA-1 is the `digest`.
fn config_text(mappings: &BTreeMap<String, Mapping>) -> String {
    let mut text = String::new();
    for (id, m) in mappings {
        text.push_str(id);
        text.push('\n');
        for (k, v) in &m.opts {
            text.push_str(&format!("\t{k} {v}\n"));
        }
        for entry in &m.map {
            text.push_str(&format!("\tmap {entry}\n"));
        }
        text.push('\n');
    }
    text
}

fn digest(mappings: &BTreeMap<String, Mapping>) -> String {
    crate::hashes::sha1_hex(config_text(mappings).as_bytes())
}

/// The section as the API returns it: `type`, the options (booleans as numbers), `map` and the file's digest.
fn entry(kind: Kind, m: &Mapping, digest: &str) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("type".into(), json!(kind.name()));
    for (k, v) in &m.opts {
        let value = match k.as_str() {
            "mdev" | "live-migration-capable" => json!(v.parse::<u8>().unwrap_or(0)),
            _ => json!(v),
        };
        out.insert(k.clone(), value);
    }
    out.insert("map".into(), json!(m.map));
    out.insert("digest".into(), json!(digest));
    out
}

/// `GET /cluster/mapping/{pci,usb}`: every mapping with its `id` (sorted; PVE lists them in hash order). With
/// `check-node` (pveproxy proxies the request to that node) each gets the diagnostics for it: a warning when
/// the mapping has no entry for the node.
pub(crate) fn list(sim: &Arc<Sim>, req: &Req, kind: Kind) -> ApiResult {
    let check_node = req.get("check-node");
    if let Some(node) = check_node {
        if !sim.has_node(node) {
            return Err(ApiError::die(format!(
                "hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known"
            )));
        }
        if sim.is_offline(node) {
            return Err(ApiError::Unreachable);
        }
    }
    let st = sim.read();
    let mappings = st.mappings.of(kind);
    let digest = digest(mappings);
    let out: Vec<Value> = mappings
        .iter()
        .map(|(id, m)| {
            let mut e = entry(kind, m, &digest);
            e.insert("id".into(), json!(id));
            if let Some(node) = check_node {
                let checks = if m.on_node(node).is_empty() {
                    json!([{"severity": "warning", "message": format!("No mapping for node {node}.")}])
                } else {
                    json!([])
                };
                e.insert(kind.checks_key().into(), checks);
            }
            Value::Object(e)
        })
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /cluster/mapping/{pci,usb}/{id}`.
pub(crate) fn read(sim: &Arc<Sim>, req: &Req, kind: Kind) -> ApiResult {
    let id = req.get("id").unwrap_or("");
    let st = sim.read();
    let mappings = st.mappings.of(kind);
    let Some(m) = mappings.get(id) else {
        return Err(ApiError::die(format!("mapping '{id}' not found")));
    };
    Ok(Reply::data(Value::Object(entry(
        kind,
        m,
        &digest(mappings),
    ))))
}

/// `check_config($id, $param, 1, 1)`: the options given, and `map`, which the plugin requires on a create and,
/// as PVE's update calls it the same way, on every update too.
fn check_config(req: &Req, kind: Kind) -> Result<Mapping, String> {
    if req.get("map").is_none() {
        return Err("missing value for required option 'map'".to_string());
    }
    let opts = kind
        .options()
        .iter()
        .filter_map(|k| req.get(k).map(|v| (k.to_string(), v.to_string())))
        .collect();
    Ok(Mapping {
        opts,
        map: req.list("map").into_iter().map(str::to_string).collect(),
    })
}

/// `POST /cluster/mapping/{pci,usb}`.
pub(crate) fn create(sim: &Arc<Sim>, req: &Req, kind: Kind) -> ApiResult {
    let id = req.get("id").unwrap_or("").to_string();
    let new = check_config(req, kind).map_err(ApiError::die)?;
    let mut st = sim.write();
    let mappings = st.mappings.of_mut(kind);
    if mappings.contains_key(&id) {
        return Err(ApiError::die(format!(
            "create hardware mapping failed: {} ID '{id}' already defined",
            kind.name()
        )));
    }
    mappings.insert(id, new);
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}

/// `PUT /cluster/mapping/{pci,usb}/{id}`: under the config lock, the digest, the mapping's existence, the
/// options (`map` required), then `delete_from_config` and the new values.
pub(crate) fn update(sim: &Arc<Sim>, req: &Req, kind: Kind) -> ApiResult {
    let id = req.get("id").unwrap_or("").to_string();
    let failed = |e: String| ApiError::die(format!("update hardware mapping failed: {e}"));
    let mut st = sim.write();
    let mappings = st.mappings.of_mut(kind);
    crate::ha::assert_digest(&digest(mappings), req.get("digest")).map_err(failed)?;
    let Some(current) = mappings.get(&id) else {
        return Err(failed(format!("{} ID '{id}' does not exist", kind.name())));
    };
    let new = check_config(req, kind).map_err(failed)?;
    let mut updated = current.clone();
    for k in crate::formats::split_list(req.get("delete").unwrap_or("")) {
        if k == "map" {
            return Err(failed("unable to delete required option 'map'".into()));
        }
        if !kind.options().contains(&k) {
            return Err(failed(format!("no such option '{k}'")));
        }
        if new.opts.contains_key(k) {
            return Err(failed(format!(
                "cannot set and delete property '{k}' at the same time!"
            )));
        }
        updated.opts.remove(k);
    }
    updated.opts.extend(new.opts);
    updated.map = new.map;
    mappings.insert(id, updated);
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}

/// `DELETE /cluster/mapping/{pci,usb}/{id}`: removes the mapping; an unknown id is no error (PVE deletes only
/// when it exists and writes the config either way). Guests that use it keep their `mapping=` and fail to start.
pub(crate) fn delete(sim: &Arc<Sim>, req: &Req, kind: Kind) -> ApiResult {
    let id = req.get("id").unwrap_or("");
    let mut st = sim.write();
    st.mappings.of_mut(kind).remove(id);
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}
