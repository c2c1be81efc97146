//! Disruption budgets: at most `max-unavailable` members of a budget disturbed at once, in
//! the budget's order, the next only after the last passed its health gate; a gate that runs
//! out halts its budget (exit 3), other budgets go on; `max-unavailable: 0` blocks.

use super::*;
use proxops_reconcile::policy::PolicyReport;
use proxops_reconcile::rollout::Rollout;
use proxops_sim::RequestRecord;

/// VM `name` (vmid) with its guest agent on and `tags`, then `extra`.
fn guest(name: &str, vmid: u32, tags: &str, extra: &str) -> String {
    vm(
        name,
        vmid,
        &format!("  options: {{agent: true}}\n  tags: [{tags}]\n{extra}"),
    )
}

/// A scene whose `guests` (name, vmid, tags) were applied and run, their manifests then
/// given a change that needs a stop (the machine type).
async fn applied_then_q35(config: proxops_sim::SimConfig, guests: &[(&str, u32, &str)]) -> Scene {
    let scene = Scene::with(config).await;
    for (name, vmid, tags) in guests {
        scene.write(
            &format!("vm/lab/{name}.yaml"),
            &guest(name, *vmid, tags, ""),
        );
    }
    let first = scene
        .apply_with(
            Holds::default(),
            |o| o.limits.write_concurrency = 8,
            Arc::new(Silent),
        )
        .await;
    assert!(first.converged, "{:?}", first.outcomes);
    for (name, vmid, tags) in guests {
        scene.write(
            &format!("vm/lab/{name}.yaml"),
            &guest(name, *vmid, tags, "  hardware: {machine: q35}\n"),
        );
    }
    scene
}

/// The cluster's budgets from a `proxops.yaml` text; membership problems fail the scenario.
fn budgets(scene: &Scene, settings: &str) -> Arc<Rollout> {
    let settings = proxops_core::settings::parse_text("proxops.yaml", settings).expect("valid");
    let (rollout, diags) =
        Rollout::resolve(&settings.budgets, CLUSTER, &scene.objects(), "proxops.yaml");
    assert!(diags.is_empty(), "{diags:?}");
    Arc::new(rollout)
}

/// Apply with the budgets, as `ClusterRun::apply` does (the first plan with their hold-back).
async fn apply_in(scene: &Scene, rollout: &Arc<Rollout>, write_concurrency: usize) -> ApplyReport {
    apply_with_cancel(scene, rollout, write_concurrency, None, Arc::new(Silent)).await
}

/// [`apply_in`] with a cancel signal and a reporter.
async fn apply_with_cancel(
    scene: &Scene,
    rollout: &Arc<Rollout>,
    write_concurrency: usize,
    cancel: Option<tokio::sync::watch::Receiver<bool>>,
    reporter: Arc<dyn Reporter>,
) -> ApplyReport {
    let objects = scene.objects();
    let mut first = scene.plan(&objects, Holds::default()).await;
    rollout.add_reboots(&mut first, &scene.kinds);
    rollout.hold_back(&mut first, &[]);
    first.rollout = rollout.waves(&first);
    let options = ApplyOptions {
        gate: None,
        limits: Limits {
            write_concurrency,
            task_timeout: Duration::from_secs(30),
        },
        secrets: None,
        read_concurrency: Some(4),
        max_passes: 4,
        memory: scene.memory.clone(),
        cancel,
        rollout: Some(rollout.clone()),
    };
    proxops_reconcile::apply(
        &scene.kinds,
        &scene.client,
        &objects,
        first,
        options,
        reporter,
    )
    .await
    .expect("the apply runs")
}

/// The vmid a `/nodes/{node}/qemu/{vmid}/…` path names.
fn vmid_of(path: &str) -> Option<u32> {
    path.split('/').nth(4)?.parse().ok()
}

fn is_stop(r: &RequestRecord) -> bool {
    r.method == "POST" && (r.path.ends_with("/status/shutdown") || r.path.ends_with("/status/stop"))
}

fn is_start(r: &RequestRecord) -> bool {
    r.method == "POST" && r.path.ends_with("/status/start")
}

