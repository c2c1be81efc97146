//! Lenient readers for what PVE returns: the `/cluster/resources` entry, the `/config` object
//! and the `/pending` list. PVE prints numbers either as JSON numbers or numeric strings, so every
//! value is read as its wire string.

use std::collections::BTreeMap;

use proxops_kind_sdk::sets;
use serde_json::Value;

/// A value as the string PVE would accept on the wire (numbers printed, booleans as 0/1).
pub fn wire_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_string()),
        _ => None,
    }
}

fn int(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        Value::Bool(b) => Some(u64::from(*b)),
        _ => None,
    }
}

/// A `/cluster/resources` entry of a guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// `type` (`qemu`, `lxc`).
    pub kind: String,
    /// Node.
    pub node: String,
    /// vmid.
    pub vmid: u32,
    /// `status == running`.
    pub running: bool,
    /// `template == 1`.
    pub template: bool,
    /// Tags, lower-cased.
    pub tags: Vec<String>,
    /// `lock`, when set.
    pub lock: Option<String>,
}

impl Resource {
    /// Read an entry; `None` when it is not a guest entry (no node or vmid).
    pub fn from_value(v: &Value) -> Option<Self> {
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let vmid = int(v.get("vmid")).or_else(|| {
            v.get("id")
                .and_then(Value::as_str)
                .and_then(|id| id.rsplit('/').next())
                .and_then(|n| n.parse().ok())
        })?;
        let node = v.get("node").and_then(Value::as_str)?.to_string();
        let tags = v
            .get("tags")
            .and_then(Value::as_str)
            .map(|t| sets::split_list(&t.to_ascii_lowercase(), &[';', ',', ' ']))
            .unwrap_or_default();
        Some(Resource {
            kind,
            node,
            vmid: u32::try_from(vmid).ok()?,
            running: v.get("status").and_then(Value::as_str) == Some("running"),
            template: int(v.get("template")) == Some(1),
            tags,
            lock: v
                .get("lock")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        })
    }
}

/// A `/config` answer as wire strings, keyed by config key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// Every key except `digest`.
    pub keys: BTreeMap<String, String>,
    /// `digest`.
    pub digest: Option<String>,
}

impl Config {
    /// Read a `/config` `data` object.
    pub fn from_value(v: &Value) -> Option<Self> {
        let map = v.as_object()?;
        let mut keys = BTreeMap::new();
        let mut digest = None;
        for (k, v) in map {
            let Some(s) = wire_string(v) else { continue };
            if k == "digest" {
                digest = Some(s);
            } else {
                keys.insert(k.clone(), s);
            }
        }
        Some(Config { keys, digest })
    }

    /// The applied config from a `/pending` list: each row's `value` (rows with only a
    /// pending value are not applied yet); the `digest` row gives the digest.
    pub fn from_pending(v: &Value) -> Option<Self> {
        let mut keys = BTreeMap::new();
        let mut digest = None;
        for row in v.as_array()? {
            let Some(key) = row.get("key").and_then(Value::as_str) else {
                continue;
            };
            let Some(value) = row.get("value").and_then(wire_string) else {
                continue;
            };
            if key == "digest" {
                digest = Some(value);
            } else {
                keys.insert(key.to_string(), value);
            }
        }
        Some(Config { keys, digest })
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.keys.get(key).map(String::as_str)
    }
}

/// One `/pending` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingEntry {
    /// Applied value.
    pub value: Option<String>,
    /// Pending value.
    pub pending: Option<String>,
    /// Pending delete.
    pub delete: bool,
}

/// Read a `/pending` `data` list into the entries that actually have something pending.
pub fn pending_from_value(v: &Value) -> Option<BTreeMap<String, PendingEntry>> {
    let list = v.as_array()?;
    let mut out = BTreeMap::new();
    for item in list {
        let Some(key) = item.get("key").and_then(Value::as_str) else {
            continue;
        };
        let e = PendingEntry {
            value: item.get("value").and_then(wire_string),
            pending: item.get("pending").and_then(wire_string),
            delete: int(item.get("delete")).is_some_and(|d| d > 0),
        };
        if e.pending.is_some() || e.delete {
            out.insert(key.to_string(), e);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resources() {
        let r = Resource::from_value(
            &json!({"id": "qemu/100", "type": "qemu", "vmid": 100, "node": "pve01",
            "status": "running", "tags": "Prod;proxops", "name": "web"}),
        )
        .unwrap();
        assert_eq!(
            (r.vmid, r.node.as_str(), r.running, r.template),
            (100, "pve01", true, false)
        );
        assert_eq!(r.tags, vec!["prod", "proxops"]);
        let r = Resource::from_value(&json!({"id": "qemu/9000", "type": "qemu", "node": "pve01", "status": "stopped", "template": "1"})).unwrap();
        assert_eq!((r.vmid, r.template, r.running), (9000, true, false));
        assert!(r.tags.is_empty());
        assert!(
            Resource::from_value(&json!({"type": "storage", "id": "storage/pve01/local"}))
                .is_none()
        );
    }

    #[test]
    fn configs_and_pending() {
        let c = Config::from_value(
            &json!({"memory": "2048", "cores": 2, "digest": "abc", "agent": "1"}),
        )
        .unwrap();
        assert_eq!(c.get("memory"), Some("2048"));
        assert_eq!(c.get("cores"), Some("2"));
        assert_eq!(c.digest.as_deref(), Some("abc"));
        let p = pending_from_value(&json!([
            {"key": "memory", "value": "2048", "pending": 4096},
            {"key": "cores", "value": 2},
            {"key": "net1", "value": "virtio=BC:24:11:00:00:01,bridge=vmbr0", "delete": 1}
        ]))
        .unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p["memory"].pending.as_deref(), Some("4096"));
        assert!(p["net1"].delete);
    }
}
