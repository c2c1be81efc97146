//! A manifest checker: walks a `serde_json::Value`, accumulates diagnostics with field paths
//! such as `spec.disks[1].ssd`, and reads typed fields with messages that say what is wrong and
//! what is expected. Unknown keys in an object are errors that name the key and suggest the
//! closest known one.
//!
//! Paths are file-independent (the host prefixes the file). `null` (a YAML key with no value)
//! counts as absent.

use serde_json::{Map, Value};

use crate::size;

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Fails the cycle closed.
    Error,
    /// Shown and kept.
    Warning,
}

/// A finding located in a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diag {
    /// Field path such as `spec.disks[1].ssd`; empty for the whole document.
    pub path: String,
    /// What is wrong and what is expected.
    pub message: String,
    /// Error or warning.
    pub severity: Severity,
}

impl Diag {
    /// An error at `path`.
    pub fn error(path: impl Into<String>, message: impl Into<String>) -> Self {
        Diag {
            path: path.into(),
            message: message.into(),
            severity: Severity::Error,
        }
    }

    /// A warning at `path`.
    pub fn warning(path: impl Into<String>, message: impl Into<String>) -> Self {
        Diag {
            path: path.into(),
            message: message.into(),
            severity: Severity::Warning,
        }
    }
}

/// `parent.key`, or `key` at the root.
pub fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// `parent[i]`.
pub fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

/// The JSON type of `v`, as a user reads it.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Edit distance between two short strings, counting an adjacent transposition as one edit
/// (optimal string alignment), since swapped letters are the commonest typo.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// The candidate closest to `word`, when it is close enough to be a likely typo.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase().replace('_', "-");
    candidates
        .iter()
        .map(|c| (edit_distance(&lower, c), *c))
        .filter(|(d, c)| *d <= 2 && *d * 2 < c.len())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Quote a list of choices: `` `a`, `b`, `c` ``.
