//! `resource-limits`: caps on a VM's memory, cores per socket and total vCPUs, per cluster
//! or per node.
//!
//! Settings: `rules`, a list; a rule applies to a VM when its `clusters` (if given) include
//! the VM's cluster and its `nodes` (if given) include `spec.node`. Every rule that applies
//! must hold, so a site-wide rule and a tighter per-node rule combine naturally.
//!
//! ```yaml
//! settings:
//!   rules:
//!     - {max-memory: 64GiB, max-cores: 16}          # everywhere
//!     - {clusters: [lab], max-memory: 8GiB}         # the lab cluster
//!     - {nodes: [pve02], max-vcpus: 4}              # one small node
//! ```
//!
//! Checked kinds: `VM` and `TemplateVM` (fields `spec.memory`, `spec.cpu.cores`,
//! `spec.hardware.sockets`). The plan check applies the same caps to the `memory`, `cores`
//! and `sockets` wire keys an action sets, which also covers values set through `spec.extra`.

use proxops_policy_sdk::size::{format_size, parse_size};
use proxops_policy_sdk::types::Diagnostic;
use proxops_policy_sdk::wit::{ActionView, ManifestView, Verdict};
use proxops_policy_sdk::{Doc, Findings, SitePolicy, object_path, settings_error};
use serde::Deserialize;

const KINDS: &[&str] = &["VM", "TemplateVM"];

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub rules: Vec<Rule>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Rule {
    pub clusters: Option<Vec<String>>,
    pub nodes: Option<Vec<String>>,
    /// A size like `16GiB`.
    pub max_memory: Option<String>,
    pub max_cores: Option<u64>,
    /// Cores times sockets.
    pub max_vcpus: Option<u64>,
}

pub const SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "required": ["rules"],
  "properties": {
    "rules": {
      "type": "array",
      "minItems": 1,
      "items": {
        "type": "object",
        "additionalProperties": false,
        "minProperties": 1,
        "properties": {
          "clusters": {"type": "array", "items": {"type": "string"}},
          "nodes": {"type": "array", "items": {"type": "string"}},
          "max-memory": {"type": "string", "description": "A size such as 16GiB."},
          "max-cores": {"type": "integer", "minimum": 1},
          "max-vcpus": {"type": "integer", "minimum": 1}
        }
      }
    }
  }
}"#;

/// A rule with its memory cap in bytes.
struct Limits<'r> {
    index: usize,
    rule: &'r Rule,
    memory: Option<u64>,
}

impl Rule {
    fn applies(&self, cluster: &str, node: Option<&str>) -> bool {
        let cluster_ok = self
            .clusters
            .as_ref()
            .is_none_or(|c| c.iter().any(|c| c == cluster));
        let node_ok = self
            .nodes
            .as_ref()
            .is_none_or(|n| node.is_some_and(|node| n.iter().any(|x| x == node)));
        cluster_ok && node_ok
    }

    /// Where the rule applies, for messages.
    fn scope(&self, index: usize) -> String {
        let mut parts = Vec::new();
        if let Some(c) = &self.clusters {
            parts.push(format!("clusters {}", c.join(", ")));
        }
        if let Some(n) = &self.nodes {
            parts.push(format!("nodes {}", n.join(", ")));
        }
        if parts.is_empty() {
            format!("rule {index} (everywhere)")
        } else {
            format!("rule {index} ({})", parts.join("; "))
        }
    }
}

