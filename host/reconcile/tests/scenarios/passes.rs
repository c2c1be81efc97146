//! Passes and dependencies: what converges over passes, what a failed or unavailable dependency
//! blocks, how deletes, creates and reads are checked and repeated, and the holds on a pass.

use super::*;

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
