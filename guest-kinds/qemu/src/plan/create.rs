//! Creating a VM: its owned keys in a fixed order, a fresh create, or the one clone of a TemplateVM.

use proxops_kind_sdk::model::{
    Action, Anomaly, Call, Change, Drift, Method, Operation, Param, Proposal,
};

use super::config::{root_only_anomaly, serial_device_anomaly};
use super::pci::{missing_mapping, raw_pci_anomaly};
use super::{Ctx, base_path};
use crate::cloudinit;
use crate::desired::*;
use crate::wire;

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

/// `spec.pool` on a create or clone: PVE adds the new guest to the pool in the same task
/// (`add_vm_to_pool`, after its `check_pool_exist`), the one place proxops sets a guest's pool.
fn with_pool(d: &Desired, call: Call, changes: &mut Vec<Change>) -> Call {
    match &d.pool {
        Some(pool) => {
            changes.push(Change::new("pool", None, Some(pool.clone())));
            call.param("pool", pool)
        }
        None => call,
    }
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
    let mut changes = vec![
        Change::new("vmid", None, Some(d.vmid.to_string())),
        Change::new("name", None, Some(d.pve_name.clone())),
    ];
    let call = with_pool(d, call, &mut changes);
    push_create(
        &mut out,
        d,
        format!(" as a full clone of TemplateVM `{template}` ({source})"),
        vec![call],
        changes,
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
        disturbs_availability: false,
        destructive: false,
        restore: None,
    });
}

pub(super) fn create(ctx: &Ctx<'_>) -> Proposal {
    let d = ctx.d;
    // Writes PVE would refuse the whole create for, or take and then refuse to start.
    let mut raw: Vec<Anomaly> = d
        .hardware
        .pci_devices
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let path = format!("spec.hardware.pci-devices[{i}]");
            match (&p.device, &p.mapping) {
                (Some(_), _) => Some(raw_pci_anomaly(&path, &format!("hostpci{}", p.slot))),
                (None, Some(m)) => missing_mapping(ctx.mappings.as_ref(), &path, m, &d.node),
                (None, None) => None,
            }
        })
        .collect();
    raw.extend(
        d.extra
            .keys()
            .filter(|k| crate::keys::root_only(k))
            .map(|k| root_only_anomaly(&format!("spec.extra.{k}"), k)),
    );
    if let Some(s) = d.hardware.serial0.as_deref().filter(|s| *s != "socket") {
        raw.push(serial_device_anomaly(s));
    }
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
        call.params.push(Param {
            name: k.clone(),
            value: v.clone(),
            sensitive: *sensitive,
        });
        changes.push(Change {
            key: k.clone(),
            old: None,
            new: Some(v.clone()),
            sensitive: *sensitive,
        });
    }
    let mut call = with_pool(d, call, &mut changes);
    let mut calls = vec![];
    let mut how = String::new();
    if d.kind == Flavour::Template {
        call = call.param("start", "0");
        calls.push(call);
        calls.push(Call::new(
            Method::Post,
            format!("{}/template", base_path(&d.node, d.vmid)),
        ));
        changes.push(Change::new("template", None, Some("1".into())));
    } else if d.state == PowerState::Started {
        // The create carries every owned key, so it is the last write before the start: PVE
        // starts the guest in the create's own task (`start=1`), one task instead of two. When
        // that start fails, PVE only warns and the task still ends OK with the VM created and
        // stopped; the verifying re-plan then finds it stopped and proposes the start.
        call = call.param("start", "1");
        calls.push(call);
        changes.push(Change::new("status", None, Some("running".into())));
        how = " and start it".into();
    } else {
        calls.push(call);
    }
    push_create(&mut out, d, how, calls, changes);
    // The HA resource once the guest exists (PVE refuses one for a missing guest); a clone
    // gets its own on the pass that configures it (see `ha`).
    if let Some(ha) = &d.ha {
        out.drift.push(super::ha::missing_drift(d, ha));
        out.actions.push(super::ha::create_action(d, ha));
    }
    out
}
