//! A guest found on another node than `spec.node`: accepted where HA put it, migrated as a
//! planned action (`spec.placement: migrate`), or reported.
//!
//! Decisions (decisions.md "HA, placement and migration"):
//! * `spec.node` is the home node. An HA-managed guest (its listing entry has a `hastate`
//!   other than `ignored`) found elsewhere was put there by HA: with `placement: fixed` (the
//!   default) it is accepted where it is, planned as usual with every call addressed to its
//!   live node, no anomaly and no drift for the node (the host prints the "relocated by HA"
//!   line). With `placement: migrate` it is brought home through HA: `POST
//!   /cluster/ha/resources/vm:N/migrate` with `node` (a direct migrate would be turned into
//!   the same HA request by PVE, and HA would fight a move made behind its back).
//! * A guest without HA found elsewhere: with `fixed` an anomaly saying how to move it; with
//!   `migrate` one `step("migrate")` action, `POST /nodes/{live}/qemu/N/migrate` with
//!   `target`, `online=1` when it runs, and `with-local-disks=1` when it runs with attached
//!   local disks (PVE copies a stopped guest's local disks without the flag, which only
//!   enables live storage migration).
//! * Before either, PVE's own precondition check, `GET /nodes/{live}/qemu/N/migrate?target=…`,
//!   which observe asks for only in this case (a converged plan reads nothing more). What PVE
//!   would refuse is an anomaly and nothing is sent: a target PVE does not allow (storages not
//!   on it, mapped devices missing there, HA resources in negative affinity), a local CD/DVD
//!   image, local devices (a raw `hostpciN`, USB, a host serial port), mapped devices on a
//!   running guest that cannot migrate live, for a migration through HA a running guest with
//!   local disks (HA's online migration does not move them), and a precondition read that
//!   failed (its status and message).
//! * Neither migration disturbs availability: an online migration keeps the guest running
//!   (a pause of milliseconds at the switch-over), an offline one moves a guest that is
//!   stopped anyway.
//! * The migration is planned alone: other drift of the guest is planned by the verifying
//!   pass, on the new node (its config read there), so no write races the migration.

use proxops_kind_sdk::model::{
    Action, Anomaly, Call, Change, Drift, Method, Observation, Operation, Proposal,
};
use serde_json::Value;

use super::base_path;
use super::ha::{RESOURCES, sid};
use crate::desired::Desired;
use crate::live::Resource;

/// The step of a migration (the host shows it to policies as an `update`).
pub const MIGRATE: &str = "migrate";

/// PVE's precondition check of migrating VM `vmid` from `node` to `target`.
pub fn precondition_call(node: &str, vmid: u32, target: &str) -> Call {
    Call::new(Method::Get, format!("{}/migrate", base_path(node, vmid))).param("target", target)
}

/// The anomaly of a guest without HA on another node, `placement: fixed`.
pub(super) fn fixed_anomaly(d: &Desired, r: &Resource) -> Anomaly {
    Anomaly::new(
        "spec.node",
        format!(
            "VM {} lives on node {}, the manifest says {}; with spec.placement: fixed proxops does not move it. Set spec.placement: migrate to let proxops migrate it to {}, or set spec.node: {} to keep it where it is",
            r.vmid, r.node, d.node, d.node, r.node
        ),
    )
}

