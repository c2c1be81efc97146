//! The kind through its WIT functions, with JSON as the host sends it. Each test is a table:
//! manifests with the diagnostics they give, live entries with the calls plan proposes.

use proxops_kind_sdk::kind::{Reference, Resolved, ResourceKind};
use proxops_kind_sdk::model::{Method, Observation, Proposal};
use proxops_kind_sdk::wit::Guest;
use serde_json::{Value, json};

use crate::HaRule as Kind;

fn manifest(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "proxops/v1alpha1", "kind": "HARule", "metadata": {"name": name}, "spec": spec})
}

/// The desired state (JSON) of a valid manifest.
fn desired(name: &str, spec: Value) -> String {
    match <Kind as Guest>::validate(manifest(name, spec).to_string()) {
        Ok(v) => v.desired,
        Err(e) => panic!("{name} does not validate: {e:?}"),
    }
}

/// The resolved VM of `spec.resources[i]`: `name` with `vmid`, with or without `spec.ha`.
fn vm(i: usize, name: &str, vmid: u32, ha: bool) -> Resolved {
    let mut d = json!({"kind": "VM", "name": name, "node": "pve01", "vmid": vmid});
    if ha {
        d["ha"] =
            json!({"state": "started", "max-restart": 1, "max-relocate": 1, "failback": true});
    }
    Resolved {
        reference: Reference {
            kind: "VM".into(),
            name: name.into(),
            path: format!("spec.resources[{i}]"),
        },
        desired: d.to_string(),
    }
}

fn wit_resolved(rs: &[Resolved]) -> Vec<proxops_kind_sdk::wit::Resolved> {
    rs.iter()
        .map(|r| proxops_kind_sdk::wit::Resolved {
            reference: proxops_kind_sdk::wit::Reference {
                kind: r.reference.kind.clone(),
                name: r.reference.name.clone(),
                path: r.reference.path.clone(),
            },
            desired: r.desired.clone(),
        })
        .collect()
}

fn plan(desired: Option<&str>, resolved: &[Resolved], live: Option<Value>) -> Proposal {
    let observed = Observation {
        live: live.map(|l| l.to_string()),
        reads: vec![],
    };
    let p = <Kind as Guest>::plan(
        desired.map(str::to_string),
        wit_resolved(resolved),
        vec![],
        observed,
    )
    .unwrap_or_else(|e| panic!("plan failed: {e:?}"));
    let info = <Kind as ResourceKind>::describe();
    for c in p.actions.iter().flat_map(|a| &a.calls) {
        assert!(info.declares(c.method, &c.path), "undeclared {c:?}");
    }
    p
}

/// The calls of a proposal as `METHOD path k=v k=v` lines (parameters in call order).
fn calls(p: &Proposal) -> Vec<String> {
    p.actions
        .iter()
        .flat_map(|a| &a.calls)
        .map(|c| {
            let mut s = format!("{} {}", c.method.as_str(), c.path);
            for p in &c.params {
                s.push_str(&format!(" {}={}", p.name, p.value));
            }
            s
        })
        .collect()
}

/// A live entry as the simulator (and PVE's `$get_api_ha_rule`) lists it.
fn entry(rule: &str, opts: Value) -> Value {
    let mut e = json!({"rule": rule, "digest": "d1g3st", "order": 1});
    for (k, v) in opts.as_object().unwrap() {
        e[k] = v.clone();
    }
    e
}

fn na_spec() -> Value {
    json!({"type": "node-affinity", "resources": ["web-01", "VM/web-02"],
           "nodes": [{"node": "pve02", "priority": 2}, "pve01"], "comment": "web tier"})
}

fn na_resolved() -> Vec<Resolved> {
    vec![vm(0, "web-01", 100, true), vm(1, "web-02", 101, true)]
}

