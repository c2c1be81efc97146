//! The execution model, rule by rule, in process: the bundled kinds, the cycle of
//! `proxops_reconcile` (plan, the hold-backs of `run`, apply) and the simulator library, no
//! binary. Each scenario asserts on the simulator's request log and state.

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

/// A config write whose digest PVE refuses (someone wrote the config since the read) is
/// planned again from a fresh read and sent once more; nothing fails.
#[tokio::test(flavor = "multi_thread")]
async fn a_stale_digest_is_planned_again_not_failed() {
    let scene = Scene::applied_then("  tags: [blue]\n").await;
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
    let scene = Scene::applied_then("  hardware: {machine: q35}\n").await;
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

/// A create whose answer was lost is checked for having landed (one read of the listing)
/// before it is sent again: it landed, so it is not sent twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_lost_create_is_looked_for_before_it_is_sent_again() {
    let scene = Scene::start().await;
    scene.write("vm/lab/app.yaml", &vm("app", 150, ""));
    scene.sim.set_faults(vec![fault(
        "POST",
        "/nodes/{node}/qemu",
        FaultKind::LoseAnswer,
        Some(1),
    )]);
    let report = scene.apply(Holds::default()).await;
    assert!(report.converged, "{:?}", report.outcomes);
    let creates = scene.count_writes(|w| w == "POST /nodes/pve01/qemu");
    assert_eq!(creates, 1, "{:?}", scene.writes());
    assert_eq!(scene.sim.vm_status(150).as_deref(), Some("running"));
}

/// An object whose dependency failed is not acted on: a VM cloned from a template whose
/// create failed sends nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_dependency_blocks_its_dependents() {
    let scene = Scene::start().await;
    scene.write("templatevm/lab/golden.yaml", &template("golden", 9000));
    scene.write("vm/lab/app.yaml", &clone_of("app", 500, "golden"));
    scene.sim.set_faults(vec![fault(
        "POST",
        "/nodes/{node}/qemu",
        FaultKind::FailTask {
            message: "injected: no space left".into(),
        },
        None,
    )]);
    let report = scene.apply(Holds::default()).await;
    assert!(!report.converged);
    let sent = scene.writes();
    assert!(
        sent.iter().all(|w| w == "POST /nodes/pve01/qemu"),
        "only the template's create was sent: {sent:?}"
    );
    assert!(scene.sim.vm_config(500).is_none() && scene.sim.vm_config(9000).is_none());
    let app = report
        .outcomes
        .iter()
        .find(|o| o.object.id.name == "app")
        .map(|o| &o.status);
    assert!(
        matches!(app, Some(Status::Blocked(id)) if id.name == "golden"),
        "the clone waits for its template and is blocked by it: {app:?}"
    );
}

/// The start that ends a stop/write/start failed: the write landed, the guest is stopped, and
/// the same apply plans it once more, so its start is sent again.
#[tokio::test(flavor = "multi_thread")]
async fn a_final_start_that_failed_is_tried_once_more() {
    let scene = Scene::applied_then("  hardware: {machine: q35}\n").await;
    scene.sim.set_faults(vec![fault(
        "POST",
        "/nodes/{node}/qemu/{vmid}/status/start",
        FaultKind::FailTask {
            message: "injected: start failed".into(),
        },
        Some(1),
    )]);
    scene.sim.clear_requests();
    let report = scene.apply(Holds::default()).await;
    assert_eq!(
        scene.writes(),
        [
            "POST /nodes/pve01/qemu/150/status/shutdown",
            "POST /nodes/pve01/qemu/150/config",
            "POST /nodes/pve01/qemu/150/status/start",
            "POST /nodes/pve01/qemu/150/status/start",
        ]
    );
    assert_eq!(scene.sim.vm_status(150).as_deref(), Some("running"));
    assert_eq!(
        scene
            .sim
            .vm_config(150)
            .expect("the VM")
            .get("machine")
            .map(String::as_str),
        Some("q35")
    );
    assert!(report.passes >= 2, "{report:?}");
}

