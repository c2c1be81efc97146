//! Availability at the edges: a sequence that stops a guest (stop, write, start) restores it
//! when a step fails and is not repeated blindly, and a signal never separates a stop from its
//! restore nor starts a queued action. Each against the simulator, on its request log and state.

use proxops_pve::Method::Post;
use proxops_sim::{FaultKind, FaultRule};

use crate::support::{Lab, requests_about, vm};

/// A lab whose VM `app` (150 on pve01) was applied and runs, its manifest then given `extra`.
async fn app_applied_then(extra: &str) -> Lab {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.apply().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, extra));
    lab
}

/// Send SIGTERM to a running `proxops` child and check it exits 143 within a minute (after
/// what it has in flight).
async fn sigterm_and_exit_143(child: &mut tokio::process::Child) {
    let pid = child.id().expect("running").to_string();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(kill.success());
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait())
        .await
        .expect("proxops exits after what is in flight")
        .expect("wait");
    assert_eq!(out.code(), Some(143));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_stop_required_write_starts_the_guest_again_and_is_not_retried_blindly() {
    let lab = app_applied_then("  hardware: {machine: q35}\n").await;
    lab.sim.set_faults(vec![FaultRule {
        method: "POST".into(),
        path: "/nodes/{node}/qemu/{vmid}/config".into(),
        kind: FaultKind::Status {
            code: 500,
            message: "injected: storage unreachable".into(),
        },
        probability: None,
        times: None,
    }]);
    let plan = lab.run(&["plan"]).await;
    assert!(plan.stdout.contains("with a restart"), "{}", plan.stdout);
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 1, "{}\n{}", apply.stdout, apply.stderr);
    assert!(apply.stdout.contains("restored: POST"), "{}", apply.stdout);
    assert!(apply.stdout.contains("started again"), "{}", apply.stdout);
    assert_eq!(apply.stdout.matches("✗").count(), 1, "{}", apply.stdout);
    assert_eq!(lab.sim.vm_status(150).as_deref(), Some("running"));
    let writes: Vec<String> = requests_about(&lab, 150);
    assert_eq!(
        writes,
        [
            "POST /nodes/pve01/qemu/150/status/shutdown",
            "POST /nodes/pve01/qemu/150/config",
            "POST /nodes/pve01/qemu/150/status/start",
        ],
    );

    // The next run does not stop the guest again for the same change.
    lab.clear();
    let again = lab.run(&["apply"]).await;
    assert_eq!(again.code, 3, "{}\n{}", again.stdout, again.stderr);
    assert!(
        again.stdout.contains("--retry-stop-required"),
        "{}",
        again.stdout
    );
    assert_eq!(requests_about(&lab, 150), Vec::<String>::new());

    // Once the cause is fixed, the operator retries and it converges.
    lab.sim.set_faults(Vec::new());
    let retry = lab.run(&["apply", "--retry-stop-required"]).await;
    assert_eq!(retry.code, 0, "{}\n{}", retry.stdout, retry.stderr);
    assert_eq!(lab.config(150)["machine"], "q35");
    assert_eq!(lab.sim.vm_status(150).as_deref(), Some("running"));
}

