//! PVE's HA manager and offline nodes: power calls PVE hands to HA are waited for until the
//! guest really is in the state, bounded; nothing is sent to a node PVE lists as offline.

use super::*;
use proxops_pve::{Method as PveMethod, Param};

/// A POST straight to PVE (as a human or another tool would), which must succeed.
async fn post(scene: &Scene, path: &str, params: &[(&str, &str)]) {
    let params: Vec<Param> = params.iter().map(|(k, v)| Param::new(*k, *v)).collect();
    scene
        .client
        .request(PveMethod::Post, path, &params, false)
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
}

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
    post(&scene, "/cluster/ha/resources", &[("sid", "vm:150")]).await;
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

/// A simulator with a shared storage `ceph` (HA can recover guests whose disks are on it) and
/// a quick HA manager: requests carried out after 100 ms, a lost node fenced after 300 ms.
async fn shared_cluster() -> Scene {
    let mut storages = proxops_sim::default_storages();
    let mut ceph = proxops_sim::StorageConfig::new("ceph", "rbd", &["images", "rootdir"]);
    ceph.shared = true;
    storages.push(ceph);
    Scene::with(proxops_sim::SimConfig {
        nodes: vec!["pve01".into(), "pve02".into(), "pve03".into()],
        storages,
        ha_crm_delay: Duration::from_millis(100),
        ha_fence_delay: Duration::from_millis(300),
        ..proxops_sim::SimConfig::default()
    })
    .await
}

/// VM `name` (vmid) on `node`, its disk on the shared storage, with `extra`.
fn shared_vm(name: &str, vmid: u32, node: &str, extra: &str) -> String {
    vm(name, vmid, extra)
        .replace("node: pve01", &format!("node: {node}"))
        .replace("storage: local-lvm", "storage: ceph")
}

/// Polls `done` for up to 10 s.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} did not happen within 10 s");
}

/// `spec.ha` declares the HA resource: created with proxops's mark, updated when the
/// manifest changes, removed when the manifest drops it; each apply converges.
#[tokio::test(flavor = "multi_thread")]
async fn spec_ha_creates_updates_and_removes_the_ha_resource() {
    let scene = shared_cluster().await;
    scene.write(
        "vm/lab/db.yaml",
        &shared_vm("db", 160, "pve01", "  ha: {max-restart: 2}\n"),
    );
    let report = scene.apply(Holds::default()).await;
    assert!(report.converged, "{:?}", report.outcomes);
    let resource = scene
        .client
        .get("/cluster/ha/resources/vm%3A160", &[])
        .await
        .expect("the HA resource exists");
    assert_eq!(resource["max_restart"], 2, "{resource}");
    assert_eq!(resource["state"], "started", "{resource}");
    assert!(
        resource["comment"]
            .as_str()
            .unwrap_or("")
            .contains("proxops-160"),
        "{resource}"
    );
    assert_eq!(scene.sim.vm_status(160).as_deref(), Some("running"));

    scene.write(
        "vm/lab/db.yaml",
        &shared_vm("db", 160, "pve01", "  ha: {max-restart: 3}\n"),
    );
    scene.sim.clear_requests();
    assert!(scene.apply(Holds::default()).await.converged);
    assert_eq!(scene.writes(), ["PUT /cluster/ha/resources/vm:160"]);
    let resource = scene
        .client
        .get("/cluster/ha/resources/vm%3A160", &[])
        .await
        .unwrap();
    assert_eq!(resource["max_restart"], 3, "{resource}");

    scene.write("vm/lab/db.yaml", &shared_vm("db", 160, "pve01", ""));
    scene.sim.clear_requests();
    assert!(scene.apply(Holds::default()).await.converged);
    assert_eq!(scene.writes(), ["DELETE /cluster/ha/resources/vm:160"]);
    assert_eq!(
        scene
            .client
            .get("/cluster/ha/resources", &[])
            .await
            .unwrap(),
        serde_json::json!([])
    );
    assert_eq!(scene.sim.vm_status(160).as_deref(), Some("running"));
}