/// A later pass whose plan the gate (the policies) refuses is not run: what the first pass
/// did stays, nothing of the refused pass is sent, and the report says why.
#[tokio::test(flavor = "multi_thread")]
async fn a_later_pass_the_gate_refuses_is_not_run() {
    let scene = Scene::start().await;
    scene.write("templatevm/lab/golden.yaml", &template("golden", 9000));
    scene.write("vm/lab/app.yaml", &clone_of("app", 500, "golden"));
    let report = scene
        .apply_with(
            Holds::default(),
            |o| {
                o.gate = Some(Arc::new(|_: &ClusterPlan| {
                    Some("denied by a test policy".into())
                }))
            },
            Arc::new(Silent),
        )
        .await;
    assert!(!report.converged);
    assert!(
        report
            .stopped
            .as_deref()
            .is_some_and(|s| s.contains("denied by a test policy")),
        "{:?}",
        report.stopped
    );
    let sent = scene.writes();
    assert!(
        !sent.iter().any(|w| w.contains("/qemu/500")),
        "no request of a refused pass: {sent:?}"
    );
}

/// Cancels the run when the first action starts, as a signal would.
struct CancelOnFirstAction(tokio::sync::watch::Sender<bool>);

impl Reporter for CancelOnFirstAction {
    fn event(&self, event: Event) {
        if matches!(event, Event::ActionStarted { .. }) {
            self.0.send_replace(true);
        }
    }
}

/// A signal mid-action: the action in flight finishes, no queued action starts.
#[tokio::test(flavor = "multi_thread")]
async fn a_signal_mid_action_starts_nothing_new() {
    let scene = Scene::start().await;
    scene.write("vm/lab/a.yaml", &vm("a", 150, ""));
    scene.write("vm/lab/b.yaml", &vm("b", 151, ""));
    let (tx, rx) = tokio::sync::watch::channel(false);
    let report = scene
        .apply_with(
            Holds::default(),
            |o| {
                o.cancel = Some(rx);
                o.limits.write_concurrency = 1;
            },
            Arc::new(CancelOnFirstAction(tx)),
        )
        .await;
    let creates: Vec<String> = scene
        .writes()
        .into_iter()
        .filter(|w| w == "POST /nodes/pve01/qemu")
        .collect();
    assert_eq!(creates.len(), 1, "one create ran, the other never started");
    let interrupted = report
        .outcomes
        .iter()
        .filter(|o| matches!(o.status, Status::Failed(ActionError::Interrupted { .. })))
        .count();
    assert_eq!(interrupted, 1, "{:?}", report.outcomes);
    assert!(!report.converged);
}

/// Two stop/write/start sequences on one node with one write permit: each holds the permit
/// from its stop to its start, so one guest of the node is down at a time and the two
/// sequences never interleave.
#[tokio::test(flavor = "multi_thread")]
async fn one_guest_per_write_permit_is_down_at_a_time() {
    let scene = Scene::start().await;
    scene.write("vm/lab/a.yaml", &vm("a", 150, ""));
    scene.write("vm/lab/b.yaml", &vm("b", 151, ""));
    assert!(scene.apply(Holds::default()).await.converged);
    let q35 = "  hardware: {machine: q35}\n";
    scene.write("vm/lab/a.yaml", &vm("a", 150, q35));
    scene.write("vm/lab/b.yaml", &vm("b", 151, q35));
    scene.sim.clear_requests();
    let report = scene
        .apply_with(
            Holds::default(),
            |o| o.limits.write_concurrency = 1,
            Arc::new(Silent),
        )
        .await;
    assert!(report.converged, "{:?}", report.outcomes);
    let sent = scene.writes();
    assert_eq!(sent.len(), 6, "{sent:?}");
    // Whichever goes first, its three calls come before the other's.
    let first = &sent[0]["POST /nodes/pve01/qemu/".len()..][..3];
    for (i, w) in sent.iter().enumerate() {
        let mine = w.contains(&format!("/qemu/{first}/"));
        assert_eq!(mine, i < 3, "sequences interleaved: {sent:?}");
    }
}