fn truthy(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|n| n != 0.0),
        Some(Value::String(s)) => matches!(s.as_str(), "1" | "true" | "yes" | "on"),
        _ => false,
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| match x {
                Value::String(s) => Some(s.clone()),
                Value::Object(o) => o.get("sid").and_then(Value::as_str).map(str::to_string),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Why PVE does not allow `target`, from its `not_allowed_nodes` entry.
fn not_allowed_reasons(target: &str, why: &Value) -> String {
    let mut out = Vec::new();
    let storages = strings(why.get("unavailable_storages"));
    if !storages.is_empty() {
        out.push(format!(
            "storage {} is not available on {target}",
            storages.join(", ")
        ));
    }
    let devices = strings(why.get("unavailable-resources"));
    if !devices.is_empty() {
        out.push(format!(
            "mapped devices {} have no device on {target}",
            devices.join(", ")
        ));
    }
    let blocking = strings(why.get("blocking-ha-resources"));
    if !blocking.is_empty() {
        out.push(format!(
            "HA resources {} on {target} are in negative affinity with it",
            blocking.join(", ")
        ));
    }
    if out.is_empty() {
        out.push(format!("its reasons: {why}"));
    }
    format!("PVE does not allow node {target}: {}", out.join("; "))
}

/// What the precondition answer says about a migration to `target`: the reasons PVE would
/// refuse it, whether the guest runs, whether it has attached local disks.
struct Precondition {
    refusals: Vec<String>,
    running: bool,
    local_disks: Vec<String>,
}

fn read_precondition(p: &Value, target: &str, running: bool, via_ha: bool) -> Precondition {
    let mut refusals = Vec::new();
    let running = p.get("running").map_or(running, |v| truthy(Some(v)));
    let allowed = strings(p.get("allowed_nodes"));
    match p.get("not_allowed_nodes").and_then(|n| n.get(target)) {
        Some(why) => refusals.push(not_allowed_reasons(target, why)),
        None if !allowed.iter().any(|n| n == target) => refusals.push(format!(
            "PVE does not offer node {target} as a target (allowed: {})",
            if allowed.is_empty() {
                "none".to_string()
            } else {
                allowed.join(", ")
            }
        )),
        None => {}
    }
    let mut local_disks = Vec::new();
    let disks = p.get("local_disks").and_then(Value::as_array);
    for disk in disks.into_iter().flatten() {
        let volid = disk
            .get("volid")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        let cloudinit = truthy(disk.get("is_cloudinit"));
        if truthy(disk.get("cdrom")) && !cloudinit {
            refusals.push(format!(
                "its CD/DVD drive holds {volid}, an image on a local storage, which PVE refuses to migrate; set spec.hardware.cdrom.iso: none (or use an ISO on shared storage)"
            ));
            continue;
        }
        if !truthy(disk.get("is_unused")) {
            local_disks.push(volid);
        }
    }
    let local = strings(p.get("local_resources"));
    if !local.is_empty() {
        refusals.push(format!(
            "it uses local devices ({}), which tie it to its node; PVE refuses to migrate it (use PCI resource mappings present on both nodes)",
            local.join(", ")
        ));
    }
    let info = p.get("mapped-resource-info");
    let not_live: Vec<String> = strings(p.get("mapped-resources"))
        .into_iter()
        .filter(|k| {
            !truthy(
                info.and_then(|i| i.get(k))
                    .and_then(|i| i.get("live-migration")),
            )
        })
        .collect();
    if running && !not_live.is_empty() {
        refusals.push(format!(
            "it runs with mapped devices ({}) that cannot migrate live; stop it (spec.state: stopped) to migrate it offline",
            not_live.join(", ")
        ));
    }
    if via_ha && running && !local_disks.is_empty() {
        refusals.push(format!(
            "HA migrates a running VM online without moving local disks ({}); move them to shared storage, or stop the VM",
            local_disks.join(", ")
        ));
    }
    Precondition {
        refusals,
        running,
        local_disks,
    }
}

/// The migration of `r` to `spec.node` (through HA when `via_ha`), or the anomaly saying why
/// not; nothing else is planned for the guest this pass.
pub(super) fn migrate(d: &Desired, r: &Resource, obs: &Observation, via_ha: bool) -> Proposal {
    let mut out = Proposal::default();
    let target = d.node.as_str();
    let path = format!("{}/migrate", base_path(&r.node, r.vmid));
    let refused = |why: String| {
        Anomaly::new(
            "spec.node",
            format!(
                "VM {} on {} cannot be migrated to {target}: {why}; nothing is sent",
                r.vmid, r.node
            ),
        )
    };
    let read = obs
        .reads
        .iter()
        .find(|x| x.call.method == Method::Get && x.call.path == path);
    let answer = match read {
        None => Err(format!(
            "PVE's precondition check (GET {path}) is not in the observation"
        )),
        Some(x) if x.status != 200 => {
            let body: String = x.body.chars().take(300).collect();
            Err(format!(
                "PVE's precondition check (GET {path}) failed with HTTP {}: {}",
                x.status,
                body.trim()
            ))
        }
        Some(x) => serde_json::from_str::<Value>(&x.body)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| format!("the answer to GET {path} is not what PVE sends (an object)")),
    };
    out.drift.push(Drift::new(
        "spec.node",
        Some(r.node.clone()),
        Some(target.to_string()),
    ));
    let p = match answer {
        Ok(p) => read_precondition(&p, target, r.running, via_ha),
        Err(why) => {
            out.anomalies.push(refused(why));
            return out;
        }
    };
    if !p.refusals.is_empty() {
        out.anomalies.push(refused(p.refusals.join("; ")));
        return out;
    }
    let (call, how) = if via_ha {
        (
            Call::new(Method::Post, format!("{RESOURCES}/{}/migrate", sid(r.vmid)))
                .param("node", target),
            "through HA".to_string(),
        )
    } else {
        let mut call = Call::new(Method::Post, path).param("target", target);
        let mut how = vec![if p.running { "online" } else { "offline" }];
        if p.running {
            call = call.param("online", "1");
            if !p.local_disks.is_empty() {
                call = call.param("with-local-disks", "1");
                how.push("with its local disks");
            }
        }
        (call, how.join(", "))
    };
    out.actions.push(Action {
        operation: Operation::step(MIGRATE),
        summary: format!(
            "migrate {} {} from {} to {target} ({how})",
            d.kind.noun(),
            r.vmid,
            r.node
        ),
        calls: vec![call],
        changes: vec![Change::new(
            "node",
            Some(r.node.clone()),
            Some(target.to_string()),
        )],
        disturbs_availability: false,
        destructive: false,
        restore: None,
    });
    out
}
