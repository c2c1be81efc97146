//! `plan`: desired state + observation -> actions, drift, pending and anomalies.
//!
//! Decisions (see the crate report for the full list):
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

use std::collections::{BTreeMap, BTreeSet};

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::model::{
    Action, Anomaly, Call, Change, Drift, Method, Observation, Operation, Proposal,
};
use proxops_kind_sdk::propstring::{PropString, parse_bool};
use proxops_kind_sdk::size::{self, GIB};

use crate::Reference;
use crate::cloudinit::{self, Keys};
use crate::desired::*;
use crate::live::{Config, PendingEntry, PendingRow, Resource, Wire, pending_entries};
use crate::refs::{self, Targets};
use crate::secrets::Secrets;
use crate::validate::parse_hotplug;
use crate::wire;

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
    let ctx = Ctx { d, targets, ci };
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
/// `with_pending` (a running VM), also the `/pending` rows, parsed once for both uses.
fn config_of(
    obs: &Observation,
    with_pending: bool,
) -> Result<(Config, Option<Vec<PendingRow>>), Vec<Diag>> {
    if let Some(map) = read_json::<BTreeMap<String, Wire>>(obs, "/config")? {
        let rows = if with_pending {
            read_json(obs, "/pending")?
        } else {
            None
        };
        return Ok((Config::from_map(map), rows));
    }
    let rows: Vec<PendingRow> = read_json(obs, "/pending")?.ok_or_else(|| {
        vec![Diag::error(
            "",
            "neither a config nor a pending read is in the observation",
        )]
    })?;
    Ok((Config::from_pending(&rows), Some(rows)))
}

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
        operation: Operation::Power,
        summary: format!("{word} {} {} on {node}", d.kind.noun(), d.vmid),
        calls: vec![power_call(node, d.vmid, verb)],
        changes: vec![Change::new("status", Some(old.into()), Some(new.into()))],
        requires_stop: !start,
        destructive: false,
    }
}

/// Everything `plan` works from: the desired state with its references and secrets resolved.
pub struct Ctx<'a> {
    /// Desired state.
    pub d: &'a Desired,
    /// Resolved reference targets.
    pub targets: Targets,
    /// Cloud-init data with its secrets.
    pub ci: cloudinit::Resolved,
}

/// The owned keys of a new VM, in a fixed order, as `(key, value, sensitive)`.
pub fn create_params(ctx: &Ctx<'_>) -> Vec<(String, String, bool)> {
    let d = ctx.d;
    let mut p: Vec<(String, String, bool)> = Vec::new();
    let mut put = |k: &str, v: String| p.push((k.to_string(), v, false));
    put("name", d.pve_name.clone());
    if let Some(desc) = &d.pve_description {
        put("description", desc.clone());
    }
    put("tags", d.tags.join(";"));
    put("memory", d.memory_mib.to_string());
    put("cores", d.cpu.cores.to_string());
    put("cpu", wire::cpu_value(d, None));
    let hw = &d.hardware;
    if let Some(s) = hw.sockets {
        put("sockets", s.to_string());
    }
    if let Some(n) = hw.numa {
        put("numa", wire::b(n));
    }
    if let Some(m) = &hw.machine {
        put("machine", wire::machine_type(m).to_string());
    }
    if let Some(b) = &hw.bios {
        put("bios", b.clone());
    }
    if let Some(v) = &hw.display {
        put("vga", v.clone());
    }
    if let Some(s) = &hw.serial0 {
        put("serial0", s.clone());
    }
    if let Some(s) = &d.scsihw {
        put("scsihw", s.clone());
    }
    for (i, disk) in d.disks.iter().enumerate() {
        match ctx.targets.images.get(&i) {
            Some(src) => put(&disk.slot, wire::import_disk(disk, src)),
            None => put(&disk.slot, wire::new_disk(disk)),
        }
    }
    if let Some(e) = &hw.efi_disk {
        put("efidisk0", wire::new_efidisk(e));
    }
    if let Some(t) = &hw.tpm {
        put("tpmstate0", wire::new_tpm(t));
    }
    if let Some(ci) = &hw.cloud_init {
        put("ide2", format!("{}:cloudinit", ci.storage));
    }
    if let Some(cd) = &hw.cdrom {
        match &ctx.targets.iso {
            Some(volid) => put(&cd.slot, wire::iso_cdrom(volid)),
            None => put(&cd.slot, wire::empty_cdrom(cd)),
        }
    }
    for n in &d.networks {
        put(&format!("net{}", n.slot), wire::new_nic(n));
    }
    for pci in &hw.pci_devices {
        put(&format!("hostpci{}", pci.slot), wire::new_pci(pci));
    }
    let o = &d.options;
    for (k, v) in [
        ("onboot", o.onboot),
        ("protection", o.protection),
        ("agent", o.agent),
        ("acpi", o.acpi),
        ("tablet", o.tablet),
    ] {
        if let Some(v) = v {
            put(k, wire::b(v));
        }
    }
    if let Some(s) = &o.startup {
        put("startup", s.clone());
    }
    if let Some(h) = &o.hotplug {
        put(
            "hotplug",
            if h.is_empty() {
                "0".into()
            } else {
                h.join(",")
            },
        );
    }
    if let Some(b) = &o.boot_order {
        put("boot", format!("order={}", b.join(";")));
    }
    for (k, v) in &d.extra {
        put(k, v.clone());
    }
    p.extend(cloudinit::create_params(
        d.cloud_init_data.as_ref(),
        &ctx.ci,
    ));
    p
}

