//! A PVE 9.2 simulator: a fault-injectable stand-in for a Proxmox VE cluster that behaves like PVE on the wire.
//!
//! Start it in-process with [`start`] (tests, the `sim:` endpoint) or run it with [`serve`] (`proxops sim serve`).
//! The API lives under `/api2/json` with PVE's paths, parameters (validated against an embedded copy of PVE's
//! own schema), envelopes, status codes and error bodies. Authentication is by API token only:
//! `Authorization: PVEAPIToken=USER@REALM!ID=SECRET`; anything else gets PVE's 401.
//!
//! Served endpoints (everything else answers 501 `Method '<M> <path>' not implemented`) are listed in
//! `schema/served.txt`: `/` and the indexes below it (each listing only served children), `/version`,
//! `/cluster/{resources,nextid,tasks,status}`, `/cluster/mapping` with `pci[/{id}]` and `usb[/{id}]` (`mapping`:
//! full CRUD), `/cluster/backup[/{id}]` (`backup`: full CRUD), `/pools` and `/pools/{poolid}` (`pools`: full
//! CRUD), `/nodes`, `/nodes/{node}/qemu` (GET,
//! POST), `/nodes/{node}/qemu/{vmid}` (GET, DELETE), `.../config` (GET, POST, PUT), `.../pending`,
//! `.../snapshot` (GET: the `current` entry alone), `.../unlink`,
//! `.../clone`, `.../template`, `.../status/{current,start,stop,shutdown,reboot,reset,suspend,resume}`,
//! `.../resize`, `/nodes/{node}/tasks` and `/nodes/{node}/tasks/{upid}` with its `status` and `log`,
//! `/nodes/{node}/storage`, `.../storage/{storage}/status`, `.../content` (GET), `.../content/{volume}` (DELETE),
//! `.../download-url` (POST), `/nodes/{node}/lxc` (GET, read-only) and the storage configuration, `/storage` and
//! `/storage/{storage}` (GET).
//!
//! Guests are serialised as PVE's per-guest config flock does: every task on a guest takes its lock (shared for a
//! clone's stopped source) and holds it for the task duration; a synchronous config write waits for it (PVE's
//! 10 s, [`SimConfig::lock_timeout`]) or fails with `can't lock file ... got timeout`; a `digest` is checked
//! again under the lock, when the write is applied.
//!
//! Admin endpoints outside `/api2`, behind the same token, answering plain JSON `{"data": ...}`:
//! - `GET /_sim/requests`: the request log, a list of [`RequestRecord`].
//! - `DELETE /_sim/requests`: clears the log.
//! - `GET /_sim/counters`: requests per endpoint, keyed `"METHOD /path/{template}"`.
//! - `GET /_sim/faults` / `PUT /_sim/faults`: the fault rules, a JSON list of [`FaultRule`].
//! - `GET /_sim/state`: the whole simulated state (VMs, containers, volumes) as persisted.
//! - `GET /_sim/nodes`: each node's `online` and `maintenance` flags and HA state.
//! - `PUT /_sim/nodes/<node>`: `{"online": false}` takes a node offline (`true` brings it back),
//!   `{"maintenance": true}` puts it in HA maintenance ([`Simulator::set_node_online`],
//!   [`Simulator::set_node_maintenance`]).
//!
//! The HA manager is modelled (`ha`): `/cluster/ha/{resources,rules,status}`, `hastate` in `/cluster/resources`,
//! power and migrate requests on an HA-managed guest answered with `hastart`/`hastop`/`hamigrate` tasks, and a CRM
//! loop that carries requests out after [`SimConfig::ha_crm_delay`], fences an offline node after
//! [`SimConfig::ha_fence_delay`] and recovers its guests following the rules. Migration (`migrate`) moves a guest's
//! config and its local volumes to another node.
//!
//! Resource pools (`pools`) hold guests and storages: a guest created or cloned with `pool=` joins its pool, a
//! destroyed one leaves it, and `/cluster/resources` lists the pools first and the `pool` of member guests.
//! PCI and USB resource mappings (`mapping`) are seeded from [`SimConfig::pci_mappings`] and
//! [`SimConfig::usb_mappings`] and managed through the API; `hostpciN`/`usbN` `mapping=` names resolve against
//! them at start and in the migration checks.

mod access;
mod api;
mod backup;
mod cluster;
mod config;
mod faults;
mod firewall;
mod formats;
mod grammar;
mod ha;
mod hashes;
mod lxc;
mod mapping;
mod migrate;
mod pools;
mod qemu;
mod schema;
mod server;
mod sim;
mod state;
mod storage;
mod storage_cfg;
mod tasks;
mod workers;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