#[test]
fn describes_itself() {
    let info = <Kind as ResourceKind>::describe();
    assert_eq!(
        (info.kind.as_str(), info.folder.as_str()),
        ("HARule", "harule")
    );
    let calls: Vec<(Method, &str)> = info.calls.iter().map(|(m, p)| (*m, p.as_str())).collect();
    assert_eq!(
        calls,
        [
            (Method::Get, "/cluster/ha/rules"),
            (Method::Post, "/cluster/ha/rules"),
            (Method::Put, "/cluster/ha/rules/{rule}"),
            (Method::Delete, "/cluster/ha/rules/{rule}"),
        ]
    );
    assert_eq!(info.listings[0].path, "/cluster/ha/rules");
    assert_eq!(info.listings[0].id_field, "rule");
    assert_eq!(info.references_kinds, ["VM"]);
    assert!(!info.secrets && info.capabilities.is_empty());
    assert!(info.schema["properties"]["spec"]["properties"]["resources"].is_object());
}

/// A manifest's name and spec, and the diagnostics it gives as (path, message).
type ValidateCase = (&'static str, Value, &'static [(&'static str, &'static str)]);

#[test]
fn validation_names_the_field() {
    let cases: &[ValidateCase] = &[
        ("ok", na_spec(), &[]),
        (
            "ra-ok",
            json!({"type": "resource-affinity", "affinity": "negative", "resources": ["a1", "vm:200", "ct:300"]}),
            &[],
        ),
        (
            "a",
            na_spec(),
            &[(
                "metadata.name",
                "`a` is too short for a PVE HA rule id (at least 2 characters)",
            )],
        ),
        (
            "1st",
            na_spec(),
            &[(
                "metadata.name",
                "`1st` must start with a letter to be a PVE HA rule id (pve-configid)",
            )],
        ),
        (
            "no-type",
            json!({"resources": ["a1"], "nodes": ["pve01"]}),
            &[("spec.type", "is required")],
        ),
        (
            "bad-type",
            json!({"type": "node-afinity", "resources": ["a1"], "nodes": ["pve01"]}),
            &[(
                "spec.type",
                "must be one of `node-affinity`, `resource-affinity`, got `node-afinity` (did you mean `node-affinity`?)",
            )],
        ),
        (
            "no-nodes",
            json!({"type": "node-affinity", "resources": ["a1"]}),
            &[(
                "spec.nodes",
                "is required for a node-affinity rule (the nodes its resources run on)",
            )],
        ),
        (
            "na-affinity",
            json!({"type": "node-affinity", "resources": ["a1"], "nodes": ["pve01"], "affinity": "positive"}),
            &[(
                "spec.affinity",
                "applies to resource-affinity rules only; a node-affinity rule takes `nodes` and `strict`",
            )],
        ),
        (
            "ra-nodes",
            json!({"type": "resource-affinity", "affinity": "positive", "resources": ["a1", "a2"], "nodes": ["pve01"], "strict": true}),
            &[
                (
                    "spec.nodes",
                    "applies to node-affinity rules only; a resource-affinity rule takes `affinity`",
                ),
                (
                    "spec.strict",
                    "applies to node-affinity rules only; a resource-affinity rule takes `affinity`",
                ),
            ],
        ),
        (
            "ra-no-affinity",
            json!({"type": "resource-affinity", "resources": ["a1", "a2"]}),
            &[(
                "spec.affinity",
                "is required for a resource-affinity rule: `positive` (keep the resources together) or `negative` (keep them apart)",
            )],
        ),
        (
            "ra-one",
            json!({"type": "resource-affinity", "affinity": "positive", "resources": ["a1"]}),
            &[(
                "spec.resources",
                "a resource-affinity rule needs at least two resources (PVE: rule is ineffective as there are less than two resources)",
            )],
        ),
        (
            "empty",
            json!({"type": "node-affinity", "resources": [], "nodes": []}),
            &[
                (
                    "spec.resources",
                    "must name at least one resource (PVE: no resources were specified)",
                ),
                (
                    "spec.nodes",
                    "must name at least one node (PVE: no nodes were specified)",
                ),
            ],
        ),
        (
            "dups",
            json!({"type": "node-affinity", "resources": ["web", "VM/web", "vm:100", "vm:100"], "nodes": ["pve01", {"node": "pve01", "priority": 1}]}),
            &[
                (
                    "spec.resources[1]",
                    "`VM/web` is already spec.resources[0]; name each resource once",
                ),
                (
                    "spec.resources[3]",
                    "`vm:100` is already spec.resources[2]; name each resource once",
                ),
                (
                    "spec.nodes[1].node",
                    "node `pve01` is already spec.nodes[0]; name each node once",
                ),
            ],
        ),
        (
            "bad-items",
            json!({"type": "node-affinity", "resources": ["vm:99", "TemplateVM/base", "Web", 3, "qm:100"],
                   "nodes": ["pve01:2", {"node": "pve02", "priority": -1}, {"name": "x"}, 7]}),
            &[
                (
                    "spec.resources[0]",
                    "`vm:99` is not an HA resource id proxops writes: `vm:<vmid>` or `ct:<vmid>` (vmid 100 to 999999999), or name a proxops VM (`web-01`, `VM/web-01`)",
                ),
                (
                    "spec.resources[1]",
                    "`TemplateVM/base` names a TemplateVM; an HA rule names VMs (`VM/<name>` or `<name>`) or raw HA resource ids (`vm:100`, `ct:200`)",
                ),
                (
                    "spec.resources[2]",
                    "VM name `Web` contains `W`; use lower-case letters, digits and `-` only (a DNS label)",
                ),
                (
                    "spec.resources[3]",
                    "expected a VM name or an HA resource id such as `vm:100`, got an integer",
                ),
                (
                    "spec.resources[4]",
                    "`qm:100` is not an HA resource id proxops writes: `vm:<vmid>` or `ct:<vmid>` (vmid 100 to 999999999), or name a proxops VM (`web-01`, `VM/web-01`)",
                ),
                (
                    "spec.nodes[0]",
                    "`pve01:2` is not a PVE node name; give a priority as `{node: <name>, priority: <n>}`",
                ),
                (
                    "spec.nodes[1].priority",
                    "must be from 0 to 1000000, got -1",
                ),
                (
                    "spec.nodes[2].name",
                    "unknown field `name`; expected one of `node`, `priority`",
                ),
                ("spec.nodes[2].node", "is required"),
                (
                    "spec.nodes[3]",
                    "expected a node name or a mapping `{node: <name>, priority: <n>}`, got an integer",
                ),
            ],
        ),
        (
            "misc",
            json!({"type": "node-affinity", "resources": ["a1"], "nodes": ["pve01"], "strict": "yes", "disabled": 1, "comment": "two\nlines", "prio": 1}),
            &[
                (
                    "spec.prio",
                    "unknown field `prio`; expected one of `type`, `resources`, `nodes`, `strict`, `affinity`, `disabled`, `comment`",
                ),
                ("spec.strict", "expected true or false, got a string"),
                ("spec.disabled", "expected true or false, got an integer"),
                (
                    "spec.comment",
                    "must be one line without control characters (PVE keeps rules one option per line)",
                ),
            ],
        ),
    ];
    for (name, spec, want) in cases {
        let got: Vec<(String, String)> =
            match <Kind as Guest>::validate(manifest(name, spec.clone()).to_string()) {
                Ok(v) => v
                    .warnings
                    .into_iter()
                    .map(|d| (d.path, d.message))
                    .collect(),
                Err(e) => e.into_iter().map(|d| (d.path, d.message)).collect(),
            };
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(p, m)| (p.to_string(), m.to_string()))
            .collect();
        assert_eq!(got, want, "{name}");
    }
    let long = json!({"type": "node-affinity", "resources": ["a1"], "nodes": ["pve01"], "comment": "x".repeat(4090)});
    let e = <Kind as Guest>::validate(manifest("long", long).to_string()).unwrap_err();
    assert_eq!(e[0].path, "spec.comment");
    assert!(
        e[0].message
            .starts_with("is too long: with proxops's mark it is 4105 bytes")
    );
}

