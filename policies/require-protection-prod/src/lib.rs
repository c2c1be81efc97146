//! `require-protection-prod`: a VM tagged `prod` must have PVE's protection flag set
//! (`spec.options.protection: true`, wire `protection=1`), so that neither a person in the
//! web UI nor a plan can remove it or its disks by accident.
//!
//! Settings (all optional):
//! - `tags`: tags that mark production (default `["prod"]`, compared case-insensitively);
//! - `kinds`: kinds checked (default `["VM"]`).
//!
//! The manifest check is the rule; the plan check also denies an action that would turn
//! protection off on such a VM (e.g. a `protection` change to `0` through `spec.extra`).

use proxops_policy_sdk::types::Diagnostic;
use proxops_policy_sdk::wit::{ActionView, ManifestView, Verdict};
use proxops_policy_sdk::{Doc, Findings, SitePolicy, object_path, settings_error};
use serde::Deserialize;

/// The settings, with their defaults.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub tags: Vec<String>,
    pub kinds: Vec<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            tags: vec!["prod".into()],
            kinds: vec!["VM".into()],
        }
    }
}

pub const SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "tags": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1,
             "description": "Tags that mark a production VM (case-insensitive)."},
    "kinds": {"type": "array", "items": {"type": "string", "minLength": 1},
              "description": "Kinds checked; default [VM]."}
  }
}"#;