/// The most guests of `members` down at once in `log` (from a stop to its start), and the
/// vmids in the order they were stopped.
fn down_at_once(log: &[RequestRecord], members: &[u32]) -> (usize, Vec<u32>) {
    let mut down = Vec::new();
    let mut most = 0;
    let mut order = Vec::new();
    for r in log {
        let Some(vmid) = vmid_of(&r.path).filter(|v| members.contains(v)) else {
            continue;
        };
        if is_stop(r) {
            down.push(vmid);
            order.push(vmid);
            most = most.max(down.len());
        } else if is_start(r) {
            down.retain(|v| *v != vmid);
        }
    }
    (most, order)
}

/// Six VMs in a budget with `max-unavailable: 1` and a change that needs a stop, gated on the
/// guest agent: no two are ever down at once, they go in the declared order, and each next
/// shutdown comes after the previous guest's agent answered. A VM in no budget is changed in
/// the same apply, without a gate (no agent request for it).
#[tokio::test(flavor = "multi_thread")]
async fn a_budget_of_one_stops_one_guest_at_a_time_and_waits_for_its_agent() {
    let mut guests: Vec<(String, u32)> = (1..=6).map(|i| (format!("db-{i}"), 200 + i)).collect();
    guests.reverse(); // declared order: db-6 first, so name order is not what is checked
    let mut all: Vec<(&str, u32, &str)> =
        guests.iter().map(|(n, v)| (n.as_str(), *v, "db")).collect();
    all.push(("other", 300, "web"));
    let scene = applied_then_q35(
        proxops_sim::SimConfig {
            agent_boot: Duration::from_millis(1000),
            ..proxops_sim::SimConfig::default()
        },
        &all,
    )
    .await;
    let members: Vec<&str> = guests.iter().map(|(n, _)| n.as_str()).collect();
    let rollout = budgets(
        &scene,
        &format!(
            "budgets:\n  - name: db\n    select: {{members: [{}]}}\n    max-unavailable: 1\n    health: {{agent: true, timeout: 30s}}\n",
            members.join(", ")
        ),
    );
    scene.sim.clear_requests();
    let report = apply_in(&scene, &rollout, 8).await;
    assert!(report.converged, "{:?}", report.outcomes);
    assert!(report.clean(), "{:?}", report.halted);
    let log = scene.sim.requests();
    let vmids: Vec<u32> = guests.iter().map(|(_, v)| *v).collect();
    let (most, order) = down_at_once(&log, &vmids);
    assert_eq!(most, 1, "never two members down at once");
    assert_eq!(order, vmids, "stopped in the declared order");
    // Each next shutdown comes after the previous guest's agent answered 200.
    for pair in vmids.windows(2) {
        let (before, next) = (pair[0], pair[1]);
        let shutdown = log
            .iter()
            .position(|r| is_stop(r) && vmid_of(&r.path) == Some(next))
            .expect("the next guest was stopped");
        let answered = log[..shutdown]
            .iter()
            .any(|r| r.path == format!("/nodes/pve01/qemu/{before}/agent/ping") && r.status == 200);
        assert!(
            answered,
            "VM {next} was stopped before VM {before}'s agent answered"
        );
    }
    // The agent was asked until it answered: the boot took a second.
    let refused = log
        .iter()
        .filter(|r| r.path.ends_with("/agent/ping") && r.status != 200)
        .count();
    assert!(refused > 0, "the gate waited for a booting agent");
    for (_, vmid) in &guests {
        assert_eq!(scene.vm_key(*vmid, "machine").as_deref(), Some("q35"));
    }
    // The guest in no budget: changed, never asked for its agent.
    assert_eq!(scene.vm_key(300, "machine").as_deref(), Some("q35"));
    assert!(
        !log.iter()
            .any(|r| r.path == "/nodes/pve01/qemu/300/agent/ping"),
        "no gate for a guest in no budget"
    );
}