#[test]
fn desired_state_is_normalised() {
    let d: Value = serde_json::from_str(&desired("prefer-pve02", na_spec())).unwrap();
    assert_eq!(
        d,
        json!({"rule": "prefer-pve02", "type": "node-affinity",
               "resources": [{"vm": "web-01"}, {"vm": "web-02"}],
               "nodes": [{"node": "pve01", "priority": 0}, {"node": "pve02", "priority": 2}],
               "strict": false, "disabled": false, "comment": "web tier"})
    );
}

#[test]
fn references_and_their_checks() {
    let d = desired(
        "prefer-pve02",
        json!({"type": "node-affinity", "resources": ["web-01", "ct:200", "VM/web-02"], "nodes": ["pve01"]}),
    );
    let refs = <Kind as Guest>::references(d.clone());
    let got: Vec<(&str, &str, &str)> = refs
        .iter()
        .map(|r| (r.kind.as_str(), r.name.as_str(), r.path.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("VM", "web-01", "spec.resources[0]"),
            ("VM", "web-02", "spec.resources[2]")
        ]
    );
    let key = <Kind as Guest>::identity(d.clone());
    assert_eq!(
        (
            key.node,
            key.space.as_str(),
            key.key.as_str(),
            key.resource_id.as_deref()
        ),
        (None, "ha-rule", "prefer-pve02", Some("prefer-pve02"))
    );
    let check = |resolved: Vec<Resolved>| -> Vec<(String, String)> {
        <Kind as Guest>::check_references(d.clone(), wit_resolved(&resolved))
            .into_iter()
            .map(|d| (d.path, d.message))
            .collect()
    };
    assert_eq!(
        check(vec![vm(0, "web-01", 100, true), vm(2, "web-02", 101, true)]),
        []
    );
    assert_eq!(
        check(vec![vm(0, "web-01", 100, true), vm(2, "web-02", 101, false)]),
        [(
            "spec.resources[2]".to_string(),
            "HA rule prefer-pve02 names VM web-02, which has no spec.ha; PVE takes only HA resources in a rule. Declare spec.ha on VM web-02, or drop it from the rule".to_string()
        )]
    );
    // A VM whose vmid a raw sid of the rule already names.
    let d2 = desired(
        "pair",
        json!({"type": "resource-affinity", "affinity": "positive", "resources": ["vm:100", "web-01"]}),
    );
    let e = <Kind as Guest>::check_references(d2, wit_resolved(&[vm(1, "web-01", 100, true)]));
    assert_eq!(
        e.iter()
            .map(|d| (d.path.as_str(), d.message.as_str()))
            .collect::<Vec<_>>(),
        [(
            "spec.resources[1]",
            "`VM/web-01` is vm:100, which another entry of spec.resources already names"
        )]
    );
}