fn clone_create(d: &Desired, source: u32) -> Proposal {
    let mut out = Proposal::default();
    let template = d.clone.as_deref().unwrap_or_default();
    // PVE's clone has no `start` parameter: the next pass writes the VM's own configuration and
    // powers it on.
    let call = Call::new(
        Method::Post,
        format!("{}/clone", base_path(&d.node, source)),
    )
    .param("newid", d.vmid.to_string())
    .param("full", "1")
    .param("name", d.pve_name.clone());
    push_create(
        &mut out,
        d,
        format!(" as a full clone of TemplateVM `{template}` ({source})"),
        vec![call],
        vec![
            Change::new("vmid", None, Some(d.vmid.to_string())),
            Change::new("name", None, Some(d.pve_name.clone())),
        ],
    );
    out
}

/// The drift item and the create action of an absent VM or template; `how` ends the
/// summary (` as a full clone of …`, or nothing).
fn push_create(
    out: &mut Proposal,
    d: &Desired,
    how: String,
    calls: Vec<Call>,
    changes: Vec<Change>,
) {
    out.drift.push(Drift::new(
        "",
        None,
        Some(format!("{} {} on {}", d.kind.noun(), d.vmid, d.node)),
    ));
    out.actions.push(Action {
        operation: Operation::Create,
        summary: format!(
            "create {} {} ({}) on {}{how}",
            d.kind.noun(),
            d.vmid,
            d.name,
            d.node
        ),
        calls,
        changes,
        requires_stop: false,
        destructive: false,
    });
}

fn create(ctx: &Ctx<'_>) -> Proposal {
    let d = ctx.d;
    let raw: Vec<Anomaly> = d
        .hardware
        .pci_devices
        .iter()
        .enumerate()
        .filter(|(_, p)| p.device.is_some())
        .map(|(i, p)| {
            raw_pci_anomaly(
                &format!("spec.hardware.pci-devices[{i}]"),
                &format!("hostpci{}", p.slot),
            )
        })
        .collect();
    if !raw.is_empty() && ctx.targets.clone_vmid.is_none() {
        // PVE would refuse the whole create: nothing is sent.
        let mut out = Proposal::default();
        out.drift.push(Drift::new(
            "",
            None,
            Some(format!("{} {} on {}", d.kind.noun(), d.vmid, d.node)),
        ));
        out.anomalies = raw;
        return out;
    }
    if let Some(source) = ctx.targets.clone_vmid {
        return clone_create(d, source);
    }
    let mut out = Proposal::default();
    let params = create_params(ctx);
    let mut call = Call::new(Method::Post, format!("/nodes/{}/qemu", d.node))
        .param("vmid", d.vmid.to_string());
    let mut changes = vec![Change::new("vmid", None, Some(d.vmid.to_string()))];
    for (k, v, sensitive) in &params {
        call.params.push((k.clone(), v.clone(), *sensitive));
        changes.push(Change {
            key: k.clone(),
            old: None,
            new: Some(v.clone()),
            sensitive: *sensitive,
        });
    }
    let mut calls = vec![];
    if d.kind == Flavour::Template {
        call = call.param("start", "0");
        calls.push(call);
        calls.push(Call::new(
            Method::Post,
            format!("{}/template", base_path(&d.node, d.vmid)),
        ));
        changes.push(Change::new("template", None, Some("1".into())));
    } else {
        calls.push(call);
    }
    push_create(&mut out, d, String::new(), calls, changes);
    if d.kind == Flavour::Vm && d.state == PowerState::Started {
        out.actions.push(power_action(d, &d.node, true));
    }
    out
}

fn prune(flavour: Flavour, r: &Resource, obs: &Observation) -> Result<Proposal, Vec<Diag>> {
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
        out.anomalies.push(Anomaly::new(
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
        requires_stop: r.running,
        destructive: true,
    });
    Ok(out)
}