pub fn validate_settings(settings: &Settings) -> Result<(), Vec<Diagnostic>> {
    let mut errors = Vec::new();
    if settings.rules.is_empty() {
        errors.push(settings_error("rules", "at least one rule is needed"));
    }
    for (i, r) in settings.rules.iter().enumerate() {
        if let Some(m) = &r.max_memory
            && let Err(e) = parse_size(m)
        {
            errors.push(settings_error(format!("rules[{i}].max-memory"), e));
        }
        if r.max_memory.is_none() && r.max_cores.is_none() && r.max_vcpus.is_none() {
            errors.push(settings_error(
                format!("rules[{i}]"),
                "a rule needs at least one of max-memory, max-cores, max-vcpus",
            ));
        }
        for (key, v) in [("max-cores", r.max_cores), ("max-vcpus", r.max_vcpus)] {
            if v == Some(0) {
                errors.push(settings_error(
                    format!("rules[{i}].{key}"),
                    "must be at least 1",
                ));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn applicable<'s>(settings: &'s Settings, cluster: &str, node: Option<&str>) -> Vec<Limits<'s>> {
    settings
        .rules
        .iter()
        .enumerate()
        .filter(|(_, r)| r.applies(cluster, node))
        .map(|(index, rule)| Limits {
            index,
            rule,
            memory: rule.max_memory.as_deref().and_then(|m| parse_size(m).ok()),
        })
        .collect()
}

/// The values checked, each with where it was found.
#[derive(Default)]
struct Resources {
    memory: Option<(u64, String)>,
    cores: Option<(u64, String)>,
    sockets: Option<(u64, String)>,
}

fn check(limits: &[Limits], r: &Resources, f: &mut Findings) {
    for l in limits {
        let scope = l.rule.scope(l.index);
        if let (Some(max), Some((bytes, path))) = (l.memory, &r.memory)
            && *bytes > max
        {
            f.deny(
                path.clone(),
                format!(
                    "memory {} is above the limit of {} set by {scope}",
                    format_size(*bytes),
                    format_size(max)
                ),
            );
        }
        if let (Some(max), Some((cores, path))) = (l.rule.max_cores, &r.cores)
            && *cores > max
        {
            f.deny(
                path.clone(),
                format!("{cores} cores is above the limit of {max} set by {scope}"),
            );
        }
        if let (Some(max), Some((cores, path))) = (l.rule.max_vcpus, &r.cores) {
            let (sockets, at) = match &r.sockets {
                Some((s, p)) => (*s, p.clone()),
                None => (1, path.clone()),
            };
            if cores * sockets > max {
                f.deny(
                    at,
                    format!(
                        "{cores} cores x {sockets} sockets = {} vCPUs is above the limit of {max} set by {scope}",
                        cores * sockets
                    ),
                );
            }
        }
    }
}

pub fn check_manifest(settings: &Settings, manifest: &ManifestView) -> Verdict {
    let mut f = Findings::new();
    if !KINDS.contains(&manifest.kind.as_str()) {
        return f.verdict();
    }
    let doc = Doc::parse(&manifest.document);
    let limits = applicable(settings, &manifest.cluster, doc.str_at("spec.node"));
    let at = |p: &str| p.to_string();
    let r = Resources {
        // An unparsable size is the kind's error to report, not this policy's.
        memory: doc
            .str_at("spec.memory")
            .and_then(|m| parse_size(m).ok())
            .map(|b| (b, at("spec.memory"))),
        cores: doc
            .u64_at("spec.cpu.cores")
            .map(|c| (c, at("spec.cpu.cores"))),
        sockets: doc
            .u64_at("spec.hardware.sockets")
            .map(|s| (s, at("spec.hardware.sockets"))),
    };
    check(&limits, &r, &mut f);
    f.verdict()
}

pub fn check_plan(settings: &Settings, actions: &[ActionView]) -> Verdict {
    let mut f = Findings::new();
    for a in actions.iter().filter(|a| KINDS.contains(&a.kind.as_str())) {
        let node = a
            .document
            .as_deref()
            .map(Doc::parse)
            .and_then(|d| d.str_at("spec.node").map(str::to_string));
        let limits = applicable(settings, &a.cluster, node.as_deref());
        let value = |key: &str| {
            a.changes
                .iter()
                .filter(|c| c.key == key && !c.sensitive)
                .find_map(|c| c.new.as_deref()?.trim().parse::<u64>().ok())
                .map(|v| (v, object_path(&a.kind, &a.name, key)))
        };
        let r = Resources {
            // The `memory` wire key is in MiB.
            memory: value("memory").map(|(mib, p)| (mib << 20, p)),
            cores: value("cores"),
            sockets: value("sockets"),
        };
        check(&limits, &r, &mut f);
    }
    f.verdict()
}

/// The exported component type.
pub struct Policy;

impl SitePolicy for Policy {
    type Settings = Settings;
    const NAME: &'static str = "resource-limits";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "memory, cores and vCPU caps per cluster or node";
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
        serde_json::from_value(json!({"rules": [
            {"max-memory": "16GiB", "max-cores": 8},
            {"clusters": ["lab"], "max-memory": "4GiB"},
            {"nodes": ["pve02"], "max-vcpus": 4},
            {"clusters": ["prod"], "nodes": ["big"], "max-memory": "1TiB"}
        ]}))
        .expect("settings")
    }

    fn vm(cluster: &str, spec: serde_json::Value) -> ManifestView {
        ManifestView {
            cluster: cluster.into(),
            kind: "VM".into(),
            name: "a".into(),
            document: json!({"kind": "VM", "spec": spec}).to_string(),
        }
    }

    #[test]
    fn manifest_cases() {
        // (case, cluster, spec, denied paths)
        let cases: Vec<(&str, &str, serde_json::Value, Vec<&str>)> = vec![
            (
                "within every limit",
                "prod",
                json!({"node": "pve01", "memory": "8GiB", "cpu": {"cores": 4}}),
                vec![],
            ),
            (
                "site-wide memory cap",
                "prod",
                json!({"node": "pve01", "memory": "32GiB", "cpu": {"cores": 4}}),
                vec!["spec.memory"],
            ),
            (
                "cluster cap is tighter",
                "lab",
                json!({"node": "pve01", "memory": "8GiB", "cpu": {"cores": 2}}),
                vec!["spec.memory"],
            ),
            (
                "cores cap",
                "prod",
                json!({"node": "pve01", "memory": "1GiB", "cpu": {"cores": 12}}),
                vec!["spec.cpu.cores"],
            ),
            (
                "node vCPU cap counts sockets",
                "prod",
                json!({"node": "pve02", "memory": "1GiB", "cpu": {"cores": 2}, "hardware": {"sockets": 4}}),
                vec!["spec.hardware.sockets"],
            ),
            (
                "node vCPU cap without sockets",
                "prod",
                json!({"node": "pve02", "memory": "1GiB", "cpu": {"cores": 6}}),
                vec!["spec.cpu.cores"],
            ),
            (
                "a rule needs both its cluster and its node",
                "lab",
                json!({"node": "big", "memory": "2GiB"}),
                vec![],
            ),
            (
                "several violations at once",
                "lab",
                json!({"node": "pve02", "memory": "64GiB", "cpu": {"cores": 9}}),
                vec![
                    "spec.memory",
                    "spec.memory",
                    "spec.cpu.cores",
                    "spec.cpu.cores",
                ],
            ),
            (
                "a bad size is left to the kind",
                "prod",
                json!({"node": "pve01", "memory": "lots"}),
                vec![],
            ),
        ];
        for (case, cluster, spec, want) in cases {
            let got = check_manifest(&settings(), &vm(cluster, spec));
            let paths: Vec<String> = match got {
                Verdict::Allow => vec![],
                Verdict::Deny(v) => v.into_iter().map(|v| v.path).collect(),
                Verdict::Warn(v) => panic!("{case}: unexpected warn {v:?}"),
            };
            let mut want: Vec<String> = want.into_iter().map(String::from).collect();
            let mut paths = paths;
            want.sort();
            paths.sort();
            assert_eq!(paths, want, "{case}");
        }
        let iso = ManifestView {
            kind: "ISO".into(),
            ..vm("lab", json!({"memory": "99TiB"}))
        };
        assert!(matches!(check_manifest(&settings(), &iso), Verdict::Allow));
    }

    #[test]
    fn plan_checks_wire_keys() {
        let action = |key: &str, new: &str| ActionView {
            cluster: "prod".into(),
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
                new: Some(new.into()),
                sensitive: false,
            }],
            document: Some(json!({"spec": {"node": "pve01"}}).to_string()),
        };
        let s = settings();
        assert!(matches!(
            check_plan(&s, &[action("memory", "8192")]),
            Verdict::Allow
        ));
        assert!(matches!(
            check_plan(&s, &[action("memory", "32768")]),
            Verdict::Deny(v) if v[0].path == "VM/a:memory" && v[0].message.contains("32GiB")
        ));
        assert!(matches!(
            check_plan(&s, &[action("cores", "16")]),
            Verdict::Deny(v) if v[0].path == "VM/a:cores"
        ));
        assert!(matches!(
            check_plan(&s, &[action("name", "x")]),
            Verdict::Allow
        ));
    }

    #[test]
    fn settings_cases() {
        let cases: &[(&str, bool)] = &[
            (r#"{"rules": [{"max-memory": "8GiB"}]}"#, true),
            (r#"{"rules": [{"nodes": ["a"], "max-vcpus": 2}]}"#, true),
            (r#"{"rules": []}"#, false),
            ("{}", false),
            (r#"{"rules": [{"max-memory": "8GB"}]}"#, false),
            (r#"{"rules": [{"clusters": ["a"]}]}"#, false),
            (r#"{"rules": [{"max-cores": 0}]}"#, false),
            (r#"{"rules": [{"max-cpus": 2}]}"#, false),
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