/// What plan proposes for a desired rule against a live entry: (case, live, calls, anomaly
/// prefixes).
type PlanCase = (
    &'static str,
    Option<Value>,
    Vec<&'static str>,
    Vec<&'static str>,
);

#[test]
fn plans() {
    let d = desired("prefer-pve02", na_spec());
    let marked = "web tier (proxops:prefer-pve02)";
    let converged = json!({"type": "node-affinity", "resources": "vm:100,vm:101", "nodes": "pve01,pve02:2", "comment": marked});
    let with = |patch: Value| {
        let mut e = entry("prefer-pve02", converged.clone());
        for (k, v) in patch.as_object().unwrap() {
            if v.is_null() {
                e.as_object_mut().unwrap().remove(k);
            } else {
                e[k] = v.clone();
            }
        }
        e
    };
    let cases: Vec<PlanCase> = vec![
        (
            "absent: create with every option and the mark",
            None,
            vec![
                "POST /cluster/ha/rules rule=prefer-pve02 type=node-affinity resources=vm:100,vm:101 nodes=pve01,pve02:2 comment=web tier (proxops:prefer-pve02)",
            ],
            vec![],
        ),
        ("converged", Some(with(json!({}))), vec![], vec![]),
        (
            "converged: strict 0 and disable 0 listed, priority 0 written, other order",
            Some(with(
                json!({"strict": 0, "disable": "0", "nodes": "pve02:2 pve01:0", "resources": "vm:101;vm:100"}),
            )),
            vec![],
            vec![],
        ),
        (
            "nodes and strict differ: only those, with type and digest",
            Some(with(json!({"nodes": "pve01:1,pve02:2", "strict": 1}))),
            vec![
                "PUT /cluster/ha/rules/prefer-pve02 type=node-affinity nodes=pve01,pve02:2 delete=strict digest=d1g3st",
            ],
            vec![],
        ),
        (
            "disabled live: enable by deleting `disable`; a resource more",
            Some(with(
                json!({"disable": 1, "resources": "vm:100,vm:101,vm:102"}),
            )),
            vec![
                "PUT /cluster/ha/rules/prefer-pve02 type=node-affinity resources=vm:100,vm:101 delete=disable digest=d1g3st",
            ],
            vec![],
        ),
        (
            "comment edited in PVE, mark kept: the manifest's comment is written back",
            Some(with(json!({"comment": "proxops:prefer-pve02 by hand"}))),
            vec![
                "PUT /cluster/ha/rules/prefer-pve02 type=node-affinity comment=web tier (proxops:prefer-pve02) digest=d1g3st",
            ],
            vec![],
        ),
        (
            "unmarked and identical but for the mark: anomaly, no write",
            Some(with(json!({"comment": "web tier"}))),
            vec![],
            vec![
                "HA rule prefer-pve02 exists but was not created by proxops (its comment lacks `proxops:prefer-pve02`); it matches this manifest apart from the mark, so nothing would change",
            ],
        ),
        (
            "unmarked and different: anomaly naming the differences, no write",
            Some(with(json!({"comment": null, "strict": 1}))),
            vec![],
            vec![
                "HA rule prefer-pve02 exists but was not created by proxops (its comment lacks `proxops:prefer-pve02`); it differs from this manifest (strict, comment)",
            ],
        ),
        (
            "another id's mark is no mark",
            Some(with(json!({"comment": "web tier (proxops:prefer-pve0)"}))),
            vec![],
            vec!["HA rule prefer-pve02 exists but was not created by proxops"],
        ),
        (
            "type differs: anomaly, no delete + create",
            Some(with(
                json!({"type": "resource-affinity", "affinity": "positive", "nodes": null}),
            )),
            vec![],
            vec![
                "HA rule prefer-pve02 is a resource-affinity rule in PVE and this manifest makes it node-affinity; PVE cannot change a rule's type",
            ],
        ),
        (
            "converged but infeasible: anomaly",
            Some(with(
                json!({"errors": {"resources": ["resource 'vm:100' is already used in another node affinity rule"]}}),
            )),
            vec![],
            vec![
                "PVE reports HA rule prefer-pve02 as infeasible, so its HA manager ignores it: resources: resource 'vm:100' is already used in another node affinity rule",
            ],
        ),
    ];
    for (name, live, want_calls, want_anomalies) in cases {
        let p = plan(Some(&d), &na_resolved(), live);
        assert_eq!(calls(&p), want_calls, "{name}");
        assert_eq!(
            p.anomalies.len(),
            want_anomalies.len(),
            "{name}: {:?}",
            p.anomalies
        );
        for (a, want) in p.anomalies.iter().zip(&want_anomalies) {
            assert!(a.message.starts_with(want), "{name}: {}", a.message);
        }
        if want_calls.is_empty() {
            assert!(p.actions.is_empty(), "{name}");
        }
        // Drift accompanies every write.
        assert_eq!(
            p.drift.is_empty(),
            p.actions.is_empty() && !name.starts_with("type"),
            "{name}: {:?}",
            p.drift
        );
    }
}

