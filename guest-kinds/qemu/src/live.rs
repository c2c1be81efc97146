//! Lenient readers for what PVE returns: the `/cluster/resources` entry, the `/config` object
//! and the `/pending` list. PVE prints numbers either as JSON numbers or numeric strings, so every
//! value is read as its wire string.

use std::borrow::Cow;
use std::collections::BTreeMap;

use proxops_kind_sdk::sets;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// A value as the string PVE would accept on the wire (numbers printed, booleans as 0/1).
pub fn wire_string(v: &Value) -> Option<String> {
    Wire::deserialize(v).ok().and_then(|w| w.0)
}

/// A JSON value read straight from the answer as its wire string ([`wire_string`]); null,
/// lists and objects read as absent. The readers below deserialize into it instead of into
/// a [`Value`] tree: plan reads every VM's answer once per cycle, and building the tree
/// (a map per row) was most of that cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wire(pub Option<String>);

impl Wire {
    /// The wire string.
    pub fn as_str(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// The wire string as a non-negative integer (trimmed).
    pub fn int(&self) -> Option<u64> {
        self.0.as_deref().and_then(|s| s.trim().parse().ok())
    }
}

impl<'de> Deserialize<'de> for Wire {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor {
            strings_only: false,
        })
        .map(Wire)
    }
}

/// A JSON string; any other value reads as absent. For the fields PVE types as strings
/// (`node`, `status`, `lock`, a row's `key`, …), as the readers before `Wire` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Text(pub Option<String>);

impl Text {
    fn as_str(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor { strings_only: true })
            .map(Text)
    }
}

/// The visitor methods the readers here share: null reads as absent, an optional value as
/// itself, and a list or an object is consumed and reads as absent.
macro_rules! absent_otherwise {
    () => {
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            while a.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    };
}

/// Reads any JSON value as `Some(wire string)` or `None`, consuming lists and objects.
struct ScalarVisitor {
    strings_only: bool,
}

impl ScalarVisitor {
    fn scalar(&self, printed: impl FnOnce() -> Option<String>) -> Option<String> {
        if self.strings_only { None } else { printed() }
    }
}

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Option<String>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(self.scalar(|| Some(v.to_string())))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(self.scalar(|| Some(v.to_string())))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(self.scalar(|| serde_json::Number::from_f64(v).map(|n| n.to_string())))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(self.scalar(|| Some(if v { "1" } else { "0" }.to_string())))
    }
    absent_otherwise!();
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
    /// `name`, when set.
    pub name: Option<String>,
    /// `hastate`: the HA manager's state of the guest's HA resource; absent for a guest
    /// without one.
    pub hastate: Option<String>,
    /// `ha`: the guest's `/cluster/ha/resources` entry, which the host adds to the entry of a
    /// guest that has one; absent: the guest is no HA resource (or the host did not read it).
    pub ha: Option<HaResource>,
    /// `pool`: the resource pool the guest is in; absent for a guest in none.
    pub pool: Option<String>,
}

/// A `/cluster/ha/resources` entry as PVE returns it, values as wire strings; PVE leaves out
/// the options it was not given.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct HaResource {
    /// `sid` (`vm:100`).
    #[serde(default)]
    pub sid: Wire,
    /// `state` (absent: `started`).
    #[serde(default)]
    pub state: Wire,
    /// `max_restart` (absent: 1).
    #[serde(default)]
    pub max_restart: Wire,
    /// `max_relocate` (absent: 1).
    #[serde(default)]
    pub max_relocate: Wire,
    /// `failback` (absent: 1).
    #[serde(default)]
    pub failback: Wire,
    /// `comment`: where proxops writes its ownership mark.
    #[serde(default)]
    pub comment: Wire,
    /// `digest` of the resources config.
    #[serde(default)]
    pub digest: Wire,
}

impl Resource {
    /// Whether HA manages the guest: it has an HA resource whose state is not `ignored`
    /// (PVE's `vm_is_ha_managed`; power requests then go through HA).
    pub fn ha_managed(&self) -> bool {
        let requested_ignored = self
            .ha
            .as_ref()
            .is_some_and(|h| h.state.as_str() == Some("ignored"));
        self.hastate
            .as_deref()
            .is_some_and(|s| s != "ignored" && !requested_ignored)
    }
}

