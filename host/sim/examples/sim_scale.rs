//! Scale measurement: 10,000 VMs over 10 nodes, /cluster/resources latency, concurrent request throughput and API create rate.
//!
//! Run with `cargo run -p proxops-sim --release --example sim_scale`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use proxops_sim::{SimConfig, start};

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .pool_max_idle_per_host(512)
        .build()
        .expect("client")
}

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let n = samples.len();
    let total: Duration = samples.iter().sum();
    println!(
        "{name}: n={n} mean={:.2}ms p50={:.2}ms p95={:.2}ms max={:.2}ms",
        total.as_secs_f64() * 1000.0 / n as f64,
        samples[n / 2].as_secs_f64() * 1000.0,
        samples[n * 95 / 100].as_secs_f64() * 1000.0,
        samples[n - 1].as_secs_f64() * 1000.0,
    );
}

#[tokio::main]
async fn main() {
    proxops_sim::ensure_crypto_provider();
    let tls = std::env::args().any(|a| a == "--tls");
    let sim = start(SimConfig {
        nodes: (1..=10).map(|i| format!("pve{i:02}")).collect(),
        tls,
        ..SimConfig::default()
    })
    .await
    .expect("simulator starts");
    let base = format!("{}/api2/json", sim.base_url());
    let auth = format!("PVEAPIToken={}", sim.token());
    let t0 = Instant::now();
    sim.populate(10_000);
    println!(
        "populate 10000 VMs over 10 nodes: {:.1}ms (tls={tls})",
        t0.elapsed().as_secs_f64() * 1000.0
    );
    let c = client();
    let mut samples = Vec::new();
    let mut bytes = 0;
    for _ in 0..30 {
        let t = Instant::now();
        let body = c
            .get(format!("{base}/cluster/resources"))
            .query(&[("type", "vm")])
            .header("Authorization", &auth)
            .send()
            .await
            .expect("resources")
            .bytes()
            .await
            .expect("body");
        samples.push(t.elapsed());
        bytes = body.len();
    }
    let parsed: serde_json::Value = c
        .get(format!("{base}/cluster/resources"))
        .header("Authorization", &auth)
        .send()
        .await
        .expect("resources")
        .json()
        .await
        .expect("json");
    println!(
        "/cluster/resources entries (all types): {}; type=vm body {} KiB",
        parsed["data"].as_array().map(|a| a.len()).unwrap_or(0),
        bytes / 1024
    );
    summary(
        "GET /cluster/resources?type=vm (10,000 VMs, end to end)",
        samples,
    );

    for concurrency in [100usize, 500] {
        let c = Arc::new(client());
        let t = Instant::now();
        let mut handles = Vec::new();
        for i in 0..concurrency {
            let c = Arc::clone(&c);
            let base = base.clone();
            let auth = auth.clone();
            handles.push(tokio::spawn(async move {
                let vmid = 100 + (i * 19) % 10_000;
                let node = format!("pve{:02}", (vmid - 100) % 10 + 1);
                let mut lat = Vec::new();
                for _ in 0..10 {
                    let s = Instant::now();
                    let r = c
                        .get(format!("{base}/nodes/{node}/qemu/{vmid}/config"))
                        .header("Authorization", &auth)
                        .send()
                        .await
                        .expect("config");
                    assert_eq!(r.status().as_u16(), 200);
                    let _ = r.bytes().await;
                    lat.push(s.elapsed());
                }
                lat
            }));
        }
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.await.expect("join"));
        }
        let wall = t.elapsed();
        println!(
            "{concurrency} concurrent clients x 10 GET config: {} requests in {:.1}ms = {:.0} req/s",
            all.len(),
            wall.as_secs_f64() * 1000.0,
            all.len() as f64 / wall.as_secs_f64()
        );
        summary("  per-request latency", all);
    }

    let c = Arc::new(client());
    let t = Instant::now();
    let mut handles = Vec::new();
    for i in 0..200u32 {
        let c = Arc::clone(&c);
        let base = base.clone();
        let auth = auth.clone();
        handles.push(tokio::spawn(async move {
            let vmid = (20_000 + i).to_string();
            let r = c
                .post(format!("{base}/nodes/pve01/qemu"))
                .header("Authorization", &auth)
                .form(&[
                    ("vmid", vmid.as_str()),
                    ("scsi0", "local-lvm:8"),
                    ("net0", "virtio,bridge=vmbr0"),
                ])
                .send()
                .await
                .expect("create");
            assert_eq!(r.status().as_u16(), 200);
        }));
    }
    for h in handles {
        h.await.expect("join");
    }
    println!(
        "200 concurrent POST /nodes/pve01/qemu accepted in {:.1}ms; VMs now {}",
        t.elapsed().as_secs_f64() * 1000.0,
        sim.vm_count()
    );
    sim.shutdown();
}
