//! The kind natively: the fewest moves (property-tested against PVE's positional list and a
//! breadth-first search), the rule calls applied to a model of PVE's list, validation cases, and
//! adopt's round trip.

use std::collections::{BTreeMap, HashSet, VecDeque};

use proptest::prelude::*;
use proxops_kind_sdk::model::{Call, Method, Observation, Read};
use serde_json::{Value, json};

use crate::desired::{Rule, validate};
use crate::order::{self, Move};
use crate::plan::{plan_calls, rule_calls};

/// The length of a longest strictly increasing subsequence, by the O(n²) recurrence.
fn lis_len(xs: &[usize]) -> usize {
    let mut best = vec![1; xs.len()];
    for i in 0..xs.len() {
        for j in 0..i {
            if xs[j] < xs[i] {
                best[i] = best[i].max(best[j] + 1);
            }
        }
    }
    best.into_iter().max().unwrap_or(0)
}

/// The fewest `moveto`s that sort `xs`, by breadth-first search over every reachable order.
fn bfs_moves(xs: &[usize]) -> usize {
    let goal: Vec<usize> = (0..xs.len()).collect();
    let mut seen: HashSet<Vec<usize>> = HashSet::from([xs.to_vec()]);
    let mut queue = VecDeque::from([(xs.to_vec(), 0)]);
    while let Some((list, d)) = queue.pop_front() {
        if list == goal {
            return d;
        }
        for pos in 0..list.len() {
            for to in 0..=list.len() {
                if to == pos {
                    continue;
                }
                let mut next = list.clone();
                order::apply(&mut next, Move { pos, to });
                if seen.insert(next.clone()) {
                    queue.push_back((next, d + 1));
                }
            }
        }
    }
    unreachable!("every order is reachable")
}

fn permutation(max: usize) -> impl Strategy<Value = Vec<usize>> {
    (0..=max).prop_flat_map(|n| Just((0..n).collect::<Vec<usize>>()).prop_shuffle())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// The planned moves, applied as PVE applies `moveto`, sort the list; there are n - LIS of
    /// them, no move is a no-op, and no rule moves twice.
    #[test]
    fn moves_sort_the_list_with_n_minus_lis_moves(xs in permutation(40)) {
        let moves = order::plan(&xs);
        let mut list = xs.clone();
        let mut moved = HashSet::new();
        for m in &moves {
            prop_assert!(m.to != m.pos && m.to != m.pos + 1, "no-op move {m:?}");
            prop_assert!(moved.insert(list[m.pos]), "rule {} moved twice", list[m.pos]);
            order::apply(&mut list, *m);
        }
        prop_assert_eq!(&list, &(0..xs.len()).collect::<Vec<_>>());
        prop_assert_eq!(moves.len(), xs.len() - lis_len(&xs));
    }

    /// On short lists, n - LIS is also what a breadth-first search over every sequence of
    /// moves finds: no shorter sequence exists.
    #[test]
    fn no_shorter_sequence_of_moves_exists(xs in permutation(6)) {
        prop_assert_eq!(order::plan(&xs).len(), bfs_moves(&xs));
    }

    /// The rule calls for any live list and any desired list, applied to a model of PVE's
    /// positional list, give the desired list; equal rules are never deleted and re-created.
    #[test]
    fn rule_calls_turn_any_list_into_any_other(
        live in prop::collection::vec(0u8..6, 0..9),
        desired in prop::collection::vec(0u8..6, 0..9),
    ) {
        let live: Vec<Rule> = live.iter().map(|n| rule(*n)).collect();
        let desired: Vec<Rule> = desired.iter().map(|n| rule(*n)).collect();
        let calls = rule_calls(&live, &desired, "/r", Some("d0"));
        let mut model = live.clone();
        for c in &calls {
            pve_apply(&mut model, c);
        }
        prop_assert_eq!(&model, &desired);
        // Rules both lists hold (by content) are kept, never deleted and created again.
        let kept = common(&live, &desired);
        let deletes = calls.iter().filter(|c| c.method == Method::Delete).count();
        let creates = calls.iter().filter(|c| c.method == Method::Post).count();
        prop_assert!(deletes <= live.len() - kept.min(live.len()));
        prop_assert_eq!(creates, desired.len().saturating_sub(live.len()));
        prop_assert_eq!(deletes, live.len().saturating_sub(desired.len()));
    }
}

/// How many rules the two lists share by content (a multiset intersection).
fn common(a: &[Rule], b: &[Rule]) -> usize {
    let mut left = b.to_vec();
    let mut n = 0;
    for r in a {
        if let Some(i) = left.iter().position(|x| x == r) {
            left.remove(i);
            n += 1;
        }
    }
    n
}

fn rule(n: u8) -> Rule {
    BTreeMap::from([
        ("type".to_string(), "in".to_string()),
        ("action".to_string(), "ACCEPT".to_string()),
        ("enable".to_string(), "1".to_string()),
        ("proto".to_string(), "tcp".to_string()),
        ("dport".to_string(), format!("{}", 1000 + u32::from(n))),
        ("comment".to_string(), format!("r{n}")),
    ])
}

/// PVE's rule list (pve-firewall `Rules.pm`): a create at 0, an update or `moveto` at `pos`,
/// a delete at `pos`.
fn pve_apply(list: &mut Vec<Rule>, c: &Call) {
    let pos = || -> usize { c.path.rsplit('/').next().unwrap().parse().unwrap() };
    match c.method {
        Method::Post => {
            let mut r = Rule::new();
            for p in &c.params {
                r.insert(p.name.clone(), p.value.clone());
            }
            list.insert(0, r);
        }
        Method::Delete => {
            list.remove(pos());
        }
        Method::Put => {
            let pos = pos();
            assert!(pos < list.len(), "no rule at position {pos}");
            if let Some(to) = c.get("moveto") {
                order::apply(
                    list,
                    Move {
                        pos,
                        to: to.parse().unwrap(),
                    },
                );
                return;
            }
            for p in &c.params {
                match p.name.as_str() {
                    "digest" => {}
                    "delete" => {
                        for k in p.value.split(',') {
                            list[pos].remove(k);
                        }
                    }
                    k => {
                        list[pos].insert(k.to_string(), p.value.clone());
                    }
                }
            }
        }
        Method::Get => {}
    }
}

#[test]
fn a_reordered_list_is_only_moved_and_the_digest_rides_on_the_first_call() {
    let live: Vec<Rule> = (0..5).map(rule).collect();
    let desired: Vec<Rule> = [4, 0, 1, 2, 3].iter().map(|n| rule(*n)).collect();
    let calls = rule_calls(&live, &desired, "/r", Some("d0"));
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].path, "/r/4");
    assert_eq!(calls[0].get("moveto"), Some("0"));
    assert_eq!(calls[0].get("digest"), Some("d0"));
    // Two rules swapped: one move.
    let desired: Vec<Rule> = [1, 0, 2, 3, 4].iter().map(|n| rule(*n)).collect();
    assert_eq!(rule_calls(&live, &desired, "/r", None).len(), 1);
    // One changed rule: one update in place, nothing else.
    let mut desired = live.clone();
    desired[2].insert("dport".into(), "8080".into());
    let calls = rule_calls(&live, &desired, "/r", Some("d0"));
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].path.as_str(), calls[0].get("dport")),
        ("/r/2", Some("8080"))
    );
}

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
