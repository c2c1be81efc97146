//! The execution model, rule by rule, in process: the bundled kinds, the cycle of
//! `proxops_reconcile` (plan, the hold-backs of `run`, apply) and the simulator library, no
//! binary. Each scenario asserts on the simulator's request log and state.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proxops_reconcile::error::{Aftermath, CallError};
use proxops_reconcile::execute::Limits;
use proxops_reconcile::memory::StopMemory;
use proxops_reconcile::run::{self, Holds};
use proxops_reconcile::{
    ActionError, ApplyOptions, ApplyReport, ClusterPlan, KindRegistry, Object, Secrets, Silent,
    Status,
};
use proxops_runtime::{Runtime, RuntimeConfig};
use proxops_sim::{FaultKind, FaultRule, Simulator};

const CLUSTER: &str = "lab";

/// One cluster: a simulator, a repository of VM manifests, the bundled kinds.
struct Scene {
    sim: Simulator,
    client: proxops_pve::Client,
    repo: tempfile::TempDir,
    kinds: KindRegistry,
    memory: Arc<StopMemory>,
}

fn vm(name: &str, vmid: u32, extra: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata: {{name: {name}}}\nspec:\n  node: pve01\n  vmid: {vmid}\n  memory: 1GiB\n  cpu: {{type: host, cores: 1}}\n  disks:\n    - {{storage: local-lvm, size: 4GiB}}\n  networks:\n    - {{model: virtio, bridge: vmbr0}}\n{extra}"
    )
}

impl Scene {
    async fn start() -> Scene {
        proxops_sim::ensure_crypto_provider();
        let sim = proxops_sim::start(proxops_sim::SimConfig::default())
            .await
            .expect("the simulator starts");
        let (id, secret) = sim.token().split_once('=').expect("a token");
        let client = proxops_pve::Client::new(proxops_pve::ClientConfig {
            base_url: sim.base_url(),
            token_id: id.to_string(),
            token_secret: secret.to_string(),
            tls: proxops_pve::TlsMode::Fingerprint(sim.fingerprint().expect("TLS on")),
            timeout: Duration::from_secs(30),
        })
        .expect("a client");
        let runtime = Runtime::new(RuntimeConfig { cache_dir: None }).expect("a runtime");
        let kinds = KindRegistry::bundled(&runtime).expect("the bundled kinds");
        let repo = tempfile::tempdir().expect("a repository");
        let scene = Scene {
            sim,
            client,
            repo,
            kinds,
            memory: Arc::new(StopMemory::in_memory()),
        };
        scene.write(
            &format!("clusters/{CLUSTER}.yaml"),
            &format!(
                "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {{name: {CLUSTER}}}\nspec:\n  endpoint: {}\n  token: {{id: 'x@pve!t', secret: {{env: PROXOPS_UNUSED}}}}\n",
                scene.sim.base_url()
            ),
        );
        scene
    }

