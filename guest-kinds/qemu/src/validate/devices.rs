//! Validating the devices: disks and their storage, NICs, hardware (sockets, NUMA, machine, BIOS, display, serial, the cloud-init and CD/DVD drives, EFI disk, TPM) and PCI passthrough.

use std::collections::BTreeMap;

use proxops_kind_sdk::check::{Checker, index, join};
use proxops_kind_sdk::manifest;
use proxops_kind_sdk::size::{self, GIB};
use serde_json::Value;

use super::Obj;
use crate::desired::*;
use crate::keys::*;
use crate::syntax;

fn check_storage(c: &mut Checker, obj: &Obj, path: &str, key: &str) -> Option<String> {
    let s = c.string(obj, path, key, true)?;
    if !proxops_names::is_storage_id(&s) {
        c.error(
            join(path, key),
            format!("`{s}` is not a PVE storage id (lower-case letters, digits, `-`, `_`, `.`)"),
        );
        return None;
    }
    Some(s)
}

pub(super) fn check_disks(
    c: &mut Checker,
    spec: &Obj,
    has_clone: bool,
    ci_enabled: bool,
    hardware: Option<&Obj>,
) -> (Vec<Disk>, Option<String>) {
    let items = c.array(spec, "spec", "disks", false);
    let items: &[Value] = items.map(Vec::as_slice).unwrap_or(&[]);
    if has_clone {
        if !items.is_empty() {
            c.error(
                "spec.disks",
                "must be empty when spec.clone is set: a clone inherits the template's disk layout",
            );
        }
        return (Vec::new(), None);
    }
    if items.is_empty() {
        c.error(
            "spec.disks",
            "needs at least one disk (or spec.clone to clone a TemplateVM)",
        );
        return (Vec::new(), None);
    }
    // Slots already taken by the cloud-init drive and the CD/DVD drive.
    let mut taken: BTreeMap<String, String> = BTreeMap::new();
    if ci_enabled {
        taken.insert("ide2".into(), "spec.hardware.cloud-init".into());
    }
    if hardware.is_some_and(|h| h.get("cdrom").is_some_and(|v| !v.is_null())) {
        taken.insert(
            Desired::cdrom_slot(ci_enabled).into(),
            "spec.hardware.cdrom".into(),
        );
    }
    let mut disks = Vec::new();
    let mut scsihw: Option<(String, String)> = None;
    for (i, item) in items.iter().enumerate() {
        let p = index("spec.disks", i);
        let Some(d) = c.object(item, &p, DISK_KEYS) else {
            continue;
        };
        let storage = check_storage(c, d, &p, "storage");
        let image = c.string(d, &p, "image", false);
        if let Some(img) = &image
            && let Some(problem) = manifest::dns_label_problem(img)
        {
            c.error(
                join(&p, "image"),
                format!("must name a DiskImage by its metadata.name: {problem}"),
            );
        }
        let size_gib = if image.is_some() {
            if d.get("size").is_some_and(|v| !v.is_null()) {
                c.error(join(&p, "size"), "must be empty when image is set (an imported disk takes its size from the image)");
            }
            None
        } else {
            match c.size(d, &p, "size", true) {
                Some(0) => {
                    c.error(join(&p, "size"), "must be at least 1GiB");
                    None
                }
                Some(b) if b % GIB != 0 => {
                    c.error(
                        join(&p, "size"),
                        format!(
                            "must be a whole number of GiB (PVE allocates disks in GiB), got {}",
                            size::format_human(b)
                        ),
                    );
                    None
                }
                Some(b) => Some(b / GIB),
                None => None,
            }
        };
        let slot = match c.string(d, &p, "interface", false) {
            Some(s) => match syntax::disk_slot_problem(&s) {
                Some(problem) => {
                    c.error(join(&p, "interface"), problem);
                    None
                }
                None => Some(s),
            },
            None => Some(format!("scsi{i}")),
        };
        let bus = slot
            .as_deref()
            .and_then(syntax::split_slot)
            .map(|(b, _)| b.to_string());
        if let Some(s) = &slot {
            let at = if d.contains_key("interface") {
                join(&p, "interface")
            } else {
                p.clone()
            };
            match taken.get(s) {
                Some(other) => c.error(at, format!("slot {s} is already used by {other}")),
                None => {
                    taken.insert(s.clone(), p.clone());
                }
            }
        }
        let controller = c.enumeration(d, &p, "controller", false, SCSIHW);
        if let Some(ctrl) = controller {
            match &scsihw {
                None => scsihw = Some((ctrl, p.clone())),
                Some((first, at)) if *first != ctrl => c.warn(
                    join(&p, "controller"),
                    format!("ignored: the VM-wide controller is `{first}`, set by {at} (the first disk declaring it wins)"),
                ),
                Some(_) => {}
            }
        }
        let iothread = c.boolean(d, &p, "iothread", false);
        if iothread.is_some() && matches!(bus.as_deref(), Some("ide" | "sata")) {
            c.error(
                join(&p, "iothread"),
                format!(
                    "is not supported on {} disks; PVE accepts iothread on scsi and virtio only",
                    bus.as_deref().unwrap_or_default()
                ),
            );
        }
        let discard = c.enumeration(d, &p, "discard", false, &["ignore", "on"]);
        let ssd = c.boolean(d, &p, "ssd", false);
        if ssd.is_some() && bus.as_deref() == Some("virtio") {
            c.error(
                join(&p, "ssd"),
                "is not supported on virtio disks: PVE 9.2 rejects ssd= on virtio/nvme; use a scsi, sata or ide slot or remove ssd",
            );
        }
        let aio = c.enumeration(d, &p, "aio", false, &["native", "threads", "io_uring"]);
        if let (Some(storage), Some(slot)) = (storage, slot) {
            disks.push(Disk {
                slot,
                storage,
                size_gib,
                image,
                iothread,
                discard,
                ssd,
                aio,
            });
        }
    }
    (disks, scsihw.map(|(s, _)| s))
}