/// A guest with pending changes: the failed sequence's shutdown applies them, so the config's
/// digest is not the one the failed write was planned against (that write carried none); the
/// next run still does not stop the guest again, until someone changes it.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_stop_is_not_repeated_when_its_shutdown_applied_pending_changes() {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 151, ""));
    lab.apply().await;
    // Not hot-pluggable: pending until the guest stops.
    lab.pve(Post, "/nodes/pve01/qemu/151/config", &[("vga", "std")])
        .await;
    lab.write(
        "vm/lab/app.yaml",
        &vm("app", "pve01", 151, "  hardware: {machine: q35}\n"),
    );
    lab.sim.set_faults(vec![FaultRule {
        method: "POST".into(),
        path: "/nodes/{node}/qemu/{vmid}/config".into(),
        kind: FaultKind::Status {
            code: 500,
            message: "injected: storage unreachable".into(),
        },
        probability: None,
        times: None,
    }]);
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 1, "{}\n{}", apply.stdout, apply.stderr);
    assert_eq!(
        requests_about(&lab, 151),
        [
            "POST /nodes/pve01/qemu/151/status/shutdown",
            "POST /nodes/pve01/qemu/151/config",
            "POST /nodes/pve01/qemu/151/status/start",
        ],
    );
    assert_eq!(lab.config(151)["vga"], "std", "the shutdown applied it");
    assert_eq!(lab.sim.vm_status(151).as_deref(), Some("running"));

    for run in 2..=3 {
        lab.clear();
        let again = lab.run(&["apply"]).await;
        assert_eq!(
            again.code, 3,
            "run {run}\n{}\n{}",
            again.stdout, again.stderr
        );
        assert!(
            again.stdout.contains("not stopping the guest again"),
            "run {run}: {}",
            again.stdout
        );
        assert_eq!(requests_about(&lab, 151), Vec::<String>::new(), "run {run}");
    }

    // Someone changes the guest: the change is planned (and stopped for) again.
    lab.sim.set_faults(Vec::new());
    lab.pve(
        Post,
        "/nodes/pve01/qemu/151/config",
        &[("description", "edited")],
    )
    .await;
    lab.clear();
    let after = lab.run(&["apply"]).await;
    assert_eq!(after.code, 0, "{}\n{}", after.stdout, after.stderr);
    assert_eq!(lab.config(151)["machine"], "q35");
    assert_eq!(lab.sim.vm_status(151).as_deref(), Some("running"));
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_finishes_the_stop_write_start_in_flight_and_exits_143() {
    let lab = Lab::with(proxops_sim::SimConfig {
        task_duration: std::time::Duration::from_millis(1500),
        ..proxops_sim::SimConfig::default()
    })
    .await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.apply().await;
    lab.write(
        "vm/lab/app.yaml",
        &vm("app", "pve01", 150, "  hardware: {machine: q35}\n"),
    );
    lab.clear();
    let mut child = lab.spawn(&["apply"]);
    // Wait until the shutdown task is running, then ask proxops to stop.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !lab
        .sim
        .requests()
        .iter()
        .any(|r| r.path.ends_with("/status/shutdown"))
    {
        assert!(std::time::Instant::now() < deadline, "no shutdown was sent");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    sigterm_and_exit_143(&mut child).await;
    assert_eq!(
        requests_about(&lab, 150),
        [
            "POST /nodes/pve01/qemu/150/status/shutdown",
            "POST /nodes/pve01/qemu/150/config",
            "POST /nodes/pve01/qemu/150/status/start",
        ],
        "the sequence in flight finishes"
    );
    assert_eq!(lab.sim.vm_status(150).as_deref(), Some("running"));
    assert_eq!(lab.config(150)["machine"], "q35");
}

/// Actions queued behind their node's write permits are not started after a signal: with
/// two writes per node in flight, SIGTERM leaves the other three creates unsent.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_starts_none_of_the_queued_actions() {
    let lab = Lab::with(proxops_sim::SimConfig {
        task_duration: std::time::Duration::from_millis(1500),
        ..proxops_sim::SimConfig::default()
    })
    .await;
    for i in 0..5 {
        lab.write(
            &format!("vm/lab/q{i}.yaml"),
            &vm(&format!("q{i}"), "pve01", 700 + i, ""),
        );
    }
    lab.clear();
    let creates = |lab: &Lab| {
        lab.sim
            .requests()
            .iter()
            .filter(|r| r.method == "POST" && r.path == "/nodes/pve01/qemu")
            .count()
    };
    let mut child = lab.spawn(&["apply"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while creates(&lab) < 2 {
        assert!(std::time::Instant::now() < deadline, "no create was sent");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    sigterm_and_exit_143(&mut child).await;
    assert_eq!(
        creates(&lab),
        2,
        "write-concurrency 2: only the two in flight"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_signal_exits_at_once() {
    let lab = Lab::with(proxops_sim::SimConfig {
        task_duration: std::time::Duration::from_millis(3000),
        ..proxops_sim::SimConfig::default()
    })
    .await;
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 195, ""));
    let mut child = lab.spawn(&["apply"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while lab.mutations().is_empty() {
        assert!(std::time::Instant::now() < deadline, "nothing was sent");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let pid = child.id().expect("running").to_string();
    for _ in 0..2 {
        let kill = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .expect("kill");
        assert!(kill.success());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait())
        .await
        .expect("proxops exits")
        .expect("wait");
    assert_eq!(out.code(), Some(130));
    // It left before the create task (3 s) ended: the create (which starts the VM itself,
    // `start=1`) is all it sent, and nothing was sent after it.
    assert_eq!(
        lab.mutations(),
        ["POST /nodes/pve01/qemu -> 200"],
        "{:?}",
        lab.sim.requests()
    );
}

/// A PCI resource mapping that does not exist on the VM's node: PVE would take the write and
/// refuse the start, leaving the guest down. proxops reads the mappings first and neither
/// writes nor stops; with the right name, it stops, writes and starts.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_pci_mapping_never_stops_the_guest() {
    let lab = Lab::with(proxops_sim::SimConfig {
        pci_mappings: ["pve02", "pve01"]
            .iter()
            .enumerate()
            .map(|(i, node)| proxops_sim::PciMapping {
                id: format!("gpu{i}"),
                description: String::new(),
                map: vec![format!("node={node},path=0000:01:00.0,id=10de:2204")],
            })
            .collect(),
        ..proxops_sim::SimConfig::default()
    })
    .await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.apply().await;
    for (mapping, says) in [
        ("gpux", "PCI resource mapping `gpux` does not exist"),
        (
            "gpu0",
            "PCI resource mapping `gpu0` has no device on node pve01 (it maps pve02)",
        ),
    ] {
        lab.write(
            "vm/lab/app.yaml",
            &vm(
                "app",
                "pve01",
                150,
                &format!("  hardware: {{pci-devices: [{{slot: 0, mapping: {mapping}}}]}}\n"),
            ),
        );
        lab.clear();
        let apply = lab.run(&["apply"]).await;
        assert_eq!(
            apply.code, 3,
            "{mapping}: {}\n{}",
            apply.stdout, apply.stderr
        );
        assert!(apply.stdout.contains(says), "{mapping}: {}", apply.stdout);
        assert_eq!(lab.mutations(), Vec::<String>::new(), "{mapping}");
        assert_eq!(lab.sim.vm_status(150).as_deref(), Some("running"));
    }
    // The mapping with a device on pve01: stopped, written, started.
    lab.write(
        "vm/lab/app.yaml",
        &vm(
            "app",
            "pve01",
            150,
            "  hardware: {pci-devices: [{slot: 0, mapping: gpu1}]}\n",
        ),
    );
    lab.clear();
    lab.apply().await;
    assert_eq!(
        requests_about(&lab, 150),
        [
            "POST /nodes/pve01/qemu/150/status/shutdown",
            "POST /nodes/pve01/qemu/150/config",
            "POST /nodes/pve01/qemu/150/status/start",
        ]
    );
    assert_eq!(lab.config(150)["hostpci0"], "mapping=gpu1");
    assert_eq!(lab.sim.vm_status(150).as_deref(), Some("running"));
}

/// What only root@pam may set (the simulator, as PVE, refuses it from an API token): proxops
/// reports it and sends nothing, for an existing VM and for a new one.
async fn only_root_may_set(extra: &str, says: &str) {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.apply().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, extra));
    lab.write("vm/lab/new.yaml", &vm("new", "pve01", 151, extra));
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 3, "{}\n{}", apply.stdout, apply.stderr);
    assert_eq!(apply.stdout.matches(says).count(), 2, "{}", apply.stdout);
    assert_eq!(lab.mutations(), Vec::<String>::new());
    assert!(lab.sim.vm_config(151).is_none());
    assert_eq!(lab.sim.vm_status(150).as_deref(), Some("running"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_extra_key_only_root_may_set_is_reported_not_sent() {
    only_root_may_set(
        "  extra: {args: '-cpu host'}\n",
        "PVE lets only root@pam set `args`",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_serial_port_on_a_host_device_is_reported_not_sent() {
    only_root_may_set(
        "  hardware: {serial0: /dev/ttyS0}\n",
        "PVE lets only root@pam set a serial port to a host device",
    )
    .await;
}

/// The answer to the stop is lost while its task runs on: the restore start finds the guest's
/// lock held and is sent again until the stop has ended, so the guest ends up running (a start
/// given up at once would leave it down when the stop finishes).
#[tokio::test(flavor = "multi_thread")]
async fn a_stop_whose_answer_was_lost_is_waited_for_before_the_guest_is_started_again() {
    let lab = Lab::with(proxops_sim::SimConfig {
        task_duration: std::time::Duration::from_millis(1500),
        lock_timeout: std::time::Duration::from_millis(200),
        ..proxops_sim::SimConfig::default()
    })
    .await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.apply().await;
    lab.write(
        "vm/lab/app.yaml",
        &vm("app", "pve01", 150, "  hardware: {machine: q35}\n"),
    );
    let shutdown = "/nodes/{node}/qemu/{vmid}/status/shutdown";
    lab.sim.set_faults(vec![fault(
        "POST",
        shutdown,
        FaultKind::LoseAnswer,
        Some(1),
    )]);
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 1, "{}\n{}", apply.stdout, apply.stderr);
    // The shutdown task started before apply returned; once its 1.5 s are over, the guest is
    // as it stays.
    tokio::time::sleep(std::time::Duration::from_millis(2000)).await;
    assert_eq!(
        lab.sim.vm_status(150).as_deref(),
        Some("running"),
        "{}",
        apply.stdout
    );
    let starts = requests_about(&lab, 150)
        .iter()
        .filter(|r| r.ends_with("/status/start"))
        .count();
    assert!(starts >= 2, "the start waited for the stop: {starts}");
    assert_ne!(
        lab.config(150).get("machine").map(String::as_str),
        Some("q35")
    );
}

/// The write of a stop/write/start fails and so does the start that restores the guest: the
/// same apply plans the guest once more and starts it.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_restore_start_is_tried_again_in_the_same_apply() {
    let lab = app_applied_then("  hardware: {machine: q35}\n").await;
    let config = "/nodes/{node}/qemu/{vmid}/config";
    let start = "/nodes/{node}/qemu/{vmid}/status/start";
    lab.sim.set_faults(vec![
        fault(
            "POST",
            config,
            FaultKind::Status {
                code: 500,
                message: "injected: storage unreachable".into(),
            },
            None,
        ),
        fault(
            "POST",
            start,
            FaultKind::FailTask {
                message: "start exploded".into(),
            },
            Some(1),
        ),
    ]);
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 1, "{}\n{}", apply.stdout, apply.stderr);
    assert!(apply.stdout.contains("start exploded"), "{}", apply.stdout);
    assert_eq!(
        lab.sim.vm_status(150).as_deref(),
        Some("running"),
        "{}",
        apply.stdout
    );
}

/// VMs 150 and 151 on pve01, applied, then both given a change that needs a restart, in a
/// cluster with one write at a time per node and tasks that take `task_ms`.
async fn two_guests_to_restart_one_write_per_node(task_ms: u64) -> Lab {
    let lab = Lab::with(proxops_sim::SimConfig {
        task_duration: std::time::Duration::from_millis(task_ms),
        ..proxops_sim::SimConfig::default()
    })
    .await;
    let lab_file = std::fs::read_to_string(lab.repo.path().join("clusters/lab.yaml")).unwrap();
    lab.write(
        "clusters/lab.yaml",
        &lab_file.replace("spec:\n", "spec:\n  options: {write-concurrency: 1}\n"),
    );
    for (name, vmid) in [("a", 150), ("b", 151)] {
        lab.write(&format!("vm/lab/{name}.yaml"), &vm(name, "pve01", vmid, ""));
    }
    lab.apply().await;
    for (name, vmid) in [("a", 150), ("b", 151)] {
        lab.write(
            &format!("vm/lab/{name}.yaml"),
            &vm(name, "pve01", vmid, "  hardware: {machine: q35}\n"),
        );
    }
    lab.clear();
    lab
}

/// With one write at a time per node, a stop/write/start holds its node's turn from the stop
/// to the start: two guests that both need a restart are never down at once.
#[tokio::test(flavor = "multi_thread")]
async fn with_one_write_per_node_one_guest_at_a_time_is_down() {
    let lab = two_guests_to_restart_one_write_per_node(300).await;
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    let writes: Vec<String> = lab
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.is_mutating())
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    let sequence = |vmid: u32| {
        [
            format!("POST /nodes/pve01/qemu/{vmid}/status/shutdown"),
            format!("POST /nodes/pve01/qemu/{vmid}/config"),
            format!("POST /nodes/pve01/qemu/{vmid}/status/start"),
        ]
    };
    let (first, second) = if writes.first().is_some_and(|w| w.contains("/150/")) {
        (150, 151)
    } else {
        (151, 150)
    };
    let expected: Vec<String> = sequence(first)
        .into_iter()
        .chain(sequence(second))
        .collect();
    assert_eq!(writes, expected, "{}", apply.stdout);
    for vmid in [150, 151] {
        assert_eq!(lab.sim.vm_status(vmid).as_deref(), Some("running"));
    }
}

/// A guest whose config changes after the plan read it (here: someone removes its ownership
/// tags while another guest's restart holds the node) is not stopped: the stop/write/start
/// checks the config digest before the stop, and the fresh plan finds the guest unowned.
#[tokio::test(flavor = "multi_thread")]
async fn a_guest_retagged_after_the_plan_is_not_stopped() {
    let lab = two_guests_to_restart_one_write_per_node(1000).await;
    let mut child = lab.spawn(&["apply"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let first = loop {
        let shutdown = lab
            .sim
            .requests()
            .into_iter()
            .find(|r| r.path.ends_with("/status/shutdown"));
        if let Some(r) = shutdown {
            break r.path;
        }
        assert!(std::time::Instant::now() < deadline, "no shutdown was sent");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let other = if first.contains("/150/") { 151 } else { 150 };
    lab.pve(
        proxops_pve::Method::Post,
        &format!("/nodes/pve01/qemu/{other}/config"),
        &[("delete", "tags")],
    )
    .await;
    tokio::time::timeout(std::time::Duration::from_secs(60), child.wait())
        .await
        .expect("apply ends")
        .expect("wait");
    let sent = requests_about(&lab, other);
    assert_eq!(
        sent,
        [format!("POST /nodes/pve01/qemu/{other}/config")],
        "only the retagging, by someone else: nothing from proxops"
    );
    assert_eq!(lab.sim.vm_status(other).as_deref(), Some("running"));
}

/// The write of a stop/write/start meets a stale digest and the start that restores the
/// guest fails: the failed restore is reported (the guest may be down), not hidden as a
/// stale plan, and the same apply plans the guest again: it is stopped now, so the write
/// needs no stop, and it is started.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_restore_after_a_stale_write_is_reported_and_the_guest_started() {
    let lab = app_applied_then("  hardware: {machine: q35}\n").await;
    lab.sim.set_faults(vec![
        fault(
            "POST",
            "/nodes/{node}/qemu/{vmid}/config",
            FaultKind::Status {
                code: 500,
                message: "checksum mismatch (file change by other user?)".into(),
            },
            Some(1),
        ),
        fault(
            "POST",
            "/nodes/{node}/qemu/{vmid}/status/start",
            FaultKind::FailTask {
                message: "start exploded".into(),
            },
            Some(1),
        ),
    ]);
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert!(
        apply.stdout.contains("restoring failed too"),
        "{}\n{}",
        apply.stdout,
        apply.stderr
    );
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    assert_eq!(
        lab.sim.vm_status(150).as_deref(),
        Some("running"),
        "{}",
        apply.stdout
    );
    assert_eq!(lab.config(150)["machine"], "q35");
}

/// The fault rule `kind` on `method path`, every time (`times: None`) or `times` times.
fn fault(method: &str, path: &str, kind: FaultKind, times: Option<u32>) -> FaultRule {
    FaultRule {
        method: method.into(),
        path: path.into(),
        kind,
        probability: None,
        times,
    }
}

/// The start that ends a stop/write/start fails: the write landed and the guest is stopped.
/// The output says it may be down, and the same apply plans the guest once more: its start.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_start_after_the_write_is_tried_again_in_the_same_apply() {
    let lab = app_applied_then("  hardware: {machine: q35}\n").await;
    let start = "/nodes/{node}/qemu/{vmid}/status/start";
    let boom = || FaultKind::FailTask {
        message: "start exploded".into(),
    };
    // Once: the second start brings it back.
    lab.sim
        .set_faults(vec![fault("POST", start, boom(), Some(1))]);
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    assert!(apply.stdout.contains("it may be DOWN"), "{}", apply.stdout);
    assert_eq!(
        requests_about(&lab, 150),
        [
            "POST /nodes/pve01/qemu/150/status/shutdown",
            "POST /nodes/pve01/qemu/150/config",
            "POST /nodes/pve01/qemu/150/status/start",
            "POST /nodes/pve01/qemu/150/status/start",
        ]
    );
    assert_eq!(lab.sim.vm_status(150).as_deref(), Some("running"));
    assert_eq!(lab.config(150)["machine"], "q35");

    // Every time: tried twice, then reported, exit 1.
    lab.write(
        "vm/lab/app.yaml",
        &vm("app", "pve01", 150, "  hardware: {machine: i440fx}\n"),
    );
    lab.sim.set_faults(vec![fault("POST", start, boom(), None)]);
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 1, "{}\n{}", apply.stdout, apply.stderr);
    assert_eq!(
        requests_about(&lab, 150)
            .iter()
            .filter(|r| r.ends_with("/status/start"))
            .count(),
        2,
        "{}\n{:?}",
        apply.stdout,
        requests_about(&lab, 150)
    );
    assert_eq!(lab.sim.vm_status(150).as_deref(), Some("stopped"));
    // Once PVE starts it again, the next apply does (a lone start stops nothing).
    lab.sim.set_faults(Vec::new());
    lab.apply().await;
    assert_eq!(lab.sim.vm_status(150).as_deref(), Some("running"));
}

/// Someone keeps writing the guest's config: a stop/write/start whose write finds the digest
/// changed is planned again once, not once per pass (each a shutdown), and then remembered.
#[tokio::test(flavor = "multi_thread")]
async fn a_config_that_keeps_changing_stops_the_guest_at_most_twice() {
    let lab = app_applied_then("  hardware: {machine: q35}\n").await;
    lab.sim.set_faults(vec![fault(
        "POST",
        "/nodes/{node}/qemu/{vmid}/config",
        FaultKind::Status {
            code: 500,
            message: "detected modified configuration - file changed by other user? Try again.\nconfig file has been modified by another user?".into(),
        },
        None,
    )]);
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 1, "{}\n{}", apply.stdout, apply.stderr);
    assert!(apply.stdout.contains("changed again"), "{}", apply.stdout);
    let shutdowns = requests_about(&lab, 150)
        .iter()
        .filter(|r| r.ends_with("/status/shutdown"))
        .count();
    assert_eq!(shutdowns, 2, "{:?}", requests_about(&lab, 150));
    assert_eq!(lab.sim.vm_status(150).as_deref(), Some("running"));
    // The next run does not stop it again for the same change.
    lab.clear();
    let again = lab.run(&["apply"]).await;
    assert_eq!(again.code, 3, "{}\n{}", again.stdout, again.stderr);
    assert_eq!(requests_about(&lab, 150), Vec::<String>::new());
}

/// A lone shutdown (`state: stopped`) that fails is the change itself, not a guest stopped for
/// a change: the next run tries it again instead of holding it back.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_shutdown_for_state_stopped_is_tried_again_next_run() {
    let lab = app_applied_then("  state: stopped\n").await;
    lab.sim.set_faults(vec![fault(
        "POST",
        "/nodes/{node}/qemu/{vmid}/status/shutdown",
        FaultKind::FailTask {
            message: "boom".into(),
        },
        None,
    )]);
    let failed = lab.run(&["apply"]).await;
    assert_eq!(failed.code, 1, "{}\n{}", failed.stdout, failed.stderr);
    lab.sim.set_faults(Vec::new());
    lab.apply().await;
    assert_eq!(lab.sim.vm_status(150).as_deref(), Some("stopped"));
}

/// A guest whose config already names a PCI mapping the cluster does not have (adopted, or
/// the mapping deleted since): its start is known to fail, so apply does not send it.
#[tokio::test(flavor = "multi_thread")]
async fn a_guest_with_a_missing_mapping_is_not_started() {
    let lab = Lab::start().await;
    lab.pve(
        Post,
        "/nodes/pve01/qemu",
        &[
            ("vmid", "160"),
            ("name", "gpu"),
            ("memory", "1024"),
            ("cores", "1"),
            ("cpu", "host"),
            ("scsi0", "local-lvm:4"),
            ("net0", "virtio,bridge=vmbr0"),
            ("hostpci0", "mapping=gpux"),
            ("tags", "proxops;proxops-160"),
        ],
    )
    .await;
    lab.write(
        "vm/lab/gpu.yaml",
        &vm(
            "gpu",
            "pve01",
            160,
            "  hardware: {pci-devices: [{slot: 0, mapping: gpux}]}\n",
        ),
    );
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 3, "{}\n{}", apply.stdout, apply.stderr);
    assert!(
        apply
            .stdout
            .contains("so proxops neither starts nor restarts this guest"),
        "{}",
        apply.stdout
    );
    assert_eq!(lab.mutations(), Vec::<String>::new());
    assert_eq!(lab.sim.vm_status(160).as_deref(), Some("stopped"));
}

/// What an apply says is still to do after a failure is what PVE now holds: a TemplateVM
/// whose create landed and whose template mark failed is left with the mark, not the create.
#[tokio::test(flavor = "multi_thread")]
async fn still_to_do_after_a_failure_is_read_again() {
    let lab = Lab::start().await;
    lab.write(
        "templatevm/lab/golden.yaml",
        &crate::support::template("golden", "pve01", 9003, ""),
    );
    lab.sim.set_faults(vec![fault(
        "POST",
        "/nodes/{node}/qemu/{vmid}/template",
        FaultKind::FailTask {
            message: "injected mark failure".into(),
        },
        Some(1),
    )]);
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 1, "{}\n{}", apply.stdout, apply.stderr);
    let left = apply
        .stdout
        .split("Still to do:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no 'Still to do':\n{}", apply.stdout));
    assert!(
        left.contains("mark VM 9003 on pve01 as a template"),
        "{}",
        apply.stdout
    );
    assert!(!left.contains("create"), "{}", apply.stdout);
    assert!(lab.sim.vm_config(9003).is_some());
}
