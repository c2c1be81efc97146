//! The targets of a VM's references, read from the desired states the host resolved: the clone
//! source's vmid (`spec.clone` -> TemplateVM), the import volume of an image-seeded disk
//! (`spec.disks[i].image` -> DiskImage) and the ISO volume of the CD/DVD drive
//! (`spec.hardware.cdrom.iso` -> ISO).
//!
//! `check_references` and `plan` read the targets with the same functions, so a target that
//! passed the first cannot surprise the second; `plan` still fails closed if a target is
//! missing or unreadable.

use std::collections::BTreeMap;

use proxops_kind_sdk::check::Diag;
use serde_json::Value;

use crate::Reference;
use crate::desired::Desired;

/// Resolved targets of one VM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targets {
    /// vmid of the clone source.
    pub clone_vmid: Option<u32>,
    /// Import source (`<storage>:import/<file>`) per disk index.
    pub images: BTreeMap<usize, String>,
    /// ISO volume (`<storage>:iso/<file>`).
    pub iso: Option<String>,
}

fn target_json(r: &Reference, desired: &str) -> Result<Value, Diag> {
    serde_json::from_str::<Value>(desired)
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| {
            Diag::error(
                &r.path,
                format!(
                    "the desired state of {} `{}` could not be read",
                    r.kind, r.name
                ),
            )
        })
}

/// The clone source's vmid, checked against the VM (a TemplateVM, same node, other vmid).
pub fn clone_source(d: &Desired, r: &Reference, desired: &str) -> Result<u32, Diag> {
    if r.kind != "TemplateVM" {
        return Err(Diag::error(
            &r.path,
            format!("`{}` is a {}, not a TemplateVM", r.name, r.kind),
        ));
    }
    let t = target_json(r, desired)?;
    if let Some(kind) = t.get("kind").and_then(Value::as_str)
        && kind != "TemplateVM"
    {
        return Err(Diag::error(
            &r.path,
            format!("`{}` is a {kind}, not a TemplateVM", r.name),
        ));
    }
    if let Some(node) = t.get("node").and_then(Value::as_str)
        && node != d.node
    {
        return Err(Diag::error(
            &r.path,
            format!(
                "TemplateVM `{}` is on node {node}, this VM on {}; a clone source must be on the same node",
                r.name, d.node
            ),
        ));
    }
    let vmid = t
        .get("vmid")
        .and_then(Value::as_u64)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| {
            Diag::error(
                &r.path,
                format!("the desired state of TemplateVM `{}` has no vmid", r.name),
            )
        })?;
    if vmid == d.vmid {
        return Err(Diag::error(
            &r.path,
            format!(
                "TemplateVM `{}` has this VM's own vmid {}; a VM cannot clone onto itself",
                r.name, d.vmid
            ),
        ));
    }
    Ok(vmid)
}

/// The volume of a download target (`<storage>:<content>/<filename>`), checked to be of the
/// expected kind and content.
pub fn download_volume(
    r: &Reference,
    desired: &str,
    kind: &str,
    content: &str,
) -> Result<String, Diag> {
    if r.kind != kind {
        return Err(Diag::error(
            &r.path,
            format!(
                "`{}` is a {}, not a{} {kind}",
                r.name,
                r.kind,
                if kind == "ISO" { "n" } else { "" }
            ),
        ));
    }
    let t = target_json(r, desired)?;
    if let Some(c) = t.get("content").and_then(Value::as_str)
        && c != content
    {
        return Err(Diag::error(
            &r.path,
            format!("{kind} `{}` has content {c}, expected {content}", r.name),
        ));
    }
    let field = |k: &str| t.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    match (field("storage"), field("filename")) {
        (Some(s), Some(f)) => Ok(format!("{s}:{content}/{f}")),
        _ => Err(Diag::error(
            &r.path,
            format!(
                "the desired state of {kind} `{}` has no storage or file name",
                r.name
            ),
        )),
    }
}