pub fn validate_settings(settings: &Settings) -> Result<(), Vec<Diagnostic>> {
    let mut errors = Vec::new();
    for (i, t) in settings.tags.iter().enumerate() {
        if t.trim().is_empty() || t.contains(';') || t.contains(',') {
            errors.push(settings_error(
                format!("tags[{i}]"),
                format!("`{t}` is not a PVE tag"),
            ));
        }
    }
    if settings.tags.is_empty() {
        errors.push(settings_error(
            "tags",
            "at least one tag is needed, or the policy checks nothing",
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The production tag `doc` carries, if any.
fn prod_tag(settings: &Settings, kind: &str, doc: &Doc) -> Option<String> {
    if !settings.kinds.iter().any(|k| k == kind) {
        return None;
    }
    let tags = doc.tags();
    settings
        .tags
        .iter()
        .map(|t| t.to_ascii_lowercase())
        .find(|t| tags.contains(t))
}

pub fn check_manifest(settings: &Settings, manifest: &ManifestView) -> Verdict {
    let doc = Doc::parse(&manifest.document);
    let mut f = Findings::new();
    if let Some(tag) = prod_tag(settings, &manifest.kind, &doc)
        && doc.bool_at("spec.options.protection") != Some(true)
    {
        f.deny(
            "spec.options.protection",
            format!(
                "{} {} is tagged `{tag}`: set spec.options.protection: true (PVE protection=1)",
                manifest.kind, manifest.name
            ),
        );
    }
    f.verdict()
}

pub fn check_plan(settings: &Settings, actions: &[ActionView]) -> Verdict {
    let mut f = Findings::new();
    for a in actions {
        let Some(doc) = a.document.as_deref().map(Doc::parse) else {
            continue;
        };
        let Some(tag) = prod_tag(settings, &a.kind, &doc) else {
            continue;
        };
        for c in a.changes.iter().filter(|c| c.key == "protection") {
            if c.new.as_deref().is_none_or(|v| v == "0") {
                f.deny(
                    object_path(&a.kind, &a.name, "protection"),
                    format!(
                        "`{}` would turn protection off on a VM tagged `{tag}`",
                        a.summary
                    ),
                );
            }
        }
    }
    f.verdict()
}

/// The exported component type.
pub struct Policy;

impl SitePolicy for Policy {
    type Settings = Settings;
    const NAME: &'static str = "require-protection-prod";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "VMs tagged prod must set protection=1";
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

    fn manifest(doc: serde_json::Value) -> ManifestView {
        ManifestView {
            cluster: "lab".into(),
            kind: doc["kind"].as_str().unwrap_or("VM").into(),
            name: "web".into(),
            document: doc.to_string(),
        }
    }

    /// (case, settings, manifest, denied path)
    #[test]
    fn manifest_cases() {
        let custom = Settings {
            tags: vec!["Critical".into()],
            kinds: vec!["VM".into(), "TemplateVM".into()],
        };
        let cases: Vec<(&str, Settings, serde_json::Value, Option<&str>)> = vec![
            (
                "prod without protection",
                Settings::default(),
                json!({"kind": "VM", "spec": {"tags": ["web", "prod"]}}),
                Some("spec.options.protection"),
            ),
            (
                "prod with protection false",
                Settings::default(),
                json!({"kind": "VM", "spec": {"tags": ["prod"], "options": {"protection": false}}}),
                Some("spec.options.protection"),
            ),
            (
                "prod with protection",
                Settings::default(),
                json!({"kind": "VM", "spec": {"tags": ["prod"], "options": {"protection": true}}}),
                None,
            ),
            (
                "tag case does not matter",
                Settings::default(),
                json!({"kind": "VM", "spec": {"tags": ["PROD"]}}),
                Some("spec.options.protection"),
            ),
            (
                "untagged VM",
                Settings::default(),
                json!({"kind": "VM", "spec": {"tags": ["web"]}}),
                None,
            ),
            (
                "other kinds are not checked by default",
                Settings::default(),
                json!({"kind": "TemplateVM", "spec": {"tags": ["prod"]}}),
                None,
            ),
            (
                "custom tag and kinds",
                custom.clone(),
                json!({"kind": "TemplateVM", "spec": {"tags": ["critical"]}}),
                Some("spec.options.protection"),
            ),
            (
                "custom tag: prod is no longer special",
                custom,
                json!({"kind": "VM", "spec": {"tags": ["prod"]}}),
                None,
            ),
        ];
        for (case, settings, doc, want) in cases {
            let got = check_manifest(&settings, &manifest(doc));
            match (want, got) {
                (None, Verdict::Allow) => {}
                (Some(path), Verdict::Deny(v)) => {
                    assert_eq!(v[0].path, path, "{case}");
                    assert!(v[0].message.contains("protection"), "{case}");
                }
                (want, got) => panic!("{case}: want {want:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn plan_denies_turning_protection_off() {
        let action = |tags: serde_json::Value, new: Option<&str>| ActionView {
            cluster: "lab".into(),
            kind: "VM".into(),
            name: "web".into(),
            operation: Operation::Update,
            summary: "update VM 101".into(),
            destructive: false,
            requires_stop: false,
            running: true,
            changes: vec![Change {
                key: "protection".into(),
                old: Some("1".into()),
                new: new.map(Into::into),
                sensitive: false,
            }],
            document: Some(json!({"kind": "VM", "spec": {"tags": tags}}).to_string()),
        };
        let s = Settings::default();
        assert!(matches!(
            check_plan(&s, &[action(json!(["prod"]), Some("0"))]),
            Verdict::Deny(v) if v[0].path == "VM/web:protection"
        ));
        assert!(matches!(
            check_plan(&s, &[action(json!(["prod"]), None)]),
            Verdict::Deny(_)
        ));
        assert!(matches!(
            check_plan(&s, &[action(json!(["prod"]), Some("1"))]),
            Verdict::Allow
        ));
        assert!(matches!(
            check_plan(&s, &[action(json!(["dev"]), Some("0"))]),
            Verdict::Allow
        ));
    }

    #[test]
    fn settings_cases() {
        let cases: &[(&str, bool)] = &[
            ("{}", true),
            (r#"{"tags": ["prod", "critical"]}"#, true),
            (r#"{"tags": []}"#, false),
            (r#"{"tags": ["a;b"]}"#, false),
            (r#"{"unknown": 1}"#, false),
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