/// An agent that never answers halts its budget: the first member is changed and left
/// running, the later ones are not touched, another budget (gated on running only) completes,
/// and the run needs a human (exit 3), not a failure.
#[tokio::test(flavor = "multi_thread")]
async fn an_unhealthy_guest_halts_its_budget_and_others_go_on() {
    let scene = applied_then_q35(
        proxops_sim::SimConfig::default(),
        &[
            ("db-1", 201, "db"),
            ("db-2", 202, "db"),
            ("db-3", 203, "db"),
            ("web-1", 211, "web"),
            ("web-2", 212, "web"),
        ],
    )
    .await;
    let rollout = budgets(
        &scene,
        "budgets:\n  - name: db\n    select: {tags: [db]}\n    max-unavailable: 1\n    health: {agent: true, timeout: 2s}\n  - name: web\n    select: {names: [\"web-*\"]}\n    max-unavailable: 1\n",
    );
    scene.sim.set_faults(vec![fault(
        "POST",
        "/nodes/{node}/qemu/{vmid}/agent/ping",
        FaultKind::Status {
            code: 500,
            message: "QEMU guest agent is not running".into(),
        },
        None,
    )]);
    scene.sim.clear_requests();
    let report = apply_in(&scene, &rollout, 8).await;
    let log = scene.sim.requests();
    // db-1 was changed and is up; db-2 and db-3 were not touched.
    assert_eq!(scene.vm_key(201, "machine").as_deref(), Some("q35"));
    assert_eq!(scene.sim.vm_status(201).as_deref(), Some("running"));
    for untouched in [202, 203] {
        assert!(
            !log.iter()
                .any(|r| r.is_mutating() && vmid_of(&r.path) == Some(untouched)),
            "VM {untouched} was touched: {:?}",
            scene.writes()
        );
        assert_ne!(scene.vm_key(untouched, "machine").as_deref(), Some("q35"));
    }
    // The other budget completed.
    for vmid in [211, 212] {
        assert_eq!(scene.vm_key(vmid, "machine").as_deref(), Some("q35"));
    }
    let [halt] = report.halted.as_slice() else {
        panic!("one budget halted: {:?}", report.halted);
    };
    assert_eq!(
        (
            halt.budget.as_str(),
            halt.guest.as_str(),
            halt.check.as_str()
        ),
        ("db", "db-1", "guest agent")
    );
    assert!(
        halt.detail.contains("QEMU guest agent is not running"),
        "{halt}"
    );
    // Not a failure: converged, nothing failed, the held members are anomalies.
    assert!(report.converged, "{:?}", report.outcomes);
    assert!(report.failures().next().is_none(), "{:?}", report.outcomes);
    // What `watch --apply` exports: per budget, members done and left, and the halt.
    let progress: Vec<(String, usize, usize, bool)> = report
        .rollout_progress()
        .into_iter()
        .map(|p| (p.budget, p.done, p.left, p.halted))
        .collect();
    assert_eq!(
        progress,
        [("db".into(), 1, 2, true), ("web".into(), 2, 0, false)]
    );
    let held = report
        .last
        .objects
        .iter()
        .filter(|o| {
            o.proposal
                .anomalies
                .iter()
                .any(|a| a.message.contains("budget db halted"))
        })
        .count();
    assert_eq!(held, 2, "{:?}", report.last.objects);
    assert_eq!(
        Outcome::of(&report.initial, &PolicyReport::default(), Some(&report)),
        Outcome::NeedsHuman
    );
}

/// A percentage budget over 10 guests: 30 % is 3 at once, never more, all changed.
#[tokio::test(flavor = "multi_thread")]
async fn a_percentage_budget_over_ten_guests() {
    let names: Vec<String> = (0..10).map(|i| format!("app-{i:02}")).collect();
    let guests: Vec<(&str, u32, &str)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), 400 + i as u32, "app"))
        .collect();
    let scene = applied_then_q35(proxops_sim::SimConfig::default(), &guests).await;
    let rollout = budgets(
        &scene,
        "budgets:\n  - {name: app, select: {tags: [app]}, max-unavailable: \"30%\", order: name}\n",
    );
    assert_eq!(rollout.budgets[0].places, 3);
    scene.sim.clear_requests();
    let report = apply_in(&scene, &rollout, 10).await;
    assert!(report.clean(), "{:?} {:?}", report.outcomes, report.halted);
    let vmids: Vec<u32> = (400..410).collect();
    let (most, order) = down_at_once(&scene.sim.requests(), &vmids);
    // Never more than the budget's places; the places are used (not one at a time).
    assert!((2..=3).contains(&most), "{most} down at once");
    assert_eq!(order.len(), 10, "each guest stopped once: {order:?}");
    for vmid in vmids {
        assert_eq!(scene.vm_key(vmid, "machine").as_deref(), Some("q35"));
    }
}

