//! The shared simulator core: cluster definition, state behind one lock, request log, counters, faults, the per-guest
//! config flocks and the task runner.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard};

use crate::RequestRecord;
use crate::api::Req;
use crate::config::StorageConfig;
use crate::faults::FaultEngine;
use crate::state::{Persister, State, Task, now};

/// Lines and warnings a task writes.
#[derive(Debug, Default)]
pub(crate) struct TaskLog {
    pub lines: Vec<String>,
    pub warnings: u32,
}

impl TaskLog {
    pub(crate) fn line(&mut self, s: impl Into<String>) {
        self.lines.push(s.into());
    }

    pub(crate) fn warn(&mut self, s: impl Into<String>) {
        self.warnings += 1;
        self.lines.push(format!("WARN: {}", s.into()));
    }
}

/// A request for a guest's config lock, PVE's `flock` on `/var/lock/qemu-server/lock-<vmid>.conf`
/// (`PVE::AbstractConfig::lock_config_full` / `lock_config_shared`): exclusive, or shared (a clone's
/// stopped source), waited for at most `timeout`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flock {
    pub vmid: u32,
    pub shared: bool,
    pub timeout: Duration,
}

/// A held config lock; dropping it releases the flock.
pub(crate) enum FlockGuard {
    Exclusive(#[allow(dead_code)] OwnedRwLockWriteGuard<()>),
    Shared(#[allow(dead_code)] OwnedRwLockReadGuard<()>),
}

/// The work a task does when it completes; `injected` carries a failure the job must clean up after: one
/// injected by a fault rule, or a config lock the task could not get in time.
pub(crate) type Job =
    Box<dyn FnOnce(&mut State, &mut TaskLog, Option<String>) -> Result<(), String> + Send>;

/// Everything the HTTP layer and the handlers share.
pub(crate) struct Sim {
    pub state: RwLock<State>,
    pub nodes: Vec<String>,
    pub storages: Vec<StorageConfig>,
    pub token_id: String,
    pub token_secret: String,
    pub task_duration: Duration,
    /// PVE's `lock_config` wait (10 s); creates and clones wait at most 1 s, as PVE's do.
    pub lock_timeout: Duration,
    /// Per-guest config flocks, made on first use.
    pub flocks: Mutex<HashMap<u32, Arc<tokio::sync::RwLock<()>>>>,
    /// Requests and tasks waiting for a config flock now.
    pub flock_waiters: AtomicUsize,
    pub faults: Mutex<FaultEngine>,
    pub log: Mutex<Vec<RequestRecord>>,
    pub seq: AtomicU64,
    pub counters: Mutex<BTreeMap<String, u64>>,
    pub persister: Persister,
    pub fingerprint: Option<String>,
    pub boot_time: u64,
    /// How long the HA CRM/LRM takes to carry out a decision.
    pub ha_crm_delay: Duration,
    /// How long a node is offline before HA fences it and recovers its services.
    pub ha_fence_delay: Duration,
    /// PVE's API worker pool per node, when modelled.
    pub workers: crate::workers::ApiWorkers,
    /// Client connections, accepted and open.
    pub connections: crate::workers::ConnectionCount,
    /// How long after a start a VM's guest agent answers.
    pub agent_boot: Duration,
}

impl Sim {
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn storage(&self, name: &str) -> Option<&StorageConfig> {
        self.storages.iter().find(|s| s.name == name)
    }

    pub(crate) fn has_node(&self, node: &str) -> bool {
        self.nodes.iter().any(|n| n == node)
    }

    /// An exclusive config lock with `lock_config`'s wait.
    pub(crate) fn flock_exclusive(&self, vmid: u32) -> Flock {
        Flock {
            vmid,
            shared: false,
            timeout: self.lock_timeout,
        }
    }

    /// A config lock with the 1 s wait of a create or clone (`lock_config_full($vmid, 1, ...)`).
    pub(crate) fn flock_short(&self, vmid: u32, shared: bool) -> Flock {
        Flock {
            vmid,
            shared,
            timeout: self.lock_timeout.min(Duration::from_secs(1)),
        }
    }

    fn flock_cell(&self, vmid: u32) -> Arc<tokio::sync::RwLock<()>> {
        let mut cells = self.flocks.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(cells.entry(vmid).or_default())
    }

    /// Takes a config lock if it is free now.
    pub(crate) fn try_flock(&self, f: Flock) -> Option<FlockGuard> {
        let cell = self.flock_cell(f.vmid);
        if f.shared {
            cell.try_read_owned().ok().map(FlockGuard::Shared)
        } else {
            cell.try_write_owned().ok().map(FlockGuard::Exclusive)
        }
    }

    /// Takes a config lock, waiting at most its timeout as `PVE::Tools::lock_file_full` does (which logs
    /// `trying to acquire lock...` and ` OK` when it had to wait); `Err` is PVE's timeout message.
    pub(crate) async fn flock(&self, f: Flock, log: &mut TaskLog) -> Result<FlockGuard, String> {
        if let Some(g) = self.try_flock(f) {
            return Ok(g);
        }
        log.line("trying to acquire lock...");
        let cell = self.flock_cell(f.vmid);
        self.flock_waiters.fetch_add(1, Ordering::SeqCst);
        let acquired = if f.shared {
            tokio::time::timeout(f.timeout, cell.read_owned())
                .await
                .map(FlockGuard::Shared)
        } else {
            tokio::time::timeout(f.timeout, cell.write_owned())
                .await
                .map(FlockGuard::Exclusive)
        };
        self.flock_waiters.fetch_sub(1, Ordering::SeqCst);
        match acquired {
            Ok(g) => {
                log.line(" OK");
                Ok(g)
            }
            Err(_) => Err(lock_timeout_message(f.vmid)),
        }
    }

    /// Writes the state file if persistence is on. Serialises under the read lock, writes outside it.
    pub(crate) fn persist(&self) {
        if !self.persister.enabled() {
            return;
        }
        let (generation, bytes) = {
            let st = self.read();
            match serde_json::to_vec(&*st) {
                Ok(b) => (st.generation, b),
                Err(e) => {
                    tracing::error!("serialising simulator state: {e}");
                    return;
                }
            }
        };
        if let Err(e) = self.persister.write(generation, &bytes) {
            tracing::error!("writing simulator state: {e}");
        }
    }

    /// Registers a running task that takes the config locks `flocks` in order (as PVE's worker does: the ones
    /// free now before the UPID is returned, the others waited for), holds them for the task duration, then
    /// runs `job` and releases them. A lock not had in time fails the task with PVE's timeout message, handed
    /// to the job as `injected` so that it cleans up. The caller holds the state lock; the job takes it again.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start_task(
        self: &Arc<Self>,
        st: &mut State,
        node: &str,
        kind: &str,
        id: &str,
        user: &str,
        injected: Option<String>,
        flocks: &[Flock],
        job: Job,
    ) -> String {
        let upid = self.register_task(st, node, kind, id, user);
        let mut held = Vec::with_capacity(flocks.len());
        let mut waiting = Vec::new();
        for f in flocks {
            let now = if waiting.is_empty() {
                self.try_flock(*f)
            } else {
                None
            };
            match now {
                Some(g) => held.push(g),
                None => waiting.push(*f),
            }
        }
        let sim = Arc::clone(self);
        let task_upid = upid.clone();
        let duration = self.task_duration;
        tokio::spawn(async move {
            let mut log = TaskLog::default();
            let mut failure = injected;
            let mut lock_failed = false;
            if failure.is_none() {
                for f in waiting {
                    match sim.flock(f, &mut log).await {
                        Ok(g) => held.push(g),
                        Err(e) => {
                            failure = Some(e);
                            lock_failed = true;
                            break;
                        }
                    }
                }
            }
            if lock_failed || duration.is_zero() {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(duration).await;
            }
            let injected = failure;
            {
                let mut st = sim.write();
                // A bug in a job must fail its task visibly, never leave it running forever.
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    job(&mut st, &mut log, injected)
                }))
                .unwrap_or_else(|panic| {
                    let what = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    tracing::error!("simulator task {task_upid} panicked: {what}");
                    Err(format!("simulator bug: the task panicked: {what}"))
                });
                // As a PVE worker: the config lock is released when the locked code returns,
                // before the task's status is written, so a client that saw the task end finds
                // the lock free.
                drop(held);
                finish_task(&mut st, &task_upid, log, result);
                st.touch();
            }
            sim.persist();
        });
        upid
    }

    /// [`Sim::start_task`] for the request's guest (`node`, `vmid`, the auth id and a failure a fault rule asked
    /// for) under one config lock.
    pub(crate) fn guest_task(
        self: &Arc<Self>,
        st: &mut State,
        req: &crate::api::Req,
        kind: &str,
        flock: Flock,
        job: Job,
    ) -> String {
        let vmid = req.vmid();
        let injected = injected_failure(req, Some(vmid));
        self.start_task(
            st,
            req.node(),
            kind,
            &vmid.to_string(),
            &req.user,
            injected,
            &[flock],
            job,
        )
    }

    /// Adds a running task to the table and returns its UPID.
    pub(crate) fn register_task(
        &self,
        st: &mut State,
        node: &str,
        kind: &str,
        id: &str,
        user: &str,
    ) -> String {
        let pid = st.next_pid();
        let starttime = now();
        let pstart = (starttime.saturating_sub(self.boot_time) * 100) as u32 + 1000;
        let upid =
            format!("UPID:{node}:{pid:08X}:{pstart:08X}:{starttime:08X}:{kind}:{id}:{user}:");
        st.tasks.insert(
            upid.clone(),
            Task {
                upid: upid.clone(),
                node: node.to_string(),
                pid,
                pstart,
                starttime,
                kind: kind.to_string(),
                id: id.to_string(),
                user: user.to_string(),
                log: Vec::new(),
                exitstatus: None,
                endtime: None,
                end_seq: 0,
            },
        );
        upid
    }

    pub(crate) fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst) + 1
    }
}

