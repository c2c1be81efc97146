//! The simulated cluster's state (VMs, containers, volumes, tasks) and its atomic persistence to a JSON file.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::SimError;
use crate::config::{LxcConfig, StorageConfig, VolumeSeed};
use crate::hashes::sha1_hex;

/// Seconds since the epoch.
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// One guest, a qemu VM or a container: its config file (current section, `[PENDING]` section) and power state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Vm {
    pub node: String,
    /// The applied config, values as PVE's config file holds them (no `digest`).
    pub conf: BTreeMap<String, String>,
    /// `[PENDING]` values.
    #[serde(default)]
    pub pending: BTreeMap<String, String>,
    /// `[PENDING]` deletes, value = force.
    #[serde(default)]
    pub pending_delete: BTreeMap<String, bool>,
    #[serde(default)]
    pub running: bool,
    #[serde(default)]
    pub started_at: u64,
    #[serde(default)]
    pub pid: u32,
    /// Paused by `status/suspend` (QEMU's `stop`): still running, `qmpstatus: paused`.
    #[serde(default)]
    pub paused: bool,
}

impl Vm {
    /// A stopped guest on `node` with config `conf` and nothing pending.
    pub(crate) fn stopped(node: &str, conf: BTreeMap<String, String>) -> Vm {
        Vm {
            node: node.to_string(),
            conf,
            pending: BTreeMap::new(),
            pending_delete: BTreeMap::new(),
            running: false,
            started_at: 0,
            pid: 0,
            paused: false,
        }
    }

    /// `running` or `stopped`, as PVE's status reports it.
    pub(crate) fn status(&self) -> &'static str {
        if self.running { "running" } else { "stopped" }
    }

    /// Drops pending values equal to the applied ones (PVE's `cleanup_pending`).
    pub(crate) fn drop_unchanged_pending(&mut self) {
        let conf = &self.conf;
        self.pending.retain(|k, v| conf.get(k) != Some(v));
    }

    /// The config file text (description as comments, sorted keys, then `[PENDING]`), whose SHA-1 is the digest.
    pub(crate) fn config_text(&self) -> String {
        let mut out = String::new();
        if let Some(d) = self.conf.get("description") {
            for line in d.lines() {
                out.push('#');
                out.push_str(line);
                out.push('\n');
            }
        }
        let entry = |out: &mut String, k: &str, v: &str| {
            out.push_str(k);
            out.push_str(": ");
            out.push_str(v);
            out.push('\n');
        };
        for (k, v) in &self.conf {
            if k != "description" {
                entry(&mut out, k, v);
            }
        }
        if !self.pending.is_empty() || !self.pending_delete.is_empty() {
            out.push_str("\n[PENDING]\n");
            for (k, v) in &self.pending {
                entry(&mut out, k, v);
            }
            if !self.pending_delete.is_empty() {
                let list: Vec<String> = self
                    .pending_delete
                    .iter()
                    .map(|(k, force)| if *force { format!("!{k}") } else { k.clone() })
                    .collect();
                out.push_str(&format!("delete: {}\n", list.join(",")));
            }
        }
        out
    }

    pub(crate) fn digest(&self) -> String {
        sha1_hex(self.config_text().as_bytes())
    }

    pub(crate) fn lock(&self) -> Option<&str> {
        self.conf.get("lock").map(String::as_str)
    }

    pub(crate) fn is_template(&self) -> bool {
        self.conf.get("template").is_some_and(|t| t == "1")
    }

    /// The config with pending values merged in and pending deletes removed (GET config without `current`).
    pub(crate) fn merged(&self) -> BTreeMap<String, String> {
        let mut m = self.conf.clone();
        for (k, v) in &self.pending {
            m.insert(k.clone(), v.clone());
        }
        for k in self.pending_delete.keys() {
            m.remove(k);
        }
        m
    }

    /// Memory in MiB from `memory` (`[current=]<int>`), default 512.
    pub(crate) fn memory_mib(&self) -> u64 {
        let Some(m) = self.conf.get("memory") else {
            return 512;
        };
        let v = m
            .split(',')
            .find_map(|p| match p.split_once('=') {
                Some(("current", v)) => Some(v),
                Some(_) => None,
                None => Some(p),
            })
            .unwrap_or("512");
        v.parse().unwrap_or(512)
    }

    /// `cores * sockets`, or `vcpus` when set.
    pub(crate) fn cpus(&self) -> u64 {
        if let Some(v) = self.conf.get("vcpus").and_then(|v| v.parse().ok()) {
            return v;
        }
        let cores: u64 = self
            .conf
            .get("cores")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        let sockets: u64 = self
            .conf
            .get("sockets")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        cores * sockets
    }
}

