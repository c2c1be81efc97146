//! Plain Rust forms of the records a kind returns (calls, actions, drift, proposals), so that kind
//! logic stays testable and usable natively; `into_wit` converts them at the component boundary.

use crate::check::{Diag, Severity};
use crate::kind_types as kt;
use crate::types as t;
use crate::wit as w;

/// HTTP method of a PVE call (one type with the host's PVE client, from `proxops-http`).
pub use proxops_http::Method;

/// One PVE API call with its form parameters (name, value, sensitive).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Call {
    /// HTTP method.
    pub method: Method,
    /// Path below `/api2/json`.
    pub path: String,
    /// Parameters in order: `(name, value, sensitive)`.
    pub params: Vec<(String, String, bool)>,
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
        self.params.push((name.into(), value.into(), false));
        self
    }

    /// The value of parameter `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|p| p.0 == name)
            .map(|p| p.1.as_str())
    }
}

/// What an action does.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    /// Bring the object into existence.
    Create,
    /// Change its configuration.
    Update,
    /// Remove it.
    Delete,
    /// A kind-specific step (`power`, `mark-template`, …).
    Step(String),
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

/// Calls to run when a call at or after index `after` of an action fails (the action
/// disturbed its object's availability there, e.g. stopped a guest).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Restore {
    /// Index of the first disturbing call.
    pub after: u32,
    /// Calls that restore availability (e.g. the start).
    pub calls: Vec<Call>,
}

/// One wire key an action changes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    /// Wire key.
    pub key: String,
    /// Old value, absent when the key was not set.
    pub old: Option<String>,
    /// New value, absent when the key is removed.
    pub new: Option<String>,
    /// Values are secret.
    pub sensitive: bool,
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

/// A unit of work, executed call by call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Action {
    /// What it does.
    pub operation: Operation,
    /// One human line.
    pub summary: String,
    /// Calls in order.
    pub calls: Vec<Call>,
    /// Wire keys changed.
    pub changes: Vec<Change>,
    /// Stops the object (or needs it stopped) to apply.
    pub disturbs_availability: bool,
    /// Destroys data or an object.
    pub destructive: bool,
    /// What to run when a call at or after `restore.after` fails.
    pub restore: Option<Restore>,
}

/// A difference between desired and live state.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Drift {
    /// Manifest field path, e.g. `spec.memory`.
    pub path: String,
    /// Live value.
    pub live: Option<String>,
    /// Desired value.
    pub desired: Option<String>,
    /// Values are secret.
    pub sensitive: bool,
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

/// Something that needs a human.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Anomaly {
    /// Manifest field path (or empty for the whole object).
    pub path: String,
    /// What is wrong and what the operator can do.
    pub message: String,
    /// The object is locked by a task in flight.
    pub locked: bool,
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

/// Everything a kind proposes for one object.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Proposal {
    /// Work to do, in order.
    pub actions: Vec<Action>,
    /// Differences (repaired by the actions or reported only).
    pub drift: Vec<Drift>,
    /// Configuration PVE holds as pending until the guest restarts.
    pub pending: Vec<Drift>,
    /// Things that need a human.
    pub anomalies: Vec<Anomaly>,
}

/// One read the host performed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// The GET that was sent.
    pub call: Call,
    /// HTTP status.
    pub status: u16,
    /// PVE's `data` member (JSON) or the error body.
    pub body: String,
}

/// Live state the host read for one object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observation {
    /// The object's listing entry (JSON), when PVE has the object.
    pub live: Option<String>,
    /// Answers to the reads `observe` asked for, in order.
    pub reads: Vec<Read>,
}

/// The WIT form of a method.
fn method_into_wit(m: Method) -> t::Method {
    match m {
        Method::Get => t::Method::Get,
        Method::Post => t::Method::Post,
        Method::Put => t::Method::Put,
        Method::Delete => t::Method::Delete,
    }
}

/// A method from its WIT form.
fn method_from_wit(m: t::Method) -> Method {
    match m {
        t::Method::Get => Method::Get,
        t::Method::Post => Method::Post,
        t::Method::Put => Method::Put,
        t::Method::Delete => Method::Delete,
    }
}

impl Call {
    /// The WIT form.
    pub fn into_wit(self) -> t::Call {
        t::Call {
            method: method_into_wit(self.method),
            path: self.path,
            params: self
                .params
                .into_iter()
                .map(|(name, value, sensitive)| t::Param {
                    name,
                    value,
                    sensitive,
                })
                .collect(),
        }
    }

    /// From the WIT form.
    pub fn from_wit(c: t::Call) -> Self {
        Call {
            method: method_from_wit(c.method),
            path: c.path,
            params: c
                .params
                .into_iter()
                .map(|p| (p.name, p.value, p.sensitive))
                .collect(),
        }
    }
}

impl Action {
    /// The WIT form.
    pub fn into_wit(self) -> kt::Action {
        kt::Action {
            operation: match self.operation {
                Operation::Create => kt::Operation::Create,
                Operation::Update => kt::Operation::Update,
                Operation::Delete => kt::Operation::Delete,
                Operation::Step(name) => kt::Operation::Step(name),
            },
            summary: self.summary,
            calls: self.calls.into_iter().map(Call::into_wit).collect(),
            changes: self
                .changes
                .into_iter()
                .map(|c| t::Change {
                    key: c.key,
                    old: c.old,
                    new: c.new,
                    sensitive: c.sensitive,
                })
                .collect(),
            disturbs_availability: self.disturbs_availability,
            destructive: self.destructive,
            restore: self.restore.map(|r| kt::Restore {
                after: r.after,
                calls: r.calls.into_iter().map(Call::into_wit).collect(),
            }),
        }
    }
}

impl Drift {
    /// The WIT form.
    pub fn into_wit(self) -> w::Drift {
        w::Drift {
            path: self.path,
            live: self.live,
            desired: self.desired,
            sensitive: self.sensitive,
        }
    }
}

impl Proposal {
    /// The WIT form.
    pub fn into_wit(self) -> w::Proposal {
        w::Proposal {
            actions: self.actions.into_iter().map(Action::into_wit).collect(),
            drift: self.drift.into_iter().map(Drift::into_wit).collect(),
            pending: self.pending.into_iter().map(Drift::into_wit).collect(),
            anomalies: self
                .anomalies
                .into_iter()
                .map(|a| w::Anomaly {
                    path: a.path,
                    message: a.message,
                    locked: a.locked,
                })
                .collect(),
        }
    }
}

impl Observation {
    /// From the WIT form.
    pub fn from_wit(o: w::Observation) -> Self {
        Observation {
            live: o.live,
            reads: o
                .reads
                .into_iter()
                .map(|r| Read {
                    call: Call::from_wit(r.call),
                    status: r.status,
                    body: r.body,
                })
                .collect(),
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
    fn call_round_trip() {
        let c = Call::new(Method::Get, "/nodes/pve01/qemu/100/config").param("current", "1");
        assert_eq!(c.get("current"), Some("1"));
        let back = Call::from_wit(c.clone().into_wit());
        assert_eq!(back, c);
    }

    #[test]
    fn proposal_converts() {
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
        let w = p.into_wit();
        assert_eq!(w.actions.len(), 1);
        assert!(matches!(&w.actions[0].operation, kt::Operation::Step(s) if s == "mark-template"));
        assert_eq!(w.drift[0].path, "spec.memory");
        assert_eq!(w.anomalies[0].message, "m");
    }
}
