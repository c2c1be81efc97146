//! Policy settings are checked against the JSON Schema the policy publishes with the
//! `jsonschema` crate (drafts 4 to 2020-12; `$ref` within the schema document, no
//! remote references) before the policy's own `validate-settings` runs.

use serde_json::Value;

/// Every violation as (field path like `rules[0].max-memory`, message).
pub fn validate(schema: &Value, instance: &Value) -> Vec<(String, String)> {
    let validator = match jsonschema::validator_for(schema) {
        Ok(v) => v,
        Err(e) => {
            return vec![(
                String::new(),
                format!("the policy's settings schema is not a valid JSON Schema: {e}"),
            )];
        }
    };
    let mut errors = Vec::new();
    for e in validator.iter_errors(instance) {
        let at = field_path(e.instance_path().as_str());
        // Point at the offending field rather than at the object that holds it.
        match e.kind() {
            jsonschema::error::ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or_default();
                errors.push((join(&at, name), "required field is missing".to_string()));
            }
            jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
                for name in unexpected {
                    errors.push((
                        join(&at, name),
                        "unknown field (not in the policy's settings schema)".to_string(),
                    ));
                }
            }
            _ => errors.push((at, e.to_string())),
        }
    }
    errors.sort();
    errors.dedup();
    errors
}

fn join(at: &str, name: &str) -> String {
    if at.is_empty() {
        name.to_string()
    } else {
        format!("{at}.{name}")
    }
}

/// `/rules/0/max-memory` -> `rules[0].max-memory`.
fn field_path(pointer: &str) -> String {
    let mut out = String::new();
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if !segment.is_empty() && segment.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("[{segment}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&segment);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_cases() {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["rules"],
            "$defs": {"size": {"type": "string", "minLength": 2}},
            "properties": {
                "rules": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "additionalProperties": false,
                    "properties": {
                        "max": {"type": "integer", "minimum": 1, "maximum": 10},
                        "size": {"$ref": "#/$defs/size"},
                        "mode": {"enum": ["a", "b"]}
                    }
                }},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                "nope": false
            }
        });
        // (settings, expected error paths)
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (
                json!({"rules": [{"max": 3, "size": "8G", "mode": "a"}]}),
                vec![],
            ),
            (json!({}), vec!["rules"]),
            (json!({"rules": []}), vec!["rules"]),
            (json!({"rules": [{"max": 0}]}), vec!["rules[0].max"]),
            (json!({"rules": [{"max": 2.5}]}), vec!["rules[0].max"]),
            (json!({"rules": [{"max": 3.0}]}), vec![]),
            (json!({"rules": [{"size": "8"}]}), vec!["rules[0].size"]),
            (json!({"rules": [{"mode": "c"}]}), vec!["rules[0].mode"]),
            (json!({"rules": [{"other": 1}]}), vec!["rules[0].other"]),
            (json!({"rules": [{}], "tags": ["a", "a"]}), vec!["tags"]),
            (json!({"rules": [{}], "either": true}), vec!["either"]),
            (json!({"rules": [{}], "nope": 1}), vec!["nope"]),
            (json!({"rules": [{}], "extra": 1}), vec!["extra"]),
            (json!([]), vec![""]),
        ];
        for (settings, want) in cases {
            let got: Vec<String> = validate(&schema, &settings)
                .into_iter()
                .map(|(p, _)| p)
                .collect();
            assert_eq!(got, want, "{settings}");
        }
        assert!(validate(&json!(true), &json!(1)).is_empty());
        assert!(!validate(&json!({"$ref": "#/$defs/missing"}), &json!(1)).is_empty());
    }
}
