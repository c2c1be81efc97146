//! The container's HA resource (`spec.ha`), through `/cluster/ha/resources`, owned by the
//! ownership mark in its `comment`. The rules are the VM kind's (`proxops-kind-qemu`,
//! `plan/ha.rs`), restated here so that this example stays a standalone third-party kind
//! that depends on the kind SDK alone.
//!
//! Decisions:
//! * The HA resource of container N is `ct:N`; proxops writes its `comment` as
//!   `managed by proxops (proxops-N)` ([`comment`]): the vmid-bound mark of the container's
//!   tags ([`crate::ownership_mark`]), so a resource is proxops's only when the mark names
//!   this vmid as a word of its own ([`is_marked`]). A comment edited in PVE that keeps the
//!   mark is still proxops's and is not rewritten.
//! * `spec.ha` present, no live HA resource: one `step("ha")` action, `POST
//!   /cluster/ha/resources` with `sid`, every option (PVE's defaults written out) and the
//!   comment. For a new container it follows the create in the same proposal (PVE needs the
//!   container to exist first).
//! * `spec.ha` present, a marked live resource that differs (`state`, `max_restart`,
//!   `max_relocate`, `failback`; PVE's defaults for absent options, `enabled` read as
//!   `started`): drift, and `PUT /cluster/ha/resources/ct:N` with the changed options and the
//!   live entry's `digest`. The digest is left out when a power action precedes the write in
//!   the same proposal: PVE routes the power request of an HA-managed container through HA,
//!   which rewrites the resources config and so its digest.
//! * A live resource without the mark is not proxops's: if it differs from `spec.ha`, an
//!   anomaly and no write; if it is identical, nothing to do.
//! * `spec.ha` absent: HA membership is not managed. A marked live resource is removed
//!   (`DELETE …/ct:N` with `purge=0`: the container stays, only HA stops watching it, and PVE
//!   leaves the HA rules that name it alone); an unmarked one is left alone, with no drift.
//! * A container whose listing entry has `hastate` but no `ha` entry (the host did not read
//!   `/cluster/ha/resources`) gets no HA write: an anomaly when `spec.ha` is set.

use proxops_kind_sdk::model::{Action, Anomaly, Call, Change, Drift, Method, Operation, Proposal};
use proxops_kind_sdk::propstring::{parse_bool, print_bool};

use crate::desired::{Container, Ha, HaState};
use crate::live::{Entry, HaResource};

/// The step of HA resource writes (the host shows it to policies as an `update`).
pub const HA: &str = "ha";

/// The collection of HA resources.
pub const RESOURCES: &str = "/cluster/ha/resources";

/// The HA resource id of container `vmid`.
pub fn sid(vmid: u32) -> String {
    format!("ct:{vmid}")
}

/// The `comment` proxops writes on the HA resources it creates: the container's vmid-bound
/// ownership mark in words.
pub fn comment(vmid: u32) -> String {
    format!("managed by proxops ({})", crate::ownership_mark(vmid))
}

/// Whether `comment` carries the ownership mark of `vmid` as a word of its own
/// (`proxops-101` marks ct:101, not ct:1010, and `xproxops-101` marks nothing).
pub fn is_marked(comment: Option<&str>, vmid: u32) -> bool {
    let Some(c) = comment else {
        return false;
    };
    let mark = crate::ownership_mark(vmid);
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    c.match_indices(&mark).any(|(i, _)| {
        let before = c.as_bytes()[..i].last().copied();
        let after = c.as_bytes().get(i + mark.len()).copied();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// What HA is doing to a container in HA state `state` that proxops must not interfere with.
pub fn busy(state: &str) -> Option<&'static str> {
    Some(match state {
        "migrate" | "relocate" => "is moving it to another node",
        "fence" => "is fencing its node",
        "recovery" => "is recovering it from a failed node",
        _ => return None,
    })
}

/// One option of an HA resource: PVE's name, the manifest's path, the desired value as PVE
/// takes it, and whether a live value (absent: PVE's default) satisfies it.
struct Opt {
    key: &'static str,
    path: &'static str,
    desired: String,
    same: fn(&Ha, Option<&str>) -> bool,
}

fn tries(live: Option<&str>) -> Option<u64> {
    match live {
        None => Some(Ha::DEFAULT_TRIES),
        Some(s) => s.trim().parse().ok(),
    }
}

fn options(ha: &Ha) -> [Opt; 4] {
    [
        Opt {
            key: "state",
            path: "spec.ha.state",
            desired: ha.state.as_str().into(),
            same: |ha, l| HaState::parse(l) == Some(ha.state),
        },
        Opt {
            key: "max_restart",
            path: "spec.ha.max-restart",
            desired: ha.max_restart.to_string(),
            same: |ha, l| tries(l) == Some(ha.max_restart),
        },
        Opt {
            key: "max_relocate",
            path: "spec.ha.max-relocate",
            desired: ha.max_relocate.to_string(),
            same: |ha, l| tries(l) == Some(ha.max_relocate),
        },
        Opt {
            key: "failback",
            path: "spec.ha.failback",
            desired: print_bool(ha.failback).into(),
            same: |ha, l| l.map_or(Some(true), parse_bool) == Some(ha.failback),
        },
    ]
}

fn live_value<'a>(live: &'a HaResource, key: &str) -> Option<&'a str> {
    match key {
        "state" => live.state.as_deref(),
        "max_restart" => live.max_restart.as_deref(),
        "max_relocate" => live.max_relocate.as_deref(),
        _ => live.failback.as_deref(),
    }
}

