//! `approve-destructive`: no destructive action without an explicit approval.
//!
//! An action needs approval when it destroys something (`destructive`, every `delete`) or
//! needs a running VM stopped to apply (`requires-stop` on a running object). It is approved
//! when the object's manifest carries the annotation (default
//! `proxops.io/approve-destructive`) with a non-empty value other than `false`, e.g. a ticket
//! number or a reason; an approved action is reported as a warning that quotes the approval,
//! so it stays visible in the plan. Remove the annotation once the change is applied.
//!
//! A prune (an object whose manifest was removed) has no manifest to annotate: list it as
//! `Kind/name` in `approved-deletes` instead.
//!
//! ```yaml
//! settings:
//!   annotation: proxops.io/approve-destructive     # default
//!   approved-deletes: [VM/old-runner]
//! ```

use proxops_policy_sdk::types::{Diagnostic, Operation};
use proxops_policy_sdk::wit::{ActionView, Verdict};
use proxops_policy_sdk::{Doc, Findings, SitePolicy, object_path, settings_error};
use serde::Deserialize;

pub const DEFAULT_ANNOTATION: &str = "proxops.io/approve-destructive";

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Settings {
    pub annotation: String,
    pub approved_deletes: Vec<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            annotation: DEFAULT_ANNOTATION.into(),
            approved_deletes: Vec::new(),
        }
    }
}

pub const SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "annotation": {"type": "string", "minLength": 1,
                   "description": "Annotation that approves destructive actions on its object."},
    "approved-deletes": {"type": "array", "items": {"type": "string"},
                         "description": "Kind/name of pruned objects whose deletion is approved."}
  }
}"#;