pub fn choices(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Accumulates diagnostics while reading a manifest.
#[derive(Debug, Default)]
pub struct Checker {
    /// Everything found so far, in order.
    pub diags: Vec<Diag>,
}

type Obj = Map<String, Value>;

impl Checker {
    /// A checker with no findings.
    pub fn new() -> Self {
        Checker::default()
    }

    /// Record an error.
    pub fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.diags.push(Diag::error(path, message));
    }

    /// Record a warning.
    pub fn warn(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.diags.push(Diag::warning(path, message));
    }

    /// Whether any error was recorded.
    pub fn has_errors(&self) -> bool {
        self.diags.iter().any(|d| d.severity == Severity::Error)
    }

    /// `Ok(warnings)` when there is no error, else `Err(all diagnostics)`.
    pub fn finish(self) -> Result<Vec<Diag>, Vec<Diag>> {
        if self.has_errors() {
            Err(self.diags)
        } else {
            Ok(self.diags)
        }
    }

    /// Expect a mapping at `path` whose keys are all in `known`.
    pub fn object<'a>(&mut self, v: &'a Value, path: &str, known: &[&str]) -> Option<&'a Obj> {
        let Value::Object(map) = v else {
            self.error(path, format!("expected a mapping, got {}", type_name(v)));
            return None;
        };
        self.unknown_keys(map, path, known);
        Some(map)
    }

    /// Report every key of `map` not in `known`.
    pub fn unknown_keys(&mut self, map: &Obj, path: &str, known: &[&str]) {
        for key in map.keys() {
            if known.contains(&key.as_str()) {
                continue;
            }
            let hint = match did_you_mean(key, known) {
                Some(k) => format!("; did you mean `{k}`?"),
                None => format!("; expected one of {}", choices(known)),
            };
            self.error(join(path, key), format!("unknown field `{key}`{hint}"));
        }
    }

    /// The value of `key` (absent when missing or null); an error when required and absent.
    pub fn field<'a>(
        &mut self,
        obj: &'a Obj,
        path: &str,
        key: &str,
        required: bool,
    ) -> Option<&'a Value> {
        match obj.get(key) {
            Some(Value::Null) | None => {
                if required {
                    self.error(join(path, key), "is required");
                }
                None
            }
            Some(v) => Some(v),
        }
    }

    /// A mapping field (unknown keys checked against `known`).
    pub fn object_field<'a>(
        &mut self,
        obj: &'a Obj,
        path: &str,
        key: &str,
        required: bool,
        known: &[&str],
    ) -> Option<&'a Obj> {
        let v = self.field(obj, path, key, required)?;
        self.object(v, &join(path, key), known)
    }

    /// A string field; empty strings are errors for required fields and absent for optional ones.
    pub fn string(&mut self, obj: &Obj, path: &str, key: &str, required: bool) -> Option<String> {
        let v = self.field(obj, path, key, required)?;
        match v {
            Value::String(s) if s.is_empty() => {
                if required {
                    self.error(join(path, key), "must not be empty");
                }
                None
            }
            Value::String(s) => Some(s.clone()),
            other => {
                self.error(
                    join(path, key),
                    format!("expected a string, got {}", type_name(other)),
                );
                None
            }
        }
    }

    /// An integer field within `min..=max`.
    pub fn int(
        &mut self,
        obj: &Obj,
        path: &str,
        key: &str,
        required: bool,
        min: i64,
        max: i64,
    ) -> Option<i64> {
        let v = self.field(obj, path, key, required)?;
        let Some(n) = v.as_i64() else {
            let what = match v {
                Value::Number(n) if n.is_u64() => "an integer out of range".to_string(),
                other => type_name(other).to_string(),
            };
            self.error(
                join(path, key),
                format!("expected an integer from {min} to {max}, got {what}"),
            );
            return None;
        };
        if n < min || n > max {
            self.error(
                join(path, key),
                format!("must be from {min} to {max}, got {n}"),
            );
            return None;
        }
        Some(n)
    }

    /// A number field (integer or decimal) `>= min`.
    pub fn number(&mut self, obj: &Obj, path: &str, key: &str, min: f64) -> Option<f64> {
        let v = self.field(obj, path, key, false)?;
        let Some(n) = v.as_f64() else {
            self.error(
                join(path, key),
                format!("expected a number, got {}", type_name(v)),
            );
            return None;
        };
        if n < min {
            self.error(join(path, key), format!("must be at least {min}, got {n}"));
            return None;
        }
        Some(n)
    }

    /// A boolean field.
    pub fn boolean(&mut self, obj: &Obj, path: &str, key: &str, required: bool) -> Option<bool> {
        let v = self.field(obj, path, key, required)?;
        match v {
            Value::Bool(b) => Some(*b),
            other => {
                self.error(
                    join(path, key),
                    format!("expected true or false, got {}", type_name(other)),
                );
                None
            }
        }
    }

    /// A string field that must be one of `allowed`.
    pub fn enumeration(
        &mut self,
        obj: &Obj,
        path: &str,
        key: &str,
        required: bool,
        allowed: &[&str],
    ) -> Option<String> {
        let s = self.string(obj, path, key, required)?;
        if allowed.contains(&s.as_str()) {
            return Some(s);
        }
        let hint = match did_you_mean(&s, allowed) {
            Some(k) => format!(" (did you mean `{k}`?)"),
            None => String::new(),
        };
        self.error(
            join(path, key),
            format!("must be one of {}, got `{s}`{hint}", choices(allowed)),
        );
        None
    }

    /// A human size field (`8GiB`), in bytes.
    pub fn size(&mut self, obj: &Obj, path: &str, key: &str, required: bool) -> Option<u64> {
        let v = self.field(obj, path, key, required)?;
        match v {
            Value::String(s) => match size::parse_human(s) {
                Ok(b) => Some(b),
                Err(e) => {
                    self.error(join(path, key), e.to_string());
                    None
                }
            },
            Value::Number(n) => {
                self.error(
                    join(path, key),
                    size::SizeError::NoUnit(n.to_string()).to_string(),
                );
                None
            }
            other => {
                self.error(
                    join(path, key),
                    format!("expected a size such as 8GiB, got {}", type_name(other)),
                );
                None
            }
        }
    }

    /// A list field.
    pub fn array<'a>(
        &mut self,
        obj: &'a Obj,
        path: &str,
        key: &str,
        required: bool,
    ) -> Option<&'a Vec<Value>> {
        let v = self.field(obj, path, key, required)?;
        match v {
            Value::Array(a) => Some(a),
            other => {
                self.error(
                    join(path, key),
                    format!("expected a list, got {}", type_name(other)),
                );
                None
            }
        }
    }

    /// A list of strings; each non-string item is reported at its index.
    pub fn string_list(&mut self, obj: &Obj, path: &str, key: &str) -> Option<Vec<String>> {
        let items = self.array(obj, path, key, false)?;
        let p = join(path, key);
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::String(s) => out.push(s.clone()),
                other => self.error(
                    index(&p, i),
                    format!("expected a string, got {}", type_name(other)),
                ),
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Run `f` over `input` and compare the diagnostics as `(path, message)`.
    fn check(input: Value, f: impl FnOnce(&mut Checker, &Obj), expected: &[(&str, &str)]) {
        let mut c = Checker::new();
        let obj = input.as_object().expect("test input is a mapping").clone();
        f(&mut c, &obj);
        let got: Vec<(&str, &str)> = c
            .diags
            .iter()
            .map(|d| (d.path.as_str(), d.message.as_str()))
            .collect();
        assert_eq!(got, expected, "input {input}");
    }

    const DISK: &[&str] = &["storage", "size", "ssd", "interface"];

    #[test]
    fn unknown_keys() {
        check(
            json!({"storage": "x", "sdd": true}),
            |c, o| c.unknown_keys(o, "spec.disks[1]", DISK),
            &[(
                "spec.disks[1].sdd",
                "unknown field `sdd`; did you mean `ssd`?",
            )],
        );
        check(
            json!({"interfcae": "scsi0"}),
            |c, o| c.unknown_keys(o, "spec.disks[0]", DISK),
            &[(
                "spec.disks[0].interfcae",
                "unknown field `interfcae`; did you mean `interface`?",
            )],
        );
        check(
            json!({"zzz": 1}),
            |c, o| c.unknown_keys(o, "spec", DISK),
            &[(
                "spec.zzz",
                "unknown field `zzz`; expected one of `storage`, `size`, `ssd`, `interface`",
            )],
        );
        check(
            json!({"storage": "x"}),
            |c, o| c.unknown_keys(o, "spec", DISK),
            &[],
        );
    }

    #[test]
    fn typed_fields() {
        check(
            json!({}),
            |c, o| assert_eq!(c.string(o, "spec", "node", true), None),
            &[("spec.node", "is required")],
        );
        check(
            json!({"node": null}),
            |c, o| assert_eq!(c.string(o, "spec", "node", true), None),
            &[("spec.node", "is required")],
        );
        check(
            json!({"node": ""}),
            |c, o| assert_eq!(c.string(o, "spec", "node", true), None),
            &[("spec.node", "must not be empty")],
        );
        check(
            json!({"node": 3}),
            |c, o| assert_eq!(c.string(o, "spec", "node", false), None),
            &[("spec.node", "expected a string, got an integer")],
        );
        check(
            json!({"vmid": 100}),
            |c, o| assert_eq!(c.int(o, "spec", "vmid", true, 100, 999), Some(100)),
            &[],
        );
        check(
            json!({"vmid": 99}),
            |c, o| assert_eq!(c.int(o, "spec", "vmid", true, 100, 999), None),
            &[("spec.vmid", "must be from 100 to 999, got 99")],
        );
        check(
            json!({"vmid": "100"}),
            |c, o| assert_eq!(c.int(o, "spec", "vmid", true, 100, 999), None),
            &[(
                "spec.vmid",
                "expected an integer from 100 to 999, got a string",
            )],
        );
        check(
            json!({"vmid": 1.5}),
            |c, o| assert_eq!(c.int(o, "spec", "vmid", true, 1, 9), None),
            &[("spec.vmid", "expected an integer from 1 to 9, got a number")],
        );
        check(
            json!({"ssd": "yes"}),
            |c, o| assert_eq!(c.boolean(o, "d", "ssd", false), None),
            &[("d.ssd", "expected true or false, got a string")],
        );
        check(
            json!({"ssd": false}),
            |c, o| assert_eq!(c.boolean(o, "d", "ssd", false), Some(false)),
            &[],
        );
        check(
            json!({"state": "stoped"}),
            |c, o| {
                assert_eq!(
                    c.enumeration(o, "spec", "state", false, &["started", "stopped"]),
                    None
                )
            },
            &[(
                "spec.state",
                "must be one of `started`, `stopped`, got `stoped` (did you mean `stopped`?)",
            )],
        );
        check(
            json!({"memory": "8GiB"}),
            |c, o| assert_eq!(c.size(o, "spec", "memory", true), Some(8 << 30)),
            &[],
        );
        check(
            json!({"memory": 2048}),
            |c, o| assert_eq!(c.size(o, "spec", "memory", true), None),
            &[(
                "spec.memory",
                "size `2048` has no unit; write it with a binary unit such as `2048MiB` or `2048GiB`",
            )],
        );
        check(
            json!({"tags": ["a", 1]}),
            |c, o| assert_eq!(c.string_list(o, "spec", "tags"), Some(vec!["a".into()])),
            &[("spec.tags[1]", "expected a string, got an integer")],
        );
        check(
            json!({"disks": {}}),
            |c, o| assert_eq!(c.array(o, "spec", "disks", true), None),
            &[("spec.disks", "expected a list, got a mapping")],
        );
        check(
            json!({"rate": -1}),
            |c, o| assert_eq!(c.number(o, "n", "rate", 0.0), None),
            &[("n.rate", "must be at least 0, got -1")],
        );
    }

    #[test]
    fn paths_and_finish() {
        assert_eq!(join("", "spec"), "spec");
        assert_eq!(join("spec", "disks"), "spec.disks");
        assert_eq!(index("spec.disks", 1), "spec.disks[1]");
        let mut c = Checker::new();
        c.warn("spec", "w");
        assert_eq!(c.finish().map(|w| w.len()), Ok(1));
        let mut c = Checker::new();
        c.error("spec", "e");
        assert!(c.finish().is_err());
    }
}