/// A delete PVE answers without doing it is caught: one listing after the pass shows the guest
/// still there, and it fails.
#[tokio::test(flavor = "multi_thread")]
async fn a_delete_is_verified_by_a_listing() {
    let scene = Scene::start().await;
    scene.write("vm/lab/keep.yaml", &vm("keep", 150, ""));
    scene.write("vm/lab/gone.yaml", &vm("gone", 151, ""));
    assert!(scene.apply(Holds::default()).await.converged);
    scene.remove("vm/lab/gone.yaml");
    // The delete is answered as done (no task), and nothing is deleted.
    scene.sim.set_faults(vec![fault(
        "DELETE",
        "/nodes/{node}/qemu/{vmid}",
        FaultKind::Status {
            code: 200,
            message: "OK".into(),
        },
        None,
    )]);
    let report = scene.apply(Holds::default()).await;
    assert!(!report.converged);
    assert!(scene.sim.vm_config(151).is_some());
    assert!(
        report.outcomes.iter().any(|o| matches!(
            &o.status,
            Status::Failed(ActionError::DeleteNotVerified { resource }) if resource == "qemu/151"
        )),
        "{:?}",
        report.outcomes
    );
}

/// Clone, configure, start: a VM cloned from a template created in the same apply converges
/// over several passes, each planned from what PVE then holds.
#[tokio::test(flavor = "multi_thread")]
async fn clone_configure_start_converges_over_passes() {
    let scene = Scene::start().await;
    scene.write("templatevm/lab/golden.yaml", &template("golden", 9000));
    scene.write("vm/lab/app.yaml", &clone_of("app", 500, "golden"));
    let report = scene.apply(Holds::default()).await;
    assert!(report.converged, "{:?}", report.outcomes);
    assert!(report.passes >= 2, "passes: {}", report.passes);
    let sent = scene.writes();
    let at = |w: &str| sent.iter().position(|s| s.starts_with(w));
    let (template, clone) = (
        at("POST /nodes/pve01/qemu").expect("the template is created"),
        at("POST /nodes/pve01/qemu/9000/clone").expect("the VM is cloned"),
    );
    assert!(template < clone, "{sent:?}");
    assert_eq!(scene.sim.vm_status(500).as_deref(), Some("running"));
}

/// A restore start whose task finds the guest's lock held (the stop it follows still running)
/// is sent again until it runs, so the guest is not left down.
#[tokio::test(flavor = "multi_thread")]
async fn a_restore_start_is_sent_again_while_the_lock_is_held() {
    let scene = Scene::applied_then("  hardware: {machine: q35}\n").await;
    scene.sim.set_faults(vec![
        fault(
            "POST",
            "/nodes/{node}/qemu/{vmid}/config",
            FaultKind::Status {
                code: 500,
                message: "injected: storage unreachable".into(),
            },
            None,
        ),
        fault(
            "POST",
            "/nodes/{node}/qemu/{vmid}/status/start",
            FaultKind::LockTimeout,
            Some(1),
        ),
    ]);
    scene.sim.clear_requests();
    let report = scene.apply(Holds::default()).await;
    assert!(!report.converged);
    let starts = scene.count_writes(|w| w.ends_with("/status/start"));
    assert_eq!(starts, 2, "{:?}", scene.writes());
    assert_eq!(scene.sim.vm_status(150).as_deref(), Some("running"));
}

