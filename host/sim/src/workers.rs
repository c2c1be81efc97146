//! PVE's API worker pool, modelled (off by default): pveproxy and pvedaemon run three worker
//! processes each (`max_workers => 3` in pve-manager's `PVE/Service/pveproxy.pm` and
//! `pvedaemon.pm`), and a worker runs one API handler at a time, so a node serves a bounded
//! number of requests at once however many a client sends. With `api_workers` set, each node
//! serves at most that many requests at once, each for at least `api_handling`; a request for
//! `/nodes/{node}/…` is served by that node (PVE proxies it there), any other by the node the
//! client talks to (the first).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The worker pools of the simulated nodes.
#[derive(Debug)]
pub(crate) struct ApiWorkers {
    pools: HashMap<String, Arc<Semaphore>>,
    entry: String,
    handling: Duration,
    /// Per node: requests in service now, and the most at once so far.
    busy: Mutex<HashMap<String, (usize, usize)>>,
}

/// A worker serving one request; it is free again when this is dropped.
pub(crate) struct Worker<'a> {
    pool: &'a ApiWorkers,
    node: String,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Worker<'_> {
    fn drop(&mut self) {
        let mut busy = self.pool.busy.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((now, _)) = busy.get_mut(&self.node) {
            *now = now.saturating_sub(1);
        }
    }
}

impl ApiWorkers {
    /// `per_node` workers on each of `nodes` (`None`: no pool, every request served at once).
    pub(crate) fn new(nodes: &[String], per_node: Option<usize>, handling: Duration) -> Self {
        ApiWorkers {
            pools: per_node
                .map(|n| {
                    nodes
                        .iter()
                        .map(|node| (node.clone(), Arc::new(Semaphore::new(n.max(1)))))
                        .collect()
                })
                .unwrap_or_default(),
            entry: nodes.first().cloned().unwrap_or_default(),
            handling,
            busy: Mutex::new(HashMap::new()),
        }
    }

    /// Wait for a worker of the node that serves `path` (below `/api2/json`), then spend the
    /// handling time in it; `None` when no pool is modelled.
    pub(crate) async fn serve(&self, path: &str) -> Option<Worker<'_>> {
        let node = path
            .strip_prefix("/nodes/")
            .and_then(|rest| rest.split('/').next())
            .filter(|n| self.pools.contains_key(*n))
            .unwrap_or(&self.entry)
            .to_string();
        let pool = self.pools.get(&node)?.clone();
        let permit = pool.acquire_owned().await.ok()?;
        {
            let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
            let (now, most) = busy.entry(node.clone()).or_default();
            *now += 1;
            *most = (*most).max(*now);
        }
        tokio::time::sleep(self.handling).await;
        Some(Worker {
            pool: self,
            node,
            _permit: permit,
        })
    }

    /// The most requests `node` served at once so far.
    pub(crate) fn most_at_once(&self, node: &str) -> usize {
        let busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        busy.get(node).map_or(0, |(_, most)| *most)
    }
}
