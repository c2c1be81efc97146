//! PVE's HA manager and offline nodes: power calls PVE hands to HA are waited for until the
//! guest really is in the state, bounded; nothing is sent to a node PVE lists as offline.

use super::*;
use proxops_pve::{Method as PveMethod, Param};

/// A scene whose VM `app` (150 on pve01, running) is an HA resource, its manifest then given
/// `extra`; HA's CRM carries requests out after `crm_delay`.
async fn ha_managed_then(extra: &str, crm_delay: Duration) -> Scene {
    let scene = Scene::with(proxops_sim::SimConfig {
        ha_crm_delay: crm_delay,
        ..proxops_sim::SimConfig::default()
    })
    .await;
    scene.write("vm/lab/app.yaml", &vm("app", 150, ""));
    assert!(scene.apply(Holds::default()).await.converged);
    scene
        .client
        .request(
            PveMethod::Post,
            "/cluster/ha/resources",
            &[Param::new("sid", "vm:150")],
            false,
        )
        .await
        .expect("the HA resource is created");
    scene.write("vm/lab/app.yaml", &vm("app", 150, extra));
    scene
}

/// A stop-required change on an HA-managed VM: PVE answers the shutdown with an `hastop` task
/// that ends at once while the VM still runs. The apply waits until HA stopped it, writes,
/// starts it through HA and waits until it runs: one apply, nothing left pending.
#[tokio::test(flavor = "multi_thread")]
async fn a_stop_required_change_on_an_ha_managed_vm_converges_in_one_apply() {
    let scene = ha_managed_then("  hardware: {machine: q35}\n", Duration::from_millis(300)).await;
    scene.sim.clear_requests();
    let waits = Arc::new(Recorder::default());
    let report = scene
        .apply_with(Holds::default(), |_| {}, waits.clone())
        .await;
    assert!(report.converged, "{:?}", report.outcomes);
    assert!(
        report
            .last
            .objects
            .iter()
            .all(|o| o.proposal.pending.is_empty()),
        "nothing pending: {:?}",
        report.last.objects
    );
    assert_eq!(scene.vm_key(150, "machine").as_deref(), Some("q35"));
    assert_eq!(scene.sim.vm_status(150).as_deref(), Some("running"));
    assert_eq!(
        scene.writes(),
        [
            "POST /nodes/pve01/qemu/150/status/shutdown",
            "POST /nodes/pve01/qemu/150/config",
            "POST /nodes/pve01/qemu/150/status/start",
        ]
    );
    // The write went to a stopped VM: between the shutdown and the write, a status read
    // saw it stopped.
    let log = scene.sim.requests();
    let at = |what: &str| {
        log.iter()
            .position(|r| format!("{} {}", r.method, r.path) == what)
    };
    let (shutdown, write) = (
        at("POST /nodes/pve01/qemu/150/status/shutdown").expect("a shutdown"),
        at("POST /nodes/pve01/qemu/150/config").expect("a write"),
    );
    assert!(
        log[shutdown..write]
            .iter()
            .any(|r| r.path == "/nodes/pve01/qemu/150/status/current"),
        "the stop was waited for"
    );
    assert_eq!(
        waits.waited(),
        ["VM 150 to be stopped", "VM 150 to be running"],
        "progress says what it waits for"
    );
}

/// When HA does not carry the stop out within the bound, the action fails before its write
/// (no write meant for a stopped VM reaches a running one), and its restore step runs.
#[tokio::test(flavor = "multi_thread")]
async fn an_ha_stop_that_does_not_happen_in_time_fails_before_the_write() {
    let scene = ha_managed_then("  hardware: {machine: q35}\n", Duration::from_secs(600)).await;
    scene.sim.clear_requests();
    let report = scene
        .apply_with(
            Holds::default(),
            |o| o.limits.task_timeout = Duration::from_secs(2),
            Arc::new(Silent),
        )
        .await;
    assert!(!report.converged);
    assert_eq!(
        scene.writes(),
        [
            "POST /nodes/pve01/qemu/150/status/shutdown",
            "POST /nodes/pve01/qemu/150/status/start",
        ],
        "no config write; the restore asked HA to keep it started"
    );
    assert_eq!(scene.vm_key(150, "machine"), None);
    let [outcome] = report.outcomes.as_slice() else {
        panic!("one object acted: {:?}", report.outcomes);
    };
    let Status::Failed(ActionError::Call { cause, .. }) = &outcome.status else {
        panic!("the shutdown failed: {:?}", outcome.status);
    };
    assert!(
        matches!(&cause.error, CallError::Unsettled { .. }),
        "{:?}",
        cause.error
    );
    assert!(
        cause.to_string().contains("VM 150 to be stopped"),
        "{cause}"
    );
}

/// A node PVE lists as offline: nothing is read from or sent to it, its guests are reported
/// as anomalies (exit 3), and the other nodes converge.
#[tokio::test(flavor = "multi_thread")]
async fn an_offline_node_is_left_alone_and_the_rest_converges() {
    let scene = Scene::start().await;
    scene.write("vm/lab/a.yaml", &vm("a", 150, ""));
    scene.write(
        "vm/lab/b.yaml",
        &vm("b", 151, "").replace("node: pve01", "node: pve02"),
    );
    assert!(scene.apply(Holds::default()).await.converged);
    scene.sim.set_node_online("pve02", false).expect("pve02");
    // Drift on both, and a new VM for the offline node.
    scene.write("vm/lab/a.yaml", &vm("a", 150, "").replace("1GiB", "2GiB"));
    scene.write(
        "vm/lab/b.yaml",
        &vm("b", 151, "")
            .replace("node: pve01", "node: pve02")
            .replace("1GiB", "2GiB"),
    );
    scene.write(
        "vm/lab/c.yaml",
        &vm("c", 152, "").replace("node: pve01", "node: pve02"),
    );
    scene.sim.clear_requests();
    let report = scene.apply(Holds::default()).await;
    assert!(
        scene
            .sim
            .requests()
            .iter()
            .all(|r| !r.path.starts_with("/nodes/pve02/")),
        "nothing sent to pve02: {:?}",
        scene.sim.requests()
    );
    assert!(scene.count_writes(|w| w == "POST /nodes/pve01/qemu/150/config") == 1);
    assert!(report.converged, "{:?}", report.outcomes);
    let offline: Vec<&str> = report
        .last
        .objects
        .iter()
        .filter(|o| {
            o.proposal
                .anomalies
                .iter()
                .any(|a| a.message.contains("node pve02") && a.message.contains("offline"))
        })
        .map(|o| o.object.id.name.as_str())
        .collect();
    assert_eq!(offline, ["b", "c"]);
    assert_eq!(
        run::Outcome::of(&report.last, &Default::default(), Some(&report)),
        Outcome::NeedsHuman
    );
}

/// Collects what the apply said it waits for.
#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<String>>);

impl Recorder {
    fn waited(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl Reporter for Recorder {
    fn event(&self, event: Event) {
        if let Event::Waiting { what, .. } = event {
            self.0.lock().unwrap().push(what);
        }
    }
}
