//! The normalised desired state of a VM or TemplateVM: what `validate` returns as JSON and what
//! `plan` reads back. Memory is in MiB, disk sizes in GiB, defaults are applied, and an
//! optional field that is `None` (absent from the JSON) is a PVE key proxops does not own.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Which of the two kinds this crate implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Flavour {
    /// `kind: VM`.
    #[serde(rename = "VM")]
    Vm,
    /// `kind: TemplateVM`.
    #[serde(rename = "TemplateVM")]
    Template,
}

impl Flavour {
    /// The `kind:` spelling.
    pub fn kind(self) -> &'static str {
        match self {
            Flavour::Vm => "VM",
            Flavour::Template => "TemplateVM",
        }
    }

    /// The repository folder of the manifests.
    pub fn folder(self) -> &'static str {
        match self {
            Flavour::Vm => "vm",
            Flavour::Template => "templatevm",
        }
    }

    /// The word used in summaries.
    pub fn noun(self) -> &'static str {
        match self {
            Flavour::Vm => "VM",
            Flavour::Template => "template",
        }
    }
}

/// Desired power state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PowerState {
    /// Running.
    Started,
    /// Stopped.
    Stopped,
}

/// The whole desired state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Desired {
    /// `VM` or `TemplateVM`.
    pub kind: Flavour,
    /// `metadata.name`.
    pub name: String,
    /// PVE node.
    pub node: String,
    /// PVE vmid.
    pub vmid: u32,
    /// Power state (always `stopped` for a TemplateVM).
    pub state: PowerState,
    /// `memory`, in MiB.
    pub memory_mib: u64,
    /// `cpu` and `cores`.
    pub cpu: Cpu,
    /// Disks in manifest order, each with its resolved slot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<Disk>,
    /// `scsihw`: the first disk's `controller`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scsihw: Option<String>,
    /// NICs in manifest order, each with its resolved slot.
    pub networks: Vec<Nic>,
    /// Hardware block.
    #[serde(default)]
    pub hardware: Hardware,
    /// Options block.
    #[serde(default)]
    pub options: Options,
    /// `name` (defaults to `metadata.name`).
    pub pve_name: String,
    /// `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pve_description: Option<String>,
    /// `tags`, lower-cased, sorted, de-duplicated, with `proxops` included.
    pub tags: Vec<String>,
    /// Passthrough PVE keys, values as PVE wire strings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, String>,
    /// `spec.clone`: a TemplateVM name; its vmid comes from the resolved reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone: Option<String>,
    /// `spec.cloud-init-data`: SOPS references only, never resolved values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init_data: Option<CloudInitData>,
    /// `spec.ha`: the guest's PVE HA resource (`vm:<vmid>`); `None`: HA membership is not
    /// managed (a proxops-marked HA resource is removed, any other left alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha: Option<Ha>,
    /// `spec.placement`: what plan does with a guest found on another node than `node`.
    #[serde(default, skip_serializing_if = "Placement::is_fixed")]
    pub placement: Placement,
    /// `spec.pool`: the PVE resource pool the guest is created in, a `Pool` manifest of the
    /// cluster (a reference, so the pool exists first). `None`: the guest's pool is not
    /// managed by this manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

/// `spec.ha`, with PVE's defaults applied (`max_restart` 1, `max_relocate` 1, `failback`
/// true) and `state` defaulting to `spec.state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Ha {
    /// The requested HA state.
    pub state: HaState,
    /// `max_restart`.
    pub max_restart: u64,
    /// `max_relocate`.
    pub max_relocate: u64,
    /// `failback`.
    pub failback: bool,
}

impl Ha {
    /// PVE's `max_restart` and `max_relocate` default.
    pub const DEFAULT_TRIES: u64 = 1;
}

