//! `validate`: a VM or TemplateVM manifest (JSON) to its normalised [`Desired`] state, failing
//! closed on every rule of the spec with file-independent field paths.

use std::collections::{BTreeMap, BTreeSet};

use proxops_kind_sdk::check::{Checker, Diag, choices, index, join, type_name};
use proxops_kind_sdk::manifest;
use proxops_kind_sdk::sets;
use proxops_kind_sdk::size::{self, GIB};
use serde_json::{Map, Value};

use crate::cloudinit;
use crate::desired::*;
use crate::keys::*;
use crate::secrets::Secrets;
use crate::syntax;

type Obj = Map<String, Value>;

/// The successful result: desired state and warnings.
#[derive(Debug, Clone, PartialEq)]
pub struct Validated {
    /// Normalised desired state.
    pub desired: Desired,
    /// Non-fatal findings.
    pub warnings: Vec<Diag>,
}

/// Validate a manifest given as JSON text.
pub fn validate_json(
    flavour: Flavour,
    manifest: &str,
    secrets: &dyn Secrets,
) -> Result<Validated, Vec<Diag>> {
    match serde_json::from_str::<Value>(manifest) {
        Ok(v) => validate(flavour, &v, secrets),
        Err(e) => Err(vec![Diag::error(
            "",
            format!("manifest is not valid JSON: {e}"),
        )]),
    }
}

/// Validate a manifest. The SOPS references of the cloud-init data are resolved through
/// `secrets` (and the values dropped): a missing, empty, denied or malformed reference fails
/// closed here, before any PVE call. The desired state keeps only the references.
pub fn validate(
    flavour: Flavour,
    doc: &Value,
    secrets: &dyn Secrets,
) -> Result<Validated, Vec<Diag>> {
    let mut c = Checker::new();
    let (name, spec) = manifest::envelope(&mut c, doc, flavour.kind());
    let desired = spec.and_then(|spec| check_spec(&mut c, flavour, name.as_deref(), spec));
    // Resolve only references that are well-formed; malformed ones were reported above.
    if !c.has_errors()
        && let Some(d) = &desired
        && let Err(errors) = cloudinit::resolve(d.cloud_init_data.as_ref(), secrets)
    {
        for e in errors {
            c.error(e.path, e.message);
        }
    }
    match (c.finish(), desired) {
        (Ok(warnings), Some(desired)) => Ok(Validated { desired, warnings }),
        (Ok(_), None) => Err(vec![Diag::error("", "manifest could not be read")]),
        (Err(diags), _) => Err(diags),
    }
}

fn check_spec(
    c: &mut Checker,
    flavour: Flavour,
    name: Option<&str>,
    spec: &Obj,
) -> Option<Desired> {
    let p = "spec";
    c.unknown_keys(spec, p, SPEC_KEYS);
    let node = c.string(spec, p, "node", true);
    if let Some(n) = &node
        && !syntax::is_dns_name(n)
    {
        c.error(
            "spec.node",
            format!("`{n}` is not a PVE node name; use letters, digits and `-`"),
        );
    }
    let vmid = c
        .int(spec, p, "vmid", true, 100, 999_999_999)
        .map(|v| v as u32);
    let state = check_state(c, flavour, spec);
    let memory_mib = check_memory(c, spec);
    let cpu = check_cpu(c, spec);
    let clone = check_clone(c, spec);

    let hardware_obj = c.object_field(spec, p, "hardware", false, HARDWARE_KEYS);
    let ci_enabled = hardware_obj.is_some_and(cloud_init_enabled);
    let (disks, scsihw) = check_disks(c, spec, clone.is_some(), ci_enabled, hardware_obj);
    let networks = check_networks(c, spec);
    let hardware = hardware_obj
        .map(|h| check_hardware(c, h))
        .unwrap_or_default();
    let options = check_options(c, spec, cpu.as_ref());
    let pve_name = match c.string(spec, p, "pve-name", false) {
        Some(n) if !syntax::is_dns_name(&n) => {
            c.error("spec.pve-name", format!("`{n}` is not a valid PVE name; use letters, digits, `-` and `.` (no `_` or spaces)"));
            None
        }
        Some(n) => Some(n),
        None => name.map(str::to_string),
    };
    let pve_description = c.string(spec, p, "pve-description", false);
    if pve_description.as_ref().is_some_and(|d| d.len() > 8192) {
        c.error(
            "spec.pve-description",
            "must be at most 8192 bytes (PVE's limit)",
        );
    }
    let tags = check_tags(c, spec, vmid);
    let extra = check_extra(c, spec);
    let cloud_init_data = check_cloud_init_data(c, spec, &networks);

    Some(Desired {
        kind: flavour,
        name: name?.to_string(),
        node: node?,
        vmid: vmid?,
        state: state?,
        memory_mib: memory_mib?,
        cpu: cpu?,
        disks,
        scsihw,
        networks,
        hardware,
        options,
        pve_name: pve_name?,
        pve_description,
        tags,
        extra,
        clone,
        cloud_init_data,
    })
}

