//! Conventions every proxops manifest follows, checked the same way by every bundled kind.
//!
//! * `apiVersion` must be `proxops/v1alpha1`.
//! * `kind` must be the kind the component handles (exact spelling, e.g. `VM`).
//! * `metadata.name` is required and is a DNS label: 1 to 63 characters, lower-case ASCII
//!   letters, digits and `-`, starting with a letter or digit and not ending with `-`. The name
//!   is also the default PVE `name` of a VM and the file name of the manifest, so it must be
//!   valid for all three. `metadata` may also hold `labels` and `annotations` (string maps that
//!   proxops keeps but does not interpret); any other key is an error.
//! * `spec` is a required mapping; the kind checks its fields.
//! * No other top-level key is accepted (`status` is not part of a manifest).

use serde_json::{Map, Value, json};

use crate::check::{Checker, join, type_name};

/// The `apiVersion` of every manifest this version of proxops reads.
pub const API_VERSION: &str = "proxops/v1alpha1";

/// Keys allowed at the top of a manifest.
pub const TOP_KEYS: &[&str] = &["apiVersion", "kind", "metadata", "spec"];

/// Keys allowed under `metadata`.
pub const METADATA_KEYS: &[&str] = &["name", "labels", "annotations"];

/// Longest DNS label.
pub const MAX_NAME_LEN: usize = 63;