pub use config::{
    LxcConfig, PciMapping, SimConfig, StorageConfig, UsbMapping, VolumeSeed, default_storages,
};
pub use faults::{FaultKind, FaultPlan, FaultPlanError, FaultRule, INJECTED_TASK_FAILURE};
pub use workers::Connections;

use crate::faults::FaultEngine;
use crate::sim::Sim;
use crate::state::{Persister, State};

/// Errors starting or running the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("invalid simulator configuration: {0}")]
    Config(String),
    #[error("simulator state file: {0}")]
    State(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("TLS setup failed: {0}")]
    Tls(String),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("{file}: no VM {vmid} in the simulator state")]
    NoSuchGuest { file: String, vmid: u32 },
    #[error("no node '{0}' in the simulated cluster")]
    NoSuchNode(String),
}

/// One request as the simulator saw it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RequestRecord {
    pub seq: u64,
    pub method: String,
    /// Path below `/api2/json`, decoded, e.g. `/nodes/pve01/qemu/100/config`; a request
    /// outside it (answered 501) is logged by its whole decoded path, e.g. `/access/users`.
    pub path: String,
    /// Body parameters then query parameters, in order.
    pub params: Vec<(String, String)>,
    /// HTTP status answered; 0 when the connection was reset by a fault.
    pub status: u16,
    /// When the request arrived, in microseconds since the UNIX epoch: orders the requests of
    /// several simulators (each numbers its own in `seq`).
    #[serde(default)]
    pub received_us: u64,
}

impl RequestRecord {
    /// True for anything but GET.
    pub fn is_mutating(&self) -> bool {
        self.method != "GET"
    }
}

/// Generates the simulator's trimmed schema (`host/sim/schema/pve-api-sim.json`) from the text of the vendored
/// PVE API schema (`vendor/pve-api-schema/pve-api-schema.json`): the served endpoints only, documentation
/// keys dropped. `cargo run -p proxops-sim --example regen-schema` writes it.
pub fn trimmed_schema(full_schema: &str) -> Result<String, SimError> {
    let full: serde_json::Value = serde_json::from_str(full_schema)
        .map_err(|e| SimError::Config(format!("PVE API schema: {e}")))?;
    schema::trimmed(&full).map_err(SimError::Config)
}

/// True when the simulator state in `state_file` holds guest `vmid`, a VM or a container.
pub fn state_has_vm(state_file: &std::path::Path, vmid: u32) -> Result<bool, SimError> {
    let state = State::load(state_file, 0)?;
    Ok(state.vms.contains_key(&vmid) || state.lxc.contains_key(&vmid))
}

/// Clears guest `vmid`'s config lock (`lock: create|clone|destroyed|...`) in a simulator state file, as
/// `qm unlock <vmid>` (or `pct unlock` for a container) does on PVE: the repair for a lock left by a task that never finished (a simulator
/// stopped mid-task). Returns the lock removed, `None` when the VM was not locked (nothing is written).
/// The state must not be in use by a running simulator, which would overwrite the change.
pub fn unlock(state_file: &std::path::Path, vmid: u32) -> Result<Option<String>, SimError> {
    let mut state = State::load(state_file, 0)?;
    let guest = match state.vms.get_mut(&vmid) {
        Some(vm) => Some(vm),
        None => state.lxc.get_mut(&vmid),
    };
    let Some(vm) = guest else {
        return Err(SimError::NoSuchGuest {
            file: state_file.display().to_string(),
            vmid,
        });
    };
    let Some(previous) = vm.conf.remove("lock") else {
        return Ok(None);
    };
    let bytes = serde_json::to_vec(&state)
        .map_err(|e| SimError::State(format!("{}: {e}", state_file.display())))?;
    state::write_atomic(state_file, &bytes)?;
    Ok(Some(previous))
}

