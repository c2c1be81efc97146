//! `plan`: desired state + observation -> actions, drift, pending and anomalies.
//!
//! Decisions:
//! * Stopping for a stop-required change (`machine`, `bios`, `hostpciN`), for `state: stopped`,
//!   and before marking a template uses `POST status/shutdown` with `forceStop=1` and
//!   `timeout=180`: the guest gets an ACPI shutdown so it can flush its filesystems, and PVE
//!   hard-stops it when the timeout passes, so the task ends with the VM stopped and the next
//!   call (a config write, `template`) never races a running guest. A prune uses `status/stop`:
//!   the guest is destroyed right after, so a graceful shutdown protects nothing.
//! * Delete sends `purge=1` (drop the vmid from backup/replication/HA jobs, which would
//!   otherwise keep pointing at a vmid proxops may hand out again) and NOT
//!   `destroy-unreferenced-disks`: PVE frees the volumes the config references; a `vm-<id>-*`
//!   volume the config does not reference is not provably ours, so it is left alone.
//! * A new VM declared `started` is created with `start=1`: the create carries every owned key
//!   (cloud-init data and drive, disks, EFI, TPM, PCI mappings, extra keys), so it is the last
//!   write before the start and PVE starts the guest in the create's own task (one task, not
//!   two). A failed start there is only a warning to PVE (the task ends `WARNINGS: 1`, the VM
//!   exists and is stopped); the apply's verifying re-plan, and any later plan, sees a stopped
//!   VM and proposes the start, as it would after a separate start that failed. A template is
//!   created with `start=0` (PVE cannot start a template) and a clone has no `start` (below).
//! * Provisioning from a TemplateVM (`spec.clone`) takes passes: when the VM is absent, one
//!   Create action `POST /nodes/{node}/qemu/{template}/clone` with `newid`, `full=1` and the VM's
//!   own `name` (PVE's clone has no `start`). The next pass sees the clone through the normal
//!   update path: the VM's own values in one config write, in which every declared cloud-init
//!   data key is set and every inherited identity key it does not declare (`ciuser`,
//!   `sshkeys`, `nameserver`, `searchdomain`, `ipconfig<N>`) is in `delete=` (so the two lists
//!   are disjoint), followed by the start. Because the clearing is ordinary drift, a clone whose
//!   config write failed is repaired by the next apply. `cipassword` is never deleted (spec).
//! * The cloud-init drive goes only into an empty (or CD/DVD) `ide2`; a live drive on another
//!   pool or another slot is an anomaly, never rewritten (a clone inherits its own copy).
//! * An image-seeded disk is `<storage>:0,import-from=<img-storage>:import/<file>` at create or
//!   into an empty slot; on a live disk only its pool is compared (a different pool is an
//!   anomaly, never a re-import).
//! * Secret-derived values (`cipassword`, `sshkeys` from refs) are sensitive in the call
//!   parameter, the change and the drift; a deleted `sshkeys` of unknown provenance too.
//! * The config write carries the `digest` of the config read, except when a stop precedes it
//!   in the same proposal on a VM with pending changes (the stop applies them and changes the
//!   digest). Resizes follow the config write and carry no digest (they are grow-only).
//! * The guest's HA resource (`spec.ha`) is planned last, after the power actions, as a
//!   `step("ha")` action; its ownership, defaults and digest are decided in `ha`.
//! * A guest on another node than `spec.node` is accepted where HA put it (every call goes
//!   to its live node: [`Ctx::node`]), migrated (`spec.placement: migrate`, a
//!   `step("migrate")` action pre-checked with PVE's precondition answer), or reported; see
//!   `migrate`.

mod cloud_init;
mod config;
mod create;
mod disks;
mod ha;
mod migrate;
mod nics;
mod pci;
pub use pci::PCI_MAPPINGS;
mod prune;
mod special_drives;
mod update;

pub use create::create_params;
pub use ha::{HA, comment as ha_comment, is_marked as ha_marked};
pub use migrate::{MIGRATE, precondition_call};

use std::collections::{BTreeMap, BTreeSet};

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::model::{
    Action, Call, Change, Drift, Method, Observation, Operation, Proposal,
};
use proxops_kind_sdk::propstring::parse_bool;

use crate::cloudinit;
use crate::desired::*;
use crate::live::{
    Config, PendingEntry, PendingRow, Resource, Wire, config_and_pending, pending_entries,
};
use crate::refs::{self, Targets};
use crate::secrets::Secrets;
use crate::{Reference, wire};
use create::create;
use prune::prune;
use update::update;

