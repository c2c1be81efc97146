//! Rendering: findings, their severity and stage, and a cluster's policy report as text and JSON.

use std::fmt;

use proxops_core::settings::Mode;
use proxops_runtime::GuestError;
use serde::Serialize;
use serde_json::Value;

use super::load::LoadedPolicy;

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Deny,
    Warn,
}

/// Which question the finding answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Manifest,
    Plan,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FindingObject {
    pub kind: String,
    pub name: String,
    pub file: Option<String>,
}

/// One finding of one policy.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub policy: String,
    /// The policy's `.wasm` file.
    pub policy_file: String,
    pub mode: Mode,
    pub severity: Severity,
    pub stage: Stage,
    pub cluster: String,
    /// The object it is about; `None` for a finding about the whole plan.
    pub object: Option<FindingObject>,
    /// Field path in the manifest (or a wire key for plan findings); may be empty.
    pub path: String,
    pub message: String,
    /// The policy did not answer (trap, deadline, memory): counted as a deny.
    pub failed: bool,
}

impl Finding {
    pub(super) fn base(p: &LoadedPolicy, stage: Stage, cluster: &str) -> Finding {
        Finding {
            policy: p.name.clone(),
            policy_file: p.file.clone(),
            mode: p.mode,
            severity: Severity::Deny,
            stage,
            cluster: cluster.to_string(),
            object: None,
            path: String::new(),
            message: String::new(),
            failed: false,
        }
    }

    pub(super) fn failure(base: Finding, object: Option<FindingObject>, e: &GuestError) -> Finding {
        let first = e.first();
        let message = format!(
            "the policy failed, counted as a deny (fail closed); it is not called again for cluster {} in this run: {first}",
            base.cluster
        );
        Finding {
            severity: Severity::Deny,
            object,
            message,
            failed: true,
            ..base
        }
    }

    /// A deny in enforce mode: stops the cluster's apply.
    pub fn blocks(&self) -> bool {
        self.severity == Severity::Deny && self.mode == Mode::Enforce
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = match (self.severity, self.mode) {
            (Severity::Deny, Mode::Enforce) => "denied",
            (Severity::Deny, _) => "would deny (not enforced)",
            (Severity::Warn, _) => "warns",
        };
        write!(f, "policy {} {verb}", self.policy)?;
        if self.mode != Mode::Enforce {
            write!(f, " [{} mode]", self.mode)?;
        }
        match &self.object {
            Some(o) => {
                write!(f, " {} {}", o.kind, o.name)?;
                if let Some(file) = &o.file {
                    write!(f, " ({file})")?;
                }
            }
            None => write!(f, " the {} plan", self.cluster)?,
        }
        if !self.path.is_empty() {
            write!(f, " at {}", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Everything the policies said about one cluster (or one `policy test` run).
#[derive(Debug, Clone, Default, Serialize)]
pub struct PolicyReport {
    pub findings: Vec<Finding>,
}

impl PolicyReport {
    pub(super) fn push(&mut self, f: Finding) {
        if f.mode == Mode::Monitor {
            tracing::info!(target: "proxops::policy", "monitor: {f}");
        }
        self.findings.push(f);
    }

    /// Append `other` (e.g. the plan report after the manifest report). A policy's failure
    /// in a cluster is reported once: a later failure finding of the same policy and
    /// cluster (the policy was not called again) is left out.
    pub fn extend(&mut self, other: PolicyReport) {
        for f in other.findings {
            let repeated = f.failed
                && self.findings.iter().any(|g| {
                    g.failed
                        && g.policy == f.policy
                        && g.policy_file == f.policy_file
                        && g.cluster == f.cluster
                });
            if !repeated {
                self.findings.push(f);
            }
        }
    }

    /// Some finding stops the apply: a deny, or a failed policy, in enforce mode.
    pub fn blocks(&self) -> bool {
        self.findings.iter().any(Finding::blocks)
    }

    pub fn is_empty(&self) -> bool {
        self.findings.is_empty()
    }

    /// Findings that are shown (monitor mode only records).
    pub fn shown(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.mode != Mode::Monitor)
    }

    /// Human lines, blocking findings first; monitor findings are left out.
    pub fn lines(&self) -> Vec<String> {
        let mut shown: Vec<&Finding> = self.shown().collect();
        shown.sort_by_key(|f| (!f.blocks(), f.severity));
        shown
            .into_iter()
            .map(|f| {
                let mark = if f.blocks() { "✗" } else { "!" };
                format!("{mark} {f}")
            })
            .collect()
    }

    /// `{"blocks": bool, "findings": [...]}` for `--json` (monitor findings included).
    pub fn json(&self) -> Value {
        serde_json::json!({"blocks": self.blocks(), "findings": self.findings})
    }

    /// The verdict as one word: `deny` when something blocks, else `warn` when anything is
    /// shown, else `allow`.
    pub fn verdict(&self) -> &'static str {
        if self.blocks() {
            "deny"
        } else if self.shown().next().is_some() {
            "warn"
        } else {
            "allow"
        }
    }
}

impl fmt::Display for PolicyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in self.lines() {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}