/// A start PVE refuses because the guest already runs is what the start was for: done.
#[tokio::test(flavor = "multi_thread")]
async fn a_start_of_a_running_guest_counts_as_done() {
    let scene = Scene::start().await;
    scene.write("vm/lab/app.yaml", &vm("app", 150, "  state: stopped\n"));
    assert!(scene.apply(Holds::default()).await.converged);
    scene.write("vm/lab/app.yaml", &vm("app", 150, ""));
    scene.sim.set_faults(vec![fault(
        "POST",
        "/nodes/{node}/qemu/{vmid}/status/start",
        FaultKind::FailTask {
            message: "VM 150 already running".into(),
        },
        Some(1),
    )]);
    let report = scene.apply(Holds::default()).await;
    assert!(
        report.outcomes.iter().all(|o| o.status == Status::Done),
        "{:?}",
        report.outcomes
    );
}

/// Work a killed run left in flight is waited for and never sent again: a create whose task
/// still runs (its run killed after sending it) makes `ClusterRun::settle` wait for that task
/// and plan again, so the apply that follows sends no second create.
#[tokio::test(flavor = "multi_thread")]
async fn work_a_killed_run_left_in_flight_is_waited_for_not_sent_again() {
    let scene = Scene::with(proxops_sim::SimConfig {
        task_duration: Duration::from_millis(1500),
        ..proxops_sim::SimConfig::default()
    })
    .await;
    scene.write("vm/lab/app.yaml", &vm("app", 150, ""));
    let objects = scene.objects();
    // The killed run: its create was sent, its task runs on, nobody waits for it.
    let first = scene.plan(&objects, Holds::default()).await;
    let create = &first.objects[0].proposal.actions[0].calls[0];
    assert_eq!(create.path, "/nodes/pve01/qemu");
    let params: Vec<proxops_pve::Param> = create
        .params
        .iter()
        .map(|p| proxops_pve::Param::new(&p.name, &p.value))
        .collect();
    scene
        .client
        .request(proxops_pve::Method::Post, &create.path, &params, false)
        .await
        .expect("the killed run's create is answered with its task");

    let run = ClusterRun {
        kinds: scene.kinds.clone(),
        client: scene.client.clone(),
        cluster: CLUSTER.into(),
        inputs: Arc::new(proxops_reconcile::ClusterInputs {
            manifests: Vec::new(),
            objects: objects.clone(),
            diags: Vec::new(),
        }),
        settings: run::Settings {
            read_concurrency: Some(4),
            write_concurrency: 2,
            task_timeout: Duration::from_secs(30),
            max_passes: 4,
        },
        secrets: None,
        memory: scene.memory.clone(),
        policies: Arc::new(proxops_reconcile::policy::PolicySet::empty()),
        holds: Holds::default(),
    };
    let mut plan = run.plan().await.expect("the cluster plans");
    let ended = std::sync::Mutex::new(Vec::new());
    run.settle(&mut plan, &|_| {}, &|task| {
        ended.lock().unwrap().push(task.to_string())
    })
    .await
    .expect("the task list is read");
    let waited = ended.into_inner().unwrap();
    assert_eq!(
        waited.len(),
        1,
        "the create task was waited for: {waited:?}"
    );
    assert!(waited[0].starts_with("qmcreate 150 on pve01"), "{waited:?}");
    let checked = run.check(plan);
    let Checked::Passed { plan, report } = checked else {
        panic!("no policy blocks it");
    };
    let applied = run
        .apply(plan, Arc::new(Silent), None)
        .await
        .expect("the apply runs");
    assert_eq!(
        Outcome::of(&applied.initial, &report, Some(&applied)),
        Outcome::Clean,
        "{:?}",
        applied.outcomes
    );
    let creates = scene.count_writes(|w| w == "POST /nodes/pve01/qemu");
    assert_eq!(
        creates,
        1,
        "the create is never sent twice: {:?}",
        scene.writes()
    );
    assert_eq!(scene.sim.vm_status(150).as_deref(), Some("running"));
}