fn check_state(c: &mut Checker, flavour: Flavour, spec: &Obj) -> Option<PowerState> {
    let state = c.enumeration(spec, "spec", "state", false, &["started", "stopped"]);
    match (flavour, state.as_deref()) {
        (Flavour::Template, Some("started")) => {
            c.error(
                "spec.state",
                "a TemplateVM must be `stopped` (PVE refuses to start a template)",
            );
            None
        }
        (Flavour::Template, _) => Some(PowerState::Stopped),
        (Flavour::Vm, Some("stopped")) => Some(PowerState::Stopped),
        (Flavour::Vm, _) => Some(PowerState::Started),
    }
}

fn check_memory(c: &mut Checker, spec: &Obj) -> Option<u64> {
    let bytes = c.size(spec, "spec", "memory", true)?;
    match size::exact_mib(bytes) {
        None => {
            c.error(
                "spec.memory",
                format!("must be a whole number of MiB (PVE stores MiB), got {bytes} bytes"),
            );
            None
        }
        Some(m) if m < 16 => {
            c.error(
                "spec.memory",
                format!(
                    "must be at least 16MiB (PVE's minimum), got {}",
                    size::format_human(bytes)
                ),
            );
            None
        }
        Some(m) => Some(m),
    }
}

fn check_cpu(c: &mut Checker, spec: &Obj) -> Option<Cpu> {
    let cpu = c.object_field(spec, "spec", "cpu", true, CPU_KEYS)?;
    let t = c.string(cpu, "spec.cpu", "type", true);
    if let Some(t) = &t
        && t.contains([',', '=', ' '])
    {
        c.error(
            "spec.cpu.type",
            format!("`{t}` is not a CPU model name; use e.g. `host`, `kvm64` or `x86-64-v2-AES`"),
        );
    }
    let cores = c.int(cpu, "spec.cpu", "cores", true, 1, 4096);
    Some(Cpu {
        cpu_type: t?,
        cores: cores? as u32,
    })
}

fn check_clone(c: &mut Checker, spec: &Obj) -> Option<String> {
    let clone = c.string(spec, "spec", "clone", false)?;
    if let Some(p) = manifest::dns_label_problem(&clone) {
        c.error(
            "spec.clone",
            format!("must name a TemplateVM by its metadata.name: {p}"),
        );
        return None;
    }
    Some(clone)
}