/// One storage volume.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Volume {
    pub volid: String,
    pub storage: String,
    /// Node holding the volume, `*` on shared storages.
    pub node: String,
    pub size: u64,
    pub format: String,
    /// Content type: images, rootdir, iso, import, vztmpl, snippets.
    pub content: String,
    #[serde(default)]
    pub vmid: Option<u32>,
    pub ctime: u64,
    #[serde(default)]
    pub parent: Option<String>,
    /// Virtual size of an import image (qcow2 header), when it differs from the file size.
    #[serde(default)]
    pub virtual_size: Option<u64>,
}

/// A container as an older state file held it (before containers had a config): name and power state only.
#[derive(Debug, Clone, Deserialize)]
struct LegacyLxc {
    node: String,
    name: String,
    #[serde(default)]
    running: bool,
}

/// A container entry of a state file: a full config, or the legacy stub.
#[derive(Deserialize)]
#[serde(untagged)]
enum LxcEntry {
    Full(Vm),
    Legacy(LegacyLxc),
}

/// Reads the `lxc` map, turning legacy stubs into containers with a default config.
fn lxc_compat<'de, D>(de: D) -> Result<BTreeMap<u32, Vm>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let entries: BTreeMap<u32, LxcEntry> = Deserialize::deserialize(de)?;
    Ok(entries
        .into_iter()
        .map(|(vmid, e)| match e {
            LxcEntry::Full(ct) => (vmid, ct),
            LxcEntry::Legacy(l) => (vmid, seeded_ct(vmid, &l.node, &l.name, l.running, None)),
        })
        .collect())
}

/// A container as the cluster YAML (or an older state file) declares it: PVE's defaults for what a template
/// would have set, with an 8 GiB root disk on `rootfs_storage` when one is given.
pub(crate) fn seeded_ct(
    vmid: u32,
    node: &str,
    name: &str,
    running: bool,
    rootfs_storage: Option<&str>,
) -> Vm {
    let mut conf = BTreeMap::new();
    for (k, v) in [
        ("arch", "amd64"),
        ("cores", "1"),
        ("hostname", name),
        ("memory", "512"),
        ("ostype", "debian"),
        ("swap", "512"),
        ("unprivileged", "1"),
    ] {
        conf.insert(k.to_string(), v.to_string());
    }
    if let Some(s) = rootfs_storage {
        conf.insert("rootfs".into(), format!("{s}:vm-{vmid}-disk-0,size=8G"));
    }
    let mut ct = Vm::stopped(node, conf);
    if running {
        ct.running = true;
        ct.started_at = now();
    }
    ct
}

/// One worker task.
#[derive(Debug, Clone)]
pub(crate) struct Task {
    pub upid: String,
    pub node: String,
    pub pid: u32,
    pub pstart: u32,
    pub starttime: u64,
    pub kind: String,
    pub id: String,
    /// Full auth id (`root@pam!proxops` for tokens).
    pub user: String,
    pub log: Vec<String>,
    /// `None` while running.
    pub exitstatus: Option<String>,
    /// When the task stopped (seconds since the epoch).
    pub endtime: Option<u64>,
    /// Order of stopping, for the archive listing (newest first).
    pub end_seq: u64,
}