/// A node fails mid-fleet: HA recovers its HA guests elsewhere. The next plan says where HA
/// put each one, repairs their drift with calls to the node they are on, and reports the
/// guest left on the offline node; nothing is sent to it.
#[tokio::test(flavor = "multi_thread")]
async fn after_a_failover_relocated_guests_converge_where_they_are() {
    let scene = shared_cluster().await;
    scene.write("vm/lab/a.yaml", &shared_vm("a", 170, "pve02", "  ha: {}\n"));
    scene.write("vm/lab/b.yaml", &shared_vm("b", 171, "pve02", ""));
    scene.write("vm/lab/c.yaml", &shared_vm("c", 172, "pve01", "  ha: {}\n"));
    assert!(scene.apply(Holds::default()).await.converged);
    scene.sim.set_node_online("pve02", false).expect("pve02");
    eventually("HA recovers VM 170", || {
        scene.sim.guest_node(170).is_some_and(|n| n != "pve02")
            && scene.sim.vm_status(170).as_deref() == Some("running")
    })
    .await;
    let home = scene.sim.guest_node(170).unwrap();
    // Drift on the relocated guest.
    scene.write(
        "vm/lab/a.yaml",
        &shared_vm("a", 170, "pve02", "  ha: {}\n").replace("1GiB", "2GiB"),
    );
    let objects = scene.objects();
    let plan = scene.plan(&objects, Holds::default()).await;
    let a = plan
        .objects
        .iter()
        .find(|o| o.object.id.name == "a")
        .unwrap();
    assert_eq!(
        a.relocated,
        Some(proxops_reconcile::plan::Relocated {
            from: "pve02".into(),
            to: home.clone()
        })
    );
    assert!(
        a.proposal.anomalies.is_empty(),
        "{:?}",
        a.proposal.anomalies
    );
    let b = plan
        .objects
        .iter()
        .find(|o| o.object.id.name == "b")
        .unwrap();
    assert!(
        b.proposal.anomalies[0].message.contains("offline"),
        "{:?}",
        b.proposal
    );
    scene.sim.clear_requests();
    let report = scene.apply(Holds::default()).await;
    assert!(report.converged, "{:?}", report.outcomes);
    assert_eq!(
        scene.writes(),
        [format!("POST /nodes/{home}/qemu/170/config")],
        "the drift is repaired on the node the guest is on"
    );
    assert!(
        scene
            .sim
            .requests()
            .iter()
            .all(|r| !r.path.starts_with("/nodes/pve02/")),
        "nothing sent to the offline node"
    );
    assert_eq!(
        run::Outcome::of(&report.last, &Default::default(), Some(&report)),
        Outcome::NeedsHuman,
        "the guest on the offline node needs a human"
    );
}

/// A changed `spec.node` with `placement: migrate` is one online migration: the VM runs
/// throughout and ends on its new node; the verifying pass plans nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_node_change_migrates_the_vm_online() {
    let scene = shared_cluster().await;
    scene.write("vm/lab/web.yaml", &vm("web", 180, ""));
    assert!(scene.apply(Holds::default()).await.converged);
    scene.write(
        "vm/lab/web.yaml",
        &vm("web", 180, "  placement: migrate\n").replace("node: pve01", "node: pve03"),
    );
    scene.sim.clear_requests();
    let report = scene.apply(Holds::default()).await;
    assert!(report.converged, "{:?}", report.outcomes);
    assert_eq!(scene.writes(), ["POST /nodes/pve01/qemu/180/migrate"]);
    let migrate = scene
        .sim
        .requests()
        .into_iter()
        .find(|r| r.method == "POST")
        .unwrap();
    let param = |k: &str| {
        migrate
            .params
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(param("target").as_deref(), Some("pve03"));
    assert_eq!(param("online").as_deref(), Some("1"));
    assert_eq!(param("with-local-disks").as_deref(), Some("1"));
    assert_eq!(scene.sim.guest_node(180).as_deref(), Some("pve03"));
    assert_eq!(scene.sim.vm_status(180).as_deref(), Some("running"));
    assert!(
        !scene
            .sim
            .requests()
            .iter()
            .any(|r| r.path.contains("/status/"))
    );
}