/// What an operator does about a lock no task holds any more (a run killed mid-task).
fn unlock_hint(vmid: u32) -> String {
    format!(
        "If a task is still running for it, wait for it; if none is (the run that took the lock was killed), clear the lock with `qm unlock {vmid}` on its node (`proxops sim unlock {vmid}` for a sim: cluster)"
    )
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

fn simple(
    path: &str,
    desired: String,
    eq: impl Fn(&str) -> bool,
    default: Option<&'static str>,
) -> impl Fn(Option<&str>) -> Outcome {
    let path = path.to_string();
    move |live: Option<&str>| match live.or(default) {
        Some(l) if eq(l) => Outcome::Same,
        _ => Outcome::Write(
            desired.clone(),
            vec![Drift::new(
                &path,
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

fn update(ctx: &Ctx<'_>, r: &Resource, obs: &Observation) -> Result<Proposal, Vec<Diag>> {
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
    if r.node != d.node {
        out.anomalies.push(Anomaly::new(
            "spec.node",
            format!("VM {} lives on node {}, the manifest says {}; proxops does not migrate VMs (move it in PVE or fix the manifest)", r.vmid, r.node, d.node),
        ));
        return Ok(out);
    }
    if d.kind == Flavour::Vm && r.template {
        out.anomalies.push(Anomaly::new(
            "kind",
            format!("{} {} on {} is a PVE template but the manifest is kind: VM; PVE cannot un-template it. Change the manifest to kind: TemplateVM, or demote the template in PVE", "VM", r.vmid, r.node),
        ));
        return Ok(out);
    }
    let (cfg, rows) = config_of(obs, r.running)?;
    if let Some(lock) = r.lock.as_deref().or(cfg.get("lock")) {
        out.anomalies.push(Anomaly::new(
            "",
            format!(
                "{what} is locked ({lock}); not changing it this cycle. {}",
                unlock_hint(r.vmid)
            ),
        ));
        return Ok(out);
    }
    let pending = match rows {
        Some(rows) if r.running => pending_entries(&rows),
        _ => BTreeMap::new(),
    };
    let mut diff = Diff {
        cfg: &cfg,
        pending: &pending,
        sets: vec![],
        deletes: vec![],
        reverts: vec![],
        resizes: vec![],
        sensitive: BTreeSet::new(),
        stop_required: false,
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
            call.params.push((k.clone(), v.clone(), secret));
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

    if r.running && want_running && stop_required && has_work {
        // One action: shut down, write, start again.
        let mut all = vec![power_call(node, r.vmid, "shutdown")];
        all.extend(calls);
        all.push(power_call(node, r.vmid, "start"));
        out.actions.push(Action {
            operation: Operation::Update,
            summary: format!(
                "update {what} with a restart (shut down, write, start; started again if the write fails): {}",
                keys.join(", ")
            ),
            calls: all,
            changes,
            requires_stop: true,
            destructive: false,
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
            requires_stop: false,
            destructive: false,
        });
    }
    if d.kind == Flavour::Template && !r.template {
        out.drift.push(Drift::new(
            "kind",
            Some("VM (template=0)".into()),
            Some("TemplateVM (template=1)".into()),
        ));
        out.actions.push(Action {
            operation: Operation::MarkTemplate,
            summary: format!("mark VM {} on {node} as a template", r.vmid),
            calls: vec![Call::new(Method::Post, format!("{base}/template"))],
            changes: vec![Change::new("template", Some("0".into()), Some("1".into()))],
            requires_stop: r.running,
            destructive: false,
        });
    } else if !r.running && want_running {
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
    Ok(out)
}

fn diff_config(ctx: &Ctx<'_>, x: &mut Diff<'_>) {
    let d = ctx.d;
    x.key(
        "name",
        false,
        simple(
            "spec.pve-name",
            d.pve_name.clone(),
            |l| l == d.pve_name,
            None,
        ),
    );
    if let Some(desc) = &d.pve_description {
        let want = desc.trim_end().to_string();
        x.key(
            "description",
            false,
            simple(
                "spec.pve-description",
                desc.clone(),
                move |l| l.trim_end() == want,
                None,
            ),
        );
    }
    let tags = d.tags.clone();
    x.key(
        "tags",
        false,
        simple(
            "spec.tags",
            d.tags.join(";"),
            move |l| wire::tags(Some(l)) == tags,
            None,
        ),
    );
    let mem = d.memory_mib;
    x.key(
        "memory",
        false,
        simple(
            "spec.memory",
            mem.to_string(),
            move |l| {
                PropString::parse_with_default(l, "current")
                    .ok()
                    .and_then(|p| p.bare)
                    .and_then(|v| v.parse::<u64>().ok())
                    == Some(mem)
            },
            Some("512"),
        ),
    );
    let cores = d.cpu.cores.to_string();
    x.key(
        "cores",
        false,
        simple(
            "spec.cpu.cores",
            cores.clone(),
            move |l| l == cores,
            Some("1"),
        ),
    );
    x.key("cpu", false, |live| {
        if wire::cpu_eq(d, live) {
            Outcome::Same
        } else {
            let v = wire::cpu_value(d, live);
            Outcome::Write(
                v.clone(),
                vec![Drift::new(
                    "spec.cpu.type",
                    live.map(str::to_string),
                    Some(v),
                )],
            )
        }
    });
    let hw = &d.hardware;
    if let Some(s) = hw.sockets {
        x.key(
            "sockets",
            false,
            simple(
                "spec.hardware.sockets",
                s.to_string(),
                move |l| l == s.to_string(),
                Some("1"),
            ),
        );
    }
    if let Some(n) = hw.numa {
        x.key("numa", false, boolean("spec.hardware.numa", n, "0"));
    }
    if let Some(m) = &hw.machine {
        let m = m.clone();
        x.key("machine", true, move |live| {
            if wire::machine_family(live) == m {
                return Outcome::Same;
            }
            let mut p = live
                .and_then(|l| PropString::parse_with_default(l, "type").ok())
                .unwrap_or_default();
            p.bare = Some(wire::machine_type(&m).to_string());
            let v = p.canonical();
            Outcome::Write(
                v.clone(),
                vec![Drift::new(
                    "spec.hardware.machine",
                    live.map(str::to_string),
                    Some(m.clone()),
                )],
            )
        });
    }
    if let Some(bios) = &hw.bios {
        let want = bios.clone();
        x.key(
            "bios",
            true,
            simple(
                "spec.hardware.bios",
                bios.clone(),
                move |l| l == want,
                Some("seabios"),
            ),
        );
    }
    if let Some(vga) = &hw.display {
        let vga = vga.clone();
        x.key("vga", false, move |live| {
            let mut p = live
                .and_then(|l| PropString::parse_with_default(l, "type").ok())
                .unwrap_or_default();
            if p.bare.as_deref().unwrap_or("std") == vga {
                return Outcome::Same;
            }
            p.bare = Some(vga.clone());
            let v = p.canonical();
            Outcome::Write(
                v,
                vec![Drift::new(
                    "spec.hardware.display",
                    live.map(str::to_string),
                    Some(vga.clone()),
                )],
            )
        });
    }
    if let Some(s) = &hw.serial0 {
        let want = s.clone();
        x.key(
            "serial0",
            false,
            simple("spec.hardware.serial0", s.clone(), move |l| l == want, None),
        );
    }
    if let Some(s) = &d.scsihw {
        let want = s.clone();
        x.key(
            "scsihw",
            false,
            simple(
                "spec.disks[].controller",
                s.clone(),
                move |l| l == want,
                Some("lsi"),
            ),
        );
    }
    let o = &d.options;
    for (k, v, default) in [
        ("onboot", o.onboot, "0"),
        ("protection", o.protection, "0"),
        ("acpi", o.acpi, "1"),
        ("tablet", o.tablet, "1"),
    ] {
        if let Some(v) = v {
            x.key(k, false, boolean(&format!("spec.options.{k}"), v, default));
        }
    }
    if let Some(agent) = o.agent {
        x.key("agent", false, move |live| {
            let mut p = live
                .and_then(|l| PropString::parse_with_default(l, "enabled").ok())
                .unwrap_or_default();
            if p.bare.as_deref().and_then(parse_bool).unwrap_or(false) == agent {
                return Outcome::Same;
            }
            p.bare = Some(wire::b(agent));
            Outcome::Write(
                p.canonical(),
                vec![Drift::new(
                    "spec.options.agent",
                    live.map(str::to_string),
                    Some(wire::b(agent)),
                )],
            )
        });
    }
    if let Some(s) = &o.startup {
        let want = wire::startup(s);
        x.key(
            "startup",
            false,
            simple(
                "spec.options.startup",
                s.clone(),
                move |l| wire::startup(l) == want,
                None,
            ),
        );
    }
    if let Some(h) = &o.hotplug {
        let want = h.clone();
        let v = if h.is_empty() {
            "0".to_string()
        } else {
            h.join(",")
        };
        x.key(
            "hotplug",
            false,
            simple(
                "spec.options.hotplug",
                v,
                move |l| parse_hotplug(l) == want,
                Some("network,disk,usb"),
            ),
        );
    }
    if let Some(bo) = &o.boot_order {
        let want = bo.clone();
        x.key(
            "boot",
            false,
            simple(
                "spec.options.boot-order",
                format!("order={}", bo.join(";")),
                move |l| wire::boot_order(Some(l)).as_ref() == Some(&want),
                None,
            ),
        );
    }
    for (k, v) in &d.extra {
        let want = v.clone();
        x.key(
            k,
            false,
            simple(
                &format!("spec.extra.{k}"),
                v.clone(),
                move |l| l == want,
                None,
            ),
        );
    }
    diff_disks(ctx, x);
    diff_special_drives(ctx, x);
    diff_nics(d, x);
    diff_pci(d, x);
    diff_cloud_init_data(ctx, x);
}

fn diff_disks(ctx: &Ctx<'_>, x: &mut Diff<'_>) {
    let d = ctx.d;
    for (i, disk) in d.disks.iter().enumerate() {
        let path = format!("spec.disks[{i}]");
        let import = ctx.targets.images.get(&i);
        let Some(live) = x.cfg.get(&disk.slot).map(str::to_string) else {
            // An empty slot gets a new volume; an image-seeded disk is imported into it.
            let v = match import {
                Some(src) => wire::import_disk(disk, src),
                None => wire::new_disk(disk),
            };
            let storage = disk.storage.clone();
            x.key(&disk.slot, false, |live| match live {
                Some(l) if wire::pool(&wire::drive(l).bare.unwrap_or_default()) == storage => {
                    Outcome::Same
                }
                _ => Outcome::Write(v.clone(), vec![Drift::new(&path, None, Some(v.clone()))]),
            });
            continue;
        };
        let drv = wire::drive(&live);
        if wire::is_cdrom(&drv) || wire::is_cloudinit(&drv) {
            x.out.anomalies.push(Anomaly::new(
                &path,
                format!(
                    "slot {} holds `{live}`, not a disk; proxops does not replace it",
                    disk.slot
                ),
            ));
            continue;
        }
        let vol = drv.bare.clone().unwrap_or_default();
        if wire::pool(&vol) != disk.storage {
            let why = if disk.image.is_some() {
                "; an image-seeded disk is imported once and never re-imported"
            } else {
                ""
            };
            x.out.anomalies.push(Anomaly::new(
                format!("{path}.storage"),
                format!("disk {} is on storage {} but the manifest says {}; moving a volume is a storage migration, proxops does not do it{why}", disk.slot, wire::pool(&vol), disk.storage),
            ));
            continue;
        }
        if disk.image.is_some() {
            // PVE does not report import-from back and the size comes from the image: only the
            // pool of an image-seeded disk is compared.
            continue;
        }
        if let (Some(want), Some(have)) = (disk.size_gib, wire::drive_size(&drv)) {
            let want_b = want * GIB;
            if have > want_b {
                x.out.anomalies.push(Anomaly::new(
                    format!("{path}.size"),
                    format!(
                        "disk {} is {} but the manifest says {want}GiB; PVE cannot shrink disks",
                        disk.slot,
                        size::format_human(have)
                    ),
                ));
            } else if have < want_b {
                let old = drv.get("size").map(str::to_string);
                x.out.drift.push(Drift::new(
                    format!("{path}.size"),
                    old.clone(),
                    Some(format!("{want}G")),
                ));
                x.resizes.push((disk.slot.clone(), format!("{want}G"), old));
            }
        }
        let tokens = wire::disk_tokens(disk);
        let path2 = path.clone();
        x.key(&disk.slot, false, move |live| {
            let Some(live) = live else {
                return Outcome::Same;
            };
            let mut p = wire::drive(live);
            let mut drift = Vec::new();
            for (k, v) in &tokens {
                let have = p.get(k).or(wire::disk_token_default(k));
                if !have.is_some_and(|h| wire::token_eq(h, v)) {
                    drift.push(Drift::new(
                        format!("{path2}.{k}"),
                        p.get(k).map(str::to_string),
                        Some(v.clone()),
                    ));
                    p.set(k, v.clone());
                }
            }
            if drift.is_empty() {
                Outcome::Same
            } else {
                Outcome::Write(p.canonical(), drift)
            }
        });
    }
    // Live disks the manifest does not declare: reported, never deleted.
    let owned: BTreeSet<&str> = d.disks.iter().map(|k| k.slot.as_str()).collect();
    for (k, v) in &x.cfg.keys {
        if !crate::syntax::is_disk_key(k) || owned.contains(k.as_str()) {
            continue;
        }
        let drv = wire::drive(v);
        if wire::is_cdrom(&drv) || wire::is_cloudinit(&drv) {
            continue;
        }
        if d.clone.is_some() {
            continue; // a clone's disks come from its template
        }
        x.out.anomalies.push(Anomaly::new("spec.disks", format!("live disk {k} (`{v}`) is not declared in the manifest; proxops never deletes disks it was not asked to")));
    }
}

fn diff_special_drives(ctx: &Ctx<'_>, x: &mut Diff<'_>) {
    let hw = &ctx.d.hardware;
    // A cloud-init drive PVE holds on another slot (a template built elsewhere): PVE allows only
    // one, so it is reported, never moved or doubled.
    let elsewhere = x.cfg.keys.iter().find(|(k, v)| {
        k.as_str() != "ide2" && crate::syntax::is_disk_key(k) && wire::is_cloudinit(&wire::drive(v))
    });
    if let (Some(_), Some((k, v))) = (&hw.cloud_init, elsewhere) {
        x.out.anomalies.push(Anomaly::new(
            "spec.hardware.cloud-init",
            format!("the cloud-init drive is on {k} (`{v}`), the manifest puts it on ide2; PVE allows one cloud-init drive and proxops does not move it"),
        ));
    } else if let Some(ci) = &hw.cloud_init {
        let storage = ci.storage.clone();
        let live = x.cfg.get("ide2").map(str::to_string);
        match live {
            Some(l) if wire::is_cloudinit(&wire::drive(&l)) => {
                let vol = wire::drive(&l).bare.unwrap_or_default();
                if wire::pool(&vol) != storage {
                    x.out.anomalies.push(Anomaly::new(
                        "spec.hardware.cloud-init.storage",
                        format!("the cloud-init drive is on storage {} but the manifest says {storage}; moving it is a storage migration, proxops does not do it", wire::pool(&vol)),
                    ));
                }
            }
            Some(l) if !wire::is_cdrom(&wire::drive(&l)) => {
                x.out.anomalies.push(Anomaly::new("spec.hardware.cloud-init", format!("ide2 holds the disk `{l}`; proxops does not replace a disk with the cloud-init drive")));
            }
            _ => {
                let v = format!("{storage}:cloudinit");
                x.key("ide2", false, |live| match live {
                    Some(l) if wire::is_cloudinit(&wire::drive(l)) => Outcome::Same,
                    _ => Outcome::Write(
                        v.clone(),
                        vec![Drift::new(
                            "spec.hardware.cloud-init",
                            live.map(str::to_string),
                            Some(v.clone()),
                        )],
                    ),
                });
            }
        }
    }
    if let Some(cd) = &hw.cdrom {
        let iso = ctx.targets.iso.clone();
        let want = match &iso {
            Some(volid) => wire::iso_cdrom(volid),
            None => wire::empty_cdrom(cd),
        };
        let media = cd.media.clone();
        let path = if iso.is_some() {
            "spec.hardware.cdrom.iso"
        } else {
            "spec.hardware.cdrom"
        };
        let live = x.cfg.get(&cd.slot).map(str::to_string);
        if let Some(l) = live.as_deref().filter(|l| {
            let drv = wire::drive(l);
            !wire::is_cdrom(&drv) && !wire::is_cloudinit(&drv)
        }) {
            x.out.anomalies.push(Anomaly::new(
                "spec.hardware.cdrom",
                format!(
                    "{} holds the disk `{l}`; proxops does not replace a disk with a CD/DVD drive",
                    cd.slot
                ),
            ));
        } else {
            x.key(&cd.slot, false, move |live| {
                if let Some(l) = live {
                    let drv = wire::drive(l);
                    let bare = drv.bare.as_deref();
                    let same = match &iso {
                        Some(volid) => {
                            bare == Some(volid.as_str())
                                && drv.get("media").unwrap_or("disk") == "cdrom"
                        }
                        None => bare == Some("none") && drv.get("media").unwrap_or("disk") == media,
                    };
                    if same {
                        return Outcome::Same;
                    }
                }
                Outcome::Write(
                    want.clone(),
                    vec![Drift::new(
                        path,
                        live.map(str::to_string),
                        Some(want.clone()),
                    )],
                )
            });
        }
    }
    if let Some(e) = &hw.efi_disk {
        match x.cfg.get("efidisk0").map(str::to_string) {
            None => {
                let v = wire::new_efidisk(e);
                x.key("efidisk0", false, |live| {
                    if live.is_some() {
                        Outcome::Same
                    } else {
                        Outcome::Write(
                            v.clone(),
                            vec![Drift::new("spec.hardware.efi-disk", None, Some(v.clone()))],
                        )
                    }
                });
            }
            Some(l) => {
                let drv = wire::drive(&l);
                let vol = drv.bare.clone().unwrap_or_default();
                let live_type = drv.get("efitype").unwrap_or("2m").to_string();
                if wire::pool(&vol) != e.storage {
                    x.out.anomalies.push(Anomaly::new("spec.hardware.efi-disk.storage", format!("the EFI disk is on storage {} but the manifest says {}; proxops does not move volumes", wire::pool(&vol), e.storage)));
                } else if e.template.as_ref().is_some_and(|t| *t != live_type) {
                    x.out.anomalies.push(Anomaly::new(
                        "spec.hardware.efi-disk.template",
                        format!("the EFI disk has efitype {live_type}, the manifest says {}; PVE cannot convert EFI vars in place (recreate the EFI disk)", e.template.as_deref().unwrap_or_default()),
                    ));
                } else if let Some(sb) = e.secure_boot {
                    // Toggle pre-enrolled-keys on the live form; ms-cert and the volume stay verbatim.
                    x.key("efidisk0", false, move |live| {
                        let Some(live) = live else {
                            return Outcome::Same;
                        };
                        let mut p = wire::drive(live);
                        if p.get("pre-enrolled-keys")
                            .and_then(parse_bool)
                            .unwrap_or(false)
                            == sb
                        {
                            return Outcome::Same;
                        }
                        // Both sides in the manifest's vocabulary (`enabled`/`disabled`).
                        let word = |on: bool| if on { "enabled" } else { "disabled" };
                        let old = Some(
                            word(
                                p.get("pre-enrolled-keys")
                                    .and_then(parse_bool)
                                    .unwrap_or(false),
                            )
                            .to_string(),
                        );
                        p.set("pre-enrolled-keys", wire::b(sb));
                        Outcome::Write(
                            p.to_string(),
                            vec![Drift::new(
                                "spec.hardware.efi-disk.secure-boot",
                                old,
                                Some(word(sb).into()),
                            )],
                        )
                    });
                }
            }
        }
    }
    if let Some(t) = &hw.tpm {
        match x.cfg.get("tpmstate0").map(str::to_string) {
            None => {
                let v = wire::new_tpm(t);
                x.key("tpmstate0", false, |live| {
                    if live.is_some() {
                        Outcome::Same
                    } else {
                        Outcome::Write(
                            v.clone(),
                            vec![Drift::new("spec.hardware.tpm", None, Some(v.clone()))],
                        )
                    }
                });
            }
            Some(l) => {
                let drv = wire::drive(&l);
                let vol = drv.bare.clone().unwrap_or_default();
                let version = drv.get("version").unwrap_or("v1.2");
                if wire::pool(&vol) != t.storage {
                    x.out.anomalies.push(Anomaly::new("spec.hardware.tpm.storage", format!("the TPM state is on storage {} but the manifest says {}; proxops does not move volumes", wire::pool(&vol), t.storage)));
                } else if version != t.version {
                    x.out.anomalies.push(Anomaly::new("spec.hardware.tpm.version", format!("the TPM is {version}, the manifest says {}; PVE cannot change a TPM version", t.version)));
                }
            }
        }
    }
}

fn diff_nics(d: &Desired, x: &mut Diff<'_>) {
    for (i, n) in d.networks.iter().enumerate() {
        let path = format!("spec.networks[{i}]");
        let key = format!("net{}", n.slot);
        let n = n.clone();
        x.key(&key, false, move |live| {
            let Some(l) = live.and_then(wire::live_nic) else {
                let v = wire::new_nic(&n);
                return Outcome::Write(
                    v.clone(),
                    vec![Drift::new(&path, live.map(str::to_string), Some(v))],
                );
            };
            let mut drift = Vec::new();
            if l.model != n.model {
                drift.push(Drift::new(
                    format!("{path}.model"),
                    Some(l.model.clone()),
                    Some(n.model.clone()),
                ));
            }
            if let Some(mac) = &n.mac
                && !l
                    .mac
                    .as_deref()
                    .is_some_and(|m| m.eq_ignore_ascii_case(mac))
            {
                drift.push(Drift::new(
                    format!("{path}.mac"),
                    l.mac.clone(),
                    Some(mac.clone()),
                ));
            }
            let mut rest = l.rest.clone();
            for (tok, v) in wire::nic_tokens(&n) {
                if !wire::nic_token_eq(tok, l.rest.get(tok), &v) {
                    let field = match tok {
                        "tag" => "vlan",
                        "rate" => "rate-limit",
                        other => other,
                    };
                    drift.push(Drift::new(
                        format!("{path}.{field}"),
                        l.rest.get(tok).map(str::to_string),
                        Some(v.clone()),
                    ));
                    rest.set(tok, v);
                }
            }
            if drift.is_empty() {
                return Outcome::Same;
            }
            // A PVE-assigned MAC survives the rewrite verbatim.
            let mac = n.mac.clone().or(l.mac.clone());
            Outcome::Write(wire::print_nic(&n.model, mac.as_deref(), &rest), drift)
        });
    }
    // The manifest owns the NIC set: an undeclared netN is removed.
    let owned: BTreeSet<String> = d
        .networks
        .iter()
        .map(|n| format!("net{}", n.slot))
        .collect();
    let extra: Vec<String> = x
        .cfg
        .keys
        .keys()
        .filter(|k| matches!(crate::syntax::split_slot(k), Some(("net", _))) && !owned.contains(*k))
        .cloned()
        .collect();
    for k in extra {
        x.delete(&k, &format!("spec.networks ({k})"));
    }
}

/// How a live `hostpciN` compares with a declared device: the value to write, and why.
fn pci_outcome(pci: &PciDevice, path: &str, live: Option<&str>) -> Outcome {
    let Some(l) = live else {
        let v = wire::new_pci(pci);
        return Outcome::Write(v.clone(), vec![Drift::new(path, None, Some(v))]);
    };
    let mut p =
        PropString::parse_with_default(l, "host").unwrap_or_else(|_| PropString::with_bare(l));
    let mut drift = Vec::new();
    match (&pci.device, &pci.mapping) {
        (Some(device), _) => {
            if p.get("mapping").is_some()
                || !p.bare.as_deref().is_some_and(|h| wire::pci_eq(h, device))
            {
                drift.push(Drift::new(
                    format!("{path}.device"),
                    p.bare
                        .clone()
                        .or_else(|| p.get("mapping").map(|m| format!("mapping={m}"))),
                    Some(device.clone()),
                ));
                p.remove("mapping");
                p.bare = Some(device.clone());
            }
        }
        (None, Some(mapping)) => {
            if p.bare.is_some() || p.get("mapping") != Some(mapping.as_str()) {
                drift.push(Drift::new(
                    format!("{path}.mapping"),
                    p.get("mapping")
                        .map(str::to_string)
                        .or_else(|| p.bare.clone()),
                    Some(mapping.clone()),
                ));
                p.bare = None;
                p.set("mapping", mapping.clone());
            }
        }
        (None, None) => {}
    }
    if let Some(e) = pci.pcie
        && p.get("pcie").and_then(parse_bool).unwrap_or(false) != e
    {
        drift.push(Drift::new(
            format!("{path}.pcie"),
            p.get("pcie").map(str::to_string),
            Some(wire::b(e)),
        ));
        p.set("pcie", wire::b(e));
    }
    if drift.is_empty() {
        Outcome::Same
    } else {
        Outcome::Write(p.canonical(), drift)
    }
}

/// The anomaly for a raw PCI device proxops would have to write: PVE lets only `root@pam`
/// set a non-mapped `hostpciN`, and proxops always authenticates with an API token, so the
/// write is known to fail; nothing is stopped for it.
fn raw_pci_anomaly(path: &str, key: &str) -> Anomaly {
    Anomaly::new(
        path,
        format!(
            "{key} names a raw host PCI device, which PVE lets only root@pam write (\"only root can set '{key}' config for non-mapped devices\"); proxops uses an API token, so it does not stop the guest for a write known to fail. Create a PCI resource mapping (Datacenter -> Resource Mappings), grant the token Mapping.Use on it, and write `mapping: <name>` instead of `device`"
        ),
    )
}

fn diff_pci(d: &Desired, x: &mut Diff<'_>) {
    for (i, pci) in d.hardware.pci_devices.iter().enumerate() {
        let path = format!("spec.hardware.pci-devices[{i}]");
        let key = format!("hostpci{}", pci.slot);
        if pci.device.is_some() {
            // Reported, never written.
            if let Outcome::Write(_, drift) = pci_outcome(pci, &path, x.cfg.get(&key)) {
                x.out.drift.extend(drift);
                x.out.anomalies.push(raw_pci_anomaly(&path, &key));
            }
            continue;
        }
        let pci = pci.clone();
        x.key(&key, true, move |live| pci_outcome(&pci, &path, live));
    }
    let owned: BTreeSet<String> = d
        .hardware
        .pci_devices
        .iter()
        .map(|p| format!("hostpci{}", p.slot))
        .collect();
    for (k, v) in &x.cfg.keys {
        if matches!(crate::syntax::split_slot(k), Some(("hostpci", _))) && !owned.contains(k) {
            x.out.anomalies.push(Anomaly::new(
                "spec.hardware.pci-devices",
                format!("live {k} (`{v}`) is not declared in the manifest; proxops does not remove PCI passthrough it was not asked to"),
            ));
        }
    }
}

/// Cloud-init data: declared keys are owned (set-compared where the spec says so); undeclared
/// keys are not owned, except on a clone-backed VM, where an inherited identity key
/// (`ciuser`, `sshkeys`, `nameserver`, `searchdomain`, `ipconfig<N>`) the manifest does not
/// declare is the template's and is cleared. `cipassword` is written only when absent and is
/// never compared or deleted.
fn diff_cloud_init_data(ctx: &Ctx<'_>, x: &mut Diff<'_>) {
    let d = ctx.d;
    let data = d.cloud_init_data.clone().unwrap_or_default();
    let clear = d.clone.is_some();
    let p = cloudinit::PATH;
    let path = |f: &str| format!("{p}.{f}");

    match &data.ci_user {
        Some(u) => {
            let want = u.clone();
            x.key(
                "ciuser",
                false,
                simple(&path("ci-user"), u.clone(), move |l| l == want, None),
            );
        }
        None if clear && x.cfg.get("ciuser").is_some() => x.delete("ciuser", &path("ci-user")),
        None => {}
    }

    match &ctx.ci.keys {
        Keys::PveOwned => {}
        Keys::NotOwned => {
            if clear && x.cfg.get("sshkeys").is_some() {
                // The template's keys: their provenance is unknown, so they are not shown.
                x.delete_with("sshkeys", &path("ssh-keys"), true);
            }
        }
        keys => {
            let lines = keys.lines().unwrap_or_default();
            let want: BTreeSet<String> = lines.iter().cloned().collect();
            let value = cloudinit::sshkeys_value(&lines);
            let sensitive = keys.sensitive();
            let (field, shown) = if sensitive {
                (path("ssh-key-refs"), data.ssh_key_refs.join(", "))
            } else {
                (path("ssh-keys"), value.clone())
            };
            x.key_with("sshkeys", false, sensitive, move |live| {
                if live.is_some_and(|l| cloudinit::live_key_set(l) == want) {
                    return Outcome::Same;
                }
                Outcome::Write(
                    value.clone(),
                    vec![Drift::new(
                        &field,
                        live.map(str::to_string),
                        Some(shown.clone()),
                    )],
                )
            });
        }
    }

    if let (Some(pw), Some(r)) = (&ctx.ci.password, &data.ci_password_ref) {
        let value = pw.expose().to_string();
        let shown = r.clone();
        let field = path("ci-password-ref");
        x.key_with("cipassword", false, true, move |live| {
            if live.is_some() {
                return Outcome::Same;
            }
            Outcome::Write(
                value.clone(),
                vec![Drift::new(&field, None, Some(shown.clone()))],
            )
        });
    }

    for (key, field, want) in [
        ("nameserver", "nameservers", &data.nameservers),
        ("searchdomain", "search-domains", &data.search_domains),
    ] {
        if want.is_empty() {
            if clear && x.cfg.get(key).is_some() {
                x.delete(key, &path(field));
            }
            continue;
        }
        let set: BTreeSet<String> = want.iter().cloned().collect();
        x.key(
            key,
            false,
            simple(
                &path(field),
                want.join(" "),
                move |l| cloudinit::live_list(l) == set,
                None,
            ),
        );
    }

    for (i, ip) in data.ipconfigs.iter().enumerate() {
        let key = format!("ipconfig{}", ip.nic);
        let ip = ip.clone();
        x.key(
            &key,
            false,
            simple(
                &format!("{p}.ipconfigs[{i}]"),
                cloudinit::ipconfig_value(&ip),
                move |l| cloudinit::ipconfig_eq(l, &ip),
                None,
            ),
        );
    }
    if clear {
        let owned: BTreeSet<String> = data
            .ipconfigs
            .iter()
            .map(|ip| format!("ipconfig{}", ip.nic))
            .collect();
        let inherited: Vec<String> = x
            .cfg
            .keys
            .keys()
            .filter(|k| {
                matches!(crate::syntax::split_slot(k), Some(("ipconfig", _))) && !owned.contains(*k)
            })
            .cloned()
            .collect();
        for k in inherited {
            x.delete(&k, &format!("{p}.ipconfigs ({k})"));
        }
    }
}
