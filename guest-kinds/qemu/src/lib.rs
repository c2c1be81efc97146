//! Shared logic of the VM and TemplateVM kinds: validation, JSON Schema, identity, ownership,
//! observation and planning, as plain Rust functions over plain types (usable natively, e.g. by
//! benchmarks). [`Vm`] and [`TemplateVm`] implement the SDK's
//! [`ResourceKind`](proxops_kind_sdk::kind::ResourceKind) with them (the SDK converts at the
//! WIT boundary); the `vm` and `templatevm` crates export those as components.
//!
//! Planned here: fresh creates, provisioning from a TemplateVM (`spec.clone`: one full clone,
//! then the VM's own configuration through the normal update path, see [`mod@plan`]), cloud-init
//! data with its SOPS references ([`cloudinit`], [`secrets`]), image-seeded disks
//! (`import-from`), the CD/DVD drive (`none` or an attached ISO) and the cloud-init drive. The
//! targets of references come from the host's `resolved` list ([`refs`]). [`adopt`] writes the
//! manifest of a live guest. A VM's HA resource (`spec.ha`, marked as proxops's in its comment)
//! and the migration of a guest found elsewhere than `spec.node` (`spec.placement`) are
//! planned too ([`mod@plan`]).

pub mod adopt;
pub mod cloudinit;
pub mod desired;
pub mod keys;
mod kind;
pub mod live;
pub mod plan;
pub mod refs;
pub mod schema;
pub use proxops_kind_sdk::secrets;
pub mod syntax;
pub mod validate;
pub mod wire;

pub use desired::{Desired, Flavour, PowerState};
pub use kind::{Qemu, TemplateVm, Vm};
pub use plan::plan;
pub use secrets::{HostSecrets, MapSecrets, NoSecrets, Secret, SecretError, Secrets};
pub use validate::{Validated, validate, validate_json};

pub use proxops_kind_sdk::kind::{KindInfo, ObjectKey, Reference};

use proxops_kind_sdk::kind::{Capability, Listing};
use proxops_kind_sdk::model::{Call, Method};
use serde_json::Value;

/// The tag that marks a PVE guest as created (and owned) by proxops.
pub const OWNERSHIP_TAG: &str = "proxops";

/// The vmid-bound ownership mark written at create and at a clone's first configure: PVE
/// copies tags on clone and restore, so `proxops` alone cannot prove a guest is the one
/// proxops created; a prune needs the mark to name the guest's own vmid.
pub fn ownership_mark(vmid: u32) -> String {
    format!("{OWNERSHIP_TAG}-{vmid}")
}

/// The calls the VM kinds make or ask the host to read, by method and path template (below
/// `/api2/json`): create, clone, config read and write, pending read, resize, power, delete and
/// the listing, the PCI resource mappings (read only for a VM that names one), the migration
/// and its precondition check, and the guest's own HA resource (`vm:<vmid>`: create, update,
/// remove, migrate through HA). A TemplateVM
/// also marks a VM as a template ([`TEMPLATE_CALL`]). PVE answers the writes with tasks, which
/// the host itself polls: the kind reads no task.
pub const CALLS: &[(Method, &str)] = &[
    (Method::Get, "/cluster/resources"),
    (Method::Get, "/cluster/mapping/pci"),
    (Method::Post, "/nodes/{node}/qemu"),
    (Method::Delete, "/nodes/{node}/qemu/{vmid}"),
    (Method::Get, "/nodes/{node}/qemu/{vmid}/config"),
    (Method::Post, "/nodes/{node}/qemu/{vmid}/config"),
    (Method::Get, "/nodes/{node}/qemu/{vmid}/pending"),
    (Method::Put, "/nodes/{node}/qemu/{vmid}/resize"),
    (Method::Post, "/nodes/{node}/qemu/{vmid}/clone"),
    (Method::Post, "/nodes/{node}/qemu/{vmid}/status/start"),
    (Method::Post, "/nodes/{node}/qemu/{vmid}/status/shutdown"),
    (Method::Post, "/nodes/{node}/qemu/{vmid}/status/stop"),
    (Method::Get, "/nodes/{node}/qemu/{vmid}/migrate"),
    (Method::Post, "/nodes/{node}/qemu/{vmid}/migrate"),
    (Method::Post, "/cluster/ha/resources"),
    (Method::Put, "/cluster/ha/resources/{sid}"),
    (Method::Delete, "/cluster/ha/resources/{sid}"),
    (Method::Post, "/cluster/ha/resources/{sid}/migrate"),
];

/// Marking a VM as a template: only the TemplateVM kind calls it.
pub const TEMPLATE_CALL: (Method, &str) = (Method::Post, "/nodes/{node}/qemu/{vmid}/template");

/// Describe the kind: its calls, the `/cluster/resources` listing, secrets (cloud-init data
/// references SOPS values) and the `devices` capability (raw `hostpciN` passthrough).
pub fn describe(flavour: Flavour) -> KindInfo {
    let mut calls: Vec<(Method, String)> =
        CALLS.iter().map(|(m, p)| (*m, (*p).to_string())).collect();
    if flavour == Flavour::Template {
        calls.push((TEMPLATE_CALL.0, TEMPLATE_CALL.1.to_string()));
    }
    KindInfo {
        calls,
        listings: vec![Listing::cluster_resources()],
        references_kinds: vec![
            "TemplateVM".into(),
            "DiskImage".into(),
            "ISO".into(),
            "Pool".into(),
        ],
        secrets: true,
        capabilities: vec![Capability::Devices],
        ..KindInfo::new(
            flavour.kind(),
            flavour.folder(),
            schema::manifest_schema(flavour),
        )
    }
}

