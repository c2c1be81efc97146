//! `check-references` and `plan`; `claims` is the SDK's, by the mark
//! ([`NAMED`]).
//!
//! * No live rule: one `create` action, `POST /cluster/ha/rules` with `rule`, `type`,
//!   `resources` and the type's options, `disable=1` only when disabled, `strict=1` only when
//!   strict, and the `comment` carrying the mark ([`Desired::pve_comment`]).
//! * A live rule whose comment carries `proxops:<id>`: its options compared with the desired
//!   ones as PVE writes them (sids and nodes sorted, priority 0 left out, absent `strict` and
//!   `disable` read as false). Differences are drift and one `update` action, `PUT
//!   /cluster/ha/rules/<id>` with `type` (PVE's update schema requires it), the changed
//!   options, `delete=` for options cleared to their default (`strict`, `disable`; PVE's
//!   SectionConfig update drops `disable=0`, so a `delete` is the way back), and the listing's
//!   `digest`. A live rule of the other `type` is an anomaly: PVE cannot change a rule's type,
//!   and delete + create in one action cannot pass the ownership gate either (the create of
//!   an id the listing shows is refused); the human deletes it, the next apply creates it.
//! * A live rule without the mark is not proxops's: an anomaly, never a write (it also tells
//!   whether the rule matches the manifest, and how to hand it over).
//! * No manifest, a claimed (marked) live rule: `DELETE /cluster/ha/rules/<id>` (prune).
//! * PVE's feasibility `errors` on a converged rule: an anomaly (the HA manager ignores an
//!   infeasible rule).

use std::collections::BTreeSet;

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::kind::Resolved;
use proxops_kind_sdk::model::{
    Action, Anomaly, Call, Change, Drift, Method, Observation, Operation, Proposal,
};
use proxops_kind_sdk::named;
use serde_json::Value;

use crate::desired::{Desired, Member, NAMED, RULES, RuleType, encode_nodes};
use crate::live::LiveRule;

/// The path of `spec.resources[i]`, which is also its reference's path.
pub fn resource_path(i: usize) -> String {
    format!("spec.resources[{i}]")
}