/// Installs ring as the process-wide rustls crypto provider if none is installed yet.
pub fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// A running simulator; shut down with [`Simulator::shutdown`] or by dropping it.
pub struct Simulator {
    sim: Arc<Sim>,
    base_url: String,
    token: String,
    fingerprint: Option<String>,
    stop: watch::Sender<bool>,
    addr: SocketAddr,
    /// The thread running the simulator's runtime ([`start`]); joined on shutdown so that
    /// the state file holds the last change before the caller goes on (or exits).
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl Simulator {
    /// `https://127.0.0.1:PORT` (or `http://` with TLS off); clients append `/api2/json`.
    pub fn base_url(&self) -> String {
        self.base_url.clone()
    }

    /// The socket address the simulator listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The full API token, `USER@REALM!ID=SECRET`.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// SHA-256 of the certificate (DER), upper-case hex bytes joined by `:`; `None` over plain HTTP.
    pub fn fingerprint(&self) -> Option<String> {
        self.fingerprint.clone()
    }

    /// The request log.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.sim
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn clear_requests(&self) {
        self.sim
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Requests per endpoint, keyed `"METHOD /path/{template}"`.
    pub fn counters(&self) -> BTreeMap<String, u64> {
        self.sim
            .counters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the fault rules (their trigger counts restart).
    pub fn set_faults(&self, rules: Vec<FaultRule>) {
        self.sim
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set(rules);
    }

    /// The current (applied) config of a VM as PVE's config file holds it, `digest` excluded.
    pub fn vm_config(&self, vmid: u32) -> Option<BTreeMap<String, String>> {
        self.sim.read().vms.get(&vmid).map(|vm| vm.conf.clone())
    }

    /// The most API requests `node` served at once so far (0 unless `api_workers` is set).
    pub fn api_most_at_once(&self, node: &str) -> usize {
        self.sim.workers.most_at_once(node)
    }

    /// How many requests the entry node proxied to another node so far (0 unless
    /// `api_workers` is set).
    pub fn api_proxied(&self) -> usize {
        self.sim.workers.proxied()
    }

    /// The client connections accepted so far and the most open at once: what a pveproxy
    /// would count against its connection limit.
    pub fn connections(&self) -> Connections {
        self.sim.connections.counts()
    }

    /// `running` or `stopped`.
    pub fn vm_status(&self, vmid: u32) -> Option<String> {
        self.sim
            .read()
            .vms
            .get(&vmid)
            .map(|vm| vm.status().to_string())
    }

    /// Takes a node offline (`false`) or brings it back (`true`), as a power or network failure would: while it is
    /// offline, requests for `/nodes/<node>/...` fail as pveproxy's do for an unreachable node (595), and
    /// `/cluster/resources` shows it `offline` and its guests `unknown`; after `ha_fence_delay` HA fences it and
    /// recovers its HA-managed guests to other nodes. Non-HA guests stay on it.
    pub fn set_node_online(&self, node: &str, online: bool) -> Result<(), SimError> {
        self.sim.set_node_online(node, online)
    }

    /// Puts a node in HA maintenance (`ha-manager crm-command node-maintenance enable <node>`: PVE 9 has no API
    /// endpoint for it) or takes it out: HA guests move away while it lasts and come back after (`failback`).
    pub fn set_node_maintenance(&self, node: &str, maintenance: bool) -> Result<(), SimError> {
        self.sim.set_node_maintenance(node, maintenance)
    }

    /// The node a guest (VM or container) is on now.
    pub fn guest_node(&self, vmid: u32) -> Option<String> {
        self.sim.read().vmid_owner(vmid).map(|(node, _)| node)
    }

    /// The HA manager's service entry of a sid (`vm:100`), as `manager_status` holds it.
    pub fn ha_service(&self, sid: &str) -> Option<serde_json::Value> {
        let st = self.sim.read();
        st.ha
            .services
            .get(sid)
            .and_then(|s| serde_json::to_value(s).ok())
    }

    /// The pool guest `vmid` belongs to (`user.cfg`'s record), if any.
    pub fn guest_pool(&self, vmid: u32) -> Option<String> {
        crate::pools::pool_of(&self.sim.read(), vmid).map(str::to_string)
    }

    /// The ids of the resource pools, sorted.
    pub fn pools(&self) -> Vec<String> {
        self.sim.read().pools.keys().cloned().collect()
    }

    /// The `map` entries of PCI mapping `id`, `None` when there is no such mapping.
    pub fn pci_mapping(&self, id: &str) -> Option<Vec<String>> {
        self.sim.read().mappings.pci.get(id).map(|m| m.map.clone())
    }

    /// The `map` entries of USB mapping `id`, `None` when there is no such mapping.
    pub fn usb_mapping(&self, id: &str) -> Option<Vec<String>> {
        self.sim.read().mappings.usb.get(id).map(|m| m.map.clone())
    }

    /// The current (applied) config of a container as PVE's config file holds it, `digest` excluded.
    pub fn ct_config(&self, vmid: u32) -> Option<BTreeMap<String, String>> {
        self.sim.read().lxc.get(&vmid).map(|ct| ct.conf.clone())
    }

    /// A container's `running` or `stopped`.
    pub fn ct_status(&self, vmid: u32) -> Option<String> {
        self.sim
            .read()
            .lxc
            .get(&vmid)
            .map(|ct| ct.status().to_string())
    }

    /// The whole simulated state as `GET /_sim/state` and the state file hold it.
    pub fn state_json(&self) -> serde_json::Value {
        serde_json::to_value(&*self.sim.read()).unwrap_or_default()
    }

    /// Number of VMs in the cluster.
    pub fn vm_count(&self) -> usize {
        self.sim.read().vms.len()
    }

    /// Adds `count` stopped VMs (one 8G disk each, ids from 100, spread over the nodes) without going through the API.
    /// Meant for scale measurements; tests of behaviour use the API.
    pub fn populate(&self, count: u32) {
        let mut st = self.sim.write();
        crate::sim::populate_for_scale(&mut st, &self.sim.nodes, count);
    }

    /// Stops accepting connections, closes open ones and, for a simulator from [`start`],
    /// waits until its state is written: a task that finished just before is not lost.
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn generate_secret() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    let b: [u8; 16] = rng.random();
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

/// Splits `USER@REALM!ID=SECRET` on the last `=`, checking the token-id grammar.
fn parse_token(token: &str) -> Result<(String, String), SimError> {
    let (id, secret) = token
        .rsplit_once('=')
        .ok_or_else(|| SimError::Config(format!("token '{token}' is not USER@REALM!ID=SECRET")))?;
    let (user, tokenid) = id
        .split_once('!')
        .ok_or_else(|| SimError::Config(format!("token id '{id}' has no '!'")))?;
    if !user.contains('@') || tokenid.is_empty() || secret.is_empty() {
        return Err(SimError::Config(format!(
            "token '{token}' is not USER@REALM!ID=SECRET"
        )));
    }
    Ok((id.to_string(), secret.to_string()))
}

/// A self-signed certificate for 127.0.0.1/localhost and its fingerprint.
fn tls_acceptor() -> Result<(tokio_rustls::TlsAcceptor, String), SimError> {
    let certified = rcgen::generate_simple_self_signed(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ])
    .map_err(|e| SimError::Tls(e.to_string()))?;
    let der = certified.cert.der().clone();
    let fingerprint = {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(der.as_ref());
        digest
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SimError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(vec![der], key)
        .map_err(|e| SimError::Tls(e.to_string()))?;
    Ok((
        tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        fingerprint,
    ))
}

/// Starts a simulator on `config.listen` and returns once it accepts connections.
///
/// The simulator runs on a runtime of its own, on its own thread, until the returned handle
/// is shut down or dropped: nothing the caller's runtime does (blocking calls, busy workers)
/// can delay its tasks, as a real PVE node's tasks are not delayed by its clients.
pub async fn start(config: SimConfig) -> Result<Simulator, SimError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("proxops-sim".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("proxops-sim-worker")
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(SimError::Io(e)));
                    return;
                }
            };
            runtime.block_on(async move {
                match start_here(config).await {
                    Ok(sim) => {
                        let mut stop = sim.stop.subscribe();
                        let state = Arc::clone(&sim.sim);
                        if tx.send(Ok(sim)).is_ok() {
                            while !*stop.borrow_and_update() {
                                if stop.changed().await.is_err() {
                                    break;
                                }
                            }
                        }
                        // Whatever a task job changed last is on disk before the thread ends.
                        state.persist();
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            });
        })?;
    let sim = rx
        .await
        .map_err(|_| SimError::Config("the simulator thread ended before it started".into()))??;
    *sim.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread);
    Ok(sim)
}

