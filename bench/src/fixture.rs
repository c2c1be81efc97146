//! Fixtures: VM manifests in a repository, a simulator with those VMs already converged, and
//! a client for it (HTTPS with the simulator's pinned fingerprint, as a real cluster).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use proxops_reconcile::execute::{Limits, Silent};
use proxops_reconcile::{ApplyOptions, KindRegistry};
use proxops_sim::{FaultRule, SimConfig, Simulator};
use serde_json::Value;

use crate::cycle;

/// The cluster every fixture lives in.
pub const CLUSTER: &str = "bench";
/// The environment variable the cluster file reads the token secret from.
pub const TOKEN_VAR: &str = "PROXOPS_BENCH_TOKEN";

/// `pve01`, `pve02`, …
pub fn nodes(count: usize) -> Vec<String> {
    (1..=count).map(|i| format!("pve{i:02}")).collect()
}

pub fn vm_name(i: usize) -> String {
    format!("vm-{i:05}")
}

pub fn vmid(i: usize) -> u32 {
    1000 + i as u32
}

/// VM `i` of a fixture: spread round-robin over `nodes`, one disk, one NIC.
pub fn manifest(i: usize, nodes: &[String], state: &str) -> String {
    let node = &nodes[i % nodes.len()];
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata: {{name: {name}}}\nspec:\n  node: {node}\n  vmid: {vmid}\n  state: {state}\n  memory: 1GiB\n  cpu: {{type: host, cores: 1}}\n  disks:\n    - {{storage: local-lvm, size: 4GiB}}\n  networks:\n    - {{model: virtio, bridge: vmbr0}}\n",
        name = vm_name(i),
        vmid = vmid(i),
    )
}

/// How to reach a simulator (what a child process needs).
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub base_url: String,
    pub token_id: String,
    pub token_secret: String,
    pub fingerprint: String,
}

impl Endpoint {
    pub fn of(sim: &Simulator) -> Endpoint {
        let (id, secret) = sim.token().split_once('=').expect("token has a secret");
        Endpoint {
            base_url: sim.base_url(),
            token_id: id.to_string(),
            token_secret: secret.to_string(),
            fingerprint: sim.fingerprint().expect("TLS is on"),
        }
    }

    pub fn client(&self) -> proxops_pve::Client {
        proxops_pve::Client::new(proxops_pve::ClientConfig {
            base_url: self.base_url.clone(),
            token_id: self.token_id.clone(),
            token_secret: self.token_secret.clone(),
            tls: proxops_pve::TlsMode::Fingerprint(self.fingerprint.clone()),
            timeout: Duration::from_secs(120),
        })
        .expect("PVE client")
    }
}

/// Write a repository with `count` VM manifests and a cluster file pointing at `endpoint`.
pub fn write_repo(dir: &Path, count: usize, nodes: &[String], state: &str, endpoint: &Endpoint) {
    let clusters = dir.join("clusters");
    let vms = dir.join("vm").join(CLUSTER);
    std::fs::create_dir_all(&clusters).expect("create clusters/");
    std::fs::create_dir_all(&vms).expect("create vm/");
    std::fs::write(
        clusters.join(format!("{CLUSTER}.yaml")),
        format!(
            "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {{name: {CLUSTER}}}\nspec:\n  endpoint: {}\n  token: {{id: '{}', secret: {{env: {TOKEN_VAR}}}}}\n  tls: {{fingerprint: '{}'}}\n",
            endpoint.base_url, endpoint.token_id, endpoint.fingerprint
        ),
    )
    .expect("write the cluster file");
    for i in 0..count {
        std::fs::write(
            vms.join(format!("{}.yaml", vm_name(i))),
            manifest(i, nodes, state),
        )
        .expect("write a manifest");
    }
}

/// Simulator settings for a bench: HTTPS, the given nodes, task time and faults.
pub fn sim_config(
    nodes: &[String],
    task_duration: Duration,
    faults: Vec<FaultRule>,
    state_file: Option<PathBuf>,
) -> SimConfig {
    SimConfig {
        nodes: nodes.to_vec(),
        tls: true,
        task_duration,
        faults,
        state_file,
        ..SimConfig::default()
    }
}

