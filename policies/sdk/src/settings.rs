//! Settings: the host passes the `settings:` mapping of `proxops.yaml` as JSON text, to
//! `validate-settings` once at load and to every check. An absent mapping arrives as `{}`.

use serde::de::DeserializeOwned;

use crate::types::{Diagnostic, Severity};

/// A settings error at `path` (a field path like `rules[0].max-memory`, empty for the whole).
pub fn settings_error(path: impl Into<String>, message: impl Into<String>) -> Diagnostic {
    Diagnostic {
        path: path.into(),
        message: message.into(),
        severity: Severity::Error,
    }
}

/// Deserialize the settings JSON into `T`; empty text and `null` mean `{}`. Serde's message
/// names the field and what was expected; the location is carried in the message.
pub fn parse_settings<T: DeserializeOwned>(json: &str) -> Result<T, Vec<Diagnostic>> {
    let text = json.trim();
    let text = if text.is_empty() || text == "null" {
        "{}"
    } else {
        text
    };
    serde_json::from_str(text)
        .map_err(|e| vec![settings_error("", format!("invalid settings: {e}"))])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, serde::Deserialize, PartialEq)]
    #[serde(default, deny_unknown_fields)]
    struct S {
        tags: Vec<String>,
    }

    #[test]
    fn reads_settings() {
        let cases: &[(&str, Option<S>)] = &[
            ("", Some(S::default())),
            ("null", Some(S::default())),
            ("{}", Some(S::default())),
            (
                r#"{"tags": ["a"]}"#,
                Some(S {
                    tags: vec!["a".into()],
                }),
            ),
            (r#"{"tagz": []}"#, None),
            (r#"{"tags": 3}"#, None),
        ];
        for (json, want) in cases {
            let got = parse_settings::<S>(json);
            match want {
                Some(w) => assert_eq!(got.as_ref().ok(), Some(w), "{json}"),
                None => {
                    let e = got.expect_err(json);
                    assert!(e[0].message.starts_with("invalid settings"), "{json}");
                }
            }
        }
    }
}
