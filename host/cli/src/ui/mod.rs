//! `watch --ui-listen ADDR`: a read-only status page of the fleet, rendered on the server
//! (`pages`), served by axum (`server`), with the dependency graph as SVG (`svg`). It shows
//! what the cycles of `watch` found: the fleet, each object's desired against live state, the
//! last cycles of each cluster and the progress of an apply in flight. Nothing on it writes.
//!
//! Every foreign value (names, tags, descriptions, PVE's messages) is redacted and escaped
//! when a page is rendered (`pages::v`), and the pages load nothing but their own stylesheet
//! (`server::CSP`).

pub(crate) mod pages;
pub(crate) mod server;
pub(crate) mod svg;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use proxops_core::ObjectId;
use proxops_reconcile::plan::PlanView;

/// Cycles of history kept per cluster unless `--ui-history` says otherwise.
pub const HISTORY: u64 = 20;

/// Lines of an apply in flight kept for the live page (the oldest are dropped).
const LIVE_LINES: usize = 500;

/// The rendered plan kept per cycle for the history page is cut to this many bytes.
const DIFF_BYTES: usize = 64 * 1024;

/// What `--ui-listen`, `--ui-token-file` and `--ui-history` asked for.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    /// The bearer token every request but `/healthz` must carry, when set.
    pub token: Option<String>,
    /// Cycles kept per cluster (1 to 1000).
    pub history: usize,
}

/// The bearer token in `path` (`--ui-token-file`): its first line, at least 16 characters,
/// registered with the redactor so that it never reaches a log or a page.
pub fn read_token(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("--ui-token-file {}: cannot read it: {e}", path.display()))?;
    let token = text.lines().next().unwrap_or_default().trim().to_string();
    if token.chars().count() < 16 || token.chars().any(|c| c.is_control() || c == ' ') {
        anyhow::bail!(
            "--ui-token-file {}: the token (its first line) must be at least 16 characters, without spaces",
            path.display()
        );
    }
    proxops_core::text::register(&token)
        .map_err(|e| anyhow::anyhow!("--ui-token-file {}: {e}", path.display()))?;
    Ok(token)
}

/// A disruption budget's progress in a cycle that applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rollout {
    pub budget: String,
    pub done: usize,
    pub left: usize,
    pub halted: bool,
}

/// One cycle of one cluster, as the pages show it.
#[derive(Debug, Clone, Default)]
pub(crate) struct CycleRecord {
    /// The cluster's own cycle count.
    pub number: u64,
    /// When it ended, in Unix seconds.
    pub ended: u64,
    pub took_ms: u64,
    /// One of `metrics::OUTCOMES`.
    pub outcome: &'static str,
    pub summary: String,
    /// The repository failed validation: the last good version was planned.
    pub stale: bool,
    /// `None` when the cycle did not plan (an error).
    pub objects: Option<usize>,
    pub drift: usize,
    pub anomalies: usize,
    pub pending: usize,
    /// With `watch --audit`: (policy, mode, running guests in violation).
    pub violations: Option<Vec<(String, &'static str, usize)>>,
    pub rollout: Vec<Rollout>,
    pub applied: u64,
    pub failed: u64,
    /// Items new since the cluster's previous cycle, and those gone.
    pub found: Vec<String>,
    pub resolved: Vec<String>,
    /// What an apply did: its summary and progress lines.
    pub apply_lines: Vec<String>,
    /// The plan as `proxops plan` prints it (bounded), and the policies' lines.
    pub diff: String,
    pub findings: Vec<String>,
}

/// The dependency graph of one cluster's manifests (from [`crate::graph::Graph`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct ClusterGraph {
    pub nodes: Vec<ObjectId>,
    /// (index of the referenced object, index of the object that references it, field).
    pub edges: Vec<(usize, usize, String)>,
}

impl ClusterGraph {
    /// The cluster `cluster`'s part of `graph`; references to objects outside it are left out.
    pub(crate) fn of(graph: &crate::graph::Graph, cluster: &str) -> ClusterGraph {
        let mut out = ClusterGraph::default();
        let mut index = BTreeMap::new();
        for (i, id) in graph.nodes.iter().enumerate() {
            if id.cluster == cluster {
                index.insert(i, out.nodes.len());
                out.nodes.push(id.clone());
            }
        }
        for e in &graph.edges {
            let from = graph.nodes.iter().position(|n| *n == e.from);
            if let (Some(from), Some(to)) = (from.and_then(|f| index.get(&f)), index.get(&e.to)) {
                out.edges.push((*from, *to, e.label.clone()));
            }
        }
        out
    }

    /// The objects `id` references and those that reference it.
    pub(crate) fn around(&self, id: &ObjectId) -> (Vec<&ObjectId>, Vec<&ObjectId>) {
        let Some(me) = self.nodes.iter().position(|n| n == id) else {
            return (Vec::new(), Vec::new());
        };
        let uses = self
            .edges
            .iter()
            .filter(|e| e.1 == me)
            .map(|e| &self.nodes[e.0])
            .collect();
        let used_by = self
            .edges
            .iter()
            .filter(|e| e.0 == me)
            .map(|e| &self.nodes[e.1])
            .collect();
        (uses, used_by)
    }
}

