//! Pruning a claimed live guest that no manifest declares any more.

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::model::{
    Action, Anomaly, Call, Change, Drift, Method, Observation, Operation, Proposal,
};
use proxops_kind_sdk::propstring::parse_bool;

use super::{base_path, config_of, power_call};
use crate::desired::*;
use crate::live::Resource;

pub(super) fn prune(
    flavour: Flavour,
    r: &Resource,
    obs: &Observation,
) -> Result<Proposal, Vec<Diag>> {
    let mut out = Proposal::default();
    // Prune lines name the live guest: its vmid and its PVE name.
    let what = match &r.name {
        Some(name) => format!("{} {} `{name}` on {}", flavour.noun(), r.vmid, r.node),
        None => format!("{} {} on {}", flavour.noun(), r.vmid, r.node),
    };
    if r.kind != "qemu"
        || r.template != (flavour == Flavour::Template)
        || !r.tags.iter().any(|t| t == crate::OWNERSHIP_TAG)
    {
        out.anomalies.push(Anomaly::new(
            "",
            format!(
                "{what} is not a proxops-owned {}; not deleting it",
                flavour.kind()
            ),
        ));
        return Ok(out);
    }
    let (cfg, _) = config_of(obs, false)?;
    if cfg.get("protection").and_then(parse_bool) == Some(true) {
        out.anomalies.push(Anomaly::new(
            "",
            format!("{what} has no manifest but protection=1 is set; not deleting it (clear protection to let proxops prune it)"),
        ));
        return Ok(out);
    }
    if let Some(lock) = r.lock.as_deref().or(cfg.get("lock")) {
        out.anomalies.push(Anomaly::locked(
            "",
            format!(
                "{what} is locked ({lock}); not deleting it this cycle. {}",
                unlock_hint(r.vmid)
            ),
        ));
        return Ok(out);
    }
    let mut calls = Vec::new();
    if r.running {
        calls.push(power_call(&r.node, r.vmid, "stop"));
    }
    calls.push(Call::new(Method::Delete, base_path(&r.node, r.vmid)).param("purge", "1"));
    out.drift.push(Drift::new("", Some(what.clone()), None));
    out.actions.push(Action {
        operation: Operation::Delete,
        summary: format!("delete {what} (no manifest)"),
        calls,
        changes: vec![Change::new("vmid", Some(r.vmid.to_string()), None)],
        disturbs_availability: r.running,
        destructive: true,
        // The guest is stopped to be destroyed: there is nothing to start again.
        restore: None,
    });
    Ok(out)
}

/// What an operator does about a lock no task holds any more (a run killed mid-task).
pub(super) fn unlock_hint(vmid: u32) -> String {
    format!(
        "If a task is still running for it, wait for it; if none is (the run that took the lock was killed), clear the lock with `qm unlock {vmid}` on its node (`proxops sim unlock {vmid}` for a sim: cluster)"
    )
}
