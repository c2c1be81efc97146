//! The fewest moves (property-tested against PVE's positional list and a breadth-first search)
//! and the rule calls applied to a model of PVE's list.

use std::collections::{BTreeMap, HashSet, VecDeque};

use proptest::prelude::*;
use proxops_kind_sdk::model::{Call, Method};

use crate::order::{self, Move};
use crate::rules::{Rule, rule_calls};

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

/// `validate_rules` on `rules` in `env`: no diagnostics when `expected` is empty, else each
/// (path, fragment) among them.
fn check(env: &crate::rules::Env, rules: serde_json::Value, expected: &[(&str, &str)]) {
    let spec = serde_json::json!({ "rules": rules });
    let mut c = proxops_kind_sdk::check::Checker::new();
    let out = crate::rules::validate_rules(&mut c, spec.as_object().unwrap(), env);
    if expected.is_empty() {
        assert!(c.diags.is_empty(), "{rules}: {:?}", c.diags);
        assert_eq!(out.len(), rules.as_array().map_or(0, Vec::len));
        return;
    }
    for (path, fragment) in expected {
        assert!(
            c.diags
                .iter()
                .any(|d| d.path == *path && d.message.contains(fragment)),
            "{rules}: expected {path}: {fragment:?} in {:?}",
            c.diags
        );
    }
}

/// What PVE's `verify_rule` refuses in a security group (`rule_env` `group`) and takes in a
/// guest's list, and the reverse.
#[test]
fn rules_are_checked_for_the_list_they_stand_in() {
    use crate::rules::Env;
    use serde_json::json;
    let group = Env::Group;
    let guest = Env::Guest {
        aliases: ["office".to_string()].into(),
        ipsets: ["admins".to_string()].into(),
    };
    type Case<'a> = (&'a Env, serde_json::Value, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        (
            &group,
            json!([{"type": "in", "action": "ACCEPT", "macro": "SSH", "source": "+dc/admins"},
                   {"type": "out", "action": "DROP", "proto": "tcp", "dport": "25", "dest": "office"},
                   {"type": "forward", "action": "ACCEPT", "source": "10.0.0.0/8,192.0.2.1-192.0.2.9"}]),
            vec![],
        ),
        (
            &group,
            json!([{"type": "group", "group": "other"}]),
            vec![("spec.rules[0].type", "cannot contain a `group` rule")],
        ),
        (
            &group,
            json!([{"type": "in", "action": "ACCEPT", "iface": "net0"}]),
            vec![("spec.rules[0].iface", "take no interface")],
        ),
        (
            &group,
            json!([{"type": "forward", "action": "REJECT"}]),
            vec![("spec.rules[0].action", "cannot REJECT")],
        ),
        (
            &group,
            json!([{"type": "in", "action": "ACCEPT", "source": "guest/office"}]),
            vec![("spec.rules[0].source", "no guest of its own")],
        ),
        (
            &group,
            json!([{"type": "in", "action": "ACCEPT", "source": "10.0.0.0/33"}]),
            vec![("spec.rules[0].source", "not an address list")],
        ),
        (
            &guest,
            json!([{"type": "in", "action": "ACCEPT", "source": "office", "dest": "+admins", "iface": "net0"},
                   {"type": "group", "group": "webtier", "iface": "net1"}]),
            vec![],
        ),
        (
            &guest,
            json!([{"type": "forward", "action": "ACCEPT"}]),
            vec![("spec.rules[0].type", "")],
        ),
        (
            &guest,
            json!([{"type": "group", "group": "a-group-name-too-long"}]),
            vec![("spec.rules[0].group", "2 to 18 characters")],
        ),
        (
            &guest,
            json!([{"type": "in", "action": "ACCEPT", "source": "nosuch"}]),
            vec![("spec.rules[0].source", "alias `nosuch`")],
        ),
    ];
    for (env, rules, expected) in cases {
        check(env, rules, &expected);
    }
}