/// A migration PVE would refuse (the target lacks the VM's storage) is refused in the plan,
/// with nothing sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_migration_pve_would_refuse_is_refused_in_the_plan() {
    let mut storages = proxops_sim::default_storages();
    let mut only_here = proxops_sim::StorageConfig::new("fast", "lvmthin", &["images"]);
    only_here.nodes = Some(vec!["pve01".into()]);
    storages.push(only_here);
    let scene = Scene::with(proxops_sim::SimConfig {
        storages,
        ..proxops_sim::SimConfig::default()
    })
    .await;
    let fast = |extra: &str| vm("web", 181, extra).replace("storage: local-lvm", "storage: fast");
    scene.write("vm/lab/web.yaml", &fast(""));
    assert!(scene.apply(Holds::default()).await.converged);
    scene.write(
        "vm/lab/web.yaml",
        &fast("  placement: migrate\n").replace("node: pve01", "node: pve02"),
    );
    scene.sim.clear_requests();
    let objects = scene.objects();
    let plan = scene.plan(&objects, Holds::default()).await;
    let web = &plan.objects[0];
    assert!(
        web.proposal.actions.is_empty(),
        "{:?}",
        web.proposal.actions
    );
    let message = &web.proposal.anomalies[0].message;
    assert!(message.contains("fast"), "names the storage: {message}");
    assert!(scene.writes().is_empty());
}

/// An HA guest HA moved away stays where it is with `placement: fixed` (the default); with
/// `placement: migrate` proxops brings it home through HA's migrate and waits until it is
/// there.
#[tokio::test(flavor = "multi_thread")]
async fn placement_migrate_brings_an_ha_guest_home_through_ha() {
    let scene = shared_cluster().await;
    scene.write(
        "vm/lab/db.yaml",
        &shared_vm("db", 190, "pve01", "  ha: {}\n"),
    );
    assert!(scene.apply(Holds::default()).await.converged);
    post(
        &scene,
        "/cluster/ha/resources/vm:190/migrate",
        &[("node", "pve03")],
    )
    .await;
    eventually("HA moves VM 190", || {
        scene.sim.guest_node(190).as_deref() == Some("pve03")
    })
    .await;
    eventually("HA settles", || {
        scene
            .sim
            .ha_service("vm:190")
            .is_some_and(|s| s["state"] == "started")
    })
    .await;
    scene.sim.clear_requests();
    let report = scene.apply(Holds::default()).await;
    assert!(
        report.converged && scene.writes().is_empty(),
        "{:?}",
        scene.writes()
    );

    scene.write(
        "vm/lab/db.yaml",
        &shared_vm("db", 190, "pve01", "  ha: {}\n  placement: migrate\n"),
    );
    let waits = Arc::new(Recorder::default());
    let report = scene
        .apply_with(Holds::default(), |_| {}, waits.clone())
        .await;
    assert!(report.converged, "{:?}", report.outcomes);
    assert_eq!(
        scene.writes(),
        ["POST /cluster/ha/resources/vm:190/migrate"]
    );
    assert_eq!(scene.sim.guest_node(190).as_deref(), Some("pve01"));
    assert_eq!(waits.waited(), ["VM 190 to be on node pve01"]);
}

/// Nothing is created, started or migrated onto a node in maintenance; the plan says why, and
/// the other nodes' work goes on.
#[tokio::test(flavor = "multi_thread")]
async fn nothing_is_created_or_migrated_onto_a_node_in_maintenance() {
    let scene = shared_cluster().await;
    scene.write(
        "vm/lab/db.yaml",
        &shared_vm("db", 195, "pve01", "  ha: {}\n"),
    );
    scene.write("vm/lab/web.yaml", &shared_vm("web", 196, "pve01", ""));
    assert!(scene.apply(Holds::default()).await.converged);
    scene
        .sim
        .set_node_maintenance("pve03", true)
        .expect("pve03");
    scene.write("vm/lab/new.yaml", &shared_vm("new", 197, "pve03", ""));
    scene.write(
        "vm/lab/web.yaml",
        &shared_vm("web", 196, "pve03", "  placement: migrate\n"),
    );
    scene.write("vm/lab/other.yaml", &shared_vm("other", 198, "pve02", ""));
    scene.sim.clear_requests();
    let report = scene.apply(Holds::default()).await;
    assert!(report.converged, "{:?}", report.outcomes);
    assert_eq!(
        scene.writes(),
        ["POST /nodes/pve02/qemu"],
        "only the other node's create"
    );
    for name in ["new", "web"] {
        let o = report
            .last
            .objects
            .iter()
            .find(|o| o.object.id.name == name)
            .unwrap();
        assert!(
            o.proposal.anomalies[0]
                .message
                .contains("node pve03 is in maintenance"),
            "{name}: {:?}",
            o.proposal
        );
    }
}

