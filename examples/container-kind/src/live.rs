//! Live state as PVE reports it: the `/cluster/resources` entry of a container, its
//! `/nodes/{node}/lxc/{vmid}/config` (keys such as `rootfs: local-lvm:vm-101-disk-0,size=8G`,
//! `net0: name=eth0,bridge=vmbr0,hwaddr=BC:24:11:..,ip=dhcp,type=veth`,
//! `features: keyctl=1,nesting=1`, `mp0: local-lvm:vm-101-disk-1,mp=/data,backup=1,size=4G`)
//! and its `status/current`.

use std::collections::BTreeMap;

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::model::Observation;
use proxops_kind_sdk::sets::split_list;
use serde_json::Value;

/// Separators PVE accepts between tags.
pub const TAG_SEPARATORS: &[char] = &[';', ',', ' '];

/// The fields of a `/cluster/resources` entry this kind reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `type`: `lxc`, `qemu`, ...
    pub kind: String,
    /// `node`.
    pub node: String,
    /// `vmid`.
    pub vmid: u32,
    /// `name` (the container's hostname).
    pub name: Option<String>,
    /// `status == "running"`.
    pub running: bool,
    /// `template == 1`.
    pub template: bool,
    /// `lock`, when a task holds one.
    pub lock: Option<String>,
    /// Tags, split.
    pub tags: Vec<String>,
    /// `hastate`: the HA manager's state of the container's HA resource; absent for a
    /// container without one.
    pub hastate: Option<String>,
    /// `ha`: the container's `/cluster/ha/resources` entry, which the host adds to the entry
    /// of an HA-managed guest; absent: no HA resource (or the host did not read it).
    pub ha: Option<HaResource>,
}

/// A `/cluster/ha/resources` entry as PVE returns it, values as text; PVE leaves out the
/// options it was not given (then its defaults apply).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HaResource {
    /// `sid` (`ct:101`).
    pub sid: Option<String>,
    /// `state` (absent: `started`).
    pub state: Option<String>,
    /// `max_restart` (absent: 1).
    pub max_restart: Option<String>,
    /// `max_relocate` (absent: 1).
    pub max_relocate: Option<String>,
    /// `failback` (absent: 1).
    pub failback: Option<String>,
    /// `comment`: where proxops writes its ownership mark.
    pub comment: Option<String>,
    /// `digest` of the HA resources config.
    pub digest: Option<String>,
}

impl HaResource {
    /// Read the host's `ha` object; `None` when it is not an object.
    pub fn from_value(v: &Value) -> Option<HaResource> {
        v.as_object()?;
        let field = |k: &str| v.get(k).and_then(text);
        Some(HaResource {
            sid: field("sid"),
            state: field("state"),
            max_restart: field("max_restart"),
            max_relocate: field("max_relocate"),
            failback: field("failback"),
            comment: field("comment"),
            digest: field("digest"),
        })
    }
}

/// A JSON scalar as the text PVE would print (numbers and strings alike).
pub fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "1" } else { "0" }.into()),
        _ => None,
    }
}

impl Entry {
    /// Read an entry; `None` when it lacks a node or a vmid.
    pub fn from_value(v: &Value) -> Option<Entry> {
        let field = |k: &str| v.get(k).and_then(text).filter(|s| !s.is_empty());
        let vmid = field("vmid")?.parse().ok()?;
        Some(Entry {
            kind: field("type").unwrap_or_default(),
            node: field("node")?,
            vmid,
            name: field("name"),
            running: field("status").as_deref() == Some("running"),
            template: field("template").as_deref() == Some("1"),
            lock: field("lock"),
            tags: field("tags")
                .map(|t| split_list(&t, TAG_SEPARATORS))
                .unwrap_or_default(),
            hastate: field("hastate"),
            ha: v.get("ha").and_then(HaResource::from_value),
        })
    }

    /// Whether HA manages the container: it has an HA resource whose state is not `ignored`
    /// (PVE's `vm_is_ha_managed`; power requests then go through HA, and HA may have moved
    /// it to another node).
    pub fn ha_managed(&self) -> bool {
        let requested_ignored = self
            .ha
            .as_ref()
            .is_some_and(|h| h.state.as_deref() == Some("ignored"));
        self.hastate
            .as_deref()
            .is_some_and(|s| s != "ignored" && !requested_ignored)
    }

    /// Whether the entry carries the `proxops` tag.
    pub fn tagged(&self) -> bool {
        self.tags.iter().any(|t| t == crate::OWNERSHIP_TAG)
    }
}

/// A container's config: every key as text, plus the digest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// Keys and values (`digest` excluded).
    pub keys: BTreeMap<String, String>,
    /// The config digest, for optimistic concurrency on the write.
    pub digest: Option<String>,
}

impl Config {
    /// From the `data` of `GET .../config`.
    pub fn from_value(v: &Value) -> Option<Config> {
        let map = v.as_object()?;
        let mut keys = BTreeMap::new();
        let mut digest = None;
        for (k, v) in map {
            let Some(t) = text(v) else { continue };
            if k == "digest" {
                digest = Some(t);
            } else {
                keys.insert(k.clone(), t);
            }
        }
        Some(Config { keys, digest })
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.keys.get(key).map(String::as_str)
    }
}

/// What the reads of `observe` gave: config and whether the container runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The config.
    pub config: Config,
    /// From `status/current` (the listing's status when that read is missing).
    pub running: bool,
    /// `lock` of `status/current`, when present.
    pub lock: Option<String>,
}

/// The answer of the read whose path ends with `suffix`, as JSON; an error when PVE failed it.
fn read(obs: &Observation, suffix: &str) -> Result<Option<Value>, Vec<Diag>> {
    let Some(r) = obs.reads.iter().find(|r| r.call.path.ends_with(suffix)) else {
        return Ok(None);
    };
    if r.status != 200 {
        return Err(vec![Diag::error(
            "",
            format!(
                "reading {} failed with HTTP {}: {}; check that the container exists and the token may read it (VM.Audit)",
                r.call.path, r.status, r.body
            ),
        )]);
    }
    serde_json::from_str(&r.body).map(Some).map_err(|e| {
        vec![Diag::error(
            "",
            format!("the answer to {} is not JSON: {e}", r.call.path),
        )]
    })
}

/// Read the config (required) and the status (optional) out of an observation.
pub fn observed(obs: &Observation, entry: &Entry) -> Result<Observed, Vec<Diag>> {
    let config = read(obs, "/config")?
        .as_ref()
        .and_then(Config::from_value)
        .ok_or_else(|| {
            vec![Diag::error(
                "",
                format!(
                    "the observation of CT {} has no config read; the host must run the reads observe asked for",
                    entry.vmid
                ),
            )]
        })?;
    let status = read(obs, "/status/current")?;
    let running = status
        .as_ref()
        .and_then(|s| s.get("status"))
        .and_then(Value::as_str)
        .map_or(entry.running, |s| s == "running");
    let lock = status
        .as_ref()
        .and_then(|s| s.get("lock"))
        .and_then(text)
        .filter(|s| !s.is_empty());
    Ok(Observed {
        config,
        running,
        lock,
    })
}
