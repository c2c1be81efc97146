//! Shared logic of the VM and TemplateVM kinds: validation, JSON Schema, identity, ownership,
//! observation and planning, as plain Rust functions over plain types (usable natively, e.g. by
//! benchmarks), plus a thin [`glue`] layer in WIT types that the `vm` and `templatevm` crates
//! export with a [`Flavour`].
//!
//! Planned here: fresh creates, provisioning from a TemplateVM (`spec.clone`: one full clone,
//! then the VM's own configuration through the normal update path, see [`mod@plan`]), cloud-init
//! data with its SOPS references ([`cloudinit`], [`secrets`]), image-seeded disks
//! (`import-from`), the CD/DVD drive (`none` or an attached ISO) and the cloud-init drive. The
//! targets of references come from the host's `resolved` list ([`refs`]). Not implemented:
//! `adopt`.

pub mod cloudinit;
pub mod desired;
pub mod glue;
pub mod keys;
pub mod live;
pub mod plan;
pub mod refs;
pub mod schema;
pub mod secrets;
pub mod syntax;
pub mod validate;
pub mod wire;

pub use desired::{Desired, Flavour, PowerState};
pub use plan::plan;
pub use secrets::{HostSecrets, MapSecrets, NoSecrets, Secret, SecretError, Secrets};
pub use validate::{Validated, validate, validate_json};

use proxops_kind_sdk::manifest::API_VERSION;
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

/// API path templates this kind calls (below `/api2/json`).
pub const API_PATHS: &[&str] = &[
    "/nodes/{node}/qemu",
    "/nodes/{node}/qemu/{vmid}",
    "/nodes/{node}/qemu/{vmid}/config",
    "/nodes/{node}/qemu/{vmid}/pending",
    "/nodes/{node}/qemu/{vmid}/resize",
    "/nodes/{node}/qemu/{vmid}/template",
    "/nodes/{node}/qemu/{vmid}/clone",
    "/nodes/{node}/qemu/{vmid}/status/start",
    "/nodes/{node}/qemu/{vmid}/status/shutdown",
    "/nodes/{node}/qemu/{vmid}/status/stop",
];

/// Static facts about a kind (the plain form of WIT `kind-info`).
#[derive(Debug, Clone, PartialEq)]
pub struct KindInfo {
    /// `kind:` value.
    pub kind: String,
    /// `apiVersion:` value.
    pub api_version: String,
    /// Repository folder.
    pub folder: String,
    /// JSON Schema of the manifest.
    pub schema: Value,
    /// API path templates.
    pub api_paths: Vec<String>,
    /// Kinds this kind may reference.
    pub references_kinds: Vec<String>,
}

/// Describe the kind.
pub fn describe(flavour: Flavour) -> KindInfo {
    KindInfo {
        kind: flavour.kind().into(),
        api_version: API_VERSION.into(),
        folder: flavour.folder().into(),
        schema: schema::manifest_schema(flavour),
        api_paths: API_PATHS.iter().map(|s| s.to_string()).collect(),
        references_kinds: vec!["TemplateVM".into(), "DiskImage".into(), "ISO".into()],
    }
}

/// Where an object lives (plain form of WIT `object-key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectKey {
    /// PVE node.
    pub node: Option<String>,
    /// Collision domain.
    pub space: String,
    /// Key within the space.
    pub key: String,
    /// `/cluster/resources` id.
    pub resource_id: Option<String>,
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

/// A reference to another object (plain form of WIT `reference`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// Target kind.
    pub kind: String,
    /// Target `metadata.name`.
    pub name: String,
    /// Field holding the reference.
    pub path: String,
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
    out
}

/// Check resolved references: a clone source must be a TemplateVM on the same node with another
/// vmid; a disk image a DiskImage and a CD/DVD ISO an ISO, each with a storage and file name.
/// `resolved` holds `(reference, target desired JSON)`.
pub fn check_references(
    d: &Desired,
    resolved: &[(Reference, String)],
) -> Vec<proxops_kind_sdk::check::Diag> {
    let mut out = refs::targets(d, resolved).err().unwrap_or_default();
    out.extend(refs::placement_warnings(d, resolved));
    out
}

/// Whether a live `/cluster/resources` entry belongs to this kind and carries the ownership tag.
pub fn claims(flavour: Flavour, entry: &str) -> bool {
    let Ok(Some(e)) = live::Resource::from_json(entry) else {
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
/// * A running VM with a manifest: `GET .../pending`. On a running guest PVE keeps
///   non-hot-pluggable changes pending and only `/pending` says which; its rows also carry
///   every applied value and the config `digest`, so it replaces the config read.
/// * Otherwise `GET .../config?current=1`: the applied config and its `digest`;
///   `/cluster/resources` has neither the config nor the digest the write needs for
///   optimistic concurrency, and PVE has no bulk config endpoint. A stopped VM applies every
///   change at once (no pending state), and a prune needs only the `protection` flag.
///
/// Paths use the LIVE node (where the object is), not the desired one.
pub fn observe(desired: Option<&Desired>, entry: Option<&str>) -> Vec<Call> {
    let Some(e) = entry.and_then(|text| live::Resource::from_json(text).ok().flatten()) else {
        return Vec::new();
    };
    let base = format!("/nodes/{}/qemu/{}", e.node, e.vmid);
    if desired.is_some() && e.running {
        vec![Call::new(Method::Get, format!("{base}/pending"))]
    } else {
        vec![Call::new(Method::Get, format!("{base}/config")).param("current", "1")]
    }
}

#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod validate_tests;