pub fn validate_settings(settings: &Settings) -> Result<(), Vec<Diagnostic>> {
    let mut errors = Vec::new();
    if settings.annotation.trim().is_empty() {
        errors.push(settings_error("annotation", "must not be empty"));
    }
    for (i, d) in settings.approved_deletes.iter().enumerate() {
        let ok = d
            .split_once('/')
            .is_some_and(|(k, n)| !k.is_empty() && !n.is_empty() && !n.contains('/'));
        if !ok {
            errors.push(settings_error(
                format!("approved-deletes[{i}]"),
                format!("`{d}` is not Kind/name, e.g. VM/old-runner"),
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Why `a` needs approval, or `None`.
fn needs_approval(a: &ActionView) -> Option<&'static str> {
    if a.operation == Operation::Delete {
        Some("deletes the object")
    } else if a.destructive {
        Some("destroys data")
    } else if a.requires_stop && a.running {
        Some("stops the running VM")
    } else {
        None
    }
}

pub fn check_plan(settings: &Settings, actions: &[ActionView]) -> Verdict {
    let mut f = Findings::new();
    for a in actions {
        let Some(why) = needs_approval(a) else {
            continue;
        };
        let id = format!("{}/{}", a.kind, a.name);
        match a.document.as_deref().map(Doc::parse) {
            Some(doc) => {
                let field = format!("metadata.annotations.{}", settings.annotation);
                match doc
                    .annotation(&settings.annotation)
                    .map(str::trim)
                    .filter(|v| !v.is_empty() && *v != "false")
                {
                    Some(approval) => f.warn(
                        object_path(&a.kind, &a.name, &field),
                        format!("`{}` {why}; approved: {approval}", a.summary),
                    ),
                    None => f.deny(
                        object_path(&a.kind, &a.name, &field),
                        format!(
                            "`{}` {why}; to approve it, annotate the manifest with {}: <reason or ticket>",
                            a.summary, settings.annotation
                        ),
                    ),
                }
            }
            None if settings.approved_deletes.contains(&id) => f.warn(
                object_path(&a.kind, &a.name, ""),
                format!("`{}` {why}; approved in approved-deletes", a.summary),
            ),
            None => f.deny(
                object_path(&a.kind, &a.name, ""),
                format!(
                    "`{}` {why} and has no manifest to approve it; add `{id}` to this policy's approved-deletes",
                    a.summary
                ),
            ),
        }
    }
    f.verdict()
}

/// The exported component type.
pub struct Policy;

impl SitePolicy for Policy {
    type Settings = Settings;
    const NAME: &'static str = "approve-destructive";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "destructive actions and stops of running VMs need an approval annotation";
    const SCHEMA: &'static str = SCHEMA;

    fn validate_settings(settings: &Settings) -> Result<(), Vec<Diagnostic>> {
        validate_settings(settings)
    }

    // Manifests alone destroy nothing; only the plan knows (the default allows).

    fn check_plan(settings: &Settings, actions: &[ActionView]) -> Verdict {
        check_plan(settings, actions)
    }
}

#[cfg(target_arch = "wasm32")]
proxops_policy_sdk::export_policy!(Policy);

#[cfg(test)]
mod tests {
    use super::*;
    use proxops_policy_sdk::wit::Guest;
    use serde_json::json;

    struct Case {
        name: &'static str,
        operation: Operation,
        destructive: bool,
        requires_stop: bool,
        running: bool,
        annotation: Option<&'static str>,
        has_manifest: bool,
        /// "allow", "warn" or "deny"
        want: &'static str,
    }

    const fn case(name: &'static str, operation: Operation, want: &'static str) -> Case {
        Case {
            name,
            operation,
            destructive: false,
            requires_stop: false,
            running: false,
            annotation: None,
            has_manifest: true,
            want,
        }
    }

    fn action(c: &Case) -> ActionView {
        let mut meta = json!({"name": "web"});
        if let Some(a) = c.annotation {
            meta["annotations"] = json!({ DEFAULT_ANNOTATION: a });
        }
        ActionView {
            cluster: "lab".into(),
            kind: "VM".into(),
            name: if c.has_manifest { "web" } else { "old" }.into(),
            operation: c.operation,
            summary: "do it".into(),
            destructive: c.destructive,
            requires_stop: c.requires_stop,
            running: c.running,
            changes: Vec::new(),
            document: c
                .has_manifest
                .then(|| json!({"kind": "VM", "metadata": meta}).to_string()),
        }
    }

    #[test]
    fn plan_cases() {
        let cases = [
            case("create is fine", Operation::Create, "allow"),
            case("plain update is fine", Operation::Update, "allow"),
            Case {
                requires_stop: true,
                ..case(
                    "stop needed but the VM is stopped",
                    Operation::Update,
                    "allow",
                )
            },
            Case {
                requires_stop: true,
                running: true,
                ..case("stop of a running VM", Operation::Update, "deny")
            },
            Case {
                requires_stop: true,
                running: true,
                annotation: Some("CHG-42"),
                ..case("approved stop", Operation::Update, "warn")
            },
            Case {
                destructive: true,
                ..case("disk removal", Operation::Update, "deny")
            },
            Case {
                destructive: true,
                annotation: Some("false"),
                ..case("annotation false is no approval", Operation::Update, "deny")
            },
            Case {
                destructive: true,
                annotation: Some("  "),
                ..case("blank annotation is no approval", Operation::Update, "deny")
            },
            case("delete with manifest", Operation::Delete, "deny"),
            Case {
                has_manifest: false,
                ..case("prune", Operation::Delete, "deny")
            },
            Case {
                has_manifest: false,
                ..case("approved prune", Operation::Delete, "warn")
            },
        ];
        for c in &cases {
            let settings = Settings {
                approved_deletes: if c.name == "approved prune" {
                    vec!["VM/old".into()]
                } else {
                    vec![]
                },
                ..Settings::default()
            };
            let got = check_plan(&settings, &[action(c)]);
            let word = match &got {
                Verdict::Allow => "allow",
                Verdict::Warn(_) => "warn",
                Verdict::Deny(_) => "deny",
            };
            assert_eq!(word, c.want, "{}: {got:?}", c.name);
            if let Verdict::Deny(v) | Verdict::Warn(v) = &got {
                let want_path = if c.has_manifest {
                    format!("VM/web:metadata.annotations.{DEFAULT_ANNOTATION}")
                } else {
                    "VM/old".to_string()
                };
                assert_eq!(v[0].path, want_path, "{}", c.name);
            }
        }
    }

    #[test]
    fn custom_annotation() {
        let settings = Settings {
            annotation: "example.com/ok".into(),
            ..Settings::default()
        };
        let mut a = action(&Case {
            destructive: true,
            ..case("x", Operation::Update, "")
        });
        a.document = Some(
            json!({"metadata": {"annotations": {"example.com/ok": "yes", DEFAULT_ANNOTATION: "x"}}})
                .to_string(),
        );
        assert!(matches!(
            check_plan(&settings, &[a.clone()]),
            Verdict::Warn(_)
        ));
        a.document =
            Some(json!({"metadata": {"annotations": {DEFAULT_ANNOTATION: "x"}}}).to_string());
        assert!(matches!(check_plan(&settings, &[a]), Verdict::Deny(_)));
    }

    #[test]
    fn settings_cases() {
        let cases: &[(&str, bool)] = &[
            ("{}", true),
            (r#"{"approved-deletes": ["VM/a", "ISO/b"]}"#, true),
            (r#"{"approved-deletes": ["a"]}"#, false),
            (r#"{"approved-deletes": ["VM/"]}"#, false),
            (r#"{"annotation": ""}"#, false),
            (r#"{"approve": true}"#, false),
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
