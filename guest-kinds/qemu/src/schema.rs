//! The JSON Schema (draft 2020-12) of VM and TemplateVM manifests, for editors
//! (yaml-language-server) and `proxops schema`. Every mapping the checker closes is
//! `additionalProperties: false` here too; a test keeps the property lists equal to the checker's.

use proxops_kind_sdk::manifest;
use serde_json::{Value, json};

use crate::desired::Flavour;
use crate::keys::*;

fn size(desc: &str) -> Value {
    json!({
        "type": "string",
        "pattern": "^[0-9]+(\\.[0-9]+)?(B|KiB|MiB|GiB|TiB)$",
        "description": desc,
        "examples": ["8GiB", "512MiB"]
    })
}

fn boolean(desc: &str) -> Value {
    json!({"type": "boolean", "description": desc})
}

fn enumeration(values: &[&str], desc: &str) -> Value {
    json!({"type": "string", "enum": values, "description": desc})
}

fn storage(desc: &str) -> Value {
    json!({"type": "string", "pattern": "^[a-z][a-z0-9._-]*[a-z0-9]$", "description": desc})
}

fn name_ref(desc: &str) -> Value {
    json!({"type": "string", "pattern": "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", "description": desc})
}

/// The schema of `spec`.
pub fn spec_schema(flavour: Flavour) -> Value {
    let state = match flavour {
        Flavour::Vm => {
            json!({"type": "string", "enum": ["started", "stopped"], "default": "started",
            "description": "Power state; drift reconciles power."})
        }
        Flavour::Template => json!({"type": "string", "enum": ["stopped"], "default": "stopped",
            "description": "A TemplateVM is always stopped (PVE refuses to start a template)."}),
    };
    let disk = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["storage"],
        "properties": {
            "storage": storage("PVE storage id the disk is allocated on."),
            "size": size("Disk size in whole GiB (e.g. 50GiB); must be absent when image is set."),
            "image": name_ref("A DiskImage metadata.name seeding this disk at create (import-from)."),
            "interface": {"type": "string", "pattern": "^(scsi([0-9]|[12][0-9]|30)|sata[0-5]|virtio([0-9]|1[0-5])|ide[0-3])$",
                "default": "scsi<index>", "description": "PVE slot (scsi0, sata1, virtio0, ide0...); defaults to scsi<position>."},
            "controller": enumeration(SCSIHW, "VM-wide scsihw; the first disk declaring it wins."),
            "iothread": boolean("Dedicated I/O thread (scsi and virtio only)."),
            "discard": enumeration(&["ignore", "on"], "TRIM/discard passthrough; omitted = not owned."),
            "ssd": boolean("Advertise an SSD (scsi, sata, ide only); omitted = not owned, false pins ssd=0."),
            "aio": enumeration(&["native", "threads", "io_uring"], "Async I/O engine; omitted = not owned.")
        }
    });
    let nic = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["bridge"],
        "properties": {
            "model": {"type": "string", "enum": NIC_MODELS, "default": "virtio", "description": "NIC model."},
            "bridge": {"type": "string", "pattern": "^[-_.A-Za-z0-9]+$", "description": "PVE bridge, e.g. vmbr0."},
            "mac": {"type": "string", "pattern": "^[0-9A-Fa-f][02468aceACE](:[0-9A-Fa-f]{2}){5}$",
                "description": "Pinned unicast MAC; absent = PVE assigns one (never drift)."},
            "vlan": {"type": "integer", "minimum": 1, "maximum": 4094, "description": "802.1Q tag (PVE wire key `tag`)."},
            "rate-limit": {"type": "number", "minimum": 0, "description": "PVE rate limit (`rate`, MB/s)."},
            "firewall": boolean("PVE per-NIC firewall."),
            "slot": {"oneOf": [
                {"type": "integer", "minimum": 0, "maximum": 31},
                {"type": "string", "pattern": "^net([0-9]|[12][0-9]|3[01])$"}
            ], "description": "NIC slot netN (default: position in the list)."}
        }
    });
    let pci = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["slot"],
        "oneOf": [{"required": ["device"]}, {"required": ["mapping"]}],
        "properties": {
            "mapping": {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_-]*$",
                "description": "A PVE PCI resource mapping (Datacenter -> Resource Mappings), written `mapping=<name>`; what an API token with Mapping.Use may attach. Exactly one of `device` and `mapping`."},
            "slot": {"type": "integer", "minimum": 0, "maximum": 999, "description": "N of hostpciN (PVE 9.2 accepts 0-15)."},
            "device": {"type": "string", "pattern": "^([0-9A-Fa-f]{4,}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(\\.[0-9A-Fa-f])?$",
                "description": "Host PCI address domain:bus:slot[.func]; lower-cased on the wire."},
            "pcie": boolean("PCIe passthrough (pcie=1); omitted = not owned.")
        }
    });
    let hardware = json!({
        "type": "object",
        "additionalProperties": false,
        "description": "First-class hardware.",
        "properties": {
            "machine": {"type": "string", "enum": ["i440fx", "q35"], "default": "i440fx", "description": "Machine type; stop-required to change."},
            "bios": {"type": "string", "enum": ["seabios", "ovmf"], "default": "seabios", "description": "Firmware; stop-required to change."},
            "display": enumeration(VGA_TYPES, "VGA type (`vga`)."),
            "cdrom": {
                "type": "object", "additionalProperties": false,
                "description": "CD/DVD drive on ide2 (ide3 when cloud-init is enabled). Absent = not owned.",
                "properties": {
                    "iso": {"type": "string", "description": "`none` to keep the drive empty, or an ISO metadata.name to attach.", "default": "none"},
                    "media": {"type": "string", "enum": ["cdrom", "disk"], "default": "cdrom"}
                }
            },
            "efi-disk": {
                "type": "object", "additionalProperties": false, "required": ["storage"],
                "description": "EFI vars disk (efidisk0); needs bios ovmf.",
                "properties": {
                    "storage": storage("Storage of the EFI vars disk."),
                    "size": size("Informational: PVE sizes the EFI vars disk itself."),
                    "template": {"type": "string", "enum": ["2m", "4m"], "description": "OVMF vars type (efitype); PVE 9.2 accepts 2m and 4m."},
                    "secure-boot": {"type": "string", "enum": ["enabled", "disabled"], "description": "pre-enrolled-keys=1/0; omitted = not owned."}
                }
            },
            "cloud-init": {
                "type": "object", "additionalProperties": false, "required": ["enabled"],
                "description": "Cloud-init drive on ide2 (moves the CD/DVD drive to ide3).",
                "properties": {
                    "enabled": boolean("Claim ide2 for a cloud-init drive."),
                    "storage": storage("Storage for the drive (needs `images` content).")
                }
            },
            "tpm": {
                "type": "object", "additionalProperties": false, "required": ["storage"],
                "description": "TPM state (tpmstate0); needs bios ovmf and machine q35.",
                "properties": {
                    "storage": storage("Storage of the TPM state volume."),
                    "version": {"type": "string", "enum": ["v1.2", "v2.0"], "default": "v2.0"}
                }
            },
            "serial0": {"type": "string", "pattern": "^(socket|/dev/.+)$", "description": "Serial port 0 (`socket` or a host device)."},
            "sockets": {"type": "integer", "minimum": 1, "maximum": 64, "description": "CPU sockets (PVE default 1)."},
            "numa": boolean("Enable NUMA."),
            "pci-devices": {"type": "array", "items": pci, "description": "Host PCI passthrough (hostpciN); stop-required."}
        }
    });
    let options = json!({
        "type": "object",
        "additionalProperties": false,
        "description": "VM options; omitted = not owned.",
        "properties": {
            "onboot": boolean("Start on node boot."),
            "startup": {"type": "string", "pattern": "^((order=)?[0-9]+)?(,?(up|down)=[0-9]+)*$", "description": "PVE startup, e.g. order=10."},
            "protection": boolean("Block accidental destroy."),
            "agent": boolean("QEMU guest agent."),
            "acpi": boolean("ACPI."),
            "tablet": boolean("Tablet pointer."),
            "hotplug": {"type": "string", "description": "Comma list of disk, network, usb, cpu, memory, cloudinit (or 0 / 1)."},
            "boot-order": {"oneOf": [
                {"type": "array", "items": {"type": "string"}, "minItems": 1},
                {"type": "string"}
            ], "description": "Boot devices in order, e.g. [scsi0, net0]."},
            "nested-virt": boolean("Nested virtualisation; needs cpu.type host (PVE has no key for it)."),
            "hidden": boolean("Hide KVM from the guest (cpu hidden=1).")
        }
    });
    let cloud_init_data = json!({
        "type": "object",
        "additionalProperties": false,
        "description": "Cloud-init data keys; empty = not owned.",
        "properties": {
            "ci-user": {"type": "string", "description": "ciuser."},
            "ssh-keys": {"type": "array", "items": {"type": "string"}, "description": "Public keys, or [\"*\"] to let PVE own them."},
            "ssh-key-refs": {"type": "array", "items": {"type": "string", "pattern": "^cloud-init\\.ssh-keys\\.[^.]+$"}, "description": "SOPS paths of public keys."},
            "ci-password-ref": {"type": "string", "pattern": "^cloud-init\\.passwords\\.[^.]+$", "description": "SOPS path of the password."},
            "nameservers": {"type": "array", "items": {"type": "string"}},
            "search-domains": {"type": "array", "items": {"type": "string"}},
            "ipconfigs": {"type": "array", "items": {
                "type": "object", "additionalProperties": false, "required": ["nic", "ip"],
                "properties": {
                    "nic": {"type": "integer", "minimum": 0, "maximum": 31},
                    "ip": {"type": "string", "description": "IPv4 CIDR, e.g. 192.168.0.50/24."},
                    "gateway": {"type": "string"}
                }
            }}
        }
    });
    let ha = json!({
        "type": "object",
        "additionalProperties": false,
        "description": "The VM's PVE HA resource (vm:<vmid>), its comment carrying proxops's ownership mark. Absent: HA membership is not managed (a resource proxops created is removed, any other left alone).",
        "properties": {
            "state": {"type": "string", "enum": HA_STATES,
                "description": "Requested HA state; defaults to spec.state (started or stopped). `disabled` needs spec.state: stopped; `ignored` leaves the VM to proxops."},
            "max-restart": {"type": "integer", "minimum": 0, "default": 1, "description": "Restart tries on a node after a failed start (PVE max_restart)."},
            "max-relocate": {"type": "integer", "minimum": 0, "default": 1, "description": "Relocate tries to other nodes after failed restarts (PVE max_relocate)."},
            "failback": boolean("Move back to the node with the highest affinity priority when it comes online (PVE default true).")
        }
    });
    let mut spec = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["node", "vmid", "memory", "cpu", "networks"],
        "properties": {
            "node": {"type": "string", "description": "PVE node hosting the VM."},
            "vmid": {"type": "integer", "minimum": 100, "maximum": 999999999, "description": "PVE VM id (pinned)."},
            "state": state,
            "memory": size("Memory, e.g. 8GiB or 512MiB (whole MiB)."),
            "cpu": {
                "type": "object", "additionalProperties": false, "required": ["type", "cores"],
                "properties": {
                    "type": {"type": "string", "description": "CPU model: host, kvm64, x86-64-v2-AES..."},
                    "cores": {"type": "integer", "minimum": 1}
                }
            },
            "disks": {"type": "array", "items": disk, "description": "Disks in order (at least one unless clone is set)."},
            "networks": {"type": "array", "items": nic, "minItems": 1, "description": "NICs in order."},
            "hardware": hardware,
            "options": options,
            "pve-name": {"type": "string", "description": "PVE name; defaults to metadata.name."},
            "pve-description": {"type": "string", "maxLength": 8192},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "PVE tags; `proxops` is added."},
            "extra": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]},
                "description": "Unmodelled PVE config keys, compared verbatim."},
            "clone": name_ref("A TemplateVM metadata.name to full-clone from (then disks must be empty)."),
            "cloud-init-data": cloud_init_data,
            "ha": ha,
            "placement": {"type": "string", "enum": PLACEMENTS, "default": "fixed",
                "description": "A guest found on another node than spec.node: `fixed` reports a guest without HA as an anomaly (one HA moved is accepted where it is); `migrate` migrates it to spec.node (through HA when HA manages it)."},
            "pool": name_ref("A Pool manifest's metadata.name: the PVE pool the guest is created in (PVE's `pool` on create and clone). A guest found in another pool, or in none, is an anomaly; proxops never moves a guest between pools.")
        }
    });
    if flavour == Flavour::Template {
        // PVE never runs a template: no HA resource.
        if let Some(props) = spec["properties"].as_object_mut() {
            props.remove("ha");
        }
    }
    spec
}

