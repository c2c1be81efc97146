//! The kind natively: validation cases, the plan of a create, a repair, a prune and an unmarked
//! group, and adopt's round trip.

use proxops_kind_sdk::model::{Call, Method, Observation, Operation, Proposal, Read};
use serde_json::{Value, json};

use crate::desired::validate;
use crate::plan::plan;

fn doc(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "proxops/v1alpha1", "kind": "SecurityGroup",
        "metadata": {"name": name}, "spec": spec})
}

fn check(name: &str, spec: Value, expected: &[(&str, &str)]) {
    match validate(&doc(name, spec.clone())) {
        Ok(_) => assert!(expected.is_empty(), "{spec}: valid, expected {expected:?}"),
        Err(diags) => {
            assert!(!expected.is_empty(), "{name} {spec}: {diags:?}");
            for (path, fragment) in expected {
                assert!(
                    diags
                        .iter()
                        .any(|d| d.path == *path && d.message.contains(fragment)),
                    "{spec}: expected {path}: {fragment:?} in {diags:?}"
                );
            }
        }
    }
}

#[test]
fn manifests_are_checked_field_by_field() {
    type Case<'a> = (&'a str, Value, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        ("webtier", json!({}), vec![]),
        (
            "webtier",
            json!({"comment": "web", "rules": [
                {"type": "in", "action": "ACCEPT", "macro": "https"},
                {"type": "out", "action": "DROP", "proto": "tcp", "dport": "25", "enable": false},
                {"type": "forward", "action": "ACCEPT", "source": "+dc/admins"}]}),
            vec![],
        ),
        (
            "a-name-longer-than-18",
            json!({}),
            vec![("metadata.name", "2 to 18 characters")],
        ),
        ("9web", json!({}), vec![("metadata.name", "a letter first")]),
        ("w", json!({}), vec![("metadata.name", "2 to 18")]),
        (
            "webtier",
            json!({"rules": [{"type": "group", "group": "other"}]}),
            vec![("spec.rules[0].type", "cannot contain a `group` rule")],
        ),
        (
            "webtier",
            json!({"rules": [{"type": "in", "action": "ACCEPT", "iface": "net0"}]}),
            vec![("spec.rules[0].iface", "no interface")],
        ),
        (
            "webtier",
            json!({"comment": "two\nlines"}),
            vec![("spec.comment", "one line")],
        ),
        (
            "webtier",
            json!({"policy": "DROP"}),
            vec![("spec.policy", "")],
        ),
    ];
    for (name, spec, expected) in cases {
        check(name, spec, &expected);
    }
}

fn read(path: &str, body: Value) -> Read {
    Read {
        call: Call::new(Method::Get, path),
        status: 200,
        body: body.to_string(),
    }
}

/// An observation of group `web` with `comment` and `rules` (PVE's answer form).
fn observed(comment: &str, rules: Value) -> Observation {
    Observation {
        live: Some(json!({"group": "web", "comment": comment, "digest": "L"}).to_string()),
        reads: vec![read("/cluster/firewall/groups/web", rules)],
    }
}

fn desired(spec: Value) -> crate::Desired {
    validate(&doc("web", spec)).expect("valid")
}

/// Calls as `METHOD path k=v …`.
fn calls(p: &Proposal) -> Vec<String> {
    p.actions
        .iter()
        .flat_map(|a| &a.calls)
        .map(|c| {
            let params: Vec<String> = c
                .params
                .iter()
                .map(|p| format!("{}={}", p.name, p.value))
                .collect();
            format!("{:?} {} {}", c.method, c.path, params.join(" "))
                .replace("Method::", "")
                .trim_end()
                .to_string()
        })
        .collect()
}

fn live_rule(pos: usize, comment: &str, dport: &str) -> Value {
    json!({"pos": pos, "type": "in", "action": "ACCEPT", "proto": "tcp", "dport": dport,
           "comment": comment, "enable": 1, "digest": "R"})
}