/// The sids of `d`'s resources, the VMs' from their resolved desired states (their vmid);
/// errors name the resource's path. `need_ha`: also require each VM to declare `spec.ha`.
pub fn sids(
    d: &Desired,
    resolved: &[Resolved],
    need_ha: bool,
) -> Result<BTreeSet<String>, Vec<Diag>> {
    let mut out = BTreeSet::new();
    let mut errors = Vec::new();
    for (i, m) in d.resources.iter().enumerate() {
        let path = resource_path(i);
        let sid = match m {
            Member::Sid(sid) => sid.clone(),
            Member::Vm(name) => {
                let Some(r) = resolved.iter().find(|r| r.reference.path == path) else {
                    errors.push(Diag::error(
                        &path,
                        format!("no VM named `{name}` in this cluster"),
                    ));
                    continue;
                };
                let t: Value = serde_json::from_str(&r.desired).unwrap_or(Value::Null);
                if r.reference.kind != "VM"
                    || t.get("kind")
                        .and_then(Value::as_str)
                        .is_some_and(|k| k != "VM")
                {
                    errors.push(Diag::error(
                        &path,
                        format!("`{name}` is not a VM; an HA rule names VMs"),
                    ));
                    continue;
                }
                let Some(vmid) = t.get("vmid").and_then(Value::as_u64) else {
                    errors.push(Diag::error(
                        &path,
                        format!("the desired state of VM `{name}` has no vmid"),
                    ));
                    continue;
                };
                if need_ha && t.get("ha").is_none_or(Value::is_null) {
                    errors.push(Diag::error(
                        &path,
                        format!(
                            "HA rule {} names VM {name}, which has no spec.ha; PVE takes only HA resources in a rule. Declare spec.ha on VM {name}, or drop it from the rule",
                            d.rule
                        ),
                    ));
                    continue;
                }
                format!("vm:{vmid}")
            }
        };
        if !out.insert(sid.clone()) {
            errors.push(Diag::error(
                &path,
                format!(
                    "`{}` is {sid}, which another entry of spec.resources already names",
                    m.display()
                ),
            ));
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// One option of a rule as PVE writes it: `None` is absent (or, for a boolean, false).
struct Opt {
    key: &'static str,
    path: &'static str,
    desired: Option<String>,
    live: Option<String>,
}

fn flag(b: bool) -> Option<String> {
    b.then(|| "1".to_string())
}

fn options(d: &Desired, sids: &BTreeSet<String>, live: Option<&LiveRule>) -> Vec<Opt> {
    let join = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(",");
    let mut out = vec![Opt {
        key: "resources",
        path: "spec.resources",
        desired: Some(join(sids)),
        live: live.map(|l| join(&l.resources)),
    }];
    match d.rule_type {
        RuleType::NodeAffinity => {
            out.push(Opt {
                key: "nodes",
                path: "spec.nodes",
                desired: Some(d.pve_nodes()),
                live: live
                    .map(|l| encode_nodes(&l.nodes))
                    .filter(|s| !s.is_empty()),
            });
            out.push(Opt {
                key: "strict",
                path: "spec.strict",
                desired: flag(d.strict),
                live: live.and_then(|l| flag(l.strict)),
            });
        }
        RuleType::ResourceAffinity => out.push(Opt {
            key: "affinity",
            path: "spec.affinity",
            desired: d.affinity.map(|a| a.as_str().to_string()),
            live: live.and_then(|l| l.affinity.clone()),
        }),
    }
    out.push(Opt {
        key: "disable",
        path: "spec.disabled",
        desired: flag(d.disabled),
        live: live.and_then(|l| flag(l.disabled)),
    });
    out.push(Opt {
        key: "comment",
        path: "spec.comment",
        desired: Some(d.pve_comment()),
        live: live.and_then(|l| l.comment.clone()),
    });
    out
}

fn rule_path(id: &str) -> String {
    format!("{RULES}/{id}")
}

/// The proposal for one rule.
pub fn plan(
    d: Option<&Desired>,
    resolved: &[Resolved],
    observed: &Observation,
) -> Result<Proposal, Vec<Diag>> {
    let live = NAMED
        .live(observed, LiveRule::from_entry)
        .map_err(|e| vec![Diag::error("", e)])?;
    let mut out = Proposal::default();
    let Some(d) = d else {
        if let Some(l) = live {
            prune(&l, &mut out);
        }
        return Ok(out);
    };
    let sids = sids(d, resolved, false)?;
    let Some(l) = live else {
        create(d, &sids, &mut out);
        return Ok(out);
    };
    let diff: Vec<Opt> = options(d, &sids, Some(&l))
        .into_iter()
        .filter(|o| o.desired != o.live)
        .collect();
    let type_differs = l.rule_type != d.rule_type.as_str();
    if !l.is_marked() {
        if named::take_over_requested(observed) {
            // PVE's rule update needs the rule's `type`: the live one, so nothing else changes.
            NAMED.take_over(&mut out, &d.rule, l.comment.as_deref(), |comment| {
                Call::new(Method::Put, rule_path(&d.rule))
                    .param("type", &l.rule_type)
                    .param("comment", comment)
            });
            return Ok(out);
        }
        let mut keys: Vec<&str> = diff.iter().map(|o| o.key).collect();
        if type_differs {
            keys.insert(0, "type");
        }
        // The mark itself is what makes the comments differ when nothing else does.
        let only_mark = keys == ["comment"] && l.comment == d.comment;
        let how = if keys.is_empty() || only_mark {
            "it matches this manifest apart from the mark, so nothing would change".to_string()
        } else {
            format!("it differs from this manifest ({})", keys.join(", "))
        };
        let command = format!("ha-manager rules set {} {}", l.rule_type, d.rule);
        let detail = format!("; {how}");
        out.anomalies.push(NAMED.unowned(
            &d.rule,
            l.comment.as_deref(),
            &detail,
            &command,
            &d.pve_comment(),
        ));
        return Ok(out);
    }
    if type_differs {
        out.drift.push(Drift::new(
            "spec.type",
            Some(l.rule_type.clone()),
            Some(d.rule_type.as_str().into()),
        ));
        out.anomalies.push(Anomaly::new(
            "spec.type",
            format!(
                "HA rule {id} is a {live} rule in PVE and this manifest makes it {want}; PVE cannot change a rule's type, so proxops does not touch it. Delete the rule in PVE (`ha-manager rules remove {id}`) and apply again to create it anew, or give this manifest another name",
                id = d.rule,
                live = if l.rule_type.is_empty() { "typeless" } else { &l.rule_type },
                want = d.rule_type.as_str(),
            ),
        ));
        return Ok(out);
    }
    if diff.is_empty() {
        if !l.errors.is_empty() {
            out.anomalies.push(Anomaly::new(
                "spec",
                format!(
                    "PVE reports HA rule {} as infeasible, so its HA manager ignores it: {}",
                    d.rule,
                    l.errors.join("; ")
                ),
            ));
        }
        return Ok(out);
    }
    update(d, &l, diff, &mut out);
    Ok(out)
}

fn create(d: &Desired, sids: &BTreeSet<String>, out: &mut Proposal) {
    let mut call = Call::new(Method::Post, RULES)
        .param("rule", &d.rule)
        .param("type", d.rule_type.as_str());
    let mut changes = vec![Change::new("type", None, Some(d.rule_type.as_str().into()))];
    for o in options(d, sids, None) {
        if let Some(v) = o.desired {
            changes.push(Change::new(o.key, None, Some(v.clone())));
            call = call.param(o.key, v);
        }
    }
    let what = match d.rule_type {
        RuleType::NodeAffinity => format!(
            "{} on {}{}",
            call.get("resources").unwrap_or(""),
            d.pve_nodes(),
            if d.strict { ", strict" } else { "" }
        ),
        RuleType::ResourceAffinity => format!(
            "{} {}",
            call.get("resources").unwrap_or(""),
            d.affinity.map_or("", |a| match a {
                crate::desired::Affinity::Positive => "together",
                crate::desired::Affinity::Negative => "apart",
            })
        ),
    };
    out.drift.push(Drift::new(
        "spec",
        None,
        Some(format!("{} {}", d.rule_type.as_str(), what)),
    ));
    out.actions.push(Action {
        operation: Operation::Create,
        summary: format!(
            "create HA rule {} ({}: {what}{})",
            d.rule,
            d.rule_type.as_str(),
            if d.disabled { ", disabled" } else { "" }
        ),
        calls: vec![call],
        changes,
        disturbs_availability: false,
        destructive: false,
        restore: None,
    });
}

fn update(d: &Desired, l: &LiveRule, diff: Vec<Opt>, out: &mut Proposal) {
    let mut call = Call::new(Method::Put, rule_path(&d.rule)).param("type", d.rule_type.as_str());
    let mut delete = Vec::new();
    let mut changes = Vec::new();
    let mut keys = Vec::new();
    for o in diff {
        out.drift
            .push(Drift::new(o.path, o.live.clone(), o.desired.clone()));
        changes.push(Change::new(o.key, o.live.clone(), o.desired.clone()));
        keys.push(o.key);
        match o.desired {
            Some(v) => call = call.param(o.key, v),
            None => delete.push(o.key),
        }
    }
    if !delete.is_empty() {
        call = call.param("delete", delete.join(","));
    }
    if let Some(dg) = &l.digest {
        call = call.param("digest", dg);
    }
    out.actions.push(Action {
        operation: Operation::Update,
        summary: format!("update HA rule {} ({})", d.rule, keys.join(", ")),
        calls: vec![call],
        changes,
        disturbs_availability: false,
        destructive: false,
        restore: None,
    });
}

fn prune(l: &LiveRule, out: &mut Proposal) {
    if !l.is_marked() {
        out.anomalies.push(NAMED.prune_unowned(&l.rule));
        return;
    }
    let summary = format!(
        "delete HA rule {} ({} of {}; no manifest names it)",
        l.rule,
        if l.rule_type.is_empty() {
            "rule"
        } else {
            &l.rule_type
        },
        l.resources.iter().cloned().collect::<Vec<_>>().join(",")
    );
    let calls = vec![Call::new(Method::Delete, rule_path(&l.rule))];
    let changes = vec![Change::new("rule", Some(l.rule.clone()), None)];
    NAMED.prune(out, &l.rule, summary, calls, changes);
}
