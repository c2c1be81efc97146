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