pub(super) fn check_networks(c: &mut Checker, spec: &Obj) -> Vec<Nic> {
    let Some(items) = c.array(spec, "spec", "networks", true) else {
        return Vec::new();
    };
    if items.is_empty() {
        c.error("spec.networks", "needs at least one network interface");
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut used: BTreeMap<u32, String> = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let p = index("spec.networks", i);
        let Some(n) = c.object(item, &p, NIC_KEYS) else {
            continue;
        };
        let model = if n.get("model").is_some_and(|v| !v.is_null()) {
            c.enumeration(n, &p, "model", false, NIC_MODELS)
        } else {
            Some("virtio".to_string())
        };
        let bridge = c.string(n, &p, "bridge", true);
        if let Some(b) = &bridge
            && !syntax::is_bridge(b)
        {
            c.error(
                join(&p, "bridge"),
                format!("`{b}` is not a PVE bridge name (letters, digits, `-`, `_`, `.`)"),
            );
        }
        let mac = c.string(n, &p, "mac", false).and_then(|m| {
            if syntax::is_unicast_mac(&m) {
                Some(m.to_ascii_uppercase())
            } else {
                c.error(join(&p, "mac"), format!("`{m}` is not a unicast MAC address; expected six hex pairs like BC:24:11:AA:BB:CC with an even first octet"));
                None
            }
        });
        let vlan = c.int(n, &p, "vlan", false, 1, 4094).map(|v| v as u16);
        let rate_limit = c.number(n, &p, "rate-limit", 0.0);
        let firewall = c.boolean(n, &p, "firewall", false);
        let slot = match n.get("slot") {
            None | Some(Value::Null) => Some(i as u32),
            Some(Value::String(s)) => match syntax::split_slot(s) {
                Some(("net", k)) if k <= 31 => Some(k),
                _ => {
                    c.error(
                        join(&p, "slot"),
                        format!("`{s}` is not a NIC slot; expected net0 to net31 (or 0 to 31)"),
                    );
                    None
                }
            },
            Some(_) => c.int(n, &p, "slot", false, 0, 31).map(|v| v as u32),
        };
        if let Some(s) = slot {
            match used.get(&s) {
                Some(other) => c.error(
                    if n.contains_key("slot") {
                        join(&p, "slot")
                    } else {
                        p.clone()
                    },
                    format!("slot net{s} is already used by {other}"),
                ),
                None => {
                    used.insert(s, p.clone());
                }
            }
        }
        if let (Some(model), Some(bridge), Some(slot)) = (model, bridge, slot) {
            out.push(Nic {
                slot,
                model,
                bridge,
                mac,
                vlan,
                rate_limit,
                firewall,
            });
        }
    }
    out
}