/// Everything that changes while the simulator runs.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct State {
    pub vms: BTreeMap<u32, Vm>,
    /// Containers; their configs use PVE's LXC keys (`hostname`, `rootfs`, `mpN`, ...).
    #[serde(default, deserialize_with = "lxc_compat")]
    pub lxc: BTreeMap<u32, Vm>,
    /// Keyed by `node\tvolid` (`*` for shared storages).
    pub volumes: BTreeMap<String, Volume>,
    /// The HA manager's configs and status.
    #[serde(default)]
    pub ha: crate::ha::HaState,
    /// Resource pools (`user.cfg`'s `pool:` lines) by id; absent from the state file while there are none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pools: BTreeMap<String, crate::pools::Pool>,
    /// PCI and USB resource mappings (`mapping/{pci,usb}.cfg`); absent from the state file while there are none.
    #[serde(default, skip_serializing_if = "crate::mapping::Mappings::is_empty")]
    pub mappings: crate::mapping::Mappings,
    /// Backup jobs (`jobs.cfg`'s `vzdump` sections) by id; absent from the state file while there are none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub backups: BTreeMap<String, crate::backup::Job>,
    /// The backup jobs' ids in the order they were created (`jobs.cfg`'s section order, which the listing keeps).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backup_ids: Vec<String>,
    /// Guest firewall files and the cluster file's groups, aliases and ipsets; absent from the state file while
    /// there are none.
    #[serde(default, skip_serializing_if = "crate::firewall::Firewall::is_empty")]
    pub firewall: crate::firewall::Firewall,
    /// Users, groups, roles, ACL entries and API tokens (`user.cfg`, `priv/token.cfg`); absent from the state file
    /// while there are none.
    #[serde(default, skip_serializing_if = "crate::access::Access::is_empty")]
    pub access: crate::access::Access,
    /// Nodes taken offline through the control API (`Simulator::set_node_online`).
    #[serde(default)]
    pub offline_nodes: std::collections::BTreeSet<String>,
    #[serde(default)]
    pub pid_counter: u32,
    #[serde(default)]
    pub rng_draws: u64,
    #[serde(skip)]
    pub tasks: HashMap<String, Task>,
    /// Tasks stopped so far (numbers [`Task::end_seq`]).
    #[serde(skip)]
    pub tasks_ended: u64,
    #[serde(skip, default = "default_rng")]
    pub rng: ChaCha8Rng,
    /// Bumped on every mutation; persistence writes only newer generations.
    #[serde(skip)]
    pub generation: u64,
}

fn default_rng() -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(0)
}

impl State {
    /// The backup jobs in `jobs.cfg`'s order.
    pub(crate) fn backup_order(&self) -> Vec<(&str, &crate::backup::Job)> {
        self.backup_ids
            .iter()
            .filter_map(|id| self.backups.get(id).map(|j| (id.as_str(), j)))
            .collect()
    }

    /// A new backup job, last in `jobs.cfg`.
    pub(crate) fn insert_backup(&mut self, id: String, job: crate::backup::Job) {
        self.backup_ids.retain(|i| *i != id);
        self.backup_ids.push(id.clone());
        self.backups.insert(id, job);
    }

    pub(crate) fn new(seed: u64) -> State {
        State {
            vms: BTreeMap::new(),
            lxc: BTreeMap::new(),
            volumes: BTreeMap::new(),
            ha: crate::ha::HaState::default(),
            pools: BTreeMap::new(),
            mappings: crate::mapping::Mappings::default(),
            backups: BTreeMap::new(),
            backup_ids: Vec::new(),
            firewall: crate::firewall::Firewall::default(),
            access: crate::access::Access::default(),
            offline_nodes: std::collections::BTreeSet::new(),
            pid_counter: 0,
            rng_draws: 0,
            tasks: HashMap::new(),
            tasks_ended: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            generation: 0,
        }
    }

    /// Adds the declared containers, each with its root disk on the first storage holding `rootdir` content on its
    /// node (no disk when there is none).
    pub(crate) fn add_lxc(&mut self, lxc: &[LxcConfig], storages: &[StorageConfig]) {
        for ct in lxc {
            let name = ct.name.clone().unwrap_or_else(|| format!("CT{}", ct.vmid));
            let storage = storages
                .iter()
                .find(|s| s.has_content("rootdir") && s.on_node(&ct.node));
            let seeded = seeded_ct(
                ct.vmid,
                &ct.node,
                &name,
                ct.running,
                storage.map(|s| s.name.as_str()),
            );
            if let Some(s) = storage {
                let volid = format!("{}:vm-{}-disk-0", s.name, ct.vmid);
                self.volumes.insert(
                    volume_key(s, &ct.node, &volid),
                    Volume {
                        volid,
                        storage: s.name.clone(),
                        node: if s.shared {
                            "*".into()
                        } else {
                            ct.node.clone()
                        },
                        size: 8 * 1024 * 1024 * 1024,
                        format: "raw".into(),
                        content: "rootdir".into(),
                        vmid: Some(ct.vmid),
                        ctime: now(),
                        parent: None,
                        virtual_size: None,
                    },
                );
            }
            self.lxc.insert(ct.vmid, seeded);
        }
    }

