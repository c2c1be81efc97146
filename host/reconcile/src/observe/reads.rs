//! The reads kinds ask for: each distinct read performed once, with bounded concurrency,
//! and its answer handed to every kind that asked.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use proxops_pve::{Client, Param};
use proxops_runtime::kind::Call;

use crate::error::PlanError;
use crate::wire::to_pve_params;

pub(super) fn read_key(call: &Call) -> String {
    let params: Vec<String> = call
        .params
        .iter()
        .map(|p| format!("{}={}", p.name, p.value))
        .collect();
    format!("{}?{}", call.path, params.join("&"))
}

/// A read's answer (HTTP status and body) and how many kinds still have to receive it.
pub(super) struct Answer {
    pub(super) readers: usize,
    pub(super) answer: (u16, String),
}

/// `reads` in turns over their nodes (`/nodes/{node}/…`; any other read counts as one node
/// of its own), each node's in their order: PVE serves a node's requests a few at a time (its
/// API worker pool), so reads taken in path order, one node's all first, would queue at that
/// node while the others idle.
fn spread_over_nodes<T>(reads: Vec<T>, path: impl Fn(&T) -> &str) -> Vec<T> {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut by_node: Vec<std::collections::VecDeque<T>> = Vec::new();
    for read in reads {
        let node = path(&read)
            .strip_prefix("/nodes/")
            .and_then(|rest| rest.split('/').next())
            .unwrap_or("")
            .to_string();
        let slot = *index.entry(node).or_insert_with(|| {
            by_node.push(std::collections::VecDeque::new());
            by_node.len() - 1
        });
        by_node[slot].push_back(read);
    }
    let mut out = Vec::with_capacity(by_node.iter().map(|q| q.len()).sum());
    loop {
        let before = out.len();
        for queue in &mut by_node {
            out.extend(queue.pop_front());
        }
        if out.len() == before {
            return out;
        }
    }
}

/// Perform every distinct read once, at most `concurrency` at a time. A failed read is
/// handed to the kind as its status and PVE's message.
///
/// `concurrency` tasks take the reads from a shared queue: spawning one task per read
/// would hold 10,000 request futures (kilobytes each) at once for a large cluster.
pub(super) async fn perform_reads(
    client: &Client,
    wanted: &[Result<Vec<(String, Call)>, PlanError>],
    concurrency: usize,
) -> HashMap<String, Answer> {
    let mut distinct: BTreeMap<&str, (&Call, usize)> = BTreeMap::new();
    for (key, call) in wanted.iter().flatten().flatten() {
        distinct.entry(key.as_str()).or_insert((call, 0)).1 += 1;
    }
    let queue: Vec<(String, usize, String, Vec<Param>)> = distinct
        .into_iter()
        .map(|(key, (call, readers))| {
            (
                key.to_string(),
                readers,
                call.path.clone(),
                to_pve_params(call),
            )
        })
        .collect();
    let queue = spread_over_nodes(queue, |(_, _, path, _)| path);
    let workers = concurrency.max(1).min(queue.len());
    let queue = Arc::new(std::sync::Mutex::new(queue.into_iter()));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let client = client.clone();
        let queue = queue.clone();
        tasks.spawn(async move {
            let mut done = Vec::new();
            loop {
                let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                let Some((key, readers, path, params)) = next else {
                    break;
                };
                let answer = match client.get_text(&path, &params).await {
                    Ok(data) => (200, data),
                    Err(e) => (
                        e.status().unwrap_or(0),
                        serde_json::json!({ "error": e.to_string() }).to_string(),
                    ),
                };
                done.push((key, Answer { readers, answer }));
            }
            done
        });
    }
    let mut out = HashMap::new();
    while let Some(done) = tasks.join_next().await {
        out.extend(done.expect("read task panicked"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::spread_over_nodes;

    #[test]
    fn reads_take_turns_over_their_nodes() {
        let reads = vec![
            "/cluster/resources",
            "/nodes/a/qemu/1/pending",
            "/nodes/a/qemu/2/pending",
            "/nodes/a/qemu/3/pending",
            "/nodes/b/qemu/4/pending",
            "/nodes/c/qemu/5/pending",
            "/nodes/c/qemu/6/pending",
        ];
        assert_eq!(
            spread_over_nodes(reads, |p| p),
            [
                "/cluster/resources",
                "/nodes/a/qemu/1/pending",
                "/nodes/b/qemu/4/pending",
                "/nodes/c/qemu/5/pending",
                "/nodes/a/qemu/2/pending",
                "/nodes/c/qemu/6/pending",
                "/nodes/a/qemu/3/pending",
            ]
        );
    }
}
