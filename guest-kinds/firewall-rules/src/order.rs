//! The fewest moves that put a positional list in order, with PVE's `moveto`.
//!
//! PVE addresses a firewall rule by its position, and `PUT …/rules/{pos}` with `moveto=<to>`
//! takes the rule out and puts it back before the rule that was at `<to>` (so a move down lands
//! at `<to> - 1`), or last when `<to>` is past the end (pve-firewall `Rules.pm`, `update_rule`).
//!
//! Given each rule's target index, the rules that already stand in increasing target order
//! along a longest increasing subsequence stay; every other rule is moved once, straight to its
//! place: `n - LIS` moves. No sequence of fewer moves exists: one move changes the relative
//! order of one rule against the others and leaves the rest as they were, so after `k` moves at
//! least `n - k` rules keep their original relative order, and in the sorted result those must
//! form an increasing subsequence of the start: `n - k <= LIS`. (The property test in
//! `tests.rs` also checks this against a breadth-first search over every short list.)

/// One `moveto`: the rule at `pos` goes before the rule now at `to` (or last when `to` equals
/// the list's length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    pub pos: usize,
    pub to: usize,
}

/// PVE's `moveto` on a list, for the planner and its tests.
pub fn apply<T: Clone>(list: &mut Vec<T>, m: Move) {
    let item = list[m.pos].clone();
    let mut out = Vec::with_capacity(list.len());
    for (i, x) in list.iter().enumerate() {
        if i == m.pos {
            continue;
        }
        if i == m.to {
            out.push(item.clone());
        }
        out.push(x.clone());
    }
    if m.to >= list.len() {
        out.push(item);
    }
    *list = out;
}

/// Indexes (into `targets`) of one longest strictly increasing subsequence, in order.
pub fn longest_increasing(targets: &[usize]) -> Vec<usize> {
    // Patience sorting: `tails[k]` is the index of the smallest tail of an increasing run of
    // length k + 1; `prev` links each index to its predecessor in the run it ends.
    let mut tails: Vec<usize> = Vec::new();
    let mut prev: Vec<Option<usize>> = vec![None; targets.len()];
    for (i, &t) in targets.iter().enumerate() {
        let k = tails.partition_point(|&j| targets[j] < t);
        prev[i] = k.checked_sub(1).map(|k| tails[k]);
        if k == tails.len() {
            tails.push(i);
        } else {
            tails[k] = i;
        }
    }
    let mut out = Vec::with_capacity(tails.len());
    let mut at = tails.last().copied();
    while let Some(i) = at {
        out.push(i);
        at = prev[i];
    }
    out.reverse();
    out
}

/// The moves that sort a list whose element `i` belongs at index `targets[i]` (a permutation
/// of `0..n`): `n - LIS` of them, each rule moved at most once.
pub fn plan(targets: &[usize]) -> Vec<Move> {
    let n = targets.len();
    let mut placed = vec![false; n];
    for i in longest_increasing(targets) {
        placed[targets[i]] = true;
    }
    // The list as it changes: each slot holds the target of the rule standing there.
    let mut list: Vec<usize> = targets.to_vec();
    let mut moves = Vec::new();
    for t in 0..n {
        if placed[t] {
            continue;
        }
        let pos = list.iter().position(|&x| x == t).unwrap_or(0);
        // Before the placed rule with the smallest target above `t`; placed rules always stand
        // in target order, so `t` then stands in order among them too.
        let to = list
            .iter()
            .position(|&x| x > t && placed[x])
            .unwrap_or(list.len());
        let m = Move { pos, to };
        apply(&mut list, m);
        moves.push(m);
        placed[t] = true;
    }
    moves
}