/// `max-unavailable: 0` with a change that needs a stop: nothing is stopped, the plan shows
/// the change blocked by its budget, the run needs a human.
#[tokio::test(flavor = "multi_thread")]
async fn a_budget_with_no_place_blocks_a_stop() {
    let scene = applied_then_q35(proxops_sim::SimConfig::default(), &[("db-1", 201, "db")]).await;
    let rollout = budgets(
        &scene,
        "budgets:\n  - {name: frozen, select: {members: [db-1]}, max-unavailable: 0}\n",
    );
    scene.sim.clear_requests();
    let report = apply_in(&scene, &rollout, 2).await;
    assert!(scene.writes().is_empty(), "{:?}", scene.writes());
    let blocked = report
        .initial
        .objects
        .iter()
        .flat_map(|o| &o.proposal.anomalies)
        .any(|a| {
            a.message
                .contains("blocked by its disruption budget frozen")
        });
    assert!(blocked, "{:?}", report.initial.objects);
    assert_eq!(
        Outcome::of(&report.initial, &PolicyReport::default(), Some(&report)),
        Outcome::NeedsHuman
    );
}

/// Membership is checked per cluster: a guest in two budgets (on its manifest, naming both)
/// and a listed member no manifest declares (on proxops.yaml) are validation errors.
#[tokio::test(flavor = "multi_thread")]
async fn membership_errors_name_the_file_and_the_budgets() {
    let scene = Scene::start().await;
    scene.write("vm/lab/db-1.yaml", &guest("db-1", 201, "db", ""));
    scene.write("vm/lab/db-2.yaml", &guest("db-2", 202, "db", ""));
    let settings = proxops_core::settings::parse_text(
        "proxops.yaml",
        "budgets:\n  - {name: a, select: {tags: [db]}, max-unavailable: 1}\n  - {name: b, select: {members: [db-2, db-9]}, max-unavailable: 1}\n  - {name: elsewhere, clusters: [prod], select: {members: [db-1]}, max-unavailable: 1}\n",
    )
    .expect("valid");
    let (rollout, diags) =
        Rollout::resolve(&settings.budgets, CLUSTER, &scene.objects(), "proxops.yaml");
    let got: Vec<(String, String)> = diags
        .iter()
        .map(|d| (d.file.clone(), d.path.clone()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "proxops.yaml".to_string(),
                "budgets[1].select.members[1]".to_string()
            ),
            ("vm/lab/db-2.yaml".to_string(), "metadata.name".to_string()),
        ]
    );
    assert!(diags[1].message.contains("a and b"), "{}", diags[1].message);
    // The budget of another cluster does not apply here.
    assert_eq!(rollout.budgets.len(), 2);
}