/// Dependencies fail closed at plan time: a VM whose ISO is placed on another node only is
/// blocked before any call (the ISO kind's `unavailable-on:` anomaly), and nothing is sent for
/// it or to its node.
#[tokio::test(flavor = "multi_thread")]
async fn a_dependency_that_cannot_serve_the_node_blocks_at_plan_time() {
    let scene = Scene::start().await;
    scene.write(
        "iso/lab/installer.yaml",
        "apiVersion: proxops/v1alpha1\nkind: ISO\nmetadata: {name: installer}\nspec:\n  url: http://127.0.0.1:9/installer.iso\n  storage: local\n  filename: installer.iso\n  nodes: [pve01]\n",
    );
    scene.write(
        "vm/lab/web.yaml",
        &vm("web", 170, "  hardware: {cdrom: {iso: installer}}\n")
            .replace("node: pve01", "node: pve02"),
    );
    let objects = scene.objects();
    let plan = scene.plan(&objects, Holds::default()).await;
    let web = plan
        .objects
        .iter()
        .find(|o| o.object.id.name == "web")
        .expect("the VM is in the plan");
    assert!(
        matches!(
            &web.error,
            Some(proxops_reconcile::PlanError::Blocked(proxops_reconcile::Blocker::NotOnNode { node, .. })) if node == "pve02"
        ),
        "{:?}",
        web.error
    );
    scene.sim.clear_requests();
    scene.apply(Holds::default()).await;
    assert!(scene.sim.vm_config(170).is_none());
    let sent = scene.writes();
    assert!(
        !sent
            .iter()
            .any(|w| w.contains("/nodes/pve02/") || w.contains("/170")),
        "{sent:?}"
    );
}

/// Concurrent runs: a second apply of a cluster, from another process, is refused before any
/// request; two clusters of one process sharing the lock file take turns.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_apply_of_a_cluster_is_refused_and_one_process_takes_turns() {
    use proxops_reconcile::lock::Locks;
    let dir = tempfile::tempdir().expect("a folder");
    let path = dir.path().join("locks").join("apply-lab.lock");
    let here = Arc::new(Locks::default());
    let held = here
        .take(Some(path.clone()), "lab")
        .await
        .expect("the first apply takes the lock");
    // Another process (its own Locks): refused, with what to do.
    let refused = Locks::default()
        .take(Some(path.clone()), "lab")
        .await
        .expect_err("a second apply is refused");
    assert!(
        refused.contains("another proxops apply holds the lock of cluster lab"),
        "{refused}"
    );
    // This process's other cluster on the same file waits for its turn, then gets it.
    let (turn_here, turn_path) = (here.clone(), path.clone());
    let waiting = tokio::spawn(async move { turn_here.take(Some(turn_path), "lab2").await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiting.is_finished(),
        "it waits while the first holds the lock"
    );
    drop(held);
    let second = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("its turn comes")
        .expect("the task ran");
    assert!(second.is_ok(), "{second:?}");
}

/// Clusters are independent: one cluster whose every create fails does not keep another
/// from converging, when both run at once.
#[tokio::test(flavor = "multi_thread")]
async fn one_failing_cluster_does_not_stop_another() {
    let (good, bad) = tokio::join!(Scene::start(), Scene::start());
    good.write("vm/lab/app.yaml", &vm("app", 150, ""));
    bad.write("vm/lab/app.yaml", &vm("app", 150, ""));
    bad.sim.set_faults(vec![fault(
        "POST",
        "/nodes/{node}/qemu",
        FaultKind::FailTask {
            message: "injected: this cluster is broken".into(),
        },
        None,
    )]);
    let (good_report, bad_report) =
        tokio::join!(good.apply(Holds::default()), bad.apply(Holds::default()));
    assert!(good_report.converged, "{:?}", good_report.outcomes);
    assert!(!bad_report.converged);
    assert_eq!(good.sim.vm_status(150).as_deref(), Some("running"));
    assert!(bad.sim.vm_config(150).is_none());
}