/// The schema of a whole manifest.
pub fn manifest_schema(flavour: Flavour) -> Value {
    let title = match flavour {
        Flavour::Vm => "proxops VM",
        Flavour::Template => "proxops TemplateVM",
    };
    manifest::manifest_schema(flavour.kind(), title, spec_schema(flavour))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(v: &Value) -> Vec<String> {
        let mut keys: Vec<String> = v["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    }

    fn sorted(list: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn schema_matches_checker_keys() {
        let s = spec_schema(Flavour::Vm);
        let hw = &s["properties"]["hardware"];
        for (node, keys) in [
            (&s, SPEC_KEYS),
            (&s["properties"]["cpu"], CPU_KEYS),
            (&s["properties"]["disks"]["items"], DISK_KEYS),
            (&s["properties"]["networks"]["items"], NIC_KEYS),
            (hw, HARDWARE_KEYS),
            (&hw["properties"]["cdrom"], CDROM_KEYS),
            (&hw["properties"]["efi-disk"], EFI_KEYS),
            (&hw["properties"]["cloud-init"], CI_DRIVE_KEYS),
            (&hw["properties"]["tpm"], TPM_KEYS),
            (&hw["properties"]["pci-devices"]["items"], PCI_KEYS),
            (&s["properties"]["options"], OPTIONS_KEYS),
            (&s["properties"]["cloud-init-data"], CI_DATA_KEYS),
            (&s["properties"]["ha"], HA_KEYS),
            (
                &s["properties"]["cloud-init-data"]["properties"]["ipconfigs"]["items"],
                IPCONFIG_KEYS,
            ),
        ] {
            assert_eq!(props(node), sorted(keys));
            assert_eq!(node["additionalProperties"], json!(false));
        }
    }

    #[test]
    fn whole_manifest_schema() {
        let m = manifest_schema(Flavour::Template);
        assert_eq!(m["$schema"], "https://json-schema.org/draft/2020-12/schema");
        assert_eq!(m["properties"]["kind"]["const"], "TemplateVM");
        assert_eq!(
            m["properties"]["spec"]["properties"]["state"]["enum"],
            json!(["stopped"])
        );
    }
}
