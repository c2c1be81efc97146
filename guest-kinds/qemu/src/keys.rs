//! The field names and enumerations of the VM / TemplateVM manifest, shared by the checker and
//! the JSON Schema so that both always accept the same keys.

/// Keys under `spec`.
pub const SPEC_KEYS: &[&str] = &[
    "node",
    "vmid",
    "state",
    "memory",
    "cpu",
    "disks",
    "networks",
    "hardware",
    "options",
    "pve-name",
    "pve-description",
    "tags",
    "extra",
    "clone",
    "cloud-init-data",
    "ha",
    "placement",
    "pool",
];
/// Keys under `spec.ha`.
pub const HA_KEYS: &[&str] = &["state", "max-restart", "max-relocate", "failback"];
/// `spec.ha.state` values.
pub const HA_STATES: &[&str] = &["started", "stopped", "disabled", "ignored"];
/// `spec.placement` values.
pub const PLACEMENTS: &[&str] = &["fixed", "migrate"];
/// Keys under `spec.cpu`.
pub const CPU_KEYS: &[&str] = &["type", "cores"];
/// Keys of a `spec.disks[]` entry.
pub const DISK_KEYS: &[&str] = &[
    "storage",
    "size",
    "image",
    "interface",
    "controller",
    "iothread",
    "discard",
    "ssd",
    "aio",
];
/// Keys of a `spec.networks[]` entry.
pub const NIC_KEYS: &[&str] = &[
    "model",
    "bridge",
    "mac",
    "vlan",
    "rate-limit",
    "firewall",
    "slot",
];
/// Keys under `spec.hardware`.
pub const HARDWARE_KEYS: &[&str] = &[
    "machine",
    "bios",
    "display",
    "cdrom",
    "efi-disk",
    "cloud-init",
    "tpm",
    "serial0",
    "sockets",
    "numa",
    "pci-devices",
];
/// Keys under `spec.hardware.cdrom`.
pub const CDROM_KEYS: &[&str] = &["iso", "media"];
/// Keys under `spec.hardware.efi-disk`.
pub const EFI_KEYS: &[&str] = &["storage", "size", "template", "secure-boot"];
/// Keys under `spec.hardware.cloud-init`.
pub const CI_DRIVE_KEYS: &[&str] = &["enabled", "storage"];
/// Keys under `spec.hardware.tpm`.
pub const TPM_KEYS: &[&str] = &["storage", "version"];
/// Keys of a `spec.hardware.pci-devices[]` entry.
pub const PCI_KEYS: &[&str] = &["slot", "device", "mapping", "pcie"];
/// Keys under `spec.options`.
pub const OPTIONS_KEYS: &[&str] = &[
    "onboot",
    "startup",
    "protection",
    "agent",
    "acpi",
    "tablet",
    "hotplug",
    "boot-order",
    "nested-virt",
    "hidden",
];
/// Keys under `spec.cloud-init-data`.
pub const CI_DATA_KEYS: &[&str] = &[
    "ci-user",
    "ssh-keys",
    "ssh-key-refs",
    "ci-password-ref",
    "nameservers",
    "search-domains",
    "ipconfigs",
];
/// Keys of a `spec.cloud-init-data.ipconfigs[]` entry.
pub const IPCONFIG_KEYS: &[&str] = &["nic", "ip", "gateway"];

/// PVE `scsihw` values.
pub const SCSIHW: &[&str] = &[
    "lsi",
    "lsi53c810",
    "virtio-scsi-pci",
    "virtio-scsi-single",
    "megasas",
    "pvscsi",
];
/// PVE NIC models.
pub const NIC_MODELS: &[&str] = &[
    "e1000",
    "e1000-82540em",
    "e1000-82544gc",
    "e1000-82545em",
    "e1000e",
    "i82551",
    "i82557b",
    "i82559er",
    "ne2k_isa",
    "ne2k_pci",
    "pcnet",
    "rtl8139",
    "virtio",
    "vmxnet3",
];
/// PVE `vga` types.
pub const VGA_TYPES: &[&str] = &[
    "cirrus",
    "qxl",
    "qxl2",
    "qxl3",
    "qxl4",
    "none",
    "serial0",
    "serial1",
    "serial2",
    "serial3",
    "std",
    "virtio",
    "virtio-gl",
    "vmware",
];
/// PVE hotplug features.
pub const HOTPLUG_FEATURES: &[&str] = &["cloudinit", "cpu", "disk", "memory", "network", "usb"];

/// Config keys PVE lets only `root@pam` set or delete, never an API token: the keys
/// qemu-server 9.2's `$check_vm_modify_config_perm` knows no privilege for ("catches args,
/// lock, etc."). proxops always authenticates with a token, so a write of one is known to fail.
pub fn root_only(key: &str) -> bool {
    const KEYS: &[&str] = &[
        "affinity",
        "amd-sev",
        "args",
        "arch",
        "hookscript",
        "hugepages",
        "intel-tdx",
        "ivshmem",
        "keephugepages",
        "lock",
        "spice_enhancements",
        "vmgenid",
    ];
    KEYS.contains(&key)
        || key
            .strip_prefix("parallel")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}