/// Rolling reboots for changes PVE keeps pending (memory on a running VM without memory
/// hotplug): without `reboot-pending` they stay pending and nothing is stopped; a budget with
/// `reboot-pending: true` reboots its members one at a time, each next shutdown only after
/// the previous guest's agent answered, and leaves a guest in no budget pending; the
/// operator's `--reboot-pending` reboots that one too. Pending is gone afterwards.
#[tokio::test(flavor = "multi_thread")]
async fn reboot_pending_applies_pending_changes_one_member_at_a_time() {
    let scene = Scene::with(proxops_sim::SimConfig {
        agent_boot: Duration::from_millis(1000),
        ..proxops_sim::SimConfig::default()
    })
    .await;
    let guests: Vec<(String, u32, &str)> = (1..=4)
        .map(|i| (format!("db-{i}"), 500 + i, "db"))
        .chain([("other".to_string(), 510, "web")])
        .collect();
    let write = |memory: &str| {
        for (name, vmid, tags) in &guests {
            scene.write(
                &format!("vm/lab/{name}.yaml"),
                &guest(name, *vmid, tags, "").replace("memory: 1GiB", memory),
            );
        }
    };
    write("memory: 1GiB");
    let first = scene
        .apply_with(
            Holds::default(),
            |o| o.limits.write_concurrency = 8,
            Arc::new(Silent),
        )
        .await;
    assert!(first.converged, "{:?}", first.outcomes);
    write("memory: 2GiB");
    let members: Vec<u32> = (501..=504).collect();
    let pending = |report: &ApplyReport| report.last.counts().pending;
    let stops = |scene: &Scene| {
        scene
            .sim
            .requests()
            .iter()
            .filter(|r| is_stop(r))
            .filter_map(|r| vmid_of(&r.path))
            .collect::<Vec<u32>>()
    };

    // No reboot asked for: the memory is written, PVE keeps it pending, nothing is stopped.
    let plain = budgets(
        &scene,
        "budgets:\n  - {name: db, select: {tags: [db]}, max-unavailable: 1, health: {agent: true, timeout: 30s}}\n",
    );
    scene.sim.clear_requests();
    let report = apply_in(&scene, &plain, 8).await;
    assert!(report.converged, "{:?}", report.outcomes);
    assert_eq!(pending(&report), 5, "{:?}", report.last.objects);
    assert_eq!(stops(&scene), Vec::<u32>::new());
    assert_eq!(scene.vm_key(501, "memory").as_deref(), Some("1024"));

    // The budget reboots its members, one at a time, through the agent gate.
    let rolling = budgets(
        &scene,
        "budgets:\n  - {name: db, select: {tags: [db]}, max-unavailable: 1, reboot-pending: true, health: {agent: true, timeout: 30s}}\n",
    );
    scene.sim.clear_requests();
    let report = apply_in(&scene, &rolling, 8).await;
    assert!(report.converged, "{:?}", report.outcomes);
    assert!(report.halted.is_empty(), "{:?}", report.halted);
    let log = scene.sim.requests();
    let (most, order) = down_at_once(&log, &members);
    assert_eq!(most, 1, "never two members down at once");
    assert_eq!(order, members, "rebooted in name order, each once");
    for pair in members.windows(2) {
        let shutdown = log
            .iter()
            .position(|r| is_stop(r) && vmid_of(&r.path) == Some(pair[1]))
            .expect("the next member was rebooted");
        assert!(
            log[..shutdown].iter().any(|r| r.path
                == format!("/nodes/pve01/qemu/{}/agent/ping", pair[0])
                && r.status == 200),
            "VM {} was shut down before VM {}'s agent answered",
            pair[1],
            pair[0]
        );
    }
    for vmid in &members {
        assert_eq!(scene.vm_key(*vmid, "memory").as_deref(), Some("2048"));
        assert_eq!(scene.sim.vm_status(*vmid).as_deref(), Some("running"));
    }
    // The guest in no budget: still pending, never stopped.
    assert_eq!(pending(&report), 1, "{:?}", report.last.objects);
    assert!(!order.contains(&510));
    assert_eq!(scene.vm_key(510, "memory").as_deref(), Some("1024"));

    // `--reboot-pending`: the guest in no budget too; nothing is left pending.
    let everyone = Arc::new((*plain).clone().with_reboot_pending(true));
    scene.sim.clear_requests();
    let report = apply_in(&scene, &everyone, 8).await;
    assert!(
        report.clean(),
        "{:?} {:?}",
        report.outcomes,
        report.last.objects
    );
    assert_eq!(stops(&scene), vec![510]);
    assert_eq!(scene.vm_key(510, "memory").as_deref(), Some("2048"));
    assert_eq!(scene.sim.vm_status(510).as_deref(), Some("running"));
}