/// Why `name` is not a DNS label, or `None` when it is one.
pub fn dns_label_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".into());
    }
    if name.len() > MAX_NAME_LEN {
        return Some(format!(
            "must be at most {MAX_NAME_LEN} characters, got {}",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Some(format!(
            "`{name}` contains `{c}`; use lower-case letters, digits and `-` only (a DNS label)"
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Some(format!(
            "`{name}` must start and end with a letter or digit"
        ));
    }
    None
}

/// Check the parts common to every manifest and return `(metadata.name, spec)`. The `spec`
/// mapping is returned even when other parts have errors so that the kind can report its own
/// findings in the same pass.
pub fn envelope<'a>(
    c: &mut Checker,
    doc: &'a Value,
    kind: &str,
) -> (Option<String>, Option<&'a Map<String, Value>>) {
    let Some(top) = c.object(doc, "", TOP_KEYS) else {
        return (None, None);
    };
    match top.get("apiVersion") {
        None | Some(Value::Null) => c.error(
            "apiVersion",
            format!("is required; expected `{API_VERSION}`"),
        ),
        Some(Value::String(v)) if v == API_VERSION => {}
        Some(Value::String(v)) => {
            c.error("apiVersion", format!("must be `{API_VERSION}`, got `{v}`"))
        }
        Some(other) => c.error(
            "apiVersion",
            format!(
                "expected the string `{API_VERSION}`, got {}",
                type_name(other)
            ),
        ),
    }
    match top.get("kind") {
        None | Some(Value::Null) => c.error("kind", format!("is required; expected `{kind}`")),
        Some(Value::String(v)) if v == kind => {}
        Some(Value::String(v)) => c.error("kind", format!("must be `{kind}`, got `{v}`")),
        Some(other) => c.error(
            "kind",
            format!("expected the string `{kind}`, got {}", type_name(other)),
        ),
    }
    let mut name = None;
    if let Some(meta) = c.object_field(top, "", "metadata", true, METADATA_KEYS) {
        if let Some(n) = c.string(meta, "metadata", "name", true) {
            match dns_label_problem(&n) {
                Some(p) => c.error("metadata.name", p),
                None => name = Some(n),
            }
        }
        for key in ["labels", "annotations"] {
            if let Some(map) = c.field(meta, "metadata", key, false) {
                let path = join("metadata", key);
                match map {
                    Value::Object(m) => {
                        for (k, v) in m {
                            if !v.is_string() {
                                c.error(
                                    join(&path, k),
                                    format!("expected a string, got {}", type_name(v)),
                                );
                            }
                        }
                    }
                    other => c.error(
                        path,
                        format!("expected a mapping of strings, got {}", type_name(other)),
                    ),
                }
            }
        }
    }
    let spec = match top.get("spec") {
        None | Some(Value::Null) => {
            c.error("spec", "is required");
            None
        }
        Some(Value::Object(m)) => Some(m),
        Some(other) => {
            c.error(
                "spec",
                format!("expected a mapping, got {}", type_name(other)),
            );
            None
        }
    };
    (name, spec)
}

/// JSON Schema (draft 2020-12) of a whole manifest of `kind` whose `spec` is `spec_schema`.
pub fn manifest_schema(kind: &str, title: &str, spec_schema: Value) -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("https://proxops.dev/schemas/{API_VERSION}/{}.json", kind.to_ascii_lowercase()),
        "title": title,
        "type": "object",
        "additionalProperties": false,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": API_VERSION, "description": "Manifest schema version."},
            "kind": {"const": kind, "description": "Resource kind."},
            "metadata": {
                "type": "object",
                "additionalProperties": false,
                "required": ["name"],
                "properties": {
                    "name": {
                        "type": "string",
                        "description": "Object name: a DNS label (lower-case letters, digits and `-`, at most 63 characters).",
                        "pattern": "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
                    },
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Free-form labels; kept, not interpreted."},
                    "annotations": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Free-form annotations; kept, not interpreted."}
                }
            },
            "spec": spec_schema
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(doc: Value, expected_name: Option<&str>, expected: &[(&str, &str)]) {
        let mut c = Checker::new();
        let (name, _) = envelope(&mut c, &doc, "VM");
        assert_eq!(name.as_deref(), expected_name, "name of {doc}");
        let got: Vec<(&str, &str)> = c
            .diags
            .iter()
            .map(|d| (d.path.as_str(), d.message.as_str()))
            .collect();
        assert_eq!(got, expected, "diagnostics of {doc}");
    }

    #[test]
    fn envelopes() {
        check(
            json!({"apiVersion": API_VERSION, "kind": "VM", "metadata": {"name": "web-01"}, "spec": {}}),
            Some("web-01"),
            &[],
        );
        check(
            json!({"kind": "VM", "metadata": {"name": "a"}, "spec": {}}),
            Some("a"),
            &[("apiVersion", "is required; expected `proxops/v1alpha1`")],
        );
        check(
            json!({"apiVersion": "v1", "kind": "VM", "metadata": {"name": "a"}, "spec": {}}),
            Some("a"),
            &[("apiVersion", "must be `proxops/v1alpha1`, got `v1`")],
        );
        check(
            json!({"apiVersion": API_VERSION, "kind": "Vm", "metadata": {"name": "a"}, "spec": {}}),
            Some("a"),
            &[("kind", "must be `VM`, got `Vm`")],
        );
        check(
            json!({"apiVersion": API_VERSION, "kind": "VM", "spec": {}}),
            None,
            &[("metadata", "is required")],
        );
        check(
            json!({"apiVersion": API_VERSION, "kind": "VM", "metadata": {}, "spec": {}}),
            None,
            &[("metadata.name", "is required")],
        );
        check(
            json!({"apiVersion": API_VERSION, "kind": "VM", "metadata": {"name": "Web_1"}, "spec": {}}),
            None,
            &[(
                "metadata.name",
                "`Web_1` contains `W`; use lower-case letters, digits and `-` only (a DNS label)",
            )],
        );
        check(
            json!({"apiVersion": API_VERSION, "kind": "VM", "metadata": {"name": "web-"}, "spec": {}}),
            None,
            &[(
                "metadata.name",
                "`web-` must start and end with a letter or digit",
            )],
        );
        check(
            json!({"apiVersion": API_VERSION, "kind": "VM", "metadata": {"name": "a", "nmae": 1}, "spec": []}),
            Some("a"),
            &[
                (
                    "metadata.nmae",
                    "unknown field `nmae`; did you mean `name`?",
                ),
                ("spec", "expected a mapping, got a list"),
            ],
        );
        check(
            json!({"apiVersion": API_VERSION, "kind": "VM", "metadata": {"name": "a"}}),
            Some("a"),
            &[("spec", "is required")],
        );
        check(
            json!({"apiVersion": API_VERSION, "kind": "VM", "metadata": {"name": "a", "labels": {"x": 1}}, "spec": {}, "status": {}}),
            Some("a"),
            &[
                (
                    "status",
                    "unknown field `status`; expected one of `apiVersion`, `kind`, `metadata`, `spec`",
                ),
                ("metadata.labels.x", "expected a string, got an integer"),
            ],
        );
        check(json!([]), None, &[("", "expected a mapping, got a list")]);
    }

    #[test]
    fn dns_labels() {
        for (name, ok) in [
            ("a", true),
            ("web-01", true),
            ("0a", true),
            ("-a", false),
            ("a.b", false),
            ("", false),
        ] {
            assert_eq!(dns_label_problem(name).is_none(), ok, "{name:?}");
        }
        assert!(dns_label_problem(&"a".repeat(63)).is_none());
        assert_eq!(
            dns_label_problem(&"a".repeat(64)).as_deref(),
            Some("must be at most 63 characters, got 64")
        );
    }
}
