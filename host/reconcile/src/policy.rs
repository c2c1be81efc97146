//! Site policies: the `.wasm` components listed in `proxops.yaml`, loaded once per run and
//! asked about every cluster's manifests and plan.
//!
//! Loading is all-or-nothing and happens before any cluster is touched: each file is read
//! inside the repository, its SHA-256 is compared with the pinned one *before* it is compiled,
//! and its settings are checked against the policy's JSON Schema and then by its own
//! `validate-settings`. Every problem is reported as a located [`Diagnostic`] on
//! `proxops.yaml`.
//!
//! Evaluation uses a fresh instance per call (policies are third-party code). What a policy
//! sees: manifests as written (they hold SOPS references such as `ci-password-ref`, never
//! secret values) and the planned actions with every sensitive wire value replaced by
//! `(sensitive)`. A call that traps, runs out of time or memory, or uses up the policy's
//! budget for the run counts as a deny with the reason: in enforce mode it blocks the
//! cluster (fail closed).
//!
//! Fail fast: a run is one cycle of one cluster. A policy that failed in a run is not called
//! again in it (30 manifests and a looping policy cost one deadline, not 30), and the
//! cluster's report carries one failure finding per policy.
//!
//! One evaluation path: `proxops policy test` and plan/apply both go through
//! [`PolicySet::check_manifest_inputs`] and [`PolicySet::check_actions`] (plan/apply by way
//! of [`PolicySet::check_manifests`] and [`PolicySet::check_plan`]), and every guest call in
//! them through [`PolicySet::call`].

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proxops_core::settings::{Mode, PolicyEntry, RepoSettings, Scope, read_repo_file, sha256_hex};
use proxops_core::{Diagnostic, Manifest};
use proxops_runtime::kind::{Change, Operation};
use proxops_runtime::policy::PolicyInstance;
use proxops_runtime::policy::{ActionView, ManifestView, Verdict, Violation};
use proxops_runtime::{GuestError, GuestRun, Limits, PolicyComponent, Runtime};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::plan::{ClusterPlan, operation_name};

/// Where settings diagnostics point when a policy is loaded outside `proxops.yaml`.
const SETTINGS_FILE: &str = proxops_core::settings::FILE;

/// One loaded policy with its configuration.
#[derive(Debug, Clone)]
pub struct LoadedPolicy {
    /// Display name: `name:` from `proxops.yaml`, else the policy's own `metadata().name`.
    pub name: String,
    /// Path of the `.wasm` (relative to the repository for configured policies).
    pub file: String,
    pub mode: Mode,
    pub scope: Scope,
    /// The settings as JSON text, passed to every call.
    pub settings: String,
    component: PolicyComponent,
}

impl LoadedPolicy {
    /// Load `wasm` as configured by `entry` and check its settings against the policy's
    /// schema, then with its `validate-settings`. `at` is the field path of the entry in
    /// `diag_file` (e.g. `policies[0]`), used to locate diagnostics; empty when `diag_file`
    /// holds the settings alone. The entry's `sha256` is not checked here:
    /// [`PolicySet::load`] does that before calling this, on the same bytes.
    pub fn from_wasm(
        runtime: &Runtime,
        wasm: &[u8],
        entry: &PolicyEntry,
        diag_file: &str,
        at: &str,
    ) -> Result<LoadedPolicy, Vec<Diagnostic>> {
        let file = entry.file.as_str();
        let settings = &entry.settings;
        // With no entry path (`policy test`), diagnostics point into the settings file itself.
        let field = |k: &str| {
            if at.is_empty() {
                String::new()
            } else {
                format!("{at}.{k}")
            }
        };
        let guest = file.rsplit('/').next().unwrap_or(file);
        let component = runtime
            .load_policy(guest, wasm, Limits::POLICY)
            .map_err(|e| {
                vec![Diagnostic::error(
                    diag_file,
                    field("file"),
                    format!("cannot load policy {file}: {e}"),
                )]
            })?;
        let info = component.info().clone();
        let settings_at = |p: &str| match (at.is_empty(), p.is_empty()) {
            (true, _) => p.to_string(),
            (false, true) => format!("{at}.settings"),
            (false, false) => format!("{at}.settings.{p}"),
        };
        let schema_text = info.settings_schema.trim();
        if !schema_text.is_empty() {
            let schema: Value = serde_json::from_str(schema_text).map_err(|e| {
                vec![Diagnostic::error(
                    diag_file,
                    field("file"),
                    format!(
                        "policy `{}` publishes a settings schema that is not JSON ({e}); fix the policy",
                        info.name
                    ),
                )]
            })?;
            let errors = schema::validate(&schema, settings);
            if !errors.is_empty() {
                return Err(errors
                    .into_iter()
                    .map(|(p, m)| {
                        Diagnostic::error(
                            diag_file,
                            settings_at(&p),
                            format!("{m} (settings schema of policy `{}`)", info.name),
                        )
                    })
                    .collect());
            }
        }
        let settings_text = settings.to_string();
        let verdict = component
            .instance()
            .and_then(|mut i| i.validate_settings(&settings_text));
        match verdict {
            Ok(Ok(())) => {}
            Ok(Err(diags)) => {
                // A rejection is a rejection, whatever severity its diagnostics carry.
                let mut errors: Vec<Diagnostic> = diags
                    .into_iter()
                    .map(|d| {
                        Diagnostic::error(
                            diag_file,
                            settings_at(&d.path),
                            format!("{} (policy `{}`)", d.message, info.name),
                        )
                    })
                    .collect();
                if errors.is_empty() {
                    errors.push(Diagnostic::error(
                        diag_file,
                        settings_at(""),
                        format!(
                            "policy `{}` rejected its settings without saying why",
                            info.name
                        ),
                    ));
                }
                return Err(errors);
            }
            Err(e) => {
                return Err(vec![Diagnostic::error(
                    diag_file,
                    field("settings"),
                    format!(
                        "policy `{}` failed while validating its settings: {e}",
                        info.name
                    ),
                )]);
            }
        }
        Ok(LoadedPolicy {
            name: info.name.clone(),
            file: file.to_string(),
            mode: entry.mode,
            scope: entry.scope.clone(),
            settings: settings_text,
            component,
        })
    }