#[test]
fn plans_create_repair_prune_and_leave_an_unmarked_group_alone() {
    let spec = json!({"comment": "web", "rules": [
        {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "80", "comment": "a"},
        {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "443", "comment": "b"}]});
    let d = desired(spec);
    // Absent: the group with the mark, then its rules last one first.
    let p = plan(Some(&d), &Observation::default()).unwrap();
    // The planner writes a rule's fields in its own order: compare them sorted.
    let expected = [
        "Post /cluster/firewall/groups group=web comment=web (proxops:web)",
        "Post /cluster/firewall/groups/web enable=1 type=in action=ACCEPT proto=tcp dport=443 comment=b",
        "Post /cluster/firewall/groups/web enable=1 type=in action=ACCEPT proto=tcp dport=80 comment=a",
    ];
    assert_eq!(
        calls(&p).iter().map(|c| sorted(c)).collect::<Vec<_>>(),
        expected.iter().map(|c| sorted(c)).collect::<Vec<_>>()
    );
    assert_eq!(p.actions[0].operation, Operation::Create);

    // Marked, in order, same comment: nothing.
    let in_order = json!([live_rule(0, "a", "80"), live_rule(1, "b", "443")]);
    let p = plan(Some(&d), &observed("web (proxops:web)", in_order)).unwrap();
    assert!(p.actions.is_empty() && p.drift.is_empty(), "{p:?}");

    // Swapped by hand, comment changed: one move with the rules' digest, one comment update
    // with the listing's digest.
    let swapped = json!([live_rule(0, "b", "443"), live_rule(1, "a", "80")]);
    let p = plan(Some(&d), &observed("edited (proxops:web)", swapped)).unwrap();
    assert_eq!(
        calls(&p),
        [
            "Post /cluster/firewall/groups group=web rename=web comment=web (proxops:web) digest=L",
            "Put /cluster/firewall/groups/web/0 moveto=2 digest=R",
        ]
    );

    // Unmarked: an anomaly, no call.
    let p = plan(
        Some(&d),
        &observed("by hand", json!([live_rule(0, "x", "22")])),
    )
    .unwrap();
    assert!(p.actions.is_empty(), "{p:?}");
    assert!(
        p.anomalies[0].message.contains("not created by proxops"),
        "{:?}",
        p.anomalies
    );

    // Pruned: its rules (highest first, digest on the first), then the group.
    let two = json!([live_rule(0, "a", "80"), live_rule(1, "b", "443")]);
    let p = plan(None, &observed("web (proxops:web)", two)).unwrap();
    assert_eq!(
        calls(&p),
        [
            "Delete /cluster/firewall/groups/web/1 digest=R",
            "Delete /cluster/firewall/groups/web/0",
            "Delete /cluster/firewall/groups/web",
        ]
    );
    assert!(p.actions[0].destructive);
    // An unmarked group is never pruned.
    let p = plan(None, &observed("by hand", json!([]))).unwrap();
    assert!(p.actions.is_empty() && !p.anomalies.is_empty(), "{p:?}");
}

/// A call's text with its parameters sorted.
fn sorted(s: &str) -> String {
    let mut parts: Vec<&str> = s.split(' ').collect();
    let head: Vec<&str> = parts.drain(..2).collect();
    parts.sort_unstable();
    format!("{} {}", head.join(" "), parts.join(" "))
}

/// Adopt's manifest, validated and planned against the group it was adopted from, proposes
/// nothing; an unmarked group is adopted without a gap and taken over by the host's flag.
#[test]
fn adopt_round_trips_to_an_empty_plan() {
    let rules = json!([
        {"pos": 0, "type": "in", "action": "ACCEPT", "macro": "SSH", "source": "dc/office", "enable": 1, "comment": "ssh", "digest": "R"},
        {"pos": 1, "type": "out", "action": "DROP", "proto": "tcp", "dport": "25", "enable": 0, "ipversion": 4, "digest": "R"},
        {"pos": 2, "type": "forward", "action": "ACCEPT", "source": "+dc/admins", "log": "info", "enable": 1, "digest": "R"}
    ]);
    let o = observed("web tier (proxops:web)", rules.clone());
    let adopted = crate::adopt::adopt(&o).expect("adopted");
    assert!(adopted.gaps.is_empty(), "{:?}", adopted.gaps);
    assert_eq!(adopted.manifest["spec"]["comment"], "web tier");
    let d = validate(&adopted.manifest).expect("the adopted manifest validates");
    let p = plan(Some(&d), &o).unwrap();
    assert!(p.actions.is_empty() && p.drift.is_empty(), "{p:?}");

    // An unmarked group: no gap (the host's `metadata.adopt` takes it over); planned without
    // the host's flag, an anomaly; with it, the mark added to the live comment, PVE's comment
    // update form with the listing's digest, and nothing else (the rules differ).
    let theirs = observed("by hand", rules);
    let adopted = crate::adopt::adopt(&theirs).expect("adopted");
    assert!(adopted.gaps.is_empty(), "{:?}", adopted.gaps);
    let d = desired(json!({"comment": "other", "rules": []}));
    let p = plan(Some(&d), &theirs).unwrap();
    assert!(p.actions.is_empty() && p.anomalies.len() == 1, "{p:?}");
    let mut flagged = theirs.clone();
    flagged.live = Some(
        json!({"group": "web", "comment": "by hand", "digest": "L", "proxops-take-over": true})
            .to_string(),
    );
    let p = plan(Some(&d), &flagged).unwrap();
    assert_eq!(
        calls(&p),
        [
            "Post /cluster/firewall/groups group=web rename=web comment=by hand (proxops:web) digest=L"
        ]
    );
    assert!(p.anomalies.is_empty(), "{p:?}");
}