/// [`start`] on the current runtime.
async fn start_here(config: SimConfig) -> Result<Simulator, SimError> {
    if config.nodes.is_empty() {
        return Err(SimError::Config("at least one node is required".into()));
    }
    let token = match &config.token {
        Some(t) => t.clone(),
        None => format!("root@pam!proxops={}", generate_secret()),
    };
    let (token_id, token_secret) = parse_token(&token)?;
    let mut state = match &config.state_file {
        Some(path) if path.exists() => State::load(path, config.seed)?,
        _ => State::new(config.seed),
    };
    config.check_volumes()?;
    state.add_volumes(&config.volumes, &config.storages, &config.nodes);
    for ct in &config.lxc {
        if !state.lxc.contains_key(&ct.vmid) && !state.vms.contains_key(&ct.vmid) {
            state.add_lxc(std::slice::from_ref(ct), &config.storages);
        }
    }
    // Declared mappings are seeded where the state has none of that id (as declared containers are): one
    // changed or deleted through the API stays so across restarts on the same state file.
    for m in &config.pci_mappings {
        if !state.mappings.pci.contains_key(&m.id) {
            let seeded = mapping::Mapping::seeded(&m.description, &m.map);
            state.mappings.pci.insert(m.id.clone(), seeded);
        }
    }
    for m in &config.usb_mappings {
        if !state.mappings.usb.contains_key(&m.id) {
            let seeded = mapping::Mapping::seeded(&m.description, &m.map);
            state.mappings.usb.insert(m.id.clone(), seeded);
        }
    }
    let (acceptor, fingerprint) = if config.tls {
        let (a, f) = tls_acceptor()?;
        (Some(a), Some(f))
    } else {
        (None, None)
    };
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| SimError::Listen {
            addr: config.listen,
            source,
        })?;
    let addr = listener.local_addr()?;
    let sim = Arc::new(Sim {
        state: RwLock::new(state),
        nodes: config.nodes.clone(),
        storages: config.storages.clone(),
        token_id,
        token_secret,
        task_duration: config.task_duration,
        lock_timeout: config.lock_timeout,
        flocks: Mutex::new(std::collections::HashMap::new()),
        flock_waiters: std::sync::atomic::AtomicUsize::new(0),
        faults: Mutex::new(FaultEngine::new(config.faults.clone(), config.seed)),
        log: Mutex::new(Vec::new()),
        seq: AtomicU64::new(0),
        counters: Mutex::new(BTreeMap::new()),
        persister: Persister::new(config.state_file.clone()),
        fingerprint: fingerprint.clone(),
        boot_time: state::now(),
        ha_crm_delay: config.ha_crm_delay,
        ha_fence_delay: config.ha_fence_delay,
        workers: workers::ApiWorkers::new(
            &config.nodes,
            config.api_workers,
            config.api_handling,
            config.api_proxy,
        ),
        connections: workers::ConnectionCount::default(),
        agent_boot: config.agent_boot,
    });
    sim.persist();
    let (stop, stop_rx) = watch::channel(false);
    tokio::spawn(ha::crm::run(Arc::clone(&sim), stop_rx.clone()));
    tokio::spawn(server::run(listener, acceptor, Arc::clone(&sim), stop_rx));
    let scheme = if config.tls { "https" } else { "http" };
    Ok(Simulator {
        sim,
        base_url: format!("{scheme}://{addr}"),
        token,
        fingerprint,
        stop,
        addr,
        thread: std::sync::Mutex::new(None),
    })
}