/// The identity of a desired VM: `(node, guest-id, vmid)`.
pub fn identity(d: &Desired) -> ObjectKey {
    ObjectKey {
        node: Some(d.node.clone()),
        space: "guest-id".into(),
        key: d.vmid.to_string(),
        resource_id: Some(format!("qemu/{}", d.vmid)),
    }
}

/// The objects a desired VM names: clone source, disk images, ISO.
pub fn references(d: &Desired) -> Vec<Reference> {
    let mut out = Vec::new();
    if let Some(c) = &d.clone {
        out.push(Reference {
            kind: "TemplateVM".into(),
            name: c.clone(),
            path: "spec.clone".into(),
        });
    }
    for (i, disk) in d.disks.iter().enumerate() {
        if let Some(img) = &disk.image {
            out.push(Reference {
                kind: "DiskImage".into(),
                name: img.clone(),
                path: format!("spec.disks[{i}].image"),
            });
        }
    }
    if let Some(cd) = &d.hardware.cdrom
        && cd.iso != "none"
    {
        out.push(Reference {
            kind: "ISO".into(),
            name: cd.iso.clone(),
            path: "spec.hardware.cdrom.iso".into(),
        });
    }
    if let Some(p) = &d.pool {
        out.push(Reference {
            kind: "Pool".into(),
            name: p.clone(),
            path: POOL_PATH.into(),
        });
    }
    out
}

/// The field of `spec.pool`, which is also its reference's path.
pub const POOL_PATH: &str = "spec.pool";

/// Check resolved references: a clone source must be a TemplateVM on the same node with another
/// vmid; a disk image a DiskImage and a CD/DVD ISO an ISO, each with a storage and file name.
/// `resolved` holds `(reference, target desired JSON)`.
pub fn check_references(
    d: &Desired,
    resolved: &[(Reference, String)],
) -> Vec<proxops_kind_sdk::check::Diag> {
    let mut out = refs::targets(d, resolved).err().unwrap_or_default();
    out.extend(refs::placement_warnings(d, resolved));
    out.extend(refs::password_warnings(d, resolved));
    out
}

/// Whether a live `/cluster/resources` entry belongs to this kind and carries the ownership tag.
pub fn claims(flavour: Flavour, entry: &Value) -> bool {
    let Some(e) = live::Resource::from_value(entry) else {
        return false;
    };
    e.kind == "qemu"
        && e.template == (flavour == Flavour::Template)
        && e.tags.iter().any(|t| t == OWNERSHIP_TAG)
}

/// The reads `plan` needs.
///
/// One read per existing VM, never more:
///
/// * No live entry: nothing to read (`plan` creates or does nothing).
/// * A running VM: `GET .../pending`. On a running guest PVE keeps non-hot-pluggable changes
///   pending and only `/pending` says which; its rows also carry every applied value and the
///   config `digest`, so it replaces the config read. With no manifest (`desired` none) the
///   same read serves a prune (its `protection` row) and adopt (which writes the pending
///   values, so that its first plan does not revert them).
/// * Otherwise `GET .../config?current=1`: the applied config and its `digest`;
///   `/cluster/resources` has neither the config nor the digest the write needs for
///   optimistic concurrency, and PVE has no bulk config endpoint. A stopped VM applies every
///   change at once (no pending state): the config is all a prune or adopt needs.
///
/// * A guest on another node than `spec.node` with `spec.placement: migrate`: also PVE's
///   precondition check of the migration, `GET .../migrate?target=<spec.node>`
///   ([`mod@plan`]'s `migrate`).
///
/// Paths use the LIVE node (where the object is), not the desired one.
pub fn observe(desired: Option<&Desired>, entry: Option<&Value>) -> Vec<Call> {
    reads(
        desired.is_some_and(Desired::maps_pci),
        desired.and_then(Desired::migrate_to),
        entry.and_then(live::Resource::from_value),
    )
}

/// [`observe`] from the texts the host sends, reading only what it needs of them: whether
/// the desired state maps a PCI device, and the listing entry's guest fields. A full read of
/// both was half the cost of the call, once per VM and cycle (`proxops-bench`, section 5).
/// A text that does not read counts as absent, as in `observe`.
pub fn observe_text(desired: Option<&str>, entry: Option<&str>) -> Vec<Call> {
    let view = desired.and_then(|d| serde_json::from_str::<desired::ObserveView>(d).ok());
    reads(
        view.as_ref().is_some_and(|v| v.maps_pci()),
        view.as_ref().and_then(|v| v.migrate_to()),
        entry.and_then(|e| live::Resource::from_json(e).ok().flatten()),
    )
}

fn reads(maps_pci: bool, migrate_to: Option<&str>, entry: Option<live::Resource>) -> Vec<Call> {
    // A PCI resource mapping that does not exist on the node is known before anything is
    // written or stopped: one read per cluster, shared by every VM that names a mapping.
    let mut calls = Vec::new();
    if maps_pci {
        calls.push(Call::new(Method::Get, plan::PCI_MAPPINGS));
    }
    // Only a qemu guest has a qemu config: a container's entry (adopt asks every guest kind
    // about every guest) reads nothing.
    let Some(e) = entry.filter(|e| e.kind == "qemu") else {
        return calls;
    };
    let base = format!("/nodes/{}/qemu/{}", e.node, e.vmid);
    calls.push(if e.running {
        Call::new(Method::Get, format!("{base}/pending"))
    } else {
        Call::new(Method::Get, format!("{base}/config")).param("current", "1")
    });
    // A guest elsewhere than `spec.node` with `placement: migrate`: PVE's precondition
    // check of the migration (only then: a converged plan reads nothing more).
    if let Some(target) = migrate_to.filter(|t| *t != e.node) {
        calls.push(plan::precondition_call(&e.node, e.vmid, target));
    }
    calls
}

#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod validate_tests;
