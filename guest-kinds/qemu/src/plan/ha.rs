//! The guest's HA resource (`spec.ha`), through `/cluster/ha/resources`, owned by the
//! ownership mark in its `comment`.
//!
//! Decisions:
//! * The HA resource of VM N is `vm:N`; proxops writes its `comment` as
//!   `managed by proxops (proxops-N)` ([`comment`]): the vmid-bound mark of the guest's tags
//!   ([`crate::ownership_mark`]), so a resource is proxops's only when the mark names this
//!   vmid ([`is_marked`]). A comment edited in PVE that keeps the mark is still proxops's and
//!   is not rewritten.
//! * `spec.ha` present, no live HA resource: one `step("ha")` action, `POST
//!   /cluster/ha/resources` with `sid`, every option (PVE's defaults written out) and the
//!   comment. For a new VM it follows the create in the same proposal (PVE needs the guest
//!   to exist); a clone gets its HA resource on the pass that writes its own configuration
//!   (a clone started by HA with the template's cloud-init identity would clash with the
//!   template's other clones).
//! * `spec.ha` present, a marked live resource that differs (`state`, `max_restart`,
//!   `max_relocate`, `failback`; PVE's defaults for absent options, `enabled` read as
//!   `started`): drift, and `PUT /cluster/ha/resources/vm:N` with the changed options and
//!   the live entry's `digest`. The digest is left out when a power action precedes the
//!   write in the same proposal: PVE routes the power request of an HA-managed guest through
//!   HA (`hastart`, `hastop`), which rewrites the resources config and so its digest.
//! * A live resource without the mark is not proxops's: if it differs from `spec.ha`, an
//!   anomaly and no write; if it is identical (e.g. just adopted), nothing to do.
//! * `spec.ha` absent: HA membership is not managed. A marked live resource is removed
//!   (`DELETE …/vm:N` with `purge=0`, not destructive: the guest stays, only HA stops watching
//!   it; `purge=0` keeps PVE from editing or deleting HA rules, which are another kind's
//!   objects); an unmarked one is left alone, with no drift.
//! * A guest whose listing entry has `hastate` but no `ha` entry (the host did not read
//!   `/cluster/ha/resources`) gets no HA write: an anomaly when `spec.ha` is set.

use proxops_kind_sdk::model::{Action, Anomaly, Call, Change, Drift, Method, Operation, Proposal};
use proxops_kind_sdk::propstring::parse_bool;

use crate::desired::{Desired, Ha, HaState};
use crate::live::{HaResource, Resource};
use crate::wire;

/// The step of HA resource writes (the host shows it to policies as an `update`).
pub const HA: &str = "ha";

/// The collection of HA resources.
pub const RESOURCES: &str = "/cluster/ha/resources";

/// The HA resource id of VM `vmid`.
pub fn sid(vmid: u32) -> String {
    format!("vm:{vmid}")
}

/// The `comment` proxops writes on the HA resources it creates: the guest's vmid-bound
/// ownership mark in words.
pub fn comment(vmid: u32) -> String {
    format!("managed by proxops ({})", crate::ownership_mark(vmid))
}

/// Whether `comment` carries the ownership mark of `vmid` as a word of its own
/// (`proxops-100` marks vm:100, not vm:1000, and `xproxops-100` marks nothing).
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

/// One option of an HA resource: PVE's name, the manifest's path, and the desired value as
/// PVE takes it.
struct Opt {
    key: &'static str,
    path: &'static str,
    desired: String,
}

fn options(ha: &Ha) -> [Opt; 4] {
    [
        Opt {
            key: "state",
            path: "spec.ha.state",
            desired: ha.state.as_str().into(),
        },
        Opt {
            key: "max_restart",
            path: "spec.ha.max-restart",
            desired: ha.max_restart.to_string(),
        },
        Opt {
            key: "max_relocate",
            path: "spec.ha.max-relocate",
            desired: ha.max_relocate.to_string(),
        },
        Opt {
            key: "failback",
            path: "spec.ha.failback",
            desired: wire::b(ha.failback),
        },
    ]
}

/// The live value of option `key` and whether it satisfies `ha` (absent options read as
/// PVE's defaults).
fn live_option(live: &HaResource, ha: &Ha, key: &str) -> (Option<String>, bool) {
    let text = |w: &crate::live::Wire| w.as_str().map(str::to_string);
    match key {
        "state" => (
            text(&live.state),
            HaState::parse(live.state.as_str()) == Some(ha.state),
        ),
        "max_restart" => (
            text(&live.max_restart),
            tries(live.max_restart.as_str()) == Some(ha.max_restart),
        ),
        "max_relocate" => (
            text(&live.max_relocate),
            tries(live.max_relocate.as_str()) == Some(ha.max_relocate),
        ),
        _ => (
            text(&live.failback),
            live.failback.as_str().map_or(Some(true), parse_bool) == Some(ha.failback),
        ),
    }
}

