//! Evaluation: asking the policies about manifests and planned actions (redacted), and turning verdicts into located findings.

use std::collections::BTreeMap;

use proxops_core::Manifest;
use proxops_runtime::kind::Change;
use proxops_runtime::policy::{ActionView, ManifestView, Verdict, Violation};

use super::report::{Finding, FindingObject, PolicyReport, Severity, Stage};
use super::{Check, PolicySet};
use crate::plan::ClusterPlan;

impl PolicySet {
    /// Ask every policy in scope about each manifest of `cluster` (manifests of other
    /// clusters are skipped, so the whole repository may be passed).
    pub fn check_manifests(&self, cluster: &str, manifests: &[Manifest]) -> PolicyReport {
        if self.policies.is_empty() {
            return PolicyReport::default();
        }
        let inputs: Vec<ManifestInput> = manifests
            .iter()
            .filter(|m| m.cluster == cluster)
            .map(ManifestInput::from)
            .collect();
        self.check_manifest_inputs(&inputs)
    }

    /// [`PolicySet::check_manifests`] over inputs built by the caller (`policy test`).
    /// A policy that fails on one manifest is not called for the other manifests of that
    /// cluster: one failure finding stands for all of them.
    pub fn check_manifest_inputs(&self, inputs: &[ManifestInput]) -> PolicyReport {
        if self.policies.is_empty() {
            return PolicyReport::default();
        }
        // One thread for the batch when called from async code, not one per guest call.
        proxops_runtime::off_tokio(|| self.manifest_checks(inputs))
    }

    fn manifest_checks(&self, inputs: &[ManifestInput]) -> PolicyReport {
        let mut report = PolicyReport::default();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        for (index, p) in self.policies.iter().enumerate() {
            let mine: Vec<&ManifestInput> = inputs
                .iter()
                .filter(|m| p.scope.includes_cluster(&m.cluster) && p.scope.includes_kind(&m.kind))
                .collect();
            // Each evaluation is a fresh instance, so they spread over the cores; once a call
            // fails, the policy's run for that cluster answers the later ones `Stopped`
            // without running them, and one failure finding stands for all.
            let answers = proxops_core::parallel::map_ordered(
                &mine,
                threads,
                || (),
                |(), m| {
                    let view = ManifestView {
                        cluster: m.cluster.clone(),
                        kind: m.kind.clone(),
                        name: m.name.clone(),
                        document: m.document.clone(),
                    };
                    self.call(index, &m.cluster, Check::Manifest(&view))
                },
            );
            let mut failed: Vec<&str> = Vec::new();
            for (m, answer) in mine.into_iter().zip(answers) {
                if failed.contains(&m.cluster.as_str()) {
                    continue;
                }
                let object = FindingObject {
                    kind: m.kind.clone(),
                    name: m.name.clone(),
                    file: Some(m.file.clone()),
                };
                let base = Finding::base(p, Stage::Manifest, &m.cluster);
                match answer {
                    Ok(verdict) => {
                        for (severity, v) in violations(verdict) {
                            report.push(Finding {
                                severity,
                                object: Some(object.clone()),
                                path: v.path,
                                message: v.message,
                                ..base.clone()
                            });
                        }
                    }
                    Err(e) => {
                        failed.push(&m.cluster);
                        report.push(Finding::failure(base, Some(object), &e));
                    }
                }
            }
        }
        report
    }

    /// Ask every policy in scope about the planned actions of `plan`. `manifests` give each
    /// action its document (matched by file); objects without one (prunes) get none.
    pub fn check_plan(&self, plan: &ClusterPlan, manifests: &[Manifest]) -> PolicyReport {
        if self.policies.is_empty() {
            return PolicyReport::default();
        }
        let by_file: BTreeMap<&str, &Manifest> =
            manifests.iter().map(|m| (m.file.as_str(), m)).collect();
        let mut actions = Vec::new();
        for o in plan
            .objects
            .iter()
            .filter(|o| !o.proposal.actions.is_empty())
        {
            let document = o
                .object
                .file
                .as_deref()
                .and_then(|f| by_file.get(f))
                .map(|m| m.json().to_string());
            for a in &o.proposal.actions {
                actions.push(PlannedAction {
                    file: o.object.file.clone(),
                    view: ActionView {
                        cluster: plan.cluster.clone(),
                        kind: o.object.id.kind.clone(),
                        name: o.object.id.name.clone(),
                        operation: proxops_runtime::policy::policy_operation(&a.operation),
                        summary: a.summary.clone(),
                        destructive: a.destructive,
                        requires_stop: a.disturbs_availability,
                        running: o.running,
                        changes: a.changes.iter().map(redact).collect(),
                        document: document.clone(),
                    },
                });
            }
        }
        self.check_actions(&plan.cluster, &actions)
    }

