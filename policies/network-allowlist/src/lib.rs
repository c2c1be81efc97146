//! `network-allowlist`: VM network interfaces may use only the listed bridges, and on each
//! bridge only the listed VLAN tags.
//!
//! ```yaml
//! settings:
//!   bridges:
//!     - {name: vmbr0, vlans: ["10-99", "200"]}   # tagged 10..99 or 200, or untagged
//!     - {name: vmbr1, untagged: false}             # any tag, never untagged
//!     - {name: vmbr9, vlans: []}                   # untagged only
//! ```
//!
//! `vlans` absent means any tag; `untagged` (default true) allows a NIC without a tag.
//! The manifest check reads `spec.networks[]`; the plan check reads the `netN` wire keys an
//! action sets (`virtio=…,bridge=vmbr0,tag=20`), which also covers `spec.extra`.

use proxops_policy_sdk::types::Diagnostic;
use proxops_policy_sdk::wit::{ActionView, ManifestView, Verdict};
use proxops_policy_sdk::{Doc, Findings, SitePolicy, object_path, settings_error};
use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub bridges: Vec<Bridge>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Bridge {
    pub name: String,
    /// Tags or ranges: `"20"`, `"100-199"` (numbers are accepted too).
    #[serde(default)]
    pub vlans: Option<Vec<VlanSpec>>,
    #[serde(default = "yes")]
    pub untagged: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum VlanSpec {
    Tag(u64),
    Text(String),
}

pub const SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "required": ["bridges"],
  "properties": {
    "bridges": {
      "type": "array",
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["name"],
        "properties": {
          "name": {"type": "string", "minLength": 1},
          "vlans": {"type": "array", "items": {"type": ["integer", "string"]},
                    "description": "Allowed tags and ranges such as 100-199; absent: any tag."},
          "untagged": {"type": "boolean", "description": "Allow a NIC without a tag (default true)."}
        }
      }
    }
  }
}"#;

/// `(low, high)` of one VLAN entry.
fn range(spec: &VlanSpec) -> Result<(u64, u64), String> {
    let parse = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|_| format!("`{s}` is not a VLAN tag"))
    };
    let (lo, hi) = match spec {
        VlanSpec::Tag(n) => (*n, *n),
        VlanSpec::Text(t) => match t.split_once('-') {
            Some((a, b)) => (parse(a)?, parse(b)?),
            None => {
                let n = parse(t)?;
                (n, n)
            }
        },
    };
    if !(1..=4094).contains(&lo) || !(1..=4094).contains(&hi) || lo > hi {
        return Err(format!(
            "`{}` is not a VLAN range within 1-4094",
            match spec {
                VlanSpec::Tag(n) => n.to_string(),
                VlanSpec::Text(t) => t.clone(),
            }
        ));
    }
    Ok((lo, hi))
}

