//! Runs: signals, write permits, work a killed run left in flight, the apply lock, and clusters
//! and their validation kept apart.

use super::*;

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
        rollout: Default::default(),
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