/// Validation is per cluster: an invalid manifest stops its own cluster's inputs, not the
/// other cluster's, which `validate_in_order` hands over as it finishes each.
#[tokio::test(flavor = "multi_thread")]
async fn validation_errors_stay_in_their_cluster() {
    let scene = Scene::start().await;
    scene.write(
        "clusters/lab2.yaml",
        "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {name: lab2}\nspec:\n  endpoint: https://192.0.2.1:8006\n  token: {id: 'x@pve!t', secret: {env: PROXOPS_UNUSED}}\n",
    );
    scene.write("vm/lab/app.yaml", &vm("app", 150, ""));
    scene.write(
        "vm/lab2/bad.yaml",
        &vm("bad", 151, "").replace("memory: 1GiB", "memory: 1 gig"),
    );
    let folders = scene.kinds.folders();
    let folders: Vec<&str> = folders.iter().map(String::as_str).collect();
    let (layout, _) = proxops_core::load_layout(scene.repo.path(), scene.repo.path(), &folders);
    let layout = Arc::new(layout.expect("a layout"));
    let receivers = proxops_reconcile::validate_in_order(
        scene.kinds.clone(),
        Secrets::default(),
        vec![(layout.clone(), "lab".into()), (layout, "lab2".into())],
        None,
    );
    let mut inputs = Vec::new();
    for r in receivers {
        inputs.push(r.await.expect("each cluster is validated"));
    }
    let errors =
        |i: &proxops_reconcile::ClusterInputs| i.diags.iter().filter(|d| d.is_error()).count();
    assert_eq!(errors(&inputs[0]), 0, "{:?}", inputs[0].diags);
    assert_eq!(inputs[0].objects.len(), 1);
    assert!(errors(&inputs[1]) > 0, "{:?}", inputs[1].diags);
    assert!(
        inputs[1].diags.iter().any(|d| d.path == "spec.memory"),
        "{:?}",
        inputs[1].diags
    );
}

/// A failed stop-required change is remembered: the next apply does not stop the guest again
/// for the same change (it is held back as an anomaly) unless the operator asks for it.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_stop_required_change_is_not_retried_blindly() {
    let scene = Scene::applied_then("  hardware: {machine: q35}\n").await;
    scene.sim.set_faults(vec![fault(
        "POST",
        "/nodes/{node}/qemu/{vmid}/config",
        FaultKind::Status {
            code: 500,
            message: "injected: storage unreachable".into(),
        },
        None,
    )]);
    assert!(!scene.apply(Holds::default()).await.converged);
    scene.sim.clear_requests();
    let again = scene.apply(Holds::default()).await;
    assert!(
        scene.writes().is_empty(),
        "not stopped again: {:?}",
        scene.writes()
    );
    let held = again
        .initial
        .objects
        .iter()
        .flat_map(|o| &o.proposal.anomalies)
        .any(|a| a.message.contains("--retry-stop-required"));
    assert!(held, "{:?}", again.initial.objects);
    // Asked for: it is stopped for the change once more.
    scene.sim.set_faults(Vec::new());
    let retry = Holds {
        retry_stop_required: true,
        ..Holds::default()
    };
    assert!(scene.apply(retry).await.converged);
    assert_eq!(
        scene
            .sim
            .vm_config(150)
            .expect("the VM")
            .get("machine")
            .map(String::as_str),
        Some("q35")
    );
}

/// Reads are repeated on a transient failure: a gateway error on the listing does not fail
/// the plan.
#[tokio::test(flavor = "multi_thread")]
async fn a_transient_read_failure_is_retried() {
    let scene = Scene::start().await;
    scene.write("vm/lab/app.yaml", &vm("app", 150, ""));
    scene.sim.set_faults(vec![fault(
        "GET",
        "/cluster/resources",
        FaultKind::Status {
            code: 502,
            message: "Bad Gateway".into(),
        },
        Some(1),
    )]);
    let report = scene.apply(Holds::default()).await;
    assert!(report.converged, "{:?}", report.outcomes);
    let listings = scene
        .sim
        .requests()
        .iter()
        .filter(|r| r.path == "/cluster/resources")
        .take(2)
        .map(|r| r.status)
        .collect::<Vec<_>>();
    assert_eq!(listings, [502, 200]);
}