/// An apply in flight (or the last one), line by line.
#[derive(Debug, Clone, Default)]
pub(crate) struct LiveApply {
    /// The cycle it belongs to.
    pub cycle: u64,
    pub started: u64,
    pub lines: VecDeque<String>,
    pub done: bool,
    /// How its cycle ended (one of `metrics::OUTCOMES`), once done.
    pub outcome: Option<&'static str>,
}

/// What the pages know of one cluster.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClusterView {
    /// Its last cycles, the newest last.
    pub history: VecDeque<Arc<CycleRecord>>,
    /// The plan of its last cycle that planned (redacted: `ClusterPlan::view`).
    pub plan: Option<Arc<PlanView>>,
    pub graph: Arc<ClusterGraph>,
    pub live: Option<LiveApply>,
}

impl ClusterView {
    pub(crate) fn last(&self) -> Option<&CycleRecord> {
        self.history.back().map(|c| c.as_ref())
    }
}

/// Everything the pages show.
#[derive(Debug, Clone)]
pub(crate) struct Fleet {
    pub clusters: BTreeMap<String, ClusterView>,
    /// Cycles kept per cluster.
    pub keep: usize,
    /// Counts the changes: a page rendered at one generation is good until the next.
    pub generation: u64,
}

impl Fleet {
    pub(crate) fn new(keep: usize) -> Fleet {
        Fleet {
            clusters: BTreeMap::new(),
            keep: keep.max(1),
            generation: 0,
        }
    }

    /// Record a cycle of `cluster`: its plan (when it planned) and graph, and the record
    /// itself, dropping the oldest beyond what is kept.
    pub(crate) fn record(
        &mut self,
        cluster: &str,
        mut record: CycleRecord,
        plan: Option<PlanView>,
        graph: Option<ClusterGraph>,
    ) {
        self.generation += 1;
        if record.diff.len() > DIFF_BYTES {
            let mut cut = DIFF_BYTES;
            while !record.diff.is_char_boundary(cut) {
                cut -= 1;
            }
            record.diff.truncate(cut);
            record.diff.push_str("\n… (cut)\n");
        }
        let view = self.clusters.entry(cluster.to_string()).or_default();
        if let Some(plan) = plan {
            view.plan = Some(Arc::new(plan));
        }
        if let Some(graph) = graph {
            view.graph = Arc::new(graph);
        }
        if let Some(live) = &mut view.live
            && live.cycle == record.number
        {
            live.done = true;
            live.outcome = Some(record.outcome);
        }
        view.history.push_back(Arc::new(record));
        while view.history.len() > self.keep {
            view.history.pop_front();
        }
    }

    /// Forget the clusters not in `names` (no longer selected or in the repository).
    pub(crate) fn retain(&mut self, names: &[String]) {
        let before = self.clusters.len();
        self.clusters.retain(|n, _| names.contains(n));
        if self.clusters.len() != before {
            self.generation += 1;
        }
    }
}

/// The fleet the pages read, shared between `watch` and the server.
#[derive(Debug, Clone)]
pub struct Ui {
    pub(crate) fleet: Arc<RwLock<Fleet>>,
}

impl Ui {
    pub fn new(keep: usize) -> Ui {
        Ui {
            fleet: Arc::new(RwLock::new(Fleet::new(keep))),
        }
    }

    pub(crate) fn write(&self) -> std::sync::RwLockWriteGuard<'_, Fleet> {
        self.fleet.write().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn read(&self) -> std::sync::RwLockReadGuard<'_, Fleet> {
        self.fleet.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Where the progress of `cluster`'s apply in cycle `cycle` goes.
    pub(crate) fn live(&self, cluster: &str, cycle: u64) -> Live {
        let mut fleet = self.write();
        fleet.generation += 1;
        fleet.clusters.entry(cluster.to_string()).or_default().live = Some(LiveApply {
            cycle,
            started: now(),
            lines: VecDeque::new(),
            done: false,
            outcome: None,
        });
        drop(fleet);
        Live {
            ui: self.clone(),
            cluster: cluster.to_string(),
        }
    }
}

/// The live page's feed of one cluster's apply: each progress line as it happens.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    ui: Ui,
    cluster: String,
}

impl Live {
    pub(crate) fn line(&self, line: &str) {
        let mut fleet = self.ui.write();
        fleet.generation += 1;
        if let Some(live) = fleet
            .clusters
            .get_mut(&self.cluster)
            .and_then(|c| c.live.as_mut())
        {
            live.lines.push_back(line.to_string());
            while live.lines.len() > LIVE_LINES {
                live.lines.pop_front();
            }
        }
    }
}

/// Unix time in seconds.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// `secs` (Unix time) as `2026-12-05 07:03:02 UTC`.
pub(crate) fn utc(secs: u64) -> String {
    let c = proxops_names::civil::from_unix(secs);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}