    /// [`PolicySet::check_plan`] over actions built by the caller (`policy test --plan`).
    pub fn check_actions(&self, cluster: &str, actions: &[PlannedAction]) -> PolicyReport {
        if self.policies.is_empty() {
            return PolicyReport::default();
        }
        proxops_runtime::off_tokio(|| self.action_checks(cluster, actions))
    }

    fn action_checks(&self, cluster: &str, actions: &[PlannedAction]) -> PolicyReport {
        let mut report = PolicyReport::default();
        for (index, p) in self.policies.iter().enumerate() {
            if !p.scope.includes_cluster(cluster) {
                continue;
            }
            let mine: Vec<&PlannedAction> = actions
                .iter()
                .filter(|a| p.scope.includes_kind(&a.view.kind))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let views: Vec<ActionView> = mine.iter().map(|a| a.view.clone()).collect();
            let base = Finding::base(p, Stage::Plan, cluster);
            match self.call(index, cluster, Check::Plan(&views)) {
                Ok(verdict) => {
                    for (severity, v) in violations(verdict) {
                        let (object, path) = locate(&mine, &v.path);
                        report.push(Finding {
                            severity,
                            object,
                            path,
                            message: v.message,
                            ..base.clone()
                        });
                    }
                }
                Err(e) => report.push(Finding::failure(base, None, &e)),
            }
        }
        report
    }
}

/// A change as policies see it: sensitive values replaced, the flag kept; any other value
/// passes the process-wide redactor, in case it quotes a secret the kind did not mark.
pub(super) fn redact(c: &Change) -> Change {
    let hide = |v: &Option<String>| v.as_ref().map(|_| "(sensitive)".to_string());
    let scrub = |v: &Option<String>| {
        v.as_deref()
            .map(|s| proxops_core::text::redact(s).into_owned())
    };
    if c.sensitive {
        Change {
            key: c.key.clone(),
            old: hide(&c.old),
            new: hide(&c.new),
            sensitive: true,
        }
    } else {
        Change {
            old: scrub(&c.old),
            new: scrub(&c.new),
            ..c.clone()
        }
    }
}

fn violations(verdict: Verdict) -> Vec<(Severity, Violation)> {
    match verdict {
        Verdict::Allow => Vec::new(),
        Verdict::Warn(v) => v.into_iter().map(|v| (Severity::Warn, v)).collect(),
        Verdict::Deny(v) => v.into_iter().map(|v| (Severity::Deny, v)).collect(),
    }
}

/// The object a `check-plan` path names (`Kind/name` or `Kind/name:field`), and the rest.
fn locate(actions: &[&PlannedAction], path: &str) -> (Option<FindingObject>, String) {
    let (head, field) = match path.split_once(':') {
        Some((h, f)) => (h, f),
        None => (path, ""),
    };
    if let Some((kind, name)) = head.split_once('/')
        && let Some(a) = actions
            .iter()
            .find(|a| a.view.kind == kind && a.view.name == name)
    {
        return (
            Some(FindingObject {
                kind: a.view.kind.clone(),
                name: a.view.name.clone(),
                file: a.file.clone(),
            }),
            field.to_string(),
        );
    }
    (None, path.to_string())
}

/// A manifest as given to `check-manifest`.
#[derive(Debug, Clone)]
pub struct ManifestInput {
    pub cluster: String,
    pub kind: String,
    pub name: String,
    /// Path relative to the repository root.
    pub file: String,
    /// The document as written (YAML turned into JSON), as JSON text.
    pub document: String,
}

impl From<&Manifest> for ManifestInput {
    fn from(m: &Manifest) -> Self {
        ManifestInput {
            cluster: m.cluster.clone(),
            kind: m.kind().unwrap_or_default().to_string(),
            name: m.name.clone(),
            file: m.file.clone(),
            document: m.json().to_string(),
        }
    }
}

/// A planned action as given to `check-plan`, with the manifest file of its object.
#[derive(Debug, Clone)]
pub struct PlannedAction {
    pub view: ActionView,
    pub file: Option<String>,
}