/// Marks a task stopped with PVE's exit status and final log line.
pub(crate) fn finish_task(st: &mut State, upid: &str, log: TaskLog, result: Result<(), String>) {
    st.tasks_ended += 1;
    let end_seq = st.tasks_ended;
    let Some(task) = st.tasks.get_mut(upid) else {
        return;
    };
    task.endtime = Some(now());
    task.end_seq = end_seq;
    task.log.extend(log.lines);
    match result {
        Ok(()) => {
            if log.warnings > 0 {
                task.log.push(format!("TASK WARNINGS: {}", log.warnings));
                task.exitstatus = Some(format!("WARNINGS: {}", log.warnings));
            } else {
                task.log.push("TASK OK".to_string());
                task.exitstatus = Some("OK".to_string());
            }
        }
        Err(msg) => {
            let flat = msg.trim_end().replace('\n', " ");
            task.log.push(format!("TASK ERROR: {flat}"));
            task.exitstatus = Some(flat);
        }
    }
}

/// PVE's lock-timeout text for a VMID.
pub(crate) fn lock_timeout_message(vmid: u32) -> String {
    format!("can't lock file '/var/lock/qemu-server/lock-{vmid}.conf' - got timeout")
}

/// Bulk-creates `count` stopped VMs with one disk each, ids from the first free one, round-robin over `nodes`.
pub(crate) fn populate_for_scale(st: &mut State, nodes: &[String], count: u32) {
    let mut vmid = 100u32;
    for i in 0..count {
        while st.vmid_owner(vmid).is_some() {
            vmid += 1;
        }
        let node = nodes[i as usize % nodes.len()].clone();
        let mut conf = std::collections::BTreeMap::new();
        conf.insert("name".to_string(), format!("vm{vmid}"));
        conf.insert("memory".to_string(), "2048".to_string());
        conf.insert("cores".to_string(), "2".to_string());
        conf.insert(
            "scsi0".to_string(),
            format!("local-lvm:vm-{vmid}-disk-0,size=8G"),
        );
        conf.insert("boot".to_string(), "order=scsi0".to_string());
        conf.insert("tags".to_string(), "scale".to_string());
        st.vms.insert(
            vmid,
            crate::state::Vm {
                node,
                conf,
                pending: std::collections::BTreeMap::new(),
                pending_delete: std::collections::BTreeMap::new(),
                running: false,
                started_at: 0,
                pid: 0,
                paused: false,
            },
        );
    }
    st.touch();
}

