//! Updating a live VM: reading its config and pending changes, running the diff passes, and turning the result into actions.

use std::collections::BTreeSet;

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::model::{
    Action, Anomaly, Call, Change, Drift, Method, Observation, Operation, Param, Proposal, Restore,
};

use super::config::diff_config;
use super::ha::plan_ha;
use super::migrate::{fixed_anomaly, migrate};
use super::prune::unlock_hint;
use super::{Ctx, Diff, MARK_TEMPLATE, base_path, config_of, power_action, power_call};
use crate::desired::*;
use crate::live::Resource;

pub(super) fn update(
    ctx: &Ctx<'_>,
    r: &Resource,
    obs: &Observation,
) -> Result<Proposal, Vec<Diag>> {
    let d = ctx.d;
    let mut out = Proposal::default();
    let what = format!("{} {} on {}", d.kind.noun(), r.vmid, r.node);
    if r.kind != "qemu" {
        out.anomalies.push(Anomaly::new(
            "spec.vmid",
            format!(
                "vmid {} on {} is a {} guest, not a VM",
                r.vmid, r.node, r.kind
            ),
        ));
        return Ok(out);
    }
    let elsewhere = r.node != d.node;
    if elsewhere && !r.ha_managed() && d.placement == Placement::Fixed {
        out.anomalies.push(fixed_anomaly(d, r));
        return Ok(out);
    }
    if d.kind == Flavour::Vm && r.template {
        out.anomalies.push(Anomaly::new(
            "kind",
            format!("{} {} on {} is a PVE template but the manifest is kind: VM; PVE cannot un-template it. Change the manifest to kind: TemplateVM, or demote the template in PVE", "VM", r.vmid, r.node),
        ));
        return Ok(out);
    }
    let (cfg, pending) = config_of(obs, r.running)?;
    if let Some(lock) = r.lock.as_deref().or(cfg.get("lock")) {
        out.anomalies.push(Anomaly::locked(
            "",
            format!(
                "{what} is locked ({lock}); not changing it this cycle. {}",
                unlock_hint(r.vmid)
            ),
        ));
        return Ok(out);
    }
    if let Some(state) = r.hastate.as_deref() {
        if let Some(why) = ha_busy(state) {
            out.anomalies.push(Anomaly::new(
                "",
                format!("{what}: HA {why} (HA state `{state}`); proxops changes nothing until HA is done"),
            ));
            return Ok(out);
        }
        if state == "error" {
            out.anomalies.push(Anomaly::new(
                "spec.ha",
                format!("HA resource vm:{} is in the error state: PVE takes no request for it but `state: disabled`. Set spec.ha.state: disabled (with spec.state: stopped), fix the cause, then set it back", r.vmid),
            ));
            if d.ha.is_some_and(|h| h.state == HaState::Disabled) {
                plan_ha(d, r, &mut out, false);
            }
            return Ok(out);
        }
    }
    if elsewhere && d.placement == Placement::Migrate {
        return Ok(migrate(d, r, obs, r.ha_managed()));
    }
    if let Some(a) = pool_anomaly(d, r) {
        out.anomalies.push(a);
    }
    let mut diff = Diff {
        cfg: &cfg,
        pending: &pending,
        sets: vec![],
        deletes: vec![],
        reverts: vec![],
        resizes: vec![],
        sensitive: BTreeSet::new(),
        stop_required: false,
        start_refused: false,
        out,
    };
    diff_config(ctx, &mut diff);

    let Diff {
        mut sets,
        mut deletes,
        reverts,
        resizes,
        sensitive,
        stop_required,
        start_refused,
        mut out,
        ..
    } = diff;
    let node = r.node.as_str();
    let base = base_path(node, r.vmid);
    let has_work =
        !(sets.is_empty() && deletes.is_empty() && reverts.is_empty() && resizes.is_empty());
    let want_running = d.kind == Flavour::Vm && d.state == PowerState::Started;
    let stop_first = r.running
        && (!want_running
            || (stop_required && has_work)
            || (d.kind == Flavour::Template && !r.template));

    // A stop applies pending changes, so after one the right value is written instead of
    // reverting; on a VM that keeps running, `revert` drops the pending change.
    let reverts = if stop_first {
        for k in reverts {
            match cfg.get(&k) {
                Some(v) => sets.push((k, v.to_string())),
                None => deletes.push(k),
            }
        }
        Vec::new()
    } else {
        reverts
    };
    let mut calls = Vec::new();
    let mut changes = Vec::new();
    if !sets.is_empty() || !deletes.is_empty() || !reverts.is_empty() {
        let mut call = Call::new(Method::Post, format!("{base}/config"));
        let digest_safe = !stop_first || pending.is_empty();
        if let (Some(dg), true) = (&cfg.digest, digest_safe) {
            call = call.param("digest", dg);
        }
        for (k, v) in &sets {
            let secret = sensitive.contains(k);
            call.params.push(Param {
                name: k.clone(),
                value: v.clone(),
                sensitive: secret,
            });
            changes.push(Change {
                key: k.clone(),
                old: cfg.get(k).map(str::to_string),
                new: Some(v.clone()),
                sensitive: secret,
            });
        }
        if !deletes.is_empty() {
            call = call.param("delete", deletes.join(","));
            for k in &deletes {
                changes.push(Change {
                    key: k.clone(),
                    old: cfg.get(k).map(str::to_string),
                    new: None,
                    sensitive: sensitive.contains(k),
                });
            }
        }
        if !reverts.is_empty() {
            call = call.param("revert", reverts.join(","));
            for k in &reverts {
                let pending_value = pending.get(k).and_then(|p| p.pending.clone());
                changes.push(Change {
                    key: k.clone(),
                    old: pending_value,
                    new: cfg.get(k).map(str::to_string),
                    sensitive: sensitive.contains(k),
                });
            }
        }
        calls.push(call);
    }
    for (slot, new, old) in &resizes {
        calls.push(
            Call::new(Method::Put, format!("{base}/resize"))
                .param("disk", slot)
                .param("size", new),
        );
        changes.push(Change::new(
            format!("{slot}.size"),
            old.clone(),
            Some(new.clone()),
        ));
    }
    let keys: Vec<String> = changes.iter().map(|c| c.key.clone()).collect();

    if r.running && !want_running {
        out.drift.push(Drift::new(
            "spec.state",
            Some("running".into()),
            Some("stopped".into()),
        ));
    } else if !r.running && want_running {
        out.drift.push(Drift::new(
            "spec.state",
            Some("stopped".into()),
            Some("started".into()),
        ));
    }

    if start_refused && r.running && want_running && stop_required && has_work {
        // The restart would end in a start known to fail (the anomaly says why).
        return Ok(out);
    }
    if r.running && want_running && stop_required && has_work {
        // One action: shut down, write, start again. Should the shutdown or a write fail,
        // the host starts the guest again (restore), so a failed write never leaves it down.
        let start = power_call(node, r.vmid, "start");
        let mut all = vec![power_call(node, r.vmid, "shutdown")];
        all.extend(calls);
        all.push(start.clone());
        out.actions.push(Action {
            operation: Operation::Update,
            summary: format!(
                "update {what} with a restart (shut down, write, start; started again if the write fails): {}",
                keys.join(", ")
            ),
            calls: all,
            changes,
            disturbs_availability: true,
            destructive: false,
            restore: Some(Restore {
                after: 0,
                calls: vec![start],
            }),
        });
        return Ok(out);
    }
    if stop_first {
        out.actions.push(power_action(d, node, false));
    }
    if has_work {
        out.actions.push(Action {
            operation: Operation::Update,
            summary: format!("update {what}: {}", keys.join(", ")),
            calls,
            changes,
            disturbs_availability: false,
            destructive: false,
            restore: None,
        });
    }
    if d.kind == Flavour::Template && !r.template {
        out.drift.push(Drift::new(
            "kind",
            Some("VM (template=0)".into()),
            Some("TemplateVM (template=1)".into()),
        ));
        out.actions.push(Action {
            operation: Operation::step(MARK_TEMPLATE),
            summary: format!("mark VM {} on {node} as a template", r.vmid),
            calls: vec![Call::new(Method::Post, format!("{base}/template"))],
            changes: vec![Change::new("template", Some("0".into()), Some("1".into()))],
            disturbs_availability: r.running,
            destructive: false,
            restore: None,
        });
    } else if !r.running && want_running && !start_refused {
        let start = power_action(d, node, true);
        match out.actions.last_mut() {
            // A clone-backed VM starts only after its own configuration landed: booting it
            // with the template's cloud-init identity (hostname, addresses, keys) would clash
            // with the template's other clones. Every other guest gets its start as an action
            // of its own, which runs even when the write before it failed.
            Some(update) if d.clone.is_some() && update.operation == Operation::Update => {
                update.summary = format!("{}, then start it", update.summary);
                update.calls.extend(start.calls);
                update.changes.extend(start.changes);
            }
            _ => out.actions.push(start),
        }
    }
    // The HA resource last: after the power actions (whose HA requests rewrite the resources
    // config) and, for a clone, in its configuring write's action (HA would start the clone).
    let power_first = out.actions.iter().any(|a| {
        a.calls
            .iter()
            .any(|c| c.path.contains("/status/") && c.method == Method::Post)
    });
    let before = out.actions.len();
    plan_ha(d, r, &mut out, power_first);
    if out.actions.len() > before
        && d.clone.is_some()
        && before > 0
        && out.actions[before - 1].operation == Operation::Update
    {
        let ha = out.actions.remove(before);
        let update = &mut out.actions[before - 1];
        update.summary = format!("{}, then {}", update.summary, ha.summary);
        update.calls.extend(ha.calls);
        update.changes.extend(ha.changes);
    }
    Ok(out)
}