/// `HARule` manifests through the named-object gate: created with proxops's mark, repaired
/// with one PUT, pruned when their manifest goes (while the kind still has objects), and a
/// hand-made rule with a managed id is reported and never written.
#[tokio::test(flavor = "multi_thread")]
async fn ha_rules_are_created_updated_pruned_and_hand_made_ones_left_alone() {
    let scene = shared_cluster().await;
    // PVE allows one node-affinity rule per HA resource: one VM per rule.
    let rule = |id: &str, vm: &str, nodes: &str| {
        format!(
            "apiVersion: proxops/v1alpha1\nkind: HARule\nmetadata: {{name: {id}}}\nspec:\n  type: node-affinity\n  resources: [{vm}]\n  nodes: {nodes}\n  comment: placed by git\n"
        )
    };
    scene.write(
        "vm/lab/db.yaml",
        &shared_vm("db", 220, "pve01", "  ha: {}\n"),
    );
    scene.write(
        "vm/lab/cache.yaml",
        &shared_vm("cache", 221, "pve01", "  ha: {}\n"),
    );
    scene.write("harule/lab/keep-db.yaml", &rule("keep-db", "db", "[pve01]"));
    scene.write("harule/lab/spare.yaml", &rule("spare", "cache", "[pve02]"));
    let report = scene.apply(Holds::default()).await;
    assert!(report.converged, "{:?}", report.outcomes);
    let rules = scene.client.get("/cluster/ha/rules", &[]).await.unwrap();
    let comment = |id: &str| {
        rules
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rule"] == id)
            .map(|r| r["comment"].as_str().unwrap_or_default().to_string())
    };
    assert_eq!(
        comment("keep-db").as_deref(),
        Some("placed by git (proxops:keep-db)")
    );
    assert!(comment("spare").is_some(), "{rules}");

    // Drift: one PUT. The manifest gone: its rule is pruned.
    scene.write(
        "harule/lab/keep-db.yaml",
        &rule("keep-db", "db", "[{node: pve01, priority: 2}, pve03]"),
    );
    scene.remove("harule/lab/spare.yaml");
    scene.sim.clear_requests();
    let report = scene.apply(Holds::default()).await;
    assert!(report.converged, "{:?}", report.outcomes);
    // One PUT lands. PVE's digest covers the whole rules file, so a PUT sent after the prune
    // in the same pass is refused as stale (nothing changes) and sent again next pass.
    let landed: Vec<String> = scene
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET" && r.status == 200)
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    let mut landed = landed;
    landed.sort();
    assert_eq!(
        landed,
        [
            "DELETE /cluster/ha/rules/spare",
            "PUT /cluster/ha/rules/keep-db"
        ]
    );

    // A rule made by hand under a managed id: reported, untouched.
    post(
        &scene,
        "/cluster/ha/rules",
        &[
            ("rule", "by-hand"),
            ("type", "node-affinity"),
            ("resources", "vm:221"),
            ("nodes", "pve02"),
        ],
    )
    .await;
    scene.write(
        "harule/lab/by-hand.yaml",
        &rule("by-hand", "cache", "[pve03]"),
    );
    scene.sim.clear_requests();
    let report = scene.apply(Holds::default()).await;
    assert!(scene.writes().is_empty(), "{:?}", scene.writes());
    let by_hand = report
        .last
        .objects
        .iter()
        .find(|o| o.object.id.name == "by-hand")
        .unwrap();
    assert!(
        !by_hand.proposal.anomalies.is_empty(),
        "{:?}",
        by_hand.proposal
    );
}