/// Plan one object. `desired` none means a claimed live object with no manifest (prune).
/// `resolved` holds the targets of the object's references as `(reference, target desired
/// JSON)`; `secrets` resolves the SOPS references of the cloud-init data. A missing or
/// unreadable target and an unresolvable secret fail closed, before any action is proposed.
pub fn plan(
    flavour: Flavour,
    desired: Option<&Desired>,
    resolved: &[(Reference, String)],
    secrets: &dyn Secrets,
    obs: &Observation,
) -> Result<Proposal, Vec<Diag>> {
    let entry = match &obs.live {
        Some(text) => {
            let r = Resource::from_json(text).map_err(|e| {
                vec![Diag::error(
                    "",
                    format!("the /cluster/resources entry is not JSON: {e}"),
                )]
            })?;
            Some(r.ok_or_else(|| {
                vec![Diag::error(
                    "",
                    "the /cluster/resources entry has no node or vmid".to_string(),
                )]
            })?)
        }
        None => None,
    };
    let Some(d) = desired else {
        return match entry {
            None => Ok(Proposal::default()),
            Some(r) => prune(flavour, &r, obs),
        };
    };
    let targets = refs::targets(d, resolved);
    let ci = cloudinit::resolve(d.cloud_init_data.as_ref(), secrets);
    let (targets, ci) = match (targets, ci) {
        (Ok(t), Ok(c)) => (t, c),
        (t, c) => {
            let mut errors = t.err().unwrap_or_default();
            errors.extend(c.err().unwrap_or_default());
            return Err(errors);
        }
    };
    let mappings = pci::mappings(obs)?;
    let ctx = Ctx {
        d,
        node: entry.as_ref().map_or(d.node.clone(), |r| r.node.clone()),
        targets,
        ci,
        mappings,
    };
    match entry {
        None => Ok(create(&ctx)),
        Some(r) => update(&ctx, &r, obs),
    }
}

fn base_path(node: &str, vmid: u32) -> String {
    format!("/nodes/{node}/qemu/{vmid}")
}

/// Parse the answer to the read whose path ends with `suffix` as `T`.
fn read_json<T: serde::de::DeserializeOwned>(
    obs: &Observation,
    suffix: &str,
) -> Result<Option<T>, Vec<Diag>> {
    let Some(r) = obs.reads.iter().find(|r| r.call.path.ends_with(suffix)) else {
        return Ok(None);
    };
    if r.status != 200 {
        let body: String = r.body.chars().take(300).collect();
        return Err(vec![Diag::error(
            "",
            format!(
                "reading {} failed with HTTP {}: {}",
                r.call.path,
                r.status,
                body.trim()
            ),
        )]);
    }
    serde_json::from_str(&r.body).map(Some).map_err(|e| {
        vec![Diag::error(
            "",
            format!("the answer to {} is not what PVE sends: {e}", r.call.path),
        )]
    })
}

/// The applied config and its digest: from `/config?current=1`, or, for a running VM, from
/// the `value` column of `/pending`, which lists every applied key and the digest too. With
/// `with_pending` (a running VM), also what `/pending` says is pending (else nothing), from
/// the same rows when they are the config's source.
fn config_of(
    obs: &Observation,
    with_pending: bool,
) -> Result<(Config, BTreeMap<String, PendingEntry>), Vec<Diag>> {
    if let Some(map) = read_json::<BTreeMap<String, Wire>>(obs, "/config")? {
        let pending = if with_pending {
            read_json::<Vec<PendingRow>>(obs, "/pending")?
                .map(|rows| pending_entries(&rows))
                .unwrap_or_default()
        } else {
            BTreeMap::new()
        };
        return Ok((Config::from_map(map), pending));
    }
    let rows: Vec<PendingRow> = read_json(obs, "/pending")?.ok_or_else(|| {
        vec![Diag::error(
            "",
            "neither a config nor a pending read is in the observation",
        )]
    })?;
    let (cfg, pending) = config_and_pending(rows);
    Ok((
        cfg,
        if with_pending {
            pending
        } else {
            BTreeMap::new()
        },
    ))
}

/// The step of power transitions (the host maps it to the policy operation `power`).
pub const POWER: &str = "power";
/// The step that promotes a VM to a template (policy operation `mark-template`).
pub const MARK_TEMPLATE: &str = "mark-template";

fn power_call(node: &str, vmid: u32, verb: &str) -> Call {
    let c = Call::new(
        Method::Post,
        format!("{}/status/{verb}", base_path(node, vmid)),
    );
    if verb == "shutdown" {
        c.param("forceStop", "1").param("timeout", "180")
    } else {
        c
    }
}

fn power_action(d: &Desired, node: &str, start: bool) -> Action {
    let (verb, old, new, word) = if start {
        ("start", "stopped", "running", "start")
    } else {
        ("shutdown", "running", "stopped", "shut down")
    };
    Action {
        operation: Operation::step(POWER),
        summary: format!("{word} {} {} on {node}", d.kind.noun(), d.vmid),
        calls: vec![power_call(node, d.vmid, verb)],
        changes: vec![Change::new("status", Some(old.into()), Some(new.into()))],
        disturbs_availability: !start,
        destructive: false,
        // A lone shutdown is the change itself; a lone start disturbs nothing.
        restore: None,
    }
}