#[test]
fn resource_affinity_and_flags_on_create() {
    let d = desired(
        "apart",
        json!({"type": "resource-affinity", "affinity": "negative", "resources": ["web-01", "ct:200"], "disabled": true}),
    );
    let p = plan(Some(&d), &[vm(0, "web-01", 100, true)], None);
    assert_eq!(
        calls(&p),
        [
            "POST /cluster/ha/rules rule=apart type=resource-affinity resources=ct:200,vm:100 affinity=negative disable=1 comment=proxops:apart"
        ]
    );
    assert_eq!(
        p.actions[0].summary,
        "create HA rule apart (resource-affinity: ct:200,vm:100 apart, disabled)"
    );
    let d = desired(
        "pinned",
        json!({"type": "node-affinity", "resources": ["vm:100"], "nodes": ["pve01"], "strict": true}),
    );
    assert_eq!(
        calls(&plan(Some(&d), &[], None)),
        [
            "POST /cluster/ha/rules rule=pinned type=node-affinity resources=vm:100 nodes=pve01 strict=1 comment=proxops:pinned"
        ]
    );
    // Negative to positive: the one changed option.
    let d = desired(
        "apart",
        json!({"type": "resource-affinity", "affinity": "positive", "resources": ["vm:100", "vm:101"]}),
    );
    let live = entry(
        "apart",
        json!({"type": "resource-affinity", "affinity": "negative", "resources": "vm:100,vm:101", "comment": "proxops:apart"}),
    );
    assert_eq!(
        calls(&plan(Some(&d), &[], Some(live))),
        ["PUT /cluster/ha/rules/apart type=resource-affinity affinity=positive digest=d1g3st"]
    );
}