/// The requested state of an HA resource (PVE's `enabled` is an alias of `started`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HaState {
    /// HA keeps the guest running (restarts, relocates, recovers it).
    Started,
    /// HA keeps the guest stopped, and still recovers it to another node.
    Stopped,
    /// HA keeps the guest stopped and does not recover it.
    Disabled,
    /// HA leaves the guest alone (power requests go straight to the guest).
    Ignored,
}

impl HaState {
    /// The PVE spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            HaState::Started => "started",
            HaState::Stopped => "stopped",
            HaState::Disabled => "disabled",
            HaState::Ignored => "ignored",
        }
    }

    /// Read PVE's spelling (`enabled` is `started`; absent is PVE's default `started`).
    pub fn parse(s: Option<&str>) -> Option<HaState> {
        Some(match s {
            None | Some("started" | "enabled") => HaState::Started,
            Some("stopped") => HaState::Stopped,
            Some("disabled") => HaState::Disabled,
            Some("ignored") => HaState::Ignored,
            Some(_) => return None,
        })
    }
}

/// `spec.placement`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// A guest without HA found on another node is an anomaly; an HA-managed one is accepted
    /// where HA put it.
    #[default]
    Fixed,
    /// A guest found on another node is migrated to `spec.node` (through HA when HA manages it).
    Migrate,
}

impl Placement {
    /// Whether it is the default.
    pub fn is_fixed(&self) -> bool {
        *self == Placement::Fixed
    }
}

/// CPU model and core count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    /// `cpu` model (`host`, `kvm64`, ...).
    #[serde(rename = "type")]
    pub cpu_type: String,
    /// `cores`.
    pub cores: u32,
}

/// One disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Disk {
    /// PVE slot (`scsi0`, `virtio1`, ...).
    pub slot: String,
    /// Storage id.
    pub storage: String,
    /// Size in GiB (absent for image-seeded disks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_gib: Option<u64>,
    /// DiskImage name; the import source comes from the resolved reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// `iothread` token when owned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iothread: Option<bool>,
    /// `discard` token (`on`/`ignore`) when owned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discard: Option<String>,
    /// `ssd` token when owned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssd: Option<bool>,
    /// `aio` token when owned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aio: Option<String>,
}

/// One NIC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Nic {
    /// N of `netN`.
    pub slot: u32,
    /// NIC model.
    pub model: String,
    /// Bridge.
    pub bridge: String,
    /// Pinned MAC, upper-case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// `tag`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// `rate` (MB/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<f64>,
    /// `firewall`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<bool>,
}

impl Desired {
    /// The node to migrate a guest to when it is found elsewhere: `spec.node` with
    /// `placement: migrate`, else `None`.
    pub fn migrate_to(&self) -> Option<&str> {
        (self.placement == Placement::Migrate).then_some(self.node.as_str())
    }

    /// Whether a `hostpci` names a PCI resource mapping.
    pub fn maps_pci(&self) -> bool {
        self.hardware
            .pci_devices
            .iter()
            .any(|p| p.mapping.is_some())
    }
}

/// What `observe` reads of a desired state's JSON text: whether a `hostpci` names a
/// resource mapping; everything else is skipped, not built. Spelled as [`Desired`] is
/// serialized (a test reads desired states through both).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ObserveView {
    #[serde(default)]
    hardware: HardwareView,
    #[serde(default)]
    node: Option<String>,
    #[serde(default)]
    placement: Placement,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct HardwareView {
    #[serde(default)]
    pci_devices: Vec<PciView>,
}

#[derive(Debug, Deserialize)]
struct PciView {
    #[serde(default)]
    mapping: Option<serde::de::IgnoredAny>,
}

impl ObserveView {
    /// The node to migrate a guest to when it is found elsewhere: `spec.node` with
    /// `placement: migrate`, else `None`.
    pub fn migrate_to(&self) -> Option<&str> {
        (self.placement == Placement::Migrate)
            .then_some(self.node.as_deref())
            .flatten()
    }

