//! Tests of site policies: loading, the pin check, modes, evaluation, fail-closed failures, scopes and the plan-JSON reader.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use proxops_core::settings::{parse_text, sha256_hex};
use proxops_core::{Diagnostic, Manifest};
use proxops_runtime::kind::{Action, Change, Operation, Proposal};
use proxops_runtime::{Runtime, RuntimeConfig};
use serde_json::{Value, json};

use super::check::redact;
use super::*;
use crate::plan::{ClusterPlan, ObjectPlan, ObjectRef, operation_name};

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
        let root =
            std::env::temp_dir().join(format!("proxops-policy-test-{}-{n}", std::process::id()));
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
    Manifest::new(
        format!("vm/{cluster}/{name}.yaml"),
        "vm".into(),
        cluster.into(),
        name.into(),
        &doc,
    )
}

/// `m` with its document changed by `edit`.
fn edited(m: Manifest, edit: impl FnOnce(&mut Value)) -> Manifest {
    let mut doc = m.document();
    edit(&mut doc);
    Manifest::new(m.file, m.folder, m.cluster, m.name, &doc)
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
                line.contains("denied VM web-01 (vm/lab/web-01.yaml) at spec.options.protection"),
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
    let vm = edited(prod_vm(true), |d| {
        d["spec"]["networks"] = json!([{"bridge": "vmbr7"}]);
    });
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
        rollout: Vec::new(),
        objects: actions
            .into_iter()
            .map(|(name, file, action, running)| ObjectPlan {
                object: ObjectRef {
                    id: proxops_core::ObjectId::new("lab", "VM", name),
                    file: file.map(Into::into),
                    node: Some("pve01".into()),
                    resource: None,
                    listings: Vec::new(),
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
                taking_over: false,
                sandboxed: false,
                relocated: None,
            })
            .collect(),
    }
}

fn action(operation: Operation, destructive: bool, requires_stop: bool) -> Action {
    Action {
        summary: format!("{} VM", operation_name(&operation)),
        operation,
        calls: vec![],
        changes: vec![Change {
            key: "cipassword".into(),
            old: None,
            new: Some("hunter2".into()),
            sensitive: true,
        }],
        disturbs_availability: requires_stop,
        destructive,
        restore: None,
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
    let mut approved = edited(prod_vm(true), |d| {
        d["metadata"]["annotations"] = json!({"proxops.io/approve-destructive": "CHG-7"});
    });
    approved.name = "approved".into();
    approved.file = "vm/lab/approved.yaml".into();
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
    let mut approved = edited(prod_vm(true), |d| {
        d["metadata"]["annotations"] = json!({"proxops.io/approve-destructive": "CHG-7"});
    });
    approved.file = "vm/lab/approved.yaml".into();
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
    // Evaluations spread over the cores: at most one call per thread runs into the deadline
    // (one deadline of wall time), the rest are never made.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let calls = set.run(0, "lab").calls();
    assert!(
        (1..=threads as u64).contains(&calls),
        "30 manifests, {calls} calls on {threads} threads"
    );
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
    assert_eq!(
        set.run(0, "lab").calls(),
        calls,
        "the plan check made no call"
    );
    // Another cluster is another run: called (and failing) there too, reported once.
    let mut other = prod_vm(true);
    other.cluster = "prod".into();
    let prod = set.check_manifests("prod", &[other.clone(), other]);
    assert_eq!(prod.findings.len(), 1);
    assert!((1..=2).contains(&set.run(0, "prod").calls()));
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
    assert_eq!(
        a.operation,
        proxops_runtime::policy::PolicyOperation::Update
    );
    assert!(a.requires_stop && a.running);
    assert!(!a.changes[0].sensitive && a.changes[1].sensitive);
    assert!(a.document.as_deref().is_some_and(|d| d.contains("web-01")));
    assert!(actions_from_plan_json("{\"x\": 1}", &[]).is_err());
    let one = json!({"cluster": "lab", "objects": []}).to_string();
    assert_eq!(actions_from_plan_json(&one, &[]).expect("one").len(), 1);
}

/// `plan --json` writes `PlanView`s and `policy test --plan` reads the same type: what is
/// written reads back field for field.
#[test]
fn the_plan_document_reads_back_as_written() {
    use crate::plan::{ActionView, CallView, ChangeView, ObjectRef, ObjectView, PlanView};
    let written = vec![PlanView {
        cluster: "lab".into(),
        rollout: Vec::new(),
        counts: crate::plan::Counts {
            update: 1,
            ..Default::default()
        },
        objects: vec![ObjectView {
            object: ObjectRef {
                id: proxops_core::ObjectId::new("lab", "VM", "web-01"),
                file: Some("vm/lab/web-01.yaml".into()),
                node: Some("pve01".into()),
                resource: Some("qemu/101".into()),
                listings: Vec::new(),
            },
            running: true,
            actions: vec![ActionView {
                operation: "update".into(),
                summary: "update VM 101".into(),
                destructive: false,
                requires_stop: true,
                changes: vec![ChangeView {
                    key: "memory".into(),
                    old: Some("1024".into()),
                    new: Some("2048".into()),
                }],
                calls: vec![CallView {
                    method: "POST".into(),
                    path: "/nodes/pve01/qemu/101/config".into(),
                    params: vec![("memory".into(), "2048".into())],
                }],
            }],
            drift: Vec::new(),
            pending: Vec::new(),
            anomalies: Vec::new(),
            error: None,
            sandboxed: true,
            relocated: Some(crate::plan::Relocated {
                from: "pve01".into(),
                to: "pve02".into(),
            }),
        }],
        policies: Some(json!({"denied": false})),
        errors: Vec::new(),
    }];
    let text = serde_json::to_string(&written).unwrap();
    let read: Vec<PlanView> = serde_json::from_str(&text).unwrap();
    assert_eq!(
        serde_json::to_value(&read).unwrap(),
        serde_json::to_value(&written).unwrap()
    );
    let clusters = actions_from_plan_json(&text, &[]).expect("parses");
    assert_eq!(clusters[0].1[0].view.summary, "update VM 101");
}