/// The fields of a `/cluster/resources` entry that [`Resource`] reads, borrowed from the
/// entry's text where they can be: observe and plan read one entry per VM and cycle.
#[derive(serde::Deserialize)]
struct ResourceFields<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Str<'a>,
    #[serde(default, borrow)]
    id: Str<'a>,
    #[serde(default)]
    vmid: Int,
    #[serde(default, borrow)]
    node: Str<'a>,
    #[serde(default, borrow)]
    status: Str<'a>,
    #[serde(default)]
    template: Int,
    #[serde(default, borrow)]
    tags: Str<'a>,
    #[serde(default, borrow)]
    lock: Str<'a>,
    #[serde(default, borrow)]
    name: Str<'a>,
    #[serde(default, borrow)]
    hastate: Str<'a>,
    #[serde(default)]
    ha: Option<HaResource>,
    #[serde(default, borrow)]
    pool: Str<'a>,
}

/// A JSON string, borrowed when it has no escapes; any other value reads as absent (as
/// [`Text`]).
#[derive(Default)]
struct Str<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = Option<Cow<'de, str>>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Some(Cow::Owned(v)))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(None)
            }
            absent_otherwise!();
        }
        d.deserialize_any(StrVisitor).map(Str)
    }
}

/// A JSON value read as [`Wire::int`] reads its wire string, without printing it: a
/// non-negative integer, a numeric string (trimmed), a boolean as 1 or 0; anything else
/// (a float, a negative number, null, a list, an object) is absent.
#[derive(Default)]
struct Int(Option<u64>);

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct IntVisitor;
        impl<'de> Visitor<'de> for IntVisitor {
            type Value = Option<u64>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(v.trim().parse().ok())
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Some(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(u64::try_from(v).ok())
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Some(u64::from(v)))
            }
            absent_otherwise!();
        }
        d.deserialize_any(IntVisitor).map(Int)
    }
}

impl Resource {
    /// Read an entry; `None` when it is not a guest entry (no node or vmid).
    pub fn from_value(v: &Value) -> Option<Self> {
        if !v.is_object() {
            return None;
        }
        Self::from_fields(ResourceFields::deserialize(v).ok()?)
    }

    /// Read an entry from its JSON text; `Err` when it is not JSON, `Ok(None)` when it is not
    /// a guest entry.
    pub fn from_json(text: &str) -> Result<Option<Self>, serde_json::Error> {
        if !text.trim_start().starts_with('{') {
            // Valid JSON that is not an object is no guest entry; anything else is an error.
            return serde_json::from_str::<IgnoredAny>(text).map(|_| None);
        }
        serde_json::from_str(text).map(Self::from_fields)
    }

    fn from_fields(f: ResourceFields<'_>) -> Option<Self> {
        let vmid = f.vmid.0.or_else(|| {
            f.id.0
                .as_deref()
                .and_then(|id| id.rsplit('/').next())
                .and_then(|n| n.parse().ok())
        })?;
        let tags = f
            .tags
            .0
            .map(|t| sets::split_list(&t.to_ascii_lowercase(), &[';', ',', ' ']));
        let set = |s: Option<Cow<'_, str>>| s.filter(|s| !s.is_empty()).map(Cow::into_owned);
        Some(Resource {
            kind: f.kind.0.map(Cow::into_owned).unwrap_or_default(),
            node: f.node.0?.into_owned(),
            vmid: u32::try_from(vmid).ok()?,
            running: f.status.0.as_deref() == Some("running"),
            template: f.template.0 == Some(1),
            tags: tags.unwrap_or_default(),
            lock: set(f.lock.0),
            name: set(f.name.0),
            hastate: set(f.hastate.0),
            ha: f.ha,
            pool: set(f.pool.0),
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
        if !v.is_object() {
            return None;
        }
        Some(Self::from_map(BTreeMap::deserialize(v).ok()?))
    }

    /// Read a `/config` `data` object from its JSON text.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text).map(Self::from_map)
    }

    pub fn from_map(map: BTreeMap<String, Wire>) -> Self {
        let mut keys = BTreeMap::new();
        let mut digest = None;
        for (k, v) in map {
            let Some(s) = v.0 else { continue };
            if k == "digest" {
                digest = Some(s);
            } else {
                keys.insert(k, s);
            }
        }
        Config { keys, digest }
    }

    /// The applied config from `/pending` rows: each row's `value` (rows with only a
    /// pending value are not applied yet); the `digest` row gives the digest.
    pub fn from_pending(rows: &[PendingRow]) -> Self {
        let mut keys = BTreeMap::new();
        let mut digest = None;
        for row in rows {
            let (Some(key), Some(value)) = (row.key.as_str(), row.value.as_str()) else {
                continue;
            };
            if key == "digest" {
                digest = Some(value.to_string());
            } else {
                keys.insert(key.to_string(), value.to_string());
            }
        }
        Config { keys, digest }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.keys.get(key).map(String::as_str)
    }
}

/// One row of a `/pending` answer, as PVE sends it (an object; anything else is an error).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingRow {
    pub key: Text,
    pub value: Wire,
    pub pending: Wire,
    pub delete: Wire,
}