/// The failure a fault rule asked the task to end with, if any.
pub(crate) fn injected_failure(req: &Req, vmid: Option<u32>) -> Option<String> {
    if let Some(m) = &req.faults.fail_task {
        return Some(m.clone());
    }
    if req.faults.lock_timeout {
        let id = vmid.unwrap_or(0);
        return Some(lock_timeout_message(id));
    }
    None
}

impl Sim {
    /// [`crate::Simulator::set_node_online`].
    pub(crate) fn set_node_online(&self, node: &str, online: bool) -> Result<(), crate::SimError> {
        if !self.has_node(node) {
            return Err(crate::SimError::NoSuchNode(node.to_string()));
        }
        {
            let mut st = self.write();
            if online {
                st.offline_nodes.remove(node);
                st.ha.offline_since.remove(node);
                st.ha.fenced.remove(node);
            } else if st.offline_nodes.insert(node.to_string()) {
                st.ha
                    .offline_since
                    .insert(node.to_string(), std::time::Instant::now());
            }
            st.touch();
        }
        self.persist();
        Ok(())
    }

    /// [`crate::Simulator::set_node_maintenance`].
    pub(crate) fn set_node_maintenance(
        &self,
        node: &str,
        maintenance: bool,
    ) -> Result<(), crate::SimError> {
        if !self.has_node(node) {
            return Err(crate::SimError::NoSuchNode(node.to_string()));
        }
        {
            let mut st = self.write();
            if maintenance {
                st.ha.maintenance.insert(node.to_string());
            } else {
                st.ha.maintenance.remove(node);
            }
            st.touch();
        }
        self.persist();
        Ok(())
    }

    /// True while `node` is offline.
    pub(crate) fn is_offline(&self, node: &str) -> bool {
        self.read().offline_nodes.contains(node)
    }
}
