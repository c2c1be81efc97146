//! Building a verdict from findings, and the path convention of plan findings.

use crate::wit::{Verdict, Violation};

/// Findings collected by a check; [`Findings::verdict`] turns them into the answer.
#[derive(Debug, Default, Clone)]
pub struct Findings {
    deny: Vec<Violation>,
    warn: Vec<Violation>,
}

impl Findings {
    pub fn new() -> Self {
        Self::default()
    }

    /// A violation that must stop the apply (in enforce mode).
    pub fn deny(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.deny.push(Violation {
            path: path.into(),
            message: message.into(),
        });
    }

    /// A finding shown to the operator that never stops anything.
    pub fn warn(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.warn.push(Violation {
            path: path.into(),
            message: message.into(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.deny.is_empty() && self.warn.is_empty()
    }

    /// `deny` with every denial when there is one (warnings are then dropped: the verdict
    /// carries one severity), else `warn` with the warnings, else `allow`.
    pub fn verdict(self) -> Verdict {
        if !self.deny.is_empty() {
            Verdict::Deny(self.deny)
        } else if !self.warn.is_empty() {
            Verdict::Warn(self.warn)
        } else {
            Verdict::Allow
        }
    }
}

/// The path of a `check-plan` finding about one object: `Kind/name`, or `Kind/name:field`
/// with a manifest field path or a wire key (`VM/web-01:spec.options.protection`,
/// `VM/web-01:net0`). The host uses the part before `:` to tell which object it is about;
/// a path that names no planned object is reported for the whole plan.
pub fn object_path(kind: &str, name: &str, field: &str) -> String {
    if field.is_empty() {
        format!("{kind}/{name}")
    } else {
        format!("{kind}/{name}:{field}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_follows_the_worst_finding() {
        assert!(matches!(Findings::new().verdict(), Verdict::Allow));
        let mut f = Findings::new();
        f.warn("a", "w");
        assert!(matches!(f.clone().verdict(), Verdict::Warn(v) if v.len() == 1));
        f.deny("b", "d");
        assert!(matches!(f.verdict(), Verdict::Deny(v) if v.len() == 1 && v[0].path == "b"));
    }

    #[test]
    fn object_paths() {
        assert_eq!(object_path("VM", "a", ""), "VM/a");
        assert_eq!(object_path("VM", "a", "net0"), "VM/a:net0");
    }
}