/// Options of `proxops sim serve`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub nodes: Vec<String>,
    pub listen: SocketAddr,
    pub state_file: Option<PathBuf>,
    /// Full `USER@REALM!ID=SECRET`; generated when absent.
    pub token: Option<String>,
    /// Plain HTTP instead of HTTPS.
    pub http: bool,
    /// How long every task runs (holding its guest's config lock), so that locks and running tasks can be seen.
    pub task_duration: std::time::Duration,
    /// API requests each node serves at once (PVE's pool: 3), `None` for no bound.
    pub api_workers: Option<usize>,
    /// The least time a request holds its worker.
    pub api_handling: std::time::Duration,
    /// The time a request for another node holds an entry-node worker first (`None`: free).
    pub api_proxy: Option<std::time::Duration>,
    /// How long HA's CRM takes to carry out a request state (`hastart`, `hastop`, `hamigrate`).
    pub ha_crm_delay: std::time::Duration,
    /// How long HA waits before it fences an offline node and recovers its guests.
    pub ha_fence_delay: std::time::Duration,
    /// How long after a start a VM's guest agent answers `agent/ping`.
    pub agent_boot: std::time::Duration,
    /// Fault injection (`--faults`); its seed also seeds generated MACs and UUIDs.
    pub faults: FaultPlan,
}

/// Starts the simulator, prints base URL, token and fingerprint (one per line) and runs until Ctrl-C.
pub async fn serve(opts: ServeOptions) -> Result<(), SimError> {
    let config = SimConfig {
        nodes: opts.nodes,
        listen: opts.listen,
        state_file: opts.state_file,
        token: opts.token,
        tls: !opts.http,
        task_duration: opts.task_duration,
        api_workers: opts.api_workers,
        api_handling: opts.api_handling,
        api_proxy: opts.api_proxy,
        ha_crm_delay: opts.ha_crm_delay,
        ha_fence_delay: opts.ha_fence_delay,
        agent_boot: opts.agent_boot,
        seed: opts.faults.seed.unwrap_or_default(),
        faults: opts.faults.rules,
        ..SimConfig::default()
    };
    let sim = start(config).await?;
    println!("{}", sim.base_url());
    println!("{}", sim.token());
    println!("{}", sim.fingerprint().unwrap_or_default());
    tokio::signal::ctrl_c().await?;
    sim.shutdown();
    Ok(())
}