    /// Adds the declared volumes (`volumes:` in the cluster YAML) that are not there yet, on every node the
    /// storage is on (once for a shared storage).
    pub(crate) fn add_volumes(
        &mut self,
        seeds: &[VolumeSeed],
        storages: &[StorageConfig],
        nodes: &[String],
    ) {
        for seed in seeds {
            let Some((storage, name)) = crate::formats::parse_volume_id(&seed.volid) else {
                continue;
            };
            let Some(s) = storages.iter().find(|s| s.name == storage) else {
                continue;
            };
            let content = seed.content().unwrap_or("images").to_string();
            let format = match content.as_str() {
                "vztmpl" => crate::formats::vztmpl_format(name),
                _ => name.rsplit('.').next().unwrap_or("raw").to_string(),
            };
            let on: Vec<String> = match &seed.node {
                Some(n) => vec![n.clone()],
                None => nodes.iter().filter(|n| s.on_node(n)).cloned().collect(),
            };
            for node in on {
                let key = volume_key(s, &node, &seed.volid);
                if self.volumes.contains_key(&key) {
                    continue;
                }
                self.volumes.insert(
                    key,
                    Volume {
                        volid: seed.volid.clone(),
                        storage: s.name.clone(),
                        node: if s.shared { "*".into() } else { node.clone() },
                        size: seed.size,
                        format: format.clone(),
                        content: content.clone(),
                        vmid: None,
                        ctime: now(),
                        parent: None,
                        virtual_size: None,
                    },
                );
            }
        }
    }

    /// Loads a persisted state; the RNG continues from a seed derived from the draws so far.
    pub(crate) fn load(path: &Path, seed: u64) -> Result<State, SimError> {
        let text =
            std::fs::read(path).map_err(|e| SimError::State(format!("{}: {e}", path.display())))?;
        let mut s: State = serde_json::from_slice(&text)
            .map_err(|e| SimError::State(format!("{}: {e}", path.display())))?;
        s.rng = ChaCha8Rng::seed_from_u64(seed ^ s.rng_draws.rotate_left(17));
        Ok(s)
    }

    pub(crate) fn touch(&mut self) {
        self.generation += 1;
    }

    /// A random MAC with PVE's default prefix BC:24:11, upper-case.
    pub(crate) fn random_mac(&mut self) -> String {
        self.rng_draws += 1;
        let b: [u8; 3] = self.rng.random();
        format!("BC:24:11:{:02X}:{:02X}:{:02X}", b[0], b[1], b[2])
    }

    /// A random version-4 UUID, lower-case.
    pub(crate) fn random_uuid(&mut self) -> String {
        self.rng_draws += 1;
        let mut b: [u8; 16] = self.rng.random();
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h = hex::encode(b);
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }

    pub(crate) fn next_pid(&mut self) -> u32 {
        self.pid_counter += 1;
        0x1000 + self.pid_counter
    }

    /// The node a VMID is used on and whether it is a VM (`true`) or a container.
    pub(crate) fn vmid_owner(&self, vmid: u32) -> Option<(String, bool)> {
        if let Some(vm) = self.vms.get(&vmid) {
            return Some((vm.node.clone(), true));
        }
        self.lxc.get(&vmid).map(|c| (c.node.clone(), false))
    }
}

/// The volume map key for a volume id on a node and storage.
pub(crate) fn volume_key(storage: &StorageConfig, node: &str, volid: &str) -> String {
    if storage.shared {
        format!("*\t{volid}")
    } else {
        format!("{node}\t{volid}")
    }
}

/// Writes state files atomically: temp file, fsync, rename, fsync of the directory.
pub(crate) struct Persister {
    path: Option<PathBuf>,
    written: std::sync::Mutex<u64>,
}

impl Persister {
    pub(crate) fn new(path: Option<PathBuf>) -> Persister {
        Persister {
            path,
            written: std::sync::Mutex::new(0),
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.path.is_some()
    }

    /// Writes `bytes` (state at `generation`) unless a newer generation is already on disk.
    pub(crate) fn write(&self, generation: u64, bytes: &[u8]) -> Result<(), SimError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if *written > generation {
            return Ok(());
        }
        write_atomic(path, bytes)?;
        *written = generation;
        Ok(())
    }
}

/// Replaces `path` with `bytes` so that a crash leaves either the old or the new content.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), SimError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| SimError::State(format!("{}: {e}", dir.display())))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "state".to_string());
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let err = |e: std::io::Error| SimError::State(format!("{}: {e}", tmp.display()));
    {
        let mut f = std::fs::File::create(&tmp).map_err(err)?;
        f.write_all(bytes).map_err(err)?;
        f.sync_all().map_err(err)?;
    }
    std::fs::rename(&tmp, path).map_err(|e| SimError::State(format!("{}: {e}", path.display())))?;
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