impl<'de> Deserialize<'de> for PendingRow {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(field_identifier, rename_all = "lowercase")]
        enum Field {
            Key,
            Value,
            Pending,
            Delete,
            #[serde(other)]
            Other,
        }
        struct RowVisitor;
        impl<'de> Visitor<'de> for RowVisitor {
            type Value = PendingRow;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a /pending row (an object)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<PendingRow, A::Error> {
                let mut row = PendingRow::default();
                while let Some(field) = a.next_key::<Field>()? {
                    match field {
                        Field::Key => row.key = a.next_value()?,
                        Field::Value => row.value = a.next_value()?,
                        Field::Pending => row.pending = a.next_value()?,
                        Field::Delete => row.delete = a.next_value()?,
                        Field::Other => {
                            a.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(row)
            }
        }
        d.deserialize_map(RowVisitor)
    }
}

/// Read a `/pending` `data` list from its JSON text.
pub fn pending_rows(text: &str) -> Result<Vec<PendingRow>, serde_json::Error> {
    serde_json::from_str(text)
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

/// [`Config::from_pending`] and [`pending_entries`] of `rows` at once, for plan, which
/// reads both of every running VM each cycle: the applied values move out of the rows
/// instead of being copied.
pub fn config_and_pending(rows: Vec<PendingRow>) -> (Config, BTreeMap<String, PendingEntry>) {
    let mut keys = BTreeMap::new();
    let mut digest = None;
    let mut pending = BTreeMap::new();
    for row in rows {
        let Some(key) = row.key.0 else {
            continue;
        };
        let delete = row.delete.int().is_some_and(|d| d > 0);
        if row.pending.0.is_some() || delete {
            let e = PendingEntry {
                value: row.value.0.clone(),
                pending: row.pending.0,
                delete,
            };
            pending.insert(key.clone(), e);
        }
        let Some(value) = row.value.0 else {
            continue;
        };
        if key == "digest" {
            digest = Some(value);
        } else {
            keys.insert(key, value);
        }
    }
    (Config { keys, digest }, pending)
}

/// The entries of `/pending` rows that actually have something pending.
pub fn pending_entries(rows: &[PendingRow]) -> BTreeMap<String, PendingEntry> {
    let mut out = BTreeMap::new();
    for row in rows {
        let Some(key) = row.key.as_str() else {
            continue;
        };
        let delete = row.delete.int().is_some_and(|d| d > 0);
        // Most rows have nothing pending: nothing of theirs is copied.
        if row.pending.0.is_some() || delete {
            let e = PendingEntry {
                value: row.value.0.clone(),
                pending: row.pending.0.clone(),
                delete,
            };
            out.insert(key.to_string(), e);
        }
    }
    out
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

    /// The entry's fields read from its text (borrowed where they can be) as from a tree,
    /// and as the wire strings read them (numbers, numeric strings, booleans as 1/0).
    #[test]
    fn resource_fields_in_every_form() {
        type Fields<'a> = (
            u32,
            bool,
            bool,
            &'a [&'a str],
            Option<&'a str>,
            Option<&'a str>,
        );
        let check = |fields: &str, expected: Option<Fields<'_>>| {
            let text = format!(r#"{{"id": "qemu/100", "node": "pve01", {fields}}}"#);
            let from_text = Resource::from_json(&text).unwrap();
            let from_tree = Resource::from_value(&serde_json::from_str(&text).unwrap());
            assert_eq!(from_text, from_tree, "{text}");
            let got = from_text.as_ref().map(|r| {
                let tags: Vec<&str> = r.tags.iter().map(String::as_str).collect();
                (
                    r.vmid,
                    r.template,
                    r.running,
                    tags,
                    r.lock.as_deref(),
                    r.name.as_deref(),
                )
            });
            let expected = expected.map(|(v, t, r, tags, l, n)| (v, t, r, tags.to_vec(), l, n));
            assert_eq!(got, expected, "{text}");
        };
        let plain = (100, false, false, &[][..], None, None);
        check(r#""vmid": 100"#, Some(plain));
        check(r#""vmid": "100""#, Some(plain));
        check(
            r#""vmid": " 101 ""#,
            Some((101, false, false, &[], None, None)),
        );
        // Not a vmid: the id's number is.
        check(r#""vmid": 101.0"#, Some(plain));
        check(r#""vmid": -1"#, Some(plain));
        check(r#""vmid": null"#, Some(plain));
        check(r#""vmid": [101]"#, Some(plain));
        check(r#""vmid": 5000000000"#, None);
        for template in ["1", r#""1""#, "true"] {
            check(
                &format!(r#""template": {template}"#),
                Some((100, true, false, &[], None, None)),
            );
        }
        for template in ["0", r#""0""#, "false", "null", r#""yes""#, "1.0"] {
            check(&format!(r#""template": {template}"#), Some(plain));
        }
        check(
            r#""status": "running", "tags": "Prod, proxops;x\u0079", "lock": "backup", "name": "we\u0062""#,
            Some((
                100,
                false,
                true,
                &["prod", "proxops", "xy"],
                Some("backup"),
                Some("web"),
            )),
        );
        check(
            r#""status": "run\u006eing", "lock": "", "name": """#,
            Some((100, false, true, &[], None, None)),
        );
        check(
            r#""status": {"running": true}, "type": ["qemu"]"#,
            Some(plain),
        );
    }

    #[test]
    fn wire_strings() {
        let check = |json: &str, expected: Option<&str>| {
            let from_text: Wire = serde_json::from_str(json).unwrap();
            let from_tree = wire_string(&serde_json::from_str(json).unwrap());
            assert_eq!(from_text.0.as_deref(), expected, "{json} (text)");
            assert_eq!(from_tree.as_deref(), expected, "{json} (tree)");
        };
        check(
            r#""virtio=BC:24:11:00:00:01""#,
            Some("virtio=BC:24:11:00:00:01"),
        );
        check(r#""""#, Some(""));
        check("2048", Some("2048"));
        check("-1", Some("-1"));
        check("0.5", Some("0.5"));
        check("true", Some("1"));
        check("false", Some("0"));
        check("null", None);
        check(r#"[1, "a", {"b": [2]}]"#, None);
        check(r#"{"a": {"b": null}}"#, None);
    }

    #[test]
    fn malformed_answers_are_errors_not_empty_configs() {
        assert!(pending_rows(r#"{"key": "memory"}"#).is_err());
        assert!(pending_rows("[1]").is_err());
        assert!(pending_rows(r#"[["memory", "2048"]]"#).is_err());
        assert!(Config::from_json("[]").is_err());
        assert_eq!(Resource::from_json("[]").unwrap(), None);
        assert_eq!(Resource::from_json("null").unwrap(), None);
        assert!(Resource::from_json("{").is_err());
        assert!(Resource::from_json("abc").is_err());
    }

    #[test]
    fn string_fields_read_other_values_as_absent() {
        let r = Resource::from_json(
            r#"{"type": "qemu", "vmid": "100", "node": "pve01", "status": "running", "lock": false, "tags": 7}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!((r.vmid, r.lock, r.tags.len()), (100, None, 0));
        assert_eq!(
            Resource::from_json(r#"{"vmid": 100, "node": 5}"#).unwrap(),
            None
        );
        let rows = pending_rows(r#"[{"key": 1, "value": "x", "pending": "y"}, {"key": "memory", "extra": [1], "value": 2048}]"#).unwrap();
        assert_eq!(pending_entries(&rows).len(), 0);
        assert_eq!(Config::from_pending(&rows).get("memory"), Some("2048"));
        assert_eq!(
            config_and_pending(rows.clone()),
            (Config::from_pending(&rows), pending_entries(&rows))
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
        let rows = pending_rows(
            &json!([
                {"key": "memory", "value": "2048", "pending": 4096},
                {"key": "cores", "value": 2},
                {"key": "net1", "value": "virtio=BC:24:11:00:00:01,bridge=vmbr0", "delete": 1},
                {"key": "net2", "pending": "virtio,bridge=vmbr1"},
                {"key": "digest", "value": "abc"}
            ])
            .to_string(),
        )
        .unwrap();
        let p = pending_entries(&rows);
        assert_eq!(p.len(), 3);
        assert_eq!(
            config_and_pending(rows.clone()),
            (Config::from_pending(&rows), p.clone())
        );
        let c = Config::from_pending(&rows);
        assert_eq!(
            (c.get("cores"), c.digest.as_deref()),
            (Some("2"), Some("abc"))
        );
        assert_eq!(p["memory"].pending.as_deref(), Some("4096"));
        assert!(p["net1"].delete);
    }
}