pub(super) fn check_hardware(c: &mut Checker, hw: &Obj) -> Hardware {
    let p = "spec.hardware";
    let machine = c.enumeration(hw, p, "machine", false, &["i440fx", "q35"]);
    let bios = c.enumeration(hw, p, "bios", false, &["seabios", "ovmf"]);
    let display = c.enumeration(hw, p, "display", false, VGA_TYPES);
    let ovmf = bios.as_deref() == Some("ovmf");
    let q35 = machine.as_deref() == Some("q35");

    let mut cloud_init = None;
    if let Some(ci) = c.object_field(hw, p, "cloud-init", false, CI_DRIVE_KEYS) {
        let cp = "spec.hardware.cloud-init";
        let enabled = c.boolean(ci, cp, "enabled", true);
        if enabled == Some(true) {
            cloud_init =
                check_storage(c, ci, cp, "storage").map(|storage| CloudInitDrive { storage });
        } else if ci.contains_key("storage") {
            let _ = c.string(ci, cp, "storage", false);
        }
    }
    let cdrom = c.object_field(hw, p, "cdrom", false, CDROM_KEYS).map(|cd| {
        let cp = "spec.hardware.cdrom";
        let iso = c
            .string(cd, cp, "iso", false)
            .unwrap_or_else(|| "none".to_string());
        if iso != "none"
            && let Some(problem) = manifest::dns_label_problem(&iso)
        {
            c.error(
                join(cp, "iso"),
                format!("must be `none` or an ISO metadata.name: {problem}"),
            );
        }
        let media = c
            .enumeration(cd, cp, "media", false, &["cdrom", "disk"])
            .unwrap_or_else(|| "cdrom".into());
        if iso != "none" && media != "cdrom" {
            c.error(
                join(cp, "media"),
                "must be `cdrom` when an ISO is attached (PVE requires media=cdrom for iso volumes)",
            );
        }
        Cdrom {
            slot: Desired::cdrom_slot(cloud_init.is_some()).to_string(),
            iso,
            media,
        }
    });
    let efi_disk = c
        .object_field(hw, p, "efi-disk", false, EFI_KEYS)
        .and_then(|e| {
            let ep = "spec.hardware.efi-disk";
            if !ovmf {
                c.error(
                    ep,
                    "requires spec.hardware.bios: ovmf (an EFI vars disk is only used by OVMF)",
                );
            }
            let storage = check_storage(c, e, ep, "storage");
            if let Some(b) = c.size(e, ep, "size", false)
                && b % (4 * 1024) != 0
            {
                c.error(join(ep, "size"), "must be a whole number of KiB");
            }
            let template = match c.string(e, ep, "template", false) {
                Some(t) if t == "2m" || t == "4m" => Some(t),
                Some(t) if t == "byos" || t == "8m" => {
                    c.error(
                        join(ep, "template"),
                        format!(
                            "`{t}` is not accepted by PVE 9.2 (efitype is `2m` or `4m`); use `4m`"
                        ),
                    );
                    None
                }
                Some(t) => {
                    c.error(
                        join(ep, "template"),
                        format!("must be one of `2m`, `4m`, got `{t}`"),
                    );
                    None
                }
                None => None,
            };
            let secure_boot = c
                .enumeration(e, ep, "secure-boot", false, &["enabled", "disabled"])
                .map(|s| s == "enabled");
            if secure_boot == Some(true) && template.as_deref() == Some("2m") {
                c.error(
                    join(ep, "secure-boot"),
                    "needs template `4m` (PVE's 2m EFI vars cannot hold enrolled keys)",
                );
            }
            Some(EfiDisk {
                storage: storage?,
                template,
                secure_boot,
            })
        });
    let tpm = c.object_field(hw, p, "tpm", false, TPM_KEYS).and_then(|t| {
        let tp = "spec.hardware.tpm";
        if !(ovmf && q35) {
            c.error(
                tp,
                "requires spec.hardware.bios: ovmf and spec.hardware.machine: q35",
            );
        }
        let storage = check_storage(c, t, tp, "storage");
        let version = c
            .enumeration(t, tp, "version", false, &["v1.2", "v2.0"])
            .unwrap_or_else(|| "v2.0".into());
        Some(Tpm {
            storage: storage?,
            version,
        })
    });
    let serial0 = c.string(hw, p, "serial0", false).and_then(|s| {
        if s == "socket" || (s.starts_with("/dev/") && s.len() > 5) {
            Some(s)
        } else {
            c.error(
                join(p, "serial0"),
                format!("must be `socket` or a host device path such as /dev/ttyS0, got `{s}`"),
            );
            None
        }
    });
    let sockets = c.int(hw, p, "sockets", false, 1, 64).map(|v| v as u32);
    let numa = c.boolean(hw, p, "numa", false);
    let pci_devices = check_pci(c, hw, q35);
    Hardware {
        machine,
        bios,
        display,
        cdrom,
        efi_disk,
        cloud_init,
        tpm,
        serial0,
        sockets,
        numa,
        pci_devices,
    }
}