/// Read every target of `d` from `resolved`; a reference without a target is an error (the
/// host reports unknown names itself; this guards the kind against a partial list).
pub fn targets(d: &Desired, resolved: &[(Reference, String)]) -> Result<Targets, Vec<Diag>> {
    let mut out = Targets::default();
    let mut errors = Vec::new();
    for want in crate::references(d) {
        let Some((r, desired)) = resolved.iter().find(|(r, _)| r.path == want.path) else {
            errors.push(Diag::error(
                &want.path,
                format!("no {} named `{}` in this cluster", want.kind, want.name),
            ));
            continue;
        };
        let got = if want.path == "spec.clone" {
            clone_source(d, r, desired).map(|v| out.clone_vmid = Some(v))
        } else if want.path == crate::POOL_PATH {
            // The pool only orders the guest after it; nothing of it is read.
            if r.kind == "Pool" {
                Ok(())
            } else {
                Err(Diag::error(
                    &r.path,
                    format!("`{}` is a {}, not a Pool", r.name, r.kind),
                ))
            }
        } else if want.path == "spec.hardware.cdrom.iso" {
            download_volume(r, desired, "ISO", "iso").map(|v| out.iso = Some(v))
        } else {
            let i = d
                .disks
                .iter()
                .enumerate()
                .find(|(i, _)| format!("spec.disks[{i}].image") == want.path)
                .map(|(i, _)| i)
                .unwrap_or_default();
            download_volume(r, desired, "DiskImage", "import").map(|v| {
                out.images.insert(i, v);
            })
        };
        if let Err(e) = got {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// A clone inherits its template's `cipassword`, and proxops writes `cipassword` only where
/// none is set: when the TemplateVM declares a `ci-password-ref` (so the template carries a
/// password) and the clone declares another one, the clone's has no effect. A warning, so
/// that nobody believes the clone's SOPS password is set.
pub fn password_warnings(d: &Desired, resolved: &[(Reference, String)]) -> Vec<Diag> {
    const FIELD: &str = "spec.cloud-init-data.ci-password-ref";
    let Some(own) = d
        .cloud_init_data
        .as_ref()
        .and_then(|c| c.ci_password_ref.as_deref())
    else {
        return Vec::new();
    };
    resolved
        .iter()
        .filter(|(r, _)| r.path == "spec.clone")
        .filter_map(|(r, desired)| {
            let t: Value = serde_json::from_str(desired).ok()?;
            let theirs = t.pointer("/cloud-init-data/ci-password-ref")?.as_str()?;
            (theirs != own).then(|| {
                Diag::warning(
                    FIELD,
                    format!(
                        "TemplateVM `{}` sets its cipassword from `{theirs}`, and a clone inherits it; proxops writes cipassword only where none is set, so `{own}` has no effect on this VM (its password is the template's). Use `{theirs}` here, or drop ci-password-ref from the template",
                        r.name
                    ),
                )
            })
        })
        .collect()
}

/// A warning for each ISO or DiskImage whose explicit `spec.nodes` leaves out this VM's node.
/// Only a warning: on shared storage one file serves every node, and only the plan, which
/// reads the storage's `shared` flag, can tell; it blocks the VM when the file is not there.
pub fn placement_warnings(d: &Desired, resolved: &[(Reference, String)]) -> Vec<Diag> {
    resolved
        .iter()
        .filter(|(r, _)| r.kind == "ISO" || r.kind == "DiskImage")
        .filter_map(|(r, desired)| {
            let t: Value = serde_json::from_str(desired).ok()?;
            let nodes: Vec<&str> = t
                .get("nodes")?
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .collect();
            (!nodes.is_empty() && !nodes.contains(&d.node.as_str())).then(|| {
                Diag::warning(
                    &r.path,
                    format!(
                        "{} `{}` is placed on {} only (its spec.nodes), but this VM is on {}: unless its storage is shared, the plan blocks this VM; add {} to its spec.nodes",
                        r.kind,
                        r.name,
                        nodes.join(", "),
                        d.node,
                        d.node
                    ),
                )
            })
        })
        .collect()
}
