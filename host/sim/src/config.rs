//! Simulator configuration: the cluster (nodes, storages, pre-populated LXC ids, PCI and USB mappings), auth token, TLS, task
//! and lock timing, faults and persistence.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::SimError;
use crate::faults::FaultRule;

/// One storage as `storage.cfg` would declare it; it exists on every node unless `nodes` restricts it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StorageConfig {
    /// Storage id, e.g. `local-lvm`.
    pub name: String,
    /// Plugin type: `dir`, `lvmthin`, `lvm`, `zfspool`, `nfs`, `cifs`, `rbd`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// Content types, e.g. `images`, `rootdir`, `iso`, `import`, `vztmpl`, `snippets`.
    pub content: Vec<String>,
    /// Shared storages hold one set of volumes for the whole cluster.
    #[serde(default)]
    pub shared: bool,
    /// Nodes the storage is available on; all nodes when absent.
    #[serde(default)]
    pub nodes: Option<Vec<String>>,
    /// Reported capacity in bytes.
    #[serde(default = "default_capacity")]
    pub total: u64,
}

fn default_capacity() -> u64 {
    1024 * 1024 * 1024 * 1024
}

impl StorageConfig {
    /// A storage with the given id, type and content list, not shared, on all nodes.
    pub fn new(name: &str, kind: &str, content: &[&str]) -> StorageConfig {
        StorageConfig {
            name: name.to_string(),
            kind: kind.to_string(),
            content: content.iter().map(|c| c.to_string()).collect(),
            shared: false,
            nodes: None,
            total: default_capacity(),
        }
    }

    /// True for directory-like (file based) plugins, whose volumes are files with a format suffix.
    pub(crate) fn file_based(&self) -> bool {
        matches!(
            self.kind.as_str(),
            "dir" | "nfs" | "cifs" | "cephfs" | "glusterfs" | "btrfs"
        )
    }

    pub(crate) fn has_content(&self, content: &str) -> bool {
        self.content.iter().any(|c| c == content)
    }

    pub(crate) fn on_node(&self, node: &str) -> bool {
        match &self.nodes {
            Some(list) => list.iter().any(|n| n == node),
            None => true,
        }
    }
}

/// A container present from the start: the simulator gives it PVE's defaults (hostname = `name` or `CT<vmid>`,
/// one core, 512 MiB memory and swap, unprivileged, debian) and an 8 GiB root disk on the first `rootdir` storage.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LxcConfig {
    pub vmid: u32,
    pub node: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub running: bool,
}

/// A volume present from the start, such as a container template (`local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst`)
/// or an ISO (`local:iso/debian-12.iso`). The content type follows from the volume name's directory (`vztmpl/`,
/// `iso/`, `import/`, `snippets/`) and must be one the storage holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VolumeSeed {
    /// `<storage>:<dir>/<file>`.
    pub volid: String,
    /// The node holding it; every node the storage is on when absent (a shared storage holds one copy).
    #[serde(default)]
    pub node: Option<String>,
    /// Size in bytes.
    #[serde(default = "default_seed_size")]
    pub size: u64,
}

fn default_seed_size() -> u64 {
    128 * 1024 * 1024
}

impl VolumeSeed {
    /// A 128 MiB volume on every node its storage is on, e.g. `VolumeSeed::new("local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst")`.
    pub fn new(volid: &str) -> VolumeSeed {
        VolumeSeed {
            volid: volid.to_string(),
            node: None,
            size: default_seed_size(),
        }
    }

    /// The content type named by the volume's directory, `None` for a name without one.
    pub(crate) fn content(&self) -> Option<&'static str> {
        let (_, name) = crate::formats::parse_volume_id(&self.volid)?;
        let dir = name.split_once('/')?.0;
        ["vztmpl", "iso", "import", "snippets"]
            .into_iter()
            .find(|c| *c == dir)
    }
}

/// A PCI resource mapping as `/etc/pve/mapping/pci.cfg` holds it, served by `/cluster/mapping/pci`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PciMapping {
    /// The mapping's name, what `hostpciN: mapping=<id>` refers to.
    pub id: String,
    #[serde(default)]
    pub description: String,
    /// One property string per node and device: `node=pve01,path=0000:01:00.0,id=10de:2204`.
    pub map: Vec<String>,
}

/// A USB resource mapping as `/etc/pve/mapping/usb.cfg` holds it, served by `/cluster/mapping/usb`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UsbMapping {
    /// The mapping's name, what `usbN: mapping=<id>` refers to.
    pub id: String,
    #[serde(default)]
    pub description: String,
    /// One property string per node: `node=pve01,id=0781:5583[,path=1-2]`.
    pub map: Vec<String>,
}