/// What HA is doing to a guest in HA state `state` that proxops must not interfere with.
fn ha_busy(state: &str) -> Option<&'static str> {
    Some(match state {
        "migrate" | "relocate" => "is moving it to another node",
        "fence" => "is fencing its node",
        "recovery" => "is recovering it from a failed node",
        _ => return None,
    })
}

/// `spec.pool` against the guest's live pool (its `/cluster/resources` entry). proxops sets a
/// guest's pool only when it creates it: moving a guest into a pool is a write to that pool,
/// and out of one (PVE's `allow-move`) a write to the pool it leaves, which proxops cannot
/// prove it owns. A difference is reported, never repaired; the rest of the guest is planned.
pub(super) fn pool_anomaly(d: &Desired, r: &Resource) -> Option<Anomaly> {
    let want = d.pool.as_deref()?;
    let vmid = r.vmid;
    let message = match r.pool.as_deref() {
        Some(live) if live == want => return None,
        Some(live) => format!(
            "{} {vmid} is in pool {live}, the manifest says spec.pool: {want}; proxops sets a guest's pool only when it creates it and never moves a guest between pools (that writes pool {live}). Move it by hand (`pvesh set /pools --poolid {want} --vms {vmid} --allow-move 1`), or set spec.pool: {live}",
            d.kind.noun()
        ),
        None => format!(
            "{} {vmid} is in no pool, the manifest says spec.pool: {want}; proxops sets a guest's pool only when it creates it. Add it by hand (`pvesh set /pools --poolid {want} --vms {vmid}`), or drop spec.pool and list the guest in pool {want}'s spec.guests",
            d.kind.noun()
        ),
    };
    Some(Anomaly::new(crate::POOL_PATH, message))
}
