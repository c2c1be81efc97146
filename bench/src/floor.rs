//! The I/O floor of a no-op plan: the requests the plan makes (the listing, then one read per
//! VM by the API-economy rule: `/pending` for a running VM, `config?current=1` otherwise),
//! fetched by a bare client with the same concurrency the engine uses (that many tasks taking
//! reads from one queue), the bodies discarded. A plan cycle cannot be faster than this against
//! the same simulator in the same run, so `cycle / floor` says how far proxops is from it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use proxops_pve::{Client, Param};
use serde_json::Value;

/// Fetch the no-op plan's requests; the wall time and how many requests were made.
pub async fn fetch(client: &Client, concurrency: usize) -> (Duration, usize) {
    let t = Instant::now();
    let listing = client
        .get_text("/cluster/resources", &[])
        .await
        .expect("the listing is read");
    let entries: Vec<Value> = serde_json::from_str(&listing).expect("the listing is JSON");
    let reads: Vec<(String, Vec<Param>)> = entries
        .iter()
        .filter(|e| e["type"] == "qemu")
        .filter_map(|e| {
            let (node, vmid) = (e["node"].as_str()?, e["vmid"].as_u64()?);
            let running = e["status"] == "running" && e["template"].as_u64() != Some(1);
            Some(if running {
                (format!("/nodes/{node}/qemu/{vmid}/pending"), Vec::new())
            } else {
                (
                    format!("/nodes/{node}/qemu/{vmid}/config"),
                    vec![Param::new("current", "1")],
                )
            })
        })
        .collect();
    let reads = Arc::new(reads);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1).min(reads.len()) {
        let (client, reads, next) = (client.clone(), reads.clone(), next.clone());
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((path, params)) = reads.get(i) else {
                    break;
                };
                client.get_text(path, params).await.expect("a read answers");
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a reader task");
    }
    (t.elapsed(), 1 + reads.len())
}