/// Everything needed to start a simulator.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub nodes: Vec<String>,
    pub storages: Vec<StorageConfig>,
    pub lxc: Vec<LxcConfig>,
    /// Volumes present from the start (container templates, ISOs).
    pub volumes: Vec<VolumeSeed>,
    /// Full `USER@REALM!ID=SECRET`; generated (user root@pam, id proxops) when absent.
    pub token: Option<String>,
    pub tls: bool,
    /// How long every task stays `running` (holding its guest's config lock); zero finishes tasks as soon as
    /// possible.
    pub task_duration: Duration,
    /// How long a request waits for a guest's config lock held by a task before it fails with
    /// `can't lock file ... got timeout`: PVE's 10 s by default; creates and clones wait at most 1 s.
    pub lock_timeout: Duration,
    /// API requests each node serves at once (PVE: 3 worker processes); `None` serves every
    /// request at once.
    pub api_workers: Option<usize>,
    /// The least time a request holds its node's API worker (with `api_workers`).
    pub api_handling: Duration,
    /// The time a request for another node's path holds a worker of the entry node (the first)
    /// before it is forwarded, as pveproxy routes it (with `api_workers`; `None`: free).
    pub api_proxy: Option<Duration>,
    /// How long after a VM starts its guest agent answers (`agent/ping`); rounded up to
    /// whole seconds (PVE keeps a guest's start time in seconds).
    pub agent_boot: Duration,
    /// PCI resource mappings (`/cluster/mapping/pci`), seeded into the state where it has none of that id.
    pub pci_mappings: Vec<PciMapping>,
    /// USB resource mappings (`/cluster/mapping/usb`), seeded the same way.
    pub usb_mappings: Vec<UsbMapping>,
    /// How long the HA manager (CRM and LRM) takes to carry out a request: a start, stop, migration or
    /// recovery lands this long after the CRM took it up (PVE: a CRM round is 10 s).
    pub ha_crm_delay: Duration,
    /// How long a node is offline before HA fences it and recovers its HA guests elsewhere (PVE: about two
    /// minutes, the watchdog's 60 s after the node is seen gone).
    pub ha_fence_delay: Duration,
    /// Seeds fault probabilities and generated MACs/UUIDs.
    pub seed: u64,
    pub faults: Vec<FaultRule>,
    pub state_file: Option<PathBuf>,
    pub listen: SocketAddr,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            nodes: vec!["pve01".to_string(), "pve02".to_string()],
            storages: default_storages(),
            lxc: Vec::new(),
            volumes: Vec::new(),
            token: None,
            tls: true,
            task_duration: Duration::ZERO,
            lock_timeout: Duration::from_secs(10),
            api_workers: None,
            api_handling: Duration::ZERO,
            api_proxy: None,
            agent_boot: Duration::ZERO,
            pci_mappings: Vec::new(),
            usb_mappings: Vec::new(),
            ha_crm_delay: Duration::from_millis(300),
            ha_fence_delay: Duration::from_secs(2),
            seed: 0,
            faults: Vec::new(),
            state_file: None,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        }
    }
}

/// `local` (dir: iso, import, vztmpl, snippets) and `local-lvm` (lvmthin: images, rootdir).
pub fn default_storages() -> Vec<StorageConfig> {
    vec![
        StorageConfig::new(
            "local",
            "dir",
            &["iso", "import", "vztmpl", "snippets", "backup"],
        ),
        StorageConfig::new("local-lvm", "lvmthin", &["images", "rootdir"]),
    ]
}

/// The YAML shape accepted by [`SimConfig::from_yaml_str`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterYaml {
    #[serde(default)]
    nodes: Option<Vec<String>>,
    #[serde(default)]
    storages: Option<Vec<StorageConfig>>,
    #[serde(default)]
    lxc: Vec<LxcConfig>,
    #[serde(default)]
    volumes: Vec<VolumeSeed>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    task_duration_ms: Option<u64>,
    #[serde(default)]
    lock_timeout_ms: Option<u64>,
    #[serde(default)]
    api_workers: Option<usize>,
    #[serde(default)]
    api_handling_ms: Option<u64>,
    #[serde(default)]
    api_proxy_ms: Option<u64>,
    #[serde(default)]
    agent_boot_ms: Option<u64>,
    #[serde(default)]
    pci_mappings: Vec<PciMapping>,
    #[serde(default)]
    usb_mappings: Vec<UsbMapping>,
    #[serde(default)]
    ha_crm_delay_ms: Option<u64>,
    #[serde(default)]
    ha_fence_delay_ms: Option<u64>,
    #[serde(default)]
    faults: Vec<FaultRule>,
}

