//! Availability: a sequence that stops a guest restores it when a step fails, a final start is
//! tried once more, a stale digest re-plans, and a failed stop-required change is remembered.

use super::*;

/// A config write whose digest PVE refuses (someone wrote the config since the read) is
/// planned again from a fresh read and sent once more; nothing fails.
#[tokio::test(flavor = "multi_thread")]
async fn a_stale_digest_is_planned_again_not_failed() {
    let scene = Scene::applied_then("  tags: [blue]\n").await;
    scene.sim.set_faults(vec![config_write_fails(
        "checksum mismatch (file change by other user?)",
        Some(1),
    )]);
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
    scene.sim.set_faults(vec![config_write_fails(
        "injected: storage unreachable",
        None,
    )]);
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
    assert_eq!(scene.vm_key(150, "machine").as_deref(), Some("q35"));
    assert!(report.passes >= 2, "{report:?}");
}

/// A restore start whose task finds the guest's lock held (the stop it follows still running)
/// is sent again until it runs, so the guest is not left down.
#[tokio::test(flavor = "multi_thread")]
async fn a_restore_start_is_sent_again_while_the_lock_is_held() {
    let scene = Scene::applied_then("  hardware: {machine: q35}\n").await;
    scene.sim.set_faults(vec![
        config_write_fails("injected: storage unreachable", None),
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

/// A failed stop-required change is remembered: the next apply does not stop the guest again
/// for the same change (it is held back as an anomaly) unless the operator asks for it.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_stop_required_change_is_not_retried_blindly() {
    let scene = Scene::applied_then("  hardware: {machine: q35}\n").await;
    scene.sim.set_faults(vec![config_write_fails(
        "injected: storage unreachable",
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
    assert_eq!(scene.vm_key(150, "machine").as_deref(), Some("q35"));
}
