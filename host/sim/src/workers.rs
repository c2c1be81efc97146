//! PVE's API worker pool, modelled (off by default): pveproxy and pvedaemon run three worker
//! processes each (`max_workers => 3` in pve-manager's `PVE/Service/pveproxy.pm` and
//! `pvedaemon.pm`), and a worker runs one API handler at a time, so a node serves a bounded
//! number of requests at once however many a client sends. With `api_workers` set, each node
//! serves at most that many requests at once, each for at least `api_handling`; a request for
//! `/nodes/{node}/…` is served by that node, any other by the node the client talks to (the
//! first, the entry node).
//!
//! PVE proxies a request for another node's path (`proxyto => 'node'` in its API schema): the
//! entry node's pveproxy worker authenticates and routes it in its own event loop
//! (`rest_handler` answers `{proxy => $remip}`), then forwards it asynchronously
//! (`proxy_request`, AnyEvent::HTTP), relaying the answer back through the client's TLS
//! connection. With `api_proxy` set, such a request first holds one of the entry node's
//! workers for that long (routing and relay), then one of its own node's for the handling: the
//! entry node carries every proxied request of a run, as a real cluster's does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The worker pools of the simulated nodes.
#[derive(Debug)]
pub(crate) struct ApiWorkers {
    pools: HashMap<String, Arc<Semaphore>>,
    entry: String,
    handling: Duration,
    /// The time a request for another node holds an entry worker (`None`: proxying is free).
    proxy: Option<Duration>,
    /// Requests that were proxied from the entry node to another one.
    proxied: AtomicUsize,
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
    /// `per_node` workers on each of `nodes` (`None`: no pool, every request served at once);
    /// each request holds one for `handling`, and a proxied one an entry worker for `proxy` first.
    pub(crate) fn new(
        nodes: &[String],
        per_node: Option<usize>,
        handling: Duration,
        proxy: Option<Duration>,
    ) -> Self {
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
            proxy,
            proxied: AtomicUsize::new(0),
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
        if self.pools.is_empty() {
            return None;
        }
        if node != self.entry {
            self.proxied.fetch_add(1, Ordering::Relaxed);
            if let Some(proxy) = self.proxy {
                // Routed by an entry worker first; it is free again once the request is
                // forwarded (the relay of the answer is folded into the same time).
                let _routing = self.hold(&self.entry, proxy).await?;
            }
        }
        self.hold(&node, self.handling).await
    }

    /// Take one of `node`'s workers and keep it busy for `time`.
    async fn hold(&self, node: &str, time: Duration) -> Option<Worker<'_>> {
        let permit = self.pools.get(node)?.clone().acquire_owned().await.ok()?;
        {
            let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
            let (now, most) = busy.entry(node.to_string()).or_default();
            *now += 1;
            *most = (*most).max(*now);
        }
        let worker = Worker {
            pool: self,
            node: node.to_string(),
            _permit: permit,
        };
        tokio::time::sleep(time).await;
        Some(worker)
    }

    /// How many requests were for another node than the entry node (counted with a pool only).
    pub(crate) fn proxied(&self) -> usize {
        self.proxied.load(Ordering::Relaxed)
    }

    /// The most requests `node` served at once so far.
    pub(crate) fn most_at_once(&self, node: &str) -> usize {
        let busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        busy.get(node).map_or(0, |(_, most)| *most)
    }
}

/// Client connections as pveproxy counts them (`conn_count` against `max_conn`, 800 by default
/// in pve-http-server's `PVE::APIServer::AnyEvent`; beyond `max_conn - 20` it stops keep-alive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Connections {
    /// Connections accepted so far.
    pub accepted: usize,
    /// The most open at once so far.
    pub most_open: usize,
}

/// The simulator's live connection counts.
#[derive(Debug, Default)]
pub(crate) struct ConnectionCount {
    open: AtomicUsize,
    most: AtomicUsize,
    accepted: AtomicUsize,
}

/// One open connection; closed (uncounted) when dropped.
pub(crate) struct OpenConnection<'a>(&'a ConnectionCount);

impl Drop for OpenConnection<'_> {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ConnectionCount {
    /// Count a connection just accepted, until the returned guard drops.
    pub(crate) fn open(&self) -> OpenConnection<'_> {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        let now = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        self.most.fetch_max(now, Ordering::Relaxed);
        OpenConnection(self)
    }

    pub(crate) fn counts(&self) -> Connections {
        Connections {
            accepted: self.accepted.load(Ordering::Relaxed),
            most_open: self.most.load(Ordering::Relaxed),
        }
    }
}