fn tries(live: Option<&str>) -> Option<u64> {
    match live {
        None => Some(Ha::DEFAULT_TRIES),
        Some(s) => s.trim().parse().ok(),
    }
}

/// The options of `live` that differ from `ha`: `(option, live value)`.
fn differing(ha: &Ha, live: &HaResource) -> Vec<(Opt, Option<String>)> {
    options(ha)
        .into_iter()
        .filter_map(|o| {
            let (value, same) = live_option(live, ha, o.key);
            (!same).then_some((o, value))
        })
        .collect()
}

/// The create action of `vm:<vmid>`.
pub(super) fn create_action(d: &Desired, ha: &Ha) -> Action {
    let mut call = Call::new(Method::Post, RESOURCES).param("sid", sid(d.vmid));
    let mut changes = Vec::new();
    for o in options(ha) {
        changes.push(Change::new(
            format!("ha.{}", o.key),
            None,
            Some(o.desired.clone()),
        ));
        call = call.param(o.key, o.desired);
    }
    call = call.param("comment", comment(d.vmid));
    changes.push(Change::new("ha.comment", None, Some(comment(d.vmid))));
    Action {
        operation: Operation::step(HA),
        summary: format!(
            "make VM {} an HA resource ({}, state {})",
            d.vmid,
            sid(d.vmid),
            ha.state.as_str()
        ),
        calls: vec![call],
        changes,
        disturbs_availability: false,
        destructive: false,
        restore: None,
    }
}

/// The drift item of a missing HA resource.
pub(super) fn missing_drift(d: &Desired, ha: &Ha) -> Drift {
    Drift::new(
        "spec.ha",
        None,
        Some(format!("{} (state {})", sid(d.vmid), ha.state.as_str())),
    )
}

/// The HA work for an existing guest, appended to `out`. `power_first`: a power action
/// precedes in the proposal (its HA request rewrites the resources config: no digest).
pub(super) fn plan_ha(d: &Desired, r: &Resource, out: &mut Proposal, power_first: bool) {
    let id = sid(r.vmid);
    match (&d.ha, &r.ha) {
        (None, None) => {}
        (None, Some(live)) => {
            if !is_marked(live.comment.as_str(), r.vmid) {
                // Not proxops's, and not declared: HA membership is not managed.
                return;
            }
            out.drift
                .push(Drift::new("spec.ha", Some(id.clone()), None));
            out.actions.push(Action {
                operation: Operation::step(HA),
                summary: format!(
                    "remove HA resource {id} (spec.ha is gone; VM {} stays as it is)",
                    r.vmid
                ),
                calls: vec![
                    Call::new(Method::Delete, format!("{RESOURCES}/{id}")).param("purge", "0"),
                ],
                changes: vec![Change::new("ha", Some(id), None)],
                disturbs_availability: false,
                destructive: false,
                restore: None,
            });
        }
        (Some(ha), None) => {
            if let Some(state) = &r.hastate {
                out.anomalies.push(Anomaly::new(
                    "spec.ha",
                    format!(
                        "VM {} has HA state `{state}` but the observation holds no /cluster/ha/resources entry for {id}; proxops does not write an HA resource it cannot see",
                        r.vmid
                    ),
                ));
                return;
            }
            out.drift.push(missing_drift(d, ha));
            out.actions.push(create_action(d, ha));
        }
        (Some(ha), Some(live)) => {
            let diff = differing(ha, live);
            if diff.is_empty() {
                return;
            }
            if !is_marked(live.comment.as_str(), r.vmid) {
                let keys: Vec<&str> = diff.iter().map(|(o, _)| o.key).collect();
                out.anomalies.push(Anomaly::new(
                    "spec.ha",
                    format!(
                        "HA resource {id} was not created by proxops (its comment lacks `{mark}`) and differs from spec.ha ({}); not changing it. Make spec.ha match it (`proxops adopt` writes it), or hand it to proxops by adding `{mark}` to its comment (`ha-manager set {id} --comment '{}'`)",
                        keys.join(", "),
                        comment(r.vmid),
                        mark = crate::ownership_mark(r.vmid),
                    ),
                ));
                return;
            }
            let mut call = Call::new(Method::Put, format!("{RESOURCES}/{id}"));
            if let (Some(dg), false) = (live.digest.as_str(), power_first) {
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
            out.actions.push(Action {
                operation: Operation::step(HA),
                summary: format!("update HA resource {id}: {}", keys.join(", ")),
                calls: vec![call],
                changes,
                disturbs_availability: false,
                destructive: false,
                restore: None,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_is_a_word_naming_this_vmid() {
        for (c, want) in [
            (Some("managed by proxops (proxops-100)"), true),
            (Some("proxops-100"), true),
            (Some("web; proxops-100, prod"), true),
            (Some("managed by proxops (proxops-1000)"), false),
            (Some("xproxops-100"), false),
            (Some("proxops-100-old"), false),
            (Some("proxops"), false),
            (Some(""), false),
            (None, false),
        ] {
            assert_eq!(is_marked(c, 100), want, "{c:?}");
        }
    }
}