    fn write(&self, path: &str, text: &str) {
        let path = self.repo.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    fn remove(&self, path: &str) {
        std::fs::remove_file(self.repo.path().join(path)).expect("remove");
    }

    /// The cluster's validated objects; any validation error fails the scenario.
    fn objects(&self) -> Vec<Object> {
        let folders = self.kinds.folders();
        let folders: Vec<&str> = folders.iter().map(String::as_str).collect();
        let root: &Path = self.repo.path();
        let (layout, diags) = proxops_core::load_layout(root, root, &folders);
        assert!(diags.iter().all(|d| !d.is_error()), "{diags:?}");
        let inputs = proxops_reconcile::validate_cluster(
            &self.kinds,
            &layout.expect("a layout"),
            CLUSTER,
            &Secrets::default(),
            None,
        );
        assert!(
            inputs.diags.iter().all(|d| !d.is_error()),
            "{:?}",
            inputs.diags
        );
        inputs.objects
    }

    /// The first plan, with the hold-backs every plan gets.
    async fn plan(&self, objects: &[Object], holds: Holds) -> ClusterPlan {
        let cycle = proxops_reconcile::Cycle {
            registry: &self.kinds,
            client: &self.client,
            cluster: CLUSTER,
            objects,
            read_concurrency: 4,
            secrets: None,
        };
        let mut plan = proxops_reconcile::plan_cluster(&cycle, None)
            .await
            .expect("the cluster plans");
        run::hold_back(&mut plan, &self.memory, objects.len(), holds);
        plan
    }

    async fn apply(&self, holds: Holds) -> ApplyReport {
        let objects = self.objects();
        let first = self.plan(&objects, holds).await;
        let options = ApplyOptions {
            gate: None,
            limits: Limits {
                write_concurrency: 2,
                task_timeout: Duration::from_secs(30),
            },
            secrets: None,
            read_concurrency: 4,
            max_passes: 4,
            memory: self.memory.clone(),
            cancel: None,
        };
        proxops_reconcile::apply(
            &self.kinds,
            &self.client,
            &objects,
            first,
            options,
            Arc::new(Silent),
        )
        .await
        .expect("the apply runs")
    }

    /// `METHOD path` of every request that is not a read, since the last clear.
    fn writes(&self) -> Vec<String> {
        self.sim
            .requests()
            .into_iter()
            .filter(|r| r.method != "GET")
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }
}

/// A config write whose digest PVE refuses (someone wrote the config since the read) is
/// planned again from a fresh read and sent once more; nothing fails.
#[tokio::test(flavor = "multi_thread")]
async fn a_stale_digest_is_planned_again_not_failed() {
    let scene = Scene::start().await;
    scene.write("vm/lab/app.yaml", &vm("app", 150, ""));
    assert!(scene.apply(Holds::default()).await.converged);
    scene.write("vm/lab/app.yaml", &vm("app", 150, "  tags: [blue]\n"));
    scene.sim.set_faults(vec![FaultRule {
        method: "POST".into(),
        path: "/nodes/{node}/qemu/{vmid}/config".into(),
        kind: FaultKind::Status {
            code: 500,
            message: "checksum mismatch (file change by other user?)".into(),
        },
        probability: None,
        times: Some(1),
    }]);
    scene.sim.clear_requests();
    let report = scene.apply(Holds::default()).await;
    assert!(report.converged, "{:?}", report.outcomes);
    assert_eq!(
        scene.writes(),
        [
            "POST /nodes/pve01/qemu/150/config",
            "POST /nodes/pve01/qemu/150/config"
        ],
        "the write, refused for its digest, then again from a fresh read"
    );
    let config = scene.sim.vm_config(150).expect("the VM");
    assert_eq!(config["tags"], "blue;proxops;proxops-150");
}

/// A stop/write/start whose write fails starts the guest again (its restore step), says so,
/// and is not sent again in the same run.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_stop_required_write_is_restored() {
    let scene = Scene::start().await;
    scene.write("vm/lab/app.yaml", &vm("app", 150, ""));
    assert!(scene.apply(Holds::default()).await.converged);
    scene.write(
        "vm/lab/app.yaml",
        &vm("app", 150, "  hardware: {machine: q35}\n"),
    );
    scene.sim.set_faults(vec![FaultRule {
        method: "POST".into(),
        path: "/nodes/{node}/qemu/{vmid}/config".into(),
        kind: FaultKind::Status {
            code: 500,
            message: "injected: storage unreachable".into(),
        },
        probability: None,
        times: None,
    }]);
    scene.sim.clear_requests();
    let report = scene.apply(Holds::default()).await;
    assert!(!report.converged);
    assert_eq!(
        scene.writes(),
        [
            "POST /nodes/pve01/qemu/150/status/shutdown",
            "POST /nodes/pve01/qemu/150/config",
            "POST /nodes/pve01/qemu/150/status/start",
        ]
    );
    assert_eq!(scene.sim.vm_status(150).as_deref(), Some("running"));
    // Typed: the write's own error, then what the restore did.
    let [outcome] = report.outcomes.as_slice() else {
        panic!("one object acted: {:?}", report.outcomes);
    };
    let Status::Failed(ActionError::Call { cause, .. }) = &outcome.status else {
        panic!("the write failed: {:?}", outcome.status);
    };
    assert!(
        matches!(&cause.error, CallError::Pve(e) if e.status() == Some(500) && !e.is_stale_digest())
    );
    assert_eq!(
        cause.aftermath,
        Aftermath::Restored(vec!["POST /nodes/pve01/qemu/150/status/start".into()])
    );
    assert!(cause.to_string().ends_with(
        "restored: POST /nodes/pve01/qemu/150/status/start ran, so it was started again (its declared state)"
    ));
}

/// More than `PRUNE_GUARD` deletes at once are held back as anomalies (none is sent) unless
/// `allow_prune` covers them all.
#[tokio::test(flavor = "multi_thread")]
async fn the_mass_prune_guard_holds_deletes_back_unless_allowed() {
    let scene = Scene::start().await;
    let count = run::PRUNE_GUARD as u32 + 2;
    for i in 0..count {
        scene.write(
            &format!("vm/lab/v{i}.yaml"),
            &vm(&format!("v{i}"), 150 + i, ""),
        );
    }
    assert!(scene.apply(Holds::default()).await.converged);
    for i in 1..count {
        scene.remove(&format!("vm/lab/v{i}.yaml"));
    }
    let deletes = (count - 1) as usize;

    let objects = scene.objects();
    let held = scene.plan(&objects, Holds::default()).await;
    assert_eq!(held.counts().delete, 0);
    let reasons: Vec<&str> = held
        .objects
        .iter()
        .flat_map(|o| &o.proposal.anomalies)
        .map(|a| a.message.as_str())
        .collect();
    assert_eq!(reasons.len(), deletes, "{reasons:?}");
    assert!(
        reasons
            .iter()
            .all(|r| r.contains(&format!("--allow-prune={deletes}"))),
        "{reasons:?}"
    );
    scene.sim.clear_requests();
    scene.apply(Holds::default()).await;
    assert!(scene.writes().is_empty(), "{:?}", scene.writes());

    // Allowed for fewer than all: still held. Allowed for all: sent.
    let short = Holds {
        allow_prune: Some(deletes - 1),
        ..Holds::default()
    };
    assert_eq!(scene.plan(&objects, short).await.counts().delete, 0);
    let all = Holds {
        allow_prune: Some(deletes),
        ..Holds::default()
    };
    scene.sim.clear_requests();
    assert!(scene.apply(all).await.converged);
    let sent = scene.writes();
    assert_eq!(
        sent.iter().filter(|w| w.starts_with("DELETE")).count(),
        deletes,
        "{sent:?}"
    );
    assert!(
        scene.sim.vm_config(150).is_some(),
        "the one with a manifest stays"
    );
}
