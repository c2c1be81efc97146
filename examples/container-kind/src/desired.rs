//! The normalised desired state of a container: what `validate` produces and every later
//! function reads (as JSON between calls). Sizes are bytes or MiB, defaults are applied, and
//! the tags already carry the ownership marks.

use serde::{Deserialize, Serialize};

/// A validated `kind: Container` manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Container {
    /// `metadata.name`.
    pub name: String,
    /// PVE vmid (shared pool with VMs).
    pub vmid: u32,
    /// PVE node.
    pub node: String,
    /// `hostname` (defaults to `metadata.name`).
    pub hostname: String,
    /// `<storage>:vztmpl/<file>`, used at create only.
    pub ostemplate: String,
    /// `cores`; none = not owned (PVE: all host cores).
    pub cores: Option<u32>,
    /// `memory` in MiB.
    pub memory_mib: u64,
    /// `swap` in MiB; none = not owned (PVE's create default is 512).
    pub swap_mib: Option<u64>,
    /// The root volume.
    pub rootfs: Rootfs,
    /// `mpN` entries, in manifest order.
    pub mount_points: Vec<MountPoint>,
    /// `netN` entries; `slot` is the position in the manifest.
    pub nics: Vec<Nic>,
    /// `features` tokens the manifest owns.
    pub features: Features,
    /// `unprivileged` (default true; PVE's API default is 0, so always sent on create).
    pub unprivileged: bool,
    /// `onboot`; none = not owned.
    pub onboot: Option<bool>,
    /// Tags with the ownership marks, sorted and de-duplicated (lower case).
    pub tags: Vec<String>,
    /// `description`; none = not owned.
    pub description: Option<String>,
    /// Power state.
    pub state: PowerState,
    /// `spec.ha`: the container's PVE HA resource (`ct:<vmid>`); none = HA membership is not
    /// managed (an HA resource proxops marked is removed, any other left alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha: Option<Ha>,
}

/// The container's root volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Rootfs {
    /// PVE storage id.
    pub storage: String,
    /// Size in bytes (a whole number of GiB).
    pub size_bytes: u64,
}

/// Where a mount point's data lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "type")]
pub enum MountSource {
    /// A new volume PVE allocates on `storage`.
    Volume {
        /// PVE storage id.
        storage: String,
        /// Size in bytes (a whole number of GiB).
        size_bytes: u64,
    },
    /// A host directory or device mounted into the container (a bind mount).
    Bind {
        /// Absolute host path.
        host_path: String,
    },
}

/// One `mpN` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct MountPoint {
    /// `N` of `mpN`.
    pub slot: u32,
    /// Volume or bind mount.
    pub source: MountSource,
    /// Path inside the container (`mp=`).
    pub path: String,
    /// `ro=`; none = not owned.
    pub read_only: Option<bool>,
    /// `backup=` (volumes only); none = not owned.
    pub backup: Option<bool>,
}

/// One `netN` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Nic {
    /// `N` of `netN` (the position in `spec.nics`).
    pub slot: u32,
    /// Device name inside the container (`name=`, default `eth<N>`).
    pub name: String,
    /// `bridge=`.
    pub bridge: String,
    /// `ip=`: `dhcp` or an IPv4 CIDR; none = not owned.
    pub ip: Option<String>,
    /// `gw=` (with a static `ip` only); none = not owned.
    pub gw: Option<String>,
    /// `firewall=`; none = not owned.
    pub firewall: Option<bool>,
    /// `tag=`; none = not owned.
    pub vlan: Option<u16>,
    /// `hwaddr=` (upper case); none = PVE assigns one and the live one is kept.
    pub mac: Option<String>,
}

/// The `features` tokens the manifest owns (none = not owned).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Features {
    /// `nesting=`.
    pub nesting: Option<bool>,
    /// `keyctl=`.
    pub keyctl: Option<bool>,
    /// `fuse=`.
    pub fuse: Option<bool>,
}

impl Features {
    /// The owned tokens, in PVE's (sorted) order.
    pub fn tokens(&self) -> Vec<(&'static str, bool)> {
        [
            ("fuse", self.fuse),
            ("keyctl", self.keyctl),
            ("nesting", self.nesting),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
    }
}

/// Desired power state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PowerState {
    /// `running` (default).
    Running,
    /// `stopped`.
    Stopped,
}

/// `spec.ha`, with PVE's defaults applied (`max_restart` 1, `max_relocate` 1, `failback`
/// true) and `state` following `spec.state` unless the manifest sets it.
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
    /// PVE's default of `max_restart` and `max_relocate`.
    pub const DEFAULT_TRIES: u64 = 1;
}

/// The requested state of an HA resource (PVE's `enabled` is an alias of `started`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HaState {
    /// HA keeps the container running (restarts, relocates, recovers it).
    Started,
    /// HA keeps the container stopped, and still recovers it to another node.
    Stopped,
    /// HA keeps the container stopped and does not recover it.
    Disabled,
    /// HA leaves the container alone (power requests go straight to it).
    Ignored,
}

impl HaState {
    /// The values `spec.ha.state` takes.
    pub const ALL: &[&str] = &["started", "stopped", "disabled", "ignored"];

    /// PVE's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            HaState::Started => "started",
            HaState::Stopped => "stopped",
            HaState::Disabled => "disabled",
            HaState::Ignored => "ignored",
        }
    }

    /// Read PVE's spelling (`enabled` is `started`; absent is PVE's default, `started`).
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