#[test]
fn a_missing_vm_fails_the_plan_closed() {
    let d = desired("prefer-pve02", na_spec());
    let e = <Kind as Guest>::plan(
        Some(d),
        wit_resolved(&[vm(0, "web-01", 100, true)]),
        vec![],
        Observation::default(),
    )
    .unwrap_err();
    assert_eq!(e[0].path, "spec.resources[1]");
    assert_eq!(e[0].message, "no VM named `web-02` in this cluster");
}

#[test]
fn prune_and_claims() {
    let listing = "/cluster/ha/rules";
    let cases = [
        (
            json!({"rule": "old", "type": "node-affinity", "resources": "vm:100", "nodes": "pve01", "comment": "proxops:old"}),
            true,
        ),
        (
            json!({"rule": "old", "comment": "kept (proxops:old)"}),
            true,
        ),
        (json!({"rule": "old", "comment": "proxops:older"}), false),
        (json!({"rule": "old", "comment": "by hand"}), false),
        (json!({"rule": "old"}), false),
        (json!({"comment": "proxops:old"}), false),
    ];
    for (e, claimed) in &cases {
        assert_eq!(
            <Kind as Guest>::claims(listing.into(), e.to_string()),
            *claimed,
            "{e}"
        );
        assert!(!<Kind as Guest>::claims(
            "/cluster/resources".into(),
            e.to_string()
        ));
    }
    let p = plan(None, &[], Some(cases[0].0.clone()));
    assert_eq!(calls(&p), ["DELETE /cluster/ha/rules/old"]);
    assert!(p.actions[0].destructive);
    assert_eq!(
        p.actions[0].summary,
        "delete HA rule old (node-affinity of vm:100; no manifest names it)"
    );
    // Handed an unmarked rule anyway: no delete.
    let p = plan(None, &[], Some(cases[3].0.clone()));
    assert!(p.actions.is_empty() && p.anomalies.len() == 1);
    assert!(plan(None, &[], None).actions.is_empty());
}