fn cloud_init_enabled(hw: &Obj) -> bool {
    hw.get("cloud-init")
        .and_then(|v| v.get("enabled"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn check_storage(c: &mut Checker, obj: &Obj, path: &str, key: &str) -> Option<String> {
    let s = c.string(obj, path, key, true)?;
    if !syntax::is_storage_id(&s) {
        c.error(
            join(path, key),
            format!("`{s}` is not a PVE storage id (lower-case letters, digits, `-`, `_`, `.`)"),
        );
        return None;
    }
    Some(s)
}

fn check_disks(
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

fn check_networks(c: &mut Checker, spec: &Obj) -> Vec<Nic> {
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

fn check_hardware(c: &mut Checker, hw: &Obj) -> Hardware {
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

fn check_options(c: &mut Checker, spec: &Obj, cpu: Option<&Cpu>) -> Options {
    let Some(o) = c.object_field(spec, "spec", "options", false, OPTIONS_KEYS) else {
        return Options::default();
    };
    let p = "spec.options";
    let startup = c.string(o, p, "startup", false).and_then(|s| {
        if syntax::is_startup(&s) {
            Some(s)
        } else {
            c.error(join(p, "startup"), format!("`{s}` is not a PVE startup value; expected e.g. `order=10` or `order=1,up=30,down=60`"));
            None
        }
    });
    let hotplug = c.string(o, p, "hotplug", false).and_then(|s| {
        let features = parse_hotplug(&s);
        match features.iter().find(|f| !HOTPLUG_FEATURES.contains(&f.as_str())) {
            Some(bad) => {
                c.error(join(p, "hotplug"), format!("unknown hotplug feature `{bad}`; expected a comma list of {} (or `0` / `1`)", choices(HOTPLUG_FEATURES)));
                None
            }
            None => Some(features),
        }
    });
    let boot_order = match o.get("boot-order") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(sets::split_list(s, &[';', ',', ' '])),
        Some(Value::Array(_)) => c.string_list(o, p, "boot-order"),
        Some(other) => {
            c.error(join(p, "boot-order"), format!("expected a list of devices such as [scsi0, net0], got {}", type_name(other)));
            None
        }
    }
    .and_then(|devs| {
        if devs.is_empty() {
            c.error(join(p, "boot-order"), "must name at least one device, or be left out");
            return None;
        }
        match devs.iter().find(|d| !syntax::is_boot_device(d)) {
            Some(bad) => {
                c.error(join(p, "boot-order"), format!("`{bad}` is not a boot device; expected disk slots (scsi0, ide2, ...) or NICs (net0, ...)"));
                None
            }
            None => Some(devs),
        }
    });
    let nested_virt = c.boolean(o, p, "nested-virt", false);
    if nested_virt == Some(true) && cpu.is_some_and(|c| c.cpu_type != "host") {
        c.error(
            join(p, "nested-virt"),
            "PVE 9.2 has no nestedvirt key: nested virtualisation needs spec.cpu.type: host (and nesting enabled in the host's kvm module)",
        );
    }
    Options {
        onboot: c.boolean(o, p, "onboot", false),
        startup,
        protection: c.boolean(o, p, "protection", false),
        agent: c.boolean(o, p, "agent", false),
        acpi: c.boolean(o, p, "acpi", false),
        tablet: c.boolean(o, p, "tablet", false),
        hotplug,
        boot_order,
        nested_virt,
        hidden: c.boolean(o, p, "hidden", false),
    }
}

/// Hotplug features as a sorted set; `1` is PVE's alias for the default, `0` for none.
pub fn parse_hotplug(s: &str) -> Vec<String> {
    match s.trim() {
        "1" => vec!["disk".into(), "network".into(), "usb".into()],
        "0" | "" => Vec::new(),
        s => sets::normalize(&sets::split_list(s, &[',']))
            .into_iter()
            .map(|f| f.trim().to_string())
            .collect(),
    }
}

/// The tags: the user's, plus the ownership tag and the vmid-bound ownership mark
/// (`proxops-<vmid>`), which a prune requires; `proxops-*` tags are reserved for the marks.
fn check_tags(c: &mut Checker, spec: &Obj, vmid: Option<u32>) -> Vec<String> {
    let mut tags = vec![crate::OWNERSHIP_TAG.to_string()];
    if let Some(vmid) = vmid {
        tags.push(crate::ownership_mark(vmid));
    }
    if let Some(list) = c.string_list(spec, "spec", "tags") {
        for (i, t) in list.iter().enumerate() {
            let lower = t.to_ascii_lowercase();
            if lower.starts_with("proxops-") {
                c.error(index("spec.tags", i), format!("`{t}`: tags starting with `proxops-` are reserved for proxops's ownership marks"));
            } else if syntax::is_tag(&lower) {
                tags.push(lower);
            } else {
                c.error(index("spec.tags", i), format!("`{t}` is not a PVE tag; use letters, digits, `_`, `-`, `+` and `.`, not starting with `-`, `+` or `.`"));
            }
        }
    }
    sets::normalize(&tags)
}

fn check_extra(c: &mut Checker, spec: &Obj) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(v) = c.field(spec, "spec", "extra", false) else {
        return out;
    };
    let Value::Object(map) = v else {
        c.error(
            "spec.extra",
            format!(
                "expected a mapping of PVE keys to values, got {}",
                type_name(v)
            ),
        );
        return out;
    };
    for (k, v) in map {
        let p = join("spec.extra", k);
        if k.is_empty()
            || !k
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            c.error(p, format!("`{k}` is not a PVE config key"));
            continue;
        }
        if let Some(field) = modelled_by(k) {
            c.error(
                p,
                format!("`{k}` is modelled by {field}; set it there instead of in extra"),
            );
            continue;
        }
        let value = match v {
            Value::String(s) => s.clone(),
            Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
            Value::Number(n) => n.to_string(),
            other => {
                c.error(
                    p,
                    format!(
                        "expected a string, number or boolean, got {}",
                        type_name(other)
                    ),
                );
                continue;
            }
        };
        out.insert(k.clone(), value);
    }
    out
}

fn check_cloud_init_data(c: &mut Checker, spec: &Obj, networks: &[Nic]) -> Option<CloudInitData> {
    let o = c.object_field(spec, "spec", "cloud-init-data", false, CI_DATA_KEYS)?;
    let p = "spec.cloud-init-data";
    let ci_user = c.string(o, p, "ci-user", false);
    let ssh_keys = c.string_list(o, p, "ssh-keys").unwrap_or_default();
    if ssh_keys.iter().any(|k| k == "*") && ssh_keys.len() > 1 {
        c.error(join(p, "ssh-keys"), "mixes the `*` sentinel (PVE owns the keys) with real keys; use either [\"*\"] or the keys");
    }
    for (i, k) in ssh_keys.iter().enumerate() {
        if k != "*"
            && (k.trim().is_empty() || !k.trim_start().starts_with(['s', 'e']) || !k.contains(' '))
        {
            c.error(
                index(&join(p, "ssh-keys"), i),
                "is not an OpenSSH public key; expected e.g. `ssh-ed25519 AAAA... user@host`",
            );
        }
    }
    let ssh_key_refs = c.string_list(o, p, "ssh-key-refs").unwrap_or_default();
    for (i, r) in ssh_key_refs.iter().enumerate() {
        check_secret_ref(
            c,
            &index(&join(p, "ssh-key-refs"), i),
            r,
            "cloud-init.ssh-keys.",
        );
    }
    if !ssh_keys.is_empty() && !ssh_key_refs.is_empty() {
        c.error(
            join(p, "ssh-key-refs"),
            "ssh-keys and ssh-key-refs are exclusive; keep one of them",
        );
    }
    let ci_password_ref = c.string(o, p, "ci-password-ref", false);
    if let Some(r) = &ci_password_ref {
        check_secret_ref(c, &join(p, "ci-password-ref"), r, "cloud-init.passwords.");
    }
    let nameservers = c.string_list(o, p, "nameservers").unwrap_or_default();
    for (i, ns) in nameservers.iter().enumerate() {
        if !syntax::is_ip(ns) {
            c.error(
                index(&join(p, "nameservers"), i),
                format!("`{ns}` is not an IP address"),
            );
        }
    }
    let search_domains = c.string_list(o, p, "search-domains").unwrap_or_default();
    for (i, d) in search_domains.iter().enumerate() {
        if !syntax::is_dns_name(d) {
            c.error(
                index(&join(p, "search-domains"), i),
                format!("`{d}` is not a DNS domain"),
            );
        }
    }
    let mut ipconfigs = Vec::new();
    if let Some(items) = c.array(o, p, "ipconfigs", false) {
        let nic_slots: BTreeSet<u32> = networks.iter().map(|n| n.slot).collect();
        let mut seen = BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            let ip_p = index(&join(p, "ipconfigs"), i);
            let Some(e) = c.object(item, &ip_p, IPCONFIG_KEYS) else {
                continue;
            };
            let nic = c.int(e, &ip_p, "nic", true, 0, 31).map(|n| n as u32);
            if let Some(n) = nic {
                if !seen.insert(n) {
                    c.error(
                        join(&ip_p, "nic"),
                        format!("net{n} already has an ipconfig entry"),
                    );
                } else if !networks.is_empty() && !nic_slots.contains(&n) {
                    c.error(
                        join(&ip_p, "nic"),
                        format!("net{n} is not declared in spec.networks"),
                    );
                }
            }
            let ip = c.string(e, &ip_p, "ip", true);
            if let Some(a) = &ip
                && !syntax::is_ipv4_cidr(a)
            {
                c.error(
                    join(&ip_p, "ip"),
                    format!(
                        "`{a}` is not an IPv4 address with prefix length, e.g. 192.168.0.50/24"
                    ),
                );
            }
            let gateway = c.string(e, &ip_p, "gateway", false);
            if let Some(g) = &gateway
                && !syntax::is_ipv4(g)
            {
                c.error(
                    join(&ip_p, "gateway"),
                    format!("`{g}` is not an IPv4 address"),
                );
            }
            if let (Some(nic), Some(ip)) = (nic, ip) {
                ipconfigs.push(IpConfig { nic, ip, gateway });
            }
        }
    }
    Some(CloudInitData {
        ci_user,
        ssh_keys,
        ssh_key_refs,
        ci_password_ref,
        nameservers: sets::normalize(&nameservers),
        search_domains: sets::normalize(&search_domains),
        ipconfigs,
    })
}

fn check_secret_ref(c: &mut Checker, path: &str, r: &str, prefix: &str) {
    match r.strip_prefix(prefix) {
        Some(name) if !name.is_empty() && !name.contains('.') => {}
        _ => c.error(
            path,
            format!("`{r}` is not a SOPS reference; expected `{prefix}<name>`"),
        ),
    }
}

/// The spec field that models PVE key `k`, when there is one.
fn modelled_by(k: &str) -> Option<&'static str> {
    let fixed: &[(&str, &str)] = &[
        ("vmid", "spec.vmid"),
        ("name", "spec.pve-name"),
        ("description", "spec.pve-description"),
        ("tags", "spec.tags"),
        ("memory", "spec.memory"),
        ("cpu", "spec.cpu.type"),
        ("cores", "spec.cpu.cores"),
        ("sockets", "spec.hardware.sockets"),
        ("numa", "spec.hardware.numa"),
        ("machine", "spec.hardware.machine"),
        ("bios", "spec.hardware.bios"),
        ("vga", "spec.hardware.display"),
        ("serial0", "spec.hardware.serial0"),
        ("efidisk0", "spec.hardware.efi-disk"),
        ("tpmstate0", "spec.hardware.tpm"),
        ("scsihw", "spec.disks[].controller"),
        ("onboot", "spec.options.onboot"),
        ("startup", "spec.options.startup"),
        ("protection", "spec.options.protection"),
        ("agent", "spec.options.agent"),
        ("acpi", "spec.options.acpi"),
        ("tablet", "spec.options.tablet"),
        ("hotplug", "spec.options.hotplug"),
        ("boot", "spec.options.boot-order"),
        ("ciuser", "spec.cloud-init-data.ci-user"),
        ("cipassword", "spec.cloud-init-data.ci-password-ref"),
        ("sshkeys", "spec.cloud-init-data.ssh-keys"),
        ("nameserver", "spec.cloud-init-data.nameservers"),
        ("searchdomain", "spec.cloud-init-data.search-domains"),
        ("template", "kind: TemplateVM"),
        ("digest", "proxops itself (it is a request parameter)"),
        ("delete", "proxops itself (it is a request parameter)"),
        ("revert", "proxops itself (it is a request parameter)"),
        ("meta", "PVE itself (it is read-only)"),
        ("lock", "PVE itself (it is PVE-managed)"),
        ("start", "spec.state"),
    ];
    if let Some((_, f)) = fixed.iter().find(|(key, _)| *key == k) {
        return Some(f);
    }
    if syntax::is_disk_key(k) {
        return Some("spec.disks (or spec.hardware.cdrom / cloud-init)");
    }
    match syntax::split_slot(k) {
        Some(("net", _)) => Some("spec.networks"),
        Some(("hostpci", _)) => Some("spec.hardware.pci-devices"),
        Some(("ipconfig", _)) => Some("spec.cloud-init-data.ipconfigs"),
        _ => None,
    }
}