/// A manifest may name its budget (`metadata.budget`): it joins a budget with no selector,
/// and one whose selector already has it; naming a budget it is also selected into by
/// another, or one that does not exist (or applies to other clusters), is an error on
/// `metadata.budget` of its file.
#[tokio::test(flavor = "multi_thread")]
async fn a_manifest_names_its_budget() {
    let scene = Scene::start().await;
    let named = |name: &str, vmid: u32, tags: &str, budget: &str| {
        guest(name, vmid, tags, "").replace(
            &format!("metadata: {{name: {name}}}"),
            &format!("metadata: {{name: {name}, budget: {budget}}}"),
        )
    };
    scene.write("vm/lab/db-1.yaml", &named("db-1", 201, "db", "db"));
    scene.write("vm/lab/db-2.yaml", &guest("db-2", 202, "db", ""));
    scene.write("vm/lab/cache-1.yaml", &named("cache-1", 211, "x", "cache"));
    scene.write("vm/lab/cache-2.yaml", &named("cache-2", 212, "db", "cache"));
    scene.write("vm/lab/odd.yaml", &named("odd", 221, "x", "nope"));
    scene.write("vm/lab/far.yaml", &named("far", 222, "x", "prod-only"));
    let objects = scene.objects();
    assert_eq!(
        objects
            .iter()
            .find(|o| o.id.name == "db-1")
            .and_then(|o| o.budget.as_deref()),
        Some("db"),
        "metadata.budget is the host's, kept off the kind's schema"
    );
    let settings = proxops_core::settings::parse_text(
        "proxops.yaml",
        "budgets:\n  - {name: db, select: {tags: [db]}, max-unavailable: 1}\n  - {name: cache, max-unavailable: 1}\n  - {name: prod-only, clusters: [prod], max-unavailable: 1}\n",
    )
    .expect("valid");
    let (rollout, diags) = Rollout::resolve(&settings.budgets, CLUSTER, &objects, "proxops.yaml");
    let got: Vec<(&str, &str)> = diags
        .iter()
        .map(|d| (d.file.as_str(), d.path.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("vm/lab/far.yaml", "metadata.budget"),
            ("vm/lab/odd.yaml", "metadata.budget"),
            ("vm/lab/cache-2.yaml", "metadata.budget"),
        ],
        "{diags:?}"
    );
    assert!(
        diags[0].message.contains("does not apply to cluster"),
        "{}",
        diags[0].message
    );
    assert!(
        diags[1].message.contains("no budget `nope`"),
        "{}",
        diags[1].message
    );
    assert!(
        diags[2].message.contains("db and cache"),
        "{}",
        diags[2].message
    );
    let members = |b: usize| -> Vec<&str> {
        rollout.budgets[b]
            .members
            .iter()
            .map(|m| m.name.as_str())
            .collect()
    };
    assert_eq!(members(0), ["cache-2", "db-1", "db-2"]);
    assert_eq!(members(1), ["cache-1"]);
}

/// Cancels the run when the first action starts, as SIGINT would.
struct CancelOnFirstAction(tokio::sync::watch::Sender<bool>);

impl Reporter for CancelOnFirstAction {
    fn event(&self, event: Event) {
        if matches!(event, Event::ActionStarted { .. }) {
            self.0.send_replace(true);
        }
    }
}

