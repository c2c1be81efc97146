//! The records a kind returns (calls, actions, drift, proposals) and reads (observations):
//! the types wit-bindgen generates from `wit/common/0.1.0` and `wit/kind/0.2.1`, re-exported
//! under short names, with constructors and accessors for kind logic. A kind builds the WIT
//! records themselves, so nothing converts them at the component boundary; they are plain
//! Rust values (`Clone`, `PartialEq`, `Serialize`) for native tests.

use crate::check::{Diag, Severity};
use crate::types as t;

pub use crate::kind_types::{Action, Operation, Restore};
pub use crate::types::{Call, Change, Method, Param};
pub use crate::wit::{Anomaly, Drift, Observation, Proposal, Read};

impl Method {
    /// The method as HTTP writes it: `GET`, `POST`, `PUT`, `DELETE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }
}

impl Call {
    /// A call without parameters.
    pub fn new(method: Method, path: impl Into<String>) -> Self {
        Call {
            method,
            path: path.into(),
            params: Vec::new(),
        }
    }

    /// Add a non-sensitive parameter.
    pub fn param(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.params.push(Param::new(name, value));
        self
    }

    /// The value of parameter `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.value.as_str())
    }
}

impl Param {
    /// A non-sensitive parameter.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Param {
            name: name.into(),
            value: value.into(),
            sensitive: false,
        }
    }
}

impl Operation {
    /// A step named `name`.
    pub fn step(name: impl Into<String>) -> Self {
        Operation::Step(name.into())
    }

    /// Whether this is the step `name`.
    pub fn is_step(&self, name: &str) -> bool {
        matches!(self, Operation::Step(s) if s == name)
    }
}

impl Change {
    /// A non-sensitive change.
    pub fn new(key: impl Into<String>, old: Option<String>, new: Option<String>) -> Self {
        Change {
            key: key.into(),
            old,
            new,
            sensitive: false,
        }
    }
}

impl Drift {
    /// A non-sensitive drift item.
    pub fn new(path: impl Into<String>, live: Option<String>, desired: Option<String>) -> Self {
        Drift {
            path: path.into(),
            live,
            desired,
            sensitive: false,
        }
    }
}

impl Anomaly {
    /// An anomaly at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Anomaly {
            path: path.into(),
            message: message.into(),
            locked: false,
        }
    }

    /// The object is locked by a task in flight (`message` says which).
    pub fn locked(path: impl Into<String>, message: impl Into<String>) -> Self {
        Anomaly {
            locked: true,
            ..Anomaly::new(path, message)
        }
    }
}

/// An empty proposal: nothing to do, no drift, nothing pending, no anomalies.
impl Default for Proposal {
    fn default() -> Self {
        Proposal {
            actions: Vec::new(),
            drift: Vec::new(),
            pending: Vec::new(),
            anomalies: Vec::new(),
        }
    }
}

/// No listing entry and no reads.
impl Default for Observation {
    fn default() -> Self {
        Observation {
            live: None,
            reads: Vec::new(),
        }
    }
}

impl Diag {
    /// The WIT form.
    pub fn into_wit(self) -> t::Diagnostic {
        t::Diagnostic {
            path: self.path,
            message: self.message,
            severity: match self.severity {
                Severity::Error => t::Severity::Error,
                Severity::Warning => t::Severity::Warning,
            },
        }
    }
}

/// Convert a list of diagnostics.
pub fn diags_into_wit(diags: Vec<Diag>) -> Vec<t::Diagnostic> {
    diags.into_iter().map(Diag::into_wit).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_builds_and_reads_params() {
        let c = Call::new(Method::Get, "/nodes/pve01/qemu/100/config").param("current", "1");
        assert_eq!(c.get("current"), Some("1"));
        assert_eq!(c.get("node"), None);
        assert_eq!(
            c.params,
            [Param {
                name: "current".into(),
                value: "1".into(),
                sensitive: false,
            }]
        );
        assert_eq!(c.method.as_str(), "GET");
    }

    #[test]
    fn helpers_build_the_wit_records() {
        let p = Proposal {
            actions: vec![Action {
                operation: Operation::step("mark-template"),
                summary: "mark".into(),
                calls: vec![Call::new(Method::Post, "/x")],
                changes: vec![Change::new("template", None, Some("1".into()))],
                disturbs_availability: false,
                destructive: false,
                restore: None,
            }],
            drift: vec![Drift::new(
                "spec.memory",
                Some("1".into()),
                Some("2".into()),
            )],
            pending: vec![],
            anomalies: vec![Anomaly::new("spec", "m")],
        };
        assert!(p.actions[0].operation.is_step("mark-template"));
        assert!(!Operation::Update.is_step("mark-template"));
        assert!(!p.actions[0].changes[0].sensitive && !p.drift[0].sensitive);
        assert!(!p.anomalies[0].locked && Anomaly::locked("", "busy").locked);
        assert_eq!(p.clone(), p);
    }

    #[test]
    fn serialises_methods_and_operations_as_wit_spells_them() {
        let a = Action {
            operation: Operation::step("power"),
            summary: String::new(),
            calls: vec![Call::new(Method::Post, "/x")],
            changes: vec![],
            disturbs_availability: false,
            destructive: false,
            restore: None,
        };
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(v["operation"], serde_json::json!({"step": "power"}));
        assert_eq!(v["calls"][0]["method"], "post");
        let v = serde_json::to_value(Operation::Create).unwrap();
        assert_eq!(v, "create");
    }
}