    /// The policy's `metadata()` answer.
    pub fn info(&self) -> &proxops_runtime::policy::PolicyInfo {
        self.component.info()
    }

    /// SHA-256 of the loaded bytes.
    pub fn sha256(&self) -> &str {
        self.component.sha256()
    }
}

/// One guest call of a policy, in a fresh instance.
enum Check<'a> {
    Manifest(&'a ManifestView),
    Plan(&'a [ActionView]),
}

/// The policies of a process, and each policy's run per cluster.
#[derive(Debug, Clone, Default)]
pub struct PolicySet {
    policies: Vec<LoadedPolicy>,
    /// The time each policy's calls may take per cluster (`None`: unbounded).
    budget: Option<Duration>,
    /// (policy index, cluster) -> that run's state; shared by clones.
    runs: Arc<Mutex<RunsByCluster>>,
}

/// Each policy's run per cluster, by (policy index, cluster).
type RunsByCluster = HashMap<(usize, String), Arc<GuestRun>>;

impl PolicySet {
    /// No policies: every check allows.
    pub fn empty() -> PolicySet {
        PolicySet::default()
    }

    /// `policies`, each with `budget` per cluster.
    pub fn from_policies(policies: Vec<LoadedPolicy>, budget: Option<Duration>) -> PolicySet {
        PolicySet {
            policies,
            budget,
            runs: Arc::default(),
        }
    }

    /// The run of policy `index` in `cluster`, created on first use.
    pub fn run(&self, index: usize, cluster: &str) -> Arc<GuestRun> {
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        runs.entry((index, cluster.to_string()))
            .or_insert_with(|| GuestRun::new(self.budget))
            .clone()
    }

    /// The one place a policy is called, for plan/apply and `policy test` alike: a fresh
    /// instance in the policy's run for `cluster` (refused at once when the policy already
    /// failed there).
    fn call(&self, index: usize, cluster: &str, check: Check<'_>) -> Result<Verdict, GuestError> {
        let p = &self.policies[index];
        let mut instance: PolicyInstance = p.component.instance_in(&self.run(index, cluster))?;
        match check {
            Check::Manifest(view) => instance.check_manifest(view, &p.settings),
            Check::Plan(actions) => instance.check_plan(actions, &p.settings),
        }
    }

    pub fn policies(&self) -> &[LoadedPolicy] {
        &self.policies
    }

    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// Load every policy of `settings` (from `proxops.yaml`), reading files inside
    /// `repo_root`. Any problem with any policy fails the whole load: run nothing with a
    /// policy set that is not the one configured.
    pub fn load(
        runtime: &Runtime,
        repo_root: &Path,
        settings: &RepoSettings,
    ) -> Result<PolicySet, Vec<Diagnostic>> {
        let file = settings.file.as_deref().unwrap_or(SETTINGS_FILE);
        let mut diags = Vec::new();
        let mut policies = Vec::new();
        for entry in &settings.policies {
            match load_entry(runtime, repo_root, file, entry) {
                Ok(p) => policies.push(p),
                Err(mut d) => diags.append(&mut d),
            }
        }
        if diags.is_empty() {
            Ok(PolicySet::from_policies(
                policies,
                settings.guest_budget.policy,
            ))
        } else {
            diags.sort();
            Err(diags)
        }
    }

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
        for (index, p) in self.policies.iter().enumerate() {
            let mut failed: Vec<&str> = Vec::new();
            for m in inputs {
                if !p.scope.includes_cluster(&m.cluster) || !p.scope.includes_kind(&m.kind) {
                    continue;
                }
                if failed.contains(&m.cluster.as_str()) {
                    continue;
                }
                let view = ManifestView {
                    cluster: m.cluster.clone(),
                    kind: m.kind.clone(),
                    name: m.name.clone(),
                    document: m.document.to_string(),
                };
                let object = FindingObject {
                    kind: m.kind.clone(),
                    name: m.name.clone(),
                    file: Some(m.file.clone()),
                };
                let base = Finding::base(p, Stage::Manifest, &m.cluster);
                match self.call(index, &m.cluster, Check::Manifest(&view)) {
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
                .map(|m| m.document.to_string());
            for a in &o.proposal.actions {
                actions.push(PlannedAction {
                    file: o.object.file.clone(),
                    view: ActionView {
                        cluster: plan.cluster.clone(),
                        kind: o.object.id.kind.clone(),
                        name: o.object.id.name.clone(),
                        operation: a.operation,
                        summary: a.summary.clone(),
                        destructive: a.destructive,
                        requires_stop: a.requires_stop,
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

fn load_entry(
    runtime: &Runtime,
    root: &Path,
    file: &str,
    entry: &PolicyEntry,
) -> Result<LoadedPolicy, Vec<Diagnostic>> {
    let at = entry.path();
    let wasm = read_repo_file(root, &entry.file).map_err(|m| {
        vec![Diagnostic::error(
            file,
            format!("{at}.file"),
            format!("cannot read the policy: {m}"),
        )]
    })?;
    // The hash is checked before a single byte is compiled.
    let actual = sha256_hex(&wasm);
    if actual != entry.sha256 {
        return Err(vec![hash_mismatch(file, &at, entry, &actual)]);
    }
    let mut policy = LoadedPolicy::from_wasm(runtime, &wasm, entry, file, &at)?;
    // The runtime hashed the same bytes with the `sha2` crate: both must agree.
    if policy.sha256() != entry.sha256 {
        return Err(vec![hash_mismatch(file, &at, entry, policy.sha256())]);
    }
    if let Some(name) = &entry.name {
        policy.name = name.clone();
    }
    Ok(policy)
}

fn hash_mismatch(file: &str, at: &str, entry: &PolicyEntry, actual: &str) -> Diagnostic {
    Diagnostic::error(
        file,
        format!("{at}.sha256"),
        format!(
            "refused: {} has sha256 {actual}, but {file} pins {}; if the policy was rebuilt on purpose, update the pin",
            entry.file, entry.sha256
        ),
    )
}

/// A change as policies see it: sensitive values replaced, the flag kept; any other value
/// passes the process-wide redactor, in case it quotes a secret the kind did not mark.
fn redact(c: &Change) -> Change {
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
    /// The document as written (YAML turned into JSON).
    pub document: Value,
}

impl From<&Manifest> for ManifestInput {
    fn from(m: &Manifest) -> Self {
        ManifestInput {
            cluster: m.cluster.clone(),
            kind: m.kind().unwrap_or_default().to_string(),
            name: m.name.clone(),
            file: m.file.clone(),
            document: m.document.clone(),
        }
    }
}

/// A planned action as given to `check-plan`, with the manifest file of its object.
#[derive(Debug, Clone)]
pub struct PlannedAction {
    pub view: ActionView,
    pub file: Option<String>,
}

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
    fn base(p: &LoadedPolicy, stage: Stage, cluster: &str) -> Finding {
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

    fn failure(base: Finding, object: Option<FindingObject>, e: &GuestError) -> Finding {
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
    fn push(&mut self, f: Finding) {
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

/// The `--json` output of `proxops plan` as `policy test --plan` reads it: a list of
/// clusters (or one cluster, or `{"clusters": [...]}`), each with objects and actions.
/// Unknown fields are ignored.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PlanFile {
    List(Vec<PlanFileCluster>),
    Wrapped { clusters: Vec<PlanFileCluster> },
    One(PlanFileCluster),
}

#[derive(Debug, Deserialize)]
struct PlanFileCluster {
    cluster: String,
    #[serde(default)]
    objects: Vec<PlanFileObject>,
}

#[derive(Debug, Deserialize)]
struct PlanFileObject {
    kind: String,
    name: String,
    #[serde(default)]
    file: Option<String>,
    #[serde(default)]
    running: bool,
    #[serde(default)]
    actions: Vec<PlanFileAction>,
}

#[derive(Debug, Deserialize)]
struct PlanFileAction {
    operation: String,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    destructive: bool,
    #[serde(default)]
    requires_stop: bool,
    #[serde(default)]
    changes: Vec<PlanFileChange>,
}

#[derive(Debug, Deserialize)]
struct PlanFileChange {
    key: String,
    #[serde(default)]
    old: Option<String>,
    #[serde(default)]
    new: Option<String>,
}

fn parse_operation(s: &str) -> Option<Operation> {
    [
        Operation::Create,
        Operation::Update,
        Operation::Delete,
        Operation::Power,
        Operation::MarkTemplate,
    ]
    .into_iter()
    .find(|op| operation_name(*op) == s)
}

/// Planned actions per cluster from a plan JSON file (`proxops plan --json`). Each object's
/// document is taken from `documents` (matched by kind and name, then cluster when known);
/// values already shown as `(sensitive)` stay redacted and are flagged sensitive.
pub fn actions_from_plan_json(
    text: &str,
    documents: &[ManifestInput],
) -> Result<Vec<(String, Vec<PlannedAction>)>, String> {
    let file: PlanFile = serde_json::from_str(text)
        .map_err(|e| format!("not a plan as written by `proxops plan --json` ({e})"))?;
    let clusters = match file {
        PlanFile::List(c) | PlanFile::Wrapped { clusters: c } => c,
        PlanFile::One(c) => vec![c],
    };
    let mut out = Vec::new();
    for c in clusters {
        let mut actions = Vec::new();
        for o in c.objects {
            let doc = documents
                .iter()
                .filter(|d| d.kind == o.kind && d.name == o.name)
                .find(|d| d.cluster == c.cluster || d.cluster.is_empty())
                .or_else(|| {
                    o.file
                        .as_ref()
                        .and_then(|f| documents.iter().find(|d| &d.file == f))
                });
            for a in o.actions {
                let operation = parse_operation(&a.operation).ok_or_else(|| {
                    format!("{} {}: unknown operation `{}`", o.kind, o.name, a.operation)
                })?;
                let changes = a
                    .changes
                    .into_iter()
                    .map(|ch| {
                        let sensitive = ch.old.as_deref() == Some("(sensitive)")
                            || ch.new.as_deref() == Some("(sensitive)");
                        Change {
                            key: ch.key,
                            old: ch.old,
                            new: ch.new,
                            sensitive,
                        }
                    })
                    .map(|ch| redact(&ch))
                    .collect();
                actions.push(PlannedAction {
                    file: o.file.clone(),
                    view: ActionView {
                        cluster: c.cluster.clone(),
                        kind: o.kind.clone(),
                        name: o.name.clone(),
                        operation,
                        summary: a.summary,
                        destructive: a.destructive,
                        requires_stop: a.requires_stop,
                        running: o.running,
                        changes,
                        document: doc.map(|d| d.document.to_string()),
                    },
                });
            }
        }
        out.push((c.cluster, actions));
    }
    Ok(out)
}

pub mod schema {
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
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::{Arc, OnceLock};

    use proxops_core::settings::parse_text;
    use proxops_runtime::RuntimeConfig;
    use proxops_runtime::kind::{Action, Proposal};
    use serde_json::json;

    use super::*;
    use crate::plan::{ObjectPlan, ObjectRef};

    fn runtime() -> &'static Arc<Runtime> {
        static RUNTIME: OnceLock<Arc<Runtime>> = OnceLock::new();
        RUNTIME.get_or_init(|| Runtime::new(RuntimeConfig::default()).expect("runtime"))
    }

    fn built(package: &str) -> Vec<u8> {
        let path = proxops_guests::artifact_path(package)
            .unwrap_or_else(|| panic!("{package} is built by host/guests"));
        std::fs::read(path).expect("read the built policy")
    }

    /// A throw-away repository holding `policies` (file name, bytes) and `proxops.yaml`.
    struct TempRepo(PathBuf);

    impl TempRepo {
        fn new(policies: &[(&str, &[u8])], yaml: &str) -> TempRepo {
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let root = std::env::temp_dir()
                .join(format!("proxops-policy-test-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            std::fs::create_dir_all(root.join("policies")).expect("mkdir");
            for (name, bytes) in policies {
                std::fs::write(root.join("policies").join(name), bytes).expect("write wasm");
            }
            std::fs::write(root.join("proxops.yaml"), yaml).expect("write proxops.yaml");
            TempRepo(root)
        }

        fn load(&self) -> Result<PolicySet, Vec<Diagnostic>> {
            let settings = proxops_core::settings::load(&self.0).expect("valid proxops.yaml");
            PolicySet::load(runtime(), &self.0, &settings)
        }
    }

    impl Drop for TempRepo {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// One policy entry for `proxops.yaml`.
    fn entry(file: &str, bytes: &[u8], mode: &str, settings: Value) -> String {
        format!(
            "  - file: policies/{file}\n    sha256: {}\n    mode: {mode}\n    settings: {settings}\n",
            sha256_hex(bytes)
        )
    }

    fn manifest(cluster: &str, name: &str, doc: Value) -> Manifest {
        Manifest {
            file: format!("vm/{cluster}/{name}.yaml"),
            folder: "vm".into(),
            cluster: cluster.into(),
            name: name.into(),
            document: doc,
        }
    }

    fn prod_vm(protection: bool) -> Manifest {
        manifest(
            "lab",
            "web-01",
            json!({"apiVersion": "proxops/v1alpha1", "kind": "VM", "metadata": {"name": "web-01"},
                   "spec": {"node": "pve01", "memory": "2GiB", "tags": ["prod"],
                            "options": {"protection": protection}}}),
        )
    }

    #[test]
    fn modes_decide_what_a_deny_does() {
        let wasm = built("proxops-policy-require-protection-prod");
        for (mode, blocks, shown) in [
            ("enforce", true, 1),
            ("warn", false, 1),
            ("monitor", false, 0),
        ] {
            let repo = TempRepo::new(
                &[("prot.wasm", &wasm)],
                &format!("policies:\n{}", entry("prot.wasm", &wasm, mode, json!({}))),
            );
            let set = repo.load().expect("loads");
            let report = set.check_manifests("lab", &[prod_vm(false), prod_vm(true)]);
            assert_eq!(report.findings.len(), 1, "{mode}: {report:?}");
            let f = &report.findings[0];
            assert_eq!(f.policy, "require-protection-prod");
            assert_eq!(f.severity, Severity::Deny);
            assert_eq!(f.path, "spec.options.protection");
            assert_eq!(
                f.object.as_ref().and_then(|o| o.file.as_deref()),
                Some("vm/lab/web-01.yaml")
            );
            assert_eq!(report.blocks(), blocks, "{mode}");
            assert_eq!(report.lines().len(), shown, "{mode}");
            assert_eq!(report.json()["findings"].as_array().map(Vec::len), Some(1));
            if blocks {
                let line = &report.lines()[0];
                assert!(
                    line.contains(
                        "denied VM web-01 (vm/lab/web-01.yaml) at spec.options.protection"
                    ),
                    "{line}"
                );
                assert_eq!(report.verdict(), "deny");
            }
            // Other clusters' manifests are not this cluster's business.
            assert!(set.check_manifests("other", &[prod_vm(false)]).is_empty());
        }
    }

    #[test]
    fn every_example_loads_and_answers() {
        let examples = [
            ("proxops-policy-require-protection-prod", json!({})),
            (
                "proxops-policy-resource-limits",
                json!({"rules": [{"max-memory": "1GiB"}]}),
            ),
            (
                "proxops-policy-network-allowlist",
                json!({"bridges": [{"name": "vmbr0"}]}),
            ),
            ("proxops-policy-approve-destructive", json!({})),
        ];
        let mut files = Vec::new();
        let mut yaml = String::from("policies:\n");
        for (i, (package, settings)) in examples.iter().enumerate() {
            let bytes = built(package);
            let name = format!("p{i}.wasm");
            yaml.push_str(&entry(&name, &bytes, "enforce", settings.clone()));
            files.push((name, bytes));
        }
        let refs: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(n, b)| (n.as_str(), b.as_slice()))
            .collect();
        let repo = TempRepo::new(&refs, &yaml);
        let set = repo.load().expect("all examples load");
        assert_eq!(set.policies().len(), 4);
        let mut vm = prod_vm(true);
        vm.document["spec"]["networks"] = json!([{"bridge": "vmbr7"}]);
        let report = set.check_manifests("lab", &[vm]);
        let mut got: Vec<(&str, &str)> = report
            .findings
            .iter()
            .map(|f| (f.policy.as_str(), f.path.as_str()))
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                ("network-allowlist", "spec.networks[0].bridge"),
                ("resource-limits", "spec.memory"),
            ]
        );
        assert!(report.blocks());
    }

    fn plan_with(actions: Vec<(&str, Option<&str>, Action, bool)>) -> ClusterPlan {
        ClusterPlan {
            cluster: "lab".into(),
            objects: actions
                .into_iter()
                .map(|(name, file, action, running)| ObjectPlan {
                    object: ObjectRef {
                        id: proxops_core::ObjectId::new("lab", "VM", name),
                        file: file.map(Into::into),
                        node: Some("pve01".into()),
                        resource: None,
                    },
                    kind_index: 0,
                    desired: None,
                    running,
                    proposal: Proposal {
                        actions: vec![action],
                        drift: vec![],
                        pending: vec![],
                        anomalies: vec![],
                    },
                    depends_on: vec![],
                    error: None,
                })
                .collect(),
        }
    }

    fn action(operation: Operation, destructive: bool, requires_stop: bool) -> Action {
        Action {
            operation,
            summary: format!("{} VM", operation_name(operation)),
            calls: vec![],
            changes: vec![Change {
                key: "cipassword".into(),
                old: None,
                new: Some("hunter2".into()),
                sensitive: true,
            }],
            requires_stop,
            destructive,
        }
    }

    #[test]
    fn plan_checks_locate_objects_and_need_approval() {
        let wasm = built("proxops-policy-approve-destructive");
        let repo = TempRepo::new(
            &[("approve.wasm", &wasm)],
            &format!(
                "policies:\n{}",
                entry(
                    "approve.wasm",
                    &wasm,
                    "enforce",
                    json!({"approved-deletes": ["VM/gone-2"]})
                )
            ),
        );
        let set = repo.load().expect("loads");
        let mut approved = prod_vm(true);
        approved.name = "approved".into();
        approved.file = "vm/lab/approved.yaml".into();
        approved.document["metadata"]["annotations"] =
            json!({"proxops.io/approve-destructive": "CHG-7"});
        let plan = plan_with(vec![
            (
                "web-01",
                Some("vm/lab/web-01.yaml"),
                action(Operation::Update, false, true),
                true,
            ),
            (
                "approved",
                Some("vm/lab/approved.yaml"),
                action(Operation::Update, true, false),
                true,
            ),
            ("gone", None, action(Operation::Delete, true, false), false),
            (
                "gone-2",
                None,
                action(Operation::Delete, true, false),
                false,
            ),
            (
                "web-01",
                Some("vm/lab/web-01.yaml"),
                action(Operation::Create, false, false),
                false,
            ),
        ]);
        let report = set.check_plan(&plan, &[prod_vm(true), approved]);
        // The approve-destructive verdict is deny (two unapproved), so the approved ones are
        // not in it: one verdict carries one severity.
        let got: Vec<(Option<&str>, &str, Severity)> = report
            .findings
            .iter()
            .map(|f| {
                (
                    f.object.as_ref().map(|o| o.name.as_str()),
                    f.path.as_str(),
                    f.severity,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    Some("web-01"),
                    "metadata.annotations.proxops.io/approve-destructive",
                    Severity::Deny
                ),
                (Some("gone"), "", Severity::Deny),
            ]
        );
        assert!(report.blocks());
        assert_eq!(
            report.findings[1]
                .object
                .as_ref()
                .and_then(|o| o.file.as_deref()),
            None
        );
        // Approved only: a warning that quotes the approval.
        let plan = plan_with(vec![(
            "approved",
            Some("vm/lab/approved.yaml"),
            action(Operation::Update, true, false),
            true,
        )]);
        let mut approved = prod_vm(true);
        approved.file = "vm/lab/approved.yaml".into();
        approved.document["metadata"]["annotations"] =
            json!({"proxops.io/approve-destructive": "CHG-7"});
        let report = set.check_plan(&plan, &[approved]);
        assert!(!report.blocks());
        assert_eq!(report.verdict(), "warn");
        assert!(report.findings[0].message.contains("CHG-7"), "{report:?}");
    }

    #[test]
    fn policies_see_redacted_changes() {
        let c = redact(&Change {
            key: "cipassword".into(),
            old: Some("old-secret".into()),
            new: Some("hunter2".into()),
            sensitive: true,
        });
        assert_eq!(c.old.as_deref(), Some("(sensitive)"));
        assert_eq!(c.new.as_deref(), Some("(sensitive)"));
        let plain = Change {
            key: "memory".into(),
            old: None,
            new: Some("2048".into()),
            sensitive: false,
        };
        assert_eq!(redact(&plain), plain);
    }

    #[test]
    fn a_hash_mismatch_refuses_before_compiling() {
        let wasm = built("proxops-policy-require-protection-prod");
        // Pinned to other bytes.
        let yaml = format!(
            "policies:\n  - file: policies/prot.wasm\n    sha256: {}\n",
            sha256_hex(b"something else")
        );
        let repo = TempRepo::new(&[("prot.wasm", &wasm)], &yaml);
        let e = repo.load().expect_err("mismatch");
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].path, "policies[0].sha256");
        assert!(e[0].message.starts_with("refused"), "{}", e[0]);
        assert!(e[0].message.contains(&sha256_hex(&wasm)), "{}", e[0]);
        // Not even a component: the hash is what is reported, nothing was compiled.
        let repo = TempRepo::new(&[("junk.wasm", b"not wasm")], &yaml.replace("prot", "junk"));
        let e = repo.load().expect_err("mismatch");
        assert_eq!(e[0].path, "policies[0].sha256");
        // Correct pin, not a component: a load error on the file.
        let repo = TempRepo::new(
            &[("junk.wasm", b"not wasm")],
            &format!(
                "policies:\n{}",
                entry("junk.wasm", b"not wasm", "enforce", json!({}))
            ),
        );
        let e = repo.load().expect_err("not a component");
        assert_eq!(e[0].path, "policies[0].file");
        // A missing file.
        let repo = TempRepo::new(&[], &yaml);
        let e = repo.load().expect_err("missing");
        assert!(e[0].message.contains("does not exist"), "{}", e[0]);
    }

    #[test]
    fn invalid_settings_stop_the_load() {
        let wasm = built("proxops-policy-resource-limits");
        let cases = [
            // Refused by the JSON Schema.
            (
                json!({"rules": []}),
                "policies[0].settings.rules",
                "less than 1 item",
            ),
            (
                json!({"rules": [{"max-cpu": 1}]}),
                "policies[0].settings.rules[0].max-cpu",
                "unknown field",
            ),
            (
                json!({"rules": [{"max-cores": "8"}]}),
                "policies[0].settings.rules[0].max-cores",
                "is not of type \"integer\"",
            ),
            // Valid for the schema, refused by validate-settings.
            (
                json!({"rules": [{"max-memory": "8GB"}]}),
                "policies[0].settings.rules[0].max-memory",
                "policy `resource-limits`",
            ),
        ];
        for (settings, path, message) in cases {
            let repo = TempRepo::new(
                &[("limits.wasm", &wasm)],
                &format!(
                    "policies:\n{}",
                    entry("limits.wasm", &wasm, "enforce", settings.clone())
                ),
            );
            let e = repo.load().expect_err("invalid settings");
            assert_eq!(e[0].path, path, "{settings}: {e:?}");
            assert!(e[0].message.contains(message), "{settings}: {}", e[0]);
            assert_eq!(e[0].file, "proxops.yaml");
        }
    }

    fn misbehave(mode: &str, settings: Value) -> (TempRepo, Result<PolicySet, Vec<Diagnostic>>) {
        let wasm = built("proxops-policy-misbehave");
        let repo = TempRepo::new(
            &[("bad.wasm", &wasm)],
            &format!("policies:\n{}", entry("bad.wasm", &wasm, mode, settings)),
        );
        let set = repo.load();
        (repo, set)
    }

    #[test]
    fn a_misbehaving_policy_fails_closed() {
        for (what, reason) in [
            ("loop", "deadline"),
            ("alloc", "memory limit"),
            ("panic", "panicked"),
        ] {
            let (_repo, set) = misbehave("enforce", json!({ "manifest": what, "plan": what }));
            let set = set.expect("loads");
            let report = set.check_manifests("lab", &[prod_vm(true)]);
            assert!(report.blocks(), "{what}");
            let f = &report.findings[0];
            assert!(f.failed, "{what}");
            assert!(f.message.contains(reason), "{what}: {}", f.message);
            assert!(f.message.contains("fail closed"), "{}", f.message);
            let plan = plan_with(vec![(
                "web-01",
                Some("vm/lab/web-01.yaml"),
                action(Operation::Update, false, false),
                false,
            )]);
            let report = set.check_plan(&plan, &[]);
            assert!(
                report.blocks() && report.findings[0].failed,
                "{what}: {report:?}"
            );
            if what == "loop" {
                // In warn mode the same failure is shown and does not stop anything.
                let (_repo, set) = misbehave("warn", json!({ "manifest": what }));
                let report = set.expect("loads").check_manifests("lab", &[prod_vm(true)]);
                assert!(!report.blocks() && report.findings[0].failed);
            }
        }
        // A policy that fails while validating its settings stops the load.
        let (_repo, set) = misbehave("enforce", json!({"validate": "loop"}));
        let e = set.expect_err("fails at load");
        assert!(e[0].message.contains("deadline"), "{}", e[0]);
        let (_repo, set) = misbehave("enforce", json!({"validate": "deny"}));
        let e = set.expect_err("rejects its settings");
        assert_eq!(e[0].path, "policies[0].settings.validate");
    }

    #[test]
    fn a_failed_policy_is_called_once_per_cluster_and_reported_once() {
        let (_repo, set) = misbehave("enforce", json!({ "manifest": "loop", "plan": "loop" }));
        let set = set.expect("loads");
        let manifests: Vec<Manifest> = (0..30)
            .map(|i| {
                let mut m = prod_vm(true);
                m.name = format!("vm-{i:02}");
                m.file = format!("vm/lab/vm-{i:02}.yaml");
                m
            })
            .collect();
        let mut report = set.check_manifests("lab", &manifests);
        assert_eq!(set.run(0, "lab").calls(), 1, "30 manifests, one call");
        assert_eq!(report.findings.len(), 1, "{report:?}");
        assert!(
            report.findings[0]
                .message
                .contains("not called again for cluster lab")
        );
        // The plan check does not call it either, and the merged report keeps one message.
        let plan = plan_with(vec![(
            "vm-00",
            Some("vm/lab/vm-00.yaml"),
            action(Operation::Update, false, false),
            false,
        )]);
        let plan_report = set.check_plan(&plan, &manifests);
        assert!(
            plan_report.blocks(),
            "a stopped policy still blocks: {plan_report:?}"
        );
        // It names the first failure (the one message the merged report keeps).
        assert!(plan_report.findings[0].failed);
        assert_eq!(plan_report.findings[0].message, report.findings[0].message);
        report.extend(plan_report);
        assert_eq!(report.findings.len(), 1, "{report:?}");
        assert!(report.blocks());
        assert_eq!(set.run(0, "lab").calls(), 1);
        // Another cluster is another run: called (and failing) once there too.
        let mut other = prod_vm(true);
        other.cluster = "prod".into();
        let prod = set.check_manifests("prod", &[other.clone(), other]);
        assert_eq!(prod.findings.len(), 1);
        assert_eq!(set.run(0, "prod").calls(), 1);
    }

    #[test]
    fn the_policy_budget_comes_from_proxops_yaml() {
        let wasm = built("proxops-policy-misbehave");
        let yaml = format!(
            "policies:\n{}guest-budget: {{policy: 100ms}}\n",
            entry("bad.wasm", &wasm, "enforce", json!({"manifest": "loop"}))
        );
        let repo = TempRepo::new(&[("bad.wasm", &wasm)], &yaml);
        let set = repo.load().expect("loads");
        let report = set.check_manifests("lab", &[prod_vm(true)]);
        let f = &report.findings[0];
        assert!(f.failed && report.blocks());
        assert!(
            f.message.contains("used up the guest's budget of 100ms"),
            "{}",
            f.message
        );
    }

    #[test]
    fn policies_get_no_capability() {
        for (what, want) in [("file", "denied"), ("env", "vars=0 home=denied")] {
            let (_repo, set) = misbehave("enforce", json!({ "manifest": what }));
            let report = set.expect("loads").check_manifests("lab", &[prod_vm(true)]);
            assert_eq!(report.findings.len(), 1);
            assert_eq!(report.findings[0].severity, Severity::Warn);
            assert!(
                report.findings[0].message.starts_with(want),
                "{what}: {}",
                report.findings[0].message
            );
        }
    }

    #[test]
    fn scope_selects_clusters_and_kinds() {
        let wasm = built("proxops-policy-misbehave");
        let yaml = |scope: &str| {
            format!(
                "policies:\n{}    scope: {scope}\n",
                entry(
                    "bad.wasm",
                    &wasm,
                    "enforce",
                    json!({"manifest": "deny", "plan": "deny"})
                )
            )
        };
        let plan = plan_with(vec![(
            "web-01",
            None,
            action(Operation::Update, false, false),
            false,
        )]);
        for (scope, hits) in [
            ("{}", 2),
            ("{clusters: [lab]}", 2),
            ("{clusters: [prod]}", 0),
            ("{kinds: [VM, ISO]}", 2),
            ("{kinds: [ISO]}", 0),
        ] {
            let repo = TempRepo::new(&[("bad.wasm", &wasm)], &yaml(scope));
            let set = repo.load().expect("loads");
            let mut report = set.check_manifests("lab", &[prod_vm(true)]);
            report.extend(set.check_plan(&plan, &[]));
            assert_eq!(report.findings.len(), hits, "{scope}");
        }
    }

    #[test]
    fn a_path_outside_the_repository_is_refused() {
        let e = parse_text(
            "proxops.yaml",
            &format!(
                "policies:\n  - file: ../x.wasm\n    sha256: {}\n",
                sha256_hex(b"")
            ),
        )
        .expect_err("escape");
        assert_eq!(e[0].path, "policies[0].file");
    }

    #[test]
    fn reads_plan_json() {
        let text = json!([{
            "cluster": "lab",
            "counts": {},
            "objects": [{
                "kind": "VM", "name": "web-01", "file": "vm/lab/web-01.yaml", "node": "pve01",
                "resource": "qemu/101", "running": true,
                "actions": [{"operation": "update", "summary": "update VM 101", "destructive": false,
                             "requires_stop": true,
                             "changes": [{"key": "memory", "old": "1024", "new": "2048"},
                                         {"key": "cipassword", "old": null, "new": "(sensitive)"}],
                             "calls": []}],
                "drift": [], "pending": [], "anomalies": []
            }]
        }])
        .to_string();
        let docs = [ManifestInput::from(&prod_vm(true))];
        let clusters = actions_from_plan_json(&text, &docs).expect("parses");
        assert_eq!(clusters.len(), 1);
        let (cluster, actions) = &clusters[0];
        assert_eq!(cluster, "lab");
        let a = &actions[0].view;
        assert_eq!(a.operation, Operation::Update);
        assert!(a.requires_stop && a.running);
        assert!(!a.changes[0].sensitive && a.changes[1].sensitive);
        assert!(a.document.as_deref().is_some_and(|d| d.contains("web-01")));
        assert!(actions_from_plan_json("{\"x\": 1}", &[]).is_err());
        let one = json!({"cluster": "lab", "objects": []}).to_string();
        assert_eq!(actions_from_plan_json(&one, &[]).expect("one").len(), 1);
    }
}