    /// [`Desired::maps_pci`] of the desired state read.
    pub fn maps_pci(&self) -> bool {
        self.hardware
            .pci_devices
            .iter()
            .any(|p| p.mapping.is_some())
    }
}

/// The hardware block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Hardware {
    /// `i440fx` or `q35`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// `seabios` or `ovmf`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bios: Option<String>,
    /// `vga` type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<String>,
    /// CD/DVD drive, when owned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdrom: Option<Cdrom>,
    /// `efidisk0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efi_disk: Option<EfiDisk>,
    /// Cloud-init drive on `ide2` (present only when enabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init: Option<CloudInitDrive>,
    /// `tpmstate0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<Tpm>,
    /// `serial0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial0: Option<String>,
    /// `sockets`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<u32>,
    /// `numa`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<bool>,
    /// `hostpciN`, sorted by slot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pci_devices: Vec<PciDevice>,
}

/// The CD/DVD drive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Cdrom {
    /// `ide2`, or `ide3` when the cloud-init drive holds `ide2`.
    pub slot: String,
    /// `none`, or an ISO name (its volume comes from the resolved reference).
    pub iso: String,
    /// `cdrom` or `disk`.
    pub media: String,
}

/// `efidisk0`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct EfiDisk {
    /// Storage id.
    pub storage: String,
    /// `efitype` when pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// `pre-enrolled-keys` when owned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure_boot: Option<bool>,
}

/// The cloud-init drive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloudInitDrive {
    /// Storage id.
    pub storage: String,
}

/// `tpmstate0`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tpm {
    /// Storage id.
    pub storage: String,
    /// `v1.2` or `v2.0`.
    pub version: String,
}

/// One `hostpciN`: a raw host device, or a PVE resource mapping (exactly one of the two).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciDevice {
    /// N.
    pub slot: u32,
    /// Lower-cased BDF of a raw device (only `root@pam` may write it; PVE refuses API tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// A PCI resource mapping (`/cluster/mapping/pci`), written `mapping=<name>`: what an API
    /// token with `Mapping.Use` may attach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping: Option<String>,
    /// `pcie` token when owned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie: Option<bool>,
}

/// The options block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Options {
    /// `onboot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onboot: Option<bool>,
    /// `startup`, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<String>,
    /// `protection`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protection: Option<bool>,
    /// `agent` (enabled token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<bool>,
    /// `acpi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acpi: Option<bool>,
    /// `tablet`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tablet: Option<bool>,
    /// `hotplug` features, sorted; empty means hotplug disabled (`0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hotplug: Option<Vec<String>>,
    /// `boot` order devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_order: Option<Vec<String>>,
    /// Nested virtualisation (no PVE key; satisfied by `cpu.type: host`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_virt: Option<bool>,
    /// `hidden=` token of `cpu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<bool>,
}

/// Cloud-init data (`ciuser`, `sshkeys`, `cipassword`, `nameserver`, `searchdomain`, `ipconfigN`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CloudInitData {
    /// `ciuser`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_user: Option<String>,
    /// Public keys; `["*"]` means PVE owns `sshkeys`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_keys: Vec<String>,
    /// SOPS dot-paths `cloud-init.ssh-keys.<name>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_key_refs: Vec<String>,
    /// SOPS dot-path `cloud-init.passwords.<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_password_ref: Option<String>,
    /// `nameserver`, set semantics (sorted, de-duplicated).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// `searchdomain`, set semantics (sorted, de-duplicated).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search_domains: Vec<String>,
    /// `ipconfigN`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ipconfigs: Vec<IpConfig>,
}

/// One `ipconfigN`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpConfig {
    /// N.
    pub nic: u32,
    /// `ip=` CIDR.
    pub ip: String,
    /// `gw=`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
}

impl Desired {
    /// The CD/DVD slot when the cloud-init drive is on `ide2`.
    pub fn cdrom_slot(cloud_init: bool) -> &'static str {
        if cloud_init { "ide3" } else { "ide2" }
    }
}