pub fn validate_settings(settings: &Settings) -> Result<(), Vec<Diagnostic>> {
    let mut errors = Vec::new();
    for (i, b) in settings.bridges.iter().enumerate() {
        for (j, v) in b.vlans.iter().flatten().enumerate() {
            if let Err(e) = range(v) {
                errors.push(settings_error(format!("bridges[{i}].vlans[{j}]"), e));
            }
        }
        if settings.bridges[..i].iter().any(|o| o.name == b.name) {
            errors.push(settings_error(
                format!("bridges[{i}].name"),
                format!("bridge `{}` is listed twice", b.name),
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Why `bridge` with `tag` is refused, or `None` when allowed; the `bool` says whether the
/// problem is the bridge (true) or the tag (false).
fn refusal(settings: &Settings, bridge: &str, tag: Option<u64>) -> Option<(bool, String)> {
    let Some(b) = settings.bridges.iter().find(|b| b.name == bridge) else {
        let allowed: Vec<&str> = settings.bridges.iter().map(|b| b.name.as_str()).collect();
        return Some((
            true,
            format!(
                "bridge `{bridge}` is not allowed; allowed: {}",
                if allowed.is_empty() {
                    "none".to_string()
                } else {
                    allowed.join(", ")
                }
            ),
        ));
    };
    match (tag, &b.vlans) {
        (None, _) if b.untagged => None,
        (None, _) => Some((
            false,
            format!("bridge `{bridge}` needs a VLAN tag; untagged NICs are not allowed on it"),
        )),
        (Some(_), None) => None,
        (Some(t), Some(list)) => {
            let ok = list
                .iter()
                .filter_map(|v| range(v).ok())
                .any(|(lo, hi)| (lo..=hi).contains(&t));
            if ok {
                None
            } else {
                let shown: Vec<String> = list
                    .iter()
                    .map(|v| match v {
                        VlanSpec::Tag(n) => n.to_string(),
                        VlanSpec::Text(s) => s.clone(),
                    })
                    .collect();
                Some((
                    false,
                    format!(
                        "VLAN {t} is not allowed on bridge `{bridge}`; allowed: {}",
                        if shown.is_empty() {
                            "untagged only".to_string()
                        } else {
                            shown.join(", ")
                        }
                    ),
                ))
            }
        }
    }
}

pub fn check_manifest(settings: &Settings, manifest: &ManifestView) -> Verdict {
    let doc = Doc::parse(&manifest.document);
    let mut f = Findings::new();
    for (i, nic) in doc.list_at("spec.networks").iter().enumerate() {
        let nic = Doc(nic.clone());
        let Some(bridge) = nic.str_at("bridge") else {
            continue;
        };
        if let Some((on_bridge, message)) = refusal(settings, bridge, nic.u64_at("vlan")) {
            let field = if on_bridge || nic.get("vlan").is_none() {
                "bridge"
            } else {
                "vlan"
            };
            f.deny(format!("spec.networks[{i}].{field}"), message);
        }
    }
    f.verdict()
}

/// `bridge` and `tag` of a PVE `netN` value such as `virtio=AA:…,bridge=vmbr0,tag=20`.
fn wire_nic(value: &str) -> (Option<&str>, Option<u64>) {
    let mut bridge = None;
    let mut tag = None;
    for part in value.split(',') {
        match part.split_once('=') {
            Some(("bridge", b)) => bridge = Some(b),
            Some(("tag", t)) => tag = t.parse().ok(),
            _ => {}
        }
    }
    (bridge, tag)
}

fn is_nic_key(key: &str) -> bool {
    key.strip_prefix("net")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

pub fn check_plan(settings: &Settings, actions: &[ActionView]) -> Verdict {
    let mut f = Findings::new();
    for a in actions {
        for c in a
            .changes
            .iter()
            .filter(|c| is_nic_key(&c.key) && !c.sensitive)
        {
            let Some(value) = c.new.as_deref() else {
                continue;
            };
            let (Some(bridge), tag) = wire_nic(value) else {
                continue;
            };
            if let Some((_, message)) = refusal(settings, bridge, tag) {
                f.deny(object_path(&a.kind, &a.name, &c.key), message);
            }
        }
    }
    f.verdict()
}

/// The exported component type.
pub struct Policy;

impl SitePolicy for Policy {
    type Settings = Settings;
    const NAME: &'static str = "network-allowlist";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "only listed bridges and VLAN ranges";
    const SCHEMA: &'static str = SCHEMA;

    fn validate_settings(settings: &Settings) -> Result<(), Vec<Diagnostic>> {
        validate_settings(settings)
    }

    fn check_manifest(settings: &Settings, manifest: &ManifestView) -> Verdict {
        check_manifest(settings, manifest)
    }

    fn check_plan(settings: &Settings, actions: &[ActionView]) -> Verdict {
        check_plan(settings, actions)
    }
}

#[cfg(target_arch = "wasm32")]
proxops_policy_sdk::export_policy!(Policy);

#[cfg(test)]
mod tests {
    use super::*;
    use proxops_policy_sdk::types::{Change, Operation};
    use proxops_policy_sdk::wit::Guest;
    use serde_json::json;

    fn settings() -> Settings {
        serde_json::from_value(json!({"bridges": [
            {"name": "vmbr0", "vlans": ["10-99", 200]},
            {"name": "vmbr1", "untagged": false},
            {"name": "vmbr9", "vlans": []}
        ]}))
        .expect("settings")
    }

    #[test]
    fn manifest_cases() {
        // (case, networks, denied paths)
        let cases: Vec<(&str, serde_json::Value, Vec<&str>)> = vec![
            ("untagged on vmbr0", json!([{"bridge": "vmbr0"}]), vec![]),
            (
                "tag in range",
                json!([{"bridge": "vmbr0", "vlan": 20}]),
                vec![],
            ),
            (
                "range bounds",
                json!([{"bridge": "vmbr0", "vlan": 10}, {"bridge": "vmbr0", "vlan": 99}]),
                vec![],
            ),
            (
                "single tag",
                json!([{"bridge": "vmbr0", "vlan": 200}]),
                vec![],
            ),
            (
                "tag out of range",
                json!([{"bridge": "vmbr0", "vlan": 100}]),
                vec!["spec.networks[0].vlan"],
            ),
            (
                "unknown bridge",
                json!([{"bridge": "vmbr0"}, {"bridge": "vmbr5", "vlan": 20}]),
                vec!["spec.networks[1].bridge"],
            ),
            (
                "any tag on vmbr1",
                json!([{"bridge": "vmbr1", "vlan": 4000}]),
                vec![],
            ),
            (
                "untagged refused on vmbr1",
                json!([{"bridge": "vmbr1"}]),
                vec!["spec.networks[0].bridge"],
            ),
            (
                "no tag allowed on vmbr9",
                json!([{"bridge": "vmbr9", "vlan": 5}]),
                vec!["spec.networks[0].vlan"],
            ),
            ("untagged on vmbr9", json!([{"bridge": "vmbr9"}]), vec![]),
            ("no networks", json!(null), vec![]),
        ];
        for (case, nets, want) in cases {
            let m = ManifestView {
                cluster: "lab".into(),
                kind: "VM".into(),
                name: "a".into(),
                document: json!({"kind": "VM", "spec": {"networks": nets}}).to_string(),
            };
            let paths: Vec<String> = match check_manifest(&settings(), &m) {
                Verdict::Allow => vec![],
                Verdict::Deny(v) => v.into_iter().map(|v| v.path).collect(),
                Verdict::Warn(v) => panic!("{case}: warn {v:?}"),
            };
            assert_eq!(paths, want, "{case}");
        }
    }

    #[test]
    fn plan_reads_wire_keys() {
        let action = |key: &str, new: Option<&str>| ActionView {
            cluster: "lab".into(),
            kind: "VM".into(),
            name: "a".into(),
            operation: Operation::Update,
            summary: "update".into(),
            destructive: false,
            requires_stop: false,
            running: false,
            changes: vec![Change {
                key: key.into(),
                old: None,
                new: new.map(Into::into),
                sensitive: false,
            }],
            document: None,
        };
        let s = settings();
        let cases: Vec<(&str, Option<&str>, Option<&str>)> = vec![
            (
                "net0",
                Some("virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=20"),
                None,
            ),
            (
                "net1",
                Some("virtio,bridge=vmbr0,tag=150"),
                Some("VM/a:net1"),
            ),
            ("net0", Some("e1000,bridge=vmbr7"), Some("VM/a:net0")),
            ("net0", None, None),
            ("netx", Some("bridge=vmbr7"), None),
            ("name", Some("bridge=vmbr7"), None),
        ];
        for (key, new, want) in cases {
            let got = check_plan(&s, &[action(key, new)]);
            match (want, got) {
                (None, Verdict::Allow) => {}
                (Some(p), Verdict::Deny(v)) => assert_eq!(v[0].path, p),
                (w, g) => panic!("{key} {new:?}: want {w:?}, got {g:?}"),
            }
        }
    }

    #[test]
    fn settings_cases() {
        let cases: &[(&str, bool)] = &[
            (r#"{"bridges": [{"name": "vmbr0"}]}"#, true),
            (
                r#"{"bridges": [{"name": "vmbr0", "vlans": ["1-4094", 7]}]}"#,
                true,
            ),
            (
                r#"{"bridges": [{"name": "vmbr0", "vlans": ["0-10"]}]}"#,
                false,
            ),
            (
                r#"{"bridges": [{"name": "vmbr0", "vlans": ["20-10"]}]}"#,
                false,
            ),
            (r#"{"bridges": [{"name": "vmbr0", "vlans": ["x"]}]}"#, false),
            (
                r#"{"bridges": [{"name": "vmbr0"}, {"name": "vmbr0"}]}"#,
                false,
            ),
            (r#"{"bridges": [{"vlans": []}]}"#, false),
        ];
        for (json, ok) in cases {
            assert_eq!(
                <Policy as Guest>::validate_settings(json.to_string()).is_ok(),
                *ok,
                "{json}"
            );
        }
        serde_json::from_str::<serde_json::Value>(SCHEMA).expect("schema is JSON");
    }
}