/// A signal mid-rollout: the member in flight finishes its restart (changed, running), no
/// later member is disturbed, nothing halts; a second run resumes from the live state alone
/// (no state file) and completes the budget, one at a time, without touching the first
/// member again.
#[tokio::test(flavor = "multi_thread")]
async fn a_signal_mid_rollout_finishes_the_member_in_flight_and_a_second_run_completes_it() {
    let guests: Vec<(String, u32)> = (1..=4).map(|i| (format!("db-{i}"), 600 + i)).collect();
    let all: Vec<(&str, u32, &str)> = guests.iter().map(|(n, v)| (n.as_str(), *v, "db")).collect();
    let scene = applied_then_q35(
        proxops_sim::SimConfig {
            agent_boot: Duration::from_millis(500),
            ..proxops_sim::SimConfig::default()
        },
        &all,
    )
    .await;
    let rollout = budgets(
        &scene,
        "budgets:\n  - {name: db, select: {tags: [db]}, max-unavailable: 1, health: {agent: true, timeout: 30s}}\n",
    );
    let vmids: Vec<u32> = guests.iter().map(|(_, v)| *v).collect();
    scene.sim.clear_requests();
    let (tx, rx) = tokio::sync::watch::channel(false);
    let report = apply_with_cancel(
        &scene,
        &rollout,
        8,
        Some(rx),
        Arc::new(CancelOnFirstAction(tx)),
    )
    .await;
    assert!(!report.converged, "interrupted: {:?}", report.outcomes);
    assert!(
        report.halted.is_empty(),
        "a signal is no halt: {:?}",
        report.halted
    );
    let [progress] = report.rollout_progress().try_into().expect("one budget");
    assert_eq!(
        (progress.done, progress.left, progress.halted),
        (1, 3, false)
    );
    // The member in flight finished: changed and running again.
    assert_eq!(scene.vm_key(601, "machine").as_deref(), Some("q35"));
    assert_eq!(scene.sim.vm_status(601).as_deref(), Some("running"));
    let log = scene.sim.requests();
    for later in [602, 603, 604] {
        assert!(
            !log.iter()
                .any(|r| r.is_mutating() && vmid_of(&r.path) == Some(later)),
            "VM {later} was disturbed after the signal: {:?}",
            scene.writes()
        );
        assert_ne!(scene.vm_key(later, "machine").as_deref(), Some("q35"));
    }

    // The second run: from what PVE says, the rest, one at a time, the first left alone.
    scene.sim.clear_requests();
    let report = apply_in(&scene, &rollout, 8).await;
    assert!(report.clean(), "{:?} {:?}", report.outcomes, report.halted);
    let log = scene.sim.requests();
    let (most, order) = down_at_once(&log, &vmids);
    assert_eq!(most, 1);
    assert_eq!(order, [602, 603, 604]);
    for vmid in vmids {
        assert_eq!(scene.vm_key(vmid, "machine").as_deref(), Some("q35"));
        assert_eq!(scene.sim.vm_status(vmid).as_deref(), Some("running"));
    }
}

/// The optional TCP gate, against a loopback listener: while it listens, the budget rolls
/// through; once it is closed, the first member's gate runs out on `tcp port` and the later
/// members are not touched.
#[tokio::test(flavor = "multi_thread")]
async fn a_tcp_gate_waits_for_the_port_and_halts_when_it_stays_closed() {
    let all = [
        ("db-1", 231, "db"),
        ("db-2", 232, "db"),
        ("db-3", 233, "db"),
    ];
    let scene = applied_then_q35(proxops_sim::SimConfig::default(), &all).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let port = listener.local_addr().expect("bound").port();
    let rollout = budgets(
        &scene,
        &format!(
            "budgets:\n  - {{name: db, select: {{tags: [db]}}, max-unavailable: 1, health: {{tcp: {{port: {port}, address: 127.0.0.1}}, timeout: 2s}}}}\n"
        ),
    );
    assert_eq!(
        rollout.waves(&scene.plan(&scene.objects(), Holds::default()).await)[0].gate,
        format!("running, TCP 127.0.0.1:{port}; at most 2s")
    );
    let report = apply_in(&scene, &rollout, 8).await;
    assert!(report.clean(), "{:?} {:?}", report.outcomes, report.halted);
    for (_, vmid, _) in all {
        assert_eq!(scene.vm_key(vmid, "machine").as_deref(), Some("q35"));
    }

    // The port closes: the first member's gate halts the budget.
    drop(listener);
    for (name, vmid, tags) in all {
        scene.write(
            &format!("vm/lab/{name}.yaml"),
            &guest(name, vmid, tags, "  hardware: {machine: i440fx}\n"),
        );
    }
    scene.sim.clear_requests();
    let report = apply_in(&scene, &rollout, 8).await;
    let [halt] = report.halted.as_slice() else {
        panic!("the budget halted: {:?}", report.halted);
    };
    assert_eq!(
        (halt.guest.as_str(), halt.check.as_str()),
        ("db-1", "tcp port")
    );
    assert!(halt.detail.contains(&format!("127.0.0.1:{port}")), "{halt}");
    let log = scene.sim.requests();
    for untouched in [232, 233] {
        assert!(
            !log.iter()
                .any(|r| r.is_mutating() && vmid_of(&r.path) == Some(untouched)),
            "VM {untouched} was touched"
        );
    }
    assert_eq!(scene.sim.vm_status(231).as_deref(), Some("running"));
}