/// Everything `plan` works from: the desired state with its references and secrets resolved.
pub struct Ctx<'a> {
    /// Desired state.
    pub d: &'a Desired,
    /// The node the guest is on: the live one (an HA-managed guest may be elsewhere than
    /// `spec.node`), else `spec.node`.
    pub node: String,
    /// Resolved reference targets.
    pub targets: Targets,
    /// Cloud-init data with its secrets.
    pub ci: cloudinit::Resolved,
    /// The cluster's PCI resource mappings, when the VM names one (and they were read).
    pub mappings: Option<pci::Mappings>,
}

/// What comparing one key gave.
enum Outcome {
    /// Live satisfies desired.
    Same,
    /// Write this value; these drift items explain why.
    Write(String, Vec<Drift>),
}

/// Accumulates the config changes of one update.
struct Diff<'a> {
    cfg: &'a Config,
    pending: &'a BTreeMap<String, PendingEntry>,
    sets: Vec<(String, String)>,
    deletes: Vec<String>,
    /// Keys whose live value is right but whose pending change (made behind proxops's back)
    /// would move them away from desired at the next reboot: the pending change is reverted.
    reverts: Vec<String>,
    resizes: Vec<(String, String, Option<String>)>,
    /// Keys whose values are secret (or derived from one).
    sensitive: BTreeSet<String>,
    stop_required: bool,
    /// The live config names something PVE will not start the guest with (a PCI mapping
    /// missing on its node): no start, and no stop that would need one.
    start_refused: bool,
    out: Proposal,
}

impl Diff<'_> {
    /// Compare key `key` with `cmp` (which sees the live value); a value PVE holds pending that
    /// already satisfies desired is reported as pending, not written again.
    fn key(&mut self, key: &str, stop: bool, cmp: impl Fn(Option<&str>) -> Outcome) {
        self.key_with(key, stop, false, cmp);
    }

    /// [`Diff::key`] for a key whose value may be secret: its drift, change and parameter are
    /// marked sensitive.
    fn key_with(
        &mut self,
        key: &str,
        stop: bool,
        sensitive: bool,
        cmp: impl Fn(Option<&str>) -> Outcome,
    ) {
        match cmp(self.cfg.get(key)) {
            Outcome::Same => {
                let Some(p) = self.pending.get(key) else {
                    return;
                };
                let pending_drift = match p.pending.as_deref() {
                    Some(value) => match cmp(Some(value)) {
                        Outcome::Same => return,
                        Outcome::Write(_, drift) => drift,
                    },
                    None if p.delete => match cmp(None) {
                        Outcome::Same => return,
                        Outcome::Write(_, drift) => drift,
                    },
                    None => return,
                };
                for mut d in pending_drift {
                    d.sensitive |= sensitive;
                    d.path = format!("{} (pending)", d.path);
                    self.out.drift.push(d);
                }
                if sensitive {
                    self.sensitive.insert(key.to_string());
                }
                self.reverts.push(key.to_string());
            }
            Outcome::Write(value, mut drift) => {
                for d in &mut drift {
                    d.sensitive |= sensitive;
                }
                if sensitive {
                    self.sensitive.insert(key.to_string());
                }
                if let Some(p) = self.pending.get(key).and_then(|p| p.pending.as_deref())
                    && matches!(cmp(Some(p)), Outcome::Same)
                {
                    self.out.pending.extend(drift);
                    return;
                }
                self.out.drift.extend(drift);
                self.stop_required |= stop;
                self.sets.push((key.to_string(), value));
            }
        }
    }

    fn delete(&mut self, key: &str, path: &str) {
        self.delete_with(key, path, false);
    }

    fn delete_with(&mut self, key: &str, path: &str, sensitive: bool) {
        let live = self.cfg.get(key).map(str::to_string);
        let mut drift = Drift::new(path, live, None);
        drift.sensitive = sensitive;
        if sensitive {
            self.sensitive.insert(key.to_string());
        }
        if self.pending.get(key).is_some_and(|p| p.delete) {
            self.out.pending.push(drift);
            return;
        }
        self.out.drift.push(drift);
        self.deletes.push(key.to_string());
    }
}

fn simple<'p>(
    path: &'p str,
    desired: String,
    eq: impl Fn(&str) -> bool + 'p,
    default: Option<&'static str>,
) -> impl Fn(Option<&str>) -> Outcome + 'p {
    move |live: Option<&str>| match live.or(default) {
        Some(l) if eq(l) => Outcome::Same,
        _ => Outcome::Write(
            desired.clone(),
            vec![Drift::new(
                path,
                live.map(str::to_string),
                Some(desired.clone()),
            )],
        ),
    }
}

fn boolean(path: &str, desired: bool, default: &'static str) -> impl Fn(Option<&str>) -> Outcome {
    simple(
        path,
        wire::b(desired),
        move |l| parse_bool(l) == Some(desired),
        Some(default),
    )
}
