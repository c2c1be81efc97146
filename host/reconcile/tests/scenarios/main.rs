//! The execution model, rule by rule, in process: the bundled kinds, the cycle of
//! `proxops_reconcile` (plan, the hold-backs of `run`, apply) and the simulator library, no
//! binary. Each scenario asserts on the simulator's request log and state. The harness
//! ([`Scene`]) is here; the scenarios are grouped by the part of the model they check.

mod availability;
mod ha;
mod passes;
mod rollouts;
mod runs;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proxops_reconcile::error::{Aftermath, CallError};
use proxops_reconcile::execute::Limits;
use proxops_reconcile::memory::StopMemory;
use proxops_reconcile::run::{self, Checked, ClusterRun, Holds, Outcome};
use proxops_reconcile::{
    ActionError, ApplyOptions, ApplyReport, ClusterPlan, Event, KindRegistry, Object, Reporter,
    Secrets, Silent, Status,
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

/// A TemplateVM `name` (vmid) on pve01.
fn template(name: &str, vmid: u32) -> String {
    vm(name, vmid, "").replace("kind: VM", "kind: TemplateVM")
}

/// A VM `name` (vmid) cloned from the template `from` (its disks come from the template).
fn clone_of(name: &str, vmid: u32, from: &str) -> String {
    vm(name, vmid, &format!("  clone: {from}\n"))
        .replace("  disks:\n    - {storage: local-lvm, size: 4GiB}\n", "")
}

fn fault(method: &str, path: &str, kind: FaultKind, times: Option<u32>) -> FaultRule {
    FaultRule {
        method: method.into(),
        path: path.into(),
        kind,
        probability: None,
        times,
    }
}

/// A VM config write answered 500 with `message` (PVE's words), `times` times (`None`: always).
fn config_write_fails(message: &str, times: Option<u32>) -> FaultRule {
    fault(
        "POST",
        "/nodes/{node}/qemu/{vmid}/config",
        FaultKind::Status {
            code: 500,
            message: message.into(),
        },
        times,
    )
}

fn vm(name: &str, vmid: u32, extra: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata: {{name: {name}}}\nspec:\n  node: pve01\n  vmid: {vmid}\n  memory: 1GiB\n  cpu: {{type: host, cores: 1}}\n  disks:\n    - {{storage: local-lvm, size: 4GiB}}\n  networks:\n    - {{model: virtio, bridge: vmbr0}}\n{extra}"
    )
}

impl Scene {
    async fn start() -> Scene {
        Scene::with(proxops_sim::SimConfig::default()).await
    }

    async fn with(config: proxops_sim::SimConfig) -> Scene {
        proxops_sim::ensure_crypto_provider();
        let sim = proxops_sim::start(config)
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

    /// A scene whose VM `app` (150 on pve01) was applied and runs, its manifest then given
    /// `extra` (a change to apply).
    async fn applied_then(extra: &str) -> Scene {
        let scene = Scene::start().await;
        scene.write("vm/lab/app.yaml", &vm("app", 150, ""));
        assert!(scene.apply(Holds::default()).await.converged);
        scene.write("vm/lab/app.yaml", &vm("app", 150, extra));
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
            read_concurrency: Some(4),
            secrets: None,
        };
        let mut plan = proxops_reconcile::plan_cluster(&cycle, None)
            .await
            .expect("the cluster plans");
        run::hold_back(&mut plan, &self.memory, objects.len(), holds);
        plan
    }

    async fn apply(&self, holds: Holds) -> ApplyReport {
        self.apply_with(holds, |_| {}, Arc::new(Silent)).await
    }

    /// [`Scene::apply`] with its options changed by `adjust` and events to `reporter`.
    async fn apply_with(
        &self,
        holds: Holds,
        adjust: impl FnOnce(&mut ApplyOptions),
        reporter: Arc<dyn Reporter>,
    ) -> ApplyReport {
        let objects = self.objects();
        let first = self.plan(&objects, holds).await;
        let mut options = ApplyOptions {
            gate: None,
            limits: Limits {
                write_concurrency: 2,
                task_timeout: Duration::from_secs(30),
            },
            secrets: None,
            read_concurrency: Some(4),
            max_passes: 4,
            memory: self.memory.clone(),
            cancel: None,
            rollout: None,
        };
        adjust(&mut options);
        proxops_reconcile::apply(
            &self.kinds,
            &self.client,
            &objects,
            first,
            options,
            reporter,
        )
        .await
        .expect("the apply runs")
    }

    /// The value of `key` in VM `vmid`'s config in the simulator (`None`: no such VM or key).
    fn vm_key(&self, vmid: u32, key: &str) -> Option<String> {
        self.sim.vm_config(vmid)?.get(key).cloned()
    }

    /// How many of [`Scene::writes`] `matches` holds for.
    fn count_writes(&self, matches: impl Fn(&str) -> bool) -> usize {
        self.writes().iter().filter(|w| matches(w)).count()
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