/// adopt, then validate and plan against the same entry: nothing to do (an unmarked rule
/// gets its ownership anomaly and a gap, nothing else).
#[test]
fn adopt_round_trips() {
    let cases: Vec<(Value, Value, usize)> = vec![
        (
            entry(
                "prefer-pve02",
                json!({"type": "node-affinity", "resources": "vm:100,vm:101", "nodes": "pve01,pve02:2", "strict": 1, "comment": "web tier (proxops:prefer-pve02)"}),
            ),
            json!({"type": "node-affinity", "resources": ["vm:100", "vm:101"], "nodes": ["pve01", {"node": "pve02", "priority": 2}], "strict": true, "comment": "web tier"}),
            1,
        ),
        (
            entry(
                "apart",
                json!({"type": "resource-affinity", "resources": "ct:200,vm:100", "affinity": "negative", "disable": 1, "comment": "proxops:apart"}),
            ),
            json!({"type": "resource-affinity", "resources": ["ct:200", "vm:100"], "affinity": "negative", "disabled": true}),
            1,
        ),
        (
            entry(
                "by-hand",
                json!({"type": "node-affinity", "resources": "ct:300", "nodes": "pve03", "comment": "made in the GUI"}),
            ),
            json!({"type": "node-affinity", "resources": ["ct:300"], "nodes": ["pve03"], "comment": "made in the GUI"}),
            0,
        ),
        (
            entry(
                "noted",
                json!({"type": "node-affinity", "resources": "ct:300", "nodes": "pve03", "comment": "proxops:noted, pinned"}),
            ),
            json!({"type": "node-affinity", "resources": ["ct:300"], "nodes": ["pve03"], "comment": "proxops:noted, pinned"}),
            0,
        ),
    ];
    for (live, spec, gaps) in cases {
        let observed = Observation {
            live: Some(live.to_string()),
            reads: vec![],
        };
        let a = <Kind as Guest>::adopt(observed).unwrap();
        let m: Value = serde_json::from_str(&a.manifest).unwrap();
        assert_eq!(m["spec"], spec, "{live}");
        let marked = <Kind as Guest>::claims("/cluster/ha/rules".into(), live.to_string());
        // An unmarked rule gets no gap: the host's `metadata.adopt` takes it over.
        assert_eq!(a.gaps.len(), gaps, "{live}: {:?}", a.gaps);
        let d = <Kind as Guest>::validate(a.manifest).unwrap().desired;
        let p = plan(Some(&d), &[], Some(live.clone()));
        assert!(p.actions.is_empty() && p.drift.is_empty(), "{live}: {p:?}");
        assert_eq!(
            p.anomalies.len(),
            usize::from(!marked),
            "{live}: {:?}",
            p.anomalies
        ); // Flagged by the host (the manifest's claim matches): the mark added to the live
        // comment with the live type, nothing else.
        let mut flagged = live.clone();
        flagged["proxops-take-over"] = json!(true);
        let p = plan(Some(&d), &[], Some(flagged));
        let expected: Vec<String> = if marked {
            vec![]
        } else {
            vec![format!(
                "PUT /cluster/ha/rules/{id} type={} comment={} (proxops:{id})",
                live["type"].as_str().unwrap(),
                live["comment"].as_str().unwrap(),
                id = live["rule"].as_str().unwrap()
            )]
        };
        assert_eq!(calls(&p), expected, "{live}");
    }
    for (live, why) in [
        (
            json!({"rule": "Upper", "type": "node-affinity"}),
            "HA rule id `Upper` cannot be a manifest name",
        ),
        (
            json!({"rule": "snake_case", "type": "node-affinity"}),
            "HA rule id `snake_case` cannot be a manifest name",
        ),
        (
            json!({"rule": "future", "type": "node-anti-affinity"}),
            "HA rule future has type `node-anti-affinity`",
        ),
    ] {
        let e = <Kind as Guest>::adopt(Observation {
            live: Some(live.to_string()),
            reads: vec![],
        })
        .unwrap_err();
        assert!(e.starts_with(why), "{e}");
    }
}