impl SimConfig {
    /// Reads the small cluster YAML:
    ///
    /// ```yaml
    /// nodes: [pve01, pve02]
    /// storages:
    ///   - {name: local, type: dir, content: [iso, import, vztmpl, snippets]}
    ///   - {name: local-lvm, type: lvmthin, content: [images, rootdir]}
    /// lxc:
    ///   - {vmid: 200, node: pve01, name: ct200}
    /// volumes:
    ///   - {volid: "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"}
    ///   - {volid: "local:iso/debian-12.iso", node: pve01, size: 658505728}
    /// seed: 7
    /// task_duration_ms: 50
    /// lock_timeout_ms: 10000
    /// api_workers: 3          # requests each node serves at once (off when absent)
    /// api_handling_ms: 5      # the least time each takes in its worker
    /// api_proxy_ms: 1         # an entry-node worker's time on a request for another node
    /// agent_boot_ms: 2000     # a started VM's guest agent answers after this long
    /// pci_mappings:
    ///   - {id: gpu, map: ["node=pve01,path=0000:01:00.0,id=10de:2204"]}
    /// usb_mappings:
    ///   - {id: stick, map: ["node=pve01,id=0781:5583"]}
    /// ha_crm_delay_ms: 300    # how long HA takes to carry out a request
    /// ha_fence_delay_ms: 2000 # how long a node is offline before HA recovers its guests
    /// ```
    ///
    /// Absent keys keep the [`Default`] values.
    pub fn from_yaml_str(text: &str) -> Result<SimConfig, SimError> {
        let y: ClusterYaml =
            serde_yaml::from_str(text).map_err(|e| SimError::Config(e.to_string()))?;
        let mut c = SimConfig::default();
        if let Some(nodes) = y.nodes {
            if nodes.is_empty() {
                return Err(SimError::Config("nodes must not be empty".into()));
            }
            c.nodes = nodes;
        }
        if let Some(storages) = y.storages {
            c.storages = storages;
        }
        for ct in &y.lxc {
            if !c.nodes.contains(&ct.node) {
                return Err(SimError::Config(format!(
                    "lxc {} is on unknown node '{}'",
                    ct.vmid, ct.node
                )));
            }
        }
        c.lxc = y.lxc;
        c.volumes = y.volumes;
        c.check_volumes()?;
        if let Some(seed) = y.seed {
            c.seed = seed;
        }
        if let Some(ms) = y.task_duration_ms {
            c.task_duration = Duration::from_millis(ms);
        }
        if let Some(ms) = y.lock_timeout_ms {
            c.lock_timeout = Duration::from_millis(ms);
        }
        c.api_workers = y.api_workers;
        if let Some(ms) = y.api_handling_ms {
            c.api_handling = Duration::from_millis(ms);
        }
        c.api_proxy = y.api_proxy_ms.map(Duration::from_millis);
        if let Some(ms) = y.agent_boot_ms {
            c.agent_boot = Duration::from_millis(ms);
        }
        c.pci_mappings = y.pci_mappings;
        c.usb_mappings = y.usb_mappings;
        if let Some(ms) = y.ha_crm_delay_ms {
            c.ha_crm_delay = Duration::from_millis(ms);
        }
        if let Some(ms) = y.ha_fence_delay_ms {
            c.ha_fence_delay = Duration::from_millis(ms);
        }
        c.faults = y.faults;
        Ok(c)
    }
}

impl SimConfig {
    /// Checks the declared volumes: a storage that exists, holds their content type and is file based (where PVE
    /// keeps templates and ISOs), on a known node.
    pub(crate) fn check_volumes(&self) -> Result<(), SimError> {
        for v in &self.volumes {
            let what = format!("volume '{}'", v.volid);
            let Some((storage, _)) = crate::formats::parse_volume_id(&v.volid) else {
                return Err(SimError::Config(format!(
                    "{what}: not a volume id; write <storage>:<dir>/<file>, e.g. local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
                )));
            };
            let Some(content) = v.content() else {
                return Err(SimError::Config(format!(
                    "{what}: the name must start with vztmpl/, iso/, import/ or snippets/"
                )));
            };
            let Some(s) = self.storages.iter().find(|s| s.name == storage) else {
                return Err(SimError::Config(format!(
                    "{what}: no storage '{storage}' in the cluster; declare it under storages:"
                )));
            };
            if !s.file_based() || !s.has_content(content) {
                return Err(SimError::Config(format!(
                    "{what}: storage '{storage}' does not hold content type '{content}'; add it to its content list (a file based storage)"
                )));
            }
            if let Some(node) = &v.node
                && (!self.nodes.contains(node) || !s.on_node(node))
            {
                return Err(SimError::Config(format!(
                    "{what}: storage '{storage}' is not on node '{node}'"
                )));
            }
        }
        Ok(())
    }
}