fn check_pci(c: &mut Checker, hw: &Obj, q35: bool) -> Vec<PciDevice> {
    let Some(items) = c.array(hw, "spec.hardware", "pci-devices", false) else {
        return Vec::new();
    };
    let mut out: Vec<PciDevice> = Vec::new();
    let mut used: BTreeMap<u32, String> = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let p = index("spec.hardware.pci-devices", i);
        let Some(d) = c.object(item, &p, PCI_KEYS) else {
            continue;
        };
        let slot = c.int(d, &p, "slot", true, 0, 999).map(|v| v as u32);
        if let Some(s) = slot {
            if let Some(other) = used.get(&s) {
                c.error(
                    join(&p, "slot"),
                    format!("slot hostpci{s} is already used by {other}"),
                );
            } else {
                used.insert(s, p.clone());
                if s > 15 {
                    c.warn(join(&p, "slot"), format!("PVE 9.2 accepts hostpci0 to hostpci15; writing hostpci{s} will be refused"));
                }
            }
        }
        let mapping = c.string(d, &p, "mapping", false);
        if let Some(m) = &mapping
            && !syntax::is_mapping_id(m)
        {
            c.error(join(&p, "mapping"), format!("`{m}` is not a PVE resource mapping id; use letters, digits, `-` and `_`, starting with a letter"));
        }
        let has_device = d.contains_key("device");
        if has_device == mapping.is_some() {
            c.error(
                p.clone(),
                "give exactly one of `device` (a raw host PCI address; PVE lets only root@pam write it) or `mapping` (a PVE resource mapping, usable with an API token that has Mapping.Use)",
            );
        }
        let device = c.string(d, &p, "device", false).and_then(|dev| {
            let lower = dev.to_ascii_lowercase();
            if syntax::is_pci_bdf(&lower) {
                Some(lower)
            } else {
                c.error(join(&p, "device"), format!("`{dev}` is not a PCI address; expected domain:bus:slot[.func] such as 0000:01:00.0"));
                None
            }
        });
        let pcie = c.boolean(d, &p, "pcie", false);
        if pcie == Some(true) && !q35 {
            c.warn(
                join(&p, "pcie"),
                "pcie=1 needs spec.hardware.machine: q35; PVE ignores it on i440fx",
            );
        }
        if let Some(slot) = slot
            && (device.is_some() != mapping.is_some())
        {
            out.push(PciDevice {
                slot,
                device,
                mapping,
                pcie,
            });
        }
    }
    out.sort_by_key(|d| d.slot);
    out
}