/// A simulator state file holding the `count` VMs of a fixture exactly as proxops creates
/// them, so that a plan against it is a no-op.
///
/// One VM per node is created through the real engine (plan + apply) against a seed
/// simulator; the other VMs are copies of the one on their node with their own vmid, name
/// and volume names (creating 10,000 VMs through the API would dominate the bench). The
/// bench checks that the plan is a no-op, so a copy that differs is caught, not measured.
pub async fn converged_state(
    registry: &KindRegistry,
    dir: &Path,
    count: usize,
    nodes: &[String],
    state: &str,
) -> PathBuf {
    let seed_file = dir.join("seed-state.json");
    let seed = proxops_sim::start(sim_config(
        nodes,
        Duration::ZERO,
        Vec::new(),
        Some(seed_file.clone()),
    ))
    .await
    .expect("start the seed simulator");
    let endpoint = Endpoint::of(&seed);
    let protos = count.min(nodes.len());
    let proto_repo = dir.join("seed-repo");
    write_repo(&proto_repo, protos, nodes, state, &endpoint);
    let client = endpoint.client();
    let (objects, diags) = cycle::validated(registry, &proto_repo);
    assert!(
        diags.iter().all(|d| !d.is_error()),
        "fixture manifests are valid: {diags:?}"
    );
    let first = cycle::plan_all(registry, &client, &objects, 16)
        .await
        .expect("plan the seed VMs");
    let options = ApplyOptions {
        gate: None,
        limits: Limits {
            write_concurrency: 4,
            task_timeout: Duration::from_secs(60),
        },
        secrets: None,
        read_concurrency: Some(16),
        max_passes: 8,
        memory: std::sync::Arc::new(proxops_reconcile::memory::StopMemory::in_memory()),
        cancel: None,
        rollout: None,
    };
    let report = proxops_reconcile::apply(
        registry,
        &client,
        &objects,
        first,
        options,
        Arc::new(Silent),
    )
    .await
    .expect("apply the seed VMs");
    assert!(report.converged, "seed VMs converge: {:?}", report.outcomes);
    seed.shutdown();
    drop(seed);

    let mut state_json: Value =
        serde_json::from_slice(&std::fs::read(&seed_file).expect("read the seed state"))
            .expect("seed state is JSON");
    let vms = state_json["vms"].as_object().expect("vms").clone();
    let volumes = state_json["volumes"].as_object().expect("volumes").clone();
    let mut out_vms = serde_json::Map::new();
    let mut out_volumes = serde_json::Map::new();
    for i in 0..count {
        let p = i % protos;
        let (from_id, to_id) = (vmid(p), vmid(i));
        // Volume names, the guest's name and its vmid-bound ownership mark (`proxops-<vmid>`)
        // name the copy, not the prototype.
        let rename = |text: &str| {
            text.replace(&format!("vm-{from_id}-"), &format!("vm-{to_id}-"))
                .replace(&format!("proxops-{from_id}"), &format!("proxops-{to_id}"))
                .replace(&vm_name(p), &vm_name(i))
                .replace(
                    &format!("proxops-{from_id}\""),
                    &format!("proxops-{to_id}\""),
                )
                .replace(&format!("proxops-{from_id};"), &format!("proxops-{to_id};"))
        };
        let vm = &vms[&from_id.to_string()];
        let copied: Value = serde_json::from_str(&rename(&vm.to_string())).expect("copy a VM");
        out_vms.insert(to_id.to_string(), copied);
        for (key, volume) in &volumes {
            if volume["vmid"].as_u64() == Some(u64::from(from_id)) {
                let mut copied: Value =
                    serde_json::from_str(&rename(&volume.to_string())).expect("copy a volume");
                copied["vmid"] = Value::from(to_id);
                out_volumes.insert(rename(key), copied);
            }
        }
    }
    state_json["vms"] = Value::Object(out_vms);
    state_json["volumes"] = Value::Object(out_volumes);
    let file = dir.join("state.json");
    std::fs::write(&file, serde_json::to_vec(&state_json).expect("state JSON"))
        .expect("write the state file");
    file
}
