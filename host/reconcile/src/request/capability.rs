//! The capabilities a guest write's parameters use, read as PVE parses them.

use std::borrow::Cow;

use proxops_core::grant::Capability;
use proxops_runtime::kind::{Method, Param};

use super::target::{GuestType, Target};
use super::{Refusal, Rule, shown};

/// PVE's property string: `default,key=value,…` as `(key, value)` pairs, the first bare part
/// under `default_key`. `Err` for a key given twice (two spellings of one setting).
fn property_string<'v>(
    value: &'v str,
    default_key: &'static str,
) -> Result<Vec<(Cow<'v, str>, &'v str)>, String> {
    let mut out: Vec<(Cow<'v, str>, &'v str)> = Vec::new();
    for (i, part) in value.split(',').enumerate() {
        let (key, v) = match part.split_once('=') {
            Some((k, v)) => (Cow::Owned(k.trim().to_ascii_lowercase()), v),
            None if i == 0 => (Cow::Borrowed(default_key), part),
            None => (Cow::Owned(part.trim().to_ascii_lowercase()), ""),
        };
        if out.iter().any(|(k, _)| *k == key) {
            return Err(format!("gives `{key}` twice"));
        }
        out.push((key, v));
    }
    Ok(out)
}

fn numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn is_disk_slot(name: &str) -> bool {
    ["ide", "sata", "scsi", "virtio", "unused"]
        .iter()
        .any(|p| numbered(name, p))
        || name == "efidisk0"
        || name == "tpmstate0"
}

/// Whether PVE reads the parameter `name` (any case) as host access of a guest: a mount point,
/// a device, a disk slot (which may name a `/dev` path), a raw key, features, privilege or a
/// hook script. [`capabilities_used`] judges these by their value.
pub fn carries_host_access(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let name = name.as_str();
    name.contains('.')
        || matches!(
            name,
            "args" | "hookscript" | "unprivileged" | "features" | "rootfs"
        )
        || ["mp", "dev", "hostpci", "usb", "parallel", "serial"]
            .iter()
            .any(|p| numbered(name, p))
        || is_disk_slot(name)
}

/// The capabilities a write's parameters use, read as PVE parses them; a parameter the host
/// cannot classify (raw QEMU `args`, raw `lxc.*` keys, a path it does not know) is refused.
pub fn capabilities_used(
    method: Method,
    target: &Target,
    params: &[Param],
) -> Result<Vec<Capability>, Refusal> {
    let mut used = Vec::new();
    let mut add = |c| {
        if !used.contains(&c) {
            used.push(c);
        }
    };
    let refuse = |name: &str, why: String| {
        Refusal::new(Rule::Capability, format!("the parameter `{name}` {why}"))
    };
    let guest_kind = match target {
        Target::Guest { kind, .. } | Target::NewGuest { kind, .. } => Some(*kind),
        _ => None,
    };
    let creates_container = matches!(
        target,
        Target::NewGuest {
            kind: GuestType::Lxc,
            ..
        }
    ) && method == Method::Post;
    if creates_container {
        // PVE creates a privileged container unless told `unprivileged=1`.
        let unprivileged = params
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case("unprivileged"))
            .map(|p| p.value.as_str());
        if unprivileged != Some("1") {
            add(Capability::Privileged);
        }
    }
    for p in params {
        let name = p.name.to_ascii_lowercase();
        let name = name.as_str();
        let value = p.value.as_str();
        if name.contains('.') {
            return Err(refuse(
                name,
                "is a raw configuration key; proxops never sends one for a third-party kind".into(),
            ));
        }
        match name {
            "args" => {
                return Err(refuse(
                    name,
                    "passes raw arguments to QEMU; proxops never sends it for a third-party kind"
                        .into(),
                ));
            }
            "hookscript" => add(Capability::Hookscript),
            "unprivileged" if !creates_container => add(Capability::Privileged),
            "delete" | "revert" => {
                for key in value.split([',', ';', ' ']).filter(|k| !k.is_empty()) {
                    let key = key.trim().to_ascii_lowercase();
                    if key == "unprivileged" {
                        add(Capability::Privileged);
                    }
                    if key.contains('.') || key == "args" {
                        return Err(refuse(name, format!("names the raw key {}", shown(&key))));
                    }
                }
            }
            "features" if guest_kind == Some(GuestType::Lxc) => {
                let parts = property_string(value, "nesting").map_err(|why| refuse(name, why))?;
                if parts.iter().any(|(k, _)| k != "nesting") {
                    add(Capability::Privileged);
                }
            }
            "rootfs" => mount_point(name, value, &mut add)?,
            _ if numbered(name, "mp") => mount_point(name, value, &mut add)?,
            _ if numbered(name, "dev")
                || numbered(name, "hostpci")
                || numbered(name, "usb")
                || numbered(name, "parallel") =>
            {
                add(Capability::Devices)
            }
            _ if numbered(name, "serial") && value.trim() != "socket" => add(Capability::Devices),
            _ if numbered(name, "serial") => {}
            _ if guest_kind == Some(GuestType::Qemu) && is_disk_slot(name) => {
                let parts = property_string(value, "file").map_err(|why| refuse(name, why))?;
                for (k, v) in &parts {
                    if matches!(k.as_ref(), "file" | "import-from" | "volume")
                        && v.trim_start().starts_with('/')
                    {
                        add(Capability::Devices);
                    }
                }
            }
            _ if guest_kind.is_some() && value.trim_start().starts_with('/') => {
                return Err(refuse(
                    name,
                    format!(
                        "carries the path {}, which the host cannot classify",
                        shown(value)
                    ),
                ));
            }
            _ => {}
        }
    }
    Ok(used)
}

/// `rootfs`/`mpN`: the volume (the first bare part or `volume=`; one spelling only) is a
/// storage volume, or a host path: a bind mount (a device under `/dev`).
fn mount_point(name: &str, value: &str, add: &mut impl FnMut(Capability)) -> Result<(), Refusal> {
    let refuse =
        |why: String| Refusal::new(Rule::Capability, format!("the parameter `{name}` {why}"));
    let parts = property_string(value, "volume").map_err(refuse)?;
    let volume = parts
        .iter()
        .find(|(k, _)| k == "volume")
        .map(|(_, v)| v.trim())
        .unwrap_or_default();
    if volume.starts_with('/') {
        add(Capability::BindMounts);
        if volume.starts_with("/dev") {
            add(Capability::Devices);
        }
    } else if !volume.contains(':') {
        return Err(refuse(format!(
            "mounts {}, which is neither a storage volume nor a host path",
            shown(volume)
        )));
    }
    Ok(())
}