/// The options of `live` that differ from `ha`: `(option, live value)`.
fn differing(ha: &Ha, live: &HaResource) -> Vec<(Opt, Option<String>)> {
    options(ha)
        .into_iter()
        .filter_map(|o| {
            let value = live_value(live, o.key);
            (!(o.same)(ha, value)).then(|| (o, value.map(str::to_string)))
        })
        .collect()
}

fn action(summary: String, call: Call, changes: Vec<Change>) -> Action {
    Action {
        operation: Operation::step(HA),
        summary,
        calls: vec![call],
        changes,
        disturbs_availability: false,
        destructive: false,
        restore: None,
    }
}

/// The HA work for a container the create action in the same proposal makes.
pub fn plan_new(d: &Container, out: &mut Proposal) {
    let Some(ha) = &d.ha else {
        return;
    };
    out.drift.push(missing_drift(d.vmid, ha));
    out.actions.push(create_action(d.vmid, ha));
}

fn missing_drift(vmid: u32, ha: &Ha) -> Drift {
    Drift::new(
        "spec.ha",
        None,
        Some(format!("{} (state {})", sid(vmid), ha.state.as_str())),
    )
}

fn create_action(vmid: u32, ha: &Ha) -> Action {
    let mut call = Call::new(Method::Post, RESOURCES).param("sid", sid(vmid));
    let mut changes = Vec::new();
    for o in options(ha) {
        changes.push(Change::new(
            format!("ha.{}", o.key),
            None,
            Some(o.desired.clone()),
        ));
        call = call.param(o.key, o.desired);
    }
    call = call.param("comment", comment(vmid));
    changes.push(Change::new("ha.comment", None, Some(comment(vmid))));
    action(
        format!(
            "make CT {vmid} an HA resource ({}, state {})",
            sid(vmid),
            ha.state.as_str()
        ),
        call,
        changes,
    )
}

/// The HA work for an existing container, appended to `out`. `power_first`: a power action
/// precedes it in the proposal (its HA request rewrites the resources config: no digest).
pub fn plan(d: &Container, e: &Entry, out: &mut Proposal, power_first: bool) {
    let id = sid(e.vmid);
    match (&d.ha, &e.ha) {
        (None, None) => {}
        (None, Some(live)) => {
            if !is_marked(live.comment.as_deref(), e.vmid) {
                // Not proxops's, and not declared: HA membership is not managed.
                return;
            }
            out.drift
                .push(Drift::new("spec.ha", Some(id.clone()), None));
            out.actions.push(action(
                format!(
                    "remove HA resource {id} (spec.ha is gone; CT {} stays as it is)",
                    e.vmid
                ),
                Call::new(Method::Delete, format!("{RESOURCES}/{id}")).param("purge", "0"),
                vec![Change::new("ha", Some(id), None)],
            ));
        }
        (Some(ha), None) => {
            if let Some(state) = &e.hastate {
                out.anomalies.push(Anomaly::new(
                    "spec.ha",
                    format!(
                        "CT {} has HA state `{state}` but the observation holds no /cluster/ha/resources entry for {id}; proxops does not write an HA resource it cannot see",
                        e.vmid
                    ),
                ));
                return;
            }
            out.drift.push(missing_drift(e.vmid, ha));
            out.actions.push(create_action(e.vmid, ha));
        }
        (Some(ha), Some(live)) => {
            let diff = differing(ha, live);
            if diff.is_empty() {
                return;
            }
            if !is_marked(live.comment.as_deref(), e.vmid) {
                let keys: Vec<&str> = diff.iter().map(|(o, _)| o.key).collect();
                out.anomalies.push(Anomaly::new(
                    "spec.ha",
                    format!(
                        "HA resource {id} was not created by proxops (its comment lacks `{mark}`) and differs from spec.ha ({}); not changing it. Make spec.ha match it, or hand it to proxops by adding `{mark}` to its comment (`ha-manager set {id} --comment '{}'`)",
                        keys.join(", "),
                        comment(e.vmid),
                        mark = crate::ownership_mark(e.vmid),
                    ),
                ));
                return;
            }
            let mut call = Call::new(Method::Put, format!("{RESOURCES}/{id}"));
            if let (Some(dg), false) = (live.digest.as_deref(), power_first) {
                call = call.param("digest", dg);
            }
            let mut changes = Vec::new();
            let mut keys = Vec::new();
            for (o, value) in diff {
                out.drift
                    .push(Drift::new(o.path, value.clone(), Some(o.desired.clone())));
                changes.push(Change::new(
                    format!("ha.{}", o.key),
                    value,
                    Some(o.desired.clone()),
                ));
                keys.push(o.key);
                call = call.param(o.key, o.desired);
            }
            out.actions.push(action(
                format!("update HA resource {id}: {}", keys.join(", ")),
                call,
                changes,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_is_a_word_naming_this_vmid() {
        for (c, want) in [
            (Some("managed by proxops (proxops-101)"), true),
            (Some("proxops-101"), true),
            (Some("web; proxops-101, prod"), true),
            (Some("managed by proxops (proxops-1010)"), false),
            (Some("xproxops-101"), false),
            (Some("proxops-101-old"), false),
            (Some("proxops"), false),
            (Some(""), false),
            (None, false),
        ] {
            assert_eq!(is_marked(c, 101), want, "{c:?}");
        }
    }
}
