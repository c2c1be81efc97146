//! The kind natively: validation cases and adopt's round trip (the rule planner's own tests live
//! with it, in proxops-firewall-rules).

use proxops_kind_sdk::model::{Call, Method, Observation, Read};
use serde_json::{Value, json};

use crate::desired::validate;
use crate::plan::plan_calls;

fn check(spec: Value, expected: &[(&str, &str)]) {
    let doc = json!({"apiVersion": "proxops/v1alpha1", "kind": "Firewall",
        "metadata": {"name": "web"}, "spec": spec});
    match validate(&doc) {
        Ok(_) => assert!(expected.is_empty(), "{spec}: valid, expected {expected:?}"),
        Err(diags) => {
            for (path, fragment) in expected {
                assert!(
                    diags
                        .iter()
                        .any(|d| d.path == *path && d.message.contains(fragment)),
                    "{spec}: expected {path}: {fragment:?} in {diags:?}"
                );
            }
            assert!(!expected.is_empty(), "{spec}: {diags:?}");
        }
    }
}

#[test]
fn manifests_are_checked_field_by_field() {
    let cases: Vec<(Value, Vec<(&str, &str)>)> = vec![
        (json!({"vmid": 100}), vec![]),
        (json!({}), vec![("spec.vmid", "")]),
        (
            json!({"vmid": 100, "rules": [{"type": "in", "action": "ACCEPT", "source": "office"}]}),
            vec![(
                "spec.rules[0].source",
                "alias `office`, which spec.aliases does not declare",
            )],
        ),
        (
            json!({"vmid": 100, "rules": [{"type": "in", "action": "ACCEPT", "dest": "+admins"}]}),
            vec![(
                "spec.rules[0].dest",
                "ipset `admins`, which spec.ipsets does not declare",
            )],
        ),
        (
            json!({"vmid": 100, "aliases": [{"name": "Office", "cidr": "192.0.2.0/24"}],
                   "ipsets": [{"name": "admins", "entries": ["198.51.100.7", {"cidr": "office"}]}],
                   "rules": [{"type": "in", "action": "ACCEPT", "source": "office", "dest": "+admins"},
                             {"type": "in", "action": "ACCEPT", "source": "dc/corp", "dest": "+dc/all"}]}),
            vec![],
        ),
        (
            json!({"vmid": 100, "rules": [{"type": "in", "action": "ACCEPT", "dport": "22"}]}),
            vec![("spec.rules[0].dport", "needs `proto`")],
        ),
        (
            json!({"vmid": 100, "rules": [{"type": "in", "action": "ACCEPT", "proto": "gre", "dport": "22"}]}),
            vec![("spec.rules[0].dport", "does not support ports")],
        ),
        (
            json!({"vmid": 100, "rules": [{"type": "group"}]}),
            vec![("spec.rules[0].group", "is required")],
        ),
        (
            json!({"vmid": 100, "rules": [{"type": "group", "group": "web", "action": "ACCEPT"}]}),
            vec![("spec.rules[0].action", "does not apply to a `group` rule")],
        ),
        (
            json!({"vmid": 100, "rules": [{"type": "in", "action": "ACCEPT", "macro": "nosuch"}]}),
            vec![("spec.rules[0].macro", "not one of PVE's firewall macros")],
        ),
        (
            json!({"vmid": 100, "rules": [{"type": "in", "action": "ACCEPT", "iface": "eth0"}]}),
            vec![("spec.rules[0].iface", "not a guest NIC")],
        ),
        (
            json!({"vmid": 100, "options": {"policy_in": "ALLOW"}}),
            vec![("spec.options.policy_in", "")],
        ),
        (
            json!({"vmid": 100, "options": {"polcy_in": "DROP"}}),
            vec![("spec.options.polcy_in", "")],
        ),
        (
            json!({"vmid": 100, "aliases": [{"name": "a", "cidr": "10.0.0.1"}, {"name": "ok", "cidr": "nope"}]}),
            vec![
                ("spec.aliases[0].name", "not an alias name"),
                ("spec.aliases[1].cidr", "not an IP"),
            ],
        ),
        (
            json!({"vmid": 100, "aliases": [{"name": "ab", "cidr": "10.0.0.1"}, {"name": "AB", "cidr": "10.0.0.2"}]}),
            vec![("spec.aliases[1].name", "declared twice")],
        ),
        (
            json!({"vmid": 100, "type": "lxc", "vm": "web"}),
            vec![("spec.vm", "spec.type is lxc")],
        ),
    ];
    for (spec, expected) in cases {
        check(spec, &expected);
    }
}

fn read(path: &str, body: Value) -> Read {
    Read {
        call: Call::new(Method::Get, path),
        status: 200,
        body: body.to_string(),
    }
}

/// Adopt's manifest, validated and planned against the firewall it was adopted from, proposes
/// nothing.
#[test]
fn adopt_round_trips_to_an_empty_plan() {
    let base = "/nodes/pve01/qemu/100/firewall";
    let entry =
        json!({"id": "qemu/100", "type": "qemu", "vmid": 100, "node": "pve01", "name": "web"});
    let observation = Observation {
        live: Some(entry.to_string()),
        reads: vec![
            read(
                &format!("{base}/options"),
                json!({"enable": 1, "policy_in": "DROP", "macfilter": 0, "digest": "o"}),
            ),
            read(
                &format!("{base}/rules"),
                json!([
                    {"pos": 0, "type": "in", "action": "ACCEPT", "macro": "SSH", "source": "office", "enable": 1, "comment": "ssh", "digest": "r"},
                    {"pos": 1, "type": "out", "action": "DROP", "proto": "tcp", "dport": "25", "enable": 0, "ipversion": 4, "digest": "r"},
                    {"pos": 2, "type": "group", "action": "webtier", "iface": "net0", "enable": 1, "digest": "r"}
                ]),
            ),
            read(
                &format!("{base}/aliases"),
                json!([{"name": "Office", "cidr": "192.0.2.0/24", "comment": "hq", "ipversion": 4, "digest": "a"}]),
            ),
            read(&format!("{base}/ipset"), json!([])),
        ],
    };
    let adopted = crate::adopt::adopt(&observation).expect("adopted");
    assert_eq!(adopted.gaps.len(), 1, "{:?}", adopted.gaps);
    assert_eq!(adopted.gaps[0].path, "spec.rules[2].group");
    let desired = validate(&adopted.manifest).expect("the adopted manifest validates");
    let mut p = proxops_kind_sdk::model::Proposal {
        actions: Vec::new(),
        drift: Vec::new(),
        pending: Vec::new(),
        anomalies: Vec::new(),
    };
    let live = crate::plan::read_live(&desired, base, &observation).expect("reads");
    plan_calls(&desired, &live, base, &mut p);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert!(p.drift.is_empty(), "{:?}", p.drift);
    // A firewall with ipsets is not adopted: their entries were not read.
    let mut with_set = observation.clone();
    with_set.reads[3] = read(
        &format!("{base}/ipset"),
        json!([{"name": "admins", "digest": "i"}]),
    );
    let why = crate::adopt::adopt(&with_set).expect_err("not adopted");
    assert!(why.contains("ipsets (admins)"), "{why}");
}
